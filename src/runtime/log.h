/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging. A logger is a small caller-owned object (one per node, so that several nodes in one test
 * process keep apart): a level, an instance id printed on every line, an output stream and, for
 * tests, an optional virtual clock. There is no global logger.
 *
 * Each message is one line, in logfmt (the default) or JSON, one object a line:
 *
 *     ts=2025-01-02T03:04:05.678Z level=info instance=node1 msg="listening" addr=127.0.0.1:5454
 *     {"ts":"2025-01-02T03:04:05.678Z","level":"info","instance":"node1","msg":"listening",...}
 *
 * The timestamp is ISO-8601 UTC with milliseconds. The caller writes printf-style text: words,
 * then key=value pairs where it carries data ("listening addr=%s workers=%d"); the words become
 * msg and each pair a field (a value runs to the next key=, so "reason=no route to host" is one
 * field; a value the caller put in double quotes is taken whole). Values are quoted when they
 * need it (space, '=', '"', '\', control bytes, empty) with JSON's escapes, so a message can
 * never forge a second line or a field; in JSON, integers are numbers and the rest strings. A
 * message longer than SL_LOG_LINE_MAX is cut and ends with "...".
 *
 * Under systemd (the service's stderr is the stream $JOURNAL_STREAM names: sl_log_journal_fd)
 * each line starts with its syslog priority, "<3>" error ... "<7>" debug, as sd-daemon(3) says,
 * so journald files it at that priority.
 *
 * Start-up: sl_log_hold keeps the lines written until sl_log_release (bounded: past
 * SL_LOG_HOLD_MAX bytes they go out at once), so that the line naming the version, commit and
 * listeners, written just before the release, comes first.
 *
 * Thread safety: any thread may log through one logger. A line is formatted on the stack and
 * handed to the stream in one locked fwrite + fflush, so lines from different threads never
 * interleave; on an unbuffered stream (stderr) that is one write(2) per line. The level may be
 * changed at run time (SIGHUP, --verbose) while other threads log.
 */
#ifndef SLUICE_RUNTIME_LOG_H
#define SLUICE_RUNTIME_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

/*
 * Per-request lines (a line a client can cause by sending a request) go through a budget: at most
 * `per_second` lines a second are written, the others are counted, and the next line the budget
 * admits is preceded by one "... N similar lines suppressed" line, so a flood of requests writes a
 * bounded number of bytes per second and the log still says how many were dropped. Every field a
 * client chose (request ids, resources, names, keys) goes into such a line through sl_log_field():
 * cut at SL_LOG_FIELD_MAX bytes and escaped, so it can neither grow a line nor forge key=value
 * pairs. One budget is in every logger (sl_log_req); a component may own another with its own rate.
 * The second is the logger's clock (virtual in tests) or the monotonic clock. Thread-safe (atomics).
 */
typedef struct sl_log_budget {
    uint32_t per_second;   /* lines a second; 0 = SL_LOG_REQ_PER_SECOND */
    int64_t second;        /* the second `count` is for (atomic) */
    uint32_t count;        /* lines asked for in that second (atomic) */
    uint64_t suppressed;   /* lines refused and not yet reported (atomic) */
} sl_log_budget;

/* Default per-request lines a second of a logger (sluiced's --log-request-lines). */
#define SL_LOG_REQ_PER_SECOND 20
/* Bytes of one client-chosen field kept in a log line (more is cut and marked "..."). */
#define SL_LOG_FIELD_MAX 96
/* Size of the buffer sl_log_field() writes: every byte may become \xNN, plus "..." and NUL. */
#define SL_LOG_FIELD_BUF (SL_LOG_FIELD_MAX * 4 + 4)

typedef enum sl_log_format {
    SL_LOG_LOGFMT = 0,
    SL_LOG_JSON = 1,
} sl_log_format;

/* Bytes of lines held between sl_log_hold and sl_log_release at most. */
#define SL_LOG_HOLD_MAX (64 * 1024)

typedef struct sl_logger {
    int level;                         /* sl_log_level; read and written with relaxed atomics */
    int format;                        /* sl_log_format */
    bool journal;                      /* prefix each line with its syslog priority "<N>" */
    bool holding;                      /* lines go to `held` (under the stream's lock) */
    char *held;                        /* lines held since sl_log_hold */
    size_t held_len;
    FILE *out;                         /* NULL = stderr */
    const sl_clock *clock;             /* NULL = the real wall clock */
    char instance[SL_LOG_INSTANCE_MAX]; /* "" = no instance= field */
    sl_log_budget requests;            /* per-request lines (sl_log_req) */
} sl_logger;

/* Initialise a logger writing to `out` (NULL = stderr) at `level`; `instance` may be NULL. */
void sl_log_init(sl_logger *lg, FILE *out, sl_log_level level, const char *instance);
void sl_log_set_level(sl_logger *lg, sl_log_level level);
sl_log_level sl_log_get_level(const sl_logger *lg);
/* Use a (virtual) clock for timestamps; NULL restores the real clock. Not for use while logging. */
void sl_log_set_clock(sl_logger *lg, const sl_clock *clock);

/* logfmt (default) or JSON lines; priority prefixes for journald. Not while logging. */
void sl_log_set_format(sl_logger *lg, sl_log_format format);
void sl_log_set_journal(sl_logger *lg, bool journal);
/* "logfmt", "json" -> format, or -EINVAL. */
int sl_log_format_from_name(const char *name);
/* True when fd is the journal stream systemd connected (JOURNAL_STREAM=<dev>:<ino> names it). */
bool sl_log_journal_fd(int fd);
/* Hold lines until sl_log_release writes them (after whatever the caller writes first, with
 * sl_log_write_now). Release also frees what hold took; sl_log_init's logger holds nothing. */
void sl_log_hold(sl_logger *lg);
void sl_log_release(sl_logger *lg);
/* A line written at once even while holding (the start-up line that goes first). */
void sl_log_write_now(sl_logger *lg, sl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

/* Per-request lines a second through sl_log_req (0 = SL_LOG_REQ_PER_SECOND). Not while logging. */
void sl_log_set_request_rate(sl_logger *lg, uint32_t per_second);

/* May a per-request line at `level` be written now under budget b? True: write it (after the
 * "N similar lines suppressed" line this call wrote, if lines were refused since the last one).
 * False: not enabled, or over the budget (counted). b NULL = the logger's own budget. */
bool sl_log_budget_take(sl_logger *lg, sl_log_budget *b, sl_log_level level);

/* A per-request line under the logger's own budget: sl_log_budget_take() then sl_log_write(). */
void sl_log_req(sl_logger *lg, sl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A client-chosen field (n bytes of s; s NULL = "") made safe for a line: at most
 * SL_LOG_FIELD_MAX bytes of it, every byte outside printable ASCII and each of space, '"', '\',
 * '=' written as \xNN, and "..." when cut. Returns dst. */
const char *sl_log_field(char dst[SL_LOG_FIELD_BUF], const char *s, size_t n);

/* Format epoch milliseconds as "YYYY-MM-DDThh:mm:ss.mmmZ" into buf (at least 25 bytes). Returns
 * the length written (24). */
size_t sl_log_format_time(char *buf, size_t size, int64_t epoch_ms);

#endif
