// data/dataset.h: tokenized training datasets in HDF5 (docs/datasets.md).
// Defines the writer (dataset_tokenize_jsonl: TRL-style JSONL -> HDF5, and
// dataset_write_ref_logp for the DPO reference pass), the validating reader
// (Dataset, dataset_open, dataset_row) and the loader that shuffles per
// epoch, shards by rank and keeps a resumable cursor (DatasetLoader).
//
// Layout: one group per field ("seq" for SFT; "prompt", "chosen", "rejected"
// for DPO), each holding
//   tokens    int32 [T]        all rows' ids, concatenated
//   offsets   int64 [rows+1]   row i is tokens[offsets[i] .. offsets[i+1])
//   loss_mask uint8 [T]        1 where the loss counts the token
// plus optional float32 [rows] datasets named ref_logp_* at the root, and
// attributes on the root (format_version, kind, vocab_size, ...).
// Files are untrusted on reading: every shape, offset, id and mask value is
// checked, and errors name the dataset and row.
#ifndef FIMI_DATA_DATASET_H
#define FIMI_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define DATASET_FORMAT_VERSION 1
#define DATASET_MAX_FIELDS 3

typedef enum { DATASET_SFT = 0, DATASET_DPO = 1 } DatasetKind;
typedef enum { DATASET_OVERLONG_TRUNCATE = 0, DATASET_OVERLONG_DROP = 1 } DatasetOverlong;

// "sft" / "dpo"; NULL for an invalid kind.
const char *dataset_kind_name(DatasetKind kind);
int dataset_kind_parse(const char *name, DatasetKind *out, FimiError *err);

// ---- writing ---------------------------------------------------------------

typedef struct DatasetTokenizeOptions {
  DatasetKind kind;
  int64_t max_length;         // tokens per sequence (SFT row; DPO prompt+response); 0 = no limit
  DatasetOverlong overlong;   // what to do with a longer row
  int skip_bad;               // malformed rows are skipped and counted instead of failing
  // SFT only: every token after <bos> is a target, prompt and user, system
  // and tool turns included (TRL's assistant_only_loss=False), instead of
  // the model turns or completion alone. For a model trained from scratch,
  // whose base must first learn the language of the dialogs.
  int loss_all;
} DatasetTokenizeOptions;

typedef struct DatasetTokenizeStats {
  int64_t lines;        // lines read (blank ones included)
  int64_t rows_in;      // non-blank lines
  int64_t rows;         // rows written
  int64_t truncated;    // rows written shortened to max_length
  int64_t dropped;      // overlong rows left out
  int64_t skipped;      // malformed rows left out (only with skip_bad)
  int64_t tokens;       // ids written over all fields
  int64_t loss_tokens;  // of which loss_mask == 1
  int64_t max_row_tokens;  // longest sequence written (SFT row; DPO prompt+longer response)
  char first_skip[FIMI_ERROR_MESSAGE_MAX];  // the first skipped row's error ("" if none)
} DatasetTokenizeStats;

void dataset_default_options(DatasetTokenizeOptions *opt);

// Reads input_path (JSONL, one row per line), tokenizes every row with the
// tokenizer.json at tokenizer_path (the chat format of data/chat.h for
// message lists) and writes out_path (via out_path.tmp, renamed at the end;
// on failure nothing is left at either path). Errors name "FILE line N" and
// the field. stats may be NULL.
int dataset_tokenize_jsonl(const char *input_path, const char *tokenizer_path, const char *out_path,
                           const DatasetTokenizeOptions *opt, DatasetTokenizeStats *stats, FimiError *err);

// Adds (or replaces) the float32 [rows] dataset `name` (must start with
// "ref_logp_", then [a-z0-9_]) in an existing dataset file. The file is
// copied to path.tmp, changed there and renamed, so a failure leaves the
// original untouched. Values must be finite; rows must equal the file's rows.
int dataset_write_ref_logp(const char *path, const char *name, const float *values, int64_t rows, FimiError *err);

// ---- reading ---------------------------------------------------------------

typedef struct DatasetField {
  char name[16];       // "seq", "prompt", "chosen", "rejected"
  int64_t *offsets;    // rows + 1
  int32_t *tokens;     // offsets[rows]
  uint8_t *loss_mask;  // offsets[rows]
} DatasetField;

#define DATASET_MAX_REF 4

typedef struct Dataset {
  DatasetKind kind;
  int64_t rows;
  int32_t vocab_size;
  int num_fields;
  DatasetField fields[DATASET_MAX_FIELDS];
  int num_ref;
  char ref_names[DATASET_MAX_REF][64];
  float *ref[DATASET_MAX_REF];  // rows values each
  // attributes, as written
  int64_t max_length, rows_in, truncated, dropped, skipped;
  char overlong[16];
  char source[512];
  char tokenizer_hash[32];
} Dataset;

// Opens and fully validates a dataset file (read into memory). expect_vocab
// > 0 also requires the file's vocab_size to equal it. On failure *ds is
// zeroed and nothing needs closing.
int dataset_open(const char *path, int32_t expect_vocab, Dataset *ds, FimiError *err);
void dataset_close(Dataset *ds);

// Index of a field by name, or -1.
int dataset_field_index(const Dataset *ds, const char *name);
// The ref_logp values named `name`, or NULL when the file has none.
const float *dataset_ref(const Dataset *ds, const char *name);
// Row `row` of field `field`: ids, mask and length (borrowed pointers).
int dataset_row(const Dataset *ds, int field, int64_t row, const int32_t **ids, const uint8_t **mask,
                int64_t *len, FimiError *err);

// ---- iteration -------------------------------------------------------------

// Where a loader stands: epoch, and how many of this rank's rows of that
// epoch were already handed out. Two plain integers: save them in the
// trainer state, restore with dataset_loader_seek.
typedef struct DatasetCursor {
  uint64_t epoch;
  uint64_t position;
} DatasetCursor;

// Each epoch visits a permutation of the rows keyed by (seed, epoch) (the
// identity when shuffle is 0). Rank r of world W takes permutation entries
// r, r+W, r+2W, ...: every rank gets floor(rows / W) rows per epoch, the
// last rows % W entries of that epoch's permutation are not visited in that
// epoch (a different subset each epoch when shuffling).
typedef struct DatasetLoader {
  int64_t rows;
  int64_t per_rank;  // rows per rank per epoch
  uint64_t seed;
  int rank, world, shuffle;
  int64_t *perm;     // permutation of perm_epoch
  uint64_t perm_epoch;
  int perm_valid;
  DatasetCursor cursor;
} DatasetLoader;

// Fails when rows < world (a rank would get nothing) or rank is outside [0, world).
int dataset_loader_init(DatasetLoader *l, int64_t rows, uint64_t seed, int rank, int world, int shuffle,
                        FimiError *err);
void dataset_loader_free(DatasetLoader *l);
// The next micro-batch: up to batch row indices into rows_out, *count of
// them. A batch never spans two epochs: the last one of an epoch may be
// shorter; the call after it starts the next epoch. *epoch (may be NULL)
// is the epoch the batch belongs to.
int dataset_loader_next(DatasetLoader *l, int64_t batch, int64_t *rows_out, int64_t *count, uint64_t *epoch,
                        FimiError *err);
// The permutation of rows for an epoch (rows entries; the identity when
// shuffle is 0). Same (seed, epoch) -> same permutation on every machine.
int dataset_epoch_permutation(uint64_t seed, uint64_t epoch, int shuffle, int64_t rows, int64_t *perm,
                              FimiError *err);
// Restores a saved cursor (position must be <= per_rank).
int dataset_loader_seek(DatasetLoader *l, DatasetCursor cursor, FimiError *err);

#endif
