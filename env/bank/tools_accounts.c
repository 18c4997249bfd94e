// env/bank/tools_accounts.c: account tools of Navadhan Bank: accounts,
// balances, transactions, statements, beneficiaries, transfers (NEFT, IMPS,
// RTGS, UPI and between own accounts) with their limits and charges, and
// disputes of unauthorised transactions with the customer's liability under
// the RBI 2017 circular on limiting liability in unauthorised electronic
// banking transactions.
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"

#define RUPEES(x) ((int64_t)(x) * 100)
#define NETBANKING_DAILY_LIMIT RUPEES(1000000)
#define RTGS_MINIMUM RUPEES(200000)
#define IMPS_PER_TXN_LIMIT RUPEES(500000)
#define UPI_DAILY_LIMIT RUPEES(100000)
#define COOLING_LIMIT RUPEES(50000)

static int list_accounts(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT account_id, account_type, status, balance_paise, opened_on, branch, ifsc"
                           " FROM accounts WHERE customer_id = ? ORDER BY account_id", "s", c->ep->customer_id);
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "accounts", rows);
  return 0;
}

static int get_account_balance(ToolCtx *c) {
  cJSON *out = cJSON_AddArrayToObject(c->result, "balances");
  const cJSON *id;
  cJSON_ArrayForEach(id, arg_array(c, "account_ids")) {
    Account acct;
    if (load_account(c, id->valuestring, &acct) != 0) return -1;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "account_id", acct.id);
    cJSON_AddStringToObject(row, "account_type", acct.type);
    cJSON_AddStringToObject(row, "status", acct.status);
    cJSON_AddNumberToObject(row, "balance", bank_paise_to_rupees(acct.balance));
    cJSON_AddItemToArray(out, row);
  }
  put_text(c, "as_of", c->today);
  return 0;
}

static int get_transactions(ToolCtx *c) {
  Account acct;
  if (load_account(c, arg_text(c, "account_id"), &acct) != 0) return -1;
  const char *from = arg_present(c, "from_date") ? arg_text(c, "from_date") : "1900-01-01";
  const char *to = arg_present(c, "to_date") ? arg_text(c, "to_date") : c->today;
  if (strcmp(from, to) > 0) return tool_error(c, "from_date is after to_date");
  cJSON *rows = tq_rows(c, "SELECT txn_id, txn_date, direction, amount_paise, balance_after_paise, channel,"
                           " description FROM transactions WHERE account_id = ? AND txn_date BETWEEN ? AND ?"
                           " ORDER BY txn_date DESC, txn_id DESC LIMIT ?",
                        "sssi", acct.id, from, to, (int)arg_int(c, "limit", 10));
  if (!rows) return -1;
  put_text(c, "account_id", acct.id);
  cJSON_AddItemToObject(c->result, "transactions", rows);
  return 0;
}

static int request_statement(ToolCtx *c) {
  Account acct;
  if (load_account(c, arg_text(c, "account_id"), &acct) != 0) return -1;
  int64_t from = arg_int(c, "from_date", 0), to = arg_int(c, "to_date", 0);
  if (from > to) return tool_error(c, "from_date is after to_date");
  if (to > c->today_days) return tool_error(c, "to_date is in the future (today is %s)", c->today);
  if (to - from > 366) return tool_error(c, "a statement covers at most one year");
  char request[BANK_ID_MAX], description[96];
  snprintf(description, sizeof description, "Statement %s to %s by %s", arg_text(c, "from_date"),
           arg_text(c, "to_date"), arg_text(c, "delivery"));
  if (new_id(c, "request", request) != 0 ||
      tq_exec(c, "INSERT INTO service_requests VALUES (?, ?, 'statement', ?, ?, ?, 'completed', 'Statement sent')",
              "sssss", request, c->ep->customer_id, acct.id, description, c->today) != 0)
    return -1;
  put_text(c, "request_id", request);
  put_text(c, "account_id", acct.id);
  put_text(c, "delivery", arg_text(c, "delivery"));
  put_text(c, "status", "completed");
  return 0;
}

static int list_beneficiaries(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT beneficiary_id, name, account_number, ifsc, nickname, added_on,"
                           " added_on = ? AS in_cooling_period FROM beneficiaries"
                           " WHERE customer_id = ? AND status = 'active' ORDER BY beneficiary_id",
                        "ss", c->today, c->ep->customer_id);
  if (!rows) return -1;
  cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    cJSON *flag = cJSON_GetObjectItem(row, "in_cooling_period");
    cJSON_ReplaceItemInObject(row, "in_cooling_period", cJSON_CreateBool(flag && flag->valuedouble != 0));
  }
  cJSON_AddItemToObject(c->result, "beneficiaries", rows);
  return 0;
}

static int valid_ifsc(const char *s) {
  if (strlen(s) != 11 || s[4] != '0') return 0;
  for (int i = 0; i < 11; i++) {
    int upper = s[i] >= 'A' && s[i] <= 'Z', digit = s[i] >= '0' && s[i] <= '9';
    if (i < 4 ? !upper : !(upper || digit)) return 0;
  }
  return 1;
}

static int add_beneficiary(ToolCtx *c) {
  const char *number = arg_text(c, "account_number"), *ifsc = arg_text(c, "ifsc");
  size_t len = strlen(number);
  if (len < 9 || len > 18 || strspn(number, "0123456789") != len)
    return tool_error(c, "account_number must be 9 to 18 digits");
  if (!valid_ifsc(ifsc)) return tool_error(c, "ifsc must be 11 characters: 4 letters, 0, then 6 letters or digits");
  int64_t existing = 0;
  if (tq_int(c, &existing, "SELECT count(*) FROM beneficiaries WHERE customer_id = ? AND account_number = ?"
                           " AND ifsc = ? AND status = 'active'", "sss", c->ep->customer_id, number, ifsc) < 0)
    return -1;
  if (existing) return tool_error(c, "this account is already a beneficiary");
  char id[BANK_ID_MAX];
  if (new_id(c, "beneficiary", id) != 0 ||
      tq_exec(c, "INSERT INTO beneficiaries VALUES (?, ?, ?, ?, ?, ?, ?, 'active')", "sssssss", id,
              c->ep->customer_id, arg_text(c, "name"), number, ifsc, arg_text(c, "nickname"), c->today) != 0)
    return -1;
  put_text(c, "beneficiary_id", id);
  put_text(c, "added_on", c->today);
  put_text(c, "cooling_period", "transfers to a new beneficiary are capped at Rs 50,000 in its first 24 hours");
  return 0;
}

static int delete_beneficiary(ToolCtx *c) {
  const char *id = arg_text(c, "beneficiary_id");
  int64_t found = 0;
  if (tq_int(c, &found, "SELECT count(*) FROM beneficiaries WHERE beneficiary_id = ? AND customer_id = ?"
                        " AND status = 'active'", "ss", id, c->ep->customer_id) < 0)
    return -1;
  if (!found) return tool_error(c, "beneficiary %s was not found among this customer's beneficiaries", id);
  if (tq_exec(c, "UPDATE beneficiaries SET status = 'deleted' WHERE beneficiary_id = ?", "s", id) != 0) return -1;
  put_text(c, "beneficiary_id", id);
  put_text(c, "status", "deleted");
  return 0;
}

// Sum of today's transfers matching a mode list.
static int sum_today(ToolCtx *c, const char *modes_sql, int64_t *out) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT coalesce(sum(amount_paise), 0) FROM transfers WHERE customer_id = ?"
                            " AND transfer_date = ? AND mode IN (%s)", modes_sql);
  return tq_int(c, out, sql, "ss", c->ep->customer_id, c->today) < 0 ? -1 : 0;
}

static const char *imps_charge_code(int64_t amount) {
  if (amount <= RUPEES(1000)) return "imps_upto_1000";
  return amount <= RUPEES(100000) ? "imps_upto_100000" : "imps_above_100000";
}

static int check_mode_limits(ToolCtx *c, const char *mode, int64_t amount) {
  char limit[40];
  if (strcmp(mode, "rtgs") == 0 && amount < RTGS_MINIMUM) return tool_error(c, "RTGS needs at least Rs 2,00,000; use NEFT or IMPS");
  if (strcmp(mode, "imps") == 0 && amount > IMPS_PER_TXN_LIMIT)
    return tool_error(c, "IMPS allows at most Rs 5,00,000 per transaction; use NEFT or RTGS");
  int64_t used = 0;
  if (strcmp(mode, "upi") == 0) {
    if (sum_today(c, "'upi'", &used) != 0) return -1;
    if (used + amount > UPI_DAILY_LIMIT) {
      bank_format_inr(UPI_DAILY_LIMIT - used, limit);
      return tool_error(c, "UPI limit is Rs 1,00,000 per day; %s remains today", limit);
    }
  } else {
    if (sum_today(c, "'neft','imps','rtgs'", &used) != 0) return -1;
    if (used + amount > NETBANKING_DAILY_LIMIT) {
      bank_format_inr(NETBANKING_DAILY_LIMIT - used, limit);
      return tool_error(c, "the net-banking limit is Rs 10,00,000 per day; %s remains today", limit);
    }
  }
  return 0;
}

static int transfer_funds(ToolCtx *c) {
  const char *mode = arg_text(c, "mode"), *beneficiary = arg_text(c, "beneficiary_id");
  int64_t amount = arg_paise(c, "amount");
  Customer cust;
  Account from;
  if (load_customer(c, &cust) != 0 || require_kyc(c, &cust) != 0) return -1;
  if (load_account(c, arg_text(c, "from_account"), &from) != 0) return -1;
  char to_account[32] = "", added_on[11] = "";
  int found = tq_text(c, to_account, sizeof to_account, "SELECT account_number FROM beneficiaries"
                      " WHERE beneficiary_id = ? AND customer_id = ? AND status = 'active'", "ss", beneficiary, cust.id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "beneficiary %s was not found; add it with add_beneficiary first", beneficiary);
  if (tq_text(c, added_on, sizeof added_on, "SELECT added_on FROM beneficiaries WHERE beneficiary_id = ?", "s",
              beneficiary) != 1)
    return tool_internal(c);
  if (check_mode_limits(c, mode, amount) != 0) return -1;
  if (strcmp(added_on, c->today) == 0) {
    int64_t sent = 0;
    if (tq_int(c, &sent, "SELECT coalesce(sum(amount_paise), 0) FROM transfers WHERE beneficiary_id = ?"
                         " AND transfer_date = ?", "ss", beneficiary, c->today) < 0)
      return -1;
    if (sent + amount > COOLING_LIMIT)
      return tool_error(c, "beneficiary %s was added today: transfers to it are capped at Rs 50,000 in its first 24 "
                           "hours", beneficiary);
  }
  int64_t charge = 0, gst = 0;
  if (strcmp(mode, "imps") == 0 && charge_for(c, imps_charge_code(amount), amount, &charge, &gst) != 0) return -1;
  // Every other precondition first: the customer is asked to agree to a
  // charge only for a transfer that will then go through.
  if (require_debitable(c, &from, amount + charge + gst) != 0) return -1;
  if (require_confirmation(c, charge + gst, "this IMPS transfer") != 0) return -1;
  char transfer_id[BANK_ID_MAX], txn[BANK_ID_MAX] = "", description[96], mode_upper[8];
  snprintf(mode_upper, sizeof mode_upper, "%s", mode);
  for (char *p = mode_upper; *p; p++) *p = (char)(*p - 32);
  snprintf(description, sizeof description, "%s transfer to %s", mode_upper, to_account);
  if (new_id(c, "transfer", transfer_id) != 0 ||
      post_entry(c, from.id, 0, amount, mode, description, to_account, txn) != 0 ||
      post_entry(c, from.id, 0, charge + gst, "charge", "IMPS charge incl. GST", NULL, NULL) != 0 ||
      tq_exec(c, "INSERT INTO transfers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'completed', ?)", "sssssslls" "s",
              transfer_id, cust.id, from.id, to_account, beneficiary, mode, amount, charge + gst, c->today,
              arg_text(c, "remarks")) != 0)
    return -1;
  put_text(c, "transfer_id", transfer_id);
  put_text(c, "reference", txn);
  put_text(c, "mode", mode);
  put_rupees(c, "amount", amount);
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  put_rupees(c, "balance_after", from.balance - amount - charge - gst);
  put_text(c, "status", "completed");
  return 0;
}

static int transfer_between_own_accounts(ToolCtx *c) {
  Account from, to;
  int64_t amount = arg_paise(c, "amount");
  if (load_account(c, arg_text(c, "from_account"), &from) != 0 || load_account(c, arg_text(c, "to_account"), &to) != 0)
    return -1;
  if (strcmp(from.id, to.id) == 0) return tool_error(c, "from_account and to_account are the same");
  if (strcmp(to.status, "active") != 0) return tool_error(c, "account %s is %s; credits are not allowed", to.id, to.status);
  if (require_debitable(c, &from, amount) != 0) return -1;
  char transfer_id[BANK_ID_MAX], txn[BANK_ID_MAX] = "";
  if (new_id(c, "transfer", transfer_id) != 0 ||
      post_entry(c, from.id, 0, amount, "internal", "Transfer to own account", to.id, txn) != 0 ||
      post_entry(c, to.id, 1, amount, "internal", "Transfer from own account", from.id, NULL) != 0 ||
      tq_exec(c, "INSERT INTO transfers VALUES (?, ?, ?, ?, NULL, 'internal', ?, 0, ?, 'completed', NULL)", "ssssls",
              transfer_id, c->ep->customer_id, from.id, to.id, amount, c->today) != 0)
    return -1;
  put_text(c, "transfer_id", transfer_id);
  put_text(c, "reference", txn);
  put_rupees(c, "amount", amount);
  put_rupees(c, "from_balance_after", from.balance - amount);
  put_rupees(c, "to_balance_after", to.balance + amount);
  return 0;
}

static int get_transfer_limits(ToolCtx *c) {
  int64_t netbanking = 0, upi = 0;
  if (sum_today(c, "'neft','imps','rtgs'", &netbanking) != 0 || sum_today(c, "'upi'", &upi) != 0) return -1;
  put_rupees(c, "netbanking_daily_limit", NETBANKING_DAILY_LIMIT);
  put_rupees(c, "netbanking_used_today", netbanking);
  put_rupees(c, "netbanking_remaining_today", NETBANKING_DAILY_LIMIT - netbanking);
  put_rupees(c, "upi_daily_limit", UPI_DAILY_LIMIT);
  put_rupees(c, "upi_used_today", upi);
  put_rupees(c, "upi_remaining_today", UPI_DAILY_LIMIT - upi);
  put_rupees(c, "imps_per_transaction_limit", IMPS_PER_TXN_LIMIT);
  put_rupees(c, "rtgs_minimum", RTGS_MINIMUM);
  put_rupees(c, "new_beneficiary_first_24h_limit", COOLING_LIMIT);
  put_text(c, "charges", "NEFT, RTGS and UPI free; IMPS free up to Rs 1,000, Rs 5 + GST up to Rs 1,00,000, "
                         "Rs 15 + GST above");
  return 0;
}

static int raise_dispute(ToolCtx *c) {
  const char *txn_id = arg_text(c, "transaction_id"), *reason = arg_text(c, "reason");
  char date[11] = "", direction[8] = "", account[BANK_ID_MAX] = "";
  int found = tq_text(c, date, sizeof date, "SELECT t.txn_date FROM transactions t JOIN accounts a"
                      " ON a.account_id = t.account_id WHERE t.txn_id = ? AND a.customer_id = ?", "ss", txn_id,
                      c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "transaction %s was not found in this customer's accounts", txn_id);
  if (tq_text(c, direction, sizeof direction, "SELECT direction FROM transactions WHERE txn_id = ?", "s", txn_id) != 1 ||
      tq_text(c, account, sizeof account, "SELECT account_id FROM transactions WHERE txn_id = ?", "s", txn_id) != 1)
    return tool_internal(c);
  if (strcmp(direction, "debit") != 0) return tool_error(c, "transaction %s is a credit; only debits can be disputed", txn_id);
  int64_t open = 0, amount = 0, txn_days = 0;
  if (tq_int(c, &open, "SELECT count(*) FROM disputes WHERE txn_id = ?", "s", txn_id) < 0 ||
      tq_int(c, &amount, "SELECT amount_paise FROM transactions WHERE txn_id = ?", "s", txn_id) < 0)
    return -1;
  if (open) return tool_error(c, "transaction %s already has a dispute", txn_id);
  if (bank_date_parse(date, &txn_days) != 0) return tool_internal(c);
  int days = bank_working_days_between(txn_days, c->today_days);
  char liability[160];
  if (strcmp(reason, "unauthorised") != 0) {
    snprintf(liability, sizeof liability, "not applicable (not an unauthorised transaction)");
  } else if (days <= 3) {
    snprintf(liability, sizeof liability, "zero: reported within 3 working days");
  } else if (days <= 7) {
    Account acct;
    if (load_account(c, account, &acct) != 0) return -1;
    int64_t cap = strcmp(acct.type, "current") == 0 ? RUPEES(25000) : RUPEES(10000);
    char text[40];
    bank_format_inr(amount < cap ? amount : cap, text);
    snprintf(liability, sizeof liability, "limited to %s: reported within 4 to 7 working days", text);
  } else {
    snprintf(liability, sizeof liability, "as per the bank's board-approved policy: reported after 7 working days");
  }
  char id[BANK_ID_MAX];
  if (new_id(c, "dispute", id) != 0 ||
      tq_exec(c, "INSERT INTO disputes VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?)", "ssssssis", id, c->ep->customer_id,
              txn_id, reason, arg_text(c, "description"), c->today, days, liability) != 0)
    return -1;
  put_text(c, "dispute_id", id);
  put_text(c, "transaction_id", txn_id);
  put_int(c, "working_days_since_transaction", days);
  put_text(c, "customer_liability", liability);
  put_text(c, "status", "open");
  return 0;
}

static int get_dispute_status(ToolCtx *c) {
  return tq_result_owned_row(c,
                             "SELECT dispute_id, txn_id AS transaction_id, reason, reported_on, status, customer_liability"
                             " FROM disputes WHERE dispute_id = ? AND customer_id = ?",
                             "dispute_id", "dispute");
}

#define P_ACCOUNT(name, what) {name, PT_STRING, 1, what, NULL, 0, 0, 20}
static const ToolDef TOOLS[] = {
    {"list_accounts", "Lists the customer's savings and current accounts with status and balance.", 0, 0, 1,
     list_accounts, {{0}}},
    {"get_account_balance", "Returns the current balance of one or more of the customer's accounts.", 0, 0, 1,
     get_account_balance,
     {{"account_ids", PT_STRING_ARRAY, 1, "Account numbers, e.g. [\"SB9191228734\"].", NULL, 0, 0, 20}}},
    {"get_transactions", "Lists recent transactions of an account, newest first, optionally within dates.", 0, 0, 1,
     get_transactions,
     {P_ACCOUNT("account_id", "Account number."),
      {"from_date", PT_DATE, 0, "First date (inclusive).", NULL, 0, 0, 0},
      {"to_date", PT_DATE, 0, "Last date (inclusive); default today.", NULL, 0, 0, 0},
      {"limit", PT_INTEGER, 0, "Number of transactions (default 10).", NULL, 1, 50, 0}}},
    {"request_statement", "Sends an account statement for a period of up to one year by email or to the branch.", 1,
     0, 1, request_statement,
     {P_ACCOUNT("account_id", "Account number."), {"from_date", PT_DATE, 1, "First date.", NULL, 0, 0, 0},
      {"to_date", PT_DATE, 1, "Last date (not after today).", NULL, 0, 0, 0},
      {"delivery", PT_STRING, 1, "Where to send it.", "email|branch", 0, 0, 0}}},
    {"list_beneficiaries", "Lists the customer's active payees, flagging those still in the 24-hour cooling period.",
     0, 0, 1, list_beneficiaries, {{0}}},
    {"add_beneficiary", "Registers a payee for NEFT/IMPS/RTGS/UPI transfers; the first 24 hours are a cooling period "
                        "with transfers capped at Rs 50,000.",
     1, 0, 1, add_beneficiary,
     {{"name", PT_STRING, 1, "Payee name.", NULL, 0, 0, 60},
      {"account_number", PT_STRING, 1, "Payee account number (9-18 digits).", NULL, 0, 0, 18},
      {"ifsc", PT_STRING, 1, "IFSC of the payee's branch, e.g. SBIN0004567.", NULL, 0, 0, 11},
      {"nickname", PT_STRING, 0, "Short name.", NULL, 0, 0, 30}}},
    {"delete_beneficiary", "Removes a payee.", 1, 0, 1, delete_beneficiary,
     {{"beneficiary_id", PT_STRING, 1, "Beneficiary id.", NULL, 0, 0, 20}}},
    {"transfer_funds",
     "Sends money to a registered beneficiary by NEFT (free), IMPS (up to Rs 5,00,000; Rs 5/15 + GST above Rs "
     "1,000), RTGS (from Rs 2,00,000, free) or UPI (Rs 1,00,000 a day, free). Net banking allows Rs 10,00,000 a day. "
     "Needs current KYC.",
     1, 1, 1, transfer_funds,
     {P_ACCOUNT("from_account", "Customer's account to debit."),
      {"beneficiary_id", PT_STRING, 1, "Registered beneficiary id.", NULL, 0, 0, 20},
      {"amount", PT_AMOUNT, 1, "Amount in rupees.", NULL, 0, 0, 0},
      {"mode", PT_STRING, 1, "Payment system.", "neft|imps|rtgs|upi", 0, 0, 0},
      {"remarks", PT_STRING, 0, "Note for the payee.", NULL, 0, 0, 60},
      {"customer_confirmed", PT_BOOLEAN, 0, "True only after the customer agreed to the quoted charge (IMPS).", NULL,
       0, 0, 0}}},
    {"transfer_between_own_accounts", "Moves money between two of the customer's own accounts, free.", 1, 0, 1,
     transfer_between_own_accounts,
     {P_ACCOUNT("from_account", "Account to debit."), P_ACCOUNT("to_account", "Account to credit."),
      {"amount", PT_AMOUNT, 1, "Amount in rupees.", NULL, 0, 0, 0}}},
    {"get_transfer_limits", "Returns per-mode transfer limits, today's usage and the charges.", 0, 0, 1,
     get_transfer_limits, {{0}}},
    {"raise_dispute",
     "Disputes a debit (e.g. an unauthorised transaction) and states the customer's liability under the RBI rules "
     "(zero when reported within 3 working days).",
     1, 0, 1, raise_dispute,
     {{"transaction_id", PT_STRING, 1, "Transaction id from get_transactions.", NULL, 0, 0, 20},
      {"reason", PT_STRING, 1, "Why.", "unauthorised|not_received|double_debit|wrong_amount", 0, 0, 0},
      {"description", PT_STRING, 1, "What happened, in the customer's words.", NULL, 0, 0, 300}}},
    {"get_dispute_status", "Returns the status of a dispute.", 0, 0, 1, get_dispute_status,
     {{"dispute_id", PT_STRING, 1, "Dispute id.", NULL, 0, 0, 20}}},
};

const ToolArea bank_area_accounts = {"accounts and transfers", TOOLS, (int)(sizeof TOOLS / sizeof TOOLS[0])};
