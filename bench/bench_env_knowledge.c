// bench/bench_env_knowledge.c: speed of the bank knowledge base (env/knowledge.h).
// Defines a benchmark that times parsing + indexing the built-in documents
// (kb_load_builtin) and kb_search (top 5) over a fixed set of customer
// questions, printing load time, mean and worst-query microseconds per search,
// and the index size. The target is well under 50 microseconds per query.
//
// Usage: bench_env_knowledge [--rounds N] [--loads N] [--json]
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/knowledge.h"

static const char *const QUERIES[] = {
    "How often do I need to update my KYC if I am a low risk customer?",
    "TDS threshold on fixed deposit interest for senior citizens from FY 2025-26",
    "Form 15G har saal submit karna padta hai kya?",
    "What penalty applies if I break my fixed deposit early?",
    "FD rate for senior citizens for 2 years",
    "how is 18 carat gold valued for a gold loan",
    "An unauthorised transaction happened on my card; what is my liability if I report it within 3 days?",
    "Is positive pay mandatory for a cheque of 6 lakh?",
    "pre-debit notification before a recurring card payment",
    "UPI transfer failed but amount deducted, when will it be reversed?",
    "personal loan interest rate for credit score 760",
    "PMSBY premium kitna hai?",
    "Can an income tax payer join Atal Pension Yojana?",
    "What is the maximum investment in SCSS?",
    "How do I complain to the RBI Ombudsman?",
    "IMPS charges for a 50000 transfer",
    "Can I send 1 lakh to a newly added beneficiary right away?",
    "minimum balance charge on savings account",
    "bank",
    "₹10,00,000 NEFT RTGS IMPS UPI limit charges GST cheque positive pay gold loan LTV KYC TDS",
};
#define NUM_QUERIES ((int)(sizeof QUERIES / sizeof QUERIES[0]))

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int parse_count(const char *flag, const char *value, int *out) {
  char *end = NULL;
  long v = value ? strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || v < 1 || v > 100000000) {
    fprintf(stderr, "bench_env_knowledge: %s needs a positive integer\n", flag);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  int rounds = 20000, loads = 20, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--rounds") && parse_count(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &rounds) == 0) i++;
    else if (!strcmp(argv[i], "--loads") && parse_count(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &loads) == 0) i++;
    else {
      fprintf(stderr, "usage: bench_env_knowledge [--rounds N] [--loads N] [--json]\n");
      return 2;
    }
  }
  FimiError err = {0};
  KnowledgeBase *kb = NULL;
  double t0 = now_seconds();
  for (int i = 0; i < loads; i++) {
    kb_free(kb);
    if (kb_load_builtin(&kb, &err) != 0) {
      fprintf(stderr, "bench_env_knowledge: %s\n", err.message);
      return 1;
    }
  }
  double load_ms = 1e3 * (now_seconds() - t0) / loads;

  // Each query is timed separately over all rounds, so the slowest query is
  // visible next to the mean.
  int idx[5];
  double scores[5], total = 0, worst = 0, checksum = 0;
  const char *worst_query = QUERIES[0];
  for (int q = 0; q < NUM_QUERIES; q++) {
    double start = now_seconds();
    for (int r = 0; r < rounds; r++) {
      int found = kb_search(kb, QUERIES[q], 5, idx, scores, &err);
      if (found < 0) {
        fprintf(stderr, "bench_env_knowledge: %s\n", err.message);
        return 1;
      }
      checksum += found > 0 ? scores[0] : 0;  // keeps the loop from being optimized away
    }
    double per_query = (now_seconds() - start) / rounds;
    total += per_query;
    if (per_query > worst) {
      worst = per_query;
      worst_query = QUERIES[q];
    }
  }
  double mean_us = 1e6 * total / NUM_QUERIES, worst_us = 1e6 * worst;
  if (json) {
    printf("{\"documents\": %d, \"passages\": %d, \"load_ms\": %.3f, \"search_mean_us\": %.3f, "
           "\"search_worst_us\": %.3f, \"queries\": %d, \"rounds\": %d, \"checksum\": %.6f}\n",
           kb_num_documents(kb), kb_num_passages(kb), load_ms, mean_us, worst_us, NUM_QUERIES, rounds, checksum);
  } else {
    printf("%-10s %-9s %-12s %-16s %-16s\n", "documents", "passages", "load (ms)", "search mean (us)", "search worst (us)");
    printf("%-10d %-9d %-12.3f %-16.3f %-16.3f\n", kb_num_documents(kb), kb_num_passages(kb), load_ms, mean_us, worst_us);
    printf("slowest query: \"%.60s\"\n", worst_query);
  }
  kb_free(kb);
  return 0;
}
