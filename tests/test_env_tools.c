// tests/test_env_tools.c: every Navadhan Bank tool (env/bank/tools.h): a
// success case checked against the database (balances, rows, charges) and
// its error cases; argument validation; authentication and ownership (other
// customers' ids answer "not found" and their data never changes); the
// charge-confirmation gate in both modes; the call log; determinism (same
// calls -> same results and bytes); PRAGMA integrity_check after random call
// sequences; cases found by tests/fuzz/fuzz_env_tools.c (UTF-8 in results,
// amounts below one paisa). Expected amounts are worked out from the published terms (and
// Python for the compounding), never read back from the code under test.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "env/bank/db.h"
#include "env/bank/tools.h"
#include "env/knowledge.h"
#include "tests/test_util.h"

static BankImage image;
static KnowledgeBase *kb;

// ---- helpers ----------------------------------------------------------------

// printf into a rotating buffer, with ' turned into " so JSON reads well in C.
static const char *J(const char *fmt, ...) {
  static char buffers[8][2048];
  static int next = 0;
  char *out = buffers[next++ % 8];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, 2048, fmt, ap);
  va_end(ap);
  for (char *p = out; *p; p++)
    if (*p == '\'') *p = '"';
  return out;
}

static int call(BankEpisode *ep, const char *name, const char *args, char **text) {
  if (args) args = J("%s", args);  // ' -> "
  cJSON *arguments = args ? cJSON_Parse(args) : NULL;
  if (args && !arguments) {
    fprintf(stderr, "test bug: bad JSON %s\n", args);
    exit(2);
  }
  ToolResult result;
  int ok = env_tool_call(ep, name, arguments, &result);
  cJSON_Delete(arguments);
  *text = result.text;
  cJSON_Delete(result.json);  // the text is what these tests read
  return ok;
}

static cJSON *ok_at(BankEpisode *ep, const char *name, const char *args, int line) {
  char *text = NULL;
  int ok = call(ep, name, args, &text);
  CHECK(ok && text, "line %d: %s(%s) failed: %s", line, name, args ? args : "", text ? text : "(null)");
  cJSON *parsed = ok && text ? cJSON_Parse(text) : NULL;
  free(text);
  return parsed ? parsed : cJSON_CreateObject();
}

static void err_at(BankEpisode *ep, const char *name, const char *args, const char *expected, int line) {
  char *text = NULL;
  int ok = call(ep, name, args, &text);
  CHECK(!ok && text && strncmp(text, "Error: ", 7) == 0 && strstr(text, expected),
        "line %d: %s(%s) should fail with \"%s\", got %s: %s", line, name, args ? args : "", expected,
        ok ? "success" : "error", text ? text : "(null)");
  free(text);
}

#define OK(name, args) ok_at(ep, name, args, __LINE__)
#define ERR(name, args, expected) err_at(ep, name, args, expected, __LINE__)
#define DONE(json) cJSON_Delete(json)

static double num(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}
static const char *str(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(item) ? item->valuestring : "";
}
static int truthy(const cJSON *obj, const char *key) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

static int64_t sql_int(BankEpisode *ep, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  int64_t value = -999999;
  if (sqlite3_prepare_v2(ep->db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return value;
}
static void sql_text(BankEpisode *ep, const char *sql, char *out, size_t size) {
  sqlite3_stmt *stmt = NULL;
  out[0] = '\0';
  if (sqlite3_prepare_v2(ep->db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW &&
      sqlite3_column_text(stmt, 0))
    snprintf(out, size, "%s", (const char *)sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
}
static int64_t balance(BankEpisode *ep, const char *account) {
  return sql_int(ep, J("SELECT balance_paise FROM accounts WHERE account_id = '%s'", account));
}

// The scenario customer NVC10001 with known data, written as fixture SQL
// (the same way the task layer edits an episode).
static const char *FIXTURE =
    "UPDATE customers SET kyc_status = 'verified', risk_category = 'low', last_kyc_date = '2020-01-01',"
    " rekyc_due_date = '2030-01-01', credit_score = 780, monthly_income_paise = 20000000, pan = 'ABCPS1234K',"
    " date_of_birth = '1985-06-15', mobile = '9876543210', aadhaar_last4 = '4321', income_tax_payer = 1"
    " WHERE customer_id = 'NVC10001';"
    "DELETE FROM loans WHERE customer_id = 'NVC10001';"
    "DELETE FROM scheme_enrolments WHERE customer_id = 'NVC10001';"
    "DELETE FROM tax_forms WHERE customer_id = 'NVC10001';"
    "INSERT INTO accounts VALUES ('SB0000000001', 'NVC10001', 'savings', 'active', 500000000, '2020-01-01', 'Fort',"
    " 'NAVB0000101', NULL), ('CA0000000002', 'NVC10001', 'current', 'active', 10000000, '2020-01-01', 'Fort',"
    " 'NAVB0000101', NULL), ('SB0000000003', 'NVC10001', 'savings', 'dormant', 10000000, '2020-01-01', 'Fort',"
    " 'NAVB0000101', NULL);"
    "INSERT INTO transactions VALUES ('TXA1', 'SB0000000001', '2026-01-13', 'debit', 1500000, 500000000, 'pos',"
    " 'POS/Electronics', NULL), ('TXA2', 'SB0000000001', '2025-12-01', 'debit', 2000000, 501500000, 'upi',"
    " 'UPI/Unknown', NULL), ('TXA3', 'SB0000000001', '2025-11-01', 'credit', 9000000, 503500000, 'neft',"
    " 'Salary', NULL);"
    "INSERT INTO beneficiaries VALUES ('BENOLD1', 'NVC10001', 'Asha Kumar', '123456789012', 'SBIN0004567', NULL,"
    " '2025-01-01', 'active'), ('BENNEW1', 'NVC10001', 'Ravi Traders', '998877665544', 'HDFC0001234', NULL,"
    " '2026-01-15', 'active');"
    "INSERT INTO cards VALUES ('CRDDEB1', 'NVC10001', 'SB0000000001', 'debit', 'RuPay', '1111', '12/29', 'active',"
    " NULL, 4000000, 20000000, 10000000, 0, 1, 1, 1, 1, 0, NULL, '2024-01-01'), ('CRDCRE1', 'NVC10001',"
    " 'SB0000000001', 'credit', 'Visa', '2222', '12/29', 'active', NULL, 2000000, 10000000, 10000000, 20000000,"
    " 1, 1, 1, 1, 0, NULL, '2024-01-01');"
    "INSERT INTO mandates VALUES ('MNDX1', 'NVC10001', 'SB0000000001', 'nach', 'StreamBox OTT', 50000, 'monthly',"
    " '2025-01-01', 'active', NULL);"
    "INSERT INTO cheque_books VALUES ('CQBX1', 'NVC10001', 'SB0000000001', 25, 500001, '2025-06-01', '2025-26', 0,"
    " 'delivered');"
    "INSERT INTO cheques VALUES ('SB0000000001', 500001, 'cleared', 100000, 'Om Medicals', '2025-06-10', 0, NULL);"
    "WITH RECURSIVE n(k) AS (SELECT 2 UNION ALL SELECT k + 1 FROM n WHERE k < 25)"
    " INSERT INTO cheques SELECT 'SB0000000001', 500000 + k, 'unused', NULL, NULL, NULL, 0, NULL FROM n;"
    "INSERT INTO insurance_policies VALUES ('POLX1', 'NVC10001', 'health', 'Navadhan General Insurance', 50000000,"
    " 1500000, '2025-06-01', '2026-05-31', 'active', NULL);"
    "INSERT INTO fixed_deposits VALUES ('FDOLD1', 'NVC10001', 'SB0000000001', 20000000, 680, 12, 365, '2025-06-29',"
    " '2026-06-29', 21400000, 'active', NULL, NULL);"
    "INSERT INTO recurring_deposits VALUES ('RDOLD1', 'NVC10001', 'SB0000000001', 500000, 12, 680, '2025-07-15',"
    " '2026-07-15', 6, 6224364, 'active', NULL, NULL);"
    "INSERT INTO tds_records VALUES ('NVC10001', '2025-26', 'FDOLD1', 700000, 0);";

static BankEpisode *scenario_from(BankPool *pool, int authenticated) {
  FimiError err = {0};
  BankEpisode *ep = NULL;
  int opened = pool ? bank_pool_acquire(pool, &ep, &err) : bank_episode_open(&image, kb, &ep, &err);
  if (opened != 0 || bank_episode_exec(ep, FIXTURE, &err) != 0) {
    fprintf(stderr, "scenario setup failed: %s\n", err.message);
    exit(2);
  }
  if (authenticated) bank_episode_authenticate(ep, "NVC10001", &err);
  return ep;
}

static BankEpisode *scenario(int authenticated) { return scenario_from(NULL, authenticated); }

// ---- validation, authentication, the call log --------------------------------

static void test_validation(void) {
  BankEpisode *ep = scenario(1);
  ERR("no_such_tool", "{}", "unknown tool");
  char *text = NULL;
  CHECK(!call(ep, NULL, "{}", &text) && text && strstr(text, "unknown tool"), "NULL name");
  free(text);
  char longname[300];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ERR(longname, "{}", "unknown tool");
  ERR("get_account_balance", "[1, 2]", "must be a JSON object");
  ERR("get_account_balance", "{}", "missing required argument \"account_ids\"");
  ERR("get_account_balance", "{'account_ids': 'SB0000000001'}", "list of 1 to 20 strings");
  ERR("get_account_balance", "{'account_ids': []}", "list of 1 to 20 strings");
  ERR("get_account_balance", "{'account_ids': [5]}", "only strings");
  ERR("get_account_balance", "{'account_ids': ['SB0000000001'], 'pin': '1234'}", "has no argument \"pin\"");
  ERR("get_account_balance", "{'account_ids': ['SB0000000001'], 'account_ids': ['x']}", "given twice");
  ERR("get_transactions", "{'account_id': 'SB0000000001', 'limit': 2.5}", "whole number");
  ERR("get_transactions", "{'account_id': 'SB0000000001', 'limit': 500}", "between 1 and 50");
  ERR("get_transactions", "{'account_id': 'SB0000000001', 'from_date': '2026-02-30'}", "YYYY-MM-DD");
  ERR("get_transactions", "{'account_id': ''}", "must not be empty");
  ERR("get_transactions", "{'account_id': 'SB0000000001\\n'}", "control characters");
  ERR("get_transactions", J("{'account_id': '%0100d'}", 7), "longer than 20");
  ERR("calculate_fd_maturity", "{'principal_amount': '5000', 'tenure_months': 12}", "amount in rupees");
  ERR("calculate_fd_maturity", "{'principal_amount': 5000.123, 'tenure_months': 12}", "2 decimal places");
  ERR("calculate_fd_maturity", "{'principal_amount': -5000, 'tenure_months': 12}", "greater than zero");
  ERR("calculate_fd_maturity", "{'principal_amount': 1e300, 'tenure_months': 12}", "largest accepted amount");
  ERR("calculate_fd_maturity", "{'principal_amount': 5000, 'tenure_months': true}", "whole number");
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 10, 'mode': 'swift'}",
      "must be one of: neft|imps|rtgs|upi");
  ERR("block_card", "{'card_id': 'CRDDEB1', 'reason': 'lost', 'customer_confirmed': 'yes'}", "has no argument");
  ERR("close_fd_premature", "{'fd_id': 'FDOLD1', 'customer_confirmed': 'yes'}", "true or false");
  DONE(OK("list_accounts", NULL));  // NULL arguments mean {}
  DONE(OK("list_accounts", "null"));
  CHECK(ep->num_calls == 26, "every call is logged (%d)", ep->num_calls);
  CHECK(ep->num_calls > 0 && ep->calls[ep->num_calls - 1].ok && strcmp(ep->calls[ep->num_calls - 1].arguments, "{}") == 0,
        "last call logged as ok with {}");
  CHECK(!ep->calls[0].ok && strcmp(ep->calls[0].name, "no_such_tool") == 0, "first call logged as failed");
  CHECK(strlen(ep->calls[2].name) == 64, "over-long names are logged truncated (%zu)", strlen(ep->calls[2].name));
  bank_episode_close(ep);
}

static void test_identity(void) {
  BankEpisode *ep = scenario(0);
  ERR("list_accounts", "{}", "not verified");
  ERR("get_customer_profile", "{}", "not verified");
  DONE(OK("get_deposit_loan_rates", "{'product_type': 'fd'}"));  // public tools need no login
  ERR("verify_customer", "{'customer_id': 'NVC10001', 'date_of_birth': '1985-06-15', 'registered_mobile': '9876543211'}",
      "do not match");
  ERR("verify_customer", "{'customer_id': 'NVC99999', 'date_of_birth': '1985-06-15', 'registered_mobile': '9876543210'}",
      "do not match");
  cJSON *r = OK("verify_customer",
                "{'customer_id': 'NVC10001', 'date_of_birth': '1985-06-15', 'registered_mobile': '9876543210'}");
  CHECK(truthy(r, "verified") && strcmp(ep->customer_id, "NVC10001") == 0, "verified");
  DONE(r);
  char dob[11], mobile[16];
  sql_text(ep, "SELECT date_of_birth FROM customers WHERE customer_id = 'NVC10002'", dob, sizeof dob);
  sql_text(ep, "SELECT mobile FROM customers WHERE customer_id = 'NVC10002'", mobile, sizeof mobile);
  ERR("verify_customer", J("{'customer_id': 'NVC10002', 'date_of_birth': '%s', 'registered_mobile': '%s'}", dob, mobile),
      "another customer");
  r = OK("get_customer_profile", "{}");
  CHECK(strcmp(str(r, "mobile"), "******3210") == 0, "mobile masked: %s", str(r, "mobile"));
  CHECK(num(r, "age") == 40 && !truthy(r, "senior_citizen") && truthy(r, "pan_on_file"), "profile age/PAN");
  DONE(r);
  r = OK("get_kyc_status", "{}");
  CHECK(truthy(r, "kyc_current") && !truthy(r, "rekyc_overdue") && strcmp(str(r, "rekyc_due_date"), "2030-01-01") == 0,
        "KYC current");
  DONE(r);
  ERR("submit_rekyc", "{'document_type': 'aadhaar', 'document_last4': '4321'}", "KYC is current until 2030-01-01");
  bank_episode_exec(ep, "UPDATE customers SET rekyc_due_date = '2025-12-31' WHERE customer_id = 'NVC10001'", NULL);
  r = OK("get_kyc_status", "{}");
  CHECK(truthy(r, "rekyc_overdue") && !truthy(r, "kyc_current") && num(r, "days_until_rekyc_due") == -15, "overdue");
  DONE(r);
  ERR("create_fd", "{'principal_amount': 5000, 'tenure_months': 12, 'source_account': 'SB0000000001'}", "re-KYC");
  ERR("submit_rekyc", "{'document_type': 'aadhaar', 'document_last4': '9999'}", "does not match");
  ERR("submit_rekyc", "{'document_type': 'aadhaar', 'document_last4': '12a4'}", "last 4 digits");
  r = OK("submit_rekyc", "{'document_type': 'aadhaar', 'document_last4': '4321'}");
  // Low risk: next re-KYC in 10 years from today (2026-01-15).
  CHECK(strcmp(str(r, "rekyc_due_date"), "2036-01-15") == 0, "re-KYC due: %s", str(r, "rekyc_due_date"));
  DONE(r);
  CHECK(sql_int(ep, "SELECT rekyc_due_date = '2036-01-15' AND last_kyc_date = '2026-01-15' FROM customers"
                    " WHERE customer_id = 'NVC10001'") == 1, "re-KYC stored");
  ERR("update_address", "{'address_line': '5 MG Road', 'city': 'Pune', 'pincode': '41100', 'proof_document': 'passport'}",
      "6 digits");
  r = OK("update_address", "{'address_line': '5 MG Road', 'city': 'Pune', 'pincode': '411001', 'proof_document': 'passport'}");
  DONE(r);
  CHECK(sql_int(ep, "SELECT city = 'Pune' AND pincode = '411001' FROM customers WHERE customer_id = 'NVC10001'") == 1,
        "address stored");
  ERR("update_contact", "{}", "give a new mobile");
  ERR("update_contact", "{'email': 'not-an-email'}", "not a valid");
  ERR("update_contact", "{'mobile': '1234567890'}", "10-digit");
  DONE(OK("update_contact", "{'email': 'asha@example.in', 'mobile': '9123456789'}"));
  CHECK(sql_int(ep, "SELECT mobile = '9123456789' FROM customers WHERE customer_id = 'NVC10001'") == 1, "mobile stored");
  bank_episode_close(ep);

  ep = scenario(0);
  for (int i = 0; i < 3; i++)
    ERR("verify_customer", "{'customer_id': 'NVC10001', 'date_of_birth': '1985-06-15', 'registered_mobile': '1'}",
        "do not match");
  ERR("verify_customer", "{'customer_id': 'NVC10001', 'date_of_birth': '1985-06-15', 'registered_mobile': '9876543210'}",
      "locked");
  CHECK(ep->customer_id[0] == 0, "still unauthenticated after lock");
  bank_episode_close(ep);
}

// ---- accounts ---------------------------------------------------------------

static void test_accounts(void) {
  BankEpisode *ep = scenario(1);
  char other[BANK_ID_MAX];
  sql_text(ep, "SELECT account_id FROM accounts WHERE customer_id = 'NVC10002' LIMIT 1", other, sizeof other);
  int64_t other_balance = balance(ep, other);
  cJSON *r = OK("list_accounts", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "accounts")) ==
            sql_int(ep, "SELECT count(*) FROM accounts WHERE customer_id = 'NVC10001'"), "all own accounts listed");
  DONE(r);
  r = OK("get_account_balance", "{'account_ids': ['SB0000000001', 'CA0000000002']}");
  cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "balances"), 0);
  CHECK(num(first, "balance") == 5000000.0, "balance in rupees: %g", num(first, "balance"));
  DONE(r);
  ERR("get_account_balance", J("{'account_ids': ['%s']}", other), "not found");
  ERR("get_transactions", J("{'account_id': '%s'}", other), "not found");
  r = OK("get_transactions", "{'account_id': 'SB0000000001', 'limit': 2}");
  cJSON *txns = cJSON_GetObjectItem(r, "transactions");
  CHECK(cJSON_GetArraySize(txns) == 2 && strcmp(str(cJSON_GetArrayItem(txns, 0), "txn_id"), "TXA1") == 0,
        "newest first, limited");
  DONE(r);
  r = OK("get_transactions", "{'account_id': 'SB0000000001', 'from_date': '2025-11-01', 'to_date': '2025-12-31'}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "transactions")) == 2, "date filter");
  DONE(r);
  ERR("get_transactions", "{'account_id': 'SB0000000001', 'from_date': '2025-12-31', 'to_date': '2025-11-01'}", "after");
  r = OK("request_statement", "{'account_id': 'SB0000000001', 'from_date': '2025-04-01', 'to_date': '2025-12-31',"
                              " 'delivery': 'email'}");
  CHECK(sql_int(ep, J("SELECT count(*) FROM service_requests WHERE request_id = '%s' AND category = 'statement'",
                      str(r, "request_id"))) == 1, "statement request stored");
  DONE(r);
  ERR("request_statement", "{'account_id': 'SB0000000001', 'from_date': '2025-04-01', 'to_date': '2026-02-01',"
                           " 'delivery': 'email'}", "future");
  ERR("request_statement", "{'account_id': 'SB0000000001', 'from_date': '2024-01-01', 'to_date': '2025-12-31',"
                           " 'delivery': 'email'}", "at most one year");

  r = OK("list_beneficiaries", "{}");
  int cooling = 0;
  cJSON *b;
  cJSON_ArrayForEach(b, cJSON_GetObjectItem(r, "beneficiaries")) cooling += truthy(b, "in_cooling_period");
  CHECK(cooling >= 1, "cooling flag");
  DONE(r);
  ERR("add_beneficiary", "{'name': 'X', 'account_number': '12345', 'ifsc': 'SBIN0004567'}", "9 to 18 digits");
  ERR("add_beneficiary", "{'name': 'X', 'account_number': '123456789', 'ifsc': 'SBIN1004567'}", "ifsc");
  ERR("add_beneficiary", "{'name': 'X', 'account_number': '123456789012', 'ifsc': 'SBIN0004567'}", "already");
  r = OK("add_beneficiary", "{'name': 'Meera Iyer', 'account_number': '555566667777', 'ifsc': 'ICIC0007890'}");
  char new_ben[BANK_ID_MAX];
  snprintf(new_ben, sizeof new_ben, "%s", str(r, "beneficiary_id"));
  CHECK(strcmp(new_ben, "BEN001001") == 0, "beneficiary id from the counter: %s", new_ben);
  DONE(r);

  // Transfers: limits, cooling, charges and confirmation, funds.
  int64_t before = balance(ep, "SB0000000001");
  ERR("transfer_funds", J("{'from_account': 'SB0000000001', 'beneficiary_id': '%s', 'amount': 60000, 'mode': 'neft'}",
                          new_ben), "capped at Rs 50,000");
  r = OK("transfer_funds", J("{'from_account': 'SB0000000001', 'beneficiary_id': '%s', 'amount': 50000, 'mode': 'neft'}",
                             new_ben));
  CHECK(num(r, "charge") == 0 && balance(ep, "SB0000000001") == before - 5000000, "NEFT free, debited exactly");
  CHECK(num(r, "balance_after") * 100 == (double)balance(ep, "SB0000000001"), "balance_after reported");
  DONE(r);
  ERR("transfer_funds", J("{'from_account': 'SB0000000001', 'beneficiary_id': '%s', 'amount': 1, 'mode': 'neft'}",
                          new_ben), "capped");
  before = balance(ep, "SB0000000001");
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 2000, 'mode': 'imps'}",
      "charge of Rs 5.90");
  CHECK(balance(ep, "SB0000000001") == before, "refused transfer changes nothing");
  r = OK("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 2000, 'mode': 'imps',"
                           " 'customer_confirmed': true}");
  CHECK(balance(ep, "SB0000000001") == before - 200000 - 590, "IMPS Rs 2000 + Rs 5 + 18%% GST");
  CHECK(num(r, "charge") == 5 && fabs(num(r, "gst") - 0.9) < 1e-9, "charge and GST reported");
  DONE(r);
  before = balance(ep, "SB0000000001");
  DONE(OK("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 1000, 'mode': 'imps'}"));
  CHECK(balance(ep, "SB0000000001") == before - 100000, "IMPS up to Rs 1,000 is free (no confirmation)");
  before = balance(ep, "SB0000000001");
  DONE(OK("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 150000,"
                            " 'mode': 'imps', 'customer_confirmed': true}"));
  CHECK(balance(ep, "SB0000000001") == before - 15000000 - 1770, "IMPS above Rs 1 lakh: Rs 15 + GST = 17.70");
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 100000, 'mode': 'rtgs'}",
      "at least Rs 2,00,000");
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 500001, 'mode': 'imps',"
                        " 'customer_confirmed': true}", "Rs 5,00,000 per transaction");
  DONE(OK("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 60000, 'mode': 'upi'}"));
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 40000.01, 'mode': 'upi'}",
      "Rs 40,000.00 remains");
  // Net banking so far today: 50,000 + 2,000 + 1,000 + 1,50,000 = 2,03,000.
  r = OK("get_transfer_limits", "{}");
  CHECK(num(r, "netbanking_used_today") == 203000 && num(r, "upi_used_today") == 60000, "usage today: %g / %g",
        num(r, "netbanking_used_today"), num(r, "upi_used_today"));
  DONE(r);
  DONE(OK("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 700000, 'mode': 'rtgs'}"));
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 97000.01, 'mode': 'neft'}",
      "Rs 10,00,000 per day");
  bank_episode_exec(ep, "UPDATE accounts SET balance_paise = 5000000 WHERE account_id = 'CA0000000002'", NULL);
  ERR("transfer_funds", "{'from_account': 'CA0000000002', 'beneficiary_id': 'BENOLD1', 'amount': 50000.01, 'mode': 'neft'}",
      "insufficient balance in CA0000000002: Rs 50,000.01 needed, Rs 50,000.00 available");
  ERR("transfer_funds", "{'from_account': 'SB0000000003', 'beneficiary_id': 'BENOLD1', 'amount': 10, 'mode': 'neft'}",
      "dormant");
  ERR("transfer_funds", "{'from_account': 'CA0000000002', 'beneficiary_id': 'BENOLD1', 'amount': 49999, 'mode': 'imps'}",
      "insufficient balance");  // checked before the charge is put to the customer
  ERR("transfer_funds", J("{'from_account': '%s', 'beneficiary_id': 'BENOLD1', 'amount': 10, 'mode': 'neft'}", other),
      "not found");
  char other_ben[BANK_ID_MAX];
  sql_text(ep, "SELECT beneficiary_id FROM beneficiaries WHERE customer_id != 'NVC10001' LIMIT 1", other_ben,
           sizeof other_ben);
  ERR("transfer_funds", J("{'from_account': 'SB0000000001', 'beneficiary_id': '%s', 'amount': 10, 'mode': 'neft'}",
                          other_ben), "not found");
  CHECK(sql_int(ep, "SELECT count(*) FROM transfers WHERE customer_id = 'NVC10001'") == 6, "6 transfers recorded");
  DONE(OK("delete_beneficiary", J("{'beneficiary_id': '%s'}", new_ben)));
  ERR("delete_beneficiary", J("{'beneficiary_id': '%s'}", new_ben), "not found");
  ERR("transfer_funds", J("{'from_account': 'SB0000000001', 'beneficiary_id': '%s', 'amount': 10, 'mode': 'neft'}",
                          new_ben), "not found");

  before = balance(ep, "SB0000000001");
  int64_t current_before = balance(ep, "CA0000000002");
  r = OK("transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'CA0000000002', 'amount': 1234.56}");
  CHECK(balance(ep, "SB0000000001") == before - 123456 && balance(ep, "CA0000000002") == current_before + 123456,
        "own transfer moves exactly the amount");
  DONE(r);
  ERR("transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'SB0000000001', 'amount': 1}", "same");
  ERR("transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'SB0000000003', 'amount': 1}",
      "dormant");
  ERR("transfer_between_own_accounts", J("{'from_account': 'SB0000000001', 'to_account': '%s', 'amount': 1}", other),
      "not found");

  // Disputes: TXA1 (2026-01-13, 2 working days ago) -> zero liability;
  // TXA2 (2025-12-01) -> bank policy; TXA3 is a credit.
  r = OK("raise_dispute", "{'transaction_id': 'TXA1', 'reason': 'unauthorised', 'description': 'I did not buy this'}");
  CHECK(num(r, "working_days_since_transaction") == 2 && strstr(str(r, "customer_liability"), "zero"),
        "zero liability within 3 working days: %s", str(r, "customer_liability"));
  char dispute[BANK_ID_MAX];
  snprintf(dispute, sizeof dispute, "%s", str(r, "dispute_id"));
  DONE(r);
  r = OK("raise_dispute", "{'transaction_id': 'TXA2', 'reason': 'unauthorised', 'description': 'not me'}");
  CHECK(strstr(str(r, "customer_liability"), "board-approved") != NULL, "late report: %s", str(r, "customer_liability"));
  DONE(r);
  bank_episode_exec(ep, "UPDATE transactions SET txn_date = '2026-01-08' WHERE txn_id = 'TXA1'", NULL);
  bank_episode_exec(ep, "DELETE FROM disputes", NULL);
  r = OK("raise_dispute", "{'transaction_id': 'TXA1', 'reason': 'unauthorised', 'description': 'again'}");
  snprintf(dispute, sizeof dispute, "%s", str(r, "dispute_id"));
  CHECK(num(r, "working_days_since_transaction") == 5 && strstr(str(r, "customer_liability"), "Rs 10,000.00"),
        "4-7 working days on savings: limited to min(txn, Rs 10,000): %s", str(r, "customer_liability"));
  DONE(r);
  ERR("raise_dispute", "{'transaction_id': 'TXA1', 'reason': 'unauthorised', 'description': 'x'}", "already");
  ERR("raise_dispute", "{'transaction_id': 'TXA3', 'reason': 'wrong_amount', 'description': 'x'}", "credit");
  char other_txn[BANK_ID_MAX];
  sql_text(ep, J("SELECT txn_id FROM transactions WHERE account_id = '%s' AND direction = 'debit' LIMIT 1", other),
           other_txn, sizeof other_txn);
  ERR("raise_dispute", J("{'transaction_id': '%s', 'reason': 'unauthorised', 'description': 'x'}", other_txn), "not found");
  r = OK("get_dispute_status", J("{'dispute_id': '%s'}", dispute));
  ERR("get_dispute_status", "{'dispute_id': 'DSP999'}", "not found");
  DONE(r);
  CHECK(balance(ep, other) == other_balance, "the other customer's balance never changed");
  bank_episode_close(ep);
}

// ---- deposits ---------------------------------------------------------------

static void test_deposits(void) {
  BankEpisode *ep = scenario(1);
  cJSON *r = OK("get_deposit_loan_rates", "{'product_type': 'fd'}");
  cJSON *rates = cJSON_GetObjectItem(r, "rates");
  CHECK(cJSON_GetArraySize(rates) == 7, "7 FD slabs");
  CHECK(num(cJSON_GetArrayItem(rates, 4), "rate_percent") == 7.0 &&
            num(cJSON_GetArrayItem(rates, 4), "senior_rate_percent") == 7.5, "2-3 years: 7.00%% / 7.50%%");
  DONE(r);
  r = OK("get_deposit_loan_rates", "{'product_type': 'rd'}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "rates")) == 5, "RD slabs from 6 months");
  DONE(r);
  r = OK("get_deposit_loan_rates", "{'product_type': 'personal_loan'}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "rates")) == 4, "4 personal loan bands");
  DONE(r);
  r = OK("calculate_fd_maturity", "{'principal_amount': 100000, 'tenure_months': 24}");
  CHECK(num(r, "interest_rate_percent") == 7.0 && fabs(num(r, "interest") - 14888.18) < 1e-6 &&
            strcmp(str(r, "maturity_date"), "2028-01-15") == 0,
        "FD 1 lakh 24m: 7%%, interest 14888.18 (Python), matures 2028-01-15: %g %s", num(r, "interest"),
        str(r, "maturity_date"));
  DONE(r);
  r = OK("calculate_fd_maturity", "{'principal_amount': 100000, 'tenure_days': 90, 'senior_citizen': true}");
  CHECK(num(r, "interest_rate_percent") == 5.5 && strcmp(str(r, "compounding"), "simple interest") == 0 &&
            fabs(num(r, "interest") - 1356.16) < 1e-6,
        "90 days senior: 5.5%% simple = 1356.16 (100000*0.055*90/365): %g", num(r, "interest"));
  DONE(r);
  ERR("calculate_fd_maturity", "{'principal_amount': 100000}", "exactly one of");
  ERR("calculate_fd_maturity", "{'principal_amount': 100000, 'tenure_months': 12, 'tenure_days': 365}", "exactly one of");
  ERR("calculate_fd_maturity", "{'principal_amount': 999, 'tenure_months': 12}", "minimum fixed deposit");
  ERR("calculate_fd_maturity", "{'principal_amount': 5000, 'tenure_days': 6}", "between 7 and 3650");

  int64_t before = balance(ep, "SB0000000001");
  r = OK("create_fd", "{'principal_amount': 200000, 'tenure_months': 24, 'source_account': 'SB0000000001'}");
  char fd[BANK_ID_MAX];
  snprintf(fd, sizeof fd, "%s", str(r, "fd_id"));
  CHECK(strcmp(fd, "FD00001001") == 0 && balance(ep, "SB0000000001") == before - 20000000, "FD booked and debited: %s", fd);
  CHECK(fabs(num(r, "maturity_amount") - 229776.36) < 1e-6, "maturity 2 lakh 24m = 229776.36 (2 x 14888.18): %g",
        num(r, "maturity_amount"));
  DONE(r);
  ERR("create_fd", "{'principal_amount': 200000, 'tenure_months': 24, 'source_account': 'CA0000000002'}", "insufficient");
  ERR("create_fd", "{'principal_amount': 2000, 'tenure_months': 24, 'source_account': 'SB0000000003'}", "dormant");
  r = OK("list_deposits", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "fixed_deposits")) == 2, "two FDs listed");
  DONE(r);
  // Closing the new FD on day 0: no interest, no penalty to confirm.
  before = balance(ep, "SB0000000001");
  r = OK("close_fd_premature", J("{'fd_id': '%s'}", fd));
  CHECK(num(r, "interest_paid") == 0 && balance(ep, "SB0000000001") == before + 20000000, "day-0 closure returns principal");
  DONE(r);
  ERR("close_fd_premature", J("{'fd_id': '%s'}", fd), "already closed");
  // FDOLD1: 2 lakh since 2025-06-29 = 200 days: 180-364 slab 6.00% - 1.00% =
  // 5.00%, quarterly: interest 5520.30 (Python); without the penalty 6.00%
  // gives 6634.17 (Python), so the penalty costs 1113.87.
  ERR("close_fd_premature", "{'fd_id': 'FDOLD1'}", "Rs 1,113.87");
  before = balance(ep, "SB0000000001");
  r = OK("close_fd_premature", "{'fd_id': 'FDOLD1', 'customer_confirmed': true}");
  CHECK(num(r, "days_run") == 200 && num(r, "applied_rate_percent") == 5.0 && fabs(num(r, "interest_paid") - 5520.30) < 1e-6,
        "premature interest: %g days, %g%%, %g", num(r, "days_run"), num(r, "applied_rate_percent"), num(r, "interest_paid"));
  CHECK(balance(ep, "SB0000000001") == before + 20000000 + 552030, "payout credited");
  DONE(r);
  char other_fd[BANK_ID_MAX];
  sql_text(ep, "SELECT fd_id FROM fixed_deposits WHERE customer_id != 'NVC10001' LIMIT 1", other_fd, sizeof other_fd);
  ERR("close_fd_premature", J("{'fd_id': '%s', 'customer_confirmed': true}", other_fd), "not found");

  r = OK("calculate_rd_maturity", "{'monthly_amount': 5000, 'tenure_months': 12, 'senior_citizen': false}");
  CHECK(num(r, "interest_rate_percent") == 6.8 && fabs(num(r, "interest") - 2243.64) < 1e-6, "RD 5000x12: 2243.64 (Python)");
  DONE(r);
  ERR("calculate_rd_maturity", "{'monthly_amount': 99, 'tenure_months': 12}", "minimum RD");
  ERR("calculate_rd_maturity", "{'monthly_amount': 500, 'tenure_months': 5}", "between 6 and 120");
  before = balance(ep, "SB0000000001");
  r = OK("create_rd", "{'monthly_amount': 5000, 'tenure_months': 12, 'source_account': 'SB0000000001'}");
  CHECK(balance(ep, "SB0000000001") == before - 500000 && fabs(num(r, "maturity_amount") - 62243.64) < 1e-6,
        "RD first instalment debited; maturity 62243.64");
  DONE(r);
  ERR("create_rd", "{'monthly_amount': 5000, 'tenure_months': 12, 'source_account': 'NOPE'}", "not found");
  // RDOLD1: 6 instalments of 5000 since 2025-07-15 (184 days, 6 months run):
  // 180-364 slab 6.00% - 1% = 5.00%.
  ERR("close_rd_premature", "{'rd_id': 'RDOLD1'}", "charge");
  before = balance(ep, "SB0000000001");
  r = OK("close_rd_premature", "{'rd_id': 'RDOLD1', 'customer_confirmed': true}");
  double expected = 0;
  for (int k = 1; k <= 6; k++) expected += 5000 * (pow(1 + 0.05 / 4, (6 - k + 1) / 3.0) - 1);
  CHECK(fabs(num(r, "interest_paid") - round(expected * 100) / 100) < 1e-6, "RD premature interest %g vs %g",
        num(r, "interest_paid"), expected);
  CHECK(balance(ep, "SB0000000001") == before + 3000000 + llround(expected * 100), "RD payout credited");
  DONE(r);
  ERR("close_rd_premature", "{'rd_id': 'RDOLD1', 'customer_confirmed': true}", "already closed");
  bank_episode_close(ep);
}

// ---- loans ------------------------------------------------------------------

static void test_loans(void) {
  BankEpisode *ep = scenario(1);
  cJSON *r = OK("calculate_emi", "{'principal_amount': 500000, 'annual_rate_percent': 12, 'tenure_months': 36}");
  CHECK(fabs(num(r, "emi") - 16607.15) < 1e-6, "EMI 16607.15 (Python): %g", num(r, "emi"));
  DONE(r);
  ERR("calculate_emi", "{'principal_amount': 500000, 'annual_rate_percent': 60, 'tenure_months': 36}", "between 0 and 50");
  // Score 780 -> 12.00%; income 2 lakh/month -> EMI cap 1 lakh.
  r = OK("check_loan_eligibility", "{'loan_type': 'personal', 'amount': 500000, 'tenure_months': 36}");
  CHECK(truthy(r, "eligible") && num(r, "interest_rate_percent") == 12.0 && fabs(num(r, "emi") - 16607.15) < 1e-6 &&
            num(r, "processing_fee") == 7500 && num(r, "processing_fee_gst") == 1350 && num(r, "max_affordable_emi") == 100000,
        "eligible at 12%%, fee 1.5%% = 7500 + 1350 GST");
  DONE(r);
  r = OK("check_loan_eligibility", "{'loan_type': 'personal', 'amount': 3000000, 'tenure_months': 72}");
  CHECK(!truthy(r, "eligible") && strstr(str(r, "reasons"), "25,00,000") && strstr(str(r, "reasons"), "12 to 60"),
        "ineligible with reasons: %s", str(r, "reasons"));
  DONE(r);
  bank_episode_exec(ep, "UPDATE customers SET credit_score = 640 WHERE customer_id = 'NVC10001'", NULL);
  r = OK("check_loan_eligibility", "{'loan_type': 'personal', 'amount': 100000, 'tenure_months': 24}");
  CHECK(!truthy(r, "eligible") && strstr(str(r, "reasons"), "below 650"), "score 640 ineligible");
  DONE(r);
  ERR("apply_loan", "{'loan_type': 'personal', 'amount': 100000, 'tenure_months': 24, 'disbursal_account': 'SB0000000001',"
                    " 'customer_confirmed': true}", "below 650");
  bank_episode_exec(ep, "UPDATE customers SET credit_score = 780 WHERE customer_id = 'NVC10001'", NULL);
  ERR("apply_loan", "{'loan_type': 'personal', 'amount': 500000, 'tenure_months': 36, 'disbursal_account': 'SB0000000001'}",
      "Rs 8,850.00");
  int64_t before = balance(ep, "SB0000000001");
  r = OK("apply_loan", "{'loan_type': 'personal', 'amount': 500000, 'tenure_months': 36, 'disbursal_account': 'SB0000000001',"
                       " 'customer_confirmed': true}");
  char loan[BANK_ID_MAX];
  snprintf(loan, sizeof loan, "%s", str(r, "loan_id"));
  CHECK(balance(ep, "SB0000000001") == before + 50000000 - 885000, "disbursed minus fee incl. GST");
  DONE(r);
  // Existing EMI now 16607.15: a big second loan breaks the 50% rule.
  bank_episode_exec(ep, "UPDATE customers SET monthly_income_paise = 5000000 WHERE customer_id = 'NVC10001'", NULL);
  r = OK("check_loan_eligibility", "{'loan_type': 'personal', 'amount': 500000, 'tenure_months': 36}");
  CHECK(!truthy(r, "eligible") && strstr(str(r, "reasons"), "50%") && fabs(num(r, "max_affordable_emi") - 8392.85) < 1e-6,
        "FOIR: 25000 - 16607.15 = 8392.85: %g", num(r, "max_affordable_emi"));
  DONE(r);
  r = OK("list_loans", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "loans")) == 1, "one loan");
  DONE(r);
  r = OK("get_loan_details", J("{'loan_id': '%s'}", loan));
  CHECK(num(r, "emis_remaining") == 36 && num(r, "outstanding") == 500000, "details");
  DONE(r);
  ERR("get_foreclosure_quote", J("{'loan_id': '%s'}", loan), "after 6 EMIs");
  bank_episode_exec(ep, J("UPDATE loans SET emis_paid = 6, outstanding_paise = 40000000 WHERE loan_id = '%s'", loan), NULL);
  r = OK("get_foreclosure_quote", J("{'loan_id': '%s', 'prepay_amount': 100000}", loan));
  CHECK(num(r, "charge") == 3000 && num(r, "gst") == 540 && num(r, "total_payable") == 103540, "3%% + GST on prepaid");
  DONE(r);
  ERR("get_foreclosure_quote", J("{'loan_id': '%s', 'prepay_amount': 400001}", loan), "exceeds");
  ERR("prepay_loan", J("{'loan_id': '%s', 'amount': 100000, 'source_account': 'SB0000000001'}", loan), "Rs 3,540.00");
  ERR("prepay_loan", J("{'loan_id': '%s', 'amount': 400000, 'source_account': 'SB0000000001', 'customer_confirmed': true}",
                       loan), "foreclose_loan");
  before = balance(ep, "SB0000000001");
  DONE(OK("prepay_loan", J("{'loan_id': '%s', 'amount': 100000, 'source_account': 'SB0000000001', 'customer_confirmed': true}",
                           loan)));
  CHECK(balance(ep, "SB0000000001") == before - 10354000 &&
            sql_int(ep, J("SELECT outstanding_paise FROM loans WHERE loan_id = '%s'", loan)) == 30000000,
        "prepaid 1 lakh + 3540");
  before = balance(ep, "SB0000000001");
  r = OK("foreclose_loan", J("{'loan_id': '%s', 'source_account': 'SB0000000001', 'customer_confirmed': true}", loan));
  CHECK(strcmp(str(r, "status"), "closed") == 0 && balance(ep, "SB0000000001") == before - 30000000 - 900000 - 162000,
        "foreclosed: 3 lakh + 9000 + 1620 GST");
  DONE(r);
  ERR("foreclose_loan", J("{'loan_id': '%s', 'source_account': 'SB0000000001', 'customer_confirmed': true}", loan), "closed");

  // Home loans: 8.50% floating, fee 0.50% capped at 10,000; no prepayment charge.
  bank_episode_exec(ep, "UPDATE customers SET monthly_income_paise = 50000000 WHERE customer_id = 'NVC10001'", NULL);
  r = OK("apply_loan", "{'loan_type': 'home', 'amount': 5000000, 'tenure_months': 240, 'disbursal_account': 'SB0000000001',"
                       " 'customer_confirmed': true}");
  CHECK(strstr(str(r, "status"), "sanctioned") && num(r, "processing_fee") == 10000 && num(r, "interest_rate_percent") == 8.5,
        "home loan sanctioned, fee capped at 10000");
  DONE(r);
  bank_episode_exec(ep, "INSERT INTO loans VALUES ('LNHOME1', 'NVC10001', 'home', 'floating', 300000000, 250000000, 850,"
                        " 240, 2603482, 20, '2024-05-15', 'SB0000000001', 'active', NULL, NULL, 0, NULL)", NULL);
  r = OK("get_foreclosure_quote", "{'loan_id': 'LNHOME1'}");
  CHECK(num(r, "charge") == 0 && num(r, "total_payable") == 2500000, "floating home loan: no charge");
  DONE(r);
  before = balance(ep, "SB0000000001");
  DONE(OK("prepay_loan", "{'loan_id': 'LNHOME1', 'amount': 100000, 'source_account': 'SB0000000001'}"));
  CHECK(balance(ep, "SB0000000001") == before - 10000000, "no confirmation needed without a charge");

  // Gold: Rs 7,000.00/g for 22K on the episode date.
  r = OK("get_gold_rate", "{}");
  CHECK(num(r, "rate_22k_per_gram") == 7000 && strcmp(str(r, "rate_date"), "2026-01-15") == 0, "gold rate");
  DONE(r);
  r = OK("get_gold_loan_quote", "{'gold_weight_grams': 10, 'purity_karat': 18}");
  // 10 g x 7000 x 18/22 = 57272.73; 75% = 42954.54 (rounded down).
  CHECK(fabs(num(r, "gold_value") - 57272.73) < 1e-6 && fabs(num(r, "max_loan_amount") - 42954.54) < 1e-6,
        "18K valued pro rata: %g, max %g", num(r, "gold_value"), num(r, "max_loan_amount"));
  DONE(r);
  ERR("get_gold_loan_quote", "{'gold_weight_grams': 10, 'purity_karat': 14}", "between 18 and 24");
  ERR("apply_gold_loan", "{'gold_weight_grams': 10, 'purity_karat': 22, 'amount': 52500.01, 'tenure_months': 12,"
                         " 'disbursal_account': 'SB0000000001', 'customer_confirmed': true}", "Rs 52,500.00");
  ERR("apply_gold_loan", "{'gold_weight_grams': 10, 'purity_karat': 22, 'amount': 50000, 'tenure_months': 13,"
                         " 'disbursal_account': 'SB0000000001'}", "between 1 and 12");
  ERR("apply_gold_loan", "{'gold_weight_grams': 10, 'purity_karat': 22, 'amount': 50000, 'tenure_months': 12,"
                         " 'disbursal_account': 'SB0000000001'}", "Rs 295.00");
  before = balance(ep, "SB0000000001");
  r = OK("apply_gold_loan", "{'gold_weight_grams': 10, 'purity_karat': 22, 'amount': 50000, 'tenure_months': 12,"
                            " 'disbursal_account': 'SB0000000001', 'customer_confirmed': true}");
  CHECK(balance(ep, "SB0000000001") == before + 5000000 - 29500, "gold loan: fee 0.25%% -> min 250 + 45 GST");
  DONE(r);
  char other_loan[BANK_ID_MAX];
  sql_text(ep, "SELECT loan_id FROM loans WHERE customer_id != 'NVC10001' LIMIT 1", other_loan, sizeof other_loan);
  ERR("get_loan_details", J("{'loan_id': '%s'}", other_loan), "not found");
  ERR("foreclose_loan", J("{'loan_id': '%s', 'source_account': 'SB0000000001', 'customer_confirmed': true}", other_loan),
      "not found");
  bank_episode_close(ep);
}

// ---- cards, mandates, cheques ---------------------------------------------------

static void test_cards_mandates_cheques(void) {
  BankEpisode *ep = scenario(1);
  cJSON *r = OK("list_cards", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "cards")) >= 2, "cards listed");
  DONE(r);
  char other_card[BANK_ID_MAX];
  sql_text(ep, "SELECT card_id FROM cards WHERE customer_id != 'NVC10001' AND status = 'active' LIMIT 1", other_card,
           sizeof other_card);
  ERR("block_card", J("{'card_id': '%s', 'reason': 'lost'}", other_card), "not found");
  CHECK(sql_int(ep, J("SELECT status = 'active' FROM cards WHERE card_id = '%s'", other_card)) == 1, "other card untouched");
  ERR("reissue_card", "{'card_id': 'CRDDEB1', 'customer_confirmed': true}", "block it first");
  DONE(OK("block_card", "{'card_id': 'CRDDEB1', 'reason': 'temporary'}"));
  DONE(OK("unblock_card", "{'card_id': 'CRDDEB1'}"));
  ERR("unblock_card", "{'card_id': 'CRDDEB1'}", "only a temporarily blocked");
  r = OK("block_card", "{'card_id': 'CRDDEB1', 'reason': 'lost'}");
  CHECK(strcmp(str(r, "status"), "hotlisted") == 0, "lost -> hotlisted");
  DONE(r);
  ERR("unblock_card", "{'card_id': 'CRDDEB1'}", "only a temporarily blocked");
  ERR("block_card", "{'card_id': 'CRDDEB1', 'reason': 'stolen'}", "already hotlisted");
  ERR("reissue_card", "{'card_id': 'CRDDEB1'}", "Rs 236.00");
  int64_t before = balance(ep, "SB0000000001");
  r = OK("reissue_card", "{'card_id': 'CRDDEB1', 'customer_confirmed': true}");
  char new_card[BANK_ID_MAX];
  snprintf(new_card, sizeof new_card, "%s", str(r, "new_card_id"));
  CHECK(balance(ep, "SB0000000001") == before - 23600, "debit card reissue Rs 200 + 36 GST");
  CHECK(sql_int(ep, J("SELECT status = 'active' AND atm_limit_paise = 4000000 FROM cards WHERE card_id = '%s'", new_card)) == 1 &&
            sql_int(ep, J("SELECT status = 'replaced' FROM cards WHERE card_id = 'CRDDEB1' AND replaced_by = '%s'", new_card)) == 1,
        "new card active with old limits; old replaced");
  DONE(r);
  ERR("reissue_card", "{'card_id': 'CRDDEB1', 'customer_confirmed': true}", "replaced");
  DONE(OK("block_card", "{'card_id': 'CRDCRE1', 'reason': 'damaged'}"));
  before = balance(ep, "SB0000000001");
  DONE(OK("reissue_card", "{'card_id': 'CRDCRE1'}"));
  CHECK(balance(ep, "SB0000000001") == before, "credit card reissue is free, no confirmation");
  ERR("update_card_limits", J("{'card_id': '%s', 'atm_limit': 200000}", new_card), "at most Rs 1,00,000.00");
  ERR("update_card_limits", J("{'card_id': '%s'}", new_card), "at least one");
  ERR("update_card_limits", "{'card_id': 'CRDDEB1', 'atm_limit': 1000}", "replaced");
  r = OK("update_card_limits", J("{'card_id': '%s', 'atm_limit': 25000, 'online_limit': 75000.5}", new_card));
  CHECK(num(r, "atm_limit") == 25000 && num(r, "online_limit") == 75000.5 && num(r, "pos_limit") == 200000, "limits set");
  DONE(r);
  r = OK("set_card_channel_controls", J("{'card_id': '%s', 'channel': 'international', 'enabled': true}", new_card));
  CHECK(sql_int(ep, J("SELECT international_enabled FROM cards WHERE card_id = '%s'", new_card)) == 1, "channel on");
  DONE(r);
  ERR("set_card_channel_controls", J("{'card_id': '%s', 'channel': 'moon', 'enabled': true}", new_card), "one of");

  r = OK("list_mandates", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "mandates")) >= 1, "mandates listed");
  DONE(r);
  DONE(OK("revoke_mandate", "{'mandate_id': 'MNDX1'}"));
  CHECK(sql_int(ep, "SELECT status = 'revoked' AND revoked_on = '2026-01-15' FROM mandates WHERE mandate_id = 'MNDX1'") == 1,
        "mandate revoked today");
  ERR("revoke_mandate", "{'mandate_id': 'MNDX1'}", "already revoked");
  char other_mandate[BANK_ID_MAX];
  sql_text(ep, "SELECT mandate_id FROM mandates WHERE customer_id != 'NVC10001' LIMIT 1", other_mandate, sizeof other_mandate);
  ERR("revoke_mandate", J("{'mandate_id': '%s'}", other_mandate), "not found");

  // Cheque books: this FY already has the seeded book(s) for the account.
  int64_t used = sql_int(ep, "SELECT sum(leaves) FROM cheque_books WHERE account_id = 'SB0000000001' AND financial_year = '2025-26'");
  CHECK(used >= 25, "free leaves used this year: %lld", (long long)used);
  ERR("request_cheque_book", "{'account_id': 'SB0000000001', 'leaves': 10}", "Rs 35.40");  // 10 x 3 + 18% GST
  ERR("request_cheque_book", "{'account_id': 'SB0000000001', 'leaves': 20}", "10, 25 or 50");
  before = balance(ep, "SB0000000001");
  r = OK("request_cheque_book", "{'account_id': 'SB0000000001', 'leaves': 10, 'customer_confirmed': true}");
  CHECK(balance(ep, "SB0000000001") == before - 3540 && num(r, "first_cheque_number") == 500026 &&
            sql_int(ep, "SELECT count(*) FROM cheques WHERE account_id = 'SB0000000001' AND cheque_number BETWEEN 500026 AND 500035") == 10,
        "cheque book charged and leaves created");
  DONE(r);
  // A savings account with no book this year gets 25 free leaves.
  bank_episode_exec(ep, "INSERT INTO accounts VALUES ('SB0000000004', 'NVC10001', 'savings', 'active', 100000, '2020-01-01',"
                        " 'Fort', 'NAVB0000101', NULL)", NULL);
  r = OK("request_cheque_book", "{'account_id': 'SB0000000004'}");
  CHECK(num(r, "charge") == 0 && num(r, "free_leaves_used") == 25 && balance(ep, "SB0000000004") == 100000, "25 free leaves");
  DONE(r);
  ERR("stop_cheque_payment", "{'account_id': 'SB0000000001', 'cheque_number': 500001, 'customer_confirmed': true}", "cleared");
  ERR("stop_cheque_payment", "{'account_id': 'SB0000000001', 'cheque_number': 500002}", "Rs 118.00");
  before = balance(ep, "SB0000000001");
  DONE(OK("stop_cheque_payment", "{'account_id': 'SB0000000001', 'cheque_number': 500002, 'customer_confirmed': true}"));
  CHECK(balance(ep, "SB0000000001") == before - 11800, "stop payment Rs 100 + 18 GST");
  r = OK("get_cheque_status", "{'account_id': 'SB0000000001', 'cheque_number': 500002}");
  CHECK(strcmp(str(r, "status"), "stopped") == 0, "status stopped");
  DONE(r);
  ERR("get_cheque_status", "{'account_id': 'SB0000000001', 'cheque_number': 999}", "was not issued");
  ERR("submit_positive_pay", "{'account_id': 'SB0000000001', 'cheque_number': 500003, 'amount': 40000, 'payee_name': 'X',"
                             " 'issue_date': '2026-01-14'}", "Rs 50,000 and above");
  ERR("submit_positive_pay", "{'account_id': 'SB0000000001', 'cheque_number': 500003, 'amount': 600000, 'payee_name': 'X',"
                             " 'issue_date': '2026-01-16'}", "future");
  ERR("submit_positive_pay", "{'account_id': 'SB0000000001', 'cheque_number': 500002, 'amount': 600000, 'payee_name': 'X',"
                             " 'issue_date': '2026-01-14'}", "stopped");
  r = OK("submit_positive_pay", "{'account_id': 'SB0000000001', 'cheque_number': 500003, 'amount': 600000,"
                                " 'payee_name': 'Nirmal Builders', 'issue_date': '2026-01-14'}");
  CHECK(truthy(r, "mandatory_for_this_amount"), "mandatory from 5 lakh");
  DONE(r);
  r = OK("get_cheque_status", "{'account_id': 'SB0000000001', 'cheque_number': 500003}");
  CHECK(truthy(r, "positive_pay") && num(r, "amount") == 600000, "positive pay recorded");
  DONE(r);
  bank_episode_close(ep);
}

// ---- services, insurance, schemes, tax, knowledge -------------------------------------

static void test_services(void) {
  BankEpisode *ep = scenario(1);
  if (kb) {
    cJSON *r = OK("search_knowledge_base", "{'query': 'Form 15H senior citizen TDS', 'top_k': 2}");
    cJSON *passages = cJSON_GetObjectItem(r, "passages");
    CHECK(cJSON_GetArraySize(passages) >= 1 && str(cJSON_GetArrayItem(passages, 0), "doc_id")[0] &&
              str(cJSON_GetArrayItem(passages, 0), "date")[0],
          "passages carry source and date");
    DONE(r);
  }
  ERR("search_knowledge_base", "{'query': 'x', 'top_k': 11}", "between 1 and 10");
  cJSON *r = OK("get_service_charges", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "charges")) >= 15 && num(r, "gst_percent") == 18, "charge schedule");
  DONE(r);
  r = OK("create_service_request", "{'category': 'complaint', 'description': 'ATM did not dispense cash',"
                                   " 'account_id': 'SB0000000001'}");
  char request[BANK_ID_MAX];
  snprintf(request, sizeof request, "%s", str(r, "request_id"));
  DONE(r);
  ERR("create_service_request", "{'category': 'complaint', 'description': 'x', 'account_id': 'SB9'}", "not found");
  r = OK("get_service_request_status", J("{'request_id': '%s'}", request));
  CHECK(strcmp(str(r, "status"), "open") == 0 && strcmp(str(r, "category"), "complaint") == 0, "request status");
  DONE(r);
  char other_request[BANK_ID_MAX];
  sql_text(ep, "SELECT request_id FROM service_requests WHERE customer_id != 'NVC10001' LIMIT 1", other_request,
           sizeof other_request);
  ERR("get_service_request_status", J("{'request_id': '%s'}", other_request), "not found");

  r = OK("list_insurance_policies", "{}");
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r, "policies")) >= 1, "policies");
  DONE(r);
  ERR("file_insurance_claim", "{'policy_id': 'POLX1', 'claim_amount': 50000, 'incident_date': '2025-05-31',"
                              " 'description': 'hospitalisation'}", "outside the policy period");
  ERR("file_insurance_claim", "{'policy_id': 'POLX1', 'claim_amount': 500001, 'incident_date': '2026-01-10',"
                              " 'description': 'hospitalisation'}", "sum assured");
  ERR("file_insurance_claim", "{'policy_id': 'POLX1', 'claim_amount': 5000, 'incident_date': '2026-01-20',"
                              " 'description': 'x'}", "future");
  r = OK("file_insurance_claim", "{'policy_id': 'POLX1', 'claim_amount': 50000, 'incident_date': '2026-01-10',"
                                 " 'description': 'hospitalisation'}");
  char claim[BANK_ID_MAX];
  snprintf(claim, sizeof claim, "%s", str(r, "claim_id"));
  DONE(r);
  r = OK("get_claim_status", J("{'claim_id': '%s'}", claim));
  CHECK(strcmp(str(r, "status"), "registered") == 0 && num(r, "claim_amount") == 50000, "claim status");
  DONE(r);
  ERR("get_claim_status", "{'claim_id': 'CLM0'}", "not found");

  // Age 40, income-tax payer: PMJJBY and PMSBY yes, APY no.
  r = OK("check_scheme_eligibility", "{'scheme_code': 'pmjjby'}");
  CHECK(truthy(r, "eligible") && num(r, "annual_premium") == 436, "PMJJBY eligible, Rs 436");
  DONE(r);
  r = OK("check_scheme_eligibility", "{'scheme_code': 'apy'}");
  CHECK(!truthy(r, "eligible") && strstr(str(r, "reasons"), "income-tax") && !strstr(str(r, "reasons"), "age"),
        "APY: %s", str(r, "reasons"));
  DONE(r);
  ERR("enroll_scheme", "{'scheme_code': 'apy', 'account_id': 'SB0000000001', 'apy_monthly_pension': 5000}", "not eligible");
  ERR("enroll_scheme", "{'scheme_code': 'pmsby', 'account_id': 'SB0000000001'}", "Rs 20.00");
  ERR("enroll_scheme", "{'scheme_code': 'pmsby', 'account_id': 'CA0000000002', 'customer_confirmed': true}", "savings");
  int64_t before = balance(ep, "SB0000000001");
  DONE(OK("enroll_scheme", "{'scheme_code': 'pmsby', 'account_id': 'SB0000000001', 'customer_confirmed': true}"));
  CHECK(balance(ep, "SB0000000001") == before - 2000, "PMSBY premium Rs 20 debited");
  ERR("enroll_scheme", "{'scheme_code': 'pmsby', 'account_id': 'SB0000000001', 'customer_confirmed': true}", "already enrolled");
  bank_episode_exec(ep, "UPDATE customers SET income_tax_payer = 0, date_of_birth = '1995-01-01' WHERE customer_id = 'NVC10001'", NULL);
  ERR("enroll_scheme", "{'scheme_code': 'apy', 'account_id': 'SB0000000001'}", "apy_monthly_pension");
  DONE(OK("enroll_scheme", "{'scheme_code': 'apy', 'account_id': 'SB0000000001', 'apy_monthly_pension': 3000}"));

  r = OK("get_tds_certificate", "{'financial_year': '2025-26'}");
  CHECK(num(r, "total_interest") == 7000 && num(r, "total_tds") == 0, "TDS certificate totals");
  DONE(r);
  ERR("get_tds_certificate", "{'financial_year': '2025-27'}", "2025-26");
  ERR("get_tds_certificate", "{'financial_year': '2027-28'}", "not started");
  ERR("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15H', 'estimated_total_income': 200000}", "60 or more");
  ERR("submit_form_15g_15h", "{'financial_year': '2024-25', 'form_type': '15G', 'estimated_total_income': 200000}", "current");
  DONE(OK("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15G', 'estimated_total_income': 200000}"));
  ERR("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15G', 'estimated_total_income': 200000}", "already");
  bank_episode_exec(ep, "DELETE FROM tax_forms; UPDATE customers SET pan = NULL, date_of_birth = '1950-01-01'"
                        " WHERE customer_id = 'NVC10001'", NULL);
  ERR("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15H', 'estimated_total_income': 200000}", "PAN");
  bank_episode_exec(ep, "UPDATE customers SET pan = 'ABCPS1234K' WHERE customer_id = 'NVC10001'", NULL);
  ERR("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15G', 'estimated_total_income': 200000}", "15H");
  DONE(OK("submit_form_15g_15h", "{'financial_year': '2025-26', 'form_type': '15H', 'estimated_total_income': 200000}"));

  r = OK("transfer_to_human_agent", "{'reason': 'wants to discuss a home loan top-up'}");
  CHECK(ep->transferred_to_human && str(r, "request_id")[0], "transferred, request recorded");
  DONE(r);
  bank_episode_close(ep);

  // Without a knowledge base the tool answers with an error, not a crash.
  FimiError err = {0};
  BankEpisode *bare = NULL;
  if (bank_episode_open(&image, NULL, &bare, &err) == 0) {
    err_at(bare, "search_knowledge_base", "{'query': 'kyc'}", "not available", __LINE__);
    cJSON *t = ok_at(bare, "transfer_to_human_agent", "{'reason': 'no id'}", __LINE__);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(t, "request_id")), "no request without a customer");
    DONE(t);
    bank_episode_close(bare);
  }
}

// ---- confirmation modes -----------------------------------------------------

static void test_conversation_confirmation(void) {
  BankEpisode *ep = scenario(1);
  ep->confirm_mode = BANK_CONFIRM_CONVERSATION;
  const char *args = "{'account_id': 'SB0000000001', 'cheque_number': 500004, 'customer_confirmed': true}";
  ERR("stop_cheque_payment", args, "has not confirmed the charge of Rs 118.00");
  ep->confirmation_given = 1;
  DONE(OK("stop_cheque_payment", args));
  CHECK(ep->confirmation_given == 0, "one consent covers one charged write");
  ERR("stop_cheque_payment", "{'account_id': 'SB0000000001', 'cheque_number': 500005, 'customer_confirmed': true}",
      "has not confirmed");
  ep->confirmation_given = 1;
  DONE(OK("block_card", "{'card_id': 'CRDDEB1', 'reason': 'temporary'}"));
  CHECK(ep->confirmation_given == 1, "free writes do not consume the consent");
  bank_episode_close(ep);
}

// ---- catalog ---------------------------------------------------------------

static void test_catalog(void) {
  int n = env_tool_count(), charged = 0, writes = 0;
  CHECK(n >= 45, "at least 45 tools (%d)", n);
  for (int i = 0; i < n; i++) {
    CHECK(env_tool_index(env_tool_name(i)) == i, "unique name %s", env_tool_name(i));
    cJSON *schema = env_tool_schema(i);
    cJSON *params = cJSON_GetObjectItem(schema, "parameters");
    cJSON *props = cJSON_GetObjectItem(params, "properties");
    CHECK(cJSON_IsObject(props) && strlen(str(schema, "description")) > 10, "schema of %s", env_tool_name(i));
    cJSON *req;
    cJSON_ArrayForEach(req, cJSON_GetObjectItem(params, "required"))
        CHECK(cJSON_GetObjectItem(props, req->valuestring) != NULL, "%s: required %s is a property", env_tool_name(i),
              req->valuestring);
    if (env_tool_charged(i)) {
      charged++;
      CHECK(env_tool_writes(i) && cJSON_GetObjectItem(props, "customer_confirmed"), "%s: charged tools take customer_confirmed",
            env_tool_name(i));
    }
    writes += env_tool_writes(i);
    cJSON_Delete(schema);
  }
  CHECK(charged >= 8 && writes >= 20, "charged %d, writes %d", charged, writes);
  CHECK(env_tool_index("nope") == -1 && env_tool_name(n) == NULL && env_tool_schema(-1) == NULL, "out of range");
  char *md = env_tool_catalog_markdown();
  CHECK(md && strstr(md, "### `transfer_funds`") && strstr(md, "customer_confirmed"), "markdown");
  // docs/tools.md is generated: it must match the catalog in the code.
  const char *source = getenv("FIMI_SOURCE_DIR");
  if (source && md) {
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/tools.md", source);
    FILE *f = fopen(path, "rb");
    size_t len = strlen(md);
    char *doc = malloc(len + 2);
    size_t got = f && doc ? fread(doc, 1, len + 1, f) : 0;
    CHECK(got == len && memcmp(doc, md, len) == 0,
          "docs/tools.md is stale: regenerate with `fimi env tools --markdown > docs/tools.md`");
    free(doc);
    if (f) fclose(f);
  }
  free(md);
}

// ---- determinism, isolation, ownership under random calls --------------------------

// A digest of everything that belongs to customers other than `me`.
static uint64_t others_digest(BankEpisode *ep, const char *me) {
  static const char *queries[] = {
      "SELECT * FROM customers WHERE customer_id != ?", "SELECT * FROM accounts WHERE customer_id != ?",
      "SELECT t.* FROM transactions t JOIN accounts a USING (account_id) WHERE a.customer_id != ?",
      "SELECT * FROM beneficiaries WHERE customer_id != ?", "SELECT * FROM fixed_deposits WHERE customer_id != ?",
      "SELECT * FROM recurring_deposits WHERE customer_id != ?", "SELECT * FROM loans WHERE customer_id != ?",
      "SELECT * FROM cards WHERE customer_id != ?", "SELECT * FROM mandates WHERE customer_id != ?",
      "SELECT c.* FROM cheques c JOIN accounts a USING (account_id) WHERE a.customer_id != ?",
      "SELECT * FROM service_requests WHERE customer_id != ?", "SELECT * FROM insurance_policies WHERE customer_id != ?",
      "SELECT * FROM scheme_enrolments WHERE customer_id != ?", "SELECT * FROM tax_forms WHERE customer_id != ?"};
  uint64_t h = 1469598103934665603ULL;
  for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
    sqlite3_stmt *stmt = NULL;
    sqlite3_prepare_v2(ep->db, queries[q], -1, &stmt, NULL);
    sqlite3_bind_text(stmt, 1, me, -1, SQLITE_STATIC);
    while (sqlite3_step(stmt) == SQLITE_ROW)
      for (int i = 0; i < sqlite3_column_count(stmt); i++) {
        const unsigned char *t = sqlite3_column_text(stmt, i);
        for (; t && *t; t++) h = (h ^ *t) * 1099511628211ULL;
        h = (h ^ 0xff) * 1099511628211ULL;
      }
    sqlite3_finalize(stmt);
  }
  return h;
}

static const char *pick(Rng *rng, const char **pool, int n) { return pool[rng_next_u64(rng) % (uint64_t)n]; }

// Random arguments for a tool: each parameter present or not, its value from
// a pool mixing valid ids, other customers' ids, junk and extreme numbers.
static cJSON *random_args(Rng *rng, int tool, const char **ids, int num_ids) {
  cJSON *schema = env_tool_schema(tool);
  cJSON *props = cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "parameters"), "properties");
  cJSON *args = cJSON_CreateObject();
  static const double numbers[] = {0, -1, 1, 7, 12, 24, 100, 1000.5, 5000, 50000, 200000, 1e9, 1e30, 0.001, 3.14159, 25};
  static const char *strings[] = {"", "x", "neft", "imps", "rtgs", "upi", "fd", "lost", "temporary", "2026-01-15",
                                  "2025-06-01", "15G", "15H", "pmsby", "apy", "'; DROP TABLE accounts; --", "NVC10002",
                                  "aadhaar", "email", "savings", "personal", "gold", "home", "international"};
  cJSON *prop;
  cJSON_ArrayForEach(prop, props) {
    if (rng_next_u64(rng) % 5 == 0) continue;
    const char *type = str(prop, "type");
    cJSON *enums = cJSON_GetObjectItem(prop, "enum");
    cJSON *value;
    uint64_t roll = rng_next_u64(rng) % 10;
    if (roll == 0) value = cJSON_CreateString(pick(rng, strings, 24));  // often the wrong type
    else if (enums && roll < 8) value = cJSON_Duplicate(cJSON_GetArrayItem(enums, (int)(rng_next_u64(rng) % (uint64_t)cJSON_GetArraySize(enums))), 1);
    else if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0) value = cJSON_CreateNumber(numbers[rng_next_u64(rng) % 16]);
    else if (strcmp(type, "boolean") == 0) value = cJSON_CreateBool(rng_next_u64(rng) % 2);
    else if (strcmp(type, "array") == 0) {
      value = cJSON_CreateArray();
      cJSON_AddItemToArray(value, cJSON_CreateString(ids[rng_next_u64(rng) % (uint64_t)num_ids]));
    } else if (roll < 8) value = cJSON_CreateString(ids[rng_next_u64(rng) % (uint64_t)num_ids]);
    else value = cJSON_CreateString(pick(rng, strings, 24));
    cJSON_AddItemToObject(args, prop->string, value);
  }
  if (rng_next_u64(rng) % 20 == 0) cJSON_AddStringToObject(args, "unexpected", "1");
  cJSON_Delete(schema);
  return args;
}

static void test_random_sequences(void) {
  FimiError err = {0};
  // a and b: fresh copies; p: a pooled connection reused after a dirty
  // episode, which must behave exactly like a fresh copy.
  BankPool *pool = NULL;
  bank_pool_create(&image, kb, &pool, &err);
  BankEpisode *dirty = scenario_from(pool, 1);
  char *dirty_text = NULL;
  call(dirty, "transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'CA0000000002', 'amount': 100}",
       &dirty_text);
  free(dirty_text);
  bank_episode_exec(dirty, "UPDATE accounts SET balance_paise = 7; UPDATE counters SET next_value = 5000", &err);
  bank_pool_release(dirty);
  BankEpisode *a = scenario(1), *b = scenario(1), *p = scenario_from(pool, 1);
  CHECK(p == dirty, "the pool reuses its connection");
  // Ids of this customer and of others, for arguments and for leak checks.
  const char *ids[64];
  char storage[64][BANK_ID_MAX];
  int n = 0;
  const char *sources[] = {"SELECT account_id FROM accounts", "SELECT card_id FROM cards", "SELECT loan_id FROM loans",
                           "SELECT fd_id FROM fixed_deposits", "SELECT beneficiary_id FROM beneficiaries",
                           "SELECT mandate_id FROM mandates", "SELECT policy_id FROM insurance_policies",
                           "SELECT rd_id FROM recurring_deposits"};
  for (size_t s = 0; s < sizeof sources / sizeof sources[0]; s++) {
    char own[BANK_ID_MAX], other[BANK_ID_MAX];
    sql_text(a, J("%s WHERE customer_id = 'NVC10001' LIMIT 1", sources[s]), own, sizeof own);
    sql_text(a, J("%s WHERE customer_id != 'NVC10001' LIMIT 1", sources[s]), other, sizeof other);
    if (own[0]) snprintf(storage[n], BANK_ID_MAX, "%s", own), ids[n] = storage[n], n++;
    if (other[0]) snprintf(storage[n], BANK_ID_MAX, "%s", other), ids[n] = storage[n], n++;
  }
  uint64_t digest = others_digest(a, "NVC10001");
  Rng rng;
  rng_seed(&rng, 2026);
  int calls = 0, successes = 0, leaks = 0, diverged = 0;
  for (int i = 0; i < 4000; i++) {
    int tool = (int)(rng_next_u64(&rng) % (uint64_t)env_tool_count());
    if (strcmp(env_tool_name(tool), "verify_customer") == 0) continue;
    cJSON *args = random_args(&rng, tool, ids, n);
    a->confirmation_given = b->confirmation_given = p->confirmation_given = 1;
    ToolResult ra, rb, rp;
    int ok = env_tool_call(a, env_tool_name(tool), args, &ra);
    env_tool_call_json(b, env_tool_name(tool), args, &rb);  // b's result: the object, printed here
    env_tool_call(p, env_tool_name(tool), args, &rp);
    calls++;
    successes += ok;
    if (rb.ok) rb.text = cJSON_PrintUnformatted(rb.json);
    if (!ra.text || !rb.text || !rp.text || strcmp(ra.text, rb.text) != 0 || strcmp(ra.text, rp.text) != 0 ||
        rb.ok != ok || (ok && !cJSON_Compare(ra.json, rb.json, 1)))
      diverged++;
    tool_result_free(&rp);
    // A successful result may mention another customer's id only if the
    // caller supplied it; an error may echo it but must say "not found".
    char *args_text = cJSON_PrintUnformatted(args);
    for (int k = 0; k < n && ra.text; k++) {
      int own = sql_int(a, J("SELECT count(*) FROM (SELECT customer_id FROM accounts WHERE account_id = '%s' UNION ALL"
                             " SELECT customer_id FROM cards WHERE card_id = '%s' UNION ALL SELECT customer_id FROM loans"
                             " WHERE loan_id = '%s' UNION ALL SELECT customer_id FROM fixed_deposits WHERE fd_id = '%s'"
                             " UNION ALL SELECT customer_id FROM beneficiaries WHERE beneficiary_id = '%s' UNION ALL"
                             " SELECT customer_id FROM mandates WHERE mandate_id = '%s' UNION ALL SELECT customer_id FROM"
                             " insurance_policies WHERE policy_id = '%s' UNION ALL SELECT customer_id FROM"
                             " recurring_deposits WHERE rd_id = '%s') WHERE customer_id = 'NVC10001'",
                             ids[k], ids[k], ids[k], ids[k], ids[k], ids[k], ids[k], ids[k]));
      if (own || !strstr(ra.text, ids[k])) continue;
      if (ok || !strstr(args_text, ids[k]) || !strstr(ra.text, "not found")) {
        leaks++;
        fprintf(stderr, "leak? %s(%s) -> %s\n", env_tool_name(tool), args_text, ra.text);
      }
    }
    free(args_text);
    tool_result_free(&ra);
    tool_result_free(&rb);
    cJSON_Delete(args);
  }
  CHECK(calls > 3000 && successes > 100, "random calls: %d, %d succeeded", calls, successes);
  CHECK(leaks == 0, "%d results leaked another customer's id", leaks);
  CHECK(diverged == 0,
        "%d results differ between copies (fresh, fresh without the text, pooled) given the same calls", diverged);
  CHECK(others_digest(a, "NVC10001") == digest, "other customers' data unchanged");
  uint64_t da = 0, dp = 1, db = 2;
  CHECK(bank_episode_digest(a, &da, &err) == 0 && bank_episode_digest(p, &dp, &err) == 0 &&
            bank_episode_digest(b, &db, &err) == 0 && da == dp && da == db,
        "fresh and pooled copies reach the same state (digest)");
  CHECK(others_digest(a, "") == others_digest(p, ""), "and the same rows");
  CHECK(bank_episode_check_integrity(p, &err) == 0, "pooled integrity: %s", err.message);
  bank_pool_release(p);
  bank_pool_free(pool);
  CHECK(bank_episode_check_integrity(a, &err) == 0, "integrity after random calls: %s", err.message);
  CHECK(sql_int(a, "SELECT count(*) FROM accounts WHERE balance_paise < 0") == 0, "no negative balances");
  unsigned char *ba = NULL, *bb = NULL;
  int64_t sa = 0, sb = 0;
  CHECK(bank_episode_serialize(a, &ba, &sa, &err) == 0 && bank_episode_serialize(b, &bb, &sb, &err) == 0 && sa == sb &&
            memcmp(ba, bb, (size_t)sa) == 0,
        "same calls -> identical database bytes");
  free(ba);
  free(bb);
  CHECK(a->num_calls == calls, "call log holds every call (%d vs %d)", a->num_calls, calls);
  bank_episode_close(a);
  bank_episode_close(b);
}

// ---- cases found by tests/fuzz/fuzz_env_tools.c ------------------------------------

// Independent strict UTF-8 check (no overlongs, surrogates or > U+10FFFF).
static int is_utf8(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; u[i];) {
    unsigned c = u[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (k == 0) return 0;
    unsigned cp = k == 1 ? c : c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
      if ((u[i + j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + j] & 0x3F);
    }
    if (cp < (k == 2 ? 0x80u : k == 3 ? 0x800u : k == 4 ? 0x10000u : 0u) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    i += k;
  }
  return 1;
}

// Tool results go back to the model and to MCP clients as JSON text, which
// must be UTF-8. The fuzzer found (1) string arguments with invalid UTF-8
// were stored (update_address) and echoed by later results, and (2) a valid
// multi-byte character cut in half where an error quotes the first 64 bytes
// of an unknown tool name or 47 of an unknown argument name.
static void test_fuzz_utf8(void) {
  BankEpisode *ep = scenario(1);
  cJSON *args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "address_line", "12 \xFE\xBA Lane");  // invalid bytes, no NUL
  cJSON_AddStringToObject(args, "city", "Mumbai");
  cJSON_AddStringToObject(args, "pincode", "400001");
  cJSON_AddStringToObject(args, "proof_document", "passport");
  ToolResult r;
  int ok = env_tool_call(ep, "update_address", args, &r);
  CHECK(!ok && r.text && strstr(r.text, "UTF-8") && is_utf8(r.text), "invalid UTF-8 argument refused: %s",
        r.text ? r.text : "(null)");
  tool_result_free(&r);
  cJSON_Delete(args);
  cJSON *profile = OK("get_customer_profile", NULL);
  CHECK(strcmp(str(profile, "address_line"), "12 \xFE\xBA Lane") != 0, "the bad address was not stored");
  DONE(profile);
  char name[80];
  memset(name, 'a', 63);
  snprintf(name + 63, sizeof name - 63, "\xC3\xA9tool");  // "e-acute" spans bytes 63-64
  env_tool_call(ep, name, NULL, &r);
  CHECK(r.text && strstr(r.text, "unknown tool") && is_utf8(r.text), "unknown long name: valid UTF-8 error: %s",
        r.text ? r.text : "(null)");
  tool_result_free(&r);
  char key[80];
  memset(key, 'k', 46);
  snprintf(key + 46, sizeof key - 46, "\xC3\xA9xyz");  // spans bytes 46-47 of the 47 quoted
  args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, key, "1");
  env_tool_call(ep, "list_accounts", args, &r);
  CHECK(r.text && strstr(r.text, "has no argument") && is_utf8(r.text), "unknown long key: valid UTF-8 error: %s",
        r.text ? r.text : "(null)");
  tool_result_free(&r);
  cJSON_Delete(args);
  bank_episode_close(ep);
}

// The fuzzer found a positive amount too small for one paisa (1e-71, 1e-9)
// accepted as 0 paise: transfer_funds then "completed" a transfer of Rs 0
// and returned an uninitialized reference (stack bytes) because no ledger
// entry was posted. Amounts must be at least one paisa.
static void test_fuzz_tiny_amount(void) {
  BankEpisode *ep = scenario(1);
  int64_t before = balance(ep, "SB0000000001");
  int calls = (int)sql_int(ep, "SELECT count(*) FROM transfers");
  ERR("transfer_funds", "{'from_account': 'SB0000000001', 'beneficiary_id': 'BENOLD1', 'amount': 1e-71, 'mode': 'upi'}",
      "at least Rs 0.01");
  ERR("transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'CA0000000002', 'amount': 1e-9}",
      "at least Rs 0.01");
  ERR("calculate_emi", "{'principal_amount': 0.000000001, 'annual_rate_percent': 10, 'tenure_months': 12}",
      "at least Rs 0.01");
  CHECK(balance(ep, "SB0000000001") == before && sql_int(ep, "SELECT count(*) FROM transfers") == calls,
        "no transfer of Rs 0 was booked");
  DONE(OK("transfer_between_own_accounts", "{'from_account': 'SB0000000001', 'to_account': 'CA0000000002', 'amount': 0.01}"));
  CHECK(balance(ep, "SB0000000001") == before - 1, "one paisa is the smallest amount");
  bank_episode_close(ep);
}

int main(void) {
  FimiError err = {0};
  if (bank_image_build(1, &image, &err) != 0) {
    fprintf(stderr, "image: %s\n", err.message);
    return 1;
  }
  if (kb_load_builtin(&kb, &err) != 0) {
    fprintf(stderr, "knowledge base not loaded (%s); its search test is skipped\n", err.message);
    kb = NULL;
  }
  test_catalog();
  test_validation();
  test_identity();
  test_accounts();
  test_deposits();
  test_loans();
  test_cards_mandates_cheques();
  test_services();
  test_conversation_confirmation();
  test_random_sequences();
  test_fuzz_utf8();
  test_fuzz_tiny_amount();
  kb_free(kb);
  bank_image_free(&image);
  TEST_MAIN_END();
}
