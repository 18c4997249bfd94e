// eval/bench_score.c: judging a harness run against the cases, the four
// metrics over slices of cases, and the run's JSON and Markdown
// (eval/bench_score.h).
#include "eval/bench_score.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"

void bench_run_free(BenchRun *r) {
  if (!r) return;
  free(r->attempts);
  memset(r, 0, sizeof *r);
}

static int judge_episode(const BenchCase *c, const EvalEpisode *e, const BenchJudge *judge, BenchAttempt *a,
                         FimiError *err) {
  if (e->failed) {
    a->episode_failed = 1;
    a->verdict.failed_gate = -1;
    return 0;
  }
  BenchTrace trace;
  if (bench_trace_build(e->trajectory, e->end, &trace, err) != 0) return -1;
  int rc = bench_judge_attempt(c, &trace, judge, &a->verdict, err);
  bench_trace_free(&trace);
  return rc;
}

int bench_score(const BenchSet *set, const EvalResults *results, const BenchJudge *judge, BenchRun *out,
                FimiError *err) {
  memset(out, 0, sizeof *out);
  out->set = set;
  out->results = results;
  out->judge = judge->name;
  int *seen = fimi_calloc((size_t)set->count + 1, sizeof *seen, err);
  out->attempts = seen ? fimi_calloc((size_t)results->count + 1, sizeof *out->attempts, err) : NULL;
  int rc = out->attempts ? 0 : -1;
  for (int i = 0; rc == 0 && i < results->count; i++) {
    const EvalEpisode *e = &results->episodes[i];
    const BenchCase *c = bench_set_find(set, e->task_id);
    if (!c) {
      rc = fimi_fail(err, "episodes[%d]: task '%.64s' is no case of the case file", i, e->task_id);
      break;
    }
    BenchAttempt *a = &out->attempts[out->count++];
    a->case_index = (int)(c - set->cases);
    a->episode = e;
    seen[a->case_index]++;
    rc = judge_episode(c, e, judge, a, err);
  }
  for (int k = 0; rc == 0 && k < set->count; k++)
    if (!seen[k]) rc = fimi_fail(err, "case %.64s: no episode in the results", set->cases[k].id);
  free(seen);
  if (rc != 0) bench_run_free(out);
  return rc;
}

// ---- metrics ---------------------------------------------------------------------------------

int bench_metrics(const BenchRun *r, BenchCaseFilter keep, const void *arg, BenchMetrics *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  int n = r->set->count;
  int *tries = fimi_calloc((size_t)n + 1, sizeof *tries, err), *passes = fimi_calloc((size_t)n + 1, sizeof *passes, err);
  if (!tries || !passes) {
    free(tries);
    free(passes);
    return -1;
  }
  for (int i = 0; i < r->count; i++) {
    const BenchAttempt *a = &r->attempts[i];
    if (keep && !keep(&r->set->cases[a->case_index], arg)) continue;
    tries[a->case_index]++;
    passes[a->case_index] += a->verdict.pass;
    out->attempts++;
    out->passes += a->verdict.pass;
    if (a->episode_failed) out->episode_failures++;
    else if (a->verdict.failed_gate >= 0) out->failed[a->verdict.failed_gate]++;
  }
  double all = 0, any = 0, rate = 0;
  for (int k = 0; k < n; k++) {
    if (!tries[k]) continue;
    out->cases++;
    all += passes[k] == tries[k];
    any += passes[k] > 0;
    rate += (double)passes[k] / tries[k];
  }
  if (out->cases) {
    out->pass_hat_n = all / out->cases;
    out->pass_at_n = any / out->cases;
    out->avg_at_n = rate / out->cases;
    out->mean = (double)out->passes / out->attempts;
  }
  free(tries);
  free(passes);
  return 0;
}

static int keep_category(const BenchCase *c, const void *arg) { return c->category == *(const BenchCategory *)arg; }
static int keep_axis(const BenchCase *c, const void *arg) { return !strcmp(c->axis, (const char *)arg); }

// The axes in first-seen order (pointers into the cases); *n of them.
static const char **axes_of(const BenchSet *set, int *n, FimiError *err) {
  const char **axes = fimi_calloc((size_t)set->count + 1, sizeof *axes, err);
  *n = 0;
  for (int i = 0; axes && i < set->count; i++) {
    int known = 0;
    for (int k = 0; k < *n && !known; k++) known = !strcmp(axes[k], set->cases[i].axis);
    if (!known) axes[(*n)++] = set->cases[i].axis;
  }
  return axes;
}

// ---- JSON ------------------------------------------------------------------------------------

static cJSON *metrics_json(const BenchMetrics *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "cases", m->cases);
  cJSON_AddNumberToObject(o, "attempts", m->attempts);
  cJSON_AddNumberToObject(o, "passes", m->passes);
  cJSON_AddNumberToObject(o, "pass_hat_n", m->pass_hat_n);
  cJSON_AddNumberToObject(o, "pass_at_n", m->pass_at_n);
  cJSON_AddNumberToObject(o, "mean", m->mean);
  cJSON_AddNumberToObject(o, "avg_at_n", m->avg_at_n);
  cJSON *failed = cJSON_AddObjectToObject(o, "failed");
  for (int g = 0; g < BENCH_GATE_COUNT; g++) cJSON_AddNumberToObject(failed, bench_gate_name(g), m->failed[g]);
  cJSON_AddNumberToObject(failed, "episode", m->episode_failures);
  return o;
}

// Failed attempts by "gate.check", in first-seen order.
static cJSON *checks_json(const BenchRun *r) {
  cJSON *o = cJSON_CreateObject();
  for (int i = 0; i < r->count; i++) {
    const BenchAttemptVerdict *v = &r->attempts[i].verdict;
    char key[64];
    if (r->attempts[i].episode_failed) snprintf(key, sizeof key, "episode.failed");
    else if (v->failed_gate >= 0) snprintf(key, sizeof key, "%s.%s", bench_gate_name(v->failed_gate), v->gates[v->failed_gate].check);
    else continue;
    cJSON *count = cJSON_GetObjectItemCaseSensitive(o, key);
    if (count) cJSON_SetNumberValue(count, count->valuedouble + 1);
    else cJSON_AddNumberToObject(o, key, 1);
  }
  return o;
}

static cJSON *summary_json(const BenchRun *r, FimiError *err) {
  cJSON *s = cJSON_CreateObject();
  BenchMetrics m;
  int n_axes = 0;
  const char **axes = axes_of(r->set, &n_axes, err);
  int rc = axes && s ? bench_metrics(r, NULL, NULL, &m, err) : -1;
  if (rc == 0) cJSON_AddItemToObject(s, "overall", metrics_json(&m));
  cJSON *cats = cJSON_AddObjectToObject(s, "categories");
  for (int c = 0; rc == 0 && c < BENCH_CAT_COUNT; c++) {
    BenchCategory cat = (BenchCategory)c;
    if ((rc = bench_metrics(r, keep_category, &cat, &m, err)) == 0 && m.cases)
      cJSON_AddItemToObject(cats, bench_category_name(cat), metrics_json(&m));
  }
  cJSON *ax = cJSON_AddObjectToObject(s, "axes");
  for (int k = 0; rc == 0 && k < n_axes; k++)
    if ((rc = bench_metrics(r, keep_axis, axes[k], &m, err)) == 0) cJSON_AddItemToObject(ax, axes[k], metrics_json(&m));
  if (rc == 0) cJSON_AddItemToObject(s, "checks", checks_json(r));
  free(axes);
  if (rc != 0) {
    cJSON_Delete(s);
    return NULL;
  }
  return s;
}

static cJSON *verdict_json(const BenchAttempt *a) {
  cJSON *gates = cJSON_CreateObject();
  for (int g = 0; g < BENCH_GATE_COUNT; g++) {
    const BenchVerdict *v = &a->verdict.gates[g];
    if (!a->verdict.judged[g]) {
      cJSON_AddNullToObject(gates, bench_gate_name(g));  // not consulted: an earlier gate decided
      continue;
    }
    cJSON *o = cJSON_AddObjectToObject(gates, bench_gate_name(g));
    cJSON_AddBoolToObject(o, "pass", v->pass);
    if (!v->pass) {
      cJSON_AddStringToObject(o, "check", v->check);
      cJSON_AddStringToObject(o, "reason", v->reason);
    }
  }
  return gates;
}

static cJSON *attempt_json(const BenchAttempt *a) {
  cJSON *o = cJSON_CreateObject();
  const EvalEpisode *e = a->episode;
  cJSON_AddNumberToObject(o, "attempt", e->trial);
  cJSON_AddBoolToObject(o, "pass", a->verdict.pass);
  if (a->episode_failed) cJSON_AddStringToObject(o, "failed_gate", "episode");
  else if (a->verdict.failed_gate >= 0) cJSON_AddStringToObject(o, "failed_gate", bench_gate_name(a->verdict.failed_gate));
  else cJSON_AddNullToObject(o, "failed_gate");
  cJSON_AddItemToObject(o, "gates", verdict_json(a));
  cJSON_AddStringToObject(o, "end", e->end);
  cJSON_AddNumberToObject(o, "reward", e->reward.total);
  cJSON_AddNumberToObject(o, "turns", e->turns);
  cJSON_AddItemToObject(o, "trajectory", cJSON_Duplicate(e->trajectory, 1));
  return o;
}

static cJSON *cases_json(const BenchRun *r) {
  cJSON *arr = cJSON_CreateArray();
  for (int k = 0; k < r->set->count; k++) {
    const BenchCase *c = &r->set->cases[k];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", c->id);
    cJSON_AddStringToObject(o, "category", bench_category_name(c->category));
    cJSON_AddStringToObject(o, "axis", c->axis);
    cJSON *attempts = cJSON_AddArrayToObject(o, "attempts");
    int passes = 0, n = 0;
    for (int i = 0; i < r->count; i++)
      if (r->attempts[i].case_index == k) {
        cJSON_AddItemToArray(attempts, attempt_json(&r->attempts[i]));
        passes += r->attempts[i].verdict.pass;
        n++;
      }
    cJSON_AddNumberToObject(o, "passes", passes);
    cJSON_AddNumberToObject(o, "tries", n);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

cJSON *bench_run_json(const BenchRun *r, FimiError *err) {
  const EvalRunInfo *info = &r->results->info;
  cJSON *o = cJSON_CreateObject(), *summary = summary_json(r, err);
  if (!o || !summary) {
    cJSON_Delete(o);
    cJSON_Delete(summary);
    if (!err->failed) fimi_fail(err, "out of memory");
    return NULL;
  }
  cJSON_AddStringToObject(o, "format", "fimi-eval-bench");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddStringToObject(o, "label", info->label);
  cJSON_AddStringToObject(o, "model", info->model);
  cJSON_AddStringToObject(o, "cases_file", r->cases_file);
  cJSON_AddStringToObject(o, "results_file", r->results_file);
  cJSON_AddStringToObject(o, "judge", r->judge);
  if (r->judge_agreement) cJSON_AddItemToObject(o, "judge_agreement", cJSON_Duplicate(r->judge_agreement, 1));
  cJSON_AddNumberToObject(o, "attempts", info->trials);
  cJSON_AddNumberToObject(o, "temperature", info->temperature);
  cJSON_AddNumberToObject(o, "top_p", info->top_p);
  cJSON_AddNumberToObject(o, "seconds", info->seconds);
  cJSON_AddNumberToObject(o, "cases_per_second", info->seconds > 0 ? r->set->count / info->seconds : 0);
  cJSON_AddItemToObject(o, "summary", summary);
  cJSON_AddItemToObject(o, "cases", cases_json(r));
  return o;
}

int bench_run_write(const BenchRun *r, const char *path, FimiError *err) {
  cJSON *o = bench_run_json(r, err);
  if (!o) return fimi_fail_wrap(err, "%s", path);
  int rc = json_write_file(path, o, err);
  cJSON_Delete(o);
  return rc;
}

// ---- Markdown --------------------------------------------------------------------------------

static void metrics_row(FILE *out, const char *name, const BenchMetrics *m) {
  fprintf(out, "| %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %d | %d | %d |\n", name, m->cases, m->attempts,
          m->pass_hat_n, m->pass_at_n, m->mean, m->avg_at_n, m->failed[BENCH_GATE_SAFETY],
          m->failed[BENCH_GATE_ACTIONS], m->failed[BENCH_GATE_RQ]);
}

static void table_head(FILE *out, const char *first) {
  fprintf(out, "| %s | cases | attempts | Pass^n | Pass@n | Mean | Avg@n | failed S | failed A | failed R-Q |\n", first);
  fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

// The model judge's agreement with the rubric judge, in a sentence.
static void judge_agreement_line(const cJSON *a, FILE *out) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "attempts");
  const cJSON *agree = cJSON_GetObjectItemCaseSensitive(a, "observed_agreement");
  const cJSON *kappa = cJSON_GetObjectItemCaseSensitive(a, "kappa");
  char k[32] = "n/a";
  if (cJSON_IsNumber(kappa)) snprintf(k, sizeof k, "%.3f", kappa->valuedouble);
  fprintf(out, "The model judge against the rubric judge on the %d attempts that reached the R-Q gate: agreement %.3f, "
               "Cohen's kappa %s.\n\n",
          cJSON_IsNumber(n) ? n->valueint : 0, cJSON_IsNumber(agree) ? agree->valuedouble : 0.0, k);
}

int bench_run_markdown(const BenchRun *r, FILE *out, FimiError *err) {
  const EvalRunInfo *info = &r->results->info;
  BenchMetrics m;
  if (bench_metrics(r, NULL, NULL, &m, err) != 0) return -1;
  fprintf(out, "# Judged bench: %s\n\n", info->label);
  fprintf(out, "%d cases from %s, n = %d attempts each, temperature %.2f, top-p %.2f, judge %s; %.1f s.\n\n",
          r->set->count, r->cases_file, info->trials, info->temperature, info->top_p, r->judge, info->seconds);
  if (r->judge_agreement) judge_agreement_line(r->judge_agreement, out);
  table_head(out, "slice");
  metrics_row(out, "overall", &m);
  if (m.episode_failures) fprintf(out, "\n%d attempts failed in the environment (counted as failed).\n", m.episode_failures);
  fprintf(out, "\n## By category\n\n");
  table_head(out, "category");
  for (int c = 0; c < BENCH_CAT_COUNT; c++) {
    BenchCategory cat = (BenchCategory)c;
    if (bench_metrics(r, keep_category, &cat, &m, err) != 0) return -1;
    if (m.cases) metrics_row(out, bench_category_title(cat), &m);
  }
  int n_axes = 0;
  const char **axes = axes_of(r->set, &n_axes, err);
  if (!axes) return -1;
  fprintf(out, "\n## By axis\n\n");
  table_head(out, "axis");
  for (int k = 0; k < n_axes; k++) {
    if (bench_metrics(r, keep_axis, axes[k], &m, err) != 0) {
      free(axes);
      return -1;
    }
    metrics_row(out, axes[k], &m);
  }
  free(axes);
  cJSON *checks = checks_json(r);
  fprintf(out, "\n## Failed checks (first failing gate of each attempt)\n\n| gate.check | attempts |\n|---|---:|\n");
  const cJSON *item = NULL;
  cJSON_ArrayForEach(item, checks) fprintf(out, "| %s | %d |\n", item->string, (int)item->valuedouble);
  if (!checks || !checks->child) fprintf(out, "| (none) | 0 |\n");
  cJSON_Delete(checks);
  return 0;
}
