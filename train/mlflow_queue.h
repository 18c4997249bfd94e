// train/mlflow_queue.h: the bounded queue between the training thread and
// the MLflow tracker's thread (train/mlflow_tracker.h). Defines
// MlflowQueue, mlflow_queue_init, _push, _take, _free.
//
// A ring of metrics, each owning its key. Full: the oldest metric is
// dropped (and counted) to make room, so a server that is down costs
// bounded memory and the newest values are the ones kept. Not locked
// itself: the tracker holds its mutex around every call.
#ifndef FIMI_TRAIN_MLFLOW_QUEUE_H
#define FIMI_TRAIN_MLFLOW_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/mlflow.h"

typedef struct MlflowQueue {
  MlflowMetric *items;  // ring; each key malloc'd and owned by the queue
  int capacity, head, count;
  int64_t dropped;  // metrics dropped because the queue was full
} MlflowQueue;

int mlflow_queue_init(MlflowQueue *q, int capacity, FimiError *err);

// Copies key. 1 when the oldest metric was dropped to make room, 0 when
// not, -1 when out of memory (the metric is lost, counted as dropped).
int mlflow_queue_push(MlflowQueue *q, const char *key, double value, int64_t timestamp_ms, int64_t step);

// Moves up to max of the oldest metrics into out (the caller then owns and
// frees their keys); returns how many.
int mlflow_queue_take(MlflowQueue *q, MlflowMetric *out, int max);

void mlflow_queue_free(MlflowQueue *q);

#endif
