// tests/fuzz/fuzz_toolcall_gemma4.c: libFuzzer target for the parser of
// Gemma 4's native call syntax (toolcall_parse_gemma4 in data/toolcall.c).
// Any bytes must give a MESSAGE, a TOOL_CALL or a typed ERROR, never a
// crash, and the result must be consistent:
// - ERROR: a known code, a non-empty valid-UTF-8 message of bounded length with the
//   usual prefix, an offset inside the input; the message renders as a
//   Gemma 4 tool error.
// - MESSAGE: a trimmed, non-empty slice of the input without a call tag.
// - TOOL_CALL: a valid name and an object; re-rendering the call after the
//   same preface and parsing it again gives the same name and arguments.
#define _POSIX_C_SOURCE 200809L  // strnlen
#include "toolcall_fuzz.h"

static void gemma4_error_renders(const ToolCallParse *p) {
  FimiError err = {0};
  char *text = toolcall_render_error_gemma4(p->name[0] ? p->name : NULL, p->message, &err);
  check(text != NULL, "render error");
  free(text);
}

static const FuzzCallSyntax GEMMA4_SYNTAX = {toolcall_parse_gemma4, toolcall_render_call_gemma4, gemma4_error_renders,
                                             "<|tool_call>", "<tool_call|>"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return toolcall_fuzz_turn(&GEMMA4_SYNTAX, data, size); }
