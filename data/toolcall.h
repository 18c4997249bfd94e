// data/toolcall.h: parsing a model turn into a message or one tool call, and
// rendering the tool-call and tool-result text of the chat format (DESIGN.md
// section 5, docs/chat-format.md). Defines ToolCallParse, the typed parse
// errors ToolCallError, toolcall_parse/_free, toolcall_error_name and the
// renderers toolcall_render_call/_result/_error; for Gemma 4's native
// syntax toolcall_parse_gemma4 and the toolcall_render_*_gemma4 renderers.
//
// The model's output is untrusted: any bytes (NULs, invalid UTF-8,
// megabytes) give either a MESSAGE, a TOOL_CALL or an ERROR with a code and a
// short message that the environment returns to the model as the tool error.
// Parsing is linear in the input size and never crashes. The JSON inside
// <tool_call>...</tool_call> is parsed by cJSON.
#ifndef FIMI_DATA_TOOLCALL_H
#define FIMI_DATA_TOOLCALL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/error.h"

// Limits (docs/chat-format.md, "Parser rules").
#define TOOLCALL_MAX_TEXT_BYTES (256 * 1024)  // a whole model turn
#define TOOLCALL_MAX_NAME_BYTES 64            // tool names: [A-Za-z_][A-Za-z0-9_.-]*
#define TOOLCALL_MAX_DEPTH 32                 // JSON nesting; the call object is depth 1
#define TOOLCALL_MESSAGE_MAX 256              // the error message, quotes truncated

typedef enum { TOOLCALL_MESSAGE = 0, TOOLCALL_TOOL_CALL = 1, TOOLCALL_ERROR = 2 } ToolCallKind;

typedef enum {
  TOOLCALL_OK = 0,
  TOOLCALL_ERR_TOO_LONG,             // turn longer than TOOLCALL_MAX_TEXT_BYTES
  TOOLCALL_ERR_NUL_BYTE,             // a NUL byte, or \u0000 inside the JSON
  TOOLCALL_ERR_INVALID_UTF8,         // not valid UTF-8
  TOOLCALL_ERR_EMPTY,                // nothing but whitespace
  TOOLCALL_ERR_STRAY_CLOSE,          // </tool_call> without a <tool_call> before it
  TOOLCALL_ERR_UNTERMINATED,         // <tool_call> without </tool_call>
  TOOLCALL_ERR_INVALID_JSON,         // not one JSON value, or a number overflows a double
  TOOLCALL_ERR_TOO_DEEP,             // JSON nested deeper than TOOLCALL_MAX_DEPTH
  TOOLCALL_ERR_NOT_AN_OBJECT,        // the call is JSON but not an object
  TOOLCALL_ERR_DUPLICATE_KEY,        // a key twice in one object, at any depth
  TOOLCALL_ERR_UNKNOWN_KEY,          // a key besides "name" and "arguments"
  TOOLCALL_ERR_MISSING_NAME,         // no "name" (or null)
  TOOLCALL_ERR_BAD_NAME,             // "name" not a string of the allowed form
  TOOLCALL_ERR_MISSING_ARGUMENTS,    // no "arguments" (or null)
  TOOLCALL_ERR_ARGUMENTS_NOT_OBJECT, // "arguments" is not a JSON object
  TOOLCALL_ERR_TEXT_AFTER_CALL,      // non-space text after </tool_call>
  TOOLCALL_ERR_MULTIPLE_CALLS,       // a second <tool_call> in the turn
  TOOLCALL_ERR_INVALID_SYNTAX,       // Gemma 4: not call:NAME{...} in the native syntax
  TOOLCALL_ERR_COUNT
} ToolCallError;

typedef struct ToolCallParse {
  ToolCallKind kind;
  // MESSAGE: the message, whitespace-trimmed, without a trailing
  // <end_of_turn>/<eos>. TOOL_CALL: the text before <tool_call> (trimmed,
  // often empty). Points INTO the caller's input: valid while it is.
  const char *text;
  size_t text_len;
  // TOOL_CALL: the tool name. ERROR: the name when it was read before the
  // error was found (e.g. ARGUMENTS_NOT_OBJECT), else "".
  char name[TOOLCALL_MAX_NAME_BYTES + 1];
  // TOOL_CALL: the arguments object, owned; toolcall_parse_free deletes it
  // (or take it and set the field to NULL).
  cJSON *arguments;
  ToolCallError error;  // TOOLCALL_OK unless kind == TOOLCALL_ERROR
  size_t error_offset;  // ERROR: byte offset in the input where it was found
  // ERROR: "invalid tool call (<code name>): <what is wrong>", short and
  // valid UTF-8, safe to send back to the model.
  char message[TOOLCALL_MESSAGE_MAX];
} ToolCallParse;

// Parses the decoded text of one model turn (len bytes, any content; decode
// with skip_special=0 so the tags survive). Fills *out (previous contents
// are overwritten, not freed) and returns out->kind.
ToolCallKind toolcall_parse(const char *text, size_t len, ToolCallParse *out);
void toolcall_parse_free(ToolCallParse *parse);
// Stable lower-case name of a code ("invalid_json"), for messages and metrics.
const char *toolcall_error_name(ToolCallError error);

// The text a model turn must contain to call a tool:
// <tool_call>{"name":"NAME","arguments":{...}}</tool_call> (compact JSON, keys
// in the given order). name must be a valid tool name, arguments an object.
// Returns a malloc'd string or NULL with err set.
char *toolcall_render_call(const char *name, const cJSON *arguments, FimiError *err);
// The content of a tool turn: {"name":"NAME","result":RESULT} and
// {"name":"NAME","error":"MESSAGE"}. name may be NULL (a call whose name could
// not be read) and renders as null. Malloc'd, or NULL with err set.
char *toolcall_render_result(const char *name, const cJSON *result, FimiError *err);
char *toolcall_render_error(const char *name, const char *message, FimiError *err);

// Gemma 4's native syntax (docs/chat-format.md section 10). A call is
//   <|tool_call>call:NAME{key:VALUE,...}<tool_call|>
// with VALUE one of <|"|>text<|"|> (a string: any text without <|"|>), a JSON
// number, true, false, null, {key:VALUE,...} or [VALUE,...]; keys are bare
// ([A-Za-z0-9_.-]+), no whitespace between the parts. The parse gives the
// same ToolCallParse as toolcall_parse (arguments as cJSON); the same turn
// rules apply with <|tool_call>/<tool_call|> as the tags and <turn|>/<eos>
// trimmed at the end. Syntax errors are TOOLCALL_ERR_INVALID_SYNTAX (or
// TOO_DEEP, DUPLICATE_KEY, BAD_NAME, ...); never crashes on any bytes.
ToolCallKind toolcall_parse_gemma4(const char *text, size_t len, ToolCallParse *out);
// <|tool_call>call:NAME{...}<tool_call|>; fails on a key that is not bare, a
// string holding <|"|>, or a non-finite number. Malloc'd, or NULL with err.
char *toolcall_render_call_gemma4(const char *name, const cJSON *arguments, FimiError *err);
// <|tool_response>response:NAME{...}<tool_response|>: an object result
// renders its members, any other value renders as {result:VALUE}; an error as
// {error:<|"|>MESSAGE<|"|>}. name NULL renders as "unknown".
char *toolcall_render_result_gemma4(const char *name, const cJSON *result, FimiError *err);
char *toolcall_render_error_gemma4(const char *name, const char *message, FimiError *err);

// One tool declaration of a Gemma 4 system turn:
// <|tool>declaration:NAME{description:<|"|>...<|"|>,parameters:{...}}<tool|>
// (description and parameters omitted when NULL; the schema's members in
// their order, in the native syntax). Malloc'd, or NULL with err set.
char *toolcall_render_declaration_gemma4(const char *name, const char *description, const cJSON *parameters,
                                         FimiError *err);

// Which syntax a model exchanges calls in: fimi's JSON (sections 6-8 of
// docs/chat-format.md) or Gemma 4's native one (section 10). The episode
// (env/episode.h) takes one; data/chat.h's chat_tool_syntax gives a
// builder's.
typedef enum { TOOLCALL_SYNTAX_JSON = 0, TOOLCALL_SYNTAX_GEMMA4 = 1, TOOLCALL_SYNTAX_COUNT } ToolCallSyntax;

// "json", "gemma4"; NULL for an invalid value.
const char *toolcall_syntax_name(ToolCallSyntax syntax);
// toolcall_parse or toolcall_parse_gemma4 (an invalid syntax gives an
// ERROR of kind INVALID_SYNTAX, never a crash).
ToolCallKind toolcall_parse_syntax(ToolCallSyntax syntax, const char *text, size_t len, ToolCallParse *out);
// toolcall_render_call/_result/_error or their _gemma4 forms.
char *toolcall_render_call_syntax(ToolCallSyntax syntax, const char *name, const cJSON *arguments, FimiError *err);
char *toolcall_render_result_syntax(ToolCallSyntax syntax, const char *name, const cJSON *result, FimiError *err);
char *toolcall_render_error_syntax(ToolCallSyntax syntax, const char *name, const char *message, FimiError *err);
// 1 when the text of a tool turn (as the renderers above give it) is an
// error: JSON {"name":..,"error":..}, Gemma 4 response:NAME{error:...}.
int toolcall_result_is_error(ToolCallSyntax syntax, const char *text);

// 1 when name is a valid tool name (1..TOOLCALL_MAX_NAME_BYTES bytes of
// [A-Za-z0-9_.-], not starting with a digit, '.' or '-').
int toolcall_name_is_valid(const char *name, size_t len);

#endif
