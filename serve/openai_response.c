// serve/openai_response.c: building the API's JSON answers (see
// openai_response.h). cJSON builds every object; a NULL from it (out of
// memory) propagates as a NULL answer, which the transport turns into a 500.
#include "serve/openai_response.h"

#include <stdlib.h>
#include <string.h>

char *serve_error_body(const ServeError *e) {
  cJSON *root = cJSON_CreateObject(), *error = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(error, "message", e->message);
  cJSON_AddStringToObject(error, "type", e->type ? e->type : "invalid_request_error");
  if (e->param[0]) cJSON_AddStringToObject(error, "param", e->param);
  else cJSON_AddNullToObject(error, "param");
  if (e->code) cJSON_AddStringToObject(error, "code", e->code);
  else cJSON_AddNullToObject(error, "code");
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

char *serve_models_body(const char *model, long created) {
  cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateArray(), *m = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "object", "list");
  cJSON_AddStringToObject(m, "id", model);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", (double)created);
  cJSON_AddStringToObject(m, "owned_by", "fimi");
  cJSON_AddItemToArray(data, m);
  cJSON_AddItemToObject(root, "data", data);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

static cJSON *tool_calls_of(const ToolCallParse *p, const char *call_id) {
  cJSON *calls = cJSON_CreateArray(), *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
  char *arguments = cJSON_PrintUnformatted(p->arguments);
  cJSON_AddStringToObject(call, "id", call_id);
  cJSON_AddStringToObject(call, "type", "function");
  cJSON_AddStringToObject(fn, "name", p->name);
  cJSON_AddStringToObject(fn, "arguments", arguments ? arguments : "{}");
  free(arguments);
  cJSON_AddItemToObject(call, "function", fn);
  cJSON_AddItemToArray(calls, call);
  return calls;
}

cJSON *serve_assistant_message(const ChatBuilder *b, const char *text, size_t len, int parse_calls,
                               const char *call_id, int *is_call) {
  *is_call = 0;
  cJSON *msg = cJSON_CreateObject();
  cJSON_AddStringToObject(msg, "role", "assistant");
  ToolCallParse p;
  if (parse_calls && chat_parse_model_turn(b, text, len, &p) == TOOLCALL_TOOL_CALL) {
    *is_call = 1;
    if (p.text_len > 0) {
      char *preface = strndup(p.text, p.text_len);
      cJSON_AddStringToObject(msg, "content", preface ? preface : "");
      free(preface);
    } else {
      cJSON_AddNullToObject(msg, "content");
    }
    cJSON_AddItemToObject(msg, "tool_calls", tool_calls_of(&p, call_id));
    toolcall_parse_free(&p);
    return msg;
  }
  if (parse_calls) toolcall_parse_free(&p);
  char *content = strndup(text, len);
  cJSON_AddStringToObject(msg, "content", content ? content : "");
  free(content);
  return msg;
}

cJSON *serve_usage(int prompt_tokens, int completion_tokens, int cached_tokens) {
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", prompt_tokens);
  cJSON_AddNumberToObject(u, "completion_tokens", completion_tokens);
  cJSON_AddNumberToObject(u, "total_tokens", prompt_tokens + completion_tokens);
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", cached_tokens);
  return u;
}

static cJSON *envelope(const char *id, const char *object, long created, const char *model) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "id", id);
  cJSON_AddStringToObject(root, "object", object);
  cJSON_AddNumberToObject(root, "created", (double)created);
  cJSON_AddStringToObject(root, "model", model);
  return root;
}

char *serve_chunk(const char *id, long created, const char *model, int index, cJSON *delta,
                  const char *finish_reason, cJSON *usage) {
  cJSON *root = envelope(id, "chat.completion.chunk", created, model), *choices = cJSON_AddArrayToObject(root, "choices");
  if (delta) {
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", index);
    cJSON_AddItemToObject(choice, "delta", delta);
    if (finish_reason) cJSON_AddStringToObject(choice, "finish_reason", finish_reason);
    else cJSON_AddNullToObject(choice, "finish_reason");
    cJSON_AddItemToArray(choices, choice);
  }
  if (usage) cJSON_AddItemToObject(root, "usage", usage);
  char *json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!json) return NULL;
  size_t n = strlen(json);
  char *event = malloc(n + 9);
  if (event) {
    memcpy(event, "data: ", 6);
    memcpy(event + 6, json, n);
    memcpy(event + 6 + n, "\n\n", 3);
  }
  free(json);
  return event;
}

char *serve_completion_body(const char *id, long created, const char *model, cJSON *choices, cJSON *usage) {
  cJSON *root = envelope(id, "chat.completion", created, model);
  cJSON_AddItemToObject(root, "choices", choices);
  cJSON_AddItemToObject(root, "usage", usage);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}
