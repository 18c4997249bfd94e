// tests/test_env_transcript.c: oracle transcripts (env/transcript.h) render
// exactly as rollouts render them. For two tasks of every registered family
// (every use case) and each catalog mode (all, area, family), the transcript
// goes through a JSONL line and back, is rendered with chat_render_messages,
// and must give byte for byte the ids and loss mask of the same episode built
// incrementally the way a rollout does (chat_begin, system, first customer
// line, then per agent turn the oracle's exact turn text as a model turn --
// once with chat_append_turn, once as a generation prompt plus the turn's ids
// through chat_append_generated -- and the observation as a tool or user
// turn). Also: every tool-call turn parses back (data/toolcall.h) to the
// name and arguments of its tool_calls entry and of the oracle's own turn;
// replaying the transcript's assistant turns in a fresh episode gives the
// transcript's observations and reward 1.0 (strict 1.0); system prompts grow
// family < area < all; and env_transcript_assistant_message keeps any turn
// that is not a canonical call verbatim, so that it still renders exactly.
// The tokenizer is a byte-fallback BPE trained here on transcripts (so its
// merges span JSON punctuation, words and numbers), with <tool_call> tokens.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe_train.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "data/toolcall.h"
#include "env/agent_prompt.h"
#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"
#include "env/transcript.h"
#include "test_util.h"

#define TASKS_PER_FAMILY 2

static const char *content_of(const cJSON *msg) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
  return cJSON_IsString(c) ? c->valuestring : NULL;
}
static const char *role_of(const cJSON *msg) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(msg, "role");
  return cJSON_IsString(r) ? r->valuestring : "";
}
// The tool_calls[0].function of an assistant message, or NULL.
static const cJSON *call_of(const cJSON *msg) {
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
  if (!cJSON_IsArray(calls)) return NULL;
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 0), "function");
}

// The model text of an assistant message as docs/chat-format.md section 7
// specifies it (written out here, not taken from data/chat.c): content, and
// for a tool call "\n" (when content is not empty) and the call text.
static char *assistant_text(const cJSON *msg) {
  const char *content = content_of(msg);
  const cJSON *fn = call_of(msg);
  if (!fn) return content ? strdup(content) : NULL;
  FimiError err = {0};
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
  char *call = toolcall_render_call(name->valuestring, cJSON_GetObjectItemCaseSensitive(fn, "arguments"), &err);
  if (!call) return NULL;
  size_t n = (content ? strlen(content) : 0) + strlen(call) + 2;
  char *text = malloc(n);
  snprintf(text, n, "%s%s%s", content && *content ? content : "", content && *content ? "\n" : "", call);
  free(call);
  return text;
}

// Compares two builders' ids and masks; names the first difference.
static int same_tokens(const ChatBuilder *a, const ChatBuilder *b, const char *what) {
  size_t n = a->ids.len < b->ids.len ? a->ids.len : b->ids.len;
  for (size_t i = 0; i < n; i++)
    if (a->ids.data[i] != b->ids.data[i] || a->mask[i] != b->mask[i]) {
      CHECK(0, "%s: token %zu differs: id %d mask %d vs id %d mask %d", what, i, a->ids.data[i], a->mask[i],
            b->ids.data[i], b->mask[i]);
      return 0;
    }
  CHECK(a->ids.len == b->ids.len, "%s: %zu vs %zu tokens", what, a->ids.len, b->ids.len);
  return a->ids.len == b->ids.len;
}

// The ids chat_append_turn gives a model turn's content and closing
// <end_of_turn> (what a policy that learned the transcript generates).
static int model_turn_ids(ChatBuilder *scratch, const char *turn, TokenIds *out, FimiError *err) {
  chat_reset(scratch);
  if (chat_begin(scratch, err) || chat_append_turn(scratch, CHAT_MODEL, turn, strlen(turn), err)) return -1;
  out->len = 0;
  for (size_t i = 0; i < scratch->ids.len; i++)
    if (scratch->mask[i] && token_ids_push(out, scratch->ids.data[i], err)) return -1;
  return 0;
}

typedef struct Totals {
  long transcripts, turns, calls, tokens_equal;
  size_t system_tokens[3], system_chars[3];
  int use_cases[TASK_USE_COUNT];
} Totals;

// One task in one catalog mode: every check of the header comment.
static void check_task(EnvWorld *world, const Tokenizer *tok, const Task *t, uint64_t seed, EnvCatalogMode mode,
                       Totals *tot) {
  FimiError err = {0};
  char what[256];
  snprintf(what, sizeof what, "%s (%s, seed %llu)", t->id, env_catalog_mode_name(mode), (unsigned long long)seed);
  cJSON *conv = NULL;
  EnvTranscriptStats st;
  if (env_transcript_oracle(world, t, seed, mode, &conv, &st, &err) != 0) {
    CHECK(0, "%s: transcript: %s", what, err.message);
    return;
  }
  // Through a JSONL line and back, as the file carries it.
  cJSON *row = cJSON_CreateObject();
  cJSON_AddItemToObject(row, "messages", conv);
  char *line = cJSON_PrintUnformatted(row);
  cJSON_Delete(row);
  CHECK(line && !strchr(line, '\n'), "%s: one line", what);
  cJSON *back = cJSON_Parse(line);
  free(line);
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(back, "messages");
  int n = cJSON_GetArraySize(msgs);
  CHECK(n == st.messages && n >= 3, "%s: %d messages, stats say %d", what, n, st.messages);

  // The whole conversation rendered at once.
  ChatBuilder whole, inc, gen, scratch;
  chat_init(&whole, tok, &err);
  chat_init(&inc, tok, &err);
  chat_init(&gen, tok, &err);
  chat_init(&scratch, tok, &err);
  CHECK(chat_render_messages(&whole, msgs, NULL, what, &err) == 0, "%s: render: %s", what, err.message);

  // The same episode played here by the oracle and built turn by turn.
  char *system = env_agent_system_text(t, mode, &err);
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL, *replay = NULL;
  const char *first = NULL;
  agent_create(AGENT_ORACLE, seed, &agent, &err);
  CHECK(env_open(world, t, seed, &ep, &first, &err) == 0, "%s: open: %s", what, err.message);
  if (!ep || !system) goto out;
  CHECK(!strcmp(role_of(cJSON_GetArrayItem(msgs, 0)), "system") &&
            !strcmp(content_of(cJSON_GetArrayItem(msgs, 0)), system),
        "%s: system message is env_agent_system_text", what);
  CHECK(!strcmp(role_of(cJSON_GetArrayItem(msgs, 1)), "user") &&
            !strcmp(content_of(cJSON_GetArrayItem(msgs, 1)), first),
        "%s: second message is the first customer line", what);
  CHECK(st.system_chars == strlen(system), "%s: stats.system_chars", what);
  chat_begin(&inc, &err);
  chat_append_turn(&inc, CHAT_SYSTEM, system, strlen(system), &err);
  chat_append_turn(&inc, CHAT_USER, first, strlen(first), &err);
  chat_begin(&gen, &err);
  chat_append_turn(&gen, CHAT_SYSTEM, system, strlen(system), &err);
  chat_append_turn(&gen, CHAT_USER, first, strlen(first), &err);
  EnvObservation obs = {0};
  TokenIds turn_ids = {0};
  int index = 2, turns = 0, calls = 0;
  while (!obs.done && index < n) {
    char *turn = NULL;
    CHECK(agent_next(agent, ep, &turn, &err) == 0, "%s: agent: %s", what, err.message);
    if (!turn) break;
    const cJSON *msg = cJSON_GetArrayItem(msgs, index++);
    CHECK(!strcmp(role_of(msg), "assistant"), "%s: message %d is the assistant's", what, index - 1);
    char *rendered = assistant_text(msg);
    CHECK(rendered && !strcmp(rendered, turn), "%s: message %d renders the oracle's turn: %s vs %s", what, index - 1,
          rendered ? rendered : "(null)", turn);
    // A tool call parses back to its tool_calls entry and to the oracle's call.
    const cJSON *fn = call_of(msg);
    ToolCallParse p_raw, p_msg;
    int k_raw = toolcall_parse(turn, strlen(turn), &p_raw);
    int k_msg = rendered ? toolcall_parse(rendered, strlen(rendered), &p_msg) : TOOLCALL_ERROR;
    CHECK((k_raw == TOOLCALL_TOOL_CALL) == (fn != NULL), "%s: message %d: tool_calls form iff the turn is a call", what,
          index - 1);
    if (fn && k_raw == TOOLCALL_TOOL_CALL && k_msg == TOOLCALL_TOOL_CALL) {
      const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
      const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
      CHECK(!strcmp(p_msg.name, name) && !strcmp(p_raw.name, name), "%s: call name %s", what, name);
      CHECK(cJSON_Compare(p_msg.arguments, args, 1) && cJSON_Compare(p_raw.arguments, args, 1),
            "%s: %s arguments parse back equal", what, name);
      calls++;
    }
    if (k_raw != TOOLCALL_ERROR) toolcall_parse_free(&p_raw);
    if (rendered && k_msg != TOOLCALL_ERROR) toolcall_parse_free(&p_msg);
    free(rendered);
    // Incremental: the exact turn text as a model turn; and as a rollout
    // appends it: generation prompt, then the policy's ids.
    chat_append_turn(&inc, CHAT_MODEL, turn, strlen(turn), &err);
    CHECK(model_turn_ids(&scratch, turn, &turn_ids, &err) == 0, "%s: model ids: %s", what, err.message);
    chat_append_generation_prompt(&gen, &err);
    chat_append_generated(&gen, turn_ids.data, turn_ids.len, &err);
    CHECK(env_step(ep, turn, strlen(turn), &obs, &err) == 0, "%s: step: %s", what, err.message);
    free(turn);
    turns++;
    ChatRole role = obs.kind == ENV_OBS_TOOL ? CHAT_TOOL : CHAT_USER;
    chat_append_turn(&inc, role, obs.text, strlen(obs.text), &err);
    chat_append_turn(&gen, role, obs.text, strlen(obs.text), &err);
    const cJSON *o = cJSON_GetArrayItem(msgs, index++);
    CHECK(o && !strcmp(role_of(o), role == CHAT_TOOL ? "tool" : "user") && !strcmp(content_of(o), obs.text),
          "%s: message %d is the observation exactly", what, index - 1);
  }
  token_ids_free(&turn_ids);
  CHECK(obs.done && index == n, "%s: the transcript ends with the episode (%d of %d messages)", what, index, n);
  CHECK(turns == st.agent_turns && calls == st.tool_calls && st.verbatim_calls == 0, "%s: stats turns/calls", what);
  tot->tokens_equal += same_tokens(&whole, &inc, what) && same_tokens(&inc, &gen, what);

  // Replaying the transcript's assistant turns in a fresh episode.
  CHECK(env_open(world, t, seed, &replay, &first, &err) == 0, "%s: replay open: %s", what, err.message);
  if (replay) {
    EnvObservation r = {0};
    for (int i = 2; i + 1 < n && !r.done; i += 2) {
      char *text = assistant_text(cJSON_GetArrayItem(msgs, i));
      if (!text || env_step(replay, text, strlen(text), &r, &err) != 0) {
        CHECK(0, "%s: replay step %d: %s", what, i, err.message);
        free(text);
        break;
      }
      free(text);
      CHECK(!strcmp(r.text, content_of(cJSON_GetArrayItem(msgs, i + 1))), "%s: replay observation %d", what, i + 1);
    }
    RewardBreakdown rb;
    memset(&rb, 0, sizeof rb);
    CHECK(r.done && env_score(replay, &rb, &err) == 0 && rb.total == 1.0 && rb.strict_total == 1.0 &&
              rb.end == t->expected_end,
          "%s: the replayed transcript scores 1.0 (got %.4f, strict %.4f)", what, rb.total, rb.strict_total);
    CHECK(st.reward.total == 1.0, "%s: stats reward", what);
  }
  TokenIds sys = {0};
  tokenizer_encode(tok, system, strlen(system), TOKENIZER_NO_SPECIAL_MATCH, &sys, &err);
  tot->system_tokens[mode] += sys.len;
  tot->system_chars[mode] += strlen(system);
  token_ids_free(&sys);
  tot->transcripts++;
  tot->turns += turns;
  tot->calls += calls;
  tot->use_cases[t->use_case]++;
out:
  env_close(replay);
  env_close(ep);
  agent_free(agent);
  free(system);
  chat_free(&whole);
  chat_free(&inc);
  chat_free(&gen);
  chat_free(&scratch);
  cJSON_Delete(back);
}

// ---- env_transcript_assistant_message on turns an agent might write -------------

static void check_message_form(const Tokenizer *tok) {
  static const struct {
    const char *turn;
    int is_call;  // expected: 1 tool_calls form, 2 call kept verbatim, 0 message
  } cases[] = {
      {"Could you please share your customer id?", 0},
      {"<tool_call>{\"name\":\"get_account_balance\",\"arguments\":{\"account_ids\":[\"SB1\"]}}</tool_call>", 1},
      {"Let me check.\n<tool_call>{\"name\":\"get_account_balance\",\"arguments\":{}}</tool_call>", 1},
      {"<tool_call>{\"name\":\"b\",\"arguments\":{\"z\":1,\"a\":[2.5,true,null]}}</tool_call>", 1},
      // Not what toolcall_render_call prints: kept verbatim.
      {"Let me check. <tool_call>{\"name\":\"get_account_balance\",\"arguments\":{}}</tool_call>", 2},
      {"Let me check.\n\n<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", 2},
      {"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", 2},
      {"<tool_call>{\"arguments\":{},\"name\":\"a\"}</tool_call>", 2},
      {"<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":1.0}}</tool_call>", 2},
      {"<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":\"\\u00e9\"}}</tool_call>", 2},
      {"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n", 2},
      // Malformed calls and special-token text: messages, verbatim.
      {"<tool_call>{\"name\":\"a\"", 0},
      {"Sure.</tool_call>", 0},
      {"Hello <end_of_turn> there", 0},
  };
  FimiError err = {0};
  ChatBuilder a, b;
  chat_init(&a, tok, &err);
  chat_init(&b, tok, &err);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *turn = cases[i].turn;
    int is_call = -1;
    cJSON *m = env_transcript_assistant_message(turn, strlen(turn), &is_call, &err);
    CHECK(m && is_call == cases[i].is_call, "case %zu: form %d, expected %d", i, is_call, cases[i].is_call);
    if (!m) continue;
    CHECK((call_of(m) != NULL) == (is_call == 1), "case %zu: tool_calls present iff canonical", i);
    if (is_call != 1) CHECK(!strcmp(content_of(m), turn), "case %zu: verbatim content", i);
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, m);
    char *text = cJSON_PrintUnformatted(arr);
    cJSON *back = cJSON_Parse(text);
    free(text);
    chat_reset(&a);
    chat_reset(&b);
    CHECK(chat_render_messages(&a, back, NULL, "case", &err) == 0, "case %zu: render: %s", i, err.message);
    chat_begin(&b, &err);
    chat_append_turn(&b, CHAT_MODEL, turn, strlen(turn), &err);
    char label[32];
    snprintf(label, sizeof label, "case %zu", i);
    same_tokens(&a, &b, label);
    cJSON_Delete(back);
    cJSON_Delete(arr);
  }
  CHECK(env_transcript_assistant_message("a\0b", 3, NULL, &err) == NULL && strstr(err.message, "NUL"),
        "a NUL byte fails: %s", err.message);
  CHECK(env_transcript_assistant_message("ok \xff", 4, NULL, &err) == NULL && strstr(err.message, "UTF-8"),
        "invalid UTF-8 fails: %s", err.message);
  chat_free(&a);
  chat_free(&b);
}

// ---- the tokenizer: a BPE trained on a few transcripts ---------------------

static Tokenizer *train_tokenizer(EnvWorld *world, const TaskGenContext *ctx) {
  FimiError err = {0};
  const char *names[3] = {"fd_paper", "card_temp_block", "pmsby_enrol"};
  const char *texts[3];
  size_t lens[3];
  char *owned[3] = {0};
  int nt = 0;
  for (int i = 0; i < 3; i++) {
    const TaskFamily *f = task_family_find(names[i]);
    if (!f) f = task_family_at(i);
    Task t;
    cJSON *conv = NULL;
    if (task_generate(ctx, f, 1000 + (uint64_t)i, &t, &err) != 0) continue;
    if (env_transcript_oracle(world, &t, 7, ENV_CATALOG_AREA, &conv, NULL, &err) == 0) {
      owned[nt] = cJSON_PrintUnformatted(conv);
      texts[nt] = owned[nt];
      lens[nt] = strlen(owned[nt]);
      nt++;
    }
    cJSON_Delete(conv);
    task_free(&t);
  }
  BpeTrainOptions opt;
  bpe_train_default_options(&opt);
  opt.vocab_size = 1500;
  char *json = NULL;
  Tokenizer *tok = NULL;
  const char *tnames[3] = {"t0", "t1", "t2"};
  if (nt == 0 || bpe_train_texts(texts, lens, tnames, nt, &opt, &json, NULL, &err) != 0 ||
      tokenizer_load_json(json, strlen(json), "trained", &tok, &err) != 0) {
    fprintf(stderr, "training the test tokenizer: %s\n", err.message);
    tok = NULL;
  }
  free(json);
  for (int i = 0; i < nt; i++) free(owned[i]);
  return tok;
}

int main(void) {
  FimiError err = {0};
  EnvWorld *world = NULL;
  TaskGenContext ctx;
  if (env_world_create(&world, &err) != 0 || task_gen_context_init(&ctx, 1, &err) != 0) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  Tokenizer *tok = train_tokenizer(world, &ctx);
  CHECK(tok != NULL, "a tokenizer");
  if (!tok) return 1;
  const TokenizerSpecials *sp = tokenizer_specials(tok);
  CHECK(sp->tool_call_open >= 0 && sp->tool_call_close >= 0, "the tokenizer has <tool_call> tokens");

  check_message_form(tok);

  Totals tot;
  memset(&tot, 0, sizeof tot);
  int growth_ok = 1;
  for (int f = 0; f < task_family_count(); f++) {
    const TaskFamily *family = task_family_at(f);
    for (int k = 0; k < TASKS_PER_FAMILY; k++) {
      Task t;
      if (task_generate(&ctx, family, 77 + (uint64_t)k, &t, &err) != 0) {
        CHECK(0, "generate %s: %s", family->name, err.message);
        continue;
      }
      for (int mode = 0; mode < 3; mode++) check_task(world, tok, &t, 11 + (uint64_t)(f * 4 + k), mode, &tot);
      char *s_all = env_agent_system_text(&t, ENV_CATALOG_ALL, &err);
      char *s_area = env_agent_system_text(&t, ENV_CATALOG_AREA, &err);
      char *s_family = env_agent_system_text(&t, ENV_CATALOG_FAMILY, &err);
      // family <= area <= all (equal only when the family's tools are the whole area).
      if (!(s_all && s_area && s_family && strlen(s_family) <= strlen(s_area) && strlen(s_area) < strlen(s_all))) {
        growth_ok = 0;
        CHECK(0, "%s: system prompt family %zu <= area %zu < all %zu", t.id, strlen(s_family), strlen(s_area),
              strlen(s_all));
      }
      free(s_all);
      free(s_area);
      free(s_family);
      task_free(&t);
    }
  }
  for (int u = 0; u < TASK_USE_COUNT; u++)
    CHECK(tot.use_cases[u] > 0, "use case %s covered", task_use_case_name((TaskUseCase)u));
  long expected = 3L * TASKS_PER_FAMILY * task_family_count();
  CHECK(tot.transcripts == expected && tot.tokens_equal == expected, "%ld of %ld transcripts token-identical",
        tot.tokens_equal, expected);
  CHECK(growth_ok && tot.system_chars[ENV_CATALOG_FAMILY] < tot.system_chars[ENV_CATALOG_AREA] &&
            tot.system_tokens[ENV_CATALOG_AREA] < tot.system_tokens[ENV_CATALOG_ALL],
        "mean system prompt grows family < area < all");
  long per = expected / 3;
  printf("%ld transcripts over %d families (%ld agent turns, %ld tool calls), ids and masks identical: %ld\n",
         tot.transcripts, task_family_count(), tot.turns, tot.calls, tot.tokens_equal);
  for (int mode = 0; mode < 3; mode++)
    printf("system prompt, catalog %-6s: mean %.0f characters, %.0f tokens (test BPE, vocab %d)\n",
           env_catalog_mode_name((EnvCatalogMode)mode), (double)tot.system_chars[mode] / (double)per,
           (double)tot.system_tokens[mode] / (double)per, tokenizer_vocab_size(tok));
  tokenizer_free(tok);
  task_gen_context_free(&ctx);
  env_world_free(world);
  TEST_MAIN_END();
}
