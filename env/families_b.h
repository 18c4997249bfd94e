// env/families_b.h: shared helpers of the second set of task families
// (env/families_b_*.c) and the family objects each file defines. Internal to
// env/: the registry only sees env_families_b[] (env/families_b.c).
//
// The helpers keep generators short: pick a style and persona and write the
// opening line in that style, add gold steps from printf-formatted JSON, read
// a value of a replayed gold step, add assertions from a NULL-terminated list.
#ifndef FIMI_ENV_FAMILIES_B_H
#define FIMI_ENV_FAMILIES_B_H

#include <stdint.h>

#include "core/rng.h"
#include "env/task_family.h"

#define FB_TRY(x)        \
  do {                 \
    if ((x) < 0) return -1; \
  } while (0)

// The customer's age in whole years on the image's clock (SQL expression over
// customers.date_of_birth; the clock table holds today's date).
#define FB_AGE_SQL                                                                                     \
  "(CAST(strftime('%Y', (SELECT today FROM clock)) AS INTEGER) - CAST(strftime('%Y', c.date_of_birth) " \
  "AS INTEGER) - (strftime('%m-%d', (SELECT today FROM clock)) < strftime('%m-%d', c.date_of_birth)))"

// Seeds the generator's rng from the task seed and the family name, so two
// families never draw the same sequence for the same seed.
void fb_rng(Rng *rng, const char *family, uint64_t seed);

// Draws the language style uniformly and sets task->style. Call it before
// fb_open (and before building arguments that depend on the style).
TaskStyle fb_style(Task *task, Rng *rng);

// Picks a persona from `personas` (n > 0) and writes the reason for the call
// from the template of task->style (printf format; the three templates take
// the same arguments in the same order and each uses every argument).
int fb_open(Task *task, Rng *rng, const char *const *personas, int n, FimiError *err, const char *english,
            const char *hinglish, const char *fragmentary, ...);

// One of n strings, uniformly.
const char *fb_choose(Rng *rng, const char *const *options, int n);

// task_gen_pick without bind parameters.
int fb_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, int ncols, char cols[][TASK_GEN_COL_MAX],
            FimiError *err);

// Adds a gold step whose arguments are the printf-formatted JSON object.
// Returns the step index or -1.
int fb_gold(Task *task, FimiError *err, const char *name, const char *relevant_csv, int confirm, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

// Replays the gold chain so far and copies the scalar at `path` of step
// `step`'s result into out (verbatim text as the tool printed it).
int fb_replay_text(const TaskGenContext *ctx, const Task *task, int step, const char *path, char *out, size_t size,
                   FimiError *err);

// Adds an assertion; the variadic arguments are strings ending with NULL.
int fb_assert(Task *task, FimiError *err, const char *text, TaskRule rule, ...);

// A field with extra keywords (NULL-terminated) that ask for it.
int fb_field(Task *task, FimiError *err, const char *name, const char *value, ...);

// Sets the declared checks and a turn budget with room for the oracle:
// one question per field, one call per gold step, one confirmation each,
// plus greetings and the closing message.
void fb_finish(Task *task, int checks);

// Rupees with two decimals from integer paise, e.g. 12345 -> "123.45".
void fb_rupees(int64_t paise, char out[32]);

// Rupees from paise as the tools print them (a JSON number: "3494.6").
void fb_rupees_tool(int64_t paise, char out[32]);

// The families, one object each (defined in env/families_b_<use case>.c).
#define FB_FAMILY(name) extern const TaskFamily name;
// The families in registry order, grouped by use case: accounts & KYC,
// deposits & loans, insurance, government schemes, cross-cutting.
#define FB_FAMILIES(X) \
  X(fb_kyc_status_check) X(fb_rekyc_update) X(fb_address_change) X(fb_email_update) X(fb_statement_email) \
  X(fb_transfer_kyc_expired) X(fb_own_accounts_sweep) X(fb_new_payee_neft) X(fb_imps_with_charge) \
  X(fb_rekyc_then_transfer) X(fb_upi_over_limit) X(fb_dispute_unauthorised) X(fb_other_customer_account) \
  X(fb_other_bank_balance_oos) X(fb_payee_cleanup) \
  X(fb_fd_maturity_quote) X(fb_rd_open) X(fb_rd_break_penalty) X(fb_fd_break_declined) X(fb_loan_emi_check) \
  X(fb_personal_loan_apply) X(fb_loan_low_score) X(fb_loan_part_prepay) X(fb_loan_foreclose_planner) \
  X(fb_gold_loan_book) X(fb_gold_loan_over_ltv) X(fb_deposit_rates_compare) X(fb_fd_ladder) \
  X(fb_claim_status_check) X(fb_claim_outside_period) X(fb_claim_file) X(fb_claim_lapsed_policy) \
  X(fb_claim_escalate) \
  X(fb_pmjjby_enrol) X(fb_pmjjby_over_age) X(fb_apy_taxpayer) X(fb_apy_enrol) X(fb_form_15g_15h) \
  X(fb_tds_certificate) X(fb_scheme_kyc_expired) X(fb_tax_filing_oos) \
  X(fb_card_fraud_dispute) X(fb_card_temp_block) X(fb_card_limits) X(fb_card_international) \
  X(fb_mandate_revoke) X(fb_cheque_stop) X(fb_positive_pay) X(fb_cheque_book) X(fb_request_escalate) \
  X(fb_complaint_request)
FB_FAMILIES(FB_FAMILY)
#undef FB_FAMILY

#endif
