// cmd/cmd_mcp.c: `fimi mcp serve`, the bank's tools over the Model Context
// Protocol (docs/mcp.md). Opens (or, with --create, first writes from a bank
// image) the SQLite file that every server process on it shares. On stdio it
// serves one session: one client, one verified customer at most. With
// --http it serves MCP's Streamable HTTP transport on one address, many
// sessions at once, each one client and one verified customer at most, every
// request carrying the Bearer token; it runs until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "env/bank/db.h"
#include "env/knowledge.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_jsonrpc.h"
#include "mcp/mcp_server.h"
#include "mcp/mcp_stdio.h"
#include "net/http_token.h"

// The environment variable that holds the HTTP transport's token.
#define MCP_TOKEN_ENV "FIMI_MCP_TOKEN"

#define MCP_DEFAULT_BUSY_TIMEOUT_MS 5000
#define MCP_DEFAULT_MAX_SESSIONS 64
#define MCP_DEFAULT_SESSION_IDLE_S 900
// Thread per connection: a bound on threads, and on sockets idle clients hold.
#define MCP_HTTP_MAX_CONNECTIONS 256
#define MCP_HTTP_CONNECTION_TIMEOUT_S 60
#define MCP_HTTP_ENDPOINT "/mcp"
#define MCP_MAX_ALLOWED 16

static void usage_to(FILE *out) {
  fprintf(out,
          "usage: fimi mcp serve --db FILE.sqlite [--create [--image-seed K]] [--busy-timeout-ms N]\n"
          "                      [--max-message-bytes N]\n"
          "                      [--http ADDRESS:PORT [--token-file F] [--max-sessions N] [--session-idle-s N]\n"
          "                       [--allow-origin ORIGIN]... [--allow-host HOST]... [--allow-non-loopback]]\n"
          "  serve the bank's tools over MCP (JSON-RPC 2.0, protocol revision " MCP_PROTOCOL_LATEST "): one message\n"
          "  per line on stdin/stdout, or with --http the Streamable HTTP transport at http://ADDRESS:PORT" MCP_HTTP_ENDPOINT
          "\n  (until SIGINT/SIGTERM); logs go to stderr\n"
          "  --db FILE             the bank database (SQLite, WAL mode), shared by every server process on it\n"
          "  --create              first write FILE from the bank image of --image-seed (default 1);\n"
          "                        fails when FILE exists\n"
          "  --busy-timeout-ms N   how long a call waits for another connection's write (default %d)\n"
          "  --max-message-bytes N largest accepted message or HTTP body (default %u)\n"
          "  --http ADDRESS:PORT   serve HTTP on an IPv4 literal, [IPv6] or localhost; PORT 0 picks one\n"
          "                        (printed on stderr); loopback only unless --allow-non-loopback\n"
          "  --token-file F        the Bearer token (first line; chmod 600), else $" MCP_TOKEN_ENV "\n"
          "  --max-sessions N      sessions open at once (default %d)\n"
          "  --session-idle-s N    a session idle this long is ended (default %d)\n"
          "  --allow-origin ORIGIN a browser Origin to accept beyond loopback ones (repeatable)\n"
          "  --allow-host HOST     a Host name to accept beyond loopback ones and ADDRESS (repeatable)\n"
          "  --allow-non-loopback  allow ADDRESS beyond this machine (put TLS in front: docs/mcp.md)\n",
          MCP_DEFAULT_BUSY_TIMEOUT_MS, MCP_DEFAULT_MAX_MESSAGE_BYTES, MCP_DEFAULT_MAX_SESSIONS,
          MCP_DEFAULT_SESSION_IDLE_S);
}

typedef struct ServeArgs {
  const char *db;
  int create;
  long image_seed, busy_timeout_ms, max_message_bytes;
  // HTTP only
  const char *http, *token_file;
  long max_sessions, session_idle_s;
  int allow_non_loopback, n_origins, n_hosts;
  const char *origins[MCP_MAX_ALLOWED + 1], *hosts[MCP_MAX_ALLOWED + 2];  // NULL-terminated
  int http_only_given;
} ServeArgs;

static int add_allowed(const char *flag, const char *value, const char **list, int *n, FimiError *err) {
  if (*n >= MCP_MAX_ALLOWED) return fimi_fail(err, "%s: at most %d", flag, MCP_MAX_ALLOWED);
  list[(*n)++] = value;
  return 0;
}

// The options of --http; 1 when `flag` was not one of them.
static int parse_http_flag(const char *flag, const char *v, ServeArgs *a, FimiError *err) {
  if (strcmp(flag, "--http") == 0) a->http = v;
  else if (strcmp(flag, "--token-file") == 0) a->token_file = v;
  else if (strcmp(flag, "--max-sessions") == 0) return cli_parse_int(flag, v, 1, 4096, &a->max_sessions, err);
  else if (strcmp(flag, "--session-idle-s") == 0) return cli_parse_int(flag, v, 1, 86400, &a->session_idle_s, err);
  else if (strcmp(flag, "--allow-origin") == 0) return add_allowed(flag, v, a->origins, &a->n_origins, err);
  else if (strcmp(flag, "--allow-host") == 0) return add_allowed(flag, v, a->hosts, &a->n_hosts, err);
  else return 1;
  return 0;
}

static int parse_value_flag(const char *flag, const char *v, ServeArgs *a, int *seed_given, FimiError *err) {
  if (strcmp(flag, "--db") == 0) {
    a->db = v;
  } else if (strcmp(flag, "--image-seed") == 0) {
    *seed_given = 1;
    return cli_parse_int(flag, v, 0, 2147483647L, &a->image_seed, err);
  } else if (strcmp(flag, "--busy-timeout-ms") == 0) {
    return cli_parse_int(flag, v, 0, 600000, &a->busy_timeout_ms, err);
  } else if (strcmp(flag, "--max-message-bytes") == 0) {
    return cli_parse_int(flag, v, 1024, 64L << 20, &a->max_message_bytes, err);
  } else {
    int rc = parse_http_flag(flag, v, a, err);
    if (rc == 0 && strcmp(flag, "--http") != 0) a->http_only_given = 1;
    return rc;
  }
  return 0;
}

static int parse_serve(int argc, char **argv, ServeArgs *a, FimiError *err) {
  static const char *const valued[] = {"--db", "--image-seed", "--busy-timeout-ms", "--max-message-bytes",
                                       "--http", "--token-file", "--max-sessions", "--session-idle-s",
                                       "--allow-origin", "--allow-host", NULL};
  memset(a, 0, sizeof *a);
  a->image_seed = 1;
  a->busy_timeout_ms = MCP_DEFAULT_BUSY_TIMEOUT_MS;
  a->max_message_bytes = MCP_DEFAULT_MAX_MESSAGE_BYTES;
  a->max_sessions = MCP_DEFAULT_MAX_SESSIONS;
  a->session_idle_s = MCP_DEFAULT_SESSION_IDLE_S;
  int seed_given = 0;
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i], *v;
    if (strcmp(flag, "--create") == 0) {
      a->create = 1;
      continue;
    }
    if (strcmp(flag, "--allow-non-loopback") == 0) {
      a->allow_non_loopback = a->http_only_given = 1;
      continue;
    }
    if (!cli_is_one_of(flag, valued)) return fimi_fail(err, "unknown option \"%s\" (see fimi mcp serve --help)", flag);
    if (!(v = cli_flag_value(argc, argv, &i, err))) return -1;
    if (parse_value_flag(flag, v, a, &seed_given, err) != 0) return -1;
  }
  if (!a->db) return fimi_fail(err, "--db FILE.sqlite is required");
  if (seed_given && !a->create) return fimi_fail(err, "--image-seed needs --create (an existing file keeps its bank)");
  if (a->http_only_given && !a->http)
    return fimi_fail(err, "--token-file, --max-sessions, --session-idle-s, --allow-* need --http");
  return 0;
}

static int create_file(const ServeArgs *a, FimiError *err) {
  BankImage image;
  if (bank_image_build((uint64_t)a->image_seed, &image, err) != 0) return -1;
  int rc = bank_file_create(&image, a->db, err);
  bank_image_free(&image);
  return rc;
}

static int serve_stdio(const ServeArgs *a, const KnowledgeBase *kb, FimiError *err) {
  BankEpisode *bank = NULL;
  McpServer *server = NULL;
  int rc = 0;
  if (bank_episode_open_file(a->db, kb, (int)a->busy_timeout_ms, &bank, err) != 0 ||
      mcp_server_create(bank, (size_t)a->max_message_bytes, &server, err) != 0 ||
      mcp_serve_stdio(server, stdin, stdout, err) != 0)
    rc = -1;
  mcp_server_free(server);
  bank_episode_close(bank);
  return rc;
}

// Opens the file once before listening, so that a wrong --db fails at
// start rather than at the first client's initialize.
static int check_bank_file(const ServeArgs *a, const KnowledgeBase *kb, FimiError *err) {
  // Sessions run on several threads, each on its own connection.
  if (!sqlite3_threadsafe()) return fimi_fail(err, "--http needs SQLite built thread-safe");
  BankEpisode *bank = NULL;
  if (bank_episode_open_file(a->db, kb, (int)a->busy_timeout_ms, &bank, err) != 0) return -1;
  bank_episode_close(bank);
  return 0;
}

// Serves until SIGINT or SIGTERM, which every thread blocks and this one
// waits for.
static int run_until_signal(McpHttpHandler *handler, const HttpListen *listen, const ServeArgs *a, FimiError *err) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);  // before any thread starts: they inherit it
  McpHttpServer *server = NULL;
  if (mcp_http_start(handler, listen, a->allow_non_loopback, MCP_HTTP_MAX_CONNECTIONS, MCP_HTTP_CONNECTION_TIMEOUT_S,
                     &server, err) != 0)
    return -1;
  fprintf(stderr, "fimi mcp serve: listening on http://%s:%d" MCP_HTTP_ENDPOINT " (at most %ld sessions, idle %ld s)\n",
          listen->host, mcp_http_port(server), a->max_sessions, a->session_idle_s);
  fflush(stderr);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  fprintf(stderr, "fimi mcp serve: %s, stopping\n", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  mcp_http_stop(server);
  return 0;
}

static int serve_http(ServeArgs *a, const KnowledgeBase *kb, FimiError *err) {
  static char token[HTTP_TOKEN_MAX_CHARS + 1];
  HttpListen listen;
  if (http_token_load(a->token_file, "--token-file", MCP_TOKEN_ENV, getenv(MCP_TOKEN_ENV), token, sizeof token, err) != 0 ||
      http_listen_parse(a->http, "--http", &listen, err) != 0 || check_bank_file(a, kb, err) != 0)
    return -1;
  // Clients reach a non-loopback address by its literal in Host.
  if (!listen.loopback) a->hosts[a->n_hosts++] = listen.host;
  McpSessionConfig sessions = {a->db, kb, (int)a->busy_timeout_ms, (size_t)a->max_message_bytes,
                               (int)a->max_sessions, (double)a->session_idle_s};
  McpHttpHandler handler = {{token, MCP_HTTP_ENDPOINT, a->origins, a->hosts, (size_t)a->max_message_bytes}, NULL};
  if (mcp_sessions_create(&sessions, &handler.sessions, err) != 0) return -1;
  int rc = run_until_signal(&handler, &listen, a, err);
  mcp_sessions_free(handler.sessions);
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
  int rc = a.http ? serve_http(&a, kb, &err) : serve_stdio(&a, kb, &err);
  return rc == 0 ? 0 : cli_fail("mcp serve", &err);
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
