// env/bank/tools_sql.c: helpers every tool area uses (see
// bank_tools_internal.h): argument accessors, errors, prepared-statement
// queries that turn rows into JSON, and the shared banking preconditions
// (customer, KYC, account ownership, funds, charges, confirmation, postings).
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "env/bank/tools_internal.h"

// ---- arguments ----------------------------------------------------------------

static const ToolArg *find_arg(const ToolCtx *c, const char *name) {
  for (int i = 0; i < TOOL_MAX_PARAMS && c->def->params[i].name; i++)
    if (strcmp(c->def->params[i].name, name) == 0) return &c->args[i];
  log_error("bank tools: %s reads undeclared argument %s", c->def->name, name);
  return NULL;
}

int arg_present(const ToolCtx *c, const char *name) {
  const ToolArg *a = find_arg(c, name);
  return a && a->present;
}
const char *arg_text(const ToolCtx *c, const char *name) {
  const ToolArg *a = find_arg(c, name);
  return a && a->present ? a->text : NULL;
}
int64_t arg_int(const ToolCtx *c, const char *name, int64_t fallback) {
  const ToolArg *a = find_arg(c, name);
  return a && a->present ? a->integer : fallback;
}
int64_t arg_paise(const ToolCtx *c, const char *name) { return arg_int(c, name, 0); }
double arg_number(const ToolCtx *c, const char *name, double fallback) {
  const ToolArg *a = find_arg(c, name);
  return a && a->present ? a->number : fallback;
}
int arg_bool(const ToolCtx *c, const char *name) { return (int)arg_int(c, name, 0); }
const cJSON *arg_array(const ToolCtx *c, const char *name) {
  const ToolArg *a = find_arg(c, name);
  return a && a->present ? a->array : NULL;
}

// ---- errors ---------------------------------------------------------------------

int tool_error(ToolCtx *c, const char *fmt, ...) {
  int n = snprintf(c->error, sizeof c->error, "Error: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error + n, sizeof c->error - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

int tool_internal(ToolCtx *c) {
  log_warn("bank tools: %s: database error: %s (%s)", c->def ? c->def->name : "?", sqlite3_errmsg(c->db),
           c->err.message);
  return tool_error(c, "the bank's system could not complete this request; please try again or create a service "
                       "request");
}

// ---- SQL ------------------------------------------------------------------------

static sqlite3_stmt *prepare_v(ToolCtx *c, const char *sql, const char *types, va_list ap) {
  sqlite3_stmt *stmt = bank_stmt_get(c->ep, sql);
  if (!stmt) {
    snprintf(c->err.message, sizeof c->err.message, "prepare: %s", sql);
    tool_internal(c);
    return NULL;
  }
  // A mismatch between placeholders and values is a bug in a tool: refuse to
  // run the statement rather than bind garbage.
  int placeholders = sqlite3_bind_parameter_count(stmt);
  if (placeholders != (int)strlen(types)) {
    snprintf(c->err.message, sizeof c->err.message, "%d placeholders, %d values: %s", placeholders,
             (int)strlen(types), sql);
    bank_stmt_put(c->ep, stmt);
    tool_internal(c);
    return NULL;
  }
  for (int i = 0; types[i]; i++) {
    if (types[i] == 's') {
      const char *text = va_arg(ap, const char *);
      if (text) sqlite3_bind_text(stmt, i + 1, text, -1, SQLITE_TRANSIENT);
    } else if (types[i] == 'i') {
      sqlite3_bind_int(stmt, i + 1, va_arg(ap, int));
    } else {
      sqlite3_bind_int64(stmt, i + 1, (sqlite3_int64)va_arg(ap, int64_t));
    }
  }
  return stmt;
}

int tq_exec(ToolCtx *c, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  sqlite3_stmt *stmt = prepare_v(c, sql, types, ap);
  va_end(ap);
  if (!stmt) return -1;
  int rc;
  do rc = sqlite3_step(stmt);
  while (rc == SQLITE_ROW);
  bank_stmt_put(c->ep, stmt);
  if (rc != SQLITE_DONE) {
    snprintf(c->err.message, sizeof c->err.message, "exec: %s", sql);
    return tool_internal(c);
  }
  return 0;
}

static int step_first(ToolCtx *c, sqlite3_stmt *stmt) {
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) return 1;
  if (rc == SQLITE_DONE) return 0;
  return tool_internal(c);
}

int tq_int(ToolCtx *c, int64_t *out, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  sqlite3_stmt *stmt = prepare_v(c, sql, types, ap);
  va_end(ap);
  if (!stmt) return -1;
  int found = step_first(c, stmt);
  if (found == 1) *out = sqlite3_column_int64(stmt, 0);
  bank_stmt_put(c->ep, stmt);
  return found;
}

int tq_text(ToolCtx *c, char *out, size_t size, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  sqlite3_stmt *stmt = prepare_v(c, sql, types, ap);
  va_end(ap);
  if (!stmt) return -1;
  int found = step_first(c, stmt);
  if (found == 1) {
    const unsigned char *text = sqlite3_column_text(stmt, 0);
    snprintf(out, size, "%s", text ? (const char *)text : "");
  }
  bank_stmt_put(c->ep, stmt);
  return found;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

// Column naming rules: x_paise -> "x" in rupees, x_bp -> "x_percent",
// x_mg -> "x_grams", x_enabled -> boolean.
static cJSON *row_object(sqlite3_stmt *stmt) {
  cJSON *row = cJSON_CreateObject();
  for (int i = 0, n = sqlite3_column_count(stmt); i < n; i++) {
    const char *name = sqlite3_column_name(stmt, i);
    char key[64];
    snprintf(key, sizeof key, "%s", name);
    int type = sqlite3_column_type(stmt, i);
    cJSON *value;
    if (type == SQLITE_NULL) {
      value = cJSON_CreateNull();
      if (ends_with(key, "_paise")) key[strlen(key) - 6] = '\0';
    } else if (type == SQLITE_INTEGER && ends_with(key, "_paise")) {
      key[strlen(key) - 6] = '\0';
      value = cJSON_CreateNumber(bank_paise_to_rupees(sqlite3_column_int64(stmt, i)));
    } else if (type == SQLITE_INTEGER && ends_with(key, "_bp")) {
      snprintf(key + strlen(key) - 3, 12, "_percent");
      value = cJSON_CreateNumber(sqlite3_column_int64(stmt, i) / 100.0);
    } else if (type == SQLITE_INTEGER && ends_with(key, "_mg")) {
      snprintf(key + strlen(key) - 3, 12, "_grams");
      value = cJSON_CreateNumber(sqlite3_column_int64(stmt, i) / 1000.0);
    } else if (type == SQLITE_INTEGER && ends_with(key, "_enabled")) {
      value = cJSON_CreateBool(sqlite3_column_int64(stmt, i) != 0);
    } else if (type == SQLITE_INTEGER) {
      value = cJSON_CreateNumber((double)sqlite3_column_int64(stmt, i));
    } else if (type == SQLITE_FLOAT) {
      value = cJSON_CreateNumber(sqlite3_column_double(stmt, i));
    } else {
      value = cJSON_CreateString((const char *)sqlite3_column_text(stmt, i));
    }
    cJSON_AddItemToObject(row, key, value);
  }
  return row;
}

cJSON *tq_rows(ToolCtx *c, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  sqlite3_stmt *stmt = prepare_v(c, sql, types, ap);
  va_end(ap);
  if (!stmt) return NULL;
  cJSON *rows = cJSON_CreateArray();
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) cJSON_AddItemToArray(rows, row_object(stmt));
  bank_stmt_put(c->ep, stmt);
  if (rc != SQLITE_DONE) {
    cJSON_Delete(rows);
    tool_internal(c);
    return NULL;
  }
  return rows;
}

int tq_object(ToolCtx *c, cJSON **out, const char *sql, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  sqlite3_stmt *stmt = prepare_v(c, sql, types, ap);
  va_end(ap);
  *out = NULL;
  if (!stmt) return -1;
  int found = step_first(c, stmt);
  if (found == 1) *out = row_object(stmt);
  bank_stmt_put(c->ep, stmt);
  return found;
}

int tq_result_owned_row(ToolCtx *c, const char *sql, const char *id_arg, const char *what) {
  cJSON *row = NULL;
  int found = tq_object(c, &row, sql, "ss", arg_text(c, id_arg), c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "%s %s was not found for this customer", what, arg_text(c, id_arg));
  cJSON_Delete(c->result);
  c->result = row;
  return 0;
}

// ---- result helpers ---------------------------------------------------------------

void put_text(ToolCtx *c, const char *key, const char *value) {
  cJSON_AddItemToObject(c->result, key, value ? cJSON_CreateString(value) : cJSON_CreateNull());
}
void put_rupees(ToolCtx *c, const char *key, int64_t paise) {
  cJSON_AddNumberToObject(c->result, key, bank_paise_to_rupees(paise));
}
void put_int(ToolCtx *c, const char *key, int64_t value) { cJSON_AddNumberToObject(c->result, key, (double)value); }
void put_percent(ToolCtx *c, const char *key, int64_t bp) { cJSON_AddNumberToObject(c->result, key, bp / 100.0); }
void put_bool(ToolCtx *c, const char *key, int value) { cJSON_AddBoolToObject(c->result, key, value); }

// ---- banking preconditions ---------------------------------------------------------

int load_customer(ToolCtx *c, Customer *out) {
  memset(out, 0, sizeof *out);
  const char *sql = "SELECT customer_id, name, kyc_status, risk_category, rekyc_due_date, coalesce(pan, ''),"
                    " date_of_birth, monthly_income_paise, credit_score, income_tax_payer"
                    " FROM customers WHERE customer_id = ?";
  sqlite3_stmt *stmt = bank_stmt_get(c->ep, sql);
  if (!stmt) return tool_internal(c);
  sqlite3_bind_text(stmt, 1, c->ep->customer_id, -1, SQLITE_STATIC);
  int found = step_first(c, stmt);
  if (found == 1) {
    snprintf(out->id, sizeof out->id, "%s", (const char *)sqlite3_column_text(stmt, 0));
    snprintf(out->name, sizeof out->name, "%s", (const char *)sqlite3_column_text(stmt, 1));
    snprintf(out->kyc_status, sizeof out->kyc_status, "%s", (const char *)sqlite3_column_text(stmt, 2));
    snprintf(out->risk, sizeof out->risk, "%s", (const char *)sqlite3_column_text(stmt, 3));
    snprintf(out->rekyc_due, sizeof out->rekyc_due, "%s", (const char *)sqlite3_column_text(stmt, 4));
    snprintf(out->pan, sizeof out->pan, "%s", (const char *)sqlite3_column_text(stmt, 5));
    const char *dob = (const char *)sqlite3_column_text(stmt, 6);
    if (bank_date_parse(out->rekyc_due, &out->rekyc_due_days) != 0 || bank_date_parse(dob, &out->dob_days) != 0)
      found = tool_internal(c);
    out->monthly_income = sqlite3_column_int64(stmt, 7);
    out->credit_score = sqlite3_column_int(stmt, 8);
    out->income_tax_payer = sqlite3_column_int(stmt, 9);
    out->age = bank_age_years(out->dob_days, c->today_days);
  }
  bank_stmt_put(c->ep, stmt);
  if (found == 0) return tool_error(c, "the verified customer no longer exists");
  return found == 1 ? 0 : -1;
}

int require_kyc(ToolCtx *c, const Customer *cust) {
  if (strcmp(cust->kyc_status, "verified") != 0 || cust->rekyc_due_days < c->today_days)
    return tool_error(c, "KYC is not current (status %s, re-KYC due %s); the customer must complete re-KYC "
                         "(submit_rekyc) before this service",
                      strcmp(cust->kyc_status, "verified") == 0 ? "overdue" : cust->kyc_status, cust->rekyc_due);
  return 0;
}

int load_account(ToolCtx *c, const char *account_id, Account *out) {
  memset(out, 0, sizeof *out);
  const char *sql = "SELECT account_id, account_type, status, balance_paise FROM accounts"
                    " WHERE account_id = ? AND customer_id = ?";
  sqlite3_stmt *stmt = bank_stmt_get(c->ep, sql);
  if (!stmt) return tool_internal(c);
  sqlite3_bind_text(stmt, 1, account_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(stmt, 2, c->ep->customer_id, -1, SQLITE_STATIC);
  int found = step_first(c, stmt);
  if (found == 1) {
    snprintf(out->id, sizeof out->id, "%s", (const char *)sqlite3_column_text(stmt, 0));
    snprintf(out->type, sizeof out->type, "%s", (const char *)sqlite3_column_text(stmt, 1));
    snprintf(out->status, sizeof out->status, "%s", (const char *)sqlite3_column_text(stmt, 2));
    out->balance = sqlite3_column_int64(stmt, 3);
  }
  bank_stmt_put(c->ep, stmt);
  if (found == 0) return tool_error(c, "account %s was not found among this customer's accounts", account_id);
  return found == 1 ? 0 : -1;
}

int require_debitable(ToolCtx *c, const Account *acct, int64_t amount) {
  if (strcmp(acct->status, "active") != 0)
    return tool_error(c, "account %s is %s; debits are not allowed", acct->id, acct->status);
  if (amount > acct->balance) {
    char need[40], have[40];
    bank_format_inr(amount, need);
    bank_format_inr(acct->balance, have);
    return tool_error(c, "insufficient balance in %s: %s needed, %s available", acct->id, need, have);
  }
  return 0;
}

int new_id(ToolCtx *c, const char *counter, char out[BANK_ID_MAX]) {
  if (bank_next_id(c->ep, counter, out, BANK_ID_MAX, &c->err) != 0) return tool_internal(c);
  return 0;
}

int post_entry(ToolCtx *c, const char *account_id, int credit, int64_t amount, const char *channel,
               const char *description, const char *counterparty, char txn_id[BANK_ID_MAX]) {
  char id[BANK_ID_MAX];
  int64_t balance = 0;
  if (amount <= 0) return 0;
  if (new_id(c, "txn", id) != 0) return -1;
  if (tq_int(c, &balance,
             "UPDATE accounts SET balance_paise = balance_paise + ? WHERE account_id = ? RETURNING balance_paise",
             "ls", credit ? amount : -amount, account_id) != 1)
    return c->error[0] ? -1 : tool_internal(c);
  if (balance < 0) return tool_error(c, "insufficient balance in %s", account_id);
  if (tq_exec(c, "INSERT INTO transactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", "ssssllsss", id, account_id, c->today,
              credit ? "credit" : "debit", amount, balance, channel, description, counterparty) != 0)
    return -1;
  if (txn_id) snprintf(txn_id, BANK_ID_MAX, "%s", id);
  return 0;
}

int charge_for(ToolCtx *c, const char *code, int64_t amount, int64_t *charge, int64_t *gst) {
  const char *sql = "SELECT amount_paise, percent_bp, min_paise, max_paise, gst_applies FROM service_charges"
                    " WHERE charge_code = ?";
  sqlite3_stmt *stmt = bank_stmt_get(c->ep, sql);
  if (!stmt) return tool_internal(c);
  sqlite3_bind_text(stmt, 1, code, -1, SQLITE_STATIC);
  int found = step_first(c, stmt);
  if (found == 1) {
    int64_t value = sqlite3_column_int64(stmt, 0) + bank_percent_bp(amount, sqlite3_column_int64(stmt, 1));
    int64_t min = sqlite3_column_int64(stmt, 2), max = sqlite3_column_int64(stmt, 3);
    if (value < min) value = min;
    if (max > 0 && value > max) value = max;
    *charge = value;
    *gst = sqlite3_column_int(stmt, 4) ? bank_gst(value) : 0;
  }
  bank_stmt_put(c->ep, stmt);
  if (found == 0) return tool_internal(c);
  return found == 1 ? 0 : -1;
}

int require_confirmation(ToolCtx *c, int64_t total, const char *what) {
  if (total <= 0) return 0;
  char quoted[40];
  bank_format_inr(total, quoted);
  if (!arg_bool(c, "customer_confirmed"))
    return tool_error(c, "%s carries a charge of %s (including 18%% GST where applicable); tell the customer and "
                         "call again with customer_confirmed=true only after they agree",
                      what, quoted);
  if (c->ep->confirm_mode == BANK_CONFIRM_CONVERSATION && !c->ep->confirmation_given)
    return tool_error(c, "the customer has not confirmed the charge of %s for %s in the conversation; ask them "
                         "first",
                      quoted, what);
  c->used_confirmation = 1;
  return 0;
}

int rate_for(ToolCtx *c, const char *product, int64_t key, int *rate_bp) {
  int64_t rate = 0;
  int found = tq_int(c, &rate, "SELECT rate_bp FROM interest_rates WHERE product = ? AND ? BETWEEN slab_min AND slab_max",
                     "sl", product, key);
  if (found < 0) return -1;
  *rate_bp = found ? (int)rate : 0;
  return 0;
}
