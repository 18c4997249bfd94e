// train/checkpoint.h: training checkpoints (DESIGN.md section 9,
// docs/training.md). Defines TrainerState (what the loop needs besides
// weights and optimizer to continue exactly) and checkpoint_save,
// checkpoint_find_latest, checkpoint_load, checkpoint_clean_temp.
//
// Layout of OUT/step_000180/:
//   config.json, model.safetensors   gemma_save_pretrained (F32, exact)
//   tokenizer.json                   copied from the initial model
//   optimizer.h5                     one float32 dataset per AdamW state
//                                    array ("layers.3.exp_avg", ...), root
//                                    attributes step and format_version
//   trainer_state.json               TrainerState
//   DONE                             written last
// Everything is written into OUT/.tmp-step_000180 and renamed to
// OUT/step_000180 once DONE is there; only then are older checkpoints
// beyond keep_last deleted. A directory without DONE is never loaded.
#ifndef FIMI_TRAIN_CHECKPOINT_H
#define FIMI_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"
#include "model/gemma.h"
#include "optim/adamw.h"

#define CHECKPOINT_FORMAT_VERSION 1
#define CHECKPOINT_PATH_MAX 4096

typedef struct TrainerState {
  int64_t step;              // optimizer steps completed (skipped ones included)
  int64_t skipped;           // steps skipped for a non-finite loss or gradient
  int64_t nonfinite_in_row;  // current run of skipped steps
  DatasetCursor cursor;      // the train loader's position after `step`
  uint64_t data_seed;        // the loader's shuffle seed
  uint64_t rng[4];           // the loop's RNG stream (for objectives that sample)
  double best_eval;          // lowest eval loss so far; NAN = no eval yet
  int64_t best_eval_step;
  double elapsed;            // seconds of training before this checkpoint (display only)
  int64_t tokens_seen;
  uint64_t config_hash;      // hash of the training config (warned about on mismatch)
} TrainerState;

// Writes OUT/step_%06lld (see above). tokenizer_path may be NULL or "" (no
// copy). keep_last > 0 deletes the oldest complete checkpoints beyond it.
// opt may be NULL (no optimizer.h5: a sharded run's model-only checkpoint,
// which checkpoint_load refuses for lack of optimizer.h5).
int checkpoint_save(const char *out_dir, const GemmaModel *model, AdamW *opt, const TrainerState *ts,
                    const char *tokenizer_path, int keep_last, FimiError *err);
// The newest OUT/step_* holding DONE: returns 1 and fills path/step, 0 when
// there is none, -1 on error (OUT unreadable).
int checkpoint_find_latest(const char *out_dir, char *path, size_t path_size, int64_t *step, FimiError *err);
// Loads a checkpoint into an existing model (same architecture: names and
// shapes must match), optimizer (same buffers) and *ts. Validates everything;
// on failure the model and optimizer may hold a mix of old and new values.
int checkpoint_load(const char *dir, GemmaModel *model, AdamW *opt, TrainerState *ts, FimiError *err);
// Removes OUT/.tmp-step_* left by a process killed during a save; returns
// how many were removed, or -1.
int checkpoint_clean_temp(const char *out_dir, FimiError *err);

// FNV-1a 64 over a string (the config hash).
uint64_t checkpoint_hash_text(const char *text);

#endif
