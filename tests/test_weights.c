// tests/test_weights.c: Gemma checkpoints in Hugging Face layout. Saves the
// tiny model and reloads it bitwise (F32), rounded (BF16) and sharded with an
// index; accepts a stray tied lm_head; refuses unexpected, missing and
// mis-shaped tensors and a broken index.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "model/weights.h"
#include "tests/test_util.h"

static char tmp_root[512];

static void make_dir(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", tmp_root, name);
  FimiError err = {0};
  dir_create(out, &err);
}

static int file_exists(const char *dir, const char *name) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

// N of the model-0000i-of-0000N.safetensors files in dir, 0 if none.
static int count_shards(const char *dir) {
  for (int n = 2; n < 100; n++) {
    char shard[64];
    snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", n, n);
    if (file_exists(dir, shard)) return n;
  }
  return 0;
}

static int create_tiny(GemmaModel *m, const char *preset, uint64_t seed) {
  GemmaConfig cfg;
  FimiError err = {0};
  if (gemma_config_preset(&cfg, preset, &err) != 0 || gemma_model_create(m, &cfg, &err) != 0) {
    CHECK(0, "create %s: %s", preset, err.message);
    return -1;
  }
  gemma_model_init_random(m, seed);
  // Norm weights start at 0; give them values so a mix-up would show.
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    float *p = gemma_tensor_data(m, t);
    if (t->is_norm)
      for (size_t k = 0; k < t->numel; k++) p[k] = 0.001f * (float)(i + 1) * (float)((k % 7) + 1);
  }
  return 0;
}

// Bitwise (round = 0) or against the bf16 rounding of a (round = 1).
static void expect_equal(GemmaModel *a, GemmaModel *b, int round, const char *label) {
  CHECK(a->num_tensors == b->num_tensors, "%s: tensor counts %d vs %d", label, a->num_tensors, b->num_tensors);
  long mismatches = 0;
  for (int i = 0; i < a->num_tensors && i < b->num_tensors; i++) {
    const GemmaTensor *t = &a->tensors[i];
    const float *x = gemma_tensor_data(a, t), *y = gemma_tensor_data(b, &b->tensors[i]);
    for (size_t k = 0; k < t->numel; k++) {
      float want = round ? bf16_to_float(float_to_bf16(x[k])) : x[k];
      if (memcmp(&want, &y[k], 4) != 0) mismatches++;
    }
  }
  CHECK(mismatches == 0, "%s: %ld values differ", label, mismatches);
}

static void test_round_trip(const char *preset, SafetensorsDtype dtype, size_t shard_bytes, const char *name) {
  GemmaModel a, b;
  if (create_tiny(&a, preset, 1234) != 0) return;
  char dir[1024];
  make_dir(dir, sizeof dir, name);
  FimiError err = {0};
  CHECK(gemma_save_pretrained(&a, dir, dtype, shard_bytes, &err) == 0, "%s: save: %s", name, err.message);
  CHECK(file_exists(dir, "config.json"), "%s: config.json", name);
  if (shard_bytes) {
    CHECK(file_exists(dir, "model.safetensors.index.json") && !file_exists(dir, "model.safetensors"),
          "%s: sharded layout", name);
    int shards = count_shards(dir);
    CHECK(shards >= 3, "%s: expected several model-0000i-of-0000N shards, found %d", name, shards);
  } else {
    CHECK(file_exists(dir, "model.safetensors"), "%s: single file", name);
  }
  if (gemma_load_pretrained(&b, dir, &err) != 0) {
    CHECK(0, "%s: load: %s", name, err.message);
  } else {
    CHECK(b.config.family == a.config.family && b.config.vocab_size == a.config.vocab_size, "%s: config", name);
    expect_equal(&a, &b, dtype == SAFETENSORS_BF16, name);
    gemma_model_free(&b);
  }
  gemma_model_free(&a);
}

// Writes config.json plus a model.safetensors holding the model's tensors,
// optionally skipping one, renaming one, reshaping one or adding extras.
typedef struct {
  const char *skip;
  const char *extra_name;
  int extra_rows, extra_cols;
  int transpose_first_matrix;
} Variant;

static int write_variant(GemmaModel *m, const char *dir, const Variant *v, FimiError *err) {
  if (gemma_save_pretrained(m, dir, SAFETENSORS_F32, 0, err) != 0) return -1;
  SafetensorsWriteTensor *list = calloc((size_t)m->num_tensors + 1, sizeof *list);
  int n = 0, transposed = 0;
  for (int i = 0; i < m->num_tensors; i++) {
    const GemmaTensor *t = &m->tensors[i];
    if (v->skip && strcmp(t->name, v->skip) == 0) continue;
    SafetensorsWriteTensor *w = &list[n++];
    w->name = t->name;
    w->ndim = t->ndim;
    w->shape[0] = t->shape[0];
    w->shape[1] = t->shape[1];
    if (v->transpose_first_matrix && !transposed && t->ndim == 2 && t->layer == 0 && t->shape[0] != t->shape[1]) {
      w->shape[0] = t->shape[1];
      w->shape[1] = t->shape[0];
      transposed = 1;
    }
    w->data = gemma_tensor_data(m, t);
  }
  float *extra = NULL;
  if (v->extra_name) {
    extra = calloc((size_t)v->extra_rows * (size_t)v->extra_cols, sizeof(float));
    list[n++] = (SafetensorsWriteTensor){v->extra_name, 2, {v->extra_rows, v->extra_cols}, extra};
  }
  char path[2048];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  int rc = safetensors_write(path, list, n, SAFETENSORS_F32, err);
  free(extra);
  free(list);
  return rc;
}

static void test_variants(void) {
  GemmaModel a, b;
  if (create_tiny(&a, "tiny", 99) != 0) return;
  const GemmaConfig *c = &a.config;
  char dir[1024];
  FimiError err = {0};

  make_dir(dir, sizeof dir, "tied");
  Variant tied = {.extra_name = "lm_head.weight", .extra_rows = c->vocab_size, .extra_cols = c->hidden_size};
  write_variant(&a, dir, &tied, &err);
  CHECK(gemma_load_pretrained(&b, dir, &err) == 0, "tied lm_head refused: %s", err.message);
  if (!err.failed) {
    expect_equal(&a, &b, 0, "tied");
    gemma_model_free(&b);
  }

  struct {
    const char *label;
    Variant v;
    const char *needle;
  } bad[] = {
      {"wrong head shape", {.extra_name = "lm_head.weight", .extra_rows = 3, .extra_cols = c->hidden_size}, "lm_head"},
      {"unexpected", {.extra_name = "model.layers.9.mlp.up_proj.weight", .extra_rows = 2, .extra_cols = 2},
       "unexpected tensor \"model.layers.9.mlp.up_proj.weight\""},
      {"missing", {.skip = "model.layers.2.self_attn.k_norm.weight"}, "missing tensor \"model.layers.2.self_attn.k_norm"},
      {"shape", {.transpose_first_matrix = 1}, "has shape"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fimi_error_clear(&err);
    make_dir(dir, sizeof dir, bad[i].label);
    write_variant(&a, dir, &bad[i].v, &err);
    int rc = gemma_load_pretrained(&b, dir, &err);
    CHECK(rc == -1, "%s: accepted", bad[i].label);
    if (rc == -1) CHECK(strstr(err.message, bad[i].needle) != NULL, "%s: %s", bad[i].label, err.message);
    else gemma_model_free(&b);
  }

  // An index that points outside the checkpoint, or lists a tensor no shard holds.
  make_dir(dir, sizeof dir, "badindex");
  gemma_save_pretrained(&a, dir, SAFETENSORS_F32, 100000, &err);
  char path[2048];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  const char *escape = "{\"weight_map\":{\"model.norm.weight\":\"../x.safetensors\"}}";
  file_write_atomic(path, escape, strlen(escape), &err);
  CHECK(gemma_load_pretrained(&b, dir, &err) == -1 && strstr(err.message, "../x.safetensors"), "index escape: %s",
        err.message);
  char ghost[256];
  snprintf(ghost, sizeof ghost, "{\"weight_map\":{\"model.norm.weight\":\"model-00001-of-%05d.safetensors\"}}",
           count_shards(dir));
  file_write_atomic(path, ghost, strlen(ghost), &err);
  CHECK(gemma_load_pretrained(&b, dir, &err) == -1 && strstr(err.message, "not mapped"), "incomplete index: %s",
        err.message);

  make_dir(dir, sizeof dir, "nothing");
  char *json = gemma_config_to_json(&a.config, &err);
  snprintf(path, sizeof path, "%s/config.json", dir);
  file_write_atomic(path, json, strlen(json), &err);
  free(json);
  CHECK(gemma_load_pretrained(&b, dir, &err) == -1 && strstr(err.message, "model.safetensors"), "no weights: %s",
        err.message);
  gemma_model_free(&a);
}

// The multimodal gemma3 layout: wrapper config.json, language model under
// "language_model.model.", a vision tower that is skipped.
static void test_multimodal(void) {
  GemmaModel a, b;
  if (create_tiny(&a, "tiny", 5) != 0) return;
  char dir[1024], path[2048];
  make_dir(dir, sizeof dir, "multimodal");
  FimiError err = {0};
  char *text = gemma_config_to_json(&a.config, &err);
  size_t n = strlen(text) + 128;
  char *wrapped = malloc(n);
  snprintf(wrapped, n, "{\"model_type\":\"gemma3\",\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"text_config\":%s}",
           text);
  snprintf(path, sizeof path, "%s/config.json", dir);
  file_write_atomic(path, wrapped, strlen(wrapped), &err);
  free(wrapped);
  free(text);
  int count = a.num_tensors + 2;
  SafetensorsWriteTensor *list = calloc((size_t)count, sizeof *list);
  char (*names)[128] = calloc((size_t)count, 128);
  float vision[4] = {1, 2, 3, 4};
  for (int i = 0; i < a.num_tensors; i++) {
    const GemmaTensor *t = &a.tensors[i];
    snprintf(names[i], 128, "language_model.%s", t->name);
    list[i] = (SafetensorsWriteTensor){names[i], t->ndim, {t->shape[0], t->shape[1]}, gemma_tensor_data(&a, t)};
  }
  list[a.num_tensors] = (SafetensorsWriteTensor){"vision_tower.vision_model.post_layernorm.weight", 1, {4}, vision};
  list[a.num_tensors + 1] = (SafetensorsWriteTensor){"multi_modal_projector.mm_input_projection_weight", 2, {2, 2}, vision};
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  CHECK(safetensors_write(path, list, count, SAFETENSORS_F32, &err) == 0, "multimodal write: %s", err.message);
  free(list);
  free(names);
  if (gemma_load_pretrained(&b, dir, &err) != 0) {
    CHECK(0, "multimodal load: %s", err.message);
  } else {
    expect_equal(&a, &b, 0, "multimodal");
    gemma_model_free(&b);
  }
  gemma_model_free(&a);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(tmp_root, sizeof tmp_root, "%s/fimi_test_weights_XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(tmp_root)) {
    fprintf(stderr, "cannot create a temp dir\n");
    return 1;
  }
  test_round_trip("tiny", SAFETENSORS_F32, 0, "f32");
  test_round_trip("tiny", SAFETENSORS_BF16, 0, "bf16");
  test_round_trip("tiny-gemma2", SAFETENSORS_F32, 0, "gemma2");
  // tiny in F32 is ~725 KB with a 131 KB embedding: a 200 KB limit gives 4-5 shards.
  test_round_trip("tiny", SAFETENSORS_F32, 200000, "sharded");
  test_variants();
  test_multimodal();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
  TEST_MAIN_END();
}
