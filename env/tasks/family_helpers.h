// env/tasks/family_helpers.h: helpers the task families share, and the list
// of family objects in registry order (FAM_FAMILIES; each is defined in the
// file of its use case: env/tasks/accounts_kyc.c, deposits_loans.c,
// insurance.c, gov_schemes.c, cross_cutting.c). Internal to env/tasks/: the
// rest of fimi sees families through the registry (env/tasks/family.h).
//
// The helpers keep generators short: pick a style and persona and write the
// opening line in that style, add gold steps from printf-formatted JSON, read
// a value of a replayed gold step, add assertions from a NULL-terminated list.
#ifndef FIMI_ENV_TASKS_FAMILY_HELPERS_H
#define FIMI_ENV_TASKS_FAMILY_HELPERS_H

#include <stdint.h>

#include "core/rng.h"
#include "env/tasks/family.h"

#define FAM_TRY(x)        \
  do {                 \
    if ((x) < 0) return -1; \
  } while (0)

// Customers who can transact: KYC verified and not overdue, an active
// account with at least `min` paise. Columns: customer id, account id,
// balance in paise, birth date.
#define FAM_SQL_ACTIVE_ACCOUNT(min)                                                                    \
  "SELECT c.customer_id, a.account_id, a.balance_paise, c.date_of_birth FROM customers c"              \
  " JOIN accounts a ON a.customer_id = c.customer_id WHERE c.kyc_status = 'verified'"                   \
  " AND c.rekyc_due_date >= (SELECT today FROM clock) AND a.status = 'active' AND a.balance_paise >= " \
  #min " ORDER BY a.account_id"

// The customer's age in whole years on the image's clock (SQL expression over
// customers.date_of_birth; the clock table holds today's date).
#define FAM_AGE_SQL                                                                                     \
  "(CAST(strftime('%Y', (SELECT today FROM clock)) AS INTEGER) - CAST(strftime('%Y', c.date_of_birth) " \
  "AS INTEGER) - (strftime('%m-%d', (SELECT today FROM clock)) < strftime('%m-%d', c.date_of_birth)))"

// Seeds the generator's rng from the task seed and the family name, so two
// families never draw the same sequence for the same seed.
void fam_rng(Rng *rng, const char *family, uint64_t seed);

// Draws the language style uniformly and sets task->style. Call it before
// fam_open (and before building arguments that depend on the style).
TaskStyle fam_style(Task *task, Rng *rng);

// Picks a persona from `personas` (n > 0) and writes the reason for the call
// from the template of task->style (printf format; the three templates take
// the same arguments in the same order and each uses every argument).
int fam_open(Task *task, Rng *rng, const char *const *personas, int n, FimiError *err, const char *english,
            const char *hinglish, const char *fragmentary, ...);

// Draws the style uniformly (task_gen_range) and sets the reason for the
// call to one of the two written for that style.
int fam_pick_reason(Task *task, Rng *rng, const char *const reasons[TASK_STYLE_COUNT][2], FimiError *err);

// Adds an assertion with one or two arguments (b may be NULL).
int fam_assert_rule(Task *task, const char *text, TaskRule rule, const char *a, const char *b, FimiError *err);

// One of n strings, uniformly.
const char *fam_choose(Rng *rng, const char *const *options, int n);

// task_gen_pick without bind parameters.
int fam_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, int ncols, char cols[][TASK_GEN_COL_MAX],
            FimiError *err);

// Adds a gold step whose arguments are the printf-formatted JSON object.
// Returns the step index or -1.
int fam_gold(Task *task, FimiError *err, const char *name, const char *relevant_csv, int confirm, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

// Replays the gold chain so far and copies the scalar at `path` of step
// `step`'s result into out (verbatim text as the tool printed it).
int fam_replay_text(const TaskGenContext *ctx, const Task *task, int step, const char *path, char *out, size_t size,
                   FimiError *err);

// Adds an assertion; the variadic arguments are strings ending with NULL.
int fam_assert(Task *task, FimiError *err, const char *text, TaskRule rule, ...);

// A field with extra keywords (NULL-terminated) that ask for it.
int fam_field(Task *task, FimiError *err, const char *name, const char *value, ...);

// The checks a family's tasks declare (docs/tasks.md, "Declared checks"),
// after the FiMI paper (section 5.2.3: 91.3% of its corpus declares only the
// two deterministic checks, under 9% needs the judge). Every task reports all
// four scores; the declared ones make its reward.
// WORK: the tool chain and the final database state. Every family whose
//   outcome a tool call or the state shows, read-only ones included (the db
//   check then fails a careless write) and refusals of a write (the db check
//   fails the write that should not have happened).
// COMM: the communication families (TASK_FAMILY_COMMUNICATION): the point is
//   a tool value said to the customer.
// SAID: what is said is the point and no tool shows it: out-of-scope
//   refusals and not disclosing another customer's data.
#define FAM_CHECKS_WORK (TASK_CHECK_SEQ | TASK_CHECK_DB)
#define FAM_CHECKS_COMM (TASK_CHECK_SEQ | TASK_CHECK_COMM)
#define FAM_CHECKS_SAID (TASK_CHECK_SEQ | TASK_CHECK_DB | TASK_CHECK_JUDGE)

// Sets the declared checks and a turn budget with room for the oracle:
// one question per field, one call per gold step, one confirmation each,
// plus greetings and the closing message.
void fam_finish(Task *task, int checks);

// Records the named variant of the task: "<prefix>/<family>" (the prefix is
// one of the family's TaskFamily.variants).
int fam_variant(Task *task, FimiError *err, const char *prefix);

// Records the account's type ("savings" or "current") as the variant: a
// lookup for generators that pick with a shared SQL macro (such as
// FAM_SQL_ACTIVE_ACCOUNT); it draws nothing, so the task stays as the seed
// made it.
int fam_account_variant(const TaskGenContext *ctx, Task *task, const char *account_id, FimiError *err);

// Rupees with two decimals from integer paise, e.g. 12345 -> "123.45".
void fam_rupees(int64_t paise, char out[32]);

// Rupees from paise as the tools print them (a JSON number: "3494.6").
void fam_rupees_tool(int64_t paise, char out[32]);

// The families, one object each (defined in env/tasks/<use case>.c).
#define FAM_FAMILY(name) extern const TaskFamily name;
// The families in registry order. The first eleven are the oldest (fd_paper,
// the FiMI paper's example, is the pattern to copy); the rest are grouped by
// use case: accounts & KYC, deposits & loans, insurance, government schemes,
// cross-cutting. The order fixes task_family_at's indices: append new
// families at the end.
#define FAM_FAMILIES(X) \
  X(fam_fd_paper) X(fam_balance_enquiry) X(fam_rate_quote) X(fam_imps_over_limit) X(fam_investment_advice) \
  X(fam_recovery_complaint) X(fam_fd_premature_close) X(fam_lost_card_reissue) X(fam_pmsby_enrol) \
  X(fam_fd_planner) X(fam_policy_enquiry) \
  X(fam_kyc_status_check) X(fam_rekyc_update) X(fam_address_change) X(fam_email_update) X(fam_statement_email) \
  X(fam_transfer_kyc_expired) X(fam_own_accounts_sweep) X(fam_new_payee_neft) X(fam_imps_with_charge) \
  X(fam_rekyc_then_transfer) X(fam_upi_over_limit) X(fam_dispute_unauthorised) X(fam_other_customer_account) \
  X(fam_other_bank_balance_oos) X(fam_payee_cleanup) \
  X(fam_fd_maturity_quote) X(fam_rd_open) X(fam_rd_break_penalty) X(fam_fd_break_declined) X(fam_loan_emi_check) \
  X(fam_personal_loan_apply) X(fam_loan_low_score) X(fam_loan_part_prepay) X(fam_loan_foreclose_planner) \
  X(fam_gold_loan_book) X(fam_gold_loan_over_ltv) X(fam_deposit_rates_compare) X(fam_fd_ladder) \
  X(fam_claim_status_check) X(fam_claim_outside_period) X(fam_claim_file) X(fam_claim_lapsed_policy) \
  X(fam_claim_escalate) \
  X(fam_pmjjby_enrol) X(fam_pmjjby_over_age) X(fam_apy_taxpayer) X(fam_apy_enrol) X(fam_form_15g_15h) \
  X(fam_tds_certificate) X(fam_scheme_kyc_expired) X(fam_tax_filing_oos) \
  X(fam_card_fraud_dispute) X(fam_card_temp_block) X(fam_card_limits) X(fam_card_international) \
  X(fam_mandate_revoke) X(fam_cheque_stop) X(fam_positive_pay) X(fam_cheque_book) X(fam_request_escalate) \
  X(fam_complaint_request) \
  X(fam_rtgs_transfer) X(fam_rtgs_below_minimum) X(fam_netbanking_daily_cap) X(fam_cooling_payee_cap) \
  X(fam_contact_details_comm) X(fam_mobile_update) X(fam_dispute_other_reason) X(fam_own_transfer_graded) \
  X(fam_rekyc_graded) X(fam_all_balances_comm) X(fam_statement_too_long) \
  X(fam_fd_days_booking) X(fam_senior_fd_booking) X(fam_fd_insufficient_funds) X(fam_deposit_kyc_expired) \
  X(fam_home_loan_apply) X(fam_gold_loan_graded) X(fam_loan_over_income) X(fam_prepay_too_early) \
  X(fam_rd_fd_planner) X(fam_fd_rate_comm) X(fam_foreclose_short_funds) \
  X(fam_claim_over_cover) X(fam_policy_renewal_comm) X(fam_scheme_graded) \
  X(fam_card_unblock) X(fam_hotlisted_unblock) X(fam_card_limit_over_cap) X(fam_card_channels_off) \
  X(fam_card_expiry_comm) X(fam_cheque_stop_cleared) X(fam_positive_pay_below_min) X(fam_card_lost_replace) \
  X(fam_fraud_full_recovery) X(fam_mandate_graded) X(fam_card_graded) X(fam_mandate_already_expired) \
  X(fam_transfer_limits_comm)
FAM_FAMILIES(FAM_FAMILY)
#undef FAM_FAMILY

#endif
