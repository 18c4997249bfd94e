// cmd/cmd_dpo.c: `fimi dpo`, the preference route's data (docs/dpo-pairs.md):
//   corpus build --tasks F --out conv.jsonl   reference dialogs from env's oracle,
//       validated (dpo/corpus_check.h), with per-turn atomic actions, and a
//       coverage report (OUT.coverage.json)
//   pairs --model DIR --corpus conv.jsonl --out pairs.jsonl   the candidate replayed
//       under teacher forcing, one pair per first divergence (dpo/pairs.h);
//       resumable: OUT.progress records each finished dialog and the size of
//       OUT after it, so a killed run continues where it stopped, without
//       duplicated or partial pairs; OUT.summary.json at the end.
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/dpo_decoder_cuda.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/progress.h"
#include "data/tokenizer.h"
#include "dpo/candidate_model.h"
#include "dpo/corpus.h"
#include "dpo/pairs.h"
#include "env/agent_prompt.h"
#include "kernels/device.h"
#include "model/weights.h"

static void dpo_usage(FILE *out) {
  fprintf(out,
          "usage: fimi dpo corpus build --tasks F --out conv.jsonl [--catalog all|area|family] [--seed S]\n"
          "                             [--family PATTERN] [--coverage FILE]\n"
          "       fimi dpo pairs --model DIR --corpus conv.jsonl --out pairs.jsonl [--device cpu|cuda]\n"
          "                      [--temperature T] [--top-p P] [--samples K] [--seed S] [--max-new N]\n"
          "                      [--chosen reference|self-rephrase] [--tokenizer FILE] [--max-dialogs N]\n"
          "                      [--no-progress]\n"
          "  corpus build  plays env's oracle against each task's pinned customer, validates every dialog\n"
          "                (gold calls, values from the data, consent before charges, rules, arithmetic\n"
          "                recomputed) and writes the accepted ones; rejections counted by reason;\n"
          "                coverage in OUT.coverage.json (or --coverage). Dialog i plays with seed S + i.\n"
          "  pairs         replays the corpus with the model as the candidate under teacher forcing and\n"
          "                writes one DPO pair (TRL prompt/chosen/rejected message lists + tag) per\n"
          "                failing turn; rerun the same command to resume; --max-dialogs N stops after N\n"
          "                more dialogs. Defaults: greedy (--temperature 0), 1 sample, seed 0, 96 tokens.\n"
          "                --chosen self-rephrase: the model revises its own failing turn under a rubric;\n"
          "                the revision is the chosen side when it passes the checks, else the reference\n"
          "                turn (counted). Both sides are scored: log-probs under the model, per\n"
          "                construction, in OUT.summary.json.\n"
          "                --device cuda: generation and scoring on the GPU (bf16 weights), sampled on the\n"
          "                host as on the CPU.\n");
}

// ---- corpus build ----------------------------------------------------------------

typedef struct CorpusArgs {
  const char *tasks, *out, *catalog, *family, *coverage;
  long seed;
} CorpusArgs;

static int parse_corpus_args(int argc, char **argv, CorpusArgs *a, FimiError *err) {
  static const char *const flags[] = {"--tasks", "--out", "--catalog", "--seed", "--family", "--coverage", NULL};
  a->catalog = "all";
  for (int i = 0; i < argc; i++) {
    if (!cli_is_one_of(argv[i], flags)) return fimi_fail(err, "unknown option \"%s\"", argv[i]);
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, err);
    if (!v) return -1;
    if (!strcmp(flag, "--tasks")) a->tasks = v;
    else if (!strcmp(flag, "--out")) a->out = v;
    else if (!strcmp(flag, "--catalog")) a->catalog = v;
    else if (!strcmp(flag, "--family")) a->family = v;
    else if (!strcmp(flag, "--coverage")) a->coverage = v;
    else if (cli_parse_int(flag, v, 0, 2147483647L, &a->seed, err) != 0) return -1;
  }
  if (!a->tasks || !a->out) return fimi_fail(err, "--tasks and --out are required");
  return 0;
}

static int write_line(FILE *f, const cJSON *row) {
  char *line = cJSON_PrintUnformatted(row);
  int ok = line && fputs(line, f) != EOF && fputc('\n', f) != EOF;
  free(line);
  return ok ? 0 : -1;
}

static int corpus_build(int argc, char **argv) {
  CorpusArgs a = {0};
  FimiError err = {0};
  EnvCatalogMode mode;
  if (parse_corpus_args(argc, argv, &a, &err) != 0 || env_catalog_mode_parse(a.catalog, &mode, &err) != 0) {
    fprintf(stderr, "fimi dpo corpus build: %s (see fimi dpo corpus --help)\n", err.message);
    return CLI_EXIT_USAGE;
  }
  TaskList tasks = {0};
  if (task_list_load(a.tasks, &tasks, &err) != 0) return cli_fail("dpo corpus build", &err);
  char tmp[4096], cov_path[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", a.out);
  snprintf(cov_path, sizeof cov_path, "%s", a.coverage ? a.coverage : "");
  if (!a.coverage) snprintf(cov_path, sizeof cov_path, "%s.coverage.json", a.out);
  EnvWorld *world = NULL;
  DpoCoverage cov;
  FILE *f = NULL;
  int rc = env_world_create(&world, &err) || dpo_coverage_init(&cov, &err) ? cli_fail("dpo corpus build", &err) : 0;
  if (rc == 0 && !(f = fopen(tmp, "wb"))) {
    fprintf(stderr, "fimi dpo corpus build: cannot create %s\n", tmp);
    rc = CLI_EXIT_FAILURE;
  }
  long skipped = 0;
  for (int i = 0; rc == 0 && i < tasks.count; i++) {
    const Task *t = &tasks.tasks[i];
    if (a.family && fnmatch(a.family, t->family, 0) != 0) {
      skipped++;
      continue;
    }
    cJSON *row = NULL;
    DpoCheckResult v;
    if (dpo_corpus_dialog(world, t, (uint64_t)a.seed + (uint64_t)i, mode, &row, &v, &err) != 0) {
      fimi_fail_wrap(&err, "%s: task %s", a.tasks, t->id);
      rc = cli_fail("dpo corpus build", &err);
      break;
    }
    if (!row) {
      dpo_coverage_reject(&cov, v.reason);
      fprintf(stderr, "rejected %s: %s: %s\n", t->id, dpo_reject_reason_name(v.reason), v.detail);
      continue;
    }
    dpo_coverage_add(&cov, t, row, &v, &err);
    if (write_line(f, row) != 0) {
      fprintf(stderr, "fimi dpo corpus build: cannot write %s\n", tmp);
      rc = CLI_EXIT_FAILURE;
    }
    cJSON_Delete(row);
  }
  if (f && fclose(f) != 0 && rc == 0) rc = CLI_EXIT_FAILURE;
  if (rc == 0 && cov.dialogs == 0) {
    fprintf(stderr, "fimi dpo corpus build: no dialog of %s was accepted\n", a.tasks);
    rc = CLI_EXIT_FAILURE;
  }
  cJSON *cj = rc == 0 ? dpo_coverage_json(&cov) : NULL;
  if (rc == 0 && (!cj || json_write_file(cov_path, cj, &err) != 0)) rc = cli_fail("dpo corpus build", &err);
  if (rc == 0 && rename(tmp, a.out) != 0) {
    fprintf(stderr, "fimi dpo corpus build: cannot rename %s to %s\n", tmp, a.out);
    rc = CLI_EXIT_FAILURE;
  }
  if (rc != 0) remove(tmp);
  if (rc == 0) {
    printf("wrote %d dialogs to %s (%d rejected", cov.dialogs, a.out, cov.rejected);
    for (int r = 1; r < DPO_REJECT_COUNT; r++)
      if (cov.rejected_by[r]) printf(", %s %d", dpo_reject_reason_name((DpoRejectReason)r), cov.rejected_by[r]);
    printf(")%s; %d agent turns (%d tool calls, %d messages); %ld tool-result values recomputed; coverage in %s\n",
           skipped ? " [other families skipped]" : "", cov.agent_turns, cov.calls, cov.messages,
           cov.arithmetic_checked, cov_path);
  }
  cJSON_Delete(cj);
  dpo_coverage_free(&cov);
  env_world_free(world);
  task_list_free(&tasks);
  return rc;
}

// ---- pairs -------------------------------------------------------------------------

typedef struct PairsArgs {
  const char *model, *corpus, *out, *tokenizer, *device;
  DpoChosenSource chosen;
  double temperature, top_p;
  long samples, seed, max_new, max_dialogs;
  int progress;
} PairsArgs;

static int parse_pairs_args(int argc, char **argv, PairsArgs *a, FimiError *err) {
  static const char *const flags[] = {"--model", "--corpus", "--out", "--tokenizer", "--device", "--temperature",
                                      "--top-p", "--samples", "--seed", "--max-new", "--max-dialogs", "--chosen", NULL};
  a->top_p = 1.0;
  a->samples = 1;
  a->max_new = 96;
  a->max_dialogs = -1;
  a->progress = 1;
  a->device = "cpu";
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--no-progress")) {
      a->progress = 0;
      continue;
    }
    if (!cli_is_one_of(argv[i], flags)) return fimi_fail(err, "unknown option \"%s\"", argv[i]);
    const char *flag = argv[i], *v = cli_flag_value(argc, argv, &i, err);
    if (!v) return -1;
    int rc = 0;
    if (!strcmp(flag, "--model")) a->model = v;
    else if (!strcmp(flag, "--corpus")) a->corpus = v;
    else if (!strcmp(flag, "--out")) a->out = v;
    else if (!strcmp(flag, "--tokenizer")) a->tokenizer = v;
    else if (!strcmp(flag, "--device")) a->device = v;
    else if (!strcmp(flag, "--chosen")) rc = dpo_chosen_source_parse(v, &a->chosen, err);
    else if (!strcmp(flag, "--temperature")) rc = cli_parse_float(flag, v, &a->temperature, err);
    else if (!strcmp(flag, "--top-p")) rc = cli_parse_float(flag, v, &a->top_p, err);
    else if (!strcmp(flag, "--samples")) rc = cli_parse_int(flag, v, 1, 64, &a->samples, err);
    else if (!strcmp(flag, "--seed")) rc = cli_parse_int(flag, v, 0, 2147483647L, &a->seed, err);
    else if (!strcmp(flag, "--max-new")) rc = cli_parse_int(flag, v, 1, 8192, &a->max_new, err);
    else rc = cli_parse_int(flag, v, 0, 2147483647L, &a->max_dialogs, err);
    if (rc != 0) return -1;
  }
  if (!a->model || !a->corpus || !a->out) return fimi_fail(err, "--model, --corpus and --out are required");
  Device device;
  if (device_parse(a->device, &device, err) != 0) return fimi_fail_wrap(err, "--device");
  if (a->temperature < 0 || !(a->top_p > 0 && a->top_p <= 1))
    return fimi_fail(err, "--temperature must be >= 0 and --top-p in (0, 1]");
  return 0;
}

// The corpus as lines (blank lines skipped): offsets into one buffer.
typedef struct Lines {
  char *text;
  size_t *start, *len;
  long count;
} Lines;

static void lines_free(Lines *l) {
  free(l->text);
  free(l->start);
  free(l->len);
}

static int lines_load(const char *path, Lines *l, FimiError *err) {
  memset(l, 0, sizeof *l);
  size_t size = 0;
  if (!(l->text = file_read_all(path, (size_t)1 << 34, &size, err))) return -1;
  long cap = 0;
  for (size_t pos = 0; pos < size;) {
    char *nl = memchr(l->text + pos, '\n', size - pos);
    size_t n = nl ? (size_t)(nl - (l->text + pos)) : size - pos;
    size_t k = 0;
    while (k < n && (l->text[pos + k] == ' ' || l->text[pos + k] == '\r' || l->text[pos + k] == '\t')) k++;
    if (k < n) {
      if (l->count == cap) {
        cap = cap ? cap * 2 : 256;
        size_t *s = realloc(l->start, sizeof *s * (size_t)cap), *ln = s ? realloc(l->len, sizeof *ln * (size_t)cap) : NULL;
        if (s) l->start = s;
        if (!s || !ln) return fimi_fail(err, "out of memory");
        l->len = ln;
      }
      l->start[l->count] = pos;
      l->len[l->count++] = n;
    }
    pos += n + 1;
  }
  if (l->count == 0) return fimi_fail(err, "%s: no dialogs", path);
  return 0;
}

// What a run was started with: a resume must use the same.
static cJSON *run_params(const PairsArgs *a, long dialogs) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "model", a->model);
  cJSON_AddStringToObject(p, "corpus", a->corpus);
  cJSON_AddNumberToObject(p, "dialogs", (double)dialogs);
  cJSON_AddNumberToObject(p, "temperature", a->temperature);
  cJSON_AddNumberToObject(p, "top_p", a->top_p);
  cJSON_AddNumberToObject(p, "samples", (double)a->samples);
  cJSON_AddNumberToObject(p, "seed", (double)a->seed);
  cJSON_AddNumberToObject(p, "max_new", (double)a->max_new);
  cJSON_AddStringToObject(p, "chosen", dpo_chosen_source_name(a->chosen));
  cJSON_AddStringToObject(p, "device", a->device);  // bf16 GPU turns differ from fp32 CPU ones
  return p;
}

static cJSON *stats_json(const DpoReplayStats *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "turns", (double)s->turns);
  cJSON_AddNumberToObject(o, "samples", (double)s->samples);
  cJSON_AddNumberToObject(o, "diverged", (double)s->diverged);
  cJSON_AddNumberToObject(o, "pairs", (double)s->pairs);
  cJSON_AddNumberToObject(o, "sanitized", (double)s->sanitized);
  cJSON_AddNumberToObject(o, "skipped", (double)s->skipped);
  cJSON *tags = cJSON_AddObjectToObject(o, "tags");
  for (int t = 1; t < DPO_TAG_COUNT; t++) cJSON_AddNumberToObject(tags, dpo_tag_name((DpoTag)t), (double)s->tags[t]);
  cJSON_AddNumberToObject(o, "chosen_chars", (double)s->chosen_chars);
  cJSON_AddNumberToObject(o, "rejected_chars", (double)s->rejected_chars);
  cJSON_AddNumberToObject(o, "rephrase_attempts", (double)s->rephrase_attempts);
  cJSON_AddNumberToObject(o, "rephrase_accepted", (double)s->rephrase_accepted);
  cJSON *by = cJSON_AddObjectToObject(o, "constructions");
  for (int c = 0; c < DPO_CHOSEN_COUNT; c++) {
    const DpoConstructionStats *cs = &s->by_source[c];
    cJSON *e = cJSON_AddObjectToObject(by, dpo_chosen_source_name((DpoChosenSource)c));
    cJSON_AddNumberToObject(e, "pairs", (double)cs->pairs);
    cJSON_AddNumberToObject(e, "chosen_chars", (double)cs->chosen_chars);
    cJSON_AddNumberToObject(e, "rejected_chars", (double)cs->rejected_chars);
    cJSON_AddNumberToObject(e, "scored", (double)cs->scored);
    cJSON_AddNumberToObject(e, "logp_chosen", cs->logp_chosen);
    cJSON_AddNumberToObject(e, "logp_rejected", cs->logp_rejected);
    cJSON_AddNumberToObject(e, "chosen_tokens", (double)cs->chosen_tokens);
    cJSON_AddNumberToObject(e, "rejected_tokens", (double)cs->rejected_tokens);
  }
  cJSON_AddNumberToObject(o, "generate_seconds", s->generate_seconds);
  cJSON_AddNumberToObject(o, "check_seconds", s->check_seconds);
  cJSON_AddNumberToObject(o, "score_seconds", s->score_seconds);
  return o;
}

static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void stats_from_json(const cJSON *o, DpoReplayStats *s) {
  memset(s, 0, sizeof *s);
  s->turns = (long)num(o, "turns");
  s->samples = (long)num(o, "samples");
  s->diverged = (long)num(o, "diverged");
  s->pairs = (long)num(o, "pairs");
  s->sanitized = (long)num(o, "sanitized");
  s->skipped = (long)num(o, "skipped");
  const cJSON *tags = cJSON_GetObjectItemCaseSensitive(o, "tags");
  for (int t = 1; t < DPO_TAG_COUNT; t++) s->tags[t] = (long)num(tags, dpo_tag_name((DpoTag)t));
  s->chosen_chars = (long)num(o, "chosen_chars");
  s->rejected_chars = (long)num(o, "rejected_chars");
  s->rephrase_attempts = (long)num(o, "rephrase_attempts");
  s->rephrase_accepted = (long)num(o, "rephrase_accepted");
  const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "constructions");
  for (int c = 0; c < DPO_CHOSEN_COUNT; c++) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(by, dpo_chosen_source_name((DpoChosenSource)c));
    DpoConstructionStats *cs = &s->by_source[c];
    cs->pairs = (long)num(e, "pairs");
    cs->chosen_chars = (long)num(e, "chosen_chars");
    cs->rejected_chars = (long)num(e, "rejected_chars");
    cs->scored = (long)num(e, "scored");
    cs->logp_chosen = num(e, "logp_chosen");
    cs->logp_rejected = num(e, "logp_rejected");
    cs->chosen_tokens = (long)num(e, "chosen_tokens");
    cs->rejected_tokens = (long)num(e, "rejected_tokens");
  }
  s->generate_seconds = num(o, "generate_seconds");
  s->check_seconds = num(o, "check_seconds");
  s->score_seconds = num(o, "score_seconds");
}

// The run so far: totals and per family, from the progress entries.
typedef struct RunTotals {
  DpoReplayStats all;
  cJSON *families;  // {"family": stats}
  long done;        // dialogs finished
  long bytes;       // size of the pairs file after the last finished dialog
} RunTotals;

static void totals_add(RunTotals *t, const char *family, const DpoReplayStats *s) {
  dpo_replay_stats_add(&t->all, s);
  DpoReplayStats f;
  cJSON *old = cJSON_GetObjectItemCaseSensitive(t->families, family);
  stats_from_json(old, &f);
  dpo_replay_stats_add(&f, s);
  cJSON *fresh = stats_json(&f);
  if (old) cJSON_ReplaceItemInObjectCaseSensitive(t->families, family, fresh);
  else cJSON_AddItemToObject(t->families, family, fresh);
}

// Reads OUT.progress (header with the parameters, one line per dialog).
// Returns 0 with totals (done = 0 when there is none), -1 on a mismatch.
static int read_progress(const char *path, const cJSON *params, RunTotals *t, FimiError *err) {
  if (access(path, F_OK) != 0) return 0;
  size_t size = 0;
  char *text = file_read_all(path, (size_t)1 << 30, &size, err);
  if (!text) return -1;
  int rc = 0, line = 0;
  for (char *s = text, *nl; rc == 0 && s < text + size; s = nl + 1) {
    nl = memchr(s, '\n', (size_t)(text + size - s));
    if (!nl) break;  // a line cut by a kill: ignored, rewritten below
    line++;
    cJSON *o = cJSON_ParseWithLength(s, (size_t)(nl - s));
    if (!o) {
      rc = fimi_fail(err, "%s:%d: not JSON", path, line);
      break;
    }
    if (line == 1) {
      if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(o, "params"), params, 1))
        rc = fimi_fail(err, "%s was written by a run with other parameters (model, corpus, sampling); remove it and the "
                            "pairs file to start over", path);
    } else if ((long)num(o, "dialog") != t->done) {
      rc = fimi_fail(err, "%s:%d: dialog %ld expected", path, line, t->done);
    } else {
      DpoReplayStats s;
      stats_from_json(cJSON_GetObjectItemCaseSensitive(o, "stats"), &s);
      const cJSON *fam = cJSON_GetObjectItemCaseSensitive(o, "family");
      totals_add(t, cJSON_IsString(fam) ? fam->valuestring : "?", &s);
      t->done++;
      t->bytes = (long)num(o, "bytes");
    }
    cJSON_Delete(o);
  }
  free(text);
  return rc;
}

static cJSON *summary_json(const RunTotals *t, long dialogs, DpoChosenSource chosen) {
  const DpoReplayStats *s = &t->all;
  cJSON *o = stats_json(s);
  cJSON_AddNumberToObject(o, "dialogs", (double)t->done);
  cJSON_AddNumberToObject(o, "dialogs_in_corpus", (double)dialogs);
  cJSON_AddNumberToObject(o, "divergence_rate", s->samples ? (double)s->diverged / (double)s->samples : 0);
  cJSON_AddNumberToObject(o, "mean_chosen_chars", s->pairs ? (double)s->chosen_chars / (double)s->pairs : 0);
  cJSON_AddNumberToObject(o, "mean_rejected_chars", s->pairs ? (double)s->rejected_chars / (double)s->pairs : 0);
  cJSON_AddNumberToObject(o, "length_diff_chars",
                          s->pairs ? (double)(s->chosen_chars - s->rejected_chars) / (double)s->pairs : 0);
  double secs = s->generate_seconds + s->check_seconds + s->score_seconds;
  cJSON_AddNumberToObject(o, "turns_per_second", secs > 0 ? (double)s->turns / secs : 0);
  // With self-rephrase, every pair whose chosen side is the reference turn
  // fell back: its revision failed the checks or exceeded the context.
  cJSON_AddNumberToObject(o, "rephrase_fallback",
                          chosen == DPO_CHOSEN_SELF_REPHRASE ? (double)s->by_source[DPO_CHOSEN_REFERENCE].pairs : 0);
  cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "constructions");
  for (int c = 0; by && c < DPO_CHOSEN_COUNT; c++) {
    const DpoConstructionStats *cs = &s->by_source[c];
    cJSON *e = cJSON_GetObjectItemCaseSensitive(by, dpo_chosen_source_name((DpoChosenSource)c));
    double n = (double)cs->scored;
    cJSON_AddNumberToObject(e, "mean_logp_chosen", n ? cs->logp_chosen / n : 0);
    cJSON_AddNumberToObject(e, "mean_logp_rejected", n ? cs->logp_rejected / n : 0);
    cJSON_AddNumberToObject(e, "logp_per_token_chosen", cs->chosen_tokens ? cs->logp_chosen / (double)cs->chosen_tokens : 0);
    cJSON_AddNumberToObject(e, "logp_per_token_rejected",
                            cs->rejected_tokens ? cs->logp_rejected / (double)cs->rejected_tokens : 0);
    cJSON_AddNumberToObject(e, "length_diff_chars",
                            cs->pairs ? (double)(cs->chosen_chars - cs->rejected_chars) / (double)cs->pairs : 0);
  }
  cJSON *fam = cJSON_AddObjectToObject(o, "families");
  for (const cJSON *f = t->families->child; fam && f; f = f->next) {
    cJSON *e = cJSON_Duplicate(f, 1);
    double samples = num(f, "samples");
    cJSON_AddNumberToObject(e, "divergence_rate", samples ? num(f, "diverged") / samples : 0);
    cJSON_AddItemToObject(fam, f->string, e);
  }
  return o;
}

static int append_progress(FILE *pf, const cJSON *line) {
  if (write_line(pf, line) != 0 || fflush(pf) != 0) return -1;
  return fsync(fileno(pf));
}

typedef struct PairsRun {
  PairsArgs a;
  Lines corpus;
  GemmaModel model;
  int have_model;
  Tokenizer *tok;
  DpoModelCandidate cand;
  int have_cand;
  RunTotals totals;
  char progress_path[4096], summary_path[4096];
} PairsRun;

static int open_model(PairsRun *r, FimiError *err) {
  char tok_path[4096];
  if (gemma_load_pretrained(&r->model, r->a.model, err) != 0) return -1;
  r->have_model = 1;
  if (!r->a.tokenizer && path_join(tok_path, sizeof tok_path, r->a.model, "tokenizer.json", err) != 0) return -1;
  if (tokenizer_load_file(r->a.tokenizer ? r->a.tokenizer : tok_path, &r->tok, err) != 0) return -1;
  SamplerConfig sampler = {(float)r->a.temperature, (float)r->a.top_p};
  Device device;
  DpoDecoder decoder;
  if (device_parse(r->a.device, &device, err) != 0 || device_require(device, err) != 0) return -1;
  if (device == DEVICE_CPU) {
    if (dpo_decoder_cpu(&decoder, &r->model, err) != 0) return -1;
  } else {
#ifdef FIMI_HAVE_CUDA
    if (dpo_decoder_cuda(&decoder, &r->model, 64, err) != 0) return -1;
#else
    return fimi_fail(err, "this fimi was built without the CUDA backend");
#endif
  }
  if (dpo_model_candidate_init(&r->cand, decoder, r->tok, (int)r->a.max_new, sampler, err) != 0) return -1;
  r->have_cand = 1;
  return 0;
}

// Dialogs [totals.done, end) appended to the pairs file, one progress line each.
static int replay_dialogs(PairsRun *r, FILE *out, FILE *pf, long end, FimiError *err) {
  DpoCandidate cand = dpo_model_candidate(&r->cand);
  DpoPairOptions opt = {(int)r->a.samples, (uint64_t)r->a.seed, NULL, r->a.chosen};
  Progress prog;
  long first = r->totals.done;
  if (r->a.progress) progress_start(&prog, "dpo pairs", r->corpus.count, stderr);
  for (long i = first; i < end; i++) {
    char what[4200];
    snprintf(what, sizeof what, "%s: dialog %ld", r->a.corpus, i + 1);
    cJSON *row = json_parse_text(r->corpus.text + r->corpus.start[i], r->corpus.len[i], what, err);
    DpoDialog d;
    if (!row || dpo_dialog_parse(row, what, &d, err) != 0) {
      cJSON_Delete(row);
      return -1;
    }
    cJSON *pairs = cJSON_CreateArray();
    DpoReplayStats s = {0};
    int rc = dpo_pairs_dialog(&d, i, &cand, &opt, pairs, &s, err);
    if (rc != 0) fimi_fail_wrap(err, "%s (task %s)", what, d.task.id);
    for (const cJSON *p = pairs->child; rc == 0 && p; p = p->next)
      if (write_line(out, p) != 0) rc = fimi_fail(err, "cannot write %s", r->a.out);
    if (rc == 0 && (fflush(out) != 0 || fsync(fileno(out)) != 0)) rc = fimi_fail(err, "cannot write %s", r->a.out);
    if (rc == 0) {
      cJSON *line = cJSON_CreateObject();
      cJSON_AddNumberToObject(line, "dialog", (double)i);
      cJSON_AddStringToObject(line, "task_id", d.task.id);
      cJSON_AddStringToObject(line, "family", d.family);
      cJSON_AddNumberToObject(line, "bytes", (double)ftell(out));
      cJSON_AddItemToObject(line, "stats", stats_json(&s));
      if (append_progress(pf, line) != 0) rc = fimi_fail(err, "cannot write %s", r->progress_path);
      cJSON_Delete(line);
      totals_add(&r->totals, d.family, &s);
      r->totals.done++;
    }
    cJSON_Delete(pairs);
    dpo_dialog_free(&d);
    cJSON_Delete(row);
    if (rc != 0) return -1;
    if (r->a.progress) {
      char extra[160];
      const DpoReplayStats *t = &r->totals.all;
      snprintf(extra, sizeof extra, "pairs %ld, diverged %.1f%%", t->pairs,
               t->samples ? 100.0 * (double)t->diverged / (double)t->samples : 0.0);
      progress_update(&prog, i + 1, (double)t->turns, "turns", extra);
    }
  }
  if (r->a.progress) progress_finish(&prog);
  return 0;
}

// Opens the pairs file cut back to the last finished dialog (a kill may
// have left a dialog's pairs half written), and the progress file.
static int open_outputs(PairsRun *r, const cJSON *params, FILE **out, FILE **pf, FimiError *err) {
  int resume = r->totals.done > 0;
  if (!resume) {
    if (!(*out = fopen(r->a.out, "wb"))) return fimi_fail(err, "cannot create %s", r->a.out);
    if (!(*pf = fopen(r->progress_path, "wb"))) return fimi_fail(err, "cannot create %s", r->progress_path);
    cJSON *header = cJSON_CreateObject();
    cJSON_AddItemToObject(header, "params", cJSON_Duplicate(params, 1));
    int rc = append_progress(*pf, header);
    cJSON_Delete(header);
    return rc == 0 ? 0 : fimi_fail(err, "cannot write %s", r->progress_path);
  }
  if (truncate(r->a.out, (off_t)r->totals.bytes) != 0)
    return fimi_fail(err, "cannot resume: %s is missing or shorter than %s says (%ld bytes)", r->a.out,
                     r->progress_path, r->totals.bytes);
  if (!(*out = fopen(r->a.out, "ab"))) return fimi_fail(err, "cannot open %s", r->a.out);
  // Rewrite the progress file without a line a kill may have cut.
  size_t size = 0;
  char *text = file_read_all(r->progress_path, (size_t)1 << 30, &size, err);
  if (!text) return -1;
  size_t keep = size;
  while (keep > 0 && text[keep - 1] != '\n') keep--;
  int rc = truncate(r->progress_path, (off_t)keep);
  free(text);
  if (rc != 0 || !(*pf = fopen(r->progress_path, "ab"))) return fimi_fail(err, "cannot open %s", r->progress_path);
  fprintf(stderr, "resuming %s after %ld of %ld dialogs\n", r->a.out, r->totals.done, r->corpus.count);
  return 0;
}

static void print_summary(const cJSON *s, const char *path) {
  printf("replayed %.0f turns of %.0f dialogs: %.0f of %.0f samples diverged (%.1f%%), %.0f pairs", num(s, "turns"),
         num(s, "dialogs"), num(s, "diverged"), num(s, "samples"), 100.0 * num(s, "divergence_rate"), num(s, "pairs"));
  const cJSON *tags = cJSON_GetObjectItemCaseSensitive(s, "tags");
  printf(" (");
  for (const cJSON *t = tags ? tags->child : NULL; t; t = t->next)
    printf("%s%s %.0f", t == tags->child ? "" : ", ", t->string, t->valuedouble);
  if (num(s, "skipped") > 0) printf("; %.0f turns skipped (prefix beyond the model's context)", num(s, "skipped"));
  printf("); %.2f turns/s (generation %.2f s, checks %.3f s, scoring %.2f s)\n", num(s, "turns_per_second"),
         num(s, "generate_seconds"), num(s, "check_seconds"), num(s, "score_seconds"));
  if (num(s, "rephrase_attempts") > 0)
    printf("self-rephrase: %.0f revisions checked, %.0f accepted; %.0f pairs kept the reference turn\n",
           num(s, "rephrase_attempts"), num(s, "rephrase_accepted"), num(s, "rephrase_fallback"));
  const cJSON *by = cJSON_GetObjectItemCaseSensitive(s, "constructions");
  for (const cJSON *e = by ? by->child : NULL; e; e = e->next)
    if (num(e, "pairs") > 0)
      printf("chosen %-13s %5.0f pairs: mean log-prob chosen %.2f (%.3f/token), rejected %.2f (%.3f/token); "
             "length chosen - rejected %+.1f chars\n",
             e->string, num(e, "pairs"), num(e, "mean_logp_chosen"), num(e, "logp_per_token_chosen"),
             num(e, "mean_logp_rejected"), num(e, "logp_per_token_rejected"), num(e, "length_diff_chars"));
  printf("summary in %s\n", path);
}

static int pairs_run(int argc, char **argv) {
  PairsRun r;
  memset(&r, 0, sizeof r);
  FimiError err = {0};
  if (parse_pairs_args(argc, argv, &r.a, &err) != 0) {
    fprintf(stderr, "fimi dpo pairs: %s (see fimi dpo pairs --help)\n", err.message);
    return CLI_EXIT_USAGE;
  }
  snprintf(r.progress_path, sizeof r.progress_path, "%s.progress", r.a.out);
  snprintf(r.summary_path, sizeof r.summary_path, "%s.summary.json", r.a.out);
  r.totals.families = cJSON_CreateObject();
  FILE *out = NULL, *pf = NULL;
  cJSON *params = NULL, *summary = NULL;
  int rc = lines_load(r.a.corpus, &r.corpus, &err);
  if (rc == 0) params = run_params(&r.a, r.corpus.count);
  if (rc == 0) rc = read_progress(r.progress_path, params, &r.totals, &err);
  if (rc == 0 && r.totals.done < r.corpus.count) {
    long end = r.corpus.count;
    if (r.a.max_dialogs >= 0 && r.totals.done + r.a.max_dialogs < end) end = r.totals.done + r.a.max_dialogs;
    rc = open_model(&r, &err);
    if (rc == 0) rc = open_outputs(&r, params, &out, &pf, &err);
    if (rc == 0) rc = replay_dialogs(&r, out, pf, end, &err);
  }
  if (out && fclose(out) != 0 && rc == 0) rc = fimi_fail(&err, "cannot write %s", r.a.out);
  if (pf) fclose(pf);
  if (rc == 0) {
    summary = summary_json(&r.totals, r.corpus.count, r.a.chosen);
    if (r.totals.done == r.corpus.count) rc = json_write_file(r.summary_path, summary, &err);
    else printf("stopped after %ld of %ld dialogs (--max-dialogs); rerun to continue\n", r.totals.done, r.corpus.count);
  }
  if (rc == 0 && r.totals.done == r.corpus.count) print_summary(summary, r.summary_path);
  cJSON_Delete(summary);
  cJSON_Delete(params);
  cJSON_Delete(r.totals.families);
  if (r.have_cand) dpo_model_candidate_free(&r.cand);
  tokenizer_free(r.tok);
  if (r.have_model) gemma_model_free(&r.model);
  lines_free(&r.corpus);
  return rc == 0 ? 0 : cli_fail("dpo pairs", &err);
}

int cmd_dpo(int argc, char **argv) {
  if (argc < 2 || cli_wants_help(argc, argv, 1)) {
    dpo_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : 0;
  }
  if (!strcmp(argv[1], "corpus")) {
    if (argc >= 3 && !strcmp(argv[2], "build")) return corpus_build(argc - 3, argv + 3);
    fprintf(stderr, "fimi dpo corpus: expected \"build\", got \"%s\" (see fimi dpo corpus --help)\n",
            argc >= 3 ? argv[2] : "");
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "pairs")) return pairs_run(argc - 2, argv + 2);
  fprintf(stderr, "fimi dpo: unknown subcommand \"%s\" (see fimi dpo --help)\n", argv[1]);
  return CLI_EXIT_USAGE;
}
