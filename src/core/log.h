/*
 * Logging. A logger is a small caller-owned object (one per node, so that several nodes in one test
 * process keep apart): a level, an instance id printed on every line, an output stream and, for
 * tests, an optional virtual clock. There is no global logger.
 *
 * Each message is one line:
 *
 *     2025-01-02T03:04:05.678Z level=info instance=node1 listening addr=127.0.0.1:5454 workers=2
 *
 * The timestamp is ISO-8601 UTC with milliseconds. The message is the caller's printf-style text,
 * written as key=value pairs where it carries data so that the line stays greppable and
 * machine-parsable. Control characters in the message (a newline from a client-supplied key, say)
 * are escaped as \n, \t, \xNN: a message can never forge a second line. A message longer than
 * SL_LOG_LINE_MAX is cut and ends with "...".
 *
 * Thread safety: any thread may log through one logger. A line is formatted on the stack and
 * handed to the stream in one locked fwrite + fflush, so lines from different threads never
 * interleave; on an unbuffered stream (stderr) that is one write(2) per line. The level may be
 * changed at run time (SIGHUP, --verbose) while other threads log.
 */
#ifndef SLUICE_CORE_LOG_H
#define SLUICE_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "sluice/clock.h"

typedef enum sl_log_level {
    SL_LOG_ERROR = 0,
    SL_LOG_WARN = 1,
    SL_LOG_INFO = 2,
    SL_LOG_DEBUG = 3,
} sl_log_level;

/* Longest line written, including the timestamp prefix and the newline. */
#define SL_LOG_LINE_MAX 2048
/* Longest instance id kept (longer ones are cut). */
#define SL_LOG_INSTANCE_MAX 64

typedef struct sl_logger {
    int level;                         /* sl_log_level; read and written with relaxed atomics */
    FILE *out;                         /* NULL = stderr */
    const sl_clock *clock;             /* NULL = the real wall clock */
    char instance[SL_LOG_INSTANCE_MAX]; /* "" = no instance= field */
} sl_logger;

/* Initialise a logger writing to `out` (NULL = stderr) at `level`; `instance` may be NULL. */
void sl_log_init(sl_logger *lg, FILE *out, sl_log_level level, const char *instance);
void sl_log_set_level(sl_logger *lg, sl_log_level level);
sl_log_level sl_log_get_level(const sl_logger *lg);
/* Use a (virtual) clock for timestamps; NULL restores the real clock. Not for use while logging. */
void sl_log_set_clock(sl_logger *lg, const sl_clock *clock);

/* --verbose selects debug, otherwise info. */
sl_log_level sl_log_level_for_verbose(bool verbose);
/* "error", "warn", "info", "debug" (any case; "warning" too) -> level, or -EINVAL. */
int sl_log_level_from_name(const char *name);
const char *sl_log_level_name(sl_log_level level); /* "error" ... "debug" */

/* True if a message at `level` would be written: guard costly argument preparation with it. */
bool sl_log_enabled(const sl_logger *lg, sl_log_level level);

/* Write one line at `level`. A NULL logger discards the message (libraries may log optionally). */
void sl_log_write(sl_logger *lg, sl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sl_log_vwrite(sl_logger *lg, sl_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

void sl_log_error(sl_logger *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_log_warn(sl_logger *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_log_info(sl_logger *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_log_debug(sl_logger *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Format epoch milliseconds as "YYYY-MM-DDThh:mm:ss.mmmZ" into buf (at least 25 bytes). Returns
 * the length written (24). */
size_t sl_log_format_time(char *buf, size_t size, int64_t epoch_ms);

#endif
