// core/json.c: typed cJSON access with errors naming the field (see json.h).
#include "core/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

cJSON *json_parse_text(const char *text, size_t length, const char *what, FimiError *err) {
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, length, &end, 0);
  if (!root) {
    size_t offset = end ? (size_t)(end - text) : 0;
    fimi_fail(err, "%s: invalid JSON near byte %zu", what, offset);
    return NULL;
  }
  // cJSON stops after the first value; anything but whitespace after it
  // means the file is not one JSON document.
  for (const char *p = end; p < text + length; p++) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') continue;
    fimi_fail(err, "%s: unexpected text after the JSON value at byte %zu", what, (size_t)(p - text));
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

cJSON *json_parse_file(const char *path, size_t max_bytes, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, max_bytes, &size, err);
  if (!text) return NULL;
  cJSON *root = json_parse_text(text, size, path, err);
  free(text);
  return root;
}

int json_is_missing(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  return item == NULL || cJSON_IsNull(item);
}

static const cJSON *lookup(const cJSON *obj, const char *key, int required, const char *what, FimiError *err, int *missing) {
  *missing = 0;
  if (!cJSON_IsObject(obj)) {
    fimi_fail(err, "%s: expected a JSON object", what);
    return NULL;
  }
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (item == NULL || cJSON_IsNull(item)) {
    *missing = 1;
    if (required) fimi_fail(err, "%s: missing required field \"%s\"", what, key);
    return NULL;
  }
  return item;
}

int json_get_int64(const cJSON *obj, const char *key, int required, int64_t *out, const char *what, FimiError *err) {
  int missing;
  const cJSON *item = lookup(obj, key, required, what, err, &missing);
  if (!item) return (missing && !required) ? 0 : -1;
  if (!cJSON_IsNumber(item)) return fimi_fail(err, "%s: field \"%s\" must be a number", what, key);
  double v = item->valuedouble;
  if (!isfinite(v) || v != floor(v) || fabs(v) > 9.0e15)
    return fimi_fail(err, "%s: field \"%s\" must be an integer (got %g)", what, key, v);
  *out = (int64_t)v;
  return 0;
}

int json_get_int(const cJSON *obj, const char *key, int required, int *out, const char *what, FimiError *err) {
  int64_t v = 0;
  int missing;
  if (!lookup(obj, key, 0, what, err, &missing)) {
    if (!missing) return -1;
    if (required) return fimi_fail(err, "%s: missing required field \"%s\"", what, key);
    return 0;
  }
  if (json_get_int64(obj, key, required, &v, what, err) != 0) return -1;
  if (v < -2147483647LL || v > 2147483647LL)
    return fimi_fail(err, "%s: field \"%s\" out of range (%lld)", what, key, (long long)v);
  *out = (int)v;
  return 0;
}

int json_get_double(const cJSON *obj, const char *key, int required, double *out, const char *what, FimiError *err) {
  int missing;
  const cJSON *item = lookup(obj, key, required, what, err, &missing);
  if (!item) return (missing && !required) ? 0 : -1;
  if (!cJSON_IsNumber(item)) return fimi_fail(err, "%s: field \"%s\" must be a number", what, key);
  *out = item->valuedouble;
  return 0;
}

int json_get_bool(const cJSON *obj, const char *key, int required, int *out, const char *what, FimiError *err) {
  int missing;
  const cJSON *item = lookup(obj, key, required, what, err, &missing);
  if (!item) return (missing && !required) ? 0 : -1;
  if (!cJSON_IsBool(item)) return fimi_fail(err, "%s: field \"%s\" must be true or false", what, key);
  *out = cJSON_IsTrue(item) ? 1 : 0;
  return 0;
}

int json_get_string(const cJSON *obj, const char *key, int required, char *out, size_t out_size, const char *what, FimiError *err) {
  int missing;
  const cJSON *item = lookup(obj, key, required, what, err, &missing);
  if (!item) return (missing && !required) ? 0 : -1;
  if (!cJSON_IsString(item)) return fimi_fail(err, "%s: field \"%s\" must be a string", what, key);
  size_t n = strlen(item->valuestring);
  if (n + 1 > out_size) return fimi_fail(err, "%s: field \"%s\" is too long (%zu bytes)", what, key, n);
  memcpy(out, item->valuestring, n + 1);
  return 0;
}

int json_write_file(const char *path, const cJSON *value, FimiError *err) {
  char *text = cJSON_Print(value);
  if (!text) return fimi_fail(err, "%s: out of memory printing JSON", path);
  int rc = file_write_atomic(path, text, strlen(text), err);
  cJSON_free(text);
  return rc;
}
