// dpo/rephrase.h: the self-rephrased preferred side (FiMI paper 4.3.3;
// docs/dpo-pairs.md). Defines DpoChosenSource (where a pair's chosen turn
// comes from), its names, and dpo_rephrase_prefix: the conversation the
// candidate revises its own failing turn from.
//
// The revision prompt is the reference prefix, the candidate's rejected turn
// as its own assistant message, then one user message holding a fixed rubric
// and a critique that names what failed without giving the reference's
// answer: the tag's rule, plus the judge's reason for a bad reply (a value
// the reply lacks or invents, a missing question). Nothing of the reference
// turn's tool, arguments or words is in it, so the revision stays the
// candidate's own text; dpo/pairs.c keeps it only when it passes the same
// divergence checks as any candidate turn.
#ifndef FIMI_DPO_REPHRASE_H
#define FIMI_DPO_REPHRASE_H

#include <cjson/cJSON.h>

#include "core/error.h"
#include "dpo/divergence.h"

typedef enum {
  DPO_CHOSEN_REFERENCE = 0,  // the reference dialog's turn (teacher-sourced)
  DPO_CHOSEN_SELF_REPHRASE,  // the candidate's accepted revision of its rejected turn
  DPO_CHOSEN_COUNT
} DpoChosenSource;

// "reference", "self_rephrase" (row field chosen_source, summary keys).
const char *dpo_chosen_source_name(DpoChosenSource s);
// "reference" or "self-rephrase" (the --chosen flag); -1 with err otherwise.
int dpo_chosen_source_parse(const char *flag_value, DpoChosenSource *out, FimiError *err);

// The user message after the rejected turn: the rubric and the critique of
// `dv` (a failing divergence). Malloc'd.
char *dpo_rephrase_request(const DpoDivergence *dv, FimiError *err);

// prefix + [rejected (an assistant message)] + [user: dpo_rephrase_request].
// A new array the caller deletes; NULL on errors.
cJSON *dpo_rephrase_prefix(const cJSON *prefix, const cJSON *rejected, const DpoDivergence *dv, FimiError *err);

#endif
