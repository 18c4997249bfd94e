// env/bank/money.c: dates, paise and interest formulas (see bank_money.h).
#include "env/bank/money.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Civil-date <-> day-number conversion by the era decomposition of the
// Gregorian calendar (400-year cycles of 146097 days, years starting in March
// so the leap day is the last day of the year).
int64_t bank_days_from_civil(int year, int month, int day) {
  int64_t y = year - (month <= 2);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t mp = month > 2 ? month - 3 : month + 9;
  int64_t doy = (153 * mp + 2) / 5 + day - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void bank_civil_from_days(int64_t days, int *year, int *month, int *day) {
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int d = (int)(doy - (153 * mp + 2) / 5 + 1);
  int m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *year = (int)(yoe + era * 400 + (m <= 2));
  *month = m;
  *day = d;
}

static int days_in_month(int year, int month) {
  static const int lengths[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 ? 28 + leap : lengths[month - 1];
}

int bank_date_parse(const char *text, int64_t *days) {
  if (!text || strlen(text) != 10 || text[4] != '-' || text[7] != '-') return -1;
  for (int i = 0; i < 10; i++)
    if (i != 4 && i != 7 && (text[i] < '0' || text[i] > '9')) return -1;
  int y = (text[0] - '0') * 1000 + (text[1] - '0') * 100 + (text[2] - '0') * 10 + (text[3] - '0');
  int m = (text[5] - '0') * 10 + (text[6] - '0');
  int d = (text[8] - '0') * 10 + (text[9] - '0');
  if (y < 1900 || y > 2199 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return -1;
  *days = bank_days_from_civil(y, m, d);
  return 0;
}

void bank_date_format(int64_t days, char *out) {
  int y, m, d;
  bank_civil_from_days(days, &y, &m, &d);
  char text[40];  // wide enough for any int, so the compiler sees no truncation
  snprintf(text, sizeof text, "%04d-%02d-%02d", y % 10000, m % 100, d % 100);
  memcpy(out, text, 10);
  out[10] = '\0';
}

int64_t bank_add_months(int64_t days, int months) {
  int y, m, d;
  bank_civil_from_days(days, &y, &m, &d);
  int total = y * 12 + (m - 1) + months;
  y = total / 12;
  m = total % 12 + 1;
  int last = days_in_month(y, m);
  return bank_days_from_civil(y, m, d > last ? last : d);
}

int bank_weekday(int64_t days) {
  // 1970-01-01 was a Thursday (3 when Monday = 0).
  int64_t w = (days + 3) % 7;
  return (int)(w < 0 ? w + 7 : w);
}

int bank_working_days_between(int64_t from, int64_t to) {
  int count = 0;
  for (int64_t d = from + 1; d <= to && count < 100000; d++)
    if (bank_weekday(d) < 5) count++;
  return count;
}

void bank_financial_year(int64_t days, char *out) {
  int y, m, d;
  bank_civil_from_days(days, &y, &m, &d);
  int start = m >= 4 ? y : y - 1;
  char text[32];
  snprintf(text, sizeof text, "%04d-%02d", start % 10000, (start + 1) % 100);
  memcpy(out, text, 7);
  out[7] = '\0';
}

int bank_age_years(int64_t birth, int64_t today) {
  int by, bm, bd, ty, tm, td;
  bank_civil_from_days(birth, &by, &bm, &bd);
  bank_civil_from_days(today, &ty, &tm, &td);
  int age = ty - by;
  if (tm < bm || (tm == bm && td < bd)) age--;
  return age;
}

int bank_rupees_to_paise(double rupees, int64_t *paise, char *why) {
  if (!isfinite(rupees)) return snprintf(why, 64, "must be a finite number"), -1;
  if (rupees <= 0) return snprintf(why, 64, "must be greater than zero"), -1;
  if (rupees > (double)BANK_MAX_AMOUNT_PAISE / 100.0)
    return snprintf(why, 64, "exceeds the largest accepted amount (Rs 100 crore)"), -1;
  double scaled = rupees * 100.0;
  double rounded = nearbyint(scaled);
  // Binary doubles make 0.1 * 100 land next to 10, never on it: accept a
  // distance far below a paisa, reject a real third decimal.
  if (fabs(scaled - rounded) > 1e-6 * (1.0 + fabs(scaled)) || fabs(scaled - rounded) > 1e-3)
    return snprintf(why, 64, "must have at most 2 decimal places"), -1;
  // A positive amount below half a paisa (1e-9) rounds to 0 paise: refuse it.
  if (rounded < 1) return snprintf(why, 64, "must be at least Rs 0.01"), -1;
  *paise = (int64_t)rounded;
  return 0;
}

double bank_paise_to_rupees(int64_t paise) { return (double)paise / 100.0; }

void bank_format_inr(int64_t paise, char *out) {
  int negative = paise < 0;
  uint64_t abs_paise = negative ? (uint64_t)0 - (uint64_t)paise : (uint64_t)paise;
  uint64_t rupees = abs_paise / 100;
  char digits[24], grouped[32];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)rupees);
  int g = 0;
  // Indian grouping: last three digits, then groups of two.
  for (int i = 0; i < n; i++) {
    int remaining = n - i;
    grouped[g++] = digits[i];
    if (remaining > 3 && (remaining - 3) % 2 == 1) grouped[g++] = ',';
  }
  grouped[g] = '\0';
  snprintf(out, 40, "%sRs %s.%02llu", negative ? "-" : "", grouped, (unsigned long long)(abs_paise % 100));
}

int64_t bank_percent_bp(int64_t amount_paise, int64_t bp) { return (amount_paise * bp + 5000) / 10000; }

int64_t bank_gst(int64_t charge_paise) { return (charge_paise * BANK_GST_PERCENT + 50) / 100; }

int64_t bank_emi(int64_t principal_paise, int rate_bp, int months) {
  if (months <= 0 || principal_paise <= 0) return 0;
  double p = (double)principal_paise;
  double r = rate_bp / 10000.0 / 12.0;
  if (r == 0) return llround(p / months);
  double growth = pow(1.0 + r, months);
  return llround(p * r * growth / (growth - 1.0));
}

int bank_nominal_days(int months) { return (int)((int64_t)months * 365 / 12); }

int64_t bank_fd_interest(int64_t principal_paise, int rate_bp, int days) {
  if (days <= 0 || rate_bp <= 0) return 0;
  double p = (double)principal_paise, r = rate_bp / 10000.0;
  if (days < 180) return llround(p * r * days / 365.0);
  return llround(p * (pow(1.0 + r / 4.0, 4.0 * days / 365.0) - 1.0));
}

int64_t bank_rd_interest(int64_t monthly_paise, int rate_bp, int instalments, int months_run) {
  if (rate_bp <= 0 || instalments <= 0) return 0;
  double r = rate_bp / 10000.0, total = 0;
  for (int k = 1; k <= instalments; k++) {
    int held = months_run - k + 1;
    if (held > 0) total += (double)monthly_paise * (pow(1.0 + r / 4.0, held / 3.0) - 1.0);
  }
  return llround(total);
}
