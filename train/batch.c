// train/batch.c: see batch.h.
#include "train/batch.h"

#include <stdlib.h>

// realloc that keeps *p on failure; returns 0 on success.
static int grow_array(void **p, size_t n, size_t elem) {
  void *bigger = realloc(*p, n * elem);
  if (!bigger) return -1;
  *p = bigger;
  return 0;
}

int train_batch_reserve(int **tokens, int **targets, float **mask, float **dlogprobs, float **logprobs,
                        size_t *capacity, size_t n, const char *what, FimiError *err) {
  if (n <= *capacity) return 0;
  if (grow_array((void **)tokens, n, sizeof **tokens) || grow_array((void **)targets, n, sizeof **targets) ||
      grow_array((void **)mask, n, sizeof **mask) || grow_array((void **)dlogprobs, n, sizeof **dlogprobs) ||
      grow_array((void **)logprobs, n, sizeof **logprobs))
    return fimi_fail(err, "%s batch: out of memory for %zu positions", what, n);
  *capacity = n;
  return 0;
}
