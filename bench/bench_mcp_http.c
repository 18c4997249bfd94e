// bench/bench_mcp_http.c: tool calls per second of `fimi mcp serve --http`
// (the Streamable HTTP transport) with 1 and several concurrent clients, each
// its own MCP session and keep-alive connection, one request in flight per
// client: a read (get_account_balance) and a write (update_contact, one
// committed SQLite transaction each, WAL with synchronous=FULL). The client
// side is libcurl. Prints a table.
//
// Usage: bench_mcp_http [--fimi PATH] [--calls N] [--clients LIST]
//   PATH defaults to $FIMI_BINARY, else build/cmd/fimi; N (calls per client)
//   to 2000; LIST (comma-separated client counts) to 1,4.
#define _GNU_SOURCE  // mkdtemp, setenv
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_mcp_calls.h"
#include "env/bank/db.h"

#define MAX_CLIENTS 16
#define TOKEN "bench-token-0123456789abcdef0123"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "bench_mcp_http: %s\n", what);
  exit(1);
}

// ---- the server ---------------------------------------------------------------

static pid_t start_server(const char *fimi, const char *dir, int *port) {
  char db[128], log[128];
  snprintf(db, sizeof db, "%s/bank.sqlite", dir);
  snprintf(log, sizeof log, "%s/server.log", dir);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(log, "w", stderr) || !freopen("/dev/null", "r", stdin)) _exit(126);
    setenv("FIMI_MCP_TOKEN", TOKEN, 1);
    execl(fimi, fimi, "mcp", "serve", "--db", db, "--create", "--http", "127.0.0.1:0", "--max-sessions", "64",
          (char *)NULL);
    _exit(127);
  }
  // The server names the port it got on its log.
  for (int tries = 0; tries < 600; tries++) {
    usleep(50000);
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
      const char *at = strstr(line, "listening on http://127.0.0.1:");
      if (at && sscanf(at, "listening on http://127.0.0.1:%d", port) == 1) {
        fclose(f);
        return pid;
      }
    }
    if (f) fclose(f);
    if (waitpid(pid, NULL, WNOHANG) == pid) die("the server exited (is --fimi right?)");
  }
  die("the server did not start");
  return -1;
}

// ---- one client: a session over one keep-alive connection ---------------------

typedef struct Buffer {
  char *data;
  size_t length;
} Buffer;

static size_t collect(char *data, size_t size, size_t n, void *arg) {
  Buffer *b = arg;
  char *grown = realloc(b->data, b->length + size * n + 1);
  if (!grown) return 0;
  memcpy(grown + b->length, data, size * n);
  b->data = grown;
  b->length += size * n;
  b->data[b->length] = '\0';
  return size * n;
}

typedef struct Client {
  CURL *curl;
  struct curl_slist *headers;
  Buffer response;
  char url[64];
  McpBenchCalls requests;
  int calls;
  double seconds;  // of its own timed loop
} Client;

static void set_headers(Client *c, const char *session_id) {
  curl_slist_free_all(c->headers);
  c->headers = curl_slist_append(NULL, "Authorization: Bearer " TOKEN);
  c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
  c->headers = curl_slist_append(c->headers, "Accept: application/json, text/event-stream");
  if (session_id) {
    char line[128];
    snprintf(line, sizeof line, "Mcp-Session-Id: %s", session_id);
    c->headers = curl_slist_append(c->headers, line);
    c->headers = curl_slist_append(c->headers, "MCP-Protocol-Version: 2025-11-25");
  }
  curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
}

// One POST; returns the HTTP status and leaves the body in c->response.
static long post(Client *c, const char *body) {
  c->response.length = 0;
  curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
  if (curl_easy_perform(c->curl) != CURLE_OK) die("a request failed");
  long status = 0;
  curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

static int ok(Client *c, long status) {
  return status == 200 && c->response.data && !strstr(c->response.data, "\"error\"") &&
         !strstr(c->response.data, "\"isError\":true");
}

static const char *INIT = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                          "\"2025-11-25\",\"capabilities\":{}}}";

static void open_session(Client *c) {
  set_headers(c, NULL);
  if (post(c, INIT) != 200) die("initialize failed");
  struct curl_header *h = NULL;
  if (curl_easy_header(c->curl, "Mcp-Session-Id", 0, CURLH_HEADER, -1, &h) != CURLHE_OK) die("no Mcp-Session-Id");
  char sid[128];
  snprintf(sid, sizeof sid, "%s", h->value);
  set_headers(c, sid);
  if (post(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") != 202) die("initialized");
  if (!ok(c, post(c, c->requests.verify))) die(c->response.data ? c->response.data : "verify failed");
}

static void client_init(Client *c, int port, int n) {
  memset(c, 0, sizeof *c);
  FimiError err = {0};
  if (mcp_bench_calls(&c->requests, n, &err) != 0) die(err.message);
  snprintf(c->url, sizeof c->url, "http://127.0.0.1:%d/mcp", port);
  c->curl = curl_easy_init();
  if (!c->curl) die("curl_easy_init");
  curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
  curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->response);
  curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
  open_session(c);
}

static void client_free(Client *c) {
  // DELETE ends the session, as a client leaving should.
  curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);  // no body
  curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, "DELETE");
  c->response.length = 0;
  long status = 0;
  if (curl_easy_perform(c->curl) == CURLE_OK) curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 204) fprintf(stderr, "bench_mcp_http: DELETE answered %ld\n", status);
  curl_slist_free_all(c->headers);
  curl_easy_cleanup(c->curl);
  free(c->response.data);
}

// ---- timed runs ---------------------------------------------------------------

typedef struct Run {
  Client *client;
  int writes;
  pthread_barrier_t *start;
} Run;

static void *run_calls(void *arg) {
  Run *r = arg;
  Client *c = r->client;
  char request[512];
  pthread_barrier_wait(r->start);
  double t0 = now_seconds();
  for (int i = 0; i < c->calls; i++) {
    if (r->writes) snprintf(request, sizeof request, c->requests.write_fmt, i);
    if (!ok(c, post(c, r->writes ? request : c->requests.read))) die(c->response.data ? c->response.data : "a call failed");
  }
  c->seconds = now_seconds() - t0;
  return NULL;
}

static void row(const char *tool, int clients, int calls, double wall, double mean_client_s) {
  printf("| %-38s | %7d | %8d | %10.1f | %10.0f |\n", tool, clients, clients * calls, 1e6 * mean_client_s / calls,
         clients * calls / wall);
}

static void bench(Client *clients, int n_clients, int writes) {
  pthread_t threads[MAX_CLIENTS];
  Run runs[MAX_CLIENTS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)n_clients + 1);
  for (int i = 0; i < n_clients; i++) {
    runs[i] = (Run){&clients[i], writes, &start};
    pthread_create(&threads[i], NULL, run_calls, &runs[i]);
  }
  pthread_barrier_wait(&start);
  double t0 = now_seconds(), mean = 0;
  for (int i = 0; i < n_clients; i++) pthread_join(threads[i], NULL);
  double wall = now_seconds() - t0;
  for (int i = 0; i < n_clients; i++) mean += clients[i].seconds / n_clients;
  pthread_barrier_destroy(&start);
  row(writes ? "http: update_contact (write, commit)" : "http: get_account_balance (read)", n_clients,
      clients[0].calls, wall, mean);
}

static void bench_clients(int port, int n_clients, int calls) {
  Client clients[MAX_CLIENTS];
  for (int i = 0; i < n_clients; i++) {
    client_init(&clients[i], port, i);
    clients[i].calls = calls;
  }
  bench(clients, n_clients, 0);
  bench(clients, n_clients, 1);
  for (int i = 0; i < n_clients; i++) client_free(&clients[i]);
}

int main(int argc, char **argv) {
  const char *fimi = getenv("FIMI_BINARY") ? getenv("FIMI_BINARY") : "build/cmd/fimi";
  const char *list = "1,4";
  int calls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--fimi") == 0) fimi = argv[i + 1];
    else if (strcmp(argv[i], "--calls") == 0) calls = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--clients") == 0) list = argv[i + 1];
    else die("usage: bench_mcp_http [--fimi PATH] [--calls N] [--clients LIST]");
  }
  if (calls < 1) die("--calls must be positive");
  char dir[] = "/tmp/fimi-bench-mcp-http-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp");
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int port = 0;
  pid_t server = start_server(fimi, dir, &port);
  printf("| %-38s | %7s | %8s | %10s | %10s |\n|---|---|---|---|---|\n", "calls (one in flight per client)",
         "clients", "calls", "us/call", "calls/s");
  for (const char *p = list; *p;) {
    int n = atoi(p);
    if (n < 1 || n > MAX_CLIENTS) die("--clients: counts from 1 to 16");
    bench_clients(port, n, calls);
    p += strcspn(p, ",");
    if (*p == ',') p++;
  }
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  curl_global_cleanup();
  char command[96];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  return system(command) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
