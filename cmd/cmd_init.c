// cmd/cmd_init.c: `fimi init`: build a model from a preset (or an HF
// config.json), initialize it randomly (N(0, 0.02), norms at 0, as HF does)
// and save it as a Hugging Face checkpoint directory.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "data/tokenizer.h"
#include "kernels/device.h"
#include "model/gemma.h"
#include "model/weights.h"

static void print_init_help(void) {
  printf(
      "usage: fimi init --out DIR [--preset NAME | --config-json FILE] [--seed N] [--dtype f32|bf16]\n"
      "                 [--max-shard-mb MB] [--tokenizer FILE] [--config FILE.ini] [--set model.key=value]\n"
      "  writes DIR/config.json and DIR/model.safetensors (sharded above --max-shard-mb, default 5000;\n"
      "  0 = never shard; fractions allowed). --tokenizer copies a tokenizer.json into DIR and sizes the\n"
      "  model's vocabulary and its bos/eos/pad ids (eos also <end_of_turn>) to it.\n");
}

typedef struct InitArgs {
  const char *out_dir;
  const char *tokenizer_path;
  SafetensorsDtype dtype;
  double max_shard_mb;
} InitArgs;

static int parse_init_args(CliOptions *opts, int argc, char **argv, InitArgs *args, FimiError *err) {
  args->out_dir = NULL;
  args->tokenizer_path = NULL;
  args->dtype = SAFETENSORS_F32;
  args->max_shard_mb = 5000;
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i], *value = NULL;
    static const char *const flags[] = {"--out", "--tokenizer", "--preset", "--config-json", "--seed", "--dtype",
                                        "--max-shard-mb", NULL};
    if (!cli_is_one_of(flag, flags)) return fimi_fail(err, "unknown option %s (see fimi init --help)", flag);
    if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
    if (!strcmp(flag, "--out")) {
      args->out_dir = value;
    } else if (!strcmp(flag, "--tokenizer")) {
      args->tokenizer_path = value;
    } else if (!strcmp(flag, "--preset")) {
      if (config_set(&opts->config, "model", "preset", value, "--preset", err) != 0) return -1;
    } else if (!strcmp(flag, "--config-json")) {
      if (config_set(&opts->config, "model", "config_json", value, "--config-json", err) != 0) return -1;
    } else if (!strcmp(flag, "--seed")) {
      if (config_set(&opts->config, "model", "seed", value, "--seed", err) != 0) return -1;
    } else if (!strcmp(flag, "--dtype")) {
      if (!strcmp(value, "f32")) args->dtype = SAFETENSORS_F32;
      else if (!strcmp(value, "bf16")) args->dtype = SAFETENSORS_BF16;
      else return fimi_fail(err, "--dtype: expected f32 or bf16, got \"%s\"", value);
    } else if (!strcmp(flag, "--max-shard-mb")) {
      if (cli_parse_float(flag, value, &args->max_shard_mb, err) != 0) return -1;
      if (args->max_shard_mb < 0) return fimi_fail(err, "--max-shard-mb must be >= 0 (0 = never shard)");
    } else {
      return fimi_fail(err, "unknown option %s (see fimi init --help)", flag);
    }
  }
  if (!args->out_dir) return fimi_fail(err, "--out DIR is required");
  return 0;
}

int cli_model_config(const CliOptions *opts, GemmaConfig *config, FimiError *err) {
  const char *json_path = config_get_string(&opts->config, "model", "config_json", err);
  const char *preset = config_get_string(&opts->config, "model", "preset", err);
  if (!json_path || !preset) return -1;
  if (json_path[0]) return gemma_config_load_json(config, json_path, err);
  return gemma_config_preset(config, preset, err);
}

// Sizes the vocabulary to the tokenizer and takes its special ids, so that
// the saved config.json and tokenizer.json agree (as in HF checkpoints).
static void adopt_tokenizer(GemmaConfig *config, const Tokenizer *tok) {
  const TokenizerSpecials *sp = tokenizer_specials(tok);
  config->vocab_size = tokenizer_vocab_size(tok);
  // Gemma 4's per-layer table has a row per token too (transformers resizes both)
  if (config->family == GEMMA_FAMILY_GEMMA4) config->vocab_size_per_layer_input = config->vocab_size;
  if (sp->bos >= 0) config->bos_token_id = sp->bos;
  if (sp->pad >= 0) config->pad_token_id = sp->pad;
  if (sp->eos >= 0) config->eos_token_id = sp->eos;
  config->num_extra_eos = 0;
  if (sp->end_of_turn >= 0 && sp->end_of_turn != config->eos_token_id)
    config->extra_eos_token_ids[config->num_extra_eos++] = sp->end_of_turn;
}

// Loads the tokenizer (validating it) and keeps its bytes to copy verbatim.
static int read_tokenizer(const char *path, Tokenizer **tok, char **bytes, size_t *size, FimiError *err) {
  *tok = NULL;
  *bytes = file_read_all(path, (size_t)1 << 30, size, err);
  if (!*bytes) return -1;
  if (tokenizer_load_json(*bytes, *size, path, tok, err) != 0) {
    free(*bytes);
    *bytes = NULL;
    return -1;
  }
  return 0;
}

static int write_tokenizer_copy(const char *dir, const char *bytes, size_t size, FimiError *err) {
  char path[4096];
  if (path_join(path, sizeof path, dir, "tokenizer.json", err) != 0) return -1;
  return file_write_atomic(path, bytes, size, err);
}

int cmd_init(int argc, char **argv) {
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  if (rest < 0) return cli_fail("init", &err);
  for (int i = 1; i < rest; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_init_help();
      return 0;
    }
  InitArgs args;
  if (cli_load_config(&opts, &err) != 0 || parse_init_args(&opts, rest, argv, &args, &err) != 0)
    return cli_fail("init", &err);
  if (device_require(opts.device, &err) != 0) return cli_fail("init", &err);
  GemmaConfig config;
  int64_t seed = 0;
  if (cli_model_config(&opts, &config, &err) != 0 || config_get_int(&opts.config, "model", "seed", &seed, &err) != 0)
    return cli_fail("init", &err);
  Tokenizer *tok = NULL;
  char *tokenizer_bytes = NULL;
  size_t tokenizer_size = 0;
  if (args.tokenizer_path) {
    if (read_tokenizer(args.tokenizer_path, &tok, &tokenizer_bytes, &tokenizer_size, &err) != 0)
      return cli_fail("init", &err);
    adopt_tokenizer(&config, tok);
    tokenizer_free(tok);
  }
  GemmaModel model;
  if (gemma_model_create(&model, &config, &err) != 0) {
    free(tokenizer_bytes);
    return cli_fail("init", &err);
  }
  gemma_model_init_random(&model, (uint64_t)seed);
  int rc = gemma_save_pretrained(&model, args.out_dir, args.dtype, (size_t)(args.max_shard_mb * 1e6), &err);
  if (rc == 0 && tokenizer_bytes) rc = write_tokenizer_copy(args.out_dir, tokenizer_bytes, tokenizer_size, &err);
  free(tokenizer_bytes);
  if (rc == 0)
    printf("fimi init: wrote %s (%lld parameters, seed %lld, %s)\n", args.out_dir,
           (long long)gemma_model_param_count(&model), (long long)seed, args.dtype == SAFETENSORS_BF16 ? "bf16" : "f32");
  gemma_model_free(&model);
  return rc == 0 ? 0 : cli_fail("init", &err);
}
