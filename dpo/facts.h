// dpo/facts.h: the values a conversation states, as comparable facts
// (docs/dpo-pairs.md, "Facts"). Defines DpoFacts (a set of normalized value
// strings), dpo_facts_from_text (every value-like token of a text: runs of
// letters, digits and . , - : that hold a digit), dpo_fact_normalize and
// dpo_facts_has. Used by the corpus checker ("every value said comes from the
// customer's data or an earlier tool result") and by the pair builder's
// deterministic reply checks ("required values present, no value absent
// from the data").
//
// Normalization: a token that reads as a number (digits, Indian or Western
// comma grouping, at most one '.') becomes "%.2f" of its value, so
// "Rs 1,29,000.00", "129000" and the tool's 129000 are one fact; anything
// else (ids, dates, "7-45") is kept, upper-cased. Integers below 10 are not
// facts (ordinals, "1 account"), so they are never "absent from the data".
#ifndef FIMI_DPO_FACTS_H
#define FIMI_DPO_FACTS_H

#include <stddef.h>

#include "core/error.h"

#define DPO_FACT_MAX 64  // bytes of one normalized fact (longer tokens are cut)

typedef struct DpoFacts {
  char (*items)[DPO_FACT_MAX];
  int count, cap;
} DpoFacts;

void dpo_facts_free(DpoFacts *f);
// Adds the facts of text[0..len) (duplicates are kept once). Any bytes.
int dpo_facts_add_text(DpoFacts *f, const char *text, size_t len, FimiError *err);
// Adds one value as given (normalized); values that are not facts are skipped.
int dpo_facts_add_value(DpoFacts *f, const char *value, FimiError *err);
// 1 when the set holds the fact (already normalized).
int dpo_facts_has(const DpoFacts *f, const char *fact);
// Normalizes one token into out (DPO_FACT_MAX bytes); 0 when the token is
// not a fact (no digit, or an integer below 10).
int dpo_fact_normalize(const char *token, size_t len, char *out);

#endif
