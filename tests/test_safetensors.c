// tests/test_safetensors.c: the safetensors reader and writer. Round trips in
// F32 and BF16, the float conversions, and for every validation rule of the
// reference implementation a hand-built malformed file that must be refused
// with a message naming that rule.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "tests/test_util.h"

// ----------------------------------------------------------------------------
// building files by hand

// 8-byte length (n, or the real header length when n is UINT64_MAX), header
// text, then data_len zero bytes. Returns a malloc'd buffer.
static unsigned char *make_file(const char *header, uint64_t n, size_t data_len, size_t *size) {
  size_t h = strlen(header);
  if (n == UINT64_MAX) n = h;
  *size = 8 + h + data_len;
  unsigned char *buf = calloc(*size + 1, 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
  memcpy(buf + 8, header, h);
  return buf;
}

// Parses header+data and checks that it fails with a message containing both
// the rule name and `detail` (NULL: just the rule).
static void expect_reject(const char *label, const char *header, size_t data_len, const char *rule,
                          const char *detail) {
  size_t size;
  unsigned char *buf = make_file(header, UINT64_MAX, data_len, &size);
  SafetensorsFile file;
  FimiError err = {0};
  int rc = safetensors_parse(&file, buf, size, "bad.safetensors", &err);
  CHECK(rc == -1, "%s: accepted a malformed file", label);
  if (rc == -1) {
    CHECK(strstr(err.message, rule) != NULL, "%s: message lacks %s: %s", label, rule, err.message);
    CHECK(strstr(err.message, "bad.safetensors") != NULL, "%s: message lacks the file name: %s", label, err.message);
    if (detail) CHECK(strstr(err.message, detail) != NULL, "%s: message lacks \"%s\": %s", label, detail, err.message);
  } else {
    safetensors_close(&file);
  }
  free(buf);
}

static int parse_ok(const char *label, const char *header, size_t data_len, SafetensorsFile *file,
                    unsigned char **buf) {
  size_t size;
  *buf = make_file(header, UINT64_MAX, data_len, &size);
  FimiError err = {0};
  int rc = safetensors_parse(file, *buf, size, "good.safetensors", &err);
  CHECK(rc == 0, "%s: rejected a valid file: %s", label, err.message);
  return rc;
}

// ----------------------------------------------------------------------------
// framing rules

static void test_framing_rules(void) {
  SafetensorsFile file;
  FimiError err = {0};
  unsigned char tiny[5] = {1, 0, 0, 0, 0};
  CHECK(safetensors_parse(&file, tiny, sizeof tiny, "bad.safetensors", &err) == -1 &&
            strstr(err.message, "HeaderTooSmall"),
        "short file: %s", err.message);

  size_t size;
  unsigned char *buf = make_file("{}", 100000001ull, 0, &size);
  CHECK(safetensors_parse(&file, buf, size, "bad.safetensors", &err) == -1 && strstr(err.message, "HeaderTooLarge"),
        "huge header: %s", err.message);
  free(buf);
  buf = make_file("{}", 0xffffffffffffff00ull, 0, &size);
  CHECK(safetensors_parse(&file, buf, size, "bad.safetensors", &err) == -1 && strstr(err.message, "HeaderTooLarge"),
        "64-bit header length: %s", err.message);
  free(buf);
  buf = make_file("{}  ", 60, 0, &size);
  CHECK(safetensors_parse(&file, buf, size, "bad.safetensors", &err) == -1 &&
            strstr(err.message, "InvalidHeaderLength"),
        "header past end: %s", err.message);
  free(buf);

  expect_reject("not utf-8", "{\"\xff\":1}", 0, "InvalidHeader", "UTF-8");
  expect_reject("overlong utf-8", "{\"\xc0\xaf\":1}", 0, "InvalidHeader", "UTF-8");
  expect_reject("surrogate", "{\"\xed\xa0\x80\":1}", 0, "InvalidHeader", "UTF-8");
  expect_reject("array header", "[]", 0, "InvalidHeaderStart", NULL);
  expect_reject("string header", "  \"x\"", 0, "InvalidHeaderStart", NULL);
  expect_reject("empty header", "", 0, "InvalidHeaderStart", NULL);
  expect_reject("truncated json", "{", 0, "InvalidHeaderDeserialization", NULL);
  expect_reject("trailing text", "{} x", 0, "InvalidHeaderDeserialization", NULL);
  expect_reject("two objects", "{}{}", 0, "InvalidHeaderDeserialization", NULL);
  expect_reject("control char", "{\"a\x01\":1}", 0, "InvalidHeaderDeserialization", "control");
  expect_reject("NUL after object", "{}\x01", 0, "InvalidHeaderDeserialization", NULL);
}

// ----------------------------------------------------------------------------
// entry structure (serde's errors in the reference)

static void test_structure_rules(void) {
  const char *rule = "InvalidHeaderDeserialization";
  expect_reject("unknown dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, rule, "F33");
  expect_reject("dtype not string", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, rule, "dtype");
  expect_reject("missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, rule, "shape");
  expect_reject("missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, rule, "data_offsets");
  expect_reject("entry not object", "{\"a\":[1,2]}", 0, rule, "\"a\"");
  expect_reject("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, rule, "shape");
  expect_reject("fractional dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, rule,
                "shape");
  expect_reject("three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, rule,
                "data_offsets");
  expect_reject("string offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", 4, rule,
                "data_offsets");
  expect_reject("metadata value", "{\"__metadata__\":{\"format\":1}}", 0, rule, "__metadata__");
  expect_reject("metadata array", "{\"__metadata__\":[\"pt\"]}", 0, rule, "__metadata__");
  expect_reject("duplicate name",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                2, rule, "duplicate");
  expect_reject("nine dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
                rule, "dimensions");
}

// ----------------------------------------------------------------------------
// layout rules (Metadata::validate and the buffer length)

static void test_layout_rules(void) {
  expect_reject("gap",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[20,36]}}",
                36, "InvalidOffset", "gap");
  expect_reject("overlap",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                24, "InvalidOffset", "overlap");
  expect_reject("not from zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                "InvalidOffset", "\"a\"");
  expect_reject("end before begin",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                "\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,0]}}",
                0, "InvalidOffset", "end before");
  expect_reject("huge offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 1,
                "InvalidOffset", NULL);
  // The reference's own test cases.
  expect_reject("dim past u64", "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,18446744073709551614],\"data_offsets\":[0,16]}}",
                16, "ValidationOverflow", NULL);
  expect_reject("element overflow",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", 16,
                "ValidationOverflow", "element count");
  expect_reject("byte overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1048576],\"data_offsets\":[0,16]}}",
                16, "ValidationOverflow", "byte count");
  expect_reject("sub-byte", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "MisalignedSlice",
                "12 bits");
  expect_reject("size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12,
                "TensorInvalidInfo", "tensor \"a\": data_offsets [0, 12] do not match dtype F32 and shape [2, 2] (16 bytes)");
  expect_reject("trailing bytes", "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 20,
                "MetadataIncompleteBuffer", "16");
  expect_reject("missing bytes", "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 14,
                "MetadataIncompleteBuffer", NULL);
  expect_reject("empty with data", "{}", 8, "MetadataIncompleteBuffer", NULL);
}

// ----------------------------------------------------------------------------
// files the reference accepts

static void test_accepted_edge_cases(void) {
  SafetensorsFile file;
  unsigned char *buf;
  if (parse_ok("empty", "{}", 0, &file, &buf) == 0) {
    CHECK(file.num_tensors == 0 && file.data_size == 0, "empty: %d tensors", file.num_tensors);
    safetensors_close(&file);
  }
  free(buf);
  if (parse_ok("padded", "\t\n{}\r ", 0, &file, &buf) == 0) safetensors_close(&file);
  free(buf);
  // Zero-sized tensor, scalar, unknown entry field, null metadata, out-of-order entries.
  const char *h =
      "{\"__metadata__\":null,\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"extra\":1},"
      "\"z\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[8,8]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]}}";
  if (parse_ok("mixed", h, 8, &file, &buf) == 0) {
    CHECK(file.num_tensors == 3, "mixed: %d tensors", file.num_tensors);
    CHECK(strcmp(file.tensors[0].name, "s") == 0 && strcmp(file.tensors[1].name, "b") == 0 &&
              strcmp(file.tensors[2].name, "z") == 0,
          "mixed: tensors not sorted by offset");
    const SafetensorsTensor *s = safetensors_find(&file, "s");
    CHECK(s && s->ndim == 0 && s->dtype == SAFETENSORS_F32, "scalar tensor");
    const SafetensorsTensor *z = safetensors_find(&file, "z");
    CHECK(z && z->dtype == SAFETENSORS_OTHER && strcmp(z->dtype_name, "I32") == 0, "I32 tensor");
    CHECK(file.metadata_json == NULL, "null metadata kept");
    CHECK(safetensors_find(&file, "nope") == NULL, "find of a missing name");
    safetensors_close(&file);
  }
  free(buf);
  // Every dtype name of the reference, with its width (F6: 4 values = 3 bytes).
  const char *all =
      "{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,3]},"
      "\"b\":{\"dtype\":\"F8_E4M3FNUZ\",\"shape\":[1],\"data_offsets\":[3,4]},"
      "\"c\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[4,12]},"
      "\"d\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[12,13]}}";
  if (parse_ok("dtypes", all, 13, &file, &buf) == 0) {
    CHECK(strcmp(safetensors_find(&file, "b")->dtype_name, "F8_E4M3FNUZ") == 0, "long dtype name kept");
    safetensors_close(&file);
  }
  free(buf);
}

// A header whose length is not a multiple of 8 leaves F32 data unaligned.
static void test_unaligned_read(void) {
  const char *h = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  size_t size;
  unsigned char *buf = make_file(h, UINT64_MAX, 8, &size);
  float values[2] = {1.5f, -3.25f};
  memcpy(buf + size - 8, values, 8);
  SafetensorsFile file;
  FimiError err = {0};
  CHECK(safetensors_parse(&file, buf, size, "u.safetensors", &err) == 0, "unaligned: %s", err.message);
  float out[2] = {0, 0};
  CHECK(safetensors_read_f32(&file, &file.tensors[0], out, 2, &err) == 0, "read: %s", err.message);
  CHECK(out[0] == 1.5f && out[1] == -3.25f, "unaligned values %g %g", out[0], out[1]);
  CHECK(safetensors_read_f32(&file, &file.tensors[0], out, 3, &err) == -1 && strstr(err.message, "\"x\""),
        "wrong count accepted");
  safetensors_close(&file);
  free(buf);
}

// ----------------------------------------------------------------------------
// conversions

static uint32_t float_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

static float bits_float(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static void test_conversions(void) {
  CHECK(float_to_bf16(1.0f) == 0x3f80, "bf16(1)");
  CHECK(float_to_bf16(bits_float(0x3f808000u)) == 0x3f80, "tie rounds to even (down)");
  CHECK(float_to_bf16(bits_float(0x3f818000u)) == 0x3f82, "tie rounds to even (up)");
  CHECK(float_to_bf16(bits_float(0x3f808001u)) == 0x3f81, "above half rounds up");
  CHECK(float_to_bf16(bits_float(0x7f7fffffu)) == 0x7f80, "max float rounds to inf");
  CHECK(float_to_bf16(bits_float(0xff800000u)) == 0xff80, "-inf");
  uint16_t nan = float_to_bf16(bits_float(0x7f800001u));  // a NaN whose payload sits in the low bits
  CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0, "NaN stays NaN (0x%04x)", nan);
  CHECK(bf16_to_float(0xc040) == -3.0f, "bf16 -> float");
  CHECK(f16_to_float(0x3c00) == 1.0f && f16_to_float(0xc000) == -2.0f, "f16 normals");
  CHECK(f16_to_float(0x7bff) == 65504.0f, "f16 max");
  CHECK(f16_to_float(0x0001) == 5.9604644775390625e-08f, "f16 smallest subnormal");
  CHECK(f16_to_float(0x03ff) == 6.097555160522461e-05f, "f16 largest subnormal");
  CHECK(f16_to_float(0x8000) == 0.0f && float_bits(f16_to_float(0x8000)) == 0x80000000u, "f16 -0");
  CHECK(float_bits(f16_to_float(0x7c00)) == 0x7f800000u, "f16 inf");
  CHECK(float_bits(f16_to_float(0xfc00)) == 0xff800000u, "f16 -inf");
  float n = f16_to_float(0x7e00);
  CHECK(n != n, "f16 NaN");
}

// ----------------------------------------------------------------------------
// round trips through files

static void tmp_path(char *out, size_t size, const char *name) {
  const char *dir = getenv("TMPDIR");
  snprintf(out, size, "%s/fimi_test_st_%d_%s", dir ? dir : "/tmp", (int)getpid(), name);
}

static void test_round_trip(SafetensorsDtype dtype) {
  float a[6] = {0.1f, -2.5f, 3.0e-8f, 1.0e30f, -0.0f, 7.0f};
  float b[1] = {42.0f};
  float nan_inf[2] = {bits_float(0x7fc00000u), bits_float(0xff800000u)};
  SafetensorsWriteTensor ts[4] = {
      {"model.layers.0.weight", 2, {2, 3}, a},
      {"scalar", 0, {0}, b},
      {"empty", 1, {0}, NULL},
      {"special", 1, {2}, nan_inf},
  };
  char path[512];
  tmp_path(path, sizeof path, dtype == SAFETENSORS_F32 ? "f32.safetensors" : "bf16.safetensors");
  FimiError err = {0};
  CHECK(safetensors_write(path, ts, 4, dtype, &err) == 0, "write: %s", err.message);
  SafetensorsFile file;
  if (safetensors_open(&file, path, &err) != 0) {
    CHECK(0, "reopen: %s", err.message);
    return;
  }
  CHECK(file.num_tensors == 4, "round trip count %d", file.num_tensors);
  for (int i = 0; i < file.num_tensors && i < 4; i++)
    CHECK(strcmp(file.tensors[i].name, ts[i].name) == 0, "order: %s", file.tensors[i].name);
  CHECK(file.metadata_json && strcmp(file.metadata_json, "{\"format\":\"pt\"}") == 0, "metadata %s",
        file.metadata_json ? file.metadata_json : "(none)");
  CHECK(((uintptr_t)file.data - (uintptr_t)file.mapping) % 8 == 0, "data section 8-aligned");
  const SafetensorsTensor *t = safetensors_find(&file, "model.layers.0.weight");
  CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3, "shape kept");
  CHECK(t && t->dtype == dtype, "dtype kept");
  float out[6];
  if (t && safetensors_read_f32(&file, t, out, 6, &err) == 0) {
    for (int i = 0; i < 6; i++) {
      float want = dtype == SAFETENSORS_F32 ? a[i] : bf16_to_float(float_to_bf16(a[i]));
      CHECK(float_bits(out[i]) == float_bits(want), "value %d: %g vs %g", i, out[i], want);
    }
  }
  t = safetensors_find(&file, "special");
  if (t && safetensors_read_f32(&file, t, out, 2, &err) == 0)
    CHECK(out[0] != out[0] && float_bits(out[1]) == 0xff800000u, "NaN and -inf survive");
  t = safetensors_find(&file, "empty");
  CHECK(t && t->begin == t->end && safetensors_read_f32(&file, t, out, 0, &err) == 0, "empty tensor");
  safetensors_close(&file);
  remove(path);
}

static void test_writer_and_open_errors(void) {
  char path[512];
  tmp_path(path, sizeof path, "dup.safetensors");
  float x = 1;
  SafetensorsWriteTensor dup[2] = {{"a", 1, {1}, &x}, {"a", 1, {1}, &x}};
  FimiError err = {0};
  CHECK(safetensors_write(path, dup, 2, SAFETENSORS_F32, &err) == -1 && strstr(err.message, "duplicate"),
        "duplicate names written: %s", err.message);
  CHECK(safetensors_write(path, dup, 1, SAFETENSORS_F16, &err) == -1, "F16 writing is not offered");
  CHECK(access(path, F_OK) != 0, "failed write left a file");

  SafetensorsFile file;
  CHECK(safetensors_open(&file, "/nonexistent/x.safetensors", &err) == -1 && strstr(err.message, "x.safetensors"),
        "open error names the file: %s", err.message);
  tmp_path(path, sizeof path, "empty.safetensors");
  FILE *f = fopen(path, "wb");
  if (f) fclose(f);
  CHECK(safetensors_open(&file, path, &err) == -1 && strstr(err.message, "HeaderTooSmall") &&
            strstr(err.message, path),
        "empty file: %s", err.message);
  remove(path);

  // Integer tensors are valid files but not floats.
  const char *h = "{\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
  size_t size;
  unsigned char *buf = make_file(h, UINT64_MAX, 8, &size);
  if (safetensors_parse(&file, buf, size, "i.safetensors", &err) == 0) {
    float out;
    CHECK(safetensors_read_f32(&file, &file.tensors[0], &out, 1, &err) == -1 && strstr(err.message, "I64"),
          "I64 read as float: %s", err.message);
    safetensors_close(&file);
  }
  free(buf);
}

int main(void) {
  test_framing_rules();
  test_structure_rules();
  test_layout_rules();
  test_accepted_edge_cases();
  test_unaligned_read();
  test_conversions();
  test_round_trip(SAFETENSORS_F32);
  test_round_trip(SAFETENSORS_BF16);
  test_writer_and_open_errors();
  TEST_MAIN_END();
}
