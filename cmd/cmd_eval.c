// cmd/cmd_eval.c: `fimi eval` (docs/evaluation.md): the held-out harness
// of eval/ on a task file with a saved model (CPU or GPU policy) or a
// scripted agent, writing the result file and its Markdown summary; and
// `fimi eval compare` (paired sign test) and `fimi eval ladder` (from result
// files or from the runs an MLflow experiment holds). With MLflow
// configured, an evaluation is also logged as a run (eval/mlflow_eval.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/device_policy.h"
#include "cmd/endpoint.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/progress.h"
#include "eval/harness.h"
#include "eval/mlflow_eval.h"
#include "eval/episode_judge.h"
#include "eval/served.h"
#include "eval/summary.h"
#include "kernels/device.h"
#include "model/gemma.h"
#include "model/weights.h"

static void eval_usage(FILE *out) {
  fprintf(out,
          "usage: fimi eval (--model DIR | --agent oracle|do_nothing|random | --endpoint URL --served-model NAME)\n"
          "                 --tasks FILE [--trials N] [--out results.json] [--label NAME] [--tokenizer F]\n"
          "                 [--device cpu|cuda] [--mlflow-uri URI] [--experiment NAME]\n"
          "                 [--api-key-file F] [--endpoint-cache DIR [--endpoint-cache-mode record|replay]]\n"
          "                 [--endpoint-concurrency N] [--endpoint-timeout-s N] [--endpoint-retries N]\n"
          "       fimi eval compare A.json B.json [--out compare.json]\n"
          "       fimi eval ladder A.json B.json ...\n"
          "       fimi eval ladder --mlflow-experiment NAME [--mlflow-uri URI]\n"
          "  plays every task of FILE N times (eval.trials) and writes every episode with its reward\n"
          "  breakdown to --out (default results.json) and a Markdown summary beside it (.md)\n"
          "    --model      a saved model directory (model.safetensors, config.json, tokenizer.json)\n"
          "    --agent      a scripted agent instead of a model, through the same episodes\n"
          "%s"
          "    --trials     episodes per task (eval.trials; the band and pass^k need >= 2)\n"
          "    --label      the run's name in tables (default: the model directory or agent)\n"
          "    --tokenizer  tokenizer.json (default: DIR/tokenizer.json)\n"
          "    --mlflow-uri also log the evaluation as a run on this MLflow tracking server (default:\n"
          "                 track.mlflow_uri, else MLFLOW_TRACKING_URI; none: no MLflow)\n"
          "    --experiment its MLflow experiment (default: track.experiment, else MLFLOW_EXPERIMENT_NAME,\n"
          "                 else the training run's when DIR is a tracked checkpoint, else Default)\n"
          "  compare: per-task paired comparison of B against A (same tasks), exact sign test\n"
          "  ladder:  mean reward overall and per task kind, one row per result file, best in bold;\n"
          "           --mlflow-experiment: one row per finished fimi eval run of that experiment, oldest\n"
          "           first, its result file downloaded from the server\n"
          "  settings: [eval] trials, seed, success, temperature, top_p; budgets from [grpo] and [rollout]\n",
          endpoint_usage_text);
}

typedef struct EvalArgs {
  const char *model, *agent, *tasks, *out, *label, *tokenizer, *mlflow_uri, *experiment;
  long trials;  // 0: eval.trials
  EndpointArgs endpoint;  // --endpoint: a served model
} EvalArgs;

static int parse_eval_args(int argc, char **argv, EvalArgs *a, FimiError *err) {
  memset(a, 0, sizeof *a);
  a->out = "results.json";
  static const char *const flags[] = {"--model", "--agent", "--tasks", "--out", "--label", "--tokenizer", "--trials",
                                      "--mlflow-uri", "--experiment", "--endpoint", "--served-model",
                                      "--api-key-file", "--endpoint-cache", "--endpoint-cache-mode",
                                      "--endpoint-concurrency", "--endpoint-timeout-s", "--endpoint-retries", NULL};
  for (int i = 1; i < argc; i++) {
    if (!cli_is_one_of(argv[i], flags)) return fimi_fail(err, "unknown argument \"%s\" (see fimi eval --help)", argv[i]);
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, err);
    if (!v) return -1;
    int served = endpoint_flag(&a->endpoint, flag, v, err);
    if (served < 0) return -1;
    if (served) continue;
    if (!strcmp(flag, "--model")) a->model = v;
    if (!strcmp(flag, "--agent")) a->agent = v;
    if (!strcmp(flag, "--tasks")) a->tasks = v;
    if (!strcmp(flag, "--out")) a->out = v;
    if (!strcmp(flag, "--label")) a->label = v;
    if (!strcmp(flag, "--tokenizer")) a->tokenizer = v;
    if (!strcmp(flag, "--mlflow-uri")) a->mlflow_uri = v;
    if (!strcmp(flag, "--experiment")) a->experiment = v;
    if (!strcmp(flag, "--trials") && cli_parse_int("--trials", v, 1, 1000, &a->trials, err) != 0) return -1;
  }
  if (!a->tasks) return fimi_fail(err, "--tasks FILE is required (a task file: fimi env sample)");
  if (!!a->model + !!a->agent + !!a->endpoint.endpoint != 1)
    return fimi_fail(err, "give exactly one of --model DIR, --agent NAME and --endpoint URL");
  if (!a->endpoint.endpoint && (a->endpoint.model || a->endpoint.cache_dir || a->endpoint.api_key_file))
    return fimi_fail(err, "--served-model, --api-key-file and --endpoint-cache need --endpoint URL");
  return 0;
}

// [eval] and the rollout settings; *row_invariant, *chunk for the CPU policy.
static int read_eval_config(const Config *c, const EvalArgs *a, EvalConfig *e, int *row_invariant, int *chunk,
                            FimiError *err) {
  eval_config_default(e);
  int64_t seed = 0;
  double temperature = 0, top_p = 1;
  if (cli_get_int(c, "eval", "trials", &e->trials, err) || config_get_int(c, "eval", "seed", &seed, err) ||
      config_get_float(c, "eval", "success", &e->success, err) ||
      config_get_float(c, "eval", "temperature", &temperature, err) ||
      config_get_float(c, "eval", "top_p", &top_p, err) ||
      cli_rollout_settings(c, &e->rollout, row_invariant, chunk, err))
    return -1;
  e->seed = (uint64_t)seed;
  e->rollout.sampler = (SamplerConfig){(float)temperature, (float)top_p};
  if (a->trials > 0) e->trials = (int)a->trials;
  return eval_config_validate(e, err);
}

// What the results name as the model: the directory, "agent:NAME" or
// "endpoint:URL#NAME".
static void fill_info(EvalRunInfo *info, const EvalArgs *a, const EvalConfig *e, int64_t parameters) {
  const EndpointArgs *p = &a->endpoint;
  if (p->endpoint) snprintf(info->model, sizeof info->model, "endpoint:%s#%s", p->endpoint, p->model ? p->model : "");
  else snprintf(info->model, sizeof info->model, "%s%s", a->agent ? "agent:" : "", a->agent ? a->agent : a->model);
  const char *name = a->label ? a->label : a->agent ? a->agent : p->endpoint ? p->model : a->model;
  snprintf(info->label, sizeof info->label, "%s", name ? name : "served");
  snprintf(info->tasks_file, sizeof info->tasks_file, "%s", a->tasks);
  info->trials = e->trials;
  info->seed = e->seed;
  info->temperature = a->agent ? 0 : e->rollout.sampler.temperature;
  info->top_p = a->agent ? 1 : e->rollout.sampler.top_p;
  info->success = e->success;
  info->parameters = parameters;
}

static int run_model(const EvalArgs *a, const EvalConfig *e, Device device, int row_invariant, int chunk,
                     const TaskList *tasks, EvalResults *out, FimiError *err) {
  char tok_path[4096];
  if (a->tokenizer)
    snprintf(tok_path, sizeof tok_path, "%s", a->tokenizer);
  else if (path_join(tok_path, sizeof tok_path, a->model, "tokenizer.json", err) != 0)
    return -1;
  Tokenizer *tok = NULL;
  if (tokenizer_load_file(tok_path, &tok, err) != 0) return -1;
  GemmaModel model;
  if (gemma_load_pretrained(&model, a->model, err) != 0) {
    tokenizer_free(tok);
    return -1;
  }
  fill_info(&out->info, a, e, gemma_model_param_count(&model));
  EnvClient env;
  DevicePolicy policy;
  int rc = env_client_local_create(&env, tasks, err);
  int have_env = rc == 0;
  if (have_env) env_world_set_customer_model(env_client_local_world(&env), e->customer, e->customer_temperature);
  if (rc == 0) rc = device_policy_create(&policy, device, &model, e->rollout.slots, e->rollout.context, chunk, row_invariant, err);
  if (rc == 0) rc = eval_run_policy(e, &policy.policy, &env, tok, out, err);
  if (have_env) {
    device_policy_free(&policy);
    env_client_free(&env);
  }
  gemma_model_free(&model);
  tokenizer_free(tok);
  return rc;
}

static int run_served(const EvalArgs *a, const EvalConfig *e, const TaskList *tasks, EvalResults *out,
                      FimiError *err) {
  OpenAIClient *client = NULL;
  if (endpoint_client_create(&a->endpoint, &client, err) != 0) return -1;
  fill_info(&out->info, a, e, 0);
  EvalServedConfig s = {.concurrency = a->endpoint.concurrency > 0 ? (int)a->endpoint.concurrency : 8};
  int rc = eval_run_served(e, &s, client, tasks, out, err);
  openai_client_free(client);
  return rc;
}

// eval.judge = model: the judge check of every episode decided again by a
// served model (eval/episode_judge.h).
static int judge_with_model(const Config *config, EvalResults *results, const TaskList *tasks, FimiError *err) {
  BenchModelJudge judge = {0};
  if (endpoint_config_client(config, "eval", "judge", &judge.client, err) != 0) return -1;
  if (!judge.client) return 0;  // eval.judge = rules
  int rc = eval_judge_episodes(results, tasks, &judge, err);
  openai_client_free(judge.client);
  return rc;
}

// With a served model in the run (the agent or the customer), a run whose
// every episode failed measured nothing but the setting (a wrong model name,
// a server refusing every request): it fails, with the first reason.
static int check_served_run(const EvalResults *r, FimiError *err) {
  for (int i = 0; i < r->count; i++)
    if (!r->episodes[i].failed) return 0;
  const cJSON *last = r->count ? cJSON_GetArrayItem(r->episodes[0].trajectory,
                                                    cJSON_GetArraySize(r->episodes[0].trajectory) - 1) : NULL;
  const cJSON *why = cJSON_GetObjectItemCaseSensitive(last, "text");
  return fimi_fail(err, "every episode failed (results written); the first: %.400s",
                   cJSON_IsString(why) ? why->valuestring : "no reason recorded");
}

static int write_outputs(const EvalResults *r, const char *path, FimiError *err) {
  char md[4096];
  if (eval_results_write(r, path, err) != 0 || cli_sibling_path(path, ".md", md, sizeof md, err) != 0) return -1;
  FILE *f = fopen(md, "w");
  if (!f) return fimi_fail(err, "%s: cannot write", md);
  int rc = eval_summary_markdown(r, f, err);
  if (fclose(f) != 0 && rc == 0) rc = fimi_fail(err, "%s: write failed", md);
  if (rc == 0) rc = eval_summary_markdown(r, stdout, err);
  if (rc == 0) printf("\nresults: %s, summary: %s\n", path, md);
  return rc;
}

// The evaluation's MLflow run (NULL: none): created once the inputs are
// read, before any episode is played.
static EvalMlflowRun *start_tracking(const EvalArgs *a, const MlflowSettings *s, int experiment_named) {
  EvalMlflowOptions o = {.settings = *s, .experiment_named = experiment_named, .kind = EVAL_MLFLOW_KIND_EVAL,
                         .command = "fimi eval", .run_name = a->label ? a->label : a->agent ? a->agent : a->model ? a->model : a->endpoint.model,
                         .model = a->model, .agent = a->agent, .results = a->out,
                         .fimi_version = cli_fimi_version(), .git_commit = cli_git_commit()};
  return eval_mlflow_start(&o);
}

static int cmd_eval_run(int argc, char **argv, int tracked) {
  if (cli_wants_help(argc, argv, 1)) {
    eval_usage(stdout);
    return 0;
  }
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  EvalArgs a;
  EvalConfig e;
  MlflowSettings mlflow = {0};
  int row_invariant = 1, chunk = 64, experiment_named = 0;
  if (rest < 0 || cli_load_config(&opts, &err) != 0 || parse_eval_args(rest, argv, &a, &err) != 0 ||
      read_eval_config(&opts.config, &a, &e, &row_invariant, &chunk, &err) != 0 ||
      (tracked && eval_mlflow_settings(&mlflow, &experiment_named, a.mlflow_uri, a.experiment, &opts.config, &err) != 0))
    return cli_fail("eval", &err);
  int agent = a.agent ? agent_kind_from_name(a.agent) : -1;
  if (a.agent && agent < 0) {
    fimi_fail(&err, "--agent: unknown agent \"%s\" (oracle, do_nothing, random)", a.agent);
    return cli_fail("eval", &err);
  }
  if (a.model && device_require(opts.device, &err) != 0) return cli_fail("eval", &err);
  if (a.model) cli_log_blas();
  TaskList tasks = {0};
  if (task_list_load(a.tasks, &tasks, &err) != 0) return cli_fail("eval", &err);
  if (tasks.count == 0) {
    fimi_fail(&err, "%s: no tasks (fimi env sample writes a task file)", a.tasks);
    return cli_fail("eval", &err);
  }
  OpenAIClient *customer = NULL;
  if (endpoint_customer_client(&opts.config, &customer, &e.customer_temperature, &err) != 0) {
    task_list_free(&tasks);
    return cli_fail("eval", &err);
  }
  e.customer = customer;
  EvalMlflowRun *run = start_tracking(&a, &mlflow, experiment_named);
  EvalResults results = {0};
  double start = monotonic_seconds();
  int rc;
  if (a.agent) {
    fill_info(&results.info, &a, &e, 0);
    rc = eval_run_agent(&e, (EnvAgentKind)agent, &tasks, &results, &err);
  } else if (a.endpoint.endpoint) {
    rc = run_served(&a, &e, &tasks, &results, &err);
  } else {
    rc = run_model(&a, &e, opts.device, row_invariant, chunk, &tasks, &results, &err);
  }
  if (rc == 0) rc = judge_with_model(&opts.config, &results, &tasks, &err);
  int timing = 1;
  if (config_get_bool(&opts.config, "eval", "timing", &timing, &err) != 0) rc = -1;
  results.info.seconds = timing ? monotonic_seconds() - start : 0;
  if (rc == 0) rc = write_outputs(&results, a.out, &err);
  if (rc == 0 && (a.endpoint.endpoint || customer)) rc = check_served_run(&results, &err);
  eval_results_free(&results);
  task_list_free(&tasks);
  openai_client_free(customer);
  if (run) {
    char md[4096] = "";
    cli_sibling_path(a.out, ".md", md, sizeof md, NULL);
    const char *artifacts[] = {a.out, md, NULL};
    fflush(stdout);
    eval_mlflow_finish(run, a.out, artifacts, rc != 0);
  }
  return rc == 0 ? 0 : cli_fail("eval", &err);
}

int cmd_eval_harness(int argc, char **argv) { return cmd_eval_run(argc, argv, 0); }

// ---- compare and ladder -------------------------------------------------------------------------

static int read_all(int n, char **paths, EvalResults *runs, FimiError *err) {
  for (int i = 0; i < n; i++)
    if (eval_results_read(paths[i], &runs[i], err) != 0) {
      for (int k = 0; k < i; k++) eval_results_free(&runs[k]);
      return -1;
    }
  return 0;
}

static int cmd_eval_compare(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 1)) {
    eval_usage(stdout);
    return 0;
  }
  FimiError err = {0};
  const char *out = NULL, *files[2];
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--out")) {
      if (!(out = cli_flag_value(argc, argv, &i, &err))) return cli_fail("eval compare", &err);
    } else if (n < 2 && argv[i][0] != '-') {
      files[n++] = argv[i];
    } else {
      fimi_fail(&err, "unexpected argument \"%s\" (usage: fimi eval compare A.json B.json [--out F])", argv[i]);
      return cli_fail("eval compare", &err);
    }
  }
  if (n != 2) {
    fimi_fail(&err, "two result files are needed (fimi eval compare A.json B.json)");
    return cli_fail("eval compare", &err);
  }
  EvalResults runs[2];
  if (read_all(2, (char **)files, runs, &err) != 0) return cli_fail("eval compare", &err);
  cJSON *json = NULL;
  int rc = eval_compare(&runs[0], &runs[1], stdout, &json, &err);
  if (rc == 0 && out) rc = json_write_file(out, json, &err);
  cJSON_Delete(json);
  eval_results_free(&runs[0]);
  eval_results_free(&runs[1]);
  return rc == 0 ? 0 : cli_fail("eval compare", &err);
}

// `fimi eval ladder --mlflow-experiment NAME [--mlflow-uri URI]`: the runs
// of the experiment, their result files downloaded.
static int ladder_from_mlflow(int argc, char **argv, EvalResults **runs, int *n, FimiError *err) {
  const char *uri = NULL, *experiment = NULL;
  static const char *const flags[] = {"--mlflow-experiment", "--mlflow-uri", NULL};
  for (int i = 1; i < argc; i++) {
    if (!cli_is_one_of(argv[i], flags))
      return fimi_fail(err, "unexpected argument \"%s\" (usage: fimi eval ladder --mlflow-experiment NAME "
                            "[--mlflow-uri URI])", argv[i]);
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, err);
    if (!v) return -1;
    if (!strcmp(flag, "--mlflow-uri")) uri = v;
    if (!strcmp(flag, "--mlflow-experiment")) experiment = v;
  }
  MlflowSettings s;
  int named = 0;
  if (!experiment || !experiment[0]) return fimi_fail(err, "--mlflow-experiment NAME is required with --mlflow-uri");
  if (eval_mlflow_settings(&s, &named, uri, experiment, NULL, err) != 0) return -1;
  if (!s.uri[0]) return fimi_fail(err, "no MLflow server: give --mlflow-uri URI or set MLFLOW_TRACKING_URI");
  return eval_mlflow_fetch_results(&s, experiment, runs, n, err);
}

static int cmd_eval_ladder(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 1)) {
    eval_usage(stdout);
    return 0;
  }
  FimiError err = {0};
  int n = argc - 1, from_mlflow = 0;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--mlflow-experiment") || !strcmp(argv[i], "--mlflow-uri")) from_mlflow = 1;
  EvalResults *runs = NULL;
  if (from_mlflow) {
    if (ladder_from_mlflow(argc, argv, &runs, &n, &err) != 0) return cli_fail("eval ladder", &err);
  } else {
    for (int i = 1; i < argc; i++)
      if (argv[i][0] == '-') {
        fimi_fail(&err, "unexpected argument \"%s\" (usage: fimi eval ladder A.json B.json ...)", argv[i]);
        return cli_fail("eval ladder", &err);
      }
    if (n < 1) {
      fimi_fail(&err, "give one or more result files (fimi eval ladder A.json B.json ...)");
      return cli_fail("eval ladder", &err);
    }
    runs = fimi_calloc((size_t)n, sizeof *runs, &err);
    if (!runs || read_all(n, argv + 1, runs, &err) != 0) {
      free(runs);
      return cli_fail("eval ladder", &err);
    }
  }
  int rc = eval_ladder(runs, n, stdout, &err);
  for (int i = 0; i < n; i++) eval_results_free(&runs[i]);
  free(runs);
  return rc == 0 ? 0 : cli_fail("eval ladder", &err);
}

int cmd_eval(int argc, char **argv) {
  if (argc < 2) {
    eval_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "compare")) return cmd_eval_compare(argc - 1, argv + 1);
  if (!strcmp(argv[1], "ladder")) return cmd_eval_ladder(argc - 1, argv + 1);
  if (!strcmp(argv[1], "bench")) return cmd_eval_bench(argc - 1, argv + 1);
  return cmd_eval_run(argc, argv, 1);
}
