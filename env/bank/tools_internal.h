// env/bank/tools_internal.h: what the tool areas (env/bank/tools_*.c) share.
// Defines ToolParam/ToolDef (the compact C description each tool's JSON
// schema is built from), ToolCtx (one call's validated arguments, episode,
// result and error), the argument accessors, the SQL helpers (prepared
// statements only; rows become JSON with *_paise as rupees and *_bp as
// percent) and the banking preconditions shared by many tools (ownership,
// KYC, funds, charges and their confirmation). Not a public header.
#ifndef FIMI_ENV_BANK_TOOLS_INTERNAL_H
#define FIMI_ENV_BANK_TOOLS_INTERNAL_H

#include <stdint.h>

#include "env/bank/money.h"
#include "env/bank/tools.h"

typedef enum {
  PT_STRING,        // JSON string; enum_values "a|b|c" restricts it
  PT_INTEGER,       // JSON number with no fraction, in [min, max]
  PT_NUMBER,        // JSON number in [min, max]
  PT_BOOLEAN,       // JSON true/false
  PT_AMOUNT,        // rupees as a JSON number, <= 2 decimals, > 0 -> paise
  PT_DATE,          // "YYYY-MM-DD"
  PT_STRING_ARRAY,  // array of 1..20 strings
} ParamType;

typedef struct ToolParam {
  const char *name;  // NULL ends the list
  ParamType type;
  int required;
  const char *description;
  const char *enum_values;  // PT_STRING only: "neft|imps|rtgs|upi"
  double min, max;          // PT_INTEGER/PT_NUMBER/PT_AMOUNT (rupees); 0,0 = none
  int max_len;              // strings; 0 = 100
} ToolParam;

#define TOOL_MAX_PARAMS 10

typedef struct ToolCtx ToolCtx;
typedef int (*ToolHandler)(ToolCtx *ctx);

typedef struct ToolDef {
  const char *name;
  const char *description;
  int writes, charged, needs_auth;
  ToolHandler handler;
  ToolParam params[TOOL_MAX_PARAMS];
} ToolDef;

typedef struct ToolArg {
  int present;
  const char *text;     // PT_STRING, PT_DATE
  int64_t integer;      // PT_INTEGER, PT_BOOLEAN (0/1), PT_AMOUNT (paise), PT_DATE (days)
  double number;        // PT_NUMBER
  const cJSON *array;   // PT_STRING_ARRAY
} ToolArg;

struct ToolCtx {
  BankEpisode *ep;
  sqlite3 *db;
  const ToolDef *def;
  ToolArg args[TOOL_MAX_PARAMS];
  cJSON *result;         // the object the handler fills
  char error[768];       // "Error: ..." when the handler fails
  char today[11];
  int64_t today_days;
  int used_confirmation;  // a charged write consumed the customer's consent
  FimiError err;
};

// Area tables (one per bank_tools_<area>.c).
typedef struct ToolArea {
  const char *name;
  const ToolDef *tools;
  int count;
} ToolArea;
extern const ToolArea bank_area_identity, bank_area_accounts, bank_area_deposits, bank_area_loans,
    bank_area_cards, bank_area_services;

// ---- arguments (names must exist in the tool's params) ----
int arg_present(const ToolCtx *c, const char *name);
const char *arg_text(const ToolCtx *c, const char *name);  // NULL when absent
int64_t arg_int(const ToolCtx *c, const char *name, int64_t fallback);
int64_t arg_paise(const ToolCtx *c, const char *name);     // 0 when absent
double arg_number(const ToolCtx *c, const char *name, double fallback);
int arg_bool(const ToolCtx *c, const char *name);
const cJSON *arg_array(const ToolCtx *c, const char *name);

// ---- errors ----
// Sets "Error: <message>" and returns -1.
int tool_error(ToolCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A database failure (never expected): a generic error, details in the log.
int tool_internal(ToolCtx *c);

// ---- SQL (types as bank_sql_run: 's' text, 'i' int, 'l' int64) ----
int tq_exec(ToolCtx *c, const char *sql, const char *types, ...);
// First column of the first row as int64 / text. 1 found, 0 no row, -1 error.
int tq_int(ToolCtx *c, int64_t *out, const char *sql, const char *types, ...);
int tq_text(ToolCtx *c, char *out, size_t size, const char *sql, const char *types, ...);
// Rows as JSON objects. tq_rows returns an array (NULL on error); tq_object
// returns 1 and *out when a row exists, 0 when none, -1 on error.
cJSON *tq_rows(ToolCtx *c, const char *sql, const char *types, ...);
int tq_object(ToolCtx *c, cJSON **out, const char *sql, const char *types, ...);
// The result becomes the one row `sql` selects; sql takes two parameters,
// the id in argument `id_arg` and the authenticated customer (so another
// customer's id reads as not found, like a wrong id). `what` names the
// object in the error ("dispute").
int tq_result_owned_row(ToolCtx *c, const char *sql, const char *id_arg, const char *what);

// ---- result helpers ----
void put_text(ToolCtx *c, const char *key, const char *value);
void put_rupees(ToolCtx *c, const char *key, int64_t paise);
void put_int(ToolCtx *c, const char *key, int64_t value);
void put_percent(ToolCtx *c, const char *key, int64_t bp);
void put_bool(ToolCtx *c, const char *key, int value);

// ---- banking preconditions ----
typedef struct Customer {
  char id[BANK_ID_MAX], name[64], kyc_status[16], risk[16], rekyc_due[11], pan[16];
  int64_t dob_days, rekyc_due_days, monthly_income;
  int age, credit_score, income_tax_payer;
} Customer;
typedef struct Account {
  char id[BANK_ID_MAX], type[16], status[16];
  int64_t balance;
} Account;

int load_customer(ToolCtx *c, Customer *out);
// KYC verified and re-KYC not overdue; otherwise an error naming the date.
int require_kyc(ToolCtx *c, const Customer *cust);
// The authenticated customer's account (other customers' ids: "not found").
int load_account(ToolCtx *c, const char *account_id, Account *out);
// Active and (when amount > 0) holding at least `amount` paise.
int require_debitable(ToolCtx *c, const Account *acct, int64_t amount);
// Posts a debit or credit with a new TXN id and the running balance; txn_id
// may be NULL.
int post_entry(ToolCtx *c, const char *account_id, int credit, int64_t amount, const char *channel,
               const char *description, const char *counterparty, char txn_id[BANK_ID_MAX]);
// Service charge by code for an amount: flat + percent (min/max); *gst set.
int charge_for(ToolCtx *c, const char *code, int64_t amount, int64_t *charge, int64_t *gst);
// The consent gate of a charged write: `total` paise (charge + GST) quoted in
// the error when customer_confirmed is not true (or, in conversation mode,
// when the environment has not recorded the customer's yes).
int require_confirmation(ToolCtx *c, int64_t total, const char *what);
// Next id of a counter into out.
int new_id(ToolCtx *c, const char *counter, char out[BANK_ID_MAX]);
// The interest rate (bp) of a product slab ('fd' by days, 'personal_loan' by
// credit score); 0 when no slab matches.
int rate_for(ToolCtx *c, const char *product, int64_t key, int *rate_bp);

#endif
