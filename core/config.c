// core/config.c: schema-checked INI configs through inih (see config.h).
#include "core/config.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int find_field(const Config *config, const char *section, const char *key) {
  for (int i = 0; i < config->count; i++)
    if (strcmp(config->fields[i]->section, section) == 0 && strcmp(config->fields[i]->key, key) == 0) return i;
  return -1;
}

static int section_known(const Config *config, const char *section) {
  for (int i = 0; i < config->count; i++)
    if (strcmp(config->fields[i]->section, section) == 0) return 1;
  return 0;
}

static int parse_bool(const char *text, int *out) {
  if (!strcasecmp(text, "true") || !strcmp(text, "1") || !strcasecmp(text, "yes") || !strcasecmp(text, "on")) {
    *out = 1;
    return 0;
  }
  if (!strcasecmp(text, "false") || !strcmp(text, "0") || !strcasecmp(text, "no") || !strcasecmp(text, "off")) {
    *out = 0;
    return 0;
  }
  return -1;
}

static int parse_int(const char *text, int64_t *out) {
  if (!*text) return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

static int parse_float(const char *text, double *out) {
  if (!*text) return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || *end != '\0' || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int validate(const ConfigField *field, const char *value, const char *origin, FimiError *err) {
  int64_t i;
  double f;
  int b;
  switch (field->type) {
    case CONFIG_INT:
      if (parse_int(value, &i) != 0)
        return fimi_fail(err, "%s: %s.%s must be an integer, got \"%s\"", origin, field->section, field->key, value);
      break;
    case CONFIG_FLOAT:
      if (parse_float(value, &f) != 0)
        return fimi_fail(err, "%s: %s.%s must be a finite number, got \"%s\"", origin, field->section, field->key, value);
      break;
    case CONFIG_BOOL:
      if (parse_bool(value, &b) != 0)
        return fimi_fail(err, "%s: %s.%s must be true or false, got \"%s\"", origin, field->section, field->key, value);
      break;
    case CONFIG_STRING:
      break;
  }
  if (strlen(value) >= CONFIG_VALUE_MAX)
    return fimi_fail(err, "%s: %s.%s value is too long", origin, field->section, field->key);
  return 0;
}

int config_add_fields(Config *config, const ConfigField *fields, int count, FimiError *err) {
  for (int i = 0; i < count; i++) {
    if (find_field(config, fields[i].section, fields[i].key) >= 0)
      return fimi_fail(err, "config schema: %s.%s declared twice", fields[i].section, fields[i].key);
    if (config->count >= CONFIG_MAX_FIELDS) return fimi_fail(err, "config schema: more than %d fields", CONFIG_MAX_FIELDS);
    if (validate(&fields[i], fields[i].default_value, "config schema default", err) != 0) return -1;
    config->fields[config->count] = &fields[i];
    strcpy(config->values[config->count], fields[i].default_value);
    config->count++;
  }
  return 0;
}

int config_set(Config *config, const char *section, const char *key, const char *value, const char *origin, FimiError *err) {
  int index = find_field(config, section, key);
  if (index < 0) {
    if (!section_known(config, section)) return fimi_fail(err, "%s: unknown section [%s]", origin, section);
    return fimi_fail(err, "%s: unknown key \"%s\" in section [%s]", origin, key, section);
  }
  if (validate(config->fields[index], value, origin, err) != 0) return -1;
  strcpy(config->values[index], value);
  return 0;
}

// Debian's inih is built without INI_HANDLER_LINENO, so the reader below
// counts lines itself: the handler always runs right after its line is read.
typedef struct IniContext {
  Config *config;
  const char *path;
  FILE *file;
  int line;
  FimiError *err;
  int failed;
} IniContext;

static char *config_read_line(char *str, int num, void *stream) {
  IniContext *ctx = stream;
  char *got = fgets(str, num, ctx->file);
  if (got) ctx->line++;
  return got;
}

static int config_ini_handler(void *user, const char *section, const char *name, const char *value) {
  IniContext *ctx = user;
  if (ctx->failed) return 0;
  char origin[1200];
  snprintf(origin, sizeof origin, "%s:%d", ctx->path, ctx->line);
  if (!name) return 1;
  if (config_set(ctx->config, section, name, value, origin, ctx->err) != 0) {
    ctx->failed = 1;
    return 0;
  }
  return 1;
}

int config_load_file(Config *config, const char *path, FimiError *err) {
  FILE *file = fopen(path, "r");
  if (!file) return fimi_fail(err, "%s: cannot open config: %s", path, strerror(errno));
  IniContext ctx = {config, path, file, 0, err, 0};
  int rc = ini_parse_stream(config_read_line, &ctx, config_ini_handler, &ctx);
  fclose(file);
  if (ctx.failed) return -1;
  if (rc == -2) return fimi_fail(err, "%s: out of memory parsing config", path);
  if (rc > 0) return fimi_fail(err, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
  if (rc != 0) return fimi_fail(err, "%s: cannot parse config", path);
  return 0;
}

int config_apply_override(Config *config, const char *assignment, FimiError *err) {
  const char *dot = strchr(assignment, '.');
  const char *eq = strchr(assignment, '=');
  if (!dot || !eq || dot > eq || dot == assignment || eq == dot + 1)
    return fimi_fail(err, "--set %s: expected section.key=value", assignment);
  char section[128], key[128];
  size_t section_len = (size_t)(dot - assignment), key_len = (size_t)(eq - dot - 1);
  if (section_len >= sizeof section || key_len >= sizeof key) return fimi_fail(err, "--set %s: name too long", assignment);
  memcpy(section, assignment, section_len);
  section[section_len] = '\0';
  memcpy(key, dot + 1, key_len);
  key[key_len] = '\0';
  char origin[700];
  snprintf(origin, sizeof origin, "--set %.600s", assignment);
  return config_set(config, section, key, eq + 1, origin, err);
}

static const char *lookup_value(const Config *config, const char *section, const char *key, ConfigType type, FimiError *err) {
  int index = find_field(config, section, key);
  if (index < 0) {
    fimi_fail(err, "config: %s.%s is not in the schema", section, key);
    return NULL;
  }
  if (config->fields[index]->type != type) {
    fimi_fail(err, "config: %s.%s read with the wrong type", section, key);
    return NULL;
  }
  return config->values[index];
}

int config_get_int(const Config *config, const char *section, const char *key, int64_t *out, FimiError *err) {
  const char *v = lookup_value(config, section, key, CONFIG_INT, err);
  return v ? parse_int(v, out) : -1;
}

int config_get_float(const Config *config, const char *section, const char *key, double *out, FimiError *err) {
  const char *v = lookup_value(config, section, key, CONFIG_FLOAT, err);
  return v ? parse_float(v, out) : -1;
}

int config_get_bool(const Config *config, const char *section, const char *key, int *out, FimiError *err) {
  const char *v = lookup_value(config, section, key, CONFIG_BOOL, err);
  return v ? parse_bool(v, out) : -1;
}

const char *config_get_string(const Config *config, const char *section, const char *key, FimiError *err) {
  return lookup_value(config, section, key, CONFIG_STRING, err);
}
