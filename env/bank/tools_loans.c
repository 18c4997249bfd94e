// env/bank/tools_loans.c: loan tools of Navadhan Bank: personal and home
// loan eligibility (credit-score rate bands, amount and tenure limits, EMI at
// most 50% of net monthly income minus existing EMIs), the EMI calculator,
// applications with processing fees, part-prepayment and foreclosure (3% +
// GST on personal loans after 6 EMIs; free on floating-rate home loans to
// individuals, per RBI), and gold loans valued at the bank's 22-carat rate
// with a loan-to-value of at most 75%.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"

#define RUPEES(x) ((int64_t)(x) * 100)
#define GOLD_LTV_PERCENT 75

typedef struct Eligibility {
  int eligible, rate_bp;
  int64_t emi, max_emi, existing_emis, fee, gst;
  char reasons[512];
} Eligibility;

static void add_reason(Eligibility *e, const char *reason) {
  size_t used = strlen(e->reasons);
  snprintf(e->reasons + used, sizeof e->reasons - used, "%s%s", used ? "; " : "", reason);
  e->eligible = 0;
}

static int assess(ToolCtx *c, const Customer *cust, const char *type, int64_t amount, int months, Eligibility *e) {
  memset(e, 0, sizeof *e);
  e->eligible = 1;
  int home = strcmp(type, "home") == 0;
  if (strcmp(cust->kyc_status, "verified") != 0 || cust->rekyc_due_days < c->today_days)
    add_reason(e, "KYC is not current (complete re-KYC first)");
  if (home) {
    e->rate_bp = 850;
    if (rate_for(c, "home_loan", 0, &e->rate_bp) != 0) return -1;
    if (months < 12 || months > 360) add_reason(e, "home loan tenure must be 12 to 360 months");
    if (amount < RUPEES(100000) || amount > RUPEES(50000000))
      add_reason(e, "home loan amount must be Rs 1,00,000 to Rs 5,00,00,000");
  } else {
    if (rate_for(c, "personal_loan", cust->credit_score, &e->rate_bp) != 0) return -1;
    if (cust->credit_score < 650 || !e->rate_bp) add_reason(e, "credit score below 650");
    if (months < 12 || months > 60) add_reason(e, "personal loan tenure must be 12 to 60 months");
    if (amount < RUPEES(50000) || amount > RUPEES(2500000))
      add_reason(e, "personal loan amount must be Rs 50,000 to Rs 25,00,000");
  }
  if (tq_int(c, &e->existing_emis, "SELECT coalesce(sum(emi_paise), 0) FROM loans WHERE customer_id = ?"
                                   " AND status = 'active'", "s", cust->id) < 0)
    return -1;
  e->max_emi = cust->monthly_income / 2 - e->existing_emis;
  if (e->max_emi < 0) e->max_emi = 0;
  if (e->rate_bp && months > 0) e->emi = bank_emi(amount, e->rate_bp, months);
  if (e->emi > e->max_emi) add_reason(e, "EMI would exceed 50% of net monthly income minus existing EMIs");
  if (charge_for(c, home ? "home_loan_processing" : "personal_loan_processing", amount, &e->fee, &e->gst) != 0) return -1;
  return 0;
}

static void put_eligibility(ToolCtx *c, const Eligibility *e) {
  put_bool(c, "eligible", e->eligible);
  if (!e->eligible) put_text(c, "reasons", e->reasons);
  put_percent(c, "interest_rate_percent", e->rate_bp);
  put_rupees(c, "emi", e->emi);
  put_rupees(c, "max_affordable_emi", e->max_emi);
  put_rupees(c, "existing_emis", e->existing_emis);
  put_rupees(c, "processing_fee", e->fee);
  put_rupees(c, "processing_fee_gst", e->gst);
}

static int check_loan_eligibility(ToolCtx *c) {
  Customer cust;
  Eligibility e;
  if (load_customer(c, &cust) != 0) return -1;
  if (assess(c, &cust, arg_text(c, "loan_type"), arg_paise(c, "amount"), (int)arg_int(c, "tenure_months", 0), &e))
    return -1;
  put_text(c, "loan_type", arg_text(c, "loan_type"));
  put_int(c, "credit_score", cust.credit_score);
  put_eligibility(c, &e);
  return 0;
}

static int calculate_emi(ToolCtx *c) {
  int64_t principal = arg_paise(c, "principal_amount");
  int months = (int)arg_int(c, "tenure_months", 0);
  int rate_bp = (int)llround(arg_number(c, "annual_rate_percent", 0) * 100.0);
  int64_t emi = bank_emi(principal, rate_bp, months);
  put_rupees(c, "principal_amount", principal);
  put_percent(c, "annual_rate_percent", rate_bp);
  put_int(c, "tenure_months", months);
  put_rupees(c, "emi", emi);
  put_rupees(c, "total_payment", emi * months);
  put_rupees(c, "total_interest", emi * months - principal);
  return 0;
}

static int apply_loan(ToolCtx *c) {
  Customer cust;
  Account acct;
  Eligibility e;
  const char *type = arg_text(c, "loan_type");
  int64_t amount = arg_paise(c, "amount");
  int months = (int)arg_int(c, "tenure_months", 0);
  if (load_customer(c, &cust) != 0 || load_account(c, arg_text(c, "disbursal_account"), &acct) != 0) return -1;
  if (assess(c, &cust, type, amount, months, &e) != 0) return -1;
  if (!e.eligible) return tool_error(c, "not eligible: %s", e.reasons);
  int home = strcmp(type, "home") == 0;
  // A personal loan is disbursed at once and pays its fee from the credit; a
  // home loan is only sanctioned, so the fee must be in the account now.
  if (strcmp(acct.status, "active") != 0) return tool_error(c, "account %s is %s", acct.id, acct.status);
  if (home && require_debitable(c, &acct, e.fee + e.gst) != 0) return -1;
  if (require_confirmation(c, e.fee + e.gst, "the loan processing fee") != 0) return -1;
  char id[BANK_ID_MAX];
  if (new_id(c, "loan", id) != 0 ||
      tq_exec(c, "INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, NULL, NULL, ?, NULL)",
              "sssslliils" "ssl", id, cust.id, type, home ? "floating" : "fixed", amount, home ? (int64_t)0 : amount,
              e.rate_bp, months, e.emi, c->today, acct.id, home ? "sanctioned" : "active", e.fee + e.gst) != 0)
    return -1;
  if (!home && post_entry(c, acct.id, 1, amount, "internal", "Personal loan disbursal", id, NULL) != 0) return -1;
  if (post_entry(c, acct.id, 0, e.fee + e.gst, "charge", "Loan processing fee incl. GST", id, NULL) != 0) return -1;
  put_text(c, "loan_id", id);
  put_text(c, "status", home ? "sanctioned (disbursal after property documents)" : "disbursed");
  put_rupees(c, "amount", amount);
  put_int(c, "tenure_months", months);
  put_eligibility(c, &e);
  return 0;
}

typedef struct Loan {
  char id[BANK_ID_MAX], type[16], rate_type[16], status[16], account[BANK_ID_MAX];
  int64_t outstanding;
  int emis_paid;
} Loan;

static int load_loan(ToolCtx *c, const char *id, Loan *out) {
  memset(out, 0, sizeof *out);
  int found = tq_text(c, out->type, sizeof out->type, "SELECT loan_type FROM loans WHERE loan_id = ? AND customer_id = ?",
                      "ss", id, c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "loan %s was not found for this customer", id);
  int64_t paid = 0;
  if (tq_text(c, out->rate_type, sizeof out->rate_type, "SELECT rate_type FROM loans WHERE loan_id = ?", "s", id) != 1 ||
      tq_text(c, out->status, sizeof out->status, "SELECT status FROM loans WHERE loan_id = ?", "s", id) != 1 ||
      tq_text(c, out->account, sizeof out->account, "SELECT account_id FROM loans WHERE loan_id = ?", "s", id) != 1 ||
      tq_int(c, &out->outstanding, "SELECT outstanding_paise FROM loans WHERE loan_id = ?", "s", id) != 1 ||
      tq_int(c, &paid, "SELECT emis_paid FROM loans WHERE loan_id = ?", "s", id) != 1)
    return tool_internal(c);
  snprintf(out->id, sizeof out->id, "%s", id);
  out->emis_paid = (int)paid;
  return 0;
}

// Prepayment charge on `amount` of principal, or an error when prepayment
// is not allowed yet.
static int prepayment_charge(ToolCtx *c, const Loan *loan, int64_t amount, int64_t *charge, int64_t *gst) {
  *charge = *gst = 0;
  if (strcmp(loan->status, "active") != 0) return tool_error(c, "loan %s is %s", loan->id, loan->status);
  if (strcmp(loan->type, "personal") == 0) {
    if (loan->emis_paid < 6)
      return tool_error(c, "personal loans can be prepaid or foreclosed only after 6 EMIs (%d paid)", loan->emis_paid);
    return charge_for(c, "personal_loan_prepayment", amount, charge, gst);
  }
  if (strcmp(loan->type, "home") == 0 && strcmp(loan->rate_type, "floating") != 0)
    return charge_for(c, "personal_loan_prepayment", amount, charge, gst);
  return 0;  // floating-rate home loans (RBI) and gold loans: no charge
}

static int list_loans(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT loan_id, loan_type, rate_type, principal_paise, outstanding_paise, rate_bp,"
                           " tenure_months, emi_paise, emis_paid, start_date, status FROM loans WHERE customer_id = ?"
                           " ORDER BY loan_id", "s", c->ep->customer_id);
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "loans", rows);
  return 0;
}

static int get_loan_details(ToolCtx *c) {
  Loan loan;
  if (load_loan(c, arg_text(c, "loan_id"), &loan) != 0) return -1;
  cJSON *row = NULL;
  if (tq_object(c, &row, "SELECT loan_id, loan_type, rate_type, principal_paise, outstanding_paise, rate_bp,"
                         " tenure_months, emi_paise, emis_paid, tenure_months - emis_paid AS emis_remaining, start_date,"
                         " account_id, status, gold_weight_mg, gold_purity_karat, processing_fee_paise FROM loans"
                         " WHERE loan_id = ?", "s", loan.id) != 1)
    return tool_internal(c);
  cJSON_Delete(c->result);
  c->result = row;
  return 0;
}

static int get_foreclosure_quote(ToolCtx *c) {
  Loan loan;
  if (load_loan(c, arg_text(c, "loan_id"), &loan) != 0) return -1;
  int64_t amount = arg_present(c, "prepay_amount") ? arg_paise(c, "prepay_amount") : loan.outstanding;
  if (amount > loan.outstanding) return tool_error(c, "prepay_amount exceeds the outstanding principal");
  int64_t charge, gst;
  if (prepayment_charge(c, &loan, amount, &charge, &gst) != 0) return -1;
  put_text(c, "loan_id", loan.id);
  put_rupees(c, "outstanding_principal", loan.outstanding);
  put_rupees(c, "principal_prepaid", amount);
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  put_rupees(c, "total_payable", amount + charge + gst);
  put_bool(c, "full_foreclosure", amount == loan.outstanding);
  return 0;
}

static int pay_down(ToolCtx *c, const Loan *loan, int64_t amount) {
  Account acct;
  int64_t charge, gst;
  if (load_account(c, arg_text(c, "source_account"), &acct) != 0) return -1;
  if (prepayment_charge(c, loan, amount, &charge, &gst) != 0) return -1;
  if (require_debitable(c, &acct, amount + charge + gst) != 0) return -1;
  if (require_confirmation(c, charge + gst, "the prepayment/foreclosure charge") != 0) return -1;
  int closing = amount == loan->outstanding;
  if (post_entry(c, acct.id, 0, amount, "internal", closing ? "Loan foreclosure" : "Loan part-prepayment", loan->id,
                 NULL) != 0 ||
      post_entry(c, acct.id, 0, charge + gst, "charge", "Loan prepayment charge incl. GST", loan->id, NULL) != 0 ||
      tq_exec(c, "UPDATE loans SET outstanding_paise = outstanding_paise - ?, status = ?, closed_on = ?"
                 " WHERE loan_id = ?", "lsss", amount, closing ? "closed" : "active", closing ? c->today : NULL,
              loan->id) != 0)
    return -1;
  put_text(c, "loan_id", loan->id);
  put_rupees(c, "principal_paid", amount);
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  put_rupees(c, "outstanding_after", loan->outstanding - amount);
  put_text(c, "status", closing ? "closed" : "active");
  put_rupees(c, "source_balance_after", acct.balance - amount - charge - gst);
  if (!closing) put_text(c, "note", "EMI unchanged; the tenure shortens");
  return 0;
}

static int prepay_loan(ToolCtx *c) {
  Loan loan;
  if (load_loan(c, arg_text(c, "loan_id"), &loan) != 0) return -1;
  int64_t amount = arg_paise(c, "amount");
  if (amount >= loan.outstanding)
    return tool_error(c, "the amount covers the whole outstanding principal; use foreclose_loan");
  return pay_down(c, &loan, amount);
}

static int foreclose_loan(ToolCtx *c) {
  Loan loan;
  if (load_loan(c, arg_text(c, "loan_id"), &loan) != 0) return -1;
  return pay_down(c, &loan, loan.outstanding);
}

static int gold_rate(ToolCtx *c, int64_t *rate, char date[11]) {
  int found = tq_text(c, date, 11, "SELECT rate_date FROM gold_rates WHERE rate_date <= ? ORDER BY rate_date DESC LIMIT 1",
                      "s", c->today);
  if (found != 1) return found < 0 ? -1 : tool_error(c, "no gold rate is published yet");
  return tq_int(c, rate, "SELECT rate_22k_per_gram_paise FROM gold_rates WHERE rate_date = ?", "s", date) == 1
             ? 0
             : tool_internal(c);
}

static int get_gold_rate(ToolCtx *c) {
  int64_t rate;
  char date[11];
  if (gold_rate(c, &rate, date) != 0) return -1;
  put_rupees(c, "rate_22k_per_gram", rate);
  put_text(c, "rate_date", date);
  put_int(c, "max_ltv_percent", GOLD_LTV_PERCENT);
  put_text(c, "purity_rule", "18K-24K accepted, valued pro rata to 22K");
  return 0;
}

typedef struct GoldQuote {
  int64_t weight_mg, rate, value, max_loan;
  int karat;
  char rate_date[11];
} GoldQuote;

static int gold_quote(ToolCtx *c, GoldQuote *q) {
  q->weight_mg = llround(arg_number(c, "gold_weight_grams", 0) * 1000.0);
  q->karat = (int)arg_int(c, "purity_karat", 22);
  if (gold_rate(c, &q->rate, q->rate_date) != 0) return -1;
  q->value = (q->weight_mg * q->rate * q->karat + 11000) / 22000;
  q->max_loan = q->value * GOLD_LTV_PERCENT / 100;
  return 0;
}

static void put_gold_quote(ToolCtx *c, const GoldQuote *q) {
  cJSON_AddNumberToObject(c->result, "gold_weight_grams", q->weight_mg / 1000.0);
  put_int(c, "purity_karat", q->karat);
  put_rupees(c, "rate_22k_per_gram", q->rate);
  put_text(c, "rate_date", q->rate_date);
  put_rupees(c, "gold_value", q->value);
  put_int(c, "max_ltv_percent", GOLD_LTV_PERCENT);
  put_rupees(c, "max_loan_amount", q->max_loan);
}

static int get_gold_loan_quote(ToolCtx *c) {
  GoldQuote q;
  int64_t fee, gst;
  if (gold_quote(c, &q) != 0 || charge_for(c, "gold_loan_processing", q.max_loan, &fee, &gst) != 0) return -1;
  put_gold_quote(c, &q);
  put_percent(c, "interest_rate_percent", 925);
  put_rupees(c, "processing_fee_on_max_loan", fee);
  put_rupees(c, "processing_fee_gst", gst);
  return 0;
}

static int apply_gold_loan(ToolCtx *c) {
  GoldQuote q;
  Customer cust;
  Account acct;
  int64_t amount = arg_paise(c, "amount"), fee, gst;
  int months = (int)arg_int(c, "tenure_months", 0), rate = 0;
  if (load_customer(c, &cust) != 0 || require_kyc(c, &cust) != 0) return -1;
  if (load_account(c, arg_text(c, "disbursal_account"), &acct) != 0) return -1;
  if (strcmp(acct.status, "active") != 0) return tool_error(c, "account %s is %s", acct.id, acct.status);
  if (gold_quote(c, &q) != 0) return -1;
  if (amount > q.max_loan) {
    char max[40];
    bank_format_inr(q.max_loan, max);
    return tool_error(c, "the amount exceeds 75%% of the gold value; at most %s", max);
  }
  if (rate_for(c, "gold_loan", 0, &rate) != 0 || charge_for(c, "gold_loan_processing", amount, &fee, &gst) != 0) return -1;
  if (require_confirmation(c, fee + gst, "the gold loan processing fee") != 0) return -1;
  char id[BANK_ID_MAX];
  // Bullet repayment: interest and principal at the end; emi_paise holds 0.
  if (new_id(c, "loan", id) != 0 ||
      tq_exec(c, "INSERT INTO loans VALUES (?, ?, 'gold', 'fixed', ?, ?, ?, ?, 0, 0, ?, ?, 'active', ?, ?, ?, NULL)",
              "ssllii" "ssll" "l", id, cust.id, amount, amount, rate, months, c->today, acct.id, q.weight_mg,
              (int64_t)q.karat, fee + gst) != 0 ||
      post_entry(c, acct.id, 1, amount, "internal", "Gold loan disbursal", id, NULL) != 0 ||
      post_entry(c, acct.id, 0, fee + gst, "charge", "Gold loan processing fee incl. GST", id, NULL) != 0)
    return -1;
  put_text(c, "loan_id", id);
  put_gold_quote(c, &q);
  put_rupees(c, "amount", amount);
  put_percent(c, "interest_rate_percent", rate);
  put_int(c, "tenure_months", months);
  put_rupees(c, "processing_fee", fee);
  put_rupees(c, "processing_fee_gst", gst);
  return 0;
}

#define P_CONFIRM                                                                                           \
  {"customer_confirmed", PT_BOOLEAN, 0, "True only after the customer agreed to the quoted fee or charge.", \
   NULL, 0, 0, 0}
#define P_LOAN {"loan_id", PT_STRING, 1, "Loan id.", NULL, 0, 0, 20}
#define P_GOLD                                                                                            \
  {"gold_weight_grams", PT_NUMBER, 1, "Net weight of the gold in grams.", NULL, 0.1, 10000, 0},           \
  {"purity_karat", PT_INTEGER, 1, "Purity in karat (18 to 24).", NULL, 18, 24, 0}

static const ToolDef TOOLS[] = {
    {"list_loans", "Lists the customer's loans with outstanding principal, EMI and status.", 0, 0, 1, list_loans, {{0}}},
    {"get_loan_details", "Returns the details of one loan.", 0, 0, 1, get_loan_details, {P_LOAN}},
    {"check_loan_eligibility",
     "Checks personal or home loan eligibility: credit score band and rate, amount and tenure limits, EMI against "
     "50% of net monthly income minus existing EMIs; quotes the EMI and processing fee.",
     0, 0, 1, check_loan_eligibility,
     {{"loan_type", PT_STRING, 1, "Loan product.", "personal|home", 0, 0, 0},
      {"amount", PT_AMOUNT, 1, "Loan amount in rupees.", NULL, 0, 0, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 1, 360, 0}}},
    {"calculate_emi", "Computes the EMI, total payment and total interest of a loan.", 0, 0, 0, calculate_emi,
     {{"principal_amount", PT_AMOUNT, 1, "Principal in rupees.", NULL, 0, 0, 0},
      {"annual_rate_percent", PT_NUMBER, 1, "Interest rate, percent per year.", NULL, 0, 50, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 1, 480, 0}}},
    {"apply_loan",
     "Applies for a personal loan (disbursed to the account at once) or a home loan (sanctioned; disbursal after "
     "property documents). The processing fee + GST is debited.",
     1, 1, 1, apply_loan,
     {{"loan_type", PT_STRING, 1, "Loan product.", "personal|home", 0, 0, 0},
      {"amount", PT_AMOUNT, 1, "Loan amount in rupees.", NULL, 0, 0, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 1, 360, 0},
      {"disbursal_account", PT_STRING, 1, "Customer's account for disbursal and fees.", NULL, 0, 0, 20}, P_CONFIRM}},
    {"get_foreclosure_quote", "Quotes the amount and charge to prepay part of a loan or close it.", 0, 0, 1,
     get_foreclosure_quote,
     {P_LOAN, {"prepay_amount", PT_AMOUNT, 0, "Principal to prepay; default: all (foreclosure).", NULL, 0, 0, 0}}},
    {"prepay_loan", "Prepays part of a loan's principal from an account (charges per the loan's terms).", 1, 1, 1,
     prepay_loan,
     {P_LOAN, {"amount", PT_AMOUNT, 1, "Principal to prepay, in rupees.", NULL, 0, 0, 0},
      {"source_account", PT_STRING, 1, "Account to debit.", NULL, 0, 0, 20}, P_CONFIRM}},
    {"foreclose_loan", "Closes a loan by paying the whole outstanding principal (charges per the loan's terms).", 1, 1,
     1, foreclose_loan, {P_LOAN, {"source_account", PT_STRING, 1, "Account to debit.", NULL, 0, 0, 20}, P_CONFIRM}},
    {"get_gold_rate", "Returns the bank's 22-carat gold rate per gram and its date.", 0, 0, 0, get_gold_rate, {{0}}},
    {"get_gold_loan_quote", "Values gold (pro rata to 22K) and quotes the largest gold loan at 75% loan-to-value.", 0,
     0, 0, get_gold_loan_quote, {P_GOLD}},
    {"apply_gold_loan",
     "Books a gold loan of at most 75% of the gold value, up to 12 months, disbursed to the account; processing "
     "fee 0.25% (min Rs 250) + GST. Needs current KYC.",
     1, 1, 1, apply_gold_loan,
     {P_GOLD, {"amount", PT_AMOUNT, 1, "Loan amount in rupees.", NULL, 0, 0, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 1, 12, 0},
      {"disbursal_account", PT_STRING, 1, "Customer's account.", NULL, 0, 0, 20}, P_CONFIRM}},
};

const ToolArea bank_area_loans = {"loans and gold loans", TOOLS, (int)(sizeof TOOLS / sizeof TOOLS[0])};
