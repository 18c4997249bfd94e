// train/mlflow_queue.c: the tracker's bounded drop-oldest queue (see mlflow_queue.h).
#include "train/mlflow_queue.h"

#include <stdlib.h>
#include <string.h>

int mlflow_queue_init(MlflowQueue *q, int capacity, FimiError *err) {
  memset(q, 0, sizeof *q);
  if (capacity < 1) return fimi_fail(err, "MLflow queue capacity must be >= 1 (got %d)", capacity);
  if (!(q->items = fimi_calloc((size_t)capacity, sizeof *q->items, err))) return -1;
  q->capacity = capacity;
  return 0;
}

int mlflow_queue_push(MlflowQueue *q, const char *key, double value, int64_t timestamp_ms, int64_t step) {
  char *copy = strdup(key);
  if (!copy) {
    q->dropped++;
    return -1;
  }
  int dropped = 0;
  if (q->count == q->capacity) {
    free((char *)q->items[q->head].key);
    q->head = (q->head + 1) % q->capacity;
    q->count--;
    q->dropped++;
    dropped = 1;
  }
  q->items[(q->head + q->count) % q->capacity] = (MlflowMetric){copy, value, timestamp_ms, step};
  q->count++;
  return dropped;
}

int mlflow_queue_take(MlflowQueue *q, MlflowMetric *out, int max) {
  int n = 0;
  for (; n < max && q->count > 0; n++) {
    out[n] = q->items[q->head];
    q->head = (q->head + 1) % q->capacity;
    q->count--;
  }
  return n;
}

void mlflow_queue_free(MlflowQueue *q) {
  for (int i = 0; i < q->count; i++) free((char *)q->items[(q->head + i) % q->capacity].key);
  free(q->items);
  memset(q, 0, sizeof *q);
}
