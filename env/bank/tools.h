// env/bank/tools.h: the tools of Navadhan Bank (a fictional bank) that an
// agent calls during an episode. Defines ToolResult, env_tool_call (the one
// entry point: validates the call, runs it on the episode's database copy,
// records it in the call log) and the catalog accessors (JSON schemas for the
// system prompt, Markdown for docs/tools.md).
//
// A call never crashes and never aborts the episode: unknown tools, bad or
// missing arguments, unmet preconditions and other customers' ids all come
// back as an error result "Error: ..." that the model can read. A failed
// write leaves the database unchanged (each write runs in a SAVEPOINT).
#ifndef FIMI_ENV_BANK_TOOLS_H
#define FIMI_ENV_BANK_TOOLS_H

#include <cjson/cJSON.h>

#include "env/bank/db.h"

typedef struct ToolResult {
  int ok;       // 1: the call succeeded, json is its result; 0: text is "Error: ..."
  char *text;   // the result as compact JSON (ok) or the error; malloc'd
  cJSON *json;  // ok: the result object (owned); else NULL. Free both with tool_result_free
} ToolResult;

// Runs tool `name` with `arguments` (a JSON object; NULL means {}) against
// the episode. Always fills *out (out->text is never NULL unless memory ran
// out) and appends the call to ep->calls. Returns out->ok.
int env_tool_call(BankEpisode *ep, const char *name, const cJSON *arguments, ToolResult *out);
// The same without printing a successful result: out->text stays NULL when
// out->ok (an episode renders the object in the model's syntax, the gold
// replay reads values from it: neither needs the compact text).
int env_tool_call_json(BankEpisode *ep, const char *name, const cJSON *arguments, ToolResult *out);
void tool_result_free(ToolResult *result);

// The catalog, in a fixed order.
int env_tool_count(void);
const char *env_tool_name(int index);
const char *env_tool_area(int index);  // "identity", "accounts", ...
int env_tool_index(const char *name);  // -1 when unknown
int env_tool_writes(int index);        // changes the database
int env_tool_charged(int index);       // may carry a charge: needs customer_confirmed
int env_tool_needs_auth(int index);    // requires an authenticated customer
// {"name", "description", "parameters": {JSON schema}} for the system prompt
// (caller deletes).
cJSON *env_tool_schema(int index);
// Array of all schemas (caller deletes).
cJSON *env_tool_catalog_json(void);
// docs/tools.md (malloc'd; caller frees).
char *env_tool_catalog_markdown(void);

#endif
