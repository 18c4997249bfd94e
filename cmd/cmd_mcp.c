// cmd/cmd_mcp.c: `fimi mcp serve`, the bank's tools over the Model Context
// Protocol on stdio (docs/mcp.md). Opens (or, with --create, first writes
// from a bank image) the SQLite file that every server process on it shares,
// and serves one session: one client, one verified customer at most.
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "env/bank_db.h"
#include "env/knowledge.h"
#include "mcp/mcp_jsonrpc.h"
#include "mcp/mcp_server.h"
#include "mcp/mcp_stdio.h"

#define MCP_DEFAULT_BUSY_TIMEOUT_MS 5000

static void usage_to(FILE *out) {
  fprintf(out,
          "usage: fimi mcp serve --db FILE.sqlite [--create [--image-seed K]] [--busy-timeout-ms N]\n"
          "                      [--max-message-bytes N]\n"
          "  serve the bank's tools over MCP (JSON-RPC 2.0, one message per line on stdin/stdout,\n"
          "  protocol revision " MCP_PROTOCOL_LATEST "); logs go to stderr\n"
          "  --db FILE             the bank database (SQLite, WAL mode), shared by every server process on it\n"
          "  --create              first write FILE from the bank image of --image-seed (default 1);\n"
          "                        fails when FILE exists\n"
          "  --busy-timeout-ms N   how long a call waits for another process's write (default %d)\n"
          "  --max-message-bytes N largest accepted message (default %u)\n",
          MCP_DEFAULT_BUSY_TIMEOUT_MS, MCP_DEFAULT_MAX_MESSAGE_BYTES);
}

typedef struct ServeArgs {
  const char *db;
  int create;
  long image_seed, busy_timeout_ms, max_message_bytes;
} ServeArgs;

static int parse_serve(int argc, char **argv, ServeArgs *a, FimiError *err) {
  static const char *const valued[] = {"--db", "--image-seed", "--busy-timeout-ms", "--max-message-bytes", NULL};
  *a = (ServeArgs){NULL, 0, 1, MCP_DEFAULT_BUSY_TIMEOUT_MS, MCP_DEFAULT_MAX_MESSAGE_BYTES};
  int seed_given = 0;
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i], *v;
    if (strcmp(flag, "--create") == 0) {
      a->create = 1;
      continue;
    }
    if (!cli_is_one_of(flag, valued)) return fimi_fail(err, "unknown option \"%s\" (see fimi mcp serve --help)", flag);
    if (!(v = cli_flag_value(argc, argv, &i, err))) return -1;
    if (strcmp(flag, "--db") == 0) a->db = v;
    else if (strcmp(flag, "--image-seed") == 0) {
      if (cli_parse_int(flag, v, 0, 2147483647L, &a->image_seed, err) != 0) return -1;
      seed_given = 1;
    } else if (strcmp(flag, "--busy-timeout-ms") == 0) {
      if (cli_parse_int(flag, v, 0, 600000, &a->busy_timeout_ms, err) != 0) return -1;
    } else if (cli_parse_int(flag, v, 1024, 64L << 20, &a->max_message_bytes, err) != 0) {
      return -1;
    }
  }
  if (!a->db) return fimi_fail(err, "--db FILE.sqlite is required");
  if (seed_given && !a->create) return fimi_fail(err, "--image-seed needs --create (an existing file keeps its bank)");
  return 0;
}

static int create_file(const ServeArgs *a, FimiError *err) {
  BankImage image;
  if (bank_image_build((uint64_t)a->image_seed, &image, err) != 0) return -1;
  int rc = bank_file_create(&image, a->db, err);
  bank_image_free(&image);
  return rc;
}

static int cmd_mcp_serve(int argc, char **argv) {
  if (cli_wants_help(argc, argv, 0)) {
    usage_to(stdout);
    return 0;
  }
  FimiError err = {0};
  ServeArgs a;
  if (parse_serve(argc, argv, &a, &err) != 0) {
    fprintf(stderr, "fimi mcp serve: %s\n", err.message);
    return CLI_EXIT_USAGE;
  }
  // A client that hangs up makes the next write fail instead of killing us.
  signal(SIGPIPE, SIG_IGN);
  const KnowledgeBase *kb = kb_builtin(&err);
  if (!kb) return cli_fail("mcp serve", &err);
  if (a.create && create_file(&a, &err) != 0) return cli_fail("mcp serve", &err);
  BankEpisode *bank = NULL;
  McpServer *server = NULL;
  int rc = 0;
  if (bank_episode_open_file(a.db, kb, (int)a.busy_timeout_ms, &bank, &err) != 0 ||
      mcp_server_create(bank, (size_t)a.max_message_bytes, &server, &err) != 0 ||
      mcp_serve_stdio(server, stdin, stdout, &err) != 0)
    rc = cli_fail("mcp serve", &err);
  mcp_server_free(server);
  bank_episode_close(bank);
  return rc;
}

int cmd_mcp(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "serve") == 0) return cmd_mcp_serve(argc - 2, argv + 2);
  if (cli_wants_help(argc, argv, 1)) {
    usage_to(stdout);
    return 0;
  }
  usage_to(stderr);
  return CLI_EXIT_USAGE;
}
