// eval/report_plot.c: data files and gnuplot scripts for `fimi report`, and
// running gnuplot on them (see report_plot.h). gnuplot reads the numbers
// from data files and its commands from a script file; nothing passes
// through a shell, and every file name or label in a script is a quoted
// gnuplot string.
#include "eval/report_plot.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"

extern char **environ;

#define PLOT_PATH_MAX 4096

// ---- curves ----------------------------------------------------------------------

int plot_panel_add(PlotPanel *p, const char *legend, PlotStyle style, const char *color, const double *x,
                   const double *y, int n, FimiError *err) {
  int finite = 0;
  for (int i = 0; i < n; i++) finite += isfinite(x[i]) && isfinite(y[i]);
  if (finite == 0) return 0;
  if (p->curves == PLOT_MAX_CURVES) return fimi_fail(err, "%s: too many curves", p->name);
  PlotCurve *c = &p->curve[p->curves];
  memset(c, 0, sizeof *c);
  c->x = fimi_malloc((size_t)finite * sizeof *c->x, err);
  c->y = fimi_malloc((size_t)finite * sizeof *c->y, err);
  if (!c->x || !c->y) {
    free(c->x);
    free(c->y);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (isfinite(x[i]) && isfinite(y[i])) c->x[c->n] = x[i], c->y[c->n++] = y[i];
  snprintf(c->legend, sizeof c->legend, "%s", legend);
  c->style = style;
  c->color = color;
  p->curves++;
  return 0;
}

int plot_panel_points(const PlotPanel *p) {
  int n = 0;
  for (int c = 0; c < p->curves; c++) n += p->curve[c].n;
  return n;
}

void plot_panel_free(PlotPanel *p) {
  for (int c = 0; c < p->curves; c++) free(p->curve[c].x), free(p->curve[c].y);
  p->curves = 0;
}

// ---- files and quoting -----------------------------------------------------------

// A gnuplot single-quoted string: a quote inside is doubled; control
// characters (a label's newline) become spaces so the command stays one line.
static void put_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputs("''", f);
    else fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
  }
  fputc('\'', f);
}

// A label as one double-quoted column of a gnuplot data file (which has no
// escapes: a double quote becomes a single one).
static void put_data_label(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) fputc(*s == '"' ? '\'' : (unsigned char)*s < 0x20 ? ' ' : *s, f);
  fputc('"', f);
}

static int has_control_char(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20) return 1;
  return 0;
}

// OUT/gnuplot/NAME.EXT (ext "png" means OUT/NAME.png, beside the others' folder).
static int plot_path(char *out, const char *out_dir, const char *name, const char *ext, FimiError *err) {
  if (has_control_char(out_dir)) return fimi_fail(err, "%s: the output folder's name has a control character", out_dir);
  int n = !strcmp(ext, "png") ? snprintf(out, PLOT_PATH_MAX, "%s/%s.png", out_dir, name)
                              : snprintf(out, PLOT_PATH_MAX, "%s/gnuplot/%s.%s", out_dir, name, ext);
  return n < PLOT_PATH_MAX ? 0 : fimi_fail(err, "%s: path too long", out_dir);
}

static FILE *open_plot_file(const char *out_dir, const char *name, const char *ext, char *path, FimiError *err) {
  char dir[PLOT_PATH_MAX];
  if (path_join(dir, sizeof dir, out_dir, "gnuplot", err) != 0 || dir_create(dir, err) != 0) return NULL;
  if (plot_path(path, out_dir, name, ext, err) != 0) return NULL;
  FILE *f = fopen(path, "w");
  if (!f) fimi_fail(err, "cannot write %s: %s", path, strerror(errno));
  return f;
}

static int close_plot_file(FILE *f, const char *path, FimiError *err) {
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  return bad ? fimi_fail(err, "cannot write %s", path) : 0;
}

// The PNG terminal: cairo (antialiased) when this gnuplot has it, else libgd's.
static void put_header(FILE *f, const char *out_dir, const char *name, int width, int height, FimiError *err) {
  char png[PLOT_PATH_MAX];
  fprintf(f, "# written by `fimi report`; gnuplot draws %s.png from it\n", name);
  fprintf(f, "if (strstrt(GPVAL_TERMINALS, ' pngcairo ') > 0) {\n"
             "  set terminal pngcairo size %d,%d font 'sans,11' noenhanced\n"
             "} else {\n"
             "  set terminal png size %d,%d noenhanced\n"
             "}\n",
          width, height, width, height);
  if (plot_path(png, out_dir, name, "png", err) == 0) {
    fputs("set output ", f);
    put_quoted(f, png);
    fputc('\n', f);
  }
}

// ---- line panels -----------------------------------------------------------------

static int write_panel_data(const PlotPanel *p, const char *out_dir, FimiError *err) {
  char path[PLOT_PATH_MAX];
  FILE *f = open_plot_file(out_dir, p->name, "dat", path, err);
  if (!f) return -1;
  fprintf(f, "# %s: one block per curve (gnuplot index 0, 1, ...): step value\n", p->title);
  for (int c = 0; c < p->curves; c++) {
    fprintf(f, "%s# %d: %s\n", c ? "\n\n" : "", c, p->curve[c].legend);
    for (int i = 0; i < p->curve[c].n; i++) fprintf(f, "%.9g %.9g\n", p->curve[c].x[i], p->curve[c].y[i]);
  }
  return close_plot_file(f, path, err);
}

static const char *curve_style(const PlotCurve *c) {
  switch (c->style) {
    case PLOT_RAW: return c->n <= 60 ? "linespoints pt 7 ps 0.5 lw 1" : "lines lw 1";
    case PLOT_MEAN: return "lines lw 3";
    case PLOT_POINTS: return "linespoints pt 7 ps 1.2 lw 2";
    case PLOT_MARK: return "points pt 6 ps 4 lw 3";
  }
  return "lines";
}

// The commands that draw one panel (after `reset`, so panels of an overview
// do not inherit each other's settings).
static int put_panel_body(FILE *f, const PlotPanel *p, const char *out_dir, FimiError *err) {
  char dat[PLOT_PATH_MAX];
  if (plot_path(dat, out_dir, p->name, "dat", err) != 0) return -1;
  fputs("reset\nset title ", f);
  put_quoted(f, p->title);
  fputs("\nset xlabel 'training step'\nset ylabel ", f);
  put_quoted(f, p->ylabel);
  // Steps start at 0 (the initial weights' validation) or 1: the axis starts at 0.
  fputs("\nset grid\nset key below horizontal\nset xrange [0:*]\n", f);
  if (p->unit_range) fputs("set yrange [-0.02:1.02]\n", f);
  fputs("plot ", f);
  for (int c = 0; c < p->curves; c++) {
    const PlotCurve *cv = &p->curve[c];
    if (c) fputs(", \\\n     ", f);
    put_quoted(f, dat);
    fprintf(f, " index %d using 1:2 with %s lc rgb '%s' title ", c, curve_style(cv), cv->color);
    put_quoted(f, cv->legend);
  }
  if (p->has_reference) {
    fprintf(f, ", \\\n     %.9g with lines dt 2 lw 2 lc rgb '#555555' title ", p->reference);
    put_quoted(f, p->reference_legend);
  }
  fputc('\n', f);
  return 0;
}

int plot_write_panel(const PlotPanel *p, const char *out_dir, FimiError *err) {
  if (write_panel_data(p, out_dir, err) != 0) return -1;
  char path[PLOT_PATH_MAX];
  FILE *f = open_plot_file(out_dir, p->name, "gp", path, err);
  if (!f) return -1;
  put_header(f, out_dir, p->name, 1000, 600, err);
  int rc = put_panel_body(f, p, out_dir, err);
  int closed = close_plot_file(f, path, err);
  return rc != 0 ? rc : closed;
}

int plot_write_overview(const PlotPanel *panels, int count, const char *name, const char *title, const char *out_dir,
                        FimiError *err) {
  char path[PLOT_PATH_MAX];
  int cols = count < 2 ? 1 : 2, rows = (count + cols - 1) / cols;
  FILE *f = open_plot_file(out_dir, name, "gp", path, err);
  if (!f) return -1;
  put_header(f, out_dir, name, 900 * cols, 520 * rows + 40, err);
  fprintf(f, "set multiplot layout %d,%d title ", rows, cols);
  put_quoted(f, title);
  fputc('\n', f);
  int rc = 0;
  for (int i = 0; i < count && rc == 0; i++) rc = put_panel_body(f, &panels[i], out_dir, err);
  fputs("unset multiplot\n", f);
  int closed = close_plot_file(f, path, err);
  return rc != 0 ? rc : closed;
}

// ---- bar charts ------------------------------------------------------------------

static int write_bars_data(const PlotBars *b, const char *out_dir, FimiError *err) {
  char path[PLOT_PATH_MAX];
  FILE *f = open_plot_file(out_dir, b->name, "dat", path, err);
  if (!f) return -1;
  fprintf(f, "# %s: one row per model; ? = not in that file\n# label", b->title);
  for (int j = 0; j < b->bars; j++) fprintf(f, " %s", b->bar_label[j]);
  fputc('\n', f);
  for (int g = 0; g < b->groups; g++) {
    put_data_label(f, b->group_label[g]);
    for (int j = 0; j < b->bars; j++) {
      double v = b->values[g * b->bars + j];
      if (isfinite(v)) fprintf(f, " %.9g", v);
      else fputs(" ?", f);
    }
    fputc('\n', f);
  }
  return close_plot_file(f, path, err);
}

static const char *const bar_colors[PLOT_MAX_BARS] = {"#1f5fa8", "#ff7f0e", "#2ca02c", "#d62728",
                                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static void put_bars_body(FILE *f, const PlotBars *b, const char *dat) {
  fputs("reset\nset title ", f);
  put_quoted(f, b->title);
  fputs("\nset ylabel ", f);
  put_quoted(f, b->ylabel);
  fputs("\nset datafile missing '?'\nset style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.85 border rgb '#333333'\nset yrange [0:1.1]\nset grid ytics\n"
        "set key below horizontal\nset xtics nomirror\n",
        f);
  // Bar j of group g stands at g + (j - (bars-1)/2) / (bars + gap): its value
  // is printed above it.
  fputs("plot ", f);
  for (int j = 0; j < b->bars; j++) {
    if (j) fputs(", \\\n     ", f);
    put_quoted(f, dat);
    fprintf(f, " using %d%s lc rgb '%s' title ", j + 2, j ? "" : ":xtic(1)", bar_colors[j]);
    put_quoted(f, b->bar_label[j]);
  }
  for (int j = 0; j < b->bars; j++) {
    fputs(", \\\n     ", f);
    put_quoted(f, dat);
    fprintf(f, " using ($0 + (%d - %g) / %d.0):%d:(sprintf('%%.3f', $%d)) with labels offset 0,0.7 font ',9' notitle",
            j, (b->bars - 1) / 2.0, b->bars + 1, j + 2, j + 2);
  }
  fputc('\n', f);
}

int plot_write_bars(const PlotBars *b, const char *out_dir, FimiError *err) {
  if (write_bars_data(b, out_dir, err) != 0) return -1;
  char path[PLOT_PATH_MAX], dat[PLOT_PATH_MAX];
  if (plot_path(dat, out_dir, b->name, "dat", err) != 0) return -1;
  FILE *f = open_plot_file(out_dir, b->name, "gp", path, err);
  if (!f) return -1;
  int width = 260 + 70 * b->groups * (b->bars + 1);
  put_header(f, out_dir, b->name, width < 900 ? 900 : width, 600, err);
  put_bars_body(f, b, dat);
  return close_plot_file(f, path, err);
}

// ---- running gnuplot -------------------------------------------------------------

int plot_find_gnuplot(char *out, size_t size) {
  const char *path = getenv("PATH");
  if (!path || !*path) return -1;
  for (const char *dir = path;; dir++) {
    const char *end = strchr(dir, ':');
    size_t len = end ? (size_t)(end - dir) : strlen(dir);
    // An empty PATH entry means the current folder.
    int n = len ? snprintf(out, size, "%.*s/gnuplot", (int)len, dir) : snprintf(out, size, "./gnuplot");
    struct stat st;
    if (n > 0 && (size_t)n < size && stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
    if (!end) return -1;
    dir = end;
  }
}

int plot_run(const char *gnuplot, const char *out_dir, const char *name, FimiError *err) {
  char script[PLOT_PATH_MAX];
  if (plot_path(script, out_dir, name, "gp", err) != 0) return -1;
  char *argv[] = {"gnuplot", script, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, gnuplot, NULL, NULL, argv, environ);
  if (rc != 0) return fimi_fail(err, "cannot run %s: %s", gnuplot, strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return fimi_fail(err, "waiting for gnuplot: %s", strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFEXITED(status))
    return fimi_fail(err, "gnuplot failed on %s (exit %d; its message is above)", script, WEXITSTATUS(status));
  return fimi_fail(err, "gnuplot was killed by signal %d on %s", WTERMSIG(status), script);
}
