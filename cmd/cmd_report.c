// cmd/cmd_report.c: `fimi report RUN_DIR` and `fimi report --results A.json
// [B.json ...]`: plots of a training run's metrics.jsonl, or bar charts of
// `fimi eval` result files (eval/report.h, docs/report.md). The numbers are
// printed first, so a machine without gnuplot still shows the data; there
// the command says which package draws the PNGs and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "eval/report.h"
#include "eval/report_plot.h"

#define MAX_RESULT_FILES 64

static void usage(FILE *out) {
  fprintf(out,
          "usage: fimi report RUN_DIR [--out DIR] [--window N]\n"
          "       fimi report --results A.json [B.json ...] [--out DIR]\n"
          "  RUN_DIR: a `fimi train` output folder (train.out_dir) with metrics.jsonl; the panels\n"
          "    follow the objective: GRPO train reward, held-out reward with the best step,\n"
          "    all-fail groups, tokens per episode; DPO loss, reward margins, preference\n"
          "    accuracy, chosen/rejected rewards; SFT loss and learning rate\n"
          "  --results: `fimi eval` result files, one bar group per file (reward and strict,\n"
          "    overall and by task kind)\n"
          "  --out DIR     where the PNGs go (default RUN_DIR/report, or ./report with --results);\n"
          "                gnuplot's data files and scripts go to DIR/gnuplot/\n"
          "  --window N    moving-window mean over the last N steps (default %d)\n"
          "  Every panel's numbers are printed; the PNGs need gnuplot (apt-get install gnuplot-nox).\n",
          REPORT_DEFAULT_WINDOW);
}

typedef struct ReportArgs {
  const char *run_dir, *out_dir;
  const char *results[MAX_RESULT_FILES];
  int results_count, results_mode;
  long window;
} ReportArgs;

static int usage_error(const char *message, const char *arg) {
  fprintf(stderr, "fimi report: %s%s (see fimi report --help)\n", message, arg ? arg : "");
  return CLI_EXIT_USAGE;
}

// Fills a from argv; returns 0, or the exit code of a usage error.
static int parse_args(int argc, char **argv, ReportArgs *a) {
  FimiError err = {0};
  *a = (ReportArgs){.window = REPORT_DEFAULT_WINDOW};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--out") || !strcmp(arg, "--window")) {
      const char *value = cli_flag_value(argc, argv, &i, &err);
      if (!value) return usage_error(err.message, NULL);
      if (!strcmp(arg, "--out")) a->out_dir = value;
      else if (cli_parse_int("--window", value, 1, 1000000, &a->window, &err) != 0)
        return usage_error(err.message, NULL);
    } else if (!strcmp(arg, "--results")) {
      a->results_mode = 1;
    } else if (arg[0] == '-' && arg[1]) {
      return usage_error("unknown option ", arg);
    } else if (a->results_mode) {
      if (a->results_count == MAX_RESULT_FILES) return usage_error("too many result files", NULL);
      a->results[a->results_count++] = arg;
    } else if (a->run_dir) {
      return usage_error("one RUN_DIR only; extra argument ", arg);
    } else {
      a->run_dir = arg;
    }
  }
  if (a->results_mode && a->run_dir) return usage_error("give RUN_DIR or --results, not both", NULL);
  if (a->results_mode && a->results_count == 0) return usage_error("--results needs at least one file", NULL);
  if (!a->results_mode && !a->run_dir) return usage_error("missing RUN_DIR", NULL);
  return 0;
}

int cmd_report(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 1)) {
    usage(stdout);
    return 0;
  }
  ReportArgs a;
  int rc = parse_args(argc, argv, &a);
  if (rc != 0) return rc;
  char out_dir[4096], gnuplot[4096];
  if (a.out_dir) snprintf(out_dir, sizeof out_dir, "%s", a.out_dir);
  else if (a.results_mode) snprintf(out_dir, sizeof out_dir, "report");
  else snprintf(out_dir, sizeof out_dir, "%s/report", a.run_dir);
  int have_gnuplot = plot_find_gnuplot(gnuplot, sizeof gnuplot) == 0;
  ReportOptions o = {.out_dir = out_dir, .window = (int)a.window, .gnuplot = have_gnuplot ? gnuplot : NULL,
                     .text = stdout};
  FimiError err = {0};
  rc = a.results_mode ? report_results(a.results, a.results_count, &o, &err) : report_run(a.run_dir, &o, &err);
  fflush(stdout);
  if (rc != 0) return cli_fail("report", &err);
  if (!have_gnuplot)
    fprintf(stderr,
            "fimi report: gnuplot is not installed (not on PATH), so no PNG was drawn; the numbers above are the "
            "report. Install it with `apt-get install gnuplot-nox` and run this again, or run gnuplot on "
            "%s/gnuplot/*.gp.\n",
            out_dir);
  return 0;
}
