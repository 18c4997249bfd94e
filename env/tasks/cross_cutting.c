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
  FAM_TRY(fam_variant(t, err, c[2]));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, FAM_CHECKS_WORK);
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
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
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
  // Columns: the tool's argument, the word for the customer, a description,
  // the variant.
  static const char *const kinds[][4] = {{"atm_limit", "ATM", "cash withdrawal", "atm"},
                                         {"pos_limit", "POS", "shop", "pos"},
                                         {"online_limit", "online", "online shopping", "online"}};
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
  FAM_TRY(fam_variant(t, err, kinds[k][3]));
  fam_finish(t, FAM_CHECKS_WORK);
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
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- mandate_revoke (seq, 3 steps): stop an autopay ----------------------------------
static int gen_mandate_revoke(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "mandate_revoke", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, mandate_id, merchant, mandate_type FROM mandates WHERE status = 'active'"
                 " ORDER BY mandate_id",
                 4, c, err));
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
  // The image's mandate types are nach and upi_autopay.
  FAM_TRY(fam_variant(t, err, strcmp(c[3], "nach") == 0 ? "nach" : "upi"));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- cheque_stop (seq, 4 steps): status, stop with charge, status ------------------
static int gen_cheque_stop(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cheque_stop", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number, q.payee, a.account_type FROM cheques q"
                 " JOIN accounts a ON a.account_id = q.account_id WHERE q.status = 'issued' AND a.status = 'active'"
                 " AND a.balance_paise >= 100000 ORDER BY q.account_id, q.cheque_number",
                 5, c, err));
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
  FAM_TRY(fam_variant(t, err, c[4]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- positive_pay (happy, 2 steps): register a large cheque ---------------------------
static int gen_positive_pay(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "positive_pay", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number, a.account_type FROM cheques q JOIN accounts a"
                 " ON a.account_id = q.account_id WHERE q.status = 'unused' AND a.status = 'active'"
                 " ORDER BY q.account_id, q.cheque_number",
                 4, c, err));
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
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- cheque_book (happy, 2 steps): order a chargeable cheque book ----------------------
static int gen_cheque_book(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cheque_book", seed);
  char c[3][TASK_GEN_COL_MAX];
  // Every seeded savings account already used its 25 free leaves this
  // financial year and current accounts pay from the first leaf: charged.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, account_id, account_type FROM accounts WHERE status = 'active'"
                 " AND balance_paise >= 100000 AND (account_type = 'current' OR account_id IN"
                 " (SELECT account_id FROM cheque_books WHERE financial_year = '2025-26')) ORDER BY account_id",
                 3, c, err));
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
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
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
  fam_finish(t, FAM_CHECKS_WORK);
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
  FAM_TRY(fam_variant(t, err, issues[k][0]));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, FAM_CHECKS_WORK);
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
  // Each style's first reason asks for a share tip, its second for crypto.
  return fam_variant(t, err, strcmp(t->reason, advice_reasons[t->style][0]) == 0 ? "shares" : "crypto");
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
  t->checks = FAM_CHECKS_WORK;
  t->expected_end = TASK_END_TRANSFER;
  t->max_turns = 8;
  return 0;
}
// One variant: the caller is a borrower harassed over a personal loan's recovery.
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
  t->checks = FAM_CHECKS_WORK;
  t->kind = TASK_KIND_TOOLS;
  t->max_turns = 16;
  return 0;
}
// One variant: debit cards only (the reasons name one, and only its reissue is charged).
const TaskFamily fam_lost_card_reissue = {"lost_card_reissue", TASK_USE_CROSS_CUTTING, TASK_KIND_TOOLS,
                                             "Block a lost debit card and reissue it after consent to the charge.",
                                             gen_lost_card_reissue, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS,
    "debit"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_CROSS_CUTTING, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_card_fraud_dispute, card_fraud_dispute, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "debit,credit", "card misuse: block, find the debit, dispute")
FAMILY(fam_card_temp_block, card_temp_block, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "debit,credit", "misplaced card: temporary block only")
FAMILY(fam_card_limits, card_limits, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "atm,pos,online", "set a daily ATM/POS/online limit")
FAMILY(fam_card_international, card_international, TASK_KIND_TOOLS, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "debit,credit", "switch on international use before a trip")
FAMILY(fam_mandate_revoke, mandate_revoke, TASK_KIND_SEQ, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "nach,upi", "find and revoke an autopay mandate")
// Savings only: the image seeds cheques on savings accounts alone (env/bank/seed.c).
FAMILY(fam_cheque_stop, cheque_stop, TASK_KIND_SEQ, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "savings", "cheque status, stop payment with charge, status")
FAMILY(fam_positive_pay, positive_pay, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "savings", "register a cheque under positive pay")
FAMILY(fam_cheque_book, cheque_book, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "savings,current", "order a cheque book after confirming the charge")
FAMILY(fam_request_escalate, request_escalate, TASK_KIND_EDGE, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "service_request", "unresolved request: status, human (TRANSFER)")
FAMILY(fam_complaint_request, complaint_request, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "complaint,account,card,other", "register a complaint as a service request")

// ==== second round (the deep slice) ===========================================
// Chains of up to 8 actions; seq+db checks where a write or a refusal decides
// the task, seq+comm where a value must reach the customer. Each task records
// its named variant (fam_variant).
// An active card whose account is active with at least Rs 1,000 (for a
// debit card reissue charge). Columns: customer, card, type, last 4, index
// of the card in list_cards (ordered by card id).
#define SQL_CARD_FUNDED(extra)                                                                                 \
  "SELECT k.customer_id, k.card_id, k.card_type, k.last4, (SELECT count(*) FROM cards z WHERE z.customer_id =" \
  " k.customer_id AND z.card_id < k.card_id) FROM cards k JOIN accounts a ON a.account_id = k.account_id"     \
  " WHERE k.status = 'active' AND a.status = 'active' AND a.balance_paise >= 100000 " extra " ORDER BY k.card_id"

static const char *const TIERS[] = {"easy", "medium", "hard"};

// Adds the fixture that puts a card into a blocked state.
static int card_fixture(Task *t, const char *card, const char *status, const char *reason, FimiError *err) {
  char sql[512];
  snprintf(sql, sizeof sql, "UPDATE cards SET status = '%s', block_reason = '%s' WHERE card_id = '%s'", status, reason,
           card);
  return task_add_fixture(t, sql, err);
}

// ---- card_unblock (tools, 3 steps): a temporarily blocked card found again ----------
static int gen_card_unblock(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_unblock", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED(""), 5, c, err));
  FAM_TRY(card_fixture(t, c[1], "blocked", "temporary", err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I found my %s card ending %s that I had blocked. Please unblock it.",
                 "Mera %s card %s mil gaya jo block kiya tha. Unblock kar do.", "found %s card %s. unblock", c[2],
                 c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "unblock_card", "card_id", 0, "{\"card_id\":\"%s\"}", c[1]));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- hotlisted_unblock (edge, 2 steps): a card reported lost stays hotlisted -----------
static int gen_hotlisted_unblock(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "hotlisted_unblock", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED(""), 5, c, err));
  const char *reason = task_gen_range(&rng, 0, 1) ? "lost" : "stolen";
  FAM_TRY(card_fixture(t, c[1], "hotlisted", reason, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Last week I reported my %s card ending %s as %s, but I found it. Just unblock it, no new card.",
                 "Pichhle hafte %s card %s %s report kiya tha, ab mil gaya. Bas unblock karo, naya card nahi chahiye.",
                 "%s card %s was %s, found it. unblock only", c[2], c[3], reason));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not try to unblock a hotlisted card.", TASK_RULE_NOT_CALLED, "unblock_card",
                   NULL));
  FAM_TRY(fam_assert(t, err, "The agent orders no replacement the customer declined.", TASK_RULE_NOT_CALLED,
                   "reissue_card", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- card_limit_over_cap (edge, 2 steps): a debit card limit above its cap -------------
static int gen_card_limit_over_cap(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_limit_over_cap", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED("AND k.card_type = 'debit'"), 5, c, err));
  static const char *const kinds[][2] = {{"atm", "ATM"}, {"pos", "POS"}, {"online", "online"}};
  int k = (int)task_gen_range(&rng, 0, 2);
  char limit[32];
  snprintf(limit, sizeof limit, "%d", k == 0 ? (int)task_gen_range(&rng, 11, 30) * 10000 : (int)task_gen_range(&rng, 6, 20) * 100000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Raise the daily %s limit on my debit card %s to Rs %s.",
                 "Debit card %2$s ki daily %1$s limit Rs %3$s kar do.", "%s limit debit %s -> %s", kinds[k][1], c[3],
                 limit));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not set a limit above the debit card's cap.", TASK_RULE_NOT_CALLED,
                   "update_card_limits", NULL));
  FAM_TRY(fam_variant(t, err, kinds[k][0]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- card_channels_off (happy, 4 steps): two channels switched off ----------------------
static int gen_card_channels_off(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_channels_off", seed);
  static const char *const pairs[][3] = {{"online", "contactless", "AND k.online_enabled = 1 AND k.contactless_enabled = 1"},
                                         {"international", "online", "AND k.international_enabled = 1 AND k.online_enabled = 1"},
                                         {"atm", "pos", "AND k.atm_enabled = 1 AND k.pos_enabled = 1"}};
  int p = (int)task_gen_range(&rng, 0, 2);
  char c[5][TASK_GEN_COL_MAX], sql[1024];
  snprintf(sql, sizeof sql, SQL_CARD_FUNDED("%s"), pairs[p][2]);
  FAM_TRY(fam_pick(ctx, &rng, sql, 5, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "For safety, switch off %s and %s use on my %s card ending %s.",
                 "Safety ke liye mere %3$s card %4$s pe %1$s aur %2$s band kar do.", "turn off %s + %s. %s card %s",
                 pairs[p][0], pairs[p][1], c[2], c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  for (int i = 0; i < 2; i++)
    FAM_TRY(fam_gold(t, err, "set_card_channel_controls", "card_id,channel,enabled", 0,
                   "{\"card_id\":\"%s\",\"channel\":\"%s\",\"enabled\":false}", c[1], pairs[p][i]));
  char variant[160];
  snprintf(variant, sizeof variant, "%s_%s", pairs[p][0], c[2]);
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- card_expiry_comm (tools, communication, 2 steps): expiry and network said -------
static int gen_card_expiry_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_expiry_comm", seed);
  char c[5][TASK_GEN_COL_MAX], path[192];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED(""), 5, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "When does my %s card ending %s expire, and which network is it on?",
                 "Mera %s card %s kab expire hoga, aur kaunsa network hai?", "%s card %s expiry? network?", c[2],
                 c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "list_cards", "", 0, "{}");
  FAM_TRY(s);
  snprintf(path, sizeof path, "cards.%s.expiry", c[4]);
  FAM_TRY(task_add_communicate(t, "card expiry", s, path, err));
  snprintf(path, sizeof path, "cards.%s.network", c[4]);
  FAM_TRY(task_add_communicate(t, "card network", s, path, err));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// ---- cheque_stop_cleared (edge, 2 steps): a cleared cheque cannot be stopped -----------
static int gen_cheque_stop_cleared(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cheque_stop_cleared", seed);
  char c[5][TASK_GEN_COL_MAX], sql[512];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number, q.payee, a.account_type FROM cheques q"
                 " JOIN accounts a ON a.account_id = q.account_id WHERE q.status = 'issued' AND a.status = 'active'"
                 " AND a.account_type = 'savings' ORDER BY q.account_id, q.cheque_number",
                 5, c, err));
  // The story: the cheque was presented and paid yesterday.
  snprintf(sql, sizeof sql, "UPDATE cheques SET status = 'cleared' WHERE account_id = '%s' AND cheque_number = %s", c[1],
           c[2]);
  FAM_TRY(task_add_fixture(t, sql, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Stop payment of the cheque I gave %s, I changed my mind.",
                 "%s ko diya cheque rok do, mann badal gaya.", "stop cheque to %s", c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "drawn", NULL));
  FAM_TRY(fam_field(t, err, "cheque_number", c[2], "cheque no", "number", NULL));
  FAM_TRY(fam_gold(t, err, "get_cheque_status", "account_id,cheque_number", 0,
                 "{\"account_id\":\"%s\",\"cheque_number\":%s}", c[1], c[2]));
  FAM_TRY(fam_assert(t, err, "The agent does not stop a cheque that has cleared.", TASK_RULE_NOT_CALLED,
                   "stop_cheque_payment", NULL));
  FAM_TRY(fam_variant(t, err, c[4]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- positive_pay_below_min (edge, 2 steps): positive pay starts at Rs 50,000 ----------
static int gen_positive_pay_below_min(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "positive_pay_below_min", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, q.account_id, q.cheque_number, a.account_type FROM cheques q JOIN accounts a"
                 " ON a.account_id = q.account_id WHERE q.status = 'unused' AND a.status = 'active'"
                 " AND a.account_type = 'savings' ORDER BY q.account_id, q.cheque_number",
                 4, c, err));
  char amount[32];
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 2, 49) * 1000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Register my cheque of Rs %s under positive pay, please.",
                 "Rs %s ka cheque positive pay mein daal do.", "positive pay cheque %s", amount));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "drawn", NULL));
  FAM_TRY(fam_field(t, err, "cheque_number", c[2], "cheque no", "number", NULL));
  FAM_TRY(fam_gold(t, err, "get_cheque_status", "account_id,cheque_number", 0,
                 "{\"account_id\":\"%s\",\"cheque_number\":%s}", c[1], c[2]));
  FAM_TRY(fam_assert(t, err, "The agent does not register a cheque below the positive pay minimum.",
                   TASK_RULE_NOT_CALLED, "submit_positive_pay", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// Appends the reissue step: a debit card pays Rs 200 + GST (confirmed), a
// credit card is free.
static int add_reissue(Task *t, const char *card, const char *type, FimiError *err) {
  int debit = strcmp(type, "debit") == 0;
  int s = debit ? fam_gold(t, err, "reissue_card", "card_id", 1, "{\"card_id\":\"%s\",\"customer_confirmed\":true}", card)
                : fam_gold(t, err, "reissue_card", "card_id", 0, "{\"card_id\":\"%s\"}", card);
  if (s >= 0 && debit && task_add_confirm(t, "the debit card reissue charge of Rs 200 plus GST", -1, NULL, err) != 0)
    return -1;
  return s;
}

// ---- card_lost_replace (seq, 5 steps): lost or stolen card: block, reissue, list ------
static int gen_card_lost_replace(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_lost_replace", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED(""), 5, c, err));
  const char *reason = task_gen_range(&rng, 0, 1) ? "lost" : "stolen";
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "My %s card ending %s was %s. Block it, send a replacement and confirm.",
                 "Mera %s card %s %s ho gaya. Block karke naya bhejo aur confirm karo.", "%s card %s %s. block + new",
                 c[2], c[3], reason));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "block_card", "card_id,reason", 0, "{\"card_id\":\"%s\",\"reason\":\"%s\"}", c[1], reason));
  FAM_TRY(add_reissue(t, c[1], c[2], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent blocks the card before reissuing it.", TASK_RULE_CALLED_BEFORE, "block_card",
                   "reissue_card", NULL));
  FAM_TRY(fam_variant(t, err, reason));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- fraud_full_recovery (seq, 8 steps): block, find, dispute, status, reissue, list ----
static int gen_fraud_full_recovery(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "fraud_full_recovery", seed);
  char c[7][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT k.customer_id, k.card_id, k.card_type, k.last4, x.account_id, x.txn_id, x.amount_paise"
                 " FROM cards k JOIN transactions x ON x.account_id = k.account_id JOIN accounts a ON a.account_id ="
                 " k.account_id WHERE k.status = 'active' AND a.status = 'active' AND a.balance_paise >= 100000"
                 " AND x.direction = 'debit' AND NOT EXISTS (SELECT 1 FROM disputes d WHERE d.txn_id = x.txn_id)"
                 " AND (SELECT count(*) FROM transactions y WHERE y.account_id = x.account_id AND (y.txn_date >"
                 " x.txn_date OR (y.txn_date = x.txn_date AND y.txn_id > x.txn_id))) < 10 ORDER BY k.card_id, x.txn_id",
                 7, c, err));
  char amount[32];
  fam_rupees(atoll(c[6]), amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Someone used my %s card ending %s: a debit of Rs %s is not mine. Block it, dispute it, and send a new "
                 "card.",
                 "Mere %s card %s se Rs %s ka debit hua jo maine nahi kiya. Block, dispute aur naya card, sab kar do.",
                 "fraud. %s card %s. rs %s not me. block dispute new card", c[2], c[3], amount));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "block_card", "card_id,reason", 0, "{\"card_id\":\"%s\",\"reason\":\"suspected_fraud\"}",
                 c[1]));
  FAM_TRY(fam_gold(t, err, "get_transactions", "account_id", 0, "{\"account_id\":\"%s\",\"limit\":10}", c[4]));
  int s = fam_gold(t, err, "raise_dispute", "transaction_id,reason", 0,
                  "{\"transaction_id\":\"%s\",\"reason\":\"unauthorised\",\"description\":"
                  "\"Debit of Rs %s not made by the customer; card suspected misused\"}",
                  c[5], amount);
  FAM_TRY(s);
  char id[TASK_GEN_COL_MAX];
  FAM_TRY(fam_replay_text(ctx, t, s, "dispute_id", id, sizeof id, err));
  FAM_TRY(fam_gold(t, err, "get_dispute_status", "dispute_id", 0, "{\"dispute_id\":\"%s\"}", id));
  FAM_TRY(add_reissue(t, c[1], c[2], err));
  FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent blocks the card before disputing.", TASK_RULE_CALLED_BEFORE, "block_card",
                   "raise_dispute", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- mandate_graded (seq, graded, 2/3/5 steps): list; revoke; revoke, check, balance ----
static int gen_mandate_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "mandate_graded", seed);
  char c[6][TASK_GEN_COL_MAX], path[192], variant[160];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT m.customer_id, m.mandate_id, m.merchant, m.account_id, (SELECT count(*) FROM mandates z"
                 " WHERE z.customer_id = m.customer_id AND z.mandate_id < m.mandate_id), m.mandate_type FROM mandates m"
                 " JOIN accounts a ON a.account_id = m.account_id WHERE m.status = 'active' AND a.status = 'active'"
                 " ORDER BY m.mandate_id",
                 6, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  fam_style(t, &rng);
  static const char *const en[] = {"What is the maximum my %s autopay can debit?", "Stop my %s autopay, please.",
                                   "Cancel the %s autopay, show me it is revoked, and tell me my balance."};
  static const char *const hi[] = {"%s autopay maximum kitna kaat sakta hai?", "%s ka autopay band kar do.",
                                   "%s autopay cancel karo, revoke hua dikhao, aur balance batao."};
  static const char *const fr[] = {"%s autopay max amount?", "stop %s autopay", "cancel %s autopay. show revoked. balance"};
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, en[tier], hi[tier], fr[tier], c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "list_mandates", "", 0, "{}");
  FAM_TRY(s);
  if (tier == 0) {
    snprintf(path, sizeof path, "mandates.%s.max_amount", c[4]);
    FAM_TRY(task_add_communicate(t, "mandate maximum", s, path, err));
  } else {
    FAM_TRY(fam_gold(t, err, "revoke_mandate", "mandate_id", 0, "{\"mandate_id\":\"%s\"}", c[1]));
  }
  if (tier == 2) {
    FAM_TRY(fam_gold(t, err, "list_mandates", "", 0, "{}"));
    FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[3]));
  }
  snprintf(variant, sizeof variant, "%s_%s", TIERS[tier], strcmp(c[5], "nach") == 0 ? "nach" : "upi");
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- card_graded (tools, graded, 2/3/5 steps): status; temporary block; lost and replaced ----
static int gen_card_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "card_graded", seed);
  char c[5][TASK_GEN_COL_MAX], path[192], variant[160];
  FAM_TRY(fam_pick(ctx, &rng, SQL_CARD_FUNDED(""), 5, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  fam_style(t, &rng);
  static const char *const en[] = {"Is my %s card ending %s active?", "Block my %s card ending %s for now, I misplaced it.",
                                   "I lost my %s card ending %s. Block it, replace it and confirm the new one."};
  static const char *const hi[] = {"Mera %s card %s active hai kya?", "Mera %s card %s abhi ke liye block kar do.",
                                   "Mera %s card %s kho gaya. Block karo, naya bhejo aur confirm karo."};
  static const char *const fr[] = {"%s card %s active?", "temp block %s card %s", "lost %s card %s. block + replace"};
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, en[tier], hi[tier], fr[tier], c[2], c[3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "list_cards", "", 0, "{}");
  FAM_TRY(s);
  if (tier == 0) {
    snprintf(path, sizeof path, "cards.%s.status", c[4]);
    FAM_TRY(task_add_communicate(t, "card status", s, path, err));
  } else {
    FAM_TRY(fam_gold(t, err, "block_card", "card_id,reason", 0, "{\"card_id\":\"%s\",\"reason\":\"%s\"}", c[1],
                   tier == 1 ? "temporary" : "lost"));
  }
  if (tier == 2) {
    FAM_TRY(add_reissue(t, c[1], c[2], err));
    FAM_TRY(fam_gold(t, err, "list_cards", "", 0, "{}"));
  }
  snprintf(variant, sizeof variant, "%s_%s", TIERS[tier], c[2]);
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- mandate_already_expired (edge, 2 steps): an expired autopay needs no revoking ------
static int gen_mandate_already_expired(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "mandate_already_expired", seed);
  char c[4][TASK_GEN_COL_MAX], sql[256];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, mandate_id, merchant, mandate_type FROM mandates WHERE status = 'active'"
                 " ORDER BY mandate_id",
                 4, c, err));
  // The story: the mandate's end date passed last month.
  snprintf(sql, sizeof sql, "UPDATE mandates SET status = 'expired' WHERE mandate_id = '%s'", c[1]);
  FAM_TRY(task_add_fixture(t, sql, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please cancel my %s autopay before it debits me again.",
                 "%s wala autopay cancel karo, phir se paise na katein.", "cancel %s autopay pls", c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_mandates", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not try to revoke a mandate that has already expired.",
                   TASK_RULE_NOT_CALLED, "revoke_mandate", NULL));
  FAM_TRY(fam_variant(t, err, strcmp(c[3], "nach") == 0 ? "nach" : "upi"));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- transfer_limits_comm (tools, communication, 2 steps): one limit said -------------
static int gen_transfer_limits_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "transfer_limits_comm", seed);
  char c[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers ORDER BY customer_id", 1, c, err));
  static const char *const asks[][3] = {{"upi", "How much can I still send by UPI today?", "upi_remaining_today"},
                                        {"imps", "What is the most I can send in one IMPS transfer?",
                                         "imps_per_transaction_limit"},
                                        {"rtgs", "What is the smallest amount RTGS accepts?", "rtgs_minimum"},
                                        {"cooling", "How much can I send to a payee I add today?",
                                         "new_beneficiary_first_24h_limit"}};
  int k = (int)task_gen_range(&rng, 0, 3);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "%s", "Limit ka sawaal hai: %s", "limit q: %s", asks[k][1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_transfer_limits", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "the limit asked about", s, asks[k][2], err));
  FAM_TRY(fam_variant(t, err, asks[k][0]));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// slice: TASK_SLICE_DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
#define DEEP_FAMILY(var, name, kind, flags, variants, summary) \
  FAMILY(var, name, kind, TASK_SLICE_DEEP, flags, variants, summary)
DEEP_FAMILY(fam_card_unblock, card_unblock, TASK_KIND_TOOLS, TASK_FAMILY_CHANNELS, "debit,credit", "temporarily blocked card unblocked")
DEEP_FAMILY(fam_hotlisted_unblock, hotlisted_unblock, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "debit,credit",
            "unblock of a hotlisted card: cards read, refuse")
DEEP_FAMILY(fam_card_limit_over_cap, card_limit_over_cap, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "atm,pos,online",
            "debit card limit above its cap: cards read, refuse")
DEEP_FAMILY(fam_card_channels_off, card_channels_off, TASK_KIND_HAPPY, TASK_FAMILY_CHANNELS,
            "online_debit,online_credit,international_debit,international_credit,atm_debit,atm_credit",
            "two card channels switched off")
DEEP_FAMILY(fam_card_expiry_comm, card_expiry_comm, TASK_KIND_TOOLS, TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS, "debit,credit",
            "card expiry and network said")
DEEP_FAMILY(fam_cheque_stop_cleared, cheque_stop_cleared, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "savings",
            "stop payment of a cleared cheque: status read, refuse")
DEEP_FAMILY(fam_positive_pay_below_min, positive_pay_below_min, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "savings",
            "positive pay below Rs 50,000: cheque read, refuse")
DEEP_FAMILY(fam_card_lost_replace, card_lost_replace, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "lost,stolen",
            "5 steps: cards, block, reissue, cards")
DEEP_FAMILY(fam_fraud_full_recovery, fraud_full_recovery, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "debit,credit",
            "8 steps: cards, block, statement, dispute, status, reissue, cards")
DEEP_FAMILY(fam_mandate_graded, mandate_graded, TASK_KIND_SEQ, TASK_FAMILY_GRADED | TASK_FAMILY_CHANNELS,
            "easy_nach,easy_upi,medium_nach,medium_upi,hard_nach,hard_upi",
            "graded: mandate maximum; revoke; revoke, check and balance")
DEEP_FAMILY(fam_card_graded, card_graded, TASK_KIND_TOOLS, TASK_FAMILY_GRADED | TASK_FAMILY_CHANNELS,
            "easy_debit,easy_credit,medium_debit,medium_credit,hard_debit,hard_credit",
            "graded: card status; temporary block; lost card replaced")
DEEP_FAMILY(fam_mandate_already_expired, mandate_already_expired, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "nach,upi",
            "revoke an expired mandate: mandates read, nothing to revoke")
DEEP_FAMILY(fam_transfer_limits_comm, transfer_limits_comm, TASK_KIND_TOOLS, TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS,
            "upi,imps,rtgs,cooling", "one transfer limit said")
