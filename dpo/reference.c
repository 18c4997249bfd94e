// dpo/reference.c: the DPO reference pass: see reference.h.
#include "dpo/reference.h"

#include <math.h>
#include <stdlib.h>

#include "core/log.h"
#include "dpo/objective.h"

int dpo_reference_compute(GemmaModel *model, const Dataset *ds, int64_t micro_batch, float *chosen, float *rejected,
                          FimiError *err) {
  if (micro_batch < 1 || micro_batch > 65536)
    return fimi_fail(err, "DPO reference pass: micro_batch %lld outside [1, 65536]", (long long)micro_batch);
  const GemmaConfig *c = &model->config;
  int pad = c->pad_token_id >= 0 && c->pad_token_id < c->vocab_size ? c->pad_token_id : 0;
  DpoBatch b = {0};
  int64_t *idx = fimi_malloc((size_t)micro_batch * sizeof *idx, err);
  int rc = idx ? 0 : -1;
  for (int64_t start = 0; rc == 0 && start < ds->rows; start += micro_batch) {
    int64_t n = ds->rows - start < micro_batch ? ds->rows - start : micro_batch;
    for (int64_t i = 0; i < n; i++) idx[i] = start + i;
    rc = dpo_batch_build(&b, ds, idx, n, pad, c->max_position_embeddings, err);
    if (rc == 0) rc = gemma_forward(model, b.tokens, b.targets, b.B, b.T, b.logprobs, err);
    if (rc != 0) break;
    dpo_batch_sums(&b);
    for (int64_t i = 0; i < n; i++) {
      chosen[start + i] = (float)b.sums[2 * i];
      rejected[start + i] = (float)b.sums[2 * i + 1];
      if (!isfinite(chosen[start + i]) || !isfinite(rejected[start + i])) {
        rc = fimi_fail(err, "DPO reference pass: pair %lld has a non-finite log-prob", (long long)(start + i));
        break;
      }
    }
  }
  dpo_batch_free(&b);
  free(idx);
  return rc;
}

int dpo_reference_ensure(GemmaModel *model, const char *path, int64_t micro_batch, int *computed, FimiError *err) {
  *computed = 0;
  Dataset ds;
  if (dataset_open(path, model->config.vocab_size, &ds, err) != 0) return -1;
  int rc = 0;
  if (ds.kind != DATASET_DPO) rc = fimi_fail(err, "%s is not a DPO dataset (fimi data tokenize --kind dpo)", path);
  if (rc == 0 && dataset_ref(&ds, "ref_logp_chosen") && dataset_ref(&ds, "ref_logp_rejected")) {
    dataset_close(&ds);
    return 0;
  }
  float *chosen = NULL, *rejected = NULL;
  if (rc == 0 && (!(chosen = calloc((size_t)ds.rows + 1, sizeof *chosen)) ||
                  !(rejected = calloc((size_t)ds.rows + 1, sizeof *rejected))))
    rc = fimi_fail(err, "DPO reference pass: out of memory for %lld rows", (long long)ds.rows);
  if (rc == 0) {
    log_info("DPO reference pass over %s (%lld pairs)", path, (long long)ds.rows);
    rc = dpo_reference_compute(model, &ds, micro_batch, chosen, rejected, err);
  }
  int64_t rows = ds.rows;
  dataset_close(&ds);
  if (rc == 0) rc = dataset_write_ref_logp(path, "ref_logp_chosen", chosen, rows, err);
  if (rc == 0) rc = dataset_write_ref_logp(path, "ref_logp_rejected", rejected, rows, err);
  if (rc != 0) fimi_fail_wrap(err, "%s", path);
  free(chosen);
  free(rejected);
  *computed = rc == 0;
  return rc;
}
