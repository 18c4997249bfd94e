// cmd/cmd_eval_bench.c: `fimi eval bench` (docs/evaluation-bench.md): the
// judged bench. `build` turns a task file into the case set; a run plays
// every case n times through `fimi eval`'s harness (a model or a scripted
// agent), then judges each attempt through the Safety, Actions and
// Reasoning & Quality gates and writes the scores with every trajectory;
// `score` judges an existing harness result file against the cases. With
// MLflow configured, a run is also logged as an MLflow run
// (eval/mlflow_eval.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/endpoint.h"
#include "eval/bench_build.h"
#include "eval/bench_judge_model.h"
#include "eval/bench_score.h"
#include "eval/mlflow_eval.h"

static void bench_usage(FILE *out) {
  fprintf(out,
          "usage: fimi eval bench (--model DIR | --agent oracle|do_nothing|random | --endpoint URL --served-model NAME)\n"
          "                       --cases FILE [--judge rubric|model --judge-endpoint URL --judge-model NAME\n"
          "                       [--judge-api-key-file F] [--judge-cache DIR [--judge-cache-mode record|replay]]]\n"
          "                       [--attempts N] [--temperature T] [--top-p P] [--out bench.json]\n"
          "                       [--label NAME] [--tokenizer F] [--device cpu|cuda] [--config F] [--set K=V]\n"
          "                       [--mlflow-uri URI] [--experiment NAME]\n"
          "       fimi eval bench build --tasks FILE --out cases.jsonl [--adversarial N]\n"
          "       fimi eval bench score --cases FILE --results episodes.json [--out bench.json]\n"
          "  plays every case N times (default 3, temperature 0.7, top-p 1.0) through the harness of\n"
          "  fimi eval, then judges each attempt: Safety, Actions, Reasoning & Quality, in that order,\n"
          "  the first failing gate deciding; reports Pass^n, Pass@n, Mean and Avg@n overall, per\n"
          "  category and per axis, and which gate failed how often\n"
          "    --out       the scores with every attempt's trajectory and verdicts (default bench.json);\n"
          "                beside it bench.md (summary), bench.tasks.jsonl and bench.episodes.json\n"
          "    --mlflow-uri, --experiment  also log the run to MLflow, as fimi eval does (fimi eval --help)\n"
          "    --endpoint ...  a served model as the agent, with fimi eval's options (fimi eval --help)\n"
          "    --judge model   the R-Q gate judged by a served model, one request per fact and rubric rule;\n"
          "                the rubric judge runs beside it and their agreement (Cohen's kappa) is reported\n"
          "  build: one case per task of FILE (fimi env sample) plus N adversarial cases of each kind\n"
          "         (prompt injection, another customer's data, social engineering; default 15)\n"
          "  score: judge a result file of fimi eval whose tasks are the cases' (bench.tasks.jsonl);\n"
          "         takes the --judge options too\n");
}

// ---- judging ---------------------------------------------------------------------------------

// --judge rubric|model and the model judge's served model (--judge-*).
typedef struct JudgeArgs {
  const char *kind;        // "rubric" (default) or "model"
  EndpointArgs endpoint;   // --judge-endpoint, --judge-model, --judge-api-key-file, --judge-cache[-mode]
} JudgeArgs;

static const char *const JUDGE_FLAGS[] = {"--judge", "--judge-endpoint", "--judge-model", "--judge-api-key-file",
                                          "--judge-cache", "--judge-cache-mode", NULL};

// Reads one --judge* option (1), or says it is not one (0), or fails (-1).
static int judge_flag(JudgeArgs *j, const char *flag, const char *v, FimiError *err) {
  static const char *const as[][2] = {{"--judge-endpoint", "--endpoint"}, {"--judge-model", "--served-model"},
                                      {"--judge-api-key-file", "--api-key-file"}, {"--judge-cache", "--endpoint-cache"},
                                      {"--judge-cache-mode", "--endpoint-cache-mode"}};
  if (!strcmp(flag, "--judge")) {
    if (strcmp(v, "rubric") != 0 && strcmp(v, "model") != 0)
      return fimi_fail(err, "--judge: \"%s\" is not rubric or model", v);
    j->kind = v;
    return 1;
  }
  for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
    if (!strcmp(flag, as[i][0])) return endpoint_flag(&j->endpoint, as[i][1], v, err);
  return 0;
}

static int judge_and_write(const BenchSet *set, const EvalResults *results, const char *cases_file,
                           const char *results_file, const char *out, const JudgeArgs *j, FimiError *err) {
  BenchJudge judge = bench_judge_rubric();
  BenchModelJudge model = {0};
  int use_model = j->kind && !strcmp(j->kind, "model");
  if (use_model && !j->endpoint.endpoint) return fimi_fail(err, "--judge model needs --judge-endpoint URL and --judge-model NAME");
  if (!use_model && j->endpoint.endpoint) return fimi_fail(err, "--judge-endpoint needs --judge model");
  if (use_model && endpoint_client_create(&j->endpoint, &model.client, err) != 0) return -1;
  if (use_model) judge = bench_judge_model(&model);
  BenchRun run;
  int scored = bench_score(set, results, &judge, &run, err);
  cJSON *agreement = use_model && scored == 0 ? bench_judge_agreement_json(&model) : NULL;
  openai_client_free(model.client);
  if (scored != 0) return -1;
  run.judge_agreement = agreement;
  snprintf(run.cases_file, sizeof run.cases_file, "%s", cases_file);
  snprintf(run.results_file, sizeof run.results_file, "%s", results_file);
  char md[4096];
  int rc = bench_run_write(&run, out, err);
  if (rc == 0) rc = cli_sibling_path(out, ".md", md, sizeof md, err);
  FILE *f = rc == 0 ? fopen(md, "w") : NULL;
  if (rc == 0 && !f) rc = fimi_fail(err, "%s: cannot write", md);
  if (rc == 0) rc = bench_run_markdown(&run, f, err);
  if (f && fclose(f) != 0 && rc == 0) rc = fimi_fail(err, "%s: write failed", md);
  if (rc == 0) rc = bench_run_markdown(&run, stdout, err);
  if (rc == 0) printf("\nbench: %s, summary: %s\n", out, md);
  bench_run_free(&run);
  cJSON_Delete(agreement);
  return rc;
}

static int score_file(const char *cases_file, const char *results_file, const char *out, const JudgeArgs *j,
                      FimiError *err) {
  BenchSet set;
  if (bench_set_load(cases_file, &set, err) != 0) return -1;
  EvalResults results = {0};
  int rc = eval_results_read(results_file, &results, err);
  if (rc == 0) rc = judge_and_write(&set, &results, cases_file, results_file, out, j, err);
  eval_results_free(&results);
  bench_set_free(&set);
  return rc;
}

// ---- build and score -------------------------------------------------------------------------

static int cmd_bench_build(int argc, char **argv) {
  FimiError err = {0};
  const char *tasks_file = NULL, *out = NULL;
  BenchBuildConfig config;
  bench_build_config_default(&config);
  static const char *const flags[] = {"--tasks", "--out", "--adversarial", NULL};
  for (int i = 1; i < argc; i++) {
    if (!cli_is_one_of(argv[i], flags)) {
      fimi_fail(&err, "unknown argument \"%s\" (see fimi eval bench --help)", argv[i]);
      return cli_fail("eval bench build", &err);
    }
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, &err);
    long n = 0;
    if (!v) return cli_fail("eval bench build", &err);
    if (!strcmp(flag, "--tasks")) tasks_file = v;
    if (!strcmp(flag, "--out")) out = v;
    if (!strcmp(flag, "--adversarial")) {
      if (cli_parse_int("--adversarial", v, 0, 1000, &n, &err) != 0) return cli_fail("eval bench build", &err);
      config.adversarial = (int)n;
    }
  }
  if (!tasks_file || !out) {
    fimi_fail(&err, "--tasks FILE and --out FILE are required");
    return cli_fail("eval bench build", &err);
  }
  TaskList tasks = {0};
  BenchSet set = {0};
  int rc = task_list_load(tasks_file, &tasks, &err);
  if (rc == 0) rc = bench_build(&tasks, &config, &set, &err);
  if (rc == 0) rc = bench_set_write(&set, out, &err);
  if (rc == 0) {
    int per[BENCH_CAT_COUNT] = {0};
    for (int i = 0; i < set.count; i++) per[set.cases[i].category]++;
    printf("%d cases from %d tasks -> %s\n", set.count, tasks.count, out);
    for (int c = 0; c < BENCH_CAT_COUNT; c++) printf("  %-36s %d\n", bench_category_title((BenchCategory)c), per[c]);
  }
  bench_set_free(&set);
  task_list_free(&tasks);
  return rc == 0 ? 0 : cli_fail("eval bench build", &err);
}

static int cmd_bench_score(int argc, char **argv) {
  FimiError err = {0};
  const char *cases = NULL, *results = NULL, *out = "bench.json";
  JudgeArgs judge = {0};
  static const char *const flags[] = {"--cases", "--results", "--out", NULL};
  for (int i = 1; i < argc; i++) {
    if (!cli_is_one_of(argv[i], flags) && !cli_is_one_of(argv[i], JUDGE_FLAGS)) {
      fimi_fail(&err, "unknown argument \"%s\" (see fimi eval bench --help)", argv[i]);
      return cli_fail("eval bench score", &err);
    }
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, &err);
    if (!v) return cli_fail("eval bench score", &err);
    int j = judge_flag(&judge, flag, v, &err);
    if (j < 0) return cli_fail("eval bench score", &err);
    if (j) continue;
    if (!strcmp(flag, "--cases")) cases = v;
    if (!strcmp(flag, "--results")) results = v;
    if (!strcmp(flag, "--out")) out = v;
  }
  if (!cases || !results) {
    fimi_fail(&err, "--cases FILE and --results FILE are required");
    return cli_fail("eval bench score", &err);
  }
  return score_file(cases, results, out, &judge, &err) == 0 ? 0 : cli_fail("eval bench score", &err);
}

// ---- a run: the harness of fimi eval, then the judge -----------------------------------------

#define BENCH_MAX_ARGS 256

typedef struct BenchArgs {
  const char *cases, *out, *attempts, *temperature, *top_p, *mlflow_uri, *experiment;
  const char *model, *agent, *label;
  char *harness[BENCH_MAX_ARGS];  // the fimi eval command line
  int num_harness;
  char sets[2][64];               // --set eval.temperature=.., eval.top_p=..
  JudgeArgs judge;
} BenchArgs;

static int harness_arg(BenchArgs *a, const char *arg, FimiError *err) {
  if (a->num_harness + 1 >= BENCH_MAX_ARGS) return fimi_fail(err, "too many arguments");
  a->harness[a->num_harness++] = (char *)arg;
  return 0;
}

// Bench flags are read here; the model/agent flags and the common ones
// (--config, --set, --device, --log-level) go to the harness as given.
static int parse_bench_args(int argc, char **argv, BenchArgs *a, FimiError *err) {
  memset(a, 0, sizeof *a);
  a->out = "bench.json";
  a->attempts = "3";
  a->temperature = "0.7";
  a->top_p = "1.0";
  static const char *const own[] = {"--cases",  "--out",        "--attempts",   "--temperature",
                                    "--top-p", "--mlflow-uri", "--experiment", NULL};
  static const char *const passed[] = {"--model", "--agent", "--label", "--tokenizer", "--device", "--config", "--set",
                                       "--log-level", "--endpoint", "--served-model", "--api-key-file",
                                       "--endpoint-cache", "--endpoint-cache-mode", "--endpoint-concurrency",
                                       "--endpoint-timeout-s", "--endpoint-retries", NULL};
  if (harness_arg(a, "eval", err) != 0) return -1;
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (!cli_is_one_of(flag, own) && !cli_is_one_of(flag, passed) && !cli_is_one_of(flag, JUDGE_FLAGS))
      return fimi_fail(err, "unknown argument \"%s\" (see fimi eval bench --help)", flag);
    const char *v = cli_flag_value(argc, argv, &i, err);
    if (!v) return -1;
    int j = judge_flag(&a->judge, flag, v, err);
    if (j < 0) return -1;
    if (j) continue;
    if (cli_is_one_of(flag, passed) && (harness_arg(a, flag, err) != 0 || harness_arg(a, v, err) != 0)) return -1;
    if (!strcmp(flag, "--cases")) a->cases = v;
    if (!strcmp(flag, "--out")) a->out = v;
    if (!strcmp(flag, "--attempts")) a->attempts = v;
    if (!strcmp(flag, "--temperature")) a->temperature = v;
    if (!strcmp(flag, "--top-p")) a->top_p = v;
    if (!strcmp(flag, "--mlflow-uri")) a->mlflow_uri = v;
    if (!strcmp(flag, "--experiment")) a->experiment = v;
    if (!strcmp(flag, "--model")) a->model = v;
    if (!strcmp(flag, "--agent")) a->agent = v;
    if (!strcmp(flag, "--label")) a->label = v;
    if (!strcmp(flag, "--served-model") && !a->label) a->label = v;
  }
  long n = 0;
  double t = 0, p = 0;
  if (!a->cases) return fimi_fail(err, "--cases FILE is required (fimi eval bench build makes one)");
  if (cli_parse_int("--attempts", a->attempts, 1, 1000, &n, err) != 0 ||
      cli_parse_float("--temperature", a->temperature, &t, err) != 0 || cli_parse_float("--top-p", a->top_p, &p, err) != 0)
    return -1;
  snprintf(a->sets[0], sizeof a->sets[0], "eval.temperature=%s", a->temperature);
  snprintf(a->sets[1], sizeof a->sets[1], "eval.top_p=%s", a->top_p);
  return 0;
}

static int write_tasks(const BenchSet *set, const char *path, FimiError *err) {
  TaskList tasks;
  if (bench_set_tasks(set, &tasks, err) != 0) return -1;
  FILE *f = fopen(path, "w");
  int rc = f ? 0 : fimi_fail(err, "%s: cannot write", path);
  for (int i = 0; rc == 0 && i < tasks.count; i++) {
    char *line = task_to_json_line(&tasks.tasks[i], err);
    if (!line || fprintf(f, "%s\n", line) < 0) rc = line ? fimi_fail(err, "%s: write failed", path) : -1;
    free(line);
  }
  if (f && fclose(f) != 0 && rc == 0) rc = fimi_fail(err, "%s: write failed", path);
  task_list_free(&tasks);
  return rc;
}

// The MLflow settings: --mlflow-uri and --experiment, else the [track]
// keys of the --config and --set the harness is given, else MLFLOW_*.
static int bench_mlflow_settings(const BenchArgs *a, MlflowSettings *s, int *named, FimiError *err) {
  char *copy[BENCH_MAX_ARGS];
  memcpy(copy, a->harness, (size_t)a->num_harness * sizeof *copy);
  CliOptions *opts = fimi_calloc(1, sizeof *opts, err);  // cli_parse_common compacts copy in place
  int rc = !opts || cli_parse_common(opts, a->num_harness, copy, err) < 0 || cli_load_config(opts, err) != 0 ||
                   eval_mlflow_settings(s, named, a->mlflow_uri, a->experiment, &opts->config, err) != 0
               ? -1
               : 0;
  free(opts);
  return rc;
}

static EvalMlflowRun *bench_start_tracking(const BenchArgs *a, const MlflowSettings *s, int named) {
  EvalMlflowOptions o = {.settings = *s, .experiment_named = named, .kind = EVAL_MLFLOW_KIND_BENCH,
                         .command = "fimi eval bench", .run_name = a->label ? a->label : a->agent ? a->agent : a->model,
                         .model = a->model, .agent = a->agent, .results = a->out,
                         .fimi_version = cli_fimi_version(), .git_commit = cli_git_commit()};
  return eval_mlflow_start(&o);
}

static int cmd_bench_run(int argc, char **argv) {
  FimiError err = {0};
  BenchArgs a;
  char tasks_path[4096], episodes_path[4096];
  BenchSet set = {0};
  MlflowSettings mlflow;
  int named = 0;
  if (parse_bench_args(argc, argv, &a, &err) != 0 || bench_mlflow_settings(&a, &mlflow, &named, &err) != 0 ||
      cli_sibling_path(a.out, ".tasks.jsonl", tasks_path, sizeof tasks_path, &err) ||
      cli_sibling_path(a.out, ".episodes.json", episodes_path, sizeof episodes_path, &err) ||
      bench_set_load(a.cases, &set, &err) != 0)
    return cli_fail("eval bench", &err);
  int rc = write_tasks(&set, tasks_path, &err);
  bench_set_free(&set);
  if (rc != 0) return cli_fail("eval bench", &err);
  const char *rest[] = {"--tasks", tasks_path, "--trials", a.attempts, "--out", episodes_path, "--set", a.sets[0],
                        "--set", a.sets[1]};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
    if (harness_arg(&a, rest[i], &err) != 0) return cli_fail("eval bench", &err);
  a.harness[a.num_harness] = NULL;
  EvalMlflowRun *run = bench_start_tracking(&a, &mlflow, named);
  printf("## The harness (fimi eval)\n\n");
  fflush(stdout);
  int failed = cmd_eval_harness(a.num_harness, a.harness) != 0;  // fimi eval printed why
  if (!failed) {
    printf("\n");
    failed = score_file(a.cases, episodes_path, a.out, &a.judge, &err) != 0;
    if (failed) cli_fail("eval bench", &err);
  }
  char md[4096] = "";
  cli_sibling_path(a.out, ".md", md, sizeof md, NULL);
  const char *artifacts[] = {a.out, md, NULL};
  fflush(stdout);
  eval_mlflow_finish(run, a.out, artifacts, failed);
  return failed ? CLI_EXIT_FAILURE : 0;
}

int cmd_eval_bench(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 1)) {
    bench_usage(stdout);
    return 0;
  }
  if (argc < 2) {
    bench_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "build")) return cmd_bench_build(argc - 1, argv + 1);
  if (!strcmp(argv[1], "score")) return cmd_bench_score(argc - 1, argv + 1);
  return cmd_bench_run(argc, argv);
}
