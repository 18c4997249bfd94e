// env/episode.h: one episode of the bank environment (DESIGN.md section 6,
// docs/environment.md). Defines EnvWorld (the prepared images and pools an
// episode copies from: one per thread), EnvEpisode and the episode API:
// env_open(task, seed) -> first customer message, env_step(agent turn) ->
// observation + done + end reason, env_score() -> reward breakdown,
// env_close(). Also the helpers that apply a task's initial state to a bank
// copy and replay its gold chain (used by the reward and by task families).
//
// The agent turn is untrusted model output: it goes through the tool-call
// parser (data/toolcall.h) of the episode's syntax (env_set_tool_syntax:
// fimi's JSON by default, or Gemma 4's native calls), and a parse error
// becomes a tool error the agent reads, never a failure of env_step.
#ifndef FIMI_ENV_EPISODE_H
#define FIMI_ENV_EPISODE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "data/toolcall.h"
#include "env/bank/db.h"
#include "env/reward.h"
#include "env/tasks/task.h"

typedef struct EnvWorld EnvWorld;
typedef struct EnvEpisode EnvEpisode;

// Images are built on first use per image seed and cached; each image has a
// pool of connections. A world is not thread-safe: use one per thread.
int env_world_create(EnvWorld **out, FimiError *err);
void env_world_free(EnvWorld *world);
// env.simulator = model: every episode opened in this world from now on has
// its customer played by the served model behind client (borrowed; the
// opening line stays the rule-based one), sampled at temperature
// (env/user_sim_model.h). NULL: the rule-based simulator (the default).
struct OpenAIClient;
void env_world_set_customer_model(EnvWorld *world, struct OpenAIClient *client, double temperature);
// The image and pool for a seed (built when missing).
int env_world_image(EnvWorld *world, uint64_t image_seed, const BankImage **image, BankPool **pool, FimiError *err);

typedef enum { ENV_OBS_CUSTOMER = 0, ENV_OBS_TOOL = 1 } EnvObservationKind;

typedef struct EnvObservation {
  EnvObservationKind kind;
  // CUSTOMER: the simulated customer's reply. TOOL: the tool turn content in
  // the episode's syntax: {"name":..,"result":..} or {"name":..,"error":"..."}
  // (JSON), <|tool_response>response:NAME{...}<tool_response|> (Gemma 4).
  // Owned by the episode; valid until the next env_step or env_close.
  const char *text;
  int done;
  TaskEnd end;  // NONE while running
} EnvObservation;

// One recorded turn of the trajectory.
typedef enum { ENV_TURN_CUSTOMER = 0, ENV_TURN_AGENT_MESSAGE, ENV_TURN_AGENT_CALL, ENV_TURN_TOOL } EnvTurnKind;
typedef struct EnvTurn {
  EnvTurnKind kind;
  char *text;  // owned
} EnvTurn;

// Opens an episode of `task` (which must outlive the episode) on a
// private copy of the task's image. `seed` varies the simulator's phrasing
// only. *first_message: the customer's opening line (owned by the episode,
// valid until the next call); a task that starts logged in
// (initial.authenticated: the app channel) prefixes it with
// ENV_APP_SESSION, the customer id and "] ".
#define ENV_APP_SESSION "[Navadhan app: logged in as "
int env_open(EnvWorld *world, const Task *task, uint64_t seed, EnvEpisode **out, const char **first_message,
             FimiError *err);
// The syntax the agent's turns are parsed in and tool turns rendered in
// (TOOLCALL_SYNTAX_JSON after env_open). Set it before the first env_step;
// changing it later fails. The reward never depends on it: the same calls
// in either syntax give the same reward.
int env_set_tool_syntax(EnvEpisode *ep, ToolCallSyntax syntax, FimiError *err);
ToolCallSyntax env_tool_syntax(const EnvEpisode *ep);
// One agent turn (any bytes). Fails only on internal errors (out of memory,
// a broken database); after done, further steps fail.
int env_step(EnvEpisode *ep, const char *agent_turn, size_t len, EnvObservation *obs, FimiError *err);
// The reward of the episode so far (normally after done).
int env_score(EnvEpisode *ep, RewardBreakdown *out, FimiError *err);
// The db check alone: 1 in *equal when the agent's database equals the
// gold-replayed one. allow_fast_path 0 forces the digest comparison (tests
// check that both ways agree; docs/environment.md explains the fast path).
int env_episode_db_equal(EnvEpisode *ep, int allow_fast_path, int *equal, FimiError *err);
void env_close(EnvEpisode *ep);

// Read access for agents, tools and tests.
const Task *env_episode_task(const EnvEpisode *ep);
BankEpisode *env_episode_bank(EnvEpisode *ep);
int env_episode_turns_used(const EnvEpisode *ep);
int env_episode_num_turns(const EnvEpisode *ep);
const EnvTurn *env_episode_turn(const EnvEpisode *ep, int index);
// Gold tool outputs (parsed results, one per gold step) of the gold replay
// done at env_open; the values the agent must communicate, resolved.
const cJSON *env_episode_gold_results(const EnvEpisode *ep);
int env_episode_num_values(const EnvEpisode *ep);
const char *env_episode_value(const EnvEpisode *ep, int index);
// Resolved value of confirms[index] ("" when it quotes no value).
const char *env_episode_confirm_value(const EnvEpisode *ep, int index);

// ---- shared with families and the reward -----------------------------------
// Applies the task's initial state to a fresh bank copy: today, fixture SQL,
// authentication, confirmation mode. Errors name the fixture index.
int env_apply_initial(BankEpisode *bank, const Task *task, FimiError *err);
// Runs the first `steps` gold actions on an initialized copy (setting the
// confirmation hook before confirmed steps); appends each parsed result to
// `results` (a cJSON array, may be NULL). Fails on the first step whose tool
// returns an error, naming it.
int env_run_gold(BankEpisode *bank, const Task *task, int steps, cJSON *results, FimiError *err);
// One gold step (index i) on a copy where steps 0..i-1 already ran.
int env_run_gold_step(BankEpisode *bank, const Task *task, int i, cJSON *results, FimiError *err);
// The canonical state of a bank copy (every table, order-independent: sum of
// per-row hashes per table); equal digests mean equal states whatever the
// page layout. Faster than bank_episode_digest (no sorting, no text
// conversion); tests check that the two agree on equality. A pooled copy is
// digested from its change log (the rows it wrote, against the pool's
// image), in time proportional to what it wrote; others, and copies with
// writes the log may have missed, through env_state_digest_full, which
// reads every row. Both give the same value.
int env_state_digest(BankEpisode *bank, uint64_t *digest, FimiError *err);
int env_state_digest_full(BankEpisode *bank, uint64_t *digest, FimiError *err);
// Verbatim text of a value reference against the gold results (malloc'd),
// or NULL with err naming the reference.
char *env_resolve_value(const cJSON *gold_results, const TaskValueRef *ref, FimiError *err);

#endif
