// dpo/pairs.c: the teacher-forced replay of one reference dialog and its
// pairs (dpo/pairs.h).
#include "dpo/pairs.h"

#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "core/rng.h"
#include "core/utf8.h"
#include "env/transcript.h"

void dpo_replay_stats_add(DpoReplayStats *into, const DpoReplayStats *s) {
  into->turns += s->turns;
  into->samples += s->samples;
  into->diverged += s->diverged;
  into->pairs += s->pairs;
  into->sanitized += s->sanitized;
  into->skipped += s->skipped;
  for (int i = 0; i < DPO_TAG_COUNT; i++) into->tags[i] += s->tags[i];
  into->chosen_chars += s->chosen_chars;
  into->rejected_chars += s->rejected_chars;
  into->generate_seconds += s->generate_seconds;
  into->check_seconds += s->check_seconds;
}

char *dpo_sanitize_utf8(const char *text, size_t len, int *changed, FimiError *err) {
  char *out = fimi_malloc(len * 3 + 1, err);
  if (!out) return NULL;
  size_t o = 0;
  int bad = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = text[i] ? utf8_char_len((const unsigned char *)text + i, len - i, &cp) : 0;
    if (n == 0) {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
      bad = 1;
      continue;
    }
    memcpy(out + o, text + i, n);
    o += n;
    i += n;
  }
  out[o] = 0;
  if (changed) *changed = bad;
  return out;
}

// The replay state of one dialog: the reference prefix so far, its facts and
// the reference calls in it.
typedef struct Replay {
  const DpoDialog *d;
  cJSON *prefix;
  cJSON *earlier_calls;
  DpoFacts known;
  const cJSON *next;  // the next message to append
  int appended;
} Replay;

static int append_until(Replay *r, int index, FimiError *err) {
  while (r->appended < index && r->next) {
    const cJSON *m = r->next;
    const char *role = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (strcmp(role, "assistant") && strcmp(role, "model") && cJSON_IsString(content) &&
        dpo_facts_add_text(&r->known, content->valuestring, strlen(content->valuestring), err) != 0)
      return -1;
    if (cJSON_IsArray(calls) && calls->child) {
      const cJSON *fn = cJSON_GetObjectItemCaseSensitive(calls->child, "function");
      cJSON *c = cJSON_Duplicate(fn ? fn : calls->child, 1);
      if (!c) return fimi_fail(err, "pairs: out of memory");
      cJSON_AddItemToArray(r->earlier_calls, c);
    }
    cJSON *copy = cJSON_Duplicate(m, 1);
    if (!copy) return fimi_fail(err, "pairs: out of memory");
    cJSON_AddItemToArray(r->prefix, copy);
    r->next = m->next;
    r->appended++;
  }
  return 0;
}

// The rejected side: the candidate's turn as an assistant message (the
// tool_calls form when the call is canonical, else the text verbatim).
static cJSON *rejected_message(const char *text, size_t len, int *sanitized, FimiError *err) {
  char *clean = dpo_sanitize_utf8(text, len, sanitized, err);
  if (!clean) return NULL;
  cJSON *m = env_transcript_assistant_message(clean, strlen(clean), NULL, err);
  free(clean);
  return m;
}

static size_t content_chars(const cJSON *m) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
  size_t n = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  if (cJSON_IsArray(calls) && calls->child) {
    char *t = cJSON_PrintUnformatted(calls->child);
    n += t ? strlen(t) : 0;
    free(t);
  }
  return n;
}

static int add_pair(Replay *r, long index, int turn, int sample, const cJSON *chosen, const char *text, size_t len,
                    const DpoDivergence *dv, cJSON *pairs, DpoReplayStats *st, FimiError *err) {
  int sanitized = 0;
  cJSON *rejected = rejected_message(text, len, &sanitized, err);
  if (!rejected) return -1;
  cJSON *row = cJSON_CreateObject();
  cJSON *c = cJSON_CreateArray(), *rj = cJSON_CreateArray(), *p = cJSON_Duplicate(r->prefix, 1);
  cJSON *ch = cJSON_Duplicate(chosen, 1);
  if (!row || !c || !rj || !p || !ch) {
    cJSON_Delete(row), cJSON_Delete(c), cJSON_Delete(rj), cJSON_Delete(p), cJSON_Delete(ch), cJSON_Delete(rejected);
    return fimi_fail(err, "pairs: out of memory");
  }
  st->chosen_chars += (long)content_chars(ch);
  st->rejected_chars += (long)content_chars(rejected);
  cJSON_AddItemToArray(c, ch);
  cJSON_AddItemToArray(rj, rejected);
  cJSON_AddItemToObject(row, "prompt", p);
  cJSON_AddItemToObject(row, "chosen", c);
  cJSON_AddItemToObject(row, "rejected", rj);
  cJSON_AddStringToObject(row, "tag", dpo_tag_name(dv->tag));
  cJSON_AddStringToObject(row, "detail", dv->detail);
  cJSON_AddStringToObject(row, "task_id", r->d->task.id);
  cJSON_AddStringToObject(row, "family", r->d->family);
  cJSON_AddNumberToObject(row, "dialog", (double)index);
  cJSON_AddNumberToObject(row, "turn", turn);
  cJSON_AddNumberToObject(row, "action", dv->action);
  cJSON_AddNumberToObject(row, "sample", sample);
  cJSON_AddItemToArray(pairs, row);
  st->pairs++;
  st->sanitized += sanitized;
  return 0;
}

// One reference turn: `samples` candidate turns, each scored; the failing
// ones (distinct texts) become pairs.
static int replay_turn(Replay *r, long index, int turn_no, const cJSON *turn, const DpoCandidate *cand,
                       const DpoPairOptions *opt, cJSON *pairs, DpoReplayStats *st, FimiError *err) {
  int mi = cJSON_GetObjectItemCaseSensitive(turn, "message")->valueint;
  const cJSON *acts = cJSON_GetObjectItemCaseSensitive(turn, "actions");
  if (append_until(r, mi, err) != 0) return -1;
  const cJSON *chosen = cJSON_GetArrayItem(r->d->messages, mi);
  char **seen = calloc((size_t)opt->samples, sizeof *seen);
  size_t *seen_len = calloc((size_t)opt->samples, sizeof *seen_len);
  int nseen = 0, rc = (seen && seen_len) ? 0 : fimi_fail(err, "pairs: out of memory");
  st->turns++;
  for (int k = 0; rc == 0 && k < opt->samples; k++) {
    uint64_t seed = rng_mix(rng_mix(opt->seed, (uint64_t)index), (uint64_t)turn_no * 1000003u + (uint64_t)k);
    char *text = NULL;
    size_t len = 0;
    double t0 = monotonic_seconds();
    rc = cand->generate(cand->ctx, r->prefix, seed, &text, &len, err);
    double t1 = monotonic_seconds();
    st->generate_seconds += t1 - t0;
    if (rc == 1) {
      st->skipped++;
      rc = 0;
      break;
    }
    if (rc != 0) break;
    st->samples++;
    DpoDivergence dv;
    rc = dpo_divergence_find(&r->d->task, acts, r->earlier_calls, &r->known, text, len, opt->judge, &dv, err);
    int dup = 0;
    for (int j = 0; rc == 0 && j < nseen; j++) dup |= seen_len[j] == len && memcmp(seen[j], text, len) == 0;
    if (rc == 0 && dv.tag != DPO_TAG_NONE) {
      st->diverged++;
      st->tags[dv.tag]++;
      if (!dup) rc = add_pair(r, index, mi, k, chosen, text, len, &dv, pairs, st, err);
    }
    st->check_seconds += monotonic_seconds() - t1;
    if (rc == 0 && !dup && dv.tag != DPO_TAG_NONE) {
      seen[nseen] = text;
      seen_len[nseen++] = len;
    } else {
      free(text);
    }
  }
  for (int j = 0; j < nseen; j++) free(seen[j]);
  free(seen);
  free(seen_len);
  return rc;
}

int dpo_pairs_dialog(const DpoDialog *d, long index, const DpoCandidate *cand, const DpoPairOptions *opt,
                     cJSON *pairs, DpoReplayStats *stats, FimiError *err) {
  if (opt->samples < 1) return fimi_fail(err, "pairs: samples must be at least 1");
  Replay r = {0};
  r.d = d;
  r.prefix = cJSON_CreateArray();
  r.earlier_calls = cJSON_CreateArray();
  r.next = d->messages->child;
  int rc = r.prefix && r.earlier_calls ? 0 : fimi_fail(err, "pairs: out of memory");
  if (rc == 0 && cand->begin_dialog) rc = cand->begin_dialog(cand->ctx, err);
  int turn_no = 0;
  for (const cJSON *t = d->actions->child; rc == 0 && t; t = t->next, turn_no++)
    rc = replay_turn(&r, index, turn_no, t, cand, opt, pairs, stats, err);
  cJSON_Delete(r.prefix);
  cJSON_Delete(r.earlier_calls);
  dpo_facts_free(&r.known);
  return rc;
}
