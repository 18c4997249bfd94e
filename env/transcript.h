// env/transcript.h: oracle conversations for SFT warm starts
// (docs/environment.md, "Oracle transcripts"). Defines EnvTranscriptStats,
// env_transcript_oracle (plays the oracle agent through one episode and
// returns the conversation as a TRL/OpenAI `messages` array) and
// env_transcript_assistant_message (one agent turn as an assistant message).
//
// The array renders, through data/chat.h's chat_render_messages, to exactly
// the token ids and loss mask a rollout builds incrementally for the same
// episode: chat_begin, the system turn (env_agent_system_text), the first
// customer line, then per agent turn the model turn (the agent's exact text)
// and its observation (a tool turn or the customer's reply).
//
//   [{"role":"system","content": env_agent_system_text(task, mode)},
//    {"role":"user","content": first customer line},
//    {"role":"assistant","content":"Could you please share your customer id?"},
//    {"role":"user","content":"My customer id is NVC10005."},
//    {"role":"assistant","content":"","tool_calls":[{"type":"function",
//       "function":{"name":"verify_customer","arguments":{...}}}]},
//    {"role":"tool","content":"{\"name\":\"verify_customer\",\"result\":{...}}"},
//    ...,
//    the observation of the turn that ended the episode]
#ifndef FIMI_ENV_TRANSCRIPT_H
#define FIMI_ENV_TRANSCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/agent_prompt.h"
#include "env/episode.h"
#include "env/reward.h"

typedef struct EnvTranscriptStats {
  int messages;       // entries of the array
  int agent_turns;    // assistant messages (= env_step calls)
  int tool_calls;     // assistant messages in tool_calls form
  int verbatim_calls; // tool-call turns kept as verbatim content (not canonical text)
  size_t system_chars;  // bytes of the system turn's content
  RewardBreakdown reward;  // the episode's reward (total 1.0, or the call fails)
} EnvTranscriptStats;

// One agent turn (len bytes) as an assistant message whose rendered text
// (chat_render_messages) is exactly the turn:
//   - a tool call whose text is canonical, i.e. equal to
//     toolcall_render_call(name, arguments), optionally after a preface and
//     one "\n": {"role":"assistant","content": preface or "",
//     "tool_calls":[{"type":"function","function":{"name":..,"arguments":{..}}}]};
//   - anything else (a message, a call with other spacing or key order, a
//     malformed call): {"role":"assistant","content": the turn verbatim}.
// *is_call (may be NULL): 1 for the tool_calls form, 2 for a call kept
// verbatim, 0 for a message. Fails on a NUL byte (a JSON string could not
// carry it through chat_render_messages), invalid UTF-8 (no chat turn can
// hold it) and out of memory.
cJSON *env_transcript_assistant_message(const char *turn, size_t len, int *is_call, FimiError *err);

// Plays the oracle agent (env/agents.h) on `task` with episode seed `seed`
// (the customer's phrasing; `fimi env eval --seed S` plays task i with
// S + i) and returns the conversation (*messages, caller deletes), ending
// with the observation of the turn that ended the episode. The system turn
// is env_agent_system_text(task, mode). Fails when the episode fails or the
// oracle scores below 1.0 (a transcript must show the task done right);
// stats may be NULL.
int env_transcript_oracle(EnvWorld *world, const Task *task, uint64_t seed, EnvCatalogMode mode, cJSON **messages,
                          EnvTranscriptStats *stats, FimiError *err);

#endif
