// env/bank/tools.c: the tool registry and env_tool_call (see bank_tools.h).
// Validates every call against the tool's parameter description (unknown or
// duplicate arguments, missing required ones, types, ranges, enums, string
// lengths, amounts), checks authentication, runs the handler inside a
// SAVEPOINT for writes, records the call, and renders results, schemas and
// the Markdown catalog.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/utf8.h"
#include "env/bank/tools_internal.h"

#define TOOL_NAME_MAX 64
#define TOOL_ARRAY_MAX 20

static const ToolArea *const AREAS[] = {&bank_area_services, &bank_area_identity, &bank_area_accounts,
                                        &bank_area_deposits, &bank_area_loans,    &bank_area_cards};
#define NUM_AREAS ((int)(sizeof AREAS / sizeof AREAS[0]))

// Flat index -> (area, tool).
static const ToolDef *tool_at(int index, const char **area) {
  if (index < 0) return NULL;
  for (int a = 0; a < NUM_AREAS; a++) {
    if (index < AREAS[a]->count) {
      if (area) *area = AREAS[a]->name;
      return &AREAS[a]->tools[index];
    }
    index -= AREAS[a]->count;
  }
  return NULL;
}

int env_tool_count(void) {
  int n = 0;
  for (int a = 0; a < NUM_AREAS; a++) n += AREAS[a]->count;
  return n;
}

int env_tool_index(const char *name) {
  if (!name) return -1;
  for (int i = 0, n = env_tool_count(); i < n; i++)
    if (strcmp(tool_at(i, NULL)->name, name) == 0) return i;
  return -1;
}

const char *env_tool_name(int index) {
  const ToolDef *t = tool_at(index, NULL);
  return t ? t->name : NULL;
}
const char *env_tool_area(int index) {
  const char *area = NULL;
  return tool_at(index, &area) ? area : NULL;
}
int env_tool_writes(int index) { return tool_at(index, NULL) ? tool_at(index, NULL)->writes : 0; }
int env_tool_charged(int index) { return tool_at(index, NULL) ? tool_at(index, NULL)->charged : 0; }
int env_tool_needs_auth(int index) { return tool_at(index, NULL) ? tool_at(index, NULL)->needs_auth : 0; }

void tool_result_free(ToolResult *result) {
  if (!result) return;
  free(result->text);
  cJSON_Delete(result->json);
  result->text = NULL;
  result->json = NULL;
}

// ---- validation -------------------------------------------------------------

static int param_count(const ToolDef *t) {
  int n = 0;
  while (n < TOOL_MAX_PARAMS && t->params[n].name) n++;
  return n;
}

static int enum_contains(const char *values, const char *text) {
  size_t len = strlen(text);
  for (const char *p = values; *p;) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == len && strncmp(p, text, n) == 0) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

static int check_string(ToolCtx *c, const ToolParam *p, const char *text) {
  size_t max_len = p->max_len > 0 ? (size_t)p->max_len : 100;
  size_t len = strlen(text);
  if (len == 0) return tool_error(c, "argument \"%s\" must not be empty", p->name);
  if (len > max_len) return tool_error(c, "argument \"%s\" is longer than %zu characters", p->name, max_len);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)text[i] < 0x20) return tool_error(c, "argument \"%s\" contains control characters", p->name);
  // Stored text comes back in later results, which must be UTF-8 JSON.
  if (utf8_first_invalid(text, len) != len) return tool_error(c, "argument \"%s\" is not valid UTF-8", p->name);
  if (p->enum_values && !enum_contains(p->enum_values, text))
    return tool_error(c, "argument \"%s\" must be one of: %s", p->name, p->enum_values);
  return 0;
}

static int has_range(const ToolParam *p) { return p->min != 0 || p->max != 0; }

static int parse_arg(ToolCtx *c, const ToolParam *p, const cJSON *item, ToolArg *arg) {
  const char *name = p->name;
  switch (p->type) {
    case PT_STRING:
      if (!cJSON_IsString(item) || !item->valuestring) return tool_error(c, "argument \"%s\" must be a string", name);
      if (check_string(c, p, item->valuestring) != 0) return -1;
      arg->text = item->valuestring;
      break;
    case PT_DATE:
      if (!cJSON_IsString(item) || !item->valuestring || bank_date_parse(item->valuestring, &arg->integer) != 0)
        return tool_error(c, "argument \"%s\" must be a date \"YYYY-MM-DD\"", name);
      arg->text = item->valuestring;
      break;
    case PT_BOOLEAN:
      if (!cJSON_IsBool(item)) return tool_error(c, "argument \"%s\" must be true or false", name);
      arg->integer = cJSON_IsTrue(item);
      break;
    case PT_INTEGER: {
      double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
      if (!isfinite(v) || v != floor(v) || fabs(v) > 1e15)
        return tool_error(c, "argument \"%s\" must be a whole number", name);
      if (has_range(p) && (v < p->min || v > p->max))
        return tool_error(c, "argument \"%s\" must be between %g and %g", name, p->min, p->max);
      arg->integer = (int64_t)v;
      break;
    }
    case PT_NUMBER: {
      double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
      if (!isfinite(v)) return tool_error(c, "argument \"%s\" must be a number", name);
      if (has_range(p) && (v < p->min || v > p->max))
        return tool_error(c, "argument \"%s\" must be between %g and %g", name, p->min, p->max);
      arg->number = v;
      break;
    }
    case PT_AMOUNT: {
      char why[64];
      if (!cJSON_IsNumber(item)) return tool_error(c, "argument \"%s\" must be an amount in rupees (a number)", name);
      if (bank_rupees_to_paise(item->valuedouble, &arg->integer, why) != 0)
        return tool_error(c, "argument \"%s\" %s", name, why);
      if (has_range(p) && (item->valuedouble < p->min || item->valuedouble > p->max))
        return tool_error(c, "argument \"%s\" must be between Rs %.2f and Rs %.2f", name, p->min, p->max);
      break;
    }
    case PT_STRING_ARRAY: {
      int n = cJSON_IsArray(item) ? cJSON_GetArraySize(item) : -1;
      if (n < 1 || n > TOOL_ARRAY_MAX)
        return tool_error(c, "argument \"%s\" must be a list of 1 to %d strings", name, TOOL_ARRAY_MAX);
      const cJSON *element;
      cJSON_ArrayForEach(element, item) {
        if (!cJSON_IsString(element) || !element->valuestring)
          return tool_error(c, "argument \"%s\" must contain only strings", name);
        if (check_string(c, p, element->valuestring) != 0) return -1;
      }
      arg->array = item;
      break;
    }
  }
  arg->present = 1;
  return 0;
}

static int validate_args(ToolCtx *c, const cJSON *arguments) {
  const ToolDef *t = c->def;
  int n = param_count(t);
  if (arguments && !cJSON_IsNull(arguments) && !cJSON_IsObject(arguments))
    return tool_error(c, "arguments must be a JSON object");
  const cJSON *item;
  if (arguments && cJSON_IsObject(arguments)) {
    cJSON_ArrayForEach(item, arguments) {
      int known = 0;
      for (int i = 0; i < n; i++)
        if (item->string && strcmp(item->string, t->params[i].name) == 0) known = 1;
      if (!known) {
        char shown[48];
        snprintf(shown, sizeof shown, "%s", item->string ? item->string : "");
        shown[utf8_first_invalid(shown, strlen(shown))] = '\0';  // no half character at the cut
        for (char *p = shown; *p; p++)
          if ((unsigned char)*p < 0x20 || *p == '"') *p = '?';
        return tool_error(c, "%s has no argument \"%s\"", t->name, shown);
      }
      for (const cJSON *other = item->next; other; other = other->next)
        if (other->string && strcmp(other->string, item->string) == 0)
          return tool_error(c, "argument \"%s\" is given twice", item->string);
    }
  }
  for (int i = 0; i < n; i++) {
    const ToolParam *p = &t->params[i];
    item = cJSON_IsObject(arguments) ? cJSON_GetObjectItemCaseSensitive(arguments, p->name) : NULL;
    if (!item || cJSON_IsNull(item)) {
      if (p->required) return tool_error(c, "missing required argument \"%s\"", p->name);
      continue;
    }
    if (parse_arg(c, p, item, &c->args[i]) != 0) return -1;
  }
  return 0;
}

// ---- the call -------------------------------------------------------------

static void record_call(BankEpisode *ep, const char *name, const cJSON *arguments, int ok) {
  if (ep->num_calls == ep->cap_calls) {
    int cap = ep->cap_calls ? ep->cap_calls * 2 : 16;
    BankCall *grown = realloc(ep->calls, (size_t)cap * sizeof *grown);
    if (!grown) return;
    ep->calls = grown;
    ep->cap_calls = cap;
  }
  BankCall *call = &ep->calls[ep->num_calls];
  char shown[TOOL_NAME_MAX + 1];
  snprintf(shown, sizeof shown, "%s", name ? name : "");
  call->name = strdup(shown);
  call->arguments = arguments && !cJSON_IsNull(arguments) ? cJSON_PrintUnformatted(arguments) : strdup("{}");
  call->ok = ok;
  if (!call->name || !call->arguments) {
    free(call->name);
    free(call->arguments);
    return;
  }
  ep->num_calls++;
}

// A success hands the result object to the caller (printed too when
// want_text); a failure gives the error text.
static void finish(ToolResult *out, ToolCtx *c, int ok, int want_text) {
  if (ok && (!want_text || (out->text = cJSON_PrintUnformatted(c->result)) != NULL)) {
    out->ok = 1;
    out->json = c->result;
    c->result = NULL;
    return;
  }
  out->ok = 0;
  out->text = ok ? strdup("Error: out of memory") : strdup(c->error);
}

// Runs a parameterless statement through the statement cache.
static int run_cached(BankEpisode *ep, const char *sql) {
  sqlite3_stmt *stmt = bank_stmt_get(ep, sql);
  int rc = stmt ? sqlite3_step(stmt) : SQLITE_ERROR;
  bank_stmt_put(ep, stmt);
  return rc == SQLITE_DONE ? 0 : -1;
}

// Writes run inside a savepoint: a handler that fails halfway leaves no trace.
static int run_handler(ToolCtx *c) {
  if (!c->def->writes) return c->def->handler(c);
  if (run_cached(c->ep, "SAVEPOINT tool_call") != 0) return tool_internal(c);
  int rc = c->def->handler(c);
  if (rc != 0) run_cached(c->ep, "ROLLBACK TO tool_call");
  if (run_cached(c->ep, "RELEASE tool_call") != 0 && rc == 0) return tool_internal(c);
  return rc;
}

static int call_tool(BankEpisode *ep, const char *name, const cJSON *arguments, ToolResult *out, int want_text) {
  ToolCtx *c = calloc(1, sizeof *c);  // ~1 KB: keep it off small stacks
  out->ok = 0;
  out->text = NULL;
  out->json = NULL;
  if (!c) {
    out->text = strdup("Error: out of memory");
    return 0;
  }
  c->ep = ep;
  c->db = ep->db;
  int index = name && strlen(name) <= TOOL_NAME_MAX ? env_tool_index(name) : -1;
  c->def = tool_at(index, NULL);
  int ok = 0;
  if (!c->def) {
    // Quote at most 64 bytes, cut before any invalid or half character.
    size_t shown = 0;
    while (name && shown < TOOL_NAME_MAX && name[shown]) shown++;
    shown = name ? utf8_first_invalid(name, shown) : 0;
    tool_error(c, "unknown tool \"%.*s\"; the catalog lists the available tools", (int)shown, name ? name : "");
    for (char *p = c->error; *p; p++)
      if ((unsigned char)*p < 0x20) *p = '?';
  } else if (validate_args(c, arguments) == 0) {
    if (c->def->needs_auth && !ep->customer_id[0]) {
      tool_error(c, "the customer is not verified yet; ask for their customer id, date of birth and registered "
                    "mobile number and call verify_customer first");
    } else if (bank_episode_today(ep, c->today, &c->err) != 0 || bank_date_parse(c->today, &c->today_days) != 0) {
      tool_internal(c);
    } else if ((c->result = cJSON_CreateObject()) == NULL) {
      tool_error(c, "out of memory");
    } else if (run_handler(c) == 0) {
      ok = 1;
      if (c->used_confirmation) ep->confirmation_given = 0;
    }
  }
  finish(out, c, ok, want_text);
  record_call(ep, name, arguments, out->ok);
  cJSON_Delete(c->result);
  free(c);
  return out->ok;
}

int env_tool_call(BankEpisode *ep, const char *name, const cJSON *arguments, ToolResult *out) {
  return call_tool(ep, name, arguments, out, 1);
}

int env_tool_call_json(BankEpisode *ep, const char *name, const cJSON *arguments, ToolResult *out) {
  return call_tool(ep, name, arguments, out, 0);
}

// ---- schemas and docs -------------------------------------------------------

static const char *json_type(ParamType type) {
  switch (type) {
    case PT_INTEGER: return "integer";
    case PT_NUMBER: case PT_AMOUNT: return "number";
    case PT_BOOLEAN: return "boolean";
    case PT_STRING_ARRAY: return "array";
    default: return "string";
  }
}

static cJSON *param_schema(const ToolParam *p) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "type", json_type(p->type));
  cJSON_AddStringToObject(s, "description", p->description);
  if (p->type == PT_STRING && p->enum_values) {
    cJSON *values = cJSON_AddArrayToObject(s, "enum");
    char buffer[256];
    snprintf(buffer, sizeof buffer, "%s", p->enum_values);
    for (char *tok = strtok(buffer, "|"); tok; tok = strtok(NULL, "|"))
      cJSON_AddItemToArray(values, cJSON_CreateString(tok));
  }
  if (p->type == PT_DATE) cJSON_AddStringToObject(s, "format", "date");
  if (p->type == PT_STRING_ARRAY) {
    cJSON *items = cJSON_AddObjectToObject(s, "items");
    cJSON_AddStringToObject(items, "type", "string");
    cJSON_AddNumberToObject(s, "minItems", 1);
    cJSON_AddNumberToObject(s, "maxItems", TOOL_ARRAY_MAX);
  }
  if ((p->type == PT_INTEGER || p->type == PT_NUMBER || p->type == PT_AMOUNT) && has_range(p)) {
    cJSON_AddNumberToObject(s, "minimum", p->min);
    cJSON_AddNumberToObject(s, "maximum", p->max);
  }
  if (p->type == PT_AMOUNT && !has_range(p)) cJSON_AddNumberToObject(s, "exclusiveMinimum", 0);
  if (p->type == PT_STRING || p->type == PT_STRING_ARRAY) {
    cJSON *target = p->type == PT_STRING ? s : cJSON_GetObjectItem(s, "items");
    cJSON_AddNumberToObject(target, "maxLength", p->max_len > 0 ? p->max_len : 100);
  }
  return s;
}

cJSON *env_tool_schema(int index) {
  const ToolDef *t = tool_at(index, NULL);
  if (!t) return NULL;
  cJSON *tool = cJSON_CreateObject();
  cJSON_AddStringToObject(tool, "name", t->name);
  cJSON_AddStringToObject(tool, "description", t->description);
  cJSON *parameters = cJSON_AddObjectToObject(tool, "parameters");
  cJSON_AddStringToObject(parameters, "type", "object");
  cJSON *properties = cJSON_AddObjectToObject(parameters, "properties");
  cJSON *required = cJSON_AddArrayToObject(parameters, "required");
  for (int i = 0; i < param_count(t); i++) {
    cJSON_AddItemToObject(properties, t->params[i].name, param_schema(&t->params[i]));
    if (t->params[i].required) cJSON_AddItemToArray(required, cJSON_CreateString(t->params[i].name));
  }
  cJSON_AddFalseToObject(parameters, "additionalProperties");
  return tool;
}

cJSON *env_tool_catalog_json(void) {
  cJSON *all = cJSON_CreateArray();
  for (int i = 0, n = env_tool_count(); i < n; i++) cJSON_AddItemToArray(all, env_tool_schema(i));
  return all;
}

typedef struct {
  char *text;
  size_t len, cap;
} Buffer;

static void append(Buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(Buffer *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !b->text) return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = (b->cap + (size_t)n + 1) * 2;
    char *grown = realloc(b->text, cap);
    if (!grown) {
      free(b->text);
      b->text = NULL;
      return;
    }
    b->text = grown;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static const char *MARKDOWN_INTRO =
    "# Navadhan Bank tools\n\n"
    "Generated by `fimi env tools --markdown` from the catalog in `env/bank/tools_*.c`; do not edit by hand.\n"
    "Navadhan Bank is a fictional Indian retail bank invented for fimi: every customer, account and term is "
    "synthetic. The database, its terms and the rules below are described in `docs/bank-database.md`.\n\n"
    "Conventions shared by every tool:\n\n"
    "- **Calls.** The agent emits `<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>` "
    "(docs/chat-format.md); the result is a JSON object, or a string starting with `Error: ` that the model can "
    "read and act on. Unknown tools, unknown, duplicate, missing or mistyped arguments are errors; nothing a "
    "model writes can crash the environment.\n"
    "- **Authentication.** Tools marked *auth* need a verified customer: `verify_customer` with the customer id, "
    "date of birth and registered mobile number (three failures lock verification for the episode). Those tools "
    "act only on that customer's data: another customer's account, card or loan id is answered as \"not "
    "found\".\n"
    "- **Amounts** are rupees as JSON numbers with at most 2 decimals (e.g. `200000` or `1250.50`); results "
    "give amounts in rupees and rates in percent per year. Dates are `YYYY-MM-DD`; \"today\" is the episode's "
    "clock, not the wall clock.\n"
    "- **Charges and confirmation.** Tools marked *charged* may debit a charge (fee, penalty, premium). They "
    "take a boolean `customer_confirmed`, optional in the schema because some of their calls carry no charge "
    "(NEFT, IMPS up to Rs 1,000, free cheque leaves, credit card reissue) and required in effect whenever a "
    "charge applies: without it the tool refuses and quotes the charge. The agent must first tell the customer "
    "the charge (the quote tools, or the error returned when `customer_confirmed` is false, state it including "
    "18% GST) and "
    "may set `customer_confirmed: true` only after the customer agreed. When the environment runs a "
    "conversation it also records whether the simulated customer's last reply confirmed the charge; a charged "
    "write with `customer_confirmed: true` but no recorded consent fails, and one consent covers one charged "
    "write.\n"
    "- **Writes** (marked *write*) are atomic: a failed write changes nothing. Every call, failed or not, is "
    "recorded in the episode's call log (name, arguments, success) for the reward.\n\n";

static const char *param_type_doc(const ToolParam *p) {
  switch (p->type) {
    case PT_AMOUNT: return "amount (Rs)";
    case PT_DATE: return "date";
    case PT_STRING_ARRAY: return "array of strings";
    default: return json_type(p->type);
  }
}

char *env_tool_catalog_markdown(void) {
  Buffer b = {malloc(4096), 0, 4096};
  if (!b.text) return NULL;
  b.text[0] = '\0';
  append(&b, "%s", MARKDOWN_INTRO);
  append(&b, "%d tools in %d areas.\n\n", env_tool_count(), NUM_AREAS);
  for (int a = 0; a < NUM_AREAS; a++) {
    append(&b, "## %s\n\n", AREAS[a]->name);
    for (int i = 0; i < AREAS[a]->count; i++) {
      const ToolDef *t = &AREAS[a]->tools[i];
      append(&b, "### `%s`\n\n%s\n\n*%s%s%s*\n\n", t->name, t->description, t->writes ? "write" : "read-only",
             t->charged ? ", charged (needs customer_confirmed)" : "", t->needs_auth ? ", auth" : ", no auth");
      int n = param_count(t);
      if (n == 0) {
        append(&b, "No arguments.\n\n");
        continue;
      }
      append(&b, "| argument | type | required | description |\n|---|---|---|---|\n");
      for (int k = 0; k < n; k++) {
        const ToolParam *p = &t->params[k];
        append(&b, "| `%s` | %s | %s | %s", p->name, param_type_doc(p), p->required ? "yes" : "no", p->description);
        if (p->enum_values) {
          // '|' would split the Markdown table cell: list the values with commas.
          char values[256];
          snprintf(values, sizeof values, "%s", p->enum_values);
          append(&b, " One of:");
          for (char *tok = strtok(values, "|"), *first = tok; tok; tok = strtok(NULL, "|"))
            append(&b, "%s `%s`", tok == first ? "" : ",", tok);
          append(&b, ".");
        }
        if ((p->type == PT_INTEGER || p->type == PT_NUMBER || p->type == PT_AMOUNT) && has_range(p))
          append(&b, " Range %g to %g.", p->min, p->max);
        append(&b, " |\n");
      }
      append(&b, "\n");
    }
  }
  return b.text;
}
