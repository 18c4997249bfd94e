// bench/bench_mcp_stdio.c: tool calls per second of `fimi mcp serve` over
// stdio, one request in flight at a time (as an agent calls tools): a read
// (get_account_balance) and a write (update_contact, one committed SQLite
// transaction each, WAL with synchronous=FULL), plus the same calls handed
// to the server in-process (mcp_server_handle on the same kind of file) to
// show what the pipes and the JSON round trip cost. Prints a table.
//
// Usage: bench_mcp_stdio [--fimi PATH] [--calls N]
//   PATH defaults to $FIMI_BINARY, else build/cmd/fimi; N to 2000.
#define _POSIX_C_SOURCE 200809L  // fdopen, mkdtemp
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_mcp_calls.h"
#include "env/bank/db.h"
#include "env/knowledge.h"
#include "mcp/mcp_server.h"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "bench_mcp_stdio: %s\n", what);
  exit(1);
}

typedef struct Child {
  pid_t pid;
  FILE *to, *from;
} Child;

static Child spawn(const char *fimi, const char *db) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) die("pipe");
  Child c = {fork(), NULL, NULL};
  if (c.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(fimi, fimi, "mcp", "serve", "--db", db, "--create", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c.to = fdopen(in[1], "w");
  c.from = fdopen(out[0], "r");
  return c;
}

// One request, one response line; returns 1 when the response has no error.
static int round_trip(Child *c, const char *request, char *line, size_t size) {
  fputs(request, c->to);
  fputc('\n', c->to);
  fflush(c->to);
  if (!fgets(line, (int)size, c->from)) die("the server closed its output (is --fimi right?)");
  return strstr(line, "\"error\"") == NULL && strstr(line, "\"isError\":true") == NULL;
}

static const char *INIT = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                          "\"2025-11-25\",\"capabilities\":{}}}";

static void row(const char *what, int calls, double seconds) {
  printf("| %-42s | %8d | %10.1f | %10.0f |\n", what, calls, 1e6 * seconds / calls, calls / seconds);
}

static void bench_stdio(const char *fimi, const char *db, const McpBenchCalls *calls, int n) {
  char line[8192], request[512];
  Child c = spawn(fimi, db);
  if (!round_trip(&c, INIT, line, sizeof line) || !round_trip(&c, calls->verify, line, sizeof line))
    die("initialize or verify failed");
  double t0 = now_seconds();
  for (int i = 0; i < n; i++)
    if (!round_trip(&c, calls->read, line, sizeof line)) die(line);
  row("stdio: get_account_balance (read)", n, now_seconds() - t0);
  t0 = now_seconds();
  for (int i = 0; i < n; i++) {
    snprintf(request, sizeof request, calls->write_fmt, i);
    if (!round_trip(&c, request, line, sizeof line)) die(line);
  }
  row("stdio: update_contact (write, commit)", n, now_seconds() - t0);
  fclose(c.to);
  fclose(c.from);
  waitpid(c.pid, NULL, 0);
}

static void bench_in_process(const char *db, const McpBenchCalls *calls, int n) {
  FimiError err = {0};
  BankEpisode *bank = NULL;
  McpServer *server = NULL;
  if (bank_episode_open_file(db, kb_builtin(&err), 5000, &bank, &err) != 0 ||
      mcp_server_create(bank, 0, &server, &err) != 0)
    die(err.message);
  free(mcp_server_handle(server, INIT, strlen(INIT)));
  free(mcp_server_handle(server, calls->verify, strlen(calls->verify)));
  double t0 = now_seconds();
  for (int i = 0; i < n; i++) free(mcp_server_handle(server, calls->read, strlen(calls->read)));
  row("in-process: get_account_balance (read)", n, now_seconds() - t0);
  char request[512];
  t0 = now_seconds();
  for (int i = 0; i < n; i++) {
    snprintf(request, sizeof request, calls->write_fmt, i);
    free(mcp_server_handle(server, request, strlen(request)));
  }
  row("in-process: update_contact (write, commit)", n, now_seconds() - t0);
  mcp_server_free(server);
  bank_episode_close(bank);
}

int main(int argc, char **argv) {
  const char *fimi = getenv("FIMI_BINARY") ? getenv("FIMI_BINARY") : "build/cmd/fimi";
  int n = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--fimi") == 0) fimi = argv[i + 1];
    else if (strcmp(argv[i], "--calls") == 0) n = atoi(argv[i + 1]);
    else die("usage: bench_mcp_stdio [--fimi PATH] [--calls N]");
  }
  if (n < 1) die("--calls must be positive");
  char dir[] = "/tmp/fimi-bench-mcp-XXXXXX", db[64];
  if (!mkdtemp(dir)) die("mkdtemp");
  snprintf(db, sizeof db, "%s/bank.sqlite", dir);
  McpBenchCalls calls;
  FimiError err = {0};
  if (mcp_bench_calls(&calls, 0, &err) != 0) die(err.message);
  printf("| %-42s | %8s | %10s | %10s |\n|---|---|---|---|\n", "calls (one in flight)", "calls", "us/call",
         "calls/s");
  bench_stdio(fimi, db, &calls, n);
  bench_in_process(db, &calls, n);
  char command[96];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  return system(command) == 0 ? 0 : 1;
}
