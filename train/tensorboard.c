// train/tensorboard.c: TensorBoard event files (see tensorboard.h). The
// Event protos are encoded by protobuf-c (code generated from
// train/tensorboard_event.proto), the CRC32C of the framing is ISA-L's.
#define _POSIX_C_SOURCE 200809L
#include "train/tensorboard.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <isa-l/crc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "train/tensorboard_event.pb-c.h"

#define TB_FILE_PREFIX "events.out.tfevents."

// ---- TFRecord framing ---------------------------------------------------------------

uint32_t tb_masked_crc32c(const void *data, size_t size) {
  // ISA-L's crc32_iscsi inverts neither its start value nor its result, and
  // takes an int length: CRC32C is ~crc32_iscsi(data, ~0), fed in chunks.
  const unsigned char *p = data;
  uint32_t crc = 0xffffffffu;
  while (size > 0) {
    int chunk = size > (1u << 30) ? 1 << 30 : (int)size;
    crc = crc32_iscsi((unsigned char *)p, chunk, crc);
    p += chunk;
    size -= (size_t)chunk;
  }
  crc = ~crc;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
}

// A failed write closes the file, so the caller hears of it once. error:
// an errno value, or 0 when `what` says it all.
static int fail_and_close(TbWriter *w, const char *what, int error, FimiError *err) {
  fclose(w->f);
  w->f = NULL;
  if (!error) return fimi_fail(err, "%s: %s", w->path, what);
  return fimi_fail(err, "%s: %s: %s", w->path, what, strerror(error));
}

static int write_record(TbWriter *w, const uint8_t *data, size_t size, FimiError *err) {
  uint8_t head[12], tail[4];
  put_le(head, size, 8);
  put_le(head + 8, tb_masked_crc32c(head, 8), 4);
  put_le(tail, tb_masked_crc32c(data, size), 4);
  errno = 0;
  if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(data, 1, size, w->f) != size ||
      fwrite(tail, 1, sizeof tail, w->f) != sizeof tail || fflush(w->f) != 0)
    return fail_and_close(w, "cannot write", errno ? errno : EIO, err);
  return 0;
}

static double wall_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int write_event(TbWriter *w, Tensorboard__Event *e, FimiError *err) {
  e->wall_time = wall_seconds();
  size_t size = tensorboard__event__get_packed_size(e);
  uint8_t *data = malloc(size ? size : 1);
  if (!data) return fail_and_close(w, "cannot encode an event", ENOMEM, err);
  tensorboard__event__pack(e, data);
  int rc = write_record(w, data, size, err);
  free(data);
  return rc;
}

// ---- opening ------------------------------------------------------------------------

// The largest SECONDS among dir's event files (-1: none). TensorBoard reads
// a folder's files in name order, so a new file must sort after them even
// when it is opened within the same second (a quick resume).
static long long newest_file_seconds(const char *dir) {
  long long newest = -1;
  DIR *d = opendir(dir);
  if (!d) return newest;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, TB_FILE_PREFIX, strlen(TB_FILE_PREFIX)) != 0) continue;
    long long seconds = strtoll(e->d_name + strlen(TB_FILE_PREFIX), NULL, 10);
    if (seconds > newest) newest = seconds;
  }
  closedir(d);
  return newest;
}

int tb_writer_open(TbWriter *w, const char *dir, int64_t first_step, FimiError *err) {
  w->f = NULL;
  w->path[0] = 0;
  if (dir_create(dir, err) != 0) return -1;
  char host[256];
  if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
  host[sizeof host - 1] = 0;
  long long seconds = (long long)time(NULL), newest = newest_file_seconds(dir);
  if (seconds <= newest) seconds = newest + 1;
  int n = snprintf(w->path, sizeof w->path, "%s/" TB_FILE_PREFIX "%010lld.%s.%ld", dir, seconds, host, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof w->path) return fimi_fail(err, "%s: path too long for an event file", dir);
  // "x": a new file, never one another writer holds.
  if (!(w->f = fopen(w->path, "wbx"))) return fimi_fail(err, "cannot create %s: %s", w->path, strerror(errno));
  Tensorboard__Event e = TENSORBOARD__EVENT__INIT;
  e.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
  e.file_version = (char *)"brain.Event:2";
  if (write_event(w, &e, err) != 0) return -1;
  Tensorboard__SessionLog start = TENSORBOARD__SESSION_LOG__INIT;
  start.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
  e = (Tensorboard__Event)TENSORBOARD__EVENT__INIT;
  e.step = first_step;
  e.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
  e.session_log = &start;
  return write_event(w, &e, err);
}

int tb_writer_close(TbWriter *w, FimiError *err) {
  if (!w->f) return 0;
  FILE *f = w->f;
  w->f = NULL;
  errno = 0;
  if (fclose(f) != 0) return fimi_fail(err, "%s: cannot write: %s", w->path, strerror(errno ? errno : EIO));
  return 0;
}

// ---- a metrics row as scalars -------------------------------------------------------

typedef struct Scalars {
  char (*tags)[TB_TAG_MAX];
  float *values;
  size_t count, capacity;
  int out_of_memory;
} Scalars;

// simple_value is a float: a finite double beyond its range becomes an
// infinity of its sign (the conversion itself would be undefined).
static float to_float(double v) {
  if (isfinite(v) && fabs(v) > FLT_MAX) return v > 0 ? INFINITY : -INFINITY;
  return (float)v;
}

static void add_scalar(Scalars *s, const char *tag, double value) {
  if (s->count == s->capacity) {
    size_t capacity = s->capacity ? 2 * s->capacity : 64;
    void *tags = realloc(s->tags, capacity * sizeof *s->tags);
    if (tags) s->tags = tags;
    void *values = tags ? realloc(s->values, capacity * sizeof *s->values) : NULL;
    if (values) s->values = values;
    if (!tags || !values) {
      s->out_of_memory = 1;
      return;
    }
    s->capacity = capacity;
  }
  strcpy(s->tags[s->count], tag);
  s->values[s->count++] = to_float(value);
}

static void collect(Scalars *s, const cJSON *item, char *tag, size_t len);

// The children of an object or array, each under tag/KEY (tag/INDEX in an
// array); a child whose tag would not fit in TB_TAG_MAX is left out.
static void collect_children(Scalars *s, const cJSON *parent, char *tag, size_t len, const char *skip) {
  int index = 0;
  for (const cJSON *c = parent->child; c; c = c->next, index++) {
    char number[16];
    const char *key = c->string;
    if (cJSON_IsArray(parent)) {
      snprintf(number, sizeof number, "%d", index);
      key = number;
    }
    if (!key || (skip && !strcmp(key, skip))) continue;
    int n = snprintf(tag + len, TB_TAG_MAX - len, "%s%s", len ? "/" : "", key);
    if (n >= 0 && (size_t)n < TB_TAG_MAX - len) collect(s, c, tag, len + (size_t)n);
    tag[len] = 0;
  }
}

static void collect(Scalars *s, const cJSON *item, char *tag, size_t len) {
  if (cJSON_IsNumber(item)) add_scalar(s, tag, item->valuedouble);
  else if (cJSON_IsBool(item)) add_scalar(s, tag, cJSON_IsTrue(item) ? 1.0 : 0.0);
  else if (cJSON_IsObject(item) || cJSON_IsArray(item)) collect_children(s, item, tag, len, NULL);
}

static int write_scalars(TbWriter *w, int64_t step, const Scalars *s, FimiError *err) {
  size_t n = s->count ? s->count : 1;
  Tensorboard__Summary__Value *values = calloc(n, sizeof *values);
  Tensorboard__Summary__Value **list = calloc(n, sizeof *list);
  int rc = values && list ? 0 : fail_and_close(w, "cannot encode an event", ENOMEM, err);
  for (size_t i = 0; rc == 0 && i < s->count; i++) {
    tensorboard__summary__value__init(&values[i]);
    values[i].tag = s->tags[i];
    values[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    values[i].simple_value = s->values[i];
    list[i] = &values[i];
  }
  Tensorboard__Summary summary = TENSORBOARD__SUMMARY__INIT;
  summary.n_value = s->count;
  summary.value = list;
  Tensorboard__Event e = TENSORBOARD__EVENT__INIT;
  e.step = step;
  e.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
  e.summary = &summary;
  if (rc == 0) rc = write_event(w, &e, err);
  free(list);
  free(values);
  return rc;
}

int tb_writer_write_row(TbWriter *w, const cJSON *row, FimiError *err) {
  if (!w->f) return 0;
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
  if (!cJSON_IsNumber(step)) return fail_and_close(w, "a metrics row without a numeric step", 0, err);
  Scalars s = {0};
  char tag[TB_TAG_MAX] = "";
  collect_children(&s, row, tag, 0, "step");
  int rc = s.out_of_memory ? fail_and_close(w, "cannot encode an event", ENOMEM, err)
                           : write_scalars(w, (int64_t)step->valuedouble, &s, err);
  free(s.tags);
  free(s.values);
  return rc;
}
