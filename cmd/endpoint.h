// cmd/endpoint.h: the options that name a served model for the commands
// that can use one (`fimi eval --endpoint`): the endpoint, the model name,
// the API key, the response cache, limits. Defines EndpointArgs,
// endpoint_flag (reads one option), endpoint_usage_text and
// endpoint_client_create (net/openai_client.h).
#ifndef FIMI_CMD_ENDPOINT_H
#define FIMI_CMD_ENDPOINT_H

#include "core/error.h"
#include "net/openai_client.h"

#define ENDPOINT_API_KEY_ENV "OPENAI_API_KEY"

typedef struct EndpointArgs {
  const char *endpoint, *model, *api_key_file, *cache_dir, *cache_mode;
  long concurrency, timeout_s, retries;
  int retries_given;
} EndpointArgs;

// The options' help lines.
extern const char *const endpoint_usage_text;

// 1 when flag is one of the endpoint options taking a value (v is it), 0
// when it is not one of them, -1 on a bad value.
int endpoint_flag(EndpointArgs *a, const char *flag, const char *v, FimiError *err);

// The client the options describe: the key from --api-key-file (its first
// line) or $OPENAI_API_KEY; the cache in record mode when --endpoint-cache
// is given (--endpoint-cache-mode replay: answers only from it).
int endpoint_client_create(const EndpointArgs *a, OpenAIClient **out, FimiError *err);

struct Config;
// The served model a config chooses: SECTION.PREFIX is rules (*out NULL)
// or model, which needs SECTION.PREFIX_endpoint and _model (and takes
// _api_key_file, _cache, _cache_mode): env.simulator, eval.judge.
int endpoint_config_client(const struct Config *config, const char *section, const char *prefix, OpenAIClient **out,
                           FimiError *err);
// env.simulator and its simulator_* keys: *out NULL for "rules", else the
// client of the served model that plays the customer (*temperature its
// env.simulator_temperature). Errors name the key.
int endpoint_customer_client(const struct Config *config, OpenAIClient **out, double *temperature, FimiError *err);

#endif
