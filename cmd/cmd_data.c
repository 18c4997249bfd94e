// cmd/cmd_data.c: `fimi data tokenize|info`: JSONL training data to the
// HDF5 dataset layout of docs/datasets.md, and a summary of such a file.
//   tokenize --input F.jsonl --tokenizer tokenizer.json --out F.h5 --kind sft|dpo
//            [--max-length N] [--overlong truncate|drop] [--skip-bad] [--json]
//   info F.h5 [--json]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cmd/cli.h"
#include "core/log.h"
#include "data/dataset.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: fimi data tokenize --input F.jsonl --tokenizer tokenizer.json --out F.h5 --kind sft|dpo\n"
          "                          [--max-length N] [--overlong truncate|drop] [--loss model|all] [--skip-bad] [--json]\n"
          "       fimi data info F.h5 [--json]\n"
          "SFT rows: {\"messages\": [...]} or {\"prompt\": ..., \"completion\": ...}; DPO rows:\n"
          "{\"prompt\": ..., \"chosen\": ..., \"rejected\": ...} (strings or message lists, TRL conventions).\n"
          "--max-length N: tokens per sequence (0 = no limit); longer rows are truncated (keep the start)\n"
          "or dropped. --loss (SFT): model turns or completion only (model, the default) or every token\n"
          "after <bos> (all). --skip-bad: skip and count malformed rows instead of failing. See docs/datasets.md.\n");
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Prints a JSON object on one line and frees it.
static int print_json(cJSON *o) {
  char *text = o ? cJSON_PrintUnformatted(o) : NULL;
  if (text) puts(text);
  free(text);
  cJSON_Delete(o);
  return text ? 0 : CLI_EXIT_FAILURE;
}

typedef struct DataArgs {
  const char *input, *tokenizer, *out, *kind;
  DatasetTokenizeOptions opt;
  int json;
} DataArgs;

static int parse_tokenize_args(int argc, char **argv, DataArgs *a, FimiError *err) {
  dataset_default_options(&a->opt);
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    const char *v = NULL;
    if (!strcmp(arg, "--input")) { if (!(a->input = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--tokenizer")) { if (!(a->tokenizer = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--out")) { if (!(a->out = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--kind")) { if (!(a->kind = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--max-length")) {
      long n;
      if (!(v = cli_flag_value(argc, argv, &i, err)) || cli_parse_int(arg, v, 0, 1L << 40, &n, err)) return -1;
      a->opt.max_length = n;
    } else if (!strcmp(arg, "--overlong")) {
      if (!(v = cli_flag_value(argc, argv, &i, err))) return -1;
      if (!strcmp(v, "truncate")) a->opt.overlong = DATASET_OVERLONG_TRUNCATE;
      else if (!strcmp(v, "drop")) a->opt.overlong = DATASET_OVERLONG_DROP;
      else return fimi_fail(err, "--overlong \"%s\" is not truncate or drop", v);
    } else if (!strcmp(arg, "--loss")) {
      if (!(v = cli_flag_value(argc, argv, &i, err))) return -1;
      if (!strcmp(v, "all")) a->opt.loss_all = 1;
      else if (!strcmp(v, "model")) a->opt.loss_all = 0;
      else return fimi_fail(err, "--loss \"%s\" is not model or all", v);
    } else if (!strcmp(arg, "--skip-bad")) a->opt.skip_bad = 1;
    else if (!strcmp(arg, "--json")) a->json = 1;
    else return fimi_fail(err, "unknown argument \"%s\"", arg);
  }
  if (!a->input || !a->tokenizer || !a->out || !a->kind)
    return fimi_fail(err, "--input, --tokenizer, --out and --kind are required");
  return dataset_kind_parse(a->kind, &a->opt.kind, err);
}

static int run_tokenize(int argc, char **argv) {
  FimiError err = {0};
  DataArgs a = {0};
  if (parse_tokenize_args(argc, argv, &a, &err)) {
    fprintf(stderr, "fimi data tokenize: %s (see fimi data tokenize --help)\n", err.message);
    return CLI_EXIT_USAGE;
  }
  DatasetTokenizeStats s;
  double start = seconds_now();
  if (dataset_tokenize_jsonl(a.input, a.tokenizer, a.out, &a.opt, &s, &err)) return cli_fail("data tokenize", &err);
  double elapsed = seconds_now() - start;
  double secs = elapsed > 1e-9 ? elapsed : 1e-9;
  if (s.skipped > 0) log_warn("fimi data tokenize: skipped %lld malformed rows; the first: %s", (long long)s.skipped, s.first_skip);
  if (a.json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "out", a.out);
    cJSON_AddStringToObject(o, "kind", a.kind);
    const char *names[] = {"lines", "rows_in", "rows", "truncated", "dropped", "skipped", "tokens", "loss_tokens",
                           "max_row_tokens"};
    int64_t values[] = {s.lines, s.rows_in, s.rows, s.truncated, s.dropped, s.skipped, s.tokens, s.loss_tokens,
                        s.max_row_tokens};
    for (int i = 0; i < 9; i++) cJSON_AddNumberToObject(o, names[i], (double)values[i]);
    cJSON_AddNumberToObject(o, "seconds", elapsed);
    return print_json(o);
  }
  printf("wrote %s (%s): %lld rows of %lld read; truncated %lld, dropped %lld, skipped %lld\n", a.out, a.kind,
         (long long)s.rows, (long long)s.rows_in, (long long)s.truncated, (long long)s.dropped, (long long)s.skipped);
  printf("%lld tokens (%lld with loss), longest sequence %lld; %.2f s, %.0f rows/s, %.0f tokens/s\n",
         (long long)s.tokens, (long long)s.loss_tokens, (long long)s.max_row_tokens, elapsed, (double)s.rows_in / secs,
         (double)s.tokens / secs);
  return 0;
}

typedef struct FieldSummary {
  int64_t tokens, loss_tokens, min_len, max_len;
} FieldSummary;

static FieldSummary summarize(const Dataset *ds, int f) {
  FieldSummary s = {0, 0, 0, 0};
  const DatasetField *field = &ds->fields[f];
  s.tokens = field->offsets[ds->rows];
  for (int64_t i = 0; i < s.tokens; i++) s.loss_tokens += field->loss_mask[i];
  for (int64_t r = 0; r < ds->rows; r++) {
    int64_t len = field->offsets[r + 1] - field->offsets[r];
    if (r == 0 || len < s.min_len) s.min_len = len;
    if (len > s.max_len) s.max_len = len;
  }
  return s;
}

static int run_info(int argc, char **argv) {
  const char *path = NULL;
  int json = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!path && argv[i][0] != '-') path = argv[i];
    else {
      fprintf(stderr, "fimi data info: unexpected %s \"%s\" (see fimi data info --help)\n",
              argv[i][0] == '-' ? "option" : "argument", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (!path) {
    fprintf(stderr, "fimi data info: a dataset PATH is required (see fimi data info --help)\n");
    return CLI_EXIT_USAGE;
  }
  FimiError err = {0};
  Dataset ds;
  if (dataset_open(path, 0, &ds, &err)) return cli_fail("data info", &err);
  const char *kind = dataset_kind_name(ds.kind);
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON_AddNumberToObject(o, "vocab_size", ds.vocab_size);
    const char *names[] = {"rows", "rows_in", "truncated", "dropped", "skipped", "max_length"};
    int64_t values[] = {ds.rows, ds.rows_in, ds.truncated, ds.dropped, ds.skipped, ds.max_length};
    for (int i = 0; i < 6; i++) cJSON_AddNumberToObject(o, names[i], (double)values[i]);
    cJSON *fields = cJSON_AddObjectToObject(o, "fields");
    for (int f = 0; f < ds.num_fields; f++) {
      FieldSummary s = summarize(&ds, f);
      cJSON *fo = cJSON_AddObjectToObject(fields, ds.fields[f].name);
      cJSON_AddNumberToObject(fo, "tokens", (double)s.tokens);
      cJSON_AddNumberToObject(fo, "loss_tokens", (double)s.loss_tokens);
      cJSON_AddNumberToObject(fo, "min_len", (double)s.min_len);
      cJSON_AddNumberToObject(fo, "max_len", (double)s.max_len);
    }
    cJSON *ref = cJSON_AddArrayToObject(o, "ref");
    for (int i = 0; i < ds.num_ref; i++) cJSON_AddItemToArray(ref, cJSON_CreateString(ds.ref_names[i]));
    print_json(o);
  } else {
    printf("%s: %s dataset, %lld rows, vocab %d, tokenizer fnv1a64 %s\n", path, kind, (long long)ds.rows,
           ds.vocab_size, ds.tokenizer_hash[0] ? ds.tokenizer_hash : "?");
    printf("source %s: %lld rows read; truncated %lld, dropped %lld, skipped %lld; max_length %lld (%s)\n",
           ds.source[0] ? ds.source : "?", (long long)ds.rows_in, (long long)ds.truncated, (long long)ds.dropped,
           (long long)ds.skipped, (long long)ds.max_length, ds.overlong[0] ? ds.overlong : "?");
    for (int f = 0; f < ds.num_fields; f++) {
      FieldSummary s = summarize(&ds, f);
      printf("  %-9s %lld tokens (%lld with loss), length min %lld mean %.1f max %lld\n", ds.fields[f].name,
             (long long)s.tokens, (long long)s.loss_tokens, (long long)s.min_len,
             ds.rows ? (double)s.tokens / (double)ds.rows : 0.0, (long long)s.max_len);
    }
    for (int i = 0; i < ds.num_ref; i++) printf("  %s: %lld values\n", ds.ref_names[i], (long long)ds.rows);
  }
  dataset_close(&ds);
  return 0;
}

int cmd_data(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (cli_wants_help(argc, argv, 1)) {
    usage(stdout);
    return 0;
  }
  FimiError err = {0};
  CliOptions common;
  argc = cli_parse_common(&common, argc, argv, &err);  // --log-level and friends
  if (argc < 0) return cli_fail("data", &err);
  if (!strcmp(argv[1], "tokenize")) return run_tokenize(argc, argv);
  if (!strcmp(argv[1], "info")) return run_info(argc, argv);
  fprintf(stderr, "fimi data: unknown subcommand \"%s\" (see fimi data --help)\n", argv[1]);
  return CLI_EXIT_USAGE;
}
