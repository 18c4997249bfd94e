// mcp/mcp_tools.h: the bank's tools as MCP tools. Defines mcp_tools_list
// (the tools/list result: each tool's name, description and input schema
// from the catalog env_tool_schema builds for the system prompt, plus
// annotations and fimi's read/write/charged/auth marks) and mcp_tools_call
// (the tools/call result: the same env_tool_call a training episode runs,
// inside a database transaction).
#ifndef FIMI_MCP_TOOLS_H
#define FIMI_MCP_TOOLS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "env/bank/db.h"

// {"tools": [...]} (caller deletes); NULL when out of memory.
cJSON *mcp_tools_list(void);

// Runs a tools/call request's params on the session's bank. 0: *result is a
// CallToolResult ({"content": [{"type": "text", "text": ...}], "isError":
// ..., and "structuredContent" for a successful call}); a failing tool is a
// result with isError true and the text an agent reads in training. -1: a
// protocol error (*code, why): params without a string name, arguments that
// are not an object, an unknown tool.
int mcp_tools_call(BankEpisode *bank, const cJSON *params, cJSON **result, int *code, char *why, size_t why_size);

#endif
