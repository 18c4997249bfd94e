// tests/test_mcp_http.c: the Streamable HTTP transport of the MCP server
// (mcp/mcp_http*.c, docs/mcp.md) without sockets, through the handler that
// the libmicrohttpd daemon feeds:
// - the constant-time secret compare, the token from a file or the
//   environment (length, characters, file permissions), --http addresses
//   (loopback or not, malformed ones), a non-loopback start refused and a
//   loopback daemon started and stopped;
// - the header checks in order: Host (421), Origin (403), the Bearer token
//   (401), path (404), method (405), media types (415, 406), size (413);
// - sessions: initialize issues a 64-hex id, notifications get 202, a
//   request without an id 400, an unknown or forged id 404, a refused
//   initialize lists nothing, MCP-Protocol-Version must be the session's,
//   one session's verified customer is not another's, DELETE ends a
//   session, the session limit answers 503, idle sessions expire, a session
//   ended or expired while a request holds it is freed only after;
// - bodies: pretty-printed JSON is one message, a raw LF inside a string is
//   a parse error, an oversized body 413;
// - threads: sessions used from several threads at once (reads and
//   committed writes) all answer, and the file stays consistent.
#define _POSIX_C_SOURCE 200809L  // mkdtemp, setenv
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env/bank/db.h"
#include "core/log.h"
#include "env/knowledge.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_http_handler.h"
#include "mcp/mcp_http_sessions.h"
#include "net/http_token.h"
#include "tests/test_util.h"

#define TOKEN "test-token-0123456789abcdef"
#define MAX_SESSIONS 4
#define IDLE_S 30.0

static char dir[64], db_path[128];
static const KnowledgeBase *kb;
static char customer[2][3][BANK_ID_MAX];  // id, date of birth, mobile of two customers
static char account[2][BANK_ID_MAX];      // an account of each

static const char *const EXTRA_ORIGINS[] = {"https://agent.example", NULL};

// ---- helpers ----------------------------------------------------------------

static McpHttpHandler new_handler(int max_sessions) {
  FimiError err = {0};
  McpSessionConfig config = {db_path, kb, 5000, 0, max_sessions, IDLE_S};
  McpHttpHandler h = {{TOKEN, "/mcp", EXTRA_ORIGINS, NULL, 4096}, NULL};
  if (mcp_sessions_create(&config, &h.sessions, &err) != 0) {
    fprintf(stderr, "test_mcp_http: %s\n", err.message);
    exit(1);
  }
  return h;
}

// A POST that passes every header check, with `sid` (may be NULL).
static McpHttpRequest post(const char *body, const char *sid) {
  McpHttpRequest q = {0};
  q.method = "POST";
  q.path = "/mcp";
  q.host = "127.0.0.1:8765";
  q.authorization = "Bearer " TOKEN;
  q.content_type = "application/json";
  q.accept = "application/json, text/event-stream";
  q.session_id = sid;
  q.content_length = body ? (long long)strlen(body) : -1;
  q.body = body;
  q.body_length = body ? strlen(body) : 0;
  return q;
}

// Handles q; returns the status (-1 when a body is not JSON), the parsed
// body in *json (NULL when none) and the issued id in sid_out (may be
// NULL). No CHECK here: worker threads call it, and the counters are not
// atomic.
static int send_request(McpHttpHandler *h, const McpHttpRequest *q, cJSON **json, char *sid_out) {
  McpHttpResponse r;
  mcp_http_handle(h, q, &r);
  cJSON *parsed = r.body ? cJSON_Parse(r.body) : NULL;
  int status = r.body && !parsed ? -1 : r.status;
  if (json) *json = parsed;
  else cJSON_Delete(parsed);
  if (sid_out) snprintf(sid_out, MCP_SESSION_ID_CHARS + 1, "%s", r.session_id);
  mcp_http_response_free(&r);
  return status;
}

static int status_of(McpHttpHandler *h, const McpHttpRequest *q) { return send_request(h, q, NULL, NULL); }

static const char *INIT = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                          "\"2025-11-25\",\"capabilities\":{}}}";
static const char *PING = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";

// initialize + notifications/initialized; the new id in sid.
static void open_session(McpHttpHandler *h, char *sid) {
  McpHttpRequest q = post(INIT, NULL);
  int status = send_request(h, &q, NULL, sid);
  CHECK(status == 200 && strlen(sid) == MCP_SESSION_ID_CHARS && strspn(sid, "0123456789abcdef") == strlen(sid),
        "initialize: %d, id \"%s\"", status, sid);
  q = post("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", sid);
  CHECK(status_of(h, &q) == 202, "initialized notification not 202");
}

// tools/call in a session: the result's isError (-1 when no result), and the text.
static int call_tool(McpHttpHandler *h, const char *sid, const char *name, const char *arguments, char *text,
                     size_t size) {
  char body[1024];
  snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
           "\"arguments\":%s}}", name, arguments);
  McpHttpRequest q = post(body, sid);
  cJSON *json = NULL;
  int status = send_request(h, &q, &json, NULL);
  const cJSON *result = cJSON_GetObjectItem(json, "result");
  const cJSON *content = cJSON_GetArrayItem(cJSON_GetObjectItem(result, "content"), 0);
  const cJSON *t = cJSON_GetObjectItem(content, "text");
  if (text) snprintf(text, size, "%s", cJSON_IsString(t) ? t->valuestring : "");
  int is_error = status == 200 && result ? cJSON_IsTrue(cJSON_GetObjectItem(result, "isError")) : -1;
  cJSON_Delete(json);
  return is_error;
}

static void verify_args(int who, char *out, size_t size) {
  snprintf(out, size, "{\"customer_id\":\"%s\",\"date_of_birth\":\"%s\",\"registered_mobile\":\"%s\"}",
           customer[who][0], customer[who][1], customer[who][2]);
}

static void balance_args(int who, char *out, size_t size) {
  snprintf(out, size, "{\"account_ids\":[\"%s\"]}", account[who]);
}

static int error_code(const cJSON *json) {
  const cJSON *code = cJSON_GetObjectItem(cJSON_GetObjectItem(json, "error"), "code");
  return cJSON_IsNumber(code) ? code->valueint : 0;
}

// ---- pieces without sessions -------------------------------------------------

static void test_secret_equal(void) {
  CHECK(http_secret_equal("abc", 3, "abc", 3), "equal secrets");
  CHECK(!http_secret_equal("abd", 3, "abc", 3), "last byte differs");
  CHECK(!http_secret_equal("ab", 2, "abc", 3), "a prefix");
  CHECK(!http_secret_equal("abcd", 4, "abc", 3), "longer");
  CHECK(!http_secret_equal("", 0, "abc", 3), "empty");
  CHECK(!http_secret_equal("abc\0", 4, "abc", 3), "a NUL after the secret");
}

static void write_file(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  if (!f) exit(1);
  fputs(text, f);
  fclose(f);
  chmod(path, mode);
}

static void test_token(void) {
  char token[HTTP_TOKEN_MAX_CHARS + 1], path[160];
  FimiError err = {0};
  CHECK(http_token_load(NULL, "--token-file", "FIMI_MCP_TOKEN", "  0123456789abcdefXYZ\n", token, sizeof token, &err) == 0 &&
            strcmp(token, "0123456789abcdefXYZ") == 0, "token from the environment: %s", err.message);
  CHECK(http_token_load(NULL, "--token-file", "FIMI_MCP_TOKEN", "short", token, sizeof token, &err) != 0 && strstr(err.message, "16"),
        "a short token is refused");
  CHECK(http_token_load(NULL, "--token-file", "FIMI_MCP_TOKEN", "0123456789 abcdefXYZ", token, sizeof token, &err) != 0, "a token with a space");
  CHECK(http_token_load(NULL, "--token-file", "FIMI_MCP_TOKEN", "0123456789abcdef\x01XYZ", token, sizeof token, &err) != 0, "a control byte");
  CHECK(http_token_load(NULL, "--token-file", "FIMI_MCP_TOKEN", NULL, token, sizeof token, &err) != 0 && strstr(err.message, "FIMI_MCP_TOKEN"),
        "no token at all names the variable");
  snprintf(path, sizeof path, "%s/token", dir);
  write_file(path, "file-token-0123456789\nsecond line ignored\n", 0600);
  CHECK(http_token_load(path, "--token-file", "FIMI_MCP_TOKEN", "env-token-0123456789", token, sizeof token, &err) == 0 &&
            strcmp(token, "file-token-0123456789") == 0, "the file wins over the environment: %s", err.message);
  chmod(path, 0644);
  CHECK(http_token_load(path, "--token-file", "FIMI_MCP_TOKEN", NULL, token, sizeof token, &err) != 0 && strstr(err.message, "chmod 600"),
        "a file readable by others is refused");
  snprintf(path, sizeof path, "%s/no-such-token", dir);
  CHECK(http_token_load(path, "--token-file", "FIMI_MCP_TOKEN", NULL, token, sizeof token, &err) != 0, "a missing file");
}

static void test_listen(void) {
  HttpListen l;
  FimiError err = {0};
  CHECK(http_listen_parse("127.0.0.1:0", "--http", &l, &err) == 0 && l.loopback && l.port == 0, "127.0.0.1:0");
  CHECK(http_listen_parse("localhost:8765", "--http", &l, &err) == 0 && l.loopback && strcmp(l.host, "127.0.0.1") == 0,
        "localhost");
  CHECK(http_listen_parse("127.9.9.9:1", "--http", &l, &err) == 0 && l.loopback, "127.0.0.0/8 is loopback");
  CHECK(http_listen_parse("[::1]:8080", "--http", &l, &err) == 0 && l.loopback && strcmp(l.host, "[::1]") == 0, "[::1]");
  CHECK(http_listen_parse("0.0.0.0:80", "--http", &l, &err) == 0 && !l.loopback, "0.0.0.0 is not loopback");
  CHECK(http_listen_parse("10.1.2.3:80", "--http", &l, &err) == 0 && !l.loopback && strcmp(l.host, "10.1.2.3") == 0,
        "10.1.2.3");
  CHECK(http_listen_parse("[::]:80", "--http", &l, &err) == 0 && !l.loopback, "[::] is not loopback");
  const char *bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:8x",
                       "example.com:80", "[::1]8080", "[::1:80", ":80", "", "[nonsense]:80", NULL};
  for (int i = 0; bad[i]; i++) CHECK(http_listen_parse(bad[i], "--http", &l, &err) != 0, "\"%s\" accepted", bad[i]);
}

static void test_daemon_start(void) {
  McpHttpHandler h = new_handler(MAX_SESSIONS);
  HttpListen l;
  FimiError err = {0};
  McpHttpServer *server = NULL;
  http_listen_parse("0.0.0.0:0", "--http", &l, &err);
  CHECK(mcp_http_start(&h, &l, 0, 8, 5, &server, &err) != 0 && strstr(err.message, "--allow-non-loopback"),
        "a non-loopback address without the flag: %s", err.message);
  http_listen_parse("127.0.0.1:0", "--http", &l, &err);
  CHECK(mcp_http_start(&h, &l, 0, 8, 5, &server, &err) == 0 && mcp_http_port(server) > 0, "loopback start: %s",
        err.message);
  mcp_http_stop(server);
  mcp_sessions_free(h.sessions);
}

// ---- header checks -------------------------------------------------------------

typedef struct HeaderCase {
  const char *what;
  int status;
  void (*change)(McpHttpRequest *q);
} HeaderCase;

static void host_evil(McpHttpRequest *q) { q->host = "evil.example:8765"; }
static void host_bad_port(McpHttpRequest *q) { q->host = "127.0.0.1:80x"; }
static void host_localhost(McpHttpRequest *q) { q->host = "LOCALHOST:8765"; }
static void host_v6(McpHttpRequest *q) { q->host = "[::1]:8765"; }
static void origin_evil(McpHttpRequest *q) { q->origin = "http://evil.example"; }
static void origin_null(McpHttpRequest *q) { q->origin = "null"; }
static void origin_path(McpHttpRequest *q) { q->origin = "http://localhost:8765/x"; }
static void origin_lookalike(McpHttpRequest *q) { q->origin = "http://localhost.evil.example"; }
static void origin_local(McpHttpRequest *q) { q->origin = "http://localhost:8765"; }
static void origin_listed(McpHttpRequest *q) { q->origin = "https://agent.example"; }
static void origin_listed_port(McpHttpRequest *q) { q->origin = "https://agent.example:444"; }
static void auth_none(McpHttpRequest *q) { q->authorization = NULL; }
static void auth_wrong(McpHttpRequest *q) { q->authorization = "Bearer test-token-0123456789abcdeX"; }
static void auth_prefix(McpHttpRequest *q) { q->authorization = "Bearer test-token"; }
static void auth_basic(McpHttpRequest *q) { q->authorization = "Basic " TOKEN; }
static void auth_case(McpHttpRequest *q) { q->authorization = "bearer   " TOKEN "  "; }
static void path_other(McpHttpRequest *q) { q->path = "/mcp/"; }
static void method_get(McpHttpRequest *q) { q->method = "GET"; }
static void method_put(McpHttpRequest *q) { q->method = "PUT"; }
static void type_text(McpHttpRequest *q) { q->content_type = "text/plain"; }
static void type_none(McpHttpRequest *q) { q->content_type = NULL; }
static void type_jsonl(McpHttpRequest *q) { q->content_type = "application/jsonl"; }
static void type_charset(McpHttpRequest *q) { q->content_type = "Application/JSON; charset=utf-8"; }
static void accept_html(McpHttpRequest *q) { q->accept = "text/html"; }
static void accept_any(McpHttpRequest *q) { q->accept = "text/html, */*;q=0.1"; }
static void length_big(McpHttpRequest *q) { q->content_length = 4097; }

static void test_header_checks(void) {
  const HeaderCase cases[] = {
      {"evil Host", 421, host_evil}, {"Host with a bad port", 421, host_bad_port},
      {"LOCALHOST", 200, host_localhost}, {"[::1] Host", 200, host_v6},
      {"evil Origin", 403, origin_evil}, {"null Origin", 403, origin_null},
      {"Origin with a path", 403, origin_path}, {"look-alike Origin", 403, origin_lookalike},
      {"loopback Origin", 200, origin_local}, {"listed Origin", 200, origin_listed},
      {"listed Origin, other port", 403, origin_listed_port}, {"no token", 401, auth_none},
      {"wrong token", 401, auth_wrong}, {"token prefix", 401, auth_prefix}, {"Basic", 401, auth_basic},
      {"bearer, spaces", 200, auth_case}, {"other path", 404, path_other}, {"GET", 405, method_get},
      {"PUT", 405, method_put}, {"text/plain", 415, type_text}, {"no Content-Type", 415, type_none},
      {"application/jsonl", 415, type_jsonl}, {"JSON with charset", 200, type_charset},
      {"Accept text/html", 406, accept_html}, {"Accept */*", 200, accept_any}, {"Content-Length", 413, length_big},
  };
  McpHttpHandler h = new_handler(64);
  int accepted = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    accepted += cases[i].status == 200;
    McpHttpRequest q = post(INIT, NULL);
    cases[i].change(&q);
    McpHttpResponse r;
    int early = mcp_http_check_headers(&h, &q, &r);
    CHECK((early != 0) == (cases[i].status != 200) && (early == 0 || r.status == cases[i].status),
          "%s: header check %d status %d, expected %d", cases[i].what, early, r.status, cases[i].status);
    if (cases[i].status == 401) CHECK(r.authenticate, "%s: no WWW-Authenticate", cases[i].what);
    if (cases[i].status == 405) CHECK(r.allow && strstr(r.allow, "POST"), "%s: no Allow", cases[i].what);
    mcp_http_response_free(&r);
    cJSON *json = NULL;
    int status = send_request(&h, &q, &json, NULL);
    CHECK(status == cases[i].status, "%s: status %d, expected %d", cases[i].what, status, cases[i].status);
    if (status != 200) CHECK(error_code(json) != 0, "%s: no JSON-RPC error in the body", cases[i].what);
    cJSON_Delete(json);
  }
  CHECK(mcp_sessions_count(h.sessions) == accepted, "%d sessions for %d accepted initializes",
        mcp_sessions_count(h.sessions), accepted);
  mcp_sessions_free(h.sessions);
}

// ---- sessions -------------------------------------------------------------------

static void test_session_rules(void) {
  McpHttpHandler h = new_handler(MAX_SESSIONS);
  char a[MCP_SESSION_ID_CHARS + 1], b[MCP_SESSION_ID_CHARS + 1], args[256], text[4096];
  open_session(&h, a);
  open_session(&h, b);
  CHECK(strcmp(a, b) != 0, "two sessions got one id");
  // Without an id: 400, answering the request's id.
  McpHttpRequest q = post(PING, NULL);
  cJSON *json = NULL;
  CHECK(send_request(&h, &q, &json, NULL) == 400 && error_code(json) == -32600 &&
            cJSON_GetObjectItem(json, "id")->valueint == 2, "a ping without a session id");
  cJSON_Delete(json);
  // A refused initialize lists no session.
  q = post("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", NULL);
  CHECK(send_request(&h, &q, &json, NULL) == 400 && error_code(json) == -32602, "initialize without a version");
  cJSON_Delete(json);
  CHECK(mcp_sessions_count(h.sessions) == 2, "a refused initialize left a session");
  // A second initialize inside a session is the session's own error.
  q = post(INIT, a);
  CHECK(send_request(&h, &q, &json, NULL) == 200 && error_code(json) == -32600, "a second initialize");
  cJSON_Delete(json);
  // The protocol version header must be the session's.
  q = post(PING, a);
  q.protocol_version = "2025-06-18";
  CHECK(status_of(&h, &q) == 400, "another protocol version");
  q.protocol_version = "2025-11-25";
  CHECK(status_of(&h, &q) == 200, "the session's protocol version");
  // A's verified customer is A's only.
  verify_args(0, args, sizeof args);
  CHECK(call_tool(&h, a, "verify_customer", args, text, sizeof text) == 0, "verify in A: %s", text);
  balance_args(0, args, sizeof args);
  CHECK(call_tool(&h, a, "get_account_balance", args, text, sizeof text) == 0, "balance in A: %s", text);
  CHECK(call_tool(&h, b, "get_account_balance", args, text, sizeof text) == 1 && strstr(text, "verify_customer"),
        "B read A's customer: %s", text);
  // Forged ids: one character off, too short, too long.
  char forged[MCP_SESSION_ID_CHARS + 2];
  snprintf(forged, sizeof forged, "%s", a);
  forged[MCP_SESSION_ID_CHARS - 1] = forged[MCP_SESSION_ID_CHARS - 1] == '0' ? '1' : '0';
  CHECK(call_tool(&h, forged, "get_account_balance", args, NULL, 0) == -1, "a forged id served");
  q = post(PING, forged);
  CHECK(status_of(&h, &q) == 404, "a forged id is not 404");
  forged[MCP_SESSION_ID_CHARS - 1] = '\0';
  q = post(PING, forged);
  CHECK(status_of(&h, &q) == 404, "a short id is not 404");
  snprintf(forged, sizeof forged, "%s0", a);
  q = post(PING, forged);
  CHECK(status_of(&h, &q) == 404, "a long id is not 404");
  // DELETE ends A only.
  q = post(NULL, a);
  q.method = "DELETE";
  CHECK(status_of(&h, &q) == 204, "DELETE");
  CHECK(status_of(&h, &q) == 404, "DELETE twice");
  q.session_id = NULL;
  CHECK(status_of(&h, &q) == 400, "DELETE without an id");
  q = post(PING, a);
  CHECK(status_of(&h, &q) == 404, "an ended session served");
  q = post(PING, b);
  CHECK(status_of(&h, &q) == 200, "B died with A");
  mcp_sessions_free(h.sessions);
}

static void test_bodies(void) {
  McpHttpHandler h = new_handler(MAX_SESSIONS);
  char sid[MCP_SESSION_ID_CHARS + 1];
  open_session(&h, sid);
  cJSON *json = NULL;
  McpHttpRequest q = post("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 9,\n  \"method\": \"ping\"\n}\n", sid);
  CHECK(send_request(&h, &q, &json, NULL) == 200 && cJSON_GetObjectItem(json, "result"), "pretty-printed ping");
  cJSON_Delete(json);
  q = post("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"pi\nng\"}", sid);
  CHECK(send_request(&h, &q, &json, NULL) == 400 && error_code(json) == -32700, "LF inside a string");
  cJSON_Delete(json);
  q = post("", sid);
  CHECK(send_request(&h, &q, &json, NULL) == 400 && error_code(json) == -32700, "an empty body");
  cJSON_Delete(json);
  q = post(PING, sid);
  q.body_too_large = 1;
  q.content_length = -1;  // chunked
  CHECK(status_of(&h, &q) == 413, "a chunked body over the limit");
  q = post("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", sid);
  CHECK(status_of(&h, &q) == 202, "a client's response is accepted with 202");
  mcp_sessions_free(h.sessions);
}

static void test_limit_and_expiry(void) {
  McpHttpHandler h = new_handler(2);
  char a[MCP_SESSION_ID_CHARS + 1], b[MCP_SESSION_ID_CHARS + 1];
  open_session(&h, a);
  open_session(&h, b);
  McpHttpRequest q = post(INIT, NULL);
  cJSON *json = NULL;
  CHECK(send_request(&h, &q, &json, NULL) == 503 && error_code(json) == -32603, "a third session");
  cJSON_Delete(json);
  // A request holds A while A expires and B is ended: both stay usable to
  // their holders and are freed on release (ASan sees any use after free).
  double later = mcp_sessions_now() + IDLE_S + 1;
  McpSession *held_a = mcp_session_acquire(h.sessions, a, mcp_sessions_now());
  McpSession *held_b = mcp_session_acquire(h.sessions, b, mcp_sessions_now());
  CHECK(held_a && held_b, "acquire");
  CHECK(mcp_sessions_expire(h.sessions, later) == 0, "a held session expired");
  CHECK(mcp_session_end(h.sessions, b) == 0, "end a held session");
  CHECK(mcp_session_acquire(h.sessions, b, mcp_sessions_now()) == NULL, "an ended session acquired");
  char *pong = mcp_server_handle(mcp_session_server(held_b), PING, strlen(PING));
  CHECK(pong && strstr(pong, "\"result\""), "the holder of an ended session");
  free(pong);
  mcp_session_release(h.sessions, held_b, mcp_sessions_now());
  mcp_session_release(h.sessions, held_a, mcp_sessions_now());
  CHECK(mcp_sessions_count(h.sessions) == 1, "%d sessions, expected A", mcp_sessions_count(h.sessions));
  // Idle past its time: refused on use at once, freed by the sweep.
  CHECK(mcp_session_acquire(h.sessions, a, later) == NULL, "an idle session acquired");
  CHECK(mcp_sessions_expire(h.sessions, later) == 1 && mcp_sessions_count(h.sessions) == 0, "sweep");
  q = post(PING, a);
  CHECK(status_of(&h, &q) == 404, "an expired session served");
  open_session(&h, a);
  open_session(&h, b);  // room again
  mcp_sessions_free(h.sessions);
}

// ---- threads --------------------------------------------------------------------

#define THREADS 4
#define CALLS_PER_THREAD 40

typedef struct Worker {
  McpHttpHandler *h;
  const char *sid;
  int who, failures;
} Worker;

static void *work(void *arg) {
  Worker *w = arg;
  char args[256], text[4096];
  for (int i = 0; i < CALLS_PER_THREAD; i++) {
    if (i % 4 == 3) snprintf(args, sizeof args, "{\"email\":\"t%d-%d@example.com\"}", w->who, i);
    else balance_args(w->who, args, sizeof args);
    const char *tool = i % 4 == 3 ? "update_contact" : "get_account_balance";
    if (call_tool(w->h, w->sid, tool, args, text, sizeof text) != 0) w->failures++;
  }
  return NULL;
}

static void test_threads(void) {
  McpHttpHandler h = new_handler(MAX_SESSIONS);
  char sid[2][MCP_SESSION_ID_CHARS + 1], args[256];
  for (int s = 0; s < 2; s++) {
    open_session(&h, sid[s]);
    verify_args(s, args, sizeof args);
    CHECK(call_tool(&h, sid[s], "verify_customer", args, NULL, 0) == 0, "verify %d", s);
  }
  // Two threads per session: a session serves one request at a time, the
  // two sessions run side by side.
  pthread_t threads[THREADS];
  Worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (Worker){&h, sid[t % 2], t % 2, 0};
    pthread_create(&threads[t], NULL, work, &workers[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    CHECK(workers[t].failures == 0, "thread %d: %d calls failed", t, workers[t].failures);
  }
  mcp_sessions_free(h.sessions);
  FimiError err = {0};
  BankEpisode *bank = NULL;
  CHECK(bank_episode_open_file(db_path, kb, 5000, &bank, &err) == 0 && bank_episode_check_integrity(bank, &err) == 0,
        "integrity after the threads: %s", err.message);
  bank_episode_close(bank);
}

// ---- setup ----------------------------------------------------------------------

static void first_account(BankEpisode *ep, const char *customer_id, char *out) {
  sqlite3_stmt *stmt = NULL;
  sqlite3_prepare_v2(ep->db, "SELECT account_id FROM accounts WHERE customer_id = ? ORDER BY 1", -1, &stmt, NULL);
  sqlite3_bind_text(stmt, 1, customer_id, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(stmt) == SQLITE_ROW) snprintf(out, BANK_ID_MAX, "%s", sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
}

static int setup(FimiError *err) {
  snprintf(dir, sizeof dir, "/tmp/fimi-test-mcp-http-XXXXXX");
  if (!mkdtemp(dir)) return fimi_fail(err, "mkdtemp");
  snprintf(db_path, sizeof db_path, "%s/bank.sqlite", dir);
  BankImage image;
  BankEpisode *ep = NULL;
  if (!(kb = kb_builtin(err)) || bank_image_build(1, &image, err) != 0) return -1;
  int rc = bank_file_create(&image, db_path, err);
  if (rc == 0) rc = bank_episode_open(&image, NULL, &ep, err);
  for (int who = 0; rc == 0 && who < 2; who++) {
    rc = bank_episode_customer_credentials(ep, who, customer[who][0], customer[who][1], customer[who][2], err);
    if (rc == 0) first_account(ep, customer[who][0], account[who]);
  }
  bank_episode_close(ep);
  bank_image_free(&image);
  return rc;
}

int main(void) {
  FimiError err = {0};
  log_set_level(LOG_ERROR);  // a line per session and per refusal would drown the failures
  if (setup(&err) != 0) {
    fprintf(stderr, "test_mcp_http: setup: %s\n", err.message);
    return 1;
  }
  test_secret_equal();
  test_token();
  test_listen();
  test_daemon_start();
  test_header_checks();
  test_session_rules();
  test_bodies();
  test_limit_and_expiry();
  test_threads();
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  if (system(command) != 0) fprintf(stderr, "test_mcp_http: could not remove %s\n", dir);
  TEST_MAIN_END();
}
