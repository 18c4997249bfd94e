// dpo/monitor.c: the DPO divergence monitor (see monitor.h).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dpo/monitor.h"

void dpo_monitor_config_default(DpoMonitorConfig *config) {
  config->threshold = 5.0;
  config->window = 10;
}

int dpo_monitor_config_validate(const DpoMonitorConfig *config, FimiError *err) {
  if (!isfinite(config->threshold)) return fimi_fail(err, "dpo.margin_warn_threshold must be finite, got %g",
                                                     config->threshold);
  if (config->window < 1) return fimi_fail(err, "dpo.margin_warn_window must be >= 1, got %d", config->window);
  return 0;
}

int dpo_monitor_init(DpoMonitor *monitor, const DpoMonitorConfig *config, FimiError *err) {
  memset(monitor, 0, sizeof *monitor);
  if (dpo_monitor_config_validate(config, err) != 0) return -1;
  monitor->config = *config;
  return 0;
}

int dpo_monitor_update(DpoMonitor *monitor, const DpoMetrics *m, DpoMonitorReport *report) {
  memset(report, 0, sizeof *report);
  monitor->steps++;
  monitor->streak = m->rewards_margins > monitor->config.threshold ? monitor->streak + 1 : 0;
  report->streak = monitor->streak;
  report->margin = m->rewards_margins;
  // margin change since step 0 = chosen_change - rejected_change
  //                             = chosen_rise + rejected_fall.
  report->chosen_rise = m->chosen_change;
  report->rejected_fall = -m->rejected_change;
  report->mainly = report->rejected_fall > report->chosen_rise ? DPO_GROWTH_REJECTED : DPO_GROWTH_CHOSEN;
  // Warn when the streak reaches the window, then once per further window
  // while it lasts, so a long divergence is not one line among thousands.
  int window = monitor->config.window;
  report->warn = monitor->streak > 0 && monitor->streak % window == 0;
  if (!report->warn) return 0;
  monitor->warnings++;
  snprintf(report->message, sizeof report->message,
           "DPO margin %.3f has stayed above %.1f for %d steps; since step 0 the chosen term rose %.3f and the "
           "rejected term fell %.3f: the margin grows mainly through the %s term%s",
           m->rewards_margins, monitor->config.threshold, monitor->streak, report->chosen_rise, report->rejected_fall,
           report->mainly == DPO_GROWTH_REJECTED ? "rejected" : "chosen",
           report->mainly == DPO_GROWTH_REJECTED ? " (the policy pushes its rejected responses down; look for a "
                                                   "surface feature separating the pairs)" : "");
  return 1;
}
