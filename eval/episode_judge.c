// eval/episode_judge.c: the judge check re-scored by a model judge (see
// episode_judge.h).
#include "eval/episode_judge.h"

#include <stdio.h>
#include <string.h>

#include "core/text.h"
#include "eval/bench_trace.h"

static const Task *task_by_id(const TaskList *tasks, const char *id) {
  for (int i = 0; i < tasks->count; i++)
    if (!strcmp(tasks->tasks[i].id, id)) return &tasks->tasks[i];
  return NULL;
}

// The share of the task's assertions the model finds met in the episode.
static int model_share(BenchModelJudge *judge, const Task *task, const EvalEpisode *e, double *share, FimiError *err) {
  BenchTrace trace;
  if (bench_trace_build(e->trajectory, e->end, &trace, err) != 0) return -1;
  TextBuf conv = {0};
  int rc = bench_trace_transcript(&trace, &conv) == 0 && (conv.data || text_append(&conv, "", 0, err) == 0)
               ? 0
               : fimi_fail(err, "out of memory");
  int met = 0;
  char reason[256];
  for (int k = 0; rc == 0 && k < task->num_assertions; k++) {
    int v = bench_judge_ask(judge, conv.data, task->assertions[k].text, reason, sizeof reason, err);
    if (v < 0) rc = fimi_fail_wrap(err, "task %s, assertion %d", task->id, k);
    else met += v;
  }
  text_free(&conv);
  bench_trace_free(&trace);
  *share = task->num_assertions ? (double)met / task->num_assertions : 1.0;
  return rc;
}

int eval_judge_episodes(EvalResults *results, const TaskList *tasks, BenchModelJudge *judge, FimiError *err) {
  for (int i = 0; i < results->count; i++) {
    EvalEpisode *e = &results->episodes[i];
    RewardBreakdown *r = &e->reward;
    if (e->failed || !(r->checks & TASK_CHECK_JUDGE)) continue;
    const Task *task = task_by_id(tasks, e->task_id);
    if (!task) return fimi_fail(err, "eval.judge: task %s is not in the task file", e->task_id);
    r->judge_model = 1;
    r->judge_rules = r->judge;
    if (r->db_failed_judge_zeroed) continue;  // 0 whatever any judge says: not asked, not in the agreement
    double share = 1.0;
    if (model_share(judge, task, e, &share, err) != 0) return -1;
    r->judge = share;
    judge->table[r->judge_rules == 1.0][r->judge == 1.0]++;
    if (reward_totals(r) != 0) return fimi_fail(err, "task %s: a reward without checks", task->id);
  }
  return 0;
}
