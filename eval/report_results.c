// eval/report_results.c: report_results, bar charts of `fimi eval` result
// files (see report.h). Of each file it reads only the label and
// summary.overall / summary.kind.{happy,seq,edge,tools}: reward, strict and
// episodes. A kind no file has gets no bar; a kind some files lack leaves a
// gap in their group.
#include "eval/report.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "eval/report_plot.h"

#define RESULTS_FORMAT "fimi-eval-results"
#define RESULTS_VERSION 1
#define RESULTS_MAX_BYTES ((size_t)1 << 30)

// Column 0 is overall, then the task kinds of DESIGN.md section 6.
#define RESULTS_COLUMNS 5
static const char *const column_name[RESULTS_COLUMNS] = {"overall", "happy", "seq", "edge", "tools"};

typedef struct ResultsFile {
  char label[128];
  double episodes;
  double reward[RESULTS_COLUMNS], strict[RESULTS_COLUMNS];  // NAN = not in the file
} ResultsFile;

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// One summary block ({"reward": R, "strict": S, ...}); reward is required.
static int read_block(const cJSON *block, const char *what, double *reward, double *strict, FimiError *err) {
  if (json_get_double(block, "reward", 1, reward, what, err) != 0) return -1;
  return json_get_double(block, "strict", 0, strict, what, err);
}

static int read_header(const cJSON *root, const char *path, ResultsFile *r, FimiError *err) {
  char format[64] = "", what[1100];
  int version = 0;
  if (json_get_string(root, "format", 1, format, sizeof format, path, err) != 0) return -1;
  if (strcmp(format, RESULTS_FORMAT))
    return fimi_fail(err, "%s: format \"%s\" is not a `fimi eval` result file (%s)", path, format, RESULTS_FORMAT);
  if (json_get_int(root, "version", 1, &version, path, err) != 0) return -1;
  if (version != RESULTS_VERSION)
    return fimi_fail(err, "%s: version %d, this fimi reads version %d", path, version, RESULTS_VERSION);
  snprintf(r->label, sizeof r->label, "%s", base_name(path));
  snprintf(what, sizeof what, "%s", path);
  return json_get_string(root, "label", 0, r->label, sizeof r->label, what, err);
}

static int read_summary(const cJSON *root, const char *path, ResultsFile *r, FimiError *err) {
  char what[1100];
  const cJSON *summary = cJSON_GetObjectItemCaseSensitive(root, "summary");
  const cJSON *overall = cJSON_GetObjectItemCaseSensitive(summary, "overall");
  if (!cJSON_IsObject(overall)) return fimi_fail(err, "%s: summary.overall is missing or not an object", path);
  snprintf(what, sizeof what, "%s: summary.overall", path);
  if (read_block(overall, what, &r->reward[0], &r->strict[0], err) != 0) return -1;
  if (json_get_double(overall, "episodes", 0, &r->episodes, what, err) != 0) return -1;
  const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(summary, "kind");
  if (kinds && !cJSON_IsNull(kinds) && !cJSON_IsObject(kinds))
    return fimi_fail(err, "%s: summary.kind is not an object", path);
  for (int k = 1; k < RESULTS_COLUMNS; k++) {
    const cJSON *block = cJSON_GetObjectItemCaseSensitive(kinds, column_name[k]);
    if (!block || cJSON_IsNull(block)) continue;  // that kind was not evaluated
    snprintf(what, sizeof what, "%s: summary.kind.%s", path, column_name[k]);
    if (read_block(block, what, &r->reward[k], &r->strict[k], err) != 0) return -1;
  }
  return 0;
}

static int read_results(const char *path, ResultsFile *r, FimiError *err) {
  memset(r, 0, sizeof *r);
  r->episodes = NAN;
  for (int k = 0; k < RESULTS_COLUMNS; k++) r->reward[k] = r->strict[k] = NAN;
  cJSON *root = json_parse_file(path, RESULTS_MAX_BYTES, err);
  if (!root) return -1;
  int rc = cJSON_IsObject(root) ? 0 : fimi_fail(err, "%s: not a JSON object", path);
  if (rc == 0) rc = read_header(root, path, r, err);
  if (rc == 0) rc = read_summary(root, path, r, err);
  cJSON_Delete(root);
  return rc;
}

// ---- the chart -------------------------------------------------------------------

// Bars of one measure (reward or strict): columns that some file has.
static int fill_bars(PlotBars *b, const ResultsFile *files, int count, int strict, FimiError *err) {
  int keep[RESULTS_COLUMNS];
  b->bars = 0;
  for (int k = 0; k < RESULTS_COLUMNS; k++) {
    int any = 0;
    for (int i = 0; i < count; i++) any |= isfinite(strict ? files[i].strict[k] : files[i].reward[k]);
    if (any) keep[b->bars] = k, b->bar_label[b->bars++] = column_name[k];
  }
  b->groups = count;
  b->values = fimi_malloc((size_t)(count * (b->bars ? b->bars : 1)) * sizeof *b->values, err);
  if (!b->values) return -1;
  for (int i = 0; i < count; i++) {
    b->group_label[i] = files[i].label;
    for (int j = 0; j < b->bars; j++)
      b->values[i * b->bars + j] = strict ? files[i].strict[keep[j]] : files[i].reward[keep[j]];
  }
  return 0;
}

static void print_bars(FILE *f, const PlotBars *b, const ResultsFile *files) {
  fprintf(f, "\n%s: %s\n  %-32s %8s", b->name, b->title, "model", "episodes");
  for (int j = 0; j < b->bars; j++) fprintf(f, " %10s", b->bar_label[j]);
  fputc('\n', f);
  for (int i = 0; i < b->groups; i++) {
    fprintf(f, "  %-32s", files[i].label);
    if (isfinite(files[i].episodes)) fprintf(f, " %8.0f", files[i].episodes);
    else fprintf(f, " %8s", "-");
    for (int j = 0; j < b->bars; j++) {
      double v = b->values[i * b->bars + j];
      if (isfinite(v)) fprintf(f, " %10.6g", v);
      else fprintf(f, " %10s", "-");
    }
    fputc('\n', f);
  }
}

static int chart(const ResultsFile *files, int count, int strict, const ReportOptions *o, FimiError *err) {
  PlotBars b;
  memset(&b, 0, sizeof b);
  snprintf(b.name, sizeof b.name, "%s", strict ? "results_strict" : "results_reward");
  snprintf(b.title, sizeof b.title, "%s", strict ? "Strict reward, overall and by task kind"
                                                 : "Mean reward, overall and by task kind");
  snprintf(b.ylabel, sizeof b.ylabel, "%s", strict ? "mean strict reward" : "mean reward");
  if (fill_bars(&b, files, count, strict, err) != 0) return -1;
  int rc = 0;
  if (b.bars > 0) {
    print_bars(o->text, &b, files);
    rc = plot_write_bars(&b, o->out_dir, err);
    if (rc == 0 && o->gnuplot) rc = plot_run(o->gnuplot, o->out_dir, b.name, err);
    if (rc == 0 && o->gnuplot) fprintf(o->text, "wrote %s/%s.png\n", o->out_dir, b.name);
  }
  free(b.values);
  return rc;
}

int report_results(const char *const *paths, int count, const ReportOptions *o, FimiError *err) {
  if (count < 1) return fimi_fail(err, "no result files given");
  if (count > PLOT_MAX_GROUPS) return fimi_fail(err, "%d result files: at most %d in one chart", count, PLOT_MAX_GROUPS);
  ResultsFile *files = fimi_calloc((size_t)count, sizeof *files, err);
  if (!files) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < count; i++) rc = read_results(paths[i], &files[i], err);
  if (rc == 0) rc = dir_create(o->out_dir, err);
  if (rc == 0) rc = chart(files, count, 0, o, err);
  if (rc == 0) rc = chart(files, count, 1, o, err);
  free(files);
  return rc;
}
