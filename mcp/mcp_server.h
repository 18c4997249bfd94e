// mcp/mcp_server.h: one MCP session over the bank (docs/mcp.md). Defines
// McpServer and mcp_server_handle, which takes one incoming JSON-RPC message
// and returns the one response line (or none for notifications). A session
// is one customer conversation: it starts unverified and, as in a training
// episode, holds at most one verified customer (verify_customer); its bank
// connection and that state are its own. The transport (stdio, tests, the
// fuzzer) only moves bytes.
//
// Methods: initialize (version negotiation: the client's version when it is
// one of MCP_PROTOCOL_VERSIONS, else the latest), ping, tools/list,
// tools/call; notifications are ignored. Anything else is -32601.
#ifndef FIMI_MCP_SERVER_H
#define FIMI_MCP_SERVER_H

#include <stddef.h>

#include "core/error.h"
#include "env/bank/db.h"
#include "mcp/mcp_jsonrpc.h"

// Newest first; none of them has JSON-RPC batches.
#define MCP_PROTOCOL_LATEST "2025-11-25"
extern const char *const MCP_PROTOCOL_VERSIONS[];

typedef struct McpServer McpServer;

// The session serves `bank` (which it neither owns nor closes) with
// messages of at most max_message_bytes (0: MCP_DEFAULT_MAX_MESSAGE_BYTES).
// The bank's session state is cleared: the session starts unverified.
int mcp_server_create(BankEpisode *bank, size_t max_message_bytes, McpServer **out, FimiError *err);
void mcp_server_free(McpServer *server);

// One message (any bytes, no newline). Returns the response as one compact
// JSON line without the newline (malloc'd, caller frees), or NULL when none
// is due (notifications, responses). Never fails on bad input: that is an
// error response.
char *mcp_server_handle(McpServer *server, const char *message, size_t length);

// The same for a message already read with mcp_message_read, for a
// transport that routes by the message first (HTTP: initialize opens a
// session, notifications answer 202). msg stays the caller's.
char *mcp_server_handle_message(McpServer *server, const McpMessage *msg);

// The negotiated revision ("" before initialize) and the limit in force.
const char *mcp_server_protocol_version(const McpServer *server);
size_t mcp_server_max_message_bytes(const McpServer *server);

#endif
