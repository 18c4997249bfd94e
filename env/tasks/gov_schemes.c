// env/tasks/gov_schemes.c: task families of the "government schemes" use case:
// PMJJBY and APY enrolment, refusals for age (PMJJBY over 50), income-tax
// payers (APY) and expired KYC, TDS certificates and Form 15G/15H, and a tax-
// return request that is out of scope. Eligibility mirrors the tool's rules in
// SQL so the generator only picks customers whose gold chain succeeds.
// Also the oldest families of this use case, written with the task_gen_*
// helpers directly: pmsby_enrol.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/family_helpers.h"

#define KYC_OK "c.kyc_status = 'verified' AND c.rekyc_due_date >= (SELECT today FROM clock)"

static const char *const PERSONAS[] = {
    "daily-wage worker who heard about the scheme on the radio", "young mother planning for the family",
    "retired bank clerk who knows the rules", "gig worker with irregular income",
    "small trader who files taxes every year", "senior citizen living on FD interest"};
#define NP ((int)(sizeof PERSONAS / sizeof PERSONAS[0]))

// A customer with an active savings account, not enrolled in `scheme`, aged
// lo..hi. Columns: customer, savings account.
#define SQL_SCHEME_OK(scheme, lo, hi)                                                                            \
  "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"          \
  " WHERE " KYC_OK " AND a.account_type = 'savings' AND a.status = 'active' AND a.balance_paise >= 100000"        \
  " AND " FAM_AGE_SQL " BETWEEN " #lo " AND " #hi " AND NOT EXISTS (SELECT 1 FROM scheme_enrolments e"            \
  " WHERE e.customer_id = c.customer_id AND e.scheme_code = '" scheme "' AND e.status = 'active')"                \
  " ORDER BY a.account_id"

// ---- pmjjby_enrol (happy, 3 steps): eligibility, premium confirmed, enrol ------
static int gen_pmjjby_enrol(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "pmjjby_enrol", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_SCHEME_OK("pmjjby", 18, 50), 2, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want the Rs 436 life cover, PMJJBY, with the premium from my savings account.",
                 "PMJJBY wala Rs 436 ka life cover chahiye, premium savings se katwa do.",
                 "pmjjby 436 life cover. enrol"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"pmjjby\"}"));
  int s = fam_gold(t, err, "enroll_scheme", "scheme_code,account_id", 1,
                  "{\"scheme_code\":\"pmjjby\",\"account_id\":\"%s\",\"customer_confirmed\":true}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the annual premium", s, "premium_debited", err));
  FAM_TRY(task_add_communicate(t, "enrolment_id", s, "enrolment_id", err));
  FAM_TRY(fam_assert(t, err, "The agent checks eligibility before enrolling.", TASK_RULE_CALLED_BEFORE,
                   "check_scheme_eligibility", "enroll_scheme", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- pmjjby_over_age (edge): PMJJBY is for ages 18-50 ---------------------------
static int gen_pmjjby_over_age(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "pmjjby_over_age", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_SCHEME_OK("pmjjby", 51, 150), 2, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to join the Rs 436 life insurance scheme, PMJJBY. Please enrol me.",
                 "PMJJBY wala Rs 436 ka life cover lena hai, enrol kar do please.", "pmjjby join. 436 one"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"pmjjby\"}"));
  FAM_TRY(fam_assert(t, err, "The agent does not enrol an ineligible customer.", TASK_RULE_NOT_CALLED, "enroll_scheme",
                   NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the 18-50 age limit.", TASK_RULE_MENTIONS_ANY, "age", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- apy_taxpayer (edge): income-tax payers cannot join APY ----------------------
static int gen_apy_taxpayer(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "apy_taxpayer", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE c.income_tax_payer = 1 AND a.account_type = 'savings' AND a.status = 'active'"
                 " AND " FAM_AGE_SQL " BETWEEN 18 AND 40 ORDER BY a.account_id",
                 2, c, err));
  const char *pension = task_gen_range(&rng, 0, 1) ? "5000" : "3000";
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want a pension of Rs %s a month under Atal Pension Yojana. Sign me up.",
                 "Atal Pension Yojana mein Rs %s mahine ki pension ke liye join karna hai.", "APY. %s pension. join",
                 pension));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"apy\"}"));
  FAM_TRY(fam_assert(t, err, "The agent does not enrol an income-tax payer in APY.", TASK_RULE_NOT_CALLED,
                   "enroll_scheme", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains that income-tax payers cannot join APY.", TASK_RULE_MENTIONS_ANY,
                   "income-tax", "income tax", "taxpayer", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- apy_enrol (seq, 3 steps): APY for a young non-taxpayer -----------------------
static int gen_apy_enrol(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "apy_enrol", seed);
  char c[2][TASK_GEN_COL_MAX], sql[320];
  FAM_TRY(fam_pick(ctx, &rng, SQL_SCHEME_OK("apy", 18, 40), 2, c, err));
  // The story: the customer earns below the taxable limit this year.
  snprintf(sql, sizeof sql, "UPDATE customers SET income_tax_payer = 0 WHERE customer_id = '%s'", c[0]);
  FAM_TRY(task_add_fixture(t, sql, err));
  int pension = (int)task_gen_range(&rng, 1, 5) * 1000;
  char pension_text[16];
  snprintf(pension_text, sizeof pension_text, "%d", pension);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I don't pay income tax and want to join Atal Pension Yojana for Rs %s a month after 60.",
                 "Main income tax nahi bharta, Atal Pension Yojana join karna hai, 60 ke baad Rs %s mahina.",
                 "apy. no income tax. pension %s", pension_text));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "monthly_pension", pension_text, "pension", "how much", NULL));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"apy\"}"));
  int s = fam_gold(t, err, "enroll_scheme", "scheme_code,account_id,apy_monthly_pension", 0,
                  "{\"scheme_code\":\"apy\",\"account_id\":\"%s\",\"apy_monthly_pension\":%d}", c[1], pension);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "enrolment_id", s, "enrolment_id", err));
  FAM_TRY(fam_assert(t, err, "The agent checks eligibility before enrolling.", TASK_RULE_CALLED_BEFORE,
                   "check_scheme_eligibility", "enroll_scheme", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- form_15g_15h (seq, 3 steps): TDS certificate, then the right form ------------
static int gen_form_15g_15h(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "form_15g_15h", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, CASE WHEN " FAM_AGE_SQL " >= 60 THEN '15H' ELSE '15G' END FROM customers c"
                 " WHERE c.pan IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tax_forms f WHERE f.customer_id ="
                 " c.customer_id AND f.financial_year = '2025-26') ORDER BY c.customer_id",
                 2, c, err));
  int64_t income = task_gen_range(&rng, 12, 48) * 10000;
  char income_text[32];
  snprintf(income_text, sizeof income_text, "%lld", (long long)income);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Tax is being cut on my FD interest though my income is low. I want to submit the form to stop it.",
                 "Meri income kam hai phir bhi FD interest pe TDS kat raha hai. Form dena hai rokne ke liye.",
                 "tds on fd. income low. form 15g/h"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "estimated_total_income", income_text, "income", "estimated", "how much", NULL));
  FAM_TRY(fam_gold(t, err, "get_tds_certificate", "financial_year", 0, "{\"financial_year\":\"2025-26\"}"));
  int s = fam_gold(t, err, "submit_form_15g_15h", "financial_year,form_type,estimated_total_income", 0,
                  "{\"financial_year\":\"2025-26\",\"form_type\":\"%s\",\"estimated_total_income\":%lld}", c[1],
                  (long long)income);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "form_id", s, "form_id", err));
  FAM_TRY(fam_assert(t, err, "The agent names the right form for the customer's age.", TASK_RULE_MENTIONS_ANY, c[1],
                   NULL));
  FAM_TRY(fam_variant(t, err, strcmp(c[1], "15H") == 0 ? "15h" : "15g"));  // the form the age picked
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- tds_certificate (happy): interest and TDS for a financial year ---------------
static int gen_tds_certificate(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "tds_certificate", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT DISTINCT customer_id, financial_year FROM tds_records ORDER BY customer_id, financial_year", 2,
                 c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I'm filing my return. How much FD interest did I earn in %s and how much TDS was cut?",
                 "ITR bharna hai. %s mein FD pe kitna interest mila aur kitna TDS kata?", "fy %s interest + tds?",
                 c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "financial_year", c[1], "year", "FY", NULL));
  int s = fam_gold(t, err, "get_tds_certificate", "financial_year", 0, "{\"financial_year\":\"%s\"}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "total_interest", s, "total_interest", err));
  FAM_TRY(task_add_communicate(t, "total_tds", s, "total_tds", err));
  FAM_TRY(fam_assert(t, err, "The agent does not submit a tax form unasked.", TASK_RULE_NOT_CALLED,
                   "submit_form_15g_15h", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- scheme_kyc_expired (edge): enrolment refused while KYC is expired -------------
static int gen_scheme_kyc_expired(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "scheme_kyc_expired", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE c.kyc_status = 'expired' AND a.account_type = 'savings' AND a.status = 'active'"
                 " AND " FAM_AGE_SQL " BETWEEN 18 AND 70 ORDER BY a.account_id",
                 2, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please enrol me in PMSBY, the accident cover scheme.",
                 "PMSBY accident cover mein naam likhwana hai.", "pmsby pls"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  FAM_TRY(fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"pmsby\"}"));
  FAM_TRY(fam_assert(t, err, "The agent does not enrol while KYC is expired.", TASK_RULE_NOT_CALLED, "enroll_scheme",
                   NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains that KYC must be updated first.", TASK_RULE_MENTIONS_ANY, "KYC", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- tax_filing_oos (edge, OUT_OF_SCOPE): TDS figures yes, filing the return no -----
static int gen_tax_filing_oos(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "tax_filing_oos", seed);
  char c[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT DISTINCT customer_id FROM tds_records WHERE financial_year = '2025-26' ORDER BY customer_id",
                 1, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "How much TDS did you cut on my deposits this year? And can you file my income tax return for me?",
                 "Is saal FD pe kitna TDS kata? Aur mera ITR aap hi file kar do na.",
                 "tds this year? + file my ITR pls"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_tds_certificate", "financial_year", 0, "{\"financial_year\":\"2025-26\"}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "total_tds", s, "total_tds", err));
  FAM_TRY(fam_assert(t, err, "The agent says the bank cannot file a tax return.", TASK_RULE_MENTIONS_ANY, "cannot",
                   NULL));
  FAM_TRY(fam_assert(t, err, "The agent does not submit a tax form unasked.", TASK_RULE_NOT_CALLED,
                   "submit_form_15g_15h", NULL));
  FAM_TRY(fam_assert(t, err, "The conversation ends with the rest out of scope.", TASK_RULE_END_IS, "out_of_scope",
                   NULL));
  t->expected_end = TASK_END_OUT_OF_SCOPE;
  fam_finish(t, FAM_CHECKS_SAID);
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
      fam_pick_reason(t, &rng, pmsby_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "account_number", row[1], err))
    return -1;
  if (task_add_gold(t, "check_scheme_eligibility", "{\"scheme_code\":\"pmsby\"}", "scheme_code", 0, err) < 0) return -1;
  snprintf(args, sizeof args, "{\"scheme_code\":\"pmsby\",\"account_id\":\"%s\",\"customer_confirmed\":true}", row[1]);
  int enrol = task_add_gold(t, "enroll_scheme", args, "scheme_code,account_id", 1, err);
  if (enrol < 0 || task_add_confirm(t, "the annual PMSBY premium of Rs 20 debited from the account", -1, NULL, err) ||
      task_add_communicate(t, "enrolment_id", enrol, "enrolment_id", err) ||
      fam_assert_rule(t, "The agent checks eligibility before enrolling.", TASK_RULE_CALLED_BEFORE,
                  "check_scheme_eligibility", "enroll_scheme", err))
    return -1;
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 14;
  return 0;
}
const TaskFamily fam_pmsby_enrol = {"pmsby_enrol", TASK_USE_GOV_SCHEMES, TASK_KIND_TOOLS,
                                       "PMSBY eligibility, consent to the premium, enrol.", gen_pmsby_enrol, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS,
    "pmsby"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_GOV_SCHEMES, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_pmjjby_enrol, pmjjby_enrol, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "pmjjby", "PMJJBY eligibility, premium confirmed, enrolment")
FAMILY(fam_pmjjby_over_age, pmjjby_over_age, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "pmjjby", "PMJJBY over age 50: check, refuse")
FAMILY(fam_apy_taxpayer, apy_taxpayer, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "apy", "APY for an income-tax payer: check, refuse")
FAMILY(fam_apy_enrol, apy_enrol, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "apy", "APY eligibility and enrolment with a chosen pension")
FAMILY(fam_form_15g_15h, form_15g_15h, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "15g,15h", "TDS certificate, then Form 15G or 15H by age")
// TDS is only cut on fixed deposits (tds_records.deposit_id): one variant, fd.
FAMILY(fam_tds_certificate, tds_certificate, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "fd", "interest and TDS of a financial year")
FAMILY(fam_scheme_kyc_expired, scheme_kyc_expired, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "pmsby", "scheme enrolment with expired KYC: refuse")
// The same for the filing refusal: the TDS figures it reads are of fixed deposits.
FAMILY(fam_tax_filing_oos, tax_filing_oos, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "fd", "TDS figures, filing the return: out of scope")

// ==== second round (the deep slice) ===========================================
static const char *const TIERS[] = {"easy", "medium", "hard"};

// ---- scheme_graded (seq, graded, 2/3/6 steps): PMSBY eligibility; enrolment; both schemes ----
static int gen_scheme_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "scheme_graded", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE " KYC_OK " AND a.account_type = 'savings' AND a.status = 'active' AND a.balance_paise >= 100000"
                 " AND " FAM_AGE_SQL " BETWEEN 19 AND 49 AND NOT EXISTS (SELECT 1 FROM scheme_enrolments e"
                 " WHERE e.customer_id = c.customer_id AND e.scheme_code IN ('pmsby', 'pmjjby') AND e.status = 'active')"
                 " ORDER BY a.account_id",
                 2, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  fam_style(t, &rng);
  static const char *const en[] = {"Am I eligible for PMSBY, the Rs 20 accident cover?",
                                   "Please check PMSBY for me and enrol me if I qualify.",
                                   "Check my KYC, then enrol me in both PMSBY and PMJJBY if I qualify."};
  static const char *const hi[] = {"Kya main PMSBY ke liye eligible hoon?", "PMSBY check karke enrol kar do.",
                                   "KYC check karo, phir PMSBY aur PMJJBY dono mein enrol kar do."};
  static const char *const fr[] = {"pmsby eligible?", "pmsby check + enrol", "kyc check. then pmsby + pmjjby both"};
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, en[tier], hi[tier], fr[tier]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  if (tier > 0) FAM_TRY(fam_field(t, err, "account_number", c[1], "account", "savings", "debit", NULL));
  if (tier == 2) FAM_TRY(fam_gold(t, err, "get_kyc_status", "", 0, "{}"));
  static const char *const schemes[] = {"pmsby", "pmjjby"};
  for (int k = 0; k < (tier == 2 ? 2 : 1); k++) {
    int e = fam_gold(t, err, "check_scheme_eligibility", "scheme_code", 0, "{\"scheme_code\":\"%s\"}", schemes[k]);
    FAM_TRY(e);
    if (tier == 0) FAM_TRY(task_add_communicate(t, "eligibility", e, "eligible", err));
    if (tier == 0) break;
    int s = fam_gold(t, err, "enroll_scheme", "scheme_code,account_id", 1,
                    "{\"scheme_code\":\"%s\",\"account_id\":\"%s\",\"customer_confirmed\":true}", schemes[k], c[1]);
    FAM_TRY(s);
    FAM_TRY(task_add_confirm(t, "the annual premium", s, "premium_debited", err));
  }
  FAM_TRY(fam_variant(t, err, TIERS[tier]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// slice: TASK_SLICE_DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
FAMILY(fam_scheme_graded, scheme_graded, TASK_KIND_SEQ, TASK_SLICE_DEEP, TASK_FAMILY_GRADED | TASK_FAMILY_CHANNELS, "easy,medium,hard",
       "graded: PMSBY eligibility; PMSBY enrolment; KYC and both PMSBY and PMJJBY")
