// cmd/cli.h: what the `fimi` subcommands share. Defines CliOptions (the
// common flags --config, --set, --device, --log-level, --seed), cli_parse_common,
// the config schema fimi knows today, cli_fail (print and return exit code),
// and parse_token_ids. Only cmd/ prints errors and picks exit codes.
#ifndef FIMI_CMD_CLI_H
#define FIMI_CMD_CLI_H

#include <stdio.h>

#include "core/config.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "rl/rollout.h"

#define CLI_MAX_OVERRIDES 64
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_FAILURE 1

typedef struct CliOptions {
  const char *config_path;
  const char *overrides[CLI_MAX_OVERRIDES];
  int num_overrides;
  Device device;
  Config config;
} CliOptions;

// Consumes the common flags from argv (in place); leftover arguments are
// compacted to the front and their count returned, or -1 on a usage error.
int cli_parse_common(CliOptions *opts, int argc, char **argv, FimiError *err);
// Loads the schema, then the --config file, then the --set overrides.
int cli_load_config(CliOptions *opts, FimiError *err);
// fimi's version (project() in CMakeLists.txt) and the git commit the
// binary was built from ("-dirty": with uncommitted changes; "unknown").
const char *cli_fimi_version(void);
const char *cli_git_commit(void);
// Prints "fimi <command>: <message>" and returns CLI_EXIT_FAILURE.
int cli_fail(const char *command, const FimiError *err);
// Parses "2,45,17" into ids (malloc'd); each id must be in [0, vocab).
int parse_token_ids(const char *text, int vocab, int **ids, int *count, FimiError *err);

// 1 when --help or -h is among argv[from..argc): the command then prints its
// usage on stdout and exits 0 (every command and subcommand answers --help).
int cli_wants_help(int argc, char **argv, int from);
// 1 when arg is one of the NULL-terminated names (a flag check made before
// cli_flag_value, so that an unknown flag is named as such).
int cli_is_one_of(const char *arg, const char *const *names);

// Returns the value after a flag (argv[*i] is the flag), advancing *i, or
// NULL with an error when it is missing.
const char *cli_flag_value(int argc, char **argv, int *i, FimiError *err);
int cli_parse_int(const char *flag, const char *text, long min, long max, long *out, FimiError *err);
int cli_parse_float(const char *flag, const char *text, double *out, FimiError *err);

// A file beside a JSON output: "X.json" -> "X<suffix>" (FILE<suffix> when the
// path has no .json ending), e.g. results.json -> results.md.
int cli_sibling_path(const char *json_path, const char *suffix, char *out, size_t size, FimiError *err);
// An int key that must fit an int (errors name section.key).
int cli_get_int(const Config *c, const char *section, const char *key, int *out, FimiError *err);
// The rollout engine's settings shared by fimi train (grpo) and fimi eval:
// the [grpo] budgets, env.catalog and [rollout] (not the sampler, which
// each reads from its own section).
int cli_rollout_settings(const Config *c, RolloutConfig *r, int *row_invariant, int *prefill_chunk, FimiError *err);

// 1 for rank 0 of an mpirun or Slurm job, or a process outside one: the one
// that prints what is the same for every rank.
int cli_speaks_for_the_job(void);
// "BLAS: <library>, kernels <set> (<who chose>), <n> threads": fimi info
// prints it, train and eval log it first (kernels/cpu/blas.h).
void cli_print_blas(FILE *out);
void cli_log_blas(void);

struct GemmaConfig;
struct Tokenizer;
// The ids that end a generated turn: the model's eos ids (config.json) and
// the tokenizer's <end_of_turn> and <eos> (tok may be NULL). stops has room
// for CLI_MAX_STOP_TOKENS; returns how many were written.
#define CLI_MAX_STOP_TOKENS 10  // GEMMA_MAX_EXTRA_EOS + 3
int cli_stop_tokens(const struct GemmaConfig *cfg, const struct Tokenizer *tok, int *stops);
// The model architecture named by [model] preset / config_json.
int cli_model_config(const CliOptions *opts, struct GemmaConfig *config, FimiError *err);

int cmd_info(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
// `fimi tokenizer train` (cmd/cmd_tokenizer_train.c).
int cmd_tokenizer_train(int argc, char **argv);
int cmd_env(int argc, char **argv);
// `fimi env transcripts` (cmd/cmd_env_transcripts.c).
int cmd_env_transcripts(int argc, char **argv);
int cmd_data(int argc, char **argv);
// `fimi dpo corpus build|pairs` (cmd/cmd_dpo.c).
int cmd_dpo(int argc, char **argv);
// `fimi eval` (cmd/cmd_eval.c).
int cmd_eval(int argc, char **argv);
// `fimi eval` without its MLflow run: the harness that `fimi eval bench`
// plays its cases through (the bench logs its own run).
int cmd_eval_harness(int argc, char **argv);
// `fimi eval bench` (cmd/cmd_eval_bench.c).
int cmd_eval_bench(int argc, char **argv);
// `fimi train` (cmd/cmd_train.c).
int cmd_train(int argc, char **argv);
// `fimi mcp serve` (cmd/cmd_mcp.c).
int cmd_mcp(int argc, char **argv);
// `fimi serve` (cmd/cmd_serve.c).
int cmd_serve(int argc, char **argv);
// `fimi report` (cmd/cmd_report.c).
int cmd_report(int argc, char **argv);

#endif
