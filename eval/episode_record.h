// eval/episode_record.h: recording an episode that an agent played in this
// process (a scripted agent, or a served model through net/'s client) from
// the environment's recorded turns: the trajectory, the call and tool-error
// counts, the end name, and an episode the environment could not play.
// Defines eval_record_env_turns, eval_agent_end_name, eval_record_failure.
#ifndef FIMI_EVAL_EPISODE_RECORD_H
#define FIMI_EVAL_EPISODE_RECORD_H

#include "core/error.h"
#include "env/episode.h"
#include "eval/results.h"

// The trajectory ({"role": user|model|tool, "text", "sampled"} per turn),
// tool_calls and tool_errors of e from the episode's turns.
int eval_record_env_turns(EvalEpisode *e, EnvEpisode *ep, FimiError *err);
// rl/rollout.h's end name for how the simulator or the turn budget ended it.
const char *eval_agent_end_name(TaskEnd end);
// Records err's failure in e (zero reward, end "failed", the reason as the
// last trajectory entry) and clears err: 0, or -1 out of memory.
int eval_record_failure(EvalEpisode *e, FimiError *err);

#endif
