// cmd/cmd_serve.c: `fimi serve --model DIR`: a checkpoint behind the OpenAI
// chat-completions API (docs/serving.md) until SIGINT or SIGTERM. Loads the
// model and its tokenizer, builds the rollout policy on the chosen device,
// starts the engine (serve/engine.h) and the HTTP server (serve/http.h).
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/device_policy.h"
#include "core/fileio.h"
#include "data/tokenizer.h"
#include "model/weights.h"
#include "net/http_token.h"
#include "serve/api.h"
#include "serve/engine.h"
#include "serve/http.h"

#define SERVE_API_KEY_ENV "FIMI_SERVE_API_KEY"
#define SERVE_DEFAULT_PORT 8000
#define SERVE_DEFAULT_SLOTS 8
#define SERVE_DEFAULT_CONTEXT 4096
#define SERVE_DEFAULT_MAX_CONCURRENT 64
#define SERVE_DEFAULT_MAX_BODY (4L << 20)
#define SERVE_DEFAULT_IDLE_S 60
#define SERVE_DEFAULT_PREFILL_CHUNK 64
#define SERVE_SPARE_CONNECTIONS 16

typedef struct ServeArgs {
  const char *model, *tokenizer, *host, *name, *api_key_file;
  long port, slots, context, max_concurrent, max_body, idle_s, chunk;
  int allow_non_loopback;
  Device device;
} ServeArgs;

static void usage_to(FILE *out) {
  fprintf(out,
          "usage: fimi serve --model DIR [--device cpu|cuda] [--host H] [--port P] [--served-model-name NAME]\n"
          "                  [--api-key-file F] [--allow-non-loopback] [--slots N] [--context N]\n"
          "                  [--max-concurrent N] [--max-body-bytes N] [--idle-timeout-s N] [--prefill-chunk N]\n"
          "                  [--tokenizer F]\n"
          "  serves the checkpoint DIR on the OpenAI chat-completions API (GET /v1/models,\n"
          "  POST /v1/chat/completions, streaming included) until SIGINT/SIGTERM (docs/serving.md)\n"
          "  --host H              an IPv4 literal, an IPv6 literal or localhost (default 127.0.0.1);\n"
          "                        loopback only unless --allow-non-loopback, which also needs an API key\n"
          "  --port P              default %d; 0 picks a free one (printed on stderr)\n"
          "  --served-model-name   the name clients send as \"model\" (default: DIR's last component)\n"
          "  --api-key-file F      the API key clients send as Bearer (first line; chmod 600), else $"
          SERVE_API_KEY_ENV "\n"
          "                        when set; none: no key is asked for (loopback only)\n"
          "  --slots N             sequences decoded together (default %d)\n"
          "  --context N           tokens per sequence, prompt included (default min(%d, the model's))\n"
          "  --max-concurrent N    requests waiting for a sequence at most; beyond: 429 (default %d)\n"
          "  --max-body-bytes N    largest request body (default %ld)\n"
          "  --idle-timeout-s N    a connection idle this long is closed (default %d)\n"
          "  --prefill-chunk N     prompt tokens per prefill pass (default %d)\n"
          "  --tokenizer F         default DIR/tokenizer.json\n",
          SERVE_DEFAULT_PORT, SERVE_DEFAULT_SLOTS, SERVE_DEFAULT_CONTEXT, SERVE_DEFAULT_MAX_CONCURRENT,
          SERVE_DEFAULT_MAX_BODY, SERVE_DEFAULT_IDLE_S, SERVE_DEFAULT_PREFILL_CHUNK);
}

// The numeric options; 1 when flag is not one of them.
static int parse_number(const char *flag, const char *v, ServeArgs *a, FimiError *err) {
  static const struct {
    const char *flag;
    long min, max;
    size_t offset;
  } numbers[] = {
      {"--port", 0, 65535, offsetof(ServeArgs, port)},
      {"--slots", 1, 1024, offsetof(ServeArgs, slots)},
      {"--context", 8, 1L << 20, offsetof(ServeArgs, context)},
      {"--max-concurrent", 1, 4096, offsetof(ServeArgs, max_concurrent)},
      {"--max-body-bytes", 1024, 256L << 20, offsetof(ServeArgs, max_body)},
      {"--idle-timeout-s", 1, 86400, offsetof(ServeArgs, idle_s)},
      {"--prefill-chunk", 1, 4096, offsetof(ServeArgs, chunk)},
  };
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    if (strcmp(flag, numbers[i].flag) == 0)
      return cli_parse_int(flag, v, numbers[i].min, numbers[i].max, (long *)((char *)a + numbers[i].offset), err);
  return 1;
}

static int parse_value(const char *flag, const char *v, ServeArgs *a, FimiError *err) {
  if (strcmp(flag, "--model") == 0) a->model = v;
  else if (strcmp(flag, "--tokenizer") == 0) a->tokenizer = v;
  else if (strcmp(flag, "--host") == 0) a->host = v;
  else if (strcmp(flag, "--served-model-name") == 0) a->name = v;
  else if (strcmp(flag, "--api-key-file") == 0) a->api_key_file = v;
  else if (strcmp(flag, "--device") == 0) return device_parse(v, &a->device, err);
  else {
    int rc = parse_number(flag, v, a, err);
    return rc == 1 ? fimi_fail(err, "unknown option \"%s\" (see fimi serve --help)", flag) : rc;
  }
  return 0;
}

// DIR's last path component ("run/step_000900/" -> "step_000900").
static const char *last_component(const char *dir) {
  static char name[256];
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(name, sizeof name, "%.*s", (int)(n - start), dir + start);
  return name;
}

static int parse_args(int argc, char **argv, ServeArgs *a, FimiError *err) {
  static const char *const valued[] = {"--model", "--tokenizer", "--host", "--served-model-name", "--api-key-file",
                                       "--device", "--port", "--slots", "--context", "--max-concurrent",
                                       "--max-body-bytes", "--idle-timeout-s", "--prefill-chunk", NULL};
  *a = (ServeArgs){.host = "127.0.0.1", .port = SERVE_DEFAULT_PORT, .slots = SERVE_DEFAULT_SLOTS,
                   .max_concurrent = SERVE_DEFAULT_MAX_CONCURRENT, .max_body = SERVE_DEFAULT_MAX_BODY,
                   .idle_s = SERVE_DEFAULT_IDLE_S, .chunk = SERVE_DEFAULT_PREFILL_CHUNK, .device = DEVICE_CPU};
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i], *v;
    if (strcmp(flag, "--allow-non-loopback") == 0) {
      a->allow_non_loopback = 1;
      continue;
    }
    if (!cli_is_one_of(flag, valued)) return fimi_fail(err, "unknown option \"%s\" (see fimi serve --help)", flag);
    if (!(v = cli_flag_value(argc, argv, &i, err)) || parse_value(flag, v, a, err) != 0) return -1;
  }
  if (!a->model) return fimi_fail(err, "--model DIR is required");
  if (!a->name) a->name = last_component(a->model);
  return 0;
}

// "HOST:PORT" for http_listen_parse: an IPv6 literal gets its brackets.
static int listen_address(const ServeArgs *a, HttpListen *listen, FimiError *err) {
  char text[160];
  int v6 = strchr(a->host, ':') && a->host[0] != '[';
  snprintf(text, sizeof text, v6 ? "[%s]:%ld" : "%s:%ld", a->host, a->port);
  return http_listen_parse(text, "--host/--port", listen, err);
}

// Serves until SIGINT or SIGTERM, which every thread blocks and this one
// waits for; the engine stops first, so that waiting requests end.
static int run_until_signal(ServeApi *api, const ServeArgs *a, const HttpListen *listen, FimiError *err) {
  ServeHttpServer *server = NULL;
  // Room for every request in flight (waiting or decoding) and some idle
  // keep-alive connections, so that a request past the queue gets its 429.
  int connections = (int)(a->max_concurrent + a->slots + SERVE_SPARE_CONNECTIONS);
  if (serve_http_start(api, listen, a->allow_non_loopback, connections, (int)a->idle_s, &server, err) != 0)
    return -1;
  fprintf(stderr, "fimi serve: listening on http://%s:%d/v1 (model \"%s\", %ld sequences of %ld tokens, %s)\n",
          listen->host, serve_http_port(server), a->name, a->slots, a->context, a->device == DEVICE_CPU ? "cpu" : "cuda");
  fflush(stderr);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  fprintf(stderr, "fimi serve: %s, stopping\n", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  serve_engine_stop(api->engine);
  serve_http_stop(server);
  return 0;
}

static int serve_model(ServeArgs *a, GemmaModel *model, const Tokenizer *tok, FimiError *err) {
  static char key[HTTP_TOKEN_MAX_CHARS + 1];
  const char *env_key = getenv(SERVE_API_KEY_ENV);
  if ((a->api_key_file || env_key) &&
      http_token_load(a->api_key_file, "--api-key-file", SERVE_API_KEY_ENV, env_key, key, sizeof key, err) != 0)
    return -1;
  HttpListen listen;
  if (listen_address(a, &listen, err) != 0) return -1;
  if (a->context == 0)
    a->context = model->config.max_position_embeddings > 0 && model->config.max_position_embeddings < SERVE_DEFAULT_CONTEXT
                     ? model->config.max_position_embeddings
                     : SERVE_DEFAULT_CONTEXT;
  ServeEngineConfig ec = {.max_queue = (int)a->max_concurrent};
  ec.num_stop_ids = cli_stop_tokens(&model->config, tok, ec.stop_ids);
  DevicePolicy policy;
  ServeEngine *engine = NULL;
  ServeApi api;
  int have_api = 0;
  int rc = device_policy_create(&policy, a->device, model, (int)a->slots, (int)a->context, (int)a->chunk, 0, err);
  if (rc == 0) rc = serve_engine_start(&policy.policy, tok, &ec, &engine, err);
  // A stream speaks at least every half idle timeout, so the server never closes it as idle.
  ServeApiConfig ac = {.model_name = a->name, .api_key = key, .max_body_bytes = (size_t)a->max_body,
                       .keepalive_s = a->idle_s / 2.0};
  if (rc == 0) rc = serve_api_init(&api, &ac, engine, tok, err);
  have_api = rc == 0;
  if (rc == 0) rc = run_until_signal(&api, a, &listen, err);
  if (have_api) serve_api_free(&api);
  serve_engine_free(engine);
  device_policy_free(&policy);
  return rc;
}

int cmd_serve(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 1)) {
    usage_to(stdout);
    return 0;
  }
  // Before any thread starts, so that they all inherit it: the signals
  // reach only sigwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  FimiError err = {0};
  ServeArgs a;
  if (parse_args(argc - 1, argv + 1, &a, &err) != 0) return cli_fail("serve", &err);
  char tok_path[4096];
  if (a.tokenizer) snprintf(tok_path, sizeof tok_path, "%s", a.tokenizer);
  else if (path_join(tok_path, sizeof tok_path, a.model, "tokenizer.json", &err) != 0) return cli_fail("serve", &err);
  Tokenizer *tok = NULL;
  if (tokenizer_load_file(tok_path, &tok, &err) != 0) return cli_fail("serve", &err);
  GemmaModel model;
  if (gemma_load_pretrained(&model, a.model, &err) != 0) {
    tokenizer_free(tok);
    return cli_fail("serve", &err);
  }
  int rc = serve_model(&a, &model, tok, &err);
  gemma_model_free(&model);
  tokenizer_free(tok);
  return rc == 0 ? 0 : cli_fail("serve", &err);
}
