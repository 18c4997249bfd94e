// tests/test_env_episode.c: the episode layer (env/episode.h), the simulated
// customer (env/user_sim.h), the reward (env/reward.h) and the scripted agents
// (env/agents.h): simulator rules (reveal on request, one field a reply, in
// order, never inventing, confirmations only as allowed, hand-off, goal),
// the turn budget and end reasons, tool-call parse errors as tool results,
// reward components against hand-computed values for perturbed oracle runs,
// the oracle at 1.0/1.0 on >= 2,000 tasks across every registered family, and
// the do-nothing and random agents' (low) means.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/toolcall.h"
#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"
#include "env/user_sim.h"
#include "test_util.h"

// ---- simulator -------------------------------------------------------------

static void sim_task(Task *t, TaskStyle style, int confirms) {
  FimiError err = {0};
  task_init(t);
  task_set(&t->id, &err, "sim");
  task_set(&t->family, &err, "sim");
  task_set(&t->persona, &err, "p");
  task_set(&t->reason, &err, "I want to open an FD.");
  task_add_field(t, "customer_id", "NVC10007", &err);
  task_add_field(t, "date_of_birth", "1990-02-03", &err);
  task_add_field(t, "amount", "25000", &err);
  if (confirms) task_add_confirm(t, "the charge", -1, NULL, &err);
  t->style = style;
}

static void test_simulator(void) {
  Task t;
  sim_task(&t, TASK_STYLE_ENGLISH, 1);
  UserSim sim;
  UserSimReply r;
  const char *opening = NULL;
  user_sim_open(&sim, &t, 1, &opening);
  CHECK(strstr(opening, t.reason) != NULL, "opening states the reason: %s", opening);
  // Not asked: no value leaks.
  user_sim_reply(&sim, "Welcome to Navadhan Bank.", 0, NULL, &r);
  CHECK(r.revealed_field == -1 && !strstr(r.text, "NVC10007") && !strstr(r.text, "1990") && !strstr(r.text, "25000"),
        "unasked reply leaked a value: %s", r.text);
  CHECK(r.end == TASK_END_NONE, "no end without goal");
  // Asked for two fields at once: one per reply, earliest first.
  user_sim_reply(&sim, "Could you share your amount and customer id?", 0, NULL, &r);
  CHECK(r.revealed_field == 0 && strstr(r.text, "NVC10007") && !strstr(r.text, "25000"), "first field only: %s", r.text);
  user_sim_reply(&sim, "Could you share your amount and customer id?", 0, NULL, &r);
  CHECK(r.revealed_field == 2 && strstr(r.text, "25000"), "then the next asked one: %s", r.text);
  // Synonym and repeat.
  user_sim_reply(&sim, "What is your DOB?", 0, NULL, &r);
  CHECK(r.revealed_field == 1 && strstr(r.text, "1990-02-03"), "dob synonym: %s", r.text);
  user_sim_reply(&sim, "Sorry, your customer number again?", 0, NULL, &r);
  CHECK(r.revealed_field == 0, "repeat a revealed field");
  // Something it does not hold: never invented.
  user_sim_reply(&sim, "Could you give me your PAN?", 0, NULL, &r);
  CHECK(r.revealed_field == -1 && strstr(r.text, "don't have"), "unknown field: %s", r.text);
  // A keyword without a request is not a request.
  user_sim_reply(&sim, "The amount is noted.", 0, NULL, &r);
  CHECK(r.revealed_field == -1, "statement is not a request");
  // Confirmation allowed.
  user_sim_reply(&sim, "There is a charge. Do you confirm?", 0, NULL, &r);
  CHECK(r.confirmed == 1 && !r.declined, "confirms: %s", r.text);
  // Goal met -> STOP; hand-off -> TRANSFER.
  user_sim_reply(&sim, "All done, your FD is booked.", 1, NULL, &r);
  CHECK(r.end == TASK_END_STOP, "goal ends with stop");
  user_sim_reply(&sim, "Let me transfer you to a human agent.", 0, NULL, &r);
  CHECK(r.end == TASK_END_TRANSFER, "hand-off ends with transfer");
  task_free(&t);

  // No confirms allowed: declines. A confirm that needs a quoted value.
  sim_task(&t, TASK_STYLE_HINGLISH, 0);
  user_sim_open(&sim, &t, 2, &opening);
  CHECK(strstr(opening, "ji") != NULL, "hinglish opening: %s", opening);
  user_sim_reply(&sim, "Shall I proceed with the Rs 200 charge?", 0, NULL, &r);
  CHECK(r.declined == 1 && r.confirmed == 0, "declines when the task allows nothing");
  task_free(&t);
  sim_task(&t, TASK_STYLE_FRAGMENTARY, 0);
  FimiError err = {0};
  task_add_confirm(&t, "the penalty", -1, NULL, &err);
  const char *values[] = {"236"};
  user_sim_open(&sim, &t, 3, &opening);
  user_sim_reply(&sim, "There is a penalty. Do you confirm?", 0, values, &r);
  CHECK(r.declined == 1, "a confirmation without the quoted value is declined");
  user_sim_reply(&sim, "The penalty is Rs 236. Do you confirm?", 0, values, &r);
  CHECK(r.confirmed == 1, "quoting the value confirms");
  // Deterministic: the same seed gives the same words.
  UserSim a, b;
  const char *oa, *ob;
  user_sim_open(&a, &t, 9, &oa);
  user_sim_open(&b, &t, 9, &ob);
  CHECK(strcmp(oa, ob) == 0, "same seed, same opening");
  task_free(&t);
}

// ---- scripted runs -----------------------------------------------------------

typedef struct Script {
  int order[TASK_MAX_ITEMS];  // gold steps in the order the agent runs them
  int n;
  int bump_step;       // add 1000 to this step's principal_amount (-1: none)
  int skip_value;      // leave this required value out of the summary (-1: none)
  int skip_confirm;    // never ask for consent
  int recite_first;    // say the required values before any call (from memory), not after
} Script;

static void script_default(const Task *t, Script *s) {
  memset(s, 0, sizeof *s);
  s->n = t->num_gold;
  for (int i = 0; i < t->num_gold; i++) s->order[i] = i;
  s->bump_step = s->skip_value = -1;
}

static int step(EnvEpisode *ep, const char *text, EnvObservation *obs) {
  FimiError err = {0};
  int rc = env_step(ep, text, strlen(text), obs, &err);
  CHECK(rc == 0, "env_step: %s", err.message);
  return rc;
}

static int play_script(EnvWorld *world, const Task *t, const Script *s, RewardBreakdown *r) {
  FimiError err = {0};
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (env_open(world, t, 5, &ep, &first, &err) != 0) {
    CHECK(0, "open: %s", err.message);
    return -1;
  }
  EnvObservation obs = {0};
  char buf[4096];
  for (int i = 0; i < t->num_fields && !obs.done; i++) {
    snprintf(buf, sizeof buf, "Could you please share your %s?", t->fields[i].name);
    step(ep, buf, &obs);
  }
  if (s->recite_first) {
    int len = snprintf(buf, sizeof buf, "From memory:");
    for (int i = 0; i < t->num_communicate; i++)
      len += snprintf(buf + len, sizeof buf - (size_t)len, " %s;", env_episode_value(ep, i));
    if (!obs.done) step(ep, buf, &obs);
  }
  for (int k = 0; k < s->n && !obs.done; k++) {
    const TaskAction *g = &t->gold[s->order[k]];
    if (g->confirm && !s->skip_confirm) {
      snprintf(buf, sizeof buf, "%s: %s. Do you confirm?", t->confirms[0].name, env_episode_confirm_value(ep, 0));
      step(ep, buf, &obs);
    }
    cJSON *args = cJSON_Duplicate(g->arguments, 1);
    if (s->order[k] == s->bump_step) {
      cJSON *amount = cJSON_GetObjectItemCaseSensitive(args, "principal_amount");
      cJSON_SetNumberValue(amount, amount->valuedouble + 1000);
    }
    char *call = toolcall_render_call(g->name, args, &err);
    cJSON_Delete(args);
    step(ep, call, &obs);
    free(call);
  }
  int len = snprintf(buf, sizeof buf, "Summary:");
  for (int i = 0; i < t->num_communicate; i++)
    if (i != s->skip_value && !s->recite_first) len += snprintf(buf + len, sizeof buf - (size_t)len, " %s;", env_episode_value(ep, i));
  for (int i = 0; i < t->num_assertions; i++)
    if (t->assertions[i].rule == TASK_RULE_MENTIONS_ANY)
      len += snprintf(buf + len, sizeof buf - (size_t)len, " %s.", t->assertions[i].args[0]);
  while (!obs.done) step(ep, buf, &obs);
  int rc = env_score(ep, r, &err);
  CHECK(rc == 0, "score: %s", err.message);
  int by_digest = -1;
  CHECK(env_episode_db_equal(ep, 0, &by_digest, &err) == 0 && by_digest == (r->db == 1.0),
        "db fast path (%g) disagrees with the digest (%d)", r->db, by_digest);
  env_close(ep);
  return rc;
}

static int make_task(const TaskGenContext *ctx, const char *family, uint64_t seed, Task *t) {
  FimiError err = {0};
  const TaskFamily *f = task_family_find(family);
  CHECK(f != NULL, "family %s", family);
  if (!f || task_generate(ctx, f, seed, t, &err) != 0) {
    CHECK(0, "generate %s: %s", family, err.message);
    return -1;
  }
  return 0;
}

// The first task of the family from `seed` on that comes by call (verify
// first; app = 0) or from the logged-in app (app = 1): tests script the
// verification or its absence.
static int make_channel_task(const TaskGenContext *ctx, const char *family, uint64_t seed, int app, Task *t) {
  for (uint64_t s = seed; s < seed + 64; s++) {
    if (make_task(ctx, family, s, t) != 0) return -1;
    if ((t->authenticated != NULL) == app) return 0;
    task_free(t);
  }
  CHECK(0, "%s: no %s-channel task in 64 seeds from %llu", family, app ? "app" : "call", (unsigned long long)seed);
  return -1;
}

static void test_perturbations(const TaskGenContext *ctx, EnvWorld *world) {
  Task t;
  Script s;
  RewardBreakdown r;
  // Eight gold steps; swap two adjacent reads (rates and maturity calc: 4, 5).
  if (make_channel_task(ctx, "fd_planner", 3, 0, &t) != 0) return;
  CHECK(t.num_gold == 8, "fd_planner has %d steps", t.num_gold);
  t.checks = TASK_CHECK_ALL;  // the family declares seq+db; all four test the weights
  script_default(&t, &s);
  s.order[4] = 5;
  s.order[5] = 4;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.seq_frac, 7.0 / 8.0, 1e-12, "swap: seq_frac");
  CHECK_CLOSE(r.seq, 1.0, 1e-12, "swap: set-based seq");
  CHECK_CLOSE(r.seq_strict, 0.0, 1e-12, "swap: strict seq");
  CHECK_CLOSE(r.db, 1.0, 1e-12, "swap: db");
  CHECK_CLOSE(r.total, 1.0, 1e-12, "swap: total");
  CHECK_CLOSE(r.strict_total, 0.60, 1e-12, "swap: strict total = (0.25 + 0.15 + 0.20) / 1");
  CHECK(r.end == TASK_END_STOP, "swap: still stops");
  // The same with only seq + db declared: normalized by 0.65.
  t.checks = TASK_CHECK_SEQ | TASK_CHECK_DB;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.total, 1.0, 1e-12, "seq+db swap: total");
  CHECK_CLOSE(r.strict_total, 0.25 / 0.65, 1e-12, "seq+db swap: strict total = 0.25 / 0.65");
  t.checks = TASK_CHECK_ALL;
  task_free(&t);

  // Wrong amount in the write (fd_paper: 5 steps, create_fd is step 3).
  if (make_task(ctx, "fd_paper", 4, &t) != 0) return;
  t.checks = TASK_CHECK_ALL;
  script_default(&t, &s);
  s.bump_step = 3;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.db, 0.0, 1e-12, "wrong amount: db");
  CHECK_CLOSE(r.seq, 4.0 / 5.0, 1e-12, "wrong amount: seq (create_fd unmatched)");
  CHECK_CLOSE(r.seq_frac, 4.0 / 5.0, 1e-12, "wrong amount: seq_frac");
  CHECK_CLOSE(r.judge, 0.0, 1e-12, "wrong amount: judge zeroed by the failed db check");
  CHECK(r.db_failed_judge_zeroed == 1 && r.assertions_met == 2, "judge rules were met but zeroed");
  // Of the gold values only the FD id (the same next id) is in the agent's
  // results: its FD's maturity amount and the balance after it differ.
  CHECK(r.values_said == 1 && r.num_values == 3, "wrong amount: %d of %d values", r.values_said, r.num_values);
  CHECK_CLOSE(r.total, 0.40 * 0.8 + 0.15 / 3.0, 1e-12, "wrong amount: total = 0.37");
  CHECK_CLOSE(r.strict_total, 0.05, 1e-12, "wrong amount: strict total");
  CHECK(r.end == TASK_END_BUDGET, "wrong amount: the customer never sees the goal met");
  t.checks = TASK_CHECK_SEQ | TASK_CHECK_DB;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.total, 0.40 * 0.8 / 0.65, 1e-12, "seq+db wrong amount: 0.32 / 0.65");
  t.checks = TASK_CHECK_ALL;

  // A required value not said: comm 2/3.
  script_default(&t, &s);
  s.skip_value = 1;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.comm, 2.0 / 3.0, 1e-12, "missing value: comm");
  CHECK(r.values_said == 2 && r.num_values == 3, "counts");
  CHECK_CLOSE(r.total, 0.40 + 0.25 + 0.15 * 2.0 / 3.0 + 0.20, 1e-12, "missing value: total = 0.95");
  CHECK(r.end == TASK_END_BUDGET, "missing value: no STOP");

  // The values recited before the calls that return them (from memory, as a
  // policy that learned the rate card would): comm 0, though every value was
  // said and every call made; said after the calls (below): comm 1.
  script_default(&t, &s);
  s.recite_first = 1;
  play_script(world, &t, &s, &r);
  CHECK(r.values_said == 0 && r.comm == 0.0, "recited from memory: %d of %d values, comm %g", r.values_said,
        r.num_values, r.comm);
  CHECK_CLOSE(r.seq, 1.0, 1e-12, "recited from memory: every call still made");
  CHECK(r.end == TASK_END_BUDGET, "recited from memory: the customer never sees the goal met");

  // Unperturbed script: everything 1 and the customer stops.
  script_default(&t, &s);
  play_script(world, &t, &s, &r);
  CHECK(r.total == 1.0 && r.strict_total == 1.0 && r.end == TASK_END_STOP, "plain script: %g %g %s", r.total,
        r.strict_total, task_end_name(r.end));
  task_free(&t);

  // A charged write without consent fails as a tool error (conversation mode).
  if (make_task(ctx, "fd_premature_close", 2, &t) != 0) return;
  script_default(&t, &s);
  s.skip_confirm = 1;
  play_script(world, &t, &s, &r);
  CHECK_CLOSE(r.db, 0.0, 1e-12, "no consent: the closure did not happen");
  CHECK(r.matched == t.num_gold - 1, "no consent: close unmatched (%d of %d)", r.matched, t.num_gold);
  task_free(&t);
}

static void test_budget_and_errors(const TaskGenContext *ctx, EnvWorld *world) {
  Task t;
  if (make_channel_task(ctx, "balance_enquiry", 1, 0, &t) != 0) return;
  t.max_turns = 4;
  FimiError err = {0};
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  CHECK(env_open(world, &t, 1, &ep, &first, &err) == 0, "open: %s", err.message);
  if (!ep) return;
  EnvObservation obs;
  const char *two = "<tool_call>{\"name\":\"list_accounts\",\"arguments\":{}}</tool_call>"
                    "<tool_call>{\"name\":\"list_accounts\",\"arguments\":{}}</tool_call>";
  step(ep, two, &obs);
  CHECK(obs.kind == ENV_OBS_TOOL && strstr(obs.text, "multiple_calls") && !obs.done, "two calls: %s", obs.text);
  step(ep, "<tool_call>{\"name\":\"list_accounts\",\"arguments\":{}}</tool_call>", &obs);
  CHECK(obs.kind == ENV_OBS_TOOL && strstr(obs.text, "\"error\""), "unauthenticated read is a tool error: %s",
        obs.text);
  const char bytes[] = {'h', 'i', 0, (char)0xff, 'x'};
  CHECK(env_step(ep, bytes, sizeof bytes, &obs, &err) == 0 && obs.kind == ENV_OBS_TOOL, "NUL bytes: tool error");
  step(ep, "Hello, how may I help?", &obs);
  CHECK(obs.done && obs.end == TASK_END_BUDGET && env_episode_turns_used(ep) == 4, "budget of 4 turns: %s",
        task_end_name(obs.end));
  CHECK(env_step(ep, "more", 4, &obs, &err) != 0 && strstr(err.message, "ended"), "step after done fails");
  RewardBreakdown r;
  // A read-only task declares seq+db: nothing called, nothing changed, so
  // only the db check's share is earned (the paper's formula).
  CHECK(env_score(ep, &r, &err) == 0 && r.seq == 0.0 && r.db == 1.0 && r.turns == 4, "budget run: seq %g db %g",
        r.seq, r.db);
  CHECK_CLOSE(r.total, 0.25 / 0.65, 1e-12, "budget run: the db check's share only");
  CHECK(env_episode_num_turns(ep) == 9, "transcript: opening + 4 agent turns + 4 replies (%d)",
        env_episode_num_turns(ep));
  env_close(ep);
  task_free(&t);
}

// env_state_digest agrees with bank_episode_digest on equality: fresh and
// pooled copies of an image, the same writes, different writes.
static void test_digest(EnvWorld *world) {
  FimiError err = {0};
  const BankImage *image = NULL;
  BankPool *pool = NULL;
  BankEpisode *a = NULL, *b = NULL, *fresh = NULL;
  CHECK(env_world_image(world, 1, &image, &pool, &err) == 0 && bank_pool_acquire(pool, &a, &err) == 0 &&
            bank_pool_acquire(pool, &b, &err) == 0 && bank_episode_open(image, NULL, &fresh, &err) == 0,
        "copies: %s", err.message);
  if (!a || !b || !fresh) return;
  uint64_t da, db, df, ba, bb;
  env_state_digest(a, &da, &err), env_state_digest(b, &db, &err), env_state_digest(fresh, &df, &err);
  CHECK(da == db && da == df, "pristine copies digest equal");
  char id[BANK_ID_MAX], dob[11], mobile[16];
  CHECK(bank_episode_customer_credentials(a, 3, id, dob, mobile, &err) == 0, "credentials");
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE accounts SET balance_paise = balance_paise + 1 WHERE customer_id = '%s'", id);
  CHECK(bank_episode_exec(a, sql, &err) == 0, "write a: %s", err.message);
  env_state_digest(a, &da, &err), env_state_digest(b, &db, &err);
  bank_episode_digest(a, &ba, &err), bank_episode_digest(b, &bb, &err);
  CHECK(da != db && ba != bb, "one paisa apart: both digests differ");
  CHECK(bank_episode_exec(b, sql, &err) == 0, "write b");
  env_state_digest(a, &da, &err), env_state_digest(b, &db, &err);
  bank_episode_digest(a, &ba, &err), bank_episode_digest(b, &bb, &err);
  CHECK(da == db && ba == bb, "same writes: both digests equal");
  // Swapping a value between two rows keeps every column multiset but not the state.
  CHECK(bank_episode_exec(b, "UPDATE cards SET status = CASE status WHEN 'active' THEN 'blocked' ELSE 'active' END"
                             " WHERE card_id IN (SELECT card_id FROM cards WHERE status IN ('active', 'blocked')"
                             " ORDER BY card_id LIMIT 2)", &err) == 0, "swap: %s", err.message);
  env_state_digest(b, &db, &err);
  CHECK(da != db, "changed card statuses change the digest");
  // The same service request in other words is the same state; another
  // category is not (free-text columns are left out of the db check).
  snprintf(sql, sizeof sql, "INSERT INTO service_requests VALUES ('SRX1', '%s', 'cheque_book', NULL, '%%s',"
                            " '2026-01-15', 'open', NULL)", id);
  char insert[512];
  BankEpisode *c = NULL, *d = NULL;
  CHECK(bank_pool_acquire(pool, &c, &err) == 0 && bank_pool_acquire(pool, &d, &err) == 0, "copies c, d");
  if (c && d) {
    uint64_t dc, dd;
    snprintf(insert, sizeof insert, sql, "Please send a new cheque book");
    CHECK(bank_episode_exec(c, insert, &err) == 0, "insert c: %s", err.message);
    snprintf(insert, sizeof insert, sql, "need cheque book pls, 25 leaves");
    CHECK(bank_episode_exec(d, insert, &err) == 0, "insert d: %s", err.message);
    env_state_digest(c, &dc, &err), env_state_digest(d, &dd, &err);
    CHECK(dc == dd, "a request's wording does not change the digest");
    CHECK(bank_episode_exec(d, "UPDATE service_requests SET category = 'other' WHERE request_id = 'SRX1'", &err) == 0,
          "update d: %s", err.message);
    env_state_digest(d, &dd, &err);
    CHECK(dc != dd, "a request's category changes the digest");
  }
  if (c) bank_pool_release(c);
  if (d) bank_pool_release(d);
  bank_pool_release(a);
  bank_pool_release(b);
  bank_episode_close(fresh);
}

// The change-log digest (pooled copies) equals the full one after a write
// to any table, and a write to any table changes it: for every table of the
// bank, one column of its first row is changed by raw SQL on the
// connection (as no tool does), then the check compares. A fixture DELETE
// (which SQLite may run without the update hook) falls back to the full digest.
static void test_change_digest(EnvWorld *world) {
  FimiError err = {0};
  const BankImage *image = NULL;
  BankPool *pool = NULL;
  BankEpisode *probe = NULL;
  CHECK(env_world_image(world, 1, &image, &pool, &err) == 0 && bank_pool_acquire(pool, &probe, &err) == 0,
        "copies: %s", err.message);
  if (!probe) return;
  uint64_t pristine = 0, full = 0, logged = 0;
  CHECK(env_state_digest_full(probe, &pristine, &err) == 0, "pristine digest: %s", err.message);
  sqlite3_stmt *tables = NULL;
  sqlite3_prepare_v2(probe->db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                                " ORDER BY name", -1, &tables, NULL);
  char names[64][64];
  int n = 0;
  while (n < 64 && sqlite3_step(tables) == SQLITE_ROW) snprintf(names[n++], 64, "%s", sqlite3_column_text(tables, 0));
  sqlite3_finalize(tables);
  bank_pool_release(probe);
  CHECK(n >= 10, "the bank has its tables (%d)", n);
  int caught = 0, tried = 0;
  for (int i = 0; i < n; i++) {
    BankEpisode *ep = NULL;
    if (bank_pool_acquire(pool, &ep, &err) != 0) break;
    char sql[1024];
    int written = 0;
    for (int col = 0; col < 12 && !written; col++) {
      snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%.63s') WHERE cid = %d", names[i], col);
      sqlite3_stmt *c = NULL;
      char column[64] = "";
      if (sqlite3_prepare_v2(ep->db, sql, -1, &c, NULL) == SQLITE_OK && sqlite3_step(c) == SQLITE_ROW)
        snprintf(column, sizeof column, "%s", sqlite3_column_text(c, 0));
      sqlite3_finalize(c);
      if (!column[0]) break;
      snprintf(sql, sizeof sql, "UPDATE \"%.63s\" SET \"%s\" = CASE WHEN typeof(\"%s\") = 'integer' THEN \"%s\" + 1"
               " ELSE \"%s\" || 'z' END WHERE rowid = (SELECT min(rowid) FROM \"%.63s\")",
               names[i], column, column, column, column, names[i]);
      written = sqlite3_exec(ep->db, sql, NULL, NULL, NULL) == SQLITE_OK && sqlite3_changes(ep->db) == 1;
    }
    if (written) {
      CHECK(env_state_digest(ep, &logged, &err) == 0 && env_state_digest_full(ep, &full, &err) == 0, "digests: %s",
            err.message);
      CHECK(logged == full, "%s: the change-log digest equals the full one", names[i]);
      CHECK(logged != pristine, "%s: a write changes the digest", names[i]);
      caught += logged != pristine;
      tried++;
    }
    bank_pool_release(ep);
  }
  // Tables empty in the image (disputes, claims, ...) have no row to change.
  CHECK(caught == tried && tried >= n - 4, "writes caught in %d of %d tables (%d written)", caught, n, tried);
  BankEpisode *ep = NULL;
  if (bank_pool_acquire(pool, &ep, &err) == 0) {
    CHECK(bank_episode_exec(ep, "DELETE FROM beneficiaries", &err) == 0, "delete: %s", err.message);
    CHECK(ep->changes_untracked, "a fixture DELETE marks the log untracked");
    CHECK(env_state_digest(ep, &logged, &err) == 0 && env_state_digest_full(ep, &full, &err) == 0 && logged == full &&
              logged != pristine,
          "a DELETE is caught");
    bank_pool_release(ep);
  }
  // After release the copy is the image again, and so is its digest.
  if (bank_pool_acquire(pool, &ep, &err) == 0) {
    CHECK(env_state_digest(ep, &logged, &err) == 0 && logged == pristine && ep->num_changes == 0,
          "a released copy's log is empty");
    bank_pool_release(ep);
  }
}

// Arbitrary turns (random bytes, broken and real tool calls, huge text)
// never fail env_step, and the episode still scores.
static void test_garbage_turns(const TaskGenContext *ctx, EnvWorld *world) {
  Task t;
  if (make_task(ctx, "fd_paper", 11, &t) != 0) return;
  t.max_turns = 400;
  FimiError err = {0};
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  CHECK(env_open(world, &t, 3, &ep, &first, &err) == 0, "open: %s", err.message);
  if (!ep) return;
  Rng rng;
  rng_seed(&rng, 42);
  const char *pieces[] = {"<tool_call>", "</tool_call>", "{\"name\":\"create_fd\",\"arguments\":{", "\"principal_amount\":",
                          "-1e308", "99999999999999999999", "\"source_account\":\"SB0\"", "}}", "Do you confirm?",
                          "customer id?", "\xff\xfe", "transfer_funds", ",", "\"", "\\u0000", "[[[[", "null"};
  char *big = malloc(300000);
  int steps = 0;
  EnvObservation obs = {0};
  while (!obs.done && steps < 399) {
    size_t len = 0;
    if (steps % 50 == 49) {  // longer than the parser's limit
      memset(big, 'a', 299999);
      len = 299999;
    } else {
      int n = (int)(rng_next_u64(&rng) % 12);
      for (int k = 0; k < n; k++) {
        const char *p = pieces[rng_next_u64(&rng) % (sizeof pieces / sizeof pieces[0])];
        size_t m = strlen(p);
        memcpy(big + len, p, m);
        len += m;
      }
      if (rng_next_u64(&rng) % 3 == 0)
        for (int k = 0; k < 8; k++) big[len++] = (char)(rng_next_u64(&rng) & 0xff);
    }
    if (env_step(ep, big, len, &obs, &err) != 0) {
      CHECK(0, "garbage step %d failed: %s", steps, err.message);
      break;
    }
    CHECK(obs.text != NULL, "an observation every step");
    steps++;
  }
  RewardBreakdown r;
  int fast = -1, slow = -2;
  CHECK(env_score(ep, &r, &err) == 0 && r.total >= 0 && r.total <= 1, "garbage scores in [0,1]: %s", err.message);
  CHECK(env_episode_db_equal(ep, 1, &fast, &err) == 0 && env_episode_db_equal(ep, 0, &slow, &err) == 0 && fast == slow,
        "db paths agree after garbage");
  CHECK(bank_episode_check_integrity(env_episode_bank(ep), &err) == 0, "integrity: %s", err.message);
  free(big);
  env_close(ep);
  task_free(&t);
}

static void test_reward_matching(void) {
  Task t;
  FimiError err = {0};
  task_init(&t);
  task_add_gold(&t, "create_fd", "{\"principal_amount\":5000,\"tenure_months\":12,\"source_account\":\"SB1\"}",
                "principal_amount,source_account", 0, &err);
  CHECK(reward_call_matches(&t.gold[0], "create_fd", "{\"principal_amount\":5000.0,\"source_account\":\"SB1\"}"),
        "numbers compare as numbers");
  CHECK(reward_call_matches(&t.gold[0], "create_fd", "{\"principal_amount\":\"5000\",\"source_account\":\"SB1\",\"tenure_months\":24}"),
        "irrelevant arguments are ignored; a numeric string is a number");
  CHECK(!reward_call_matches(&t.gold[0], "create_fd", "{\"principal_amount\":5001,\"source_account\":\"SB1\"}"),
        "different amount");
  CHECK(!reward_call_matches(&t.gold[0], "create_fd", "{\"principal_amount\":5000,\"source_account\":\"sb1\"}"),
        "strings are exact");
  CHECK(!reward_call_matches(&t.gold[0], "create_rd", "{\"principal_amount\":5000,\"source_account\":\"SB1\"}"),
        "different name");
  CHECK(!reward_call_matches(&t.gold[0], "create_fd", "not json"), "unparsable arguments");
  task_free(&t);
}

// ---- oracle and baselines over every family -----------------------------------

// Plays an agent by hand and checks the db fast path against the digest.
static void check_db_paths(EnvWorld *world, const Task *t, EnvAgentKind kind, uint64_t seed) {
  FimiError err = {0};
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (agent_create(kind, seed, &agent, &err) != 0 || env_open(world, t, seed, &ep, &first, &err) != 0) {
    CHECK(0, "setup: %s", err.message);
    agent_free(agent);
    return;
  }
  EnvObservation obs = {0};
  while (!obs.done) {
    char *turn = NULL;
    if (agent_next(agent, ep, &turn, &err) != 0 || env_step(ep, turn, strlen(turn), &obs, &err) != 0) {
      CHECK(0, "play: %s", err.message);
      free(turn);
      break;
    }
    free(turn);
  }
  int fast = -1, slow = -2;
  CHECK(env_episode_db_equal(ep, 1, &fast, &err) == 0 && env_episode_db_equal(ep, 0, &slow, &err) == 0 && fast == slow,
        "%s on %s: db fast path %d, digest %d", agent_kind_name(kind), t->id, fast, slow);
  env_close(ep);
  agent_free(agent);
}

static void test_agents(const TaskGenContext *ctx, EnvWorld *world) {
  int families = task_family_count();
  int per_family = (2000 + families - 1) / families;
  int episodes = 0, perfect = 0;
  double sums[AGENT_COUNT] = {0};
  int counts[AGENT_COUNT] = {0};
  int slice_perfect[TASK_SLICE_COUNT] = {0}, slice_episodes[TASK_SLICE_COUNT] = {0};
  clock_t start = clock();
  for (int f = 0; f < families; f++) {
    const TaskFamily *fam = task_family_at(f);
    int family_perfect = 0;
    for (int i = 0; i < per_family; i++) {
      FimiError err = {0};
      Task t;
      if (task_generate(ctx, fam, 1000 + (uint64_t)i, &t, &err) != 0) {
        CHECK(0, "generate %s: %s", fam->name, err.message);
        break;
      }
      RewardBreakdown r;
      int rc = agent_run_episode(world, &t, (uint64_t)i, AGENT_ORACLE, &r, &err);
      episodes++;
      int ok = rc == 0 && r.total == 1.0 && r.strict_total == 1.0 && r.end == t.expected_end;
      perfect += ok;
      family_perfect += ok;
      slice_perfect[fam->slice] += ok;
      slice_episodes[fam->slice]++;
      if (!ok)
        CHECK(0, "oracle on %s: rc %d total %g strict %g end %s (%s)", t.id, rc, r.total, r.strict_total,
              task_end_name(r.end), err.message);
      // Baselines on every fourth task keep the test fast.
      for (int k = AGENT_DO_NOTHING; k < AGENT_COUNT && i % 4 == 0; k++) {
        if (agent_run_episode(world, &t, (uint64_t)i, (EnvAgentKind)k, &r, &err) != 0) {
          CHECK(0, "%s on %s: %s", agent_kind_name((EnvAgentKind)k), t.id, err.message);
          continue;
        }
        sums[k] += r.total;
        counts[k]++;
        if (i % 16 == 0) check_db_paths(world, &t, (EnvAgentKind)k, (uint64_t)i);
      }
      if (i % 16 == 0) check_db_paths(world, &t, AGENT_ORACLE, (uint64_t)i);
      task_free(&t);
    }
    // Every family, shallow or deep, is solved on every seed it was given.
    CHECK(family_perfect == per_family, "%s: oracle 1.0 on %d of %d tasks", fam->name, family_perfect, per_family);
  }
  for (int s = 0; s < TASK_SLICE_COUNT; s++)
    printf("oracle, %s slice: %d/%d episodes at 1.0/1.0\n", s == TASK_SLICE_SHALLOW ? "shallow" : "deep",
           slice_perfect[s], slice_episodes[s]);
  CHECK(slice_episodes[TASK_SLICE_SHALLOW] > 0 && slice_episodes[TASK_SLICE_DEEP] > 0, "both slices played");
  double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
  printf("oracle: %d/%d episodes at 1.0/1.0 over %d families (%.1f s with baselines)\n", perfect, episodes, families,
         seconds);
  CHECK(episodes >= 2000, "only %d oracle episodes", episodes);
  for (int k = AGENT_DO_NOTHING; k < AGENT_COUNT; k++) {
    double mean = counts[k] ? sums[k] / counts[k] : 1.0;
    printf("%s: mean reward %.4f over %d tasks\n", agent_kind_name((EnvAgentKind)k), mean, counts[k]);
    // Most tasks declare seq+db (docs/tasks.md), so an agent that changes
    // nothing earns the db share, 0.25 / 0.65 = 0.385, on every read-only
    // task and refusal; both baselines stay well below that floor's mix.
    CHECK(counts[k] > 0 && mean < (k == AGENT_DO_NOTHING ? 0.25 : 0.45), "%s mean %.4f is not low",
          agent_kind_name((EnvAgentKind)k), mean);
  }
}

// ---- Gemma 4's native call syntax ----------------------------------------------

// Plays the oracle on t in one episode of `syntax`; *total gets the reward.
// With `feed` (another episode, same task and seed) each oracle turn is also
// stepped into feed, unchanged: a turn written for one syntax read in the other.
static int play_oracle(EnvWorld *world, const Task *t, ToolCallSyntax syntax, EnvEpisode **feed, double *total) {
  FimiError err = {0};
  EnvAgent *agent = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  int rc = agent_create(AGENT_ORACLE, 5, &agent, &err) || env_open(world, t, 5, &ep, &first, &err) ||
           env_set_tool_syntax(ep, syntax, &err);
  EnvObservation obs = {0}, fed = {0};
  while (rc == 0 && !obs.done) {
    char *turn = NULL;
    rc = agent_next(agent, ep, &turn, &err) || env_step(ep, turn, strlen(turn), &obs, &err);
    if (rc == 0 && feed && *feed && !fed.done) rc = env_step(*feed, turn, strlen(turn), &fed, &err);
    free(turn);
  }
  RewardBreakdown r;
  if (rc == 0) rc = env_score(ep, &r, &err);
  *total = rc == 0 ? r.total : -1;
  CHECK(rc == 0, "oracle (%s) on %s: %s", toolcall_syntax_name(syntax), t->id, err.message);
  env_close(ep);
  agent_free(agent);
  return rc;
}

// Every family's first task: the oracle scores the same (1.0) writing Gemma
// 4's native calls in a Gemma 4 episode as JSON calls in a JSON one; the
// JSON turns read by a Gemma 4 episode are messages, not calls, so tasks that
// need a tool fall short; a malformed native call is a tool error there; the
// syntax cannot change after the first step.
static void test_gemma4_syntax(const TaskGenContext *ctx, EnvWorld *world) {
  int families = task_family_count(), same = 0, crossed_short = 0, with_tools = 0;
  for (int f = 0; f < families; f++) {
    FimiError err = {0};
    Task t;
    if (task_generate(ctx, task_family_at(f), 1000, &t, &err) != 0) {
      CHECK(0, "generate: %s", err.message);
      continue;
    }
    double json = -1, native = -1, crossed = -1;
    EnvEpisode *g4 = NULL;
    const char *first = NULL;
    int opened = env_open(world, &t, 5, &g4, &first, &err) == 0 &&
                 env_set_tool_syntax(g4, TOOLCALL_SYNTAX_GEMMA4, &err) == 0;
    CHECK(opened, "open: %s", err.message);
    if (play_oracle(world, &t, TOOLCALL_SYNTAX_JSON, opened ? &g4 : NULL, &json) == 0 &&
        play_oracle(world, &t, TOOLCALL_SYNTAX_GEMMA4, NULL, &native) == 0) {
      same += json == 1.0 && native == json;
      CHECK(json == 1.0 && native == json, "%s: oracle %g (JSON) vs %g (Gemma 4)", t.id, json, native);
    }
    RewardBreakdown r;
    if (opened && env_score(g4, &r, &err) == 0) crossed = r.total;
    if (t.num_gold > 0) {
      with_tools++;
      crossed_short += crossed < 1.0;
    }
    env_close(g4);
    task_free(&t);
  }
  printf("Gemma 4 syntax: oracle equal to JSON at 1.0 on %d/%d families; JSON turns read as Gemma 4 fall short on "
         "%d/%d families with tool calls\n",
         same, families, crossed_short, with_tools);
  CHECK(with_tools > 0 && crossed_short == with_tools, "a JSON call was executed by a Gemma 4 episode");

  Task t;
  if (make_task(ctx, "fd_paper", 11, &t) != 0) return;
  FimiError err = {0};
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  EnvObservation obs = {0};
  const char *bad = "<|tool_call>call:get_balance{account:<|\"|>x}<tool_call|>";
  CHECK(env_open(world, &t, 3, &ep, &first, &err) == 0 && env_set_tool_syntax(ep, TOOLCALL_SYNTAX_GEMMA4, &err) == 0 &&
            env_step(ep, bad, strlen(bad), &obs, &err) == 0,
        "malformed native call: %s", err.message);
  CHECK(obs.kind == ENV_OBS_TOOL && obs.text && strstr(obs.text, "invalid_syntax") &&
            toolcall_result_is_error(TOOLCALL_SYNTAX_GEMMA4, obs.text),
        "malformed native call: a tool error, got %s", obs.text ? obs.text : "(none)");
  CHECK(env_set_tool_syntax(ep, TOOLCALL_SYNTAX_JSON, &err) != 0, "the syntax changed after a step");
  env_close(ep);
  task_free(&t);
}

// The world's gold-replay cache: episodes of one task share its replay; an
// open episode keeps its replay after other tasks took its slot (a later
// episode of the task then gets a new replay) and still scores the oracle's
// 1.0; a world without the cache's history gives the same values.
static void test_gold_cache(const TaskGenContext *ctx, EnvWorld *world) {
  FimiError err = {0};
  Task a, other;
  if (make_task(ctx, "fd_paper", 11, &a) != 0) return;
  EnvEpisode *ep1 = NULL, *ep2 = NULL;
  const char *first = NULL;
  CHECK(env_open(world, &a, 1, &ep1, &first, &err) == 0 && env_open(world, &a, 2, &ep2, &first, &err) == 0,
        "open twice: %s", err.message);
  if (!ep1 || !ep2) return;
  CHECK(env_episode_gold_results(ep1) == env_episode_gold_results(ep2), "one task's episodes share its replay");
  char value[256];
  snprintf(value, sizeof value, "%s", env_episode_value(ep1, 0));
  env_close(ep2);
  // Other tasks until one takes a's slot: a's next episode gets a new replay.
  // The others are one short task whose no-op fixture SQL differs each time
  // (a different replay key, cheaper than generating thousands of tasks).
  int others = 0, replaced = 0;
  if (make_task(ctx, "balance_enquiry", 2, &other) != 0 || task_add_fixture(&other, "SELECT 0", &err) != 0) return;
  for (int i = 0; i < 40000 && !replaced; i++) {
    char sql[48];
    snprintf(sql, sizeof sql, "SELECT %d", i + 1);
    free(other.fixture[other.num_fixture - 1]);
    if (!(other.fixture[other.num_fixture - 1] = strdup(sql))) break;
    EnvEpisode *ep = NULL;
    others += env_open(world, &other, 3, &ep, &first, &err) == 0;
    env_close(ep);
    if (i % 64 == 63 && env_open(world, &a, 5, &ep2, &first, &err) == 0) {
      replaced = env_episode_gold_results(ep2) != env_episode_gold_results(ep1);
      env_close(ep2);
    }
  }
  task_free(&other);
  CHECK(replaced, "no task took the slot of a's replay in %d tasks", others);
  CHECK(strcmp(env_episode_value(ep1, 0), value) == 0, "the open episode keeps its values");
  env_close(ep1);
  RewardBreakdown r;
  CHECK(agent_run_episode(world, &a, 4, AGENT_ORACLE, &r, &err) == 0 && r.total == 1.0, "oracle after eviction: %g",
        r.total);
  EnvWorld *fresh = NULL;
  CHECK(env_world_create(&fresh, &err) == 0 && env_open(fresh, &a, 1, &ep1, &first, &err) == 0, "fresh world: %s",
        err.message);
  if (ep1) CHECK(strcmp(env_episode_value(ep1, 0), value) == 0, "a fresh world resolves the same values");
  env_close(ep1);
  env_world_free(fresh);
  printf("gold-replay cache: a task's slot taken after %d other tasks\n", others);
  task_free(&a);
}

// The app channel: a task that starts logged in says so in the first
// message (ENV_APP_SESSION, the customer id), and needs no verification.
static void test_app_channel(const TaskGenContext *ctx, EnvWorld *world) {
  FimiError err = {0};
  Task t;
  if (make_channel_task(ctx, "rtgs_transfer", 1, 1, &t) != 0) return;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  char want[128];
  snprintf(want, sizeof want, "%s%s] ", ENV_APP_SESSION, t.authenticated);
  CHECK(env_open(world, &t, 1, &ep, &first, &err) == 0 && strncmp(first, want, strlen(want)) == 0 &&
            strcmp(env_episode_turn(ep, 0)->text, first) == 0,
        "first message: %s", first ? first : err.message);
  EnvObservation obs;
  step(ep, "<tool_call>{\"name\":\"list_beneficiaries\",\"arguments\":{}}</tool_call>", &obs);
  CHECK(obs.kind == ENV_OBS_TOOL && !strstr(obs.text, "\"error\""), "a read without verification: %s", obs.text);
  env_close(ep);
  task_free(&t);
}

int main(void) {
  FimiError err = {0};
  TaskGenContext ctx;
  EnvWorld *world = NULL;
  if (task_gen_context_init(&ctx, 1, &err) != 0 || env_world_create(&world, &err) != 0) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  test_simulator();
  test_reward_matching();
  test_digest(world);
  test_change_digest(world);
  test_budget_and_errors(&ctx, world);
  test_perturbations(&ctx, world);
  test_gold_cache(&ctx, world);
  test_app_channel(&ctx, world);
  test_garbage_turns(&ctx, world);
  test_gemma4_syntax(&ctx, world);
  test_agents(&ctx, world);
  env_world_free(world);
  task_gen_context_free(&ctx);
  TEST_MAIN_END();
}
