// env/agent_prompt.c: the agent's instructions and per-task tool catalogs
// (env/agent_prompt.h).
#include "env/agent_prompt.h"

#include <string.h>

#include "data/chat.h"
#include "env/bank/tools.h"

static const char *const mode_names[] = {"all", "area", "family"};

const char *env_catalog_mode_name(EnvCatalogMode mode) {
  return mode >= ENV_CATALOG_ALL && mode <= ENV_CATALOG_FAMILY ? mode_names[mode] : NULL;
}

int env_catalog_mode_parse(const char *name, EnvCatalogMode *out, FimiError *err) {
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, mode_names[i])) {
      *out = (EnvCatalogMode)i;
      return 0;
    }
  return fimi_fail(err, "env.catalog: unknown value '%s' (expected all, area or family)", name ? name : "");
}

// Short on purpose: the rules the reward checks (verification, consent,
// quoting tool values, one call per turn), not a style guide.
#define INSTRUCTIONS_HEAD                                                                                       \
  "You are the customer service agent of Navadhan Bank. Help the customer with their request using the tools "  \
  "below.\n"                                                                                                     \
  "- Verify the customer with verify_customer before any account action; ask for the details you need, one at a " \
  "time.\n"                                                                                                      \
  "- Before an action that carries a charge or cannot be undone, tell the customer the amount and ask them to "   \
  "confirm.\n"
#define INSTRUCTIONS_TAIL                                                                                       \
  "- Tell the customer the values from tool results exactly as the tool returned them.\n"                        \
  "- If the request is outside what the tools can do, say so; if the customer needs a person, transfer them to a " \
  "human agent."

static const char INSTRUCTIONS[] =
    INSTRUCTIONS_HEAD
    "- To call a tool, reply with exactly one <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> and "
    "nothing after it; the result comes back in the next turn.\n" INSTRUCTIONS_TAIL;

// The same rules with Gemma 4's native call syntax (docs/chat-format.md
// section 10); its markup becomes Gemma 4's tokens in the system turn.
static const char INSTRUCTIONS_GEMMA4[] =
    INSTRUCTIONS_HEAD
    "- To call a tool, reply with exactly one <|tool_call>call:NAME{key:<|\"|>text<|\"|>,number:5}<tool_call|> and "
    "nothing after it; the result comes back in the next turn.\n" INSTRUCTIONS_TAIL;

const char *env_agent_instructions(void) { return INSTRUCTIONS; }

const char *env_agent_instructions_syntax(ToolCallSyntax syntax) {
  return syntax == TOOLCALL_SYNTAX_GEMMA4 ? INSTRUCTIONS_GEMMA4 : INSTRUCTIONS;
}

// 1 when tool `index` is in the catalog of `task` under `mode`.
static int shown(const Task *task, EnvCatalogMode mode, int index) {
  if (mode == ENV_CATALOG_ALL) return 1;
  const char *name = env_tool_name(index), *area = env_tool_area(index);
  if (mode == ENV_CATALOG_FAMILY && !strcmp(name, "verify_customer")) return 1;
  if (mode == ENV_CATALOG_AREA && !strcmp(area, env_tool_area(env_tool_index("verify_customer")))) return 1;
  for (int g = 0; g < task->num_gold; g++) {
    int gi = env_tool_index(task->gold[g].name);
    if (gi < 0) continue;
    if (mode == ENV_CATALOG_FAMILY ? gi == index : !strcmp(env_tool_area(gi), area)) return 1;
  }
  return 0;
}

cJSON *env_agent_catalog(const Task *task, EnvCatalogMode mode, FimiError *err) {
  if (!env_catalog_mode_name(mode)) {
    fimi_fail(err, "env.catalog: invalid mode %d", (int)mode);
    return NULL;
  }
  cJSON *tools = cJSON_CreateArray();
  if (!tools) goto oom;
  for (int i = 0; i < env_tool_count(); i++) {
    if (!shown(task, mode, i)) continue;
    cJSON *schema = env_tool_schema(i);
    if (!schema || !cJSON_AddItemToArray(tools, schema)) {
      cJSON_Delete(schema);
      goto oom;
    }
  }
  return tools;
oom:
  cJSON_Delete(tools);
  fimi_fail(err, "out of memory building the tool catalog of task %s", task->id ? task->id : "?");
  return NULL;
}

char *env_agent_system_text(const Task *task, EnvCatalogMode mode, FimiError *err) {
  return env_agent_system_text_syntax(task, mode, TOOLCALL_SYNTAX_JSON, err);
}

char *env_agent_system_text_syntax(const Task *task, EnvCatalogMode mode, ToolCallSyntax syntax, FimiError *err) {
  if (!toolcall_syntax_name(syntax)) {
    fimi_fail(err, "agent prompt: tool-call syntax %d is neither json nor gemma4", (int)syntax);
    return NULL;
  }
  cJSON *tools = env_agent_catalog(task, mode, err);
  if (!tools) return NULL;
  char *text = syntax == TOOLCALL_SYNTAX_GEMMA4 ? chat_system_text_gemma4(INSTRUCTIONS_GEMMA4, tools, err)
                                                : chat_system_text(INSTRUCTIONS, tools, err);
  cJSON_Delete(tools);
  return text;
}
