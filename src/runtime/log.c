/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logger (see log.h): one formatted line per message, written in one locked call so lines from
 * several threads never interleave, and escaped so that text a client controls cannot break the
 * one-line-per-message property.
 */
#include "runtime/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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

/* ---- the line ---- */

/* A line being built: bytes into line[0..cap); `cut` once something did not fit. */
typedef struct line_buf {
    char *p;
    size_t len, cap;
    bool cut;
} line_buf;

static void put(line_buf *b, const char *s, size_t n)
{
    if (b->cut || b->len + n > b->cap) {
        b->cut = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void puts_(line_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A value needs quotes in logfmt (go-logfmt's rule): empty, or holding a space or control byte,
 * '=' or '"'. A backslash alone does not: sl_log_field's \xNN stay as they are, unquoted. */
static bool needs_quotes(const char *s, size_t n)
{
    if (!n)
        return true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == '=' || c == '"' || c == 0x7f)
            return true;
    }
    return false;
}

/* s[0..n) as the inside of a quoted string: JSON's escapes (\" \\ \n \r \t, \u00XX for the other
 * control bytes and, in JSON, for bytes past ASCII, so that any input stays valid JSON). */
static void put_escaped(line_buf *b, const char *s, size_t n, bool json)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t k = 2;
        esc[0] = '\\';
        if (c == '"' || c == '\\')
            esc[1] = (char)c;
        else if (c == '\n')
            esc[1] = 'n';
        else if (c == '\r')
            esc[1] = 'r';
        else if (c == '\t')
            esc[1] = 't';
        else if (c < 0x20 || c == 0x7f || (json && c >= 0x80)) {
            memcpy(esc + 1, "u00", 3);
            sl_hex_put(esc + 4, c, false);
            k = 6;
        } else {
            esc[0] = (char)c;
            k = 1;
        }
        put(b, esc, k);
    }
}

static void put_quoted(line_buf *b, const char *s, size_t n, bool json)
{
    put(b, "\"", 1);
    put_escaped(b, s, n, json);
    put(b, "\"", 1);
}

/* An integer JSON may carry as a number (no leading zeros, at most 18 digits). */
static bool is_int(const char *s, size_t n)
{
    size_t i = n && s[0] == '-' ? 1 : 0;
    if (i == n || n - i > 18 || (s[i] == '0' && n - i > 1))
        return false;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static void put_field(line_buf *b, bool json, const char *k, size_t kn, const char *v, size_t vn)
{
    if (json) {
        put(b, ",", 1);
        put_quoted(b, k, kn, true);
        put(b, ":", 1);
        if (is_int(v, vn))
            put(b, v, vn);
        else
            put_quoted(b, v, vn, true);
        return;
    }
    put(b, " ", 1);
    put(b, k, kn);
    put(b, "=", 1);
    if (needs_quotes(v, vn))
        put_quoted(b, v, vn, false);
    else
        put(b, v, vn); /* nothing in it to escape */
}

/* Does a key= start at s? A key: a letter or '_', then letters, digits, '_', '-', '.'. */
static size_t key_at(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    size_t i = 1;
    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.')
        i++;
    return s[i] == '=' ? i : 0;
}

/* The message's words (msg) and key=value pairs, as fields of the line. */
static void put_message(line_buf *b, bool json, const char *m)
{
    /* msg: the words before the first key=value (a message that starts with one has msg "") */
    const char *p = m;
    const char *msg_end = m;
    while (*p) {
        if ((p == m || p[-1] == ' ') && key_at(p))
            break;
        p++;
        if (p[-1] != ' ')
            msg_end = p;
    }
    put_field(b, json, "msg", 3, m, (size_t)(msg_end - m));
    while (*p) {
        while (*p == ' ')
            p++;
        size_t kn = key_at(p);
        if (!kn) /* only spaces were left */
            break;
        const char *k = p, *v = p + kn + 1;
        const char *e;
        char unq[SL_LOG_LINE_MAX];
        size_t un = 0;
        if (*v == '"') { /* a value the caller quoted: to its closing quote, unescaped */
            e = v + 1;
            while (*e && *e != '"') {
                if (*e == '\\' && e[1])
                    e++;
                unq[un++] = *e++;
            }
            p = *e ? e + 1 : e;
            put_field(b, json, k, kn, unq, un);
            continue;
        }
        /* to the next " key=" (or the end) */
        e = v;
        while (*e) {
            if (*e == ' ') {
                const char *q = e;
                while (*q == ' ')
                    q++;
                if (!*q || key_at(q))
                    break;
            }
            e++;
        }
        const char *ve = e;
        while (ve > v && ve[-1] == ' ')
            ve--;
        put_field(b, json, k, kn, v, (size_t)(ve - v));
        p = e;
    }
}

static const int journal_priority[] = {3, 4, 6, 7}; /* syslog: err, warning, info, debug */

/* The whole line into line[0..cap), newline included; its length. */
static size_t format_line(const sl_logger *lg, sl_log_level level, const char *msg, bool cut,
                          char *line, size_t cap)
{
    line_buf b = {line, 0, cap - 5, false}; /* room kept for "...\n" or "..\"}\n" */
    bool json = lg->format == SL_LOG_JSON;
    if (lg->journal) {
        char pri[4] = {'<', (char)('0' + journal_priority[level]), '>', 0};
        puts_(&b, pri);
    }
    char ts[32];
    int64_t now = lg->clock != NULL ? sl_clock_now_ms(lg->clock) : sl_wall_ms();
    size_t tn = sl_log_format_time(ts, sizeof ts, now);
    const char *lv = sl_log_level_name(level);
    if (json) {
        puts_(&b, "{\"ts\":\"");
        put(&b, ts, tn);
        puts_(&b, "\",\"level\":\"");
        puts_(&b, lv);
        puts_(&b, "\"");
        if (lg->instance[0])
            put_field(&b, true, "instance", 8, lg->instance, strlen(lg->instance));
    } else {
        puts_(&b, "ts=");
        put(&b, ts, tn);
        puts_(&b, " level=");
        puts_(&b, lv);
        if (lg->instance[0])
            put_field(&b, false, "instance", 8, lg->instance, strlen(lg->instance));
    }
    size_t keep = b.len;
    put_message(&b, json, msg);
    if (b.cut || cut) {
        /* cut at the last whole field; say so */
        if (b.cut)
            b.len = keep;
        b.cut = false;
        b.cap = cap - 1;
        if (b.len == keep)
            put_field(&b, json, "msg", 3, "...", 3);
        else
            put_field(&b, json, "cut", 3, "...", 3);
    }
    b.cap = cap - 1;
    b.cut = false;
    if (json)
        put(&b, "}", 1);
    line[b.len++] = '\n';
    return b.len;
}

/* Hand a line to the stream, or to the held lines. Under the stream's lock. */
static void emit(sl_logger *lg, const char *line, size_t len, bool now)
{
    FILE *out = lg->out != NULL ? lg->out : stderr;
    flockfile(out);
    if (lg->holding && !now) {
        if (lg->held_len + len <= SL_LOG_HOLD_MAX) {
            if (!lg->held)
                lg->held = malloc(SL_LOG_HOLD_MAX);
            if (lg->held) {
                memcpy(lg->held + lg->held_len, line, len);
                lg->held_len += len;
                funlockfile(out);
                return;
            }
        }
        /* too much (or no memory) to hold: what is held goes out now, and the rest as it comes */
        lg->holding = false;
        if (lg->held_len)
            fwrite_unlocked(lg->held, 1, lg->held_len, out);
        lg->held_len = 0;
    }
    fwrite_unlocked(line, 1, len, out);
    fflush_unlocked(out);
    funlockfile(out);
}

static void vwrite(sl_logger *lg, sl_log_level level, bool now, const char *fmt, va_list ap)
{
    if (!sl_log_enabled(lg, level))
        return;
    char msg[SL_LOG_LINE_MAX];
    int mn = vsnprintf(msg, sizeof(msg), fmt, ap);
    bool cut = mn < 0 || (size_t)mn >= sizeof(msg);
    if (mn < 0)
        msg[0] = '\0';
    char line[SL_LOG_LINE_MAX];
    size_t len = format_line(lg, level, msg, cut, line, sizeof line);
    emit(lg, line, len, now);
}

void sl_log_vwrite(sl_logger *lg, sl_log_level level, const char *fmt, va_list ap)
{
    vwrite(lg, level, false, fmt, ap);
}

void sl_log_write_now(sl_logger *lg, sl_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(lg, level, true, fmt, ap);
    va_end(ap);
}

void sl_log_hold(sl_logger *lg)
{
    FILE *out = lg->out != NULL ? lg->out : stderr;
    flockfile(out);
    lg->holding = true;
    funlockfile(out);
}

void sl_log_release(sl_logger *lg)
{
    if (!lg)
        return;
    FILE *out = lg->out != NULL ? lg->out : stderr;
    flockfile(out);
    if (lg->held_len) {
        fwrite_unlocked(lg->held, 1, lg->held_len, out);
        fflush_unlocked(out);
    }
    free(lg->held);
    lg->held = NULL;
    lg->held_len = 0;
    lg->holding = false;
    funlockfile(out);
}

void sl_log_set_format(sl_logger *lg, sl_log_format format)
{
    lg->format = format == SL_LOG_JSON ? SL_LOG_JSON : SL_LOG_LOGFMT;
}

void sl_log_set_journal(sl_logger *lg, bool journal)
{
    lg->journal = journal;
}

int sl_log_format_from_name(const char *name)
{
    if (name && !strcmp(name, "logfmt"))
        return SL_LOG_LOGFMT;
    if (name && !strcmp(name, "json"))
        return SL_LOG_JSON;
    return -EINVAL;
}

bool sl_log_journal_fd(int fd)
{
    const char *js = getenv("JOURNAL_STREAM");
    if (!js || !*js)
        return false;
    unsigned long long dev, ino;
    char tail;
    if (sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
        return false;
    struct stat st;
    return fstat(fd, &st) == 0 && (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
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
