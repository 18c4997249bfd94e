// eval/episode_judge.h: the reward's judge check decided by a served model
// (eval.judge = model; docs/evaluation.md, "A model judge for the judge
// check"). Defines eval_judge_episodes.
//
// After the episodes are played, every episode whose task declares the
// judge check has each of its task's assertions put to the model with the
// episode's conversation (eval/bench_judge_model.h: one request per
// assertion, a parsed verdict). The judge value becomes the share of
// assertions the model found met (an episode whose declared db check
// failed keeps its 0, as the rules have it: the model is not asked, and the
// episode is left out of the agreement), total and strict_total are recomputed
// (env/reward.h's reward_totals), and the rules' value is kept beside it
// (reward.judge_rules, written as "judge_rules" with "judge_by": "model").
// Episodes the environment failed are left as they are.
#ifndef FIMI_EVAL_EPISODE_JUDGE_H
#define FIMI_EVAL_EPISODE_JUDGE_H

#include "eval/bench_judge_model.h"
#include "eval/results.h"

// tasks: the task file the episodes were played on (found by id). Fails
// when the server fails or refuses a request, or a task is missing.
int eval_judge_episodes(EvalResults *results, const TaskList *tasks, BenchModelJudge *judge, FimiError *err);

#endif
