// mcp/mcp_http_sessions.h: the MCP sessions of the Streamable HTTP transport
// (docs/mcp.md). Defines McpSessionTable and McpSession. A session is the
// stdio session unchanged (an McpServer: one conversation, at most one
// verified customer) over its own SQLite connection to the bank file, named
// by an Mcp-Session-Id of 256 random bits. The table holds at most
// max_sessions; one idle for idle_s seconds is freed by mcp_sessions_expire.
//
// Threads: the table has a lock; each session has its own, held from
// mcp_session_acquire to mcp_session_release, so a session's McpServer and
// connection serve one request at a time while other sessions run in
// parallel (SQLite's file locks serialize their writes, as between stdio
// processes). A session ended or expired while a request holds it is freed
// when that request releases it.
#ifndef FIMI_MCP_HTTP_SESSIONS_H
#define FIMI_MCP_HTTP_SESSIONS_H

#include <stddef.h>

#include "core/error.h"
#include "env/knowledge.h"
#include "mcp/mcp_server.h"

// 32 random bytes as lowercase hex: visible ASCII, as the transport requires.
#define MCP_SESSION_ID_CHARS 64

typedef struct McpSessionConfig {
  const char *db_path;         // the bank file every session opens
  const KnowledgeBase *kb;     // shared, read only
  int busy_timeout_ms;         // per connection, as for stdio
  size_t max_message_bytes;    // 0: MCP_DEFAULT_MAX_MESSAGE_BYTES
  int max_sessions;            // open at once (>= 1)
  double idle_s;               // freed after this long without a request (> 0)
} McpSessionConfig;

typedef struct McpSessionTable McpSessionTable;
typedef struct McpSession McpSession;

typedef enum { MCP_SESSION_OPENED = 0, MCP_SESSION_FULL, MCP_SESSION_FAILED } McpSessionOpen;

// The config's strings and kb must outlive the table.
int mcp_sessions_create(const McpSessionConfig *config, McpSessionTable **out, FimiError *err);
// Frees every session; no request may hold one.
void mcp_sessions_free(McpSessionTable *table);

// A new, unlisted session (its own connection, unverified) for an
// initialize request. FULL: max_sessions are open (idle ones are expired
// first); FAILED: err says why (the file could not be opened).
McpSessionOpen mcp_session_open(McpSessionTable *table, double now, McpSession **out, FimiError *err);
// Lists an opened session under a fresh random id (mcp_session_id), after
// its initialize succeeded. -1 (err): no randomness; the session is freed.
int mcp_session_publish(McpSessionTable *table, McpSession *session, double now, FimiError *err);
// Frees an opened session that was not published (initialize failed).
void mcp_session_discard(McpSessionTable *table, McpSession *session);

// The listed session named `id`, locked for one request; NULL when no
// session has that id (never issued, ended, expired). Ids are compared in
// constant time. Every acquire is paired with a release.
McpSession *mcp_session_acquire(McpSessionTable *table, const char *id, double now);
void mcp_session_release(McpSessionTable *table, McpSession *session, double now);

// Ends the session named `id` (HTTP DELETE). 0: ended; -1: no such session.
int mcp_session_end(McpSessionTable *table, const char *id);
// Frees every session idle longer than idle_s at `now`; returns how many.
int mcp_sessions_expire(McpSessionTable *table, double now);
int mcp_sessions_count(McpSessionTable *table);

McpServer *mcp_session_server(McpSession *session);
const char *mcp_session_id(const McpSession *session);

// Seconds on the monotonic clock: the transport's idle times (tool
// behaviour never reads a clock).
double mcp_sessions_now(void);

#endif
