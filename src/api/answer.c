/* SPDX-License-Identifier: Apache-2.0 */
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
    sl_strbuf_init_fixed(&a->text, a->buf, sizeof a->buf);
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
    return sl_strbuf_len(&a->text);
}

void sl_answer_lit(sl_answer *a, const char *s, size_t n)
{
    sl_strbuf_append(&a->text, s, n);
}

void sl_answer_int(sl_answer *a, int64_t v)
{
    char tmp[24];
    size_t n = sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--n] = '-';
    sl_strbuf_append(&a->text, tmp + n, sizeof tmp - n);
}

void sl_answer_sf_string(sl_answer *a, const char *s, size_t len, size_t max)
{
    char tmp[SL_ANSWER_SF_MAX + 3];
    if (max > SL_ANSWER_SF_MAX)
        max = SL_ANSWER_SF_MAX;
    size_t n = 0;
    tmp[n++] = '"';
    for (size_t i = 0; i < len && n + 2 <= max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            tmp[n++] = '\\';
            tmp[n++] = (char)c;
        } else {
            tmp[n++] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
        }
    }
    tmp[n++] = '"';
    sl_strbuf_append(&a->text, tmp, n);
}

void sl_answer_vprintf(sl_answer *a, const char *fmt, va_list ap)
{
    sl_strbuf_vprintf(&a->text, fmt, ap);
}

void sl_answer_printf(sl_answer *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_strbuf_vprintf(&a->text, fmt, ap);
    va_end(ap);
}

const char *sl_answer_take(sl_answer *a, size_t mark, size_t *len)
{
    if (sl_strbuf_error(&a->text)) {
        *len = 0;
        return NULL;
    }
    *len = sl_strbuf_len(&a->text) - mark;
    return sl_strbuf_str(&a->text) + mark;
}

void sl_answer_header_from(sl_answer *a, const char *name, size_t name_len, size_t mark)
{
    size_t len;
    const char *v = sl_answer_take(a, mark, &len);
    if (v)
        sl_answer_header_ref(a, name, name_len, v, len);
}
