// data/bpe_train.h: trains a SentencePiece-style byte-fallback BPE tokenizer
// (Gemma's kind) on text files and writes it as a Hugging Face
// tokenizer.json that both fimi (data/tokenizer.h) and the Python
// `tokenizers` library load and encode identically. Defines BpeTrainOptions,
// BpeTrainStats, bpe_train_files and bpe_train_texts. The exact JSON it
// writes is specified in docs/tokenizer.md; the training algorithm in
// docs/tokenizer-training.md.
#ifndef FIMI_DATA_BPE_TRAIN_H
#define FIMI_DATA_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct BpeTrainOptions {
  int32_t vocab_size;     // total, including special and the 256 byte tokens
  int64_t min_frequency;  // a pair merges only if seen at least this often (>= 2)
  int32_t max_token_bytes;  // longest token in bytes (e.g. 16)
  // Share of the corpus' characters (by count) that get a vocabulary entry,
  // most frequent first; the rarest rest are left to byte fallback.
  // In (0, 1]; 1 keeps every character (except U+0000).
  double character_coverage;
  // 0: every digit is a token of its own (Gemma's tokenizers; `tokenizers`'
  // Digits individual_digits=true). 1: a run of digits is a piece of its
  // own that merges may join (individual_digits=false), so "6214377196"
  // becomes a few multi-digit tokens, the same ones wherever it appears.
  int digit_runs;
} BpeTrainOptions;

// The ids every trained tokenizer has: 8 special tokens, then 256 byte tokens.
#define BPE_NUM_SPECIAL 8
#define BPE_FIRST_BYTE_ID BPE_NUM_SPECIAL
#define BPE_NUM_RESERVED (BPE_NUM_SPECIAL + 256)

// What one training run saw and produced (for logs and tests).
typedef struct BpeTrainStats {
  int64_t input_bytes;     // bytes read over all inputs
  int64_t num_pieces;      // pre-tokenized pieces (words) counted, with repeats
  int64_t num_words;       // distinct pieces
  int64_t num_chars;       // distinct characters seen (U+0000 excluded)
  int32_t alphabet_size;   // characters given a vocabulary entry
  int32_t num_merges;      // merges learned (length of model.merges)
  int32_t vocab_size;      // tokens written; < options.vocab_size when pairs ran out
} BpeTrainStats;

void bpe_train_default_options(BpeTrainOptions *opt);

// Reads UTF-8 text files (invalid UTF-8 is an error naming file and byte
// offset), trains, and writes tokenizer.json to out_path atomically.
// Deterministic: same files and options give a byte-identical file.
int bpe_train_files(const char *const *paths, int num_paths, const BpeTrainOptions *opt,
                    const char *out_path, FimiError *err);

// Same as bpe_train_files with stats (may be NULL) filled in.
int bpe_train_files_stats(const char *const *paths, int num_paths, const BpeTrainOptions *opt,
                          const char *out_path, BpeTrainStats *stats, FimiError *err);

// Trains on in-memory texts (texts[i] has lens[i] bytes and is named
// names[i] in errors) and returns the tokenizer.json as a malloc'd
// NUL-terminated string in *json_out. stats may be NULL.
int bpe_train_texts(const char *const *texts, const size_t *lens, const char *const *names, int num_texts,
                    const BpeTrainOptions *opt, char **json_out, BpeTrainStats *stats, FimiError *err);

#endif
