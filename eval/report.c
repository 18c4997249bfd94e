// eval/report.c: report_run, the panels of a training run (see report.h).
// Which panels depends on the objective, told apart by its fields in
// metrics.jsonl: GRPO logs reward_mean (rl/grpo.c), DPO rewards/margins
// (dpo/objective.c), SFT only the loop's loss and lr (train/loop.c). The
// GRPO panels are those of the FiMI paper's Figure 10.
#include "eval/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "eval/report_metrics.h"
#include "eval/report_plot.h"

typedef enum SeriesKind {
  SERIES_STEPS,     // logged every step: drawn with its moving-window mean
  SERIES_LINE,      // logged every step, smooth already (the learning rate)
  SERIES_SCORED,    // logged at the eval cadence only
  SERIES_HELDOUT,   // GRPO validation: scored steps, step 0 = validation_start, best step marked
} SeriesKind;

typedef struct SeriesSpec {
  const char *field, *legend;
  SeriesKind kind;
} SeriesSpec;

typedef enum Reference {
  REF_NONE,
  REF_STEP1,             // the first step's value: rollouts of the initial weights
  REF_VALIDATION_START,  // the held-out reward of the initial weights
} Reference;

typedef struct PanelSpec {
  const char *name, *title, *ylabel;
  int unit_range;
  Reference reference;
  SeriesSpec series[3];
} PanelSpec;

#define END_SPEC {NULL, NULL, 0}

static const PanelSpec grpo_panels[] = {
    {"grpo_train_reward", "Train reward (mean over each step's rollouts)", "reward", 1, REF_STEP1,
     {{"reward_mean", "train reward", SERIES_STEPS}, END_SPEC}},
    {"grpo_heldout_reward", "Held-out reward at the scored steps", "mean reward on the validation tasks", 1,
     REF_VALIDATION_START, {{"validation", "held-out reward", SERIES_HELDOUT}, END_SPEC}},
    {"grpo_all_fail_groups", "Groups in which every rollout failed", "share of the step's groups", 1, REF_STEP1,
     {{"all_fail_groups", "all-fail groups", SERIES_STEPS}, END_SPEC}},
    {"grpo_gen_tokens", "Generated tokens per episode", "tokens", 0, REF_STEP1,
     {{"gen_tokens", "tokens per episode", SERIES_STEPS}, END_SPEC}},
};

static const PanelSpec dpo_panels[] = {
    {"dpo_loss", "DPO loss", "loss", 0, REF_NONE,
     {{"loss", "train", SERIES_STEPS}, {"eval_loss", "eval", SERIES_SCORED}, END_SPEC}},
    {"dpo_reward_margins", "Reward margin (chosen - rejected)", "beta * log-ratio", 0, REF_NONE,
     {{"rewards/margins", "train", SERIES_STEPS}, {"eval_rewards/margins", "eval", SERIES_SCORED}, END_SPEC}},
    {"dpo_accuracy", "Preference accuracy (chosen reward > rejected reward)", "share of pairs", 1, REF_NONE,
     {{"rewards/accuracies", "train", SERIES_STEPS}, {"eval_rewards/accuracies", "eval", SERIES_SCORED}, END_SPEC}},
    {"dpo_rewards", "Implicit rewards of the chosen and rejected answers", "beta * log-ratio", 0, REF_NONE,
     {{"rewards/chosen", "chosen", SERIES_STEPS}, {"rewards/rejected", "rejected", SERIES_STEPS}, END_SPEC}},
};

static const PanelSpec sft_panels[] = {
    {"sft_loss", "SFT loss", "cross-entropy (nats per token)", 0, REF_NONE,
     {{"loss", "train", SERIES_STEPS}, {"eval_loss", "eval", SERIES_SCORED}, END_SPEC}},
    {"sft_lr", "Learning rate", "learning rate", 0, REF_NONE, {{"lr", "learning rate", SERIES_LINE}, END_SPEC}},
};

// Every field a panel above reads, plus the ones that tell the objective apart.
static const char *const report_fields[] = {
    "loss", "lr", "eval_loss", "reward_mean", "validation", "validation_start", "all_fail_groups", "gen_tokens",
    "rewards/margins", "rewards/accuracies", "rewards/chosen", "rewards/rejected", "eval_rewards/margins",
    "eval_rewards/accuracies",
};

typedef struct Objective {
  const char *name;
  const char *evidence;  // the field that identified it
  const PanelSpec *panels;
  int count;
} Objective;

static Objective detect_objective(const MetricsTable *t) {
  if (metrics_has(t, "reward_mean"))
    return (Objective){"grpo", "reward_mean", grpo_panels, (int)(sizeof grpo_panels / sizeof grpo_panels[0])};
  if (metrics_has(t, "rewards/margins"))
    return (Objective){"dpo", "rewards/margins", dpo_panels, (int)(sizeof dpo_panels / sizeof dpo_panels[0])};
  return (Objective){"sft", "no reward fields", sft_panels, (int)(sizeof sft_panels / sizeof sft_panels[0])};
}

// Colours by series slot: a light line for the per-step values, a dark one
// for their mean; held-out points green, the best step red.
static const char *const raw_color[3] = {"#9ecae1", "#fdae6b", "#a1d99b"};
static const char *const mean_color[3] = {"#1f5fa8", "#e6550d", "#238b45"};

// ---- building panels -------------------------------------------------------------

typedef struct RunData {
  const char *run_dir;
  const MetricsTable *t;
  double *x;              // steps as doubles [rows]
  int window;
  int64_t best_step;      // from RUN_DIR/best; -1 when absent
  char best_note[256];    // where the best step came from, or why none is marked
} RunData;

static double first_finite(const double *v, int n) {
  for (int i = 0; v && i < n; i++)
    if (isfinite(v[i])) return v[i];
  return NAN;
}

static int add_steps_series(PlotPanel *p, const RunData *d, const SeriesSpec *s, int slot, FimiError *err) {
  const double *y = metrics_column(d->t, s->field);
  int n = d->t->rows;
  char legend[160];
  if (s->kind == SERIES_LINE) return plot_panel_add(p, s->legend, PLOT_MEAN, mean_color[slot], d->x, y, n, err);
  if (s->kind == SERIES_SCORED) return plot_panel_add(p, s->legend, PLOT_POINTS, mean_color[slot], d->x, y, n, err);
  double *mean = fimi_malloc((size_t)n * sizeof *mean, err);
  if (!mean) return -1;
  metrics_moving_mean(y, n, d->window, mean);
  snprintf(legend, sizeof legend, "%s, per step", s->legend);
  int rc = plot_panel_add(p, legend, PLOT_RAW, raw_color[slot], d->x, y, n, err);
  snprintf(legend, sizeof legend, "%s, mean of the last %d steps", s->legend, d->window);
  if (rc == 0) rc = plot_panel_add(p, legend, PLOT_MEAN, mean_color[slot], d->x, mean, n, err);
  free(mean);
  return rc;
}

// The step whose held-out reward is highest, the first of equals (the
// loop's rule for OUT/best); -1 when nothing was scored.
static int64_t best_from_metrics(const RunData *d, const double *val) {
  int best = -1;
  for (int i = 0; i < d->t->rows; i++)
    if (isfinite(val[i]) && (best < 0 || val[i] > val[best])) best = i;
  return best < 0 ? -1 : d->t->steps[best];
}

// Held-out reward: the initial weights' score at step 0, then the scored
// steps, and a ring on the best step.
static int add_heldout_series(PlotPanel *p, RunData *d, const SeriesSpec *s, FimiError *err) {
  const MetricsTable *t = d->t;
  const double *val = metrics_column(t, s->field);
  double *x = fimi_malloc((size_t)(t->rows + 1) * sizeof *x, err);
  double *y = fimi_malloc((size_t)(t->rows + 1) * sizeof *y, err);
  int rc = x && y ? 0 : -1;
  if (rc == 0) {
    x[0] = 0, y[0] = first_finite(metrics_column(t, "validation_start"), t->rows);
    memcpy(x + 1, d->x, (size_t)t->rows * sizeof *x);
    memcpy(y + 1, val, (size_t)t->rows * sizeof *y);
    rc = plot_panel_add(p, s->legend, PLOT_POINTS, "#238b45", x, y, t->rows + 1, err);
  }
  int64_t best = d->best_step;
  if (best >= 0) {
    snprintf(d->best_note, sizeof d->best_note, "step %lld (RUN_DIR/best)", (long long)best);
  } else if ((best = best_from_metrics(d, val)) >= 0) {
    snprintf(d->best_note, sizeof d->best_note, "step %lld (highest held-out reward; no RUN_DIR/best link)",
             (long long)best);
  }
  for (int i = 0; rc == 0 && best >= 0 && i < t->rows; i++) {
    if (t->steps[i] != best || !isfinite(val[i])) continue;
    char legend[160];
    snprintf(legend, sizeof legend, "selected best: step %lld", (long long)best);
    double bx = d->x[i], by = val[i];
    rc = plot_panel_add(p, legend, PLOT_MARK, "#d62728", &bx, &by, 1, err);
    best = -1;  // marked
  }
  if (rc == 0 && best >= 0) {
    // The link names a step that metrics.jsonl has no held-out reward for.
    size_t len = strlen(d->best_note);
    snprintf(d->best_note + len, sizeof d->best_note - len, ", not scored in metrics.jsonl: not marked");
  }
  free(x);
  free(y);
  return rc;
}

static void set_reference(PlotPanel *p, const PanelSpec *spec, const RunData *d) {
  const MetricsTable *t = d->t;
  if (spec->reference == REF_STEP1) {
    const double *v = metrics_column(t, spec->series[0].field);
    // Only a run that starts at step 1 has the initial weights' rollouts logged.
    if (t->steps[0] == 1 && isfinite(v[0])) {
      p->has_reference = 1, p->reference = v[0];
      snprintf(p->reference_legend, sizeof p->reference_legend, "step 1 (rollouts of the initial weights)");
    }
  } else if (spec->reference == REF_VALIDATION_START) {
    double v = first_finite(metrics_column(t, "validation_start"), t->rows);
    if (isfinite(v)) {
      p->has_reference = 1, p->reference = v;
      snprintf(p->reference_legend, sizeof p->reference_legend, "initial weights (step 0)");
    }
  }
}

static int build_panel(PlotPanel *p, const PanelSpec *spec, RunData *d, FimiError *err) {
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", spec->name);
  snprintf(p->title, sizeof p->title, "%s", spec->title);
  snprintf(p->ylabel, sizeof p->ylabel, "%s", spec->ylabel);
  p->unit_range = spec->unit_range;
  int rc = 0;
  for (int s = 0; rc == 0 && spec->series[s].field; s++) {
    const SeriesSpec *ss = &spec->series[s];
    rc = ss->kind == SERIES_HELDOUT ? add_heldout_series(p, d, ss, err) : add_steps_series(p, d, ss, s, err);
  }
  if (rc == 0) set_reference(p, spec, d);
  return rc;
}

// ---- the numbers -----------------------------------------------------------------

static void put_cell(FILE *f, double v, double x) {
  char cell[64];
  snprintf(cell, sizeof cell, "%.6g@%.0f", v, x);
  fprintf(f, " %16s", cell);
}

static void print_curve(FILE *f, const PlotCurve *c) {
  int lo = 0, hi = 0;
  for (int i = 1; i < c->n; i++) {
    if (c->y[i] < c->y[lo]) lo = i;
    if (c->y[i] > c->y[hi]) hi = i;
  }
  fprintf(f, "  %-48s %6d", c->legend, c->n);
  put_cell(f, c->y[0], c->x[0]);
  put_cell(f, c->y[c->n - 1], c->x[c->n - 1]);
  put_cell(f, c->y[lo], c->x[lo]);
  put_cell(f, c->y[hi], c->x[hi]);
  fputc('\n', f);
  // Sparse curves (scored steps) are short enough to list whole.
  if (c->style == PLOT_POINTS && c->n <= 50) {
    fputs("    value@step:", f);
    for (int i = 0; i < c->n; i++) fprintf(f, " %.6g@%.0f", c->y[i], c->x[i]);
    fputc('\n', f);
  }
}

static void print_panel(FILE *f, const PlotPanel *p) {
  fprintf(f, "\n%s: %s\n", p->name, p->title);
  if (p->curves == 0) {
    fputs("  (no values logged)\n", f);
    return;
  }
  fprintf(f, "  %-48s %6s %16s %16s %16s %16s\n", "curve", "points", "first", "last", "min", "max");
  for (int c = 0; c < p->curves; c++) print_curve(f, &p->curve[c]);
  if (p->has_reference) fprintf(f, "  reference: %s = %.6g\n", p->reference_legend, p->reference);
}

// ---- the report ------------------------------------------------------------------

static int draw(const ReportOptions *o, const char *name, FimiError *err) {
  if (!o->gnuplot) return 0;
  if (plot_run(o->gnuplot, o->out_dir, name, err) != 0) return -1;
  fprintf(o->text, "wrote %s/%s.png\n", o->out_dir, name);
  return 0;
}

// Panels with something to draw: their files, the overview, the PNGs.
static int write_panels(const PlotPanel *panels, int count, const Objective *obj, const char *run_dir,
                        const ReportOptions *o, FimiError *err) {
  PlotPanel drawn[8];
  int n = 0;
  for (int i = 0; i < count; i++)
    if (plot_panel_points(&panels[i]) > 0) drawn[n++] = panels[i];
  if (n == 0) return fimi_fail(err, "%s/metrics.jsonl: no values to plot", run_dir);
  char overview[PLOT_NAME_MAX], title[600];
  snprintf(overview, sizeof overview, "%s_overview", obj->name);
  snprintf(title, sizeof title, "%s run %s", obj->name, run_dir);
  if (dir_create(o->out_dir, err) != 0) return -1;
  for (int i = 0; i < n; i++)
    if (plot_write_panel(&drawn[i], o->out_dir, err) != 0) return -1;
  if (plot_write_overview(drawn, n, overview, title, o->out_dir, err) != 0) return -1;
  fputc('\n', o->text);
  for (int i = 0; i < n; i++)
    if (draw(o, drawn[i].name, err) != 0) return -1;
  return draw(o, overview, err);
}

static int report_table(const char *run_dir, const MetricsTable *t, const ReportOptions *o, FimiError *err) {
  Objective obj = detect_objective(t);
  RunData d = {.run_dir = run_dir, .t = t, .window = o->window, .best_step = metrics_best_step(run_dir)};
  snprintf(d.best_note, sizeof d.best_note, "none (nothing scored)");
  d.x = fimi_malloc((size_t)t->rows * sizeof *d.x, err);
  if (!d.x) return -1;
  for (int i = 0; i < t->rows; i++) d.x[i] = (double)t->steps[i];
  fprintf(o->text, "run %s: %s objective (%s), %d steps logged (%lld..%lld), moving mean over %d steps\n", run_dir,
          obj.name, obj.evidence, t->rows, (long long)t->steps[0], (long long)t->steps[t->rows - 1], o->window);
  PlotPanel panels[8];
  int built = 0, rc = 0;
  for (; rc == 0 && built < obj.count; built++) rc = build_panel(&panels[built], &obj.panels[built], &d, err);
  for (int i = 0; rc == 0 && i < built; i++) {
    print_panel(o->text, &panels[i]);
    if (obj.panels[i].series[0].kind == SERIES_HELDOUT) fprintf(o->text, "  best step: %s\n", d.best_note);
  }
  if (rc == 0) rc = write_panels(panels, built, &obj, run_dir, o, err);
  for (int i = 0; i < built; i++) plot_panel_free(&panels[i]);
  free(d.x);
  return rc;
}

int report_run(const char *run_dir, const ReportOptions *o, FimiError *err) {
  char path[4096];
  if (path_join(path, sizeof path, run_dir, "metrics.jsonl", err) != 0) return -1;
  FILE *probe = fopen(path, "rb");
  if (!probe)
    return fimi_fail(err, "%s: no metrics.jsonl here (is it a `fimi train` output folder, train.out_dir?)", run_dir);
  fclose(probe);
  MetricsTable t;
  if (metrics_table_load(&t, path, report_fields, (int)(sizeof report_fields / sizeof report_fields[0]), err) != 0)
    return -1;
  int rc = report_table(run_dir, &t, o, err);
  metrics_table_free(&t);
  return rc;
}
