// env/tasks/cross_cutting.c: task families of the "cross-cutting" use case:
// cards (fraud block and dispute, temporary block, limits, international use),
// mandates, cheques (stop payment with its charge, positive pay, cheque book),
// and service requests (a complaint, an escalation to a human: TRANSFER
// ending).
// Also the oldest families of this use case, written with the task_gen_*
// helpers directly: investment_advice, recovery_complaint and
// lost_card_reissue.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/family_helpers.h"

static const char *const PERSONAS[] = {
    "traveller calling from an airport", "shop owner who pays suppliers by cheque",
    "anxious customer who just lost a wallet", "software developer who wants everything done online",
    "pensioner who prefers to talk to someone", "student whose parents pay the bills"};
#define NP ((int)(sizeof PERSONAS / sizeof PERSONAS[0]))

// An active card. Columns: customer, card id, type, last 4 digits.
#define SQL_ACTIVE_CARD \
  "SELECT customer_id, card_id, card_type, last4 FROM cards WHERE status = 'active' ORDER BY card_id"

// ---- card_fraud_dispute (seq, 5 steps): block for fraud, find the debit, dispute ----
static int gen_card_fraud_dispute(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_fraud_dispute", seed);
  char c[7][TASK_GEN_COL_MAX];
  // An active card and a debit on its account among the 10 newest entries
  // (the ones get_transactions lists by default).
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT k.customer_id, k.card_id, k.card_type, k.last4, x.account_id, x.txn_id, x.amount_paise"
                 " FROM cards k JOIN transactions x ON x.account_id = k.account_id WHERE k.status = 'active'"
                 " AND x.direction = 'debit' AND (SELECT count(*) FROM transactions y WHERE y.account_id ="
                 " x.account_id AND (y.txn_date > x.txn_date OR (y.txn_date = x.txn_date AND y.txn_id > x.txn_id)))"
                 " < 10 ORDER BY k.card_id, x.txn_id",
                 7, c, err));
  char amount[32];
  fam_rupees(atoll(c[6]), amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I just saw a debit of Rs %s I never made. I think my %s card ending %s was misused. Block it and "
                 "report the transaction.",
                 "Rs %s ka debit hua jo maine nahi kiya. Mera %s card %s misuse hua lagta hai. Block karo aur "
                 "complaint daalo.",
                 "fraud? rs %s debit not mine. %s card %s. block + dispute", amount, c[2], c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  int blk = fam_gold(t, err, "block_card", "card_id,reason", 0, "{\"card_id\":\"%s\",\"reason\":\"suspected_fraud\"}",
                    c[1]);
  FAM_TRY(blk);
  FAM_TRY(fam_gold(t, err, "get_transactions", "account_id", 0, "{\"account_id\":\"%s\",\"limit\":10}", c[4]));
  int s = fam_gold(t, err, "raise_dispute", "transaction_id,reason", 0,
                  "{\"transaction_id\":\"%s\",\"reason\":\"unauthorised\",\"description\":"
                  "\"Debit of Rs %s not made by the customer; card suspected misused\"}",
                  c[5], amount);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "card status", blk, "status", err));
  FAM_TRY(task_add_communicate(t, "dispute_id", s, "dispute_id", err));
  FAM_TRY(fam_assert(t, err, "The agent blocks the card before anything else can be misused.", TASK_RULE_CALLED_BEFORE,
                   "block_card", "raise_dispute", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the customer's liability.", TASK_RULE_MENTIONS_ANY, "liability", NULL));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- card_temp_block (happy, 3 steps): misplaced card, temporary block -------------
static int gen_card_temp_block(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_temp_block", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_ACTIVE_CARD, 4, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I can't find my %s card ending %s, it's probably at home. Block it for now, don't cancel it.",
                 "%s card %s mil nahi raha, shayad ghar pe hai. Abhi ke liye block kar do, cancel mat karna.",
                 "%s card %s misplaced. temp block only", c[2], c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  int s = fam_gold(t, err, "block_card", "card_id,reason", 0, "{\"card_id\":\"%s\",\"reason\":\"temporary\"}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "card status", s, "status", err));
  FAM_TRY(fam_assert(t, err, "The agent does not order a replacement card.", TASK_RULE_NOT_CALLED, "reissue_card", NULL));
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- card_limits (happy, 3 steps): change a daily limit ----------------------------
static int gen_card_limits(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_limits", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, card_id, card_type, last4, credit_limit_paise FROM cards WHERE status = 'active'"
                 " ORDER BY card_id",
                 5, c, err));
  static const char *const kinds[][3] = {{"atm_limit", "ATM", "cash withdrawal"},
                                         {"pos_limit", "POS", "shop"},
                                         {"online_limit", "online", "online shopping"}};
  int debit = strcmp(c[2], "debit") == 0;
  int k = (int)task_gen_range(&rng, 0, 2);
  int64_t cap = debit ? (k == 0 ? 100000 : 500000) : atoll(c[4]) / 100;
  int64_t limit = task_gen_range(&rng, 1, cap / 5000 > 1 ? cap / 5000 : 1) * 5000;
  char limit_text[32];
  snprintf(limit_text, sizeof limit_text, "%lld", (long long)limit);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please set the daily %s limit on my %s card ending %s to Rs %s.",
                 "Mere %2$s card %3$s ki daily %1$s limit Rs %4$s kar do.", "%s limit. %s card %s. make it %s",
                 kinds[k][1], c[2], c[3], limit_text));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "new_limit", limit_text, "limit", "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  int s = fam_gold(t, err, "update_card_limits", kinds[k][0], 0, "{\"card_id\":\"%s\",\"%s\":%lld}", c[1], kinds[k][0],
                  (long long)limit);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "new limit", s, kinds[k][0], err));
  FAM_TRY(fam_assert(t, err, "The agent changes the limit.", TASK_RULE_CALLED, "update_card_limits", NULL));
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- card_international (tools, 3 steps): switch on international use ---------------
static int gen_card_international(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_international", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, card_id, card_type, last4 FROM cards WHERE status = 'active'"
                 " AND international_enabled = 0 ORDER BY card_id",
                 4, c, err));
  static const char *const places[] = {"Dubai", "Singapore", "London", "Bangkok", "Kathmandu"};
  const char *place = fam_choose(&rng, places, 5);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I'm flying to %s tomorrow. Turn on international use on my %s card %s.",
                 "Kal %s ja raha hoon. Mere %s card %s pe international usage chalu kar do.",
                 "trip %s. intl on. %s card %s", place, c[2], c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "set_card_channel_controls", "card_id,channel,enabled", 0,
                 "{\"card_id\":\"%s\",\"channel\":\"international\",\"enabled\":true}", c[1]));
  FAM_TRY(fam_assert(t, err, "The agent enables international use.", TASK_RULE_CALLED, "set_card_channel_controls",
                   NULL));
  fam_finish(t, TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE);
  return 0;
}

// ---- mandate_revoke (seq, 3 steps): stop an autopay ----------------------------------
static int gen_mandate_revoke(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "mandate_revoke", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, mandate_id, merchant FROM mandates WHERE status = 'active' ORDER BY mandate_id",
                 3, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I cancelled my %s service but they keep debiting me. Stop the autopay.",
                 "%s band kar diya phir bhi paise kat rahe hain. Autopay rok do.", "stop autopay %s", c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_mandates", "", 0, "{}"));
  int s = fam_gold(t, err, "revoke_mandate", "mandate_id", 0, "{\"mandate_id\":\"%s\"}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "mandate_id", s, "mandate_id", err));
  FAM_TRY(fam_assert(t, err, "The agent finds the mandate before revoking it.", TASK_RULE_CALLED_BEFORE, "list_mandates",
                   "revoke_mandate", NULL));
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- cheque_stop (seq, 4 steps): status, stop with charge, status ------------------
static int gen_cheque_stop(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cheque_stop", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number, q.payee FROM cheques q JOIN accounts a"
                 " ON a.account_id = q.account_id WHERE q.status = 'issued' AND a.status = 'active'"
                 " AND a.balance_paise >= 100000 ORDER BY q.account_id, q.cheque_number",
                 4, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "The cheque I gave to %s got lost in the post. Please stop its payment.",
                 "%s ko diya cheque kho gaya courier mein. Payment rukwa do.", "stop cheque to %s. lost", c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "drawn", NULL));
  FAM_TRY(fam_field(t, err, "cheque_number", c[2], "cheque no", "number", NULL));
  FAM_TRY(fam_gold(t, err, "get_cheque_status", "account_id,cheque_number", 0,
                 "{\"account_id\":\"%s\",\"cheque_number\":%s}", c[1], c[2]));
  FAM_TRY(fam_gold(t, err, "stop_cheque_payment", "account_id,cheque_number", 1,
                 "{\"account_id\":\"%s\",\"cheque_number\":%s,\"customer_confirmed\":true}", c[1], c[2]));
  FAM_TRY(task_add_confirm(t, "the stop-payment charge of Rs 118", -1, NULL, err));
  int s = fam_gold(t, err, "get_cheque_status", "account_id,cheque_number", 0,
                  "{\"account_id\":\"%s\",\"cheque_number\":%s}", c[1], c[2]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "cheque status", s, "status", err));
  FAM_TRY(fam_assert(t, err, "The agent tells the customer the stop-payment charge.", TASK_RULE_MENTIONS_ANY, "118",
                   NULL));
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- positive_pay (happy, 2 steps): register a large cheque ---------------------------
static int gen_positive_pay(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "positive_pay", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number FROM cheques q JOIN accounts a"
                 " ON a.account_id = q.account_id WHERE q.status = 'unused' AND a.status = 'active'"
                 " ORDER BY q.account_id, q.cheque_number",
                 3, c, err));
  static const char *const payees[] = {"Nirmal Builders", "Shree Furniture House", "Green Valley School",
                                       "Dr. Anita Rao Clinic"};
  const char *payee = fam_choose(&rng, payees, 4);
  int64_t amount = task_gen_range(&rng, 10, 180) * 5000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I've written a cheque of Rs %s to %s today. I want to register it under positive pay.",
                 "Aaj %2$s ko Rs %1$s ka cheque diya hai, positive pay mein register karna hai.",
                 "positive pay. cheque %s to %s", amount_text, payee));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "drawn", NULL));
  FAM_TRY(fam_field(t, err, "cheque_number", c[2], "cheque no", "number", NULL));
  char today[1][TASK_GEN_COL_MAX];
  FAM_TRY(task_gen_first(ctx, "SELECT today FROM clock", NULL, 1, today, err));
  FAM_TRY(fam_field(t, err, "issue_date", today[0], "date", "dated", NULL));
  FAM_TRY(fam_gold(t, err, "submit_positive_pay", "account_id,cheque_number,amount,payee_name,issue_date", 0,
                 "{\"account_id\":\"%s\",\"cheque_number\":%s,\"amount\":%lld,\"payee_name\":\"%s\","
                 "\"issue_date\":\"%s\"}",
                 c[1], c[2], (long long)amount, payee, today[0]));
  FAM_TRY(fam_assert(t, err, "The agent registers the cheque.", TASK_RULE_CALLED, "submit_positive_pay", NULL));
  fam_finish(t, TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE);
  return 0;
}

// ---- cheque_book (happy, 2 steps): order a chargeable cheque book ----------------------
static int gen_cheque_book(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cheque_book", seed);
  char c[2][TASK_GEN_COL_MAX];
  // Every seeded savings account already used its 25 free leaves this
  // financial year and current accounts pay from the first leaf: charged.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, account_id FROM accounts WHERE status = 'active' AND balance_paise >= 100000"
                 " AND (account_type = 'current' OR account_id IN (SELECT account_id FROM cheque_books"
                 " WHERE financial_year = '2025-26')) ORDER BY account_id",
                 2, c, err));
  static const int leaves[] = {10, 25, 50};
  int n = leaves[task_gen_range(&rng, 0, 2)];
  char leaves_text[16];
  snprintf(leaves_text, sizeof leaves_text, "%d", n);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need a new cheque book with %s leaves for my account.",
                 "Naya cheque book chahiye, %s leaves wala.", "cheque book %s leaves", leaves_text));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", NULL));
  int s = fam_gold(t, err, "request_cheque_book", "account_id,leaves", 1,
                  "{\"account_id\":\"%s\",\"leaves\":%d,\"customer_confirmed\":true}", c[1], n);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the cheque book charge", s, "charge", err));
  FAM_TRY(task_add_communicate(t, "request_id", s, "request_id", err));
  FAM_TRY(fam_assert(t, err, "The agent orders the cheque book.", TASK_RULE_CALLED, "request_cheque_book", NULL));
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- request_escalate (edge, TRANSFER): an open request, the customer wants a person ---
static int gen_request_escalate(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "request_escalate", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, request_id, category FROM service_requests"
                 " WHERE status IN ('open', 'in_progress')"
                 " ORDER BY request_id",
                 3, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "My service request %s is still not resolved. I want to talk to a human officer now.",
                 "Mera request %s abhi tak resolve nahi hua. Kisi officer se baat karwao abhi.",
                 "request %s not done. human agent", c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_service_request_status", "request_id", 0, "{\"request_id\":\"%s\"}", c[1]);
  FAM_TRY(s);
  FAM_TRY(fam_gold(t, err, "transfer_to_human_agent", "", 0,
                 "{\"reason\":\"Service request %s (%s) unresolved; customer asks for a human officer\"}", c[1], c[2]));
  FAM_TRY(task_add_communicate(t, "request status", s, "status", err));
  FAM_TRY(fam_assert(t, err, "The agent checks the request before handing over.", TASK_RULE_CALLED_BEFORE,
                   "get_service_request_status", "transfer_to_human_agent", NULL));
  FAM_TRY(fam_assert(t, err, "The conversation ends with a hand-off to a human.", TASK_RULE_END_IS, "transfer", NULL));
  t->expected_end = TASK_END_TRANSFER;
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- complaint_request (happy, 2 steps): register a complaint ---------------------------
static int gen_complaint_request(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "complaint_request", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id, account_id FROM accounts WHERE status = 'active' ORDER BY account_id",
                 2, c, err));
  static const char *const issues[][2] = {
      {"complaint", "The branch staff refused to accept my cash deposit without reason"},
      {"account", "My passbook has not been updated for three months"},
      {"card", "My new debit card PIN letter never arrived"},
      {"other", "I am not receiving SMS alerts for transactions"}};
  int k = (int)task_gen_range(&rng, 0, 3);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to register a complaint. %s.",
                 "Ek complaint darj karni hai. %s.", "complaint: %s", issues[k][1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  // Name only: which category fits a complaint is the agent's call.
  int s = fam_gold(t, err, "create_service_request", "", 0,
                  "{\"category\":\"%s\",\"description\":\"%s\",\"account_id\":\"%s\"}", issues[k][0], issues[k][1],
                  c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "request_id", s, "request_id", err));
  FAM_TRY(fam_assert(t, err, "The agent registers the request.", TASK_RULE_CALLED, "create_service_request", NULL));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, TASK_CHECK_ALL);
  return 0;
}

// ---- investment_advice: out of scope, the right move is to refuse (edge) ----
static const char *const advice_reasons[TASK_STYLE_COUNT][2] = {
    {"Which shares should I buy this week to double my money?", "Can you tell me which crypto coin will go up next?"},
    {"Kaunse shares khareedu ki paisa double ho jaye?", "Bitcoin lena chahiye kya abhi? Aap batao."},
    {"best stock to buy now?", "crypto tip pls"},
};
static int gen_investment_advice(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  rng_seed(&rng, seed);
  if (task_set(&t->persona, err, "A customer looking for quick market tips.") ||
      fam_pick_reason(t, &rng, advice_reasons, err) ||
      fam_assert_rule(t, "The agent declines to give investment tips.", TASK_RULE_MENTIONS_ANY, "cannot", "unable", err) ||
      fam_assert_rule(t, "The conversation ends as out of scope.", TASK_RULE_END_IS, "out_of_scope", NULL, err))
    return -1;
  t->checks = TASK_CHECK_JUDGE;
  t->expected_end = TASK_END_OUT_OF_SCOPE;
  t->max_turns = 6;
  return 0;
}
const TaskFamily fam_investment_advice = {"investment_advice", TASK_USE_CROSS_CUTTING, TASK_KIND_EDGE,
                                             "Stock/crypto tips: out of scope, refuse.", gen_investment_advice, TASK_SLICE_SHALLOW, 0,
    "shares,crypto"};

// ---- recovery_complaint: hand off to a human (edge, TRANSFER) ----------------
static const char *const complaint_reasons[TASK_STYLE_COUNT][2] = {
    {"A recovery agent has been calling me at night and I want to complain to a person.",
     "I want to speak to a human about harassment by your staff."},
    {"Recovery wale raat ko call kar rahe hain, mujhe kisi insaan se baat karni hai.",
     "Mujhe complaint karni hai, kisi manager se baat karaiye."},
    {"complaint. recovery calls at night. want person", "talk to human pls. complaint"},
};
static int gen_recovery_complaint(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  rng_seed(&rng, seed);
  if (task_set(&t->persona, err, "An upset borrower with a complaint that needs a person.") ||
      fam_pick_reason(t, &rng, complaint_reasons, err) ||
      task_add_gold(t, "transfer_to_human_agent", "{\"reason\":\"complaint about recovery agent conduct\"}", NULL, 0,
                    err) < 0 ||
      fam_assert_rule(t, "The agent hands the customer to a human.", TASK_RULE_CALLED, "transfer_to_human_agent", NULL,
                  err) ||
      fam_assert_rule(t, "The conversation ends with a transfer.", TASK_RULE_END_IS, "transfer", NULL, err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE;  // db: the hand-off request (reason text excluded)
  t->expected_end = TASK_END_TRANSFER;
  t->max_turns = 8;
  return 0;
}
const TaskFamily fam_recovery_complaint = {"recovery_complaint", TASK_USE_CROSS_CUTTING, TASK_KIND_EDGE,
                                              "Harassment complaint: hand off to a human.", gen_recovery_complaint, TASK_SLICE_SHALLOW, 0,
    "personal_loan"};

// ---- lost_card_reissue: block, then a charged reissue (tools, 4 steps) ------
static const char *const card_reasons[TASK_STYLE_COUNT][2] = {
    {"I lost my debit card, please block it and send me a new one.", "My debit card is missing. Block it and reissue."},
    {"Mera debit card kho gaya, block karke naya bhej dijiye.", "Card gum ho gaya hai, naya chahiye."},
    {"lost debit card. block + new card", "card lost. block it"},
};
static int gen_lost_card_reissue(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[3][TASK_GEN_COL_MAX], args[256];
  if (task_gen_pick(ctx, &rng,
                    "SELECT k.customer_id, k.card_id, k.last4 FROM cards k JOIN accounts a ON a.account_id ="
                    " k.account_id WHERE k.card_type = 'debit' AND k.status = 'active' AND a.status = 'active'"
                    " AND a.balance_paise >= 100000 ORDER BY k.card_id",
                    NULL, 3, row, err) != 0)
    return -1;
  if (task_set(&t->persona, err, "A customer who lost a wallet on the metro.") || fam_pick_reason(t, &rng, card_reasons, err) ||
      task_gen_add_verify(ctx, t, row[0], err) < 0 || task_add_field(t, "card_last_4_digits", row[2], err) ||
      task_add_field_keyword(t, "card_last_4_digits", "last four", err) ||
      task_add_field_keyword(t, "card_last_4_digits", "which card", err))
    return -1;
  if (task_add_gold(t, "list_cards", "{}", NULL, 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"card_id\":\"%s\",\"reason\":\"lost\"}", row[1]);
  if (task_add_gold(t, "block_card", args, "card_id,reason", 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"card_id\":\"%s\",\"customer_confirmed\":true}", row[1]);
  int reissue = task_add_gold(t, "reissue_card", args, "card_id", 1, err);
  if (reissue < 0 || task_add_confirm(t, "the debit card reissue charge of Rs 200 plus GST", -1, NULL, err) ||
      fam_assert_rule(t, "The agent blocks the card before reissuing it.", TASK_RULE_CALLED_BEFORE, "block_card",
                  "reissue_card", err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE;
  t->kind = TASK_KIND_TOOLS;
  t->max_turns = 16;
  return 0;
}
const TaskFamily fam_lost_card_reissue = {"lost_card_reissue", TASK_USE_CROSS_CUTTING, TASK_KIND_TOOLS,
                                             "Block a lost debit card and reissue it after consent to the charge.",
                                             gen_lost_card_reissue, TASK_SLICE_SHALLOW, 0,
    "debit"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_CROSS_CUTTING, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_card_fraud_dispute, card_fraud_dispute, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, 0, "debit,credit", "card misuse: block, find the debit, dispute")
FAMILY(fam_card_temp_block, card_temp_block, TASK_KIND_HAPPY, TASK_SLICE_DEEP, 0, "debit,credit", "misplaced card: temporary block only")
FAMILY(fam_card_limits, card_limits, TASK_KIND_HAPPY, TASK_SLICE_DEEP, 0, "atm,pos,online", "set a daily ATM/POS/online limit")
FAMILY(fam_card_international, card_international, TASK_KIND_TOOLS, TASK_SLICE_DEEP, 0, "debit,credit", "switch on international use before a trip")
FAMILY(fam_mandate_revoke, mandate_revoke, TASK_KIND_SEQ, TASK_SLICE_DEEP, 0, "nach,upi", "find and revoke an autopay mandate")
FAMILY(fam_cheque_stop, cheque_stop, TASK_KIND_SEQ, TASK_SLICE_DEEP, 0, "savings,current", "cheque status, stop payment with charge, status")
FAMILY(fam_positive_pay, positive_pay, TASK_KIND_HAPPY, TASK_SLICE_DEEP, 0, "savings,current", "register a cheque under positive pay")
FAMILY(fam_cheque_book, cheque_book, TASK_KIND_HAPPY, TASK_SLICE_DEEP, 0, "savings,current", "order a cheque book after confirming the charge")
FAMILY(fam_request_escalate, request_escalate, TASK_KIND_EDGE, TASK_SLICE_DEEP, 0, "service_request", "unresolved request: status, human (TRANSFER)")
FAMILY(fam_complaint_request, complaint_request, TASK_KIND_HAPPY, TASK_SLICE_DEEP, 0, "complaint,account,card,other", "register a complaint as a service request")
