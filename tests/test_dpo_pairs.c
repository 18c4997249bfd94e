// tests/test_dpo_pairs.c: the pair builder (dpo/pairs.h, dpo/divergence.h)
// with scripted candidates: a candidate equal to the reference gives no
// pairs; planted divergences of each kind are found at the right turn and
// action with the right tag (wrong tool, wrong arguments, a repeated call,
// a malformed call, replying instead of calling, calling instead of
// replying, bad replies: a missing value, a value not in the data, no
// confirmation question, no refusal, a preface stating an unknown value);
// numbers compare as numbers; a plugged-in judge decides the text turns;
// candidate output of any bytes never crashes and still gives valid pairs;
// sampled candidates are deterministic for a seed; with --chosen
// self-rephrase a revision that passes the checks becomes the chosen side, one
// that fails falls back to the reference turn (counted), and the revision
// request never holds the reference's tool; the scores of both sides are
// summed per construction.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/chat.h"
#include "data/toolcall.h"
#include "dpo/pairs.h"
#include "env/tasks/family.h"
#include "test_util.h"

static EnvWorld *world;
static TaskGenContext gen;

// The reference's own text for assistant message m (what a model would emit).
static char *reference_text(const cJSON *m) {
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
  if (cJSON_IsArray(calls) && calls->child) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(calls->child, "function");
    FimiError err = {0};
    return toolcall_render_call(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring,
                                cJSON_GetObjectItemCaseSensitive(fn, "arguments"), &err);
  }
  return strdup(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
}

// A scripted candidate: the reference turn, except at turn index `plant_at`
// (counted in assistant turns) where it says `planted` (len bytes); or
// random bytes at every turn when `fuzz`.
typedef struct Script {
  const DpoDialog *d;
  int turn;  // assistant turns generated so far in this dialog
  int plant_at;
  const char *planted;
  size_t planted_len;
  int fuzz;
  const char *revision;  // the reply to a revision request (NULL: the reference turn)
  int revision_requests;
  char last_request[2048];
} Script;

static int script_begin(void *ctx, FimiError *err) {
  (void)err;
  ((Script *)ctx)->turn = 0;
  return 0;
}

static int script_generate(void *ctx, const cJSON *prefix, uint64_t seed, char **text, size_t *len, FimiError *err) {
  (void)err;
  Script *s = ctx;
  const cJSON *last = cJSON_GetArrayItem(prefix, cJSON_GetArraySize(prefix) - 1);
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
  // (A fuzzing script answers revision requests with random bytes too.)
  if (!s->fuzz && !strcmp(cJSON_GetObjectItemCaseSensitive(last, "role")->valuestring, "user") && cJSON_IsString(content) &&
      !strncmp(content->valuestring, "Review your last turn", 21)) {
    // A revision request: prefix = reference prefix + rejected + request.
    s->revision_requests++;
    snprintf(s->last_request, sizeof s->last_request, "%s", content->valuestring);
    *text = s->revision ? strdup(s->revision)
                        : reference_text(cJSON_GetArrayItem(s->d->messages, cJSON_GetArraySize(prefix) - 2));
    *len = strlen(*text);
    return 0;
  }
  int k = s->turn++;
  if (s->fuzz) {
    static const char *const pieces[] = {"<tool_call>", "</tool_call>", "{\"name\":", "\"get_account_balance\"",
                                         "\"arguments\":{", "}", "\xff\xfe", "\0", "Rs 123", "\xe2\x82", "<end_of_turn>"};
    Rng rng;
    rng_seed(&rng, seed);
    size_t n = rng_next_u64(&rng) % 12, cap = 256, o = 0;
    char *buf = malloc(cap);
    for (size_t i = 0; i < n; i++) {
      uint64_t pick = rng_next_u64(&rng) % 13;
      if (pick >= 11) {
        buf[o++] = (char)(rng_next_u64(&rng) & 0xff);
      } else {
        size_t pl = pick == 7 ? 1 : strlen(pieces[pick]);
        memcpy(buf + o, pieces[pick], pl);
        o += pl;
      }
    }
    *text = buf;
    *len = o;
    return 0;
  }
  if (k == s->plant_at) {
    *text = malloc(s->planted_len + 1);
    memcpy(*text, s->planted, s->planted_len);
    (*text)[s->planted_len] = 0;
    *len = s->planted_len;
    return 0;
  }
  // The reference turn: the message after the prefix.
  const cJSON *m = cJSON_GetArrayItem(s->d->messages, cJSON_GetArraySize(prefix));
  *text = reference_text(m);
  *len = strlen(*text);
  return 0;
}

static int make_dialog(const char *family, uint64_t seed, cJSON **row, DpoDialog *d) {
  FimiError err = {0};
  Task t;
  const TaskFamily *f = task_family_find(family);
  DpoCheckResult v;
  if (!f || task_generate(&gen, f, seed, &t, &err) != 0 ||
      dpo_corpus_dialog(world, &t, 3, ENV_CATALOG_FAMILY, row, &v, &err) != 0 || !*row) {
    fprintf(stderr, "%s: %s %s\n", family, err.message, v.detail);
    return -1;
  }
  task_free(&t);
  return dpo_dialog_parse(*row, family, d, &err);
}

// A stand-in score: minus the characters of the message's content and call.
static int script_score(void *ctx, const cJSON *prefix, const cJSON *message, double *logp, long *tokens,
                        FimiError *err) {
  (void)ctx, (void)prefix, (void)err;
  char *text = cJSON_PrintUnformatted(message);
  *tokens = (long)strlen(text);
  *logp = -(double)*tokens;
  free(text);
  return 0;
}

// Runs the script over a dialog with the given chosen-side construction;
// returns the pairs (caller deletes).
static cJSON *replay_chosen(const DpoDialog *d, Script *s, const DpoJudge *judge, DpoChosenSource chosen,
                            DpoReplayStats *st) {
  s->d = d;
  DpoCandidate cand = {script_begin, script_generate, script_score, s};
  DpoPairOptions opt = {1, 42, judge, chosen};
  cJSON *pairs = cJSON_CreateArray();
  FimiError err = {0};
  memset(st, 0, sizeof *st);
  CHECK(dpo_pairs_dialog(d, 0, &cand, &opt, pairs, st, &err) == 0, "replay: %s", err.message);
  return pairs;
}

static cJSON *replay(const DpoDialog *d, Script *s, const DpoJudge *judge, DpoReplayStats *st) {
  return replay_chosen(d, s, judge, DPO_CHOSEN_REFERENCE, st);
}

// The assistant-turn index (in d->actions) of the first turn whose
// reference is a call of `tool` (or a message containing `tool` when
// is_message).
static int turn_of(const DpoDialog *d, const char *needle, int is_message) {
  int k = 0;
  for (const cJSON *t = d->actions->child; t; t = t->next, k++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "actions")->child;
    const char *type = cJSON_GetObjectItemCaseSensitive(a, "type")->valuestring;
    if (!is_message && !strcmp(type, "tool_call") && !strcmp(cJSON_GetObjectItemCaseSensitive(a, "name")->valuestring, needle))
      return k;
    if (is_message && !strcmp(type, "message") && strstr(cJSON_GetObjectItemCaseSensitive(a, "text")->valuestring, needle))
      return k;
  }
  return -1;
}

static int message_index_of_turn(const DpoDialog *d, int k) {
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(d->actions, k), "message")->valueint;
}

// Plants `text` at turn k and expects exactly one pair with `tag` there.
static void expect_pair(const DpoDialog *d, int k, const char *text, DpoTag tag, int action, const char *what) {
  Script s = {0};
  s.plant_at = k;
  s.planted = text;
  s.planted_len = strlen(text);
  DpoReplayStats st;
  cJSON *pairs = replay(d, &s, NULL, &st);
  CHECK(k >= 0 && cJSON_GetArraySize(pairs) == 1, "%s: %d pairs (k %d)", what, cJSON_GetArraySize(pairs), k);
  const cJSON *p = pairs->child;
  if (p) {
    const char *got = cJSON_GetObjectItemCaseSensitive(p, "tag")->valuestring;
    CHECK(!strcmp(got, dpo_tag_name(tag)), "%s: tag %s, expected %s (%s)", what, got, dpo_tag_name(tag),
          cJSON_GetObjectItemCaseSensitive(p, "detail")->valuestring);
    CHECK(cJSON_GetObjectItemCaseSensitive(p, "turn")->valueint == message_index_of_turn(d, k), "%s: turn", what);
    CHECK(cJSON_GetObjectItemCaseSensitive(p, "action")->valueint == action, "%s: action %d", what,
          cJSON_GetObjectItemCaseSensitive(p, "action")->valueint);
    int mi = message_index_of_turn(d, k);
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(p, "prompt");
    CHECK(cJSON_GetArraySize(prompt) == mi && cJSON_Compare(cJSON_GetArrayItem(prompt, mi - 1),
                                                            cJSON_GetArrayItem(d->messages, mi - 1), 1),
          "%s: the prompt is the reference prefix", what);
    CHECK(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(p, "chosen")->child, cJSON_GetArrayItem(d->messages, mi), 1),
          "%s: chosen is the reference turn", what);
    CHECK(st.turns == cJSON_GetArraySize(d->actions) && st.diverged == 1 && st.tags[tag] == 1, "%s: stats", what);
  }
  cJSON_Delete(pairs);
}

static void test_reference_gives_no_pairs(const DpoDialog *d, const char *what) {
  Script s = {0};
  s.plant_at = -1;
  DpoReplayStats st;
  cJSON *pairs = replay(d, &s, NULL, &st);
  CHECK(cJSON_GetArraySize(pairs) == 0 && st.diverged == 0 && st.turns == cJSON_GetArraySize(d->actions) &&
            st.turns >= 1,
        "%s: the reference as candidate: %d pairs, %ld diverged of %ld turns", what, cJSON_GetArraySize(pairs),
        st.diverged, st.turns);
  cJSON_Delete(pairs);
}

static void test_structural(const DpoDialog *fd) {
  // fd_maturity_quote: ... calculate_fd_maturity(principal, tenure) ... summary.
  int call = turn_of(fd, "calculate_fd_maturity", 0);
  CHECK(call > 0, "the FD dialog calls calculate_fd_maturity");
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fd->actions, call), "actions")->child;
  cJSON *args = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ref, "arguments"), 1);
  FimiError err = {0};
  char *wrong_tool = toolcall_render_call("calculate_rd_maturity", args, &err);
  expect_pair(fd, call, wrong_tool, DPO_TAG_WRONG_TOOL_OR_ARGS, 0, "wrong tool");
  cJSON *p = cJSON_GetObjectItemCaseSensitive(args, "principal_amount");
  double principal = p->valuedouble;
  cJSON_SetNumberValue(p, principal + 1000);
  char *wrong_args = toolcall_render_call("calculate_fd_maturity", args, &err);
  expect_pair(fd, call, wrong_args, DPO_TAG_WRONG_TOOL_OR_ARGS, 0, "wrong arguments");
  // The same number written another way is the same argument.
  cJSON_SetNumberValue(p, principal);
  char *same = toolcall_render_call("calculate_fd_maturity", args, &err);
  char number[64], alt[64], *spaced = malloc(strlen(same) + 64);
  snprintf(number, sizeof number, "%.0f", principal);
  snprintf(alt, sizeof alt, "%.1f", principal);
  char *at = strstr(same, number);
  if (at) {
    size_t head = (size_t)(at - same);
    sprintf(spaced, "%.*s%s%s", (int)head, same, alt, at + strlen(number));
    Script s = {0};
    s.plant_at = call;
    s.planted = spaced;
    s.planted_len = strlen(spaced);
    DpoReplayStats st;
    cJSON *pairs = replay(fd, &s, NULL, &st);
    CHECK(cJSON_GetArraySize(pairs) == 0, "numbers compare as numbers (%s)", spaced);
    cJSON_Delete(pairs);
  }
  // A preface before the right call: harmless, or stating a value not in the data.
  char preface[1024];
  snprintf(preface, sizeof preface, "Let me check that for you.\n%s", same);
  Script s = {0};
  s.plant_at = call;
  s.planted = preface;
  s.planted_len = strlen(preface);
  DpoReplayStats st;
  cJSON *pairs = replay(fd, &s, NULL, &st);
  CHECK(cJSON_GetArraySize(pairs) == 0, "a harmless preface passes");
  cJSON_Delete(pairs);
  snprintf(preface, sizeof preface, "Your FD will earn Rs 98,765.\n%s", same);
  expect_pair(fd, call, preface, DPO_TAG_BAD_REPLY, 0, "a preface with a value not in the data");
  // Malformed call, a reply where the reference calls.
  expect_pair(fd, call, "<tool_call>{\"name\":\"calculate_fd_maturity\",\"arguments\":[1]}</tool_call>",
              DPO_TAG_WRONG_TOOL_OR_ARGS, 0, "malformed call");
  expect_pair(fd, call, "Your FD will mature soon.", DPO_TAG_REPLIED_INSTEAD_OF_CALLING, 0, "replied instead of calling");
  // A call where the reference replies (the summary), and a repeated call there.
  int summary = turn_of(fd, "Summary:", 1);
  expect_pair(fd, summary, same, DPO_TAG_CALLED_INSTEAD_OF_REPLYING, 0, "called instead of replying");
  // The right tool again where the reference moves on to the next call.
  int verify = turn_of(fd, "verify_customer", 0);
  if (verify >= 0 && verify + 1 < call) {
    const cJSON *vref = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fd->actions, verify), "actions")->child;
    char *again = toolcall_render_call("verify_customer", cJSON_GetObjectItemCaseSensitive(vref, "arguments"), &err);
    expect_pair(fd, verify + 1, again, DPO_TAG_WRONG_TOOL_OR_ARGS, 0, "repeated call");
    Script r = {0};
    r.plant_at = verify + 1;
    r.planted = again;
    r.planted_len = strlen(again);
    cJSON *rp = replay(fd, &r, NULL, &st);
    CHECK(rp->child && strstr(cJSON_GetObjectItemCaseSensitive(rp->child, "detail")->valuestring, "repeated"),
          "the repeat is named");
    cJSON_Delete(rp);
    free(again);
  }
  free(wrong_tool);
  free(wrong_args);
  free(same);
  free(spaced);
  cJSON_Delete(args);
}

static void test_bad_replies(const DpoDialog *fd, const DpoDialog *cheque, const DpoDialog *oos) {
  int summary = turn_of(fd, "Summary:", 1);
  expect_pair(fd, summary, "Your deposit is booked. Thank you for calling Navadhan Bank.", DPO_TAG_BAD_REPLY, 0,
              "summary without the required values");
  const char *ref = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fd->actions, summary), "actions")->child,
                        "text")
                        ->valuestring;
  char extra[2048];
  snprintf(extra, sizeof extra, "%s Also, your rate is 9.99%%.", ref);
  expect_pair(fd, summary, extra, DPO_TAG_BAD_REPLY, 0, "a value not in the data");
  // Paraphrased, with every value: passes.
  Script s = {0};
  s.plant_at = summary;
  snprintf(extra, sizeof extra, "Here you go - %s", ref);
  s.planted = extra;
  s.planted_len = strlen(extra);
  DpoReplayStats st;
  cJSON *pairs = replay(fd, &s, NULL, &st);
  CHECK(cJSON_GetArraySize(pairs) == 0, "a reworded summary with every value passes");
  cJSON_Delete(pairs);
  int ask = turn_of(fd, "Could you please share", 1);
  expect_pair(fd, ask, "Hello! How may I help you today?", DPO_TAG_BAD_REPLY, 0, "does not ask for the field");
  int consent = turn_of(cheque, "Do you confirm", 1);
  CHECK(consent >= 0, "the cheque-book dialog has a consent turn");
  expect_pair(cheque, consent, "I will now order your cheque book.", DPO_TAG_BAD_REPLY, 0, "no consent question");
  int refusal = turn_of(oos, "Summary:", 1);
  expect_pair(oos, refusal, "Sure, buy the mid-cap fund, it will do well. Thank you for calling Navadhan Bank.",
              DPO_TAG_BAD_REPLY, 0, "no refusal where required");
}

// A judge that fails every reply: every message turn becomes bad_reply.
static int strict_grade(void *ctx, const DpoReplyCase *c, char *why, size_t n, FimiError *err) {
  (void)c, (void)err;
  (*(int *)ctx)++;
  snprintf(why, n, "the plugged-in judge says no");
  return 0;
}

static void test_judge_plugin(const DpoDialog *fd) {
  int calls = 0;
  DpoJudge judge = {strict_grade, &calls};
  Script s = {0};
  s.plant_at = -1;
  DpoReplayStats st;
  cJSON *pairs = replay(fd, &s, &judge, &st);
  int messages = 0;
  for (const cJSON *t = fd->actions->child; t; t = t->next)
    messages += !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "actions")->child, "type")->valuestring,
                        "message");
  CHECK(calls == messages && st.tags[DPO_TAG_BAD_REPLY] == messages && cJSON_GetArraySize(pairs) == messages,
        "the judge decides every message turn: %d calls, %d messages", calls, messages);
  cJSON_Delete(pairs);
}

static void test_any_bytes(const DpoDialog *d) {
  long pairs_total = 0;
  for (int round = 0; round < 40; round++) {
    Script s = {0};
    s.fuzz = 1;
    s.d = d;
    DpoCandidate cand = {script_begin, script_generate, NULL, &s};
    DpoPairOptions opt = {3, (uint64_t)round, NULL, round % 2 ? DPO_CHOSEN_SELF_REPHRASE : DPO_CHOSEN_REFERENCE};
    cJSON *pairs = cJSON_CreateArray();
    DpoReplayStats st = {0};
    FimiError err = {0};
    CHECK(dpo_pairs_dialog(d, round, &cand, &opt, pairs, &st, &err) == 0, "fuzz round %d: %s", round, err.message);
    for (const cJSON *p = pairs->child; p; p = p->next) {
      char *line = cJSON_PrintUnformatted(p);
      cJSON *back = cJSON_Parse(line);
      CHECK(back && !memchr(line, 0, strlen(line)), "a pair is valid JSON");
      // The pair renders as a conversation (what fimi data tokenize does).
      const cJSON *rej = cJSON_GetObjectItemCaseSensitive(p, "rejected")->child;
      CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rej, "content")), "rejected has content");
      cJSON_Delete(back);
      free(line);
      pairs_total++;
    }
    cJSON_Delete(pairs);
  }
  CHECK(pairs_total > 100, "random bytes diverge: %ld pairs", pairs_total);
}

static void test_deterministic(const DpoDialog *d) {
  char *first = NULL;
  for (int run = 0; run < 2; run++) {
    Script s = {0};
    s.fuzz = 1;
    s.d = d;
    DpoCandidate cand = {script_begin, script_generate, NULL, &s};
    DpoPairOptions opt = {2, 9, NULL, DPO_CHOSEN_SELF_REPHRASE};
    cJSON *pairs = cJSON_CreateArray();
    DpoReplayStats st = {0};
    FimiError err = {0};
    dpo_pairs_dialog(d, 5, &cand, &opt, pairs, &st, &err);
    char *text = cJSON_PrintUnformatted(pairs);
    if (run == 0) first = text;
    else {
      CHECK(!strcmp(first, text), "the same seed gives the same pairs");
      free(text);
    }
    cJSON_Delete(pairs);
  }
  free(first);
}

static const char *row_str(const cJSON *row, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

// Plants `planted` at turn k, answers the revision request with `revision`
// (NULL: the reference turn) and checks the pair's construction.
static void expect_rephrase(const DpoDialog *d, int k, const char *planted, const char *revision, int accepted,
                            const char *what) {
  Script s = {0};
  s.plant_at = k;
  s.planted = planted;
  s.planted_len = strlen(planted);
  s.revision = revision;
  DpoReplayStats st;
  cJSON *pairs = replay_chosen(d, &s, NULL, DPO_CHOSEN_SELF_REPHRASE, &st);
  const cJSON *p = pairs->child;
  CHECK(p && !p->next && s.revision_requests == 1, "%s: %d pairs, %d revision requests", what,
        cJSON_GetArraySize(pairs), s.revision_requests);
  DpoChosenSource want = accepted ? DPO_CHOSEN_SELF_REPHRASE : DPO_CHOSEN_REFERENCE;
  CHECK(st.rephrase_attempts == 1 && st.rephrase_accepted == accepted && st.by_source[want].pairs == 1 &&
            st.by_source[!want].pairs == 0,
        "%s: attempts %ld accepted %ld", what, st.rephrase_attempts, st.rephrase_accepted);
  if (p) {
    CHECK(!strcmp(row_str(p, "chosen_source"), dpo_chosen_source_name(want)), "%s: chosen_source %s", what,
          row_str(p, "chosen_source"));
    const cJSON *chosen = cJSON_GetObjectItemCaseSensitive(p, "chosen")->child;
    const cJSON *reference = cJSON_GetArrayItem(d->messages, message_index_of_turn(d, k));
    if (!accepted) CHECK(cJSON_Compare(chosen, reference, 1), "%s: the reference turn is chosen", what);
    // Both sides scored (script_score: minus the JSON characters), summed per construction.
    char *ct = cJSON_PrintUnformatted(chosen), *rt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(p, "rejected")->child);
    const DpoConstructionStats *cs = &st.by_source[want];
    CHECK(cJSON_GetObjectItemCaseSensitive(p, "logp_chosen")->valuedouble == -(double)strlen(ct) &&
              cJSON_GetObjectItemCaseSensitive(p, "logp_rejected")->valuedouble == -(double)strlen(rt) &&
              cs->scored == 1 && cs->logp_chosen == -(double)strlen(ct) && cs->chosen_tokens == (long)strlen(ct),
          "%s: scores", what);
    free(ct);
    free(rt);
  }
  cJSON_Delete(pairs);
}

static void test_self_rephrase(const DpoDialog *fd) {
  int call = turn_of(fd, "calculate_fd_maturity", 0);
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fd->actions, call), "actions")->child;
  FimiError err = {0};
  char *wrong_tool = toolcall_render_call("calculate_rd_maturity", cJSON_GetObjectItemCaseSensitive(ref, "arguments"), &err);
  // A revision that passes the checks (the right call) is the chosen side.
  expect_rephrase(fd, call, wrong_tool, NULL, 1, "revised call accepted");
  // One that fails again falls back to the reference turn.
  expect_rephrase(fd, call, wrong_tool, "Your FD will mature soon.", 0, "failed revision falls back");
  // The request names the failure, not the reference's tool or arguments.
  Script s = {0};
  s.plant_at = call;
  s.planted = wrong_tool;
  s.planted_len = strlen(wrong_tool);
  DpoReplayStats st;
  cJSON *pairs = replay_chosen(fd, &s, NULL, DPO_CHOSEN_SELF_REPHRASE, &st);
  CHECK(strstr(s.last_request, "tool call is not the right one") && !strstr(s.last_request, "calculate_fd_maturity"),
        "the revision request holds the critique only: %s", s.last_request);
  const cJSON *chosen = pairs->child ? cJSON_GetObjectItemCaseSensitive(pairs->child, "chosen")->child : NULL;
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(chosen, "tool_calls");
  char *calls_text = calls ? cJSON_PrintUnformatted(calls) : NULL;
  CHECK(calls_text && strstr(calls_text, "calculate_fd_maturity"), "the accepted revision is the right call");
  free(calls_text);
  cJSON_Delete(pairs);
  // A bad reply's request carries the judge's reason; the default construction never asks.
  int summary = turn_of(fd, "Summary:", 1);
  expect_rephrase(fd, summary, "Your deposit is booked. Thank you for calling Navadhan Bank.", NULL, 1,
                  "revised summary accepted");
  Script plain = {0};
  plain.plant_at = summary;
  plain.planted = "Your deposit is booked.";
  plain.planted_len = strlen(plain.planted);
  cJSON *ref_pairs = replay(fd, &plain, NULL, &st);
  CHECK(plain.revision_requests == 0 && st.rephrase_attempts == 0 && st.by_source[DPO_CHOSEN_REFERENCE].pairs == 1 &&
            !strcmp(row_str(ref_pairs->child, "chosen_source"), "reference"),
        "--chosen reference asks for no revision");
  cJSON_Delete(ref_pairs);
  DpoDivergence dv = {DPO_TAG_BAD_REPLY, 0, "does not state 12345.00"};
  char *req = dpo_rephrase_request(&dv, &err);
  CHECK(req && strstr(req, "breaks a rule: does not state 12345.00"), "bad reply critique: %s", req);
  free(req);
  DpoChosenSource src;
  CHECK(dpo_chosen_source_parse("self-rephrase", &src, &err) == 0 && src == DPO_CHOSEN_SELF_REPHRASE &&
            dpo_chosen_source_parse("teacher", &src, &err) != 0 && strstr(err.message, "reference or self-rephrase"),
        "--chosen parsing");
  free(wrong_tool);
}

static void test_sanitize(void) {
  FimiError err = {0};
  int changed = 0;
  char *s = dpo_sanitize_utf8("ok\xff\0x\xe2\x82", 7, &changed, &err);
  CHECK(s && changed && !strcmp(s, "ok\xEF\xBF\xBD\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD"), "sanitize: %s", s);
  free(s);
  s = dpo_sanitize_utf8("d\xc3\xa9j\xc3\xa0", 6, &changed, &err);
  CHECK(s && !changed && !strcmp(s, "d\xc3\xa9j\xc3\xa0"), "valid UTF-8 kept");
  free(s);
}

int main(void) {
  FimiError err = {0};
  if (env_world_create(&world, &err) != 0 || task_gen_context_init(&gen, 1, &err) != 0) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  cJSON *rows[3] = {0};
  DpoDialog fd, cheque, oos;
  if (make_dialog("fd_maturity_quote", 11, &rows[0], &fd) || make_dialog("cheque_book", 12, &rows[1], &cheque) ||
      make_dialog("investment_advice", 13, &rows[2], &oos)) {
    fprintf(stderr, "setup: dialogs\n");
    return 1;
  }
  test_reference_gives_no_pairs(&fd, "fd");
  test_reference_gives_no_pairs(&cheque, "cheque");
  test_reference_gives_no_pairs(&oos, "out of scope");
  test_structural(&fd);
  test_bad_replies(&fd, &cheque, &oos);
  test_judge_plugin(&fd);
  test_any_bytes(&cheque);
  test_deterministic(&fd);
  test_self_rephrase(&fd);
  test_sanitize();
  dpo_dialog_free(&fd);
  dpo_dialog_free(&cheque);
  dpo_dialog_free(&oos);
  for (int i = 0; i < 3; i++) cJSON_Delete(rows[i]);
  task_gen_context_free(&gen);
  env_world_free(world);
  TEST_MAIN_END();
}
