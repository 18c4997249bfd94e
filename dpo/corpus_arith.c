// dpo/corpus_arith.c: the checker's own arithmetic (dpo_check_arithmetic of
// dpo/corpus_check.h). Written from the published formulas of
// docs/bank-database.md, deliberately not by calling env/bank/money.c, so a
// bug in the bank's code shows up as a disagreement:
//   EMI       P r / (1 - (1 + r)^-n), r = annual % / 1200
//   FD        below 180 days P R d / 36500, else P ((1 + R/400)^(4d/365) - 1)
//   RD        sum over instalments of M ((1 + R/400)^(h/3) - 1), h the months
//             instalment k stays invested (tenure - k + 1)
//   GST       18% of a charge, to the paisa; total = amount + charge + GST
//   payouts   principal + interest; RD deposited + interest
//   EMI plan  total_payment = EMI n, total_interest = EMI n - P
//   TDS       totals = sums over the certificate's rows
// Amounts are rupees with two decimals in the tool output; everything is
// compared in paise, allowing 1 paisa for a different order of rounding.
#include "dpo/corpus_check.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

// A number named key in the result, else in the call's arguments.
static int number(const cJSON *result, const cJSON *args, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(result, key);
  if (!cJSON_IsNumber(v)) v = cJSON_GetObjectItemCaseSensitive(args, key);
  if (!cJSON_IsNumber(v)) return 0;
  *out = v->valuedouble;
  return 1;
}

static long long paise(double rupees) { return llround(rupees * 100.0); }

typedef struct Arith {
  int checked;
  char *detail;
  size_t detail_size;
  int failed;
} Arith;

// Compares a recomputed amount (paise) with the tool's (rupees).
static void expect_paise(Arith *a, const char *field, double expected_paise, double found_rupees) {
  a->checked++;
  long long want = llround(expected_paise), got = paise(found_rupees);
  if (!a->failed && llabs(want - got) > 1) {
    a->failed = 1;
    snprintf(a->detail, a->detail_size, "%s: recomputed %.2f, tool says %.2f", field, (double)want / 100.0,
             found_rupees);
  }
}

static double emi_paise(double principal_paise, double rate_percent, double months) {
  double r = rate_percent / 1200.0;
  if (r == 0) return principal_paise / months;
  return principal_paise * r / (1.0 - exp(-months * log1p(r)));
}

static double fd_interest_paise(double principal_paise, double rate_percent, double days) {
  if (days < 180) return principal_paise * rate_percent * days / 36500.0;
  return principal_paise * expm1(4.0 * days / 365.0 * log1p(rate_percent / 400.0));
}

static double rd_interest_paise(double monthly_paise, double rate_percent, int months) {
  double sum = 0;
  for (int held = months; held >= 1; held--) sum += monthly_paise * expm1(held / 3.0 * log1p(rate_percent / 400.0));
  return sum;
}

static void check_emi(Arith *a, const cJSON *res, const cJSON *args) {
  double emi, rate, months, p;
  if (!number(res, args, "emi", &emi) || emi == 0) return;
  if (!number(res, args, "tenure_months", &months) || months <= 0) return;
  if (!number(res, args, "annual_rate_percent", &rate) && !number(res, args, "interest_rate_percent", &rate)) return;
  if (!number(res, args, "principal_amount", &p) && !number(res, args, "amount", &p)) return;
  double want = (double)llround(emi_paise((double)paise(p), rate, months));
  expect_paise(a, "emi", want, emi);
  double total;
  if (number(res, NULL, "total_payment", &total)) expect_paise(a, "total_payment", (double)paise(emi) * months, total);
  if (number(res, NULL, "total_interest", &total))
    expect_paise(a, "total_interest", (double)paise(emi) * months - (double)paise(p), total);
}

static void check_deposit(Arith *a, const cJSON *res, const cJSON *args) {
  double interest, maturity, rate, p, days, monthly, months, deposited;
  if (!number(res, NULL, "interest", &interest)) return;
  if (!number(res, NULL, "interest_rate_percent", &rate)) return;
  if (number(res, args, "monthly_amount", &monthly) && number(res, args, "tenure_months", &months)) {
    expect_paise(a, "interest", rd_interest_paise((double)paise(monthly), rate, (int)months), interest);
    if (number(res, NULL, "total_deposited", &deposited))
      expect_paise(a, "total_deposited", (double)paise(monthly) * months, deposited);
    if (number(res, NULL, "maturity_amount", &maturity))
      expect_paise(a, "maturity_amount", (double)paise(monthly) * months + (double)paise(interest), maturity);
    return;
  }
  if (!number(res, args, "principal_amount", &p) || !number(res, NULL, "tenure_days", &days)) return;
  expect_paise(a, "interest", fd_interest_paise((double)paise(p), rate, days), interest);
  if (number(res, NULL, "maturity_amount", &maturity))
    expect_paise(a, "maturity_amount", (double)(paise(p) + paise(interest)), maturity);
}

static void check_closure(Arith *a, const cJSON *res) {
  double payout, interest, base;
  if (!number(res, NULL, "payout_amount", &payout) || !number(res, NULL, "interest_paid", &interest)) return;
  if (number(res, NULL, "principal", &base) || number(res, NULL, "deposited", &base))
    expect_paise(a, "payout_amount", (double)(paise(base) + paise(interest)), payout);
  double rate, days;
  if (number(res, NULL, "principal", &base) && number(res, NULL, "applied_rate_percent", &rate) &&
      number(res, NULL, "days_run", &days))
    expect_paise(a, "interest_paid", fd_interest_paise((double)paise(base), rate, days), interest);
}

// GST on a charge; an object may hold several (charge/gst, processing_fee/_gst).
static void check_charges(Arith *a, const cJSON *obj, const cJSON *args) {
  double charge, gst, total, amount;
  if (number(obj, NULL, "charge", &charge) && number(obj, NULL, "gst", &gst)) {
    // GST applies to some charges only (docs/tools.md): a zero GST is not recomputed.
    if (gst != 0) expect_paise(a, "gst", (double)llround((double)paise(charge) * 0.18), gst);
    if (number(obj, NULL, "total_payable", &total) && number(obj, args, "amount", &amount))
      expect_paise(a, "total_payable", (double)(paise(amount) + paise(charge) + paise(gst)), total);
  }
  if (number(obj, NULL, "processing_fee", &charge) && number(obj, NULL, "processing_fee_gst", &gst))
    expect_paise(a, "processing_fee_gst", (double)llround((double)paise(charge) * 0.18), gst);
}

// A row's amount under `key` (rupees) or `key`_paise.
static int row_amount(const cJSON *row, const char *key, double *paise_out) {
  char k[64];
  double v;
  if (number(row, NULL, key, &v)) {
    *paise_out = (double)paise(v);
    return 1;
  }
  snprintf(k, sizeof k, "%s_paise", key);
  if (!number(row, NULL, k, &v)) return 0;
  *paise_out = v;
  return 1;
}

static void check_tds(Arith *a, const cJSON *res) {
  double total_tds, total_interest;
  if (!number(res, NULL, "total_tds", &total_tds)) return;
  for (const cJSON *arr = res->child; arr; arr = arr->next) {
    if (!cJSON_IsArray(arr)) continue;
    double tds = 0, interest = 0, v;
    int rows = 0;
    for (const cJSON *row = arr->child; row; row = row->next) {
      if (!row_amount(row, "tds", &v)) continue;
      tds += v;
      rows++;
      if (row_amount(row, "interest", &v)) interest += v;
    }
    if (!rows) continue;
    expect_paise(a, "total_tds", tds, total_tds);
    if (number(res, NULL, "total_interest", &total_interest)) expect_paise(a, "total_interest", interest, total_interest);
  }
}

int dpo_check_arithmetic(const char *tool, const cJSON *arguments, const cJSON *result, int *checked, char *detail,
                         size_t detail_size) {
  Arith a = {0, detail, detail_size, 0};
  if (detail_size) detail[0] = 0;
  if (cJSON_IsObject(result)) {
    check_emi(&a, result, arguments);
    check_deposit(&a, result, arguments);
    check_closure(&a, result);
    check_charges(&a, result, arguments);
    check_tds(&a, result);
  }
  if (a.failed && detail_size) {
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s: %s", tool ? tool : "?", detail);
    snprintf(detail, detail_size, "%s", tmp);
  }
  if (checked) *checked = a.checked;
  return !a.failed;
}
