// eval/bench_judge_model.h: a served model as the judge of the bench's
// Reasoning & Quality gate (docs/evaluation-bench.md, "A model judge"; the
// FiMI paper's sections 4.4.4 and 5.2). Defines BenchModelJudge,
// bench_judge_model (a BenchJudge over net/'s client), bench_judge_kappa and
// bench_judge_agreement_json.
//
// One request per assertion: each expected fact ("the agent tells the
// customer X") and each rubric rule of the case's task is put to the model
// with the whole conversation (customer lines, agent messages, calls with
// their arguments, tool results and errors) and a rubric prompt asking for
// {"verdict": "pass"|"fail", "reason": "..."}. The gate passes when every
// assertion passes. A verdict that cannot be read (no JSON with a verdict,
// and neither word alone) counts as a fail and as unreadable. The
// deterministic rubric judge runs beside it on every attempt; the two
// verdicts' agreement over the judged attempts is reported as Cohen's
// kappa, kappa = (p_o - p_e) / (1 - p_e) (the paper's Eq. 1).
#ifndef FIMI_EVAL_BENCH_JUDGE_MODEL_H
#define FIMI_EVAL_BENCH_JUDGE_MODEL_H

#include <cjson/cJSON.h>

#include "core/text.h"
#include "eval/bench_gates.h"
#include "net/openai_client.h"

typedef struct BenchModelJudge {
  OpenAIClient *client;  // the caller's
  int table[2][2];       // attempts by [rubric passed][model passed]
  int assertions;        // assertions put to the model
  int unreadable;        // verdicts that could not be read
} BenchModelJudge;

// The judge ("model") over m, which collects the agreement counts.
BenchJudge bench_judge_model(BenchModelJudge *m);

// Cohen's kappa of the two judges over the attempts judged (1 when they
// always agree and the marginals are degenerate; NAN with no attempt).
double bench_judge_kappa(const int table[2][2]);

// {"attempts", "both_pass", "rubric_only", "model_only", "both_fail",
//  "observed_agreement", "kappa", "assertions", "unreadable"}.
cJSON *bench_judge_agreement_json(const BenchModelJudge *m);

// The conversation as the judge reads it, one line per event ("Customer:
// ...", "Agent: ...", "Agent calls NAME {args}", "Tool returns: ...").
int bench_trace_transcript(const BenchTrace *t, TextBuf *out);
// One requirement put to the model with the conversation: 1 met, 0 not (an
// unreadable verdict counts as not met, and in m->unreadable), -1 when the
// server fails or refuses (err). reason gets the model's reason.
int bench_judge_ask(BenchModelJudge *m, const char *conversation, const char *requirement, char *reason,
                    size_t reason_size, FimiError *err);

// The verdict in a judge model's answer: 1 pass, 0 fail, -1 unreadable.
// reason (may be NULL) gets the model's reason when it gave one.
int bench_judge_read_verdict(const char *answer, char *reason, size_t reason_size);

#endif
