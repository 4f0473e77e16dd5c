/*
 * The /attempt answer and its header builder (see answer.h). Values are appended by hand rather
 * than with printf where the answer is built on every rejection: printf would be half its cost.
 */
#include "api/answer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wire/grpc_frame.h"

static const struct {
    const char *name;
    int status;
    int grpc;
} outcomes[SL_ANSWER_OUTCOME_COUNT] = {
    [SL_ANSWER_ACCEPTED] = {"accepted", 200, SL_GRPC_OK},
    [SL_ANSWER_REJECTED] = {"rejected", 429, SL_GRPC_RESOURCE_EXHAUSTED},
    [SL_ANSWER_FAILED] = {"failed", 500, SL_GRPC_INTERNAL},
    [SL_ANSWER_MALFORMED] = {"malformed", 400, SL_GRPC_INVALID_ARGUMENT},
    [SL_ANSWER_SHED] = {"shed", 503, SL_GRPC_UNAVAILABLE},
    [SL_ANSWER_NOT_FOUND] = {"not_found", 404, SL_GRPC_NOT_FOUND},
};

const char *sl_answer_outcome_name(sl_answer_outcome o)
{
    return (unsigned)o < SL_ANSWER_OUTCOME_COUNT ? outcomes[o].name : "unknown";
}

void sl_answer_reset(sl_answer *a)
{
    a->body = NULL;
    a->body_len = 0;
    a->content_type = NULL;
    a->n_headers = 0;
    a->retry_after_ms = 0;
    a->quota = NULL;
    a->quota_len = 0;
    a->level = 0;
    a->n_quotas = 0;
    a->error = NULL;
    a->used = 0;
    a->overflow = false;
    sl_answer_set(a, SL_ANSWER_ACCEPTED, SL_LADDER_NONE);
}

void sl_answer_set(sl_answer *a, sl_answer_outcome o, sl_ladder_limiter limiter)
{
    a->outcome = o;
    a->status = outcomes[o].status;
    a->grpc_code = outcomes[o].grpc;
    a->limiter = limiter;
}

void sl_answer_body(sl_answer *a, const char *body, size_t len)
{
    a->body = body;
    a->body_len = len;
    a->content_type = body ? SL_ANSWER_CT_TEXT : NULL;
}

void sl_answer_header_ref(sl_answer *a, const char *name, size_t name_len, const char *value,
                          size_t value_len)
{
    if (!value || a->n_headers >= SL_ANSWER_MAX_HEADERS)
        return;
    a->headers[a->n_headers++] = (sl_answer_header){name, name_len, value, value_len};
}

size_t sl_answer_mark(sl_answer *a)
{
    a->overflow = false;
    return a->used;
}

static char *room(sl_answer *a, size_t n)
{
    if (a->overflow || sizeof a->buf - a->used < n) {
        a->overflow = true;
        return NULL;
    }
    return a->buf + a->used;
}

void sl_answer_lit(sl_answer *a, const char *s, size_t n)
{
    char *o = room(a, n);
    if (!o)
        return;
    memcpy(o, s, n);
    a->used += n;
}

void sl_answer_int(sl_answer *a, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    char *o = room(a, n);
    if (!o)
        return;
    for (size_t i = 0; i < n; i++)
        o[i] = tmp[n - 1 - i];
    a->used += n;
}

void sl_answer_sf_string(sl_answer *a, const char *s, size_t len, size_t max)
{
    char *o = room(a, max + 3);
    if (!o)
        return;
    size_t n = 0;
    o[n++] = '"';
    for (size_t i = 0; i < len && n + 2 <= max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            o[n++] = '\\';
            o[n++] = (char)c;
        } else {
            o[n++] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
        }
    }
    o[n++] = '"';
    a->used += n;
}

void sl_answer_printf(sl_answer *a, const char *fmt, ...)
{
    if (a->overflow || a->used >= sizeof a->buf) {
        a->overflow = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a->buf + a->used, sizeof a->buf - a->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof a->buf - a->used) {
        a->overflow = true;
        return;
    }
    a->used += (size_t)n;
}

const char *sl_answer_take(sl_answer *a, size_t mark, size_t *len)
{
    if (a->overflow) {
        a->used = mark;
        a->overflow = false;
        *len = 0;
        return NULL;
    }
    *len = a->used - mark;
    return a->buf + mark;
}

void sl_answer_header_from(sl_answer *a, const char *name, size_t name_len, size_t mark)
{
    size_t len;
    const char *v = sl_answer_take(a, mark, &len);
    if (v)
        sl_answer_header_ref(a, name, name_len, v, len);
}
