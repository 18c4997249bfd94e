// core/config.h: INI configs (parsed by inih) checked against a schema, with
// `--set section.key=value` overrides. Defines ConfigField (one schema row),
// Config, config_init, config_load_file, config_apply_override, and typed
// getters. Unknown sections/keys and values of the wrong type are errors that
// name the file and line (or the override), never silent defaults.
#ifndef FIMI_CORE_CONFIG_H
#define FIMI_CORE_CONFIG_H

#include <stdint.h>

#include "core/error.h"

typedef enum { CONFIG_INT, CONFIG_FLOAT, CONFIG_BOOL, CONFIG_STRING } ConfigType;

typedef struct ConfigField {
  const char *section;
  const char *key;
  ConfigType type;
  const char *default_value;  // text form, parsed like a file value
  const char *help;
} ConfigField;

#define CONFIG_VALUE_MAX 512
#define CONFIG_MAX_FIELDS 256

typedef struct Config {
  const ConfigField *fields[CONFIG_MAX_FIELDS];
  char values[CONFIG_MAX_FIELDS][CONFIG_VALUE_MAX];
  int count;
} Config;

// Adds schema rows (may be called once per layer) and sets their defaults.
int config_add_fields(Config *config, const ConfigField *fields, int count, FimiError *err);
// Reads an INI file; every key must be in the schema and parse as its type.
int config_load_file(Config *config, const char *path, FimiError *err);
// Applies "section.key=value".
int config_apply_override(Config *config, const char *assignment, FimiError *err);
// Sets a value by name, validating it; `origin` names where it came from.
int config_set(Config *config, const char *section, const char *key, const char *value, const char *origin, FimiError *err);

// Getters abort-free: asking for a key not in the schema or of another type
// is a programming error reported through err.
int config_get_int(const Config *config, const char *section, const char *key, int64_t *out, FimiError *err);
int config_get_float(const Config *config, const char *section, const char *key, double *out, FimiError *err);
int config_get_bool(const Config *config, const char *section, const char *key, int *out, FimiError *err);
const char *config_get_string(const Config *config, const char *section, const char *key, FimiError *err);

#endif
