// tests/test_dpo_train.c: the DPO objective on the shared loop (dpo/objective.h,
// dpo/reference.h). Batch layout (prompt + response rows, mask on response
// tokens only); at step 0 with the initial model as reference every reward is
// 0 and the loss is ln 2; the whole DPO step's loss and gradients against a
// float64 hand computation on an independent path (each row alone, unpadded,
// backward with dlogprobs = d loss / d sum computed here) and against central
// finite differences of that float64 loss; a tiny model trained through
// train_run on synthetic preference pairs reaches >= 0.9 accuracy on
// held-out pairs (measured here from fresh summed log-probs, not the
// objective's own eval path).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/rng.h"
#include "dpo/objective.h"
#include "dpo/reference.h"
#include "model/gemma.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/state.h"

#define MAX_PAIRS 64
#define MAX_TOK 4096

// An in-memory DPO dataset with room for the two ref_logp arrays.
typedef struct MemDpo {
  Dataset ds;
  int64_t offsets[3][MAX_PAIRS + 1];
  int32_t tokens[3][MAX_TOK];
  uint8_t mask[3][MAX_TOK];
  float ref_chosen[MAX_PAIRS], ref_rejected[MAX_PAIRS];
} MemDpo;

static void mem_init(MemDpo *m, int vocab) {
  memset(m, 0, sizeof *m);
  m->ds.kind = DATASET_DPO;
  m->ds.vocab_size = vocab;
  m->ds.num_fields = 3;
  const char *names[3] = {"prompt", "chosen", "rejected"};
  for (int f = 0; f < 3; f++) {
    strcpy(m->ds.fields[f].name, names[f]);
    m->ds.fields[f].offsets = m->offsets[f];
    m->ds.fields[f].tokens = m->tokens[f];
    m->ds.fields[f].loss_mask = m->mask[f];
  }
}

// Appends one row to field f; mask: the response's loss mask (prompt: 0).
static void mem_add(MemDpo *m, int f, const int32_t *ids, const uint8_t *mask, int len) {
  int64_t r = m->ds.rows, at = m->offsets[f][r];
  for (int i = 0; i < len; i++) {
    m->tokens[f][at + i] = ids[i];
    m->mask[f][at + i] = mask ? mask[i] : 0;
  }
  m->offsets[f][r + 1] = at + len;
}

static void mem_set_ref(MemDpo *m) {
  m->ds.num_ref = 2;
  strcpy(m->ds.ref_names[0], "ref_logp_chosen");
  strcpy(m->ds.ref_names[1], "ref_logp_rejected");
  m->ds.ref[0] = m->ref_chosen;
  m->ds.ref[1] = m->ref_rejected;
}

// Random pairs: prompt 3..6 ids, responses 2..5 ids, response masks with a 0
// here and there (as chat headers have).
static void mem_random(MemDpo *m, int pairs, int vocab, uint64_t seed) {
  mem_init(m, vocab);
  Rng rng;
  rng_seed(&rng, seed);
  for (int p = 0; p < pairs; p++) {
    for (int f = 0; f < 3; f++) {
      int32_t ids[8];
      uint8_t mask[8];
      int len = f == 0 ? 3 + (int)(rng_next_u64(&rng) % 4) : 2 + (int)(rng_next_u64(&rng) % 4);
      for (int i = 0; i < len; i++) {
        ids[i] = 1 + (int32_t)(rng_next_u64(&rng) % (uint64_t)(vocab - 1));
        mask[i] = f > 0 && (i == 0 || rng_next_u64(&rng) % 4 != 0);
      }
      mem_add(m, f, ids, f ? mask : NULL, len);
    }
    m->ds.rows++;
  }
}

static int make_model(GemmaModel *model, uint64_t seed, FimiError *err) {
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny", err) != 0 || gemma_model_create(model, &cfg, err) != 0) return -1;
  gemma_model_init_random(model, seed);
  return gemma_model_alloc_grads(model, err);
}

// ---- batch layout -------------------------------------------------------------------

static void test_batch_layout(void) {
  MemDpo *m = malloc(sizeof *m);
  mem_random(m, 4, 100, 3);
  DpoBatch b = {0};
  FimiError err = {0};
  int64_t rows[2] = {3, 1};
  CHECK(dpo_batch_build(&b, &m->ds, rows, 2, 99, 64, &err) == 0, "build: %s", err.message);
  CHECK(b.B == 4 && b.pairs == 2, "B %d pairs %d", b.B, b.pairs);
  int64_t loss_tokens = 0;
  for (int r = 0; r < b.B; r++) {
    int64_t pr = rows[r / 2], f = 1 + r % 2;
    int64_t po = m->offsets[0][pr], pl = m->offsets[0][pr + 1] - po;
    int64_t ro = m->offsets[f][pr], rl = m->offsets[f][pr + 1] - ro;
    long masked = 0;
    for (int t = 0; t < b.T; t++) {
      int i = r * b.T + t, n = t + 1;
      int32_t in = t < pl ? m->tokens[0][po + t] : t < pl + rl ? m->tokens[f][ro + t - pl] : 99;
      int32_t tg = n < pl ? m->tokens[0][po + n] : n < pl + rl ? m->tokens[f][ro + n - pl] : -1;
      float mk = n >= pl && n < pl + rl && m->mask[f][ro + n - pl] ? 1.0f : 0.0f;
      CHECK(b.tokens[i] == in && b.targets[i] == tg && b.mask[i] == mk, "row %d pos %d", r, t);
      masked += mk != 0;
    }
    CHECK(b.lengths[r] == masked, "row %d length %ld vs %ld", r, b.lengths[r], masked);
    loss_tokens += masked;
  }
  CHECK(b.loss_tokens == loss_tokens, "loss tokens");
  CHECK(dpo_batch_build(&b, &m->ds, rows, 2, 0, 4, &err) != 0 && strstr(err.message, "positions"), "too long: %s",
        err.message);
  int64_t bad = 9;
  CHECK(dpo_batch_build(&b, &m->ds, &bad, 1, 0, 64, &err) != 0, "row out of range must fail");
  m->ds.fields[2].name[0] = 'x';
  CHECK(dpo_batch_build(&b, &m->ds, rows, 2, 0, 64, &err) != 0 && strstr(err.message, "rejected"), "no rejected");
  dpo_batch_free(&b);
  free(m);
}

// ---- float64 hand reference -----------------------------------------------------------

// Summed response log-prob of pair p's chosen (side 0) or rejected (side 1),
// its row run alone; with dscale != 0 also backward with dlogprobs = dscale
// on the masked tokens.
static double row_sum(GemmaModel *model, const MemDpo *m, int p, int side, double dscale, FimiError *err) {
  int f = 1 + side;
  int64_t po = m->offsets[0][p], pl = m->offsets[0][p + 1] - po;
  int64_t ro = m->offsets[f][p], rl = m->offsets[f][p + 1] - ro;
  int T = (int)(pl + rl - 1);
  int tokens[32] = {0}, targets[32] = {0};
  float lp[32] = {0}, dlp[32] = {0};
  for (int t = 0; t < T; t++) {
    int n = t + 1;
    tokens[t] = t < pl ? m->tokens[0][po + t] : m->tokens[f][ro + t - pl];
    targets[t] = n < pl ? m->tokens[0][po + n] : m->tokens[f][ro + n - pl];
    dlp[t] = n >= pl && m->mask[f][ro + n - pl] ? (float)dscale : 0.0f;
  }
  if (gemma_forward(model, tokens, targets, 1, T, lp, err) != 0) return NAN;
  double sum = 0;
  for (int t = 0; t < T; t++)
    if (t + 1 >= pl && m->mask[f][ro + t + 1 - pl]) sum += lp[t];
  if (dscale != 0 && gemma_backward(model, dlp, err) != 0) return NAN;
  return sum;
}

static double log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

// The sigmoid DPO loss, mean over pairs, from rows run one by one.
static double hand_loss(GemmaModel *model, const MemDpo *m, double beta, FimiError *err) {
  double loss = 0;
  for (int p = 0; p < m->ds.rows; p++) {
    double c = row_sum(model, m, p, 0, 0, err), r = row_sum(model, m, p, 1, 0, err);
    double delta = (c - m->ref_chosen[p]) - (r - m->ref_rejected[p]);
    loss += -log_sigmoid(beta * delta);
  }
  return loss / (double)m->ds.rows;
}

static void copy_grads(const GemmaModel *model, double *out) {
  size_t G = model->globals_numel;
  for (size_t i = 0; i < G; i++) out[i] = model->globals_grad[i];
  for (int l = 0; l < model->config.num_hidden_layers; l++)
    for (size_t i = 0; i < model->layer_numel; i++) out[G + l * model->layer_numel + i] = model->layers_grad[l][i];
}

static float *param_at(GemmaModel *model, size_t k) {
  size_t G = model->globals_numel;
  if (k < G) return &model->globals[k];
  return &model->layers[(k - G) / model->layer_numel][(k - G) % model->layer_numel];
}

static void test_step0_and_gradients(void) {
  FimiError err = {0};
  GemmaModel model;
  CHECK(make_model(&model, 21, &err) == 0, "model: %s", err.message);
  MemDpo *m = malloc(sizeof *m);
  mem_random(m, 5, model.config.vocab_size, 8);
  mem_set_ref(m);
  // The reference pass with the model itself: step 0 has zero rewards, loss ln 2.
  CHECK(dpo_reference_compute(&model, &m->ds, 2, m->ref_chosen, m->ref_rejected, &err) == 0, "ref: %s", err.message);
  DpoConfig dc;
  dpo_config_default(&dc);
  DpoMonitorConfig mc;
  dpo_monitor_config_default(&mc);
  DpoObjective dpo;
  TrainObjective obj;
  CHECK(dpo_objective_init(&dpo, &model.config, &dc, &mc, NULL, &obj, &err) == 0, "init: %s", err.message);
  int64_t rows[5] = {0, 1, 2, 3, 4};
  TrainBatchResult res;
  gemma_model_zero_grads(&model);
  CHECK(obj.train_batch(obj.ctx, &model, &m->ds, rows, 5, 1.0, &res, &err) == 0, "train_batch: %s", err.message);
  CHECK_CLOSE(res.loss, log(2.0), 1e-5, "step-0 loss = ln 2");
  cJSON *line = cJSON_CreateObject();
  CHECK(dpo_objective_step_metrics(&dpo, 1, line, &err) == 0, "metrics: %s", err.message);
  const char *keys[] = {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/chosen_change"};
  for (int k = 0; k < 4; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(line, keys[k]);
    CHECK(cJSON_IsNumber(v) && fabs(v->valuedouble) < 1e-5, "step-0 %s = 0", keys[k]);
  }
  const cJSON *lc = cJSON_GetObjectItemCaseSensitive(line, "logps/chosen");
  double mean_ref = 0;
  for (int p = 0; p < 5; p++) mean_ref += m->ref_chosen[p] / 5.0;
  CHECK(cJSON_IsNumber(lc) && fabs(lc->valuedouble - mean_ref) < 1e-4, "logps/chosen = mean of the sums");
  cJSON_Delete(line);

  // Move the reference away so that the rewards and sigmoid weights differ per pair.
  for (int p = 0; p < 5; p++) {
    m->ref_chosen[p] += (float)(3.0 * (p - 2));
    m->ref_rejected[p] -= (float)(2.0 * (p % 3));
  }
  double beta = dc.beta, weight = 0.5;
  gemma_model_zero_grads(&model);
  CHECK(obj.train_batch(obj.ctx, &model, &m->ds, rows, 5, weight, &res, &err) == 0, "train_batch: %s", err.message);
  size_t n = model.globals_numel + model.layer_numel * (size_t)model.config.num_hidden_layers;
  double *batched = malloc(n * sizeof *batched), *single = malloc(n * sizeof *single);
  copy_grads(&model, batched);
  double want = hand_loss(&model, m, beta, &err);
  CHECK_CLOSE(res.loss, want, 1e-5, "DPO loss vs float64 hand loss");
  // Independent backward: per row, dlogprobs = weight * d(mean loss)/d sum.
  gemma_model_zero_grads(&model);
  for (int p = 0; p < 5; p++) {
    double c = row_sum(&model, m, p, 0, 0, &err), r = row_sum(&model, m, p, 1, 0, &err);
    double delta = (c - m->ref_chosen[p]) - (r - m->ref_rejected[p]);
    double g = -beta / (1.0 + exp(beta * delta)) * weight / 5.0;  // d/d c of -log sigmoid(beta delta) / 5
    row_sum(&model, m, p, 0, g, &err);
    row_sum(&model, m, p, 1, -g, &err);
  }
  copy_grads(&model, single);
  double rel = max_rel_error(batched, single, (long)n);
  CHECK(rel < 1e-4, "gradients vs per-row float64-weighted backward: max rel error %g", rel);
  // Central finite differences of the float64 hand loss at the largest gradients.
  for (int probe = 0; probe < 4; probe++) {
    size_t best = 0;
    for (size_t k = 0; k < n; k++)
      if (fabs(batched[k]) > fabs(batched[best])) best = k;
    float *w = param_at(&model, best), saved = *w;
    double h = 1e-2;
    *w = saved + (float)h;
    double up = hand_loss(&model, m, beta, &err);
    *w = saved - (float)h;
    double down = hand_loss(&model, m, beta, &err);
    *w = saved;
    double fd = weight * (up - down) / (2 * h);
    CHECK(fabs(fd - batched[best]) <= 0.05 * fabs(batched[best]) + 1e-6,
          "finite difference at param %zu: fd %.6g vs backward %.6g", best, fd, batched[best]);
    batched[best] = 0;  // the next probe takes the next largest
  }
  // A non-finite reference makes the step skippable (NaN loss), not an error.
  m->ref_chosen[0] = NAN;
  gemma_model_zero_grads(&model);
  CHECK(obj.train_batch(obj.ctx, &model, &m->ds, rows, 5, 1.0, &res, &err) == 0 && isnan(res.loss),
        "NaN reference -> NaN loss");
  free(batched);
  free(single);
  dpo_objective_free(&dpo);
  gemma_model_free(&model);
  free(m);
}

// ---- accuracy on held-out pairs -----------------------------------------------------------

// Prompt: bos + 4 random ids in [10, 200); chosen: 3 ids in [200, 230);
// rejected: 3 ids in [300, 330). A preference for the chosen range carries
// over to prompts and responses never seen in training.
static void synthetic_pairs(MemDpo *m, int pairs, uint64_t seed) {
  mem_init(m, 512);
  Rng rng;
  rng_seed(&rng, seed);
  for (int p = 0; p < pairs; p++) {
    int32_t prompt[5] = {2}, chosen[3], rejected[3];
    uint8_t ones[3] = {1, 1, 1};
    for (int i = 1; i < 5; i++) prompt[i] = 10 + (int32_t)(rng_next_u64(&rng) % 190);
    for (int i = 0; i < 3; i++) {
      chosen[i] = 200 + (int32_t)(rng_next_u64(&rng) % 30);
      rejected[i] = 300 + (int32_t)(rng_next_u64(&rng) % 30);
    }
    mem_add(m, 0, prompt, NULL, 5);
    mem_add(m, 1, chosen, ones, 3);
    mem_add(m, 2, rejected, ones, 3);
    m->ds.rows++;
  }
  mem_set_ref(m);
}

static double accuracy(GemmaModel *model, const MemDpo *m, FimiError *err) {
  float c[MAX_PAIRS], r[MAX_PAIRS];
  if (dpo_reference_compute(model, &m->ds, 4, c, r, err) != 0) return -1;
  int right = 0;
  for (int p = 0; p < m->ds.rows; p++) right += (c[p] - m->ref_chosen[p]) > (r[p] - m->ref_rejected[p]);
  return right / (double)m->ds.rows;
}

static void test_heldout_accuracy(void) {
  FimiError err = {0};
  char base[] = "/tmp/fimi_dpo_train_XXXXXX";
  CHECK(mkdtemp(base) != NULL, "mkdtemp");
  MemDpo *train = malloc(sizeof *train), *eval = malloc(sizeof *eval);
  synthetic_pairs(train, 48, 1);
  synthetic_pairs(eval, 16, 2);
  GemmaModel model;
  CHECK(make_model(&model, 33, &err) == 0, "model: %s", err.message);
  CHECK(dpo_reference_compute(&model, &train->ds, 8, train->ref_chosen, train->ref_rejected, &err) == 0 &&
            dpo_reference_compute(&model, &eval->ds, 8, eval->ref_chosen, eval->ref_rejected, &err) == 0,
        "ref: %s", err.message);
  double before = accuracy(&model, eval, &err);
  AdamWConfig ac;
  AdamWDecayRules rules;
  adamw_config_default(&ac);
  adamw_decay_rules_default(&rules);
  TrainState state;
  CHECK(train_state_init(&state, &model, &ac, &rules, &err) == 0, "state: %s", err.message);
  DpoConfig dc;
  dpo_config_default(&dc);
  DpoMonitorConfig mc;
  dpo_monitor_config_default(&mc);
  DpoObjective dpo;
  TrainObjective obj;
  CHECK(dpo_objective_init(&dpo, &model.config, &dc, &mc, NULL, &obj, &err) == 0, "init: %s", err.message);
  TrainLoopConfig c;
  train_loop_config_default(&c);
  c.out_dir = base;
  c.steps = 20;
  c.micro_batch = 8;
  c.eval_every = 10;
  c.schedule.kind = LR_SCHEDULE_COSINE;
  c.schedule.base_lr = 2e-3;
  c.schedule.warmup_steps = 2;
  c.schedule.total_steps = 20;
  c.step_metrics = dpo_objective_step_metrics;
  c.step_metrics_ctx = &dpo;
  TrainSummary s;
  CHECK(train_run(&c, &state, &obj, &train->ds, &eval->ds, &s, &err) == 0, "train_run: %s", err.message);
  double after = accuracy(&model, eval, &err);
  printf("held-out accuracy %.3f -> %.3f, eval loss %.4f, train loss %.4f -> %.4f\n", before, after, s.eval_loss,
         s.first_loss, s.last_loss);
  CHECK(before < 0.9 && after >= 0.9, "held-out accuracy %.3f -> %.3f (want >= 0.9)", before, after);
  CHECK(dpo.have_eval && fabs(dpo.last_eval.rewards_accuracies - after) < 1e-9,
        "objective's eval accuracy %.3f vs measured %.3f", dpo.last_eval.rewards_accuracies, after);
  CHECK(s.eval_loss < log(2.0) && s.last_loss < s.first_loss, "losses fall below ln 2");
  CHECK(dpo.last.chosen_change > dpo.last.rejected_change, "chosen rises relative to rejected");
  // metrics.jsonl carries the DPO fields.
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/metrics.jsonl", base);
  FILE *f = fopen(path, "rb");
  char line[4096];
  int lines = 0, with = 0;
  while (f && fgets(line, sizeof line, f)) {
    lines++;
    with += strstr(line, "\"rewards/accuracies\"") && strstr(line, "\"logps/rejected\"") != NULL;
  }
  if (f) fclose(f);
  CHECK(lines == 20 && with == 20, "metrics lines %d, with DPO fields %d", lines, with);
  dpo_objective_free(&dpo);
  train_state_free(&state);
  gemma_model_free(&model);
  free(train);
  free(eval);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
}

int main(void) {
  test_batch_layout();
  test_step0_and_gradients();
  test_heldout_accuracy();
  TEST_MAIN_END();
}
