// model/weights.c: Gemma checkpoints in Hugging Face layout (see weights.h).
// Defines gemma_save_pretrained and gemma_load_pretrained.
//
// Layout as transformers' save_pretrained writes it: config.json, then either
// model.safetensors or shards model-0000i-of-0000N.safetensors plus
// model.safetensors.index.json {"metadata": {"total_parameters", "total_size"},
// "weight_map": {name: file}} with sorted keys. Shards are filled in tensor
// order and a new one starts when the next tensor would pass the limit (a
// tensor larger than the limit gets a shard of its own), as huggingface_hub's
// split_state_dict_into_shards does.
//
// Loading follows transformers too: model.safetensors if present, else the
// index. Every tensor of the model must be found once with its shape; any
// other name is an error, except a tied "lm_head.weight" and, for a
// multimodal "gemma3" config.json, the vision tower (skipped) and the
// language-model prefixes (mapped to the text model's names).
#define _POSIX_C_SOURCE 200809L  // access
#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/json.h"

#define SINGLE_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"
#define INDEX_MAX_BYTES (64u << 20)
#define PATH_MAX_LEN 4096

static size_t dtype_size(SafetensorsDtype dtype) { return dtype == SAFETENSORS_F32 ? 4 : 2; }

// ----------------------------------------------------------------------------
// saving

// shard_of[i] = the shard of tensor i; returns the number of shards.
static int plan_shards(const GemmaModel *model, size_t elem, size_t max_bytes, int *shard_of) {
  int shard = 0, in_shard = 0;
  size_t used = 0;
  for (int i = 0; i < model->num_tensors; i++) {
    size_t bytes = model->tensors[i].numel * elem;
    if (max_bytes > 0 && in_shard > 0 && used + bytes > max_bytes) {
      shard++;
      in_shard = 0;
      used = 0;
    }
    shard_of[i] = shard;
    in_shard++;
    used += bytes;
  }
  return model->num_tensors > 0 ? shard + 1 : 1;
}

static void shard_name(char *out, size_t size, int shard, int count) {
  if (count == 1) snprintf(out, size, SINGLE_FILE);
  else snprintf(out, size, "model-%05d-of-%05d.safetensors", shard + 1, count);
}

static int compare_names(const void *a, const void *b) {
  return strcmp((*(const GemmaTensor *const *)a)->name, (*(const GemmaTensor *const *)b)->name);
}

static int write_index(const GemmaModel *model, const char *dir, const int *shard_of, int shards, size_t elem,
                       FimiError *err) {
  int n = model->num_tensors;
  const GemmaTensor **sorted = fimi_malloc((size_t)n * sizeof *sorted, err);
  if (!sorted) return -1;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    sorted[i] = &model->tensors[i];
    total += model->tensors[i].numel * elem;
  }
  qsort(sorted, (size_t)n, sizeof *sorted, compare_names);  // transformers dumps with sort_keys
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
  cJSON_AddNumberToObject(meta, "total_parameters", (double)gemma_config_param_count(&model->config));
  cJSON_AddNumberToObject(meta, "total_size", (double)total);
  cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
  for (int i = 0; i < n; i++) {
    char file[64];
    shard_name(file, sizeof file, shard_of[sorted[i] - model->tensors], shards);
    cJSON_AddStringToObject(map, sorted[i]->name, file);
  }
  free(sorted);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  char path[PATH_MAX_LEN];
  int rc = text ? path_join(path, sizeof path, dir, INDEX_FILE, err) : fimi_fail(err, "out of memory");
  if (rc == 0) rc = file_write_atomic(path, text, strlen(text), err);
  cJSON_free(text);
  return rc;
}

static int write_shard(const GemmaModel *model, const char *dir, const int *shard_of, int shard, int shards,
                       SafetensorsDtype dtype, FimiError *err) {
  SafetensorsWriteTensor *list = fimi_calloc((size_t)model->num_tensors, sizeof *list, err);
  if (!list) return -1;
  int count = 0;
  for (int i = 0; i < model->num_tensors; i++) {
    if (shard_of[i] != shard) continue;
    const GemmaTensor *t = &model->tensors[i];
    SafetensorsWriteTensor *w = &list[count++];
    w->name = t->name;
    w->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) w->shape[d] = t->shape[d];
    // gemma_tensor_data only computes an address; the const is dropped, not broken.
    w->data = gemma_tensor_data((GemmaModel *)model, t);
  }
  char name[64], path[PATH_MAX_LEN];
  shard_name(name, sizeof name, shard, shards);
  int rc = path_join(path, sizeof path, dir, name, err);
  if (rc == 0) rc = safetensors_write(path, list, count, dtype, err);
  free(list);
  return rc;
}

// The other layout's leftovers would shadow or contradict what was just written.
static void remove_stale(const char *dir, int sharded) {
  char path[PATH_MAX_LEN];
  if (path_join(path, sizeof path, dir, sharded ? SINGLE_FILE : INDEX_FILE, NULL) == 0) remove(path);
}

static int write_config(const GemmaModel *model, const char *dir, SafetensorsDtype dtype, FimiError *err) {
  char *json = gemma_config_to_json_dtype(&model->config, dtype == SAFETENSORS_F32 ? "float32" : "bfloat16", err);
  if (!json) return -1;
  char path[PATH_MAX_LEN];
  int rc = path_join(path, sizeof path, dir, "config.json", err);
  if (rc == 0) rc = file_write_atomic(path, json, strlen(json), err);
  free(json);
  return rc;
}

int gemma_save_pretrained(const GemmaModel *model, const char *dir, SafetensorsDtype dtype, size_t max_shard_bytes,
                          FimiError *err) {
  if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16)
    return fimi_fail(err, "%s: checkpoints are written as F32 or BF16", dir);
  if (dir_create(dir, err) != 0 || write_config(model, dir, dtype, err) != 0) return -1;
  int *shard_of = fimi_calloc((size_t)model->num_tensors + 1, sizeof(int), err);
  if (!shard_of) return -1;
  int shards = plan_shards(model, dtype_size(dtype), max_shard_bytes, shard_of);
  int rc = 0;
  for (int s = 0; rc == 0 && s < shards; s++) rc = write_shard(model, dir, shard_of, s, shards, dtype, err);
  if (rc == 0 && shards > 1) rc = write_index(model, dir, shard_of, shards, dtype_size(dtype), err);
  free(shard_of);
  if (rc != 0) return fimi_fail_wrap(err, "saving checkpoint %s", dir);
  remove_stale(dir, shards > 1);
  return 0;
}

// ----------------------------------------------------------------------------
// loading

typedef struct {
  GemmaModel *model;
  unsigned char *loaded;  // (num_tensors) 1 once a tensor has been read
  const cJSON *weight_map;  // NULL for a single file
  int seen;                 // tensors met in the files, tied head included
  int multimodal;           // config.json is the "gemma3" wrapper
} LoadState;

// A multimodal gemma3 checkpoint keeps the language model under a prefix
// (transformers 4.50: language_model.model.*, later: model.language_model.*)
// next to a vision tower and projector that a text model does not use.
static const char *const TEXT_PREFIXES[][2] = {
    {"language_model.model.", "model."}, {"model.language_model.", "model."}, {"language_model.lm_head.", "lm_head."}};
static const char *const VISION_PREFIXES[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                              "model.multi_modal_projector.", "model.audio_tower.",
                                              "model.embed_vision.", "model.embed_audio.", NULL};

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

// The text-model name of a checkpoint tensor; NULL for a vision tensor to skip.
static const char *text_model_name(const LoadState *s, const char *name, char *buf, size_t size) {
  if (!s->multimodal) return name;
  for (const char *const *v = VISION_PREFIXES; *v; v++)
    if (starts_with(name, *v)) return NULL;
  for (size_t i = 0; i < sizeof TEXT_PREFIXES / sizeof TEXT_PREFIXES[0]; i++)
    if (starts_with(name, TEXT_PREFIXES[i][0])) {
      snprintf(buf, size, "%s%s", TEXT_PREFIXES[i][1], name + strlen(TEXT_PREFIXES[i][0]));
      return buf;
    }
  return name;
}

static int tensor_index(const GemmaModel *model, const char *name) {
  for (int i = 0; i < model->num_tensors; i++)
    if (strcmp(model->tensors[i].name, name) == 0) return i;
  return -1;
}

static int same_shape(const SafetensorsTensor *st, int ndim, const int64_t *shape) {
  if (st->ndim != ndim) return 0;
  for (int d = 0; d < ndim; d++)
    if (st->shape[d] != shape[d]) return 0;
  return 1;
}

static void shape_text(char *out, size_t size, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(out, size, "[");
  for (int d = 0; d < ndim && used < size; d++)
    used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (used < size) snprintf(out + used, size - used, "]");
}

// A tied checkpoint may still carry the head; it must be shaped like the embedding.
static int is_tied_head(const GemmaModel *model, const SafetensorsTensor *st, const char *name) {
  const GemmaConfig *c = &model->config;
  int64_t shape[2] = {c->vocab_size, c->hidden_size};
  return strcmp(name, "lm_head.weight") == 0 && same_shape(st, 2, shape);
}

// Gemma 4 checkpoints may carry k/v projections and norms for kv-shared
// layers, which never use them (transformers ignores them on load too).
static int is_unused_shared_kv(const GemmaModel *model, const char *name) {
  const GemmaConfig *c = &model->config;
  int layer = -1, used = 0;
  if (c->family != GEMMA_FAMILY_GEMMA4 || sscanf(name, "model.layers.%d.self_attn.%n", &layer, &used) != 1 || !used)
    return 0;
  if (layer < c->num_hidden_layers - c->num_kv_shared_layers || layer >= c->num_hidden_layers) return 0;
  const char *rest = name + used;
  return !strcmp(rest, "k_proj.weight") || !strcmp(rest, "v_proj.weight") || !strcmp(rest, "k_norm.weight") ||
         !strcmp(rest, "v_norm.weight");
}

static int load_tensor(LoadState *s, const SafetensorsFile *file, const SafetensorsTensor *st, const char *file_name,
                       FimiError *err) {
  if (s->weight_map) {
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(s->weight_map, st->name);
    if (!cJSON_IsString(entry) || strcmp(entry->valuestring, file_name) != 0)
      return fimi_fail(err, "%s: tensor \"%s\" is not mapped to this file in %s", file->path, st->name, INDEX_FILE);
  }
  s->seen++;
  char mapped[256];
  const char *name = text_model_name(s, st->name, mapped, sizeof mapped);
  if (!name) return 0;
  int i = tensor_index(s->model, name);
  if (i < 0) {
    if (is_tied_head(s->model, st, name) || is_unused_shared_kv(s->model, name)) return 0;
    GemmaFamily f = s->model->config.family;
    return fimi_fail(err, "%s: unexpected tensor \"%s\" (not part of this %s model)", file->path, st->name,
                     f == GEMMA_FAMILY_GEMMA4 ? "Gemma 4" : f == GEMMA_FAMILY_GEMMA3 ? "Gemma 3" : "Gemma 2");
  }
  const GemmaTensor *t = &s->model->tensors[i];
  if (s->loaded[i]) return fimi_fail(err, "%s: tensor \"%s\" appears twice", file->path, st->name);
  if (!same_shape(st, t->ndim, t->shape)) {
    char want[64], got[64];
    shape_text(want, sizeof want, t->ndim, t->shape);
    shape_text(got, sizeof got, st->ndim, st->shape);
    return fimi_fail(err, "%s: tensor \"%s\" has shape %s, the config needs %s", file->path, st->name, got, want);
  }
  if (safetensors_read_f32(file, st, gemma_tensor_data(s->model, t), t->numel, err) != 0) return -1;
  s->loaded[i] = 1;
  return 0;
}

static int load_file(LoadState *s, const char *dir, const char *file_name, FimiError *err) {
  char path[PATH_MAX_LEN];
  if (path_join(path, sizeof path, dir, file_name, err) != 0) return -1;
  SafetensorsFile file;
  if (safetensors_open(&file, path, err) != 0) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < file.num_tensors; i++) rc = load_tensor(s, &file, &file.tensors[i], file_name, err);
  safetensors_close(&file);
  return rc;
}

// Shard names come from an untrusted index: plain file names only, no paths.
static int check_shard_name(const char *name, const char *index_path, FimiError *err) {
  if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return fimi_fail(err, "%s: weight_map names \"%s\", which is not a file name in the checkpoint", index_path, name);
  return 0;
}

static int load_sharded(LoadState *s, const char *dir, FimiError *err) {
  char path[PATH_MAX_LEN];
  if (path_join(path, sizeof path, dir, INDEX_FILE, err) != 0) return -1;
  cJSON *index = json_parse_file(path, INDEX_MAX_BYTES, err);
  if (!index) return -1;
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
  int rc = cJSON_IsObject(map) ? 0 : fimi_fail(err, "%s: missing object \"weight_map\"", path);
  int listed = 0;
  for (const cJSON *e = map ? map->child : NULL; rc == 0 && e; e = e->next, listed++) {
    if (!cJSON_IsString(e)) rc = fimi_fail(err, "%s: weight_map[\"%s\"] must be a file name", path, e->string);
    else rc = check_shard_name(e->valuestring, path, err);
    for (const cJSON *p = map->child; rc == 0 && p != e; p = p->next)
      if (strcmp(p->string, e->string) == 0) rc = fimi_fail(err, "%s: weight_map lists \"%s\" twice", path, e->string);
  }
  s->weight_map = map;
  // Each distinct file once, in order of first mention.
  for (const cJSON *e = map ? map->child : NULL; rc == 0 && e; e = e->next) {
    int done = 0;
    for (const cJSON *p = map->child; p != e && !done; p = p->next) done = strcmp(p->valuestring, e->valuestring) == 0;
    if (!done) rc = load_file(s, dir, e->valuestring, err);
  }
  // Names listed in the index but absent from their shard.
  for (const cJSON *e = map ? map->child : NULL; rc == 0 && e; e = e->next) {
    int i = tensor_index(s->model, e->string);
    if (i >= 0 && !s->loaded[i])
      rc = fimi_fail(err, "%s: tensor \"%s\" is listed but missing from %s", path, e->string, e->valuestring);
  }
  if (rc == 0 && s->seen != listed)
    rc = fimi_fail(err, "%s: weight_map lists %d tensors but the shards hold %d", path, listed, s->seen);
  s->weight_map = NULL;
  cJSON_Delete(index);
  return rc;
}

static int check_complete(const LoadState *s, const char *dir, FimiError *err) {
  for (int i = 0; i < s->model->num_tensors; i++)
    if (!s->loaded[i]) return fimi_fail(err, "%s: missing tensor \"%s\"", dir, s->model->tensors[i].name);
  return 0;
}

// True when dir/config.json is the multimodal "gemma3" wrapper (already
// validated by gemma_config_load_json).
static int is_multimodal(const char *config_path) {
  cJSON *root = json_parse_file(config_path, 16u << 20, NULL);
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  int yes = cJSON_IsString(type) && (strcmp(type->valuestring, "gemma3") == 0 || strcmp(type->valuestring, "gemma4") == 0);
  cJSON_Delete(root);
  return yes;
}

static int file_exists(const char *dir, const char *name) {
  char path[PATH_MAX_LEN];
  return path_join(path, sizeof path, dir, name, NULL) == 0 && access(path, F_OK) == 0;
}

int gemma_load_pretrained(GemmaModel *model, const char *dir, FimiError *err) {
  memset(model, 0, sizeof *model);
  char path[PATH_MAX_LEN];
  GemmaConfig cfg;
  if (path_join(path, sizeof path, dir, "config.json", err) != 0) return -1;
  if (gemma_config_load_json(&cfg, path, err) != 0) return -1;
  if (gemma_model_create(model, &cfg, err) != 0) return -1;
  LoadState s = {model, fimi_calloc((size_t)model->num_tensors, 1, err), NULL, 0, is_multimodal(path)};
  int rc = s.loaded ? 0 : -1;
  // transformers looks for the single file first, then the index.
  if (rc == 0 && file_exists(dir, SINGLE_FILE)) rc = load_file(&s, dir, SINGLE_FILE, err);
  else if (rc == 0 && file_exists(dir, INDEX_FILE)) rc = load_sharded(&s, dir, err);
  else if (rc == 0) rc = fimi_fail(err, "%s: no %s or %s", dir, SINGLE_FILE, INDEX_FILE);
  if (rc == 0) rc = check_complete(&s, dir, err);
  free(s.loaded);
  if (rc != 0) {
    gemma_model_free(model);
    return fimi_fail_wrap(err, "loading checkpoint %s", dir);
  }
  return 0;
}
