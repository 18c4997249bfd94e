// env/families_a.c: the first set of task families (env_families_a). Each
// family is a TaskFamily with a generator that picks a real customer from the
// seeded image (task_gen_pick), declares fields, gold actions, checks, values
// to communicate and assertions, and is replayed by task_generate so the
// gold chain is known to succeed. The first family, fd_paper, is the FiMI
// paper's example and the pattern to copy.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/task_family.h"

// Customers who can transact: KYC verified and not overdue, an active
// account with at least `min` paise. Columns: customer id, account id,
// balance in paise, birth date.
#define SQL_ACTIVE_ACCOUNT(min)                                                                        \
  "SELECT c.customer_id, a.account_id, a.balance_paise, c.date_of_birth FROM customers c"              \
  " JOIN accounts a ON a.customer_id = c.customer_id WHERE c.kyc_status = 'verified'"                   \
  " AND c.rekyc_due_date >= (SELECT today FROM clock) AND a.status = 'active' AND a.balance_paise >= " \
  #min " ORDER BY a.account_id"

// Picks the task's language style and one of two reasons written for it.
static int pick_reason(Task *t, Rng *rng, const char *const reasons[TASK_STYLE_COUNT][2], FimiError *err) {
  t->style = (TaskStyle)task_gen_range(rng, 0, TASK_STYLE_COUNT - 1);
  return task_set(&t->reason, err, "%s", reasons[t->style][rng_next_u64(rng) % 2]);
}

static int assert_rule(Task *t, const char *text, TaskRule rule, const char *a, const char *b, FimiError *err) {
  const char *args[3] = {a, b, NULL};
  return task_add_assertion(t, text, rule, args, err);
}

static const char *const fd_reasons[TASK_STYLE_COUNT][2] = {
    {"I want to put some money in a fixed deposit.", "I'd like to open an FD from my savings."},
    {"Mujhe ek FD karni hai, savings se paisa daalna hai.", "FD kholna hai mujhe, thoda help kijiye."},
    {"fd open karna. from savings", "need fd.. savings se"},
};

// ---- fd_paper: balance, rates, create FD, balance again (FiMI paper) -------
static int gen_fd_paper(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX];
  if (task_gen_pick(ctx, &rng, SQL_ACTIVE_ACCOUNT(2500000), NULL, 4, row, err) != 0) return -1;
  long long balance_rupees = atoll(row[2]) / 100;
  long long amount = task_gen_range(&rng, 10, balance_rupees / 2000) * 1000;  // at most half the balance
  int months = (int)task_gen_range(&rng, 6, 36);
  if (task_set(&t->persona, err, "A salaried customer with idle savings who wants a safe return.") ||
      pick_reason(t, &rng, fd_reasons, err))
    return -1;
  if (task_gen_add_verify(ctx, t, row[0], err) < 0) return -1;
  char amount_text[32], months_text[32], args[512];
  snprintf(amount_text, sizeof amount_text, "%lld", amount);
  snprintf(months_text, sizeof months_text, "%d months", months);
  if (task_add_field(t, "account_number", row[1], err) || task_add_field(t, "amount", amount_text, err) ||
      task_add_field(t, "tenure", months_text, err))
    return -1;
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", row[1]);
  if (task_add_gold(t, "get_account_balance", args, "account_ids", 0, err) < 0 ||
      task_add_gold(t, "get_deposit_loan_rates", "{\"product_type\":\"fd\"}", "product_type", 0, err) < 0)
    return -1;
  snprintf(args, sizeof args, "{\"principal_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", amount,
           months, row[1]);
  int create = task_add_gold(t, "create_fd", args, "principal_amount,tenure_months,source_account", 0, err);
  if (create < 0) return -1;
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", row[1]);
  int after = task_add_gold(t, "get_account_balance", args, "account_ids", 0, err);
  if (after < 0) return -1;
  if (task_add_communicate(t, "fd_id", create, "fd_id", err) ||
      task_add_communicate(t, "maturity_amount", create, "maturity_amount", err) ||
      task_add_communicate(t, "balance_after", after, "balances.0.balance", err))
    return -1;
  const char *rule_called[] = {"create_fd", NULL};
  const char *rule_before[] = {"get_account_balance", "create_fd", NULL};
  if (task_add_assertion(t, "The agent books the fixed deposit.", TASK_RULE_CALLED, rule_called, err) ||
      task_add_assertion(t, "The agent checks the balance before booking the deposit.", TASK_RULE_CALLED_BEFORE,
                         rule_before, err))
    return -1;
  t->max_turns = 24;
  return 0;
}

static const TaskFamily fd_paper = {"fd_paper", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                    "Balance, FD rates, create FD, balance again (the FiMI paper's example).",
                                    gen_fd_paper};

// ---- balance_enquiry: verify, balance (happy, 2 steps) ----------------------
static const char *const balance_reasons[TASK_STYLE_COUNT][2] = {
    {"I'd like to know the balance in my savings account.", "Can you tell me how much money is in my account?"},
    {"Mera account balance kitna hai, bata dijiye.", "Balance check karna tha mujhe."},
    {"balance pls", "acct balance?"},
};
static int gen_balance_enquiry(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], args[256];
  if (task_gen_pick(ctx, &rng, SQL_ACTIVE_ACCOUNT(0), NULL, 4, row, err) != 0) return -1;
  if (task_set(&t->persona, err, "A customer checking funds before paying a bill.") ||
      pick_reason(t, &rng, balance_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "account_number", row[1], err))
    return -1;
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", row[1]);
  int step = task_add_gold(t, "get_account_balance", args, "account_ids", 0, err);
  if (step < 0 || task_add_communicate(t, "balance", step, "balances.0.balance", err)) return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_COMM;
  t->max_turns = 12;
  return 0;
}

// ---- rate_quote: one read without login (tools, 1 step) -------------------
static const char *const rate_products[4][2] = {
    {"fd", "fixed deposits"}, {"rd", "recurring deposits"}, {"savings", "savings accounts"}, {"personal_loan", "personal loans"}};
static int gen_rate_quote(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  rng_seed(&rng, seed);
  int p = (int)task_gen_range(&rng, 0, 3);
  t->style = (TaskStyle)task_gen_range(&rng, 0, TASK_STYLE_COUNT - 1);
  const char *fmt[TASK_STYLE_COUNT] = {"What interest rate do you offer on %s?", "Aapke %s ka rate kya hai?",
                                       "rate for %s?"};
  char args[128];
  snprintf(args, sizeof args, "{\"product_type\":\"%s\"}", rate_products[p][0]);
  if (task_set(&t->persona, err, "A prospective customer comparing banks.") ||
      task_set(&t->reason, err, fmt[t->style], rate_products[p][1]))
    return -1;
  int step = task_add_gold(t, "get_deposit_loan_rates", args, "product_type", 0, err);
  if (step < 0 || task_add_communicate(t, "rate", step, "rates.0.rate_percent", err)) return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_COMM;
  t->max_turns = 8;
  return 0;
}

// ---- imps_over_limit: the limit check comes first, then refuse (edge) ------
static const char *const limit_reasons[TASK_STYLE_COUNT][2] = {
    {"I need to send a large amount by IMPS right now.", "Please make an urgent IMPS transfer to my brother."},
    {"Mujhe IMPS se bada amount bhejna hai abhi.", "Bhai ko turant IMPS karna hai, bada amount hai."},
    {"imps transfer. big amount. urgent", "send imps now pls"},
};
static int gen_imps_over_limit(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], amount[32];
  if (task_gen_pick(ctx, &rng, SQL_ACTIVE_ACCOUNT(0), NULL, 4, row, err) != 0) return -1;
  // Above the IMPS cap of Rs 5,00,000 a transfer (docs/tools.md).
  snprintf(amount, sizeof amount, "%lld", (long long)task_gen_range(&rng, 51, 90) * 10000);
  if (task_set(&t->persona, err, "A customer in a hurry to move a large sum.") ||
      pick_reason(t, &rng, limit_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "amount", amount, err))
    return -1;
  int step = task_add_gold(t, "get_transfer_limits", "{}", NULL, 0, err);
  if (step < 0 || task_add_communicate(t, "imps_limit", step, "imps_per_transaction_limit", err) ||
      assert_rule(t, "The agent checks the transfer limits.", TASK_RULE_CALLED, "get_transfer_limits", NULL, err) ||
      assert_rule(t, "The agent does not attempt the transfer.", TASK_RULE_NOT_CALLED, "transfer_funds", NULL, err) ||
      assert_rule(t, "The agent explains that the amount is above the limit.", TASK_RULE_MENTIONS_ANY, "limit", NULL,
                  err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_COMM | TASK_CHECK_JUDGE;
  t->max_turns = 14;
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
      pick_reason(t, &rng, advice_reasons, err) ||
      assert_rule(t, "The agent declines to give investment tips.", TASK_RULE_MENTIONS_ANY, "cannot", "unable", err) ||
      assert_rule(t, "The conversation ends as out of scope.", TASK_RULE_END_IS, "out_of_scope", NULL, err))
    return -1;
  t->checks = TASK_CHECK_JUDGE;
  t->expected_end = TASK_END_OUT_OF_SCOPE;
  t->max_turns = 6;
  return 0;
}

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
      pick_reason(t, &rng, complaint_reasons, err) ||
      task_add_gold(t, "transfer_to_human_agent", "{\"reason\":\"complaint about recovery agent conduct\"}", NULL, 0,
                    err) < 0 ||
      assert_rule(t, "The agent hands the customer to a human.", TASK_RULE_CALLED, "transfer_to_human_agent", NULL,
                  err) ||
      assert_rule(t, "The conversation ends with a transfer.", TASK_RULE_END_IS, "transfer", NULL, err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE;  // db: the hand-off request (reason text excluded)
  t->expected_end = TASK_END_TRANSFER;
  t->max_turns = 8;
  return 0;
}

// ---- fd_premature_close: consent to the penalty first (seq, 3 steps) --------
static const char *const close_reasons[TASK_STYLE_COUNT][2] = {
    {"I need to break my fixed deposit early, I need the money.", "Please close my FD before maturity."},
    {"Meri FD tod do, paise ki zarurat hai.", "FD premature close karni hai."},
    {"close fd early", "break fd pls need cash"},
};
static int gen_fd_premature_close(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[2][TASK_GEN_COL_MAX], args[256];
  if (task_gen_pick(ctx, &rng,
                    "SELECT f.customer_id, f.fd_id FROM fixed_deposits f JOIN customers c ON c.customer_id ="
                    " f.customer_id JOIN accounts a ON a.account_id = f.source_account WHERE f.status = 'active'"
                    " AND a.status = 'active' ORDER BY f.fd_id",
                    NULL, 2, row, err) != 0)
    return -1;
  if (task_set(&t->persona, err, "A depositor with an urgent expense.") || pick_reason(t, &rng, close_reasons, err) ||
      task_gen_add_verify(ctx, t, row[0], err) < 0 || task_add_field(t, "fd_id", row[1], err) ||
      task_add_field_keyword(t, "fd_id", "deposit number", err) || task_add_field_keyword(t, "fd_id", "which fd", err))
    return -1;
  if (task_add_gold(t, "list_deposits", "{}", NULL, 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"fd_id\":\"%s\",\"customer_confirmed\":true}", row[1]);
  int close = task_add_gold(t, "close_fd_premature", args, "fd_id", 1, err);
  if (close < 0 || task_add_confirm(t, "the premature closure penalty on the interest", -1, NULL, err) ||
      task_add_communicate(t, "payout", close, "payout_amount", err) ||
      assert_rule(t, "The agent asks for consent before closing.", TASK_RULE_MENTIONS_ANY, "penalty", NULL, err))
    return -1;
  t->max_turns = 16;
  return 0;
}

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
  if (task_set(&t->persona, err, "A customer who lost a wallet on the metro.") || pick_reason(t, &rng, card_reasons, err) ||
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
      assert_rule(t, "The agent blocks the card before reissuing it.", TASK_RULE_CALLED_BEFORE, "block_card",
                  "reissue_card", err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE;
  t->kind = TASK_KIND_TOOLS;
  t->max_turns = 16;
  return 0;
}

// ---- pmsby_enrol: eligibility, then enrol with consent (tools, 3 steps) -----
static const char *const pmsby_reasons[TASK_STYLE_COUNT][2] = {
    {"I want to join the PMSBY accident insurance scheme.", "Can you enrol me in the Rs 20 accident cover scheme?"},
    {"Mujhe PMSBY mein enrol karna hai.", "Woh 20 rupaye wala accident insurance chahiye."},
    {"pmsby enrol", "join pmsby pls"},
};
static int gen_pmsby_enrol(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], args[256];
  if (task_gen_pick(ctx, &rng,
                    "SELECT c.customer_id, a.account_id, a.balance_paise, c.date_of_birth FROM customers c JOIN"
                    " accounts a ON a.customer_id = c.customer_id WHERE c.kyc_status = 'verified' AND"
                    " c.rekyc_due_date >= (SELECT today FROM clock) AND a.status = 'active' AND a.account_type ="
                    " 'savings' AND a.balance_paise >= 100000 AND c.date_of_birth BETWEEN date((SELECT today FROM"
                    " clock), '-69 years') AND date((SELECT today FROM clock), '-19 years') AND NOT EXISTS (SELECT 1"
                    " FROM scheme_enrolments e WHERE e.customer_id = c.customer_id AND e.scheme_code = 'pmsby')"
                    " ORDER BY a.account_id",
                    NULL, 4, row, err) != 0)
    return -1;
  if (task_set(&t->persona, err, "A daily commuter who wants cheap accident cover.") ||
      pick_reason(t, &rng, pmsby_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "account_number", row[1], err))
    return -1;
  if (task_add_gold(t, "check_scheme_eligibility", "{\"scheme_code\":\"pmsby\"}", "scheme_code", 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"scheme_code\":\"pmsby\",\"account_id\":\"%s\",\"customer_confirmed\":true}", row[1]);
  int enrol = task_add_gold(t, "enroll_scheme", args, "scheme_code,account_id", 1, err);
  if (enrol < 0 || task_add_confirm(t, "the annual PMSBY premium of Rs 20 debited from the account", -1, NULL, err) ||
      task_add_communicate(t, "enrolment_id", enrol, "enrolment_id", err) ||
      assert_rule(t, "The agent checks eligibility before enrolling.", TASK_RULE_CALLED_BEFORE,
                  "check_scheme_eligibility", "enroll_scheme", err))
    return -1;
  t->max_turns = 14;
  return 0;
}

// ---- fd_planner: eight steps, KYC to booking (seq, 8 steps) -----------------
static const char *const planner_reasons[TASK_STYLE_COUNT][2] = {
    {"I want to plan a fixed deposit: check my KYC, my accounts and what I would earn, then book it.",
     "Help me choose and book the right FD from my account."},
    {"FD plan karna hai: KYC, balance, rate, maturity sab dekh ke book kar dijiye.",
     "Mere liye sahi FD dekh ke book kar do."},
    {"fd plan. kyc, balance, rates, maturity then book", "fd book karna. sab check karke"},
};
static int gen_fd_planner(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], args[512], amount[32], months[32];
  if (task_gen_pick(ctx, &rng, SQL_ACTIVE_ACCOUNT(2500000), NULL, 4, row, err) != 0) return -1;
  long long amt = task_gen_range(&rng, 5, atoll(row[2]) / 100 / 2000) * 1000;
  int m = (int)task_gen_range(&rng, 12, 60);
  snprintf(amount, sizeof amount, "%lld", amt);
  snprintf(months, sizeof months, "%d months", m);
  if (task_set(&t->persona, err, "A careful planner who wants to see the numbers first.") ||
      pick_reason(t, &rng, planner_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "account_number", row[1], err) || task_add_field(t, "amount", amount, err) ||
      task_add_field(t, "tenure", months, err))
    return -1;
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", row[1]);
  if (task_add_gold(t, "get_kyc_status", "{}", NULL, 0, err) < 0 || task_add_gold(t, "list_accounts", "{}", NULL, 0, err) < 0 ||
      task_add_gold(t, "get_account_balance", args, "account_ids", 0, err) < 0 ||
      task_add_gold(t, "get_deposit_loan_rates", "{\"product_type\":\"fd\"}", "product_type", 0, err) < 0)
    return -1;
  snprintf(args, sizeof args, "{\"principal_amount\":%lld,\"tenure_months\":%d}", amt, m);
  int calc = task_add_gold(t, "calculate_fd_maturity", args, "principal_amount,tenure_months", 0, err);
  snprintf(args, sizeof args, "{\"principal_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", amt, m, row[1]);
  int create = task_add_gold(t, "create_fd", args, "principal_amount,tenure_months,source_account", 0, err);
  if (calc < 0 || create < 0 || task_add_gold(t, "list_deposits", "{}", NULL, 0, err) < 0) return -1;
  if (task_add_communicate(t, "maturity_amount", calc, "maturity_amount", err) ||
      task_add_communicate(t, "fd_id", create, "fd_id", err) ||
      assert_rule(t, "The agent shows the maturity before booking.", TASK_RULE_CALLED_BEFORE, "calculate_fd_maturity",
                  "create_fd", err))
    return -1;
  t->max_turns = 30;
  return 0;
}

// ---- policy_enquiry: which policies do I hold (happy, insurance) ------------
static const char *const policy_reasons[TASK_STYLE_COUNT][2] = {
    {"Which insurance policies do I have with you?", "I want the details of my insurance policy."},
    {"Meri kaunsi insurance policies hain aapke paas?", "Policy ki details chahiye mujhe."},
    {"my insurance policy details", "policy info pls"},
};
static int gen_policy_enquiry(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[1][TASK_GEN_COL_MAX];
  if (task_gen_pick(ctx, &rng,
                    "SELECT customer_id FROM insurance_policies GROUP BY customer_id HAVING count(*) = 1"
                    " ORDER BY customer_id",
                    NULL, 1, row, err) != 0)
    return -1;
  if (task_set(&t->persona, err, "A policyholder who lost the policy papers.") ||
      pick_reason(t, &rng, policy_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0)
    return -1;
  int step = task_add_gold(t, "list_insurance_policies", "{}", NULL, 0, err);
  if (step < 0 || task_add_communicate(t, "policy_id", step, "policies.0.policy_id", err) ||
      task_add_communicate(t, "sum_assured", step, "policies.0.sum_assured", err))
    return -1;
  t->checks = TASK_CHECK_SEQ | TASK_CHECK_COMM;
  t->kind = TASK_KIND_HAPPY;
  t->max_turns = 12;
  return 0;
}

static const TaskFamily balance_enquiry = {"balance_enquiry", TASK_USE_ACCOUNTS_KYC, TASK_KIND_HAPPY,
                                           "Verify, then say the balance of one account.", gen_balance_enquiry};
static const TaskFamily rate_quote = {"rate_quote", TASK_USE_DEPOSITS_LOANS, TASK_KIND_TOOLS,
                                      "One rate lookup without login.", gen_rate_quote};
static const TaskFamily imps_over_limit = {"imps_over_limit", TASK_USE_ACCOUNTS_KYC, TASK_KIND_EDGE,
                                           "IMPS above the cap: check limits first, then refuse.", gen_imps_over_limit};
static const TaskFamily investment_advice = {"investment_advice", TASK_USE_CROSS_CUTTING, TASK_KIND_EDGE,
                                             "Stock/crypto tips: out of scope, refuse.", gen_investment_advice};
static const TaskFamily recovery_complaint = {"recovery_complaint", TASK_USE_CROSS_CUTTING, TASK_KIND_EDGE,
                                              "Harassment complaint: hand off to a human.", gen_recovery_complaint};
static const TaskFamily fd_premature_close = {"fd_premature_close", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                              "List deposits, consent to the penalty, close the FD.",
                                              gen_fd_premature_close};
static const TaskFamily lost_card_reissue = {"lost_card_reissue", TASK_USE_CROSS_CUTTING, TASK_KIND_TOOLS,
                                             "Block a lost debit card and reissue it after consent to the charge.",
                                             gen_lost_card_reissue};
static const TaskFamily pmsby_enrol = {"pmsby_enrol", TASK_USE_GOV_SCHEMES, TASK_KIND_TOOLS,
                                       "PMSBY eligibility, consent to the premium, enrol.", gen_pmsby_enrol};
static const TaskFamily fd_planner = {"fd_planner", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                      "Eight steps: KYC, accounts, balance, rates, maturity, book, list.",
                                      gen_fd_planner};
static const TaskFamily policy_enquiry = {"policy_enquiry", TASK_USE_INSURANCE, TASK_KIND_HAPPY,
                                          "Verify, list the insurance policy, say its id and cover.",
                                          gen_policy_enquiry};

const TaskFamily *const env_families_a[] = {&fd_paper,           &balance_enquiry,   &rate_quote,
                                            &imps_over_limit,    &investment_advice, &recovery_complaint,
                                            &fd_premature_close, &lost_card_reissue, &pmsby_enrol,
                                            &fd_planner,         &policy_enquiry};
const int env_families_a_count = (int)(sizeof env_families_a / sizeof env_families_a[0]);
