// cmd/main.c: the `fimi` entry point: dispatches to the subcommands of
// the table below (each defined in its cmd/cmd_*.c).
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "kernels/cpu/blas.h"

typedef struct Subcommand {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Subcommand;

static const Subcommand subcommands[] = {
    {"info", cmd_info, "show build and devices, or a model's config and tensors (fimi info [PATH])"},
    {"init", cmd_init, "initialize a model from a preset or config.json and save it (safetensors)"},
    {"generate", cmd_generate, "generate tokens from a saved model with a KV cache"},
    {"score", cmd_score, "print per-token log-probs of a token sequence under a saved model (JSON)"},
    {"tokenizer", cmd_tokenizer, "encode, decode with a tokenizer.json, or train a BPE tokenizer"},
    {"env", cmd_env, "the simulated bank: list tools (--markdown for docs/tools.md), ..."},
    {"mcp", cmd_mcp, "serve the bank's tools over the Model Context Protocol (fimi mcp serve --db FILE)"},
    {"serve", cmd_serve, "serve a checkpoint on the OpenAI chat-completions API (fimi serve --model DIR)"},
    {"eval", cmd_eval, "evaluate a model or scripted agent on held-out tasks; compare and ladder result files"},
    {"train", cmd_train, "train a model: SFT on an HDF5 dataset, checkpoints, --resume (fimi train --config F.ini)"},
    {"dpo", cmd_dpo, "the preference route's data: validated reference dialogs, pairs from a model's divergences"},
    {"data", cmd_data, "tokenize JSONL (SFT/DPO) into an HDF5 dataset, or summarize one (fimi data info F.h5)"},
    {"report", cmd_report, "plot a training run's metrics.jsonl, or bar charts of eval result files (PNG via gnuplot)"},
};

static void print_usage(FILE *out) {
  fprintf(out, "usage: fimi <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
    fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
  fprintf(out,
          "\ncommon options: --config FILE.ini  --set section.key=value  --device cpu|cuda\n"
          "run `fimi <command> --help` for a command's options\n");
}

int main(int argc, char **argv) {
  // Before the first GEMM: OpenBLAS's kernels matched to this CPU (blas.h).
  blas_run_on_better_kernels(argv, cli_speaks_for_the_job());
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    print_usage(stdout);
    return argc < 2 ? CLI_EXIT_USAGE : 0;
  }
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
    if (!strcmp(argv[1], subcommands[i].name)) return subcommands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "fimi: unknown command \"%s\" (see fimi --help)\n\n", argv[1]);
  print_usage(stderr);
  return CLI_EXIT_USAGE;
}
