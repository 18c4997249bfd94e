// rl/grpo.c: the GRPO objective (rl/grpo.h): the step's rollouts and
// advantages (begin_step; split across train ranks and exchanged), the loss
// on micro-batches of rollouts (train_batch), validation, metrics and the
// resumable task order.
#include "rl/grpo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/rng.h"
#include "core/text.h"
#include "train/loop.h"

void grpo_config_default(GrpoConfig *c) {
  memset(c, 0, sizeof *c);
  c->tasks_per_step = 16;
  c->group_size = 4;
  c->reward = GRPO_REWARD_STRICT;
  c->scale_by_std = 1;
  c->adv_eps = 1e-4;
  c->pass_threshold = 1.0;
  c->updates_per_batch = 1;
  c->max_draws = 1;
  grpo_loss_config_default(&c->loss);
  rollout_config_default(&c->rollout);
  c->val_greedy = 1;
  c->seed = 42;
}

int grpo_reward_kind_parse(const char *name, GrpoRewardKind *out, FimiError *err) {
  if (name && !strcmp(name, "strict")) *out = GRPO_REWARD_STRICT;
  else if (name && !strcmp(name, "set")) *out = GRPO_REWARD_SET;
  else return fimi_fail(err, "grpo.reward: unknown value '%s' (expected strict or set)", name ? name : "");
  return 0;
}

int grpo_config_validate(const GrpoConfig *c, FimiError *err) {
  if (c->tasks_per_step < 1 || c->tasks_per_step > 65536)
    return fimi_fail(err, "grpo.tasks_per_step must be in [1, 65536] (got %d)", c->tasks_per_step);
  if (c->group_size < 2 || c->group_size > 1024)
    return fimi_fail(err, "grpo.group_size must be in [2, 1024] (got %d): advantages compare rollouts", c->group_size);
  if (!(c->adv_eps >= 0) || !isfinite(c->adv_eps)) return fimi_fail(err, "grpo.adv_eps must be finite and >= 0");
  if (!isfinite(c->pass_threshold)) return fimi_fail(err, "grpo.pass_threshold must be finite");
  if (c->updates_per_batch < 1 || c->updates_per_batch > 64)
    return fimi_fail(err, "grpo.updates_per_batch must be in [1, 64] (got %d)", c->updates_per_batch);
  if (c->max_draws < 1 || c->max_draws > 64)
    return fimi_fail(err, "grpo.max_draws must be in [1, 64] (got %d; 1: no dynamic sampling)", c->max_draws);
  if (c->val_tasks < 0) return fimi_fail(err, "grpo.val_tasks must be >= 0");
  if (c->log_rollouts < 0) return fimi_fail(err, "grpo.log_rollouts must be >= 0 (0: never)");
  if (grpo_loss_config_validate(&c->loss, err) != 0) return -1;
  return rollout_config_validate(&c->rollout, err);
}

static double reward_of(const GrpoConfig *c, const Rollout *r) {
  if (r->end == ROLLOUT_END_FAILED) return 0.0;
  return c->reward == GRPO_REWARD_STRICT ? r->reward.strict_total : r->reward.total;
}

static void free_rollouts(Rollout *r, int n) {
  for (int i = 0; r && i < n; i++) rollout_free(&r[i]);
}

// ---- statistics -------------------------------------------------------------------------

static void add_rollout_stats(GrpoStepStats *st, const Rollout *r, double reward) {
  st->rollouts++;
  st->failed += r->end == ROLLOUT_END_FAILED;
  st->ends[r->end]++;
  st->reward_mean += reward;
  st->seq += r->reward.seq;
  st->seq_frac += r->reward.seq_frac;
  st->db += r->reward.db;
  st->comm += r->reward.comm;
  st->judge += r->reward.judge;
  st->total += r->reward.total;
  st->strict_total += r->reward.strict_total;
  st->gen_tokens += r->sampled;
  st->turns += r->turns;
  st->tool_calls += r->tool_calls;
  st->tool_errors += r->tool_errors;
  st->malformed += r->malformed;
}

// Sums into means; reward_std from the rewards.
static void finish_stats(GrpoStepStats *st, const double *rewards) {
  int n = st->rollouts;
  if (n == 0) return;
  double *fields[] = {&st->reward_mean, &st->seq, &st->seq_frac, &st->db, &st->comm, &st->judge, &st->total,
                      &st->strict_total, &st->gen_tokens, &st->turns, &st->tool_calls, &st->tool_errors,
                      &st->malformed};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) *fields[i] /= n;
  double var = 0;
  for (int i = 0; i < n; i++) var += (rewards[i] - st->reward_mean) * (rewards[i] - st->reward_mean);
  st->reward_std = sqrt(var / n);
}

// ---- splitting a call's rollouts across train ranks ---------------------------------------

void grpo_rollout_share(int n, int group, int rank, int world, int *first, int *count) {
  int unit = group >= 1 && world >= 1 && n / group >= world ? group : 1;
  int64_t units = (n + unit - 1) / unit;
  int64_t u0 = units * rank / world, u1 = units * (rank + 1) / world;
  int64_t a = u0 * unit, b = u1 * unit < n ? u1 * unit : n;
  *first = (int)a;
  *count = (int)(b - a);
}

#define SHARE_MAGIC 0x47525853u  // "GRXS"

// What a rank's piece of the exchange starts with.
typedef struct ShareHeader {
  uint32_t magic;
  int32_t ok, first, count;
  GrpoRankWork work;
} ShareHeader;

// This rank's piece: the header, then its rollouts packed (none when !ok).
static uint8_t *pack_share(const Rollout *out, int first, int count, int ok, const GrpoRankWork *mine, size_t *bytes,
                           FimiError *err) {
  ShareHeader h = {SHARE_MAGIC, ok != 0, first, ok ? count : 0, *mine};
  size_t size = sizeof h;
  for (int j = 0; j < h.count; j++) size += rollout_packed_size(&out[first + j]);
  uint8_t *buf = fimi_malloc(size, err);
  if (!buf) return NULL;
  memcpy(buf, &h, sizeof h);
  size_t at = sizeof h;
  for (int j = 0; j < h.count; j++) {
    rollout_pack(&out[first + j], buf + at);
    at += rollout_packed_size(&out[first + j]);
  }
  *bytes = size;
  return buf;
}

// Rank q's piece into out (its rollouts) and *work; checks that q played
// the share this rank expects of it.
static int unpack_share(const uint8_t *piece, size_t size, int q, int expect_first, int expect_count, int own,
                        Rollout *out, GrpoRankWork *work, FimiError *err) {
  ShareHeader h;
  if (size < sizeof h) return fimi_fail(err, "train rank %d sent %zu bytes of rollouts", q, size);
  memcpy(&h, piece, sizeof h);
  if (h.magic != SHARE_MAGIC) return fimi_fail(err, "train rank %d sent a malformed rollout exchange", q);
  if (!h.ok) return fimi_fail(err, "train rank %d failed its rollouts (its message is in its log)", q);
  if (h.first != expect_first || h.count != expect_count)
    return fimi_fail(err, "train rank %d played rollouts %d..%d, expected %d..%d (do the ranks share one config?)", q,
                     h.first, h.first + h.count - 1, expect_first, expect_first + expect_count - 1);
  *work = h.work;
  size_t at = sizeof h;
  for (int j = 0; !own && j < h.count; j++) {
    Rollout *r = &out[h.first + j];
    size_t used = 0;
    rollout_free(r);
    if (rollout_unpack(piece + at, size - at, r, &used, err) != 0)
      return fimi_fail_wrap(err, "rollout %d from train rank %d", h.first + j, q);
    at += used;
  }
  if (!own && at != size) return fimi_fail(err, "train rank %d sent %zu bytes after its rollouts", q, size - at);
  return 0;
}

int grpo_rollouts_all_gather(Communicator *comm, Rollout *out, int n, int group, int ok, const GrpoRankWork *mine,
                             GrpoRankWork *all, FimiError *err) {
  int first = 0, count = 0, world = comm->world;
  grpo_rollout_share(n, group, comm->rank, world, &first, &count);
  size_t bytes = 0, *counts = fimi_malloc((size_t)world * sizeof *counts, err);
  uint8_t *piece = counts ? pack_share(out, first, count, ok, mine, &bytes, err) : NULL;
  void *gathered = NULL;
  // A rank that failed still takes part, so the others learn it instead of
  // waiting for it.
  int rc = piece ? comm_all_gather_bytes(comm, piece, bytes, counts, &gathered, err) : -1;
  size_t at = 0;
  for (int q = 0; rc == 0 && q < world; at += counts[q], q++) {
    int qf = 0, qc = 0;
    grpo_rollout_share(n, group, q, world, &qf, &qc);
    rc = unpack_share((const uint8_t *)gathered + at, counts[q], q, qf, qc, q == comm->rank, out, &all[q], err);
  }
  free(gathered);
  free(piece);
  free(counts);
  return rc == 0 ? 0 : fimi_fail_wrap(err, "rollout exchange between %d train ranks", world);
}

// ---- rollouts ---------------------------------------------------------------------------

// Plays this rank's share of jobs (all of them without a split) with the
// current weights into out, then exchanges the rest: out[0..n) and
// rewards[i] of rollout i on every rank; work[r] what train rank r played.
static int play(GrpoObjective *g, TrainState *s, EnvClient *env, const RolloutConfig *rc, const RolloutJob *jobs,
                int n, int group, uint64_t seed, Rollout *out, double *rewards, GrpoStepStats *st,
                GrpoRankWork *work, FimiError *err) {
  int split = g->comm && g->comm->world > 1;
  int rank = split ? g->comm->rank : 0, world = split ? g->comm->world : 1, first = 0, count = 0;
  grpo_rollout_share(n, group, rank, world, &first, &count);
  double t0 = monotonic_seconds();
  RolloutTimes before = st->times;
  RolloutPolicy policy;
  int r = g->access.make_policy(g->access.ctx, s, rc->slots + (rc->share_prefix ? 1 : 0), rc->context, &policy, err);
  if (r != 0) {
    fimi_fail_wrap(err, "rollout policy");
  } else {
    r = rollout_run_part(rc, &policy, env, g->tok, jobs + first, count, first, seed, out + first, &st->times, err);
    g->access.free_policy(g->access.ctx, &policy);
  }
  GrpoRankWork mine = {count, st->times.prefill_tokens - before.prefill_tokens,
                       st->times.decode_tokens - before.decode_tokens};
  if (split) {
    double t1 = monotonic_seconds();
    FimiError ignored = {0};  // a failed rank keeps its own message
    if (grpo_rollouts_all_gather(g->comm, out, n, group, r == 0, &mine, work, r == 0 ? err : &ignored) != 0) r = -1;
    st->exchange_seconds += monotonic_seconds() - t1;
  } else {
    work[0] = mine;
  }
  st->rollout_seconds += monotonic_seconds() - t0;
  if (r != 0) return -1;
  for (int i = 0; i < n; i++) {
    rewards[i] = reward_of(&g->config, &out[i]);
    add_rollout_stats(st, &out[i], rewards[i]);
  }
  finish_stats(st, rewards);
  return 0;
}

// The next B task indices of the resumable order (across epochs).
static int next_tasks(GrpoObjective *g, int64_t *idx, int B, FimiError *err) {
  int have = 0;
  while (have < B) {
    int64_t count = 0;
    if (dataset_loader_next(&g->task_loader, B - have, idx + have, &count, NULL, err) != 0) return -1;
    have += (int)count;
  }
  return 0;
}

// ---- the rollout log --------------------------------------------------------------------

// One rollout as a JSON object: where it came from, its reward and
// advantage, and its tokens (ids, the loss mask, the sampling-time log-probs).
static cJSON *rollout_to_json(const GrpoObjective *g, const Rollout *r, int64_t step, int index, double reward,
                              double adv) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "step", (double)step);
  cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddStringToObject(o, "task_id", g->tasks->tasks[r->task].id);
  cJSON_AddNumberToObject(o, "group", r->group);
  char seed[24];
  snprintf(seed, sizeof seed, "%016llx", (unsigned long long)r->env_seed);
  cJSON_AddStringToObject(o, "env_seed", seed);
  cJSON_AddNumberToObject(o, "reward", reward);
  cJSON_AddNumberToObject(o, "advantage", adv);
  cJSON_AddItemToObject(o, "breakdown", reward_to_json(&r->reward));
  cJSON_AddStringToObject(o, "end", rollout_end_name(r->end));
  cJSON_AddNumberToObject(o, "turns", r->turns);
  cJSON_AddNumberToObject(o, "prompt_len", r->prompt_len);
  cJSON *ids = cJSON_AddArrayToObject(o, "ids"), *mask = cJSON_AddArrayToObject(o, "mask"),
        *logp = cJSON_AddArrayToObject(o, "logp");
  for (int t = 0; ids && mask && logp && t < r->len; t++) {
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->ids[t]));
    cJSON_AddItemToArray(mask, cJSON_CreateNumber(r->mask[t]));
    cJSON_AddItemToArray(logp, cJSON_CreateNumber(r->logp[t]));
  }
  return o;
}

// OUT/rollouts/step_NNNNNN.jsonl: the step's rollouts, one JSON object a
// line, written atomically by the first train rank.
static int log_rollouts(const GrpoObjective *g, int64_t step, const double *rewards, FimiError *err) {
  char dir[1024], name[32], path[1100];
  snprintf(name, sizeof name, "step_%06lld.jsonl", (long long)step);
  if (path_join(dir, sizeof dir, g->out_dir, "rollouts", err) != 0 || dir_create(dir, err) != 0 ||
      path_join(path, sizeof path, dir, name, err) != 0)
    return fimi_fail_wrap(err, "grpo.log_rollouts");
  int n = g->config.tasks_per_step * g->config.group_size;
  TextBuf text = {0};
  int rc = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    cJSON *o = rollout_to_json(g, &g->rollouts[i], step, i, rewards[i], g->adv[i]);
    char *line = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    rc = line ? text_append_str(&text, line, err) : fimi_fail(err, "out of memory");
    if (rc == 0) rc = text_append_str(&text, "\n", err);
    free(line);
  }
  if (rc == 0) rc = file_write_atomic(path, text.data ? text.data : "", text.len, err);
  text_free(&text);
  return rc == 0 ? 0 : fimi_fail_wrap(err, "grpo.log_rollouts");
}

// ---- dynamic sampling -------------------------------------------------------------------

// A group whose rollouts all scored alike has advantages of exactly 0.
static int group_has_signal(const double *adv, int G) {
  for (int i = 0; i < G; i++)
    if (adv[i] != 0.0) return 1;
  return 0;
}

static int count_signal_groups(const double *adv, int B, int G) {
  int n = 0;
  for (int b = 0; b < B; b++) n += group_has_signal(adv + (long)b * G, G);
  return n;
}

// The jobs of draw `draw` of a step: the next B tasks, G rollouts each,
// one simulator seed per group (draw 0's seeds are those of a step without
// dynamic sampling).
static int draw_jobs(GrpoObjective *g, int64_t step, int draw, int64_t *idx, RolloutJob *jobs, FimiError *err) {
  const GrpoConfig *c = &g->config;
  int B = c->tasks_per_step, G = c->group_size;
  if (next_tasks(g, idx, B, err) != 0) return -1;
  uint64_t base = rng_mix(c->seed, (uint64_t)step);
  if (draw > 0) base = rng_mix(base ^ 0xd2a3d2a3ULL, (uint64_t)draw);
  for (int b = 0; b < B; b++)
    for (int i = 0; i < G; i++) jobs[b * G + i] = (RolloutJob){(int)idx[b], b, rng_mix(base, (uint64_t)b)};
  return 0;
}

static uint64_t draw_stream_seed(const GrpoConfig *c, int64_t step, int draw) {
  uint64_t seed = rng_mix(c->seed ^ 0x5eedULL, (uint64_t)step);
  return draw > 0 ? rng_mix(seed ^ 0xd2a3d2a3ULL, (uint64_t)draw) : seed;
}

// Moves the signal groups of a further draw (x, x_rewards, x_adv) into the
// places of the batch's groups without signal; what is not moved is freed.
static void take_signal_groups(GrpoObjective *g, double *rewards, Rollout *x, const double *x_rewards,
                               const double *x_adv) {
  int B = g->config.tasks_per_step, G = g->config.group_size, z = 0;
  for (int e = 0; e < B; e++) {
    if (!group_has_signal(x_adv + (long)e * G, G)) continue;
    while (z < B && group_has_signal(g->adv + (long)z * G, G)) z++;
    if (z == B) break;
    for (int i = 0; i < G; i++) {
      int to = z * G + i, from = e * G + i;
      rollout_free(&g->rollouts[to]);
      g->rollouts[to] = x[from];
      memset(&x[from], 0, sizeof x[from]);
      rewards[to] = x_rewards[from];
      g->adv[to] = x_adv[from];
    }
  }
  free_rollouts(x, B * G);
}

// Draws up to max_draws - 1 further batches while the step's batch has
// groups without signal (dynamic sampling). Their rollouts' time counts in
// the step's; their statistics do not (the step reports its first draw).
static int fill_signal_groups(GrpoObjective *g, TrainState *s, int64_t step, double *rewards, FimiError *err) {
  const GrpoConfig *c = &g->config;
  int B = c->tasks_per_step, G = c->group_size, n = B * G;
  g->last.draws = 1;
  g->last.signal_groups = count_signal_groups(g->adv, B, G);
  if (c->max_draws <= 1 || g->last.signal_groups == B) return 0;
  int64_t *idx = fimi_malloc((size_t)B * sizeof *idx, err);
  RolloutJob *jobs = idx ? fimi_malloc((size_t)n * sizeof *jobs, err) : NULL;
  Rollout *x = jobs ? fimi_calloc((size_t)n, sizeof *x, err) : NULL;
  double *xr = x ? fimi_malloc((size_t)n * 2 * sizeof *xr, err) : NULL;
  GrpoRankWork *work = xr ? fimi_calloc((size_t)g->work_ranks, sizeof *work, err) : NULL;
  int rc = work ? 0 : -1;
  for (int d = 1; rc == 0 && d < c->max_draws && g->last.signal_groups < B; d++) {
    GrpoStepStats scratch = {0};
    rc = draw_jobs(g, step, d, idx, jobs, err);
    if (rc == 0)
      rc = play(g, s, g->env, &c->rollout, jobs, n, G, draw_stream_seed(c, step, d), x, xr, &scratch, work, err);
    if (rc == 0)
      rc = grpo_advantages(xr, B, G, c->scale_by_std, c->adv_eps, c->pass_threshold, xr + n, NULL, err);
    g->last.times.prefill += scratch.times.prefill;
    g->last.times.decode += scratch.times.decode;
    g->last.times.env += scratch.times.env;
    g->last.rollout_seconds += scratch.rollout_seconds;
    g->last.exchange_seconds += scratch.exchange_seconds;
    for (int r = 0; r < g->work_ranks; r++) {
      g->work[r].rollouts += work[r].rollouts;
      g->work[r].prefill_tokens += work[r].prefill_tokens;
      g->work[r].decode_tokens += work[r].decode_tokens;
    }
    if (rc == 0) take_signal_groups(g, rewards, x, xr, xr + n);
    g->last.draws = d + 1;
    g->last.signal_groups = count_signal_groups(g->adv, B, G);
  }
  free_rollouts(x, x ? n : 0);
  free(work);
  free(xr);
  free(x);
  free(jobs);
  free(idx);
  return rc;
}

static int begin_step(void *ctx, TrainState *s, int64_t step, FimiError *err) {
  GrpoObjective *g = ctx;
  const GrpoConfig *c = &g->config;
  int B = c->tasks_per_step, G = c->group_size, n = B * G;
  if ((step - 1) % c->updates_per_batch != 0 && g->batch_step >= 0) {
    // A reuse step: its loss sums start again, and it spent no time on rollouts.
    memset(&g->last.loss, 0, sizeof g->last.loss);
    memset(&g->last.times, 0, sizeof g->last.times);
    memset(g->work, 0, (size_t)g->work_ranks * sizeof *g->work);
    g->last.rollout_seconds = g->last.update_seconds = g->last.exchange_seconds = 0;
    return 0;
  }
  if ((step - 1) % c->updates_per_batch != 0)
    log_warn("resumed at step %lld, inside a batch of grpo.updates_per_batch = %d: the rollouts of step %lld are not "
             "in the checkpoint, so step %lld samples a fresh batch (an uninterrupted run reuses them)",
             (long long)step, c->updates_per_batch, (long long)(step - (step - 1) % c->updates_per_batch),
             (long long)step);
  free_rollouts(g->rollouts, n);
  memset(g->rollouts, 0, (size_t)n * sizeof *g->rollouts);
  memset(&g->last, 0, sizeof g->last);
  int64_t *idx = fimi_malloc((size_t)B * sizeof *idx, err);
  RolloutJob *jobs = idx ? fimi_malloc((size_t)n * sizeof *jobs, err) : NULL;
  double *rewards = jobs ? fimi_malloc((size_t)n * sizeof *rewards, err) : NULL;
  int rc = rewards ? draw_jobs(g, step, 0, idx, jobs, err) : -1;
  if (rc == 0) rc = play(g, s, g->env, &c->rollout, jobs, n, G, draw_stream_seed(c, step, 0), g->rollouts, rewards,
                         &g->last, g->work, err);
  if (rc == 0)
    rc = grpo_advantages(rewards, B, G, c->scale_by_std, c->adv_eps, c->pass_threshold, g->adv, &g->last.groups, err);
  if (rc == 0) rc = fill_signal_groups(g, s, step, rewards, err);
  if (rc == 0) {
    // Episodes the environment failed carry no signal about the policy:
    // their tokens leave the loss.
    g->total_tokens = g->total_seqs = 0;
    for (int j = 0; j < n; j++) {
      Rollout *r = &g->rollouts[j];
      if (r->end == ROLLOUT_END_FAILED) memset(r->mask, 0, (size_t)r->len);
      int tokens = 0;
      for (int t = 1; t < r->len; t++) tokens += r->mask[t];
      g->total_tokens += tokens;
      g->total_seqs += tokens > 0;
    }
    g->batch_step = step;
    int first_rank = g->comm ? g->comm->rank == 0 : !g->ops || g->ops->rank == 0;
    if (c->log_rollouts > 0 && step % c->log_rollouts == 0 && first_rank) rc = log_rollouts(g, step, rewards, err);
  }
  free(idx);
  free(jobs);
  free(rewards);
  return rc == 0 ? 0 : fimi_fail_wrap(err, "step %lld: rollouts", (long long)step);
}

// ---- the loss on a micro-batch ---------------------------------------------------------------

static int grow_batch(GrpoObjective *g, size_t need, FimiError *err) {
  if (need <= g->cap) return 0;
  void **arrays[] = {(void **)&g->tokens, (void **)&g->targets, (void **)&g->mask,  (void **)&g->old_logp,
                     (void **)&g->ref_logp, (void **)&g->logp,  (void **)&g->dlogp};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
    void *bigger = realloc(*arrays[i], need * 4);  // int and float are 4 bytes
    if (!bigger) return fimi_fail(err, "GRPO batch: out of memory");
    *arrays[i] = bigger;
  }
  g->cap = need;
  return 0;
}

// Rows rows[0..count) of the step's rollouts as (count, T) inputs: inputs
// ids[0..L-1), targets ids[1..L) where the token was sampled (else -1).
static int build_batch(GrpoObjective *g, const int64_t *rows, int64_t count, int *T_out, FimiError *err) {
  int T = 1;
  for (int64_t i = 0; i < count; i++) {
    const Rollout *r = &g->rollouts[rows[i]];
    if (r->len - 1 > T) T = r->len - 1;
  }
  if (T > g->max_len)
    return fimi_fail(err, "a rollout of %d tokens exceeds the model's %d positions (lower grpo.context)", T + 1,
                     g->max_len);
  if (grow_batch(g, (size_t)count * T, err) != 0) return -1;
  double *adv = realloc(g->row_adv, (size_t)count * sizeof *adv);
  if (!adv) return fimi_fail(err, "GRPO batch: out of memory");
  g->row_adv = adv;
  for (int64_t i = 0; i < count; i++) {
    const Rollout *r = &g->rollouts[rows[i]];
    adv[i] = g->adv[rows[i]];
    for (int t = 0; t < T; t++) {
      size_t k = (size_t)i * T + t;
      int real = t + 1 < r->len;
      g->tokens[k] = real ? r->ids[t] : g->pad_id;
      g->mask[k] = real ? (float)r->mask[t + 1] : 0.0f;
      g->targets[k] = real && r->mask[t + 1] ? r->ids[t + 1] : -1;
      g->old_logp[k] = real ? r->logp[t + 1] : 0.0f;
    }
  }
  *T_out = T;
  return 0;
}

// The rows' forward on the loop's model (or one unit on this rank), the
// loss and its backward. Adds to the step's loss stats.
static int loss_rows(GrpoObjective *g, GemmaModel *model, const int64_t *rows, int64_t count, int real,
                     GrpoLossStats *st, FimiError *err) {
  int T = 0;
  if (build_batch(g, rows, count, &T, err) != 0) return -1;
  int B = (int)count;
  int rc = g->ops ? g->ops->forward(g->ops->ctx, g->tokens, g->targets, B, T, g->logp, err)
                  : gemma_forward(model, g->tokens, g->targets, B, T, g->logp, err);
  if (rc == 0 && g->config.loss.kl_coef > 0)
    rc = gemma_forward(g->reference, g->tokens, g->targets, B, T, g->ref_logp, err);
  if (rc != 0) return -1;
  size_t n = (size_t)B * T;
  if (!real) {  // a dummy unit: exact zeros
    memset(g->dlogp, 0, n * sizeof(float));
  } else {
    // Padding and unsampled positions: finite placeholders the loss ignores.
    for (size_t k = 0; k < n; k++)
      if (g->mask[k] == 0) g->logp[k] = g->old_logp[k] = g->ref_logp[k] = 0.0f;
    rc = grpo_loss(&g->config.loss, g->logp, g->old_logp, g->config.loss.kl_coef > 0 ? g->ref_logp : NULL, g->mask,
                   g->row_adv, B, T, g->total_tokens, g->total_seqs, g->dlogp, st, err);
    if (rc != 0) return -1;
  }
  return g->ops ? g->ops->backward(g->ops->ctx, g->dlogp, err) : gemma_backward(model, g->dlogp, err);
}

static int train_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                       double weight, TrainBatchResult *out, FimiError *err) {
  GrpoObjective *g = ctx;
  (void)ds;
  memset(out, 0, sizeof *out);
  for (int64_t i = 0; i < count; i++) {
    const Rollout *r = &g->rollouts[rows[i]];
    out->tokens += r->len - 1;
    for (int t = 1; t < r->len; t++) out->loss_tokens += r->mask[t];
  }
  GrpoLossStats st = {0};
  double t0 = monotonic_seconds();
  if (out->loss_tokens > 0 && g->total_tokens > 0) {
    if (!g->ops) {
      if (loss_rows(g, model, rows, count, 1, &st, err) != 0) return -1;
    } else {
      // ZeRO-3 units (see GrpoModelOps).
      int world = g->ops->world, rank = g->ops->rank;
      int64_t k = g->ops->unit, units = (count + k - 1) / k, rounds = (units + world - 1) / world;
      for (int64_t j = 0; j < rounds; j++) {
        int64_t u = j * world + rank;
        int real = u < units;
        int64_t first = real ? u * k : 0, n = count - first < k ? count - first : k;
        if (loss_rows(g, model, rows + first, n, real, &st, err) != 0)
          return fimi_fail_wrap(err, "rank %d, unit %lld", rank, (long long)u);
      }
      double sums[5] = {st.loss, st.tokens, st.clipped, st.ratio_sum, st.kl_sum};
      if (g->ops->all_reduce_sum(g->ops->ctx, sums, 5, err) != 0) return -1;
      st = (GrpoLossStats){sums[0], sums[1], sums[2], sums[3], sums[4]};
    }
  }
  g->last.update_seconds += monotonic_seconds() - t0;
  // The loss shares add up to the step loss; the loop weights each
  // micro-batch by 1 / grad_accum, so the share is handed back unweighted.
  // The gradient needs no weight: grpo_loss normalizes by the whole step.
  out->loss = st.loss / weight;
  GrpoLossStats *sum = &g->last.loss;
  sum->loss += st.loss;
  sum->tokens += st.tokens;
  sum->clipped += st.clipped;
  sum->ratio_sum += st.ratio_sum;
  sum->kl_sum += st.kl_sum;
  return 0;
}

// ---- validation -------------------------------------------------------------------------

int grpo_validate(GrpoObjective *g, TrainState *s, double *score, GrpoStepStats *stats, FimiError *err) {
  *score = NAN;
  if (!g->val || g->val->count == 0) return 0;
  int n = g->config.val_tasks > 0 && g->config.val_tasks < g->val->count ? g->config.val_tasks : g->val->count;
  RolloutConfig rc = g->config.rollout;
  if (g->config.val_greedy) rc.sampler.temperature = 0.0f;
  rc.share_prefix = 0;  // one rollout per task: nothing to share
  RolloutJob *jobs = fimi_malloc((size_t)n * sizeof *jobs, err);
  Rollout *out = jobs ? fimi_calloc((size_t)n, sizeof *out, err) : NULL;
  double *rewards = out ? fimi_malloc((size_t)n * sizeof *rewards, err) : NULL;
  int r = rewards ? 0 : -1;
  for (int i = 0; r == 0 && i < n; i++) jobs[i] = (RolloutJob){i, i, rng_mix(g->config.seed ^ 0x7a1ULL, (uint64_t)i)};
  GrpoStepStats st = {0};
  if (r == 0) r = play(g, s, g->val_env, &rc, jobs, n, 1, rng_mix(g->config.seed, 0x7a1ULL), out, rewards, &st,
                       g->val_work, err);
  if (r == 0) {
    *score = st.reward_mean;
    if (stats) *stats = st;
  }
  free_rollouts(out, n);
  free(out);
  free(jobs);
  free(rewards);
  return r == 0 ? 0 : fimi_fail_wrap(err, "validation");
}

static int validate_hook(void *ctx, TrainState *s, int64_t step, double *score, FimiError *err) {
  GrpoObjective *g = ctx;
  GrpoStepStats st;
  int rc = grpo_validate(g, s, score, &st, err);
  if (rc != 0 || step == 0) return rc;  // step 0: the loop's baseline (validation_start) only
  g->last_val_stats = st;
  g->last_val = *score;
  if (!(*score <= g->best_val)) g->best_val = *score;
  return 0;
}

// ---- metrics and state ----------------------------------------------------------------------

static void add_stats(cJSON *o, const char *prefix, const GrpoStepStats *st) {
  char key[64];
#define ADD(name, value)                                  \
  do {                                                    \
    snprintf(key, sizeof key, "%s%s", prefix, name);      \
    cJSON_AddNumberToObject(o, key, (double)(value));     \
  } while (0)
  ADD("reward_mean", st->reward_mean);
  ADD("reward_std", st->reward_std);
  ADD("seq", st->seq);
  ADD("seq_frac", st->seq_frac);
  ADD("db", st->db);
  ADD("comm", st->comm);
  ADD("judge", st->judge);
  ADD("total", st->total);
  ADD("strict_total", st->strict_total);
  ADD("gen_tokens", st->gen_tokens);
  ADD("turns", st->turns);
  ADD("tool_calls", st->tool_calls);
  ADD("tool_errors", st->tool_errors);
  ADD("malformed", st->malformed);
  ADD("failed", st->failed);
  for (int e = 0; e < ROLLOUT_END_COUNT; e++) {
    snprintf(key, sizeof key, "%send_%s", prefix, rollout_end_name((RolloutEnd)e));
    cJSON_AddNumberToObject(o, key, st->ends[e]);
  }
#undef ADD
}

// Per train rank: rollouts played and the engine's prefill and decode tokens.
static int add_work(cJSON *o, const char *prefix, const GrpoRankWork *work, int ranks) {
  const char *names[] = {"rank_rollouts", "rank_prefill_tokens", "rank_decode_tokens"};
  for (int f = 0; f < 3; f++) {
    char key[64];
    snprintf(key, sizeof key, "%s%s", prefix, names[f]);
    cJSON *a = cJSON_AddArrayToObject(o, key);
    if (!a) return 0;
    for (int r = 0; r < ranks; r++) {
      int64_t v = f == 0 ? work[r].rollouts : f == 1 ? work[r].prefill_tokens : work[r].decode_tokens;
      cJSON *x = cJSON_CreateNumber((double)v);
      if (!x || !cJSON_AddItemToArray(a, x)) return 0;
    }
  }
  return 1;
}

static int step_metrics(void *ctx, int64_t step, cJSON *line, FimiError *err) {
  GrpoObjective *g = ctx;
  const GrpoStepStats *st = &g->last;
  add_stats(line, "", st);
  int groups = st->groups.groups > 0 ? st->groups.groups : 1;
  cJSON_AddNumberToObject(line, "zero_variance_groups", (double)st->groups.zero_variance / groups);
  cJSON_AddNumberToObject(line, "all_fail_groups", (double)st->groups.all_fail / groups);
  cJSON_AddNumberToObject(line, "all_pass_groups", (double)st->groups.all_pass / groups);
  cJSON_AddNumberToObject(line, "draws", st->draws);
  cJSON_AddNumberToObject(line, "signal_groups", (double)st->signal_groups / groups);
  double tokens = st->loss.tokens > 0 ? st->loss.tokens : 1;
  cJSON_AddNumberToObject(line, "clip_fraction", st->loss.clipped / tokens);
  cJSON_AddNumberToObject(line, "ratio_mean", st->loss.tokens > 0 ? st->loss.ratio_sum / tokens : 1.0);
  cJSON_AddNumberToObject(line, "kl", st->loss.kl_sum / tokens);
  cJSON_AddBoolToObject(line, "fresh_rollouts", g->batch_step == step);
  // Times of this step's rollouts (0 on steps that reuse a batch).
  const RolloutTimes *t = &st->times;
  cJSON_AddNumberToObject(line, "time_prefill", t->prefill);
  cJSON_AddNumberToObject(line, "time_decode", t->decode);
  cJSON_AddNumberToObject(line, "time_env", t->env);
  cJSON_AddNumberToObject(line, "time_rollout", st->rollout_seconds);
  // Forward and backward of the loss (this step's micro-batches).
  cJSON_AddNumberToObject(line, "time_update", st->update_seconds);
  double gen = st->gen_tokens * st->rollouts;
  cJSON_AddNumberToObject(line, "gen_tokens_per_s", st->rollout_seconds > 0 ? gen / st->rollout_seconds : 0);
  cJSON_AddNumberToObject(line, "time_exchange", st->exchange_seconds);
  int ok = add_work(line, "", g->work, g->work_ranks);
  if (!isnan(g->last_val)) {
    add_stats(line, "val_", &g->last_val_stats);
    ok = ok && add_work(line, "val_", g->val_work, g->work_ranks);
  }
  g->last_val = NAN;
  return ok ? 0 : fimi_fail(err, "out of memory writing metrics");
}

static void progress_note(void *ctx, char *buf, size_t size) {
  const GrpoObjective *g = ctx;
  snprintf(buf, size, "reward %.3f | %.0f tok/episode", g->last.reward_mean, g->last.gen_tokens);
}

static int state_save(void *ctx, cJSON *state, FimiError *err) {
  GrpoObjective *g = ctx;
  char text[64];
  snprintf(text, sizeof text, "%llu", (unsigned long long)g->task_loader.cursor.epoch);
  cJSON *ok = cJSON_AddStringToObject(state, "grpo_task_epoch", text);
  snprintf(text, sizeof text, "%llu", (unsigned long long)g->task_loader.cursor.position);
  if (!ok || !cJSON_AddStringToObject(state, "grpo_task_position", text)) return fimi_fail(err, "out of memory");
  return 0;
}

static int read_u64(const cJSON *state, const char *key, uint64_t *out, FimiError *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(state, key);
  char *end = NULL;
  if (!cJSON_IsString(v)) return fimi_fail(err, "objective_state.%s is missing", key);
  *out = strtoull(v->valuestring, &end, 10);
  return *end ? fimi_fail(err, "objective_state.%s is not a number", key) : 0;
}

static int state_load(void *ctx, const cJSON *state, FimiError *err) {
  GrpoObjective *g = ctx;
  DatasetCursor cur;
  if (read_u64(state, "grpo_task_epoch", &cur.epoch, err) != 0 ||
      read_u64(state, "grpo_task_position", &cur.position, err) != 0)
    return -1;
  return dataset_loader_seek(&g->task_loader, cur, err);
}

// ---- set-up -------------------------------------------------------------------------------------

int grpo_objective_init(GrpoObjective *g, const GrpoConfig *config, const GemmaConfig *model, const TaskList *tasks,
                        const TaskList *val, EnvClient *env, EnvClient *val_env, const Tokenizer *tok,
                        GemmaModel *reference, const GrpoModelAccess *access, TrainObjective *obj,
                        TrainLoopConfig *loop, FimiError *err) {
  memset(g, 0, sizeof *g);
  if (grpo_config_validate(config, err) != 0) return -1;
  int n = config->tasks_per_step * config->group_size;
  if (loop->micro_batch * loop->grad_accum != n)
    return fimi_fail(err, "train.micro_batch (%lld) x train.grad_accum (%lld) must equal grpo.tasks_per_step x "
                     "grpo.group_size (%d rollouts a step)", (long long)loop->micro_batch, (long long)loop->grad_accum, n);
  if (config->rollout.context > model->max_position_embeddings)
    return fimi_fail(err, "grpo.context %d exceeds the model's max_position_embeddings %d", config->rollout.context,
                     model->max_position_embeddings);
  if (config->loss.kl_coef > 0 && !reference) return fimi_fail(err, "grpo.kl_coef > 0 needs a reference model");
  if (!tasks || tasks->count < 1) return fimi_fail(err, "GRPO needs at least one training task");
  g->config = *config;
  g->tasks = tasks;
  g->val = val;
  g->env = env;
  g->val_env = val_env;
  g->tok = tok;
  g->reference = config->loss.kl_coef > 0 ? reference : NULL;
  g->access = *access;
  g->pad_id = model->pad_token_id >= 0 && model->pad_token_id < model->vocab_size ? model->pad_token_id : 0;
  g->max_len = model->max_position_embeddings;
  g->last_val = g->best_val = NAN;
  g->batch_step = -1;
  if (dataset_loader_init(&g->task_loader, tasks->count, config->seed, 0, 1, 1, err) != 0) return -1;
  g->rollouts = fimi_calloc((size_t)n, sizeof *g->rollouts, err);
  g->adv = g->rollouts ? fimi_calloc((size_t)n, sizeof *g->adv, err) : NULL;
  if (!g->adv || grpo_objective_set_rollout_comm(g, NULL, err) != 0) return -1;
  g->rows.kind = DATASET_SFT;
  g->rows.rows = n;
  *obj = (TrainObjective){.name = "grpo", .ctx = g, .train_batch = train_batch, .eval_batch = NULL};
  g->out_dir = loop->out_dir;
  loop->shuffle = 0;  // rows are the step's rollouts in order
  loop->begin_step = begin_step;
  loop->validate = val && val->count > 0 ? validate_hook : NULL;
  loop->progress_note = progress_note;
  loop->hooks_ctx = g;
  loop->step_metrics = step_metrics;
  loop->step_metrics_ctx = g;
  loop->objective_save = state_save;
  loop->objective_load = state_load;
  loop->objective_ctx = g;
  return 0;
}

void grpo_objective_set_model_ops(GrpoObjective *g, const GrpoModelOps *ops) { g->ops = ops; }

int grpo_objective_set_rollout_comm(GrpoObjective *g, Communicator *comm, FimiError *err) {
  int ranks = comm && comm->world > 1 ? comm->world : 1;
  GrpoRankWork *work = fimi_calloc((size_t)ranks, sizeof *work, err);
  GrpoRankWork *val_work = work ? fimi_calloc((size_t)ranks, sizeof *val_work, err) : NULL;
  if (!val_work) {
    free(work);
    return -1;
  }
  free(g->work);
  free(g->val_work);
  g->comm = comm;
  g->work = work;
  g->val_work = val_work;
  g->work_ranks = ranks;
  return 0;
}

void grpo_objective_free(GrpoObjective *g) {
  int n = g->config.tasks_per_step * g->config.group_size;
  free_rollouts(g->rollouts, n);
  free(g->rollouts);
  free(g->adv);
  free(g->tokens);
  free(g->targets);
  free(g->mask);
  free(g->old_logp);
  free(g->ref_logp);
  free(g->logp);
  free(g->dlogp);
  free(g->row_adv);
  free(g->work);
  free(g->val_work);
  dataset_loader_free(&g->task_loader);
  memset(g, 0, sizeof *g);
}

// ---- the CPU model access ----------------------------------------------------------------------

static int cpu_make_policy(void *ctx, TrainState *s, int slots, int capacity, RolloutPolicy *out, FimiError *err) {
  const GrpoCpuAccess *a = ctx;
  // Sharded: the full weights are gathered into s->model (collective).
  if (train_state_sync_model(s, err) != 0) return -1;
  return rollout_policy_cpu_create(out, s->model, slots, capacity, a->prefill_chunk, a->row_invariant, err);
}

static void cpu_free_policy(void *ctx, RolloutPolicy *p) {
  (void)ctx;
  rollout_policy_cpu_free(p);
}

void grpo_access_cpu(GrpoModelAccess *a, const GrpoCpuAccess *settings) {
  *a = (GrpoModelAccess){cpu_make_policy, cpu_free_policy, (void *)settings};
}
