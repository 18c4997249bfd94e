// env/tasks/deposits_loans.c: task families of the "deposits & loans" use case:
// FD/RD quotes and bookings, premature closure with its penalty (RD accepted,
// FD declined), loan eligibility and EMI, personal loan application with its
// fee, low-score refusal, part-prepayment, a 7-step foreclosure, gold loans
// (booking and the 75% loan-to-value refusal), rate comparison and an 8-step FD
// ladder.
// Also the oldest families of this use case, written with the task_gen_*
// helpers directly: fd_paper (the FiMI paper's example: balance, rates, create
// FD, balance again; the pattern to copy), rate_quote, fd_premature_close and
// the 8-step fd_planner.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/family_helpers.h"

#define KYC_OK "c.kyc_status = 'verified' AND c.rekyc_due_date >= (SELECT today FROM clock)"

static const char *const PERSONAS[] = {
    "retired government employee planning interest income", "salaried engineer saving for a house",
    "shopkeeper with seasonal cash", "nurse on night shifts, calling between duties",
    "first-time investor, a little nervous", "farmer's son handling the family's savings"};
#define NP ((int)(sizeof PERSONAS / sizeof PERSONAS[0]))

// Records the loan's type as the variant, named as the `variants` lists
// name loans ("personal" -> "personal_loan").
static int loan_variant(Task *t, const char *loan_type, FimiError *err) {
  char prefix[TASK_GEN_COL_MAX + 8];
  snprintf(prefix, sizeof prefix, "%s_loan", loan_type);
  return fam_variant(t, err, prefix);
}

// ---- fd_maturity_quote (tools, 1 step): what would an FD pay? --------------
static int gen_fd_maturity_quote(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  fam_rng(&rng, "fd_maturity_quote", seed);
  static const int months[] = {3, 6, 9, 12, 18, 24, 36, 60};
  int64_t amount = task_gen_range(&rng, 5, 500) * 1000;
  int m = months[task_gen_range(&rng, 0, 7)];
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", m);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Just a question: if I put Rs %s in an FD for %s, how much will I get at maturity?",
                 "Agar Rs %s ki FD %s ke liye karun to maturity pe kitna milega?", "fd %s, %s. maturity amt?",
                 amount_text, tenure));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "principal", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  int s = fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_months", 0,
                  "{\"principal_amount\":%lld,\"tenure_months\":%d}", (long long)amount, m);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "maturity_amount", s, "maturity_amount", err));
  FAM_TRY(task_add_communicate(t, "interest", s, "interest", err));
  FAM_TRY(fam_assert(t, err, "The agent only quotes and does not book a deposit.", TASK_RULE_NOT_CALLED, "create_fd",
                   NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rd_open (seq, 4 steps): quote an RD, open it, list deposits ------------
static int gen_rd_open(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rd_open", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.balance_paise FROM customers c JOIN accounts a"
                 " ON a.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"
                 " AND a.balance_paise >= 2000000 ORDER BY a.account_id",
                 3, c, err));
  int64_t monthly = task_gen_range(&rng, 5, 100) * 100;
  int months = (int)task_gen_range(&rng, 1, 10) * 6;
  char monthly_text[32], tenure[32];
  snprintf(monthly_text, sizeof monthly_text, "%lld", (long long)monthly);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to start a recurring deposit of Rs %s a month for %s. What will it pay? Then open it.",
                 "Rs %s mahine ka RD %s ke liye shuru karna hai. Kitna milega batao, phir khol do.",
                 "RD %s monthly, %s. maturity? then open", monthly_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "monthly_amount", monthly_text, "monthly", "instalment", "how much", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "debit", NULL));
  int q = fam_gold(t, err, "calculate_rd_maturity", "monthly_amount,tenure_months", 0,
                  "{\"monthly_amount\":%lld,\"tenure_months\":%d}", (long long)monthly, months);
  FAM_TRY(q);
  int s = fam_gold(t, err, "create_rd", "monthly_amount,tenure_months,source_account", 0,
                  "{\"monthly_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", (long long)monthly,
                  months, c[1]);
  FAM_TRY(s);
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  FAM_TRY(task_add_communicate(t, "rd_id", s, "rd_id", err));
  FAM_TRY(task_add_communicate(t, "maturity_amount", s, "maturity_amount", err));
  FAM_TRY(fam_assert(t, err, "The agent quotes the maturity before opening the RD.", TASK_RULE_CALLED_BEFORE,
                   "calculate_rd_maturity", "create_rd", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// An active FD of a customer whose source account is active. Columns:
// customer, fd id, source account, principal (paise).
#define SQL_ACTIVE_FD                                                                                      \
  "SELECT f.customer_id, f.fd_id, f.source_account, f.principal_paise FROM fixed_deposits f JOIN accounts a" \
  " ON a.account_id = f.source_account WHERE f.status = 'active' AND a.status = 'active'"                   \
  " AND f.start_date <= date((SELECT today FROM clock), '-8 days') ORDER BY f.fd_id"

// ---- rd_break_penalty (seq, 4 steps): close an RD early after confirming -------
static int gen_rd_break_penalty(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rd_break_penalty", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT r.customer_id, r.rd_id, r.source_account FROM recurring_deposits r JOIN accounts a"
                 " ON a.account_id = r.source_account WHERE r.status = 'active' AND a.status = 'active'"
                 " AND r.start_date <= date((SELECT today FROM clock), '-8 days') ORDER BY r.rd_id",
                 3, c, err));
  static const char *const why[][3] = {{"a medical emergency", "hospital ka kharcha", "medical emergency"},
                                       {"my daughter's college fees", "beti ki college fees", "college fees"},
                                       {"a house repair", "ghar ki repair", "house repair"}};
  int k = (int)task_gen_range(&rng, 0, 2);
  TaskStyle style = fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need to close my recurring deposit %s early because of %s.",
                 "Mera RD %s band karna hai, %s ke liye paise chahiye.", "close rd %s early. %s", c[1],
                 why[k][style == TASK_STYLE_ENGLISH ? 0 : style == TASK_STYLE_HINGLISH ? 1 : 2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  int s = fam_gold(t, err, "close_rd_premature", "rd_id", 1, "{\"rd_id\":\"%s\",\"customer_confirmed\":true}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the premature-closure penalty", s, "penalty_interest_forgone", err));
  int b = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[2]);
  FAM_TRY(b);
  FAM_TRY(task_add_communicate(t, "payout_amount", s, "payout_amount", err));
  FAM_TRY(task_add_communicate(t, "balance after the payout", b, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent tells the customer about the penalty.", TASK_RULE_MENTIONS_ANY, "penalty", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- fd_break_declined (edge): the customer refuses the penalty -----------------
static int gen_fd_break_declined(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "fd_break_declined", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_ACTIVE_FD, 4, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I am thinking of closing FD %s early, but only if there is no penalty.",
                 "FD %s jaldi band karne ka soch raha hoon, lekin penalty lagegi to nahi karna.",
                 "close fd %s? no penalty only", c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  // No confirmations: the customer declines the penalty, so nothing is closed.
  FAM_TRY(fam_assert(t, err, "The agent does not close the deposit the customer declined to pay a penalty on.",
                   TASK_RULE_NOT_CALLED, "close_fd_premature", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the premature-closure penalty.", TASK_RULE_MENTIONS_ANY, "penalty",
                   NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// Personal loan candidates: KYC current, credit score from 650, an active
// account, and room for a new EMI: half the net monthly income minus the
// existing EMIs (paise) is at least Rs 5,000. Columns: customer, account,
// that room in paise.
#define SQL_LOAN_OK                                                                                         \
  "SELECT c.customer_id, a.account_id, c.monthly_income_paise / 2 - coalesce((SELECT sum(l.emi_paise)"      \
  " FROM loans l WHERE l.customer_id = c.customer_id AND l.status = 'active'), 0) AS room FROM customers c"  \
  " JOIN accounts a ON a.customer_id = c.customer_id WHERE " KYC_OK " AND c.credit_score >= 650"            \
  " AND a.status = 'active' AND room >= 500000 ORDER BY a.account_id"

// Picks a tenure and an amount the eligibility rule accepts: the EMI of a
// loan over 24+ months at up to 16% is below 1.2 * amount / months, so an
// amount of at most room/2 * months / 1.4 keeps the EMI under half the room.
static void loan_amount(Rng *rng, const char *room_paise, int64_t *amount, int *months) {
  int64_t room = atoll(room_paise) / 100;
  *months = (int)task_gen_range(rng, 2, 5) * 12;
  int64_t cap = room / 2 * *months * 10 / 14;
  if (cap > 2500000) cap = 2500000;
  if (cap < 50000) cap = 50000;
  *amount = task_gen_range(rng, 50, cap / 1000) * 1000;
}

// ---- loan_emi_check (tools, 3 steps): eligibility, then the EMI ----------------
static int gen_loan_emi_check(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "loan_emi_check", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_LOAN_OK, 3, c, err));
  int64_t amount;
  int months;
  loan_amount(&rng, c[2], &amount, &months);
  char amount_text[32], tenure[32], rate[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Am I eligible for a personal loan of Rs %s over %s? And what would the EMI and total interest be?",
                 "Rs %s ka personal loan %s ke liye mil sakta hai kya? EMI aur total interest kitna hoga?",
                 "personal loan %s, %s. eligible? emi?", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  int e = fam_gold(t, err, "check_loan_eligibility", "loan_type,amount,tenure_months", 0,
                  "{\"loan_type\":\"personal\",\"amount\":%lld,\"tenure_months\":%d}", (long long)amount, months);
  FAM_TRY(e);
  char eligible[16];
  FAM_TRY(fam_replay_text(ctx, t, e, "eligible", eligible, sizeof eligible, err));
  if (strcmp(eligible, "true") != 0) return fimi_fail(err, "loan_emi_check: customer %s not eligible", c[0]);
  FAM_TRY(fam_replay_text(ctx, t, e, "interest_rate_percent", rate, sizeof rate, err));
  int s = fam_gold(t, err, "calculate_emi", "principal_amount,annual_rate_percent,tenure_months", 0,
                  "{\"principal_amount\":%lld,\"annual_rate_percent\":%s,\"tenure_months\":%d}", (long long)amount,
                  rate, months);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "emi", s, "emi", err));
  FAM_TRY(task_add_communicate(t, "total_interest", s, "total_interest", err));
  FAM_TRY(fam_assert(t, err, "The agent does not apply for the loan.", TASK_RULE_NOT_CALLED, "apply_loan", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- personal_loan_apply (seq, 4 steps): eligibility, fee confirmed, apply -------
static int gen_personal_loan_apply(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "personal_loan_apply", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_LOAN_OK, 3, c, err));
  int64_t amount;
  int months;
  loan_amount(&rng, c[2], &amount, &months);
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I'd like a personal loan of Rs %s for %s, credited to my account.",
                 "Mujhe Rs %s ka personal loan chahiye %s ke liye, account mein daal do.",
                 "personal loan %s. %s. apply", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "credit", "disbursal", NULL));
  FAM_TRY(fam_gold(t, err, "check_loan_eligibility", "loan_type,amount,tenure_months", 0,
                 "{\"loan_type\":\"personal\",\"amount\":%lld,\"tenure_months\":%d}", (long long)amount, months));
  int s = fam_gold(t, err, "apply_loan", "loan_type,amount,tenure_months,disbursal_account", 1,
                  "{\"loan_type\":\"personal\",\"amount\":%lld,\"tenure_months\":%d,\"disbursal_account\":\"%s\","
                  "\"customer_confirmed\":true}",
                  (long long)amount, months, c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the processing fee", s, "processing_fee", err));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(task_add_communicate(t, "loan_id", s, "loan_id", err));
  FAM_TRY(task_add_communicate(t, "emi", s, "emi", err));
  FAM_TRY(fam_assert(t, err, "The agent checks eligibility before applying.", TASK_RULE_CALLED_BEFORE,
                   "check_loan_eligibility", "apply_loan", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- loan_low_score (edge): credit score below 650, no application ------------
static int gen_loan_low_score(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "loan_low_score", seed);
  char c[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers WHERE credit_score < 650 ORDER BY customer_id", 1, c,
                 err));
  int64_t amount = task_gen_range(&rng, 1, 20) * 25000;
  int months = (int)task_gen_range(&rng, 1, 5) * 12;
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please sanction me a personal loan of Rs %s for %s today.",
                 "Aaj hi Rs %s ka personal loan %s ke liye sanction kar do.", "need loan %s %s today", amount_text,
                 tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  int s = fam_gold(t, err, "check_loan_eligibility", "loan_type,amount,tenure_months", 0,
                  "{\"loan_type\":\"personal\",\"amount\":%lld,\"tenure_months\":%d}", (long long)amount, months);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "credit score", s, "credit_score", err));
  FAM_TRY(fam_assert(t, err, "The agent does not apply for a loan the customer is not eligible for.",
                   TASK_RULE_NOT_CALLED, "apply_loan", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the credit score rule.", TASK_RULE_MENTIONS_ANY, "credit score", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- loan_part_prepay (seq, 4 steps): quote, prepay, loan details ----------------
static int gen_loan_part_prepay(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "loan_part_prepay", seed);
  char c[6][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT l.customer_id, l.loan_id, l.account_id, l.outstanding_paise, a.balance_paise, l.loan_type"
                 " FROM loans l JOIN accounts a ON a.account_id = l.account_id WHERE l.status = 'active'"
                 " AND a.status = 'active' AND (l.loan_type <> 'personal' OR l.emis_paid >= 6)"
                 " AND a.balance_paise >= 1000000 ORDER BY l.loan_id",
                 6, c, err));
  int64_t cap = atoll(c[3]) / 100 / 2, balance = atoll(c[4]) / 100 / 2;
  if (balance < cap) cap = balance;
  int64_t amount = task_gen_range(&rng, 1, cap / 1000 > 1 ? cap / 1000 : 1) * 1000;
  int charged = strcmp(c[5], "personal") == 0;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I got a bonus and want to prepay Rs %s of my loan %s.",
                 "Bonus mila hai, loan %2$s mein Rs %1$s prepay karna hai.", "prepay %s on loan %s", amount_text,
                 c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "prepay", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[2], "account", "debit", NULL));
  int q = fam_gold(t, err, "get_foreclosure_quote", "loan_id,prepay_amount", 0,
                  "{\"loan_id\":\"%s\",\"prepay_amount\":%lld}", c[1], (long long)amount);
  FAM_TRY(q);
  int s = charged ? fam_gold(t, err, "prepay_loan", "loan_id,amount,source_account", 1,
                            "{\"loan_id\":\"%s\",\"amount\":%lld,\"source_account\":\"%s\","
                            "\"customer_confirmed\":true}",
                            c[1], (long long)amount, c[2])
                  : fam_gold(t, err, "prepay_loan", "loan_id,amount,source_account", 0,
                            "{\"loan_id\":\"%s\",\"amount\":%lld,\"source_account\":\"%s\"}", c[1], (long long)amount,
                            c[2]);
  FAM_TRY(s);
  if (charged) FAM_TRY(task_add_confirm(t, "the prepayment charge", q, "total_payable", err));
  int d = fam_gold(t, err, "get_loan_details", "loan_id", 0, "{\"loan_id\":\"%s\"}", c[1]);
  FAM_TRY(d);
  FAM_TRY(task_add_communicate(t, "total payable", q, "total_payable", err));
  FAM_TRY(task_add_communicate(t, "outstanding after prepayment", d, "outstanding", err));
  FAM_TRY(fam_assert(t, err, "The agent quotes the prepayment before making it.", TASK_RULE_CALLED_BEFORE,
                   "get_foreclosure_quote", "prepay_loan", NULL));
  FAM_TRY(loan_variant(t, c[5], err));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- loan_foreclose_planner (seq, 7 steps): close a loan from savings ---------------
static int gen_loan_foreclose_planner(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "loan_foreclose_planner", seed);
  char c[6][TASK_GEN_COL_MAX], sql[256];
  // Gold loans, and personal loans after 6 EMIs (the foreclosure rule);
  // home loans are too large for a savings account.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT l.customer_id, l.loan_id, l.account_id, l.outstanding_paise, a.balance_paise, l.loan_type"
                 " FROM loans l JOIN accounts a ON a.account_id = l.account_id WHERE l.status = 'active'"
                 " AND a.status = 'active' AND (l.loan_type = 'gold' OR (l.loan_type = 'personal'"
                 " AND l.emis_paid >= 6)) ORDER BY l.loan_id",
                 6, c, err));
  // The story: the customer sold some land; the proceeds already sit in the
  // account, so it covers the outstanding principal and the charge.
  int64_t need = atoll(c[3]) * 11 / 10 + 100000 - atoll(c[4]);
  if (need > 0) {
    snprintf(sql, sizeof sql, "UPDATE accounts SET balance_paise = balance_paise + %lld WHERE account_id = '%s'",
             (long long)need, c[2]);
    FAM_TRY(task_add_fixture(t, sql, err));
  }
  int charged = strcmp(c[5], "personal") == 0;
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to close my %s loan completely from my savings. Tell me what is left and what it will cost.",
                 "Mera %s loan poora band karna hai savings se. Kitna baaki hai aur kitna lagega, batao.",
                 "close %s loan fully. how much?", c[5]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[2], "account", "debit", "savings", NULL));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_loan_details", "loan_id", 0, "{\"loan_id\":\"%s\"}", c[1]));
  int q = fam_gold(t, err, "get_foreclosure_quote", "loan_id", 0, "{\"loan_id\":\"%s\"}", c[1]);
  FAM_TRY(q);
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[2]));
  int s = charged ? fam_gold(t, err, "foreclose_loan", "loan_id,source_account", 1,
                            "{\"loan_id\":\"%s\",\"source_account\":\"%s\",\"customer_confirmed\":true}", c[1], c[2])
                  : fam_gold(t, err, "foreclose_loan", "loan_id,source_account", 0,
                            "{\"loan_id\":\"%s\",\"source_account\":\"%s\"}", c[1], c[2]);
  FAM_TRY(s);
  if (charged) FAM_TRY(task_add_confirm(t, "the foreclosure charge", q, "total_payable", err));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(task_add_communicate(t, "total payable", q, "total_payable", err));
  FAM_TRY(fam_assert(t, err, "The agent quotes the foreclosure before closing the loan.", TASK_RULE_CALLED_BEFORE,
                   "get_foreclosure_quote", "foreclose_loan", NULL));
  FAM_TRY(loan_variant(t, c[5], err));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

static const int KARATS[] = {18, 20, 22, 24};

// ---- gold_loan_book (seq, 4 steps): rate, quote, apply with fee, balance --------
static int gen_gold_loan_book(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "gold_loan_book", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE " KYC_OK " AND a.status = 'active' ORDER BY a.account_id",
                 2, c, err));
  int grams = (int)task_gen_range(&rng, 10, 120);
  int karat = KARATS[task_gen_range(&rng, 0, 3)];
  int months = (int)task_gen_range(&rng, 3, 12);
  // Largest loan: grams * 7000 * karat / 22 * 75%; ask for a round amount below it.
  int64_t max_loan = (int64_t)grams * 7000 * karat / 22 * 3 / 4;
  int64_t amount = task_gen_range(&rng, 1, max_loan / 1000 - 1 > 1 ? max_loan / 1000 - 1 : 1) * 1000;
  char grams_text[32], karat_text[16], amount_text[32], tenure[32];
  snprintf(grams_text, sizeof grams_text, "%d grams", grams);
  snprintf(karat_text, sizeof karat_text, "%d carat", karat);
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I have %s of %s gold jewellery and need a gold loan of Rs %s.",
                 "Mere paas %s %s sona hai, Rs %s ka gold loan chahiye.", "gold loan. %s %s. need %s", grams_text,
                 karat_text, amount_text));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "gold_weight", grams_text, "weight", "grams", NULL));
  FAM_TRY(fam_field(t, err, "purity", karat_text, "karat", "carat", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "credit", "disbursal", NULL));
  int q = fam_gold(t, err, "get_gold_loan_quote", "gold_weight_grams,purity_karat", 0,
                  "{\"gold_weight_grams\":%d,\"purity_karat\":%d}", grams, karat);
  FAM_TRY(q);
  int s = fam_gold(t, err, "apply_gold_loan", "gold_weight_grams,purity_karat,amount,tenure_months,disbursal_account", 1,
                  "{\"gold_weight_grams\":%d,\"purity_karat\":%d,\"amount\":%lld,\"tenure_months\":%d,"
                  "\"disbursal_account\":\"%s\",\"customer_confirmed\":true}",
                  grams, karat, (long long)amount, months, c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the gold loan processing fee", s, "processing_fee", err));
  int b = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]);
  FAM_TRY(b);
  FAM_TRY(task_add_communicate(t, "loan_id", s, "loan_id", err));
  FAM_TRY(task_add_communicate(t, "maximum loan", q, "max_loan_amount", err));
  FAM_TRY(task_add_communicate(t, "balance after disbursal", b, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent values the gold before booking the loan.", TASK_RULE_CALLED_BEFORE,
                   "get_gold_loan_quote", "apply_gold_loan", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- gold_loan_over_ltv (edge): more than 75% of the gold value is refused -------
static int gen_gold_loan_over_ltv(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  fam_rng(&rng, "gold_loan_over_ltv", seed);
  int grams = (int)task_gen_range(&rng, 5, 80);
  int karat = KARATS[task_gen_range(&rng, 0, 3)];
  int64_t value = (int64_t)grams * 7000 * karat / 22;
  int64_t amount = (value / 1000 + task_gen_range(&rng, 0, 5)) * 1000;  // at least the full value: over 75%
  char grams_text[32], karat_text[16], amount_text[32];
  snprintf(grams_text, sizeof grams_text, "%d grams", grams);
  snprintf(karat_text, sizeof karat_text, "%d carat", karat);
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want a gold loan of Rs %3$s against %1$s of %2$s gold. Can I get the full amount?",
                 "%s %s sone pe Rs %s ka loan chahiye, poora milega na?", "%s %s gold. loan %s possible?",
                 grams_text, karat_text, amount_text));
  FAM_TRY(fam_field(t, err, "gold_weight", grams_text, "weight", "grams", NULL));
  FAM_TRY(fam_field(t, err, "purity", karat_text, "karat", "carat", NULL));
  FAM_TRY(fam_gold(t, err, "get_gold_rate", "", 0, "{}"));
  int q = fam_gold(t, err, "get_gold_loan_quote", "gold_weight_grams,purity_karat", 0,
                  "{\"gold_weight_grams\":%d,\"purity_karat\":%d}", grams, karat);
  FAM_TRY(q);
  FAM_TRY(task_add_communicate(t, "maximum loan", q, "max_loan_amount", err));
  FAM_TRY(fam_assert(t, err, "The agent does not book a loan above 75% of the gold value.", TASK_RULE_NOT_CALLED,
                   "apply_gold_loan", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the 75% loan-to-value cap.", TASK_RULE_MENTIONS_ANY, "75%", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- deposit_rates_compare (tools, 3 steps): FD lump sum against an RD -----------
static int gen_deposit_rates_compare(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  fam_rng(&rng, "deposit_rates_compare", seed);
  int months = (int)task_gen_range(&rng, 1, 5) * 12;
  int64_t monthly = task_gen_range(&rng, 10, 100) * 100;
  int64_t lump = monthly * months;
  char monthly_text[32], lump_text[32], tenure[32];
  snprintf(monthly_text, sizeof monthly_text, "%lld", (long long)monthly);
  snprintf(lump_text, sizeof lump_text, "%lld", (long long)lump);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Which pays more over %s: an FD of Rs %s now, or an RD of Rs %s a month? Show me today's rates too.",
                 "%s ke liye kya better hai: abhi Rs %s ki FD ya Rs %s mahine ka RD? Aaj ke rates bhi batana.",
                 "%s: fd %s vs rd %s/month? rates?", tenure, lump_text, monthly_text));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"fd\"}"));
  int f = fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_months", 0,
                  "{\"principal_amount\":%lld,\"tenure_months\":%d}", (long long)lump, months);
  FAM_TRY(f);
  int r = fam_gold(t, err, "calculate_rd_maturity", "monthly_amount,tenure_months", 0,
                  "{\"monthly_amount\":%lld,\"tenure_months\":%d}", (long long)monthly, months);
  FAM_TRY(r);
  FAM_TRY(task_add_communicate(t, "FD maturity", f, "maturity_amount", err));
  FAM_TRY(task_add_communicate(t, "RD maturity", r, "maturity_amount", err));
  FAM_TRY(fam_assert(t, err, "The agent does not open any deposit.", TASK_RULE_NOT_CALLED, "create_fd", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- fd_ladder (seq, 8 steps): balance, rates, three FDs, list, balance ----------
static int gen_fd_ladder(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "fd_ladder", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.balance_paise, a.account_type FROM customers c"
                 " JOIN accounts a ON a.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"
                 " AND a.balance_paise >= 6000000 ORDER BY a.account_id",
                 4, c, err));
  int64_t each = task_gen_range(&rng, 10, atoll(c[2]) / 100 / 6000 > 10 ? atoll(c[2]) / 100 / 6000 : 10) * 1000;
  static const int ladders[][3] = {{12, 24, 36}, {6, 12, 24}, {12, 36, 60}};
  const int *m = ladders[task_gen_range(&rng, 0, 2)];
  char each_text[32], plan[64];
  snprintf(each_text, sizeof each_text, "%lld", (long long)each);
  snprintf(plan, sizeof plan, "%d, %d and %d months", m[0], m[1], m[2]);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to build an FD ladder: three deposits of Rs %s each, for %s. Check my balance first.",
                 "Teen FD banani hain, har ek Rs %s ki, %s ke liye. Pehle balance check kar lo.",
                 "fd ladder. 3 x %s. %s. balance first", each_text, plan));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "debit", NULL));
  FAM_TRY(fam_field(t, err, "amount_each", each_text, "how much", "amount", NULL));
  FAM_TRY(fam_field(t, err, "tenures", plan, "tenure", "months", "period", NULL));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"fd\"}"));
  int fd[3];
  for (int i = 0; i < 3; i++) {
    fd[i] = fam_gold(t, err, "create_fd", "principal_amount,tenure_months,source_account", 0,
                    "{\"principal_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", (long long)each, m[i],
                    c[1]);
    FAM_TRY(fd[i]);
  }
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  int b = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]);
  FAM_TRY(b);
  for (int i = 0; i < 3; i++) FAM_TRY(task_add_communicate(t, "fd_id", fd[i], "fd_id", err));
  FAM_TRY(task_add_communicate(t, "balance after the deposits", b, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent checks the balance before booking.", TASK_RULE_CALLED_BEFORE,
                   "get_account_balance", "create_fd", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
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
  if (task_gen_pick(ctx, &rng, FAM_SQL_ACTIVE_ACCOUNT(2500000), NULL, 4, row, err) != 0) return -1;
  long long balance_rupees = atoll(row[2]) / 100;
  long long amount = task_gen_range(&rng, 10, balance_rupees / 2000) * 1000;  // at most half the balance
  int months = (int)task_gen_range(&rng, 6, 36);
  if (task_set(&t->persona, err, "A salaried customer with idle savings who wants a safe return.") ||
      fam_pick_reason(t, &rng, fd_reasons, err))
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
  if (fam_account_variant(ctx, t, row[1], err) != 0) return -1;
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 24;
  return 0;
}

// No app channel: the paper's example is the call that starts with
// verify_customer, and tests rely on that step (tests/test_mcp.c,
// tests/test_env_episode.c).
const TaskFamily fam_fd_paper = {"fd_paper", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                    "Balance, FD rates, create FD, balance again (the FiMI paper's example).",
                                    gen_fd_paper, TASK_SLICE_SHALLOW, 0,
    "savings,current"};

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
  if (step < 0 || task_add_communicate(t, "rate", step, "rates.0.rate_percent", err) ||
      fam_variant(t, err, rate_products[p][0]) != 0)
    return -1;
  t->checks = FAM_CHECKS_COMM;
  t->max_turns = 8;
  return 0;
}
const TaskFamily fam_rate_quote = {"rate_quote", TASK_USE_DEPOSITS_LOANS, TASK_KIND_TOOLS,
                                      "One rate lookup without login.", gen_rate_quote, TASK_SLICE_SHALLOW,
                                      TASK_FAMILY_COMMUNICATION,
    "fd,rd,savings,personal_loan"};

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
  if (task_set(&t->persona, err, "A depositor with an urgent expense.") || fam_pick_reason(t, &rng, close_reasons, err) ||
      task_gen_add_verify(ctx, t, row[0], err) < 0 || task_add_field(t, "fd_id", row[1], err) ||
      task_add_field_keyword(t, "fd_id", "deposit number", err) || task_add_field_keyword(t, "fd_id", "which fd", err))
    return -1;
  if (task_add_gold(t, "list_deposits", "{}", NULL, 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"fd_id\":\"%s\",\"customer_confirmed\":true}", row[1]);
  int close = task_add_gold(t, "close_fd_premature", args, "fd_id", 1, err);
  if (close < 0 || task_add_confirm(t, "the premature closure penalty on the interest", -1, NULL, err) ||
      task_add_communicate(t, "payout", close, "payout_amount", err) ||
      fam_assert_rule(t, "The agent asks for consent before closing.", TASK_RULE_MENTIONS_ANY, "penalty", NULL, err))
    return -1;
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 16;
  return 0;
}
const TaskFamily fam_fd_premature_close = {"fd_premature_close", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                              "List deposits, consent to the penalty, close the FD.",
                                              gen_fd_premature_close, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS,
    "fd"};

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
  if (task_gen_pick(ctx, &rng, FAM_SQL_ACTIVE_ACCOUNT(2500000), NULL, 4, row, err) != 0) return -1;
  long long amt = task_gen_range(&rng, 5, atoll(row[2]) / 100 / 2000) * 1000;
  int m = (int)task_gen_range(&rng, 12, 60);
  snprintf(amount, sizeof amount, "%lld", amt);
  snprintf(months, sizeof months, "%d months", m);
  if (task_set(&t->persona, err, "A careful planner who wants to see the numbers first.") ||
      fam_pick_reason(t, &rng, planner_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
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
      fam_assert_rule(t, "The agent shows the maturity before booking.", TASK_RULE_CALLED_BEFORE, "calculate_fd_maturity",
                  "create_fd", err) ||
      fam_account_variant(ctx, t, row[1], err) != 0)
    return -1;
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 30;
  return 0;
}
const TaskFamily fam_fd_planner = {"fd_planner", TASK_USE_DEPOSITS_LOANS, TASK_KIND_SEQ,
                                      "Eight steps: KYC, accounts, balance, rates, maturity, book, list.",
                                      gen_fd_planner, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS,
    "savings,current"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
// The loan families' variants are the loan types their SQL can pick (gold
// loans prepay and foreclose too; foreclosure leaves home loans out).
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_DEPOSITS_LOANS, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_fd_maturity_quote, fd_maturity_quote, TASK_KIND_TOOLS, TASK_SLICE_SHALLOW, 0, "fd", "FD maturity quote without logging in (1 step)")
FAMILY(fam_rd_open, rd_open, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "rd", "RD quote, open the RD, list deposits")
FAMILY(fam_rd_break_penalty, rd_break_penalty, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "rd", "premature RD closure after confirming the penalty")
FAMILY(fam_fd_break_declined, fd_break_declined, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "fd", "premature closure declined: nothing closed")
FAMILY(fam_loan_emi_check, loan_emi_check, TASK_KIND_TOOLS, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "personal_loan", "personal loan eligibility, then EMI at that rate")
FAMILY(fam_personal_loan_apply, personal_loan_apply, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "personal_loan", "eligibility, fee confirmed, personal loan")
FAMILY(fam_loan_low_score, loan_low_score, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "personal_loan", "credit score below 650: check, refuse")
FAMILY(fam_loan_part_prepay, loan_part_prepay, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "personal_loan,home_loan,gold_loan", "prepayment quote, prepay, loan details")
FAMILY(fam_loan_foreclose_planner, loan_foreclose_planner, TASK_KIND_SEQ, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "personal_loan,gold_loan",
       "7 steps: loans, details, quote, balance, foreclose, loans")
FAMILY(fam_gold_loan_book, gold_loan_book, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "gold_loan", "gold valuation, gold loan with fee, balance")
FAMILY(fam_gold_loan_over_ltv, gold_loan_over_ltv, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, 0, "gold_loan", "gold loan above 75% LTV: quote, refuse")
// One variant: every task weighs an FD against an RD and reads the FD rates.
FAMILY(fam_deposit_rates_compare, deposit_rates_compare, TASK_KIND_TOOLS, TASK_SLICE_SHALLOW, 0, "fd", "FD lump sum against RD, with rates")
FAMILY(fam_fd_ladder, fd_ladder, TASK_KIND_SEQ, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "savings,current", "8 steps: balance, rates, three FDs, list, balance")

// ==== second round (the deep slice) ===========================================
// Chains of up to 8 actions; seq+db checks where a write or a refusal decides
// the task, seq+comm where a value must reach the customer. Each task records
// its named variant (fam_variant).
// A KYC-current customer's active account with at least `min` paise.
// Columns: customer, account, balance (paise), account type, age.
#define SQL_FUNDED(min)                                                                                     \
  "SELECT c.customer_id, a.account_id, a.balance_paise, a.account_type, " FAM_AGE_SQL " FROM customers c"    \
  " JOIN accounts a ON a.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"             \
  " AND a.balance_paise >= " #min

// An amount in thousands of rupees from lo up to `share` of the balance (paise).
static int64_t fam_amount(Rng *rng, const char *balance_paise, int64_t lo, int64_t divisor) {
  int64_t hi = atoll(balance_paise) / 100 / divisor / 1000;
  return task_gen_range(rng, lo, hi > lo ? hi : lo) * 1000;
}

// ---- fd_days_booking (tools, 4 steps): an FD for a tenure in days -------------------
static int gen_fd_days_booking(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "fd_days_booking", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_FUNDED(2000000) " ORDER BY a.account_id", 5, c, err));
  int64_t amount = fam_amount(&rng, c[2], 5, 2);
  int days = (int)task_gen_range(&rng, 7, 364);
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d days", days);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to park Rs %s in an FD for exactly %s. What will I get? Then book it.",
                 "Rs %s ki FD theek %s ke liye karni hai. Kitna milega? Phir book kar do.",
                 "fd %s for %s. maturity? book", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_days", 0,
                 "{\"principal_amount\":%lld,\"tenure_days\":%d}", (long long)amount, days));
  FAM_TRY(fam_gold(t, err, "create_fd", "principal_amount,tenure_days,source_account", 0,
                 "{\"principal_amount\":%lld,\"tenure_days\":%d,\"source_account\":\"%s\"}", (long long)amount, days,
                 c[1]));
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent quotes before booking.", TASK_RULE_CALLED_BEFORE, "calculate_fd_maturity",
                   "create_fd", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- senior_fd_booking (seq, 5 steps): profile (age), rates, senior quote, book --------
static int gen_senior_fd_booking(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "senior_fd_booking", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_FUNDED(2000000) " AND " FAM_AGE_SQL " >= 60 ORDER BY a.account_id", 5, c, err));
  int64_t amount = fam_amount(&rng, c[2], 5, 2);
  int months = (int)task_gen_range(&rng, 1, 10) * 6;
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I'm a senior citizen. I want an FD of Rs %s for %s at the senior rate, please check and book.",
                 "Main senior citizen hoon. Rs %s ki FD %s ke liye senior rate pe chahiye, check karke book karo.",
                 "senior citizen fd. %s. %s. senior rate pls", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "get_customer_profile", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"fd\"}"));
  FAM_TRY(fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_months,senior_citizen", 0,
                 "{\"principal_amount\":%lld,\"tenure_months\":%d,\"senior_citizen\":true}", (long long)amount, months));
  FAM_TRY(fam_gold(t, err, "create_fd", "principal_amount,tenure_months,source_account", 0,
                 "{\"principal_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", (long long)amount,
                 months, c[1]));
  FAM_TRY(fam_assert(t, err, "The agent checks the age on the profile before quoting.", TASK_RULE_CALLED_BEFORE,
                   "get_customer_profile", "calculate_fd_maturity", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- fd_insufficient_funds (edge, 2 steps): the FD is larger than the balance ----------
static int gen_fd_insufficient_funds(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "fd_insufficient_funds", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_FUNDED(0) " ORDER BY a.account_id", 5, c, err));
  int64_t amount = (atoll(c[2]) / 100000 + task_gen_range(&rng, 1, 200)) * 1000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Book an FD of Rs %s from my account %s for one year.",
                 "Mere account %2$s se Rs %1$s ki FD ek saal ke liye bana do.", "fd %s from %s. 1 yr", amount_text,
                 c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_assert(t, err, "The agent does not book an FD larger than the balance.", TASK_RULE_NOT_CALLED,
                   "create_fd", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- deposit_kyc_expired (edge, 2 steps): no new deposit while KYC is expired ----------
static int gen_deposit_kyc_expired(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "deposit_kyc_expired", seed);
  char c[3][TASK_GEN_COL_MAX], variant[160];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.account_type FROM customers c JOIN accounts a"
                 " ON a.customer_id = c.customer_id WHERE c.kyc_status = 'expired' AND a.status = 'active'"
                 " ORDER BY a.account_id",
                 3, c, err));
  int rd = (int)task_gen_range(&rng, 0, 1);
  char amount[32];
  snprintf(amount, sizeof amount, "%d", rd ? (int)task_gen_range(&rng, 5, 50) * 100 : (int)task_gen_range(&rng, 10, 200) * 1000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please open %s of Rs %s from account %s.",
                 "Account %3$s se Rs %2$s ka %1$s khol do.", "open %s %s from %s", rd ? "a monthly RD" : "an FD", amount,
                 c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "get_kyc_status", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent opens no deposit while KYC is expired.", TASK_RULE_NOT_CALLED,
                   rd ? "create_rd" : "create_fd", NULL));
  snprintf(variant, sizeof variant, "%s_%s", rd ? "rd" : "fd", c[2]);
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// Customers with room for a new EMI (paise) as SQL_LOAN_OK computes it, and
// the account's balance.
#define SQL_HOME_LOAN_OK                                                                                     \
  "SELECT c.customer_id, a.account_id, c.monthly_income_paise / 2 - coalesce((SELECT sum(l.emi_paise)"      \
  " FROM loans l WHERE l.customer_id = c.customer_id AND l.status = 'active'), 0) AS room FROM customers c"  \
  " JOIN accounts a ON a.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"              \
  " AND a.balance_paise >= 2000000 AND room >= 1000000 ORDER BY a.account_id"

// ---- home_loan_apply (seq, 5 steps): rates, eligibility, fee confirmed, apply, loans ----
static int gen_home_loan_apply(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "home_loan_apply", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_HOME_LOAN_OK, 3, c, err));
  static const int tenures[] = {120, 180, 240};
  int months = tenures[task_gen_range(&rng, 0, 2)];
  // An EMI near 0.4 of the room: at 8-10% over 10+ years the EMI is below
  // 1.35% of the principal a month.
  int64_t cap = atoll(c[2]) / 100 * 30 / 100000;
  int64_t amount = task_gen_range(&rng, 1, cap > 1 ? cap : 1) * 100000;
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d years", months / 12);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I'm buying a flat and want a home loan of Rs %s over %s. Please apply.",
                 "Flat le raha hoon, Rs %s ka home loan %s ke liye chahiye. Apply kar do.",
                 "home loan %s. %s. apply", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "fee", "disbursal", NULL));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"home_loan\"}"));
  int e = fam_gold(t, err, "check_loan_eligibility", "loan_type,amount,tenure_months", 0,
                  "{\"loan_type\":\"home\",\"amount\":%lld,\"tenure_months\":%d}", (long long)amount, months);
  FAM_TRY(e);
  char eligible[16];
  FAM_TRY(fam_replay_text(ctx, t, e, "eligible", eligible, sizeof eligible, err));
  if (strcmp(eligible, "true") != 0) return fimi_fail(err, "home_loan_apply: customer %s not eligible", c[0]);
  int s = fam_gold(t, err, "apply_loan", "loan_type,amount,tenure_months,disbursal_account", 1,
                  "{\"loan_type\":\"home\",\"amount\":%lld,\"tenure_months\":%d,\"disbursal_account\":\"%s\","
                  "\"customer_confirmed\":true}",
                  (long long)amount, months, c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the processing fee", s, "processing_fee", err));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent checks eligibility before applying.", TASK_RULE_CALLED_BEFORE,
                   "check_loan_eligibility", "apply_loan", NULL));
  FAM_TRY(fam_variant(t, err, months == 120 ? "10y" : months == 180 ? "15y" : "20y"));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

static const char *const TIERS[] = {"easy", "medium", "hard"};

// ---- gold_loan_graded (tools, graded, 1/2/5 steps): rate; quote; book and balance -----
static int gen_gold_loan_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "gold_loan_graded", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE " KYC_OK " AND a.status = 'active' ORDER BY a.account_id",
                 2, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  int grams = (int)task_gen_range(&rng, 10, 100);
  int karat = KARATS[task_gen_range(&rng, 0, 3)];
  char grams_text[32], karat_text[16];
  snprintf(grams_text, sizeof grams_text, "%d grams", grams);
  snprintf(karat_text, sizeof karat_text, "%d carat", karat);
  fam_style(t, &rng);
  static const char *const en[] = {"What is today's gold rate for a gold loan?",
                                   "How much gold loan can I get on %s of %s gold?",
                                   "I want a gold loan on %s of %s gold, credited to my account."};
  static const char *const hi[] = {"Aaj gold loan ke liye sone ka rate kya hai?",
                                   "%s %s sone pe kitna gold loan milega?",
                                   "%s %s sone pe gold loan chahiye, account mein daal do."};
  static const char *const fr[] = {"gold rate today?", "gold loan on %s %s? max?", "gold loan. %s %s. credit account"};
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, en[tier], hi[tier], fr[tier], grams_text, karat_text));
  if (tier == 2) FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int r = fam_gold(t, err, "get_gold_rate", "", 0, "{}");
  FAM_TRY(r);
  if (tier == 0) {
    FAM_TRY(task_add_communicate(t, "22-carat rate per gram", r, "rate_22k_per_gram", err));
    FAM_TRY(fam_variant(t, err, TIERS[tier]));
    fam_finish(t, FAM_CHECKS_WORK);
    return 0;
  }
  FAM_TRY(fam_field(t, err, "gold_weight", grams_text, "weight", "grams", NULL));
  FAM_TRY(fam_field(t, err, "purity", karat_text, "karat", "carat", NULL));
  int q = fam_gold(t, err, "get_gold_loan_quote", "gold_weight_grams,purity_karat", 0,
                  "{\"gold_weight_grams\":%d,\"purity_karat\":%d}", grams, karat);
  FAM_TRY(q);
  if (tier == 1) {
    FAM_TRY(task_add_communicate(t, "maximum loan", q, "max_loan_amount", err));
    FAM_TRY(fam_variant(t, err, TIERS[tier]));
    fam_finish(t, FAM_CHECKS_WORK);
    return 0;
  }
  char max_text[64];
  FAM_TRY(fam_replay_text(ctx, t, q, "max_loan_amount", max_text, sizeof max_text, err));
  int64_t max_loan = (int64_t)atof(max_text);
  int64_t amount = task_gen_range(&rng, 1, max_loan / 1000 - 1 > 1 ? max_loan / 1000 - 1 : 1) * 1000;
  int months = (int)task_gen_range(&rng, 3, 12);
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "credit", "disbursal", NULL));
  int s = fam_gold(t, err, "apply_gold_loan", "gold_weight_grams,purity_karat,amount,tenure_months,disbursal_account", 1,
                  "{\"gold_weight_grams\":%d,\"purity_karat\":%d,\"amount\":%lld,\"tenure_months\":%d,"
                  "\"disbursal_account\":\"%s\",\"customer_confirmed\":true}",
                  grams, karat, (long long)amount, months, c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the gold loan processing fee", s, "processing_fee", err));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_variant(t, err, TIERS[tier]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- loan_over_income (edge, 2 steps): the EMI would pass half the income ---------------
static int gen_loan_over_income(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "loan_over_income", seed);
  char c[3][TASK_GEN_COL_MAX];
  // Room for a new EMI of Rs 1,000 to Rs 30,000: 60 times the room, the
  // amount asked, has an EMI above the room over 3-5 years at any rate.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, c.monthly_income_paise / 2 - coalesce((SELECT sum(l.emi_paise)"
                 " FROM loans l WHERE l.customer_id = c.customer_id AND l.status = 'active'), 0) AS room"
                 " FROM customers c JOIN accounts a ON a.customer_id = c.customer_id WHERE " KYC_OK
                 " AND c.credit_score >= 650 AND a.status = 'active' AND room BETWEEN 100000 AND 3000000"
                 " ORDER BY a.account_id",
                 3, c, err));
  int64_t amount = (atoll(c[2]) / 100 * 60 / 10000 + 1) * 10000;
  if (amount < 100000) amount = 100000;
  int months = (int)task_gen_range(&rng, 3, 5) * 12;
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need a personal loan of Rs %s for %s. Please sanction it now.",
                 "Rs %s ka personal loan %s ke liye abhi sanction karo.", "pl %s %s now", amount_text, tenure));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "loan amount", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  int e = fam_gold(t, err, "check_loan_eligibility", "loan_type,amount,tenure_months", 0,
                  "{\"loan_type\":\"personal\",\"amount\":%lld,\"tenure_months\":%d}", (long long)amount, months);
  FAM_TRY(e);
  char eligible[16];
  FAM_TRY(fam_replay_text(ctx, t, e, "eligible", eligible, sizeof eligible, err));
  if (strcmp(eligible, "false") != 0) return fimi_fail(err, "loan_over_income: customer %s is eligible", c[0]);
  FAM_TRY(fam_assert(t, err, "The agent does not apply for a loan the income cannot carry.", TASK_RULE_NOT_CALLED,
                   "apply_loan", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- prepay_too_early (edge, 3 steps): personal loans prepay only after 6 EMIs ----------
static int gen_prepay_too_early(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "prepay_too_early", seed);
  char c[3][TASK_GEN_COL_MAX], sql[256];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT l.customer_id, l.loan_id, l.account_id FROM loans l JOIN accounts a ON a.account_id ="
                 " l.account_id WHERE l.status = 'active' AND l.loan_type = 'personal' AND a.status = 'active'"
                 " ORDER BY l.loan_id",
                 3, c, err));
  // The story: a loan taken a few months ago.
  int paid = (int)task_gen_range(&rng, 1, 5);
  snprintf(sql, sizeof sql, "UPDATE loans SET emis_paid = %d WHERE loan_id = '%s'", paid, c[1]);
  FAM_TRY(task_add_fixture(t, sql, err));
  char amount[32];
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 5, 50) * 1000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to prepay Rs %s of my personal loan %s today.",
                 "Personal loan %2$s mein aaj Rs %1$s prepay karna hai.", "prepay %s on %s today", amount, c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_loan_details", "loan_id", 0, "{\"loan_id\":\"%s\"}", c[1]));
  FAM_TRY(fam_assert(t, err, "The agent does not prepay before 6 EMIs are paid.", TASK_RULE_NOT_CALLED, "prepay_loan",
                   NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rd_fd_planner (seq, 8 steps): balance, RD rates, RD quote and booking, FD quote and booking, list ----
static int gen_rd_fd_planner(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rd_fd_planner", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_FUNDED(10000000) " ORDER BY a.account_id", 5, c, err));
  int64_t fd = fam_amount(&rng, c[2], 10, 3);
  int64_t monthly = task_gen_range(&rng, 5, 50) * 100;
  int rd_months = (int)task_gen_range(&rng, 1, 8) * 6, fd_months = (int)task_gen_range(&rng, 6, 60);
  char fd_text[32], monthly_text[32], rd_tenure[32], fd_tenure[32];
  snprintf(fd_text, sizeof fd_text, "%lld", (long long)fd);
  snprintf(monthly_text, sizeof monthly_text, "%lld", (long long)monthly);
  snprintf(rd_tenure, sizeof rd_tenure, "%d months", rd_months);
  snprintf(fd_tenure, sizeof fd_tenure, "%d months", fd_months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to start an RD and also put a lump sum in an FD. Check my balance and the numbers first.",
                 "Ek RD shuru karni hai aur ek FD bhi. Pehle balance aur hisaab dekh lo.",
                 "rd + fd both. balance first, then numbers"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "debit", NULL));
  FAM_TRY(fam_field(t, err, "rd_monthly_amount", monthly_text, "monthly", "instalment", NULL));
  FAM_TRY(fam_field(t, err, "rd_tenure", rd_tenure, "rd tenure", "rd for", NULL));
  FAM_TRY(fam_field(t, err, "fd_amount", fd_text, "lump sum", "fd amount", NULL));
  FAM_TRY(fam_field(t, err, "fd_tenure", fd_tenure, "fd tenure", "fd for", NULL));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"rd\"}"));
  FAM_TRY(fam_gold(t, err, "calculate_rd_maturity", "monthly_amount,tenure_months", 0,
                 "{\"monthly_amount\":%lld,\"tenure_months\":%d}", (long long)monthly, rd_months));
  FAM_TRY(fam_gold(t, err, "create_rd", "monthly_amount,tenure_months,source_account", 0,
                 "{\"monthly_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", (long long)monthly,
                 rd_months, c[1]));
  FAM_TRY(fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_months", 0,
                 "{\"principal_amount\":%lld,\"tenure_months\":%d}", (long long)fd, fd_months));
  FAM_TRY(fam_gold(t, err, "create_fd", "principal_amount,tenure_months,source_account", 0,
                 "{\"principal_amount\":%lld,\"tenure_months\":%d,\"source_account\":\"%s\"}", (long long)fd, fd_months,
                 c[1]));
  FAM_TRY(fam_gold(t, err, "list_deposits", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent checks the balance before booking.", TASK_RULE_CALLED_BEFORE,
                   "get_account_balance", "create_rd", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- fd_rate_comm (tools, communication, 2 steps): the rate and maturity date said ----
static int gen_fd_rate_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  (void)ctx;
  Rng rng;
  fam_rng(&rng, "fd_rate_comm", seed);
  int senior = (int)task_gen_range(&rng, 0, 1);
  int64_t amount = task_gen_range(&rng, 5, 500) * 1000;
  int months = (int)task_gen_range(&rng, 3, 60);
  char amount_text[32], tenure[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  snprintf(tenure, sizeof tenure, "%d months", months);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "For an FD of Rs %s over %s%s, what exact rate would I get and on which date would it mature?",
                 "Rs %s ki FD %s ke liye%s, rate kitna milega aur maturity date kya hogi?",
                 "fd %s %s%s. rate? maturity date?", amount_text, tenure, senior ? " (I am a senior citizen)" : ""));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", "principal", NULL));
  FAM_TRY(fam_field(t, err, "tenure", tenure, "months", "period", "how long", NULL));
  FAM_TRY(fam_gold(t, err, "get_deposit_loan_rates", "product_type", 0, "{\"product_type\":\"fd\"}"));
  int s = fam_gold(t, err, "calculate_fd_maturity", "principal_amount,tenure_months,senior_citizen", 0,
                  "{\"principal_amount\":%lld,\"tenure_months\":%d,\"senior_citizen\":%s}", (long long)amount, months,
                  senior ? "true" : "false");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "interest rate", s, "interest_rate_percent", err));
  FAM_TRY(task_add_communicate(t, "maturity date", s, "maturity_date", err));
  FAM_TRY(fam_variant(t, err, senior ? "senior" : "general"));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// ---- foreclose_short_funds (edge, 4 steps): the account cannot pay a home loan off ----
static int gen_foreclose_short_funds(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "foreclose_short_funds", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT l.customer_id, l.loan_id, l.account_id, l.loan_type FROM loans l JOIN accounts a"
                 " ON a.account_id = l.account_id WHERE l.status = 'active' AND a.status = 'active'"
                 " AND l.loan_type = 'home' AND a.balance_paise < l.outstanding_paise ORDER BY l.loan_id",
                 4, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Close my loan %s today, take the full amount from account %s.",
                 "Loan %s aaj hi band karo, poora paisa account %s se le lo.", "foreclose %s today from %s", c[1],
                 c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_loans", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_foreclosure_quote", "loan_id", 0, "{\"loan_id\":\"%s\"}", c[1]));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[2]));
  FAM_TRY(fam_assert(t, err, "The agent does not foreclose a loan the account cannot pay.", TASK_RULE_NOT_CALLED,
                   "foreclose_loan", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

#define DEEP_FAMILY(var, name, kind, flags, variants, summary) \
  FAMILY(var, name, kind, TASK_SLICE_DEEP, flags, variants, summary)
DEEP_FAMILY(fam_fd_days_booking, fd_days_booking, TASK_KIND_TOOLS, TASK_FAMILY_CHANNELS, "savings,current",
            "FD for a tenure in days: quote, book, list")
DEEP_FAMILY(fam_senior_fd_booking, senior_fd_booking, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "savings,current",
            "5 steps: profile (age), rates, senior quote, book")
DEEP_FAMILY(fam_fd_insufficient_funds, fd_insufficient_funds, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "savings,current",
            "FD above the balance: balance read, refuse")
DEEP_FAMILY(fam_deposit_kyc_expired, deposit_kyc_expired, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "fd_savings,fd_current,rd_savings,rd_current",
            "FD or RD with expired KYC: status read, refuse")
DEEP_FAMILY(fam_home_loan_apply, home_loan_apply, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "10y,15y,20y",
            "5 steps: home loan rates, eligibility, fee confirmed, apply, loans")
DEEP_FAMILY(fam_gold_loan_graded, gold_loan_graded, TASK_KIND_TOOLS, TASK_FAMILY_GRADED, "easy,medium,hard",
            "graded: gold rate; loan quote; quote, book and balance")
DEEP_FAMILY(fam_loan_over_income, loan_over_income, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "personal_loan",
            "EMI above half the income: eligibility read, refuse")
DEEP_FAMILY(fam_prepay_too_early, prepay_too_early, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "personal_loan",
            "personal loan prepay before 6 EMIs: loans, details, refuse")
DEEP_FAMILY(fam_rd_fd_planner, rd_fd_planner, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "savings,current",
            "8 steps: balance, RD rates, RD quote and booking, FD quote and booking, list")
DEEP_FAMILY(fam_fd_rate_comm, fd_rate_comm, TASK_KIND_TOOLS, TASK_FAMILY_COMMUNICATION, "general,senior",
            "FD rate and maturity date said (no login)")
DEEP_FAMILY(fam_foreclose_short_funds, foreclose_short_funds, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "home_loan",
            "foreclosure the account cannot pay: loans, quote, balance, refuse")
