// train/run_inputs.h: RUN_DIR/inputs.json, the SHA-256 digests of the files
// a training run read (datasets, task files, tokenizer), so a checkpoint can
// be traced back to its exact inputs (docs/tracking.md). Defines
// RunInput, run_input_sha256 and run_inputs_write.
#ifndef FIMI_TRAIN_RUN_INPUTS_H
#define FIMI_TRAIN_RUN_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define RUN_INPUTS_MAX 8

typedef struct RunInput {
  const char *name;  // the config key, e.g. "data.train"
  const char *path;  // "" or NULL: not used by this run (left out)
  // Filled by run_inputs_write:
  char sha256[65];   // lowercase hex; "" when the file could not be read
  int64_t bytes;
} RunInput;

// The SHA-256 of a file's bytes as 64 lowercase hex digits in hex[65], and
// its size. A non-NULL *stop that becomes non-zero abandons the file (-1).
int run_input_sha256(const char *path, char hex[65], int64_t *bytes, const volatile int *stop, FimiError *err);

// Digests every input with a path and writes them to path as
// {"data.train": {"path": P, "sha256": H, "bytes": N}, ...}; an unreadable
// input is written with "error" instead (warned), not a failure.
int run_inputs_write(const char *path, RunInput *inputs, int count, const volatile int *stop, FimiError *err);

#endif
