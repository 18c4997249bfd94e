// cmd/cmd_tokenizer_train.c: `fimi tokenizer train`: trains a byte-fallback
// BPE tokenizer on text files and writes tokenizer.json (data/bpe_train.h,
// docs/tokenizer-training.md). Defines cmd_tokenizer_train.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "core/log.h"
#include "data/bpe_train.h"

static void print_usage(void) {
  fprintf(stdout,
          "usage: fimi tokenizer train --input FILE [FILE ...] [--input FILE ...] --vocab-size N --out PATH\n"
          "                            [--min-frequency N] [--max-token-bytes N] [--character-coverage X]\n"
          "                            [--digits individual|runs]\n"
          "  --vocab-size N          total tokens incl. 8 special + 256 byte tokens (>= %d)\n"
          "  --min-frequency N       a pair merges only if seen >= N times (default 2)\n"
          "  --max-token-bytes N     longest token in bytes (default 16)\n"
          "  --character-coverage X  share of character occurrences given own tokens (default 0.9995)\n"
          "  --digits individual     every digit a token of its own, as Gemma's tokenizers (default)\n"
          "  --digits runs           a run of digits is split off and merged like a word\n",
          BPE_NUM_RESERVED);
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct TrainArgs {
  const char **inputs;
  int num_inputs;
  const char *out_path;
  int have_vocab;
  BpeTrainOptions opt;
} TrainArgs;

static int parse_train_args(int argc, char **argv, TrainArgs *args, FimiError *err) {
  args->inputs = calloc((size_t)argc + 1, sizeof *args->inputs);
  if (!args->inputs) return fimi_fail(err, "out of memory");
  long value;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *text;
    if (!strcmp(arg, "--input")) {
      // Every following argument up to the next flag is an input file.
      int start = i;
      while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) args->inputs[args->num_inputs++] = argv[++i];
      if (i == start) return fimi_fail(err, "--input needs at least one file");
    } else if (!strcmp(arg, "--out")) {
      if (!(args->out_path = cli_flag_value(argc, argv, &i, err))) return -1;
    } else if (!strcmp(arg, "--vocab-size")) {
      if (!(text = cli_flag_value(argc, argv, &i, err)) ||
          cli_parse_int(arg, text, BPE_NUM_RESERVED, 1 << 26, &value, err) != 0)
        return -1;
      args->opt.vocab_size = (int32_t)value;
      args->have_vocab = 1;
    } else if (!strcmp(arg, "--min-frequency")) {
      if (!(text = cli_flag_value(argc, argv, &i, err)) || cli_parse_int(arg, text, 2, INT32_MAX, &value, err) != 0)
        return -1;
      args->opt.min_frequency = value;
    } else if (!strcmp(arg, "--max-token-bytes")) {
      if (!(text = cli_flag_value(argc, argv, &i, err)) || cli_parse_int(arg, text, 2, 256, &value, err) != 0)
        return -1;
      args->opt.max_token_bytes = (int32_t)value;
    } else if (!strcmp(arg, "--digits")) {
      if (!(text = cli_flag_value(argc, argv, &i, err))) return -1;
      if (!strcmp(text, "individual")) args->opt.digit_runs = 0;
      else if (!strcmp(text, "runs")) args->opt.digit_runs = 1;
      else return fimi_fail(err, "--digits \"%s\" is not individual or runs", text);
    } else if (!strcmp(arg, "--character-coverage")) {
      double coverage;
      if (!(text = cli_flag_value(argc, argv, &i, err)) || cli_parse_float(arg, text, &coverage, err) != 0) return -1;
      if (!(coverage > 0.0 && coverage <= 1.0))
        return fimi_fail(err, "--character-coverage: expected a number in (0, 1], got \"%s\"", text);
      args->opt.character_coverage = coverage;
    } else {
      return fimi_fail(err, "unknown argument \"%s\"", arg);
    }
  }
  if (args->num_inputs == 0) return fimi_fail(err, "--input FILE is required");
  if (!args->have_vocab) return fimi_fail(err, "--vocab-size N is required");
  if (!args->out_path) return fimi_fail(err, "--out PATH is required");
  return 0;
}

int cmd_tokenizer_train(int argc, char **argv) {
  FimiError err = {0};
  CliOptions common;
  int kept = cli_parse_common(&common, argc, argv, &err);  // --log-level
  if (kept < 0) return cli_fail("tokenizer train", &err);
  for (int i = 1; i < kept; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      print_usage();
      return 0;
    }
  TrainArgs args = {0};
  bpe_train_default_options(&args.opt);
  if (parse_train_args(kept, argv, &args, &err) != 0) {
    free(args.inputs);
    fprintf(stderr, "fimi tokenizer train: %s (see fimi tokenizer train --help)\n", err.message);
    return CLI_EXIT_USAGE;
  }
  BpeTrainStats stats;
  double start = seconds_now();
  int rc = bpe_train_files_stats(args.inputs, args.num_inputs, &args.opt, args.out_path, &stats, &err);
  double elapsed = seconds_now() - start;
  free(args.inputs);
  if (rc != 0) return cli_fail("tokenizer train", &err);
  printf("wrote %s: vocab %d (%d special, 256 byte, %d characters, %d merged) from %lld bytes, "
         "%lld pieces (%lld distinct), %lld distinct characters, %d merges in %.2f s\n",
         args.out_path, (int)stats.vocab_size, BPE_NUM_SPECIAL, (int)stats.alphabet_size,
         (int)(stats.vocab_size - BPE_NUM_RESERVED - stats.alphabet_size), (long long)stats.input_bytes,
         (long long)stats.num_pieces, (long long)stats.num_words, (long long)stats.num_chars, (int)stats.num_merges,
         elapsed);
  if (stats.vocab_size < args.opt.vocab_size)
    log_warn("fimi tokenizer train: no pair seen >= %lld times is left; vocab is %d, not %d",
             (long long)args.opt.min_frequency, (int)stats.vocab_size, (int)args.opt.vocab_size);
  return 0;
}
