// dpo/pairs.h: preference pairs from a candidate's first divergences under
// teacher forcing (FiMI paper 4.2; docs/dpo-pairs.md). Defines DpoCandidate
// (the candidate as callbacks: a model, or a script in tests),
// DpoPairOptions, DpoReplayStats and dpo_pairs_dialog: for every assistant
// turn of a reference dialog the candidate generates its turn from the
// reference prefix, the turn is scored against the reference's actions
// (dpo/divergence.h), then discarded: the next turn's prefix is the
// reference conversation again. A failing turn becomes one pair row:
//   {"prompt":[the shared prefix, reference tool results spliced in],
//    "chosen":[the reference's assistant message, or the candidate's accepted
//              revision of its turn with --chosen self-rephrase (dpo/rephrase.h)],
//    "rejected":[the candidate's turn as an assistant message],
//    "tag","detail","task_id","family","dialog","turn","action","sample",
//    "chosen_source", and with a scoring candidate "logp_chosen",
//    "logp_rejected" (summed log-probs under the candidate, the reference
//    model of the DPO run that follows)}
// TRL's field names; `fimi data tokenize --kind dpo` reads it as is.
#ifndef FIMI_DPO_PAIRS_H
#define FIMI_DPO_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "dpo/corpus.h"
#include "dpo/divergence.h"
#include "dpo/rephrase.h"

typedef struct DpoCandidate {
  // Before each dialog (may be NULL): a model drops cached state here, so a
  // dialog's turns do not depend on the dialogs before it (resume-safe).
  int (*begin_dialog)(void *ctx, FimiError *err);
  // The candidate's turn (any bytes: *text malloc'd, *len bytes) after the
  // conversation `prefix` (a messages array). `seed` is the sample's own.
  // Returns 0, -1 on errors, or 1 when the turn cannot be generated (the
  // prefix exceeds the model's context): the turn is counted as skipped.
  int (*generate)(void *ctx, const cJSON *prefix, uint64_t seed, char **text, size_t *len, FimiError *err);
  // May be NULL (no log-probs). The candidate's summed log-prob of
  // `message` (an assistant message) as the turn after `prefix`, over the
  // tokens the DPO loss counts (data/chat.h's mask), into *logp, their count
  // into *tokens. Returns 0, -1 on errors, or 1 when it exceeds the context.
  int (*score)(void *ctx, const cJSON *prefix, const cJSON *message, double *logp, long *tokens, FimiError *err);
  void *ctx;
} DpoCandidate;

typedef struct DpoPairOptions {
  int samples;            // candidate turns per reference turn (>= 1)
  uint64_t seed;          // sample seeds: rng_mix of seed, dialog index, turn, sample
  const DpoJudge *judge;  // NULL: dpo_judge_deterministic()
  DpoChosenSource chosen; // REFERENCE, or SELF_REPHRASE: one revision per pair, kept when it passes
} DpoPairOptions;

// Per construction of the chosen side: the paper's diagnostic (4.3.3) is how
// much probability the reference model gives the chosen side; teacher-sourced
// text gets little, the model's own revision more.
typedef struct DpoConstructionStats {
  long pairs;
  long chosen_chars, rejected_chars;
  long scored;                     // pairs with both sides scored
  double logp_chosen, logp_rejected;  // sums over scored pairs of the summed log-probs
  long chosen_tokens, rejected_tokens;
} DpoConstructionStats;

typedef struct DpoReplayStats {
  long turns;     // reference turns replayed
  long samples;   // candidate turns generated
  long diverged;  // samples that diverged
  long pairs;     // pairs written (identical rejected turns of one turn kept once)
  long skipped;   // turns skipped: the prefix exceeds the candidate's context
  long sanitized; // rejected turns whose bytes were not valid UTF-8 (replaced by U+FFFD)
  long tags[DPO_TAG_COUNT];
  long chosen_chars, rejected_chars;  // of the pairs' chosen and rejected content
  long rephrase_attempts, rephrase_accepted;  // --chosen self-rephrase: revisions tried, kept
  DpoConstructionStats by_source[DPO_CHOSEN_COUNT];
  double generate_seconds, check_seconds, score_seconds;
} DpoReplayStats;

void dpo_replay_stats_add(DpoReplayStats *into, const DpoReplayStats *s);

// Replays dialog `index` and appends its pairs to `pairs` (a JSON array);
// adds to *stats.
int dpo_pairs_dialog(const DpoDialog *d, long index, const DpoCandidate *cand, const DpoPairOptions *opt,
                     cJSON *pairs, DpoReplayStats *stats, FimiError *err);

// Any bytes as valid UTF-8 without NULs: each invalid byte (and NUL) becomes
// U+FFFD. Malloc'd; *changed (may be NULL) 1 when something was replaced.
char *dpo_sanitize_utf8(const char *text, size_t len, int *changed, FimiError *err);

#endif
