// model/gemma_config.c: GemmaConfig from and to Hugging Face config.json,
// presets, validation and parameter counts (see gemma_config.h).
//
// Field names and defaults follow transformers' Gemma2Config and
// Gemma3TextConfig (configuration_gemma2.py, configuration_gemma3.py): a key
// that is absent takes the HF default, as `transformers` would. Both the 4.x
// spelling (rope_theta, rope_local_base_freq, rope_scaling,
// sliding_window_pattern) and the 5.x one (rope_parameters per layer type,
// _sliding_window_pattern) are read. Keys outside the known set are errors
// naming the key, so a file for another architecture is never misread.
// docs/model-config.md lists the accepted keys.
#include "model/gemma_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"

#define CONFIG_MAX_BYTES (16u << 20)

// ----------------------------------------------------------------------------
// accepted keys

// Keys that set GemmaConfig fields or are checked for a value fimi supports.
static const char *const ARCH_KEYS[] = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
    "rope_parameters", "query_pre_attn_scalar", "sliding_window", "layer_types", "attn_logit_softcapping",
    "final_logit_softcapping", "bos_token_id", "eos_token_id", "pad_token_id", "hidden_activation", "hidden_act",
    "tie_word_embeddings", "attention_bias", "attention_dropout", "use_bidirectional_attention", "architectures",
    "is_encoder_decoder", "add_cross_attention", NULL};

// Gemma 3 only: the local RoPE base and the 4.x/5.x layer-pattern spellings.
static const char *const GEMMA3_KEYS[] = {"rope_local_base_freq", "sliding_window_pattern", "_sliding_window_pattern",
                                          NULL};

// Gemma 4 only (configuration_gemma4.py, Gemma4TextConfig). global_head_dim
// and num_global_key_value_heads are what the Hub's files carry; transformers
// turns them into per_layer_config, which is what it writes back.
static const char *const GEMMA4_KEYS[] = {
    "vocab_size_per_layer_input", "hidden_size_per_layer_input", "attention_k_eq_v", "num_kv_shared_layers",
    "enable_moe_block", "use_double_wide_mlp", "num_experts", "top_k_experts", "moe_intermediate_size",
    "global_head_dim", "num_global_key_value_heads", "per_layer_config", NULL};

// Bookkeeping that every PretrainedConfig may carry (its to_dict output,
// generation defaults of transformers 4.x) and that does not change the math.
static const char *const IGNORED_KEYS[] = {
    "_name_or_path", "_attn_implementation_autoset", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "initializer_range", "cache_implementation", "output_attentions", "output_hidden_states", "return_dict",
    "chunk_size_feed_forward", "problem_type", "id2label", "label2id", "is_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "pruned_heads", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "finetuning_task", "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", NULL};

// Keys of the multimodal "gemma3" wrapper around text_config.
static const char *const WRAPPER_KEYS[] = {
    "model_type", "text_config", "vision_config", "architectures", "boi_token_index", "eoi_token_index",
    "image_token_index", "boi_token_id", "eoi_token_id", "image_token_id", "mm_tokens_per_image", "bos_token_id",
    "eos_token_id", "pad_token_id", "tie_word_embeddings", NULL};

// Further keys of the multimodal "gemma4" wrapper (Gemma4Config).
static const char *const GEMMA4_WRAPPER_KEYS[] = {
    "audio_config", "video_token_id", "boa_token_id", "eoa_token_index", "eoa_token_id", "audio_token_id",
    "initializer_range", "vision_soft_tokens_per_image", NULL};

static int in_list(const char *const *list, const char *key) {
  for (; *list; list++)
    if (strcmp(*list, key) == 0) return 1;
  return 0;
}

static int check_keys(const cJSON *obj, GemmaFamily family, int wrapper, const char *what, FimiError *err) {
  for (const cJSON *kv = obj->child; kv; kv = kv->next) {
    const char *key = kv->string;
    int known = wrapper ? in_list(WRAPPER_KEYS, key) || (family == GEMMA_FAMILY_GEMMA4 && in_list(GEMMA4_WRAPPER_KEYS, key))
                        : in_list(ARCH_KEYS, key) || (family == GEMMA_FAMILY_GEMMA3 && in_list(GEMMA3_KEYS, key)) ||
                              (family == GEMMA_FAMILY_GEMMA4 && in_list(GEMMA4_KEYS, key));
    if (!known && !in_list(IGNORED_KEYS, key))
      return fimi_fail(err, "%s: unknown field \"%s\" (not a Gemma 2/3/4 config key fimi understands)", what, key);
  }
  return 0;
}

// ----------------------------------------------------------------------------
// defaults: the values transformers uses for a key that is absent

static void set_layer_pattern(GemmaConfig *c, int pattern) {
  for (int i = 0; i < GEMMA_MAX_LAYERS; i++)
    c->layer_is_sliding[i] = (unsigned char)(i < c->num_hidden_layers && (i + 1) % pattern != 0);
}

static void set_hf_defaults(GemmaConfig *c, GemmaFamily family) {
  memset(c, 0, sizeof *c);
  c->family = family;
  c->vocab_size = family == GEMMA_FAMILY_GEMMA3 ? 262208 : 256000;
  c->hidden_size = 2304;
  c->intermediate_size = 9216;
  c->num_hidden_layers = 26;
  c->num_attention_heads = 8;
  c->num_key_value_heads = 4;
  c->head_dim = 256;
  c->max_position_embeddings = family == GEMMA_FAMILY_GEMMA3 ? 131072 : 8192;
  c->rms_norm_eps = 1e-6;
  c->rope_theta = family == GEMMA_FAMILY_GEMMA3 ? 1e6 : 1e4;
  c->rope_local_base_freq = family == GEMMA_FAMILY_GEMMA3 ? 1e4 : c->rope_theta;
  c->rope_scaling_factor = 1.0;
  c->query_pre_attn_scalar = 256;
  c->sliding_window = 4096;
  c->attn_logit_softcapping = family == GEMMA_FAMILY_GEMMA2 ? 50.0 : 0.0;
  c->final_logit_softcapping = family == GEMMA_FAMILY_GEMMA2 ? 30.0 : 0.0;
  c->bos_token_id = 2;
  c->eos_token_id = 1;
  c->pad_token_id = 0;
  if (family == GEMMA_FAMILY_GEMMA4) {
    // Gemma4TextConfig's field defaults and __post_init__'s rope defaults
    c->vocab_size = 262144;
    c->num_hidden_layers = 30;
    c->sliding_window = 512;
    c->rope_theta = 1e6;
    c->rope_local_base_freq = 1e4;
    c->query_pre_attn_scalar = 1;  // Gemma 4 scales scores by 1.0
    c->vocab_size_per_layer_input = 262144;
    c->hidden_size_per_layer_input = 256;
    c->global_head_dim = 512;
    c->partial_rotary_factor = 0.25;
    c->max_position_embeddings = 131072;
  }
}

// ----------------------------------------------------------------------------
// reading single fields

static const cJSON *item_of(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

static int require_string_value(const cJSON *obj, const char *key, const char *expected, const char *what,
                                FimiError *err) {
  const cJSON *item = item_of(obj, key);
  if (!item || cJSON_IsNull(item)) return 0;
  if (!cJSON_IsString(item) || strcmp(item->valuestring, expected) != 0)
    return fimi_fail(err, "%s: field \"%s\" must be \"%s\" (the only value fimi implements)", what, key, expected);
  return 0;
}

static int require_bool_value(const cJSON *obj, const char *key, int expected, const char *what, FimiError *err) {
  int v = expected;
  if (json_get_bool(obj, key, 0, &v, what, err) != 0) return -1;
  if (v != expected)
    return fimi_fail(err, "%s: field \"%s\" must be %s (fimi supports no other value)", what, key,
                     expected ? "true" : "false");
  return 0;
}

// A softcap is a positive number, or null for none; absent keeps the default.
static int read_softcap(const cJSON *obj, const char *key, double *out, const char *what, FimiError *err) {
  const cJSON *item = item_of(obj, key);
  if (!item) return 0;
  if (cJSON_IsNull(item)) {
    *out = 0;
    return 0;
  }
  if (!cJSON_IsNumber(item) || !(item->valuedouble > 0) || !isfinite(item->valuedouble))
    return fimi_fail(err, "%s: field \"%s\" must be a positive number or null", what, key);
  *out = item->valuedouble;
  return 0;
}

static int read_token_ids(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  if (json_get_int(obj, "bos_token_id", 0, &c->bos_token_id, what, err) != 0) return -1;
  if (json_get_int(obj, "pad_token_id", 0, &c->pad_token_id, what, err) != 0) return -1;
  const cJSON *eos = item_of(obj, "eos_token_id");
  if (!eos || cJSON_IsNull(eos) || cJSON_IsNumber(eos))
    return json_get_int(obj, "eos_token_id", 0, &c->eos_token_id, what, err);
  int n = cJSON_IsArray(eos) ? cJSON_GetArraySize(eos) : 0;
  if (n < 1 || n > 1 + GEMMA_MAX_EXTRA_EOS)
    return fimi_fail(err, "%s: field \"eos_token_id\" must be an integer or a list of 1 to %d integers", what,
                     1 + GEMMA_MAX_EXTRA_EOS);
  int i = 0;
  for (const cJSON *id = eos->child; id; id = id->next, i++) {
    double v = cJSON_IsNumber(id) ? id->valuedouble : -1;
    if (v < 0 || v != floor(v) || v > 2147483647.0)
      return fimi_fail(err, "%s: field \"eos_token_id\"[%d] must be a non-negative integer", what, i);
    if (i == 0) c->eos_token_id = (int)v;
    else c->extra_eos_token_ids[i - 1] = (int)v;
  }
  c->num_extra_eos = n - 1;
  return 0;
}

static int read_sizes(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  struct {
    const char *key;
    int *out;
  } ints[] = {{"vocab_size", &c->vocab_size},
              {"hidden_size", &c->hidden_size},
              {"intermediate_size", &c->intermediate_size},
              {"num_hidden_layers", &c->num_hidden_layers},
              {"num_attention_heads", &c->num_attention_heads},
              {"num_key_value_heads", &c->num_key_value_heads},
              {"head_dim", &c->head_dim},
              {"max_position_embeddings", &c->max_position_embeddings},
              {"sliding_window", &c->sliding_window}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (json_get_int(obj, ints[i].key, 0, ints[i].out, what, err) != 0) return -1;
  if (json_get_double(obj, "rms_norm_eps", 0, &c->rms_norm_eps, what, err) != 0) return -1;
  if (json_get_double(obj, "query_pre_attn_scalar", 0, &c->query_pre_attn_scalar, what, err) != 0) return -1;
  if (read_softcap(obj, "attn_logit_softcapping", &c->attn_logit_softcapping, what, err) != 0) return -1;
  return read_softcap(obj, "final_logit_softcapping", &c->final_logit_softcapping, what, err);
}

// ----------------------------------------------------------------------------
// RoPE: rope_theta / rope_local_base_freq / rope_scaling (4.x) and
// rope_parameters (5.x). Only "default" and "linear" are implemented.

// One RoPE object: {"rope_type" (or "type"), "factor", and with allow_theta
// "rope_theta"}. factor is 1 for "default".
static int read_rope_object(const cJSON *obj, double *theta, double *factor, int allow_scaling, const char *what,
                            FimiError *err) {
  if (!cJSON_IsObject(obj)) return fimi_fail(err, "%s: must be an object or null", what);
  for (const cJSON *kv = obj->child; kv; kv = kv->next)
    if (!in_list((const char *const[]){"rope_type", "type", "factor", "rope_theta", NULL}, kv->string) ||
        (!theta && strcmp(kv->string, "rope_theta") == 0))
      return fimi_fail(err, "%s: unknown field \"%s\"", what, kv->string);
  char type[32] = "default";
  const char *type_key = item_of(obj, "rope_type") ? "rope_type" : "type";
  if (json_get_string(obj, type_key, 0, type, sizeof type, what, err) != 0) return -1;
  if (theta && json_get_double(obj, "rope_theta", 0, theta, what, err) != 0) return -1;
  if (strcmp(type, "default") == 0) {
    *factor = 1.0;
    return 0;
  }
  if (strcmp(type, "linear") != 0 || !allow_scaling)
    return fimi_fail(err, "%s: unsupported rope type \"%s\" (fimi implements \"default\"%s)", what, type,
                     allow_scaling ? " and \"linear\"" : " here");
  if (json_get_double(obj, "factor", 1, factor, what, err) != 0) return -1;
  if (!(*factor > 0) || !isfinite(*factor)) return fimi_fail(err, "%s: field \"factor\" must be positive", what);
  return 0;
}

static int read_rope_parameters(GemmaConfig *c, const cJSON *rp, const char *what, FimiError *err) {
  char sub[512];
  if (c->family == GEMMA_FAMILY_GEMMA2) {
    snprintf(sub, sizeof sub, "%s: rope_parameters", what);
    return read_rope_object(rp, &c->rope_theta, &c->rope_scaling_factor, 0, sub, err);
  }
  if (!cJSON_IsObject(rp)) return fimi_fail(err, "%s: field \"rope_parameters\" must be an object", what);
  for (const cJSON *kv = rp->child; kv; kv = kv->next) {
    int global = strcmp(kv->string, "full_attention") == 0;
    if (!global && strcmp(kv->string, "sliding_attention") != 0)
      return fimi_fail(err, "%s: rope_parameters: unknown field \"%s\" (expected full_attention, sliding_attention)",
                       what, kv->string);
    if (cJSON_IsNull(kv)) continue;
    snprintf(sub, sizeof sub, "%s: rope_parameters.%s", what, kv->string);
    double unused = 1.0;
    if (global && read_rope_object(kv, &c->rope_theta, &c->rope_scaling_factor, 1, sub, err) != 0) return -1;
    // Sliding layers use plain RoPE in Gemma 3; scaling them is not supported.
    if (!global && read_rope_object(kv, &c->rope_local_base_freq, &unused, 0, sub, err) != 0) return -1;
  }
  return 0;
}

static int read_rope(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  if (json_get_double(obj, "rope_theta", 0, &c->rope_theta, what, err) != 0) return -1;
  if (c->family == GEMMA_FAMILY_GEMMA3 &&
      json_get_double(obj, "rope_local_base_freq", 0, &c->rope_local_base_freq, what, err) != 0)
    return -1;
  const cJSON *rs = item_of(obj, "rope_scaling");
  if (rs && !cJSON_IsNull(rs)) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s: rope_scaling", what);
    // Gemma 2 would scale every layer; fimi's scaling applies to global layers only.
    if (read_rope_object(rs, NULL, &c->rope_scaling_factor, c->family == GEMMA_FAMILY_GEMMA3, sub, err) != 0)
      return -1;
  }
  const cJSON *rp = item_of(obj, "rope_parameters");
  if (rp && !cJSON_IsNull(rp) && read_rope_parameters(c, rp, what, err) != 0) return -1;
  if (c->family == GEMMA_FAMILY_GEMMA2) c->rope_local_base_freq = c->rope_theta;
  return 0;
}

// ----------------------------------------------------------------------------
// layer types

static int read_layer_types(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  int L = c->num_hidden_layers;
  if (L < 1 || L > GEMMA_MAX_LAYERS)
    return fimi_fail(err, "%s: field \"num_hidden_layers\" must be in 1..%d (got %d)", what, GEMMA_MAX_LAYERS, L);
  const cJSON *types = item_of(obj, "layer_types");
  if (types && !cJSON_IsNull(types)) {
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != L)
      return fimi_fail(err, "%s: field \"layer_types\" must be a list of %d strings (one per layer)", what, L);
    int i = 0;
    memset(c->layer_is_sliding, 0, sizeof c->layer_is_sliding);
    for (const cJSON *t = types->child; t; t = t->next, i++) {
      const char *s = cJSON_IsString(t) ? t->valuestring : "";
      if (strcmp(s, "sliding_attention") != 0 && strcmp(s, "full_attention") != 0)
        return fimi_fail(err, "%s: field \"layer_types\"[%d] must be \"sliding_attention\" or \"full_attention\"", what,
                         i);
      c->layer_is_sliding[i] = s[0] == 's';
    }
    return 0;
  }
  int pattern = c->family == GEMMA_FAMILY_GEMMA2 ? 2 : 6;  // gemma2: even layers slide
  if (c->family == GEMMA_FAMILY_GEMMA3) {
    const char *key = item_of(obj, "sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
    if (json_get_int(obj, key, 0, &pattern, what, err) != 0) return -1;
    if (pattern < 1) return fimi_fail(err, "%s: field \"%s\" must be at least 1", what, key);
  }
  set_layer_pattern(c, pattern);
  return 0;
}


// ----------------------------------------------------------------------------
// Gemma 4: rope per layer type, per-layer embeddings, kv sharing, the wider
// full-attention layers (Gemma4TextConfig.__post_init__ and kv_sharing_modes)

// rope_parameters.{sliding_attention,full_attention}: "default" on either,
// "proportional" (partial rotary, optional factor) on full-attention layers.
static int read_gemma4_rope_object(GemmaConfig *c, const cJSON *obj, int global, const char *what, FimiError *err) {
  if (!cJSON_IsObject(obj)) return fimi_fail(err, "%s: must be an object or null", what);
  static const char *const keys[] = {"rope_type", "rope_theta", "partial_rotary_factor", "factor", NULL};
  for (const cJSON *kv = obj->child; kv; kv = kv->next)
    if (!in_list(keys, kv->string)) return fimi_fail(err, "%s: unknown field \"%s\"", what, kv->string);
  char type[32] = "default";
  if (json_get_string(obj, "rope_type", 0, type, sizeof type, what, err) != 0) return -1;
  double *theta = global ? &c->rope_theta : &c->rope_local_base_freq;
  if (json_get_double(obj, "rope_theta", 0, theta, what, err) != 0) return -1;
  int proportional = strcmp(type, "proportional") == 0;
  if (strcmp(type, "default") != 0 && !(proportional && global))
    return fimi_fail(err, "%s: unsupported rope type \"%s\" (fimi implements \"default\"%s)", what, type,
                     global ? " and \"proportional\"" : " on sliding layers");
  if (!global) return 0;
  c->partial_rotary_factor = 1.0;
  c->rope_scaling_factor = 1.0;
  if (!proportional) return 0;
  if (json_get_double(obj, "partial_rotary_factor", 0, &c->partial_rotary_factor, what, err) != 0) return -1;
  if (json_get_double(obj, "factor", 0, &c->rope_scaling_factor, what, err) != 0) return -1;
  if (!(c->partial_rotary_factor >= 0 && c->partial_rotary_factor <= 1))
    return fimi_fail(err, "%s: field \"partial_rotary_factor\" must be in [0, 1]", what);
  if (!(c->rope_scaling_factor > 0) || !isfinite(c->rope_scaling_factor))
    return fimi_fail(err, "%s: field \"factor\" must be positive", what);
  return 0;
}

static int read_gemma4_rope(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  const cJSON *rp = item_of(obj, "rope_parameters");
  if (!rp || cJSON_IsNull(rp)) return 0;
  if (!cJSON_IsObject(rp)) return fimi_fail(err, "%s: field \"rope_parameters\" must be an object", what);
  char sub[512];
  for (const cJSON *kv = rp->child; kv; kv = kv->next) {
    int global = strcmp(kv->string, "full_attention") == 0;
    if (!global && strcmp(kv->string, "sliding_attention") != 0)
      return fimi_fail(err, "%s: rope_parameters: unknown field \"%s\" (expected full_attention, sliding_attention)",
                       what, kv->string);
    snprintf(sub, sizeof sub, "%s: rope_parameters.%s", what, kv->string);
    if (read_gemma4_rope_object(c, kv, global, sub, err) != 0) return -1;
  }
  return 0;
}

// per_layer_config, as transformers writes it: {"<layer>": {"head_dim": ..,
// "num_key_value_heads": ..}} on full-attention layers, every one alike.
static int read_per_layer_config(GemmaConfig *c, const cJSON *plc, const char *what, FimiError *err) {
  if (!cJSON_IsObject(plc)) return fimi_fail(err, "%s: field \"per_layer_config\" must be an object", what);
  int seen_any = 0, head_dim = c->head_dim, kv_heads = 0;
  for (const cJSON *kv = plc->child; kv; kv = kv->next) {
    char *end = NULL;
    long layer = strtol(kv->string, &end, 10);
    char sub[512];
    snprintf(sub, sizeof sub, "%s: per_layer_config.%s", what, kv->string);
    if (!end || *end || end == kv->string || layer < 0 || layer >= c->num_hidden_layers)
      return fimi_fail(err, "%s: key must be a layer index in 0..%d", sub, c->num_hidden_layers - 1);
    if (c->layer_is_sliding[layer])
      return fimi_fail(err, "%s: fimi supports overrides on full-attention layers only", sub);
    if (!cJSON_IsObject(kv)) return fimi_fail(err, "%s: must be an object", sub);
    for (const cJSON *f = kv->child; f; f = f->next)
      if (strcmp(f->string, "head_dim") != 0 && strcmp(f->string, "num_key_value_heads") != 0)
        return fimi_fail(err, "%s: unsupported field \"%s\" (fimi reads head_dim and num_key_value_heads)", sub,
                         f->string);
    int hd = c->head_dim, nkv = 0;
    if (json_get_int(kv, "head_dim", 0, &hd, sub, err) != 0 || json_get_int(kv, "num_key_value_heads", 0, &nkv, sub, err))
      return -1;
    if (seen_any && (hd != head_dim || nkv != kv_heads))
      return fimi_fail(err, "%s: every full-attention layer must have the same overrides in fimi", sub);
    seen_any = 1, head_dim = hd, kv_heads = nkv;
  }
  int full = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) full += !c->layer_is_sliding[l];
  if (seen_any && cJSON_GetArraySize(plc) != full)
    return fimi_fail(err, "%s: per_layer_config must override every full-attention layer alike (%d of %d given)",
                     what, cJSON_GetArraySize(plc), full);
  c->global_head_dim = head_dim;
  c->num_global_key_value_heads = kv_heads;
  return 0;
}

static int read_gemma4(GemmaConfig *c, const cJSON *obj, const char *what, FimiError *err) {
  int moe = 0;
  if (json_get_bool(obj, "enable_moe_block", 0, &moe, what, err) != 0) return -1;
  if (moe)
    return fimi_fail(err, "%s: field \"enable_moe_block\" is true: the mixture-of-experts Gemma 4 (26B-A4B) is not "
                          "supported by fimi (dense Gemma 4 only)", what);
  if (json_get_int(obj, "hidden_size_per_layer_input", 0, &c->hidden_size_per_layer_input, what, err) != 0 ||
      json_get_int(obj, "vocab_size_per_layer_input", 0, &c->vocab_size_per_layer_input, what, err) != 0 ||
      json_get_bool(obj, "attention_k_eq_v", 0, &c->attention_k_eq_v, what, err) != 0 ||
      json_get_int(obj, "num_kv_shared_layers", 0, &c->num_kv_shared_layers, what, err) != 0 ||
      json_get_bool(obj, "use_double_wide_mlp", 0, &c->use_double_wide_mlp, what, err) != 0)
    return -1;
  if (read_gemma4_rope(c, obj, what, err) != 0) return -1;
  // Not Gemma 4 keys: Gemma4TextAttention scales by 1.0 and caps nothing,
  // whatever a file says, so they are accepted and kept at what runs.
  c->query_pre_attn_scalar = 1;
  c->attn_logit_softcapping = 0;
  // transformers forces the last layer to full attention (with a warning)
  c->layer_is_sliding[c->num_hidden_layers - 1] = 0;
  const cJSON *plc = item_of(obj, "per_layer_config");
  if (plc && !cJSON_IsNull(plc)) return read_per_layer_config(c, plc, what, err);
  // No per_layer_config: __post_init__ builds it from these two keys.
  if (json_get_int(obj, "global_head_dim", 0, &c->global_head_dim, what, err) != 0) return -1;
  int global_kv = 0;
  if (json_get_int(obj, "num_global_key_value_heads", 0, &global_kv, what, err) != 0) return -1;
  c->num_global_key_value_heads = c->attention_k_eq_v ? global_kv : 0;
  return 0;
}

// ----------------------------------------------------------------------------
// checks of values fimi does not implement

static int check_architectures(const cJSON *obj, const char *const *allowed, const char *what, FimiError *err) {
  const cJSON *arch = item_of(obj, "architectures");
  if (!arch || cJSON_IsNull(arch)) return 0;
  if (!cJSON_IsArray(arch)) return fimi_fail(err, "%s: field \"architectures\" must be a list of strings", what);
  for (const cJSON *a = arch->child; a; a = a->next)
    if (!cJSON_IsString(a) || !in_list(allowed, a->valuestring))
      return fimi_fail(err, "%s: field \"architectures\": \"%s\" is not a Gemma causal LM fimi loads", what,
                       cJSON_IsString(a) ? a->valuestring : "?");
  return 0;
}

static int check_unsupported(const cJSON *obj, GemmaFamily family, const char *what, FimiError *err) {
  static const char *const gemma3_arch[] = {"Gemma3ForCausalLM", NULL};
  static const char *const gemma2_arch[] = {"Gemma2ForCausalLM", NULL};
  static const char *const gemma4_arch[] = {"Gemma4ForCausalLM", NULL};
  const char *const *arch = family == GEMMA_FAMILY_GEMMA3 ? gemma3_arch : family == GEMMA_FAMILY_GEMMA4 ? gemma4_arch : gemma2_arch;
  if (check_architectures(obj, arch, what, err) != 0) return -1;
  if (require_string_value(obj, "hidden_activation", "gelu_pytorch_tanh", what, err) != 0) return -1;
  if (require_string_value(obj, "hidden_act", "gelu_pytorch_tanh", what, err) != 0) return -1;
  if (require_bool_value(obj, "tie_word_embeddings", 1, what, err) != 0) return -1;
  if (require_bool_value(obj, "attention_bias", 0, what, err) != 0) return -1;
  if (family == GEMMA_FAMILY_GEMMA4) {
    // a string there: "all" makes every layer bidirectional; "vision" only
    // changes image tokens, which a text model never sees
    const cJSON *bidi = item_of(obj, "use_bidirectional_attention");
    if (bidi && !cJSON_IsNull(bidi) && !(cJSON_IsString(bidi) && strcmp(bidi->valuestring, "vision") == 0))
      return fimi_fail(err, "%s: field \"use_bidirectional_attention\" must be null or \"vision\" (fimi is causal)",
                       what);
  } else if (require_bool_value(obj, "use_bidirectional_attention", 0, what, err) != 0) {
    return -1;
  }
  if (require_bool_value(obj, "is_encoder_decoder", 0, what, err) != 0) return -1;
  if (require_bool_value(obj, "add_cross_attention", 0, what, err) != 0) return -1;
  double dropout = 0;
  if (json_get_double(obj, "attention_dropout", 0, &dropout, what, err) != 0) return -1;
  if (dropout != 0) return fimi_fail(err, "%s: field \"attention_dropout\" must be 0 (fimi has no dropout)", what);
  return 0;
}

// ----------------------------------------------------------------------------
// parsing

static int parse_text_config(GemmaConfig *c, const cJSON *obj, GemmaFamily family, const char *what, FimiError *err) {
  set_hf_defaults(c, family);
  if (check_keys(obj, family, 0, what, err) != 0) return -1;
  if (check_unsupported(obj, family, what, err) != 0) return -1;
  if (read_sizes(c, obj, what, err) != 0) return -1;
  if (read_token_ids(c, obj, what, err) != 0) return -1;
  if (family != GEMMA_FAMILY_GEMMA4 && read_rope(c, obj, what, err) != 0) return -1;
  if (read_layer_types(c, obj, what, err) != 0) return -1;
  if (family == GEMMA_FAMILY_GEMMA4 && read_gemma4(c, obj, what, err) != 0) return -1;
  if (gemma_config_validate(c, err) != 0) return fimi_fail_wrap(err, "%s", what);
  return 0;
}

// The multimodal "gemma3" / "gemma4" file: text_config holds the language
// model, and only its non-default values; token ids may sit at the top level.
static int parse_wrapper(GemmaConfig *c, const cJSON *root, GemmaFamily family, const char *what, FimiError *err) {
  static const char *const gemma3_arch[] = {"Gemma3ForConditionalGeneration", "Gemma3ForCausalLM", NULL};
  static const char *const gemma4_arch[] = {"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", NULL};
  const char *text_type = family == GEMMA_FAMILY_GEMMA4 ? "gemma4_text" : "gemma3_text";
  if (check_keys(root, family, 1, what, err) != 0) return -1;
  if (check_architectures(root, family == GEMMA_FAMILY_GEMMA4 ? gemma4_arch : gemma3_arch, what, err) != 0) return -1;
  if (require_bool_value(root, "tie_word_embeddings", 1, what, err) != 0) return -1;
  const cJSON *text = item_of(root, "text_config");
  if (!cJSON_IsObject(text)) return fimi_fail(err, "%s: field \"text_config\" must be an object", what);
  char sub[512];
  snprintf(sub, sizeof sub, "%s: text_config", what);
  const cJSON *type = item_of(text, "model_type");
  if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, text_type) != 0))
    return fimi_fail(err, "%s: field \"model_type\" must be \"%s\"", sub, text_type);
  // Top-level ids apply unless text_config sets its own: read them first into a scratch copy.
  GemmaConfig top;
  set_hf_defaults(&top, family);
  if (read_token_ids(&top, root, what, err) != 0) return -1;
  if (parse_text_config(c, text, family, sub, err) != 0) return -1;
  if (!item_of(text, "bos_token_id")) c->bos_token_id = top.bos_token_id;
  if (!item_of(text, "pad_token_id")) c->pad_token_id = top.pad_token_id;
  if (!item_of(text, "eos_token_id")) {
    c->eos_token_id = top.eos_token_id;
    c->num_extra_eos = top.num_extra_eos;
    memcpy(c->extra_eos_token_ids, top.extra_eos_token_ids, sizeof top.extra_eos_token_ids);
  }
  if (gemma_config_validate(c, err) != 0) return fimi_fail_wrap(err, "%s", what);
  return 0;
}

int gemma_config_parse_json(GemmaConfig *cfg, const char *text, size_t length, const char *what, FimiError *err) {
  cJSON *root = json_parse_text(text, length, what, err);
  if (!root) return -1;
  int rc = -1;
  char type[32] = "";
  if (!cJSON_IsObject(root)) {
    fimi_fail(err, "%s: expected a JSON object", what);
  } else if (json_get_string(root, "model_type", 1, type, sizeof type, what, err) != 0) {
    // message already names the field
  } else if (strcmp(type, "gemma3_text") == 0) {
    rc = parse_text_config(cfg, root, GEMMA_FAMILY_GEMMA3, what, err);
  } else if (strcmp(type, "gemma2") == 0) {
    rc = parse_text_config(cfg, root, GEMMA_FAMILY_GEMMA2, what, err);
  } else if (strcmp(type, "gemma3") == 0) {
    rc = parse_wrapper(cfg, root, GEMMA_FAMILY_GEMMA3, what, err);
  } else if (strcmp(type, "gemma4_text") == 0) {
    rc = parse_text_config(cfg, root, GEMMA_FAMILY_GEMMA4, what, err);
  } else if (strcmp(type, "gemma4") == 0) {
    rc = parse_wrapper(cfg, root, GEMMA_FAMILY_GEMMA4, what, err);
  } else {
    fimi_fail(err, "%s: field \"model_type\" is \"%s\"; fimi reads gemma2, gemma3_text, gemma3, gemma4_text and gemma4",
              what, type);
  }
  cJSON_Delete(root);
  return rc;
}

int gemma_config_load_json(GemmaConfig *cfg, const char *path, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, CONFIG_MAX_BYTES, &size, err);
  if (!text) return -1;
  int rc = gemma_config_parse_json(cfg, text, size, path, err);
  free(text);
  return rc;
}

// ----------------------------------------------------------------------------
// presets

typedef struct {
  const char *name;
  GemmaFamily family;
  int V, C, I, L, nh, nkv, hd, W, pattern, max_pos;
  double qpas, rope_scaling, attn_cap, final_cap;
} Preset;

// pattern: layer i is global when (i+1) % pattern == 0 (2 = odd layers global).
// Real models: the values of their Hugging Face config.json files.
static const Preset PRESETS[] = {
    {"tiny", GEMMA_FAMILY_GEMMA3, 512, 64, 128, 4, 4, 2, 16, 8, 2, 2048, 16, 1, 0, 0},
    {"tiny-gemma2", GEMMA_FAMILY_GEMMA2, 512, 64, 128, 4, 4, 2, 16, 8, 2, 2048, 16, 1, 50, 30},
    {"small-10m", GEMMA_FAMILY_GEMMA3, 16384, 256, 1024, 6, 4, 2, 64, 128, 6, 8192, 64, 1, 0, 0},
    {"gemma3-270m", GEMMA_FAMILY_GEMMA3, 262144, 640, 2048, 18, 4, 1, 256, 512, 6, 32768, 256, 1, 0, 0},
    // ~88M parameters with a 270m-shaped layer: big enough to load an H200 in
    // the GPU model test and benchmark, small enough for the CPU reference.
    {"gpu-100m", GEMMA_FAMILY_GEMMA3, 32768, 640, 2048, 12, 4, 1, 256, 512, 6, 32768, 256, 1, 0, 0},
    {"gemma3-1b", GEMMA_FAMILY_GEMMA3, 262144, 1152, 6912, 26, 4, 1, 256, 512, 6, 32768, 256, 1, 0, 0},
    {"gemma3-4b", GEMMA_FAMILY_GEMMA3, 262208, 2560, 10240, 34, 8, 4, 256, 1024, 6, 131072, 256, 8, 0, 0},
};
#define NUM_PRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

typedef struct {
  const char *name;
  int V, C, I, L, nh, nkv, hd, global_hd, global_kv, k_eq_v, kv_shared, double_wide, P, W, pattern;
} Gemma4Preset;

// gemma4-e2b / gemma4-e4b: the text_config of google/gemma-4-E2B-it and
// google/gemma-4-E4B-it config.json (docs/gemma4.md says where the numbers
// come from); rope, softcap 30 and the other values are Gemma4TextConfig's
// defaults, which those files keep. tiny-g4 has every Gemma 4 feature at
// test size: per-layer embeddings, 2 kv-shared layers with a double-wide MLP,
// full-attention layers with their own head dim and one kv head as keys = values.
static const Gemma4Preset GEMMA4_PRESETS[] = {
    {"tiny-g4", 512, 64, 128, 6, 4, 2, 16, 32, 1, 1, 2, 1, 8, 8, 3},
    {"gemma4-e2b", 262144, 1536, 6144, 35, 8, 1, 256, 512, 0, 0, 20, 1, 256, 512, 5},
    {"gemma4-e4b", 262144, 2560, 10240, 42, 8, 2, 256, 512, 0, 0, 18, 0, 256, 512, 6},
};
#define NUM_GEMMA4_PRESETS ((int)(sizeof GEMMA4_PRESETS / sizeof GEMMA4_PRESETS[0]))

static int gemma4_preset(GemmaConfig *cfg, const char *name) {
  for (int i = 0; i < NUM_GEMMA4_PRESETS; i++) {
    const Gemma4Preset *p = &GEMMA4_PRESETS[i];
    if (strcmp(p->name, name) != 0) continue;
    set_hf_defaults(cfg, GEMMA_FAMILY_GEMMA4);
    cfg->vocab_size = cfg->vocab_size_per_layer_input = p->V;
    cfg->hidden_size = p->C;
    cfg->intermediate_size = p->I;
    cfg->num_hidden_layers = p->L;
    cfg->num_attention_heads = p->nh;
    cfg->num_key_value_heads = p->nkv;
    cfg->head_dim = p->hd;
    cfg->global_head_dim = p->global_hd;
    cfg->num_global_key_value_heads = p->global_kv;
    cfg->attention_k_eq_v = p->k_eq_v;
    cfg->num_kv_shared_layers = p->kv_shared;
    cfg->use_double_wide_mlp = p->double_wide;
    cfg->hidden_size_per_layer_input = p->P;
    cfg->sliding_window = p->W;
    cfg->final_logit_softcapping = 30.0;
    if (p->V < 4096) cfg->max_position_embeddings = 2048;
    set_layer_pattern(cfg, p->pattern);
    cfg->layer_is_sliding[p->L - 1] = 0;
    return 1;
  }
  return 0;
}

int gemma_config_preset(GemmaConfig *cfg, const char *name, FimiError *err) {
  if (gemma4_preset(cfg, name)) return 0;
  for (int i = 0; i < NUM_PRESETS; i++) {
    const Preset *p = &PRESETS[i];
    if (strcmp(p->name, name) != 0) continue;
    set_hf_defaults(cfg, p->family);
    cfg->vocab_size = p->V;
    cfg->hidden_size = p->C;
    cfg->intermediate_size = p->I;
    cfg->num_hidden_layers = p->L;
    cfg->num_attention_heads = p->nh;
    cfg->num_key_value_heads = p->nkv;
    cfg->head_dim = p->hd;
    cfg->sliding_window = p->W;
    cfg->max_position_embeddings = p->max_pos;
    cfg->query_pre_attn_scalar = p->qpas;
    cfg->rope_scaling_factor = p->rope_scaling;
    cfg->attn_logit_softcapping = p->attn_cap;
    cfg->final_logit_softcapping = p->final_cap;
    if (p->family == GEMMA_FAMILY_GEMMA2) cfg->rope_local_base_freq = cfg->rope_theta = 1e4;
    set_layer_pattern(cfg, p->pattern);
    return 0;
  }
  char names[256] = "";
  for (int i = 0; i < NUM_PRESETS; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", PRESETS[i].name);
  for (int i = 0; i < NUM_GEMMA4_PRESETS; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), ", %s", GEMMA4_PRESETS[i].name);
  return fimi_fail(err, "unknown model preset \"%s\" (known: %s)", name, names);
}

// ----------------------------------------------------------------------------
// validation and size

// Dimensions are capped so that every product below fits int64 with room.
#define DIM_MAX (1 << 24)

static int check_dim(const char *field, int value, FimiError *err) {
  if (value < 1 || value > DIM_MAX) return fimi_fail(err, "%s must be in 1..%d (got %d)", field, DIM_MAX, value);
  return 0;
}

static int check_positive(const char *field, double value, FimiError *err) {
  if (!(value > 0) || !isfinite(value)) return fimi_fail(err, "%s must be a positive number (got %g)", field, value);
  return 0;
}

static int check_token(const char *field, int id, int vocab, FimiError *err) {
  if (id < 0 || id >= vocab) return fimi_fail(err, "%s %d is outside the vocabulary (0..%d)", field, id, vocab - 1);
  return 0;
}

// Gemma 4's own fields; the shared ones are checked by gemma_config_validate.
static int validate_gemma4(const GemmaConfig *c, FimiError *err) {
  int L = c->num_hidden_layers;
  if (c->hidden_size_per_layer_input < 0 || c->hidden_size_per_layer_input > DIM_MAX)
    return fimi_fail(err, "hidden_size_per_layer_input must be in 0..%d (got %d)", DIM_MAX, c->hidden_size_per_layer_input);
  if (c->hidden_size_per_layer_input > 0 && c->vocab_size_per_layer_input != c->vocab_size)
    return fimi_fail(err, "vocab_size_per_layer_input (%d) must equal vocab_size (%d) in fimi",
                     c->vocab_size_per_layer_input, c->vocab_size);
  if ((int64_t)L * c->hidden_size_per_layer_input > DIM_MAX)
    return fimi_fail(err, "num_hidden_layers * hidden_size_per_layer_input is too large");
  if (check_dim("global_head_dim", c->global_head_dim, err)) return -1;
  if (c->global_head_dim % 2 != 0)
    return fimi_fail(err, "global_head_dim (%d) must be even for rotary embeddings", c->global_head_dim);
  if ((int64_t)c->num_attention_heads * c->global_head_dim > DIM_MAX)
    return fimi_fail(err, "num_attention_heads * global_head_dim is too large");
  if (c->num_global_key_value_heads < 0 ||
      (c->num_global_key_value_heads > 0 && c->num_attention_heads % c->num_global_key_value_heads != 0))
    return fimi_fail(err, "num_attention_heads (%d) must be a multiple of num_global_key_value_heads (%d)",
                     c->num_attention_heads, c->num_global_key_value_heads);
  if (c->num_kv_shared_layers < 0 || c->num_kv_shared_layers >= L)
    return fimi_fail(err, "num_kv_shared_layers must be in 0..%d (got %d): some layer must compute keys", L - 1,
                     c->num_kv_shared_layers);
  if (!(c->partial_rotary_factor >= 0 && c->partial_rotary_factor <= 1))
    return fimi_fail(err, "partial_rotary_factor must be in [0, 1] (got %g)", c->partial_rotary_factor);
  if (c->layer_is_sliding[L - 1]) return fimi_fail(err, "layer_types: the last layer must be full_attention");
  // transformers' kv_sharing_modes: a shared layer needs an earlier layer of its type
  for (int l = L - c->num_kv_shared_layers; l < L; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(c, l, &shape);
    if (shape.kv_source < 0)
      return fimi_fail(err, "layer %d shares keys and values, but no earlier layer is %s", l,
                       c->layer_is_sliding[l] ? "sliding_attention" : "full_attention");
  }
  return 0;
}

void gemma_layer_shape(const GemmaConfig *c, int l, GemmaLayerShape *s) {
  memset(s, 0, sizeof *s);
  s->head_dim = c->head_dim;
  s->kv_heads = c->num_key_value_heads;
  s->intermediate = c->intermediate_size;
  s->kv_source = l;
  s->has_kv = s->has_v = 1;
  s->rope_pairs = c->head_dim / 2;
  if (c->family != GEMMA_FAMILY_GEMMA4) return;
  int L = c->num_hidden_layers, first_shared = L - c->num_kv_shared_layers, full = !c->layer_is_sliding[l];
  if (full) {
    s->head_dim = c->global_head_dim;
    if (c->num_global_key_value_heads > 0) s->kv_heads = c->num_global_key_value_heads;
    // _compute_proportional_rope_parameters: int(factor * head_dim // 2) rotated angles
    s->rope_pairs = (int)floor(c->partial_rotary_factor * s->head_dim / 2.0);
  }
  if (l >= first_shared) {
    s->kv_source = -1;  // the last non-shared layer of the same type
    for (int j = first_shared - 1; j >= 0 && s->kv_source < 0; j--)
      if (c->layer_is_sliding[j] == c->layer_is_sliding[l]) s->kv_source = j;
    s->has_kv = s->has_v = 0;
    if (c->use_double_wide_mlp) s->intermediate *= 2;
    return;
  }
  s->has_v = !(full && c->attention_k_eq_v);
  // the last non-shared layer of its type keeps its keys for the shared ones
  s->stores_kv = c->num_kv_shared_layers > 0;
  for (int j = l + 1; j < first_shared; j++)
    if (c->layer_is_sliding[j] == c->layer_is_sliding[l]) s->stores_kv = 0;
}

GemmaLayerWidths gemma_widest_layer(const GemmaConfig *cfg) {
  GemmaLayerWidths d = {0, 0, 0, 0};
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape s;
    gemma_layer_shape(cfg, l, &s);
    size_t qd = (size_t)cfg->num_attention_heads * s.head_dim, kvd = (size_t)s.kv_heads * s.head_dim;
    if (qd > d.qd) d.qd = qd;
    if (kvd > d.kvd) d.kvd = kvd;
    if ((size_t)s.kv_heads > d.nkv) d.nkv = s.kv_heads;
    if ((size_t)s.intermediate > d.mlp) d.mlp = s.intermediate;
  }
  return d;
}

int gemma_config_validate(const GemmaConfig *c, FimiError *err) {
  if (c->family != GEMMA_FAMILY_GEMMA2 && c->family != GEMMA_FAMILY_GEMMA3 && c->family != GEMMA_FAMILY_GEMMA4)
    return fimi_fail(err, "family must be gemma2, gemma3 or gemma4 (got %d)", (int)c->family);
  if (check_dim("vocab_size", c->vocab_size, err) || check_dim("hidden_size", c->hidden_size, err) ||
      check_dim("intermediate_size", c->intermediate_size, err) ||
      check_dim("num_attention_heads", c->num_attention_heads, err) ||
      check_dim("num_key_value_heads", c->num_key_value_heads, err) || check_dim("head_dim", c->head_dim, err) ||
      check_dim("max_position_embeddings", c->max_position_embeddings, err) ||
      check_dim("sliding_window", c->sliding_window, err))
    return -1;
  if (c->num_hidden_layers < 1 || c->num_hidden_layers > GEMMA_MAX_LAYERS)
    return fimi_fail(err, "num_hidden_layers must be in 1..%d (got %d)", GEMMA_MAX_LAYERS, c->num_hidden_layers);
  if (c->num_attention_heads % c->num_key_value_heads != 0)
    return fimi_fail(err, "num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)",
                     c->num_attention_heads, c->num_key_value_heads);
  if (c->head_dim % 2 != 0) return fimi_fail(err, "head_dim (%d) must be even for rotary embeddings", c->head_dim);
  if ((int64_t)c->num_attention_heads * c->head_dim > DIM_MAX)
    return fimi_fail(err, "num_attention_heads * head_dim is too large");
  // transformers 5 refuses configs whose hidden size the head count does not divide.
  if (c->hidden_size % c->num_attention_heads != 0)
    return fimi_fail(err, "hidden_size (%d) must be a multiple of num_attention_heads (%d), as transformers requires",
                     c->hidden_size, c->num_attention_heads);
  if (check_positive("rms_norm_eps", c->rms_norm_eps, err) || check_positive("rope_theta", c->rope_theta, err) ||
      check_positive("rope_local_base_freq", c->rope_local_base_freq, err) ||
      check_positive("rope_scaling factor", c->rope_scaling_factor, err) ||
      check_positive("query_pre_attn_scalar", c->query_pre_attn_scalar, err))
    return -1;
  if (!(c->attn_logit_softcapping >= 0) || !(c->final_logit_softcapping >= 0) ||
      !isfinite(c->attn_logit_softcapping) || !isfinite(c->final_logit_softcapping))
    return fimi_fail(err, "attn_logit_softcapping and final_logit_softcapping must be >= 0 (0 = none)");
  if (c->family == GEMMA_FAMILY_GEMMA2 && (c->rope_local_base_freq != c->rope_theta || c->rope_scaling_factor != 1))
    return fimi_fail(err, "gemma2 has one rope_theta for all layers and no rope_scaling in fimi");
  if (check_token("bos_token_id", c->bos_token_id, c->vocab_size, err) ||
      check_token("eos_token_id", c->eos_token_id, c->vocab_size, err) ||
      check_token("pad_token_id", c->pad_token_id, c->vocab_size, err))
    return -1;
  if (c->num_extra_eos < 0 || c->num_extra_eos > GEMMA_MAX_EXTRA_EOS)
    return fimi_fail(err, "eos_token_id list holds at most %d ids", 1 + GEMMA_MAX_EXTRA_EOS);
  for (int i = 0; i < c->num_extra_eos; i++)
    if (check_token("eos_token_id", c->extra_eos_token_ids[i], c->vocab_size, err)) return -1;
  for (int i = 0; i < c->num_hidden_layers; i++)
    if (c->layer_is_sliding[i] > 1) return fimi_fail(err, "layer_types[%d] is neither sliding nor full", i);
  if (c->family == GEMMA_FAMILY_GEMMA4) return validate_gemma4(c, err);
  return 0;
}

// Gemma 4: each layer's own tensors (gemma.h lists them) plus the
// per-layer embedding table, its projection and norm.
static int64_t gemma4_param_count(const GemmaConfig *c) {
  int64_t C = c->hidden_size, P = c->hidden_size_per_layer_input, L = c->num_hidden_layers;
  int64_t total = (int64_t)c->vocab_size * C + C;
  if (P > 0) total += (int64_t)c->vocab_size_per_layer_input * L * P + L * P * C + P;
  for (int l = 0; l < L; l++) {
    GemmaLayerShape s;
    gemma_layer_shape(c, l, &s);
    int64_t q = (int64_t)c->num_attention_heads * s.head_dim, kv = (int64_t)s.kv_heads * s.head_dim;
    total += 2 * C * q + s.head_dim + 4 * C + 3 * C * s.intermediate + 1;  // q, o, q_norm, norms, mlp, scalar
    total += s.has_kv ? C * kv + s.head_dim : 0;                           // k_proj, k_norm
    total += s.has_v ? C * kv : 0;
    total += P > 0 ? 2 * C * P + C : 0;  // per-layer gate, projection, norm
  }
  return total;
}

int64_t gemma_config_param_count(const GemmaConfig *c) {
  if (c->family == GEMMA_FAMILY_GEMMA4) return gemma4_param_count(c);
  int64_t C = c->hidden_size, q = (int64_t)c->num_attention_heads * c->head_dim;
  int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim;
  int64_t attention = C * q + 2 * C * kv + q * C;
  int64_t qk_norm = c->family == GEMMA_FAMILY_GEMMA3 ? 2 * (int64_t)c->head_dim : 0;
  int64_t mlp = 3 * C * c->intermediate_size;
  int64_t layer = attention + qk_norm + 4 * C + mlp;
  return (int64_t)c->vocab_size * C + C + c->num_hidden_layers * layer;
}

// ----------------------------------------------------------------------------
// writing config.json

// Smallest p with layer i global exactly when (i+1) % p == 0, or 0 if none;
// written as sliding_window_pattern for transformers releases before layer_types.
static int find_layer_pattern(const GemmaConfig *c) {
  for (int p = 1; p <= c->num_hidden_layers + 1; p++) {
    int ok = 1;
    for (int i = 0; i < c->num_hidden_layers && ok; i++) ok = c->layer_is_sliding[i] == ((i + 1) % p != 0);
    if (ok) return p;
  }
  return 0;
}

// transformers 5 checks field types strictly: a float field written as "30"
// (an int to Python) is refused. So floats are written the way Python writes
// them: the shortest text that reads back exactly, with ".0" if integral.
static void add_float(cJSON *obj, const char *key, double value) {
  char text[40];
  for (int precision = 15; precision <= 17; precision++) {
    snprintf(text, sizeof text, "%.*g", precision, value);
    if (strtod(text, NULL) == value) break;
  }
  if (!strpbrk(text, ".eEn")) strcat(text, ".0");  // n: nan/inf never reach here (validated)
  cJSON_AddRawToObject(obj, key, text);
}

static void add_softcap(cJSON *root, const char *key, double value) {
  if (value > 0) add_float(root, key, value);
  else cJSON_AddNullToObject(root, key);
}

// query_pre_attn_scalar is an int field in transformers; keep integral values ints.
static void add_int_or_float(cJSON *obj, const char *key, double value) {
  if (value == floor(value) && fabs(value) < 1e15) cJSON_AddNumberToObject(obj, key, value);
  else add_float(obj, key, value);
}

static void add_eos(cJSON *root, const GemmaConfig *c) {
  if (c->num_extra_eos == 0) {
    cJSON_AddNumberToObject(root, "eos_token_id", c->eos_token_id);
    return;
  }
  cJSON *list = cJSON_AddArrayToObject(root, "eos_token_id");
  cJSON_AddItemToArray(list, cJSON_CreateNumber(c->eos_token_id));
  for (int i = 0; i < c->num_extra_eos; i++) cJSON_AddItemToArray(list, cJSON_CreateNumber(c->extra_eos_token_ids[i]));
}

static void add_layer_types(cJSON *root, const GemmaConfig *c) {
  cJSON *types = cJSON_AddArrayToObject(root, "layer_types");
  for (int i = 0; i < c->num_hidden_layers; i++)
    cJSON_AddItemToArray(types, cJSON_CreateString(c->layer_is_sliding[i] ? "sliding_attention" : "full_attention"));
}

static void add_rope_gemma4(cJSON *root, const GemmaConfig *c) {
  cJSON *rp = cJSON_AddObjectToObject(root, "rope_parameters");
  cJSON *full = cJSON_AddObjectToObject(rp, "full_attention");
  if (c->rope_scaling_factor != 1.0) add_float(full, "factor", c->rope_scaling_factor);
  add_float(full, "partial_rotary_factor", c->partial_rotary_factor);
  add_float(full, "rope_theta", c->rope_theta);
  cJSON_AddStringToObject(full, "rope_type", "proportional");
  cJSON *sliding = cJSON_AddObjectToObject(rp, "sliding_attention");
  add_float(sliding, "rope_theta", c->rope_local_base_freq);
  cJSON_AddStringToObject(sliding, "rope_type", "default");
}

// The full-attention layers' head dim and kv heads as transformers writes
// them: {"<layer>": {"head_dim": .., "num_key_value_heads": ..}} (the kv
// heads only when they differ from num_key_value_heads).
static void add_per_layer_config(cJSON *root, const GemmaConfig *c) {
  cJSON *plc = cJSON_AddObjectToObject(root, "per_layer_config");
  for (int l = 0; l < c->num_hidden_layers; l++) {
    if (c->layer_is_sliding[l]) continue;
    char key[16];
    snprintf(key, sizeof key, "%d", l);
    cJSON *layer = cJSON_AddObjectToObject(plc, key);
    cJSON_AddNumberToObject(layer, "head_dim", c->global_head_dim);
    if (c->num_global_key_value_heads > 0) cJSON_AddNumberToObject(layer, "num_key_value_heads", c->num_global_key_value_heads);
  }
}

// Gemma4ForCausalLM's config.json, with per_layer_config as transformers
// writes it (what it derives from the Hub files' global_head_dim and
// num_global_key_value_heads).
static cJSON *config_object_gemma4(const GemmaConfig *c, const char *torch_dtype) {
  cJSON *root = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString("Gemma4ForCausalLM"));
  cJSON_AddFalseToObject(root, "attention_bias");
  add_float(root, "attention_dropout", 0.0);
  cJSON_AddBoolToObject(root, "attention_k_eq_v", c->attention_k_eq_v);
  cJSON_AddNumberToObject(root, "bos_token_id", c->bos_token_id);
  cJSON_AddFalseToObject(root, "enable_moe_block");
  add_eos(root, c);
  add_softcap(root, "final_logit_softcapping", c->final_logit_softcapping);
  cJSON_AddNumberToObject(root, "head_dim", c->head_dim);
  cJSON_AddStringToObject(root, "hidden_activation", "gelu_pytorch_tanh");
  cJSON_AddNumberToObject(root, "hidden_size", c->hidden_size);
  cJSON_AddNumberToObject(root, "hidden_size_per_layer_input", c->hidden_size_per_layer_input);
  add_float(root, "initializer_range", 0.02);
  cJSON_AddNumberToObject(root, "intermediate_size", c->intermediate_size);
  add_layer_types(root, c);
  cJSON_AddNumberToObject(root, "max_position_embeddings", c->max_position_embeddings);
  cJSON_AddStringToObject(root, "model_type", "gemma4_text");
  cJSON_AddNumberToObject(root, "num_attention_heads", c->num_attention_heads);
  cJSON_AddNumberToObject(root, "num_hidden_layers", c->num_hidden_layers);
  cJSON_AddNumberToObject(root, "num_key_value_heads", c->num_key_value_heads);
  cJSON_AddNumberToObject(root, "num_kv_shared_layers", c->num_kv_shared_layers);
  cJSON_AddNumberToObject(root, "pad_token_id", c->pad_token_id);
  add_per_layer_config(root, c);
  add_float(root, "rms_norm_eps", c->rms_norm_eps);
  add_rope_gemma4(root, c);
  cJSON_AddNumberToObject(root, "sliding_window", c->sliding_window);
  cJSON_AddTrueToObject(root, "tie_word_embeddings");
  cJSON_AddStringToObject(root, "torch_dtype", torch_dtype);
  cJSON_AddTrueToObject(root, "use_cache");
  cJSON_AddBoolToObject(root, "use_double_wide_mlp", c->use_double_wide_mlp);
  cJSON_AddNumberToObject(root, "vocab_size", c->vocab_size);
  cJSON_AddNumberToObject(root, "vocab_size_per_layer_input", c->vocab_size_per_layer_input);
  return root;
}

// Keys in the alphabetical order transformers writes them.
static cJSON *config_object(const GemmaConfig *c, const char *torch_dtype) {
  if (c->family == GEMMA_FAMILY_GEMMA4) return config_object_gemma4(c, torch_dtype);
  int g3 = c->family == GEMMA_FAMILY_GEMMA3;
  cJSON *root = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString(g3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM"));
  cJSON_AddFalseToObject(root, "attention_bias");
  add_float(root, "attention_dropout", 0.0);
  add_softcap(root, "attn_logit_softcapping", c->attn_logit_softcapping);
  cJSON_AddNumberToObject(root, "bos_token_id", c->bos_token_id);
  add_eos(root, c);
  add_softcap(root, "final_logit_softcapping", c->final_logit_softcapping);
  cJSON_AddNumberToObject(root, "head_dim", c->head_dim);
  cJSON_AddStringToObject(root, "hidden_activation", "gelu_pytorch_tanh");
  cJSON_AddNumberToObject(root, "hidden_size", c->hidden_size);
  add_float(root, "initializer_range", 0.02);
  cJSON_AddNumberToObject(root, "intermediate_size", c->intermediate_size);
  add_layer_types(root, c);
  cJSON_AddNumberToObject(root, "max_position_embeddings", c->max_position_embeddings);
  cJSON_AddStringToObject(root, "model_type", g3 ? "gemma3_text" : "gemma2");
  cJSON_AddNumberToObject(root, "num_attention_heads", c->num_attention_heads);
  cJSON_AddNumberToObject(root, "num_hidden_layers", c->num_hidden_layers);
  cJSON_AddNumberToObject(root, "num_key_value_heads", c->num_key_value_heads);
  cJSON_AddNumberToObject(root, "pad_token_id", c->pad_token_id);
  add_int_or_float(root, "query_pre_attn_scalar", c->query_pre_attn_scalar);
  add_float(root, "rms_norm_eps", c->rms_norm_eps);
  if (g3) add_float(root, "rope_local_base_freq", c->rope_local_base_freq);
  if (c->rope_scaling_factor != 1.0) {
    cJSON *rs = cJSON_AddObjectToObject(root, "rope_scaling");
    add_float(rs, "factor", c->rope_scaling_factor);
    cJSON_AddStringToObject(rs, "rope_type", "linear");
  } else {
    cJSON_AddNullToObject(root, "rope_scaling");
  }
  add_float(root, "rope_theta", c->rope_theta);
  cJSON_AddNumberToObject(root, "sliding_window", c->sliding_window);
  int pattern = g3 ? find_layer_pattern(c) : 0;
  if (pattern) cJSON_AddNumberToObject(root, "sliding_window_pattern", pattern);
  cJSON_AddTrueToObject(root, "tie_word_embeddings");
  cJSON_AddStringToObject(root, "torch_dtype", torch_dtype);
  cJSON_AddTrueToObject(root, "use_cache");
  cJSON_AddNumberToObject(root, "vocab_size", c->vocab_size);
  return root;
}

char *gemma_config_to_json_dtype(const GemmaConfig *cfg, const char *torch_dtype, FimiError *err) {
  if (gemma_config_validate(cfg, err) != 0) {
    fimi_fail_wrap(err, "writing config.json");
    return NULL;
  }
  cJSON *root = config_object(cfg, torch_dtype ? torch_dtype : "float32");
  char *printed = cJSON_Print(root);
  cJSON_Delete(root);
  // Hand back plain malloc memory with a final newline, as HF writes it.
  char *out = printed ? malloc(strlen(printed) + 2) : NULL;
  if (out) sprintf(out, "%s\n", printed);
  cJSON_free(printed);
  if (!out) fimi_fail(err, "out of memory writing config.json");
  return out;
}

char *gemma_config_to_json(const GemmaConfig *cfg, FimiError *err) {
  return gemma_config_to_json_dtype(cfg, "float32", err);
}
