// dpo/facts.c: value-like tokens of a text as normalized facts (dpo/facts.h).
#include "dpo/facts.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dpo_facts_free(DpoFacts *f) {
  free(f->items);
  memset(f, 0, sizeof *f);
}

int dpo_facts_has(const DpoFacts *f, const char *fact) {
  for (int i = 0; i < f->count; i++)
    if (strcmp(f->items[i], fact) == 0) return 1;
  return 0;
}

static int add_fact(DpoFacts *f, const char *fact, FimiError *err) {
  if (dpo_facts_has(f, fact)) return 0;
  if (f->count == f->cap) {
    int cap = f->cap ? f->cap * 2 : 32;
    void *bigger = realloc(f->items, (size_t)cap * DPO_FACT_MAX);
    if (!bigger) return fimi_fail(err, "facts: out of memory");
    f->items = bigger;
    f->cap = cap;
  }
  snprintf(f->items[f->count++], DPO_FACT_MAX, "%s", fact);
  return 0;
}

static int is_token_char(unsigned char c) { return isalnum(c) || c == '.' || c == ',' || c == '-' || c == ':'; }

// A number: digits with optional comma grouping and at most one '.', with
// digits after it. Returns 1 and the value.
static int read_number(const char *s, size_t n, double *value) {
  char digits[DPO_FACT_MAX];
  size_t k = 0;
  int dots = 0, saw_digit = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == ',') {
      if (!saw_digit || dots) return 0;
      continue;
    }
    if (c == '.') {
      if (dots++ || i + 1 == n) return 0;
    } else if (!isdigit((unsigned char)c)) {
      return 0;
    } else {
      saw_digit = 1;
    }
    if (k + 1 >= sizeof digits) return 0;
    digits[k++] = c;
  }
  if (!saw_digit) return 0;
  digits[k] = 0;
  *value = strtod(digits, NULL);
  return 1;
}

int dpo_fact_normalize(const char *token, size_t len, char *out) {
  // Sentence punctuation after a value is not part of it.
  while (len > 0 && strchr(".,:-", token[len - 1])) len--;
  while (len > 0 && strchr(".,:-", token[0])) token++, len--;
  int digit = 0;
  for (size_t i = 0; i < len; i++) digit |= isdigit((unsigned char)token[i]) != 0;
  if (!digit || len >= DPO_FACT_MAX) return 0;
  double v;
  if (read_number(token, len, &v)) {
    int integer = !memchr(token, '.', len);
    if (integer && v < 10) return 0;
    snprintf(out, DPO_FACT_MAX, "%.2f", v);
    return 1;
  }
  for (size_t i = 0; i < len; i++) out[i] = (char)toupper((unsigned char)token[i]);
  out[len] = 0;
  return 1;
}

int dpo_facts_add_text(DpoFacts *f, const char *text, size_t len, FimiError *err) {
  size_t i = 0;
  while (i < len) {
    if (!is_token_char((unsigned char)text[i])) {
      i++;
      continue;
    }
    size_t start = i;
    while (i < len && is_token_char((unsigned char)text[i])) i++;
    char fact[DPO_FACT_MAX];
    if (dpo_fact_normalize(text + start, i - start, fact) && add_fact(f, fact, err) != 0) return -1;
  }
  return 0;
}

int dpo_facts_add_value(DpoFacts *f, const char *value, FimiError *err) {
  char fact[DPO_FACT_MAX];
  if (!dpo_fact_normalize(value, strlen(value), fact)) return 0;
  return add_fact(f, fact, err);
}
