// env/agents.h: scripted agents for testing the environment and for
// baselines (docs/environment.md, "Agents"). Defines EnvAgentKind, EnvAgent,
// agent_next (the next agent turn for an episode) and agent_run_episode.
//   ORACLE: asks for each field, asks for consent before confirmed steps
//     (quoting the value), runs the gold chain, then says every required
//     value and the rubric's words: must score 1.0 on every task.
//   DO_NOTHING: greets and never acts.
//   RANDOM: verifies with the customer's fields when it has them, then calls
//     random tools with arguments drawn from their schemas and the task's
//     field values, now and then saying "Okay".
#ifndef FIMI_ENV_AGENTS_H
#define FIMI_ENV_AGENTS_H

#include <stdint.h>

#include "core/error.h"
#include "env/episode.h"

typedef enum { AGENT_ORACLE = 0, AGENT_DO_NOTHING, AGENT_RANDOM, AGENT_COUNT } EnvAgentKind;

typedef struct EnvAgent EnvAgent;

const char *agent_kind_name(EnvAgentKind kind);  // "oracle", "do_nothing", "random"
int agent_kind_from_name(const char *name);      // -1 when unknown

int agent_create(EnvAgentKind kind, uint64_t seed, EnvAgent **out, FimiError *err);
void agent_free(EnvAgent *agent);
// The agent's next turn (malloc'd text: a message or one tool call) for the
// episode in its current state. Call once per env_step.
int agent_next(EnvAgent *agent, EnvEpisode *ep, char **turn, FimiError *err);

// Plays the agent on an open episode until it is done; *last gets the final
// observation (its end reason).
int agent_play(EnvAgent *agent, EnvEpisode *ep, EnvObservation *last, FimiError *err);
// Opens an episode, lets the agent play until done, scores it, closes it.
int agent_run_episode(EnvWorld *world, const Task *task, uint64_t seed, EnvAgentKind kind, RewardBreakdown *out,
                      FimiError *err);

#endif
