// cmd/cmd_env_corpus.c: `fimi env corpus build --out DIR [--seed S]
// [--total N] [--customers C]` (the task corpus, its gates and splits, as
// JSONL plus manifest.json; env/tasks/corpus.h) and `fimi env corpus report
// DIR` (the tables of docs/corpus.md, computed from the files after their
// hashes are checked against the manifest).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "env/tasks/corpus.h"
#include "env/tasks/family.h"

static void usage_to(FILE *out) {
  fprintf(out,
          "usage: fimi env corpus build --out DIR [--seed S] [--total N] [--customers C]\n"
          "       fimi env corpus report DIR\n"
          "  build   generate the task corpus from every registered family on the big bank\n"
          "          (C customers, default %d), gate every task, draw the held-out (1,000),\n"
          "          validation (100) and training (10,000) splits; writes corpus.jsonl,\n"
          "          heldout.jsonl, validation.jsonl, train.jsonl and manifest.json\n"
          "          --total N  corpus size (default 48245; the splits shrink with it below 11,100)\n"
          "  report  print the tables: tasks per family, kind and use case, chain lengths,\n"
          "          opening lines, named variants, check mix, gate rejections, use-case shares\n"
          "          against the paper\n",
          CORPUS_CUSTOMERS);
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Below the paper's size the splits scale down with the corpus (tests and
// quick looks); at 11,100 tasks and above they are the paper's.
static void scale_splits(CorpusConfig *c) {
  const int full = 1000 + 100 + 10000;
  if (c->total >= full) return;
  c->heldout = c->total * 1000 / (4 * full) > 0 ? c->total * 1000 / (4 * full) : 1;
  c->validation = c->total * 100 / (4 * full) > 0 ? c->total * 100 / (4 * full) : 1;
  c->train = c->total * 10000 / (4 * full) > 0 ? c->total * 10000 / (4 * full) : 1;
}

static int cmd_corpus_build(int argc, char **argv) {
  FimiError err = {0};
  CorpusConfig config;
  corpus_config_default(&config);
  const char *out = NULL;
  long seed = 1, total = config.total, customers = CORPUS_CUSTOMERS;
  static const char *const flags[] = {"--out", "--seed", "--total", "--customers", NULL};
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i];
    if (!cli_is_one_of(flag, flags)) {
      fprintf(stderr, "fimi env corpus build: unknown option \"%s\" (see fimi env corpus --help)\n", flag);
      return CLI_EXIT_USAGE;
    }
    const char *v = cli_flag_value(argc, argv, &i, &err);
    if (!v) return cli_fail("env corpus build", &err);
    int rc = 0;
    if (!strcmp(flag, "--out")) out = v;
    else if (!strcmp(flag, "--seed")) rc = cli_parse_int(flag, v, 0, 4294967295L, &seed, &err);
    else if (!strcmp(flag, "--total")) rc = cli_parse_int(flag, v, 10, CORPUS_MAX_TASKS, &total, &err);
    else rc = cli_parse_int(flag, v, 1, BANK_MAX_CUSTOMERS, &customers, &err);
    if (rc) return cli_fail("env corpus build", &err);
  }
  if (!out) {
    fprintf(stderr, "fimi env corpus build: --out DIR is required\n");
    return CLI_EXIT_USAGE;
  }
  config.seed = (uint64_t)seed;
  config.image_seed = bank_image_seed((uint64_t)seed, (int)customers);
  config.total = (int)total;
  config.progress = 1;
  scale_splits(&config);
  Corpus corpus;
  double start = now_seconds();
  int rc = corpus_build(&config, &corpus, &err);
  double built = now_seconds();
  if (rc != 0 && corpus.count == 0) {
    corpus_free(&corpus);
    return cli_fail("env corpus build", &err);
  }
  FimiError werr = {0};
  if (corpus_write(&corpus, out, &werr) != 0) {
    corpus_free(&corpus);
    return cli_fail("env corpus build", &werr);
  }
  fprintf(stderr, "corpus: %d tasks on %d customers (image %lld bytes) in %.1f s, written in %.1f s to %s\n",
          corpus.count, corpus.image_customers, (long long)corpus.image_bytes, built - start, now_seconds() - built,
          out);
  corpus_free(&corpus);
  return rc != 0 ? cli_fail("env corpus build", &err) : 0;
}

// ---- report ------------------------------------------------------------------------

typedef struct Split {
  TaskList list;
} Split;

static const double PAPER_SHARE[TASK_USE_COUNT] = {0.322, 0.326, 0.048, 0.012, 0.291};

static int load_splits(const char *dir, const CorpusManifest *m, Split *splits, FimiError *err) {
  char path[4096];
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    if (path_join(path, sizeof path, dir, m->files[s].name, err) != 0) return -1;
    if (m->files[s].tasks == 0) continue;  // the strict reader refuses empty files
    if (task_list_load(path, &splits[s].list, err) != 0) return -1;
    if (splits[s].list.count != m->files[s].tasks)
      return fimi_fail(err, "%s: %d tasks; the manifest says %d", path, splits[s].list.count, m->files[s].tasks);
  }
  return 0;
}

static double pct(int n, int of) { return of ? 100.0 * n / of : 0; }

static void print_families(const CorpusManifest *m) {
  printf("\n## Tasks per family\n\n| family | kind | use case | slice | sample | corpus | heldout | validation | train |"
         " exhausted |\n|---|---|---|---|---|---:|---:|---:|---:|---|\n");
  for (int f = 0; f < m->num_families; f++) {
    const CorpusFamily *x = &m->families[f];
    printf("| %s | %s | %s | %s | %s | %d | %d | %d | %d | %s |\n", x->name, task_kind_name(x->kind),
           task_use_case_name(x->use_case), x->shallow ? "shallow" : "deep", x->in_sample ? "yes" : "no", x->tasks,
           x->split_tasks[CORPUS_SPLIT_HELDOUT], x->split_tasks[CORPUS_SPLIT_VALIDATION],
           x->split_tasks[CORPUS_SPLIT_TRAIN], x->exhausted ? "yes" : "no");
  }
}

static void print_mix(const Split *sp) {
  printf("\n## Kinds and use cases per split (tasks, share)\n\n| | corpus | heldout | validation | train |\n"
         "|---|---:|---:|---:|---:|\n");
  for (int k = 0; k < TASK_KIND_COUNT; k++) {
    printf("| kind %s |", task_kind_name((TaskKind)k));
    for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
      int n = 0;
      for (int i = 0; i < sp[s].list.count; i++) n += sp[s].list.tasks[i].kind == (TaskKind)k;
      printf(" %d (%.1f%%) |", n, pct(n, sp[s].list.count));
    }
    printf("\n");
  }
  for (int u = 0; u < TASK_USE_COUNT; u++) {
    printf("| %s |", task_use_case_name((TaskUseCase)u));
    for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
      int n = 0;
      for (int i = 0; i < sp[s].list.count; i++) n += sp[s].list.tasks[i].use_case == (TaskUseCase)u;
      printf(" %d (%.1f%%) |", n, pct(n, sp[s].list.count));
    }
    printf("\n");
  }
  printf("\n## Use-case shares of the corpus against the FiMI paper\n\n| use case | corpus | paper |\n|---|---:|---:|\n");
  for (int u = 0; u < TASK_USE_COUNT; u++) {
    int n = 0;
    for (int i = 0; i < sp[0].list.count; i++) n += sp[0].list.tasks[i].use_case == (TaskUseCase)u;
    printf("| %s | %.1f%% | %.1f%% |\n", task_use_case_name((TaskUseCase)u), pct(n, sp[0].list.count),
           100 * PAPER_SHARE[u]);
  }
}

static void print_chains(const Split *sp) {
  printf("\n## Gold chain lengths (tasks per split)\n\n| actions | corpus | heldout | validation | train |\n"
         "|---:|---:|---:|---:|---:|\n");
  for (int n = 0; n <= CORPUS_MAX_CHAIN; n++) {
    printf("| %d |", n);
    for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
      int c = 0;
      for (int i = 0; i < sp[s].list.count; i++) c += sp[s].list.tasks[i].num_gold == n;
      printf(" %d |", c);
    }
    printf("\n");
  }
}

static int by_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Distinct opening lines and the most repeated one, per split.
static int print_openings(const Split *sp) {
  printf("\n## Opening-line diversity\n\n| split | tasks | distinct openings | share distinct | most repeats |\n"
         "|---|---:|---:|---:|---:|\n");
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    int n = sp[s].list.count, distinct = 0, top = 0;
    char **lines = calloc((size_t)n + 1, sizeof *lines);
    if (!lines) return -1;
    for (int i = 0; i < n; i++) lines[i] = sp[s].list.tasks[i].reason;
    qsort(lines, (size_t)n, sizeof *lines, by_text);
    for (int i = 0, run = 0; i < n; i++) {
      run = i > 0 && !strcmp(lines[i], lines[i - 1]) ? run + 1 : 1;
      distinct += run == 1;
      if (run > top) top = run;
    }
    free(lines);
    printf("| %s | %d | %d | %.1f%% | %d |\n", corpus_split_name((CorpusSplit)s), n, distinct, pct(distinct, n), top);
  }
  return 0;
}

static void print_checks(const Split *sp) {
  printf("\n## Declared checks\n\n| split | only seq and db | needs the judge | seq | db | comm | judge |\n"
         "|---|---:|---:|---:|---:|---:|---:|\n");
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    int n = sp[s].list.count, only = 0, judge = 0, bit[4] = {0};
    for (int i = 0; i < n; i++) {
      int c = sp[s].list.tasks[i].checks;
      only += (c & ~(TASK_CHECK_SEQ | TASK_CHECK_DB)) == 0;
      judge += (c & TASK_CHECK_JUDGE) != 0;
      for (int b = 0; b < 4; b++) bit[b] += (c >> b) & 1;
    }
    printf("| %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", corpus_split_name((CorpusSplit)s),
           pct(only, n), pct(judge, n), pct(bit[0], n), pct(bit[1], n), pct(bit[2], n), pct(bit[3], n));
  }
  printf("(the FiMI paper: 91.3%% of its corpus uses only the seq and db checks, under 9%% needs the judge)\n");
}

// Named variants (product and channel prefixes, TaskFamily.variants): how
// many the registry names, and how many each split's tasks instantiate.
static int print_variants(const Split *sp) {
  int named = 0;
  for (int f = 0; f < task_family_count(); f++) named += task_family_variant_count(task_family_at(f));
  printf("\n## Named variants\n\n%d named variants in the registry's %d families (the FiMI paper: 408 over 100)\n\n"
         "| split | tasks naming a variant | distinct variants |\n|---|---:|---:|\n",
         named, task_family_count());
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    int n = sp[s].list.count, with = 0, distinct = 0;
    char **names = calloc((size_t)n + 1, sizeof *names);
    if (!names) return -1;
    for (int i = 0; i < n; i++)
      if (sp[s].list.tasks[i].variant) names[with++] = sp[s].list.tasks[i].variant;
    qsort(names, (size_t)with, sizeof *names, by_text);
    for (int i = 0; i < with; i++) distinct += i == 0 || strcmp(names[i], names[i - 1]) != 0;
    free(names);
    printf("| %s | %d | %d |\n", corpus_split_name((CorpusSplit)s), with, distinct);
  }
  return 0;
}

static void print_gates(const CorpusManifest *m) {
  printf("\n## Gates\n\n| gate | rule | rejected | status |\n|---|---|---:|---|\n");
  for (int g = 0; g < CORPUS_GATE_COUNT; g++)
    printf("| %s | %s | %d | %s%s%s |\n", m->gates[g].name, corpus_gate_rule((CorpusGate)g), m->gates[g].rejected,
           m->gates[g].failed ? "FAILED" : "ok", m->gates[g].detail[0] ? ": " : "", m->gates[g].detail);
}

static int cmd_corpus_report(int argc, char **argv) {
  if (argc != 1) {
    fprintf(stderr, "fimi env corpus report: expected one directory (see fimi env corpus --help)\n");
    return CLI_EXIT_USAGE;
  }
  FimiError err = {0};
  CorpusManifest *m = calloc(1, sizeof *m);
  Split splits[CORPUS_SPLIT_COUNT];
  memset(splits, 0, sizeof splits);
  int rc = m ? corpus_manifest_load(argv[0], m, &err) : fimi_fail(&err, "out of memory");
  if (rc == 0) rc = load_splits(argv[0], m, splits, &err);
  if (rc == 0) {
    printf("# Task corpus %s\n\nseed %llu, image seed %llu (%d customers, image %lld bytes), target %d tasks\n\n"
           "| split | tasks | bytes |\n|---|---:|---:|\n",
           argv[0], (unsigned long long)m->seed, (unsigned long long)m->image_seed, m->customers,
           (long long)m->image_bytes, m->total_target);
    for (int s = 0; s < CORPUS_SPLIT_COUNT; s++)
      printf("| %s | %d | %lld |\n", corpus_split_name((CorpusSplit)s), m->files[s].tasks, (long long)m->files[s].bytes);
    print_families(m);
    print_mix(splits);
    print_chains(splits);
    rc = print_openings(splits) != 0 || print_variants(splits) != 0 ? fimi_fail(&err, "out of memory") : 0;
    print_checks(splits);
    print_gates(m);
  }
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) task_list_free(&splits[s].list);
  free(m);
  return rc ? cli_fail("env corpus report", &err) : 0;
}

int cmd_env_corpus(int argc, char **argv) {
  // argv[0] is "corpus".
  if (argc < 2 || cli_wants_help(argc, argv, 1)) {
    usage_to(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : 0;
  }
  if (!strcmp(argv[1], "build")) return cmd_corpus_build(argc - 2, argv + 2);
  if (!strcmp(argv[1], "report")) return cmd_corpus_report(argc - 2, argv + 2);
  fprintf(stderr, "fimi env corpus: unknown subcommand \"%s\" (build or report; see fimi env corpus --help)\n", argv[1]);
  return CLI_EXIT_USAGE;
}
