// mcp/mcp_jsonrpc.c: reading and writing JSON-RPC 2.0 messages (see
// mcp_jsonrpc.h). The checks before parsing keep cJSON away from inputs it
// would accept but MCP forbids (invalid UTF-8, raw control characters) and
// from nesting that would only cost stack.
#include "mcp/mcp_jsonrpc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/utf8.h"

#define MCP_QUOTE_MAX 64
// JSON numbers beyond 2^53 do not survive a double: such ids are refused.
#define MCP_MAX_INTEGER_ID 9007199254740991.0

static int fail(int *code, int value, char *why, size_t why_size, const char *message) {
  *code = value;
  snprintf(why, why_size, "%s", message);
  return -1;
}

// Raw bytes below 0x20 are invalid inside JSON strings and, outside them,
// only tab, CR and LF are whitespace. A stdio line never holds LF; an HTTP
// body may (pretty-printed JSON), but never inside a string.
static int has_control_bytes(const char *text, size_t length) {
  int in_string = 0, escaped = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x20) {
      if (c != '\t' && c != '\r' && (c != '\n' || in_string)) return 1;
    } else if (escaped) {
      escaped = 0;
    } else if (in_string && c == '\\') {
      escaped = 1;
    } else if (c == '"') {
      in_string = !in_string;
    }
  }
  return 0;
}

// Deepest [ / { nesting outside strings.
static int nesting_depth(const char *text, size_t length) {
  int depth = 0, deepest = 0, in_string = 0;
  for (size_t i = 0; i < length; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') i++;
      else if (c == '"') in_string = 0;
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return deepest;
}

static int valid_id(const cJSON *id) {
  if (cJSON_IsString(id)) return id->valuestring != NULL;
  if (!cJSON_IsNumber(id)) return 0;  // null, objects, arrays, booleans
  double v = id->valuedouble;
  return isfinite(v) && v == floor(v) && fabs(v) <= MCP_MAX_INTEGER_ID;
}

static int check_envelope(McpMessage *msg, int *code, char *why, size_t why_size, cJSON **id_out) {
  const cJSON *root = msg->root;
  if (cJSON_IsArray(root))
    return fail(code, MCP_INVALID_REQUEST, why, why_size,
                "Invalid Request: JSON-RPC batches are not supported (MCP protocol revision 2025-11-25)");
  if (!cJSON_IsObject(root))
    return fail(code, MCP_INVALID_REQUEST, why, why_size, "Invalid Request: a message must be a JSON object");
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
  if (id && !valid_id(id))
    return fail(code, MCP_INVALID_REQUEST, why, why_size,
                "Invalid Request: id must be a string or an integer (not null)");
  if (id && id_out) *id_out = cJSON_Duplicate(id, 1);
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "jsonrpc");
  if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0)
    return fail(code, MCP_INVALID_REQUEST, why, why_size, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(root, "method");
  if (!method && id && (cJSON_GetObjectItemCaseSensitive(root, "result") ||
                        cJSON_GetObjectItemCaseSensitive(root, "error"))) {
    msg->kind = MCP_MSG_RESPONSE;
    msg->id = id;
    return 0;
  }
  if (!cJSON_IsString(method) || !method->valuestring)
    return fail(code, MCP_INVALID_REQUEST, why, why_size, "Invalid Request: \"method\" must be a string");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
  if (params && !cJSON_IsObject(params))
    return fail(code, MCP_INVALID_PARAMS, why, why_size, "Invalid params: \"params\" must be an object");
  msg->kind = id ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
  msg->id = id;
  msg->method = method->valuestring;
  msg->params = params;
  return 0;
}

int mcp_message_read(const char *text, size_t length, size_t max_bytes, McpMessage *msg, int *code, char *why,
                     size_t why_size, cJSON **id_out) {
  memset(msg, 0, sizeof *msg);
  if (id_out) *id_out = NULL;
  if (length > max_bytes) {
    char message[96];
    snprintf(message, sizeof message, "Invalid Request: message larger than %zu bytes", max_bytes);
    return fail(code, MCP_INVALID_REQUEST, why, why_size, message);
  }
  if (utf8_first_invalid(text, length) != length)
    return fail(code, MCP_PARSE_ERROR, why, why_size, "Parse error: the message is not valid UTF-8");
  if (has_control_bytes(text, length))
    return fail(code, MCP_PARSE_ERROR, why, why_size, "Parse error: raw control character in the message");
  if (nesting_depth(text, length) > MCP_MAX_DEPTH) {
    char message[96];
    snprintf(message, sizeof message, "Invalid Request: JSON nested deeper than %d levels", MCP_MAX_DEPTH);
    return fail(code, MCP_INVALID_REQUEST, why, why_size, message);
  }
  FimiError err = {0};
  msg->root = json_parse_text(text, length, "Parse error: message", &err);
  if (!msg->root) return fail(code, MCP_PARSE_ERROR, why, why_size, err.message);
  if (check_envelope(msg, code, why, why_size, id_out) != 0) {
    mcp_message_free(msg);
    return -1;
  }
  // A valid message answers with msg->id; the copy was only for errors.
  if (id_out) {
    cJSON_Delete(*id_out);
    *id_out = NULL;
  }
  return 0;
}

void mcp_message_free(McpMessage *msg) {
  if (!msg) return;
  cJSON_Delete(msg->root);
  memset(msg, 0, sizeof *msg);
}

static cJSON *envelope(const cJSON *id) {
  cJSON *response = cJSON_CreateObject();
  if (!response) return NULL;
  cJSON_AddStringToObject(response, "jsonrpc", "2.0");
  cJSON_AddItemToObject(response, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
  return response;
}

static char *print_and_delete(cJSON *response) {
  char *text = response ? cJSON_PrintUnformatted(response) : NULL;
  cJSON_Delete(response);
  return text;
}

char *mcp_response_result(const cJSON *id, cJSON *result) {
  cJSON *response = envelope(id);
  if (!response || !result) {
    cJSON_Delete(result);
    cJSON_Delete(response);
    return mcp_response_error(id, MCP_INTERNAL_ERROR, "Internal error: out of memory");
  }
  cJSON_AddItemToObject(response, "result", result);
  return print_and_delete(response);
}

char *mcp_response_error(const cJSON *id, int code, const char *message) {
  cJSON *response = envelope(id);
  cJSON *error = response ? cJSON_AddObjectToObject(response, "error") : NULL;
  if (!error) {
    cJSON_Delete(response);
    return NULL;
  }
  cJSON_AddNumberToObject(error, "code", code);
  cJSON_AddStringToObject(error, "message", message);
  return print_and_delete(response);
}

void mcp_quote(const char *text, char *out, size_t out_size) {
  size_t n = 0;
  while (text && text[n] && n < MCP_QUOTE_MAX && n + 1 < out_size) n++;
  n = text ? utf8_first_invalid(text, n) : 0;
  memcpy(out, text ? text : "", n);
  out[n] = '\0';
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\') *p = '?';
}
