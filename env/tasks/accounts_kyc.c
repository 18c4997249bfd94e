// env/tasks/accounts_kyc.c: task families of the "accounts & KYC" use case: KYC
// status and re-KYC, address/e-mail updates, statements, own-account and
// beneficiary transfers (NEFT, IMPS with its charge), limit and KYC refusals,
// disputes of unauthorised debits, other customers' and other banks' accounts
// (OUT_OF_SCOPE ending), beneficiary clean-up. Each generator picks a real
// customer from the seeded image so every gold action succeeds.
// Also the oldest families of this use case, written with the task_gen_*
// helpers directly: balance_enquiry and imps_over_limit.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/family_helpers.h"

// Customers whose KYC is current: transfers, deposits and enrolments need it.
#define KYC_OK "c.kyc_status = 'verified' AND c.rekyc_due_date >= (SELECT today FROM clock)"

static const char *const PERSONAS[] = {
    "salaried professional calling during a lunch break", "small shop owner, busy and brief",
    "retired teacher, polite and careful", "young IT employee who prefers quick answers",
    "homemaker managing the family's accounts", "college student with a first bank account"};
#define NP ((int)(sizeof PERSONAS / sizeof PERSONAS[0]))

// ---- kyc_status_check (happy): when is my re-KYC due? -----------------------
static int gen_kyc_status_check(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "kyc_status_check", seed);
  char c[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers ORDER BY customer_id", 1, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Hello, I got a message about KYC. Can you tell me when my re-KYC is due?",
                 "Hi, KYC ke baare mein SMS aaya tha. Mera re-KYC kab due hai, bata sakte ho?",
                 "kyc sms... re-kyc due date?"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_kyc_status", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "rekyc_due_date", s, "rekyc_due_date", err));
  FAM_TRY(task_add_communicate(t, "kyc_status", s, "kyc_status", err));
  char due[32];
  FAM_TRY(fam_replay_text(ctx, t, s, "rekyc_due_date", due, sizeof due, err));
  FAM_TRY(fam_assert(t, err, "The agent tells the customer the re-KYC due date.", TASK_RULE_MENTIONS_ANY, due, NULL));
  FAM_TRY(fam_assert(t, err, "The agent does not change anything.", TASK_RULE_NOT_CALLED, "submit_rekyc", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rekyc_update (seq): check status, then complete re-KYC -----------------
static int gen_rekyc_update(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rekyc_update", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, aadhaar_last4 FROM customers WHERE kyc_status IN ('expired', 'pending')"
                 " OR julianday(rekyc_due_date) - julianday((SELECT today FROM clock)) <= 90 ORDER BY customer_id",
                 2, c, err));
  static const char *const docs[] = {"aadhaar", "passport", "voter_id", "driving_licence"};
  const char *doc = fam_choose(&rng, docs, 4);
  char last4[8];
  if (strcmp(doc, "aadhaar") == 0) snprintf(last4, sizeof last4, "%.4s", c[1]);
  else snprintf(last4, sizeof last4, "%04d", (int)task_gen_range(&rng, 1000, 9999));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "My account says KYC needs updating. I want to finish re-KYC today.",
                 "Mera KYC update karna hai, re-KYC aaj hi complete karwa do please.",
                 "re-kyc pending. do it now"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "document_type", doc, "document", "id proof", "OVD", NULL));
  FAM_TRY(fam_field(t, err, "document_last4", last4, "last 4", "last four", "digits", NULL));
  FAM_TRY(fam_gold(t, err, "get_kyc_status", "", 0, "{}"));
  int s = fam_gold(t, err, "submit_rekyc", "document_type,document_last4", 0,
                  "{\"document_type\":\"%s\",\"document_last4\":\"%s\"}", doc, last4);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "new re-KYC due date", s, "rekyc_due_date", err));
  FAM_TRY(fam_assert(t, err, "The agent checks the KYC status before submitting re-KYC.", TASK_RULE_CALLED_BEFORE,
                   "get_kyc_status", "submit_rekyc", NULL));
  FAM_TRY(fam_variant(t, err, doc));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- address_change (happy): new address with proof ------------------------
static int gen_address_change(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "address_change", seed);
  static const char *const cities[][2] = {{"Mumbai", "400050"}, {"Bengaluru", "560034"}, {"Chennai", "600020"},
                                          {"Pune", "411038"},   {"Jaipur", "302001"},    {"Kochi", "682016"}};
  static const char *const streets[] = {"Gandhi Nagar", "Station Road", "Lake View Colony", "Temple Street",
                                        "Nehru Marg", "Sector 4"};
  static const char *const proofs[] = {"aadhaar", "passport", "utility_bill", "driving_licence"};
  char c[1][TASK_GEN_COL_MAX], line[96];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers ORDER BY customer_id", 1, c, err));
  int k = (int)task_gen_range(&rng, 0, 5);
  snprintf(line, sizeof line, "%d, %s", (int)task_gen_range(&rng, 1, 250), fam_choose(&rng, streets, 6));
  const char *proof = fam_choose(&rng, proofs, 4);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I have moved to %s and need my address changed with the bank.",
                 "Main %s shift ho gaya hoon, bank mein address change karna hai.", "new address. %s. update pls",
                 cities[k][0]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "address_line", line, "address", "street", "house", NULL));
  FAM_TRY(fam_field(t, err, "city", cities[k][0], NULL));
  FAM_TRY(fam_field(t, err, "pincode", cities[k][1], "pin", "PIN code", "postal", NULL));
  FAM_TRY(fam_field(t, err, "proof_document", proof, "proof", "document", NULL));
  FAM_TRY(fam_gold(t, err, "update_address", "address_line,city,pincode,proof_document", 0,
                 "{\"address_line\":\"%s\",\"city\":\"%s\",\"pincode\":\"%s\",\"proof_document\":\"%s\"}", line,
                 cities[k][0], cities[k][1], proof));
  FAM_TRY(fam_assert(t, err, "The agent updates the address.", TASK_RULE_CALLED, "update_address", NULL));
  FAM_TRY(fam_variant(t, err, proof));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- email_update (happy): new e-mail address --------------------------------
static int gen_email_update(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "email_update", seed);
  static const char *const hosts[] = {"example.in", "mail.example.in", "example.com"};
  char c[2][TASK_GEN_COL_MAX], email[256];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id, lower(replace(name, ' ', '.')) FROM customers ORDER BY customer_id",
                 2, c, err));
  snprintf(email, sizeof email, "%s%d@%s", c[1], (int)task_gen_range(&rng, 1, 99), fam_choose(&rng, hosts, 3));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I changed my e-mail address. Please update it so statements reach me.",
                 "Mera email ID badal gaya hai, naya wala update kar do.", "email change"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "email", email, "e-mail", "mail id", NULL));
  FAM_TRY(fam_gold(t, err, "update_contact", "email", 0, "{\"email\":\"%s\"}", email));
  FAM_TRY(fam_assert(t, err, "The agent does not change the mobile number.", TASK_RULE_MENTIONS_NONE, "mobile updated",
                   NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- statement_email (happy): statement for a quarter by e-mail --------------
static int gen_statement_email(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "statement_email", seed);
  static const char *const periods[][3] = {{"2025-10-01", "2025-12-31", "October to December"},
                                           {"2025-07-01", "2025-09-30", "July to September"},
                                           {"2025-04-01", "2025-12-31", "April to December"},
                                           {"2026-01-01", "2026-01-14", "this month so far"}};
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, a.account_id FROM accounts a WHERE a.status = 'active'"
                 " ORDER BY a.account_id",
                 2, c, err));
  int k = (int)task_gen_range(&rng, 0, 3);
  const char *delivery = task_gen_range(&rng, 0, 3) ? "email" : "branch";
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need an account statement for %s, for a visa application.",
                 "Mujhe %s ka statement chahiye, visa ke liye.", "statement %s needed", periods[k][2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_id", c[1], "account number", "which account", NULL));
  FAM_TRY(fam_field(t, err, "from_date", periods[k][0], "from", "start date", "period", NULL));
  FAM_TRY(fam_field(t, err, "to_date", periods[k][1], "to", "end date", "till", NULL));
  FAM_TRY(fam_field(t, err, "delivery", delivery, "email or branch", "send", "deliver", NULL));
  FAM_TRY(fam_gold(t, err, "request_statement", "account_id,from_date,to_date,delivery", 0,
                 "{\"account_id\":\"%s\",\"from_date\":\"%s\",\"to_date\":\"%s\",\"delivery\":\"%s\"}", c[1],
                 periods[k][0], periods[k][1], delivery));
  FAM_TRY(fam_assert(t, err, "The agent requests the statement.", TASK_RULE_CALLED, "request_statement", NULL));
  FAM_TRY(fam_variant(t, err, delivery));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- transfer_kyc_expired (edge): KYC expired, so no transfer -------------------
static int gen_transfer_kyc_expired(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "transfer_kyc_expired", seed);
  char c[1][TASK_GEN_COL_MAX], amount[32];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers WHERE kyc_status = 'expired' ORDER BY customer_id", 1, c,
                 err));
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 5, 90) * 1000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need to send Rs %s to my brother by NEFT right now.",
                 "Bhai ko Rs %s NEFT karna hai abhi, urgent hai.", "neft %s to brother. urgent", amount));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount, "how much", NULL));
  int s = fam_gold(t, err, "get_kyc_status", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "re-KYC due date that has passed", s, "rekyc_due_date", err));
  FAM_TRY(fam_assert(t, err, "The agent does not make the transfer while KYC is expired.", TASK_RULE_NOT_CALLED,
                   "transfer_funds", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains that re-KYC must be completed first.", TASK_RULE_MENTIONS_ANY, "KYC",
                   NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- own_accounts_sweep (seq, 4 steps): move money between own accounts -------
static int gen_own_accounts_sweep(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "own_accounts_sweep", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, a.account_id, b.account_id, a.balance_paise, a.account_type FROM accounts a"
                 " JOIN accounts b ON a.customer_id = b.customer_id AND a.account_id <> b.account_id"
                 " WHERE a.status = 'active' AND b.status = 'active' AND a.balance_paise >= 200000"
                 " ORDER BY a.account_id, b.account_id",
                 5, c, err));
  int64_t max_rupees = atoll(c[3]) / 100 / 2;
  if (max_rupees > 200000) max_rupees = 200000;
  int64_t amount = task_gen_range(&rng, 1, max_rupees / 500 > 1 ? max_rupees / 500 : 1) * 500;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I want to move Rs %s from account %s to my other account %s, and then know both balances.",
                 "Rs %s ek account %s se doosre %s mein daalna hai, phir dono ka balance batana.",
                 "move %s. %s -> %s. balances after", amount_text, c[1], c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "transfer_between_own_accounts", "from_account,to_account,amount", 0,
                 "{\"from_account\":\"%s\",\"to_account\":\"%s\",\"amount\":%lld}", c[1], c[2], (long long)amount));
  int s = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\",\"%s\"]}", c[1], c[2]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "balance of the debited account", s, "balances.0.balance", err));
  FAM_TRY(task_add_communicate(t, "balance of the credited account", s, "balances.1.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent moves the money before reading the new balances.", TASK_RULE_CALLED_BEFORE,
                   "transfer_between_own_accounts", "get_account_balance", NULL));
  FAM_TRY(fam_variant(t, err, c[4]));  // the debited account's product
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- new_payee_neft (seq, 4 steps): add a payee, NEFT within the cooling cap ---
static int gen_new_payee_neft(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "new_payee_neft", seed);
  static const char *const payees[][2] = {{"Ramesh Kumar", "SBIN0004567"}, {"Lata Devi", "HDFC0001234"},
                                          {"Vinod Electricals", "ICIC0007890"}, {"Sunita Rao", "UTIB0002345"}};
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.balance_paise FROM customers c JOIN accounts a"
                 " ON a.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"
                 " AND a.balance_paise >= 1000000 ORDER BY a.account_id",
                 3, c, err));
  int k = (int)task_gen_range(&rng, 0, 3);
  char number[24];
  snprintf(number, sizeof number, "%012lld", (long long)task_gen_range(&rng, 100000000000LL, 999999999999LL));
  int64_t cap = atoll(c[2]) / 100 / 2;
  if (cap > 50000) cap = 50000;
  int64_t amount = task_gen_range(&rng, 1, cap / 1000) * 1000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need to pay %s Rs %s by NEFT; they are not on my payee list yet.",
                 "%s ko Rs %s bhejna hai NEFT se, unko payee add karna padega pehle.",
                 "pay %s %s neft. new payee", payees[k][0], amount_text));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "payee_name", payees[k][0], "name", "beneficiary", NULL));
  FAM_TRY(fam_field(t, err, "payee_account_number", number, "payee account", "their account", "account number", NULL));
  FAM_TRY(fam_field(t, err, "ifsc", payees[k][1], "IFSC", "branch code", NULL));
  FAM_TRY(fam_field(t, err, "from_account", c[1], "your account", "debit", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
  int add = fam_gold(t, err, "add_beneficiary", "name,account_number,ifsc", 0,
                    "{\"name\":\"%s\",\"account_number\":\"%s\",\"ifsc\":\"%s\"}", payees[k][0], number, payees[k][1]);
  FAM_TRY(add);
  char ben[TASK_GEN_COL_MAX];
  FAM_TRY(fam_replay_text(ctx, t, add, "beneficiary_id", ben, sizeof ben, err));
  int s = fam_gold(t, err, "transfer_funds", "from_account,beneficiary_id,amount,mode", 0,
                  "{\"from_account\":\"%s\",\"beneficiary_id\":\"%s\",\"amount\":%lld,\"mode\":\"neft\"}", c[1], ben,
                  (long long)amount);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "transfer reference", s, "reference", err));
  int b = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]);
  FAM_TRY(b);
  FAM_TRY(task_add_communicate(t, "balance after the transfer", b, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent registers the payee before sending money.", TASK_RULE_CALLED_BEFORE,
                   "add_beneficiary", "transfer_funds", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- imps_with_charge (seq): IMPS to a payee, charge quoted and confirmed ------
static int gen_imps_with_charge(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "imps_with_charge", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.balance_paise, b.beneficiary_id, b.name FROM customers c"
                 " JOIN accounts a ON a.customer_id = c.customer_id JOIN beneficiaries b"
                 " ON b.customer_id = c.customer_id WHERE " KYC_OK " AND a.status = 'active'"
                 " AND b.status = 'active' AND b.added_on < (SELECT today FROM clock) AND a.balance_paise >= 1000000"
                 " ORDER BY a.account_id, b.beneficiary_id",
                 5, c, err));
  int64_t cap = atoll(c[2]) / 100 / 2;
  if (cap > 95000) cap = 95000;
  int64_t amount = task_gen_range(&rng, 2, cap / 1000) * 1000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please send Rs %s to %s by IMPS, it has to reach immediately.",
                 "%2$s ko Rs %1$s IMPS kar do, turant pahunchna chahiye.", "imps %s to %s. now", amount_text, c[4]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "from_account", c[1], "your account", "debit", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  int s = fam_gold(t, err, "transfer_funds", "from_account,beneficiary_id,amount,mode", 1,
                  "{\"from_account\":\"%s\",\"beneficiary_id\":\"%s\",\"amount\":%lld,\"mode\":\"imps\","
                  "\"customer_confirmed\":true}",
                  c[1], c[3], (long long)amount);
  FAM_TRY(s);
  FAM_TRY(task_add_confirm(t, "the IMPS charge of Rs 5.90", -1, NULL, err));
  FAM_TRY(task_add_communicate(t, "transfer reference", s, "reference", err));
  FAM_TRY(fam_assert(t, err, "The agent tells the customer the IMPS charge before sending.", TASK_RULE_MENTIONS_ANY,
                   "5.90", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rekyc_then_transfer (seq, 6 steps): KYC lapsed, re-KYC first, then NEFT -------
static int gen_rekyc_then_transfer(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rekyc_then_transfer", seed);
  char c[6][TASK_GEN_COL_MAX], sql[256];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id, a.balance_paise, b.beneficiary_id, b.name, c.aadhaar_last4"
                 " FROM customers c JOIN accounts a ON a.customer_id = c.customer_id JOIN beneficiaries b"
                 " ON b.customer_id = c.customer_id WHERE a.status = 'active' AND b.status = 'active'"
                 " AND a.balance_paise >= 1000000 ORDER BY a.account_id, b.beneficiary_id",
                 6, c, err));
  // The story: the customer's periodic re-KYC lapsed last month.
  snprintf(sql, sizeof sql,
           "UPDATE customers SET kyc_status = 'expired', rekyc_due_date = date((SELECT today FROM clock), '-%d days')"
           " WHERE customer_id = '%s'",
           (int)task_gen_range(&rng, 5, 60), c[0]);
  FAM_TRY(task_add_fixture(t, sql, err));
  int64_t cap = atoll(c[2]) / 100 / 2;
  if (cap > 50000) cap = 50000;  // stays within the cooling-period cap of a payee added today
  int64_t amount = task_gen_range(&rng, 1, cap / 1000) * 1000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I need to send Rs %s to %s by NEFT. Last time it said something about my KYC; please sort that "
                 "out too.",
                 "%2$s ko Rs %1$s NEFT karna hai. Pichhli baar KYC ka kuch error aaya tha, woh bhi theek kar do.",
                 "neft %s to %s. kyc issue last time, fix", amount_text, c[4]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "document_type", "aadhaar", "document", "id proof", "OVD", NULL));
  FAM_TRY(fam_field(t, err, "document_last4", c[5], "last 4", "last four", "digits", NULL));
  FAM_TRY(fam_field(t, err, "from_account", c[1], "your account", "debit", "account number", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "get_kyc_status", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "submit_rekyc", "document_type,document_last4", 0,
                 "{\"document_type\":\"aadhaar\",\"document_last4\":\"%s\"}", c[5]));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  int s = fam_gold(t, err, "transfer_funds", "from_account,beneficiary_id,amount,mode", 0,
                  "{\"from_account\":\"%s\",\"beneficiary_id\":\"%s\",\"amount\":%lld,\"mode\":\"neft\"}", c[1], c[3],
                  (long long)amount);
  FAM_TRY(s);
  int b = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]);
  FAM_TRY(b);
  FAM_TRY(task_add_communicate(t, "transfer reference", s, "reference", err));
  FAM_TRY(task_add_communicate(t, "balance after the transfer", b, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent completes re-KYC before the transfer.", TASK_RULE_CALLED_BEFORE, "submit_rekyc",
                   "transfer_funds", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- upi_over_limit (edge): UPI above the daily limit is refused ---------------
static int gen_upi_over_limit(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "upi_over_limit", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, b.name FROM customers c JOIN beneficiaries b ON b.customer_id = c.customer_id"
                 " WHERE " KYC_OK " AND b.status = 'active' ORDER BY b.beneficiary_id",
                 2, c, err));
  char amount[32];
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 12, 40) * 10000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to send Rs %s to %s by UPI only, nothing else.",
                 "%2$s ko Rs %1$s UPI se hi bhejna hai, koi aur mode nahi.", "upi %s to %s. only upi", amount, c[1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount, "how much", NULL));
  int s = fam_gold(t, err, "get_transfer_limits", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "UPI daily limit", s, "upi_daily_limit", err));
  FAM_TRY(fam_assert(t, err, "The agent does not attempt a UPI transfer above the daily limit.", TASK_RULE_NOT_CALLED,
                   "transfer_funds", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the UPI limit.", TASK_RULE_MENTIONS_ANY, "limit", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- dispute_unauthorised (seq): find the debit, raise a dispute ----------------
static int gen_dispute_unauthorised(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "dispute_unauthorised", seed);
  char c[6][TASK_GEN_COL_MAX];
  // The debit must be among the 10 newest transactions the agent will list.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, x.account_id, x.txn_id, x.amount_paise, x.txn_date, a.account_type"
                 " FROM transactions x JOIN accounts a ON a.account_id = x.account_id WHERE x.direction = 'debit'"
                 " AND (SELECT count(*) FROM transactions y WHERE y.account_id = x.account_id"
                 " AND (y.txn_date > x.txn_date OR (y.txn_date = x.txn_date AND y.txn_id > x.txn_id))) < 10"
                 " ORDER BY x.txn_id",
                 6, c, err));
  char amount[32];
  fam_rupees(atoll(c[3]), amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "There is a debit of Rs %s on %s that I never made. I want to report it as unauthorised.",
                 "Rs %s ka debit %s ko hua hai jo maine nahi kiya. Complaint karni hai.",
                 "unknown debit %s on %s. not me", amount, c[4]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_id", c[1], "account number", "which account", NULL));
  FAM_TRY(fam_gold(t, err, "get_transactions", "account_id", 0, "{\"account_id\":\"%s\",\"limit\":10}", c[1]));
  int s = fam_gold(t, err, "raise_dispute", "transaction_id,reason", 0,
                  "{\"transaction_id\":\"%s\",\"reason\":\"unauthorised\",\"description\":"
                  "\"Customer did not make this debit of Rs %s on %s\"}",
                  c[2], amount, c[4]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "dispute id", s, "dispute_id", err));
  FAM_TRY(fam_assert(t, err, "The agent finds the transaction before disputing it.", TASK_RULE_CALLED_BEFORE,
                   "get_transactions", "raise_dispute", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains the customer's liability.", TASK_RULE_MENTIONS_ANY, "liability", NULL));
  FAM_TRY(fam_variant(t, err, c[5]));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- other_customer_account (edge): balance of someone else's account -----------
static int gen_other_customer_account(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "other_customer_account", seed);
  // The account first, then the asking customer among everyone else: two
  // scans linear in the bank (a join of every customer with every other
  // customer's accounts grew with the square of the bank).
  char c[4][TASK_GEN_COL_MAX], balance[32];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, account_id, balance_paise, account_type FROM accounts WHERE status = 'active'"
                 " ORDER BY account_id",
                 4, c, err));
  const char *owner[] = {c[0], NULL};
  FAM_TRY(task_gen_pick(ctx, &rng, "SELECT customer_id FROM customers WHERE customer_id <> ? ORDER BY customer_id",
                        owner, 1, c, err));
  fam_rupees_tool(atoll(c[2]), balance);
  static const char *const who[][2] = {
      {"my father", "mere papa"}, {"my neighbour", "padosi"}, {"my business partner", "mere partner"},
      {"my tenant", "kirayedaar"}};
  int k = (int)task_gen_range(&rng, 0, 3);
  const char *relation = who[k][fam_style(t, &rng) == TASK_STYLE_HINGLISH];
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Can you tell me the balance in account %s? It belongs to %s.",
                 "Account %s ka balance bata do, woh %s ka hai.", "balance of %s (%s's)", c[1], relation));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent never reveals the other customer's balance.", TASK_RULE_MENTIONS_NONE, balance,
                   NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains it can only share the customer's own accounts.",
                   TASK_RULE_MENTIONS_ANY, "own", NULL));
  FAM_TRY(fam_variant(t, err, c[3]));  // the product of the account asked about
  fam_finish(t, FAM_CHECKS_SAID);
  return 0;
}

// ---- other_bank_balance_oos (edge, OUT_OF_SCOPE): our balance yes, another bank's no --
static int gen_other_bank_balance_oos(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "other_bank_balance_oos", seed);
  static const char *const banks[] = {"State Bank", "HDFC Bank", "ICICI Bank", "Axis Bank", "Canara Bank"};
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, account_id, account_type FROM accounts WHERE status = 'active'"
                 " ORDER BY account_id",
                 3, c, err));
  const char *bank = fam_choose(&rng, banks, 5);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "Tell me the balance of my account %s here, and also of my %s salary account.",
                 "Mere account %s ka balance batao, aur mere %s wale salary account ka bhi.",
                 "balance %s. and %s account too", c[1], bank));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "balance", s, "balances.0.balance", err));
  FAM_TRY(fam_assert(t, err, "The agent says it cannot see accounts at other banks.", TASK_RULE_MENTIONS_ANY,
                   "other bank", "cannot", NULL));
  FAM_TRY(fam_assert(t, err, "The conversation ends with the rest out of scope.", TASK_RULE_END_IS, "out_of_scope",
                   NULL));
  t->expected_end = TASK_END_OUT_OF_SCOPE;
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_SAID);
  return 0;
}

// ---- payee_cleanup (tools): list payees and delete one --------------------------
static int gen_payee_cleanup(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "payee_cleanup", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, beneficiary_id, name FROM beneficiaries WHERE status = 'active'"
                 " ORDER BY beneficiary_id",
                 3, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please remove %s from my payee list, I no longer deal with them.",
                 "%s ko mere payee list se hata do, ab unse lena-dena nahi hai.", "delete payee %s", c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "delete_beneficiary", "beneficiary_id", 0, "{\"beneficiary_id\":\"%s\"}", c[1]));
  FAM_TRY(fam_assert(t, err, "The agent looks up the payee before deleting it.", TASK_RULE_CALLED_BEFORE,
                   "list_beneficiaries", "delete_beneficiary", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- balance_enquiry: verify, balance (happy, 2 steps) ----------------------
static const char *const balance_reasons[TASK_STYLE_COUNT][2] = {
    {"I'd like to know the balance in my account, please.", "Can you tell me how much money is in my account?"},
    {"Mera account balance kitna hai, bata dijiye.", "Balance check karna tha mujhe."},
    {"balance pls", "acct balance?"},
};
static int gen_balance_enquiry(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], args[256];
  if (task_gen_pick(ctx, &rng, FAM_SQL_ACTIVE_ACCOUNT(0), NULL, 4, row, err) != 0) return -1;
  if (task_set(&t->persona, err, "A customer checking funds before paying a bill.") ||
      fam_pick_reason(t, &rng, balance_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "account_number", row[1], err))
    return -1;
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", row[1]);
  int step = task_add_gold(t, "get_account_balance", args, "account_ids", 0, err);
  if (step < 0 || task_add_communicate(t, "balance", step, "balances.0.balance", err)) return -1;
  FAM_TRY(fam_account_variant(ctx, t, row[1], err));
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 12;
  return 0;
}
const TaskFamily fam_balance_enquiry = {"balance_enquiry", TASK_USE_ACCOUNTS_KYC, TASK_KIND_HAPPY,
                                           "Verify, then say the balance of one account.", gen_balance_enquiry, TASK_SLICE_SHALLOW,
    TASK_FAMILY_CHANNELS, "savings,current"};

// ---- imps_over_limit: the limit check comes first, then refuse (edge) ------
static const char *const limit_reasons[TASK_STYLE_COUNT][2] = {
    {"I need to send a large amount by IMPS right now.", "Please make an urgent IMPS transfer to my brother."},
    {"Mujhe IMPS se bada amount bhejna hai abhi.", "Bhai ko turant IMPS karna hai, bada amount hai."},
    {"imps transfer. big amount. urgent", "send imps now pls"},
};
static int gen_imps_over_limit(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[4][TASK_GEN_COL_MAX], amount[32];
  if (task_gen_pick(ctx, &rng, FAM_SQL_ACTIVE_ACCOUNT(0), NULL, 4, row, err) != 0) return -1;
  // Above the IMPS cap of Rs 5,00,000 a transfer (docs/tools.md).
  snprintf(amount, sizeof amount, "%lld", (long long)task_gen_range(&rng, 51, 90) * 10000);
  if (task_set(&t->persona, err, "A customer in a hurry to move a large sum.") ||
      fam_pick_reason(t, &rng, limit_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0 ||
      task_add_field(t, "amount", amount, err))
    return -1;
  int step = task_add_gold(t, "get_transfer_limits", "{}", NULL, 0, err);
  if (step < 0 || task_add_communicate(t, "imps_limit", step, "imps_per_transaction_limit", err) ||
      fam_assert_rule(t, "The agent checks the transfer limits.", TASK_RULE_CALLED, "get_transfer_limits", NULL, err) ||
      fam_assert_rule(t, "The agent does not attempt the transfer.", TASK_RULE_NOT_CALLED, "transfer_funds", NULL, err) ||
      fam_assert_rule(t, "The agent explains that the amount is above the limit.", TASK_RULE_MENTIONS_ANY, "limit", NULL,
                  err))
    return -1;
  t->checks = FAM_CHECKS_WORK;
  t->max_turns = 14;
  return 0;
}
const TaskFamily fam_imps_over_limit = {"imps_over_limit", TASK_USE_ACCOUNTS_KYC, TASK_KIND_EDGE,
                                           "IMPS above the cap: check limits first, then refuse.", gen_imps_over_limit, TASK_SLICE_SHALLOW,
    TASK_FAMILY_CHANNELS, "imps"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
// Every family of this file names the variant its task instantiates (a
// one-product family's is recorded by task_generate, the others' with
// fam_variant) and, its gold chain starting with verify_customer, takes the
// app channel too (TASK_FAMILY_CHANNELS).
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_ACCOUNTS_KYC, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_kyc_status_check, kyc_status_check, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "kyc", "KYC status and re-KYC due date (read-only)")
FAMILY(fam_rekyc_update, rekyc_update, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "aadhaar,passport,voter_id,driving_licence", "check KYC, then submit re-KYC with a document")
FAMILY(fam_address_change, address_change, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "aadhaar,passport,utility_bill,driving_licence", "update the address with a proof document")
FAMILY(fam_email_update, email_update, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "email", "update the e-mail address")
FAMILY(fam_statement_email, statement_email, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "email,branch", "request an account statement for a period")
FAMILY(fam_transfer_kyc_expired, transfer_kyc_expired, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "neft", "transfer asked with expired KYC: refuse")
FAMILY(fam_own_accounts_sweep, own_accounts_sweep, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "savings,current", "move money between own accounts, both balances")
FAMILY(fam_new_payee_neft, new_payee_neft, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "neft", "add a payee, NEFT within the cooling cap, balance")
FAMILY(fam_imps_with_charge, imps_with_charge, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "imps", "IMPS to a payee after confirming the charge")
FAMILY(fam_rekyc_then_transfer, rekyc_then_transfer, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "neft", "6 steps: KYC lapsed, re-KYC, then NEFT, balance")
FAMILY(fam_upi_over_limit, upi_over_limit, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "upi", "UPI above the daily limit: check limits, refuse")
FAMILY(fam_dispute_unauthorised, dispute_unauthorised, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "savings,current", "find an unknown debit and dispute it")
FAMILY(fam_other_customer_account, other_customer_account, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "savings,current", "another customer's balance: refuse")
FAMILY(fam_other_bank_balance_oos, other_bank_balance_oos, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "savings,current", "own balance, another bank's: out of scope")
FAMILY(fam_payee_cleanup, payee_cleanup, TASK_KIND_TOOLS, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "beneficiary", "list payees and delete one")

// ==== second round (the deep slice) ===========================================
// Chains of up to 8 actions; seq+db checks where a write or a refusal decides
// the task, seq+comm where a value must reach the customer. Each task records
// its named variant (fam_variant).
// A payee of a KYC-current customer, past its cooling period, and the
// customer's active account with at least `min` paise, no transfer today.
#define SQL_PAYEE_ACCOUNT(min)                                                                                  \
  "SELECT c.customer_id, a.account_id, a.balance_paise, b.beneficiary_id, b.name, a.account_type FROM customers c" \
  " JOIN accounts a ON a.customer_id = c.customer_id JOIN beneficiaries b ON b.customer_id = c.customer_id"     \
  " WHERE " KYC_OK " AND a.status = 'active' AND b.status = 'active'"                                         \
  " AND b.added_on <= date((SELECT today FROM clock), '-2 days') AND a.balance_paise >= " #min                  \
  " AND NOT EXISTS (SELECT 1 FROM transfers x WHERE x.customer_id = c.customer_id"                              \
  " AND x.transfer_date = (SELECT today FROM clock)) ORDER BY a.account_id, b.beneficiary_id"

// ---- rtgs_transfer (seq, 5 steps): payees, limits, RTGS of 2 lakh or more, balance ----
static int gen_rtgs_transfer(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rtgs_transfer", seed);
  char c[6][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_PAYEE_ACCOUNT(50000000), 6, c, err));
  int64_t cap = atoll(c[2]) / 100 / 2;
  if (cap > 900000) cap = 900000;
  int64_t amount = task_gen_range(&rng, 20, cap / 10000) * 10000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need to pay Rs %s to %s by RTGS today for a property deal.",
                 "%2$s ko Rs %1$s RTGS karna hai aaj, property ka payment hai.", "rtgs %s to %s today",
                 amount_text, c[4]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "from_account", c[1], "your account", "debit", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_transfer_limits", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "transfer_funds", "from_account,beneficiary_id,amount,mode", 0,
                 "{\"from_account\":\"%s\",\"beneficiary_id\":\"%s\",\"amount\":%lld,\"mode\":\"rtgs\"}", c[1], c[3],
                 (long long)amount));
  FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_assert(t, err, "The agent reads the limits before the RTGS.", TASK_RULE_CALLED_BEFORE,
                   "get_transfer_limits", "transfer_funds", NULL));
  FAM_TRY(fam_variant(t, err, c[5]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rtgs_below_minimum (edge, 3 steps): RTGS starts at Rs 2,00,000 -------------------
static int gen_rtgs_below_minimum(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rtgs_below_minimum", seed);
  char c[6][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_PAYEE_ACCOUNT(0), 6, c, err));
  char amount[32];
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 2, 19) * 10000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Send Rs %s to %s, and it must go by RTGS, nothing else.",
                 "%2$s ko Rs %1$s bhejna hai, sirf RTGS se.", "rtgs only. %s to %s", amount, c[4]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_transfer_limits", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not send money below the RTGS minimum.", TASK_RULE_NOT_CALLED,
                   "transfer_funds", NULL));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- netbanking_daily_cap (edge, 4 steps): above Rs 10,00,000 a day -------------------
static int gen_netbanking_daily_cap(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "netbanking_daily_cap", seed);
  char c[6][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_PAYEE_ACCOUNT(0), 6, c, err));
  const char *mode = task_gen_range(&rng, 0, 1) ? "neft" : "rtgs";
  char amount[32];
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 11, 40) * 100000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Please transfer Rs %s to %s by %s in one go today.",
                 "%2$s ko Rs %1$s %3$s se aaj hi ek baar mein bhej do.", "%s to %s via %s today. one shot", amount,
                 c[4], mode));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "amount", amount, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "list_beneficiaries", "", 0, "{}"));
  FAM_TRY(fam_gold(t, err, "get_transfer_limits", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not transfer above the daily limit.", TASK_RULE_NOT_CALLED,
                   "transfer_funds", NULL));
  FAM_TRY(fam_variant(t, err, mode));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- cooling_payee_cap (edge, 3 steps): add the payee, refuse above the cooling cap ----
static int gen_cooling_payee_cap(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "cooling_payee_cap", seed);
  static const char *const payees[][2] = {{"Meena Traders", "SBIN0006789"}, {"Arjun Nair", "HDFC0004321"},
                                          {"Kaveri Motors", "ICIC0001357"}, {"Farah Sheikh", "UTIB0008642"}};
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT c.customer_id, a.account_id FROM customers c JOIN accounts a ON a.customer_id = c.customer_id"
                 " WHERE " KYC_OK " AND a.status = 'active' ORDER BY a.account_id",
                 2, c, err));
  int k = (int)task_gen_range(&rng, 0, 3);
  const char *mode = task_gen_range(&rng, 0, 1) ? "neft" : "imps";
  char number[24], amount[32];
  snprintf(number, sizeof number, "%012lld", (long long)task_gen_range(&rng, 100000000000LL, 999999999999LL));
  snprintf(amount, sizeof amount, "%d", (int)task_gen_range(&rng, 6, 40) * 10000);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Add %s as a payee and send them Rs %s by %s right away.",
                 "%s ko payee add karke turant Rs %s %s kar do.", "new payee %s. send %s %s now", payees[k][0],
                 amount, mode));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "payee_account_number", number, "account number", "their account", NULL));
  FAM_TRY(fam_field(t, err, "ifsc", payees[k][1], "IFSC", "branch code", NULL));
  FAM_TRY(fam_field(t, err, "amount", amount, "how much", NULL));
  FAM_TRY(fam_gold(t, err, "add_beneficiary", "name,account_number,ifsc", 0,
                 "{\"name\":\"%s\",\"account_number\":\"%s\",\"ifsc\":\"%s\"}", payees[k][0], number, payees[k][1]));
  FAM_TRY(fam_gold(t, err, "get_transfer_limits", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not send more than the cooling-period cap to a new payee.",
                   TASK_RULE_NOT_CALLED, "transfer_funds", NULL));
  FAM_TRY(fam_variant(t, err, mode));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- contact_details_comm (tools, communication, 2 steps): what is on file -----------
static int gen_contact_details_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "contact_details_comm", seed);
  char c[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id FROM customers ORDER BY customer_id", 1, c, err));
  static const char *const asks[][4] = {{"email", "e-mail address", "email ID", "email"},
                                        {"address", "address", "address", "pincode"},
                                        {"mobile", "mobile number", "mobile number", "mobile"}};
  int k = (int)task_gen_range(&rng, 0, 2);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Which %s do you have on file for me? I want to be sure it's right.",
                 "Aapke records mein mera kaunsa %s hai? Confirm karna hai.", "%s on file?", asks[k][1], asks[k][2],
                 asks[k][3]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_customer_profile", "", 0, "{}");
  FAM_TRY(s);
  if (k == 1) {
    FAM_TRY(task_add_communicate(t, "city on file", s, "city", err));
    FAM_TRY(task_add_communicate(t, "PIN code on file", s, "pincode", err));
  } else {
    FAM_TRY(task_add_communicate(t, asks[k][1], s, asks[k][3], err));
  }
  FAM_TRY(fam_variant(t, err, asks[k][0]));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// ---- mobile_update (happy, 3 steps): profile, then the new number (and e-mail) --------
static int gen_mobile_update(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "mobile_update", seed);
  char c[2][TASK_GEN_COL_MAX], mobile[16], email[256];
  FAM_TRY(fam_pick(ctx, &rng, "SELECT customer_id, lower(replace(name, ' ', '')) FROM customers ORDER BY customer_id",
                 2, c, err));
  snprintf(mobile, sizeof mobile, "9%09lld", (long long)task_gen_range(&rng, 100000000LL, 999999999LL));
  snprintf(email, sizeof email, "%s%d@example.in", c[1], (int)task_gen_range(&rng, 10, 99));
  int both = (int)task_gen_range(&rng, 0, 1);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I have a new mobile number%s. Please update your records.",
                 "Mera naya mobile number hai%s. Records update kar do.", "new mobile no%s. update",
                 both ? " and a new e-mail" : ""));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "new_mobile", mobile, "new number", "mobile", NULL));
  if (both) FAM_TRY(fam_field(t, err, "email", email, "e-mail", "mail id", NULL));
  FAM_TRY(fam_gold(t, err, "get_customer_profile", "", 0, "{}"));
  if (both)
    FAM_TRY(fam_gold(t, err, "update_contact", "mobile,email", 0, "{\"mobile\":\"%s\",\"email\":\"%s\"}", mobile, email));
  else
    FAM_TRY(fam_gold(t, err, "update_contact", "mobile", 0, "{\"mobile\":\"%s\"}", mobile));
  FAM_TRY(fam_variant(t, err, both ? "mobile_email" : "mobile"));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- dispute_other_reason (tools, 4 steps): double debit, wrong amount, not received ----
static int gen_dispute_other_reason(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "dispute_other_reason", seed);
  char c[5][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, x.account_id, x.txn_id, x.amount_paise, x.txn_date FROM transactions x"
                 " JOIN accounts a ON a.account_id = x.account_id WHERE x.direction = 'debit'"
                 " AND NOT EXISTS (SELECT 1 FROM disputes d WHERE d.txn_id = x.txn_id)"
                 " AND (SELECT count(*) FROM transactions y WHERE y.account_id = x.account_id"
                 " AND (y.txn_date > x.txn_date OR (y.txn_date = x.txn_date AND y.txn_id > x.txn_id))) < 10"
                 " ORDER BY x.txn_id",
                 5, c, err));
  static const char *const reasons[][2] = {{"double_debit", "I was charged twice for the same payment"},
                                           {"wrong_amount", "the amount debited is more than the bill"},
                                           {"not_received", "the merchant says the money never arrived"}};
  int k = (int)task_gen_range(&rng, 0, 2);
  char amount[32];
  fam_rupees(atoll(c[3]), amount);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "About the debit of Rs %s on %s: %s. Please raise a dispute.",
                 "Rs %s ka debit %s ko hua, %s. Dispute daal do.", "debit %s on %s. %s. dispute", amount, c[4],
                 reasons[k][1]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "account_id", c[1], "account number", "which account", NULL));
  FAM_TRY(fam_gold(t, err, "get_transactions", "account_id", 0, "{\"account_id\":\"%s\",\"limit\":10}", c[1]));
  int s = fam_gold(t, err, "raise_dispute", "transaction_id,reason", 0,
                  "{\"transaction_id\":\"%s\",\"reason\":\"%s\",\"description\":\"Customer says %s\"}", c[2],
                  reasons[k][0], reasons[k][1]);
  FAM_TRY(s);
  char id[TASK_GEN_COL_MAX];
  FAM_TRY(fam_replay_text(ctx, t, s, "dispute_id", id, sizeof id, err));
  FAM_TRY(fam_gold(t, err, "get_dispute_status", "dispute_id", 0, "{\"dispute_id\":\"%s\"}", id));
  FAM_TRY(fam_variant(t, err, reasons[k][0]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// Tier of a graded family: 0 easy, 1 medium, 2 hard.
static const char *const TIERS[] = {"easy", "medium", "hard"};

// ---- own_transfer_graded (seq, graded, 2/4/6 steps): the same move, harder each tier ----
static int gen_own_transfer_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "own_transfer_graded", seed);
  char c[5][TASK_GEN_COL_MAX], variant[160];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, a.account_id, b.account_id, a.balance_paise, a.account_type FROM accounts a"
                 " JOIN accounts b ON a.customer_id = b.customer_id AND a.account_id <> b.account_id"
                 " WHERE a.status = 'active' AND b.status = 'active' AND a.balance_paise >= 200000"
                 " ORDER BY a.account_id, b.account_id",
                 5, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  int64_t cap = atoll(c[3]) / 100 / 2;
  if (cap > 100000) cap = 100000;
  int64_t amount = task_gen_range(&rng, 1, cap / 500 > 1 ? cap / 500 : 1) * 500;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  fam_style(t, &rng);
  if (tier == 0)
    FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "Move Rs %s from %s to my account %s.",
                   "Rs %s %s se mere account %s mein daal do.", "move %s %s -> %s", amount_text, c[1], c[2]));
  else
    FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                   "I want to shift some money between my own accounts and see the balances%s.",
                   "Apne accounts ke beech paise shift karne hain, balance bhi dekhna hai%s.",
                   "own acct transfer + balances%s", tier == 2 ? ", and then the last entries" : ""));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  if (tier > 0) {
    FAM_TRY(fam_field(t, err, "from_account", c[1], "debit", "from which", NULL));
    FAM_TRY(fam_field(t, err, "to_account", c[2], "credit", "to which", NULL));
    FAM_TRY(fam_field(t, err, "amount", amount_text, "how much", NULL));
    FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  }
  if (tier == 2)
    FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\"]}", c[1]));
  FAM_TRY(fam_gold(t, err, "transfer_between_own_accounts", "from_account,to_account,amount", 0,
                 "{\"from_account\":\"%s\",\"to_account\":\"%s\",\"amount\":%lld}", c[1], c[2], (long long)amount));
  if (tier > 0)
    FAM_TRY(fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\",\"%s\"]}", c[1], c[2]));
  if (tier == 2)
    FAM_TRY(fam_gold(t, err, "get_transactions", "account_id", 0, "{\"account_id\":\"%s\",\"limit\":5}", c[1]));
  snprintf(variant, sizeof variant, "%s_%s", TIERS[tier], c[4]);
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- rekyc_graded (seq, graded, 2/3/5 steps): status, re-KYC, then the new address ----
static int gen_rekyc_graded(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "rekyc_graded", seed);
  char c[2][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, aadhaar_last4 FROM customers WHERE kyc_status IN ('expired', 'pending')"
                 " OR julianday(rekyc_due_date) - julianday((SELECT today FROM clock)) <= 90 ORDER BY customer_id",
                 2, c, err));
  int tier = (int)task_gen_range(&rng, 0, 2);
  static const char *const cities[][2] = {{"Lucknow", "226010"}, {"Indore", "452001"}, {"Nagpur", "440010"},
                                          {"Mysuru", "570001"}};
  int k = (int)task_gen_range(&rng, 0, 3);
  char line[96];
  snprintf(line, sizeof line, "%d, MG Road", (int)task_gen_range(&rng, 1, 300));
  fam_style(t, &rng);
  static const char *const en[] = {"Is my KYC up to date? When is re-KYC due?",
                                   "My KYC needs renewing. Please complete re-KYC with my Aadhaar.",
                                   "I moved to %s. Please do my re-KYC with Aadhaar and then change my address."};
  static const char *const hi[] = {"Mera KYC theek hai? Re-KYC kab due hai?",
                                   "KYC renew karna hai, Aadhaar se re-KYC kar do.",
                                   "Main %s shift ho gaya. Aadhaar se re-KYC karke address bhi badal do."};
  static const char *const fr[] = {"kyc ok? rekyc due?", "rekyc. aadhaar", "moved to %s. rekyc aadhaar + new address"};
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, en[tier], hi[tier], fr[tier], cities[k][0]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  if (tier == 2) FAM_TRY(fam_gold(t, err, "get_customer_profile", "", 0, "{}"));
  int s = fam_gold(t, err, "get_kyc_status", "", 0, "{}");
  FAM_TRY(s);
  if (tier == 0) FAM_TRY(task_add_communicate(t, "rekyc_due_date", s, "rekyc_due_date", err));
  if (tier > 0) {
    FAM_TRY(fam_field(t, err, "document_last4", c[1], "last 4", "last four", "aadhaar", NULL));
    FAM_TRY(fam_gold(t, err, "submit_rekyc", "document_type,document_last4", 0,
                   "{\"document_type\":\"aadhaar\",\"document_last4\":\"%s\"}", c[1]));
  }
  if (tier == 2) {
    FAM_TRY(fam_field(t, err, "address_line", line, "address", "street", "house", NULL));
    FAM_TRY(fam_field(t, err, "pincode", cities[k][1], "pin", "PIN code", "postal", NULL));
    FAM_TRY(fam_gold(t, err, "update_address", "address_line,city,pincode,proof_document", 0,
                   "{\"address_line\":\"%s\",\"city\":\"%s\",\"pincode\":\"%s\",\"proof_document\":\"aadhaar\"}", line,
                   cities[k][0], cities[k][1]));
  }
  FAM_TRY(fam_variant(t, err, TIERS[tier]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- all_balances_comm (happy, communication, 3 steps): every account's balance said ----
static int gen_all_balances_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "all_balances_comm", seed);
  char c[4][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT a.customer_id, a.account_id, b.account_id, a.account_type FROM accounts a JOIN accounts b"
                 " ON a.customer_id = b.customer_id AND a.account_id < b.account_id"
                 " WHERE a.status = 'active' AND b.status = 'active' AND (SELECT count(*) FROM accounts z"
                 " WHERE z.customer_id = a.customer_id AND z.status = 'active') = 2 ORDER BY a.account_id",
                 4, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "What is the balance in each of my accounts with you?",
                 "Mere sabhi accounts ka balance alag alag batao.", "balance of all my accounts?"));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  int s = fam_gold(t, err, "get_account_balance", "account_ids", 0, "{\"account_ids\":[\"%s\",\"%s\"]}", c[1], c[2]);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "balance of the first account", s, "balances.0.balance", err));
  FAM_TRY(task_add_communicate(t, "balance of the second account", s, "balances.1.balance", err));
  FAM_TRY(fam_variant(t, err, c[3]));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// ---- statement_too_long (edge, 2 steps): statements cover at most one year -------------
static int gen_statement_too_long(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "statement_too_long", seed);
  char c[3][TASK_GEN_COL_MAX], from[1][TASK_GEN_COL_MAX], sql[160], variant[160];
  // The account type first, half each: current accounts are few, and every
  // variant (type x delivery x channel) must occur.
  snprintf(sql, sizeof sql,
           "SELECT customer_id, account_id, account_type FROM accounts WHERE status = 'active' AND account_type = '%s' "
           "ORDER BY account_id",
           task_gen_range(&rng, 0, 1) ? "current" : "savings");
  FAM_TRY(fam_pick(ctx, &rng, sql, 3, c, err));
  int years = (int)task_gen_range(&rng, 2, 4);
  snprintf(sql, sizeof sql, "SELECT date((SELECT today FROM clock), '-%d years')", years);
  FAM_TRY(task_gen_first(ctx, sql, NULL, 1, from, err));
  const char *delivery = task_gen_range(&rng, 0, 1) ? "email" : "branch";
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "I need one single statement of account %s covering the last %d years, from %s till today.",
                 "Account %s ka pichhle %d saal ka ek hi statement chahiye, %s se aaj tak.",
                 "one statement %s. last %d yrs from %s", c[1], years, from[0]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "delivery", delivery, "email or branch", "send", "deliver", NULL));
  FAM_TRY(fam_gold(t, err, "list_accounts", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not order a statement longer than one year.", TASK_RULE_NOT_CALLED,
                   "request_statement", NULL));
  snprintf(variant, sizeof variant, "%s_%s", delivery, c[2]);
  FAM_TRY(fam_variant(t, err, variant));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

#define DEEP_FAMILY(var, name, kind, flags, variants, summary) \
  FAMILY(var, name, kind, TASK_SLICE_DEEP, flags, variants, summary)
DEEP_FAMILY(fam_rtgs_transfer, rtgs_transfer, TASK_KIND_SEQ, TASK_FAMILY_CHANNELS, "savings,current",
            "5 steps: payees, limits, RTGS from Rs 2 lakh, balance")
DEEP_FAMILY(fam_rtgs_below_minimum, rtgs_below_minimum, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "rtgs",
            "RTGS below Rs 2 lakh: limits read, refuse")
DEEP_FAMILY(fam_netbanking_daily_cap, netbanking_daily_cap, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "neft,rtgs",
            "transfer above Rs 10 lakh a day: accounts, payees, limits, refuse")
DEEP_FAMILY(fam_cooling_payee_cap, cooling_payee_cap, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS, "neft,imps",
            "add a payee, refuse a transfer above the cooling cap")
DEEP_FAMILY(fam_contact_details_comm, contact_details_comm, TASK_KIND_TOOLS, TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS,
            "email,address,mobile", "profile read; the e-mail, address or masked mobile on file said")
DEEP_FAMILY(fam_mobile_update, mobile_update, TASK_KIND_HAPPY, TASK_FAMILY_CHANNELS, "mobile,mobile_email",
            "profile, then the new mobile (and e-mail)")
DEEP_FAMILY(fam_dispute_other_reason, dispute_other_reason, TASK_KIND_TOOLS, TASK_FAMILY_CHANNELS, "double_debit,wrong_amount,not_received",
            "statement, dispute (not fraud), dispute status")
DEEP_FAMILY(fam_own_transfer_graded, own_transfer_graded, TASK_KIND_SEQ, TASK_FAMILY_GRADED | TASK_FAMILY_CHANNELS,
            "easy_savings,easy_current,medium_savings,medium_current,hard_savings,hard_current",
            "graded: own-account transfer in 2, 4 or 6 steps")
DEEP_FAMILY(fam_rekyc_graded, rekyc_graded, TASK_KIND_SEQ, TASK_FAMILY_GRADED | TASK_FAMILY_CHANNELS, "easy,medium,hard",
            "graded: KYC status; re-KYC; profile, re-KYC and new address")
DEEP_FAMILY(fam_all_balances_comm, all_balances_comm, TASK_KIND_HAPPY, TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS, "savings,current",
            "both accounts' balances said")
DEEP_FAMILY(fam_statement_too_long, statement_too_long, TASK_KIND_EDGE, TASK_FAMILY_CHANNELS,
            "email_savings,email_current,branch_savings,branch_current",
            "statement over more than a year: refuse")
