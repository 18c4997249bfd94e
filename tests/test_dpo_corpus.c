// tests/test_dpo_corpus.c: the conversation corpus (dpo/corpus.h) and its
// validation (dpo/corpus_check.h): oracle dialogs of several families pass
// and carry one action list per assistant turn; the second arithmetic
// implementation agrees with the bank's tool results and catches planted
// errors; planted bad dialogs are rejected for the right reason (wrong
// arithmetic, a value not in the data, a charged action without disclosure,
// a wrong call, a missing value, a wrong end); the coverage report counts.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpo/corpus.h"
#include "env/tasks/family.h"
#include "test_util.h"

static EnvWorld *world;
static TaskGenContext gen;

static int make_task(const char *family, uint64_t seed, Task *t) {
  FimiError err = {0};
  const TaskFamily *f = task_family_find(family);
  if (!f || task_generate(&gen, f, seed, t, &err) != 0) {
    fprintf(stderr, "cannot generate %s: %s\n", family, err.message);
    return -1;
  }
  return 0;
}

// The oracle dialog's row (NULL on failure or rejection).
static cJSON *row_of(const Task *t) {
  FimiError err = {0};
  cJSON *row = NULL;
  DpoCheckResult v;
  int rc = dpo_corpus_dialog(world, t, 7, ENV_CATALOG_FAMILY, &row, &v, &err);
  CHECK(rc == 0 && row, "%s: dialog %s: %s %s", t->id, err.message, dpo_reject_reason_name(v.reason), v.detail);
  return row;
}

static DpoRejectReason verdict_of(const Task *t, const cJSON *messages, TaskEnd end, char *detail) {
  FimiError err = {0};
  DpoCheckResult v;
  CHECK(dpo_check_dialog(t, messages, end, &v, &err) == 0, "check: %s", err.message);
  if (detail) strcpy(detail, v.detail);
  return v.reason;
}

static cJSON *messages_of(const cJSON *row) { return cJSON_GetObjectItemCaseSensitive((cJSON *)row, "messages"); }

// The index of the first message with role and content containing needle (or a call of tool needle).
static int find_message(const cJSON *messages, const char *role, const char *needle) {
  int i = 0;
  for (const cJSON *m = messages->child; m; m = m->next, i++) {
    if (strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, role) != 0) continue;
    char *text = cJSON_PrintUnformatted(m);
    int hit = strstr(text, needle) != NULL;
    free(text);
    if (hit) return i;
  }
  return -1;
}

static void test_oracle_dialogs_pass(void) {
  const char *families[] = {"balance_enquiry", "loan_emi_check", "fd_maturity_quote", "cheque_book",
                            "investment_advice", "claim_escalate", "rd_break_penalty", "tds_certificate"};
  DpoCoverage cov;
  FimiError err = {0};
  CHECK(dpo_coverage_init(&cov, &err) == 0, "coverage init");
  for (size_t i = 0; i < sizeof families / sizeof *families; i++) {
    Task t;
    if (make_task(families[i], 100 + i, &t) != 0) {
      CHECK(0, "task %s", families[i]);
      continue;
    }
    cJSON *row = row_of(&t);
    if (row) {
      int assistant = 0;
      for (const cJSON *m = messages_of(row)->child; m; m = m->next)
        assistant += !strcmp(cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring, "assistant");
      const cJSON *actions = cJSON_GetObjectItemCaseSensitive(row, "actions");
      CHECK(cJSON_GetArraySize(actions) == assistant, "%s: %d action turns for %d assistant turns", families[i],
            cJSON_GetArraySize(actions), assistant);
      DpoDialog d;
      CHECK(dpo_dialog_parse(row, "row", &d, &err) == 0, "%s: parse back: %s", families[i], err.message);
      CHECK(d.task.num_gold == t.num_gold && !strcmp(d.task.id, t.id), "%s: the task travels in the row", families[i]);
      dpo_dialog_free(&d);
      DpoCheckResult v = {0};
      dpo_check_dialog(&t, messages_of(row), task_end_from_name(cJSON_GetObjectItemCaseSensitive(row, "end")->valuestring), &v, &err);
      dpo_coverage_add(&cov, &t, row, &v, &err);
    }
    cJSON_Delete(row);
    task_free(&t);
  }
  dpo_coverage_reject(&cov, DPO_REJECT_ARITHMETIC);
  cJSON *j = dpo_coverage_json(&cov);
  CHECK(cJSON_GetObjectItemCaseSensitive(j, "dialogs")->valueint == 8, "coverage counts 8 dialogs");
  CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "rejected_by"), "arithmetic")->valueint == 1,
        "coverage counts the rejection by reason");
  CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "tools"), "calculate_emi") != NULL,
        "coverage lists calculate_emi");
  CHECK(cJSON_GetObjectItemCaseSensitive(j, "arithmetic_checked")->valueint >= 4, "arithmetic recomputed: %d values",
        cJSON_GetObjectItemCaseSensitive(j, "arithmetic_checked")->valueint);
  CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "end"), "out_of_scope") != NULL,
        "coverage counts an out-of-scope end");
  cJSON_Delete(j);
  dpo_coverage_free(&cov);
}

static void test_arithmetic(void) {
  char detail[256];
  int checked = 0;
  // EMI of Rs 5,00,000 at 10.5% for 60 months (P r g / (g - 1), g = (1 + r)^60, in Python): 10746.95.
  cJSON *args = cJSON_Parse("{\"principal_amount\":500000,\"tenure_months\":60,\"annual_rate_percent\":10.5}");
  cJSON *res = cJSON_Parse("{\"principal_amount\":500000,\"annual_rate_percent\":10.5,\"tenure_months\":60,"
                           "\"emi\":10746.95,\"total_payment\":644817,\"total_interest\":144817}");
  CHECK(dpo_check_arithmetic("calculate_emi", args, res, &checked, detail, sizeof detail) == 1 && checked == 3,
        "EMI worked out apart agrees (%s, %d checked)", detail, checked);
  cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(res, "emi"), 10746.97);  // 2 paise off
  CHECK(dpo_check_arithmetic("calculate_emi", args, res, NULL, detail, sizeof detail) == 0 && strstr(detail, "emi"),
        "a wrong EMI is caught: %s", detail);
  cJSON_Delete(res);
  // FD: Rs 1,00,000 at 7% for 365 days, quarterly: 100000 * (1.0175^4 - 1) = 7185.90.
  res = cJSON_Parse("{\"principal_amount\":100000,\"interest_rate_percent\":7,\"tenure_days\":365,"
                    "\"interest\":7185.9,\"maturity_amount\":107185.9}");
  CHECK(dpo_check_arithmetic("calculate_fd_maturity", NULL, res, &checked, detail, sizeof detail) == 1 && checked == 2,
        "FD worked out apart agrees (%s)", detail);
  cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(res, "maturity_amount"), 107186.9);
  CHECK(dpo_check_arithmetic("calculate_fd_maturity", NULL, res, NULL, detail, sizeof detail) == 0,
        "a wrong maturity amount is caught");
  cJSON_Delete(res);
  // Simple interest below 180 days: 50000 * 5% * 90 / 365 = 616.44.
  res = cJSON_Parse("{\"principal_amount\":50000,\"interest_rate_percent\":5,\"tenure_days\":90,\"interest\":616.44}");
  CHECK(dpo_check_arithmetic("calculate_fd_maturity", NULL, res, NULL, detail, sizeof detail) == 1, "simple interest");
  cJSON_Delete(res);
  // GST on a charge: 18% of 30 = 5.40; total payable.
  res = cJSON_Parse("{\"charge\":30,\"gst\":5.4}");
  CHECK(dpo_check_arithmetic("request_cheque_book", NULL, res, NULL, detail, sizeof detail) == 1, "GST agrees");
  cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(res, "gst"), 5.0);
  CHECK(dpo_check_arithmetic("request_cheque_book", NULL, res, NULL, detail, sizeof detail) == 0, "a wrong GST is caught");
  cJSON_Delete(res);
  // TDS: totals are the rows' sums.
  res = cJSON_Parse("{\"deposits\":[{\"deposit_id\":\"FD1\",\"interest\":60000,\"tds\":6000},"
                    "{\"deposit_id\":\"FD2\",\"interest\":1000,\"tds\":100}],\"total_interest\":61000,\"total_tds\":6100}");
  CHECK(dpo_check_arithmetic("get_tds_certificate", NULL, res, &checked, detail, sizeof detail) == 1 && checked == 2,
        "TDS totals agree");
  cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(res, "total_tds"), 6000);
  CHECK(dpo_check_arithmetic("get_tds_certificate", NULL, res, NULL, detail, sizeof detail) == 0, "a wrong TDS total");
  cJSON_Delete(res);
  cJSON_Delete(args);
}

// Replaces the "result" field `key` of the tool turn at index i with value.
static void plant_result_number(cJSON *messages, int i, const char *key, double delta) {
  cJSON *m = cJSON_GetArrayItem(messages, i);
  cJSON *turn = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
  cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(turn, "result"), key);
  cJSON_SetNumberValue(v, v->valuedouble + delta);
  char *text = cJSON_PrintUnformatted(turn);
  cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateString(text));
  free(text);
  cJSON_Delete(turn);
}

static void set_content(cJSON *messages, int i, const char *text) {
  cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetArrayItem(messages, i), "content", cJSON_CreateString(text));
}

static void test_planted_rejections(void) {
  Task emi, cheque, balance;
  if (make_task("loan_emi_check", 5, &emi) || make_task("cheque_book", 6, &cheque) ||
      make_task("balance_enquiry", 7, &balance)) {
    CHECK(0, "tasks");
    return;
  }
  char detail[400];
  cJSON *row = row_of(&emi);
  if (row) {
    cJSON *m = cJSON_Duplicate(messages_of(row), 1);
    int tool = find_message(m, "tool", "calculate_emi");
    CHECK(tool > 0, "the EMI dialog has a calculate_emi result");
    if (tool > 0) {
      plant_result_number(m, tool, "emi", 1.0);
      CHECK(verdict_of(&emi, m, emi.expected_end, detail) == DPO_REJECT_ARITHMETIC, "wrong EMI rejected: %s", detail);
    }
    cJSON_Delete(m);
    // A value that no turn holds, said in the summary.
    m = cJSON_Duplicate(messages_of(row), 1);
    int summary = find_message(m, "assistant", "Summary:");
    const char *old = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(m, summary), "content")->valuestring;
    char planted[2048];
    snprintf(planted, sizeof planted, "%s Your processing fee is Rs 4,321.", old);
    set_content(m, summary, planted);
    CHECK(verdict_of(&emi, m, emi.expected_end, detail) == DPO_REJECT_VALUE_NOT_IN_DATA && strstr(detail, "4321"),
          "a value not in the data rejected: %s", detail);
    // The summary without the values the task must communicate.
    set_content(m, summary, "Thank you for calling Navadhan Bank.");
    CHECK(verdict_of(&emi, m, emi.expected_end, detail) == DPO_REJECT_VALUE_MISSING, "missing value rejected: %s",
          detail);
    cJSON_Delete(m);
    CHECK(verdict_of(&emi, messages_of(row), TASK_END_TRANSFER, detail) == DPO_REJECT_WRONG_END, "wrong end: %s", detail);
    cJSON_Delete(row);
  }
  row = row_of(&cheque);
  if (row) {
    cJSON *m = cJSON_Duplicate(messages_of(row), 1);
    int ask = find_message(m, "assistant", "Do you confirm");
    CHECK(ask > 0, "the cheque-book dialog asks for consent");
    if (ask > 0) {
      // Drop the consent question and the customer's yes.
      cJSON_DeleteItemFromArray(m, ask);
      cJSON_DeleteItemFromArray(m, ask);
      CHECK(verdict_of(&cheque, m, cheque.expected_end, detail) == DPO_REJECT_NO_DISCLOSURE,
            "charged action without disclosure rejected: %s", detail);
    }
    cJSON_Delete(m);
    // The customer's words changed to a refusal: consent not given.
    m = cJSON_Duplicate(messages_of(row), 1);
    if (ask > 0) {
      set_content(m, ask + 1, "No, I do not want that.");
      CHECK(verdict_of(&cheque, m, cheque.expected_end, detail) == DPO_REJECT_NO_DISCLOSURE, "no consent: %s", detail);
    }
    cJSON_Delete(m);
    cJSON_Delete(row);
  }
  row = row_of(&balance);
  if (row) {
    cJSON *m = cJSON_Duplicate(messages_of(row), 1);
    int call = find_message(m, "assistant", "get_account_balance");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(m, call), "tool_calls"), 0),
                                         "function"),
        "arguments");
    cJSON_ReplaceItemInObjectCaseSensitive(args, "account_ids", cJSON_Parse("[\"SB0000000001\"]"));
    CHECK(verdict_of(&balance, m, balance.expected_end, detail) == DPO_REJECT_CALL_MISMATCH, "a wrong call: %s", detail);
    cJSON_Delete(m);
    // A broken shape.
    m = cJSON_Duplicate(messages_of(row), 1);
    cJSON_DeleteItemFromArray(m, 0);
    CHECK(verdict_of(&balance, m, balance.expected_end, detail) == DPO_REJECT_MALFORMED, "no system turn: %s", detail);
    cJSON_Delete(m);
    cJSON_Delete(row);
  }
  task_free(&emi);
  task_free(&cheque);
  task_free(&balance);
}

int main(void) {
  FimiError err = {0};
  if (env_world_create(&world, &err) != 0 || task_gen_context_init(&gen, 1, &err) != 0) {
    fprintf(stderr, "setup: %s\n", err.message);
    return 1;
  }
  test_oracle_dialogs_pass();
  test_arithmetic();
  test_planted_rejections();
  task_gen_context_free(&gen);
  env_world_free(world);
  TEST_MAIN_END();
}
