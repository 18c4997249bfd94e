// env/agent_prompt.h: what the agent reads before the customer speaks: the
// bank's instructions to its agent and the tool catalog for a task
// (docs/environment.md, "The agent's system turn"). Defines EnvCatalogMode
// (env.catalog = all | area | family), env_agent_instructions,
// env_agent_catalog and env_agent_system_text, the one system-turn text that
// rollouts, evaluation and oracle transcripts all use.
//
// Catalogs, in the bank's catalog order:
//   all     every tool (61): what a deployed agent sees;
//   area    the tools of every area the task's gold chain touches, plus the
//           identity area (verification is always possible);
//   family  the tools the task's gold chain calls, plus verify_customer:
//           the shortest prompt, for tiny models with short contexts (it tells
//           the model which tools matter, so scores are not comparable with
//           `all`).
#ifndef FIMI_ENV_AGENT_PROMPT_H
#define FIMI_ENV_AGENT_PROMPT_H

#include <cjson/cJSON.h>

#include "core/error.h"
#include "data/toolcall.h"
#include "env/tasks/task.h"

typedef enum { ENV_CATALOG_ALL = 0, ENV_CATALOG_AREA = 1, ENV_CATALOG_FAMILY = 2 } EnvCatalogMode;

// "all", "area", "family"; NULL for an invalid mode.
const char *env_catalog_mode_name(EnvCatalogMode mode);
// Errors name the value and the accepted ones.
int env_catalog_mode_parse(const char *name, EnvCatalogMode *out, FimiError *err);

// The bank's standing instructions to its agent (static text), which show
// how to call a tool in fimi's JSON syntax; _syntax gives them for either
// syntax (Gemma 4's shows <|tool_call>call:NAME{...}<tool_call|>).
const char *env_agent_instructions(void);
const char *env_agent_instructions_syntax(ToolCallSyntax syntax);
// The tool schemas the agent is shown for `task` (a JSON array; caller
// deletes), or NULL with err set.
cJSON *env_agent_catalog(const Task *task, EnvCatalogMode mode, FimiError *err);
// instructions + "\n" + catalog (data/chat.h's chat_system_text). Malloc'd.
char *env_agent_system_text(const Task *task, EnvCatalogMode mode, FimiError *err);
// The system text for a model that calls tools in `syntax`: JSON gives
// env_agent_system_text's bytes; Gemma 4 gives its instructions followed by
// one <|tool>declaration:...<tool|> per tool (chat_system_text_gemma4).
char *env_agent_system_text_syntax(const Task *task, EnvCatalogMode mode, ToolCallSyntax syntax, FimiError *err);

#endif
