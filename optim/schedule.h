// optim/schedule.h: learning-rate schedules as functions of the optimizer
// step. Defines LrSchedule (constant, constant_with_warmup, linear, cosine
// with linear warmup and an optional floor), its parser and validator, and
// lr_schedule_lr(). The factors equal transformers' get_*_schedule_with_warmup
// lambdas (transformers/optimization.py), evaluated in double as Python does.
#ifndef FIMI_OPTIM_SCHEDULE_H
#define FIMI_OPTIM_SCHEDULE_H

#include "core/error.h"

typedef enum {
  LR_SCHEDULE_CONSTANT = 0,              // factor 1 at every step (no warmup)
  LR_SCHEDULE_CONSTANT_WITH_WARMUP = 1,  // step / warmup, then 1
  LR_SCHEDULE_LINEAR = 2,                // step / warmup, then linear to 0 at total_steps
  LR_SCHEDULE_COSINE = 3,                // step / warmup, then cosine to min_lr_ratio at total_steps
} LrScheduleKind;

typedef struct LrSchedule {
  LrScheduleKind kind;
  double base_lr;       // the peak learning rate (optim.lr)
  long warmup_steps;    // linear warmup from 0 over this many steps
  long total_steps;     // optimizer steps of the whole run (linear, cosine)
  double min_lr_ratio;  // cosine floor as a fraction of base_lr, in [0, 1] (0 = transformers' default)
  double num_cycles;    // cosine periods over the decay (0.5 = one half-cosine, the default)
} LrSchedule;

// Fills defaults: constant, base_lr 1e-5, no warmup, min_lr_ratio 0, num_cycles 0.5.
void lr_schedule_default(LrSchedule *s);
// "constant", "constant_with_warmup", "linear", "cosine" (transformers' names).
int lr_schedule_kind_parse(const char *name, LrScheduleKind *out, FimiError *err);
const char *lr_schedule_kind_name(LrScheduleKind kind);
// base_lr finite and >= 0, warmup >= 0, total > 0 for linear/cosine,
// min_lr_ratio in [0, 1], num_cycles finite and > 0.
int lr_schedule_validate(const LrSchedule *s, FimiError *err);
// transformers' TrainingArguments.get_warmup_steps for a ratio < 1: ceil(total * ratio).
long lr_warmup_steps_from_ratio(double ratio, long total_steps);

// Multiplier of base_lr at optimizer step `step` (0-based: the first update
// uses step 0, as torch's LambdaLR does before its first scheduler.step();
// so with warmup the very first update has lr 0, as in transformers).
double lr_schedule_factor(const LrSchedule *s, long step);
// base_lr * factor (the product Python's LambdaLR forms).
double lr_schedule_lr(const LrSchedule *s, long step);

#endif
