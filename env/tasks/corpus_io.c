// env/tasks/corpus_io.c: the corpus on disk (env/tasks/corpus.h,
// docs/corpus.md): corpus_write (one JSONL file per split and
// manifest.json) and the manifest reader, which treats the file as
// untrusted input (types, ranges and names checked, errors name the field).
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "env/tasks/corpus.h"

#define MANIFEST_MAX_BYTES (4 << 20)

// ---- writing -----------------------------------------------------------------------

typedef struct Buffer {
  char *data;
  size_t len, cap;
} Buffer;

static int buffer_append(Buffer *b, const char *text, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->len + n + 1) * 2;
    char *grown = realloc(b->data, cap);
    if (!grown) return -1;
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, text, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

// One split's JSONL bytes (every task for CORPUS_SPLIT_CORPUS).
static int split_bytes(const Corpus *c, CorpusSplit split, Buffer *out, int *tasks, FimiError *err) {
  *tasks = 0;
  for (int i = 0; i < c->count; i++) {
    if (split != CORPUS_SPLIT_CORPUS && c->tasks[i].split != split) continue;
    char *line = task_to_json_line(&c->tasks[i].task, err);
    if (!line) return -1;
    int bad = buffer_append(out, line, strlen(line)) || buffer_append(out, "\n", 1);
    free(line);
    if (bad) return fimi_fail(err, "corpus: out of memory writing %s", corpus_split_file(split));
    (*tasks)++;
  }
  return 0;
}

static cJSON *family_json(const CorpusFamily *f) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", f->name);
  cJSON_AddStringToObject(o, "use_case", task_use_case_name(f->use_case));
  cJSON_AddStringToObject(o, "kind", task_kind_name(f->kind));
  cJSON_AddBoolToObject(o, "shallow", f->shallow);
  cJSON_AddBoolToObject(o, "in_sample", f->in_sample);
  cJSON_AddNumberToObject(o, "tasks", f->tasks);
  cJSON_AddNumberToObject(o, "draws", f->draws);
  cJSON_AddBoolToObject(o, "exhausted", f->exhausted);
  for (int s = 1; s < CORPUS_SPLIT_COUNT; s++) cJSON_AddNumberToObject(o, corpus_split_name((CorpusSplit)s), f->split_tasks[s]);
  cJSON *rejected = cJSON_AddObjectToObject(o, "rejected");
  for (int g = 0; g < CORPUS_GATE_COUNT; g++)
    if (f->gate_rejected[g]) cJSON_AddNumberToObject(rejected, corpus_gate_name((CorpusGate)g), f->gate_rejected[g]);
  return o;
}

static cJSON *manifest_json(const Corpus *c, const CorpusManifestFile *files) {
  cJSON *m = cJSON_CreateObject();
  char hex[32];
  cJSON_AddStringToObject(m, "format", CORPUS_FORMAT);
  cJSON_AddNumberToObject(m, "seed", (double)c->config.seed);
  cJSON_AddNumberToObject(m, "image_seed", (double)c->config.image_seed);
  cJSON_AddNumberToObject(m, "customers", c->image_customers);
  cJSON_AddNumberToObject(m, "image_bytes", (double)c->image_bytes);
  cJSON_AddNumberToObject(m, "total_target", c->config.total);
  cJSON *fl = cJSON_AddArrayToObject(m, "files");
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "split", corpus_split_name((CorpusSplit)s));
    cJSON_AddStringToObject(f, "name", files[s].name);
    cJSON_AddNumberToObject(f, "tasks", files[s].tasks);
    cJSON_AddNumberToObject(f, "bytes", (double)files[s].bytes);
    snprintf(hex, sizeof hex, "%016" PRIx64, files[s].fnv1a64);
    cJSON_AddStringToObject(f, "fnv1a64", hex);
    cJSON_AddItemToArray(fl, f);
  }
  cJSON *gates = cJSON_AddArrayToObject(m, "gates");
  for (int g = 0; g < CORPUS_GATE_COUNT; g++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", corpus_gate_name((CorpusGate)g));
    cJSON_AddStringToObject(o, "rule", corpus_gate_rule((CorpusGate)g));
    cJSON_AddNumberToObject(o, "rejected", c->gate_rejected[g]);
    cJSON_AddBoolToObject(o, "failed", c->gate_failed[g]);
    cJSON_AddStringToObject(o, "detail", c->gate_detail[g]);
    cJSON_AddItemToArray(gates, o);
  }
  cJSON *fams = cJSON_AddArrayToObject(m, "families");
  for (int f = 0; f < c->num_families; f++) cJSON_AddItemToArray(fams, family_json(&c->families[f]));
  return m;
}

int corpus_write(const Corpus *c, const char *dir, FimiError *err) {
  if (dir_create(dir, err) != 0) return -1;
  CorpusManifestFile files[CORPUS_SPLIT_COUNT];
  memset(files, 0, sizeof files);
  char path[4096];
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    Buffer b = {0};
    int rc = split_bytes(c, (CorpusSplit)s, &b, &files[s].tasks, err);
    if (rc == 0) rc = path_join(path, sizeof path, dir, corpus_split_file((CorpusSplit)s), err);
    if (rc == 0) rc = file_write_atomic(path, b.data ? b.data : "", b.len, err);
    snprintf(files[s].name, sizeof files[s].name, "%s", corpus_split_file((CorpusSplit)s));
    files[s].bytes = (int64_t)b.len;
    files[s].fnv1a64 = corpus_fnv1a64(b.data ? b.data : "", b.len);
    free(b.data);
    if (rc != 0) return -1;
  }
  cJSON *m = manifest_json(c, files);
  char *text = m ? cJSON_Print(m) : NULL;
  cJSON_Delete(m);
  if (!text) return fimi_fail(err, "corpus: out of memory writing the manifest");
  int rc = path_join(path, sizeof path, dir, "manifest.json", err);
  if (rc == 0) rc = file_write_atomic(path, text, strlen(text), err);
  free(text);
  return rc;
}

// ---- reading -----------------------------------------------------------------------

static int read_count(const cJSON *o, const char *key, int *out, const char *what, FimiError *err) {
  int64_t v = 0;
  if (json_get_int64(o, key, 1, &v, what, err) != 0) return -1;
  if (v < 0 || v > CORPUS_MAX_TASKS * 16LL) return fimi_fail(err, "%s: %s: %lld is out of range", what, key, (long long)v);
  *out = (int)v;
  return 0;
}

static int read_flag(const cJSON *o, const char *key, int *out, const char *what, FimiError *err) {
  return json_get_bool(o, key, 1, out, what, err);
}

static int read_files(const cJSON *arr, CorpusManifest *m, const char *what, FimiError *err) {
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != CORPUS_SPLIT_COUNT)
    return fimi_fail(err, "%s: files: must be an array of %d entries", what, CORPUS_SPLIT_COUNT);
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    const cJSON *f = cJSON_GetArrayItem(arr, s);
    char field[64], split[CORPUS_NAME_MAX], hex[32];
    snprintf(field, sizeof field, "%s: files[%d]", what, s);
    CorpusManifestFile *out = &m->files[s];
    if (!cJSON_IsObject(f)) return fimi_fail(err, "%s: must be an object", field);
    if (json_get_string(f, "split", 1, split, sizeof split, field, err) ||
        json_get_string(f, "name", 1, out->name, sizeof out->name, field, err) ||
        read_count(f, "tasks", &out->tasks, field, err) || json_get_int64(f, "bytes", 1, &out->bytes, field, err) ||
        json_get_string(f, "fnv1a64", 1, hex, sizeof hex, field, err))
      return -1;
    if (strcmp(split, corpus_split_name((CorpusSplit)s)) || strcmp(out->name, corpus_split_file((CorpusSplit)s)))
      return fimi_fail(err, "%s: expected split %s in %s", field, corpus_split_name((CorpusSplit)s),
                       corpus_split_file((CorpusSplit)s));
    char *end = NULL;
    if (strlen(hex) != 16 || strspn(hex, "0123456789abcdef") != 16)
      return fimi_fail(err, "%s: fnv1a64: \"%s\" is not 16 lowercase hex digits", field, hex);
    out->fnv1a64 = strtoull(hex, &end, 16);
    if (out->bytes < 0) return fimi_fail(err, "%s: bytes: negative", field);
  }
  return 0;
}

static int read_gates(const cJSON *arr, CorpusManifest *m, const char *what, FimiError *err) {
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != CORPUS_GATE_COUNT)
    return fimi_fail(err, "%s: gates: must be an array of %d entries", what, CORPUS_GATE_COUNT);
  for (int g = 0; g < CORPUS_GATE_COUNT; g++) {
    const cJSON *o = cJSON_GetArrayItem(arr, g);
    char field[64];
    snprintf(field, sizeof field, "%s: gates[%d]", what, g);
    CorpusManifestGate *out = &m->gates[g];
    if (!cJSON_IsObject(o)) return fimi_fail(err, "%s: must be an object", field);
    if (json_get_string(o, "name", 1, out->name, sizeof out->name, field, err) ||
        read_count(o, "rejected", &out->rejected, field, err) || read_flag(o, "failed", &out->failed, field, err) ||
        json_get_string(o, "detail", 1, out->detail, sizeof out->detail, field, err))
      return -1;
    if (strcmp(out->name, corpus_gate_name((CorpusGate)g)))
      return fimi_fail(err, "%s: name: expected \"%s\"", field, corpus_gate_name((CorpusGate)g));
  }
  return 0;
}

static int read_family(const cJSON *o, CorpusFamily *f, const char *field, FimiError *err) {
  char use_case[CORPUS_NAME_MAX], kind[CORPUS_NAME_MAX];
  if (!cJSON_IsObject(o)) return fimi_fail(err, "%s: must be an object", field);
  if (json_get_string(o, "name", 1, f->name, sizeof f->name, field, err) ||
      json_get_string(o, "use_case", 1, use_case, sizeof use_case, field, err) ||
      json_get_string(o, "kind", 1, kind, sizeof kind, field, err) || read_flag(o, "shallow", &f->shallow, field, err) ||
      read_flag(o, "in_sample", &f->in_sample, field, err) || read_count(o, "tasks", &f->tasks, field, err) ||
      read_count(o, "draws", &f->draws, field, err) || read_flag(o, "exhausted", &f->exhausted, field, err))
    return -1;
  int u = task_use_case_from_name(use_case), k = task_kind_from_name(kind);
  if (u < 0) return fimi_fail(err, "%s: use_case: unknown \"%s\"", field, use_case);
  if (k < 0) return fimi_fail(err, "%s: kind: unknown \"%s\"", field, kind);
  f->use_case = (TaskUseCase)u;
  f->kind = (TaskKind)k;
  for (int s = 1; s < CORPUS_SPLIT_COUNT; s++)
    if (read_count(o, corpus_split_name((CorpusSplit)s), &f->split_tasks[s], field, err)) return -1;
  const cJSON *rejected = cJSON_GetObjectItemCaseSensitive(o, "rejected");
  if (!cJSON_IsObject(rejected)) return fimi_fail(err, "%s: rejected: must be an object", field);
  for (const cJSON *r = rejected->child; r; r = r->next) {
    int g = 0;
    while (g < CORPUS_GATE_COUNT && strcmp(r->string, corpus_gate_name((CorpusGate)g))) g++;
    if (g == CORPUS_GATE_COUNT) return fimi_fail(err, "%s: rejected: unknown gate \"%.64s\"", field, r->string);
    if (read_count(rejected, r->string, &f->gate_rejected[g], field, err)) return -1;
  }
  return 0;
}

int corpus_manifest_parse(const char *text, size_t len, const char *what, CorpusManifest *m, FimiError *err) {
  memset(m, 0, sizeof *m);
  cJSON *root = json_parse_text(text, len, what, err);
  if (!root) return -1;
  char format[CORPUS_NAME_MAX];
  int64_t seed = 0, image_seed = 0, customers = 0;
  int rc = cJSON_IsObject(root) ? 0 : fimi_fail(err, "%s: must be a JSON object", what);
  if (rc == 0) rc = json_get_string(root, "format", 1, format, sizeof format, what, err);
  if (rc == 0 && strcmp(format, CORPUS_FORMAT)) rc = fimi_fail(err, "%s: format: expected \"%s\"", what, CORPUS_FORMAT);
  if (rc == 0) rc = json_get_int64(root, "seed", 1, &seed, what, err);
  if (rc == 0) rc = json_get_int64(root, "image_seed", 1, &image_seed, what, err);
  if (rc == 0) rc = json_get_int64(root, "customers", 1, &customers, what, err);
  if (rc == 0) rc = json_get_int64(root, "image_bytes", 1, &m->image_bytes, what, err);
  if (rc == 0) rc = read_count(root, "total_target", &m->total_target, what, err);
  if (rc == 0 && (seed < 0 || image_seed < 0 || customers < 1 || customers > BANK_MAX_CUSTOMERS || m->image_bytes < 0))
    rc = fimi_fail(err, "%s: seed, image_seed, customers or image_bytes out of range", what);
  if (rc == 0 && bank_image_seed_customers((uint64_t)image_seed) != customers)
    rc = fimi_fail(err, "%s: customers: %lld, but image_seed names %lld", what, (long long)customers,
                   (long long)bank_image_seed_customers((uint64_t)image_seed));
  m->seed = (uint64_t)seed;
  m->image_seed = (uint64_t)image_seed;
  m->customers = (int)customers;
  if (rc == 0) rc = read_files(cJSON_GetObjectItemCaseSensitive(root, "files"), m, what, err);
  if (rc == 0) rc = read_gates(cJSON_GetObjectItemCaseSensitive(root, "gates"), m, what, err);
  const cJSON *fams = cJSON_GetObjectItemCaseSensitive(root, "families");
  if (rc == 0 && (!cJSON_IsArray(fams) || cJSON_GetArraySize(fams) > CORPUS_MAX_FAMILIES))
    rc = fimi_fail(err, "%s: families: must be an array of at most %d entries", what, CORPUS_MAX_FAMILIES);
  for (int f = 0; rc == 0 && f < cJSON_GetArraySize(fams); f++) {
    char field[64];
    snprintf(field, sizeof field, "%s: families[%d]", what, f);
    rc = read_family(cJSON_GetArrayItem(fams, f), &m->families[f], field, err);
    m->num_families = f + 1;
  }
  cJSON_Delete(root);
  return rc;
}

int corpus_manifest_load(const char *dir, CorpusManifest *m, FimiError *err) {
  char path[4096];
  size_t size = 0;
  if (path_join(path, sizeof path, dir, "manifest.json", err) != 0) return -1;
  char *text = file_read_all(path, MANIFEST_MAX_BYTES, &size, err);
  if (!text) return -1;
  int rc = corpus_manifest_parse(text, size, path, m, err);
  free(text);
  for (int s = 0; rc == 0 && s < CORPUS_SPLIT_COUNT; s++) {
    if (path_join(path, sizeof path, dir, m->files[s].name, err) != 0) return -1;
    char *data = file_read_all(path, (size_t)1 << 31, &size, err);
    if (!data) return -1;
    uint64_t h = corpus_fnv1a64(data, size);
    free(data);
    if ((int64_t)size != m->files[s].bytes || h != m->files[s].fnv1a64)
      rc = fimi_fail(err, "%s: %zu bytes, FNV-1a 64 %016" PRIx64 "; the manifest says %lld bytes, %016" PRIx64
                     " (the file changed after the build)",
                     path, size, h, (long long)m->files[s].bytes, m->files[s].fnv1a64);
  }
  return rc;
}
