// env/bank/tools_cards.c: card, mandate and cheque tools of Navadhan Bank:
// list/block/unblock/reissue cards (debit reissue Rs 200 + GST, credit free,
// blocking free), limits and channel controls; NACH/UPI-autopay mandates;
// cheque books (25 free leaves per financial year on savings, then Rs 3 a
// leaf + GST), stop payment (Rs 100 + GST), cheque status and positive pay
// (mandatory from Rs 5,00,000, accepted from Rs 50,000).
#include <stdio.h>
#include <string.h>

#include "env/bank/tools_internal.h"

#define RUPEES(x) ((int64_t)(x) * 100)

typedef struct Card {
  char id[BANK_ID_MAX], type[16], status[16], account[BANK_ID_MAX], reason[24];
  int64_t credit_limit;
} Card;

static int load_card(ToolCtx *c, const char *id, Card *out) {
  memset(out, 0, sizeof *out);
  int found = tq_text(c, out->type, sizeof out->type, "SELECT card_type FROM cards WHERE card_id = ? AND customer_id = ?",
                      "ss", id, c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "card %s was not found for this customer", id);
  if (tq_text(c, out->status, sizeof out->status, "SELECT status FROM cards WHERE card_id = ?", "s", id) != 1 ||
      tq_text(c, out->account, sizeof out->account, "SELECT account_id FROM cards WHERE card_id = ?", "s", id) != 1 ||
      tq_text(c, out->reason, sizeof out->reason, "SELECT coalesce(block_reason, '') FROM cards WHERE card_id = ?", "s",
              id) != 1 ||
      tq_int(c, &out->credit_limit, "SELECT credit_limit_paise FROM cards WHERE card_id = ?", "s", id) != 1)
    return tool_internal(c);
  snprintf(out->id, sizeof out->id, "%s", id);
  return 0;
}

static int list_cards(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT card_id, card_type, network, 'XXXX XXXX XXXX ' || last4 AS card_number, expiry,"
                           " status, block_reason, account_id, atm_limit_paise, pos_limit_paise, online_limit_paise,"
                           " credit_limit_paise, atm_enabled, pos_enabled, online_enabled, contactless_enabled,"
                           " international_enabled FROM cards WHERE customer_id = ? ORDER BY card_id",
                        "s", c->ep->customer_id);
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "cards", rows);
  return 0;
}

static int block_card(ToolCtx *c) {
  Card card;
  if (load_card(c, arg_text(c, "card_id"), &card) != 0) return -1;
  const char *reason = arg_text(c, "reason");
  if (strcmp(card.status, "hotlisted") == 0 || strcmp(card.status, "replaced") == 0)
    return tool_error(c, "card %s is already %s", card.id, card.status);
  int permanent = strcmp(reason, "temporary") != 0 && strcmp(reason, "damaged") != 0;
  const char *status = permanent ? "hotlisted" : "blocked";
  if (tq_exec(c, "UPDATE cards SET status = ?, block_reason = ? WHERE card_id = ?", "sss", status, reason, card.id))
    return -1;
  put_text(c, "card_id", card.id);
  put_text(c, "status", status);
  put_text(c, "reason", reason);
  put_rupees(c, "charge", 0);
  put_text(c, "note", permanent ? "permanently blocked; a replacement needs reissue_card"
                                : "blocked; unblock_card restores a temporarily blocked card");
  return 0;
}

static int unblock_card(ToolCtx *c) {
  Card card;
  if (load_card(c, arg_text(c, "card_id"), &card) != 0) return -1;
  if (strcmp(card.status, "blocked") != 0 || strcmp(card.reason, "temporary") != 0)
    return tool_error(c, "only a temporarily blocked card can be unblocked (card %s is %s%s%s)", card.id, card.status,
                      card.reason[0] ? ", reason " : "", card.reason);
  if (tq_exec(c, "UPDATE cards SET status = 'active', block_reason = NULL WHERE card_id = ?", "s", card.id)) return -1;
  put_text(c, "card_id", card.id);
  put_text(c, "status", "active");
  return 0;
}

static int reissue_card(ToolCtx *c) {
  Card card;
  if (load_card(c, arg_text(c, "card_id"), &card) != 0) return -1;
  if (strcmp(card.status, "blocked") != 0 && strcmp(card.status, "hotlisted") != 0)
    return tool_error(c, "card %s is %s; block it first (reason lost, stolen, damaged or suspected_fraud)", card.id,
                      card.status);
  int debit = strcmp(card.type, "debit") == 0;
  int64_t charge = 0, gst = 0;
  if (charge_for(c, debit ? "debit_card_reissue" : "credit_card_reissue", 0, &charge, &gst) != 0) return -1;
  Account acct;
  if (load_account(c, card.account, &acct) != 0 || require_debitable(c, &acct, charge + gst) != 0) return -1;
  if (require_confirmation(c, charge + gst, "a debit card reissue") != 0) return -1;
  char id[BANK_ID_MAX], last4[8], expiry[8];
  if (new_id(c, "card", id) != 0) return -1;
  // The new card number's last digits come from its id: deterministic.
  size_t n = strlen(id);
  snprintf(last4, sizeof last4, "%s", n >= 4 ? id + n - 4 : "0000");
  int y, m, d;
  bank_civil_from_days(c->today_days, &y, &m, &d);
  snprintf(expiry, sizeof expiry, "%02d/%02d", m, (y + 5) % 100);
  if (tq_exec(c, "INSERT INTO cards SELECT ?, customer_id, account_id, card_type, network, ?, ?, 'active', NULL,"
                 " atm_limit_paise, pos_limit_paise, online_limit_paise, credit_limit_paise, atm_enabled, pos_enabled,"
                 " online_enabled, contactless_enabled, international_enabled, NULL, ? FROM cards WHERE card_id = ?",
              "sssss", id, last4, expiry, c->today, card.id) != 0 ||
      tq_exec(c, "UPDATE cards SET status = 'replaced', replaced_by = ? WHERE card_id = ?", "ss", id, card.id) != 0 ||
      post_entry(c, acct.id, 0, charge + gst, "charge", "Debit card reissue fee incl. GST", id, NULL) != 0)
    return -1;
  put_text(c, "old_card_id", card.id);
  put_text(c, "new_card_id", id);
  put_text(c, "card_number_last4", last4);
  put_text(c, "expiry", expiry);
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  put_text(c, "delivery", "dispatched to the registered address within 7 working days");
  return 0;
}

static int update_card_limits(ToolCtx *c) {
  Card card;
  if (load_card(c, arg_text(c, "card_id"), &card) != 0) return -1;
  if (strcmp(card.status, "active") != 0) return tool_error(c, "card %s is %s", card.id, card.status);
  static const char *names[3] = {"atm_limit", "pos_limit", "online_limit"};
  static const char *columns[3] = {"atm_limit_paise", "pos_limit_paise", "online_limit_paise"};
  int debit = strcmp(card.type, "debit") == 0, given = 0;
  for (int i = 0; i < 3; i++) {
    if (!arg_present(c, names[i])) continue;
    given++;
    int64_t value = arg_paise(c, names[i]);
    int64_t cap = debit ? (i == 0 ? RUPEES(100000) : RUPEES(500000)) : card.credit_limit;
    if (value > cap) {
      char text[40];
      bank_format_inr(cap, text);
      return tool_error(c, "%s can be at most %s for this card", names[i], text);
    }
    char sql[96];
    snprintf(sql, sizeof sql, "UPDATE cards SET %s = ? WHERE card_id = ?", columns[i]);
    if (tq_exec(c, sql, "ls", value, card.id) != 0) return -1;
  }
  if (!given) return tool_error(c, "give at least one of atm_limit, pos_limit, online_limit");
  cJSON *row = NULL;
  if (tq_object(c, &row, "SELECT card_id, atm_limit_paise, pos_limit_paise, online_limit_paise FROM cards"
                         " WHERE card_id = ?", "s", card.id) != 1)
    return tool_internal(c);
  cJSON_Delete(c->result);
  c->result = row;
  return 0;
}

static int set_card_channel_controls(ToolCtx *c) {
  Card card;
  if (load_card(c, arg_text(c, "card_id"), &card) != 0) return -1;
  if (strcmp(card.status, "active") != 0) return tool_error(c, "card %s is %s", card.id, card.status);
  const char *channel = arg_text(c, "channel");
  char sql[96];
  // channel is one of the enum values (validated), never free text.
  snprintf(sql, sizeof sql, "UPDATE cards SET %s_enabled = ? WHERE card_id = ?", channel);
  if (tq_exec(c, sql, "is", arg_bool(c, "enabled"), card.id) != 0) return -1;
  put_text(c, "card_id", card.id);
  put_text(c, "channel", channel);
  put_bool(c, "enabled", arg_bool(c, "enabled"));
  return 0;
}

static int list_mandates(ToolCtx *c) {
  cJSON *rows = tq_rows(c, "SELECT mandate_id, mandate_type, merchant, max_amount_paise, frequency, account_id,"
                           " start_date, status, revoked_on FROM mandates WHERE customer_id = ? ORDER BY mandate_id",
                        "s", c->ep->customer_id);
  if (!rows) return -1;
  cJSON_AddItemToObject(c->result, "mandates", rows);
  return 0;
}

static int revoke_mandate(ToolCtx *c) {
  const char *id = arg_text(c, "mandate_id");
  char status[16];
  int found = tq_text(c, status, sizeof status, "SELECT status FROM mandates WHERE mandate_id = ? AND customer_id = ?",
                      "ss", id, c->ep->customer_id);
  if (found < 0) return -1;
  if (!found) return tool_error(c, "mandate %s was not found for this customer", id);
  if (strcmp(status, "active") != 0) return tool_error(c, "mandate %s is already %s", id, status);
  if (tq_exec(c, "UPDATE mandates SET status = 'revoked', revoked_on = ? WHERE mandate_id = ?", "ss", c->today, id))
    return -1;
  put_text(c, "mandate_id", id);
  put_text(c, "status", "revoked");
  put_text(c, "revoked_on", c->today);
  return 0;
}

static int request_cheque_book(ToolCtx *c) {
  Account acct;
  if (load_account(c, arg_text(c, "account_id"), &acct) != 0) return -1;
  if (strcmp(acct.status, "active") != 0) return tool_error(c, "account %s is %s", acct.id, acct.status);
  int leaves = (int)arg_int(c, "leaves", 25);
  if (leaves != 10 && leaves != 25 && leaves != 50) return tool_error(c, "leaves must be 10, 25 or 50");
  char fy[8];
  bank_financial_year(c->today_days, fy);
  int64_t used = 0, last = 0;
  if (tq_int(c, &used, "SELECT coalesce(sum(leaves), 0) FROM cheque_books WHERE account_id = ? AND financial_year = ?",
             "ss", acct.id, fy) < 0 ||
      tq_int(c, &last, "SELECT coalesce(max(cheque_number), 100000) FROM cheques WHERE account_id = ?", "s", acct.id) < 0)
    return -1;
  int64_t free_left = strcmp(acct.type, "savings") == 0 ? (used < 25 ? 25 - used : 0) : 0;
  int64_t chargeable = leaves > free_left ? leaves - free_left : 0;
  int64_t per_leaf = 0, gst_unused = 0;
  if (charge_for(c, "cheque_leaf", 0, &per_leaf, &gst_unused) != 0) return -1;
  int64_t charge = chargeable * per_leaf, gst = bank_gst(charge);
  if (require_debitable(c, &acct, charge + gst) != 0) return -1;
  if (require_confirmation(c, charge + gst, "this cheque book") != 0) return -1;
  char id[BANK_ID_MAX];
  if (new_id(c, "chequebook", id) != 0 ||
      tq_exec(c, "INSERT INTO cheque_books VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'dispatched')", "sssilssl", id,
              c->ep->customer_id, acct.id, leaves, last + 1, c->today, fy, charge + gst) != 0 ||
      tq_exec(c, "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?)"
                 " INSERT INTO cheques SELECT ?, ? + k, 'unused', NULL, NULL, NULL, 0, NULL FROM n",
              "isl", leaves, acct.id, last) != 0 ||
      post_entry(c, acct.id, 0, charge + gst, "charge", "Cheque book charge incl. GST", id, NULL) != 0)
    return -1;
  put_text(c, "request_id", id);
  put_int(c, "leaves", leaves);
  put_int(c, "first_cheque_number", last + 1);
  put_int(c, "last_cheque_number", last + leaves);
  put_int(c, "free_leaves_used", leaves - chargeable);
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  put_text(c, "status", "dispatched");
  return 0;
}

// The cheque's status; account ownership is checked first.
static int cheque_status(ToolCtx *c, Account *acct, char status[16]) {
  if (load_account(c, arg_text(c, "account_id"), acct) != 0) return -1;
  int found = tq_text(c, status, 16, "SELECT status FROM cheques WHERE account_id = ? AND cheque_number = ?", "sl",
                      acct->id, arg_int(c, "cheque_number", 0));
  if (found < 0) return -1;
  if (!found)
    return tool_error(c, "cheque %lld was not issued on account %s", (long long)arg_int(c, "cheque_number", 0), acct->id);
  return 0;
}

static int stop_cheque_payment(ToolCtx *c) {
  Account acct;
  char status[16];
  if (cheque_status(c, &acct, status) != 0) return -1;
  int64_t number = arg_int(c, "cheque_number", 0);
  if (strcmp(status, "unused") != 0 && strcmp(status, "issued") != 0)
    return tool_error(c, "cheque %lld is %s; only unused or issued cheques can be stopped", (long long)number, status);
  int64_t charge = 0, gst = 0;
  if (charge_for(c, "stop_payment", 0, &charge, &gst) != 0) return -1;
  if (require_debitable(c, &acct, charge + gst) != 0) return -1;
  if (require_confirmation(c, charge + gst, "stop payment") != 0) return -1;
  if (tq_exec(c, "UPDATE cheques SET status = 'stopped', stopped_on = ? WHERE account_id = ? AND cheque_number = ?",
              "ssl", c->today, acct.id, number) != 0 ||
      post_entry(c, acct.id, 0, charge + gst, "charge", "Stop payment charge incl. GST", NULL, NULL) != 0)
    return -1;
  put_text(c, "account_id", acct.id);
  put_int(c, "cheque_number", number);
  put_text(c, "status", "stopped");
  put_rupees(c, "charge", charge);
  put_rupees(c, "gst", gst);
  return 0;
}

static int get_cheque_status(ToolCtx *c) {
  Account acct;
  char status[16];
  if (cheque_status(c, &acct, status) != 0) return -1;
  cJSON *row = NULL;
  if (tq_object(c, &row, "SELECT account_id, cheque_number, status, amount_paise, payee, issue_date, positive_pay,"
                         " stopped_on FROM cheques WHERE account_id = ? AND cheque_number = ?",
                "sl", acct.id, arg_int(c, "cheque_number", 0)) != 1)
    return tool_internal(c);
  cJSON *flag = cJSON_GetObjectItem(row, "positive_pay");
  cJSON_ReplaceItemInObject(row, "positive_pay", cJSON_CreateBool(flag && flag->valuedouble != 0));
  cJSON_Delete(c->result);
  c->result = row;
  return 0;
}

static int submit_positive_pay(ToolCtx *c) {
  Account acct;
  char status[16];
  if (cheque_status(c, &acct, status) != 0) return -1;
  int64_t number = arg_int(c, "cheque_number", 0), amount = arg_paise(c, "amount");
  int64_t issue = arg_int(c, "issue_date", 0);
  if (strcmp(status, "unused") != 0 && strcmp(status, "issued") != 0)
    return tool_error(c, "cheque %lld is %s", (long long)number, status);
  if (amount < RUPEES(50000)) return tool_error(c, "positive pay is accepted for cheques of Rs 50,000 and above");
  if (issue > c->today_days) return tool_error(c, "issue_date is in the future (today is %s)", c->today);
  if (issue < c->today_days - 90) return tool_error(c, "a cheque older than 3 months is stale");
  if (tq_exec(c, "UPDATE cheques SET status = 'issued', amount_paise = ?, payee = ?, issue_date = ?, positive_pay = 1"
                 " WHERE account_id = ? AND cheque_number = ?",
              "lsssl", amount, arg_text(c, "payee_name"), arg_text(c, "issue_date"), acct.id, number) != 0)
    return -1;
  put_text(c, "account_id", acct.id);
  put_int(c, "cheque_number", number);
  put_rupees(c, "amount", amount);
  put_text(c, "payee_name", arg_text(c, "payee_name"));
  put_bool(c, "positive_pay_registered", 1);
  put_bool(c, "mandatory_for_this_amount", amount >= RUPEES(500000));
  return 0;
}

#define P_CARD {"card_id", PT_STRING, 1, "Card id from list_cards.", NULL, 0, 0, 20}
#define P_CONFIRM                                                                                     \
  {"customer_confirmed", PT_BOOLEAN, 0, "True only after the customer agreed to the quoted charge.", \
   NULL, 0, 0, 0}
#define P_CHEQUE                                                               \
  {"account_id", PT_STRING, 1, "Account the cheque is drawn on.", NULL, 0, 0, 20}, \
  {"cheque_number", PT_INTEGER, 1, "Cheque number.", NULL, 1, 999999999, 0}

static const ToolDef TOOLS[] = {
    {"list_cards", "Lists the customer's debit and credit cards with status, limits and channel controls.", 0, 0, 1,
     list_cards, {{0}}},
    {"block_card",
     "Blocks a card, free. Lost, stolen or suspected fraud: permanent (hotlisted; reissue needed). Temporary or "
     "damaged: blocked.",
     1, 0, 1, block_card,
     {P_CARD, {"reason", PT_STRING, 1, "Why.", "lost|stolen|damaged|suspected_fraud|temporary", 0, 0, 0}}},
    {"unblock_card", "Unblocks a temporarily blocked card.", 1, 0, 1, unblock_card, {P_CARD}},
    {"reissue_card", "Replaces a blocked card with a new one: debit card Rs 200 + GST, credit card free.", 1, 1, 1,
     reissue_card, {P_CARD, P_CONFIRM}},
    {"update_card_limits",
     "Sets daily ATM, POS and online limits of an active card (debit: ATM up to Rs 1,00,000, POS/online up to Rs "
     "5,00,000; credit: up to the credit limit).",
     1, 0, 1, update_card_limits,
     {P_CARD, {"atm_limit", PT_AMOUNT, 0, "Daily ATM limit in rupees.", NULL, 0, 0, 0},
      {"pos_limit", PT_AMOUNT, 0, "Daily POS (shop) limit in rupees.", NULL, 0, 0, 0},
      {"online_limit", PT_AMOUNT, 0, "Daily online limit in rupees.", NULL, 0, 0, 0}}},
    {"set_card_channel_controls", "Turns one channel of an active card on or off.", 1, 0, 1, set_card_channel_controls,
     {P_CARD, {"channel", PT_STRING, 1, "Channel.", "atm|pos|online|contactless|international", 0, 0, 0},
      {"enabled", PT_BOOLEAN, 1, "true to allow, false to block the channel.", NULL, 0, 0, 0}}},
    {"list_mandates", "Lists the customer's NACH and UPI autopay mandates.", 0, 0, 1, list_mandates, {{0}}},
    {"revoke_mandate", "Revokes an active mandate so no further debits happen.", 1, 0, 1, revoke_mandate,
     {{"mandate_id", PT_STRING, 1, "Mandate id.", NULL, 0, 0, 20}}},
    {"request_cheque_book",
     "Orders a cheque book: 25 leaves per financial year free on savings accounts, then Rs 3 a leaf + GST.", 1, 1, 1,
     request_cheque_book,
     {{"account_id", PT_STRING, 1, "Account.", NULL, 0, 0, 20},
      {"leaves", PT_INTEGER, 0, "Leaves: 10, 25 (default) or 50.", NULL, 10, 50, 0}, P_CONFIRM}},
    {"stop_cheque_payment", "Stops payment of an unused or issued cheque: Rs 100 + GST per instrument.", 1, 1, 1,
     stop_cheque_payment, {P_CHEQUE, P_CONFIRM}},
    {"get_cheque_status", "Returns the status of a cheque (unused, issued, cleared, stopped, returned).", 0, 0, 1,
     get_cheque_status, {P_CHEQUE}},
    {"submit_positive_pay",
     "Registers a cheque's details for positive pay (mandatory from Rs 5,00,000, accepted from Rs 50,000).", 1, 0, 1,
     submit_positive_pay,
     {P_CHEQUE, {"amount", PT_AMOUNT, 1, "Cheque amount in rupees.", NULL, 0, 0, 0},
      {"payee_name", PT_STRING, 1, "Payee as written on the cheque.", NULL, 0, 0, 60},
      {"issue_date", PT_DATE, 1, "Date on the cheque.", NULL, 0, 0, 0}}},
};

const ToolArea bank_area_cards = {"cards, mandates and cheques", TOOLS, (int)(sizeof TOOLS / sizeof TOOLS[0])};
