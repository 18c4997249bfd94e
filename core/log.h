// core/log.h: leveled logging to stderr. Defines log_set_level, log_debug,
// log_info, log_warn, log_error. Messages go to stderr so stdout stays
// machine-readable (JSON, tables).
#ifndef FIMI_CORE_LOG_H
#define FIMI_CORE_LOG_H

typedef enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3, LOG_QUIET = 4 } LogLevel;

void log_set_level(LogLevel level);
LogLevel log_get_level(void);
void log_message(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_message(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_message(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_message(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_message(LOG_ERROR, __VA_ARGS__)

#endif
