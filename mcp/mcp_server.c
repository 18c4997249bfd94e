// mcp/mcp_server.c: the MCP session state machine and method dispatch (see
// mcp_server.h). Protocol failures become JSON-RPC errors; tool failures are
// results (mcp_tools.c), so a model sees them as in training.
#include "mcp/mcp_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp_jsonrpc.h"
#include "mcp/mcp_tools.h"

const char *const MCP_PROTOCOL_VERSIONS[] = {MCP_PROTOCOL_LATEST, "2025-06-18", NULL};

#define MCP_SERVER_NAME "fimi"
#define MCP_SERVER_VERSION "0.1.0"

struct McpServer {
  BankEpisode *bank;
  size_t max_message_bytes;
  int initialized;  // initialize answered
  char protocol_version[16];
};

static const char *INSTRUCTIONS =
    "Tools of Navadhan Bank, a fictional Indian retail bank (synthetic customers). Call verify_customer with the "
    "customer's id, date of birth and registered mobile before any tool that reads or changes their data; one "
    "session serves one verified customer. Amounts are rupees; charged tools need customer_confirmed true only "
    "after the customer agreed to the quoted charge.";

int mcp_server_create(BankEpisode *bank, size_t max_message_bytes, McpServer **out, FimiError *err) {
  *out = NULL;
  if (!bank) return fimi_fail(err, "mcp server: no bank");
  McpServer *server = fimi_calloc(1, sizeof *server, err);
  if (!server) return -1;
  server->bank = bank;
  // A session is a new conversation: nobody verified, no attempts used.
  bank->customer_id[0] = '\0';
  bank->failed_verifications = 0;
  bank->confirmation_given = 0;
  bank->transferred_to_human = 0;
  server->max_message_bytes = max_message_bytes ? max_message_bytes : MCP_DEFAULT_MAX_MESSAGE_BYTES;
  *out = server;
  return 0;
}

void mcp_server_free(McpServer *server) { free(server); }

const char *mcp_server_protocol_version(const McpServer *server) { return server->protocol_version; }
size_t mcp_server_max_message_bytes(const McpServer *server) { return server->max_message_bytes; }

static const char *negotiate(const char *requested) {
  for (int i = 0; MCP_PROTOCOL_VERSIONS[i]; i++)
    if (strcmp(requested, MCP_PROTOCOL_VERSIONS[i]) == 0) return MCP_PROTOCOL_VERSIONS[i];
  return MCP_PROTOCOL_LATEST;  // the client disconnects if it cannot speak it
}

static char *handle_initialize(McpServer *server, const McpMessage *msg) {
  if (server->initialized) return mcp_response_error(msg->id, MCP_INVALID_REQUEST, "Invalid Request: already initialized");
  const cJSON *version = msg->params ? cJSON_GetObjectItemCaseSensitive(msg->params, "protocolVersion") : NULL;
  if (!cJSON_IsString(version) || !version->valuestring)
    return mcp_response_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion");
  snprintf(server->protocol_version, sizeof server->protocol_version, "%s", negotiate(version->valuestring));
  server->initialized = 1;
  cJSON *result = cJSON_CreateObject();
  cJSON_AddStringToObject(result, "protocolVersion", server->protocol_version);
  cJSON *capabilities = cJSON_AddObjectToObject(result, "capabilities");
  cJSON *tools = cJSON_AddObjectToObject(capabilities, "tools");
  cJSON_AddBoolToObject(tools, "listChanged", 0);  // the catalog is fixed at build time
  cJSON *info = cJSON_AddObjectToObject(result, "serverInfo");
  cJSON_AddStringToObject(info, "name", MCP_SERVER_NAME);
  cJSON_AddStringToObject(info, "title", "Navadhan Bank tools (fimi)");
  cJSON_AddStringToObject(info, "version", MCP_SERVER_VERSION);
  cJSON_AddStringToObject(result, "instructions", INSTRUCTIONS);
  return mcp_response_result(msg->id, result);
}

static char *handle_tools_list(const McpMessage *msg) {
  // One page holds every tool, so no cursor is ever handed out.
  if (msg->params && cJSON_GetObjectItemCaseSensitive(msg->params, "cursor"))
    return mcp_response_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: unknown cursor (tools/list has one page)");
  return mcp_response_result(msg->id, mcp_tools_list());
}

static char *handle_tools_call(McpServer *server, const McpMessage *msg) {
  if (!msg->params) return mcp_response_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: tools/call needs params");
  cJSON *result = NULL;
  int code = 0;
  char why[160];
  if (mcp_tools_call(server->bank, msg->params, &result, &code, why, sizeof why) != 0)
    return mcp_response_error(msg->id, code, why);
  return mcp_response_result(msg->id, result);
}

static char *handle_request(McpServer *server, const McpMessage *msg) {
  const char *method = msg->method;
  if (strcmp(method, "ping") == 0) return mcp_response_result(msg->id, cJSON_CreateObject());
  if (strcmp(method, "initialize") == 0) return handle_initialize(server, msg);
  int tools_list = strcmp(method, "tools/list") == 0, tools_call = strcmp(method, "tools/call") == 0;
  if (!tools_list && !tools_call) {
    char shown[80], message[160];
    mcp_quote(method, shown, sizeof shown);
    snprintf(message, sizeof message, "Method not found: \"%s\"", shown);
    return mcp_response_error(msg->id, MCP_METHOD_NOT_FOUND, message);
  }
  if (!server->initialized)
    return mcp_response_error(msg->id, MCP_INVALID_REQUEST, "Invalid Request: send initialize first");
  return tools_list ? handle_tools_list(msg) : handle_tools_call(server, msg);
}

char *mcp_server_handle(McpServer *server, const char *message, size_t length) {
  // A client may end its lines with CRLF.
  if (length > 0 && message[length - 1] == '\r') length--;
  McpMessage msg;
  int code = 0;
  char why[FIMI_ERROR_MESSAGE_MAX];
  cJSON *id = NULL;
  if (mcp_message_read(message, length, server->max_message_bytes, &msg, &code, why, sizeof why, &id) != 0) {
    char *response = mcp_response_error(id, code, why);
    cJSON_Delete(id);
    return response;
  }
  char *response = mcp_server_handle_message(server, &msg);
  mcp_message_free(&msg);
  return response;
}

char *mcp_server_handle_message(McpServer *server, const McpMessage *msg) {
  // Notifications (initialized, cancelled, ...) need no answer, and this
  // server sends no requests, so a response is never awaited.
  return msg->kind == MCP_MSG_REQUEST ? handle_request(server, msg) : NULL;
}
