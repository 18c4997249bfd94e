// env/bank/seed.c: the seeded, synthetic population of Navadhan Bank (a
// fictional bank). Defines bank_seed_population: the bank's terms (rate
// slabs, service charges, gold rate, government schemes), the clock and id
// counters, and N customers with varied KYC states, accounts and
// transactions, beneficiaries, deposits, loans, cards, mandates, cheques,
// service requests, insurance, scheme enrolments and TDS records. Every value
// comes from core/rng.h seeded with the image seed; names, numbers and
// addresses are invented. The terms are the ones in docs/bank-database.md.
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "env/bank/db.h"
#include "env/bank/money.h"

// Per-customer inserts run thousands of times in a large bank: their
// statements are prepared once (s->sql). The terms run once (RUN_ONCE).
#define RUN(...)                                                           \
  do {                                                                     \
    if (bank_sql_run_cached(&s->sql, db, err, __VA_ARGS__) != 0) return -1; \
  } while (0)
#define RUN_ONCE(...)                                        \
  do {                                                       \
    if (bank_sql_run(db, err, __VA_ARGS__) != 0) return -1;  \
  } while (0)

// Alternating male (even index) and female (odd index) first names.
static const char *FIRST_NAMES[] = {"Aarav", "Priya", "Rohan", "Ananya", "Vikram", "Meera", "Arjun", "Kavya",
                                    "Siddharth", "Lakshmi", "Imran", "Fatima", "Harpreet", "Simran", "Rahul",
                                    "Sneha", "Joseph", "Mary", "Tenzin", "Nandini", "Suresh", "Deepa", "Anil",
                                    "Pooja", "Kunal", "Ishita", "Manoj", "Revathi", "Farhan", "Zoya"};
static const char *LAST_NAMES[] = {"Sharma", "Iyer", "Reddy", "Patel", "Nair", "Das", "Khan", "Singh", "Gupta",
                                   "Menon", "Banerjee", "Kulkarni", "Fernandes", "Rao", "Chatterjee", "Joshi",
                                   "Pillai", "Verma", "Mehta", "Bose"};
static const struct {
  const char *city, *pincode, *branch, *ifsc;
} CITIES[] = {
    {"Mumbai", "400001", "Fort", "NAVB0000101"},       {"Bengaluru", "560001", "MG Road", "NAVB0000202"},
    {"Chennai", "600004", "Mylapore", "NAVB0000303"},  {"Kolkata", "700016", "Park Street", "NAVB0000404"},
    {"New Delhi", "110001", "Connaught Place", "NAVB0000505"}, {"Pune", "411004", "Deccan", "NAVB0000606"},
    {"Hyderabad", "500034", "Banjara Hills", "NAVB0000707"},   {"Lucknow", "226001", "Hazratganj", "NAVB0000808"},
};
#define NUM_CITIES ((int)(sizeof CITIES / sizeof CITIES[0]))
static const char *OCCUPATIONS[] = {"salaried", "self-employed", "business", "retired", "professional"};
static const char *MERCHANTS[] = {"Sunrise Mutual Fund SIP", "Metro Power Distribution", "Skyline Broadband",
                                  "Lotus Life Insurance", "CityGas Utilities", "StreamBox OTT"};
static const char *PAYEES[] = {"Ravi Traders", "Green Leaf Stores", "Asha Kumar", "Nirmal Builders",
                               "Om Medicals", "Sai Tutorials"};

static int pick(Rng *rng, int n) { return (int)(rng_next_u64(rng) % (uint64_t)n); }
static int64_t range64(Rng *rng, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next_u64(rng) % (uint64_t)(hi - lo + 1));
}
static void date_text(int64_t days, char *out) { bank_date_format(days, out); }

static int seed_terms(sqlite3 *db, FimiError *err) {
  RUN_ONCE("INSERT INTO bank_info VALUES ('name', ?), ('notice', ?), ('currency', 'INR'), ('gst_percent', '18')", "ss",
      BANK_NAME,
      "Navadhan Bank is a fictional Indian retail bank invented for fimi; every customer, account and term is "
      "synthetic.");
  RUN_ONCE("INSERT INTO clock VALUES (1, ?)", "s", BANK_DEFAULT_TODAY);
  static const struct {
    const char *name, *prefix;
    int width;
  } counters[] = {{"txn", "TXN", 8},  {"account", "SB91", 8}, {"beneficiary", "BEN", 6}, {"transfer", "TRF", 8},
                  {"dispute", "DSP", 6}, {"fd", "FD", 8},     {"rd", "RD", 8},           {"loan", "LN", 8},
                  {"card", "CRD", 6},  {"chequebook", "CQB", 6}, {"request", "SR", 7},  {"claim", "CLM", 6},
                  {"enrolment", "ENR", 6}, {"form", "TXF", 6}};
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
    RUN_ONCE("INSERT INTO counters VALUES (?, ?, ?, 1001)", "ssi", counters[i].name, counters[i].prefix, counters[i].width);
  // FD slabs in days (terms of the synthetic bank); RD uses the same table.
  static const struct {
    int lo, hi, bp;
    const char *label;
  } fd[] = {{7, 45, 350, "7-45 days"},          {46, 179, 500, "46-179 days"},
            {180, 364, 600, "180-364 days"},    {365, 729, 680, "1 year to under 2 years"},
            {730, 1094, 700, "2 years to under 3 years"}, {1095, 1825, 675, "3 years to 5 years"},
            {1826, 3650, 650, "over 5 years to 10 years"}};
  for (size_t i = 0; i < sizeof fd / sizeof fd[0]; i++)
    RUN_ONCE("INSERT INTO interest_rates VALUES ('fd', ?, ?, 'days', ?, 50, ?)", "iiis", fd[i].lo, fd[i].hi, fd[i].bp,
        fd[i].label);
  RUN_ONCE("INSERT INTO interest_rates VALUES ('savings', 0, 100000000, 'balance_paise', 300, 0, 'balance up to Rs 10,00,000'),"
      " ('savings', 100000001, 9000000000000000, 'balance_paise', 350, 0, 'part of balance above Rs 10,00,000'),"
      " ('personal_loan', 800, 900, 'credit_score', 1050, 0, 'credit score 800 and above'),"
      " ('personal_loan', 750, 799, 'credit_score', 1200, 0, 'credit score 750-799'),"
      " ('personal_loan', 700, 749, 'credit_score', 1400, 0, 'credit score 700-749'),"
      " ('personal_loan', 650, 699, 'credit_score', 1600, 0, 'credit score 650-699'),"
      " ('home_loan', 0, 0, 'floating', 850, 0, 'floating rate, all amounts'),"
      " ('gold_loan', 0, 0, 'fixed', 925, 0, 'up to 75% of the gold value, tenure up to 12 months')",
      "");
  // Service charges: flat amount and/or percentage with min/max, GST on top.
  RUN_ONCE("INSERT INTO service_charges VALUES"
      " ('imps_upto_1000', 'IMPS transfer up to Rs 1,000', 0, 0, 0, 0, 0),"
      " ('imps_upto_100000', 'IMPS transfer above Rs 1,000 up to Rs 1,00,000', 500, 0, 0, 0, 1),"
      " ('imps_above_100000', 'IMPS transfer above Rs 1,00,000 up to Rs 5,00,000', 1500, 0, 0, 0, 1),"
      " ('neft', 'NEFT transfer (online)', 0, 0, 0, 0, 0),"
      " ('rtgs', 'RTGS transfer (online, minimum Rs 2,00,000)', 0, 0, 0, 0, 0),"
      " ('upi', 'UPI transfer', 0, 0, 0, 0, 0),"
      " ('debit_card_reissue', 'Debit card reissue', 20000, 0, 0, 0, 1),"
      " ('credit_card_reissue', 'Credit card reissue', 0, 0, 0, 0, 0),"
      " ('card_block', 'Card blocking', 0, 0, 0, 0, 0),"
      " ('cheque_leaf', 'Cheque leaf beyond 25 free leaves per financial year (savings)', 300, 0, 0, 0, 1),"
      " ('stop_payment', 'Stop payment, per instrument', 10000, 0, 0, 0, 1),"
      " ('min_balance_shortfall', 'Average monthly balance below Rs 10,000, per month', 25000, 0, 0, 0, 1),"
      " ('personal_loan_processing', 'Personal loan processing fee 1.5% (min Rs 1,000, max Rs 10,000)', 0, 150,"
      "   100000, 1000000, 1),"
      " ('home_loan_processing', 'Home loan processing fee 0.50% (max Rs 10,000)', 0, 50, 0, 1000000, 1),"
      " ('gold_loan_processing', 'Gold loan processing fee 0.25% (min Rs 250)', 0, 25, 25000, 0, 1),"
      " ('personal_loan_prepayment', 'Personal loan foreclosure/part-prepayment 3% of principal prepaid', 0,"
      "   300, 0, 0, 1),"
      " ('home_loan_prepayment', 'Home loan (floating, individuals) prepayment/foreclosure', 0, 0, 0, 0, 0),"
      " ('fd_premature_penalty', 'FD/RD premature closure: rate for the period run minus 1.00%', 0, 100, 0, 0, 0)",
      "");
  RUN_ONCE("INSERT INTO gold_rates VALUES ('2026-01-13', 695000), ('2026-01-14', 698500), (?, 700000)", "s",
      BANK_DEFAULT_TODAY);
  RUN_ONCE("INSERT INTO schemes VALUES"
      " ('pmjjby', 'Pradhan Mantri Jeevan Jyoti Bima Yojana', 18, 50, 43600, 20000000,"
      "  'Life cover of Rs 2,00,000 for savings account holders aged 18-50; premium Rs 436 a year by auto-debit.'),"
      " ('pmsby', 'Pradhan Mantri Suraksha Bima Yojana', 18, 70, 2000, 20000000,"
      "  'Accident cover of Rs 2,00,000 for savings account holders aged 18-70; premium Rs 20 a year by auto-debit.'),"
      " ('apy', 'Atal Pension Yojana', 18, 40, 0, 0,"
      "  'Guaranteed pension of Rs 1,000-5,000 a month from age 60 for savings account holders aged 18-40 who are not"
      " income-tax payers; monthly contribution by auto-debit.')",
      "");
  return 0;
}

// Kinds of seeded ids, each numbered on its own in populations above the
// default size (per_kind below).
static const char *const ID_PREFIXES[] = {"TXN", "SB", "CA", "CQB", "FD", "RD", "LN",
                                          "CRD", "MND", "BEN", "POL", "ENR", "SR", "TXF"};
#define NUM_ID_PREFIXES ((int)(sizeof ID_PREFIXES / sizeof ID_PREFIXES[0]))

typedef struct {
  Rng *rng;
  int64_t today;
  int serial;      // makes every generated id unique (the default layout)
  int per_kind;    // 1: one serial per id prefix (populations above the default)
  int64_t kind_serial[NUM_ID_PREFIXES];
  int overflow;    // a per-kind serial outgrew its digits
  BankSqlCache sql;  // the per-customer inserts, prepared once
} Seeder;

static int prefix_index(const char *prefix) {
  for (int i = 0; i < NUM_ID_PREFIXES; i++)
    if (strcmp(ID_PREFIXES[i], prefix) == 0) return i;
  return -1;
}

// Seeded ids: `digits` digits that never start with 0, so they never collide
// with counter-made ids (those start with zeros, see env/bank/db.c).
// Default layout (up to 30 customers): a random leading part and one serial
// shared by all kinds in the last 5 digits. Per-kind layout: a random leading
// digit 1-8 (never 9, so no SB9... account id meets the SB91 counter) and the
// kind's own serial in the other digits-1 digits.
static void next_id(Seeder *s, const char *prefix, int digits, char *out) {
  int64_t lo = 1;
  if (s->per_kind) {
    int k = prefix_index(prefix);
    int64_t serial = k >= 0 ? ++s->kind_serial[k] : 0;
    for (int i = 0; i < digits - 1; i++) lo *= 10;
    if (k < 0 || serial >= lo) s->overflow = 1;
    int64_t value = range64(s->rng, 1, 8) * lo + serial % lo;
    sprintf(out, "%s%0*lld", prefix, digits, (long long)value);
    return;
  }
  s->serial++;
  for (int i = 0; i < digits - 6; i++) lo *= 10;
  int64_t value = range64(s->rng, lo, lo * 10 - 1) * 100000 + s->serial;
  sprintf(out, "%s%0*lld", prefix, digits, (long long)value);
}

// Transactions of the last ~90 days, running forward from an opening balance
// so balance_after is consistent; returns the closing balance.
static int seed_transactions(sqlite3 *db, Seeder *s, const char *account_id, int64_t opening, int64_t income,
                             int64_t *closing, FimiError *err) {
  static const char *debits[] = {"UPI/Grocery store", "ATM withdrawal", "POS/Fuel station", "Electricity bill",
                                 "UPI/Restaurant", "Online shopping", "Mobile recharge", "Insurance premium"};
  int count = (int)range64(s->rng, 8, 14);
  int64_t balance = opening;
  for (int i = 0; i < count; i++) {
    int64_t day = s->today - 90 + (int64_t)i * 90 / count + range64(s->rng, 0, 5);
    if (day >= s->today) day = s->today - 1;
    char date[11], txn_id[24];
    date_text(day, date);
    next_id(s, "TXN", 8, txn_id);
    int credit = (i % 5 == 0) || balance < 200000;
    int64_t amount;
    const char *description, *channel;
    if (credit) {
      amount = i % 5 == 0 ? income : range64(s->rng, 1000, 25000) * 100;
      description = i % 5 == 0 ? "Salary/Business credit" : "UPI/Received";
      channel = i % 5 == 0 ? "neft" : "upi";
      balance += amount;
    } else {
      int64_t cap = balance / 4 > 100 ? balance / 4 : 100;
      amount = range64(s->rng, 100, cap);
      amount -= amount % 100;
      if (amount <= 0) amount = 100;
      int k = pick(s->rng, 8);
      description = debits[k];
      channel = k == 1 ? "atm" : (k == 2 ? "pos" : (k == 5 ? "card_online" : "upi"));
      balance -= amount;
    }
    RUN("INSERT INTO transactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)", "ssssllss", txn_id, account_id, date,
        credit ? "credit" : "debit", amount, balance, channel, description);
  }
  *closing = balance;
  return 0;
}

static int seed_account(sqlite3 *db, Seeder *s, const char *customer_id, const char *type, const char *status,
                        int city, int64_t income, int64_t opened, char *account_id, FimiError *err) {
  next_id(s, type[0] == 's' ? "SB" : "CA", 10, account_id);
  int64_t opening = range64(s->rng, 5000, 1500000) * 100;
  int64_t closing = opening;
  if (seed_transactions(db, s, account_id, opening, income, &closing, err) != 0) return -1;
  char opened_text[11];
  date_text(opened, opened_text);
  RUN("INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", "ssssls" "sss", account_id, customer_id, type,
      status, closing, opened_text, CITIES[city].branch, CITIES[city].ifsc, "Spouse");
  return 0;
}

static int seed_cheques(sqlite3 *db, Seeder *s, const char *customer_id, const char *account_id, FimiError *err) {
  char request_id[24], date[11], fy[8];
  next_id(s, "CQB", 6, request_id);
  int64_t requested = s->today - range64(s->rng, 30, 200);
  date_text(requested, date);
  bank_financial_year(requested, fy);
  int first = (int)range64(s->rng, 100, 899) * 1000 + 1;
  RUN("INSERT INTO cheque_books VALUES (?, ?, ?, 25, ?, ?, ?, 0, 'delivered')", "sssiss", request_id, customer_id,
      account_id, first, date, fy);
  for (int i = 0; i < 25; i++) {
    const char *status = i < 3 ? "cleared" : (i < 5 ? "issued" : "unused");
    int64_t amount = i < 5 ? range64(s->rng, 20, 80000) * 100 : 0;
    char issue[11];
    date_text(requested + 5 + i, issue);
    RUN("INSERT INTO cheques VALUES (?, ?, ?, ?, ?, ?, 0, NULL)", "sisl" "ss", account_id, first + i, status,
        amount, i < 5 ? PAYEES[pick(s->rng, 6)] : NULL, i < 5 ? issue : NULL);
  }
  // amount 0 with status unused means "no amount": store NULL instead.
  RUN("UPDATE cheques SET amount_paise = NULL WHERE account_id = ? AND status = 'unused'", "s", account_id);
  return 0;
}

static int seed_deposits(sqlite3 *db, Seeder *s, const char *customer_id, const char *account_id, int senior,
                         FimiError *err) {
  static const int months[] = {6, 12, 24, 36, 60};
  static const int rates[] = {600, 680, 700, 675, 675};
  int n = (int)range64(s->rng, 0, 2);
  char fy[8], prev_fy[8];
  bank_financial_year(s->today, fy);
  bank_financial_year(s->today - 365, prev_fy);
  for (int i = 0; i < n; i++) {
    char fd_id[24], start_text[11], maturity_text[11];
    next_id(s, "FD", 8, fd_id);
    int k = pick(s->rng, 5);
    int64_t start = s->today - range64(s->rng, 20, 160);
    int64_t maturity = bank_add_months(start, months[k]);
    int rate = rates[k] + (senior ? 50 : 0);
    int64_t principal = range64(s->rng, 10, 500) * 1000 * 100;
    int days = bank_nominal_days(months[k]);
    int64_t maturity_amount = principal + bank_fd_interest(principal, rate, days);
    date_text(start, start_text);
    date_text(maturity, maturity_text);
    RUN("INSERT INTO fixed_deposits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', NULL, NULL)", "sssliii" "ssl",
        fd_id, customer_id, account_id, principal, rate, months[k], days, start_text, maturity_text, maturity_amount);
    int64_t interest = bank_fd_interest(principal, rate, 90);
    int64_t yearly = interest * 4;
    int threshold = senior ? 10000000 : 5000000;
    RUN("INSERT INTO tds_records VALUES (?, ?, ?, ?, ?)", "sssll", customer_id, fy, fd_id, interest,
        yearly > threshold ? interest / 10 : 0);
    RUN("INSERT INTO tds_records VALUES (?, ?, ?, ?, ?)", "sssll", customer_id, prev_fy, fd_id, interest / 2,
        yearly > threshold ? interest / 20 : 0);
  }
  if (pick(s->rng, 3) == 0) {
    char rd_id[24], start_text[11], maturity_text[11];
    next_id(s, "RD", 8, rd_id);
    int tenure = 12 * (int)range64(s->rng, 1, 5);
    int paid = (int)range64(s->rng, 2, 10);
    int64_t start = bank_add_months(s->today, -paid) + 1;
    int rate = (tenure >= 36 ? 675 : tenure >= 24 ? 700 : 680) + (senior ? 50 : 0);
    int64_t monthly = range64(s->rng, 5, 200) * 100 * 100;
    int64_t maturity = monthly * tenure + bank_rd_interest(monthly, rate, tenure, tenure);
    date_text(start, start_text);
    date_text(bank_add_months(start, tenure), maturity_text);
    RUN("INSERT INTO recurring_deposits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', NULL, NULL)",
        "sssliis" "sil", rd_id, customer_id, account_id, monthly, tenure, rate, start_text, maturity_text, paid,
        maturity);
  }
  return 0;
}

static int seed_loans(sqlite3 *db, Seeder *s, const char *customer_id, const char *account_id, int credit_score,
                      FimiError *err) {
  int roll = pick(s->rng, 10);
  if (roll >= 5) return 0;
  char loan_id[24], start_text[11];
  next_id(s, "LN", 8, loan_id);
  const char *type = roll < 3 ? "personal" : (roll < 4 ? "home" : "gold");
  int tenure = type[0] == 'p' ? 12 * (int)range64(s->rng, 2, 5) : (type[0] == 'h' ? 240 : 12);
  int rate = type[0] == 'h' ? 850 : (type[0] == 'g' ? 925 : (credit_score >= 800 ? 1050 : credit_score >= 750 ? 1200 : 1400));
  int64_t principal = type[0] == 'h' ? range64(s->rng, 20, 80) * 100000 * 100
                                     : range64(s->rng, 1, 10) * 50000 * 100;
  int paid = (int)range64(s->rng, 1, tenure < 12 ? tenure - 1 : 11);
  int64_t emi = bank_emi(principal, rate, tenure);
  // Outstanding after `paid` EMIs on the reducing balance.
  int64_t outstanding = principal;
  for (int i = 0; i < paid; i++) outstanding -= emi - bank_percent_bp(outstanding, rate) / 12;
  date_text(bank_add_months(s->today, -paid), start_text);
  int gold_mg = type[0] == 'g' ? (int)range64(s->rng, 10, 80) * 1000 : 0;
  RUN("INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', NULL, NULL, 0, NULL)",
      "ssssll" "iilis" "s", loan_id, customer_id, type, type[0] == 'h' ? "floating" : "fixed", principal, outstanding,
      rate, tenure, emi, paid, start_text, account_id);
  if (gold_mg) RUN("UPDATE loans SET gold_weight_mg = ?, gold_purity_karat = 22 WHERE loan_id = ?", "is", gold_mg, loan_id);
  return 0;
}

static int seed_cards(sqlite3 *db, Seeder *s, const char *customer_id, const char *account_id, int with_credit,
                      FimiError *err) {
  for (int c = 0; c < 1 + with_credit; c++) {
    char card_id[24], last4[8], expiry[8], issued[11];
    next_id(s, "CRD", 6, card_id);
    sprintf(last4, "%04d", (int)range64(s->rng, 0, 9999));
    sprintf(expiry, "%02d/%02d", (int)range64(s->rng, 1, 12), (int)range64(s->rng, 27, 31));
    date_text(s->today - range64(s->rng, 100, 900), issued);
    int credit = c == 1;
    const char *status = pick(s->rng, 8) == 0 ? "blocked" : "active";
    RUN("INSERT INTO cards VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 1, 1, ?, ?, NULL, ?)",
        "ssssss" "sss" "llll" "iis",
        card_id, customer_id, account_id, credit ? "credit" : "debit", pick(s->rng, 2) ? "RuPay" : "Visa", last4,
        expiry, status, status[0] == 'b' ? "temporary" : NULL, (int64_t)(credit ? 2000000 : 4000000),
        (int64_t)(credit ? 10000000 : 20000000), (int64_t)(credit ? 10000000 : 10000000),
        (int64_t)(credit ? range64(s->rng, 5, 30) * 1000000 : 0), pick(s->rng, 2), pick(s->rng, 3) == 0, issued);
  }
  return 0;
}

static int seed_misc(sqlite3 *db, Seeder *s, const char *customer_id, const char *account_id, int age,
                     FimiError *err) {
  char id[24], date[11];
  int mandates = (int)range64(s->rng, 0, 2);
  for (int i = 0; i < mandates; i++) {
    next_id(s, "MND", 6, id);
    date_text(s->today - range64(s->rng, 30, 600), date);
    RUN("INSERT INTO mandates VALUES (?, ?, ?, ?, ?, ?, 'monthly', ?, 'active', NULL)", "sssssls", id, customer_id,
        account_id, pick(s->rng, 2) ? "nach" : "upi_autopay", MERCHANTS[pick(s->rng, 6)],
        range64(s->rng, 5, 250) * 10000, date);
  }
  int beneficiaries = (int)range64(s->rng, 0, 3);
  for (int i = 0; i < beneficiaries; i++) {
    char account_number[24];
    next_id(s, "BEN", 6, id);
    sprintf(account_number, "%012lld", (long long)range64(s->rng, 100000000000LL, 999999999999LL));
    // Roughly one in five beneficiaries was added today: still cooling.
    date_text(pick(s->rng, 5) == 0 ? s->today : s->today - range64(s->rng, 2, 400), date);
    const char *ifsc[] = {"HDFC0001234", "SBIN0004567", "ICIC0007890", "UTIB0002345"};
    RUN("INSERT INTO beneficiaries VALUES (?, ?, ?, ?, ?, NULL, ?, 'active')", "ssssss", id, customer_id,
        PAYEES[pick(s->rng, 6)], account_number, ifsc[pick(s->rng, 4)], date);
  }
  if (pick(s->rng, 2) == 0) {
    static const char *types[] = {"health", "life", "motor", "home"};
    static const char *insurers[] = {"Navadhan General Insurance (synthetic partner)",
                                     "Navadhan Life Assurance (synthetic partner)"};
    next_id(s, "POL", 8, id);
    int k = pick(s->rng, 4);
    int64_t start = s->today - range64(s->rng, 30, 300);
    char start_text[11], end_text[11];
    date_text(start, start_text);
    date_text(bank_add_months(start, 12) - 1, end_text);
    RUN("INSERT INTO insurance_policies VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', 'Spouse')", "ssssll" "ss", id,
        customer_id, types[k], insurers[k == 1], range64(s->rng, 2, 50) * 100000 * 100,
        range64(s->rng, 5, 40) * 1000 * 100, start_text, end_text);
  }
  if (age >= 18 && age <= 50 && pick(s->rng, 3) == 0) {
    next_id(s, "ENR", 6, id);
    date_text(s->today - range64(s->rng, 30, 700), date);
    RUN("INSERT INTO scheme_enrolments VALUES (?, ?, 'pmsby', ?, ?, 'active', NULL)", "ssss", id, customer_id,
        account_id, date);
  }
  if (pick(s->rng, 4) == 0) {
    static const char *categories[] = {"address_update", "card_delivery", "statement", "complaint"};
    next_id(s, "SR", 7, id);
    date_text(s->today - range64(s->rng, 1, 20), date);
    RUN("INSERT INTO service_requests VALUES (?, ?, ?, ?, 'Raised at branch', ?, ?, NULL)", "ssssss", id, customer_id,
        categories[pick(s->rng, 4)], account_id, date, pick(s->rng, 2) ? "open" : "in_progress");
  }
  return 0;
}

static int seed_customer(sqlite3 *db, Seeder *s, int index, FimiError *err) {
  char customer_id[16], dob[11], mobile[16], email[64], name[64], address[96], pan[16], aadhaar[8];
  char last_kyc[11], due[11], since[11];
  sprintf(customer_id, "NVC%05d", 10001 + index);
  int first_index = pick(s->rng, 30);
  const char *first = FIRST_NAMES[first_index], *last = LAST_NAMES[pick(s->rng, 20)];
  snprintf(name, sizeof name, "%s %s", first, last);
  // Every fourth customer is a senior citizen (60+).
  int age = index % 4 == 1 ? (int)range64(s->rng, 60, 78) : (int)range64(s->rng, 21, 58);
  int64_t birth = bank_add_months(s->today, -12 * age) - range64(s->rng, 1, 360);
  age = bank_age_years(birth, s->today);
  date_text(birth, dob);
  sprintf(mobile, "%lld", (long long)range64(s->rng, 6000000000LL, 9999999999LL));
  snprintf(email, sizeof email, "%c%s.%d@example.in", first[0] + 32 * (first[0] < 'a'), last, index + 11);
  for (char *p = email; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p += 32;
  int city = pick(s->rng, NUM_CITIES);
  snprintf(address, sizeof address, "%d, %s Lane", (int)range64(s->rng, 1, 400), LAST_NAMES[pick(s->rng, 20)]);
  int has_pan = pick(s->rng, 10) != 0;
  sprintf(pan, "%c%c%cP%c%04d%c", 'A' + pick(s->rng, 26), 'A' + pick(s->rng, 26), 'A' + pick(s->rng, 26), last[0],
          (int)range64(s->rng, 1000, 9999), 'A' + pick(s->rng, 26));
  sprintf(aadhaar, "%04d", (int)range64(s->rng, 0, 9999));
  int r = pick(s->rng, 10);
  const char *risk = r < 6 ? "low" : (r < 9 ? "medium" : "high");
  int period_years = risk[0] == 'h' ? 2 : (risk[0] == 'm' ? 8 : 10);
  // Every seventh customer's re-KYC is overdue; a few are pending.
  int64_t kyc = index % 7 == 3 ? bank_add_months(s->today, -12 * period_years) - range64(s->rng, 10, 200)
                               : s->today - range64(s->rng, 30, 365 * period_years - 30);
  int64_t due_days = bank_add_months(kyc, 12 * period_years);
  const char *status = due_days < s->today ? "expired" : (index % 13 == 6 ? "pending" : "verified");
  date_text(kyc, last_kyc);
  date_text(due_days, due);
  date_text(s->today - range64(s->rng, 400, 5000), since);
  int credit_score = (int)range64(s->rng, 600, 860);
  int64_t income = range64(s->rng, 25, 300) * 1000 * 100;
  const char *occupation = age >= 60 ? "retired" : OCCUPATIONS[pick(s->rng, 4)];
  int tax_payer = income * 12 > 70000000;
  RUN("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      "sssssssss" "ssssss" "ilsis",
      customer_id, name, dob, first_index % 2 ? "female" : "male", mobile, email, address, CITIES[city].city,
      CITIES[city].pincode, has_pan ? pan : NULL, aadhaar, status, risk, last_kyc, due, credit_score, income,
      occupation, tax_payer, since);

  char savings[24], second[24];
  int64_t opened = s->today - range64(s->rng, 200, 3000);
  if (seed_account(db, s, customer_id, "savings", "active", city, income, opened, savings, err) != 0) return -1;
  if (pick(s->rng, 3) == 0) {
    const char *type = pick(s->rng, 2) ? "current" : "savings";
    const char *acct_status = index % 11 == 5 ? "dormant" : "active";
    if (seed_account(db, s, customer_id, type, acct_status, city, income, opened + 30, second, err) != 0) return -1;
  }
  if (seed_cheques(db, s, customer_id, savings, err) != 0) return -1;
  if (seed_deposits(db, s, customer_id, savings, age >= 60, err) != 0) return -1;
  if (seed_loans(db, s, customer_id, savings, credit_score, err) != 0) return -1;
  if (seed_cards(db, s, customer_id, savings, pick(s->rng, 5) < 2, err) != 0) return -1;
  if (seed_misc(db, s, customer_id, savings, age, err) != 0) return -1;
  if (pick(s->rng, 6) == 0 && has_pan) {
    char form_id[24], fy[8], date[11];
    next_id(s, "TXF", 6, form_id);
    bank_financial_year(s->today, fy);
    date_text(s->today - range64(s->rng, 10, 200), date);
    RUN("INSERT INTO tax_forms VALUES (?, ?, ?, ?, ?, ?, 'accepted')", "sssssl", form_id, customer_id, fy,
        age >= 60 ? "15H" : "15G", date, range64(s->rng, 1, 2) * 10000000);
  }
  return 0;
}

int bank_seed_population(sqlite3 *db, uint64_t seed, int num_customers, FimiError *err) {
  if (seed_terms(db, err) != 0) return -1;
  Rng rng;
  rng_seed(&rng, seed);
  Seeder s = {.rng = &rng, .per_kind = num_customers > BANK_DEFAULT_CUSTOMERS};
  if (bank_date_parse(BANK_DEFAULT_TODAY, &s.today) != 0) return fimi_fail(err, "bad default date");
  if (num_customers < 1 || num_customers > BANK_MAX_CUSTOMERS)
    return fimi_fail(err, "bank database: %d customers; the bank holds 1 to %d", num_customers, BANK_MAX_CUSTOMERS);
  int rc = 0;
  for (int i = 0; i < num_customers && rc == 0; i++) rc = seed_customer(db, &s, i, err);
  bank_sql_cache_free(&s.sql);
  if (rc != 0) return -1;
  if (s.overflow) return fimi_fail(err, "bank database: %d customers outgrow a seeded id's digits", num_customers);
  return 0;
}
