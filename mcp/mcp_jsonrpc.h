// mcp/mcp_jsonrpc.h: JSON-RPC 2.0 framing for the MCP server. Defines the
// error codes, McpMessage (one checked incoming message: request,
// notification or response) and the functions that read a message from raw
// bytes and write result and error responses. Every incoming message is
// untrusted: size, UTF-8, control characters and nesting depth are checked
// before cJSON parses it, and batches (arrays) are refused, as protocol
// revision 2025-11-25 has none.
#ifndef FIMI_MCP_JSONRPC_H
#define FIMI_MCP_JSONRPC_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_INTERNAL_ERROR (-32603)

// Deeper JSON is refused before parsing (tool arguments need 3 levels).
#define MCP_MAX_DEPTH 32
#define MCP_DEFAULT_MAX_MESSAGE_BYTES (1u << 20)

typedef enum { MCP_MSG_REQUEST = 0, MCP_MSG_NOTIFICATION, MCP_MSG_RESPONSE } McpMessageKind;

typedef struct McpMessage {
  cJSON *root;           // owned; free with mcp_message_free
  McpMessageKind kind;
  const cJSON *id;       // requests: a string or an integer; else NULL
  const char *method;    // requests and notifications
  const cJSON *params;   // an object, or NULL when absent
} McpMessage;

// Reads one message of `length` bytes. 0: *msg filled. -1: *code is the
// JSON-RPC error and `why` its message; *id_out (may be NULL) is the
// request's id when one could be read (a duplicate the caller deletes), so
// that the error answers that request rather than id null.
int mcp_message_read(const char *text, size_t length, size_t max_bytes, McpMessage *msg, int *code, char *why,
                     size_t why_size, cJSON **id_out);
void mcp_message_free(McpMessage *msg);

// One compact line without the newline (malloc'd). result is consumed.
char *mcp_response_result(const cJSON *id, cJSON *result);
char *mcp_response_error(const cJSON *id, int code, const char *message);

// Copies at most 64 bytes of untrusted text for an error message: cut at a
// character boundary, control characters and quotes replaced by '?'.
void mcp_quote(const char *text, char *out, size_t out_size);

#endif
