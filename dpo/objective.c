// dpo/objective.c: the DPO objective on the shared loop: see objective.h.
#include "dpo/objective.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "train/batch.h"

// ---- batch -------------------------------------------------------------------------

static int grow_positions(DpoBatch *b, size_t n, FimiError *err) {
  return train_batch_reserve(&b->tokens, &b->targets, &b->mask, &b->dlogprobs, &b->logprobs, &b->capacity, n, "DPO",
                             err);
}

static int grow_rows(DpoBatch *b, size_t rows, FimiError *err) {
  if (rows <= b->row_capacity) return 0;
  double *sums = realloc(b->sums, rows * sizeof *sums);
  if (sums) b->sums = sums;
  long *lengths = sums ? realloc(b->lengths, rows * sizeof *lengths) : NULL;
  if (lengths) b->lengths = lengths;
  if (!lengths) return fimi_fail(err, "DPO batch: out of memory for %zu rows", rows);
  b->row_capacity = rows;
  return 0;
}

typedef struct PairRow {
  const int32_t *ids[2];  // prompt, response
  const uint8_t *mask[2];
  int64_t len[2];
} PairRow;

// Row `row` of the prompt field and of `response_field`.
static int pair_row(const Dataset *ds, const int fields[3], int64_t row, int side, PairRow *p, FimiError *err) {
  if (dataset_row(ds, fields[0], row, &p->ids[0], &p->mask[0], &p->len[0], err) != 0) return -1;
  return dataset_row(ds, fields[1 + side], row, &p->ids[1], &p->mask[1], &p->len[1], err);
}

int dpo_batch_build(DpoBatch *b, const Dataset *ds, const int64_t *rows, int64_t count, int pad_id, int max_len,
                    FimiError *err) {
  int fields[3] = {dataset_field_index(ds, "prompt"), dataset_field_index(ds, "chosen"),
                   dataset_field_index(ds, "rejected")};
  if (fields[0] < 0 || fields[1] < 0 || fields[2] < 0)
    return fimi_fail(err, "DPO needs a dataset with prompt, chosen and rejected fields (fimi data tokenize --kind dpo)");
  if (count < 1 || count > INT32_MAX / 2) return fimi_fail(err, "DPO batch: invalid pair count %lld", (long long)count);
  int64_t longest = 2;
  for (int64_t i = 0; i < count; i++)
    for (int side = 0; side < 2; side++) {
      PairRow p;
      if (pair_row(ds, fields, rows[i], side, &p, err) != 0) return -1;
      int64_t len = p.len[0] + p.len[1];
      if (len - 1 > max_len)
        return fimi_fail(err, "DPO batch: row %lld prompt + %s has %lld tokens, more than the model's %d positions + 1",
                         (long long)rows[i], side ? "rejected" : "chosen", (long long)len, max_len);
      if (len > longest) longest = len;
    }
  int T = (int)(longest - 1), B = (int)(2 * count);
  if ((size_t)B > SIZE_MAX / (size_t)T) return fimi_fail(err, "DPO batch: size overflow");
  if (grow_positions(b, (size_t)B * (size_t)T, err) != 0 || grow_rows(b, (size_t)B, err) != 0) return -1;
  b->pairs = (int)count;
  b->B = B;
  b->T = T;
  b->tokens_real = b->loss_tokens = 0;
  for (int r = 0; r < B; r++) {
    PairRow p;
    if (pair_row(ds, fields, rows[r / 2], r % 2, &p, err) != 0) return -1;
    int64_t plen = p.len[0], len = p.len[0] + p.len[1];
    b->lengths[r] = 0;
    for (int t = 0; t < T; t++) {
      size_t i = (size_t)r * T + t;
      int64_t next = t + 1;  // position t predicts token t + 1 of prompt + response
      int real = next < len;
      b->tokens[i] = t < len ? (t < plen ? p.ids[0][t] : p.ids[1][t - plen]) : pad_id;
      b->targets[i] = real ? (next < plen ? p.ids[0][next] : p.ids[1][next - plen]) : -1;
      // Only response tokens are scored: the prompt's mask never counts.
      b->mask[i] = real && next >= plen && p.mask[1][next - plen] ? 1.0f : 0.0f;
      b->tokens_real += t < len;
      b->lengths[r] += b->mask[i] != 0.0f;
    }
    b->loss_tokens += b->lengths[r];
  }
  return 0;
}

void dpo_batch_sums(DpoBatch *b) {
  for (int r = 0; r < b->B; r++) {
    double sum = 0;
    for (int t = 0; t < b->T; t++) {
      size_t i = (size_t)r * b->T + t;
      if (b->mask[i] != 0.0f) sum += (double)b->logprobs[i];
    }
    b->sums[r] = sum;
  }
}

void dpo_batch_free(DpoBatch *b) {
  free(b->tokens);
  free(b->targets);
  free(b->mask);
  free(b->dlogprobs);
  free(b->logprobs);
  free(b->sums);
  free(b->lengths);
  memset(b, 0, sizeof *b);
}

int dpo_reference_kind_parse(const char *name, DpoReferenceKind *out, FimiError *err) {
  if (!strcmp(name, "precomputed")) *out = DPO_REFERENCE_PRECOMPUTED;
  else if (!strcmp(name, "model")) *out = DPO_REFERENCE_MODEL;
  else return fimi_fail(err, "dpo.reference: expected precomputed or model, got \"%s\"", name);
  return 0;
}

// ---- the pairs of a micro-batch --------------------------------------------------

static int grow_pairs(DpoObjective *d, size_t n, FimiError *err) {
  if (n <= d->pair_capacity) return 0;
  DpoPair *pairs = realloc(d->pairs, n * sizeof *pairs);
  if (pairs) d->pairs = pairs;
  double *dc = pairs ? realloc(d->dchosen, n * sizeof *dc) : NULL;
  if (dc) d->dchosen = dc;
  double *dr = dc ? realloc(d->drejected, n * sizeof *dr) : NULL;
  if (dr) d->drejected = dr;
  if (!dr) return fimi_fail(err, "DPO: out of memory for %zu pairs", n);
  d->pair_capacity = n;
  return 0;
}

// Reference sums of the batch's pairs: from the frozen model (one forward
// over the same rows) or the dataset's precomputed values.
static int reference_sums(DpoObjective *d, const Dataset *ds, const int64_t *rows, FimiError *err) {
  DpoBatch *b = &d->batch;
  if (d->reference) {
    if (gemma_forward(d->reference, b->tokens, b->targets, b->B, b->T, b->logprobs, err) != 0)
      return fimi_fail_wrap(err, "reference model forward");
    dpo_batch_sums(b);
    for (int i = 0; i < b->pairs; i++) {
      d->pairs[i].ref_chosen = b->sums[2 * i];
      d->pairs[i].ref_rejected = b->sums[2 * i + 1];
    }
    return 0;
  }
  const float *chosen = dataset_ref(ds, "ref_logp_chosen"), *rejected = dataset_ref(ds, "ref_logp_rejected");
  if (!chosen || !rejected)
    return fimi_fail(err, "dataset has no ref_logp_chosen / ref_logp_rejected: run the reference pass "
                          "(fimi train does it when dpo.reference = precomputed) or set dpo.reference = model");
  for (int i = 0; i < b->pairs; i++) {
    d->pairs[i].ref_chosen = chosen[rows[i]];
    d->pairs[i].ref_rejected = rejected[rows[i]];
  }
  return 0;
}

// The RPO weight of every pair of a built micro-batch: pairs / chosen tokens.
static double micro_batch_nll_weight(const DpoBatch *b) {
  long chosen = 0;
  for (int i = 0; i < b->pairs; i++) chosen += b->lengths[2 * i];
  return (double)b->pairs / (double)(chosen > 0 ? chosen : 1);
}

// Builds the batch, fills the reference sums, runs the policy forward and
// fills the policy sums of d->pairs. nll_weight < 0: the RPO weight of these
// rows alone; else the whole micro-batch's (a rank's unit is a part of it).
static int forward_pairs(DpoObjective *d, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                         double nll_weight, FimiError *err) {
  DpoBatch *b = &d->batch;
  if (dpo_batch_build(b, ds, rows, count, d->pad_id, d->max_len, err) != 0) return -1;
  if (grow_pairs(d, (size_t)count, err) != 0) return -1;
  if (reference_sums(d, ds, rows, err) != 0) return -1;
  int rc = d->ops ? d->ops->forward(d->ops->ctx, b->tokens, b->targets, b->B, b->T, b->logprobs, err)
                  : gemma_forward(model, b->tokens, b->targets, b->B, b->T, b->logprobs, err);
  if (rc != 0) return -1;
  dpo_batch_sums(b);
  if (nll_weight < 0) nll_weight = micro_batch_nll_weight(b);
  for (int i = 0; i < b->pairs; i++) {
    DpoPair *p = &d->pairs[i];
    p->policy_chosen = b->sums[2 * i];
    p->policy_rejected = b->sums[2 * i + 1];
    p->chosen_tokens = b->lengths[2 * i];
    p->rejected_tokens = b->lengths[2 * i + 1];
    p->nll_weight = nll_weight;
  }
  return 0;
}

// Each response's masked tokens get d loss / d (its summed log-prob).
static void fill_dlogprobs(DpoObjective *d) {
  DpoBatch *b = &d->batch;
  for (int r = 0; r < b->B; r++) {
    float g = (float)(r % 2 ? d->drejected[r / 2] : d->dchosen[r / 2]);
    for (int t = 0; t < b->T; t++) {
      size_t i = (size_t)r * b->T + t;
      b->dlogprobs[i] = b->mask[i] * g;
    }
  }
}

// ---- across ranks: one pair per unit (DpoModelOps) ------------------------------

// Runs this rank's units of rows[0..count) (ops->unit pairs each): forward,
// loss, and (backward) the backward with the loss scaled by scale. Adds the
// real units' sums to *sums; *bad counts pairs of units with a non-finite
// log-prob (their gradients are zeroed, and the caller reports a NaN loss so
// that the step is skipped).
static int run_units(DpoObjective *d, const Dataset *ds, const int64_t *rows, int64_t count, int backward,
                     double scale, double nll_weight, DpoSums *sums, double *bad, FimiError *err) {
  const DpoModelOps *ops = d->ops;
  int64_t k = ops->unit > 0 ? ops->unit : 1, units = (count + k - 1) / k;
  int64_t rounds = (units + ops->world - 1) / ops->world;
  for (int64_t j = 0; j < rounds; j++) {
    int64_t u = j * ops->world + ops->rank;
    int real = u < units;
    int64_t first = real ? u * k : 0, n = count - first < k ? count - first : k;
    if (forward_pairs(d, NULL, ds, &rows[first], n, nll_weight, err) != 0)
      return fimi_fail_wrap(err, "rank %d, unit %lld", ops->rank, (long long)u);
    DpoSums unit;
    dpo_sums_clear(&unit);
    int finite =
        dpo_batch_loss(&d->config, d->pairs, (int)n, real ? scale : 0.0, d->dchosen, d->drejected, &unit, err) == 0;
    if (!finite) {
      log_warn("DPO: %s", err->message);
      memset(err, 0, sizeof *err);
      for (int64_t i = 0; i < n; i++) d->dchosen[i] = d->drejected[i] = 0.0;
      *bad += real ? (double)n : 0.0;
    }
    if (real && finite)
      for (int m = 0; m < DPO_SUM_COUNT; m++) sums->v[m] += unit.v[m];
    if (!backward) continue;
    fill_dlogprobs(d);
    if (ops->backward(ops->ctx, d->batch.dlogprobs, err) != 0)
      return fimi_fail_wrap(err, "rank %d, unit %lld", ops->rank, (long long)u);
  }
  return 0;
}

// The rank-summed sums and count of non-finite pairs (one collective).
static int reduce_units(DpoObjective *d, DpoSums *sums, double *bad, FimiError *err) {
  double all[DPO_SUM_COUNT + 1];
  memcpy(all, sums->v, sizeof sums->v);
  all[DPO_SUM_COUNT] = *bad;
  if (d->ops->all_reduce_sum(d->ops->ctx, all, DPO_SUM_COUNT + 1, err) != 0) return -1;
  memcpy(sums->v, all, sizeof sums->v);
  *bad = all[DPO_SUM_COUNT];
  return 0;
}

static int sharded_train_batch(DpoObjective *d, const Dataset *ds, const int64_t *rows, int64_t count, double weight,
                               TrainBatchResult *out, FimiError *err) {
  // The whole micro-batch's token counts: every rank holds the same rows.
  if (dpo_batch_build(&d->batch, ds, rows, count, d->pad_id, d->max_len, err) != 0) return -1;
  out->tokens = d->batch.tokens_real;
  out->loss_tokens = d->batch.loss_tokens;
  DpoSums sums;
  dpo_sums_clear(&sums);
  double bad = 0;
  // TRL's loss is the mean over the pairs: each pair's gradient is scaled by
  // weight / (pairs in the whole micro-batch), as on one process.
  double nll_weight = micro_batch_nll_weight(&d->batch);
  if (run_units(d, ds, rows, count, 1, weight / (double)count, nll_weight, &sums, &bad, err) != 0) return -1;
  if (reduce_units(d, &sums, &bad, err) != 0) return -1;
  if (bad > 0 || sums.v[DPO_SUM_PAIRS] <= 0) {
    out->loss = NAN;  // the same on every rank: the loop skips the step
    return 0;
  }
  for (int k = 0; k < DPO_SUM_COUNT; k++) d->step_sums.v[k] += sums.v[k];
  out->loss = sums.v[DPO_SUM_LOSS] / sums.v[DPO_SUM_PAIRS];
  return 0;
}

static int sharded_eval_batch(DpoObjective *d, const Dataset *ds, const int64_t *rows, int64_t count,
                              double *loss_sum, double *count_out, FimiError *err) {
  DpoSums sums;
  dpo_sums_clear(&sums);
  double bad = 0;
  // The whole micro-batch's RPO weight (every rank holds the same rows).
  if (dpo_batch_build(&d->batch, ds, rows, count, d->pad_id, d->max_len, err) != 0) return -1;
  double nll_weight = micro_batch_nll_weight(&d->batch);
  if (run_units(d, ds, rows, count, 0, 1.0, nll_weight, &sums, &bad, err) != 0) return -1;
  if (reduce_units(d, &sums, &bad, err) != 0) return -1;
  if (bad > 0) return fimi_fail(err, "DPO evaluation: %.0f pairs had a non-finite log-prob", bad);
  for (int k = 0; k < DPO_SUM_COUNT; k++) d->eval_sums.v[k] += sums.v[k];
  *loss_sum += sums.v[DPO_SUM_LOSS];
  *count_out += sums.v[DPO_SUM_PAIRS];
  return 0;
}

// ---- the objective -------------------------------------------------------------

static int dpo_train_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                           double weight, TrainBatchResult *out, FimiError *err) {
  DpoObjective *d = ctx;
  DpoBatch *b = &d->batch;
  memset(out, 0, sizeof *out);
  if (d->ops) return sharded_train_batch(d, ds, rows, count, weight, out, err);
  if (forward_pairs(d, model, ds, rows, count, -1.0, err) != 0) return -1;
  out->tokens = b->tokens_real;
  out->loss_tokens = b->loss_tokens;
  // TRL's loss is the mean over the pairs; the loop's weight is 1/grad_accum.
  DpoSums sums;
  dpo_sums_clear(&sums);
  if (dpo_batch_loss(&d->config, d->pairs, b->pairs, weight / (double)b->pairs, d->dchosen, d->drejected, &sums,
                     err) != 0) {
    // A non-finite log-prob: report a NaN loss so that the loop skips the step.
    log_warn("DPO: %s", err->message);
    memset(err, 0, sizeof *err);
    out->loss = NAN;
    return 0;
  }
  fill_dlogprobs(d);
  if (gemma_backward(model, b->dlogprobs, err) != 0) return -1;
  for (int k = 0; k < DPO_SUM_COUNT; k++) d->step_sums.v[k] += sums.v[k];
  out->loss = sums.v[DPO_SUM_LOSS] / sums.v[DPO_SUM_PAIRS];
  return 0;
}

static int dpo_eval_batch(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                          double *loss_sum, double *count_out, FimiError *err) {
  DpoObjective *d = ctx;
  if (d->ops) return sharded_eval_batch(d, ds, rows, count, loss_sum, count_out, err);
  if (forward_pairs(d, model, ds, rows, count, -1.0, err) != 0) return -1;
  DpoSums sums;
  dpo_sums_clear(&sums);
  if (dpo_batch_loss(&d->config, d->pairs, d->batch.pairs, 1.0, d->dchosen, d->drejected, &sums, err) != 0)
    return fimi_fail_wrap(err, "DPO evaluation");
  for (int k = 0; k < DPO_SUM_COUNT; k++) d->eval_sums.v[k] += sums.v[k];
  *loss_sum += sums.v[DPO_SUM_LOSS];
  *count_out += sums.v[DPO_SUM_PAIRS];
  return 0;
}

// ---- metrics ----------------------------------------------------------------------

static void add_metrics(cJSON *line, const char *prefix, const DpoMetrics *m, int changes, int rpo) {
  char key[64];
#define ADD(name, value)                                   \
  do {                                                     \
    snprintf(key, sizeof key, "%s%s", prefix, name);       \
    cJSON_AddNumberToObject(line, key, value);             \
  } while (0)
  ADD("rewards/chosen", m->rewards_chosen);
  ADD("rewards/rejected", m->rewards_rejected);
  ADD("rewards/margins", m->rewards_margins);
  ADD("rewards/accuracies", m->rewards_accuracies);
  ADD("logps/chosen", m->logps_chosen);
  ADD("logps/rejected", m->logps_rejected);
  if (rpo) ADD("nll_loss", m->nll_loss);
  // The loss itself is the loop's "loss" / "eval_loss" field.
  if (changes) {
    ADD("rewards/chosen_change", m->chosen_change);
    ADD("rewards/rejected_change", m->rejected_change);
  }
#undef ADD
}

int dpo_objective_step_metrics(void *ctx, int64_t step, struct cJSON *line, FimiError *err) {
  DpoObjective *d = ctx;
  if (d->step_sums.v[DPO_SUM_PAIRS] > 0) {
    if (dpo_metrics_from_sums(&d->step_sums, &d->last, err) != 0) return -1;
    dpo_baseline_apply(&d->baseline, &d->last);
    add_metrics(line, "", &d->last, 1, d->config.rpo_alpha > 0);
    DpoMonitorReport report;
    // Across ranks every rank has the same metrics; rank 0 speaks for them.
    if (dpo_monitor_update(&d->monitor, &d->last, &report) && (!d->ops || d->ops->rank == 0))
      log_warn("step %lld: %s", (long long)step, report.message);
  }
  dpo_sums_clear(&d->step_sums);
  if (d->eval_sums.v[DPO_SUM_PAIRS] > 0) {
    if (dpo_metrics_from_sums(&d->eval_sums, &d->last_eval, err) != 0) return -1;
    d->have_eval = 1;
    add_metrics(line, "eval_", &d->last_eval, 0, d->config.rpo_alpha > 0);
  }
  dpo_sums_clear(&d->eval_sums);
  return 0;
}

int dpo_objective_state_save(void *ctx, cJSON *state, FimiError *err) {
  DpoObjective *d = ctx;
  if (!d->baseline.set) return 0;
  if (!cJSON_AddNumberToObject(state, "baseline_rewards_chosen", d->baseline.rewards_chosen) ||
      !cJSON_AddNumberToObject(state, "baseline_rewards_rejected", d->baseline.rewards_rejected))
    return fimi_fail(err, "DPO state: out of memory");
  return 0;
}

int dpo_objective_state_load(void *ctx, const cJSON *state, FimiError *err) {
  DpoObjective *d = ctx;
  if (json_is_missing(state, "baseline_rewards_chosen")) return 0;
  if (json_get_double(state, "baseline_rewards_chosen", 1, &d->baseline.rewards_chosen, "objective_state", err) != 0 ||
      json_get_double(state, "baseline_rewards_rejected", 1, &d->baseline.rewards_rejected, "objective_state", err) != 0)
    return -1;
  d->baseline.set = 1;
  return 0;
}

int dpo_objective_init(DpoObjective *dpo, const GemmaConfig *config, const DpoConfig *dpo_config,
                       const DpoMonitorConfig *monitor_config, GemmaModel *reference, TrainObjective *out,
                       FimiError *err) {
  memset(dpo, 0, sizeof *dpo);
  memset(out, 0, sizeof *out);
  if (dpo_config_validate(dpo_config, err) != 0) return -1;
  if (dpo_monitor_init(&dpo->monitor, monitor_config, err) != 0) return -1;
  dpo->config = *dpo_config;
  dpo->pad_id = config->pad_token_id >= 0 && config->pad_token_id < config->vocab_size ? config->pad_token_id : 0;
  dpo->max_len = config->max_position_embeddings;
  dpo->reference = reference;
  dpo_sums_clear(&dpo->step_sums);
  dpo_sums_clear(&dpo->eval_sums);
  out->name = "dpo";
  out->ctx = dpo;
  out->train_batch = dpo_train_batch;
  out->eval_batch = dpo_eval_batch;
  return 0;
}

void dpo_objective_set_model_ops(DpoObjective *dpo, const DpoModelOps *ops) { dpo->ops = ops; }

void dpo_objective_free(DpoObjective *dpo) {
  dpo_batch_free(&dpo->batch);
  free(dpo->pairs);
  free(dpo->dchosen);
  free(dpo->drejected);
  dpo->pairs = NULL;
  dpo->dchosen = dpo->drejected = NULL;
  dpo->pair_capacity = 0;
}
