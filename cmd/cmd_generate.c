// cmd/cmd_generate.c: `fimi generate --model DIR (--prompt TEXT | --prompt-ids 2,10,20) ...`:
// reloads a saved model and samples continuations with the KV cache. Text
// prompts are encoded with the model directory's tokenizer.json (or
// --tokenizer) and the completion is streamed as decoded text; id prompts
// print ids. --json prints one JSON object at the end instead.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "kernels/device.h"
#include "model/gemma_cuda.h"
#include "model/decode.h"
#include "model/weights.h"

#define GENERATE_MAX_PROMPTS 64
#define GENERATE_MAX_STOPS CLI_MAX_STOP_TOKENS

typedef struct GenerateArgs {
  const char *model_dir;
  const char *tokenizer_path;  // NULL: DIR/tokenizer.json when a text prompt needs it
  const char *prompt_texts[GENERATE_MAX_PROMPTS];
  int prompt_is_text[GENERATE_MAX_PROMPTS];
  int num_prompts;
  int chat;   // wrap text prompts as a user turn + the model's generation prompt
  int json;
  int no_stop;
  Device device;  // --device: the decode steps run there; sampling stays on the host
} GenerateArgs;

static void print_generate_help(void) {
  printf(
      "usage: fimi generate --model DIR (--prompt TEXT | --prompt-ids ID,ID,...) [...more prompts]\n"
      "                     [--chat] [--tokenizer FILE] [--max-new N] [--temperature T] [--top-p P]\n"
      "                     [--seed S] [--no-stop] [--json] [--device cpu|cuda]\n"
      "  samples with the KV cache. Text prompts use DIR/tokenizer.json (or --tokenizer) and the\n"
      "  completion streams as text; --chat renders the prompt as a user turn followed by the\n"
      "  model's turn header (docs/chat-format.md). A sequence stops at the model's eos ids and\n"
      "  the tokenizer's <end_of_turn> unless --no-stop.\n"
      "  defaults come from [generate] in --config (max_new_tokens, temperature, top_p, seed)\n"
      "  --device cuda: decode steps on GPU 0 in bf16, sampled on the host as on the CPU\n");
}

static int add_prompt(GenerateArgs *args, const char *value, int is_text, FimiError *err) {
  if (args->num_prompts == GENERATE_MAX_PROMPTS) return fimi_fail(err, "at most %d prompts", GENERATE_MAX_PROMPTS);
  args->prompt_texts[args->num_prompts] = value;
  args->prompt_is_text[args->num_prompts++] = is_text;
  return 0;
}

static int parse_generate_args(CliOptions *opts, int argc, char **argv, GenerateArgs *args, FimiError *err) {
  memset(args, 0, sizeof *args);
  static const char *const sampler_flags[][2] = {{"--max-new", "max_new_tokens"},
                                                 {"--temperature", "temperature"},
                                                 {"--top-p", "top_p"},
                                                 {"--seed", "seed"}};
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    int *switch_flag = !strcmp(flag, "--json")      ? &args->json
                       : !strcmp(flag, "--no-stop") ? &args->no_stop
                       : !strcmp(flag, "--chat")    ? &args->chat
                                                    : NULL;
    if (switch_flag) {
      *switch_flag = 1;
      continue;
    }
    static const char *const flags[] = {"--model", "--tokenizer", "--prompt-ids", "--prompt", "--max-new",
                                        "--temperature", "--top-p", "--seed", NULL};
    if (!cli_is_one_of(flag, flags)) return fimi_fail(err, "unknown option %s (see fimi generate --help)", flag);
    const char *value = cli_flag_value(argc, argv, &i, err);
    if (!value) return -1;
    int known = 1;
    if (!strcmp(flag, "--model")) args->model_dir = value;
    else if (!strcmp(flag, "--tokenizer")) args->tokenizer_path = value;
    else if (!strcmp(flag, "--prompt-ids")) known = add_prompt(args, value, 0, err) == 0 ? 1 : -1;
    else if (!strcmp(flag, "--prompt")) known = add_prompt(args, value, 1, err) == 0 ? 1 : -1;
    else {
      known = 0;
      for (size_t k = 0; k < sizeof sampler_flags / sizeof sampler_flags[0]; k++)
        if (!strcmp(flag, sampler_flags[k][0])) {
          if (config_set(&opts->config, "generate", sampler_flags[k][1], value, flag, err) != 0) return -1;
          known = 1;
        }
    }
    if (known < 0) return -1;
    if (!known) return fimi_fail(err, "unknown option %s (see fimi generate --help)", flag);
  }
  if (!args->model_dir) return fimi_fail(err, "--model DIR is required");
  if (args->num_prompts == 0) return fimi_fail(err, "at least one --prompt or --prompt-ids is required");
  return 0;
}

static int read_sampler(const Config *config, GenerateOptions *opt, FimiError *err) {
  double temperature, top_p;
  int64_t max_new, seed;
  if (config_get_float(config, "generate", "temperature", &temperature, err) != 0 ||
      config_get_float(config, "generate", "top_p", &top_p, err) != 0 ||
      config_get_int(config, "generate", "max_new_tokens", &max_new, err) != 0 ||
      config_get_int(config, "generate", "seed", &seed, err) != 0)
    return -1;
  if (temperature < 0) return fimi_fail(err, "generate.temperature must be >= 0 (got %g)", temperature);
  if (top_p <= 0 || top_p > 1) return fimi_fail(err, "generate.top_p must be in (0, 1] (got %g)", top_p);
  if (max_new < 1 || max_new > 1000000) return fimi_fail(err, "generate.max_new_tokens must be in [1, 1000000]");
  opt->sampler.temperature = (float)temperature;
  opt->sampler.top_p = (float)top_p;
  opt->max_new = (int)max_new;
  opt->seed = (uint64_t)seed;
  return 0;
}

// Loads the tokenizer when a text prompt needs one (or --tokenizer asks).
static int load_generate_tokenizer(const GenerateArgs *args, Tokenizer **tok, FimiError *err) {
  *tok = NULL;
  int needs = args->tokenizer_path != NULL;
  for (int b = 0; b < args->num_prompts; b++) needs |= args->prompt_is_text[b];
  if (!needs) return 0;
  char path[4096];
  const char *file = args->tokenizer_path;
  if (!file) {
    if (path_join(path, sizeof path, args->model_dir, "tokenizer.json", err) != 0) return -1;
    file = path;
  }
  if (tokenizer_load_file(file, tok, err) != 0)
    return fimi_fail_wrap(err, "text prompts need a tokenizer (DIR/tokenizer.json or --tokenizer)");
  return 0;
}

// <bos><start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n
static int render_chat_prompt(const Tokenizer *tok, const char *text, TokenIds *out, FimiError *err) {
  ChatBuilder chat;
  if (chat_init(&chat, tok, err) != 0) return -1;
  int rc = chat_begin(&chat, err) == 0 && chat_append_turn(&chat, CHAT_USER, text, strlen(text), err) == 0 &&
                   chat_append_generation_prompt(&chat, err) == 0
               ? token_ids_append(out, chat.ids.data, chat.ids.len, err)
               : -1;
  chat_free(&chat);
  return rc;
}

// Token ids of prompt b: parsed ids, or the encoded text (as a chat turn with --chat).
static int prompt_ids(const GenerateArgs *args, int b, const Tokenizer *tok, int vocab, int **ids, int *count,
                      FimiError *err) {
  if (!args->prompt_is_text[b]) return parse_token_ids(args->prompt_texts[b], vocab, ids, count, err);
  const char *text = args->prompt_texts[b];
  TokenIds encoded = {0};
  int rc;
  if (args->chat) rc = render_chat_prompt(tok, text, &encoded, err);
  else rc = tokenizer_encode(tok, text, strlen(text), TOKENIZER_ADD_SPECIAL, &encoded, err);
  if (rc == 0 && encoded.len == 0) rc = fimi_fail(err, "prompt %d encodes to no tokens", b);
  for (size_t t = 0; rc == 0 && t < encoded.len; t++)
    if (encoded.data[t] >= vocab)
      rc = fimi_fail(err, "prompt %d: token id %d is outside the model's vocabulary (%d): tokenizer and model differ",
                     b, encoded.data[t], vocab);
  *ids = (int *)encoded.data;  // int32_t and int are the same type on every platform fimi builds for
  *count = (int)encoded.len;
  if (rc != 0) token_ids_free(&encoded), *ids = NULL;
  return rc;
}

// Streams sequence 0's text while generating (one text prompt, no --json).
typedef struct TextStreamer {
  TokenStream stream;
  FimiError err;
  int failed;
} TextStreamer;

static void stream_token(void *ctx, int b, int token) {
  TextStreamer *streamer = ctx;
  char *piece = NULL;
  if (b != 0 || streamer->failed) return;
  if (token_stream_push(&streamer->stream, token, &piece, &streamer->err) != 0) {
    streamer->failed = 1;
    return;
  }
  fputs(piece, stdout);
  fflush(stdout);
  free(piece);
}

static char *decode_text(const Tokenizer *tok, const int *ids, int n, FimiError *err) {
  char *text = NULL;
  size_t len = 0;
  if (tokenizer_decode(tok, (const int32_t *)ids, (size_t)n, 1, &text, &len, err) != 0) return NULL;
  return text;
}

static cJSON *ids_json(const int *ids, int n) {
  cJSON *array = cJSON_CreateArray();
  for (int t = 0; array && t < n; t++) cJSON_AddItemToArray(array, cJSON_CreateNumber(ids[t]));
  return array;
}

static int print_json_results(const GenerateArgs *args, const Tokenizer *tok, int **prompts, const int *prompt_lengths,
                              const int *out_tokens, const int *out_lengths, int max_new, FimiError *err) {
  cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "completions");
  int rc = 0;
  for (int b = 0; b < args->num_prompts && rc == 0; b++) {
    const int *row = out_tokens + (size_t)b * (size_t)max_new;
    cJSON *item = cJSON_CreateObject();
    cJSON_AddItemToArray(list, item);
    cJSON_AddItemToObject(item, "prompt", ids_json(prompts[b], prompt_lengths[b]));
    cJSON_AddItemToObject(item, "generated", ids_json(row, out_lengths[b]));
    if (tok) {
      char *text = decode_text(tok, row, out_lengths[b], err);
      if (!text) rc = -1;
      else cJSON_AddStringToObject(item, "text", text);
      free(text);
    }
  }
  char *printed = rc == 0 ? cJSON_PrintUnformatted(root) : NULL;
  if (rc == 0 && !printed) rc = fimi_fail(err, "out of memory printing JSON");
  if (printed) printf("%s\n", printed);
  free(printed);
  cJSON_Delete(root);
  return rc;
}

static int print_plain_results(const GenerateArgs *args, const Tokenizer *tok, int **prompts,
                               const int *prompt_lengths, const int *out_tokens, const int *out_lengths, int max_new,
                               FimiError *err) {
  for (int b = 0; b < args->num_prompts; b++) {
    const int *row = out_tokens + (size_t)b * (size_t)max_new;
    if (args->prompt_is_text[b]) {
      char *text = decode_text(tok, row, out_lengths[b], err);
      if (!text) return -1;
      printf("completion %d: %s\n", b, text);
      free(text);
      continue;
    }
    printf("prompt %d:", b);
    for (int t = 0; t < prompt_lengths[b]; t++) printf(" %d", prompts[b][t]);
    printf("\ngenerated %d:", b);
    for (int t = 0; t < out_lengths[b]; t++) printf(" %d", row[t]);
    printf("\n");
  }
  return 0;
}

// gemma_generate on the CPU, or on GPU 0 (model/gemma_cuda.h: the same
// loop and host sampling over bf16 decode steps).
static int generate_on(Device device, GemmaModel *model, const int *const *prompts, const int *prompt_lengths, int B,
                       const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err) {
  if (device == DEVICE_CPU) return gemma_generate(model, prompts, prompt_lengths, B, opt, out_tokens, out_lengths, err);
#ifdef FIMI_HAVE_CUDA
  CudaContext *ctx = NULL;
  GemmaCudaModel gpu;
  if (cuda_context_create(&ctx, 0, err) != 0) return -1;
  int rc = gemma_cuda_create(&gpu, &model->config, ctx, err);
  if (rc == 0) {
    rc = gemma_cuda_upload_weights(&gpu, model, err);
    if (rc == 0) rc = gemma_cuda_generate(&gpu, prompts, prompt_lengths, B, opt, out_tokens, out_lengths, err);
    gemma_cuda_free(&gpu);
  }
  cuda_context_destroy(ctx);
  return rc;
#else
  return fimi_fail(err, "this fimi was built without the CUDA backend");
#endif
}

static int run_generation(GemmaModel *model, const GenerateArgs *args, const Tokenizer *tok, const Config *config,
                          FimiError *err) {
  GenerateOptions opt = {0};
  if (read_sampler(config, &opt, err) != 0) return -1;
  int stops[GENERATE_MAX_STOPS];
  opt.stop_tokens = stops;
  opt.num_stop_tokens = args->no_stop ? 0 : cli_stop_tokens(&model->config, tok, stops);
  int *prompts[GENERATE_MAX_PROMPTS] = {0};
  int prompt_lengths[GENERATE_MAX_PROMPTS];
  int rc = 0;
  for (int b = 0; b < args->num_prompts && rc == 0; b++)
    rc = prompt_ids(args, b, tok, model->config.vocab_size, &prompts[b], &prompt_lengths[b], err);
  int *out_tokens = NULL, *out_lengths = NULL;
  if (rc == 0) {
    out_tokens = calloc((size_t)args->num_prompts * (size_t)opt.max_new, sizeof(int));
    out_lengths = calloc((size_t)args->num_prompts, sizeof(int));
    if (!out_tokens || !out_lengths) rc = fimi_fail(err, "out of memory");
  }
  TextStreamer streamer = {0};
  int streaming = args->num_prompts == 1 && args->prompt_is_text[0] && !args->json;
  if (streaming) {
    token_stream_init(&streamer.stream, tok, 1);
    opt.on_token = stream_token;
    opt.on_token_ctx = &streamer;
  }
  if (rc == 0)
    rc = generate_on(args->device, model, (const int *const *)prompts, prompt_lengths, args->num_prompts, &opt,
                     out_tokens, out_lengths, err);
  if (streaming) {
    char *rest = NULL;
    if (rc == 0 && streamer.failed) rc = fimi_fail(err, "%s", streamer.err.message);
    if (rc == 0 && token_stream_finish(&streamer.stream, &rest, err) != 0) rc = -1;
    if (rc == 0) printf("%s\n", rest);
    free(rest);
    token_stream_free(&streamer.stream);
  } else if (rc == 0 && args->json) {
    rc = print_json_results(args, tok, prompts, prompt_lengths, out_tokens, out_lengths, opt.max_new, err);
  } else if (rc == 0) {
    rc = print_plain_results(args, tok, prompts, prompt_lengths, out_tokens, out_lengths, opt.max_new, err);
  }
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
  args.device = opts.device;
  Tokenizer *tok = NULL;
  if (load_generate_tokenizer(&args, &tok, &err) != 0) return cli_fail("generate", &err);
  GemmaModel model;
  if (gemma_load_pretrained(&model, args.model_dir, &err) != 0) {
    tokenizer_free(tok);
    return cli_fail("generate", &err);
  }
  int rc = run_generation(&model, &args, tok, &opts.config, &err);
  gemma_model_free(&model);
  tokenizer_free(tok);
  return rc == 0 ? 0 : cli_fail("generate", &err);
}
