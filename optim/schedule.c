// optim/schedule.c: learning-rate schedules (see schedule.h). Each factor is
// the matching transformers lambda, operation for operation in double.
#include <math.h>
#include <string.h>

#include "optim/schedule.h"

// Python's math.pi: the double nearest pi (M_PI is not ISO C).
static const double PI = 3.141592653589793;

static const char *kind_names[] = {"constant", "constant_with_warmup", "linear", "cosine"};

void lr_schedule_default(LrSchedule *s) {
  memset(s, 0, sizeof *s);
  s->kind = LR_SCHEDULE_CONSTANT;
  s->base_lr = 1e-5;
  s->num_cycles = 0.5;
}

int lr_schedule_kind_parse(const char *name, LrScheduleKind *out, FimiError *err) {
  for (int k = 0; k < 4; k++)
    if (name && strcmp(name, kind_names[k]) == 0) {
      *out = (LrScheduleKind)k;
      return 0;
    }
  return fimi_fail(err, "unknown lr schedule '%s' (expected constant, constant_with_warmup, linear or cosine)",
                   name ? name : "(null)");
}

const char *lr_schedule_kind_name(LrScheduleKind kind) {
  return kind >= 0 && kind < 4 ? kind_names[kind] : "unknown";
}

int lr_schedule_validate(const LrSchedule *s, FimiError *err) {
  if (s->kind < LR_SCHEDULE_CONSTANT || s->kind > LR_SCHEDULE_COSINE)
    return fimi_fail(err, "lr schedule: unknown kind %d", (int)s->kind);
  if (!isfinite(s->base_lr) || s->base_lr < 0) return fimi_fail(err, "optim.lr must be finite and >= 0, got %g", s->base_lr);
  if (s->warmup_steps < 0) return fimi_fail(err, "optim.warmup_steps must be >= 0, got %ld", s->warmup_steps);
  int decays = s->kind == LR_SCHEDULE_LINEAR || s->kind == LR_SCHEDULE_COSINE;
  if (decays && s->total_steps <= 0)
    return fimi_fail(err, "%s schedule needs total_steps > 0, got %ld", kind_names[s->kind], s->total_steps);
  if (!(s->min_lr_ratio >= 0 && s->min_lr_ratio <= 1))
    return fimi_fail(err, "optim.min_lr_ratio must be in [0, 1], got %g", s->min_lr_ratio);
  if (!isfinite(s->num_cycles) || s->num_cycles <= 0)
    return fimi_fail(err, "optim.num_cycles must be finite and > 0, got %g", s->num_cycles);
  return 0;
}

long lr_warmup_steps_from_ratio(double ratio, long total_steps) {
  if (!(ratio > 0) || total_steps <= 0) return 0;
  return (long)ceil((double)total_steps * ratio);
}

// float(step) / float(max(1, warmup)): shared by every warmup.
static double warmup_factor(long step, long warmup) {
  return (double)step / (double)(warmup > 1 ? warmup : 1);
}

double lr_schedule_factor(const LrSchedule *s, long step) {
  if (step < 0) step = 0;
  switch (s->kind) {
    case LR_SCHEDULE_CONSTANT:
      return 1.0;
    case LR_SCHEDULE_CONSTANT_WITH_WARMUP:
      return step < s->warmup_steps ? warmup_factor(step, s->warmup_steps) : 1.0;
    case LR_SCHEDULE_LINEAR: {
      if (step < s->warmup_steps) return warmup_factor(step, s->warmup_steps);
      long span = s->total_steps - s->warmup_steps;
      double f = (double)(s->total_steps - step) / (double)(span > 1 ? span : 1);
      return f > 0.0 ? f : 0.0;
    }
    case LR_SCHEDULE_COSINE: {
      if (step < s->warmup_steps) return warmup_factor(step, s->warmup_steps);
      long span = s->total_steps - s->warmup_steps;
      double progress = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
      double f = 0.5 * (1.0 + cos(PI * s->num_cycles * 2.0 * progress));
      // transformers' min-lr variant; with min_lr_ratio 0 this is
      // f * 1 + 0 == f, the plain cosine schedule bit for bit.
      f = f * (1.0 - s->min_lr_ratio) + s->min_lr_ratio;
      return f > 0.0 ? f : 0.0;
    }
  }
  return 1.0;
}

double lr_schedule_lr(const LrSchedule *s, long step) { return s->base_lr * lr_schedule_factor(s, step); }
