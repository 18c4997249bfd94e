// model/safetensors.c: the safetensors reader and writer (see safetensors.h).
// Defines safetensors_parse/_open/_close/_find/_read_f32, safetensors_write
// and the float <-> bf16/f16 conversions.
//
// The reader applies the checks of the reference implementation
// (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata and
// Metadata::validate) in the same order, and every error message ends with the
// reference's name for the rule in parentheses, e.g. "(TensorInvalidInfo)".
// docs/safetensors.md lists the rules and the few places fimi is stricter.
#define _POSIX_C_SOURCE 200809L  // mmap, fsync, fileno, strdup
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; fimi reads it with plain loads"
#endif

// ----------------------------------------------------------------------------
// dtypes: every name the reference accepts, with its width in bits (sub-byte
// float formats make "bits" rather than "bytes" the honest unit).

typedef struct {
  const char *name;
  int bits;
  SafetensorsDtype kind;
} DtypeInfo;

static const DtypeInfo DTYPES[] = {
    {"BOOL", 8, SAFETENSORS_OTHER},     {"F4", 4, SAFETENSORS_OTHER},
    {"F6_E2M3", 6, SAFETENSORS_OTHER},  {"F6_E3M2", 6, SAFETENSORS_OTHER},
    {"U8", 8, SAFETENSORS_OTHER},       {"I8", 8, SAFETENSORS_OTHER},
    {"F8_E5M2", 8, SAFETENSORS_OTHER},  {"F8_E4M3", 8, SAFETENSORS_OTHER},
    {"F8_E8M0", 8, SAFETENSORS_OTHER},  {"F8_E4M3FNUZ", 8, SAFETENSORS_OTHER},
    {"F8_E5M2FNUZ", 8, SAFETENSORS_OTHER}, {"I16", 16, SAFETENSORS_OTHER},
    {"U16", 16, SAFETENSORS_OTHER},     {"F16", 16, SAFETENSORS_F16},
    {"BF16", 16, SAFETENSORS_BF16},     {"I32", 32, SAFETENSORS_OTHER},
    {"U32", 32, SAFETENSORS_OTHER},     {"F32", 32, SAFETENSORS_F32},
    {"C64", 64, SAFETENSORS_OTHER},     {"F64", 64, SAFETENSORS_OTHER},
    {"I64", 64, SAFETENSORS_OTHER},     {"U64", 64, SAFETENSORS_OTHER},
};
#define NUM_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

static const DtypeInfo *dtype_lookup(const char *name) {
  for (int i = 0; i < NUM_DTYPES; i++)
    if (strcmp(DTYPES[i].name, name) == 0) return &DTYPES[i];
  return NULL;
}

static int dtype_bits(const SafetensorsTensor *t) {
  const DtypeInfo *info = dtype_lookup(t->dtype_name);
  return info ? info->bits : 0;
}

// ----------------------------------------------------------------------------
// float conversions

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  // NaN: truncating could clear every mantissa bit and turn it into Inf, so
  // keep the sign and top mantissa bits and force the quiet bit.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

float bf16_to_float(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

float f16_to_float(uint16_t value) {
  uint32_t sign = (uint32_t)(value >> 15) << 31;
  uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // zero or subnormal: mantissa * 2^-24 is exact in float32
    float magnitude = ldexpf((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // Inf, or NaN with its payload
  } else {
    bits = sign | ((exponent - 15u + 127u) << 23) | (mantissa << 13);
  }
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

// ----------------------------------------------------------------------------
// small helpers for the reader

static uint64_t read_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static int is_json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Strict UTF-8 as Rust's str::from_utf8 checks it: no overlong forms, no
// surrogates, nothing above U+10FFFF. Returns the offset of the first bad
// byte, or `length` when all is well.
static size_t utf8_first_invalid(const unsigned char *s, size_t length) {
  size_t i = 0;
  while (i < length) {
    unsigned char c = s[i];
    size_t need;
    uint32_t min, cp;
    if (c < 0x80) { i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) { need = 1; min = 0x80; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { need = 2; min = 0x800; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { need = 3; min = 0x10000; cp = c & 0x07; }
    else return i;
    if (length - i <= need) return i;
    for (size_t k = 1; k <= need; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += need + 1;
  }
  return length;
}

// cJSON treats every byte <= 0x20 as whitespace and allows raw control
// characters inside strings; JSON (and serde_json, which the reference uses)
// does not. Returns the offset of the first such byte, or `length`.
static size_t json_first_control_char(const unsigned char *s, size_t length) {
  int in_string = 0, escaped = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = s[i];
    if (c < 0x20 && (in_string || !is_json_space(c))) return i;
    if (!in_string) {
      if (c == '"') in_string = 1;
    } else if (escaped) {
      escaped = 0;
    } else if (c == '\\') {
      escaped = 1;
    } else if (c == '"') {
      in_string = 0;
    }
  }
  return length;
}

static void format_shape(char *out, size_t size, const SafetensorsTensor *t) {
  size_t used = (size_t)snprintf(out, size, "[");
  for (int d = 0; d < t->ndim && used < size; d++)
    used += (size_t)snprintf(out + used, size - used, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
  if (used < size) snprintf(out + used, size - used, "]");
}

// JSON numbers arrive through cJSON as doubles, which are exact below 2^53.
#define EXACT_INTEGER_LIMIT 9007199254740992.0

// 0: ok, -1: not a non-negative integer, 1: an integer too large to read exactly.
static int json_to_u64(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return -1;
  double v = item->valuedouble;
  if (!isfinite(v) || v < 0 || v != floor(v)) return -1;
  if (v >= EXACT_INTEGER_LIMIT) return 1;
  *out = (uint64_t)v;
  return 0;
}

// ----------------------------------------------------------------------------
// header entries

static int parse_metadata(SafetensorsFile *file, const cJSON *meta, const char *what, FimiError *err) {
  if (cJSON_IsNull(meta)) return 0;  // the reference reads it as Option<HashMap>
  if (!cJSON_IsObject(meta))
    return fimi_fail(err, "%s: __metadata__ must be an object of strings (InvalidHeaderDeserialization)", what);
  for (const cJSON *kv = meta->child; kv; kv = kv->next)
    if (!cJSON_IsString(kv))
      return fimi_fail(err, "%s: __metadata__ value for \"%s\" must be a string (InvalidHeaderDeserialization)", what,
                       kv->string);
  file->metadata_json = cJSON_PrintUnformatted(meta);
  if (!file->metadata_json) return fimi_fail(err, "%s: out of memory copying __metadata__", what);
  return 0;
}

static int parse_shape(SafetensorsTensor *t, const cJSON *shape, const char *what, FimiError *err) {
  if (!cJSON_IsArray(shape))
    return fimi_fail(err, "%s: tensor \"%s\": \"shape\" must be an array of integers (InvalidHeaderDeserialization)",
                     what, t->name);
  int ndim = cJSON_GetArraySize(shape);
  if (ndim > SAFETENSORS_MAX_DIMS)
    return fimi_fail(err, "%s: tensor \"%s\": %d dimensions, fimi supports at most %d (InvalidHeaderDeserialization)",
                     what, t->name, ndim, SAFETENSORS_MAX_DIMS);
  t->ndim = 0;
  for (const cJSON *dim = shape->child; dim; dim = dim->next) {
    uint64_t v = 0;
    int rc = json_to_u64(dim, &v);
    if (rc < 0)
      return fimi_fail(err, "%s: tensor \"%s\": shape entries must be non-negative integers (InvalidHeaderDeserialization)",
                       what, t->name);
    if (rc > 0)
      return fimi_fail(err, "%s: tensor \"%s\": shape entry %.4g is above 2^53, too large to check exactly "
                       "(ValidationOverflow)", what, t->name, dim->valuedouble);
    t->shape[t->ndim++] = (int64_t)v;
  }
  return 0;
}

static int parse_offsets(SafetensorsTensor *t, const cJSON *offsets, const char *what, FimiError *err) {
  if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
    return fimi_fail(err, "%s: tensor \"%s\": \"data_offsets\" must be [begin, end] (InvalidHeaderDeserialization)",
                     what, t->name);
  uint64_t v[2] = {0, 0};
  const cJSON *item = offsets->child;
  for (int i = 0; i < 2; i++, item = item->next) {
    int rc = json_to_u64(item, &v[i]);
    if (rc < 0)
      return fimi_fail(err, "%s: tensor \"%s\": data_offsets must be non-negative integers (InvalidHeaderDeserialization)",
                       what, t->name);
    // No file fimi can map is 2^53 bytes long, so such an offset is always out of place.
    if (rc > 0)
      return fimi_fail(err, "%s: tensor \"%s\": data offset %.4g is beyond any readable file (InvalidOffset)", what,
                       t->name, item->valuedouble);
  }
  t->begin = v[0];
  t->end = v[1];
  return 0;
}

static int parse_tensor(SafetensorsTensor *t, const cJSON *entry, const char *what, FimiError *err) {
  t->name = strdup(entry->string);
  if (!t->name) return fimi_fail(err, "%s: out of memory", what);
  if (!cJSON_IsObject(entry))
    return fimi_fail(err, "%s: tensor \"%s\": entry must be an object (InvalidHeaderDeserialization)", what, t->name);
  // Unknown fields inside an entry are ignored, as serde does without deny_unknown_fields.
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
  const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
  if (!dtype || !shape || !offsets)
    return fimi_fail(err, "%s: tensor \"%s\": missing field \"%s\" (InvalidHeaderDeserialization)", what, t->name,
                     !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
  const DtypeInfo *info = cJSON_IsString(dtype) ? dtype_lookup(dtype->valuestring) : NULL;
  if (!info)
    return fimi_fail(err, "%s: tensor \"%s\": unknown dtype %s%s%s (InvalidHeaderDeserialization)", what, t->name,
                     cJSON_IsString(dtype) ? "\"" : "", cJSON_IsString(dtype) ? dtype->valuestring : "(not a string)",
                     cJSON_IsString(dtype) ? "\"" : "");
  snprintf(t->dtype_name, sizeof t->dtype_name, "%s", info->name);
  t->dtype = info->kind;
  if (parse_shape(t, shape, what, err) != 0) return -1;
  return parse_offsets(t, offsets, what, err);
}

static int parse_entries(SafetensorsFile *file, const cJSON *root, const char *what, FimiError *err) {
  int count = 0, seen_metadata = 0;
  for (const cJSON *e = root->child; e; e = e->next) count++;
  file->tensors = calloc(count ? (size_t)count : 1, sizeof(SafetensorsTensor));
  if (!file->tensors) return fimi_fail(err, "%s: out of memory for %d tensors", what, count);
  for (const cJSON *e = root->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) {
      if (seen_metadata++) return fimi_fail(err, "%s: duplicate __metadata__ (InvalidHeaderDeserialization)", what);
      if (parse_metadata(file, e, what, err) != 0) return -1;
      continue;
    }
    // serde's map would silently keep the last of two equal names; fimi refuses.
    for (int i = 0; i < file->num_tensors; i++)
      if (strcmp(file->tensors[i].name, e->string) == 0)
        return fimi_fail(err, "%s: duplicate tensor name \"%s\" (InvalidHeaderDeserialization)", what, e->string);
    SafetensorsTensor *t = &file->tensors[file->num_tensors++];
    if (parse_tensor(t, e, what, err) != 0) return -1;
  }
  return 0;
}

// Sort by (begin, end) as the reference does; header order breaks ties so the
// error for a pair of identical offsets is reproducible.
typedef struct {
  SafetensorsTensor t;
  int order;
} SortItem;

static int compare_offsets(const void *a, const void *b) {
  const SortItem *x = a, *y = b;
  if (x->t.begin != y->t.begin) return x->t.begin < y->t.begin ? -1 : 1;
  if (x->t.end != y->t.end) return x->t.end < y->t.end ? -1 : 1;
  return x->order - y->order;
}

static int sort_by_offset(SafetensorsFile *file, const char *what, FimiError *err) {
  int n = file->num_tensors;
  if (n < 2) return 0;
  SortItem *items = malloc((size_t)n * sizeof *items);
  if (!items) return fimi_fail(err, "%s: out of memory sorting tensors", what);
  for (int i = 0; i < n; i++) items[i] = (SortItem){file->tensors[i], i};
  qsort(items, (size_t)n, sizeof *items, compare_offsets);
  for (int i = 0; i < n; i++) file->tensors[i] = items[i].t;
  free(items);
  return 0;
}

// Metadata::validate: contiguous offsets from 0, sizes that match dtype and
// shape without overflow. Returns 0 and the end of the last tensor in *end.
static int validate_layout(const SafetensorsFile *file, const char *what, uint64_t *end, FimiError *err) {
  uint64_t start = 0;
  for (int i = 0; i < file->num_tensors; i++) {
    const SafetensorsTensor *t = &file->tensors[i];
    char shape[256];
    format_shape(shape, sizeof shape, t);
    if (t->end < t->begin)
      return fimi_fail(err, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before they begin (InvalidOffset)", what,
                       t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->begin != start)
      return fimi_fail(err, "%s: tensor \"%s\": data_offsets begin at %llu but the %s ends at %llu: %s (InvalidOffset)",
                       what, t->name, (unsigned long long)t->begin, i ? "previous tensor" : "data section start",
                       (unsigned long long)start, t->begin > start ? "a gap" : "an overlap");
    start = t->end;
    uint64_t elements = 1;
    for (int d = 0; d < t->ndim; d++) {
      uint64_t dim = (uint64_t)t->shape[d];
      if (dim != 0 && elements > UINT64_MAX / dim)
        return fimi_fail(err, "%s: tensor \"%s\": shape %s overflows the element count (ValidationOverflow)", what,
                         t->name, shape);
      elements *= dim;
    }
    uint64_t bits_per = (uint64_t)dtype_bits(t);
    if (elements > UINT64_MAX / bits_per)
      return fimi_fail(err, "%s: tensor \"%s\": shape %s of %s overflows the byte count (ValidationOverflow)", what,
                       t->name, shape, t->dtype_name);
    uint64_t bits = elements * bits_per;
    if (bits % 8 != 0)
      return fimi_fail(err, "%s: tensor \"%s\": dtype %s with shape %s is %llu bits, not whole bytes (MisalignedSlice)",
                       what, t->name, t->dtype_name, shape, (unsigned long long)bits);
    if (t->end - t->begin != bits / 8)
      return fimi_fail(err,
                       "%s: tensor \"%s\": data_offsets [%llu, %llu] do not match dtype %s and shape %s (%llu bytes) "
                       "(TensorInvalidInfo)",
                       what, t->name, (unsigned long long)t->begin, (unsigned long long)t->end, t->dtype_name, shape,
                       (unsigned long long)(bits / 8));
  }
  *end = start;
  return 0;
}

// ----------------------------------------------------------------------------
// reader entry points

// Checks the 8-byte length and the header text; on success *header_len is n.
static int check_framing(const unsigned char *bytes, size_t size, const char *what, uint64_t *header_len,
                         FimiError *err) {
  if (size < 8)
    return fimi_fail(err, "%s: %zu bytes is shorter than the 8-byte header length (HeaderTooSmall)", what, size);
  uint64_t n = read_le64(bytes);
  if (n > SAFETENSORS_MAX_HEADER)
    return fimi_fail(err, "%s: header length %llu exceeds the limit of %u bytes (HeaderTooLarge)", what,
                     (unsigned long long)n, SAFETENSORS_MAX_HEADER);
  if (n > size - 8)
    return fimi_fail(err, "%s: header length %llu runs past the end of the %zu-byte file (InvalidHeaderLength)", what,
                     (unsigned long long)n, size);
  const unsigned char *header = bytes + 8;
  size_t bad = utf8_first_invalid(header, (size_t)n);
  if (bad != n) return fimi_fail(err, "%s: header is not valid UTF-8 at byte %zu (InvalidHeader)", what, bad);
  // Leading JSON whitespace is allowed (writers may pad the header), as in the reference.
  size_t first = 0;
  while (first < n && is_json_space(header[first])) first++;
  if (first == n || header[first] != '{')
    return fimi_fail(err, "%s: header must be a JSON object starting with '{' (InvalidHeaderStart)", what);
  bad = json_first_control_char(header, (size_t)n);
  if (bad != n)
    return fimi_fail(err, "%s: header has a raw control character at byte %zu (InvalidHeaderDeserialization)", what,
                     bad);
  *header_len = n;
  return 0;
}

static cJSON *parse_header_json(const unsigned char *header, size_t n, const char *what, FimiError *err) {
  // A NUL-terminated copy keeps cJSON from looking past the header.
  char *text = malloc(n + 1);
  if (!text) {
    fimi_fail(err, "%s: out of memory for a %zu-byte header", what, n);
    return NULL;
  }
  memcpy(text, header, n);
  text[n] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
  size_t stop = end ? (size_t)(end - text) : 0;
  while (root && stop < n && is_json_space((unsigned char)text[stop])) stop++;
  free(text);
  if (!root || stop != n || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    fimi_fail(err, "%s: header is not a valid JSON object (error near byte %zu) (InvalidHeaderDeserialization)", what,
              stop);
    return NULL;
  }
  return root;
}

int safetensors_parse(SafetensorsFile *file, const unsigned char *bytes, size_t size, const char *what,
                      FimiError *err) {
  memset(file, 0, sizeof *file);
  snprintf(file->path, sizeof file->path, "%s", what);
  uint64_t n = 0;
  if (check_framing(bytes, size, what, &n, err) != 0) return -1;
  cJSON *root = parse_header_json(bytes + 8, (size_t)n, what, err);
  if (!root) return -1;
  int rc = parse_entries(file, root, what, err);
  cJSON_Delete(root);
  uint64_t end = 0;
  if (rc == 0) rc = sort_by_offset(file, what, err);
  if (rc == 0) rc = validate_layout(file, what, &end, err);
  uint64_t data_size = (uint64_t)size - 8 - n;
  if (rc == 0 && end != data_size)
    rc = fimi_fail(err, "%s: tensors cover %llu bytes but the data section holds %llu (MetadataIncompleteBuffer)",
                   what, (unsigned long long)end, (unsigned long long)data_size);
  if (rc != 0) {
    safetensors_close(file);
    return -1;
  }
  file->data = (unsigned char *)bytes + 8 + n;
  file->data_size = data_size;
  return 0;
}

int safetensors_open(SafetensorsFile *file, const char *path, FimiError *err) {
  memset(file, 0, sizeof *file);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return fimi_fail(err, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fimi_fail(err, "%s: not a regular file", path);
  }
  size_t size = (size_t)st.st_size;
  void *map = NULL;
  if (size > 0) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return fimi_fail(err, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
    }
  }
  close(fd);  // the mapping stays valid without the descriptor
  static const unsigned char empty[1] = {0};
  if (safetensors_parse(file, map ? map : empty, size, path, err) != 0) {
    if (map) munmap(map, size);
    return -1;
  }
  file->mapping = map;
  file->mapping_size = size;
  return 0;
}

void safetensors_close(SafetensorsFile *file) {
  if (!file) return;
  for (int i = 0; i < file->num_tensors; i++) free(file->tensors[i].name);
  free(file->tensors);
  cJSON_free(file->metadata_json);
  if (file->mapping) munmap(file->mapping, file->mapping_size);
  memset(file, 0, sizeof *file);
}

const SafetensorsTensor *safetensors_find(const SafetensorsFile *file, const char *name) {
  for (int i = 0; i < file->num_tensors; i++)
    if (strcmp(file->tensors[i].name, name) == 0) return &file->tensors[i];
  return NULL;
}

int safetensors_read_f32(const SafetensorsFile *file, const SafetensorsTensor *tensor, float *out, size_t count,
                         FimiError *err) {
  size_t elements = 1;
  for (int d = 0; d < tensor->ndim; d++) elements *= (size_t)tensor->shape[d];
  if (count != elements)
    return fimi_fail(err, "%s: tensor \"%s\": asked for %zu values but it holds %zu", file->path, tensor->name, count,
                     elements);
  const unsigned char *src = file->data + tensor->begin;
  // Loads go through memcpy: a header whose length is not a multiple of 8
  // leaves the data unaligned.
  switch (tensor->dtype) {
    case SAFETENSORS_F32:
      if (count) memcpy(out, src, count * 4);
      return 0;
    case SAFETENSORS_BF16:
    case SAFETENSORS_F16:
      for (size_t i = 0; i < count; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        out[i] = tensor->dtype == SAFETENSORS_BF16 ? bf16_to_float(h) : f16_to_float(h);
      }
      return 0;
    default:
      return fimi_fail(err, "%s: tensor \"%s\": dtype %s cannot be read as float (need F32, BF16 or F16)", file->path,
                       tensor->name, tensor->dtype_name);
  }
}

// ----------------------------------------------------------------------------
// writer

static cJSON *raw_u64(uint64_t v) {
  // Raw text keeps large integers exact (cJSON would print a double).
  char text[32];
  snprintf(text, sizeof text, "%llu", (unsigned long long)v);
  return cJSON_CreateRaw(text);
}

static int check_write_tensor(const SafetensorsWriteTensor *t, const cJSON *root, uint64_t *elements,
                              const char *path, FimiError *err) {
  if (!t->name || !t->name[0]) return fimi_fail(err, "%s: tensor with an empty name", path);
  if (strcmp(t->name, "__metadata__") == 0) return fimi_fail(err, "%s: \"__metadata__\" is not a tensor name", path);
  if (cJSON_GetObjectItemCaseSensitive(root, t->name))
    return fimi_fail(err, "%s: duplicate tensor name \"%s\"", path, t->name);
  if (t->ndim < 0 || t->ndim > SAFETENSORS_MAX_DIMS)
    return fimi_fail(err, "%s: tensor \"%s\": %d dimensions", path, t->name, t->ndim);
  uint64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] < 0) return fimi_fail(err, "%s: tensor \"%s\": negative dimension", path, t->name);
    if (t->shape[d] != 0 && n > (UINT64_MAX / 8) / (uint64_t)t->shape[d])
      return fimi_fail(err, "%s: tensor \"%s\": shape overflows", path, t->name);
    n *= (uint64_t)t->shape[d];
  }
  if (n > 0 && !t->data) return fimi_fail(err, "%s: tensor \"%s\": no data", path, t->name);
  *elements = n;
  return 0;
}

// Builds the padded header text; *length is its size (a multiple of 8).
static char *build_header(const SafetensorsWriteTensor *tensors, int count, SafetensorsDtype dtype, size_t *length,
                          const char *path, FimiError *err) {
  size_t elem = dtype == SAFETENSORS_F32 ? 4 : 2;
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
  cJSON_AddStringToObject(meta, "format", "pt");
  uint64_t offset = 0;
  for (int i = 0; i < count; i++) {
    const SafetensorsWriteTensor *t = &tensors[i];
    uint64_t n = 0;
    if (check_write_tensor(t, root, &n, path, err) != 0) {
      cJSON_Delete(root);
      return NULL;
    }
    cJSON *entry = cJSON_AddObjectToObject(root, t->name);
    cJSON_AddStringToObject(entry, "dtype", dtype == SAFETENSORS_F32 ? "F32" : "BF16");
    cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
    for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, raw_u64((uint64_t)t->shape[d]));
    cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
    cJSON_AddItemToArray(offsets, raw_u64(offset));
    offset += n * elem;
    cJSON_AddItemToArray(offsets, raw_u64(offset));
  }
  char *json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!json) {
    fimi_fail(err, "%s: out of memory building the header", path);
    return NULL;
  }
  size_t n = strlen(json), padded = (n + 7) / 8 * 8;
  char *header = malloc(padded + 1);
  if (header) {
    memcpy(header, json, n);
    memset(header + n, ' ', padded - n);  // spaces: the data section starts 8-aligned
    header[padded] = '\0';
    *length = padded;
  } else {
    fimi_fail(err, "%s: out of memory building the header", path);
  }
  cJSON_free(json);
  return header;
}

static int write_tensor_data(FILE *f, const SafetensorsWriteTensor *t, SafetensorsDtype dtype) {
  size_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  if (n == 0) return 0;
  if (dtype == SAFETENSORS_F32) return fwrite(t->data, 4, n, f) == n ? 0 : -1;
  uint16_t chunk[8192];
  for (size_t i = 0; i < n; i += 8192) {
    size_t m = n - i < 8192 ? n - i : 8192;
    for (size_t k = 0; k < m; k++) chunk[k] = float_to_bf16(t->data[i + k]);
    if (fwrite(chunk, 2, m, f) != m) return -1;
  }
  return 0;
}

int safetensors_write(const char *path, const SafetensorsWriteTensor *tensors, int count, SafetensorsDtype dtype,
                      FimiError *err) {
  if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16)
    return fimi_fail(err, "%s: fimi writes only F32 or BF16 tensors", path);
  if (count < 0 || (count > 0 && !tensors)) return fimi_fail(err, "%s: bad tensor list", path);
  size_t header_len = 0;
  char *header = build_header(tensors, count, dtype, &header_len, path, err);
  if (!header) return -1;
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    free(header);
    return fimi_fail(err, "%s: path too long", path);
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    free(header);
    return fimi_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
  }
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
  int rc = fwrite(len, 1, 8, f) == 8 && fwrite(header, 1, header_len, f) == header_len ? 0 : -1;
  free(header);
  for (int i = 0; rc == 0 && i < count; i++) rc = write_tensor_data(f, &tensors[i], dtype);
  if (rc == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rc = -1;
  int saved = errno;
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) {
    remove(tmp);
    return fimi_fail(err, "%s: write failed: %s", tmp, strerror(saved));
  }
  if (rename(tmp, path) != 0) {
    saved = errno;
    remove(tmp);
    return fimi_fail(err, "%s: rename failed: %s", path, strerror(saved));
  }
  return 0;
}
