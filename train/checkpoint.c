// train/checkpoint.c: checkpoint save, find, load, temp cleanup: see
// checkpoint.h. The model goes through model/weights.h, the optimizer state
// through HDF5, the trainer state through cJSON.
#define _POSIX_C_SOURCE 200809L
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/log.h"
#include "data/h5_create.h"
#include "model/weights.h"

#define TMP_PREFIX ".tmp-step_"
#define STEP_PREFIX "step_"
#define MAX_STATE_JSON ((size_t)1 << 20)
#define MAX_TOKENIZER_BYTES ((size_t)1 << 30)

uint64_t checkpoint_hash_text(const char *text) { return hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, text); }

// ---- directories -------------------------------------------------------------

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// Parses "step_000180" (digits only after the prefix) into *step.
static int parse_step_name(const char *name, const char *prefix, int64_t *step) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0 || !name[n]) return 0;
  int64_t v = 0;
  for (const char *p = name + n; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) return 0;
    v = v * 10 + (*p - '0');
  }
  *step = v;
  return 1;
}

// Deletes a checkpoint directory: it holds only regular files, so anything
// else (a subdirectory someone put there) stops the deletion.
static int remove_flat_dir(const char *dir, FimiError *err) {
  DIR *d = opendir(dir);
  if (!d) return fimi_fail(err, "cannot open %s: %s", dir, strerror(errno));
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[CHECKPOINT_PATH_MAX];
    if (path_join(path, sizeof path, dir, e->d_name, err) != 0) rc = -1;
    else if (unlink(path) != 0) rc = fimi_fail(err, "cannot delete %s: %s", path, strerror(errno));
  }
  closedir(d);
  if (rc == 0 && rmdir(dir) != 0) rc = fimi_fail(err, "cannot delete %s: %s", dir, strerror(errno));
  return rc;
}

// Complete checkpoints (step_N with DONE) in out_dir, ascending by step.
static int list_checkpoints(const char *out_dir, int64_t **steps, int *count, FimiError *err) {
  *steps = NULL;
  *count = 0;
  DIR *d = opendir(out_dir);
  if (!d) {
    if (errno == ENOENT) return 0;
    return fimi_fail(err, "cannot open %s: %s", out_dir, strerror(errno));
  }
  int cap = 0, rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int64_t step;
    char done[CHECKPOINT_PATH_MAX];
    if (!parse_step_name(e->d_name, STEP_PREFIX, &step)) continue;
    if (snprintf(done, sizeof done, "%s/%s/DONE", out_dir, e->d_name) >= (int)sizeof done || !is_file(done)) continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *grown = realloc(*steps, (size_t)cap * sizeof *grown);
      if (!grown) {
        rc = fimi_fail(err, "out of memory listing %s", out_dir);
        break;
      }
      *steps = grown;
    }
    (*steps)[(*count)++] = step;
  }
  closedir(d);
  for (int i = 1; i < *count; i++)  // insertion sort: a handful of entries
    for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
      int64_t t = (*steps)[j];
      (*steps)[j] = (*steps)[j - 1];
      (*steps)[j - 1] = t;
    }
  return rc;
}

static int step_dir(char *out, size_t size, const char *out_dir, const char *prefix, int64_t step, FimiError *err) {
  if (snprintf(out, size, "%s/%s%06lld", out_dir, prefix, (long long)step) >= (int)size)
    return fimi_fail(err, "checkpoint path too long under %s", out_dir);
  return 0;
}

int checkpoint_find_latest(const char *out_dir, char *path, size_t path_size, int64_t *step, FimiError *err) {
  int64_t *steps;
  int count;
  if (list_checkpoints(out_dir, &steps, &count, err) != 0) return -1;
  int found = count > 0;
  if (found) {
    *step = steps[count - 1];
    if (step_dir(path, path_size, out_dir, STEP_PREFIX, *step, err) != 0) found = -1;
  }
  free(steps);
  return found;
}

int checkpoint_clean_temp(const char *out_dir, FimiError *err) {
  DIR *d = opendir(out_dir);
  if (!d) return errno == ENOENT ? 0 : fimi_fail(err, "cannot open %s: %s", out_dir, strerror(errno));
  char names[64][256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 64) {
    int64_t step;
    if (parse_step_name(e->d_name, TMP_PREFIX, &step) && strlen(e->d_name) < sizeof names[0])
      strcpy(names[n++], e->d_name);
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    char path[CHECKPOINT_PATH_MAX];
    if (path_join(path, sizeof path, out_dir, names[i], err) != 0 || remove_flat_dir(path, err) != 0) return -1;
    log_warn("removed %s (a checkpoint save that never finished)", path);
  }
  return n;
}

// The step OUT/best links to, or -1 when there is no such link.
static int64_t best_step(const char *out_dir) {
  char link[CHECKPOINT_PATH_MAX], target[256];
  FimiError ignored = {0};
  int64_t step = -1;
  if (path_join(link, sizeof link, out_dir, CHECKPOINT_BEST_LINK, &ignored) != 0) return -1;
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return -1;
  target[n] = 0;
  return parse_step_name(target, STEP_PREFIX, &step) ? step : -1;
}

static int prune_checkpoints(const char *out_dir, int keep_last, FimiError *err) {
  if (keep_last <= 0) return 0;
  int64_t *steps;
  int count;
  if (list_checkpoints(out_dir, &steps, &count, err) != 0) return -1;
  int rc = 0;
  int64_t best = best_step(out_dir);
  for (int i = 0; rc == 0 && i + keep_last < count; i++) {
    if (steps[i] == best) continue;  // the best checkpoint stays, whatever keep_last says
    char path[CHECKPOINT_PATH_MAX], done[CHECKPOINT_PATH_MAX];
    rc = step_dir(path, sizeof path, out_dir, STEP_PREFIX, steps[i], err);
    // DONE goes first, so a deletion cut short leaves no "complete" half.
    if (rc == 0 && path_join(done, sizeof done, path, "DONE", err) == 0 && unlink(done) != 0)
      rc = fimi_fail(err, "cannot delete %s: %s", done, strerror(errno));
    if (rc == 0) rc = remove_flat_dir(path, err);
  }
  free(steps);
  return rc;
}

// ---- optimizer.h5 --------------------------------------------------------------

static int h5_attr_i64(hid_t loc, const char *name, int64_t value, FimiError *err) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  int bad = a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &value) < 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  return bad ? fimi_fail(err, "HDF5: cannot write attribute \"%s\"", name) : 0;
}

static int h5_read_attr_i64(hid_t loc, const char *name, int64_t *value, const char *path, FimiError *err) {
  if (H5Aexists(loc, name) <= 0) return fimi_fail(err, "%s: attribute \"%s\" is missing", path, name);
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  hid_t space = a >= 0 ? H5Aget_space(a) : -1;
  hid_t type = a >= 0 ? H5Aget_type(a) : -1;
  int bad = a < 0 || space < 0 || type < 0 || H5Sget_simple_extent_npoints(space) != 1 ||
            H5Tget_class(type) != H5T_INTEGER || H5Aread(a, H5T_NATIVE_INT64, value) < 0;
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  if (a >= 0) H5Aclose(a);
  return bad ? fimi_fail(err, "%s: attribute \"%s\" is not one integer", path, name) : 0;
}

// rank and world: which shard of a sharded (ZeRO-3) run's optimizer state
// this file holds (0 and 1 for the replicated optimizer.h5).
static int write_optimizer(const char *path, AdamW *opt, int rank, int world, FimiError *err) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = h5_create_file(path);
  if (file < 0) return fimi_fail(err, "HDF5: cannot create %s", path);
  int rc = h5_attr_i64(file, "format_version", CHECKPOINT_FORMAT_VERSION, err);
  if (rc == 0) rc = h5_attr_i64(file, "step", opt->step, err);
  if (rc == 0) rc = h5_attr_i64(file, "rank", rank, err);
  if (rc == 0) rc = h5_attr_i64(file, "world", world, err);
  for (int i = 0; rc == 0 && i < adamw_state_count(opt); i++) {
    AdamWStateArray a;
    if ((rc = adamw_state_array(opt, i, &a, err)) != 0) break;
    hsize_t dims[1] = {(hsize_t)a.numel};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t ds = space >= 0 ? h5_create_dataset(file, a.name, H5T_IEEE_F32LE, space) : -1;
    if (ds < 0 || (a.numel > 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data) < 0))
      rc = fimi_fail(err, "HDF5: cannot write \"%s\" to %s", a.name, path);
    if (ds >= 0) H5Dclose(ds);
    if (space >= 0) H5Sclose(space);
  }
  if (H5Fclose(file) < 0 && rc == 0) rc = fimi_fail(err, "HDF5: cannot close %s", path);
  return rc;
}

// Reads one float32 [numel] dataset into buf (numel floats), checking type and shape.
static int read_state_array(hid_t file, const char *path, const char *name, float *buf, size_t numel,
                            FimiError *err) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return fimi_fail(err, "%s: dataset \"%s\" is missing", path, name);
  hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  if (ds < 0) return fimi_fail(err, "%s: \"%s\" is not a dataset", path, name);
  hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
  hsize_t dims[1] = {0};
  int rc = 0;
  if (type < 0 || space < 0 || H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4)
    rc = fimi_fail(err, "%s: dataset \"%s\" is not float32", path, name);
  else if (H5Sget_simple_extent_ndims(space) != 1 || H5Sget_simple_extent_dims(space, dims, NULL) != 1 ||
           dims[0] != (hsize_t)numel)
    rc = fimi_fail(err, "%s: dataset \"%s\" must have shape [%zu]", path, name, numel);
  else if (numel > 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
    rc = fimi_fail(err, "%s: dataset \"%s\": read failed (file damaged?)", path, name);
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Dclose(ds);
  return rc;
}

static int read_optimizer(const char *path, AdamW *opt, int rank, int world, FimiError *err) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (!is_file(path)) return fimi_fail(err, "%s is missing", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return fimi_fail(err, "%s: not a readable HDF5 file", path);
  int64_t version = 0, step = 0, file_rank = 0, file_world = 1;
  int rc = h5_read_attr_i64(file, "format_version", &version, path, err);
  if (rc == 0 && version != CHECKPOINT_FORMAT_VERSION)
    rc = fimi_fail(err, "%s: format_version %lld, this build reads %d", path, (long long)version,
                   CHECKPOINT_FORMAT_VERSION);
  if (rc == 0) rc = h5_read_attr_i64(file, "step", &step, path, err);
  // Files from before sharded checkpoints have no rank/world: a whole optimizer.
  if (rc == 0 && H5Aexists(file, "rank") > 0) rc = h5_read_attr_i64(file, "rank", &file_rank, path, err);
  if (rc == 0 && H5Aexists(file, "world") > 0) rc = h5_read_attr_i64(file, "world", &file_world, path, err);
  if (rc == 0 && (file_rank != rank || file_world != world))
    rc = fimi_fail(err, "%s holds the optimizer shard of rank %lld of %lld, expected rank %d of %d", path,
                   (long long)file_rank, (long long)file_world, rank, world);
  H5G_info_t info;
  if (rc == 0 && (H5Gget_info(file, &info) < 0 || info.nlinks != (hsize_t)adamw_state_count(opt)))
    rc = fimi_fail(err, "%s: expected %d optimizer arrays, found %llu", path, adamw_state_count(opt),
                   (unsigned long long)info.nlinks);
  float *buf = NULL;
  for (int i = 0; rc == 0 && i < adamw_state_count(opt); i++) {
    AdamWStateArray a;
    if ((rc = adamw_state_array(opt, i, &a, err)) != 0) break;
    float *grown = realloc(buf, (a.numel ? a.numel : 1) * sizeof *buf);
    if (!grown) {
      rc = fimi_fail(err, "%s: out of memory", path);
      break;
    }
    buf = grown;
    rc = read_state_array(file, path, a.name, buf, a.numel, err);
    if (rc == 0 && (rc = adamw_state_load(opt, a.name, buf, a.numel, err)) != 0)
      fimi_fail_wrap(err, "%s", path);
  }
  free(buf);
  if (rc == 0 && adamw_set_step(opt, step, err) != 0) rc = fimi_fail_wrap(err, "%s", path);
  H5Fclose(file);
  return rc;
}

// ---- trainer_state.json ----------------------------------------------------------

static void add_hex(cJSON *obj, const char *key, uint64_t v) {
  char text[24];
  snprintf(text, sizeof text, "%016" PRIx64, v);
  cJSON_AddStringToObject(obj, key, text);
}

static int get_hex(const cJSON *obj, const char *key, uint64_t *out, const char *what, FimiError *err) {
  char text[24], *end = NULL;
  if (json_get_string(obj, key, 1, text, sizeof text, what, err) != 0) return -1;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 16);
  if (strlen(text) != 16 || errno || *end) return fimi_fail(err, "%s: \"%s\" must be 16 hex digits", what, key);
  *out = v;
  return 0;
}

static int write_trainer_state(const char *path, const TrainerState *ts, FimiError *err) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "format_version", CHECKPOINT_FORMAT_VERSION);
  cJSON_AddNumberToObject(root, "step", (double)ts->step);
  cJSON_AddNumberToObject(root, "skipped", (double)ts->skipped);
  cJSON_AddNumberToObject(root, "nonfinite_in_row", (double)ts->nonfinite_in_row);
  add_hex(root, "data_epoch", ts->cursor.epoch);
  add_hex(root, "data_position", ts->cursor.position);
  add_hex(root, "data_seed", ts->data_seed);
  cJSON *rng = cJSON_AddArrayToObject(root, "rng");
  for (int i = 0; i < 4; i++) {
    char text[24];
    snprintf(text, sizeof text, "%016" PRIx64, ts->rng[i]);
    cJSON_AddItemToArray(rng, cJSON_CreateString(text));
  }
  if (isfinite(ts->best_eval)) cJSON_AddNumberToObject(root, "best_eval", ts->best_eval);
  else cJSON_AddNullToObject(root, "best_eval");
  cJSON_AddNumberToObject(root, "best_eval_step", (double)ts->best_eval_step);
  cJSON_AddNumberToObject(root, "elapsed", ts->elapsed);
  cJSON_AddNumberToObject(root, "tokens_seen", (double)ts->tokens_seen);
  add_hex(root, "config_hash", ts->config_hash);
  if (ts->objective_state[0]) {
    cJSON *state = cJSON_Parse(ts->objective_state);
    if (!cJSON_IsObject(state)) {
      cJSON_Delete(state);
      cJSON_Delete(root);
      return fimi_fail(err, "%s: the objective state is not a JSON object", path);
    }
    cJSON_AddItemToObject(root, "objective_state", state);
  }
  int rc = json_write_file(path, root, err);
  cJSON_Delete(root);
  return rc;
}

static int read_trainer_state(const char *path, TrainerState *ts, FimiError *err) {
  cJSON *root = json_parse_file(path, MAX_STATE_JSON, err);
  if (!root) return -1;
  memset(ts, 0, sizeof *ts);
  ts->best_eval = NAN;
  int64_t version = 0;
  int rc = json_get_int64(root, "format_version", 1, &version, path, err);
  if (rc == 0 && version != CHECKPOINT_FORMAT_VERSION)
    rc = fimi_fail(err, "%s: format_version %lld, this build reads %d", path, (long long)version,
                   CHECKPOINT_FORMAT_VERSION);
  if (rc == 0) rc = json_get_int64(root, "step", 1, &ts->step, path, err);
  if (rc == 0) rc = json_get_int64(root, "skipped", 1, &ts->skipped, path, err);
  if (rc == 0) rc = json_get_int64(root, "nonfinite_in_row", 1, &ts->nonfinite_in_row, path, err);
  if (rc == 0) rc = get_hex(root, "data_epoch", &ts->cursor.epoch, path, err);
  if (rc == 0) rc = get_hex(root, "data_position", &ts->cursor.position, path, err);
  if (rc == 0) rc = get_hex(root, "data_seed", &ts->data_seed, path, err);
  const cJSON *rng = cJSON_GetObjectItemCaseSensitive(root, "rng");
  if (rc == 0 && (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4))
    rc = fimi_fail(err, "%s: \"rng\" must be an array of 4 hex strings", path);
  for (int i = 0; rc == 0 && i < 4; i++) {
    const cJSON *item = cJSON_GetArrayItem(rng, i);
    char *end = NULL;
    if (!cJSON_IsString(item) || strlen(item->valuestring) != 16)
      rc = fimi_fail(err, "%s: rng[%d] must be 16 hex digits", path, i);
    else if ((ts->rng[i] = strtoull(item->valuestring, &end, 16)), *end)
      rc = fimi_fail(err, "%s: rng[%d] must be 16 hex digits", path, i);
  }
  if (rc == 0 && !json_is_missing(root, "best_eval")) rc = json_get_double(root, "best_eval", 1, &ts->best_eval, path, err);
  if (rc == 0) rc = json_get_int64(root, "best_eval_step", 1, &ts->best_eval_step, path, err);
  if (rc == 0) rc = json_get_double(root, "elapsed", 1, &ts->elapsed, path, err);
  if (rc == 0) rc = json_get_int64(root, "tokens_seen", 1, &ts->tokens_seen, path, err);
  if (rc == 0) rc = get_hex(root, "config_hash", &ts->config_hash, path, err);
  const cJSON *state = cJSON_GetObjectItemCaseSensitive(root, "objective_state");
  if (rc == 0 && state) {
    char *text = cJSON_IsObject(state) ? cJSON_PrintUnformatted(state) : NULL;
    if (!text || strlen(text) >= sizeof ts->objective_state)
      rc = fimi_fail(err, "%s: \"objective_state\" must be a JSON object of at most %d bytes", path,
                     CHECKPOINT_OBJECTIVE_STATE_MAX - 1);
    else
      strcpy(ts->objective_state, text);
    free(text);
  }
  if (rc == 0 && (ts->step < 0 || ts->skipped < 0 || ts->skipped > ts->step || ts->nonfinite_in_row < 0 ||
                  ts->nonfinite_in_row > ts->skipped || ts->tokens_seen < 0 || !(ts->elapsed >= 0)))
    rc = fimi_fail(err, "%s: inconsistent counters (step %lld, skipped %lld)", path, (long long)ts->step,
                   (long long)ts->skipped);
  cJSON_Delete(root);
  return rc;
}

// ---- save / load -------------------------------------------------------------------

static int copy_file(const char *from, const char *to, FimiError *err) {
  size_t size = 0;
  char *bytes = file_read_all(from, MAX_TOKENIZER_BYTES, &size, err);
  if (!bytes) return -1;
  int rc = file_write_atomic(to, bytes, size, err);
  free(bytes);
  return rc;
}

// Test hook: FIMI_TEST_SAVE_DELAY_MS pauses mid-save (after the weights,
// before the optimizer state), so tests can kill -9 a process inside a save.
static void test_save_delay(void) {
  const char *text = getenv("FIMI_TEST_SAVE_DELAY_MS");
  long ms = text ? strtol(text, NULL, 10) : 0;
  if (ms <= 0 || ms > 600000) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// The file name of `rank`'s optimizer shard in a checkpoint of `world` ranks.
static int shard_file_name(char *out, size_t size, int rank, int world) {
  return snprintf(out, size, "optimizer-rank%05d-of-%05d.h5", rank, world) < (int)size ? 0 : -1;
}

int checkpoint_begin_save(const char *out_dir, int64_t step, char *tmp, size_t tmp_size, FimiError *err) {
  if (dir_create(out_dir, err) != 0) return -1;
  if (step_dir(tmp, tmp_size, out_dir, TMP_PREFIX, step, err) != 0) return -1;
  struct stat st;
  if (stat(tmp, &st) == 0 && remove_flat_dir(tmp, err) != 0) return -1;
  return 0;
}

int checkpoint_temp_dir(const char *out_dir, int64_t step, char *tmp, size_t tmp_size, FimiError *err) {
  return step_dir(tmp, tmp_size, out_dir, TMP_PREFIX, step, err);
}

int checkpoint_write_model(const char *tmp, const GemmaModel *model, const char *tokenizer_path,
                           size_t max_shard_bytes, FimiError *err) {
  char path[CHECKPOINT_PATH_MAX];
  if (gemma_save_pretrained(model, tmp, SAFETENSORS_F32, max_shard_bytes, err) != 0) return -1;
  if (tokenizer_path && tokenizer_path[0] &&
      (path_join(path, sizeof path, tmp, "tokenizer.json", err) != 0 || copy_file(tokenizer_path, path, err) != 0))
    return -1;
  test_save_delay();
  return 0;
}

int checkpoint_write_optimizer_shard(const char *tmp, AdamW *opt, int rank, int world, FimiError *err) {
  char name[64], path[CHECKPOINT_PATH_MAX];
  if (world == 1 && rank == 0) snprintf(name, sizeof name, "optimizer.h5");
  else if (rank < 0 || rank >= world || shard_file_name(name, sizeof name, rank, world) != 0)
    return fimi_fail(err, "optimizer shard: rank %d of %d is invalid", rank, world);
  if (path_join(path, sizeof path, tmp, name, err) != 0) return -1;
  return write_optimizer(path, opt, rank, world, err);
}

int checkpoint_finish_save(const char *out_dir, const char *tmp, const TrainerState *ts, int keep_last,
                           FimiError *err) {
  char path[CHECKPOINT_PATH_MAX], final[CHECKPOINT_PATH_MAX];
  if (step_dir(final, sizeof final, out_dir, STEP_PREFIX, ts->step, err) != 0) return -1;
  if (path_join(path, sizeof path, tmp, "trainer_state.json", err) != 0 || write_trainer_state(path, ts, err) != 0)
    return fimi_fail_wrap(err, "saving checkpoint %s", final);
  if (path_join(path, sizeof path, tmp, "DONE", err) != 0) return -1;
  char done[64];
  int n = snprintf(done, sizeof done, "step %lld\n", (long long)ts->step);
  if (file_write_atomic(path, done, (size_t)n, err) != 0) return fimi_fail_wrap(err, "saving checkpoint %s", final);
  // Saving a step that exists already (a rerun after resuming earlier):
  // the new one replaces it.
  struct stat st;
  if (stat(final, &st) == 0 && remove_flat_dir(final, err) != 0) return -1;
  if (rename(tmp, final) != 0) return fimi_fail(err, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
  return prune_checkpoints(out_dir, keep_last, err);
}

int checkpoint_save(const char *out_dir, const GemmaModel *model, AdamW *opt, const TrainerState *ts,
                    const char *tokenizer_path, int keep_last, size_t max_shard_bytes, FimiError *err) {
  char tmp[CHECKPOINT_PATH_MAX];
  if (checkpoint_begin_save(out_dir, ts->step, tmp, sizeof tmp, err) != 0) return -1;
  if (checkpoint_write_model(tmp, model, tokenizer_path, max_shard_bytes, err) != 0 ||
      (opt && checkpoint_write_optimizer_shard(tmp, opt, 0, 1, err) != 0))
    return fimi_fail_wrap(err, "saving checkpoint step %lld in %s", (long long)ts->step, out_dir);
  return checkpoint_finish_save(out_dir, tmp, ts, keep_last, err);
}

// Copies the checkpoint's weights into model after checking every tensor's
// name and shape against it.
static int load_weights_into(const char *dir, GemmaModel *model, FimiError *err) {
  GemmaModel saved;
  if (gemma_load_pretrained(&saved, dir, err) != 0) return -1;
  int rc = 0;
  if (saved.num_tensors != model->num_tensors || saved.globals_numel != model->globals_numel ||
      saved.layer_numel != model->layer_numel ||
      saved.config.num_hidden_layers != model->config.num_hidden_layers)
    rc = fimi_fail(err, "%s: the checkpoint's architecture differs from the model being trained", dir);
  for (int i = 0; rc == 0 && i < model->num_tensors; i++) {
    const GemmaTensor *a = &saved.tensors[i], *b = &model->tensors[i];
    if (strcmp(a->name, b->name) || a->numel != b->numel || a->offset != b->offset)
      rc = fimi_fail(err, "%s: tensor %s does not match the model (%s)", dir, a->name, b->name);
  }
  if (rc == 0) {
    memcpy(model->globals, saved.globals, model->globals_numel * sizeof(float));
    for (int l = 0; l < model->config.num_hidden_layers; l++)
      memcpy(model->layers[l], saved.layers[l], model->layer_numel * sizeof(float));
  }
  gemma_model_free(&saved);
  return rc;
}

// The error when the shard for (rank, world) is missing: says which world
// size wrote the checkpoint, since resuming needs the same one.
static int missing_shard(const char *dir, int rank, int world, FimiError *err) {
  char path[CHECKPOINT_PATH_MAX];
  if (path_join(path, sizeof path, dir, "optimizer.h5", err) == 0 && is_file(path) && world > 1)
    return fimi_fail(err, "%s was written by a single-process run (optimizer.h5): resume it without mpirun and "
                     "without dist.zero3 (a %d-rank run cannot reshard it)", dir, world);
  DIR *d = opendir(dir);
  int saved_world = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (sscanf(e->d_name, "optimizer-rank%*5d-of-%5d.h5", &saved_world) == 1) break;
  if (d) closedir(d);
  if (saved_world > 0)
    return fimi_fail(err, "%s was written by a %d-rank run: resume it with %d ranks (this run has %d)", dir,
                     saved_world, saved_world, world);
  return fimi_fail(err, "%s holds no optimizer state (optimizer.h5 or optimizer-rank*-of-*.h5): it cannot be "
                   "resumed", dir);
}

int checkpoint_load_shard(const char *dir, GemmaModel *model, AdamW *opt, TrainerState *ts, int rank, int world,
                          FimiError *err) {
  char path[CHECKPOINT_PATH_MAX], name[64];
  if (path_join(path, sizeof path, dir, "DONE", err) != 0) return -1;
  if (!is_file(path)) return fimi_fail(err, "%s: no DONE marker (an incomplete checkpoint)", dir);
  if (path_join(path, sizeof path, dir, "trainer_state.json", err) != 0 || read_trainer_state(path, ts, err) != 0)
    return -1;
  if (load_weights_into(dir, model, err) != 0) return -1;
  if (world == 1 && rank == 0) snprintf(name, sizeof name, "optimizer.h5");
  else if (rank < 0 || rank >= world || shard_file_name(name, sizeof name, rank, world) != 0)
    return fimi_fail(err, "optimizer shard: rank %d of %d is invalid", rank, world);
  if (path_join(path, sizeof path, dir, name, err) != 0) return -1;
  if (!is_file(path)) return missing_shard(dir, rank, world, err);
  return read_optimizer(path, opt, rank, world, err);
}

int checkpoint_load(const char *dir, GemmaModel *model, AdamW *opt, TrainerState *ts, FimiError *err) {
  return checkpoint_load_shard(dir, model, opt, ts, 0, 1, err);
}

int checkpoint_link_best(const char *out_dir, int64_t step, FimiError *err) {
  char link[CHECKPOINT_PATH_MAX], tmp[CHECKPOINT_PATH_MAX], target[64];
  snprintf(target, sizeof target, STEP_PREFIX "%06lld", (long long)step);
  if (path_join(link, sizeof link, out_dir, CHECKPOINT_BEST_LINK, err) != 0) return -1;
  if (snprintf(tmp, sizeof tmp, "%s.tmp", link) >= (int)sizeof tmp) return fimi_fail(err, "path too long: %s", link);
  // A new link renamed over the old one: OUT/best is never missing.
  unlink(tmp);
  if (symlink(target, tmp) != 0) return fimi_fail(err, "cannot create the link %s: %s", tmp, strerror(errno));
  if (rename(tmp, link) != 0) return fimi_fail(err, "cannot rename %s to %s: %s", tmp, link, strerror(errno));
  return 0;
}
