// core/json.h: typed access to cJSON documents with errors that name the
// field. Defines json_parse_text, json_parse_file, json_get_* helpers.
// The parser is cJSON (DESIGN.md section 3); this file only adds checking.
#ifndef FIMI_CORE_JSON_H
#define FIMI_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "core/error.h"

// `what` names the source (a file path) in error messages.
cJSON *json_parse_text(const char *text, size_t length, const char *what, FimiError *err);
cJSON *json_parse_file(const char *path, size_t max_bytes, FimiError *err);

// Each getter: if the key is missing and required, fails naming `what.key`;
// if missing and optional, leaves *out untouched and returns 0 (so callers
// set defaults first). Wrong type or out-of-range value always fails.
int json_get_int64(const cJSON *obj, const char *key, int required, int64_t *out, const char *what, FimiError *err);
int json_get_int(const cJSON *obj, const char *key, int required, int *out, const char *what, FimiError *err);
int json_get_double(const cJSON *obj, const char *key, int required, double *out, const char *what, FimiError *err);
int json_get_bool(const cJSON *obj, const char *key, int required, int *out, const char *what, FimiError *err);
// Copies into out (size out_size); fails if the string does not fit.
int json_get_string(const cJSON *obj, const char *key, int required, char *out, size_t out_size, const char *what, FimiError *err);
// Prints value (indented) and writes it to path atomically (fileio.h).
int json_write_file(const char *path, const cJSON *value, FimiError *err);
// True when the key is absent or JSON null.
int json_is_missing(const cJSON *obj, const char *key);

#endif
