// eval/report_plot.h: the gnuplot side of `fimi report`. Defines PlotPanel
// (curves against training step, an optional horizontal reference), PlotBars
// (clustered bars: one group per model, one bar per column), the writers of
// their data files and gnuplot scripts (OUT/gnuplot/NAME.{dat,gp}, drawing
// OUT/NAME.png), plot_find_gnuplot (a gnuplot on PATH) and plot_run (runs
// gnuplot on one script, no shell in between).
#ifndef FIMI_EVAL_REPORT_PLOT_H
#define FIMI_EVAL_REPORT_PLOT_H

#include <stddef.h>

#include "core/error.h"

typedef enum PlotStyle {
  PLOT_RAW,     // per-step values: a thin light line
  PLOT_MEAN,    // their moving-window mean: a thick line
  PLOT_POINTS,  // sparse values (scored steps): points joined by lines
  PLOT_MARK,    // one highlighted point (the best step): a large ring
} PlotStyle;

typedef struct PlotCurve {
  char legend[160];
  PlotStyle style;
  const char *color;  // "#rrggbb"
  int n;
  double *x, *y;      // [n], malloc'd, finite values only
} PlotCurve;

#define PLOT_MAX_CURVES 8
#define PLOT_NAME_MAX 64

typedef struct PlotPanel {
  char name[PLOT_NAME_MAX];  // file stem: OUT/NAME.png
  char title[160], ylabel[96];
  int unit_range;            // values in [0, 1]: fix the y axis there
  int has_reference;         // a dashed horizontal line at `reference`
  double reference;
  char reference_legend[160];
  int curves;
  PlotCurve curve[PLOT_MAX_CURVES];
} PlotPanel;

// Adds a curve of the finite (x[i], y[i]); fails only when out of memory or
// out of curve slots. A curve with no finite point is not added.
int plot_panel_add(PlotPanel *p, const char *legend, PlotStyle style, const char *color, const double *x,
                   const double *y, int n, FimiError *err);
// The points of all curves (0: nothing to draw).
int plot_panel_points(const PlotPanel *p);
void plot_panel_free(PlotPanel *p);

#define PLOT_MAX_BARS 8
#define PLOT_MAX_GROUPS 64

typedef struct PlotBars {
  char name[PLOT_NAME_MAX];
  char title[160], ylabel[96];
  int groups, bars;
  const char *group_label[PLOT_MAX_GROUPS];  // one per group (a model)
  const char *bar_label[PLOT_MAX_BARS];
  double *values;                    // [groups][bars]; NAN = no bar
} PlotBars;

// OUT/gnuplot/NAME.dat and NAME.gp for one panel (NAME.png when run).
int plot_write_panel(const PlotPanel *p, const char *out_dir, FimiError *err);
// All panels in one picture (OUT/NAME.png), two a row; it reads the
// panels' data files, so plot_write_panel comes first.
int plot_write_overview(const PlotPanel *panels, int count, const char *name, const char *title, const char *out_dir,
                        FimiError *err);
int plot_write_bars(const PlotBars *b, const char *out_dir, FimiError *err);

// Finds an executable gnuplot on PATH: 0 with its path in out, -1 if none.
int plot_find_gnuplot(char *out, size_t size);
// Runs `gnuplot OUT/gnuplot/NAME.gp` and waits; fails when gnuplot does.
int plot_run(const char *gnuplot, const char *out_dir, const char *name, FimiError *err);

#endif
