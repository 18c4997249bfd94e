// env/bank/tools_services.c: knowledge retrieval, the service-charge card,
// service requests and the hand-off to a human, insurance policies and
// claims, government schemes (PMJJBY, PMSBY, APY) and TDS (certificate,
// Form 15G/15H) of Navadhan Bank (a fictional bank).
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"
#include "env/knowledge.h"

#define KB_MAX_RESULTS 10

static int search_knowledge_base(ToolCtx *c) {
  if (!c->ep->kb) return tool_error(c, "the knowledge base is not available in this episode");
  int k = (int)arg_int(c, "top_k", 3), indices[KB_MAX_RESULTS];
  double scores[KB_MAX_RESULTS];
  // The schema bounds top_k already; clamp again because overrunning the
  // arrays would be a memory error, not a wrong answer.
  k = k < 1 ? 1 : k > KB_MAX_RESULTS ? KB_MAX_RESULTS : k;
  FimiError err = {0};
  int n = kb_search(c->ep->kb, arg_text(c, "query"), k, indices, scores, &err);
  if (n < 0) return tool_error(c, "search failed: %s", err.message);
  cJSON *results = cJSON_AddArrayToObject(c->result, "passages");
  for (int i = 0; i < n; i++) {
    const KbPassage *p = kb_passage(c->ep->kb, indices[i]);
    if (!p) continue;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "doc_id", p->doc_id ? p->doc_id : "");
    cJSON_AddStringToObject(row, "title", p->title ? p->title : "");
    cJSON_AddStringToObject(row, "date", p->date ? p->date : "");
    cJSON_AddStringToObject(row, "section", p->section ? p->section : "");
    cJSON_AddStringToObject(row, "text", p->text ? p->text : "");
    cJSON_AddItemToArray(results, row);
  }
  if (n == 0) put_text(c, "note", "no passage matched; rephrase the query");
  return 0;
}

static int get_service_charges(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT charge_code, description, amount_paise, percent_bp, min_paise, max_paise,"
                           " gst_applies FROM service_charges ORDER BY charge_code", "");
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "charges", rows);
  put_int(c, "gst_percent", BANK_GST_PERCENT);
  return 0;
}

static int create_service_request(ToolCtx *c) {
  const char *account = arg_text(c, "account_id");
  Account acct;
  if (account && load_account(c, account, &acct) != 0) return -1;
  char id[BANK_ID_MAX];
  if (new_id(c, "request", id) != 0 ||
      tq_exec(c, "INSERT INTO service_requests VALUES (?, ?, ?, ?, ?, ?, 'open', NULL)", "ssssss", id,
              c->ep->customer_id, arg_text(c, "category"), account, arg_text(c, "description"), c->today) != 0)
    return -1;
  put_text(c, "request_id", id);
  put_text(c, "status", "open");
  put_text(c, "created_on", c->today);
  put_text(c, "expected_resolution", "within 7 working days");
  return 0;
}

static int get_service_request_status(ToolCtx *c) {
  return tq_result_owned_row(c,
                             "SELECT request_id, category, account_id, description, created_on, status, resolution"
                             " FROM service_requests WHERE request_id = ? AND customer_id = ?",
                             "request_id", "service request");
}

static int transfer_to_human_agent(ToolCtx *c) {
  char id[BANK_ID_MAX] = "";
  if (c->ep->customer_id[0] &&
      (new_id(c, "request", id) != 0 ||
       tq_exec(c, "INSERT INTO service_requests VALUES (?, ?, 'human_transfer', NULL, ?, ?, 'open', NULL)", "ssss", id,
               c->ep->customer_id, arg_text(c, "reason"), c->today) != 0))
    return -1;
  c->ep->transferred_to_human = 1;
  put_bool(c, "transferred", 1);
  put_text(c, "request_id", id[0] ? id : NULL);
  put_text(c, "message", "A human agent will join the conversation shortly.");
  return 0;
}

static int list_insurance_policies(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT policy_id, policy_type, insurer, sum_assured_paise, annual_premium_paise,"
                           " start_date, end_date, status, nominee FROM insurance_policies WHERE customer_id = ?"
                           " ORDER BY policy_id", "s", c->ep->customer_id);
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "policies", rows);
  return 0;
}

static int file_insurance_claim(ToolCtx *c) {
  const char *policy = arg_text(c, "policy_id");
  char status[16], start[11], end[11];
  int64_t sum_assured = 0, amount = arg_paise(c, "claim_amount");
  int found = tq_text(c, status, sizeof status, "SELECT status FROM insurance_policies WHERE policy_id = ?"
                      " AND customer_id = ?", "ss", policy, c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "policy %s was not found for this customer", policy);
  if (tq_text(c, start, sizeof start, "SELECT start_date FROM insurance_policies WHERE policy_id = ?", "s", policy) != 1 ||
      tq_text(c, end, sizeof end, "SELECT end_date FROM insurance_policies WHERE policy_id = ?", "s", policy) != 1 ||
      tq_int(c, &sum_assured, "SELECT sum_assured_paise FROM insurance_policies WHERE policy_id = ?", "s", policy) != 1)
    return tool_internal(c);
  const char *incident = arg_text(c, "incident_date");
  if (strcmp(status, "active") != 0) return tool_error(c, "policy %s is %s; claims need an active policy", policy, status);
  if (strcmp(incident, c->today) > 0) return tool_error(c, "incident_date is in the future (today is %s)", c->today);
  if (strcmp(incident, start) < 0 || strcmp(incident, end) > 0)
    return tool_error(c, "the incident date is outside the policy period %s to %s", start, end);
  if (amount > sum_assured) return tool_error(c, "the claim exceeds the sum assured");
  char id[BANK_ID_MAX];
  if (new_id(c, "claim", id) != 0 ||
      tq_exec(c, "INSERT INTO insurance_claims VALUES (?, ?, ?, ?, ?, ?, ?, 'registered')", "sssls" "ss", id, policy,
              c->ep->customer_id, amount, incident, c->today, arg_text(c, "description")) != 0)
    return -1;
  put_text(c, "claim_id", id);
  put_text(c, "policy_id", policy);
  put_rupees(c, "claim_amount", amount);
  put_text(c, "status", "registered");
  put_text(c, "next_step", "the insurer's surveyor contacts the customer within 3 working days");
  return 0;
}

static int get_claim_status(ToolCtx *c) {
  return tq_result_owned_row(c,
                             "SELECT claim_id, policy_id, claim_amount_paise, incident_date, filed_on, status"
                             " FROM insurance_claims WHERE claim_id = ? AND customer_id = ?",
                             "claim_id", "claim");
}

typedef struct SchemeCheck {
  int eligible;
  int64_t premium, cover;
  char name[80], reasons[400];
} SchemeCheck;

static void scheme_reason(SchemeCheck *s, const char *text) {
  size_t used = strlen(s->reasons);
  snprintf(s->reasons + used, sizeof s->reasons - used, "%s%s", used ? "; " : "", text);
  s->eligible = 0;
}

static int check_scheme(ToolCtx *c, const char *code, SchemeCheck *s) {
  memset(s, 0, sizeof *s);
  s->eligible = 1;
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  int64_t min_age = 0, max_age = 0, enrolled = 0, savings = 0;
  if (tq_text(c, s->name, sizeof s->name, "SELECT name FROM schemes WHERE scheme_code = ?", "s", code) != 1 ||
      tq_int(c, &min_age, "SELECT min_age FROM schemes WHERE scheme_code = ?", "s", code) != 1 ||
      tq_int(c, &max_age, "SELECT max_age FROM schemes WHERE scheme_code = ?", "s", code) != 1 ||
      tq_int(c, &s->premium, "SELECT annual_premium_paise FROM schemes WHERE scheme_code = ?", "s", code) != 1 ||
      tq_int(c, &s->cover, "SELECT cover_paise FROM schemes WHERE scheme_code = ?", "s", code) != 1 ||
      tq_int(c, &enrolled, "SELECT count(*) FROM scheme_enrolments WHERE customer_id = ? AND scheme_code = ?"
                           " AND status = 'active'", "ss", cust.id, code) != 1 ||
      tq_int(c, &savings, "SELECT count(*) FROM accounts WHERE customer_id = ? AND account_type = 'savings'"
                          " AND status = 'active'", "s", cust.id) != 1)
    return tool_internal(c);
  char text[96];
  if (cust.age < min_age || cust.age > max_age) {
    snprintf(text, sizeof text, "age %d is outside %lld-%lld", cust.age, (long long)min_age, (long long)max_age);
    scheme_reason(s, text);
  }
  if (enrolled) scheme_reason(s, "already enrolled");
  if (!savings) scheme_reason(s, "needs an active savings account");
  if (strcmp(code, "apy") == 0 && cust.income_tax_payer) scheme_reason(s, "income-tax payers cannot join APY");
  if (strcmp(cust.kyc_status, "verified") != 0 || cust.rekyc_due_days < c->today_days)
    scheme_reason(s, "KYC is not current");
  return 0;
}

static int check_scheme_eligibility(ToolCtx *c) {
  SchemeCheck s;
  const char *code = arg_text(c, "scheme_code");
  if (check_scheme(c, code, &s) != 0) return -1;
  put_text(c, "scheme_code", code);
  put_text(c, "scheme_name", s.name);
  put_bool(c, "eligible", s.eligible);
  if (!s.eligible) put_text(c, "reasons", s.reasons);
  put_rupees(c, "annual_premium", s.premium);
  if (s.cover) put_rupees(c, "cover", s.cover);
  return 0;
}

static int enroll_scheme(ToolCtx *c) {
  SchemeCheck s;
  Account acct;
  const char *code = arg_text(c, "scheme_code");
  if (check_scheme(c, code, &s) != 0) return -1;
  if (!s.eligible) return tool_error(c, "not eligible for %s: %s", s.name, s.reasons);
  if (load_account(c, arg_text(c, "account_id"), &acct) != 0) return -1;
  if (strcmp(acct.type, "savings") != 0) return tool_error(c, "schemes are linked to a savings account");
  int apy = strcmp(code, "apy") == 0;
  int64_t pension = arg_int(c, "apy_monthly_pension", 0);
  if (apy && pension != 1000 && pension != 2000 && pension != 3000 && pension != 4000 && pension != 5000)
    return tool_error(c, "APY needs apy_monthly_pension: 1000, 2000, 3000, 4000 or 5000");
  if (require_debitable(c, &acct, s.premium) != 0) return -1;
  if (require_confirmation(c, s.premium, "the scheme premium (auto-debited every year)") != 0) return -1;
  char id[BANK_ID_MAX], details[64] = "";
  if (apy) snprintf(details, sizeof details, "monthly pension Rs %lld", (long long)pension);
  if (new_id(c, "enrolment", id) != 0 ||
      tq_exec(c, "INSERT INTO scheme_enrolments VALUES (?, ?, ?, ?, ?, 'active', ?)", "ssssss", id, c->ep->customer_id,
              code, acct.id, c->today, apy ? details : NULL) != 0 ||
      post_entry(c, acct.id, 0, s.premium, "auto_debit", s.name, id, NULL) != 0)
    return -1;
  put_text(c, "enrolment_id", id);
  put_text(c, "scheme_name", s.name);
  put_rupees(c, "premium_debited", s.premium);
  if (s.cover) put_rupees(c, "cover", s.cover);
  if (apy) put_int(c, "monthly_pension", pension);
  return 0;
}

// "2025-26": the second part must follow the first.
static int valid_fy(const char *fy) {
  if (strlen(fy) != 7 || fy[4] != '-') return 0;
  for (int i = 0; i < 7; i++)
    if (i != 4 && (fy[i] < '0' || fy[i] > '9')) return 0;
  int start = (fy[0] - '0') * 1000 + (fy[1] - '0') * 100 + (fy[2] - '0') * 10 + (fy[3] - '0');
  int end = (fy[5] - '0') * 10 + (fy[6] - '0');
  return (start + 1) % 100 == end;
}

static int get_tds_certificate(ToolCtx *c) {
  const char *fy = arg_text(c, "financial_year");
  char current[8];
  bank_financial_year(c->today_days, current);
  if (!valid_fy(fy)) return tool_error(c, "financial_year must look like \"2025-26\"");
  if (strcmp(fy, current) > 0) return tool_error(c, "financial year %s has not started", fy);
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  cJSON *rows = tq_rows(c, "SELECT deposit_id, interest_paise, tds_paise FROM tds_records WHERE customer_id = ?"
                           " AND financial_year = ? ORDER BY deposit_id", "ss", cust.id, fy);
  if (!rows) return -1;
  int64_t interest = 0, tds = 0;
  if (tq_int(c, &interest, "SELECT coalesce(sum(interest_paise), 0) FROM tds_records WHERE customer_id = ?"
                           " AND financial_year = ?", "ss", cust.id, fy) != 1 ||
      tq_int(c, &tds, "SELECT coalesce(sum(tds_paise), 0) FROM tds_records WHERE customer_id = ?"
                      " AND financial_year = ?", "ss", cust.id, fy) != 1) {
    cJSON_Delete(rows);
    return tool_internal(c);
  }
  char form[8] = "";
  if (tq_text(c, form, sizeof form, "SELECT form_type FROM tax_forms WHERE customer_id = ? AND financial_year = ?",
              "ss", cust.id, fy) < 0) {
    cJSON_Delete(rows);
    return -1;
  }
  put_text(c, "financial_year", fy);
  put_text(c, "certificate", "Form 16A");
  put_bool(c, "pan_on_file", cust.pan[0] != 0);
  cJSON_AddItemToObject(c->result, "deposits", rows);
  put_rupees(c, "total_interest", interest);
  put_rupees(c, "total_tds", tds);
  put_text(c, "form_15g_15h_on_file", form[0] ? form : NULL);
  put_text(c, "tds_rule", "10% when deposit interest in the year exceeds Rs 50,000 (Rs 1,00,000 for senior citizens);"
                          " 20% without PAN; none with a valid Form 15G/15H");
  return 0;
}

static int submit_form_15g_15h(ToolCtx *c) {
  const char *fy = arg_text(c, "financial_year"), *form = arg_text(c, "form_type");
  char current[8];
  bank_financial_year(c->today_days, current);
  if (!valid_fy(fy) || strcmp(fy, current) != 0)
    return tool_error(c, "Form 15G/15H can be submitted only for the current financial year %s", current);
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  if (!cust.pan[0]) return tool_error(c, "Form 15G/15H needs a PAN on record; without PAN, TDS is 20%%");
  int senior = cust.age >= 60;
  if (senior && strcmp(form, "15G") == 0) return tool_error(c, "customers aged 60 or more submit Form 15H, not 15G");
  if (!senior && strcmp(form, "15H") == 0) return tool_error(c, "Form 15H is for customers aged 60 or more; use 15G");
  int64_t existing = 0;
  if (tq_int(c, &existing, "SELECT count(*) FROM tax_forms WHERE customer_id = ? AND financial_year = ?", "ss", cust.id,
             fy) < 0)
    return -1;
  if (existing) return tool_error(c, "a Form 15G/15H is already on file for %s", fy);
  char id[BANK_ID_MAX];
  if (new_id(c, "form", id) != 0 ||
      tq_exec(c, "INSERT INTO tax_forms VALUES (?, ?, ?, ?, ?, ?, 'accepted')", "sssssl", id, cust.id, fy, form,
              c->today, arg_paise(c, "estimated_total_income")) != 0)
    return -1;
  put_text(c, "form_id", id);
  put_text(c, "form_type", form);
  put_text(c, "financial_year", fy);
  put_text(c, "status", "accepted");
  put_text(c, "effect", "no TDS on deposit interest for the rest of the financial year");
  return 0;
}

#define P_CONFIRM                                                                                      \
  {"customer_confirmed", PT_BOOLEAN, 0, "True only after the customer agreed to the quoted premium.", \
   NULL, 0, 0, 0}

static const ToolDef TOOLS[] = {
    {"search_knowledge_base",
     "Searches vetted banking documents (RBI rules, scheme documents, Navadhan Bank product terms); every passage "
     "carries its source and date.",
     0, 0, 0, search_knowledge_base,
     {{"query", PT_STRING, 1, "What to look up.", NULL, 0, 0, 300},
      {"top_k", PT_INTEGER, 0, "Number of passages (default 3).", NULL, 1, KB_MAX_RESULTS, 0}}},
    {"get_service_charges", "Returns Navadhan Bank's schedule of service charges (GST 18% where marked).", 0, 0, 0,
     get_service_charges, {{0}}},
    {"create_service_request", "Raises a service request or complaint for the customer.", 1, 0, 1,
     create_service_request,
     {{"category", PT_STRING, 1, "Area.", "account|card|loan|deposit|cheque|insurance|complaint|other", 0, 0, 0},
      {"description", PT_STRING, 1, "What the customer needs.", NULL, 0, 0, 300},
      {"account_id", PT_STRING, 0, "Related account, if any.", NULL, 0, 0, 20}}},
    {"get_service_request_status", "Returns the status of a service request.", 0, 0, 1, get_service_request_status,
     {{"request_id", PT_STRING, 1, "Service request id.", NULL, 0, 0, 20}}},
    {"transfer_to_human_agent",
     "Hands the conversation to a human agent (out-of-scope requests, locked verification, complaints needing a "
     "person).",
     1, 0, 0, transfer_to_human_agent,
     {{"reason", PT_STRING, 1, "Why a human is needed.", NULL, 0, 0, 300}}},
    {"list_insurance_policies", "Lists the customer's insurance policies.", 0, 0, 1, list_insurance_policies, {{0}}},
    {"file_insurance_claim", "Registers a claim on an active policy for an incident within the policy period.", 1, 0,
     1, file_insurance_claim,
     {{"policy_id", PT_STRING, 1, "Policy id.", NULL, 0, 0, 20},
      {"claim_amount", PT_AMOUNT, 1, "Amount claimed in rupees.", NULL, 0, 0, 0},
      {"incident_date", PT_DATE, 1, "Date of the incident.", NULL, 0, 0, 0},
      {"description", PT_STRING, 1, "What happened.", NULL, 0, 0, 300}}},
    {"get_claim_status", "Returns the status of an insurance claim.", 0, 0, 1, get_claim_status,
     {{"claim_id", PT_STRING, 1, "Claim id.", NULL, 0, 0, 20}}},
    {"check_scheme_eligibility",
     "Checks eligibility for a government scheme: PMJJBY (life, 18-50, Rs 436/yr), PMSBY (accident, 18-70, Rs "
     "20/yr), APY (pension, 18-40, not an income-tax payer).",
     0, 0, 1, check_scheme_eligibility,
     {{"scheme_code", PT_STRING, 1, "Scheme.", "pmjjby|pmsby|apy", 0, 0, 0}}},
    {"enroll_scheme", "Enrols the customer in a scheme linked to a savings account; the annual premium is debited.", 1,
     1, 1, enroll_scheme,
     {{"scheme_code", PT_STRING, 1, "Scheme.", "pmjjby|pmsby|apy", 0, 0, 0},
      {"account_id", PT_STRING, 1, "Savings account for the auto-debit.", NULL, 0, 0, 20},
      {"apy_monthly_pension", PT_INTEGER, 0, "APY only: pension chosen (1000-5000 in steps of 1000).", NULL, 1000,
       5000, 0},
      P_CONFIRM}},
    {"get_tds_certificate",
     "Returns the TDS certificate (Form 16A) data for a financial year: interest per deposit and tax deducted.", 0, 0,
     1, get_tds_certificate, {{"financial_year", PT_STRING, 1, "Financial year, e.g. \"2025-26\".", NULL, 0, 0, 7}}},
    {"submit_form_15g_15h",
     "Records Form 15G (below 60) or 15H (60 and above) for the current financial year so no TDS is deducted; needs "
     "a PAN.",
     1, 0, 1, submit_form_15g_15h,
     {{"financial_year", PT_STRING, 1, "Current financial year, e.g. \"2025-26\".", NULL, 0, 0, 7},
      {"form_type", PT_STRING, 1, "Form.", "15G|15H", 0, 0, 0},
      {"estimated_total_income", PT_AMOUNT, 1, "Estimated total income for the year in rupees.", NULL, 0, 0, 0}}},
};

const ToolArea bank_area_services = {"knowledge, service requests, insurance, schemes and tax", TOOLS,
                                     (int)(sizeof TOOLS / sizeof TOOLS[0])};
