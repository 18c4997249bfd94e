// optim/adamw.h: the AdamW optimizer over a rank's flat fp32 buffers.
// Defines AdamWConfig, AdamWRange (which elements of a buffer are trained and
// whether they decay), AdamW (moments and step counter for the registered
// buffers), adamw_step, the decay rule on Hugging Face tensor names, and the
// state hooks the checkpoint code uses (named flat arrays + step counter).
//
// Buffers: the caller registers each flat fp32 buffer it owns the update of:
// on one rank, a layer's whole parameter buffer; under ZeRO-3, the rank's
// shard of it. `param` is the fp32 master copy (on CPU the model's own
// parameters or the shard; on GPU the fp32 shard beside the bf16 working
// weights) and is updated in place; `grad` is the fp32 gradient of the same
// elements. The optimizer allocates and owns exp_avg and exp_avg_sq (zeroed).
//
// Ranges: (offset, size, decay) inside the buffer, ascending and disjoint.
// Elements no range covers (ZeRO padding, frozen tensors) are never touched.
// optim/ knows no model: the caller builds ranges from the model's tensor
// table with adamw_name_decays(), and under ZeRO-3 intersects them with the
// shard first (parallel/shard.h's shard_pieces gives shard_offset and count).
#ifndef FIMI_OPTIM_ADAMW_H
#define FIMI_OPTIM_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define ADAMW_NAME_MAX 96
// Longest state array name: buffer name + ".exp_avg_sq".
#define ADAMW_STATE_NAME_MAX (ADAMW_NAME_MAX + 16)

typedef struct AdamWConfig {
  double beta1, beta2;  // in [0, 1)
  double eps;           // > 0
  double weight_decay;  // >= 0, decoupled (param *= 1 - lr * wd) on ranges with decay = 1
} AdamWConfig;

// transformers' TrainingArguments defaults: betas (0.9, 0.999), eps 1e-8,
// weight_decay 0.0 (torch.optim.AdamW alone defaults to 0.01).
void adamw_config_default(AdamWConfig *config);
int adamw_config_validate(const AdamWConfig *config, FimiError *err);

typedef struct AdamWRange {
  size_t offset;  // first element, within the buffer
  size_t size;    // elements
  int decay;      // 1: weight decay applies
} AdamWRange;

// Which tensors decay, on Hugging Face names (docs/optimizer.md).
typedef struct AdamWDecayRules {
  int decay_norms;       // default 0: RMSNorm weights (stored centred on 0) never decay
  int decay_embeddings;  // default 0: the (tied) embedding does not decay
} AdamWDecayRules;

void adamw_decay_rules_default(AdamWDecayRules *rules);
// 1 if the tensor gets weight decay. A norm is a tensor whose module name
// (the part before ".weight") ends in "norm" (input_layernorm, q_norm,
// model.norm, ...) or is_norm is set; an embedding's module name contains
// "embed" (embed_tokens, embed_tokens_per_layer); biases (".bias") never decay.
int adamw_name_decays(const char *name, int is_norm, const AdamWDecayRules *rules);

// The seed of update t's stochastic rounding of a bf16 working copy (the GPU
// optimizers: train/state_cuda.h, parallel/zero3_cuda.h). adamw_update_cuda
// draws element e's bits from (this seed, e's flat index in the model), so a
// whole model and its ZeRO-3 shards round alike.
uint64_t adamw_rounding_seed(uint64_t train_seed, int64_t step);

typedef struct AdamWBuffer {
  char name[ADAMW_NAME_MAX];  // prefix of its state arrays, e.g. "layers.3"
  float *param;               // (numel) fp32 master weights, caller's
  const float *grad;          // (numel) fp32 gradients, caller's
  float *exp_avg;             // (numel) owned
  float *exp_avg_sq;          // (numel) owned
  size_t numel;
  AdamWRange *ranges;         // owned copy
  int num_ranges;
} AdamWBuffer;

typedef struct AdamW {
  AdamWConfig config;
  AdamWBuffer *buffers;
  int num_buffers;
  int capacity;
  int64_t step;  // completed updates; the next adamw_step uses t = step + 1
} AdamW;

int adamw_init(AdamW *opt, const AdamWConfig *config, FimiError *err);
void adamw_free(AdamW *opt);
// Registers a buffer; ranges are copied and checked (inside [0, numel),
// ascending, disjoint, non-empty); names must be unique and non-empty.
int adamw_add_buffer(AdamW *opt, const char *name, float *param, const float *grad, size_t numel,
                     const AdamWRange *ranges, int num_ranges, FimiError *err);
// One update of every buffer with learning rate lr (from the schedule) and
// gradients multiplied by grad_scale (the clipping coefficient, 1 = none).
// Fails, changing nothing, on a non-finite or negative lr or a non-finite or
// non-positive grad_scale.
int adamw_step(AdamW *opt, double lr, float grad_scale, FimiError *err);

// ---- state for checkpoints ----
// Two arrays per buffer, in registration order: "<name>.exp_avg" and
// "<name>.exp_avg_sq", each numel floats, plus the step counter opt->step.
// The master weights are the caller's buffers (saved with the model).
typedef struct AdamWStateArray {
  char name[ADAMW_STATE_NAME_MAX];
  float *data;
  size_t numel;
} AdamWStateArray;

int adamw_state_count(const AdamW *opt);
// index in [0, adamw_state_count): fills out (data points into the optimizer).
int adamw_state_array(AdamW *opt, int index, AdamWStateArray *out, FimiError *err);
// Restores one array from untrusted data (a checkpoint): the name must exist,
// numel must match, every value must be finite and exp_avg_sq >= 0. On
// failure the optimizer's array is unchanged.
int adamw_state_load(AdamW *opt, const char *name, const float *data, size_t numel, FimiError *err);
// Restores the step counter (>= 0).
int adamw_set_step(AdamW *opt, int64_t step, FimiError *err);

#endif
