// data/bpe_train.h: trains a SentencePiece-style byte-fallback BPE tokenizer
// (Gemma's kind) on text files and writes it as a Hugging Face
// tokenizer.json that both fimi (data/tokenizer.h) and the Python
// `tokenizers` library load and encode identically. Defines BpeTrainOptions
// and bpe_train_files. The exact JSON it writes is specified in
// docs/tokenizer.md.
#ifndef FIMI_DATA_BPE_TRAIN_H
#define FIMI_DATA_BPE_TRAIN_H

#include <stdint.h>

#include "core/error.h"

typedef struct BpeTrainOptions {
  int32_t vocab_size;     // total, including special and the 256 byte tokens
  int64_t min_frequency;  // a pair merges only if seen at least this often (>= 2)
  int32_t max_token_bytes;  // longest token in bytes (e.g. 16)
} BpeTrainOptions;

void bpe_train_default_options(BpeTrainOptions *opt);

// Reads UTF-8 text files (invalid UTF-8 is an error naming file and byte
// offset), trains, and writes tokenizer.json to out_path atomically.
// Deterministic: same files and options give a byte-identical file.
int bpe_train_files(const char *const *paths, int num_paths, const BpeTrainOptions *opt,
                    const char *out_path, FimiError *err);

#endif
