// env/bank/money.h: Navadhan Bank's money and date arithmetic. Defines the
// civil-date helpers (YYYY-MM-DD <-> day numbers, month arithmetic, financial
// years), rupee <-> paise conversion with validation, GST, and the interest
// formulas (EMI, FD maturity with quarterly compounding, RD maturity, premature
// closure). Everything is integer paise; formulas run in double and are
// rounded to the nearest paisa once, at the end (docs/bank-database.md).
// Pure functions: no database, no wall clock.
#ifndef FIMI_ENV_BANK_MONEY_H
#define FIMI_ENV_BANK_MONEY_H

#include <stdint.h>

#define BANK_GST_PERCENT 18
// Largest amount a tool accepts: Rs 100 crore (1e9 rupees) in paise.
#define BANK_MAX_AMOUNT_PAISE 100000000000LL

// ---- dates ----------------------------------------------------------------
// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t bank_days_from_civil(int year, int month, int day);
void bank_civil_from_days(int64_t days, int *year, int *month, int *day);
// Parses exactly "YYYY-MM-DD" (a real calendar date, years 1900-2199).
int bank_date_parse(const char *text, int64_t *days);
// Writes "YYYY-MM-DD" (out must hold 11 bytes).
void bank_date_format(int64_t days, char *out);
// Adds months, clamping the day to the end of the target month (Jan 31 + 1
// month = Feb 28/29), as banks date maturities.
int64_t bank_add_months(int64_t days, int months);
// 0 = Monday ... 6 = Sunday.
int bank_weekday(int64_t days);
// Working days (Monday-Friday; holidays are not modelled) strictly after
// `from` up to and including `to`.
int bank_working_days_between(int64_t from, int64_t to);
// Financial year (April-March) containing the date, as "2025-26" (8 bytes).
void bank_financial_year(int64_t days, char *out);
// Full years of age on `today` for a birth date.
int bank_age_years(int64_t birth, int64_t today);

// ---- amounts --------------------------------------------------------------
// Rupees (a JSON number, at most 2 decimals, finite, 0 < x <= 1e9) -> paise.
// Returns 0, or -1 with a reason in `why` (64 bytes).
int bank_rupees_to_paise(double rupees, int64_t *paise, char *why);
// Rupees as a JSON-friendly double (exact to the paisa for |x| < 2^53 paise).
double bank_paise_to_rupees(int64_t paise);
// "Rs 1,00,000.00" in Indian digit grouping (out >= 40 bytes).
void bank_format_inr(int64_t paise, char *out);
// GST at 18% on a service charge, rounded half up to the paisa.
int64_t bank_gst(int64_t charge_paise);
// Percentage of an amount in basis points, rounded half up: amount*bp/10000.
int64_t bank_percent_bp(int64_t amount_paise, int64_t bp);

// ---- interest ---------------------------------------------------------------
// Equated monthly instalment: P r (1+r)^n / ((1+r)^n - 1), r = rate/12.
int64_t bank_emi(int64_t principal_paise, int rate_bp, int months);
// Nominal days of a tenure given in months: floor(months * 365 / 12), so 12
// months = 365 days and 60 months = 1825 days whatever the calendar.
int bank_nominal_days(int months);
// Interest on a deposit held `days` days at rate_bp: simple below 180 days,
// compounded quarterly (n = 4 * days / 365 periods) from 180 days on.
int64_t bank_fd_interest(int64_t principal_paise, int rate_bp, int days);
// RD interest: `instalments` monthly payments, instalment k (1-based) paid at
// the start of month k and compounded quarterly for the months_run - k + 1
// months it stays invested (the standard Indian RD formula). At maturity
// instalments == months_run == tenure.
int64_t bank_rd_interest(int64_t monthly_paise, int rate_bp, int instalments, int months_run);

#endif
