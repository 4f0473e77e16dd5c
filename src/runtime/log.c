/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logger (see log.h): one formatted line per message, written in one locked call so lines from
 * several threads never interleave, and escaped so that text a client controls cannot break the
 * one-line-per-message property.
 */
#include "runtime/log.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/hex.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void sl_log_init(sl_logger *lg, FILE *out, sl_log_level level, const char *instance)
{
    memset(lg, 0, sizeof(*lg));
    lg->out = out;
    lg->clock = NULL;
    sl_log_set_level(lg, level);
    if (instance == NULL)
        return;
    /* The instance id is printed as a bare value: keep it one token. */
    size_t i = 0;
    for (; instance[i] != '\0' && i + 1 < sizeof(lg->instance); i++) {
        unsigned char c = (unsigned char)instance[i];
        lg->instance[i] = (c <= ' ' || c == 0x7f || c == '"' || c == '=') ? '_' : (char)c;
    }
    lg->instance[i] = '\0';
}

void sl_log_set_level(sl_logger *lg, sl_log_level level)
{
    if ((int)level < SL_LOG_ERROR)
        level = SL_LOG_ERROR;
    if (level > SL_LOG_DEBUG)
        level = SL_LOG_DEBUG;
    __atomic_store_n(&lg->level, (int)level, __ATOMIC_RELAXED);
}

sl_log_level sl_log_get_level(const sl_logger *lg)
{
    return (sl_log_level)__atomic_load_n(&lg->level, __ATOMIC_RELAXED);
}

void sl_log_set_clock(sl_logger *lg, const sl_clock *clock)
{
    lg->clock = clock;
}

sl_log_level sl_log_level_for_verbose(bool verbose)
{
    return verbose ? SL_LOG_DEBUG : SL_LOG_INFO;
}

int sl_log_level_from_name(const char *name)
{
    if (name == NULL)
        return -EINVAL;
    for (int i = 0; i <= SL_LOG_DEBUG; i++)
        if (strcasecmp(name, level_names[i]) == 0)
            return i;
    if (strcasecmp(name, "warning") == 0)
        return SL_LOG_WARN;
    return -EINVAL;
}

const char *sl_log_level_name(sl_log_level level)
{
    if ((int)level < SL_LOG_ERROR || level > SL_LOG_DEBUG)
        return "unknown";
    return level_names[level];
}

bool sl_log_enabled(const sl_logger *lg, sl_log_level level)
{
    return lg != NULL && (int)level <= __atomic_load_n(&lg->level, __ATOMIC_RELAXED);
}

size_t sl_log_format_time(char *buf, size_t size, int64_t epoch_ms)
{
    /* Floor division, so that times before the epoch still print a valid date. */
    int64_t sec = epoch_ms / 1000, ms = epoch_ms % 1000;
    if (ms < 0) {
        ms += 1000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
        memset(&tm, 0, sizeof(tm));
    int n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

/* Append the message to line[len..cap), escaping control characters. Returns the new length;
 * stops early (and reports it through *cut) when the escaped text does not fit. */
static size_t append_escaped(char *line, size_t len, size_t cap, const char *msg, bool *cut)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        char esc[4];
        size_t n;
        if (*p == '\n') {
            esc[0] = '\\', esc[1] = 'n', n = 2;
        } else if (*p == '\r') {
            esc[0] = '\\', esc[1] = 'r', n = 2;
        } else if (*p == '\t') {
            esc[0] = '\\', esc[1] = 't', n = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            esc[0] = '\\', esc[1] = 'x', n = 4;
            sl_hex_put(esc + 2, *p, false);
        } else {
            esc[0] = (char)*p, n = 1;
        }
        if (len + n > cap) {
            *cut = true;
            return len;
        }
        memcpy(line + len, esc, n);
        len += n;
    }
    return len;
}

void sl_log_vwrite(sl_logger *lg, sl_log_level level, const char *fmt, va_list ap)
{
    if (!sl_log_enabled(lg, level))
        return;
    char msg[SL_LOG_LINE_MAX];
    int mn = vsnprintf(msg, sizeof(msg), fmt, ap);
    bool cut = mn < 0 || (size_t)mn >= sizeof(msg);
    if (mn < 0)
        msg[0] = '\0';

    char line[SL_LOG_LINE_MAX];
    int64_t now = lg->clock != NULL ? sl_clock_now_ms(lg->clock) : sl_wall_ms();
    size_t len = sl_log_format_time(line, sizeof(line), now);
    int n;
    if (lg->instance[0] != '\0')
        n = snprintf(line + len, sizeof(line) - len, " level=%s instance=%s ",
                     sl_log_level_name(level), lg->instance);
    else
        n = snprintf(line + len, sizeof(line) - len, " level=%s ", sl_log_level_name(level));
    if (n > 0)
        len += (size_t)n;
    /* Keep 4 bytes for "...\n". */
    len = append_escaped(line, len, sizeof(line) - 4, msg, &cut);
    if (cut) {
        memcpy(line + len, "...", 3);
        len += 3;
    }
    line[len++] = '\n';

    FILE *out = lg->out != NULL ? lg->out : stderr;
    flockfile(out);
    fwrite_unlocked(line, 1, len, out);
    fflush_unlocked(out);
    funlockfile(out);
}

void sl_log_write(sl_logger *lg, sl_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_log_vwrite(lg, level, fmt, ap);
    va_end(ap);
}

#define SL_LOG_LEVEL_FN(fn, lvl)                                                                   \
    void fn(sl_logger *lg, const char *fmt, ...)                                                   \
    {                                                                                              \
        if (!sl_log_enabled(lg, lvl))                                                              \
            return;                                                                                \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        sl_log_vwrite(lg, lvl, fmt, ap);                                                           \
        va_end(ap);                                                                                \
    }

SL_LOG_LEVEL_FN(sl_log_error, SL_LOG_ERROR)
SL_LOG_LEVEL_FN(sl_log_warn, SL_LOG_WARN)
SL_LOG_LEVEL_FN(sl_log_info, SL_LOG_INFO)
SL_LOG_LEVEL_FN(sl_log_debug, SL_LOG_DEBUG)

/* ---------------------------------------------------------------- per-request lines */

void sl_log_set_request_rate(sl_logger *lg, uint32_t per_second)
{
    lg->requests.per_second = per_second;
}

bool sl_log_budget_take(sl_logger *lg, sl_log_budget *b, sl_log_level level)
{
    if (!sl_log_enabled(lg, level))
        return false;
    if (!b)
        b = &lg->requests;
    uint32_t rate = b->per_second ? b->per_second : SL_LOG_REQ_PER_SECOND;
    int64_t sec = lg->clock != NULL ? sl_clock_now_ms(lg->clock) / 1000
                                    : sl_mono_ns() / 1000000000;
    int64_t cur = __atomic_load_n(&b->second, __ATOMIC_RELAXED);
    if (cur != sec && __atomic_compare_exchange_n(&b->second, &cur, sec, false, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED))
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
    if (__atomic_fetch_add(&b->count, 1, __ATOMIC_RELAXED) >= rate) {
        __atomic_fetch_add(&b->suppressed, 1, __ATOMIC_RELAXED);
        return false;
    }
    uint64_t dropped = __atomic_exchange_n(&b->suppressed, 0, __ATOMIC_RELAXED);
    if (dropped)
        sl_log_write(lg, level, "... %llu similar lines suppressed", (unsigned long long)dropped);
    return true;
}

void sl_log_req(sl_logger *lg, sl_log_level level, const char *fmt, ...)
{
    if (!sl_log_budget_take(lg, NULL, level))
        return;
    va_list ap;
    va_start(ap, fmt);
    sl_log_vwrite(lg, level, fmt, ap);
    va_end(ap);
}

const char *sl_log_field(char dst[SL_LOG_FIELD_BUF], const char *s, size_t n)
{
    size_t o = 0;
    bool cut = n > SL_LOG_FIELD_MAX;
    if (cut)
        n = SL_LOG_FIELD_MAX;
    for (size_t i = 0; s && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '=') {
            dst[o++] = (char)c;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            sl_hex_put(dst + o, c, false);
            o += 2;
        }
    }
    if (cut) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
    return dst;
}
