// tests/test_gemma_config.c: GemmaConfig presets, parameter counts, the
// config.json round trip, real Hugging Face config files (4.x and 5.x
// spellings, the multimodal gemma3 wrapper) and bad configs that must fail
// with a message naming the field.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemma_config.h"
#include "tests/test_util.h"

static const char *const PRESET_NAMES[] = {"tiny",     "tiny-gemma2", "small-10m", "gemma3-270m",
                                           "gpu-100m", "gemma3-1b",   "gemma3-4b"};
#define NUM_PRESET_NAMES ((int)(sizeof PRESET_NAMES / sizeof PRESET_NAMES[0]))

static int parse(GemmaConfig *c, const char *json, FimiError *err) {
  return gemma_config_parse_json(c, json, strlen(json), "config.json", err);
}

static int configs_equal(const GemmaConfig *a, const GemmaConfig *b, const char *label) {
  int ok = a->family == b->family && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->intermediate_size == b->intermediate_size && a->num_hidden_layers == b->num_hidden_layers &&
           a->num_attention_heads == b->num_attention_heads && a->num_key_value_heads == b->num_key_value_heads &&
           a->head_dim == b->head_dim && a->max_position_embeddings == b->max_position_embeddings &&
           a->rms_norm_eps == b->rms_norm_eps && a->rope_theta == b->rope_theta &&
           a->rope_local_base_freq == b->rope_local_base_freq && a->rope_scaling_factor == b->rope_scaling_factor &&
           a->query_pre_attn_scalar == b->query_pre_attn_scalar && a->sliding_window == b->sliding_window &&
           a->attn_logit_softcapping == b->attn_logit_softcapping &&
           a->final_logit_softcapping == b->final_logit_softcapping && a->bos_token_id == b->bos_token_id &&
           a->eos_token_id == b->eos_token_id && a->pad_token_id == b->pad_token_id &&
           a->num_extra_eos == b->num_extra_eos;
  for (int i = 0; ok && i < a->num_extra_eos; i++) ok = a->extra_eos_token_ids[i] == b->extra_eos_token_ids[i];
  for (int i = 0; ok && i < a->num_hidden_layers; i++) ok = a->layer_is_sliding[i] == b->layer_is_sliding[i];
  CHECK(ok, "%s: configs differ", label);
  return ok;
}

static void expect_fail(const char *label, const char *json, const char *needle) {
  GemmaConfig c;
  FimiError err = {0};
  int rc = parse(&c, json, &err);
  CHECK(rc == -1, "%s: accepted", label);
  if (rc == -1) {
    CHECK(strstr(err.message, needle) != NULL, "%s: message lacks \"%s\": %s", label, needle, err.message);
    CHECK(strstr(err.message, "config.json") != NULL, "%s: message lacks the file: %s", label, err.message);
  }
}

static void test_presets(void) {
  FimiError err = {0};
  for (int i = 0; i < NUM_PRESET_NAMES; i++) {
    GemmaConfig c;
    CHECK(gemma_config_preset(&c, PRESET_NAMES[i], &err) == 0, "preset %s: %s", PRESET_NAMES[i], err.message);
    CHECK(gemma_config_validate(&c, &err) == 0, "preset %s invalid: %s", PRESET_NAMES[i], err.message);
    printf("preset %-12s params %lld\n", PRESET_NAMES[i], (long long)gemma_config_param_count(&c));
  }
  GemmaConfig c;
  CHECK(gemma_config_preset(&c, "gpt2", &err) == -1 && strstr(err.message, "gemma3-1b"), "unknown preset: %s",
        err.message);
  gemma_config_preset(&c, "tiny", &err);
  CHECK(c.layer_is_sliding[0] && !c.layer_is_sliding[1] && c.layer_is_sliding[2] && !c.layer_is_sliding[3],
        "tiny: layers 0,2 sliding, 1,3 global");
  CHECK(c.family == GEMMA_FAMILY_GEMMA3 && c.attn_logit_softcapping == 0 && c.rope_theta == 1e6 &&
            c.rope_local_base_freq == 1e4,
        "tiny family/rope");
  gemma_config_preset(&c, "tiny-gemma2", &err);
  CHECK(c.family == GEMMA_FAMILY_GEMMA2 && c.attn_logit_softcapping == 50 && c.final_logit_softcapping == 30,
        "tiny-gemma2 softcaps");
  gemma_config_preset(&c, "gemma3-1b", &err);
  // Published count for Gemma 3 1B (Keras Hub preset metadata): 999,885,952.
  CHECK(gemma_config_param_count(&c) == 999885952LL, "gemma3-1b params %lld", (long long)gemma_config_param_count(&c));
  int globals = 0;
  for (int i = 0; i < c.num_hidden_layers; i++) globals += !c.layer_is_sliding[i];
  CHECK(globals == 4 && !c.layer_is_sliding[5] && c.layer_is_sliding[6], "gemma3-1b: every 6th layer global");
  gemma_config_preset(&c, "gemma3-4b", &err);
  CHECK(c.rope_scaling_factor == 8 && c.vocab_size == 262208, "gemma3-4b rope scaling and vocab");
  gemma_config_preset(&c, "small-10m", &err);
  int64_t n = gemma_config_param_count(&c);
  CHECK(n > 9000000 && n < 11000000, "small-10m has %lld params", (long long)n);
  gemma_config_preset(&c, "gpu-100m", &err);
  // 32768*640 + 640 + 12 * (4*640 + 2*256 + 2*1024*640 + 2*256*640 + 3*2048*640)
  CHECK(gemma_config_param_count(&c) == 87855744LL && c.layer_is_sliding[4] && !c.layer_is_sliding[5] &&
            !c.layer_is_sliding[11],
        "gpu-100m: %lld params, layers 5 and 11 global", (long long)gemma_config_param_count(&c));
}

static void test_round_trip(void) {
  FimiError err = {0};
  for (int i = 0; i < NUM_PRESET_NAMES; i++) {
    GemmaConfig a, b;
    gemma_config_preset(&a, PRESET_NAMES[i], &err);
    char *json = gemma_config_to_json(&a, &err);
    CHECK(json != NULL, "%s: to_json: %s", PRESET_NAMES[i], err.message);
    if (!json) continue;
    CHECK(parse(&b, json, &err) == 0, "%s: reparse: %s", PRESET_NAMES[i], err.message);
    configs_equal(&a, &b, PRESET_NAMES[i]);
    CHECK(strstr(json, a.family == GEMMA_FAMILY_GEMMA3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM") != NULL,
          "%s: architectures", PRESET_NAMES[i]);
    free(json);
  }
  // Extra eos ids and an irregular layer pattern survive too.
  GemmaConfig a, b;
  gemma_config_preset(&a, "tiny", &err);
  a.num_extra_eos = 1;
  a.extra_eos_token_ids[0] = 106;
  a.layer_is_sliding[1] = 1;
  a.layer_is_sliding[2] = 0;
  char *json = gemma_config_to_json_dtype(&a, "bfloat16", &err);
  CHECK(json && strstr(json, "bfloat16") && !strstr(json, "sliding_window_pattern"), "irregular layers json");
  if (json && parse(&b, json, &err) == 0) configs_equal(&a, &b, "tiny with extras");
  free(json);
}

// As published by google/gemma-3-1b-it (transformers 4.50): eos list, pattern, no layer_types.
static const char *GEMMA3_1B_IT =
    "{\"architectures\":[\"Gemma3ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
    "\"attn_logit_softcapping\":null,\"bos_token_id\":2,\"cache_implementation\":\"hybrid\",\"eos_token_id\":[1,106],"
    "\"final_logit_softcapping\":null,\"head_dim\":256,\"hidden_activation\":\"gelu_pytorch_tanh\",\"hidden_size\":1152,"
    "\"initializer_range\":0.02,\"intermediate_size\":6912,\"max_position_embeddings\":32768,\"model_type\":\"gemma3_text\","
    "\"num_attention_heads\":4,\"num_hidden_layers\":26,\"num_key_value_heads\":1,\"pad_token_id\":0,"
    "\"query_pre_attn_scalar\":256,\"rms_norm_eps\":1e-06,\"rope_local_base_freq\":10000,\"rope_scaling\":null,"
    "\"rope_theta\":1000000,\"sliding_window\":512,\"sliding_window_pattern\":6,\"torch_dtype\":\"bfloat16\","
    "\"transformers_version\":\"4.50.0.dev0\",\"use_cache\":true,\"vocab_size\":262144}";

// The multimodal google/gemma-3-4b-it layout: text_config holds only non-defaults.
static const char *GEMMA3_4B_IT =
    "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"boi_token_index\":255999,\"eoi_token_index\":256000,"
    "\"eos_token_id\":[1,106],\"image_token_index\":262144,\"initializer_range\":0.02,\"mm_tokens_per_image\":256,"
    "\"model_type\":\"gemma3\",\"text_config\":{\"hidden_size\":2560,\"intermediate_size\":10240,"
    "\"model_type\":\"gemma3_text\",\"num_hidden_layers\":34,\"rope_scaling\":{\"factor\":8.0,\"rope_type\":\"linear\"},"
    "\"sliding_window\":1024},\"torch_dtype\":\"bfloat16\",\"transformers_version\":\"4.50.0.dev0\","
    "\"vision_config\":{\"hidden_size\":1152,\"model_type\":\"siglip_vision_model\",\"patch_size\":14}}";

// transformers 5.x spelling: rope_parameters per layer type, _sliding_window_pattern.
static const char *GEMMA3_V5 =
    "{\"_sliding_window_pattern\":6,\"architectures\":null,\"attention_bias\":false,\"dtype\":null,"
    "\"head_dim\":16,\"hidden_size\":64,\"intermediate_size\":128,\"layer_types\":[\"sliding_attention\","
    "\"full_attention\",\"sliding_attention\",\"full_attention\"],\"max_position_embeddings\":2048,"
    "\"model_type\":\"gemma3_text\",\"num_attention_heads\":4,\"num_hidden_layers\":4,\"num_key_value_heads\":2,"
    "\"query_pre_attn_scalar\":16,\"id2label\":{\"0\":\"LABEL_0\"},\"return_dict\":true,"
    "\"rope_parameters\":{\"full_attention\":{\"factor\":8.0,\"rope_theta\":500000.0,\"rope_type\":\"linear\"},"
    "\"sliding_attention\":{\"rope_theta\":20000.0,\"rope_type\":\"default\"}},\"sliding_window\":8,"
    "\"use_bidirectional_attention\":false,\"vocab_size\":512}";

// As published by google/gemma-2-2b.
static const char *GEMMA2_2B =
    "{\"architectures\":[\"Gemma2ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
    "\"attn_logit_softcapping\":50.0,\"bos_token_id\":2,\"cache_implementation\":\"hybrid\",\"eos_token_id\":1,"
    "\"final_logit_softcapping\":30.0,\"head_dim\":256,\"hidden_act\":\"gelu_pytorch_tanh\","
    "\"hidden_activation\":\"gelu_pytorch_tanh\",\"hidden_size\":2304,\"initializer_range\":0.02,"
    "\"intermediate_size\":9216,\"max_position_embeddings\":8192,\"model_type\":\"gemma2\",\"num_attention_heads\":8,"
    "\"num_hidden_layers\":26,\"num_key_value_heads\":4,\"pad_token_id\":0,\"query_pre_attn_scalar\":256,"
    "\"rms_norm_eps\":1e-06,\"rope_theta\":10000.0,\"sliding_window\":4096,\"torch_dtype\":\"float32\","
    "\"transformers_version\":\"4.42.4\",\"use_cache\":true,\"vocab_size\":256000}";

static void test_real_configs(void) {
  FimiError err = {0};
  GemmaConfig c, preset;
  CHECK(parse(&c, GEMMA3_1B_IT, &err) == 0, "gemma-3-1b-it: %s", err.message);
  gemma_config_preset(&preset, "gemma3-1b", &err);
  preset.num_extra_eos = 1;
  preset.extra_eos_token_ids[0] = 106;
  configs_equal(&c, &preset, "gemma-3-1b-it vs preset");

  CHECK(parse(&c, GEMMA3_4B_IT, &err) == 0, "gemma-3-4b-it: %s", err.message);
  gemma_config_preset(&preset, "gemma3-4b", &err);
  preset.num_extra_eos = 1;
  preset.extra_eos_token_ids[0] = 106;
  configs_equal(&c, &preset, "gemma-3-4b-it vs preset");

  CHECK(parse(&c, GEMMA3_V5, &err) == 0, "v5 config: %s", err.message);
  CHECK(c.rope_theta == 500000 && c.rope_local_base_freq == 20000 && c.rope_scaling_factor == 8, "v5 rope_parameters");
  CHECK(c.layer_is_sliding[0] && !c.layer_is_sliding[1], "v5 layer_types win over the pattern");

  CHECK(parse(&c, GEMMA2_2B, &err) == 0, "gemma-2-2b: %s", err.message);
  CHECK(c.family == GEMMA_FAMILY_GEMMA2 && c.attn_logit_softcapping == 50 && c.rope_local_base_freq == 1e4 &&
            c.layer_is_sliding[0] && !c.layer_is_sliding[1] && c.layer_is_sliding[24] && !c.layer_is_sliding[25],
        "gemma-2-2b values");

  // Absent keys take transformers' defaults.
  CHECK(parse(&c, "{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":7}", &err) == 0, "minimal: %s", err.message);
  CHECK(c.vocab_size == 262208 && c.hidden_size == 2304 && c.sliding_window == 4096 && c.layer_is_sliding[4] &&
            !c.layer_is_sliding[5] && c.layer_is_sliding[6],
        "gemma3 defaults");
  CHECK(parse(&c, "{\"model_type\":\"gemma2\",\"num_hidden_layers\":2,\"final_logit_softcapping\":null}", &err) == 0,
        "gemma2 minimal: %s", err.message);
  CHECK(c.final_logit_softcapping == 0 && c.attn_logit_softcapping == 50, "gemma2 softcap null vs default");
}

static void test_bad_configs(void) {
  expect_fail("unknown key", "{\"model_type\":\"gemma3_text\",\"num_experts\":8}", "num_experts");
  expect_fail("gemma3 key in gemma2", "{\"model_type\":\"gemma2\",\"rope_local_base_freq\":10000}",
              "rope_local_base_freq");
  expect_fail("wrong type", "{\"model_type\":\"gemma3_text\",\"hidden_size\":\"64\"}", "hidden_size");
  expect_fail("fractional size", "{\"model_type\":\"gemma3_text\",\"hidden_size\":64.5}", "hidden_size");
  expect_fail("rope yarn", "{\"model_type\":\"gemma3_text\",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
              "yarn");
  expect_fail("rope extra key",
              "{\"model_type\":\"gemma3_text\",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":4,\"beta_fast\":1}}",
              "beta_fast");
  expect_fail("linear without factor", "{\"model_type\":\"gemma3_text\",\"rope_scaling\":{\"rope_type\":\"linear\"}}",
              "factor");
  expect_fail("sliding rope scaled",
              "{\"model_type\":\"gemma3_text\",\"rope_parameters\":{\"sliding_attention\":{\"rope_type\":\"linear\","
              "\"factor\":2}}}",
              "sliding_attention");
  expect_fail("gemma2 rope scaling",
              "{\"model_type\":\"gemma2\",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2}}", "rope_scaling");
  expect_fail("heads not divisible",
              "{\"model_type\":\"gemma3_text\",\"num_attention_heads\":6,\"num_key_value_heads\":4,\"hidden_size\":2400}",
              "num_key_value_heads");
  expect_fail("odd head_dim", "{\"model_type\":\"gemma3_text\",\"head_dim\":15}", "head_dim");
  expect_fail("activation", "{\"model_type\":\"gemma3_text\",\"hidden_activation\":\"silu\"}", "hidden_activation");
  expect_fail("untied", "{\"model_type\":\"gemma3_text\",\"tie_word_embeddings\":false}", "tie_word_embeddings");
  expect_fail("bias", "{\"model_type\":\"gemma3_text\",\"attention_bias\":true}", "attention_bias");
  expect_fail("dropout", "{\"model_type\":\"gemma3_text\",\"attention_dropout\":0.1}", "attention_dropout");
  expect_fail("bidirectional", "{\"model_type\":\"gemma3_text\",\"use_bidirectional_attention\":true}",
              "use_bidirectional_attention");
  expect_fail("other model", "{\"model_type\":\"llama\",\"hidden_size\":64}", "model_type");
  expect_fail("no model_type", "{\"hidden_size\":64}", "model_type");
  expect_fail("classifier", "{\"model_type\":\"gemma3_text\",\"architectures\":[\"Gemma3ForSequenceClassification\"]}",
              "architectures");
  expect_fail("layer_types length", "{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":2,\"layer_types\":[\"full_attention\"]}",
              "layer_types");
  expect_fail("layer_types value",
              "{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":1,\"layer_types\":[\"chunked_attention\"]}",
              "layer_types");
  expect_fail("too many layers", "{\"model_type\":\"gemma3_text\",\"num_hidden_layers\":300}", "num_hidden_layers");
  expect_fail("negative size", "{\"model_type\":\"gemma3_text\",\"intermediate_size\":-1}", "intermediate_size");
  expect_fail("softcap zero", "{\"model_type\":\"gemma2\",\"attn_logit_softcapping\":0}", "attn_logit_softcapping");
  expect_fail("eos list", "{\"model_type\":\"gemma3_text\",\"eos_token_id\":[1,\"x\"]}", "eos_token_id");
  expect_fail("eos outside vocab", "{\"model_type\":\"gemma3_text\",\"vocab_size\":100,\"eos_token_id\":100}",
              "eos_token_id");
  expect_fail("wrapper without text", "{\"model_type\":\"gemma3\"}", "text_config");
  expect_fail("wrapper unknown key", "{\"model_type\":\"gemma3\",\"text_config\":{},\"audio_config\":{}}",
              "audio_config");
  expect_fail("wrapper text unknown key", "{\"model_type\":\"gemma3\",\"text_config\":{\"moe\":1}}", "text_config");
  expect_fail("not json", "{\"model_type\":", "invalid JSON");
  expect_fail("not object", "[1,2]", "object");
}

int main(void) {
  test_presets();
  test_round_trip();
  test_real_configs();
  test_bad_configs();
  TEST_MAIN_END();
}
