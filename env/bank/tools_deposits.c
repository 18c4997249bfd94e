// env/bank/tools_deposits.c: deposit tools of Navadhan Bank: the rate card,
// FD and RD maturity calculators, booking FDs and RDs, listing them, and
// premature closure (rate for the period actually run minus 1.00%, never
// below 0; no interest within 7 days). Senior citizens (60+) get +0.50%.
// Tenures in months use nominal days (bank_nominal_days) for the rate slab
// and the interest, calendar months for the maturity date.
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"

#define FD_MIN_PRINCIPAL 100000  // Rs 1,000 in paise
#define RD_MIN_MONTHLY 10000     // Rs 100
#define PREMATURE_PENALTY_BP 100

static int get_deposit_loan_rates(ToolCtx *c) {
  const char *product = arg_text(c, "product_type");
  const char *table = strcmp(product, "rd") == 0 ? "fd" : product;
  cJSON *rows = tq_rows(c, "SELECT label AS tenure_or_slab, rate_bp, rate_bp + senior_extra_bp AS senior_rate_bp"
                           " FROM interest_rates WHERE product = ? AND (? = 0 OR slab_max >= 180) ORDER BY slab_min",
                        "si", table, strcmp(product, "rd") == 0);
  if (!rows) return -1;
  put_text(c, "product_type", product);
  cJSON_AddItemToObject(c->result, "rates", rows);
  if (strcmp(product, "fd") == 0)
    put_text(c, "notes", "Minimum deposit Rs 1,000; senior citizens (60+) +0.50%; quarterly compounding from 6 "
                         "months, simple interest below; premature closure: rate for the period run minus 1.00%.");
  else if (strcmp(product, "rd") == 0)
    put_text(c, "notes", "6 to 120 months, minimum Rs 100 a month; rates as FD for the same tenure.");
  else if (strcmp(product, "personal_loan") == 0)
    put_text(c, "notes", "Credit score below 650 not eligible; 12-60 months; Rs 50,000 to Rs 25,00,000; "
                         "processing fee 1.5% (min Rs 1,000, max Rs 10,000) + GST.");
  else if (strcmp(product, "gold_loan") == 0)
    put_text(c, "notes", "Loan-to-value at most 75% of the gold value; processing fee 0.25% (min Rs 250) + GST.");
  else if (strcmp(product, "home_loan") == 0)
    put_text(c, "notes", "Floating rate; processing fee 0.50% (max Rs 10,000) + GST; no prepayment charge.");
  return 0;
}

// Senior status: the explicit argument when given, else the verified
// customer's age, else not senior.
static int is_senior(ToolCtx *c) {
  if (arg_present(c, "senior_citizen")) return arg_bool(c, "senior_citizen");
  if (!c->ep->customer_id[0]) return 0;
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  return cust.age >= 60;
}

typedef struct FdTerms {
  int days, months, rate_bp;
  int64_t maturity_days, interest;
} FdTerms;

static int fd_terms(ToolCtx *c, int64_t principal, int senior, FdTerms *t) {
  memset(t, 0, sizeof *t);
  int has_months = arg_present(c, "tenure_months"), has_days = arg_present(c, "tenure_days");
  if (has_months == has_days) return tool_error(c, "give exactly one of tenure_months or tenure_days");
  if (principal < FD_MIN_PRINCIPAL) return tool_error(c, "the minimum fixed deposit is Rs 1,000");
  if (has_months) {
    t->months = (int)arg_int(c, "tenure_months", 0);
    t->days = bank_nominal_days(t->months);
    t->maturity_days = bank_add_months(c->today_days, t->months);
  } else {
    t->days = (int)arg_int(c, "tenure_days", 0);
    t->maturity_days = c->today_days + t->days;
  }
  if (rate_for(c, "fd", t->days, &t->rate_bp) != 0) return -1;
  if (!t->rate_bp) return tool_error(c, "no FD rate for a tenure of %d days (7 days to 10 years)", t->days);
  t->rate_bp += senior ? 50 : 0;
  t->interest = bank_fd_interest(principal, t->rate_bp, t->days);
  return 0;
}

static void put_fd_terms(ToolCtx *c, int64_t principal, const FdTerms *t) {
  char date[11];
  bank_date_format(t->maturity_days, date);
  put_rupees(c, "principal_amount", principal);
  put_percent(c, "interest_rate_percent", t->rate_bp);
  put_int(c, "tenure_days", t->days);
  if (t->months) put_int(c, "tenure_months", t->months);
  put_text(c, "maturity_date", date);
  put_rupees(c, "interest", t->interest);
  put_rupees(c, "maturity_amount", principal + t->interest);
  put_text(c, "compounding", t->days >= 180 ? "quarterly" : "simple interest");
}

static int calculate_fd_maturity(ToolCtx *c) {
  int senior = is_senior(c);
  int64_t principal = arg_paise(c, "principal_amount");
  FdTerms t;
  if (senior < 0 || fd_terms(c, principal, senior, &t) != 0) return -1;
  put_fd_terms(c, principal, &t);
  put_bool(c, "senior_citizen_rate", senior);
  return 0;
}

static int create_fd(ToolCtx *c) {
  Customer cust;
  Account acct;
  int64_t principal = arg_paise(c, "principal_amount");
  FdTerms t;
  if (load_customer(c, &cust) != 0 || require_kyc(c, &cust) != 0) return -1;
  if (load_account(c, arg_text(c, "source_account"), &acct) != 0) return -1;
  if (fd_terms(c, principal, cust.age >= 60, &t) != 0) return -1;
  if (require_debitable(c, &acct, principal) != 0) return -1;
  char id[BANK_ID_MAX], maturity[11];
  bank_date_format(t.maturity_days, maturity);
  // nullif: a tenure given in days stores no tenure_months.
  if (new_id(c, "fd", id) != 0 || post_entry(c, acct.id, 0, principal, "internal", "Fixed deposit booked", id, NULL) ||
      tq_exec(c, "INSERT INTO fixed_deposits VALUES (?, ?, ?, ?, ?, nullif(?, 0), ?, ?, ?, ?, 'active', NULL, NULL)",
              "sssliii" "ssl", id, cust.id, acct.id, principal, t.rate_bp, t.months, t.days, c->today, maturity,
              principal + t.interest) != 0)
    return -1;
  put_text(c, "fd_id", id);
  put_fd_terms(c, principal, &t);
  put_text(c, "source_account", acct.id);
  put_rupees(c, "source_balance_after", acct.balance - principal);
  return 0;
}

static int rd_rate(ToolCtx *c, int months, int senior, int *rate_bp) {
  if (rate_for(c, "fd", bank_nominal_days(months), rate_bp) != 0) return -1;
  *rate_bp += senior ? 50 : 0;
  return 0;
}

static int calculate_rd_maturity(ToolCtx *c) {
  int senior = is_senior(c), rate = 0;
  int months = (int)arg_int(c, "tenure_months", 0);
  int64_t monthly = arg_paise(c, "monthly_amount");
  if (senior < 0 || rd_rate(c, months, senior, &rate) != 0) return -1;
  if (monthly < RD_MIN_MONTHLY) return tool_error(c, "the minimum RD instalment is Rs 100 a month");
  int64_t interest = bank_rd_interest(monthly, rate, months, months);
  put_rupees(c, "monthly_amount", monthly);
  put_int(c, "tenure_months", months);
  put_percent(c, "interest_rate_percent", rate);
  put_rupees(c, "total_deposited", monthly * months);
  put_rupees(c, "interest", interest);
  put_rupees(c, "maturity_amount", monthly * months + interest);
  put_bool(c, "senior_citizen_rate", senior);
  return 0;
}

static int create_rd(ToolCtx *c) {
  Customer cust;
  Account acct;
  int months = (int)arg_int(c, "tenure_months", 0), rate = 0;
  int64_t monthly = arg_paise(c, "monthly_amount");
  if (load_customer(c, &cust) != 0 || require_kyc(c, &cust) != 0) return -1;
  if (load_account(c, arg_text(c, "source_account"), &acct) != 0) return -1;
  if (monthly < RD_MIN_MONTHLY) return tool_error(c, "the minimum RD instalment is Rs 100 a month");
  if (rd_rate(c, months, cust.age >= 60, &rate) != 0 || require_debitable(c, &acct, monthly) != 0) return -1;
  int64_t maturity_amount = monthly * months + bank_rd_interest(monthly, rate, months, months);
  char id[BANK_ID_MAX], maturity[11];
  bank_date_format(bank_add_months(c->today_days, months), maturity);
  if (new_id(c, "rd", id) != 0 ||
      post_entry(c, acct.id, 0, monthly, "internal", "Recurring deposit instalment 1", id, NULL) != 0 ||
      tq_exec(c, "INSERT INTO recurring_deposits VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, 'active', NULL, NULL)",
              "sssliiss" "l", id, cust.id, acct.id, monthly, months, rate, c->today, maturity, maturity_amount) != 0)
    return -1;
  put_text(c, "rd_id", id);
  put_rupees(c, "monthly_amount", monthly);
  put_int(c, "tenure_months", months);
  put_percent(c, "interest_rate_percent", rate);
  put_text(c, "maturity_date", maturity);
  put_rupees(c, "maturity_amount", maturity_amount);
  put_text(c, "first_instalment", "debited today; the rest on the same date each month");
  return 0;
}

static int list_deposits(ToolCtx *c) {
  cJSON *fds = tq_rows(c, "SELECT fd_id, principal_paise, rate_bp, tenure_months, tenure_days, start_date,"
                          " maturity_date, maturity_amount_paise, status, source_account FROM fixed_deposits"
                          " WHERE customer_id = ? ORDER BY fd_id", "s", c->ep->customer_id);
  if (!fds) return -1;
  cJSON_AddItemToObject(c->result, "fixed_deposits", fds);
  cJSON *rds = tq_rows(c, "SELECT rd_id, monthly_paise AS monthly_amount_paise, tenure_months, rate_bp, start_date,"
                          " maturity_date, instalments_paid, maturity_amount_paise, status, source_account"
                          " FROM recurring_deposits WHERE customer_id = ? ORDER BY rd_id", "s", c->ep->customer_id);
  if (!rds) return -1;
  cJSON_AddItemToObject(c->result, "recurring_deposits", rds);
  return 0;
}

// Premature rate: the slab for the days actually run (+ senior bonus) minus
// 1.00%, never below 0; 0 within 7 days. *full_bp is the rate without the
// penalty, for quoting what the penalty costs.
static int premature_rate(ToolCtx *c, int64_t days_run, int senior, int *rate_bp, int *full_bp) {
  *rate_bp = *full_bp = 0;
  if (days_run < 7) return 0;
  int slab = 0;
  if (rate_for(c, "fd", days_run > 3650 ? 3650 : days_run, &slab) != 0) return -1;
  *full_bp = slab + (senior ? 50 : 0);
  *rate_bp = *full_bp > PREMATURE_PENALTY_BP ? *full_bp - PREMATURE_PENALTY_BP : 0;
  return 0;
}

static int close_fd_premature(ToolCtx *c) {
  const char *id = arg_text(c, "fd_id");
  char start[11] = "", status[16] = "", account[BANK_ID_MAX] = "";
  int64_t principal = 0, start_days = 0;
  int found = tq_text(c, status, sizeof status, "SELECT status FROM fixed_deposits WHERE fd_id = ? AND customer_id = ?",
                      "ss", id, c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "fixed deposit %s was not found for this customer", id);
  if (strcmp(status, "active") != 0) return tool_error(c, "fixed deposit %s is already %s", id, status);
  if (tq_text(c, start, sizeof start, "SELECT start_date FROM fixed_deposits WHERE fd_id = ?", "s", id) != 1 ||
      tq_text(c, account, sizeof account, "SELECT source_account FROM fixed_deposits WHERE fd_id = ?", "s", id) != 1 ||
      tq_int(c, &principal, "SELECT principal_paise FROM fixed_deposits WHERE fd_id = ?", "s", id) != 1 ||
      bank_date_parse(start, &start_days) != 0)
    return tool_internal(c);
  Customer cust;
  Account acct;
  if (load_customer(c, &cust) != 0 || load_account(c, account, &acct) != 0) return -1;
  int64_t days_run = c->today_days - start_days;
  int rate = 0, full = 0;
  if (premature_rate(c, days_run, cust.age >= 60, &rate, &full) != 0) return -1;
  int64_t interest = bank_fd_interest(principal, rate, (int)days_run);
  int64_t penalty = bank_fd_interest(principal, full, (int)days_run) - interest;
  if (strcmp(acct.status, "active") != 0) return tool_error(c, "payout account %s is %s", acct.id, acct.status);
  if (require_confirmation(c, penalty, "premature closure (interest reduced by the 1.00% penalty)") != 0) return -1;
  if (tq_exec(c, "UPDATE fixed_deposits SET status = 'closed', closed_on = ?, payout_paise = ? WHERE fd_id = ?", "sls",
              c->today, principal + interest, id) != 0 ||
      post_entry(c, acct.id, 1, principal + interest, "internal", "FD premature closure payout", id, NULL) != 0)
    return -1;
  put_text(c, "fd_id", id);
  put_int(c, "days_run", days_run);
  put_percent(c, "applied_rate_percent", rate);
  put_rupees(c, "principal", principal);
  put_rupees(c, "interest_paid", interest);
  put_rupees(c, "penalty_interest_forgone", penalty);
  put_rupees(c, "payout_amount", principal + interest);
  put_text(c, "credited_to", acct.id);
  return 0;
}

static int close_rd_premature(ToolCtx *c) {
  const char *id = arg_text(c, "rd_id");
  char start[11] = "", status[16] = "", account[BANK_ID_MAX] = "";
  int64_t monthly = 0, paid = 0, start_days = 0;
  int found = tq_text(c, status, sizeof status,
                      "SELECT status FROM recurring_deposits WHERE rd_id = ? AND customer_id = ?", "ss", id,
                      c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "recurring deposit %s was not found for this customer", id);
  if (strcmp(status, "active") != 0) return tool_error(c, "recurring deposit %s is already %s", id, status);
  if (tq_text(c, start, sizeof start, "SELECT start_date FROM recurring_deposits WHERE rd_id = ?", "s", id) != 1 ||
      tq_text(c, account, sizeof account, "SELECT source_account FROM recurring_deposits WHERE rd_id = ?", "s", id) != 1 ||
      tq_int(c, &monthly, "SELECT monthly_paise FROM recurring_deposits WHERE rd_id = ?", "s", id) != 1 ||
      tq_int(c, &paid, "SELECT instalments_paid FROM recurring_deposits WHERE rd_id = ?", "s", id) != 1 ||
      bank_date_parse(start, &start_days) != 0)
    return tool_internal(c);
  Customer cust;
  Account acct;
  if (load_customer(c, &cust) != 0 || load_account(c, account, &acct) != 0) return -1;
  int64_t days_run = c->today_days - start_days;
  int months_run = 0;
  while (months_run < 1200 && bank_add_months(start_days, months_run + 1) <= c->today_days) months_run++;
  if (months_run < paid) months_run = (int)paid;
  int rate = 0, full = 0;
  if (premature_rate(c, days_run, cust.age >= 60, &rate, &full) != 0) return -1;
  int64_t interest = bank_rd_interest(monthly, rate, (int)paid, months_run);
  int64_t penalty = bank_rd_interest(monthly, full, (int)paid, months_run) - interest;
  if (strcmp(acct.status, "active") != 0) return tool_error(c, "payout account %s is %s", acct.id, acct.status);
  if (require_confirmation(c, penalty, "premature closure (interest reduced by the 1.00% penalty)") != 0) return -1;
  int64_t payout = monthly * paid + interest;
  if (tq_exec(c, "UPDATE recurring_deposits SET status = 'closed', closed_on = ?, payout_paise = ? WHERE rd_id = ?",
              "sls", c->today, payout, id) != 0 ||
      post_entry(c, acct.id, 1, payout, "internal", "RD premature closure payout", id, NULL) != 0)
    return -1;
  put_text(c, "rd_id", id);
  put_int(c, "instalments_paid", paid);
  put_percent(c, "applied_rate_percent", rate);
  put_rupees(c, "deposited", monthly * paid);
  put_rupees(c, "interest_paid", interest);
  put_rupees(c, "penalty_interest_forgone", penalty);
  put_rupees(c, "payout_amount", payout);
  put_text(c, "credited_to", acct.id);
  return 0;
}

#define P_CONFIRM                                                                                          \
  {"customer_confirmed", PT_BOOLEAN, 0, "True only after the customer agreed to the quoted penalty/charge.", \
   NULL, 0, 0, 0}
#define P_TENURE_MONTHS(req) {"tenure_months", PT_INTEGER, req, "Tenure in months.", NULL, 1, 120, 0}
#define P_TENURE_DAYS {"tenure_days", PT_INTEGER, 0, "Tenure in days (instead of months).", NULL, 7, 3650, 0}
#define P_SENIOR \
  {"senior_citizen", PT_BOOLEAN, 0, "Apply the senior citizen rate; default: the verified customer's age.", NULL, 0, 0, 0}

static const ToolDef TOOLS[] = {
    {"get_deposit_loan_rates", "Returns Navadhan Bank's current interest rates for a product, by tenure or slab.", 0, 0,
     0, get_deposit_loan_rates,
     {{"product_type", PT_STRING, 1, "Product.", "fd|rd|savings|personal_loan|home_loan|gold_loan", 0, 0, 0}}},
    {"calculate_fd_maturity", "Computes FD interest and maturity for an amount and tenure (months or days).", 0, 0, 0,
     calculate_fd_maturity,
     {{"principal_amount", PT_AMOUNT, 1, "Deposit in rupees (minimum 1000).", NULL, 0, 0, 0}, P_TENURE_MONTHS(0),
      P_TENURE_DAYS, P_SENIOR}},
    {"calculate_rd_maturity", "Computes RD interest and maturity for a monthly instalment and tenure.", 0, 0, 0,
     calculate_rd_maturity,
     {{"monthly_amount", PT_AMOUNT, 1, "Monthly instalment in rupees (minimum 100).", NULL, 0, 0, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 6, 120, 0}, P_SENIOR}},
    {"create_fd", "Books a fixed deposit from the customer's account (needs current KYC and funds).", 1, 0, 1, create_fd,
     {{"principal_amount", PT_AMOUNT, 1, "Deposit in rupees (minimum 1000).", NULL, 0, 0, 0}, P_TENURE_MONTHS(0),
      P_TENURE_DAYS, {"source_account", PT_STRING, 1, "Account to debit.", NULL, 0, 0, 20}}},
    {"create_rd", "Opens a recurring deposit; the first instalment is debited today.", 1, 0, 1, create_rd,
     {{"monthly_amount", PT_AMOUNT, 1, "Monthly instalment in rupees (minimum 100).", NULL, 0, 0, 0},
      {"tenure_months", PT_INTEGER, 1, "Tenure in months.", NULL, 6, 120, 0},
      {"source_account", PT_STRING, 1, "Account to debit each month.", NULL, 0, 0, 20}}},
    {"list_deposits", "Lists the customer's fixed and recurring deposits.", 0, 0, 1, list_deposits, {{0}}},
    {"close_fd_premature",
     "Closes a fixed deposit before maturity: interest at the rate for the period run minus 1.00% (none within 7 "
     "days), credited to the source account.",
     1, 1, 1, close_fd_premature, {{"fd_id", PT_STRING, 1, "Fixed deposit id.", NULL, 0, 0, 20}, P_CONFIRM}},
    {"close_rd_premature", "Closes a recurring deposit before maturity with the same penalty as an FD.", 1, 1, 1,
     close_rd_premature, {{"rd_id", PT_STRING, 1, "Recurring deposit id.", NULL, 0, 0, 20}, P_CONFIRM}},
};

const ToolArea bank_area_deposits = {"deposits", TOOLS, (int)(sizeof TOOLS / sizeof TOOLS[0])};
