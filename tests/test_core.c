// tests/test_core.c: core/ behaviour: INI configs (schema, line numbers in
// errors, --set overrides), JSON getters naming fields, RNG determinism and
// moments, arena limits, error wrapping.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/hash.h"
#include "core/rng.h"
#include "tests/test_util.h"

static const ConfigField fields[] = {
    {"optim", "lr", CONFIG_FLOAT, "1e-5", "learning rate"},
    {"optim", "warmup", CONFIG_INT, "10", "warmup steps"},
    {"train", "recompute", CONFIG_BOOL, "false", "recompute"},
    {"train", "out", CONFIG_STRING, "run", "output dir"},
};

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void test_config(void) {
  Config config = {0};
  FimiError err = {0};
  CHECK(config_add_fields(&config, fields, 4, &err) == 0, "schema: %s", err.message);
  double lr = 0;
  int64_t warmup = 0;
  int recompute = -1;
  CHECK(config_get_float(&config, "optim", "lr", &lr, &err) == 0 && lr == 1e-5, "default lr");

  write_text("test_core_ok.ini", "; comment\n[optim]\nlr = 5e-7\nwarmup = 3\n\n[train]\nrecompute = true\n");
  CHECK(config_load_file(&config, "test_core_ok.ini", &err) == 0, "load: %s", err.message);
  config_get_float(&config, "optim", "lr", &lr, &err);
  config_get_int(&config, "optim", "warmup", &warmup, &err);
  config_get_bool(&config, "train", "recompute", &recompute, &err);
  CHECK(lr == 5e-7 && warmup == 3 && recompute == 1, "file values: lr %g warmup %lld recompute %d", lr,
        (long long)warmup, recompute);

  CHECK(config_apply_override(&config, "optim.lr=2e-6", &err) == 0, "override: %s", err.message);
  config_get_float(&config, "optim", "lr", &lr, &err);
  CHECK(lr == 2e-6, "override applied");

  fimi_error_clear(&err);
  write_text("test_core_bad_key.ini", "[optim]\nlr = 1\n\nbeta3 = 0.5\n");
  CHECK(config_load_file(&config, "test_core_bad_key.ini", &err) != 0, "unknown key rejected");
  CHECK(strstr(err.message, "test_core_bad_key.ini:4") && strstr(err.message, "beta3"), "message names line+key: %s",
        err.message);

  fimi_error_clear(&err);
  write_text("test_core_bad_value.ini", "[optim]\nwarmup = ten\n");
  CHECK(config_load_file(&config, "test_core_bad_value.ini", &err) != 0, "bad int rejected");
  CHECK(strstr(err.message, ":2") && strstr(err.message, "optim.warmup"), "message: %s", err.message);

  fimi_error_clear(&err);
  write_text("test_core_bad_section.ini", "[optimizer]\nlr = 1\n");
  CHECK(config_load_file(&config, "test_core_bad_section.ini", &err) != 0, "unknown section rejected");
  CHECK(strstr(err.message, "unknown section [optimizer]") != NULL, "message: %s", err.message);

  fimi_error_clear(&err);
  write_text("test_core_syntax.ini", "[optim]\nthis line has no equals sign\n");
  CHECK(config_load_file(&config, "test_core_syntax.ini", &err) != 0, "syntax error rejected");
  CHECK(strstr(err.message, "test_core_syntax.ini:2") != NULL, "message: %s", err.message);

  const char *bad_overrides[] = {"optim.lr", "lr=1", "optim.nope=1", "train.recompute=maybe", ".x=1", "optim.lr=nan"};
  for (int i = 0; i < 6; i++) {
    fimi_error_clear(&err);
    CHECK(config_apply_override(&config, bad_overrides[i], &err) != 0, "override %s rejected", bad_overrides[i]);
    CHECK(strstr(err.message, "--set") != NULL, "override message names --set: %s", err.message);
  }
  CHECK(config_load_file(&config, "does_not_exist.ini", &err) != 0, "missing file rejected");
}

static void test_json(void) {
  FimiError err = {0};
  const char *text = "{\"n\": 3, \"f\": 2.5, \"s\": \"hi\", \"b\": true, \"x\": null, \"big\": 1e20}";
  cJSON *root = json_parse_text(text, strlen(text), "doc.json", &err);
  CHECK(root != NULL, "parse");
  int n = 0, b = 0;
  double f = 0;
  char s[8];
  CHECK(json_get_int(root, "n", 1, &n, "doc.json", &err) == 0 && n == 3, "int");
  CHECK(json_get_double(root, "f", 1, &f, "doc.json", &err) == 0 && f == 2.5, "double");
  CHECK(json_get_string(root, "s", 1, s, sizeof s, "doc.json", &err) == 0 && !strcmp(s, "hi"), "string");
  CHECK(json_get_bool(root, "b", 1, &b, "doc.json", &err) == 0 && b == 1, "bool");
  n = 7;
  CHECK(json_get_int(root, "x", 0, &n, "doc.json", &err) == 0 && n == 7, "optional null keeps default");
  CHECK(json_get_int(root, "missing", 1, &n, "doc.json", &err) != 0 && strstr(err.message, "\"missing\""),
        "required missing names field: %s", err.message);
  CHECK(json_get_int(root, "f", 1, &n, "doc.json", &err) != 0 && strstr(err.message, "integer"), "non-integer: %s",
        err.message);
  CHECK(json_get_int(root, "big", 1, &n, "doc.json", &err) != 0, "out of range int");
  CHECK(json_get_string(root, "n", 1, s, sizeof s, "doc.json", &err) != 0, "wrong type string");
  cJSON_Delete(root);
  CHECK(json_parse_text("{\"a\": [1,", 9, "broken.json", &err) == NULL && strstr(err.message, "broken.json"),
        "invalid JSON names the source: %s", err.message);
  CHECK(json_parse_text("{\"a\": 1} x", 10, "trailing.json", &err) == NULL, "trailing text after the object rejected");
  cJSON *spaced = json_parse_text("{\"a\": 1}\n  ", 11, "spaced.json", &err);
  CHECK(spaced != NULL, "trailing whitespace accepted");
  cJSON_Delete(spaced);
}

static void test_rng(void) {
  Rng a, b;
  rng_seed(&a, 42);
  rng_seed(&b, 42);
  int same = 1;
  for (int i = 0; i < 1000; i++) same &= rng_next_u64(&a) == rng_next_u64(&b);
  CHECK(same, "same seed, same stream");
  rng_seed(&b, 43);
  CHECK(rng_next_u64(&a) != rng_next_u64(&b), "different seeds differ");
  // Moments of 200k normals: mean within 0.01, variance within 0.02 (5+ sigma).
  double sum = 0, sum_sq = 0;
  const int count = 200000;
  for (int i = 0; i < count; i++) {
    double x = rng_normal(&a);
    sum += x;
    sum_sq += x * x;
  }
  double mean = sum / count, var = sum_sq / count - mean * mean;
  CHECK(fabs(mean) < 0.01 && fabs(var - 1) < 0.02, "normal moments mean %g var %g", mean, var);
  float u_min = 1, u_max = 0;
  for (int i = 0; i < 100000; i++) {
    float u = rng_uniform(&a);
    if (u < u_min) u_min = u;
    if (u > u_max) u_max = u;
  }
  CHECK(u_min >= 0 && u_max < 1 && u_min < 0.001 && u_max > 0.999, "uniform range [%g, %g]", u_min, u_max);
}

// Published vectors: FNV-1a 64 of "", "a", "foobar" (the FNV reference
// page) and splitmix64's first two outputs from state 0 (Vigna's reference
// code: the finalizer of 1 and 2 times the golden-ratio increment).
static void test_hash(void) {
  CHECK(hash_fnv1a(HASH_FNV1A_BASIS, "", 0) == 0xcbf29ce484222325ULL, "FNV-1a of the empty string is the basis");
  CHECK(hash_fnv1a_text(HASH_FNV1A_BASIS, "a") == 0xaf63dc4c8601ec8cULL, "FNV-1a of a");
  CHECK(hash_fnv1a(HASH_FNV1A_BASIS, "foobar", 6) == 0x85944171f73967e8ULL, "FNV-1a of foobar");
  CHECK(hash_fnv1a_text(hash_fnv1a(HASH_FNV1A_BASIS, "foo", 3), "bar") == 0x85944171f73967e8ULL,
        "FNV-1a continues from a state");
  CHECK(hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, "\xe0\xa4\x95") ==
            hash_fnv1a(HASH_FNV1A_SHORT_BASIS, "\xe0\xa4\x95", 3),
        "bytes above 0x7f hash as unsigned in both forms");
  CHECK(hash_mix64(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL, "splitmix64 output 1");
  CHECK(hash_mix64(0x3c6ef372fe94f82aULL) == 0x6e789e6aa1b965f4ULL, "splitmix64 output 2");
}

static void test_arena_and_errors(void) {
  Arena arena;
  FimiError err = {0};
  CHECK(arena_init(&arena, 1000, &err) == 0, "arena init");
  void *p = arena_alloc(&arena, 100, &err);
  CHECK(p != NULL && ((size_t)p % 64) == 0, "aligned allocation");
  CHECK(arena_alloc(&arena, 10000, &err) == NULL && strstr(err.message, "arena full"), "full arena reports");
  arena_reset(&arena);
  CHECK(arena_alloc(&arena, 900, &err) != NULL, "reset frees space");
  arena_free(&arena);

  fimi_error_clear(&err);
  fimi_fail(&err, "field \"x\" is bad");
  fimi_fail_wrap(&err, "reading %s", "a.json");
  CHECK(!strcmp(err.message, "reading a.json: field \"x\" is bad"), "wrap: %s", err.message);

  CHECK(file_write_atomic("test_core_atomic.txt", "abc", 3, &err) == 0, "atomic write");
  size_t size = 0;
  char *data = file_read_all("test_core_atomic.txt", 100, &size, &err);
  CHECK(data && size == 3 && !strcmp(data, "abc"), "read back");
  free(data);
  CHECK(file_read_all("test_core_atomic.txt", 2, &size, &err) == NULL && strstr(err.message, "limit"),
        "size limit enforced");
}

int main(void) {
  test_config();
  test_json();
  test_rng();
  test_hash();
  test_arena_and_errors();
  TEST_MAIN_END();
}
