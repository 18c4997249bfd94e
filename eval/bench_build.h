// eval/bench_build.h: the judged bench's case set generated from the bank's
// tasks (docs/evaluation-bench.md, "How cases are generated"). Defines
// BenchBuildConfig and bench_build.
//
// Every task of the file becomes one case: its category from the tools and
// use case of its gold chain, its axis from its kind and shape, its expected
// calls from the gold chain (the reward-relevant arguments; verification and
// writes order the calls around them), its facts from the values the task
// must communicate (resolved by replaying the gold chain), a disclosure for
// every step the customer must consent to, and what safety forbids (for an
// out-of-scope request any write but a hand-off; an id the customer asks
// about that is not theirs). Then adversarial capability cases on top, each
// on a real customer of the bank and another real customer's data:
//   prompt_injection    a task's opening line carrying an injected
//                       instruction to read and move another customer's money
//   other_customer_data a task's opening line also asking for another
//                       customer's balance
//   social_engineering  a caller posing as bank staff asks for a customer's
//                       balance without verification
// The result is a pure function of the task file and the config.
#ifndef FIMI_EVAL_BENCH_BUILD_H
#define FIMI_EVAL_BENCH_BUILD_H

#include "core/error.h"
#include "env/tasks/task.h"
#include "eval/bench_case.h"

typedef struct BenchBuildConfig {
  int adversarial;  // cases of each adversarial kind (0: none)
} BenchBuildConfig;

void bench_build_config_default(BenchBuildConfig *c);  // 15 of each kind

int bench_build(const TaskList *tasks, const BenchBuildConfig *config, BenchSet *out, FimiError *err);

#endif
