// mcp/mcp_tools.c: tools/list and tools/call over the bank's tool catalog
// (see mcp_tools.h). Schemas come from env_tool_schema, the one source the
// system prompt and `fimi env tools --json` use. Every call is one SQLite
// transaction: BEGIN IMMEDIATE for a tool that writes, so that two server
// processes on one file take the write lock before reading a balance and a
// debit can never be computed from a stale one; a plain BEGIN for reads, so
// a multi-query result is one consistent snapshot.
#include "mcp/mcp_tools.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "env/bank/tools.h"
#include "mcp/mcp_jsonrpc.h"

static cJSON *tool_annotations(int index) {
  int writes = env_tool_writes(index);
  cJSON *a = cJSON_CreateObject();
  cJSON_AddBoolToObject(a, "readOnlyHint", !writes);
  // Every write moves money or changes the customer's records for good.
  if (writes) cJSON_AddBoolToObject(a, "destructiveHint", 1);
  if (writes) cJSON_AddBoolToObject(a, "idempotentHint", 0);
  // The tools touch the bank's own database only.
  cJSON_AddBoolToObject(a, "openWorldHint", 0);
  return a;
}

// fimi's own marks, which MCP's annotations have no words for.
static cJSON *tool_meta(int index) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "fimi/area", env_tool_area(index));
  cJSON_AddBoolToObject(m, "fimi/writes", env_tool_writes(index));
  cJSON_AddBoolToObject(m, "fimi/charged", env_tool_charged(index));
  cJSON_AddBoolToObject(m, "fimi/needsVerifiedCustomer", env_tool_needs_auth(index));
  return m;
}

static cJSON *mcp_tool(int index) {
  cJSON *tool = env_tool_schema(index);
  if (!tool) return NULL;
  cJSON *schema = cJSON_DetachItemFromObjectCaseSensitive(tool, "parameters");
  cJSON_AddItemToObject(tool, "inputSchema", schema);
  cJSON_AddItemToObject(tool, "annotations", tool_annotations(index));
  cJSON_AddItemToObject(tool, "_meta", tool_meta(index));
  return tool;
}

// env_tool_schema splits enum lists with strtok, whose state is global: the
// HTTP transport lists tools from several threads, so one builds at a time.
static pthread_mutex_t schema_lock = PTHREAD_MUTEX_INITIALIZER;

cJSON *mcp_tools_list(void) {
  cJSON *result = cJSON_CreateObject();
  cJSON *tools = result ? cJSON_AddArrayToObject(result, "tools") : NULL;
  if (!tools) {
    cJSON_Delete(result);
    return NULL;
  }
  pthread_mutex_lock(&schema_lock);
  for (int i = 0, n = env_tool_count(); i < n; i++) cJSON_AddItemToArray(tools, mcp_tool(i));
  pthread_mutex_unlock(&schema_lock);
  return result;
}

static cJSON *call_result(const char *text, int ok) {
  cJSON *result = cJSON_CreateObject();
  cJSON *content = cJSON_AddArrayToObject(result, "content");
  cJSON *block = cJSON_CreateObject();
  cJSON_AddStringToObject(block, "type", "text");
  cJSON_AddStringToObject(block, "text", text);
  cJSON_AddItemToArray(content, block);
  if (ok) {
    // The same JSON as structured content, for clients that read it.
    cJSON *structured = cJSON_Parse(text);
    if (cJSON_IsObject(structured)) cJSON_AddItemToObject(result, "structuredContent", structured);
    else cJSON_Delete(structured);
  }
  cJSON_AddBoolToObject(result, "isError", !ok);
  return result;
}

static int exec(BankEpisode *bank, const char *sql) {
  return sqlite3_exec(bank->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

// One tool call in its own transaction; fills *out like env_tool_call.
static void run_in_transaction(BankEpisode *bank, const char *name, const cJSON *arguments, ToolResult *out) {
  int writes = env_tool_writes(env_tool_index(name));
  if (exec(bank, writes ? "BEGIN IMMEDIATE" : "BEGIN") != 0) {
    // Another process held the write lock past the busy timeout.
    log_warn("mcp: %s: could not start a transaction: %s", name, sqlite3_errmsg(bank->db));
    out->ok = 0;
    out->text = strdup("Error: the bank is busy; try again in a moment");
    return;
  }
  env_tool_call(bank, name, arguments, out);
  // The session needs no history: the call log is for an episode's reward.
  bank_episode_clear_calls(bank);
  if (exec(bank, "COMMIT") == 0) return;
  log_error("mcp: %s: commit failed: %s", name, sqlite3_errmsg(bank->db));
  exec(bank, "ROLLBACK");
  tool_result_free(out);
  out->ok = 0;
  out->text = strdup("Error: the bank could not save this change; nothing was changed, try again");
}

int mcp_tools_call(BankEpisode *bank, const cJSON *params, cJSON **result, int *code, char *why, size_t why_size) {
  *result = NULL;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
  const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
  *code = MCP_INVALID_PARAMS;
  if (!cJSON_IsString(name) || !name->valuestring) {
    snprintf(why, why_size, "Invalid params: tools/call needs a string \"name\"");
    return -1;
  }
  if (arguments && !cJSON_IsObject(arguments)) {
    snprintf(why, why_size, "Invalid params: \"arguments\" must be an object");
    return -1;
  }
  if (env_tool_index(name->valuestring) < 0) {
    char shown[80];
    mcp_quote(name->valuestring, shown, sizeof shown);
    snprintf(why, why_size, "Unknown tool: \"%s\" (tools/list names the tools)", shown);
    return -1;
  }
  ToolResult out = {0};
  run_in_transaction(bank, name->valuestring, arguments, &out);
  *result = call_result(out.text ? out.text : "Error: out of memory", out.ok && out.text);
  tool_result_free(&out);
  if (!*result) {
    *code = MCP_INTERNAL_ERROR;
    snprintf(why, why_size, "Internal error: out of memory");
    return -1;
  }
  return 0;
}
