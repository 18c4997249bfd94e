// cmd/dpo_decoder_cuda.h: the GPU decoder of `fimi dpo pairs --device cuda`
// (dpo/candidate_model.h's DpoDecoder over model/gemma_cuda.h): the model's
// weights uploaded once (bf16 working copy), one sequence's
// GemmaCudaKVCache, prefill chunks of `chunk` tokens; logits come back to
// the host, where the candidate samples and scores, so the sampling rules
// and RNG streams are the CPU decoder's. Defines dpo_decoder_cuda. Only
// compiled with the CUDA backend (FIMI_HAVE_CUDA).
#ifndef FIMI_CMD_DPO_DECODER_CUDA_H
#define FIMI_CMD_DPO_DECODER_CUDA_H

#ifdef FIMI_HAVE_CUDA

#include "core/error.h"
#include "dpo/candidate_model.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"

// Creates the CUDA context and the GPU copy of `model` (read once: the CPU
// model may be freed after). Device memory: the model's bf16 weights, the
// cache (L * capacity * nkv * hd * 2 bf16, capacity as dpo_decoder_capacity),
// one call's activations for `chunk` rows and (1, V) fp32 logits.
int dpo_decoder_cuda(DpoDecoder *d, const GemmaModel *model, int chunk, FimiError *err);

#endif  // FIMI_HAVE_CUDA
#endif
