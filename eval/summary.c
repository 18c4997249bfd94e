// eval/summary.c: slices, task tallies, the summary JSON and Markdown, the
// paired comparison and the ladder.
#include "eval/summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/bench_judge_model.h"
#include "eval/stats.h"

// ---- slices -------------------------------------------------------------------------------

static int succeeded(const EvalResults *r, const EvalEpisode *e) { return e->reward.total >= r->info.success - 1e-12; }

void eval_slice_compute(const EvalResults *r, EvalFilter keep, const void *arg, EvalSlice *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < r->count; i++) {
    const EvalEpisode *e = &r->episodes[i];
    if (keep && !keep(e, arg)) continue;
    const RewardBreakdown *w = &e->reward;
    out->episodes++;
    out->reward += w->total;
    out->strict += w->strict_total;
    out->seq_frac += w->seq_frac;
    out->success += succeeded(r, e);
    if (w->checks & TASK_CHECK_SEQ) out->seq += w->seq, out->seq_n++;
    if (w->checks & TASK_CHECK_DB) out->db += w->db, out->db_n++;
    if (w->checks & TASK_CHECK_COMM) out->comm += w->comm, out->comm_n++;
    if (w->checks & TASK_CHECK_JUDGE) out->judge += w->judge, out->judge_n++;
  }
  double n = out->episodes > 0 ? out->episodes : 1;
  out->reward /= n, out->strict /= n, out->seq_frac /= n, out->success /= n;
  out->seq = out->seq_n ? out->seq / out->seq_n : NAN;
  out->db = out->db_n ? out->db / out->db_n : NAN;
  out->comm = out->comm_n ? out->comm / out->comm_n : NAN;
  out->judge = out->judge_n ? out->judge / out->judge_n : NAN;
}

// NaN (a check no task of the slice declares) is written as null.
static void add_mean(cJSON *o, const char *key, double v) {
  if (isnan(v))
    cJSON_AddNullToObject(o, key);
  else
    cJSON_AddNumberToObject(o, key, v);
}

static cJSON *slice_json(const EvalSlice *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "episodes", s->episodes);
  cJSON_AddNumberToObject(o, "reward", s->reward);
  cJSON_AddNumberToObject(o, "strict", s->strict);
  cJSON_AddNumberToObject(o, "strict_penalty", s->reward - s->strict);
  cJSON_AddNumberToObject(o, "seq_frac", s->seq_frac);
  cJSON_AddNumberToObject(o, "success", s->success);
  add_mean(o, "seq", s->seq);
  add_mean(o, "db", s->db);
  add_mean(o, "comm", s->comm);
  add_mean(o, "judge", s->judge);
  return o;
}

static int by_kind(const EvalEpisode *e, const void *arg) { return (int)e->kind == *(const int *)arg; }
static int by_use_case(const EvalEpisode *e, const void *arg) { return (int)e->use_case == *(const int *)arg; }
static int by_family(const EvalEpisode *e, const void *arg) { return !strcmp(e->family, (const char *)arg); }
static int by_depth(const EvalEpisode *e, const void *arg) {
  return (e->num_gold <= EVAL_SHALLOW_MAX_GOLD) == *(const int *)arg;
}

// {"name": slice} for each enum value present in the run.
static cJSON *enum_slices(const EvalResults *r, int count, const char *(*name)(int), EvalFilter keep) {
  cJSON *o = cJSON_CreateObject();
  for (int v = 0; v < count; v++) {
    EvalSlice s;
    eval_slice_compute(r, keep, &v, &s);
    if (s.episodes > 0) cJSON_AddItemToObject(o, name(v), slice_json(&s));
  }
  return o;
}

static const char *kind_name(int v) { return task_kind_name((TaskKind)v); }
static const char *use_case_name(int v) { return task_use_case_name((TaskUseCase)v); }

static cJSON *family_slices(const EvalResults *r) {
  cJSON *o = cJSON_CreateObject();
  for (int i = 0; i < r->count; i++) {
    const char *f = r->episodes[i].family;
    if (cJSON_GetObjectItemCaseSensitive(o, f)) continue;
    EvalSlice s;
    eval_slice_compute(r, by_family, f, &s);
    cJSON_AddItemToObject(o, f, slice_json(&s));
  }
  return o;
}

static cJSON *depth_slices(const EvalResults *r) {
  cJSON *o = cJSON_CreateObject();
  const char *names[2] = {"deep", "shallow"};
  for (int shallow = 1; shallow >= 0; shallow--) {
    EvalSlice s;
    eval_slice_compute(r, by_depth, &shallow, &s);
    cJSON_AddItemToObject(o, names[shallow], slice_json(&s));
  }
  return o;
}

// ---- tasks: band and pass^k ---------------------------------------------------------------

int eval_task_tallies(const EvalResults *r, EvalTaskTally **tallies, int *count, FimiError *err) {
  *tallies = NULL;
  *count = 0;
  EvalTaskTally *t = fimi_calloc(r->count > 0 ? (size_t)r->count : 1, sizeof *t, err);
  if (!t) return -1;
  // Quadratic in the number of tasks only through the lookup below; result
  // files hold thousands of episodes, so a linear scan per new task is fine.
  int n = 0;
  for (int i = 0; i < r->count; i++) {
    const EvalEpisode *e = &r->episodes[i];
    int k = n - 1;
    while (k >= 0 && strcmp(t[k].task_id, e->task_id)) k--;
    if (k < 0) {
      k = n++;
      t[k] = (EvalTaskTally){e->task_id, e->kind, i, 0, 0, 0.0};
    }
    t[k].trials++;
    t[k].successes += succeeded(r, e);
    t[k].reward_mean += e->reward.total;
  }
  for (int k = 0; k < n; k++) t[k].reward_mean /= t[k].trials;
  *tallies = t;
  *count = n;
  return 0;
}

// Trials per task when every task has the same number, else 0.
static int common_trials(const EvalTaskTally *t, int n) {
  for (int k = 1; k < n; k++)
    if (t[k].trials != t[0].trials) return 0;
  return n > 0 ? t[0].trials : 0;
}

static cJSON *band_json(const EvalTaskTally *t, int n, int trials) {
  EvalBand band = {0};
  for (int k = 0; k < n; k++) eval_band_add(&band, t[k].trials, t[k].successes);
  cJSON *o = cJSON_CreateObject();
  double tasks = n > 0 ? n : 1;
  cJSON_AddNumberToObject(o, "trials", trials);
  cJSON_AddNumberToObject(o, "tasks", n);
  cJSON_AddNumberToObject(o, "always_fail", band.always_fail / tasks);
  cJSON_AddNumberToObject(o, "split", band.split / tasks);
  cJSON_AddNumberToObject(o, "always_pass", band.always_pass / tasks);
  return o;
}

// [{"k": k, "pass_hat_k": ..., "pass_at_k": ...}] for k = 1 .. trials,
// averaged over tasks.
static cJSON *pass_k_json(const EvalTaskTally *t, int n, int trials) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 1; k <= trials; k++) {
    double hat = 0, at = 0;
    for (int i = 0; i < n; i++) {
      hat += eval_pass_hat_k(t[i].trials, t[i].successes, k);
      at += eval_pass_at_k(t[i].trials, t[i].successes, k);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "k", k);
    cJSON_AddNumberToObject(o, "pass_hat_k", n ? hat / n : 0);
    cJSON_AddNumberToObject(o, "pass_at_k", n ? at / n : 0);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

// ---- dialog behaviour and cost --------------------------------------------------------------

typedef struct DialogMeans {
  double turns, tool_calls, tool_errors, malformed, generated, tokens;
  int ends[32];
  int failed;
  int model_customer;  // episodes whose customer a served model played
  int drift, drifted;  // their drift replies, and the episodes with any
  int judged[2][2];    // episodes judged by a served model: [rules passed][model passed]
  int model_judged;
} DialogMeans;

static void dialog_means(const EvalResults *r, DialogMeans *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < r->count; i++) {
    const EvalEpisode *e = &r->episodes[i];
    d->turns += e->turns, d->tool_calls += e->tool_calls, d->tool_errors += e->tool_errors;
    d->malformed += e->malformed, d->generated += (double)e->generated, d->tokens += (double)e->tokens;
    d->failed += e->failed;
    d->model_customer += e->reward.simulator_model;
    d->drift += e->reward.simulator_drift;
    d->drifted += e->reward.simulator_drift > 0;
    if (e->reward.judge_model && !e->reward.db_failed_judge_zeroed) {
      d->model_judged++;
      d->judged[e->reward.judge_rules == 1.0][e->reward.judge == 1.0]++;
    }
  }
  double n = r->count > 0 ? r->count : 1;
  d->turns /= n, d->tool_calls /= n, d->tool_errors /= n, d->malformed /= n, d->generated /= n, d->tokens /= n;
}

static cJSON *ends_json(const EvalResults *r) {
  cJSON *o = cJSON_CreateObject();
  for (int i = 0; i < r->count; i++) {
    const char *end = r->episodes[i].end;
    cJSON *c = cJSON_GetObjectItemCaseSensitive(o, end);
    if (c)
      cJSON_SetNumberValue(c, c->valuedouble + 1);
    else
      cJSON_AddNumberToObject(o, end, 1);
  }
  return o;
}

// Compute per dialog as 2 x parameters x tokens (forward FLOPs of a dense
// decoder, the paper's Table 17 accounting): decode-only counts the sampled
// tokens, total adds every prompt and observation token prefilled.
static cJSON *dialog_json(const EvalResults *r) {
  DialogMeans d;
  dialog_means(r, &d);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "turns", d.turns);
  cJSON_AddNumberToObject(o, "tool_calls", d.tool_calls);
  cJSON_AddNumberToObject(o, "tool_errors", d.tool_errors);
  cJSON_AddNumberToObject(o, "malformed_turns", d.malformed);
  cJSON_AddNumberToObject(o, "generated_tokens", d.generated);
  cJSON_AddNumberToObject(o, "tokens", d.tokens);
  cJSON_AddNumberToObject(o, "failed_episodes", d.failed);
  double p = (double)r->info.parameters;
  cJSON_AddNumberToObject(o, "flops_decode", 2.0 * p * d.generated);
  cJSON_AddNumberToObject(o, "flops_total", 2.0 * p * d.tokens);
  cJSON_AddItemToObject(o, "ends", ends_json(r));
  if (d.model_judged) {  // eval.judge = model: its agreement with the rules
    cJSON *j = cJSON_AddObjectToObject(o, "judge");
    double kappa = bench_judge_kappa((const int(*)[2])d.judged);
    cJSON_AddNumberToObject(j, "model_judged_episodes", d.model_judged);
    cJSON_AddNumberToObject(j, "both_pass", d.judged[1][1]);
    cJSON_AddNumberToObject(j, "rules_only", d.judged[1][0]);
    cJSON_AddNumberToObject(j, "model_only", d.judged[0][1]);
    cJSON_AddNumberToObject(j, "both_fail", d.judged[0][0]);
    if (isnan(kappa)) cJSON_AddNullToObject(j, "kappa");
    else cJSON_AddNumberToObject(j, "kappa", kappa);
  }
  if (d.model_customer) {  // env.simulator = model
    cJSON *sim = cJSON_AddObjectToObject(o, "simulator");
    cJSON_AddNumberToObject(sim, "model_episodes", d.model_customer);
    cJSON_AddNumberToObject(sim, "drift_replies", d.drift);
    cJSON_AddNumberToObject(sim, "drifted_episodes", d.drifted);
  }
  return o;
}

cJSON *eval_summary_json(const EvalResults *r, FimiError *err) {
  EvalTaskTally *t = NULL;
  int n = 0;
  if (eval_task_tallies(r, &t, &n, err) != 0) return NULL;
  cJSON *o = cJSON_CreateObject();
  EvalSlice all;
  eval_slice_compute(r, NULL, NULL, &all);
  cJSON_AddItemToObject(o, "overall", slice_json(&all));
  cJSON_AddNumberToObject(o, "tasks", n);
  cJSON_AddItemToObject(o, "kind", enum_slices(r, TASK_KIND_COUNT, kind_name, by_kind));
  cJSON_AddItemToObject(o, "use_case", enum_slices(r, TASK_USE_COUNT, use_case_name, by_use_case));
  cJSON_AddItemToObject(o, "depth", depth_slices(r));
  cJSON_AddItemToObject(o, "family", family_slices(r));
  int trials = common_trials(t, n);
  if (trials >= 2) cJSON_AddItemToObject(o, "band", band_json(t, n, trials));
  if (trials >= 1) cJSON_AddItemToObject(o, "pass_k", pass_k_json(t, n, trials));
  cJSON_AddItemToObject(o, "dialog", dialog_json(r));
  cJSON_AddNumberToObject(o, "episodes_per_second", r->info.seconds > 0 ? r->count / r->info.seconds : 0);
  free(t);
  return o;
}

// ---- Markdown -------------------------------------------------------------------------------

static void md_value(FILE *out, double v) {
  if (isnan(v))
    fprintf(out, " - |");
  else
    fprintf(out, " %.3f |", v);
}

static void md_slice_header(FILE *out, const char *first) {
  fprintf(out, "| %s | episodes | reward | strict | penalty | seq_frac | success | seq | db | comm | judge |\n", first);
  fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

static void md_slice_row(FILE *out, const char *name, const EvalSlice *s) {
  fprintf(out, "| %s | %d |", name, s->episodes);
  md_value(out, s->reward);
  md_value(out, s->strict);
  md_value(out, s->reward - s->strict);
  md_value(out, s->seq_frac);
  md_value(out, s->success);
  md_value(out, s->seq);
  md_value(out, s->db);
  md_value(out, s->comm);
  md_value(out, s->judge);
  fputc('\n', out);
}

static void md_slices(FILE *out, const EvalResults *r) {
  EvalSlice s;
  md_slice_header(out, "slice");
  eval_slice_compute(r, NULL, NULL, &s);
  md_slice_row(out, "**overall**", &s);
  for (int v = 0; v < TASK_KIND_COUNT; v++) {
    eval_slice_compute(r, by_kind, &v, &s);
    char name[64];
    snprintf(name, sizeof name, "kind %s", task_kind_name((TaskKind)v));
    if (s.episodes) md_slice_row(out, name, &s);
  }
  for (int v = 0; v < TASK_USE_COUNT; v++) {
    eval_slice_compute(r, by_use_case, &v, &s);
    char name[64];
    snprintf(name, sizeof name, "use case %s", task_use_case_name((TaskUseCase)v));
    if (s.episodes) md_slice_row(out, name, &s);
  }
  for (int shallow = 1; shallow >= 0; shallow--) {
    eval_slice_compute(r, by_depth, &shallow, &s);
    if (s.episodes) md_slice_row(out, shallow ? "shallow (<= 6 gold)" : "deep (> 6 gold)", &s);
  }
}

static void md_tasks(FILE *out, const EvalTaskTally *t, int n) {
  int trials = common_trials(t, n);
  if (trials >= 2) {
    EvalBand b = {0};
    for (int k = 0; k < n; k++) eval_band_add(&b, t[k].trials, t[k].successes);
    fprintf(out, "\nLearnable band at %d trials (%d tasks): always fail %.3f, split %.3f, always pass %.3f\n", trials,
            n, (double)b.always_fail / n, (double)b.split / n, (double)b.always_pass / n);
  }
  if (trials >= 1) {
    fprintf(out, "\n| k | pass^k | pass@k |\n|---:|---:|---:|\n");
    for (int k = 1; k <= trials; k++) {
      double hat = 0, at = 0;
      for (int i = 0; i < n; i++) {
        hat += eval_pass_hat_k(t[i].trials, t[i].successes, k);
        at += eval_pass_at_k(t[i].trials, t[i].successes, k);
      }
      fprintf(out, "| %d | %.3f | %.3f |\n", k, hat / n, at / n);
    }
  }
}

static void md_dialog(FILE *out, const EvalResults *r) {
  DialogMeans d;
  dialog_means(r, &d);
  double p = (double)r->info.parameters;
  fprintf(out, "\nPer dialog: %.2f turns, %.2f tool calls, %.2f tool errors, %.1f generated tokens, %.1f tokens", d.turns,
          d.tool_calls, d.tool_errors, d.generated, d.tokens);
  if (p > 0) fprintf(out, "; compute %.3g FLOPs decode, %.3g FLOPs total", 2 * p * d.generated, 2 * p * d.tokens);
  fprintf(out, ".\n");
  if (d.model_judged)
    fprintf(out, "\nThe judge check was decided by a served model in %d episodes; against the rules: %d both "
                 "passed, %d both failed, %d passed by the rules only, %d by the model only (Cohen's kappa %.3f).\n",
            d.model_judged, d.judged[1][1], d.judged[0][0], d.judged[1][0], d.judged[0][1],
            bench_judge_kappa((const int(*)[2])d.judged));
  if (d.model_customer)
    fprintf(out, "\nThe customer was played by a served model in %d episodes: %d replies broke the task's pinning "
                 "(simulator drift), in %d episodes.\n",
            d.model_customer, d.drift, d.drifted);
}

int eval_summary_markdown(const EvalResults *r, FILE *out, FimiError *err) {
  EvalTaskTally *t = NULL;
  int n = 0;
  if (eval_task_tallies(r, &t, &n, err) != 0) return -1;
  fprintf(out, "# Evaluation: %s\n\n", r->info.label);
  fprintf(out, "Model `%s`, tasks `%s` (%d tasks x %d trials = %d episodes), seed 0x%llx, temperature %g, top_p %g; ",
          r->info.model, r->info.tasks_file, n, r->info.trials, r->count, (unsigned long long)r->info.seed,
          r->info.temperature, r->info.top_p);
  fprintf(out, "success = reward >= %g.\n\n", r->info.success);
  md_slices(out, r);
  md_tasks(out, t, n);
  md_dialog(out, r);
  free(t);
  return ferror(out) ? fimi_fail(err, "writing the summary failed") : 0;
}

// ---- paired comparison ----------------------------------------------------------------------

typedef struct PairCounts {
  int tasks, a_better, b_better, ties;
  double a_mean, b_mean;
} PairCounts;

static void pair_add(PairCounts *c, double a, double b) {
  c->tasks++;
  c->a_mean += a, c->b_mean += b;
  if (b > a + 1e-12)
    c->b_better++;
  else if (a > b + 1e-12)
    c->a_better++;
  else
    c->ties++;
}

static cJSON *pair_row(FILE *out, const char *name, const PairCounts *c) {
  double n = c->tasks > 0 ? c->tasks : 1, p = eval_sign_test_p(c->b_better, c->a_better);
  char p_text[32];
  if (p > 0)
    snprintf(p_text, sizeof p_text, "%.4g", p);
  else
    snprintf(p_text, sizeof p_text, "< 1e-300");  // below the smallest double
  fprintf(out, "| %s | %d | %.3f | %.3f | %+.3f | %d | %d | %d | %s |\n", name, c->tasks, c->a_mean / n,
          c->b_mean / n, (c->b_mean - c->a_mean) / n, c->b_better, c->a_better, c->ties, p_text);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "tasks", c->tasks);
  cJSON_AddNumberToObject(o, "a_reward", c->a_mean / n);
  cJSON_AddNumberToObject(o, "b_reward", c->b_mean / n);
  cJSON_AddNumberToObject(o, "b_better", c->b_better);
  cJSON_AddNumberToObject(o, "a_better", c->a_better);
  cJSON_AddNumberToObject(o, "ties", c->ties);
  cJSON_AddNumberToObject(o, "sign_test_p", p);
  return o;
}

static int find_tally(const EvalTaskTally *t, int n, const char *id) {
  for (int k = 0; k < n; k++)
    if (!strcmp(t[k].task_id, id)) return k;
  return -1;
}

int eval_compare(const EvalResults *a, const EvalResults *b, FILE *out, cJSON **json, FimiError *err) {
  EvalTaskTally *ta = NULL, *tb = NULL;
  int na = 0, nb = 0, rc = eval_task_tallies(a, &ta, &na, err);
  if (rc == 0) rc = eval_task_tallies(b, &tb, &nb, err);
  PairCounts all = {0}, kinds[TASK_KIND_COUNT] = {{0}};
  for (int k = 0; rc == 0 && k < na; k++) {
    int j = find_tally(tb, nb, ta[k].task_id);
    if (j < 0) rc = fimi_fail(err, "task %s is in %s but not in %s", ta[k].task_id, a->info.label, b->info.label);
    if (rc == 0) pair_add(&all, ta[k].reward_mean, tb[j].reward_mean);
    if (rc == 0) pair_add(&kinds[ta[k].kind], ta[k].reward_mean, tb[j].reward_mean);
  }
  if (rc == 0 && nb != na)
    rc = fimi_fail(err, "%s has %d tasks, %s has %d: compare runs on the same task file", a->info.label, na,
                   b->info.label, nb);
  if (rc == 0) {
    fprintf(out, "A = %s, B = %s: mean reward per task (trials averaged), paired by task id\n\n", a->info.label,
            b->info.label);
    fprintf(out, "| slice | tasks | A | B | B - A | B better | A better | ties | sign test p |\n");
    fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "a", a->info.label);
    cJSON_AddStringToObject(o, "b", b->info.label);
    cJSON_AddItemToObject(o, "overall", pair_row(out, "**overall**", &all));
    cJSON *kj = cJSON_AddObjectToObject(o, "kind");
    for (int v = 0; v < TASK_KIND_COUNT; v++)
      if (kinds[v].tasks) cJSON_AddItemToObject(kj, task_kind_name((TaskKind)v), pair_row(out, task_kind_name((TaskKind)v), &kinds[v]));
    if (json)
      *json = o;
    else
      cJSON_Delete(o);
  }
  free(ta);
  free(tb);
  return rc;
}

// ---- ladder ---------------------------------------------------------------------------------

#define LADDER_COLUMNS (1 + TASK_KIND_COUNT)

// Column 0: overall; 1 + kind: that kind (NaN when the run has none).
static void ladder_row(const EvalResults *r, double *cols) {
  EvalSlice s;
  eval_slice_compute(r, NULL, NULL, &s);
  cols[0] = s.reward;
  for (int v = 0; v < TASK_KIND_COUNT; v++) {
    eval_slice_compute(r, by_kind, &v, &s);
    cols[1 + v] = s.episodes ? s.reward : NAN;
  }
}

int eval_ladder(const EvalResults *runs, int n, FILE *out, FimiError *err) {
  double *cols = fimi_malloc((size_t)(n > 0 ? n : 1) * LADDER_COLUMNS * sizeof *cols, err);
  if (!cols) return -1;
  double best[LADDER_COLUMNS];
  for (int c = 0; c < LADDER_COLUMNS; c++) best[c] = -INFINITY;
  for (int i = 0; i < n; i++) {
    ladder_row(&runs[i], cols + (size_t)i * LADDER_COLUMNS);
    for (int c = 0; c < LADDER_COLUMNS; c++)
      if (cols[i * LADDER_COLUMNS + c] > best[c]) best[c] = cols[i * LADDER_COLUMNS + c];
  }
  fprintf(out, "| model | episodes | overall |");
  for (int v = 0; v < TASK_KIND_COUNT; v++) fprintf(out, " %s |", task_kind_name((TaskKind)v));
  fprintf(out, "\n|---|---:|---:|");
  for (int v = 0; v < TASK_KIND_COUNT; v++) fprintf(out, "---:|");
  fputc('\n', out);
  for (int i = 0; i < n; i++) {
    fprintf(out, "| %s | %d |", runs[i].info.label, runs[i].count);
    for (int c = 0; c < LADDER_COLUMNS; c++) {
      double v = cols[i * LADDER_COLUMNS + c];
      if (isnan(v))
        fprintf(out, " - |");
      else if (v >= best[c])
        fprintf(out, " **%.3f** |", v);
      else
        fprintf(out, " %.3f |", v);
    }
    fputc('\n', out);
  }
  free(cols);
  return ferror(out) ? fimi_fail(err, "writing the ladder failed") : 0;
}
