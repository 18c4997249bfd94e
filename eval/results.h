// eval/results.h: what an evaluation produced (docs/evaluation.md, "Result
// files"). Defines EvalEpisode (one played episode: the task's labels, the
// trial, the reward breakdown, how it ended, dialog counts, token counts
// and the full trajectory), EvalResults (a run: its settings and episodes)
// and their JSON form, written by `fimi eval` and read back by `fimi eval
// compare`, `ladder` and `report`: every summary is computed from the
// episodes, so a result file read back gives the same tables.
#ifndef FIMI_EVAL_RESULTS_H
#define FIMI_EVAL_RESULTS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "env/reward.h"
#include "env/tasks/task.h"

typedef struct EvalEpisode {
  char *task_id, *family;  // owned
  TaskKind kind;
  TaskUseCase use_case;
  int num_gold;            // gold actions: <= 6 is the shallow slice
  int trial;               // 0 .. trials-1
  uint64_t env_seed;       // the simulator's phrasing seed
  RewardBreakdown reward;
  char end[24];            // rl/rollout.h's end names ("stop", "turn_budget", ...)
  int failed;              // the environment failed the episode (end "failed")
  int turns, tool_calls, tool_errors, malformed;
  int64_t generated;       // tokens the policy sampled (0 for scripted agents)
  int64_t tokens;          // tokens through the model: prompt, observations and sampled
  cJSON *trajectory;       // owned: [{"role": ..., "text": ...}] in order
} EvalEpisode;

// What produced the episodes, as recorded in the file.
typedef struct EvalRunInfo {
  char label[128];        // a short name for tables ("sft", "grpo step 24", "oracle")
  char model[1024];       // the model directory, or "agent:oracle" etc.
  char tasks_file[1024];
  int trials;
  uint64_t seed;
  double temperature, top_p;
  double success;         // an episode succeeds when reward.total >= success (default 1)
  int64_t parameters;     // the model's parameter count (0 for scripted agents)
  double seconds;         // wall time of the run (display only)
} EvalRunInfo;

typedef struct EvalResults {
  EvalRunInfo info;
  EvalEpisode *episodes;
  int count, cap;
} EvalResults;

// Appends a zeroed episode and returns it (NULL on out of memory).
EvalEpisode *eval_results_add(EvalResults *r, FimiError *err);
// Fills the task's labels of e (copies task id and family).
int eval_episode_set_task(EvalEpisode *e, const Task *task, FimiError *err);
void eval_results_free(EvalResults *r);

// The file: {"format": "fimi-eval-results", "version": 1, run info...,
// "summary": eval_summary_json(), "episodes": [...]}.
cJSON *eval_results_to_json(const EvalResults *r, FimiError *err);
// Writes the JSON to path through a temp file and rename (a killed run
// never leaves half a file).
int eval_results_write(const EvalResults *r, const char *path, FimiError *err);
// Reads a result file back (the summary in it is ignored: recomputed).
// Errors name the path and the field ("A.json: episodes[3].reward.db: ...").
int eval_results_read(const char *path, EvalResults *out, FimiError *err);
// The same from a parsed file; path names it in errors (e.g. an MLflow
// artifact's URL).
int eval_results_from_json(const cJSON *root, const char *path, EvalResults *out, FimiError *err);

#endif
