// cmd/cli.c: shared flag parsing and the config schema (see cli.h).
#include "cmd/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "kernels/device.h"

// The config keys fimi understands today. Later layers (optim, train, dpo,
// grpo, env, dist, eval) add their own tables here.
static const ConfigField model_fields[] = {
    {"model", "preset", CONFIG_STRING, "tiny", "named architecture preset (tiny, tiny-gemma2, small-10m, gemma3-270m, ...)"},
    {"model", "config_json", CONFIG_STRING, "", "a Hugging Face config.json; overrides preset when set"},
    {"model", "seed", CONFIG_INT, "1234", "seed of the random initialization"},
    {"model", "recompute", CONFIG_BOOL, "false", "recompute each layer's activations in backward"},
};

static const ConfigField generate_fields[] = {
    {"generate", "max_new_tokens", CONFIG_INT, "32", "tokens to sample per prompt"},
    {"generate", "temperature", CONFIG_FLOAT, "0.8", "softmax temperature; 0 = greedy"},
    {"generate", "top_p", CONFIG_FLOAT, "0.95", "nucleus mass; 1 = no truncation"},
    {"generate", "seed", CONFIG_INT, "0", "sampling seed"},
};

// Rank roles (dist/roles.h, docs/distributed.md): set at most one of the two.
static const ConfigField dist_fields[] = {
    {"dist", "env_ranks", CONFIG_INT, "0", "the last N ranks are env ranks (CPU only); the rest train"},
    {"dist", "roles", CONFIG_STRING, "", "explicit role per rank, e.g. \"train*6,env*2\"; length = world size"},
};

const char *cli_flag_value(int argc, char **argv, int *i, FimiError *err) {
  if (*i + 1 >= argc) {
    fimi_fail(err, "%s needs a value", argv[*i]);
    return NULL;
  }
  *i += 1;
  return argv[*i];
}

int cli_parse_int(const char *flag, const char *text, long min, long max, long *out, FimiError *err) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !*text || *end || v < min || v > max)
    return fimi_fail(err, "%s: expected an integer in [%ld, %ld], got \"%s\"", flag, min, max, text);
  *out = v;
  return 0;
}

int cli_parse_float(const char *flag, const char *text, double *out, FimiError *err) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || !*text || *end || !isfinite(v)) return fimi_fail(err, "%s: expected a number, got \"%s\"", flag, text);
  *out = v;
  return 0;
}

static int parse_log_level(const char *text, FimiError *err) {
  static const char *names[] = {"debug", "info", "warn", "error", "quiet"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(text, names[i])) {
      log_set_level((LogLevel)i);
      return 0;
    }
  return fimi_fail(err, "--log-level: expected debug, info, warn, error or quiet, got \"%s\"", text);
}

int cli_parse_common(CliOptions *opts, int argc, char **argv, FimiError *err) {
  memset(opts, 0, sizeof *opts);
  opts->device = DEVICE_CPU;
  int kept = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = NULL;
    if (!strcmp(arg, "--config")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      opts->config_path = value;
    } else if (!strcmp(arg, "--set")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (opts->num_overrides >= CLI_MAX_OVERRIDES) return fimi_fail(err, "too many --set options");
      opts->overrides[opts->num_overrides++] = value;
    } else if (!strcmp(arg, "--device")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (device_parse(value, &opts->device, err) != 0) return -1;
    } else if (!strcmp(arg, "--log-level")) {
      if (!(value = cli_flag_value(argc, argv, &i, err))) return -1;
      if (parse_log_level(value, err) != 0) return -1;
    } else {
      argv[kept++] = argv[i];
    }
  }
  return kept;
}

int cli_load_config(CliOptions *opts, FimiError *err) {
  memset(&opts->config, 0, sizeof opts->config);
  if (config_add_fields(&opts->config, model_fields, sizeof model_fields / sizeof model_fields[0], err) != 0) return -1;
  if (config_add_fields(&opts->config, generate_fields, sizeof generate_fields / sizeof generate_fields[0], err) != 0)
    return -1;
  if (config_add_fields(&opts->config, dist_fields, sizeof dist_fields / sizeof dist_fields[0], err) != 0) return -1;
  if (opts->config_path && config_load_file(&opts->config, opts->config_path, err) != 0) return -1;
  for (int i = 0; i < opts->num_overrides; i++)
    if (config_apply_override(&opts->config, opts->overrides[i], err) != 0) return -1;
  return 0;
}

int cli_fail(const char *command, const FimiError *err) {
  fprintf(stderr, "fimi %s: %s\n", command, err && err->failed ? err->message : "failed");
  return CLI_EXIT_FAILURE;
}

int parse_token_ids(const char *text, int vocab, int **ids, int *count, FimiError *err) {
  int capacity = 16, n = 0;
  int *out = malloc(sizeof(int) * (size_t)capacity);
  if (!out) return fimi_fail(err, "out of memory");
  const char *p = text;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno) {
      free(out);
      return fimi_fail(err, "token ids: expected an integer at position %d (\"%.20s\")", n, p);
    }
    if (v < 0 || v >= vocab) {
      free(out);
      return fimi_fail(err, "token ids: id %ld at position %d is outside the vocabulary [0, %d)", v, n, vocab);
    }
    if (n == capacity) {
      capacity *= 2;
      int *grown = realloc(out, sizeof(int) * (size_t)capacity);
      if (!grown) {
        free(out);
        return fimi_fail(err, "out of memory");
      }
      out = grown;
    }
    out[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') p++;
    else if (*p) {
      free(out);
      return fimi_fail(err, "token ids: unexpected character '%c' after position %d (expected ',')", *p, n - 1);
    }
  }
  if (n == 0) {
    free(out);
    return fimi_fail(err, "token ids: empty list");
  }
  *ids = out;
  *count = n;
  return 0;
}
