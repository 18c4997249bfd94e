// tests/test_mcp.c: the MCP server over the bank (mcp/, docs/mcp.md):
// - the bank file (env/bank/file.c): created once, refused twice, never
//   created by open, a non-bank file refused;
// - framing and dispatch: parse errors, invalid UTF-8, control bytes,
//   batches, wrong jsonrpc, bad ids, deep nesting, oversized messages,
//   unknown methods, params of the wrong type, the lifecycle (initialize
//   once, version negotiation, tools before initialize), with a ping after
//   every bad message to show the server still serves;
// - tools/list against the catalog (env_tool_schema) and annotations;
// - authorization: nothing before verify_customer (with the training error
//   text), other customers' accounts, cards, deposits and policies refused
//   and unchanged, a second verification as someone else refused;
// - injection strings in every string argument of every tool: the schema
//   stays, no SQL text comes back, every other customer's rows unchanged;
// - equivalence: gold chains of generated tasks through MCP give the gold
//   replay's results and database digest;
// - concurrency: two forked server processes booking FDs from one account
//   on one file never overdraw and lose no write.
#define _POSIX_C_SOURCE 200809L  // mkdtemp, fork
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env/bank/db.h"
#include "env/bank/tools.h"
#include "env/episode.h"
#include "env/knowledge.h"
#include "env/tasks/family.h"
#include "mcp/mcp_jsonrpc.h"
#include "mcp/mcp_server.h"
#include "tests/test_util.h"

static BankImage image;
static const KnowledgeBase *kb;
static char dir[64];
static int file_counter;

// ---- helpers ----------------------------------------------------------------

static void new_path(char *out, size_t size) { snprintf(out, size, "%s/bank-%d.sqlite", dir, file_counter++); }

static BankEpisode *open_new_file(char *path, size_t size) {
  FimiError err = {0};
  BankEpisode *bank = NULL;
  new_path(path, size);
  if (bank_file_create(&image, path, &err) != 0 || bank_episode_open_file(path, kb, 5000, &bank, &err) != 0) {
    fprintf(stderr, "test_mcp: %s\n", err.message);
    exit(1);
  }
  return bank;
}

static McpServer *new_server(BankEpisode *bank, size_t max_bytes) {
  FimiError err = {0};
  McpServer *server = NULL;
  if (mcp_server_create(bank, max_bytes, &server, &err) != 0) {
    fprintf(stderr, "test_mcp: %s\n", err.message);
    exit(1);
  }
  return server;
}

// Sends raw bytes; returns the parsed response (NULL when none came).
static cJSON *send_raw(McpServer *server, const char *bytes, size_t length) {
  char *line = mcp_server_handle(server, bytes, length);
  if (!line) return NULL;
  CHECK(!strchr(line, '\n'), "a response spans lines: %.80s", line);
  cJSON *response = cJSON_Parse(line);
  CHECK(response != NULL, "response is not JSON: %.120s", line);
  free(line);
  return response;
}

static cJSON *send_text(McpServer *server, const char *text) { return send_raw(server, text, strlen(text)); }

static int error_code(const cJSON *response) {
  const cJSON *error = cJSON_GetObjectItem(response, "error");
  const cJSON *code = cJSON_GetObjectItem(error, "code");
  return cJSON_IsNumber(code) ? code->valueint : 0;
}

static int alive(McpServer *server) {
  cJSON *r = send_text(server, "{\"jsonrpc\":\"2.0\",\"id\":\"alive\",\"method\":\"ping\"}");
  int ok = r && cJSON_IsObject(cJSON_GetObjectItem(r, "result"));
  cJSON_Delete(r);
  return ok;
}

// The response to a bad message: its error code, and the server still up.
static void expect_error(McpServer *server, const char *bytes, size_t length, int code, const char *what) {
  cJSON *r = send_raw(server, bytes, length);
  CHECK(r && error_code(r) == code, "%s: expected error %d, got %d", what, code, r ? error_code(r) : 0);
  CHECK(alive(server), "%s: server no longer answers ping", what);
  cJSON_Delete(r);
}
#define EXPECT_ERROR(server, text, code) expect_error(server, text, strlen(text), code, text)

static void initialize(McpServer *server) {
  cJSON *r = send_text(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                               "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
  CHECK(r && cJSON_GetObjectItem(r, "result"), "initialize failed");
  cJSON_Delete(r);
  CHECK(send_text(server, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") == NULL,
        "a notification was answered");
}

// tools/call; returns the CallToolResult (caller deletes), NULL on a protocol error.
static cJSON *call_tool(McpServer *server, const char *name, const cJSON *arguments) {
  cJSON *request = cJSON_CreateObject();
  cJSON_AddStringToObject(request, "jsonrpc", "2.0");
  cJSON_AddNumberToObject(request, "id", 7);
  cJSON_AddStringToObject(request, "method", "tools/call");
  cJSON *params = cJSON_AddObjectToObject(request, "params");
  cJSON_AddStringToObject(params, "name", name);
  if (arguments) cJSON_AddItemToObject(params, "arguments", cJSON_Duplicate(arguments, 1));
  char *text = cJSON_PrintUnformatted(request);
  cJSON_Delete(request);
  cJSON *r = send_text(server, text);
  free(text);
  cJSON *result = r ? cJSON_DetachItemFromObject(r, "result") : NULL;
  cJSON_Delete(r);
  return result;
}

static cJSON *call_json(McpServer *server, const char *name, const char *arguments_json) {
  cJSON *arguments = cJSON_Parse(arguments_json);
  cJSON *result = call_tool(server, name, arguments);
  cJSON_Delete(arguments);
  return result;
}

static int is_error(const cJSON *result) { return cJSON_IsTrue(cJSON_GetObjectItem(result, "isError")); }
static const char *result_text(const cJSON *result) {
  const cJSON *block = cJSON_GetArrayItem(cJSON_GetObjectItem(result, "content"), 0);
  const cJSON *text = cJSON_GetObjectItem(block, "text");
  return cJSON_IsString(text) ? text->valuestring : "";
}

static uint64_t digest(BankEpisode *bank) {
  FimiError err = {0};
  uint64_t d = 0;
  CHECK(env_state_digest(bank, &d, &err) == 0, "digest: %s", err.message);
  return d;
}

// The first text column of a query on the bank (test fixtures only).
static void query_text(BankEpisode *bank, const char *sql, const char *param, char *out, size_t size) {
  sqlite3_stmt *stmt = NULL;
  out[0] = '\0';
  if (sqlite3_prepare_v2(bank->db, sql, -1, &stmt, NULL) != SQLITE_OK) return;
  if (param) sqlite3_bind_text(stmt, 1, param, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
    snprintf(out, size, "%s", (const char *)sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
}

static void verify_json(BankEpisode *bank, int n, char *out, size_t size, char id[BANK_ID_MAX]) {
  FimiError err = {0};
  char dob[11], mobile[16];
  CHECK(bank_episode_customer_credentials(bank, n, id, dob, mobile, &err) == 0, "%s", err.message);
  snprintf(out, size, "{\"customer_id\":\"%s\",\"date_of_birth\":\"%s\",\"registered_mobile\":\"%s\"}", id, dob,
           mobile);
}

// ---- the bank file ------------------------------------------------------------

static void test_bank_file(void) {
  FimiError err = {0};
  char path[128];
  BankEpisode *bank = open_new_file(path, sizeof path);
  CHECK(bank_file_create(&image, path, &err) != 0 && strstr(err.message, "exists"), "second create: %s", err.message);
  char journal[16];
  query_text(bank, "PRAGMA journal_mode", NULL, journal, sizeof journal);
  CHECK(strcmp(journal, "wal") == 0, "journal mode %s", journal);
  // The file holds the image's rows exactly.
  BankEpisode *memory = NULL;
  CHECK(bank_episode_open(&image, NULL, &memory, &err) == 0, "%s", err.message);
  CHECK(digest(bank) == digest(memory), "file and image differ");
  bank_episode_close(memory);
  bank_episode_close(bank);

  char missing[160];
  snprintf(missing, sizeof missing, "%s/no-such.sqlite", dir);
  fimi_error_clear(&err);
  CHECK(bank_episode_open_file(missing, kb, 100, &bank, &err) != 0 && bank == NULL, "opened a missing file");
  CHECK(access(missing, F_OK) != 0, "open created %s", missing);
  char other[160];
  snprintf(other, sizeof other, "%s/other.sqlite", dir);
  sqlite3 *db = NULL;
  sqlite3_open(other, &db);
  sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
  sqlite3_close(db);
  fimi_error_clear(&err);
  CHECK(bank_episode_open_file(other, kb, 100, &bank, &err) != 0 && strstr(err.message, "not a bank"),
        "a non-bank file opened: %s", err.message);
  FILE *f = fopen(other, "w");
  fputs("not sqlite at all, just text", f);
  fclose(f);
  fimi_error_clear(&err);
  CHECK(bank_episode_open_file(other, kb, 100, &bank, &err) != 0, "a text file opened");
}

// ---- framing and dispatch -----------------------------------------------------

static void test_framing(void) {
  char path[128];
  BankEpisode *bank = open_new_file(path, sizeof path);
  McpServer *server = new_server(bank, 4096);
  EXPECT_ERROR(server, "{bad", MCP_PARSE_ERROR);
  EXPECT_ERROR(server, "", MCP_PARSE_ERROR);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", MCP_PARSE_ERROR);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\xff\xfeng\"}", MCP_PARSE_ERROR);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}", MCP_PARSE_ERROR);  // surrogate
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x01\"}", MCP_PARSE_ERROR);
  expect_error(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\0\"method\":\"ping\"}", 40, MCP_PARSE_ERROR, "NUL byte");
  EXPECT_ERROR(server, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "[]", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "42", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "\"ping\"", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1e300,\"method\":\"ping\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}", MCP_INVALID_PARAMS);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", MCP_METHOD_NOT_FOUND);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}", MCP_METHOD_NOT_FOUND);
  // The error answers the request's own id when it could be read.
  cJSON *r = send_text(server, "{\"jsonrpc\":\"1.0\",\"id\":\"abc\",\"method\":\"ping\"}");
  const cJSON *id = cJSON_GetObjectItem(r, "id");
  CHECK(cJSON_IsString(id) && strcmp(id->valuestring, "abc") == 0, "error lost the id");
  cJSON_Delete(r);
  r = send_text(server, "{bad");
  CHECK(r && cJSON_IsNull(cJSON_GetObjectItem(r, "id")), "parse error without id null");
  cJSON_Delete(r);
  // Deep nesting: refused before parsing, whatever the depth.
  char deep[2100];
  int n = snprintf(deep, sizeof deep, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":");
  for (int i = 0; i < 1000; i++) deep[n++] = '[';
  for (int i = 0; i < 1000; i++) deep[n++] = ']';
  deep[n++] = '}';
  deep[n++] = '}';
  expect_error(server, deep, (size_t)n, MCP_INVALID_REQUEST, "1000 levels deep");
  // Oversized: over the 4096-byte limit of this server.
  char *big = malloc(6000);
  n = snprintf(big, 6000, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"");
  while (n < 5000) big[n++] = 'x';
  n += snprintf(big + n, 6000 - (size_t)n, "\"}}");
  expect_error(server, big, (size_t)n, MCP_INVALID_REQUEST, "5000-byte message");
  free(big);
  // Notifications and client responses get no answer, even unknown ones.
  CHECK(send_text(server, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}") == NULL, "notification answered");
  CHECK(send_text(server, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{}}") == NULL, "notification answered");
  CHECK(send_text(server, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}") == NULL, "a response was answered");

  // Lifecycle: tools need initialize; initialize once; negotiation.
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", MCP_INVALID_REQUEST);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", MCP_INVALID_PARAMS);
  r = send_text(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                        "\"2025-06-18\",\"capabilities\":{}}}");
  const cJSON *result = cJSON_GetObjectItem(r, "result");
  CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(result, "protocolVersion")), "2025-06-18") == 0,
        "a supported version was not kept");
  CHECK(cJSON_IsObject(cJSON_GetObjectItem(cJSON_GetObjectItem(result, "capabilities"), "tools")), "no tools capability");
  CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(result, "serverInfo"), "name"), "no serverInfo");
  cJSON_Delete(r);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                       "\"2025-11-25\"}}", MCP_INVALID_REQUEST);
  McpServer *other = new_server(bank, 0);
  r = send_text(other, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                       "\"1999-01-01\"}}");
  result = cJSON_GetObjectItem(r, "result");
  CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(result, "protocolVersion")), MCP_PROTOCOL_LATEST) == 0,
        "an unknown version was not answered with the latest");
  cJSON_Delete(r);
  mcp_server_free(other);

  // tools/call params.
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}",
               MCP_INVALID_PARAMS);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}", MCP_INVALID_PARAMS);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
               MCP_INVALID_PARAMS);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"list_accounts\","
                       "\"arguments\":\"{}\"}}", MCP_INVALID_PARAMS);
  EXPECT_ERROR(server, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"drop_table\"}}",
               MCP_INVALID_PARAMS);
  mcp_server_free(server);
  bank_episode_close(bank);
}

static void test_tools_list(void) {
  char path[128];
  BankEpisode *bank = open_new_file(path, sizeof path);
  McpServer *server = new_server(bank, 0);
  initialize(server);
  cJSON *r = send_text(server, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
  const cJSON *tools = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "tools");
  CHECK(cJSON_GetArraySize(tools) == env_tool_count() && env_tool_count() > 50, "%d tools listed",
        cJSON_GetArraySize(tools));
  int i = 0;
  const cJSON *tool;
  cJSON_ArrayForEach(tool, tools) {
    cJSON *schema = env_tool_schema(i);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(tool, "name")), env_tool_name(i)) == 0, "tool %d name", i);
    CHECK(cJSON_Compare(cJSON_GetObjectItem(tool, "inputSchema"), cJSON_GetObjectItem(schema, "parameters"), 1),
          "%s: inputSchema is not the catalog's", env_tool_name(i));
    CHECK(cJSON_Compare(cJSON_GetObjectItem(tool, "description"), cJSON_GetObjectItem(schema, "description"), 1),
          "%s: description", env_tool_name(i));
    const cJSON *a = cJSON_GetObjectItem(tool, "annotations");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(a, "readOnlyHint")) == !env_tool_writes(i), "%s readOnlyHint",
          env_tool_name(i));
    CHECK(!env_tool_writes(i) || cJSON_IsTrue(cJSON_GetObjectItem(a, "destructiveHint")), "%s destructiveHint",
          env_tool_name(i));
    const cJSON *meta = cJSON_GetObjectItem(tool, "_meta");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(meta, "fimi/charged")) == env_tool_charged(i), "%s charged",
          env_tool_name(i));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(meta, "fimi/needsVerifiedCustomer")) == env_tool_needs_auth(i),
          "%s needs auth", env_tool_name(i));
    cJSON_Delete(schema);
    i++;
  }
  cJSON_Delete(r);
  mcp_server_free(server);
  bank_episode_close(bank);
}

// ---- authorization -----------------------------------------------------------

// The error text an agent reads in a training episode for the same call.
static char *episode_error(const char *name, const char *arguments_json) {
  BankEpisode *ep = NULL;
  FimiError err = {0};
  bank_episode_open(&image, kb, &ep, &err);
  cJSON *arguments = cJSON_Parse(arguments_json);
  ToolResult out;
  env_tool_call(ep, name, arguments, &out);
  cJSON_Delete(arguments);
  cJSON_Delete(out.json);
  bank_episode_close(ep);
  return out.text;
}

// Every read or write of another customer's object must fail and change nothing.
static void expect_refused(McpServer *server, BankEpisode *bank, const char *name, const char *arguments_json) {
  uint64_t before = digest(bank);
  cJSON *result = call_json(server, name, arguments_json);
  CHECK(result && is_error(result), "%s %s was not refused: %.200s", name, arguments_json, result_text(result));
  CHECK(digest(bank) == before, "%s %s changed the bank", name, arguments_json);
  cJSON_Delete(result);
}

static void test_authorization(void) {
  char path[128], verify0[160], verify1[160], id0[BANK_ID_MAX], id1[BANK_ID_MAX];
  BankEpisode *bank = open_new_file(path, sizeof path);
  McpServer *server = new_server(bank, 0);
  initialize(server);
  verify_json(bank, 0, verify0, sizeof verify0, id0);
  verify_json(bank, 1, verify1, sizeof verify1, id1);
  char account1[BANK_ID_MAX], card1[BANK_ID_MAX], fd1[BANK_ID_MAX], policy1[BANK_ID_MAX], account0[BANK_ID_MAX];
  query_text(bank, "SELECT account_id FROM accounts WHERE customer_id = ? ORDER BY 1", id1, account1, sizeof account1);
  query_text(bank, "SELECT account_id FROM accounts WHERE customer_id = ? ORDER BY 1", id0, account0, sizeof account0);
  query_text(bank, "SELECT card_id FROM cards WHERE customer_id <> ? ORDER BY 1", id0, card1, sizeof card1);
  query_text(bank, "SELECT fd_id FROM fixed_deposits WHERE customer_id <> ? ORDER BY 1", id0, fd1, sizeof fd1);
  query_text(bank, "SELECT policy_id FROM insurance_policies WHERE customer_id <> ? ORDER BY 1", id0, policy1,
             sizeof policy1);
  CHECK(account1[0] && card1[0] && fd1[0] && policy1[0] && account0[0], "fixture ids missing");

  // Before verification: refused with the episode's own text.
  char args[256];
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", account0);
  cJSON *result = call_json(server, "get_account_balance", args);
  char *expected = episode_error("get_account_balance", args);
  CHECK(result && is_error(result) && strcmp(result_text(result), expected) == 0, "unverified read: %s",
        result_text(result));
  CHECK(strstr(expected, "verify_customer") != NULL, "training text changed: %s", expected);
  free(expected);
  cJSON_Delete(result);
  result = call_json(server, "list_accounts", "{}");
  CHECK(result && is_error(result), "unverified list_accounts answered");
  cJSON_Delete(result);
  // Wrong details, then the right ones.
  result = call_json(server, "verify_customer",
                     "{\"customer_id\":\"NVC10001\",\"date_of_birth\":\"1900-01-01\",\"registered_mobile\":\"9000000000\"}");
  CHECK(result && is_error(result) && strstr(result_text(result), "do not match"), "wrong details: %s",
        result_text(result));
  cJSON_Delete(result);
  result = call_json(server, "verify_customer", verify0);
  CHECK(result && !is_error(result), "verify: %s", result_text(result));
  cJSON_Delete(result);
  result = call_json(server, "get_account_balance", args);
  CHECK(result && !is_error(result) && cJSON_GetObjectItem(result, "structuredContent"), "own balance: %s",
        result_text(result));
  cJSON_Delete(result);

  // Another customer's objects.
  snprintf(args, sizeof args, "{\"account_ids\":[\"%s\"]}", account1);
  expect_refused(server, bank, "get_account_balance", args);
  snprintf(args, sizeof args, "{\"account_id\":\"%s\"}", account1);
  expect_refused(server, bank, "get_transactions", args);
  snprintf(args, sizeof args, "{\"card_id\":\"%s\",\"reason\":\"lost\"}", card1);
  expect_refused(server, bank, "block_card", args);
  snprintf(args, sizeof args, "{\"fd_id\":\"%s\",\"customer_confirmed\":true}", fd1);
  expect_refused(server, bank, "close_fd_premature", args);
  snprintf(args, sizeof args, "{\"policy_id\":\"%s\",\"claim_amount\":1000,\"incident_date\":\"2026-01-01\","
                              "\"description\":\"x\"}", policy1);
  expect_refused(server, bank, "file_insurance_claim", args);
  snprintf(args, sizeof args, "{\"from_account\":\"%s\",\"to_account\":\"%s\",\"amount\":100}", account1, account0);
  expect_refused(server, bank, "transfer_between_own_accounts", args);
  // A second verification as someone else, even with their right details.
  result = call_json(server, "verify_customer", verify1);
  CHECK(result && is_error(result) && strstr(result_text(result), "another customer"), "second customer verified: %s",
        result_text(result));
  cJSON_Delete(result);
  result = call_json(server, "list_accounts", "{}");
  CHECK(result && !is_error(result) && strstr(result_text(result), account0) && !strstr(result_text(result), account1),
        "the session's customer changed");
  cJSON_Delete(result);
  CHECK(alive(server), "server down after authorization checks");
  mcp_server_free(server);

  // A new session on the same file starts unverified.
  server = new_server(bank, 0);
  initialize(server);
  result = call_json(server, "list_accounts", "{}");
  CHECK(result && is_error(result), "a new session inherited the verified customer");
  cJSON_Delete(result);
  mcp_server_free(server);
  bank_episode_close(bank);
}

// ---- injection strings ----------------------------------------------------------

static const char *const INJECTIONS[] = {
    "' OR '1'='1", "'; DROP TABLE accounts; --", "NVC10001' --", "x' UNION SELECT customer_id FROM customers --",
    "\"); DELETE FROM customers; --", "%' OR 1=1 --", "1; UPDATE accounts SET balance_paise = 0", "../../etc/passwd",
};

// A value of the right type for a parameter schema (strings get `text`).
static cJSON *sample_value(const cJSON *schema, const char *text) {
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(schema, "type"));
  const cJSON *minimum = cJSON_GetObjectItem(schema, "minimum");
  if (strcmp(type, "boolean") == 0) return cJSON_CreateFalse();
  if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
    return cJSON_CreateNumber(minimum ? minimum->valuedouble : 1000);
  if (strcmp(type, "array") == 0) {
    cJSON *array = cJSON_CreateArray();
    cJSON_AddItemToArray(array, cJSON_CreateString(text));
    return array;
  }
  if (cJSON_GetObjectItem(schema, "format")) return cJSON_CreateString("2026-01-10");
  const cJSON *values = cJSON_GetObjectItem(schema, "enum");
  if (values && strcmp(text, "x") == 0) return cJSON_CreateString(cJSON_GetArrayItem(values, 0)->valuestring);
  return cJSON_CreateString(text);
}

// Calls every tool once per injection string in each string argument.
static void inject_all(McpServer *server, int *calls) {
  for (int t = 0; t < env_tool_count(); t++) {
    cJSON *schema = env_tool_schema(t);
    const cJSON *properties = cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "parameters"), "properties");
    const cJSON *target;
    cJSON_ArrayForEach(target, properties) {
      const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(target, "type"));
      if (strcmp(type, "string") != 0 && strcmp(type, "array") != 0) continue;
      for (size_t k = 0; k < sizeof INJECTIONS / sizeof INJECTIONS[0]; k++) {
        cJSON *arguments = cJSON_CreateObject();
        const cJSON *p;
        cJSON_ArrayForEach(p, properties)
          cJSON_AddItemToObject(arguments, p->string, sample_value(p, p == target ? INJECTIONS[k] : "x"));
        cJSON *result = call_tool(server, env_tool_name(t), arguments);
        const char *text = result_text(result);
        CHECK(result != NULL, "%s: protocol error on injection", env_tool_name(t));
        CHECK(!strstr(text, "SQL") && !strstr(text, "sqlite") && !strstr(text, "syntax") && !strstr(text, "SELECT"),
              "%s leaked SQL: %.200s", env_tool_name(t), text);
        cJSON_Delete(result);
        cJSON_Delete(arguments);
        (*calls)++;
      }
    }
    cJSON_Delete(schema);
  }
}

// Digest of the rows tools must never touch for the session's customer:
// every other customer's rows and the bank's terms.
static uint64_t others_digest(BankEpisode *bank, const char *customer_id) {
  static const char *sql =
      "SELECT group_concat(x, '|') FROM (SELECT customer_id || name || mobile || email || kyc_status AS x FROM "
      "customers WHERE customer_id <> ?1 UNION ALL SELECT account_id || balance_paise || status FROM accounts WHERE "
      "customer_id <> ?1 UNION ALL SELECT card_id || status FROM cards WHERE customer_id <> ?1 UNION ALL SELECT "
      "fd_id || status FROM fixed_deposits WHERE customer_id <> ?1 UNION ALL SELECT product || rate_bp FROM "
      "interest_rates UNION ALL SELECT charge_code || amount_paise FROM service_charges ORDER BY 1)";
  char text[1 << 16];
  query_text(bank, sql, customer_id, text, sizeof text);
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = text; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return h;
}

static void test_injection(void) {
  char path[128], verify0[160], id0[BANK_ID_MAX];
  BankEpisode *bank = open_new_file(path, sizeof path);
  verify_json(bank, 0, verify0, sizeof verify0, id0);
  uint64_t image_digest = digest(bank), others = others_digest(bank, id0);
  McpServer *server = new_server(bank, 0);
  initialize(server);
  int calls = 0;
  inject_all(server, &calls);  // unverified: nothing may change
  CHECK(digest(bank) == image_digest, "unverified injection calls changed the bank");
  cJSON *result = call_json(server, "verify_customer", verify0);
  CHECK(result && is_error(result) && strstr(result_text(result), "locked"),
        "injected verify_customer calls did not use up the attempts: %s", result_text(result));
  cJSON_Delete(result);
  mcp_server_free(server);
  server = new_server(bank, 0);  // a new session, with its own attempts
  initialize(server);
  result = call_json(server, "verify_customer", verify0);
  CHECK(result && !is_error(result), "verify");
  cJSON_Delete(result);
  inject_all(server, &calls);
  CHECK(calls > 300, "only %d injection calls", calls);
  FimiError err = {0};
  CHECK(bank_episode_check_integrity(bank, &err) == 0, "integrity: %s", err.message);
  CHECK(others_digest(bank, id0) == others, "another customer's rows or the bank's terms changed");
  char count[16];
  query_text(bank, "SELECT count(*) FROM customers", NULL, count, sizeof count);
  CHECK(atoi(count) == image.num_customers, "customers: %s", count);
  CHECK(alive(server), "server down after injections");
  mcp_server_free(server);
  bank_episode_close(bank);
}

// ---- equivalence with training episodes -------------------------------------------

static void run_task_through_mcp(const TaskGenContext *ctx, const Task *task) {
  FimiError err = {0};
  BankEpisode *reference = NULL;
  cJSON *gold = cJSON_CreateArray();
  CHECK(bank_episode_open(ctx->image, kb, &reference, &err) == 0 && env_apply_initial(reference, task, &err) == 0 &&
            env_run_gold(reference, task, task->num_gold, gold, &err) == 0,
        "%s: gold replay: %s", task->id, err.message);
  char path[128];
  BankEpisode *bank = open_new_file(path, sizeof path);
  // The task's initial state (date, fixtures) is trusted set-up, as at env_open.
  CHECK(env_apply_initial(bank, task, &err) == 0, "%s: %s", task->id, err.message);
  bank->confirm_mode = BANK_CONFIRM_ARGUMENT;  // an MCP client's consent is the argument
  McpServer *server = new_server(bank, 0);
  initialize(server);
  for (int i = 0; i < task->num_gold; i++) {
    cJSON *result = call_tool(server, task->gold[i].name, task->gold[i].arguments);
    CHECK(result && !is_error(result), "%s step %d %s: %s", task->id, i, task->gold[i].name, result_text(result));
    CHECK(cJSON_Compare(cJSON_GetObjectItem(result, "structuredContent"), cJSON_GetArrayItem(gold, i), 1),
          "%s step %d %s: result differs from the episode's", task->id, i, task->gold[i].name);
    cJSON_Delete(result);
  }
  CHECK(digest(bank) == digest(reference), "%s: final database differs from the gold replay", task->id);
  mcp_server_free(server);
  bank_episode_close(bank);
  bank_episode_close(reference);
  cJSON_Delete(gold);
}

static void test_equivalence(void) {
  static const char *const families[] = {"fd_paper", "fd_planner", "balance_enquiry", "lost_card_reissue",
                                         "pmsby_enrol", "fd_premature_close", "statement_email", "own_accounts_sweep",
                                         "imps_with_charge", "address_change"};
  TaskGenContext ctx;
  FimiError err = {0};
  CHECK(task_gen_context_init(&ctx, 1, &err) == 0, "%s", err.message);
  int ran = 0;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    const TaskFamily *family = task_family_find(families[f]);
    CHECK(family != NULL, "no family %s", families[f]);
    for (uint64_t seed = 1; family && seed <= 2; seed++) {
      Task task;
      CHECK(task_generate(&ctx, family, seed, &task, &err) == 0, "%s: %s", families[f], err.message);
      // A session starts unverified: tasks that start logged in are not MCP sessions.
      if (!task.authenticated) {
        run_task_through_mcp(&ctx, &task);
        ran++;
      }
      task_free(&task);
    }
  }
  CHECK(ran >= 10, "only %d tasks ran through MCP", ran);
  task_gen_context_free(&ctx);
}

// ---- two processes on one file ------------------------------------------------------

#define BOOKINGS_PER_PROCESS 12

// One forked server process: verify, then book FDs; exits with the number booked.
static void booking_process(const char *path, const char *verify, const char *account, double amount) {
  FimiError err = {0};
  BankEpisode *bank = NULL;
  if (bank_episode_open_file(path, kb, 20000, &bank, &err) != 0) _exit(255);
  McpServer *server = new_server(bank, 0);
  initialize(server);
  cJSON *result = call_json(server, "verify_customer", verify);
  if (!result || is_error(result)) _exit(254);
  cJSON_Delete(result);
  int booked = 0;
  char args[160];
  snprintf(args, sizeof args, "{\"principal_amount\":%.2f,\"tenure_months\":12,\"source_account\":\"%s\"}", amount,
           account);
  for (int i = 0; i < BOOKINGS_PER_PROCESS; i++) {
    result = call_json(server, "create_fd", args);
    if (result && !is_error(result)) booked++;
    else if (!result || !strstr(result_text(result), "balance")) _exit(253);  // only "insufficient balance" may fail
    cJSON_Delete(result);
  }
  mcp_server_free(server);
  bank_episode_close(bank);
  _exit(booked);
}

static long long query_int(BankEpisode *bank, const char *sql, const char *param) {
  char text[32];
  query_text(bank, sql, param, text, sizeof text);
  return atoll(text);
}

static void test_two_processes(void) {
  TaskGenContext ctx;
  FimiError err = {0};
  Task task;
  CHECK(task_gen_context_init(&ctx, 1, &err) == 0 && task_generate(&ctx, task_family_find("fd_paper"), 3, &task, &err) == 0,
        "%s", err.message);
  char *verify = cJSON_PrintUnformatted(task.gold[0].arguments);
  const cJSON *create = NULL;
  for (int i = 0; i < task.num_gold; i++)
    if (strcmp(task.gold[i].name, "create_fd") == 0) create = task.gold[i].arguments;
  const char *account = cJSON_GetStringValue(cJSON_GetObjectItem(create, "source_account"));
  char path[128];
  BankEpisode *bank = open_new_file(path, sizeof path);
  long long before = query_int(bank, "SELECT balance_paise FROM accounts WHERE account_id = ?", account);
  long long fds_before = query_int(bank, "SELECT count(*) FROM fixed_deposits", NULL);
  // 24 bookings of which only about 16 fit the balance: the processes race for the last rupees.
  long long amount_paise = (before / (BOOKINGS_PER_PROCESS * 4 / 3)) / 100 * 100;
  CHECK(amount_paise >= 100000, "balance %lld too small for the test", before);
  pid_t children[2];
  for (int c = 0; c < 2; c++) {
    fflush(NULL);
    children[c] = fork();
    if (children[c] == 0) booking_process(path, verify, account, (double)amount_paise / 100.0);
  }
  int booked = 0;
  for (int c = 0; c < 2; c++) {
    int status = 0;
    waitpid(children[c], &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 250;
    CHECK(code <= BOOKINGS_PER_PROCESS, "booking process %d failed (%d)", c, code);
    if (code <= BOOKINGS_PER_PROCESS) booked += code;
  }
  long long after = query_int(bank, "SELECT balance_paise FROM accounts WHERE account_id = ?", account);
  long long fds = query_int(bank, "SELECT count(*) FROM fixed_deposits", NULL) - fds_before;
  long long ledger = query_int(bank, "SELECT balance_after_paise FROM transactions WHERE account_id = ? ORDER BY "
                                     "rowid DESC LIMIT 1", account);
  CHECK(booked > 0 && booked < 2 * BOOKINGS_PER_PROCESS, "%d bookings succeeded (expected a race)", booked);
  CHECK(fds == booked, "%lld deposits rows for %d bookings", fds, booked);
  CHECK(after == before - booked * amount_paise, "balance %lld, expected %lld", after, before - booked * amount_paise);
  CHECK(after >= 0 && after < amount_paise, "balance %lld: overdrawn or a booking lost", after);
  CHECK(ledger == after, "ledger %lld vs balance %lld", ledger, after);
  CHECK(bank_episode_check_integrity(bank, &err) == 0, "integrity: %s", err.message);
  bank_episode_close(bank);
  free(verify);
  task_free(&task);
  task_gen_context_free(&ctx);
}

int main(void) {
  FimiError err = {0};
  snprintf(dir, sizeof dir, "/tmp/fimi-test-mcp-XXXXXX");
  if (!mkdtemp(dir) || bank_image_build(1, &image, &err) != 0 || !(kb = kb_builtin(&err))) {
    fprintf(stderr, "test_mcp: setup: %s\n", err.message);
    return 1;
  }
  test_bank_file();
  test_framing();
  test_tools_list();
  test_authorization();
  test_injection();
  test_equivalence();
  test_two_processes();
  bank_image_free(&image);
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  if (system(command) != 0) fprintf(stderr, "test_mcp: could not remove %s\n", dir);
  TEST_MAIN_END();
}
