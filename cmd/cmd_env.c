// cmd/cmd_env.c: `fimi env ...`, the simulated bank (Navadhan Bank, a
// fictional bank). Today: `fimi env tools [--markdown|--json]` prints the
// tool catalog (a table, docs/tools.md, or the JSON schemas the system prompt
// carries). Later issues add episode subcommands here.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "env/bank_tools.h"

static void usage(void) {
  fprintf(stderr, "usage: fimi env tools [--markdown | --json]\n"
                  "  tools         list the bank's tools (name, area, read/write, charged, auth)\n"
                  "  --markdown    print docs/tools.md\n"
                  "  --json        print the tool schemas as a JSON array\n");
}

static void print_table(void) {
  printf("%-32s %-4s %-7s %-4s %s\n", "tool", "rw", "charged", "auth", "area");
  for (int i = 0, n = env_tool_count(); i < n; i++)
    printf("%-32s %-4s %-7s %-4s %s\n", env_tool_name(i), env_tool_writes(i) ? "w" : "r",
           env_tool_charged(i) ? "yes" : "no", env_tool_needs_auth(i) ? "yes" : "no", env_tool_area(i));
  printf("%d tools\n", env_tool_count());
}

static int cmd_env_tools(int argc, char **argv) {
  const char *format = "table";
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--markdown") == 0) format = "markdown";
    else if (strcmp(argv[i], "--json") == 0) format = "json";
    else {
      fprintf(stderr, "fimi env tools: unknown option \"%s\"\n", argv[i]);
      usage();
      return CLI_EXIT_USAGE;
    }
  }
  if (strcmp(format, "table") == 0) {
    print_table();
    return 0;
  }
  char *text = NULL;
  if (strcmp(format, "markdown") == 0) {
    text = env_tool_catalog_markdown();
  } else {
    cJSON *catalog = env_tool_catalog_json();
    text = catalog ? cJSON_Print(catalog) : NULL;
    cJSON_Delete(catalog);
  }
  if (!text) {
    fprintf(stderr, "fimi env tools: out of memory\n");
    return CLI_EXIT_FAILURE;
  }
  fputs(text, stdout);
  if (strcmp(format, "json") == 0) fputc('\n', stdout);
  free(text);
  return 0;
}

int cmd_env(int argc, char **argv) {
  // argv[0] is "env".
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? CLI_EXIT_USAGE : 0;
  }
  if (strcmp(argv[1], "tools") == 0) return cmd_env_tools(argc - 2, argv + 2);
  fprintf(stderr, "fimi env: unknown subcommand \"%s\"\n", argv[1]);
  usage();
  return CLI_EXIT_USAGE;
}
