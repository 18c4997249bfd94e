// tests/fuzz/fuzz_config_json.c: libFuzzer target for config.json parsing.
// Any input must either fail with a message or give a config that validates;
// an accepted config must survive gemma_config_to_json and parse back equal.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemma_config.h"

static int same(const GemmaConfig *a, const GemmaConfig *b) {
  if (a->family != b->family || a->vocab_size != b->vocab_size || a->hidden_size != b->hidden_size ||
      a->intermediate_size != b->intermediate_size || a->num_hidden_layers != b->num_hidden_layers ||
      a->num_attention_heads != b->num_attention_heads || a->num_key_value_heads != b->num_key_value_heads ||
      a->head_dim != b->head_dim || a->max_position_embeddings != b->max_position_embeddings ||
      a->rms_norm_eps != b->rms_norm_eps || a->rope_theta != b->rope_theta ||
      a->rope_local_base_freq != b->rope_local_base_freq || a->rope_scaling_factor != b->rope_scaling_factor ||
      a->query_pre_attn_scalar != b->query_pre_attn_scalar || a->sliding_window != b->sliding_window ||
      a->attn_logit_softcapping != b->attn_logit_softcapping ||
      a->final_logit_softcapping != b->final_logit_softcapping || a->bos_token_id != b->bos_token_id ||
      a->eos_token_id != b->eos_token_id || a->pad_token_id != b->pad_token_id ||
      a->num_extra_eos != b->num_extra_eos)
    return 0;
  // Gemma 4 fields (zero for Gemma 2/3)
  if (a->hidden_size_per_layer_input != b->hidden_size_per_layer_input ||
      a->vocab_size_per_layer_input != b->vocab_size_per_layer_input || a->global_head_dim != b->global_head_dim ||
      a->num_global_key_value_heads != b->num_global_key_value_heads || a->attention_k_eq_v != b->attention_k_eq_v ||
      a->num_kv_shared_layers != b->num_kv_shared_layers || a->use_double_wide_mlp != b->use_double_wide_mlp ||
      a->partial_rotary_factor != b->partial_rotary_factor)
    return 0;
  for (int i = 0; i < a->num_extra_eos; i++)
    if (a->extra_eos_token_ids[i] != b->extra_eos_token_ids[i]) return 0;
  return memcmp(a->layer_is_sliding, b->layer_is_sliding, (size_t)a->num_hidden_layers) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  GemmaConfig cfg, again;
  FimiError err = {0};
  if (gemma_config_parse_json(&cfg, (const char *)data, size, "fuzz.json", &err) != 0) {
    if (!err.failed || !err.message[0]) abort();
    return 0;
  }
  if (gemma_config_validate(&cfg, &err) != 0) abort();
  (void)gemma_config_param_count(&cfg);
  char *json = gemma_config_to_json(&cfg, &err);
  if (!json) abort();
  if (gemma_config_parse_json(&again, json, strlen(json), "round-trip.json", &err) != 0 || !same(&cfg, &again)) {
    fprintf(stderr, "round trip failed: %s\n%s\n", err.message, json);
    abort();
  }
  free(json);
  return 0;
}
