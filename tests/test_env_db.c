// tests/test_env_db.c: Navadhan Bank's database layer (env/bank/db.h,
// env/bank/money.h): date and money arithmetic against independent references
// (a day-by-day calendar walk, loan amortization, values computed with Python),
// the seeded image (determinism, variety, internal consistency), episode
// copies (isolation, integrity, clock, id counters, fixture edits).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/bank/db.h"
#include "env/bank/money.h"
#include "tests/test_util.h"

static int64_t sql_int(BankEpisode *ep, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  int64_t value = -999999;
  if (sqlite3_prepare_v2(ep->db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return value;
}

static void test_dates(void) {
  // Walk the calendar day by day from 1970-01-01 with month lengths written
  // out independently, and compare both conversions on every day to 2100.
  static const int lengths[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int y = 1970, m = 1, d = 1, mismatches = 0;
  for (int64_t day = 0; day < 47482; day++) {
    int yy, mm, dd;
    bank_civil_from_days(day, &yy, &mm, &dd);
    if (yy != y || mm != m || dd != d || bank_days_from_civil(y, m, d) != day) mismatches++;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int len = m == 2 ? 28 + leap : lengths[m - 1];
    if (++d > len) {
      d = 1;
      if (++m > 12) m = 1, y++;
    }
  }
  CHECK(mismatches == 0, "calendar walk: %d mismatching days", mismatches);
  int64_t day;
  CHECK(bank_date_parse("2026-01-15", &day) == 0, "parse a date");
  CHECK(bank_weekday(day) == 3, "2026-01-15 is a Thursday (Python: weekday() == 3)");
  char text[11];
  bank_date_format(day, text);
  CHECK(strcmp(text, "2026-01-15") == 0, "format round trip: %s", text);
  CHECK(bank_date_parse("2026-02-29", &day) != 0, "2026-02-29 does not exist");
  CHECK(bank_date_parse("2028-02-29", &day) == 0, "2028-02-29 exists");
  CHECK(bank_date_parse("2026-1-15", &day) != 0 && bank_date_parse("2026-13-01", &day) != 0 &&
            bank_date_parse("abcd-ef-gh", &day) != 0 && bank_date_parse("", &day) != 0,
        "malformed dates are rejected");
  bank_date_parse("2024-01-31", &day);
  bank_date_format(bank_add_months(day, 1), text);
  CHECK(strcmp(text, "2024-02-29") == 0, "Jan 31 + 1 month clamps to Feb 29 in a leap year: %s", text);
  bank_date_format(bank_add_months(day, -2), text);
  CHECK(strcmp(text, "2023-11-30") == 0, "Jan 31 - 2 months = Nov 30: %s", text);
  char fy[8];
  bank_date_parse("2026-03-31", &day);
  bank_financial_year(day, fy);
  CHECK(strcmp(fy, "2025-26") == 0, "FY of 2026-03-31: %s", fy);
  bank_financial_year(day + 1, fy);
  CHECK(strcmp(fy, "2026-27") == 0, "FY of 2026-04-01: %s", fy);
  int64_t friday, next_wednesday;
  bank_date_parse("2026-01-09", &friday);
  bank_date_parse("2026-01-14", &next_wednesday);
  CHECK(bank_working_days_between(friday, next_wednesday) == 3, "Fri -> Wed is 3 working days (Mon, Tue, Wed)");
  int64_t birth, today;
  bank_date_parse("1966-01-16", &birth);
  bank_date_parse("2026-01-15", &today);
  CHECK(bank_age_years(birth, today) == 59, "age the day before the 60th birthday");
  CHECK(bank_age_years(birth, today + 1) == 60, "age on the 60th birthday");
}

static void test_money(void) {
  int64_t paise = 0;
  char why[64];
  CHECK(bank_rupees_to_paise(0.1, &paise, why) == 0 && paise == 10, "0.1 rupees = 10 paise");
  CHECK(bank_rupees_to_paise(19.99, &paise, why) == 0 && paise == 1999, "19.99");
  CHECK(bank_rupees_to_paise(1250.5, &paise, why) == 0 && paise == 125050, "1250.5");
  CHECK(bank_rupees_to_paise(200000, &paise, why) == 0 && paise == 20000000, "200000");
  CHECK(bank_rupees_to_paise(1.005, &paise, why) != 0, "three decimals rejected");
  CHECK(bank_rupees_to_paise(0, &paise, why) != 0 && bank_rupees_to_paise(-5, &paise, why) != 0, "<= 0 rejected");
  CHECK(bank_rupees_to_paise(1e12, &paise, why) != 0, "huge rejected");
  CHECK(bank_rupees_to_paise(0.0 / 0.0, &paise, why) != 0, "NaN rejected");
  CHECK(bank_rupees_to_paise(1.0 / 0.0, &paise, why) != 0, "inf rejected");
  char text[40];
  bank_format_inr(10000000, text);
  CHECK(strcmp(text, "Rs 1,00,000.00") == 0, "Indian grouping: %s", text);
  bank_format_inr(123456789, text);
  CHECK(strcmp(text, "Rs 12,34,567.89") == 0, "Indian grouping: %s", text);
  bank_format_inr(590, text);
  CHECK(strcmp(text, "Rs 5.90") == 0, "small amount: %s", text);
  CHECK(bank_gst(500) == 90 && bank_gst(20000) == 3600 && bank_gst(1) == 0 && bank_gst(3) == 1, "GST 18%% half-up");

  // EMI: the Python reference, and the amortization property: paying the
  // EMI for n months clears the loan to within rounding.
  CHECK(bank_emi(50000000, 1200, 36) == 1660715, "EMI 5 lakh 12%% 36m = 16607.15 (Python)");
  int64_t emi = bank_emi(250000000, 850, 240);
  double balance = 250000000.0, r = 850 / 10000.0 / 12.0;
  for (int i = 0; i < 240; i++) balance = balance * (1 + r) - (double)emi;
  CHECK(balance < 240 && balance > -240, "home loan amortizes to ~0 (left %.2f paise)", balance);
  CHECK(bank_nominal_days(12) == 365 && bank_nominal_days(24) == 730 && bank_nominal_days(60) == 1825 &&
            bank_nominal_days(6) == 182,
        "nominal days");
  CHECK(bank_fd_interest(10000000, 700, 730) == 1488818, "FD 1 lakh 7%% 24m = 14888.18 (Python)");
  CHECK(bank_fd_interest(10000000, 500, 90) == 123288, "FD simple interest 90 days = 1232.88 (Python)");
  CHECK(bank_fd_interest(20000000, 500, 200) == 552030, "premature FD 200 days at 5%% = 5520.30 (Python)");
  CHECK(bank_rd_interest(500000, 680, 12, 12) == 224364, "RD 5000 x 12 at 6.8%% = 2243.64 (Python)");
  CHECK(bank_fd_interest(10000000, 0, 400) == 0 && bank_fd_interest(10000000, 700, 0) == 0, "no rate/time, no interest");
}

static void test_image_and_episodes(void) {
  FimiError err = {0};
  BankImage a, b, c;
  CHECK(bank_image_build(7, &a, &err) == 0, "build image: %s", err.message);
  CHECK(bank_image_build(7, &b, &err) == 0, "build image again: %s", err.message);
  CHECK(bank_image_build(8, &c, &err) == 0, "build image seed 8: %s", err.message);
  CHECK(a.size == b.size && memcmp(a.bytes, b.bytes, (size_t)a.size) == 0, "same seed -> identical bytes");
  CHECK(a.size != c.size || memcmp(a.bytes, c.bytes, (size_t)a.size) != 0, "different seed -> different bytes");

  BankEpisode *e1 = NULL, *e2 = NULL;
  CHECK(bank_episode_open(&a, NULL, &e1, &err) == 0 && bank_episode_open(&a, NULL, &e2, &err) == 0,
        "open episodes: %s", err.message);
  if (!e1 || !e2) return;
  CHECK(bank_episode_check_integrity(e1, &err) == 0, "integrity: %s", err.message);
  CHECK(sql_int(e1, "SELECT count(*) FROM customers") == 30, "30 customers");
  CHECK(sql_int(e1, "SELECT count(*) FROM customers WHERE kyc_status = 'expired'") >= 3, "some KYC expired");
  CHECK(sql_int(e1, "SELECT count(*) FROM customers WHERE kyc_status = 'verified'") >= 15, "most KYC verified");
  CHECK(sql_int(e1, "SELECT count(DISTINCT risk_category) FROM customers") >= 2, "varied risk categories");
  CHECK(sql_int(e1, "SELECT count(*) FROM customers WHERE date_of_birth <= '1966-01-15'") >= 5, "senior citizens");
  CHECK(sql_int(e1, "SELECT count(*) FROM customers WHERE pan IS NULL") >= 1, "someone without PAN");
  static const char *tables[] = {"accounts", "transactions", "beneficiaries", "fixed_deposits", "recurring_deposits",
                                 "loans", "cards", "mandates", "cheque_books", "cheques", "insurance_policies",
                                 "scheme_enrolments", "tds_records", "service_requests", "interest_rates",
                                 "service_charges", "gold_rates", "schemes"};
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
    CHECK(sql_int(e1, sql) > 0, "table %s is populated", tables[i]);
  }
  CHECK(sql_int(e1, "SELECT count(DISTINCT loan_type) FROM loans") == 3, "personal, home and gold loans");
  CHECK(sql_int(e1, "SELECT count(*) FROM beneficiaries WHERE added_on = '2026-01-15'") >= 1,
        "a beneficiary in its cooling period");
  // Each account's balance equals the running balance of its last transaction,
  // and each transaction's running balance follows from the one before.
  CHECK(sql_int(e1, "SELECT count(*) FROM accounts a WHERE balance_paise != (SELECT balance_after_paise FROM"
                    " transactions t WHERE t.account_id = a.account_id ORDER BY txn_date DESC, rowid DESC LIMIT 1)") == 0,
        "balances match the last transaction");
  CHECK(sql_int(e1, "SELECT count(*) FROM (SELECT balance_after_paise - lag(balance_after_paise) OVER w AS delta,"
                    " CASE direction WHEN 'credit' THEN amount_paise ELSE -amount_paise END AS signed FROM transactions"
                    " WINDOW w AS (PARTITION BY account_id ORDER BY rowid)) WHERE delta IS NOT NULL AND delta != signed") == 0,
        "running balances are consistent");
  CHECK(sql_int(e1, "SELECT count(*) FROM accounts WHERE balance_paise < 0") == 0, "no negative balances");

  // Isolation: a write in one copy is invisible in the other and the image.
  CHECK(bank_episode_exec(e1, "UPDATE accounts SET balance_paise = 42", &err) == 0, "fixture edit: %s", err.message);
  CHECK(sql_int(e1, "SELECT count(*) FROM accounts WHERE balance_paise != 42") == 0, "edit applied");
  CHECK(sql_int(e2, "SELECT count(*) FROM accounts WHERE balance_paise = 42") == 0, "other copy untouched");
  BankEpisode *e3 = NULL;
  CHECK(bank_episode_open(&a, NULL, &e3, &err) == 0, "reopen");
  if (e3) CHECK(sql_int(e3, "SELECT count(*) FROM accounts WHERE balance_paise = 42") == 0, "image untouched");
  CHECK(bank_episode_exec(e1, "SELECT * FROM no_such_table", &err) != 0 && strstr(err.message, "no_such_table"),
        "bad fixture SQL fails with SQLite's message: %s", err.message);

  // Clock and counters.
  char today[11], id[BANK_ID_MAX];
  CHECK(bank_episode_today(e1, today, &err) == 0 && strcmp(today, BANK_DEFAULT_TODAY) == 0, "clock: %s", today);
  CHECK(bank_episode_set_today(e1, "2026-02-30", &err) != 0, "invalid clock date rejected");
  CHECK(bank_episode_set_today(e1, "2026-03-01", &err) == 0 && bank_episode_today(e1, today, &err) == 0 &&
            strcmp(today, "2026-03-01") == 0,
        "clock set: %s", today);
  CHECK(bank_next_id(e1, "txn", id, sizeof id, &err) == 0 && strcmp(id, "TXN00001001") == 0, "first id: %s", id);
  CHECK(bank_next_id(e1, "txn", id, sizeof id, &err) == 0 && strcmp(id, "TXN00001002") == 0, "second id: %s", id);
  CHECK(bank_next_id(e2, "txn", id, sizeof id, &err) == 0 && strcmp(id, "TXN00001001") == 0,
        "counters are per episode: %s", id);
  CHECK(bank_next_id(e1, "nope", id, sizeof id, &err) != 0, "unknown counter fails");
  char small[6];
  CHECK(bank_next_id(e1, "txn", small, sizeof small, &err) != 0, "id that does not fit fails");
  CHECK(sql_int(e2, "SELECT count(*) FROM transactions WHERE txn_id LIKE 'TXN0000%'") == 0,
        "seeded ids never collide with counter ids");

  // Authentication helper and credentials.
  char cid[BANK_ID_MAX], dob[11], mobile[16];
  CHECK(bank_episode_authenticate(e2, "NVC99999", &err) != 0 && e2->customer_id[0] == 0, "unknown customer");
  CHECK(bank_episode_customer_credentials(e2, 0, cid, dob, mobile, &err) == 0 && strcmp(cid, "NVC10001") == 0,
        "credentials of customer 0: %s", cid);
  CHECK(bank_episode_authenticate(e2, cid, &err) == 0 && strcmp(e2->customer_id, cid) == 0, "authenticate");
  CHECK(bank_episode_customer_credentials(e2, 30, cid, dob, mobile, &err) != 0, "no 31st customer");

  unsigned char *bytes = NULL;
  int64_t size = 0;
  CHECK(e3 && bank_episode_serialize(e3, &bytes, &size, &err) == 0 && size == a.size, "serialize a read-only copy");
  if (bytes) CHECK(memcmp(bytes, a.bytes, (size_t)size) == 0, "read-only copy == image bytes");
  free(bytes);
  CHECK(bank_episode_check_integrity(e1, &err) == 0, "integrity after edits: %s", err.message);
  bank_episode_close(e1);
  bank_episode_close(e2);
  bank_episode_close(e3);
  BankImage empty = {0};
  BankEpisode *none = NULL;
  CHECK(bank_episode_open(&empty, NULL, &none, &err) != 0 && none == NULL, "empty image refused");
  bank_image_free(&a);
  bank_image_free(&b);
  bank_image_free(&c);
}

// Pooled episodes: a transaction per episode, rolled back at release.
static void test_pool(void) {
  FimiError err = {0};
  BankImage image;
  BankPool *pool = NULL;
  if (bank_image_build(3, &image, &err) != 0 || bank_pool_create(&image, NULL, &pool, &err) != 0) {
    CHECK(0, "pool setup: %s", err.message);
    return;
  }
  int64_t total = -1;
  BankEpisode *a = NULL, *b = NULL;
  CHECK(bank_pool_acquire(pool, &a, &err) == 0 && bank_pool_acquire(pool, &b, &err) == 0 && a != b, "two episodes");
  if (!a || !b) return;
  total = sql_int(a, "SELECT sum(balance_paise) FROM accounts");
  CHECK(bank_episode_exec(a, "UPDATE accounts SET balance_paise = 0", &err) == 0, "write in a");
  CHECK(sql_int(b, "SELECT sum(balance_paise) FROM accounts") == total, "b does not see a's write");
  char id[BANK_ID_MAX], today[11];
  bank_next_id(a, "txn", id, sizeof id, &err);
  bank_episode_authenticate(a, "NVC10001", &err);
  a->confirmation_given = 1;
  // The kept clock follows fixture SQL and forgets a rolled-back date.
  CHECK(bank_episode_today(a, today, &err) == 0 && strcmp(today, BANK_DEFAULT_TODAY) == 0, "clock: %s", today);
  CHECK(bank_episode_exec(a, "UPDATE clock SET today = '2027-01-15'", &err) == 0 &&
            bank_episode_today(a, today, &err) == 0 && strcmp(today, "2027-01-15") == 0,
        "clock after fixture SQL: %s", today);
  BankEpisode *first = a;
  bank_pool_release(a);
  CHECK(bank_pool_acquire(pool, &a, &err) == 0 && a == first, "the released connection is reused");
  CHECK(bank_episode_today(a, today, &err) == 0 && strcmp(today, BANK_DEFAULT_TODAY) == 0,
        "the reused copy's clock is the image's again: %s", today);
  CHECK(sql_int(a, "SELECT sum(balance_paise) FROM accounts") == total, "reused episode sees the image again");
  CHECK(a->customer_id[0] == 0 && a->confirmation_given == 0 && a->num_calls == 0, "session state cleared");
  CHECK(bank_next_id(a, "txn", id, sizeof id, &err) == 0 && strcmp(id, "TXN00001001") == 0, "counters restart: %s", id);
  CHECK(bank_episode_check_integrity(a, &err) == 0, "integrity inside the transaction: %s", err.message);
  // Fixture SQL that commits ends the episode's transaction: that connection
  // must not come back.
  CHECK(bank_episode_exec(a, "COMMIT; UPDATE accounts SET balance_paise = 1", &err) == 0, "committing fixture");
  bank_pool_release(a);
  bank_pool_release(b);
  BankEpisode *c = NULL, *d = NULL;
  CHECK(bank_pool_acquire(pool, &c, &err) == 0 && bank_pool_acquire(pool, &d, &err) == 0, "acquire again");
  if (c && d) {
    CHECK(sql_int(c, "SELECT sum(balance_paise) FROM accounts") == total &&
              sql_int(d, "SELECT sum(balance_paise) FROM accounts") == total,
          "a connection whose transaction was committed is discarded");
  }
  // Digests: equal for a pooled and a fresh copy with the same edits,
  // different after any change.
  BankEpisode *fresh = NULL;
  uint64_t d1 = 0, d2 = 1, d3 = 2;
  CHECK(bank_episode_open(&image, NULL, &fresh, &err) == 0, "fresh copy");
  if (fresh && c) {
    const char *edit = "UPDATE customers SET city = 'Agra' WHERE customer_id = 'NVC10003'";
    bank_episode_exec(fresh, edit, &err);
    bank_episode_exec(c, edit, &err);
    CHECK(bank_episode_digest(fresh, &d1, &err) == 0 && bank_episode_digest(c, &d2, &err) == 0 && d1 == d2,
          "same state, same digest (fresh vs pooled)");
    bank_episode_exec(c, "UPDATE cheques SET amount_paise = NULL WHERE rowid = 1", &err);
    bank_episode_exec(c, "UPDATE cheques SET amount_paise = 0 WHERE rowid = 1", &err);
    CHECK(bank_episode_digest(c, &d3, &err) == 0 && d3 != d2, "a changed row changes the digest");
    bank_episode_exec(c, "UPDATE cheques SET amount_paise = '' WHERE rowid = 1", &err);
    CHECK(bank_episode_digest(c, &d2, &err) == 0 && d3 != d2, "0 and '' differ");
  }
  bank_episode_close(fresh);
  // Statement cache: the same text while in use gets a second statement.
  if (d) {
    sqlite3_stmt *s1 = bank_stmt_get(d, "SELECT count(*) FROM accounts");
    sqlite3_stmt *s2 = bank_stmt_get(d, "SELECT count(*) FROM accounts");
    CHECK(s1 && s2 && s1 != s2, "nested use gets a one-off statement");
    CHECK(sqlite3_step(s1) == SQLITE_ROW && sqlite3_step(s2) == SQLITE_ROW &&
              sqlite3_column_int(s1, 0) == sqlite3_column_int(s2, 0), "both run");
    bank_stmt_put(d, s2);
    bank_stmt_put(d, s1);
    sqlite3_stmt *s3 = bank_stmt_get(d, "SELECT count(*) FROM accounts");
    CHECK(s3 == s1 && sqlite3_step(s3) == SQLITE_ROW, "the cached statement comes back reset");
    bank_stmt_put(d, s3);
    CHECK(bank_stmt_get(d, "SELECT nonsense FROM nowhere") == NULL, "a bad statement is NULL");
  }
  bank_pool_release(c);
  bank_pool_release(d);
  bank_pool_free(pool);
  bank_image_free(&image);
}

int main(void) {
  test_pool();
  test_dates();
  test_money();
  test_image_and_episodes();
  TEST_MAIN_END();
}
