// cmd/cmd_generate.c: `fimi generate --model DIR --prompt-ids 2,10,20`:
// reloads a saved model and samples continuations with the KV cache, one
// line per prompt (or one JSON object with --json). Token ids for now; text
// once the tokenizer lands.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "kernels/device.h"
#include "model/decode.h"
#include "model/weights.h"

#define GENERATE_MAX_PROMPTS 64

typedef struct GenerateArgs {
  const char *model_dir;
  const char *prompt_texts[GENERATE_MAX_PROMPTS];
  int num_prompts;
  int json;
  int no_stop;
} GenerateArgs;

static void print_generate_help(void) {
  printf(
      "usage: fimi generate --model DIR --prompt-ids ID,ID,... [--prompt-ids ...] [--max-new N]\n"
      "                     [--temperature T] [--top-p P] [--seed S] [--no-stop] [--json]\n"
      "  samples with the KV cache; stops a sequence at the model's eos id unless --no-stop.\n"
      "  defaults come from [generate] in --config (max_new_tokens, temperature, top_p, seed)\n");
}

static int parse_generate_args(CliOptions *opts, int argc, char **argv, GenerateArgs *args, FimiError *err) {
  memset(args, 0, sizeof *args);
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (!strcmp(flag, "--json")) {
      args->json = 1;
      continue;
    }
    if (!strcmp(flag, "--no-stop")) {
      args->no_stop = 1;
      continue;
    }
    const char *value = cli_flag_value(argc, argv, &i, err);
    if (!value) return -1;
    if (!strcmp(flag, "--model")) args->model_dir = value;
    else if (!strcmp(flag, "--prompt-ids")) {
      if (args->num_prompts == GENERATE_MAX_PROMPTS) return fimi_fail(err, "at most %d prompts", GENERATE_MAX_PROMPTS);
      args->prompt_texts[args->num_prompts++] = value;
    } else if (!strcmp(flag, "--max-new")) {
      if (config_set(&opts->config, "generate", "max_new_tokens", value, flag, err) != 0) return -1;
    } else if (!strcmp(flag, "--temperature")) {
      if (config_set(&opts->config, "generate", "temperature", value, flag, err) != 0) return -1;
    } else if (!strcmp(flag, "--top-p")) {
      if (config_set(&opts->config, "generate", "top_p", value, flag, err) != 0) return -1;
    } else if (!strcmp(flag, "--seed")) {
      if (config_set(&opts->config, "generate", "seed", value, flag, err) != 0) return -1;
    } else return fimi_fail(err, "unknown option %s (see fimi generate --help)", flag);
  }
  if (!args->model_dir) return fimi_fail(err, "--model DIR is required");
  if (args->num_prompts == 0) return fimi_fail(err, "at least one --prompt-ids is required");
  return 0;
}

static int read_sampler(const Config *config, SamplerConfig *sampler, int64_t *max_new, int64_t *seed, FimiError *err) {
  double temperature, top_p;
  if (config_get_float(config, "generate", "temperature", &temperature, err) != 0 ||
      config_get_float(config, "generate", "top_p", &top_p, err) != 0 ||
      config_get_int(config, "generate", "max_new_tokens", max_new, err) != 0 ||
      config_get_int(config, "generate", "seed", seed, err) != 0)
    return -1;
  if (temperature < 0) return fimi_fail(err, "generate.temperature must be >= 0 (got %g)", temperature);
  if (top_p <= 0 || top_p > 1) return fimi_fail(err, "generate.top_p must be in (0, 1] (got %g)", top_p);
  if (*max_new < 1 || *max_new > 1000000) return fimi_fail(err, "generate.max_new_tokens must be in [1, 1000000]");
  sampler->temperature = (float)temperature;
  sampler->top_p = (float)top_p;
  return 0;
}

static void print_results(const GenerateArgs *args, int **prompts, const int *prompt_lengths, const int *out_tokens,
                          const int *out_lengths, int max_new) {
  if (args->json) printf("{\"completions\": [");
  for (int b = 0; b < args->num_prompts; b++) {
    const int *row = out_tokens + (size_t)b * (size_t)max_new;
    if (args->json) {
      printf("%s{\"prompt\": [", b ? ", " : "");
      for (int t = 0; t < prompt_lengths[b]; t++) printf("%s%d", t ? ", " : "", prompts[b][t]);
      printf("], \"generated\": [");
      for (int t = 0; t < out_lengths[b]; t++) printf("%s%d", t ? ", " : "", row[t]);
      printf("]}");
    } else {
      printf("prompt %d:", b);
      for (int t = 0; t < prompt_lengths[b]; t++) printf(" %d", prompts[b][t]);
      printf("\ngenerated %d:", b);
      for (int t = 0; t < out_lengths[b]; t++) printf(" %d", row[t]);
      printf("\n");
    }
  }
  if (args->json) printf("]}\n");
}

static int run_generation(GemmaModel *model, const GenerateArgs *args, const Config *config, FimiError *err) {
  SamplerConfig sampler;
  int64_t max_new, seed;
  if (read_sampler(config, &sampler, &max_new, &seed, err) != 0) return -1;
  int *prompts[GENERATE_MAX_PROMPTS] = {0};
  int prompt_lengths[GENERATE_MAX_PROMPTS];
  int rc = 0;
  for (int b = 0; b < args->num_prompts && rc == 0; b++)
    rc = parse_token_ids(args->prompt_texts[b], model->config.vocab_size, &prompts[b], &prompt_lengths[b], err);
  int *out_tokens = NULL, *out_lengths = NULL;
  if (rc == 0) {
    out_tokens = calloc((size_t)args->num_prompts * (size_t)max_new, sizeof(int));
    out_lengths = calloc((size_t)args->num_prompts, sizeof(int));
    if (!out_tokens || !out_lengths) rc = fimi_fail(err, "out of memory");
  }
  if (rc == 0) {
    GenerateOptions opt = {.max_new = (int)max_new, .stop_tokens = &model->config.eos_token_id,
                           .num_stop_tokens = args->no_stop ? 0 : 1, .sampler = sampler, .seed = (uint64_t)seed};
    rc = gemma_generate(model, (const int *const *)prompts, prompt_lengths, args->num_prompts, &opt, out_tokens,
                        out_lengths, err);
  }
  if (rc == 0) print_results(args, prompts, prompt_lengths, out_tokens, out_lengths, (int)max_new);
  for (int b = 0; b < args->num_prompts; b++) free(prompts[b]);
  free(out_tokens);
  free(out_lengths);
  return rc;
}

int cmd_generate(int argc, char **argv) {
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  if (rest < 0) return cli_fail("generate", &err);
  for (int i = 1; i < rest; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_generate_help();
      return 0;
    }
  GenerateArgs args;
  if (cli_load_config(&opts, &err) != 0 || parse_generate_args(&opts, rest, argv, &args, &err) != 0)
    return cli_fail("generate", &err);
  if (device_require(opts.device, &err) != 0) return cli_fail("generate", &err);
  GemmaModel model;
  if (gemma_load_pretrained(&model, args.model_dir, &err) != 0) return cli_fail("generate", &err);
  int rc = run_generation(&model, &args, &opts.config, &err);
  gemma_model_free(&model);
  return rc == 0 ? 0 : cli_fail("generate", &err);
}
