// model/gemma_config.h: the Gemma architecture hyper-parameters. Defines
// GemmaConfig, reading it from a Hugging Face config.json (model_type
// "gemma2", "gemma3_text", "gemma4_text", or "gemma3"/"gemma4" with a
// text_config inside), named presets (tiny, tiny-gemma2, small-10m, gpu-100m,
// gemma3-270m, gemma3-1b, gemma3-4b, tiny-g4, gemma4-e2b, gemma4-e4b),
// writing it back as an HF config.json, validation, and the per-layer shape
// of a Gemma 4 layer (GemmaLayerShape). Unknown or unsupported fields are
// errors naming the field, never silent defaults.
#ifndef FIMI_MODEL_GEMMA_CONFIG_H
#define FIMI_MODEL_GEMMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define GEMMA_MAX_LAYERS 256
#define GEMMA_MAX_EXTRA_EOS 7

typedef enum { GEMMA_FAMILY_GEMMA2 = 2, GEMMA_FAMILY_GEMMA3 = 3, GEMMA_FAMILY_GEMMA4 = 4 } GemmaFamily;

typedef struct GemmaConfig {
  GemmaFamily family;           // gemma2: softcaps, no q/k norm; gemma3: q/k norm
  int vocab_size;               // V
  int hidden_size;              // C
  int intermediate_size;        // I
  int num_hidden_layers;        // L
  int num_attention_heads;      // nh
  int num_key_value_heads;      // nkv
  int head_dim;                 // hd
  int max_position_embeddings;
  double rms_norm_eps;
  double rope_theta;            // global (full-attention) layers
  double rope_local_base_freq;  // sliding layers (gemma3); = rope_theta for gemma2
  double rope_scaling_factor;   // HF rope_scaling {"rope_type":"linear"} on global layers; 1 = none
  double query_pre_attn_scalar; // scores scaled by its ^-0.5
  int sliding_window;           // W: query i sees keys i-W+1..i on sliding layers
  double attn_logit_softcapping;  // 0 = none
  double final_logit_softcapping; // 0 = none
  int bos_token_id, eos_token_id, pad_token_id;
  // Further stop tokens when config.json gives eos_token_id as a list
  // (gemma-3 instruct: [1, 106]); eos_token_id holds the first.
  int num_extra_eos;
  int extra_eos_token_ids[GEMMA_MAX_EXTRA_EOS];
  unsigned char layer_is_sliding[GEMMA_MAX_LAYERS];  // (L)
  // Gemma 4 only (docs/gemma4.md); zero for Gemma 2 and 3.
  int hidden_size_per_layer_input;  // P: per-layer embedding width, 0 = no per-layer embeddings
  int vocab_size_per_layer_input;   // Vp: rows of the per-layer embedding table (<= V)
  int global_head_dim;              // head dim of full-attention layers
  int num_global_key_value_heads;   // kv heads of full-attention layers (0 = nkv)
  int attention_k_eq_v;             // full-attention layers: no v_proj, values are the k_proj output
  int num_kv_shared_layers;         // the last ones reuse the k/v of the last earlier layer of their type
  int use_double_wide_mlp;          // kv-shared layers have a 2I-wide MLP
  double partial_rotary_factor;     // full-attention layers rotate this share of their dims ("proportional")
} GemmaConfig;

// The shape of layer l, which differs between layers in Gemma 4 (and is
// the same for every layer of Gemma 2 and 3).
typedef struct GemmaLayerShape {
  int head_dim;     // hd of this layer
  int kv_heads;     // nkv of this layer
  int intermediate; // MLP width
  int kv_source;    // the layer whose keys/values this one attends to (itself unless kv-shared)
  int has_kv;       // k_proj (and k_norm) present: 0 for a kv-shared layer
  int has_v;        // v_proj present: 0 when kv-shared or keys double as values
  int rope_pairs;   // rotated pairs (i, i + hd/2), i < rope_pairs; the rest pass through
  int stores_kv;    // another layer attends to this layer's keys/values
} GemmaLayerShape;
void gemma_layer_shape(const GemmaConfig *cfg, int layer, GemmaLayerShape *shape);
// The widest of each per-layer width over all layers: buffers that serve
// every layer in turn (activations, scratch) are sized for it. qd = nh * hd,
// kvd = kv heads * hd, nkv kv heads, mlp the MLP width (each maximised alone).
typedef struct GemmaLayerWidths {
  size_t qd, kvd, nkv, mlp;
} GemmaLayerWidths;
GemmaLayerWidths gemma_widest_layer(const GemmaConfig *cfg);

// Fills cfg from config.json at path; errors name the file and field.
int gemma_config_load_json(GemmaConfig *cfg, const char *path, FimiError *err);
// Same from JSON text already in memory; `what` names the source.
int gemma_config_parse_json(GemmaConfig *cfg, const char *text, size_t length, const char *what, FimiError *err);
// Named preset; the error lists the known names.
int gemma_config_preset(GemmaConfig *cfg, const char *name, FimiError *err);
// Writes an HF config.json (Gemma3ForCausalLM / Gemma2ForCausalLM) that
// `transformers` loads. Returns a malloc'd string or NULL.
char *gemma_config_to_json(const GemmaConfig *cfg, FimiError *err);
// Same with "torch_dtype" set to the dtype of the weights beside it
// ("float32", "bfloat16"); gemma_config_to_json writes "float32".
char *gemma_config_to_json_dtype(const GemmaConfig *cfg, const char *torch_dtype, FimiError *err);
// Checks ranges and divisibility (nh % nkv, even hd, ...).
int gemma_config_validate(const GemmaConfig *cfg, FimiError *err);
// Number of parameters (tied embedding counted once).
int64_t gemma_config_param_count(const GemmaConfig *cfg);

#endif
