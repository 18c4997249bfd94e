// eval/report_metrics.c: metrics.jsonl into columns (see report_metrics.h).
#include "eval/report_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"

// train/loop.c accepts metrics files up to this size on a resume; so does the report.
#define METRICS_FILE_MAX_BYTES ((size_t)1 << 30)

static int grow(MetricsTable *t, int capacity, FimiError *err) {
  int64_t *steps = realloc(t->steps, (size_t)capacity * sizeof *steps);
  if (!steps) return fimi_fail(err, "out of memory reading metrics");
  t->steps = steps;
  for (int f = 0; f < t->fields; f++) {
    double *v = realloc(t->values[f], (size_t)capacity * sizeof *v);
    if (!v) return fimi_fail(err, "out of memory reading metrics");
    t->values[f] = v;
  }
  return 0;
}

// One line's object into row t->rows; `where` is "path:LINE".
static int read_row(MetricsTable *t, const cJSON *obj, const char *where, FimiError *err) {
  if (!cJSON_IsObject(obj)) return fimi_fail(err, "%s: not a JSON object", where);
  int64_t step = 0;
  if (json_get_int64(obj, "step", 1, &step, where, err) != 0) return -1;
  if (t->rows > 0 && step <= t->steps[t->rows - 1])
    return fimi_fail(err, "%s: step %lld after step %lld (steps must increase)", where, (long long)step,
                     (long long)t->steps[t->rows - 1]);
  t->steps[t->rows] = step;
  for (int f = 0; f < t->fields; f++) {
    double v = NAN;  // absent or null (cJSON writes a NaN loss as null)
    if (json_get_double(obj, t->names[f], 0, &v, where, err) != 0) return -1;
    t->values[f][t->rows] = v;
  }
  t->rows++;
  return 0;
}

static int read_lines(MetricsTable *t, const char *path, const char *text, size_t size, FimiError *err) {
  int capacity = 0, line_no = 0;
  for (const char *line = text; line < text + size;) {
    const char *nl = memchr(line, '\n', (size_t)(text + size - line));
    size_t len = nl ? (size_t)(nl - line) : (size_t)(text + size - line);
    line_no++;
    size_t blank = 0;
    while (blank < len && strchr(" \t\r", line[blank])) blank++;
    if (blank < len) {
      if (t->rows == capacity && grow(t, capacity = capacity ? 2 * capacity : 256, err) != 0) return -1;
      char where[1100];
      snprintf(where, sizeof where, "%s:%d", path, line_no);
      cJSON *obj = json_parse_text(line, len, where, err);
      int rc = obj ? read_row(t, obj, where, err) : -1;
      cJSON_Delete(obj);
      if (rc != 0) return -1;
    }
    line += len + 1;
  }
  return 0;
}

int metrics_table_load(MetricsTable *t, const char *path, const char *const *names, int count, FimiError *err) {
  memset(t, 0, sizeof *t);
  if (count > METRICS_MAX_FIELDS) return fimi_fail(err, "too many metrics fields (%d)", count);
  t->fields = count;
  for (int f = 0; f < count; f++) t->names[f] = names[f];
  size_t size = 0;
  char *text = file_read_all(path, METRICS_FILE_MAX_BYTES, &size, err);
  if (!text) return -1;
  int rc = read_lines(t, path, text, size, err);
  free(text);
  if (rc == 0 && t->rows == 0) rc = fimi_fail(err, "%s: no steps logged yet (the file is empty)", path);
  if (rc != 0) metrics_table_free(t);
  return rc;
}

void metrics_table_free(MetricsTable *t) {
  free(t->steps);
  for (int f = 0; f < t->fields; f++) free(t->values[f]);
  memset(t, 0, sizeof *t);
}

const double *metrics_column(const MetricsTable *t, const char *name) {
  for (int f = 0; f < t->fields; f++)
    if (!strcmp(t->names[f], name)) return t->values[f];
  return NULL;
}

int metrics_has(const MetricsTable *t, const char *name) {
  const double *v = metrics_column(t, name);
  for (int i = 0; v && i < t->rows; i++)
    if (isfinite(v[i])) return 1;
  return 0;
}

void metrics_moving_mean(const double *in, int n, int window, double *out) {
  if (window < 1) window = 1;
  for (int i = 0; i < n; i++) {
    double sum = 0;
    int count = 0;
    for (int j = i - window + 1 < 0 ? 0 : i - window + 1; j <= i; j++)
      if (isfinite(in[j])) sum += in[j], count++;
    out[i] = count ? sum / count : NAN;
  }
}

int64_t metrics_best_step(const char *run_dir) {
  char link[4096], target[256];
  if (snprintf(link, sizeof link, "%s/best", run_dir) >= (int)sizeof link) return -1;
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return -1;
  target[n] = 0;
  // train/checkpoint.c names checkpoints step_NNNNNN.
  long long step = -1;
  char tail = 0;
  if (sscanf(target, "step_%lld%c", &step, &tail) != 1 || step < 0) return -1;
  return (int64_t)step;
}
