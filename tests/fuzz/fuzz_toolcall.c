// tests/fuzz/fuzz_toolcall.c: libFuzzer target for the tool-call parser
// (data/toolcall.c). Any bytes must give a MESSAGE, a TOOL_CALL or a typed
// ERROR, never a crash, and the result must be consistent:
// - ERROR: a known code, a non-empty valid-UTF-8 message of bounded length,
//   an offset inside the input; the message renders as a JSON tool error.
// - MESSAGE: a trimmed, non-empty slice of the input without any tag.
// - TOOL_CALL: a valid name and an object; re-rendering the call (after the
//   same preface) and parsing it again gives the same name and arguments.
#define _POSIX_C_SOURCE 200809L  // strnlen
#include "core/json.h"
#include "toolcall_fuzz.h"

// The error renders as a JSON tool error whose message reads back the same.
static void json_error_renders(const ToolCallParse *p) {
  FimiError err = {0};
  char *json = toolcall_render_error(p->name[0] ? p->name : NULL, p->message, &err);
  check(json != NULL, "render error");
  cJSON *back = json_parse_text(json, strlen(json), "error", &err);
  check(back != NULL, "rendered error parses");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(back, "error");
  check(cJSON_IsString(msg) && strcmp(msg->valuestring, p->message) == 0, "error message round trip");
  cJSON_Delete(back);
  free(json);
}

static const FuzzCallSyntax JSON_SYNTAX = {toolcall_parse, toolcall_render_call, json_error_renders, "<tool_call>",
                                           "</tool_call>"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return toolcall_fuzz_turn(&JSON_SYNTAX, data, size); }
