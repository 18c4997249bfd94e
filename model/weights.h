// model/weights.h: Gemma checkpoints in Hugging Face layout: config.json plus
// model.safetensors (or model-0000i-of-0000N.safetensors shards with
// model.safetensors.index.json above a size limit). Defines
// gemma_save_pretrained and gemma_load_pretrained.
#ifndef FIMI_MODEL_WEIGHTS_H
#define FIMI_MODEL_WEIGHTS_H

#include <stddef.h>

#include "core/error.h"
#include "model/gemma.h"
#include "model/safetensors.h"

// Writes dir/config.json and the weights (dtype F32 or BF16). Tensors are
// written with HF names and [out, in] layouts; the tied embedding once.
// Shards when the total exceeds max_shard_bytes (0 = never shard).
int gemma_save_pretrained(const GemmaModel *model, const char *dir, SafetensorsDtype dtype, size_t max_shard_bytes,
                          FimiError *err);
// Reads dir/config.json, creates the model and loads every tensor, checking
// names, shapes and that nothing is missing or unexpected (a stray
// "lm_head.weight" equal in shape to the embedding is accepted and ignored
// as the tied head).
int gemma_load_pretrained(GemmaModel *model, const char *dir, FimiError *err);

#endif
