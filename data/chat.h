// data/chat.h: the chat format of DESIGN.md section 5 as token ids and loss
// masks (docs/chat-format.md). Defines ChatRole, ChatBuilder and
// chat_init/_free/_reset, chat_begin, chat_append_turn,
// chat_append_generation_prompt, chat_append_generated,
// chat_render_messages (TRL/OpenAI `messages` JSON), and the system-turn
// text with the tool catalog (chat_tool_catalog_text, chat_system_text).
//
// Layout (Gemma style):
//   <bos><start_of_turn>{role}\n{content}<end_of_turn>\n ...
// with roles system, user, model, tool, and the generation prompt
// <start_of_turn>model\n. Token ids are built turn by turn: appending a turn
// appends its ids and never changes earlier ones, so rendering a
// conversation at once gives the same ids as appending its turns one by one.
// Segments encoded separately: each special token, the "{role}\n" header,
// the content, and the "\n" after <end_of_turn>.
//
// Loss mask: 1 on model content and the model's closing <end_of_turn>; 0 on
// <bos>, every header (including <start_of_turn>model\n), the "\n" after
// <end_of_turn>, and all system, user and tool tokens.
//
// Content is untrusted text: it is encoded with TOKENIZER_NO_SPECIAL_MATCH,
// so a literal "<end_of_turn>" in it stays ordinary text and never becomes a
// control token. The one exception: in a model turn the <tool_call> and
// </tool_call> tags of the call become their special tokens when the
// vocabulary has them (see docs/chat-format.md).
//
// Two formats, chosen by chat_init from the tokenizer (ChatFormat): Gemma 3's
// (above; the vocabulary has <start_of_turn>/<end_of_turn>) and Gemma 4's
// (the vocabulary has <|turn>/<turn|> instead): <bos><|turn>{role}\n...
// <turn|>\n, calls in the native syntax <|tool_call>call:NAME{...}
// <tool_call|>, tool results <|tool_response>response:NAME{...}
// <tool_response|>, tool declarations <|tool>...<tool|> in the system turn.
// In Gemma 4 the markup tokens (<|tool>, <tool|>, <|tool_call>,
// <tool_call|>, <|tool_response>, <tool_response|>, <|"|>) become their ids
// in system, model and tool turns; user text stays plain text. The
// chat_render_*/chat_parse_model_turn helpers pick the builder's format.
#ifndef FIMI_DATA_CHAT_H
#define FIMI_DATA_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/toolcall.h"

typedef enum { CHAT_FORMAT_GEMMA3 = 0, CHAT_FORMAT_GEMMA4 = 1 } ChatFormat;

// Ids of Gemma 4's tool markup tokens (-1 when the vocabulary lacks one).
typedef enum {
  CHAT_G4_TOOL_OPEN = 0, CHAT_G4_TOOL_CLOSE, CHAT_G4_CALL_OPEN, CHAT_G4_CALL_CLOSE,
  CHAT_G4_RESPONSE_OPEN, CHAT_G4_RESPONSE_CLOSE, CHAT_G4_QUOTE, CHAT_G4_MARKUP_COUNT
} ChatGemma4Markup;

typedef enum { CHAT_SYSTEM = 0, CHAT_USER = 1, CHAT_MODEL = 2, CHAT_TOOL = 3 } ChatRole;
#define CHAT_NUM_ROLES 4

// "system", "user", "model", "tool"; NULL for an invalid role.
const char *chat_role_name(ChatRole role);

// Ids and mask of one conversation. Read ids.data[0..ids.len) and
// mask[0..ids.len) (1 = the loss counts this token). Every function leaves
// the builder unchanged when it fails.
typedef struct ChatBuilder {
  const Tokenizer *tok;  // borrowed; must outlive the builder
  ChatFormat format;
  // Gemma 4: start_of_turn/end_of_turn hold the ids of <|turn>/<turn|> and
  // tool_call_open/_close those of <|tool_call>/<tool_call|>.
  TokenizerSpecials specials;
  int32_t markup[CHAT_G4_MARKUP_COUNT];  // Gemma 4 only; else all -1
  TokenIds ids;
  uint8_t *mask;
  size_t mask_cap;
  int model_turn_open;  // a generation prompt waits for chat_append_generated
  TokenIds header[CHAT_NUM_ROLES];  // ids of "{role}\n"
  TokenIds newline;                 // ids of "\n"
} ChatBuilder;

// Gemma 3's format when the vocabulary has <start_of_turn> and
// <end_of_turn>, else Gemma 4's when it has <|turn> and <turn|> (and
// <|tool_call>, <tool_call|>, <|"|>). Fails when it has neither, or no <bos>.
int chat_init(ChatBuilder *b, const Tokenizer *tok, FimiError *err);
void chat_free(ChatBuilder *b);
// Empties the builder for the next conversation (keeps its buffers).
void chat_reset(ChatBuilder *b);

// Back to the first len ids (a length the builder had at a turn boundary,
// len <= ids.len): what came after, an open generation prompt included, goes.
void chat_truncate(ChatBuilder *b, size_t len);

// <bos>; the builder must be empty.
int chat_begin(ChatBuilder *b, FimiError *err);
// One whole turn: <start_of_turn>{role}\n{content}<end_of_turn>\n. content
// is len bytes of UTF-8 (invalid UTF-8 is an error). For CHAT_MODEL it is
// the model text: a message, or an optional preface and one
// <tool_call>...</tool_call> (toolcall_render_call gives that text).
int chat_append_turn(ChatBuilder *b, ChatRole role, const char *content, size_t len, FimiError *err);
// <start_of_turn>model\n (mask 0): what the policy generates from.
int chat_append_generation_prompt(ChatBuilder *b, FimiError *err);
// The ids the policy generated after the generation prompt, appended verbatim
// with mask 1 (never re-encoded). The turn is then closed: if the ids end with
// <end_of_turn> only "\n" is added; otherwise (ended with <eos>, or cut at the
// token limit) <end_of_turn>\n is added with mask 0, since the policy did not
// generate it. Ids outside the vocabulary are an error.
int chat_append_generated(ChatBuilder *b, const int32_t *ids, size_t n, FimiError *err);

// Renders a whole conversation into an empty builder: <bos>, then each
// message of `messages` (a JSON array of {"role", "content"}; roles system
// (first message only), user, assistant or model, tool). An assistant
// message may carry "tool_calls" in OpenAI form, exactly one:
// [{"type":"function","function":{"name":...,"arguments":{...} or "{...}"}}]
// (or {"name":...,"arguments":...} without the "function" wrapper); it
// renders as its content (if any), "\n", then the <tool_call> text.
// `tools` (NULL or a JSON array of tool schemas) is rendered into the system
// turn as chat_system_text does; with tools and no system message, a system
// turn holding only the catalog comes first. `what` names the source in
// errors ("train.jsonl line 12"), which also name the message index.
int chat_render_messages(ChatBuilder *b, const cJSON *messages, const cJSON *tools, const char *what,
                         FimiError *err);

// The builder's tool-call syntax: TOOLCALL_SYNTAX_GEMMA4 for Gemma 4's
// format, else TOOLCALL_SYNTAX_JSON. The episode, rollouts, DPO pairs,
// transcripts and bench traces take it from here (docs/chat-format.md
// section 10).
ToolCallSyntax chat_tool_syntax(const ChatBuilder *b);
// The builder's syntax: toolcall_render_call/_result/_error (Gemma 3) or
// their _gemma4 forms; toolcall_parse or toolcall_parse_gemma4.
char *chat_render_call(const ChatBuilder *b, const char *name, const cJSON *arguments, FimiError *err);
char *chat_render_result(const ChatBuilder *b, const char *name, const cJSON *result, FimiError *err);
char *chat_render_error(const ChatBuilder *b, const char *name, const char *message, FimiError *err);
ToolCallKind chat_parse_model_turn(const ChatBuilder *b, const char *text, size_t len, ToolCallParse *out);

// Gemma 4's system turn: instructions, then one <|tool>declaration:...<tool|>
// per tool (names checked as chat_tool_catalog_text does). Malloc'd.
char *chat_system_text_gemma4(const char *instructions, const cJSON *tools, FimiError *err);

// The tool catalog: one header line, then one compact JSON line per tool
// {"name":...,"description":...,"parameters":{...}} in the given order
// (description and parameters omitted when absent). Each tool is
// {"name","description","parameters"} or OpenAI's {"type":"function",
// "function":{...}}. Names must be valid tool names and distinct. Same input,
// same bytes. Malloc'd, or NULL with err set.
char *chat_tool_catalog_text(const cJSON *tools, FimiError *err);
// instructions + "\n" + catalog; just the instructions when tools is NULL or
// empty, just the catalog when instructions is NULL or "". Malloc'd.
char *chat_system_text(const char *instructions, const cJSON *tools, FimiError *err);

#endif
