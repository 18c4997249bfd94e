// tests/test_tensorboard.c: TensorBoard event files (train/tensorboard.h),
// read back by a decoder written here: the TFRecord framing with every CRC
// recomputed by a bitwise CRC32C (the reference for ISA-L's), and the Event,
// Summary and SessionLog protos decoded field by field from the wire format.
// Checks: the masked CRC on known and random data; the file version and
// session START events; a row's numbers as scalars (nested objects and
// arrays flattened with "/", booleans 0/1, strings, nulls and the step left
// out, NaN kept, a double beyond float's range an infinity, a too-long tag
// dropped); a second writer's file sorts after the first even within the
// same second; a corrupted byte is caught by the decoder; a failed write
// (/dev/full) is reported once and later writes do nothing; an open that
// cannot create the folder fails with a message; and train_run with
// tensorboard on writes one event per metrics.jsonl line, equal to it
// (eval_loss too, on the evaluation steps).
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "core/rng.h"
#include "model/weights.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/sft.h"
#include "train/tensorboard.h"

// ---- the reference decoder -----------------------------------------------------------

// CRC32C bit by bit (reflected polynomial 0x82f63b78), then TFRecord's mask.
static uint32_t crc32c_ref(const uint8_t *p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int b = 0; b < 8; b++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

static uint32_t mask_ref(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static uint64_t get_le(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#define MAX_SCALARS 64

typedef struct Event {
  double wall_time;
  int64_t step;
  char file_version[32];
  int session_status;  // -1: no session_log
  int has_summary, count;
  char tags[MAX_SCALARS][TB_TAG_MAX];
  float values[MAX_SCALARS];
} Event;

typedef struct Wire {
  const uint8_t *p, *end;
} Wire;

static int varint(Wire *w, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
    uint8_t b = *w->p++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

// One field: its number, wire type and payload (a varint or fixed value in
// *v, a length-delimited one in *sub).
static int field(Wire *w, int *number, int *type, uint64_t *v, Wire *sub) {
  uint64_t key;
  if (varint(w, &key) != 0) return -1;
  *number = (int)(key >> 3);
  *type = (int)(key & 7);
  if (*type == 0) return varint(w, v);
  int bytes = *type == 1 ? 8 : *type == 5 ? 4 : 0;
  if (*type == 2) {
    if (varint(w, v) != 0 || *v > (uint64_t)(w->end - w->p)) return -1;
    sub->p = w->p;
    sub->end = w->p + *v;
    w->p += *v;
    return 0;
  }
  if (!bytes || w->end - w->p < bytes) return -1;
  *v = get_le(w->p, bytes);
  w->p += bytes;
  return 0;
}

static int decode_value(Wire w, Event *e) {  // Summary.Value: tag 1, simple_value 2 (float)
  if (e->count >= MAX_SCALARS) return -1;
  int n, t, have_value = 0;
  uint64_t v;
  Wire sub;
  char *tag = e->tags[e->count];
  tag[0] = 0;
  while (w.p < w.end) {
    if (field(&w, &n, &t, &v, &sub) != 0) return -1;
    if (n == 1 && t == 2 && v < TB_TAG_MAX) {
      memcpy(tag, sub.p, v);
      tag[v] = 0;
    } else if (n == 2 && t == 5) {
      uint32_t bits = (uint32_t)v;
      memcpy(&e->values[e->count], &bits, 4);
      have_value = 1;
    } else {
      return -1;
    }
  }
  if (!have_value) return -1;
  e->count++;
  return 0;
}

static int decode_event(Wire w, Event *e) {
  memset(e, 0, sizeof *e);
  e->session_status = -1;
  int n, t;
  uint64_t v;
  Wire sub;
  while (w.p < w.end) {
    if (field(&w, &n, &t, &v, &sub) != 0) return -1;
    if (n == 1 && t == 1) memcpy(&e->wall_time, &v, 8);
    else if (n == 2 && t == 0) e->step = (int64_t)v;
    else if (n == 3 && t == 2 && v < sizeof e->file_version) memcpy(e->file_version, sub.p, v);
    else if (n == 5 && t == 2) {  // Summary: repeated Value value = 1
      e->has_summary = 1;
      while (sub.p < sub.end) {
        Wire value;
        if (field(&sub, &n, &t, &v, &value) != 0 || n != 1 || t != 2 || decode_value(value, e) != 0) return -1;
      }
    } else if (n == 7 && t == 2) {  // SessionLog: status = 1
      e->session_status = 0;
      while (sub.p < sub.end) {
        Wire unused;
        if (field(&sub, &n, &t, &v, &unused) != 0) return -1;
        if (n == 1 && t == 0) e->session_status = (int)v;
      }
    } else {
      return -1;
    }
  }
  return 0;
}

// The records of data[0, size): each framing CRC checked, each Event
// decoded. Returns the number of events, or -1 with why filled in.
static int decode_file(const uint8_t *data, size_t size, Event *events, int max, char *why, size_t why_size) {
  size_t at = 0;
  int count = 0;
  while (at < size) {
    if (size - at < 12) return snprintf(why, why_size, "truncated header at %zu", at), -1;
    uint64_t len = get_le(data + at, 8);
    if (get_le(data + at + 8, 4) != mask_ref(crc32c_ref(data + at, 8)))
      return snprintf(why, why_size, "length CRC mismatch at %zu", at), -1;
    if (len > size - at - 12 || size - at - 12 - len < 4) return snprintf(why, why_size, "truncated record at %zu", at), -1;
    const uint8_t *body = data + at + 12;
    if (get_le(body + len, 4) != mask_ref(crc32c_ref(body, len)))
      return snprintf(why, why_size, "data CRC mismatch at %zu", at), -1;
    if (count == max) return snprintf(why, why_size, "more than %d events", max), -1;
    if (decode_event((Wire){body, body + len}, &events[count]) != 0)
      return snprintf(why, why_size, "event %d does not decode", count), -1;
    count++;
    at += 12 + len + 4;
  }
  return count;
}

// The event files of dir in name order (at most 4), their paths in names.
static int list_event_files(const char *dir, char names[][1024], int max) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort), count = 0;
  for (int i = 0; i < n; i++) {
    if (strstr(list[i]->d_name, "tfevents") && count < max)
      snprintf(names[count++], 1024, "%s/%s", dir, list[i]->d_name);
    free(list[i]);
  }
  if (n >= 0) free(list);
  return count;
}

static int read_events(const char *path, Event *events, int max, char *why, size_t why_size) {
  size_t size = 0;
  FimiError err = {0};
  uint8_t *data = (uint8_t *)file_read_all(path, 1 << 24, &size, &err);
  if (!data) return snprintf(why, why_size, "%.200s", err.message), -1;
  int n = decode_file(data, size, events, max, why, why_size);
  free(data);
  return n;
}

// The scalar tagged tag in e (NULL: absent).
static const float *scalar(const Event *e, const char *tag) {
  for (int i = 0; i < e->count; i++)
    if (!strcmp(e->tags[i], tag)) return &e->values[i];
  return NULL;
}

// ---- tests ----------------------------------------------------------------------------

static void test_crc(void) {
  const char *check = "123456789";
  CHECK(crc32c_ref((const uint8_t *)check, 9) == 0xe3069283u, "reference CRC32C of 123456789: %08x",
        crc32c_ref((const uint8_t *)check, 9));
  CHECK(tb_masked_crc32c(check, 9) == mask_ref(0xe3069283u), "masked CRC32C of 123456789: %08x",
        tb_masked_crc32c(check, 9));
  Rng rng;
  rng_seed(&rng, 7);
  uint8_t buf[3000];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(rng_next_u64(&rng) >> 56);
  int bad = 0;
  for (size_t n = 0; n <= sizeof buf; n = n < 70 ? n + 1 : n * 2 + 13)
    bad += tb_masked_crc32c(buf + n % 5, n - n % 5) != mask_ref(crc32c_ref(buf + n % 5, n - n % 5));
  CHECK(bad == 0, "masked CRC32C equals the bitwise reference at every length (%d differ)", bad);
}

static cJSON *test_row(int64_t step) {
  cJSON *row = cJSON_CreateObject();
  cJSON_AddNumberToObject(row, "step", (double)step);
  cJSON_AddNumberToObject(row, "loss", 2.5);
  cJSON_AddNumberToObject(row, "lr", 1e-3);
  cJSON_AddNumberToObject(row, "zero", 0);
  cJSON_AddBoolToObject(row, "clipped", 1);
  cJSON_AddBoolToObject(row, "step_skipped", 0);
  cJSON_AddStringToObject(row, "note", "text");
  cJSON_AddNullToObject(row, "nothing");
  cJSON_AddNumberToObject(row, "not_finite", NAN);
  cJSON_AddNumberToObject(row, "huge", -1e300);
  cJSON *run = cJSON_AddObjectToObject(row, "run");
  cJSON_AddStringToObject(run, "blas", "openblas");
  cJSON_AddNumberToObject(run, "blas_threads", 4);
  cJSON *ranks = cJSON_AddArrayToObject(row, "rank_rollouts");
  cJSON_AddItemToArray(ranks, cJSON_CreateNumber(3));
  cJSON_AddItemToArray(ranks, cJSON_CreateNumber(5));
  char key[TB_TAG_MAX + 8];
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = 0;
  cJSON_AddNumberToObject(row, key, 1);  // a tag longer than TB_TAG_MAX - 1: dropped
  return row;
}

static void test_write_and_read(const char *base) {
  char dir[1024], files[4][1024], why[256] = "";
  snprintf(dir, sizeof dir, "%s/tb", base);
  FimiError err = {0};
  TbWriter w;
  CHECK(tb_writer_open(&w, dir, 1, &err) == 0, "open: %s", err.message);
  cJSON *row = test_row(1);
  CHECK(tb_writer_write_row(&w, row, &err) == 0, "row 1: %s", err.message);
  cJSON_Delete(row);
  row = cJSON_CreateObject();
  cJSON_AddNumberToObject(row, "step", 2);
  cJSON_AddNumberToObject(row, "eval_loss", 1.25);
  CHECK(tb_writer_write_row(&w, row, &err) == 0, "row 2: %s", err.message);
  cJSON_Delete(row);
  CHECK(tb_writer_close(&w, &err) == 0, "close: %s", err.message);

  CHECK(list_event_files(dir, files, 4) == 1 && strstr(files[0], "/events.out.tfevents."), "one event file");
  Event ev[8];
  int n = read_events(files[0], ev, 8, why, sizeof why);
  CHECK(n == 4, "4 events (version, start, 2 rows): %d %s", n, why);
  if (n != 4) return;
  CHECK(!strcmp(ev[0].file_version, "brain.Event:2") && ev[0].wall_time > 1.5e9, "file version first: '%s' at %f",
        ev[0].file_version, ev[0].wall_time);
  CHECK(ev[1].session_status == 1 && ev[1].step == 1, "session START at step 1: status %d step %lld",
        ev[1].session_status, (long long)ev[1].step);
  CHECK(ev[2].has_summary && ev[2].step == 1 && ev[3].step == 2, "rows at steps 1 and 2");
  const char *tags[] = {"loss", "lr", "zero", "clipped", "step_skipped", "not_finite", "huge", "run/blas_threads",
                        "rank_rollouts/0", "rank_rollouts/1"};
  const float want[] = {2.5f, 1e-3f, 0.0f, 1.0f, 0.0f, NAN, -INFINITY, 4.0f, 3.0f, 5.0f};
  CHECK(ev[2].count == 10, "row 1 has 10 scalars, got %d", ev[2].count);
  for (int i = 0; i < 10; i++) {
    const float *v = scalar(&ev[2], tags[i]);
    CHECK(v && (isnan(want[i]) ? isnan(*v) : *v == want[i]), "%s: got %g, want %g", tags[i], v ? *v : -999.0,
          want[i]);
  }
  CHECK(!scalar(&ev[2], "step") && !scalar(&ev[2], "note") && !scalar(&ev[2], "run/blas"),
        "no step, string or null scalars");
  const float *eval = scalar(&ev[3], "eval_loss");
  CHECK(ev[3].count == 1 && eval && *eval == 1.25f, "row 2: eval_loss only");

  // A resumed run opens a second file in the same second: it sorts after the first.
  CHECK(tb_writer_open(&w, dir, 2, &err) == 0 && tb_writer_close(&w, &err) == 0, "second file: %s", err.message);
  CHECK(list_event_files(dir, files, 4) == 2, "two event files");
  n = read_events(files[1], ev, 8, why, sizeof why);
  CHECK(n == 2 && ev[1].session_status == 1 && ev[1].step == 2, "the newest file sorts last, START at step 2: %d %s",
        n, why);
}

// The decoder must catch what it is there to catch: one flipped bit.
static void test_decoder_catches_corruption(const char *base) {
  char dir[1024], files[4][1024], why[256] = "";
  snprintf(dir, sizeof dir, "%s/corrupt", base);
  FimiError err = {0};
  TbWriter w;
  cJSON *row = test_row(3);
  CHECK(tb_writer_open(&w, dir, 3, &err) == 0 && tb_writer_write_row(&w, row, &err) == 0 &&
            tb_writer_close(&w, &err) == 0,
        "write: %s", err.message);
  cJSON_Delete(row);
  CHECK(list_event_files(dir, files, 4) == 1, "one file");
  size_t size = 0;
  uint8_t *data = (uint8_t *)file_read_all(files[0], 1 << 20, &size, &err);
  Event ev[4];
  CHECK(data && decode_file(data, size, ev, 4, why, sizeof why) == 3, "intact: %s", why);
  if (!data) return;
  data[size - 10] ^= 0x10;
  CHECK(decode_file(data, size, ev, 4, why, sizeof why) == -1 && strstr(why, "data CRC"), "flipped bit: %s", why);
  data[size - 10] ^= 0x10;
  data[2] ^= 1;  // the first record's length
  CHECK(decode_file(data, size, ev, 4, why, sizeof why) == -1 && strstr(why, "length CRC"), "bad length: %s", why);
  free(data);
}

static void test_write_failures(const char *base) {
  FimiError err = {0};
  TbWriter w;
  // A folder that cannot be made (its parent is a file).
  char file[1024], dir[1100];
  snprintf(file, sizeof file, "%s/plain_file", base);
  FILE *f = fopen(file, "w");
  if (f) fclose(f);
  snprintf(dir, sizeof dir, "%s/tb", file);
  CHECK(tb_writer_open(&w, dir, 1, &err) == -1 && w.f == NULL && strstr(err.message, "plain_file"),
        "open under a file fails: %s", err.message);
  // Writes to a full disk fail once, then nothing more happens.
  f = fopen("/dev/full", "wb");
  if (!f) {
    printf("no /dev/full: write failure not checked\n");
    return;
  }
  w.f = f;
  snprintf(w.path, sizeof w.path, "/dev/full");
  cJSON *row = test_row(1);
  err = (FimiError){0};
  CHECK(tb_writer_write_row(&w, row, &err) == -1 && w.f == NULL && strstr(err.message, "/dev/full"),
        "full disk: -1 with a message: %s", err.message);
  err = (FimiError){0};
  CHECK(tb_writer_write_row(&w, row, &err) == 0 && !err.failed, "after the failure: silent");
  CHECK(tb_writer_close(&w, &err) == 0, "close after failure");
  cJSON_Delete(row);
  cJSON *no_step = cJSON_CreateObject();
  snprintf(dir, sizeof dir, "%s/no_step", base);
  CHECK(tb_writer_open(&w, dir, 1, &err) == 0, "open: %s", err.message);
  CHECK(tb_writer_write_row(&w, no_step, &err) == -1 && strstr(err.message, "step"), "row without a step: %s",
        err.message);
  cJSON_Delete(no_step);
}

// ---- through the training loop -------------------------------------------------------

#define ROWS 6
static void make_dataset(Dataset *ds, int64_t *offsets, int32_t *tokens, uint8_t *mask, int vocab) {
  memset(ds, 0, sizeof *ds);
  offsets[0] = 0;
  for (int r = 0; r < ROWS; r++) {
    int len = 8 + r;
    for (int i = 0; i < len; i++) {
      tokens[offsets[r] + i] = 1 + (r * 5 + i * 3) % (vocab - 1);
      mask[offsets[r] + i] = i >= 2;
    }
    offsets[r + 1] = offsets[r] + len;
  }
  ds->kind = DATASET_SFT;
  ds->rows = ROWS;
  ds->vocab_size = vocab;
  ds->num_fields = 1;
  strcpy(ds->fields[0].name, "seq");
  ds->fields[0].offsets = offsets;
  ds->fields[0].tokens = tokens;
  ds->fields[0].loss_mask = mask;
}

static void test_train_loop(const char *base) {
  FimiError err = {0};
  GemmaConfig cfg;
  GemmaModel model;
  TrainState state;
  SftObjective sft;
  TrainObjective obj;
  AdamWConfig ac;
  AdamWDecayRules rules;
  adamw_config_default(&ac);
  adamw_decay_rules_default(&rules);
  if (gemma_config_preset(&cfg, "tiny", &err) != 0 || gemma_model_create(&model, &cfg, &err) != 0) {
    CHECK(0, "model: %s", err.message);
    return;
  }
  gemma_model_init_random(&model, 3);
  CHECK(train_state_init(&state, &model, &ac, &rules, &err) == 0, "state: %s", err.message);
  sft_objective_init(&sft, &cfg, &obj);
  int64_t offsets[ROWS + 1];
  int32_t tokens[ROWS * 16];
  uint8_t mask[ROWS * 16];
  Dataset ds;
  make_dataset(&ds, offsets, tokens, mask, cfg.vocab_size);
  char out[1024], tb_dir[1100], files[4][1024], why[256] = "";
  snprintf(out, sizeof out, "%s/run", base);
  snprintf(tb_dir, sizeof tb_dir, "%s/tb", out);
  TrainLoopConfig c;
  train_loop_config_default(&c);
  c.out_dir = out;
  c.steps = 3;
  c.micro_batch = 2;
  c.eval_every = 2;
  c.schedule.base_lr = 1e-3;
  c.schedule.total_steps = 3;
  c.tensorboard = 1;
  TrainSummary s;
  CHECK(train_run(&c, &state, &obj, &ds, &ds, &s, &err) == 0, "train: %s", err.message);
  size_t size = 0;
  char path[1100];
  snprintf(path, sizeof path, "%s/metrics.jsonl", out);
  char *text = file_read_all(path, 1 << 20, &size, &err);
  Event ev[8];
  int n = list_event_files(tb_dir, files, 4) == 1 ? read_events(files[0], ev, 8, why, sizeof why) : -1;
  CHECK(n == 5, "version, START, 3 rows: %d %s", n, why);
  int line = 0, compared = 0;
  for (char *p = text, *end; n == 5 && p && *p; p = end + 1, line++) {
    end = strchr(p, '\n');
    if (!end) break;
    *end = 0;
    cJSON *row = cJSON_Parse(p);
    const Event *e = &ev[2 + line];
    CHECK(row && e->step == line + 1, "line %d: step %lld", line, (long long)e->step);
    for (const cJSON *f = row ? row->child : NULL; f; f = f->next) {
      if (!cJSON_IsNumber(f) || !strcmp(f->string, "step")) continue;
      const float *v = scalar(e, f->string);
      CHECK(v && *v == (float)f->valuedouble, "step %d %s: %g vs %g", line + 1, f->string, v ? *v : -999.0,
            f->valuedouble);
      compared++;
    }
    CHECK(line > 0 || scalar(e, "run/blas_threads"), "step 1 carries run/blas_threads");
    CHECK((line == 0) == (scalar(e, "eval_loss") == NULL), "eval_loss at steps 2 and 3 only (line %d)", line);
    cJSON_Delete(row);
  }
  CHECK(line == 3 && compared >= 3 * 8, "3 lines, every number compared (%d)", compared);
  free(text);
  sft_objective_free(&sft);
  train_state_free(&state);
  gemma_model_free(&model);
}

int main(void) {
  char base[] = "/tmp/fimi_test_tensorboard_XXXXXX";
  if (!mkdtemp(base)) return 1;
  test_crc();
  test_write_and_read(base);
  test_decoder_catches_corruption(base);
  test_write_failures(base);
  test_train_loop(base);
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", base);
  if (test_failures == 0 && system(cmd) != 0) printf("could not remove %s\n", base);
  TEST_MAIN_END();
}
