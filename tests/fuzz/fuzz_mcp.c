// tests/fuzz/fuzz_mcp.c: libFuzzer target for the MCP server's JSON-RPC
// framing and dispatch (mcp/mcp_server.h) over the bank's tools. One input
// is one session on a fresh copy of the bank: the first byte chooses
// whether a valid initialize and a valid verify_customer come first (so
// that inputs reach tools/call as a verified customer), the rest is split
// into messages at newlines, each handed to mcp_server_handle as a stdio
// transport would. abort() (a libFuzzer crash) when:
// - a response is not one line of valid UTF-8 JSON: an object with
//   "jsonrpc": "2.0", an "id", and exactly one of "result" and "error";
// - an error's code is not one of the five JSON-RPC codes the server uses,
//   or it carries no message;
// - a tools/call result has no text content or no boolean isError;
// - the database fails PRAGMA integrity_check after the session (on one
//   input in 16, chosen by a hash of the input so crashes replay: the check
//   costs more than the session).
// The server limit is 4096 bytes here, so oversized messages are reached.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "env/bank/db.h"
#include "env/knowledge.h"
#include "mcp/mcp_jsonrpc.h"
#include "mcp/mcp_server.h"

#define MAX_MESSAGES 64
#define MAX_BYTES 4096

static BankImage image;
static const KnowledgeBase *kb;
static char verify_line[512];

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_mcp: invariant failed: %s\n  %.400s\n", what, detail ? detail : "");
  abort();
}

static void setup(void) {
  FimiError err = {0};
  if (bank_image_build(1, &image, &err) != 0 || !(kb = kb_builtin(&err))) fail("setup", err.message);
  BankEpisode *ep = NULL;
  char id[BANK_ID_MAX], dob[11], mobile[16];
  if (bank_episode_open(&image, kb, &ep, &err) != 0 ||
      bank_episode_customer_credentials(ep, 0, id, dob, mobile, &err) != 0)
    fail("setup", err.message);
  bank_episode_close(ep);
  snprintf(verify_line, sizeof verify_line,
           "{\"jsonrpc\":\"2.0\",\"id\":\"v\",\"method\":\"tools/call\",\"params\":{\"name\":\"verify_customer\","
           "\"arguments\":{\"customer_id\":\"%s\",\"date_of_birth\":\"%s\",\"registered_mobile\":\"%s\"}}}",
           id, dob, mobile);
}

static int known_code(int code) {
  return code == MCP_PARSE_ERROR || code == MCP_INVALID_REQUEST || code == MCP_METHOD_NOT_FOUND ||
         code == MCP_INVALID_PARAMS || code == MCP_INTERNAL_ERROR;
}

static void check_call_result(const cJSON *result, const char *line) {
  const cJSON *content = cJSON_GetObjectItem(result, "content");
  const cJSON *text = cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "text");
  if (!cJSON_IsString(text)) return;  // not a tools/call result (ping, list, initialize)
  if (!cJSON_IsBool(cJSON_GetObjectItem(result, "isError"))) fail("tools/call result without isError", line);
  int is_error = cJSON_IsTrue(cJSON_GetObjectItem(result, "isError"));
  if (is_error != (strncmp(text->valuestring, "Error: ", 7) == 0)) fail("isError disagrees with the text", line);
}

static void check_response(const char *line) {
  size_t length = strlen(line);
  if (memchr(line, '\n', length)) fail("a response spans lines", line);
  if (utf8_first_invalid(line, length) != length) fail("a response is not UTF-8", line);
  cJSON *r = cJSON_Parse(line);
  if (!cJSON_IsObject(r)) fail("a response is not a JSON object", line);
  const cJSON *version = cJSON_GetObjectItem(r, "jsonrpc");
  if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0) fail("jsonrpc is not 2.0", line);
  if (!cJSON_HasObjectItem(r, "id")) fail("a response without id", line);
  const cJSON *result = cJSON_GetObjectItem(r, "result"), *error = cJSON_GetObjectItem(r, "error");
  if (!result == !error) fail("not exactly one of result and error", line);
  if (error) {
    const cJSON *code = cJSON_GetObjectItem(error, "code"), *message = cJSON_GetObjectItem(error, "message");
    if (!cJSON_IsNumber(code) || !known_code(code->valueint)) fail("unknown error code", line);
    if (!cJSON_IsString(message) || !message->valuestring[0]) fail("an error without a message", line);
  } else {
    check_call_result(result, line);
  }
  cJSON_Delete(r);
}

static void handle(McpServer *server, const char *bytes, size_t length) {
  char *response = mcp_server_handle(server, bytes, length);
  if (response) check_response(response);
  free(response);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!image.bytes) setup();
  if (size == 0) return 0;
  FimiError err = {0};
  BankEpisode *ep = NULL;
  McpServer *server = NULL;
  if (bank_episode_open(&image, kb, &ep, &err) != 0 || mcp_server_create(ep, MAX_BYTES, &server, &err) != 0)
    fail("open", err.message);
  if (data[0] & 1) {
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                       "\"2025-11-25\",\"capabilities\":{}}}";
    handle(server, init, strlen(init));
    if (data[0] & 2) handle(server, verify_line, strlen(verify_line));
  }
  const char *p = (const char *)data + 1, *end = (const char *)data + size;
  for (int n = 0; p < end && n < MAX_MESSAGES; n++) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    size_t length = newline ? (size_t)(newline - p) : (size_t)(end - p);
    if (length > 0) handle(server, p, length);
    p += length + 1;
  }
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
  if (h % 16 == 0 && bank_episode_check_integrity(ep, &err) != 0) fail("integrity check", err.message);
  mcp_server_free(server);
  bank_episode_close(ep);
  return 0;
}
