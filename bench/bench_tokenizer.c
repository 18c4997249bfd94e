// bench/bench_tokenizer.c: encoding speed of data/tokenizer.c on one core.
// Loads a tokenizer.json and a UTF-8 text file, then encodes the file
// repeatedly for at least --seconds (default 1) and reports MB/s of input
// text, tokens/s and bytes/token. Two modes: --mode lines encodes every line
// with its own tokenizer_encode call (what a data pipeline does per record;
// the per-call word cache starts empty each time), --mode whole encodes the
// file in one call. Prints one table row, or one JSON line with --json.
//
// Usage: bench_tokenizer TOKENIZER_JSON TEXT_FILE [--mode lines|whole] [--seconds S] [--json]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fileio.h"
#include "data/tokenizer.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One pass over the text; returns the number of tokens or -1.
static long encode_pass(const Tokenizer *tok, const char *text, size_t size, int lines, TokenIds *ids, FimiError *err) {
  long tokens = 0;
  if (!lines) {
    ids->len = 0;
    if (tokenizer_encode(tok, text, size, 0, ids, err)) return -1;
    return (long)ids->len;
  }
  size_t start = 0;
  while (start < size) {
    const char *nl = memchr(text + start, '\n', size - start);
    size_t end = nl ? (size_t)(nl - text) : size;
    ids->len = 0;
    if (tokenizer_encode(tok, text + start, end - start, 0, ids, err)) return -1;
    tokens += (long)ids->len;
    start = end + 1;
  }
  return tokens;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_tokenizer TOKENIZER_JSON TEXT_FILE [--mode lines|whole] [--seconds S] [--json]\n");
    return 2;
  }
  int lines = 1, json = 0;
  double min_seconds = 1.0;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--mode") && i + 1 < argc) lines = strcmp(argv[++i], "whole") != 0;
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) min_seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json = 1;
    else { fprintf(stderr, "bench_tokenizer: unknown argument %s\n", argv[i]); return 2; }
  }
  FimiError err = {0};
  double t0 = now_seconds();
  Tokenizer *tok = NULL;
  if (tokenizer_load_file(argv[1], &tok, &err)) { fprintf(stderr, "bench_tokenizer: %s\n", err.message); return 1; }
  double load_seconds = now_seconds() - t0;
  size_t size = 0;
  char *text = file_read_all(argv[2], (size_t)1 << 30, &size, &err);
  if (!text) { fprintf(stderr, "bench_tokenizer: %s\n", err.message); return 1; }
  TokenIds ids = {0};
  if (encode_pass(tok, text, size, lines, &ids, &err) < 0) {  // warm-up
    fprintf(stderr, "bench_tokenizer: %s\n", err.message);
    return 1;
  }
  long passes = 0, tokens = 0;
  double start = now_seconds(), elapsed = 0;
  while (elapsed < min_seconds || passes == 0) {
    long t = encode_pass(tok, text, size, lines, &ids, &err);
    if (t < 0) { fprintf(stderr, "bench_tokenizer: %s\n", err.message); return 1; }
    tokens += t;
    passes++;
    elapsed = now_seconds() - start;
  }
  double mbps = (double)size * (double)passes / elapsed / 1e6;
  double tps = (double)tokens / elapsed;
  double bpt = tokens ? (double)size * (double)passes / (double)tokens : 0;
  if (json) {
    printf("{\"mode\":\"%s\",\"bytes\":%zu,\"passes\":%ld,\"seconds\":%.3f,\"mb_per_s\":%.3f,\"tokens_per_s\":%.0f,"
           "\"bytes_per_token\":%.3f,\"load_seconds\":%.3f}\n",
           lines ? "lines" : "whole", size, passes, elapsed, mbps, tps, bpt, load_seconds);
  } else {
    printf("%-6s %10zu bytes x %3ld passes in %6.2f s: %7.2f MB/s, %9.0f tokens/s, %.2f bytes/token (load %.2f s)\n",
           lines ? "lines" : "whole", size, passes, elapsed, mbps, tps, bpt, load_seconds);
  }
  token_ids_free(&ids);
  free(text);
  tokenizer_free(tok);
  return 0;
}
