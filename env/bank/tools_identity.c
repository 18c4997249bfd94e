// env/bank/tools_identity.c: identity and KYC tools of Navadhan Bank:
// verify_customer (authenticates the episode), get_customer_profile,
// get_kyc_status, submit_rekyc, update_address, update_contact.
// Re-KYC periods follow the RBI KYC Master Direction: every 2 years for high
// risk, 8 for medium, 10 for low risk customers.
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"

#define MAX_VERIFY_FAILURES 3

static int all_digits(const char *s, size_t len) {
  if (strlen(s) != len) return 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static int verify_customer(ToolCtx *c) {
  BankEpisode *ep = c->ep;
  const char *id = arg_text(c, "customer_id");
  if (ep->failed_verifications >= MAX_VERIFY_FAILURES)
    return tool_error(c, "verification is locked after %d failed attempts; transfer the customer to a human agent",
                      MAX_VERIFY_FAILURES);
  if (ep->customer_id[0] && strcmp(ep->customer_id, id) != 0)
    return tool_error(c, "another customer is already verified in this conversation");
  int64_t match = 0;
  int found = tq_int(c, &match,
                     "SELECT count(*) FROM customers WHERE customer_id = ? AND date_of_birth = ? AND mobile = ?",
                     "sss", id, arg_text(c, "date_of_birth"), arg_text(c, "registered_mobile"));
  if (found < 0) return -1;
  if (!match) {
    ep->failed_verifications++;
    // One message for an unknown id and for wrong details: no enumeration.
    return tool_error(c, "the details do not match our records (%d of %d attempts left)",
                      MAX_VERIFY_FAILURES - ep->failed_verifications, MAX_VERIFY_FAILURES);
  }
  snprintf(ep->customer_id, sizeof ep->customer_id, "%s", id);
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  put_bool(c, "verified", 1);
  put_text(c, "customer_id", cust.id);
  put_text(c, "name", cust.name);
  return 0;
}

static int get_customer_profile(ToolCtx *c) {
  cJSON *row = NULL;
  int found = tq_object(c, &row,
                        "SELECT customer_id, name, date_of_birth, gender, '******' || substr(mobile, 7) AS mobile,"
                        " email, address_line, city, pincode, pan IS NOT NULL AS pan_on_file, kyc_status,"
                        " risk_category, occupation, customer_since FROM customers WHERE customer_id = ?",
                        "s", c->ep->customer_id);
  if (found != 1) return found < 0 ? -1 : tool_error(c, "customer not found");
  cJSON_Delete(c->result);
  c->result = row;
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  put_int(c, "age", cust.age);
  put_bool(c, "senior_citizen", cust.age >= 60);
  cJSON_ReplaceItemInObject(c->result, "pan_on_file", cJSON_CreateBool(cust.pan[0] != 0));
  return 0;
}

static int get_kyc_status(ToolCtx *c) {
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  cJSON *row = NULL;
  if (tq_object(c, &row, "SELECT kyc_status, risk_category, last_kyc_date, rekyc_due_date FROM customers"
                         " WHERE customer_id = ?", "s", cust.id) != 1)
    return tool_internal(c);
  cJSON_Delete(c->result);
  c->result = row;
  int overdue = cust.rekyc_due_days < c->today_days;
  put_bool(c, "rekyc_overdue", overdue);
  put_bool(c, "kyc_current", !overdue && strcmp(cust.kyc_status, "verified") == 0);
  put_int(c, "days_until_rekyc_due", cust.rekyc_due_days - c->today_days);
  return 0;
}

static int rekyc_period_years(const char *risk) { return risk[0] == 'h' ? 2 : (risk[0] == 'm' ? 8 : 10); }

static int submit_rekyc(ToolCtx *c) {
  Customer cust;
  if (load_customer(c, &cust) != 0) return -1;
  int64_t days_left = cust.rekyc_due_days - c->today_days;
  if (strcmp(cust.kyc_status, "verified") == 0 && days_left > 90)
    return tool_error(c, "KYC is current until %s; re-KYC opens 90 days before the due date", cust.rekyc_due);
  const char *doc = arg_text(c, "document_type"), *last4 = arg_text(c, "document_last4");
  if (!all_digits(last4, 4) && strcmp(doc, "aadhaar") == 0)
    return tool_error(c, "document_last4 must be the last 4 digits of the Aadhaar number");
  char aadhaar[8] = "";
  if (tq_text(c, aadhaar, sizeof aadhaar, "SELECT aadhaar_last4 FROM customers WHERE customer_id = ?", "s",
              cust.id) != 1)
    return tool_internal(c);
  if (strcmp(doc, "aadhaar") == 0 && strcmp(aadhaar, last4) != 0)
    return tool_error(c, "the Aadhaar number does not match the one on record");
  int years = rekyc_period_years(cust.risk);
  char due[11];
  bank_date_format(bank_add_months(c->today_days, 12 * years), due);
  if (tq_exec(c, "UPDATE customers SET kyc_status = 'verified', last_kyc_date = ?, rekyc_due_date = ?"
                 " WHERE customer_id = ?", "sss", c->today, due, cust.id) != 0)
    return -1;
  char request[BANK_ID_MAX];
  if (new_id(c, "request", request) != 0) return -1;
  if (tq_exec(c, "INSERT INTO service_requests VALUES (?, ?, 'rekyc', NULL, ?, ?, 'completed', 'KYC updated')",
              "ssss", request, cust.id, doc, c->today) != 0)
    return -1;
  put_text(c, "kyc_status", "verified");
  put_text(c, "last_kyc_date", c->today);
  put_text(c, "rekyc_due_date", due);
  put_text(c, "request_id", request);
  return 0;
}

static int update_address(ToolCtx *c) {
  const char *pincode = arg_text(c, "pincode");
  if (!all_digits(pincode, 6) || pincode[0] == '0') return tool_error(c, "pincode must be 6 digits, not starting with 0");
  char request[BANK_ID_MAX];
  if (tq_exec(c, "UPDATE customers SET address_line = ?, city = ?, pincode = ? WHERE customer_id = ?", "ssss",
              arg_text(c, "address_line"), arg_text(c, "city"), pincode, c->ep->customer_id) != 0 ||
      new_id(c, "request", request) != 0 ||
      tq_exec(c, "INSERT INTO service_requests VALUES (?, ?, 'address_update', NULL, ?, ?, 'completed',"
                 " 'Address updated')", "ssss", request, c->ep->customer_id, arg_text(c, "proof_document"), c->today) != 0)
    return -1;
  put_bool(c, "updated", 1);
  put_text(c, "request_id", request);
  put_text(c, "address_line", arg_text(c, "address_line"));
  put_text(c, "city", arg_text(c, "city"));
  put_text(c, "pincode", pincode);
  return 0;
}

static int update_contact(ToolCtx *c) {
  const char *mobile = arg_text(c, "mobile"), *email = arg_text(c, "email");
  if (!mobile && !email) return tool_error(c, "give a new mobile number, a new email, or both");
  if (mobile && (!all_digits(mobile, 10) || mobile[0] < '6'))
    return tool_error(c, "mobile must be a 10-digit Indian mobile number starting with 6-9");
  if (email) {
    const char *at = strchr(email, '@');
    if (!at || at == email || !strchr(at, '.') || strchr(email, ' ') || strchr(at + 1, '@'))
      return tool_error(c, "email is not a valid address");
  }
  if (mobile && tq_exec(c, "UPDATE customers SET mobile = ? WHERE customer_id = ?", "ss", mobile, c->ep->customer_id))
    return -1;
  if (email && tq_exec(c, "UPDATE customers SET email = ? WHERE customer_id = ?", "ss", email, c->ep->customer_id))
    return -1;
  put_bool(c, "updated", 1);
  if (mobile) put_text(c, "mobile", mobile);
  if (email) put_text(c, "email", email);
  return 0;
}

static const ToolDef TOOLS[] = {
    {"verify_customer",
     "Verifies the caller's identity with their customer id, date of birth and registered mobile number. Must "
     "succeed before any tool that reads or changes the customer's data. Three failed attempts lock it.",
     0, 0, 0, verify_customer,
     {{"customer_id", PT_STRING, 1, "Customer id, e.g. NVC10001.", NULL, 0, 0, 16},
      {"date_of_birth", PT_DATE, 1, "Date of birth, YYYY-MM-DD.", NULL, 0, 0, 0},
      {"registered_mobile", PT_STRING, 1, "Registered 10-digit mobile number.", NULL, 0, 0, 10}}},
    {"get_customer_profile", "Returns the verified customer's profile: name, contact (masked), address, KYC and age.",
     0, 0, 1, get_customer_profile, {{0}}},
    {"get_kyc_status",
     "Returns KYC status, risk category, last KYC date, re-KYC due date and whether re-KYC is overdue.", 0, 0, 1,
     get_kyc_status, {{0}}},
    {"submit_rekyc",
     "Completes periodic re-KYC with an officially valid document when KYC is expired, pending or due within 90 "
     "days. Sets the next due date by risk category (high 2, medium 8, low 10 years).",
     1, 0, 1, submit_rekyc,
     {{"document_type", PT_STRING, 1, "Officially valid document used.", "aadhaar|passport|voter_id|driving_licence", 0,
       0, 0},
      {"document_last4", PT_STRING, 1, "Last 4 characters of the document number.", NULL, 0, 0, 4}}},
    {"update_address", "Updates the customer's communication address with a supporting document.", 1, 0, 1,
     update_address,
     {{"address_line", PT_STRING, 1, "House number and street.", NULL, 0, 0, 120},
      {"city", PT_STRING, 1, "City.", NULL, 0, 0, 40},
      {"pincode", PT_STRING, 1, "6-digit PIN code.", NULL, 0, 0, 6},
      {"proof_document", PT_STRING, 1, "Address proof.",
       "aadhaar|passport|voter_id|driving_licence|utility_bill", 0, 0, 0}}},
    {"update_contact", "Updates the registered mobile number and/or email address.", 1, 0, 1, update_contact,
     {{"mobile", PT_STRING, 0, "New 10-digit mobile number.", NULL, 0, 0, 10},
      {"email", PT_STRING, 0, "New email address.", NULL, 0, 0, 80}}},
};

const ToolArea bank_area_identity = {"identity and KYC", TOOLS, (int)(sizeof TOOLS / sizeof TOOLS[0])};
