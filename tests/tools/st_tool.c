// tests/tools/st_tool.c: a small command-line driver of fimi's safetensors,
// config and checkpoint code for the interop tests in tests/interop/, which
// compare it with the Python `safetensors` and `transformers` libraries.
//   st_tool dump FILE                  JSON {name: {dtype, shape, values (first 16 as f32), sum}}
//   st_tool write-test FILE F32|BF16   a fixed set of tensors (see write_test)
//   st_tool config PRESET              the preset's config.json
//   st_tool save-model PRESET DIR F32|BF16 [SHARD_BYTES [SEED]]   random model, HF layout
//   st_tool load-model DIR             like dump, for every tensor of a checkpoint
// Errors go to stderr with exit status 1.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/weights.h"

#define SHOWN_VALUES 16

static int fail(const FimiError *err) {
  fprintf(stderr, "error: %s\n", err->message);
  return 1;
}

static int print_json(cJSON *root) {
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return 1;
  puts(text);
  cJSON_free(text);
  return 0;
}

// Exact text for a float / double (cJSON's own printing may drop the last bit).
static cJSON *exact_number(double v, int digits) {
  if (!isfinite(v)) return cJSON_CreateString(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
  char text[40];
  snprintf(text, sizeof text, "%.*g", digits, v);
  if (!strpbrk(text, ".e")) strcat(text, ".0");  // so Python reads -0.0 as a float, sign kept
  return cJSON_CreateRaw(text);
}

// {dtype, shape, values, sum} for n floats; values that are not finite are
// written as the strings "nan", "inf", "-inf" (JSON has no such numbers).
static cJSON *describe(const char *dtype, int ndim, const int64_t *shape, const float *x, size_t n) {
  cJSON *obj = cJSON_CreateObject();
  cJSON_AddStringToObject(obj, "dtype", dtype);
  cJSON *dims = cJSON_AddArrayToObject(obj, "shape");
  for (int d = 0; d < ndim; d++) cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)shape[d]));
  if (!x) {
    cJSON_AddNullToObject(obj, "values");
    cJSON_AddNullToObject(obj, "sum");
    return obj;
  }
  cJSON *values = cJSON_AddArrayToObject(obj, "values");
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (i < SHOWN_VALUES) cJSON_AddItemToArray(values, exact_number(x[i], 9));
    sum += x[i];
  }
  cJSON_AddItemToObject(obj, "sum", exact_number(sum, 17));
  return obj;
}

static int dump(const char *path) {
  SafetensorsFile file;
  FimiError err = {0};
  if (safetensors_open(&file, path, &err) != 0) return fail(&err);
  cJSON *root = cJSON_CreateObject();
  int rc = 0;
  for (int i = 0; i < file.num_tensors && rc == 0; i++) {
    const SafetensorsTensor *t = &file.tensors[i];
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    float *x = NULL;
    if (t->dtype != SAFETENSORS_OTHER) {
      x = malloc((n ? n : 1) * sizeof(float));
      if (!x || safetensors_read_f32(&file, t, x, n, &err) != 0) rc = -1;
    }
    if (rc == 0) cJSON_AddItemToObject(root, t->name, describe(t->dtype_name, t->ndim, t->shape, x, n));
    free(x);
  }
  safetensors_close(&file);
  if (rc != 0) {
    cJSON_Delete(root);
    return fail(&err);
  }
  return print_json(root);
}

static int parse_dtype(const char *s, SafetensorsDtype *out) {
  if (strcmp(s, "F32") == 0) *out = SAFETENSORS_F32;
  else if (strcmp(s, "BF16") == 0) *out = SAFETENSORS_BF16;
  else return -1;
  return 0;
}

// The tensors tests/interop/test_safetensors_interop.py expects.
static int write_test(const char *path, SafetensorsDtype dtype) {
  float a[6], b[4] = {1.0f / 3.0f, -2.5f, 1e-3f, 3.14159265f}, c[1] = {42.0f};
  float special[3] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 6; i++) a[i] = (float)i * 0.5f - 1.0f;
  SafetensorsWriteTensor ts[] = {
      {"a", 2, {2, 3}, a}, {"b.weight", 1, {4}, b}, {"c", 0, {0}, c}, {"e", 1, {0}, NULL}, {"nan_inf", 1, {3}, special},
  };
  FimiError err = {0};
  if (safetensors_write(path, ts, 5, dtype, &err) != 0) return fail(&err);
  return 0;
}

static int config(const char *preset) {
  GemmaConfig cfg;
  FimiError err = {0};
  if (gemma_config_preset(&cfg, preset, &err) != 0) return fail(&err);
  char *json = gemma_config_to_json(&cfg, &err);
  if (!json) return fail(&err);
  fputs(json, stdout);
  free(json);
  return 0;
}

static int save_model(const char *preset, const char *dir, SafetensorsDtype dtype, size_t shard, uint64_t seed) {
  GemmaConfig cfg;
  GemmaModel model;
  FimiError err = {0};
  if (gemma_config_preset(&cfg, preset, &err) != 0 || gemma_model_create(&model, &cfg, &err) != 0) return fail(&err);
  gemma_model_init_random(&model, seed);
  // Non-zero norm weights, so a swapped or missing norm shows in comparisons.
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    float *p = gemma_tensor_data(&model, t);
    if (t->is_norm)
      for (size_t k = 0; k < t->numel; k++) p[k] = 0.01f * (float)((i + (int)k) % 13) - 0.05f;
  }
  int rc = gemma_save_pretrained(&model, dir, dtype, shard, &err);
  gemma_model_free(&model);
  return rc == 0 ? 0 : fail(&err);
}

static int load_model(const char *dir) {
  GemmaModel model;
  FimiError err = {0};
  if (gemma_load_pretrained(&model, dir, &err) != 0) return fail(&err);
  cJSON *root = cJSON_CreateObject();
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    cJSON_AddItemToObject(root, t->name, describe("F32", t->ndim, t->shape, gemma_tensor_data(&model, t), t->numel));
  }
  gemma_model_free(&model);
  return print_json(root);
}

int main(int argc, char **argv) {
  SafetensorsDtype dtype;
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
  if (argc == 4 && strcmp(argv[1], "write-test") == 0 && parse_dtype(argv[3], &dtype) == 0)
    return write_test(argv[2], dtype);
  if (argc == 3 && strcmp(argv[1], "config") == 0) return config(argv[2]);
  if (argc >= 5 && argc <= 7 && strcmp(argv[1], "save-model") == 0 && parse_dtype(argv[4], &dtype) == 0)
    return save_model(argv[2], argv[3], dtype, argc > 5 ? strtoull(argv[5], NULL, 10) : 0,
                      argc > 6 ? strtoull(argv[6], NULL, 10) : 1);
  if (argc == 3 && strcmp(argv[1], "load-model") == 0) return load_model(argv[2]);
  fprintf(stderr,
          "usage: st_tool dump FILE | write-test FILE F32|BF16 | config PRESET |\n"
          "       save-model PRESET DIR F32|BF16 [SHARD_BYTES [SEED]] | load-model DIR\n");
  return 2;
}
