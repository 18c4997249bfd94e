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
  into->rephrase_attempts += s->rephrase_attempts;
  into->rephrase_accepted += s->rephrase_accepted;
  for (int c = 0; c < DPO_CHOSEN_COUNT; c++) {
    DpoConstructionStats *a = &into->by_source[c];
    const DpoConstructionStats *b = &s->by_source[c];
    a->pairs += b->pairs;
    a->chosen_chars += b->chosen_chars;
    a->rejected_chars += b->rejected_chars;
    a->scored += b->scored;
    a->logp_chosen += b->logp_chosen;
    a->logp_rejected += b->logp_rejected;
    a->chosen_tokens += b->chosen_tokens;
    a->rejected_tokens += b->rejected_tokens;
  }
  into->generate_seconds += s->generate_seconds;
  into->check_seconds += s->check_seconds;
  into->score_seconds += s->score_seconds;
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

// A candidate turn (the rejected side, or a revision) as an assistant
// message (the tool_calls form when the call is canonical, else the text
// verbatim).
static cJSON *turn_message(const char *text, size_t len, int *sanitized, FimiError *err) {
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

// One side of a pair, scored under the candidate when it can score.
typedef struct PairSide {
  cJSON *message;  // an assistant message (owned)
  double logp;
  long tokens;
  int scored;
} PairSide;

static int score_side(Replay *r, const DpoCandidate *cand, PairSide *side, DpoReplayStats *st, FimiError *err) {
  if (!cand->score) return 0;
  double t0 = monotonic_seconds();
  int rc = cand->score(cand->ctx, r->prefix, side->message, &side->logp, &side->tokens, err);
  st->score_seconds += monotonic_seconds() - t0;
  if (rc < 0) return -1;
  side->scored = rc == 0;
  return 0;
}

// Appends the pair row; takes the two messages.
static int add_pair(Replay *r, long index, int turn, int sample, DpoChosenSource source, PairSide *chosen,
                    PairSide *rejected, const DpoDivergence *dv, cJSON *pairs, DpoReplayStats *st, FimiError *err) {
  cJSON *row = cJSON_CreateObject();
  cJSON *c = cJSON_CreateArray(), *rj = cJSON_CreateArray(), *p = cJSON_Duplicate(r->prefix, 1);
  if (!row || !c || !rj || !p) {
    cJSON_Delete(row), cJSON_Delete(c), cJSON_Delete(rj), cJSON_Delete(p);
    return fimi_fail(err, "pairs: out of memory");
  }
  DpoConstructionStats *cs = &st->by_source[source];
  long cc = (long)content_chars(chosen->message), rc = (long)content_chars(rejected->message);
  st->chosen_chars += cc;
  st->rejected_chars += rc;
  cs->pairs++;
  cs->chosen_chars += cc;
  cs->rejected_chars += rc;
  cJSON_AddItemToArray(c, chosen->message);
  cJSON_AddItemToArray(rj, rejected->message);
  chosen->message = rejected->message = NULL;
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
  cJSON_AddStringToObject(row, "chosen_source", dpo_chosen_source_name(source));
  if (chosen->scored && rejected->scored) {
    cJSON_AddNumberToObject(row, "logp_chosen", chosen->logp);
    cJSON_AddNumberToObject(row, "logp_rejected", rejected->logp);
    cs->scored++;
    cs->logp_chosen += chosen->logp;
    cs->logp_rejected += rejected->logp;
    cs->chosen_tokens += chosen->tokens;
    cs->rejected_tokens += rejected->tokens;
  }
  cJSON_AddItemToArray(pairs, row);
  st->pairs++;
  return 0;
}

// --chosen self-rephrase: the candidate revises its rejected turn; the
// revision replaces the reference turn as chosen only when it passes the
// checks. *revised stays NULL otherwise.
static int rephrase(Replay *r, const cJSON *acts, const DpoCandidate *cand, uint64_t seed, const cJSON *rejected,
                    const DpoDivergence *dv, const DpoPairOptions *opt, cJSON **revised, DpoReplayStats *st,
                    FimiError *err) {
  *revised = NULL;
  cJSON *prefix = dpo_rephrase_prefix(r->prefix, rejected, dv, err);
  if (!prefix) return -1;
  char *text = NULL;
  size_t len = 0;
  double t0 = monotonic_seconds();
  // Its own stream: the sample's seed mixed with "rephrase".
  int rc = cand->generate(cand->ctx, prefix, rng_mix(seed, 0x7265706872617365ULL), &text, &len, err);
  double t1 = monotonic_seconds();
  st->generate_seconds += t1 - t0;
  cJSON_Delete(prefix);
  if (rc == 1) return 0;  // beyond the context: the reference turn stays
  if (rc != 0) return -1;
  st->rephrase_attempts++;
  DpoDivergence check;
  rc = dpo_divergence_find(&r->d->task, acts, r->earlier_calls, &r->known, text, len, opt->judge, &check, err);
  if (rc == 0 && check.tag == DPO_TAG_NONE) {
    int sanitized = 0;
    *revised = turn_message(text, len, &sanitized, err);
    if (!*revised) rc = -1;
    else st->rephrase_accepted++;
  }
  st->check_seconds += monotonic_seconds() - t1;
  free(text);
  return rc;
}

// A failing turn's pair: the rejected side, the chosen side from the
// requested construction, both scored.
static int make_pair(Replay *r, long index, int mi, int k, uint64_t seed, const cJSON *acts, const cJSON *reference,
                     const char *text, size_t len, const DpoDivergence *dv, const DpoCandidate *cand,
                     const DpoPairOptions *opt, cJSON *pairs, DpoReplayStats *st, FimiError *err) {
  int sanitized = 0;
  PairSide rejected = {0}, chosen = {0};
  DpoChosenSource source = DPO_CHOSEN_REFERENCE;
  if (!(rejected.message = turn_message(text, len, &sanitized, err))) return -1;
  st->sanitized += sanitized;
  int rc = 0;
  if (opt->chosen == DPO_CHOSEN_SELF_REPHRASE) {
    rc = rephrase(r, acts, cand, seed, rejected.message, dv, opt, &chosen.message, st, err);
    if (chosen.message) source = DPO_CHOSEN_SELF_REPHRASE;
  }
  if (rc == 0 && !chosen.message && !(chosen.message = cJSON_Duplicate(reference, 1)))
    rc = fimi_fail(err, "pairs: out of memory");
  if (rc == 0) rc = score_side(r, cand, &chosen, st, err);
  if (rc == 0) rc = score_side(r, cand, &rejected, st, err);
  if (rc == 0) rc = add_pair(r, index, mi, k, source, &chosen, &rejected, dv, pairs, st, err);
  cJSON_Delete(chosen.message);
  cJSON_Delete(rejected.message);
  return rc;
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
    st->check_seconds += monotonic_seconds() - t1;  // make_pair times its own generation and scoring
    if (rc == 0 && dv.tag != DPO_TAG_NONE) {
      st->diverged++;
      st->tags[dv.tag]++;
      if (!dup) rc = make_pair(r, index, mi, k, seed, acts, chosen, text, len, &dv, cand, opt, pairs, st, err);
    }
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
