// tests/test_checkpoint_shards.c: training checkpoints whose weights exceed
// train.max_shard_mb (TrainLoopConfig.max_shard_bytes) are written as
// model-0000i-of-0000N.safetensors plus model.safetensors.index.json, as
// transformers' save_pretrained writes them, and load back exactly:
//   - a single-process checkpoint, sharded: the index names every tensor
//     once, its total_size is the tensors' bytes, each shard is under the
//     limit (no tensor here is larger), no model.safetensors; checkpoint_load
//     restores the weights and the AdamW state bitwise;
//   - a checkpoint as a 2-rank run writes it (rank 0's model, two optimizer
//     shards): rank 1 resumes it with checkpoint_load_shard, a single
//     process is refused (naming the 2-rank run), and the model alone loads
//     at any world size (gemma_load_pretrained);
//   - max_shard_bytes 0 still writes one model.safetensors.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "model/weights.h"
#include "tests/test_util.h"
#include "train/checkpoint.h"
#include "train/state.h"

#define SHARD_BYTES 200000  // the tiny preset is ~750 kB in F32: 4 or 5 shards

typedef struct Setup {
  GemmaModel model;
  TrainState state;
} Setup;

// The tiny model from `seed`, with AdamW moments that are not zero (one
// update with a made-up gradient), so a wrong restore shows.
static int setup_open(Setup *s, uint64_t seed, FimiError *err) {
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny", err) != 0 || gemma_model_create(&s->model, &cfg, err) != 0) return -1;
  gemma_model_init_random(&s->model, seed);
  AdamWConfig ac;
  AdamWDecayRules rules;
  adamw_config_default(&ac);
  adamw_decay_rules_default(&rules);
  if (train_state_init(&s->state, &s->model, &ac, &rules, err) != 0) return -1;
  train_state_zero_grad(&s->state);
  for (int b = 0; b < s->state.num_buffers; b++)
    for (size_t i = 0; i < s->state.numels[b]; i++) s->state.grads[b][i] = 1e-3f * (float)((i * 7 + b + seed) % 13);
  return train_state_step(&s->state, 1e-3, 1.0f, err);
}

static void setup_close(Setup *s) {
  train_state_free(&s->state);
  gemma_model_free(&s->model);
}

static int same_weights(const GemmaModel *a, const GemmaModel *b) {
  if (memcmp(a->globals, b->globals, a->globals_numel * sizeof(float))) return 0;
  for (int l = 0; l < a->config.num_hidden_layers; l++)
    if (memcmp(a->layers[l], b->layers[l], a->layer_numel * sizeof(float))) return 0;
  return 1;
}

static int same_moments(AdamW *a, AdamW *b) {
  if (a->step != b->step || a->num_buffers != b->num_buffers) return 0;
  FimiError err = {0};
  for (int i = 0; i < 2 * a->num_buffers; i++) {
    AdamWStateArray x, y;
    if (adamw_state_array(a, i, &x, &err) || adamw_state_array(b, i, &y, &err) || x.numel != y.numel ||
        strcmp(x.name, y.name) || memcmp(x.data, y.data, x.numel * sizeof(float)))
      return 0;
  }
  return 1;
}

static long file_size(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

// Checks dir's index against the model and the shard files; returns the shard count.
static int check_index(const char *dir, const GemmaModel *model) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  size_t size = 0;
  FimiError err = {0};
  char *text = file_read_all(path, 1 << 24, &size, &err);
  CHECK(text != NULL, "%s: %s", path, err.message);
  cJSON *index = text ? cJSON_Parse(text) : NULL;
  free(text);
  CHECK(index != NULL, "%s is not JSON", path);
  if (!index) return 0;
  cJSON *map = cJSON_GetObjectItem(index, "weight_map");
  cJSON *total = cJSON_GetObjectItem(cJSON_GetObjectItem(index, "metadata"), "total_size");
  CHECK(cJSON_IsObject(map) && cJSON_IsNumber(total), "index lacks weight_map or metadata.total_size");
  double tensor_bytes = 0;
  for (int i = 0; i < model->num_tensors; i++) {
    cJSON *file = cJSON_GetObjectItem(map, model->tensors[i].name);
    CHECK(cJSON_IsString(file), "index: no shard for %s", model->tensors[i].name);
    tensor_bytes += 4.0 * (double)model->tensors[i].numel;
  }
  CHECK(cJSON_GetArraySize(map) == model->num_tensors, "index lists %d tensors, the model has %d",
        cJSON_GetArraySize(map), model->num_tensors);
  CHECK(cJSON_IsNumber(total) && total->valuedouble == tensor_bytes, "total_size %g, tensors %g bytes",
        cJSON_IsNumber(total) ? total->valuedouble : -1, tensor_bytes);
  // Every file named in the index exists and is under the limit (+ its header).
  int shards = 0;
  char name[64];
  for (int i = 1; i <= 99; i++) {
    snprintf(name, sizeof name, "model-%05d-of-", i);
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
      if (!strncmp(e->d_name, name, strlen(name))) {
        found = 1;
        long bytes = file_size(dir, e->d_name);
        CHECK(bytes > 0 && bytes <= SHARD_BYTES + 16384, "%s: %ld bytes, limit %d", e->d_name, bytes, SHARD_BYTES);
      }
    if (d) closedir(d);
    if (!found) break;
    shards++;
  }
  cJSON_Delete(index);
  return shards;
}

static void test_single_process(const char *root) {
  FimiError err = {0};
  Setup a, b;
  CHECK(setup_open(&a, 5, &err) == 0 && setup_open(&b, 6, &err) == 0, "setup: %s", err.message);
  TrainerState ts = {0};
  ts.step = 3;
  char out[1024], dir[4096];
  snprintf(out, sizeof out, "%s/one", root);
  CHECK(checkpoint_save(out, &a.model, &a.state.opt, &ts, NULL, 0, SHARD_BYTES, &err) == 0, "save: %s", err.message);
  snprintf(dir, sizeof dir, "%s/step_000003", out);
  int shards = check_index(dir, &a.model);
  CHECK(shards >= 2, "%d model shards, expected several", shards);
  CHECK(file_size(dir, "model.safetensors") < 0, "a sharded checkpoint has no model.safetensors");
  TrainerState loaded = {0};
  CHECK(!same_weights(&a.model, &b.model), "the two setups start different");
  CHECK(checkpoint_load(dir, &b.model, &b.state.opt, &loaded, &err) == 0, "load: %s", err.message);
  CHECK(same_weights(&a.model, &b.model), "sharded checkpoint: weights differ after loading");
  CHECK(same_moments(&a.state.opt, &b.state.opt), "sharded checkpoint: AdamW state differs after loading");
  CHECK(loaded.step == 3, "step %lld", (long long)loaded.step);

  // max_shard_bytes 0: one file, as before.
  snprintf(out, sizeof out, "%s/unsharded", root);
  CHECK(checkpoint_save(out, &a.model, &a.state.opt, &ts, NULL, 0, 0, &err) == 0, "save: %s", err.message);
  snprintf(dir, sizeof dir, "%s/step_000003", out);
  CHECK(file_size(dir, "model.safetensors") > 0 && file_size(dir, "model.safetensors.index.json") < 0,
        "max_shard_bytes 0 writes one model.safetensors and no index");
  setup_close(&a);
  setup_close(&b);
}

// The steps train/loop.c runs across 2 ranks, done here in one process.
static void test_two_ranks(const char *root) {
  FimiError err = {0};
  Setup a, b;
  CHECK(setup_open(&a, 7, &err) == 0 && setup_open(&b, 8, &err) == 0, "setup: %s", err.message);
  TrainerState ts = {0};
  ts.step = 4;
  char out[1024], tmp[4096], dir[4096];
  snprintf(out, sizeof out, "%s/two", root);
  int rc = checkpoint_begin_save(out, ts.step, tmp, sizeof tmp, &err);
  if (rc == 0) rc = checkpoint_write_model(tmp, &a.model, NULL, SHARD_BYTES, &err);
  for (int rank = 0; rc == 0 && rank < 2; rank++) rc = checkpoint_write_optimizer_shard(tmp, &a.state.opt, rank, 2, &err);
  if (rc == 0) rc = checkpoint_finish_save(out, tmp, &ts, 0, &err);
  CHECK(rc == 0, "2-rank save: %s", err.message);
  snprintf(dir, sizeof dir, "%s/step_000004", out);
  CHECK(check_index(dir, &a.model) >= 2, "the 2-rank checkpoint is sharded");
  TrainerState loaded = {0};
  CHECK(checkpoint_load_shard(dir, &b.model, &b.state.opt, &loaded, 1, 2, &err) == 0, "rank 1 of 2: %s", err.message);
  CHECK(same_weights(&a.model, &b.model) && same_moments(&a.state.opt, &b.state.opt),
        "rank 1 of 2 resumes the sharded checkpoint exactly");
  err.message[0] = 0;
  CHECK(checkpoint_load(dir, &b.model, &b.state.opt, &loaded, &err) != 0 && strstr(err.message, "2-rank run"),
        "a single process is refused: %s", err.message);
  GemmaModel any;
  CHECK(gemma_load_pretrained(&any, dir, &err) == 0, "the model alone loads: %s", err.message);
  CHECK(same_weights(&a.model, &any), "the model alone equals the saved one");
  gemma_model_free(&any);
  setup_close(&a);
  setup_close(&b);
}

int main(void) {
  char root[] = "/tmp/fimi_ckpt_shards_XXXXXX";
  CHECK(mkdtemp(root) != NULL, "mkdtemp");
  test_single_process(root);
  test_two_ranks(root);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  TEST_MAIN_END();
}
