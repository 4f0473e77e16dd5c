/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP answer of Levee's POST /attempt and POST /release: one type, filled by the rate
 * quotas (api/levee.c) and by the protections around them (api/attempt.c), and rendered once by
 * node/service.c. It holds its header values and its body in its own buffer, so a worker keeps
 * one and reuses it for every call: nothing is allocated per request.
 *
 * The header builder (an sl_strbuf over the answer's own buffer) appends pieces (literals,
 * integers, Structured Fields strings, printf) and turns what was appended since a mark into a
 * header value. Once something does not fit, every later value is left out (the headers are
 * informative); the buffer is sized so that the largest answer fits.
 */
#ifndef SLUICE_API_ANSWER_H
#define SLUICE_API_ANSWER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "protect/ladder.h"

typedef enum sl_answer_outcome {
    SL_ANSWER_ACCEPTED = 0,  /* 200 */
    SL_ANSWER_REJECTED = 1,  /* 429: rate or concurrency */
    SL_ANSWER_FAILED = 2,    /* 500 */
    SL_ANSWER_MALFORMED = 3, /* 400 */
    SL_ANSWER_SHED = 4,      /* 503: fleet or worker shedder */
    SL_ANSWER_NOT_FOUND = 5, /* 404: release of an unknown lease */
    SL_ANSWER_OUTCOME_COUNT
} sl_answer_outcome;

/* "accepted", "rejected", "failed", "malformed", "shed", "not_found". */
const char *sl_answer_outcome_name(sl_answer_outcome o);

/* Same layout as sl_http_header (net/exchange.h; checked where it is rendered). */
typedef struct sl_answer_header {
    const char *name;
    size_t name_len;
    const char *value; /* into the answer's buffer, the request (X-Req-Id), or static */
    size_t value_len;
} sl_answer_header;

/* Headers an answer carries at most, and one slot the renderer keeps for Content-Type. */
#define SL_ANSWER_MAX_HEADERS 12
#define SL_ANSWER_CT_TEXT "text/plain; charset=utf-8"

typedef struct sl_answer {
    int status;
    sl_answer_outcome outcome;
    int grpc_code;              /* the gRPC code the status maps to, for call counters */
    sl_ladder_limiter limiter;  /* what rejected or shed; SL_LADDER_NONE */
    const char *body;           /* a one-line reason ending in '\n', or NULL */
    size_t body_len;
    const char *content_type;   /* with a body */
    size_t n_headers;
    sl_answer_header headers[SL_ANSWER_MAX_HEADERS + 1];
    int64_t retry_after_ms;     /* with 429 and 503 */
    /* the rate quotas' decision, for logs */
    const char *quota;          /* name of the quota that decided (rejected, or the main one) */
    size_t quota_len;
    int level;                  /* lookup level of the main quota (1..4), 0 without one */
    size_t n_quotas;            /* quotas that applied */
    const char *error;          /* with 500 from the engine: its static message */
    /* the builder: header values and the body, in buf */
    sl_strbuf text;
    char buf[2560];
} sl_answer;

/* Empty the answer: 200 accepted, no header, no body. */
void sl_answer_reset(sl_answer *a);
/* Status, gRPC code and limiter for an outcome. */
void sl_answer_set(sl_answer *a, sl_answer_outcome o, sl_ladder_limiter limiter);
/* A body (static, or in the answer's buffer) with text/plain. */
void sl_answer_body(sl_answer *a, const char *body, size_t len);

/* A header whose value lives elsewhere (not copied). Left out when the list is full. */
void sl_answer_header_ref(sl_answer *a, const char *name, size_t name_len, const char *value,
                          size_t value_len);
#define SL_ANSWER_HEADER_REF(a, lit, v, n) sl_answer_header_ref((a), (lit), sizeof(lit) - 1, (v), (n))

/* Building a value: mark, append, then either make it a header or take it as a string. */
size_t sl_answer_mark(sl_answer *a);
void sl_answer_lit(sl_answer *a, const char *s, size_t n);
void sl_answer_int(sl_answer *a, int64_t v);
/* An sf-string: '"' ... '"', printable ASCII with '"' and '\' escaped, other bytes as '?', at
 * most `max` (up to SL_ANSWER_SF_MAX) output bytes in all. */
#define SL_ANSWER_SF_MAX 256
void sl_answer_sf_string(sl_answer *a, const char *s, size_t len, size_t max);
void sl_answer_printf(sl_answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_answer_vprintf(sl_answer *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* What was appended since `mark` as a header (left out once anything did not fit). */
void sl_answer_header_from(sl_answer *a, const char *name, size_t name_len, size_t mark);
#define SL_ANSWER_HEADER_FROM(a, lit, mark) sl_answer_header_from((a), (lit), sizeof(lit) - 1, (mark))
/* What was appended since `mark`; NULL once anything did not fit. */
const char *sl_answer_take(sl_answer *a, size_t mark, size_t *len);

#endif
