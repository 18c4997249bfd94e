// data/chat.c: the chat format as token ids and loss masks, messages JSON
// rendering and the tool catalog (see chat.h and docs/chat-format.md).
#include "data/chat.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/text.h"
#include "data/toolcall.h"

static const char *ROLE_NAMES[CHAT_NUM_ROLES] = {"system", "user", "model", "tool"};

const char *chat_role_name(ChatRole role) {
  if ((int)role < 0 || (int)role >= CHAT_NUM_ROLES) return NULL;
  return ROLE_NAMES[role];
}

// ----------------------------------------------------------------------------
// ids and mask, kept the same length

// Grows the mask to ids.len, filling the new entries with value.
static int sync_mask(ChatBuilder *b, size_t from, uint8_t value, FimiError *err) {
  if (b->ids.len > b->mask_cap) {
    size_t cap = b->mask_cap ? b->mask_cap : 256;
    while (cap < b->ids.len) {
      if (cap > SIZE_MAX / 2) return fimi_fail(err, "chat: conversation too long (%zu tokens)", b->ids.len);
      cap *= 2;
    }
    uint8_t *mask = realloc(b->mask, cap);
    if (!mask) return fimi_fail(err, "chat: out of memory for a mask of %zu tokens", cap);
    b->mask = mask;
    b->mask_cap = cap;
  }
  memset(b->mask + from, value, b->ids.len - from);
  return 0;
}

static int push_id(ChatBuilder *b, int32_t id, uint8_t mask, FimiError *err) {
  size_t from = b->ids.len;
  if (token_ids_push(&b->ids, id, err) != 0) return -1;
  return sync_mask(b, from, mask, err);
}

static int push_ids(ChatBuilder *b, const TokenIds *ids, uint8_t mask, FimiError *err) {
  size_t from = b->ids.len;
  if (token_ids_append(&b->ids, ids->data, ids->len, err) != 0) return -1;
  return sync_mask(b, from, mask, err);
}

// Encodes untrusted text as ordinary text: special-token strings in it stay text.
static int push_text(ChatBuilder *b, const char *text, size_t len, uint8_t mask, FimiError *err) {
  if (len == 0) return 0;
  size_t from = b->ids.len;
  if (tokenizer_encode(b->tok, text, len, TOKENIZER_NO_SPECIAL_MATCH, &b->ids, err) != 0) return -1;
  return sync_mask(b, from, mask, err);
}

// ----------------------------------------------------------------------------
// setup

static const char *const G4_MARKUP[CHAT_G4_MARKUP_COUNT] = {
    "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};

// Gemma 4's turn and markup ids into the builder; 0 when the vocabulary has
// <|turn>, <turn|> and the call markup, else -1 (the builder is unchanged).
static int select_gemma4(ChatBuilder *b) {
  int32_t turn = tokenizer_token_to_id(b->tok, "<|turn>"), end = tokenizer_token_to_id(b->tok, "<turn|>");
  if (turn < 0 || end < 0) return -1;
  int32_t markup[CHAT_G4_MARKUP_COUNT];
  for (int i = 0; i < CHAT_G4_MARKUP_COUNT; i++) markup[i] = tokenizer_token_to_id(b->tok, G4_MARKUP[i]);
  if (markup[CHAT_G4_CALL_OPEN] < 0 || markup[CHAT_G4_CALL_CLOSE] < 0 || markup[CHAT_G4_QUOTE] < 0) return -1;
  b->format = CHAT_FORMAT_GEMMA4;
  b->specials.start_of_turn = turn;
  b->specials.end_of_turn = end;
  b->specials.tool_call_open = markup[CHAT_G4_CALL_OPEN];
  b->specials.tool_call_close = markup[CHAT_G4_CALL_CLOSE];
  memcpy(b->markup, markup, sizeof markup);
  return 0;
}

int chat_init(ChatBuilder *b, const Tokenizer *tok, FimiError *err) {
  memset(b, 0, sizeof *b);
  b->tok = tok;
  b->specials = *tokenizer_specials(tok);
  b->format = CHAT_FORMAT_GEMMA3;
  for (int i = 0; i < CHAT_G4_MARKUP_COUNT; i++) b->markup[i] = -1;
  // by name: the tokenizer's turn specials are Gemma 4's when it lacks these
  int gemma3 = tokenizer_token_to_id(tok, "<start_of_turn>") >= 0 && tokenizer_token_to_id(tok, "<end_of_turn>") >= 0;
  if (b->specials.bos >= 0 && !gemma3) select_gemma4(b);
  int has_format = gemma3 || b->format == CHAT_FORMAT_GEMMA4;
  const char *missing = b->specials.bos < 0                                    ? "<bos>"
                        : has_format                                           ? NULL
                        : tokenizer_token_to_id(tok, "<start_of_turn>") < 0 ? "<start_of_turn>"
                                                                               : "<end_of_turn>";
  if (missing)
    return fimi_fail(err,
                     "chat format: the tokenizer has no %s token (and not Gemma 4's <|turn>, <turn|>, <|tool_call>, "
                     "<tool_call|> and <|\"|> either)",
                     missing);
  for (int r = 0; r < CHAT_NUM_ROLES; r++) {
    char header[16];
    size_t n = strlen(ROLE_NAMES[r]);
    memcpy(header, ROLE_NAMES[r], n);
    header[n] = '\n';
    if (tokenizer_encode(tok, header, n + 1, TOKENIZER_NO_SPECIAL_MATCH, &b->header[r], err) != 0) {
      chat_free(b);
      return fimi_fail_wrap(err, "chat format: encoding the %s header", ROLE_NAMES[r]);
    }
  }
  if (tokenizer_encode(tok, "\n", 1, TOKENIZER_NO_SPECIAL_MATCH, &b->newline, err) != 0) {
    chat_free(b);
    return fimi_fail_wrap(err, "chat format: encoding \"\\n\"");
  }
  return 0;
}

void chat_free(ChatBuilder *b) {
  if (!b) return;
  token_ids_free(&b->ids);
  free(b->mask);
  for (int r = 0; r < CHAT_NUM_ROLES; r++) token_ids_free(&b->header[r]);
  token_ids_free(&b->newline);
  b->mask = NULL;
  b->mask_cap = 0;
}

void chat_reset(ChatBuilder *b) {
  b->ids.len = 0;
  b->model_turn_open = 0;
}

void chat_truncate(ChatBuilder *b, size_t len) {
  if (len >= b->ids.len) return;
  b->ids.len = len;
  b->model_turn_open = 0;
}

// ----------------------------------------------------------------------------
// turns

int chat_begin(ChatBuilder *b, FimiError *err) {
  if (b->ids.len != 0) return fimi_fail(err, "chat: <bos> goes only at the start (the builder has %zu ids)", b->ids.len);
  return push_id(b, b->specials.bos, 0, err);
}

// Gemma 4 text of a system, model or tool turn: each markup string becomes its
// token id (when the vocabulary has it), the rest is ordinary text.
static int push_gemma4_markup(ChatBuilder *b, const char *text, size_t len, uint8_t mask, FimiError *err) {
  size_t done = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] != '<') continue;
    int found = -1;
    size_t n = 0;
    for (int m = 0; m < CHAT_G4_MARKUP_COUNT && found < 0; m++) {
      n = strlen(G4_MARKUP[m]);
      if (b->markup[m] >= 0 && len - i >= n && memcmp(text + i, G4_MARKUP[m], n) == 0) found = m;
    }
    if (found < 0) continue;
    if (push_text(b, text + done, i - done, mask, err) != 0 || push_id(b, b->markup[found], mask, err) != 0) return -1;
    i += n - 1;
    done = i + 1;
  }
  return push_text(b, text + done, len - done, mask, err);
}

// Model text: the call's tags become <tool_call>/</tool_call> ids when the
// vocabulary has them (the first opening tag and the last closing tag after
// it: in a valid call only whitespace follows the closing tag, while the
// arguments may contain the tag strings). All of it has mask 1.
static int push_model_text(ChatBuilder *b, const char *text, size_t len, FimiError *err) {
  static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
  if (b->format == CHAT_FORMAT_GEMMA4) return push_gemma4_markup(b, text, len, 1, err);
  const size_t open_len = sizeof OPEN - 1, close_len = sizeof CLOSE - 1;
  if (b->specials.tool_call_open < 0 || b->specials.tool_call_close < 0) return push_text(b, text, len, 1, err);
  size_t open = len, close = len;
  for (size_t i = 0; i + open_len <= len; i++)
    if (memcmp(text + i, OPEN, open_len) == 0) {
      open = i;
      break;
    }
  for (size_t i = len; open < len && i >= open + open_len + close_len; i--)
    if (memcmp(text + i - close_len, CLOSE, close_len) == 0) {
      close = i - close_len;
      break;
    }
  if (open == len || close == len) return push_text(b, text, len, 1, err);
  if (push_text(b, text, open, 1, err) != 0 || push_id(b, b->specials.tool_call_open, 1, err) != 0 ||
      push_text(b, text + open + open_len, close - open - open_len, 1, err) != 0 ||
      push_id(b, b->specials.tool_call_close, 1, err) != 0)
    return -1;
  return push_text(b, text + close + close_len, len - close - close_len, 1, err);
}

static int append_turn(ChatBuilder *b, ChatRole role, const char *content, size_t len, FimiError *err) {
  uint8_t mask = role == CHAT_MODEL;
  if (push_id(b, b->specials.start_of_turn, 0, err) != 0 || push_ids(b, &b->header[role], 0, err) != 0) return -1;
  int rc = role == CHAT_MODEL                                     ? push_model_text(b, content, len, err)
           : b->format == CHAT_FORMAT_GEMMA4 && role != CHAT_USER ? push_gemma4_markup(b, content, len, 0, err)
                                                                  : push_text(b, content, len, 0, err);
  if (rc != 0) return fimi_fail_wrap(err, "chat: %s turn", ROLE_NAMES[role]);
  if (push_id(b, b->specials.end_of_turn, mask, err) != 0) return -1;
  return push_ids(b, &b->newline, 0, err);
}

int chat_append_turn(ChatBuilder *b, ChatRole role, const char *content, size_t len, FimiError *err) {
  if (!chat_role_name(role)) return fimi_fail(err, "chat: invalid role %d", (int)role);
  if (b->ids.len == 0) return fimi_fail(err, "chat: call chat_begin before appending a %s turn", ROLE_NAMES[role]);
  if (b->model_turn_open)
    return fimi_fail(err, "chat: a generated model turn is open; append its ids with chat_append_generated first");
  if (!content && len) return fimi_fail(err, "chat: %s turn: content is NULL", ROLE_NAMES[role]);
  size_t start = b->ids.len;
  if (append_turn(b, role, content ? content : "", len, err) != 0) {
    b->ids.len = start;
    return -1;
  }
  return 0;
}

int chat_append_generation_prompt(ChatBuilder *b, FimiError *err) {
  if (b->ids.len == 0) return fimi_fail(err, "chat: call chat_begin before the generation prompt");
  if (b->model_turn_open) return fimi_fail(err, "chat: a generation prompt is already open");
  size_t start = b->ids.len;
  if (push_id(b, b->specials.start_of_turn, 0, err) != 0 || push_ids(b, &b->header[CHAT_MODEL], 0, err) != 0) {
    b->ids.len = start;
    return -1;
  }
  b->model_turn_open = 1;
  return 0;
}

int chat_append_generated(ChatBuilder *b, const int32_t *ids, size_t n, FimiError *err) {
  if (!b->model_turn_open) return fimi_fail(err, "chat: generated ids without a generation prompt before them");
  if (n && !ids) return fimi_fail(err, "chat: generated ids are NULL");
  int32_t vocab = tokenizer_vocab_size(b->tok);
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      return fimi_fail(err, "chat: generated id %d at position %zu is outside the vocabulary [0, %d)", ids[i], i, vocab);
  size_t start = b->ids.len;
  TokenIds gen = {(int32_t *)ids, n, n};
  int closed = n > 0 && ids[n - 1] == b->specials.end_of_turn;
  int rc = push_ids(b, &gen, 1, err);
  if (rc == 0 && !closed) rc = push_id(b, b->specials.end_of_turn, 0, err);
  if (rc == 0) rc = push_ids(b, &b->newline, 0, err);
  if (rc != 0) {
    b->ids.len = start;
    return -1;
  }
  b->model_turn_open = 0;
  return 0;
}

// ----------------------------------------------------------------------------
// tool catalog

// The canonical {"name","description","parameters"} of one tool schema,
// referencing (not copying) the input's items. NULL with err on a bad schema.
static cJSON *canonical_tool(const cJSON *tool, int index, FimiError *err) {
  const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
  if (cJSON_IsObject(fn)) tool = fn;  // OpenAI's {"type":"function","function":{...}}
  if (!cJSON_IsObject(tool)) {
    fimi_fail(err, "tools[%d]: expected a JSON object", index);
    return NULL;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(tool, "name");
  const cJSON *description = cJSON_GetObjectItemCaseSensitive(tool, "description");
  const cJSON *parameters = cJSON_GetObjectItemCaseSensitive(tool, "parameters");
  if (!cJSON_IsString(name) || !toolcall_name_is_valid(name->valuestring, strlen(name->valuestring))) {
    fimi_fail(err, "tools[%d].name: missing or not a valid tool name (1-%d characters of A-Z a-z 0-9 _ . -)", index,
              TOOLCALL_MAX_NAME_BYTES);
    return NULL;
  }
  if (description && !cJSON_IsString(description) && !cJSON_IsNull(description)) {
    fimi_fail(err, "tools[%d].description (%s): must be a string", index, name->valuestring);
    return NULL;
  }
  if (parameters && !cJSON_IsObject(parameters) && !cJSON_IsNull(parameters)) {
    fimi_fail(err, "tools[%d].parameters (%s): must be a JSON schema object", index, name->valuestring);
    return NULL;
  }
  cJSON *out = cJSON_CreateObject();
  int ok = out && cJSON_AddItemReferenceToObject(out, "name", (cJSON *)name);
  if (ok && cJSON_IsString(description)) ok = cJSON_AddItemReferenceToObject(out, "description", (cJSON *)description);
  if (ok && cJSON_IsObject(parameters)) ok = cJSON_AddItemReferenceToObject(out, "parameters", (cJSON *)parameters);
  if (!ok) {
    cJSON_Delete(out);
    fimi_fail(err, "tools[%d]: out of memory", index);
    return NULL;
  }
  return out;
}

static const char CATALOG_HEADER[] =
    "You can call these tools. To call one, reply with only "
    "<tool_call>{\"name\":\"TOOL_NAME\",\"arguments\":{...}}</tool_call>; "
    "the result comes back in a tool turn. One call per turn.";

char *chat_tool_catalog_text(const cJSON *tools, FimiError *err) {
  if (!cJSON_IsArray(tools)) {
    fimi_fail(err, "tools: expected a JSON array of tool schemas");
    return NULL;
  }
  TextBuf t = {0};
  if (text_append(&t, CATALOG_HEADER, strlen(CATALOG_HEADER), err) != 0) return NULL;
  int index = 0;
  for (const cJSON *tool = tools->child; tool; tool = tool->next, index++) {
    cJSON *canon = canonical_tool(tool, index, err);
    if (!canon) goto fail;
    const char *name = cJSON_GetObjectItemCaseSensitive(canon, "name")->valuestring;
    int j = 0;
    for (const cJSON *prev = tools->child; prev != tool; prev = prev->next, j++) {
      const cJSON *fn = cJSON_GetObjectItemCaseSensitive(prev, "function");
      const cJSON *prev_name = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(fn) ? fn : prev, "name");
      if (strcmp(prev_name->valuestring, name) == 0) {
        fimi_fail(err, "tools[%d].name: \"%s\" is already tools[%d]", index, name, j);
        cJSON_Delete(canon);
        goto fail;
      }
    }
    char *line = cJSON_PrintUnformatted(canon);
    cJSON_Delete(canon);
    if (!line) {
      fimi_fail(err, "tools[%d]: out of memory printing the schema", index);
      goto fail;
    }
    int rc = text_append(&t, "\n", 1, err) == 0 ? text_append(&t, line, strlen(line), err) : -1;
    cJSON_free(line);
    if (rc != 0) goto fail;
  }
  return t.data;
fail:
  free(t.data);
  return NULL;
}

char *chat_system_text(const char *instructions, const cJSON *tools, FimiError *err) {
  if (!instructions) instructions = "";
  TextBuf t = {0};
  if (text_append(&t, instructions, strlen(instructions), err) != 0) return NULL;
  if (tools && !cJSON_IsArray(tools)) {
    free(t.data);
    fimi_fail(err, "tools: expected a JSON array of tool schemas");
    return NULL;
  }
  if (cJSON_GetArraySize(tools) > 0) {
    char *catalog = chat_tool_catalog_text(tools, err);
    int rc = catalog ? 0 : -1;
    if (rc == 0 && t.len > 0) rc = text_append(&t, "\n", 1, err);
    if (rc == 0) rc = text_append(&t, catalog, strlen(catalog), err);
    free(catalog);
    if (rc != 0) {
      free(t.data);
      return NULL;
    }
  }
  return t.data;
}

char *chat_system_text_gemma4(const char *instructions, const cJSON *tools, FimiError *err) {
  if (!instructions) instructions = "";
  if (tools && !cJSON_IsArray(tools)) {
    fimi_fail(err, "tools: expected a JSON array of tool schemas");
    return NULL;
  }
  if (cJSON_GetArraySize(tools) > 0) {  // the same name and schema checks as the JSON catalog
    char *catalog = chat_tool_catalog_text(tools, err);
    if (!catalog) return NULL;
    free(catalog);
  }
  TextBuf t = {0};
  if (text_append(&t, instructions, strlen(instructions), err) != 0) return NULL;
  int index = 0;
  for (const cJSON *tool = tools ? tools->child : NULL; tool; tool = tool->next, index++) {
    cJSON *canon = canonical_tool(tool, index, err);
    if (!canon) goto fail;
    const cJSON *description = cJSON_GetObjectItemCaseSensitive(canon, "description");
    char *decl = toolcall_render_declaration_gemma4(cJSON_GetObjectItemCaseSensitive(canon, "name")->valuestring,
                                                    cJSON_IsString(description) ? description->valuestring : NULL,
                                                    cJSON_GetObjectItemCaseSensitive(canon, "parameters"), err);
    cJSON_Delete(canon);
    if (!decl) {
      fimi_fail_wrap(err, "tools[%d]", index);
      goto fail;
    }
    int rc = text_append(&t, decl, strlen(decl), err);
    free(decl);
    if (rc != 0) goto fail;
  }
  return t.data;
fail:
  free(t.data);
  return NULL;
}

static char *format_system_text(const ChatBuilder *b, const char *instructions, const cJSON *tools, FimiError *err) {
  if (b->format == CHAT_FORMAT_GEMMA4) return chat_system_text_gemma4(instructions, tools, err);
  return chat_system_text(instructions, tools, err);
}

// ----------------------------------------------------------------------------
// the builder's tool-call syntax

ToolCallSyntax chat_tool_syntax(const ChatBuilder *b) {
  return b->format == CHAT_FORMAT_GEMMA4 ? TOOLCALL_SYNTAX_GEMMA4 : TOOLCALL_SYNTAX_JSON;
}

char *chat_render_call(const ChatBuilder *b, const char *name, const cJSON *arguments, FimiError *err) {
  return toolcall_render_call_syntax(chat_tool_syntax(b), name, arguments, err);
}

char *chat_render_result(const ChatBuilder *b, const char *name, const cJSON *result, FimiError *err) {
  return toolcall_render_result_syntax(chat_tool_syntax(b), name, result, err);
}

char *chat_render_error(const ChatBuilder *b, const char *name, const char *message, FimiError *err) {
  return toolcall_render_error_syntax(chat_tool_syntax(b), name, message, err);
}

ToolCallKind chat_parse_model_turn(const ChatBuilder *b, const char *text, size_t len, ToolCallParse *out) {
  return toolcall_parse_syntax(chat_tool_syntax(b), text, len, out);
}

// ----------------------------------------------------------------------------
// messages JSON

// The <tool_call> text of an assistant message's "tool_calls" (exactly one).
static char *tool_call_text(const ChatBuilder *b, const cJSON *calls, const char *what, int index, FimiError *err) {
  if (!cJSON_IsArray(calls) || cJSON_GetArraySize(calls) != 1) {
    fimi_fail(err, "%s: messages[%d].tool_calls: expected an array with exactly one call (one call per model turn)",
              what, index);
    return NULL;
  }
  const cJSON *call = calls->child;
  const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
  if (cJSON_IsObject(fn)) call = fn;
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(call, "name");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "arguments");
  if (!cJSON_IsString(name)) {
    fimi_fail(err, "%s: messages[%d].tool_calls[0]: missing \"name\"", what, index);
    return NULL;
  }
  cJSON *parsed = NULL;
  if (cJSON_IsString(args)) {  // OpenAI: arguments as a JSON string
    parsed = json_parse_text(args->valuestring, strlen(args->valuestring), "arguments", err);
    if (!parsed) {
      fimi_fail_wrap(err, "%s: messages[%d].tool_calls[0]", what, index);
      return NULL;
    }
    args = parsed;
  } else if (!args || cJSON_IsNull(args)) {
    args = parsed = cJSON_CreateObject();
  }
  char *text = chat_render_call(b, name->valuestring, args, err);
  cJSON_Delete(parsed);
  if (!text) fimi_fail_wrap(err, "%s: messages[%d].tool_calls[0]", what, index);
  return text;
}

static int role_of(const char *role, ChatRole *out) {
  if (strcmp(role, "system") == 0) *out = CHAT_SYSTEM;
  else if (strcmp(role, "user") == 0) *out = CHAT_USER;
  else if (strcmp(role, "assistant") == 0 || strcmp(role, "model") == 0) *out = CHAT_MODEL;
  else if (strcmp(role, "tool") == 0) *out = CHAT_TOOL;
  else return -1;
  return 0;
}

// The name of the call a tool message answers: its "name", else the call of
// the nearest assistant message before it, else "unknown".
static const char *answered_call_name(const cJSON *msg) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(msg, "name");
  if (cJSON_IsString(name)) return name->valuestring;
  for (const cJSON *p = msg; p->prev && p->prev->next == p;) {  // cJSON: the head's prev is the last item
    p = p->prev;
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(p, "tool_calls");
    if (!cJSON_IsArray(calls) || !calls->child) continue;
    const cJSON *call = calls->child, *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *call_name = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(fn) ? fn : call, "name");
    return cJSON_IsString(call_name) ? call_name->valuestring : "unknown";
  }
  return "unknown";
}

// Gemma 4's tool turn: <|tool_response>response:NAME{...}<tool_response|>
// of the content parsed as JSON (an object's members; any other value, or
// text that is not JSON, as {result:...}).
static char *gemma4_tool_text(const cJSON *msg, const char *content, FimiError *err) {
  cJSON *value = cJSON_ParseWithLengthOpts(content, strlen(content) + 1, NULL, 1);  // with the NUL: no trailing text
  if (!value) value = cJSON_CreateString(content);
  if (!value) {
    fimi_fail(err, "out of memory");
    return NULL;
  }
  char *text = toolcall_render_result_gemma4(answered_call_name(msg), value, err);
  cJSON_Delete(value);
  return text;
}

// The text of message `index` (malloc'd): content, the catalog for a system
// turn, the tool call for an assistant turn with tool_calls.
static char *message_text(const ChatBuilder *b, const cJSON *msg, ChatRole role, const cJSON *tools, const char *what, int index,
                          FimiError *err) {
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
  int has_calls = calls && !cJSON_IsNull(calls);
  if (content && !cJSON_IsNull(content) && !cJSON_IsString(content)) {
    fimi_fail(err, "%s: messages[%d].content: must be a string", what, index);
    return NULL;
  }
  const char *text = cJSON_IsString(content) ? content->valuestring : NULL;
  if (!text && !(role == CHAT_MODEL && has_calls)) {
    fimi_fail(err, "%s: messages[%d]: missing \"content\"", what, index);
    return NULL;
  }
  if (has_calls && role != CHAT_MODEL) {
    fimi_fail(err, "%s: messages[%d]: only assistant messages may have tool_calls", what, index);
    return NULL;
  }
  if (role == CHAT_SYSTEM) return format_system_text(b, text, tools, err);
  if (role == CHAT_TOOL && b->format == CHAT_FORMAT_GEMMA4) {
    char *tool_text = gemma4_tool_text(msg, text, err);
    if (!tool_text) fimi_fail_wrap(err, "%s: messages[%d]", what, index);
    return tool_text;
  }
  TextBuf t = {0};
  if (text_append(&t, text ? text : "", text ? strlen(text) : 0, err) != 0) return NULL;
  if (has_calls) {
    char *call = tool_call_text(b, calls, what, index, err);
    int rc = call ? 0 : -1;
    if (rc == 0 && t.len > 0) rc = text_append(&t, "\n", 1, err);
    if (rc == 0) rc = text_append(&t, call, strlen(call), err);
    free(call);
    if (rc != 0) {
      free(t.data);
      return NULL;
    }
  }
  return t.data;
}

static int render_messages(ChatBuilder *b, const cJSON *messages, const cJSON *tools, const char *what,
                           FimiError *err) {
  if (chat_begin(b, err) != 0) return -1;
  const cJSON *first_role = cJSON_GetObjectItemCaseSensitive(messages->child, "role");
  int has_system = cJSON_IsString(first_role) && strcmp(first_role->valuestring, "system") == 0;
  if (!has_system && cJSON_GetArraySize(tools) > 0) {
    char *catalog = format_system_text(b, NULL, tools, err);
    int rc = catalog ? chat_append_turn(b, CHAT_SYSTEM, catalog, strlen(catalog), err) : -1;
    free(catalog);
    if (rc != 0) return fimi_fail_wrap(err, "%s: tools", what);
  }
  int index = 0;
  for (const cJSON *msg = messages->child; msg; msg = msg->next, index++) {
    const cJSON *role_item = cJSON_GetObjectItemCaseSensitive(msg, "role");
    ChatRole role;
    if (!cJSON_IsObject(msg) || !cJSON_IsString(role_item))
      return fimi_fail(err, "%s: messages[%d]: expected an object with a string \"role\"", what, index);
    if (role_of(role_item->valuestring, &role) != 0)
      return fimi_fail(err, "%s: messages[%d].role: \"%.40s\" is not system, user, assistant, model or tool", what,
                       index, role_item->valuestring);
    if (role == CHAT_SYSTEM && index != 0)
      return fimi_fail(err, "%s: messages[%d]: a system message must be the first message", what, index);
    char *text = message_text(b, msg, role, tools, what, index, err);
    if (!text) return -1;
    int rc = chat_append_turn(b, role, text, strlen(text), err);
    free(text);
    if (rc != 0) return fimi_fail_wrap(err, "%s: messages[%d]", what, index);
  }
  return 0;
}

int chat_render_messages(ChatBuilder *b, const cJSON *messages, const cJSON *tools, const char *what,
                         FimiError *err) {
  if (!what) what = "messages";
  if (b->ids.len != 0) return fimi_fail(err, "%s: chat_render_messages needs an empty builder", what);
  if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
    return fimi_fail(err, "%s: \"messages\" must be a non-empty JSON array", what);
  if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools))
    return fimi_fail(err, "%s: \"tools\" must be a JSON array", what);
  if (cJSON_IsNull(tools)) tools = NULL;
  if (render_messages(b, messages, tools, what, err) != 0) {
    chat_reset(b);
    return -1;
  }
  return 0;
}
