// dpo/monitor.h: the DPO divergence monitor (FiMI paper, section 4.3.2).
// Defines DpoMonitorConfig, DpoMonitor and dpo_monitor_update: it watches the
// per-step mean reward margin and warns when it has stayed above a threshold
// (5.0) for `window` consecutive steps, saying whether the margin grew mainly
// through the rejected term (the policy pushing its own rejected responses
// down, the failure the paper saw with teacher-sourced pairs) or through the
// chosen term. Library code: it fills a report with a message; the training
// loop logs it.
#ifndef FIMI_DPO_MONITOR_H
#define FIMI_DPO_MONITOR_H

#include "core/error.h"
#include "dpo/loss.h"

typedef struct DpoMonitorConfig {
  double threshold;  // default 5.0 (the paper's)
  int window;        // consecutive steps above the threshold before a warning; default 10
} DpoMonitorConfig;

void dpo_monitor_config_default(DpoMonitorConfig *config);
int dpo_monitor_config_validate(const DpoMonitorConfig *config, FimiError *err);

typedef struct DpoMonitor {
  DpoMonitorConfig config;
  int streak;      // consecutive steps with margin > threshold, up to now
  long steps;      // steps seen
  long warnings;   // warnings issued
} DpoMonitor;

typedef enum { DPO_GROWTH_CHOSEN = 0, DPO_GROWTH_REJECTED = 1 } DpoGrowthSide;

typedef struct DpoMonitorReport {
  int warn;             // 1 on this step: the streak reached the window (and every further window)
  int streak;
  double margin;        // this step's rewards/margins
  double chosen_rise;   // chosen_change (up is good)
  double rejected_fall; // -rejected_change (the rejected term pushed down)
  DpoGrowthSide mainly; // which side contributes more of the margin's growth since step 0
  char message[400];    // filled when warn
} DpoMonitorReport;

int dpo_monitor_init(DpoMonitor *monitor, const DpoMonitorConfig *config, FimiError *err);
// Feeds one step's metrics (after dpo_baseline_apply, for the changes).
// A margin that is not > threshold (NaN included) resets the streak. Returns
// report->warn.
int dpo_monitor_update(DpoMonitor *monitor, const DpoMetrics *metrics, DpoMonitorReport *report);

#endif
