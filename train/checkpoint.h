// train/checkpoint.h: training checkpoints (DESIGN.md section 9,
// docs/training.md). Defines TrainerState (what the loop needs besides
// weights and optimizer to continue exactly) and checkpoint_save,
// checkpoint_find_latest, checkpoint_load, checkpoint_clean_temp.
//
// Layout of OUT/step_000180/:
//   config.json, model.safetensors   gemma_save_pretrained (F32, exact); above
//                                    max_shard_bytes model-0000i-of-0000N.safetensors
//                                    + model.safetensors.index.json, as transformers writes
//   tokenizer.json                   copied from the initial model
//   optimizer.h5                     one float32 dataset per AdamW state
//                                    array ("layers.3.exp_avg", ...), root
//                                    attributes step and format_version
//   trainer_state.json               TrainerState
//   DONE                             written last
// A sharded (ZeRO-3) run writes, instead of optimizer.h5, one file per rank:
//   optimizer-rank00001-of-00004.h5  that rank's shard moments and step
//                                    (attributes rank, world); its master
//                                    weights are model.safetensors (F32, exact)
// and is resumed only with the same number of ranks (docs/training.md).
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
#define CHECKPOINT_OBJECTIVE_STATE_MAX 4096

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
  // The objective's own state (TrainLoopConfig.objective_save) as compact
  // JSON object text; "" = none.
  char objective_state[CHECKPOINT_OBJECTIVE_STATE_MAX];
} TrainerState;

// Writes OUT/step_%06lld (see above). tokenizer_path may be NULL or "" (no
// copy). keep_last > 0 deletes the oldest complete checkpoints beyond it.
// max_shard_bytes > 0 shards the weights above that size (0: one file).
// opt may be NULL (no optimizer.h5: a model-only checkpoint, which
// checkpoint_load refuses for lack of optimizer state).
int checkpoint_save(const char *out_dir, const GemmaModel *model, AdamW *opt, const TrainerState *ts,
                    const char *tokenizer_path, int keep_last, size_t max_shard_bytes, FimiError *err);
// The steps of checkpoint_save, for a save spread over ranks (train/loop.c
// runs them with a collective agreement between steps):
//   rank 0:     checkpoint_begin_save   a clean OUT/.tmp-step_N into tmp
//   rank 0:     checkpoint_write_model  config, model.safetensors, tokenizer
//   every rank: checkpoint_write_optimizer_shard (world 1: optimizer.h5)
//   rank 0:     checkpoint_finish_save  trainer state, DONE, rename, prune
// checkpoint_temp_dir gives the other ranks the same tmp path.
int checkpoint_begin_save(const char *out_dir, int64_t step, char *tmp, size_t tmp_size, FimiError *err);
int checkpoint_temp_dir(const char *out_dir, int64_t step, char *tmp, size_t tmp_size, FimiError *err);
int checkpoint_write_model(const char *tmp, const GemmaModel *model, const char *tokenizer_path,
                           size_t max_shard_bytes, FimiError *err);
int checkpoint_write_optimizer_shard(const char *tmp, AdamW *opt, int rank, int world, FimiError *err);
int checkpoint_finish_save(const char *out_dir, const char *tmp, const TrainerState *ts, int keep_last,
                           FimiError *err);
// The newest OUT/step_* holding DONE: returns 1 and fills path/step, 0 when
// there is none, -1 on error (OUT unreadable).
int checkpoint_find_latest(const char *out_dir, char *path, size_t path_size, int64_t *step, FimiError *err);
// Loads a checkpoint into an existing model (same architecture: names and
// shapes must match), optimizer (same buffers) and *ts. Validates everything;
// on failure the model and optimizer may hold a mix of old and new values.
// OUT/best -> step_NNNNNN (a relative symlink, replaced atomically). Pruning
// by keep_last never deletes the checkpoint OUT/best points to.
#define CHECKPOINT_BEST_LINK "best"
int checkpoint_link_best(const char *out_dir, int64_t step, FimiError *err);

int checkpoint_load(const char *dir, GemmaModel *model, AdamW *opt, TrainerState *ts, FimiError *err);
// The same for rank `rank` of a `world`-rank sharded run: opt is the rank's
// shard optimizer; the shard file must come from a run of the same world size
// (the error says which one wrote it).
int checkpoint_load_shard(const char *dir, GemmaModel *model, AdamW *opt, TrainerState *ts, int rank, int world,
                          FimiError *err);
// Removes OUT/.tmp-step_* left by a process killed during a save; returns
// how many were removed, or -1.
int checkpoint_clean_temp(const char *out_dir, FimiError *err);

// FNV-1a 64 over a string (the config hash).
uint64_t checkpoint_hash_text(const char *text);

#endif
