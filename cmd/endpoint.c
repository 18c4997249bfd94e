// cmd/endpoint.c: the served-model options (see endpoint.h).
#include "cmd/endpoint.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/config.h"
#include "core/fileio.h"

const char *const endpoint_usage_text =
    "    --endpoint URL          a served model on the OpenAI chat-completions API (base URL ending in /v1)\n"
    "    --served-model NAME     the model name the server expects\n"
    "    --api-key-file F        its API key (first line), else $" ENDPOINT_API_KEY_ENV "\n"
    "    --endpoint-cache DIR    keep every answer in DIR, keyed by the request; a rerun answers from it\n"
    "    --endpoint-cache-mode M record (default with DIR) or replay (answers only from DIR: offline)\n"
    "    --endpoint-concurrency N requests in flight and episodes played at once (default 8)\n"
    "    --endpoint-timeout-s N  one request's limit (default 300); --endpoint-retries N (default 4)\n";

int endpoint_flag(EndpointArgs *a, const char *flag, const char *v, FimiError *err) {
  if (!strcmp(flag, "--endpoint")) a->endpoint = v;
  else if (!strcmp(flag, "--served-model")) a->model = v;
  else if (!strcmp(flag, "--api-key-file")) a->api_key_file = v;
  else if (!strcmp(flag, "--endpoint-cache")) a->cache_dir = v;
  else if (!strcmp(flag, "--endpoint-cache-mode")) a->cache_mode = v;
  else if (!strcmp(flag, "--endpoint-concurrency")) return cli_parse_int(flag, v, 1, 1024, &a->concurrency, err) ? -1 : 1;
  else if (!strcmp(flag, "--endpoint-timeout-s")) return cli_parse_int(flag, v, 1, 86400, &a->timeout_s, err) ? -1 : 1;
  else if (!strcmp(flag, "--endpoint-retries")) {
    a->retries_given = 1;
    return cli_parse_int(flag, v, 0, 100, &a->retries, err) ? -1 : 1;
  }
  else return 0;
  return 1;
}

// The first line of the key file, trimmed (malloc'd).
static char *read_key(const char *path, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, 1 << 16, &size, err);
  if (!text) return NULL;
  char *start = text + strspn(text, " \t\r\n");
  size_t n = strcspn(start, "\r\n");
  while (n > 0 && (start[n - 1] == ' ' || start[n - 1] == '\t')) n--;
  memmove(text, start, n);
  text[n] = '\0';
  if (n == 0) {
    free(text);
    fimi_fail(err, "--api-key-file %s: empty", path);
    return NULL;
  }
  return text;
}

int endpoint_client_create(const EndpointArgs *a, OpenAIClient **out, FimiError *err) {
  *out = NULL;
  if (!a->model) return fimi_fail(err, "--endpoint needs --served-model NAME (the name the server expects)");
  OpenAICacheMode mode = a->cache_dir ? OPENAI_CACHE_RECORD : OPENAI_CACHE_OFF;
  if (a->cache_mode && !strcmp(a->cache_mode, "replay")) mode = OPENAI_CACHE_REPLAY;
  else if (a->cache_mode && strcmp(a->cache_mode, "record") != 0)
    return fimi_fail(err, "--endpoint-cache-mode: \"%s\" is not record or replay", a->cache_mode);
  if (a->cache_mode && !a->cache_dir) return fimi_fail(err, "--endpoint-cache-mode needs --endpoint-cache DIR");
  char *key = a->api_key_file ? read_key(a->api_key_file, err) : NULL;
  if (a->api_key_file && !key) return -1;
  OpenAIClientConfig c = {.endpoint = a->endpoint, .model = a->model,
                          .api_key = key ? key : getenv(ENDPOINT_API_KEY_ENV),
                          .timeout_s = (double)a->timeout_s, .max_retries = a->retries_given ? (int)a->retries : -1,
                          .max_concurrent = (int)a->concurrency, .cache_dir = a->cache_dir, .cache_mode = mode};
  int rc = openai_client_create(&c, out, err);
  free(key);
  return rc;
}

// A config string, NULL when empty.
static const char *nonempty(const Config *c, const char *section, const char *prefix, const char *key,
                            FimiError *err) {
  char name[96];
  snprintf(name, sizeof name, "%s_%s", prefix, key);
  const char *v = config_get_string(c, section, name, err);
  return v && *v ? v : NULL;
}

int endpoint_config_client(const Config *c, const char *section, const char *prefix, OpenAIClient **out,
                           FimiError *err) {
  *out = NULL;
  const char *kind = config_get_string(c, section, prefix, err);
  if (!kind) return -1;
  if (!strcmp(kind, "rules")) return 0;
  if (strcmp(kind, "model") != 0) return fimi_fail(err, "%s.%s: \"%s\" is not rules or model", section, prefix, kind);
  EndpointArgs a = {.endpoint = nonempty(c, section, prefix, "endpoint", err),
                    .model = nonempty(c, section, prefix, "model", err),
                    .api_key_file = nonempty(c, section, prefix, "api_key_file", err),
                    .cache_dir = nonempty(c, section, prefix, "cache", err)};
  if (a.cache_dir) a.cache_mode = nonempty(c, section, prefix, "cache_mode", err);
  if (!a.endpoint || !a.model)
    return fimi_fail(err, "%s.%s = model needs %s.%s_endpoint and %s.%s_model", section, prefix, section, prefix,
                     section, prefix);
  if (endpoint_client_create(&a, out, err) != 0) return fimi_fail_wrap(err, "%s.%s_endpoint", section, prefix);
  return 0;
}

int endpoint_customer_client(const Config *config, OpenAIClient **out, double *temperature, FimiError *err) {
  *out = NULL;
  return config_get_float(config, "env", "simulator_temperature", temperature, err) != 0
             ? -1
             : endpoint_config_client(config, "env", "simulator", out, err);
}
