/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Held /attempt answers (X-Delay-Mode: hold): see held.h. A held answer owns a copy of its headers
 * (the worker's one sl_answer is reused by the next request) in one allocation with its timer.
 */
#include "node/held.h"

#include <stdlib.h>
#include <string.h>

struct sl_held {
    uv_timer_t timer;
    sl_held_list *list;
    sl_exchange *ex;
    int64_t t0;
    sl_held *next, **pprev;
    int status, outcome, grpc_code;
    size_t nh;
    sl_http_header h[SL_ANSWER_MAX_HEADERS + 2];
    char data[]; /* header names and values */
};

static void held_closed(uv_handle_t *h)
{
    free(h->data);
}

static void held_send(sl_held *hd)
{
    sl_held_list *l = hd->list;
    *hd->pprev = hd->next;
    if (hd->next)
        hd->next->pprev = hd->pprev;
    l->n--;
    sl_http_response r = {.status = hd->status, .headers = hd->h, .nheaders = hd->nh};
    sl_exchange_respond(hd->ex, &r);
    if (l->sent)
        l->sent(l->sent_ud, hd->outcome, hd->grpc_code, hd->t0);
    uv_timer_stop(&hd->timer);
    hd->timer.data = hd;
    uv_close((uv_handle_t *)&hd->timer, held_closed);
}

static void held_due(uv_timer_t *t)
{
    held_send(t->data);
}

bool sl_held_add(sl_held_list *l, sl_exchange *ex, const sl_answer *r, int64_t delay_ms, int64_t t0)
{
    uv_loop_t *loop = sl_exchange_loop(ex);
    if (!loop || l->n >= l->max || r->body || delay_ms <= 0)
        return false;
    size_t bytes = 0;
    for (size_t i = 0; i < r->n_headers; i++)
        bytes += r->headers[i].name_len + r->headers[i].value_len;
    sl_held *hd = malloc(sizeof *hd + bytes + 1);
    if (!hd)
        return false;
    char *w = hd->data;
    hd->nh = r->n_headers;
    for (size_t i = 0; i < r->n_headers; i++) {
        const sl_answer_header *a = &r->headers[i];
        memcpy(w, a->name, a->name_len);
        hd->h[i].name = w;
        hd->h[i].name_len = a->name_len;
        w += a->name_len;
        memcpy(w, a->value, a->value_len);
        hd->h[i].value = w;
        hd->h[i].value_len = a->value_len;
        w += a->value_len;
    }
    hd->list = l;
    hd->ex = ex;
    hd->t0 = t0;
    hd->status = r->status;
    hd->outcome = r->outcome;
    hd->grpc_code = r->grpc_code;
    uv_timer_init(loop, &hd->timer);
    hd->timer.data = hd;
    hd->next = l->head;
    hd->pprev = &l->head;
    if (l->head)
        l->head->pprev = &hd->next;
    l->head = hd;
    l->n++;
    uv_timer_start(&hd->timer, held_due, (uint64_t)delay_ms, 0);
    return true;
}

void sl_held_flush(sl_held_list *l)
{
    while (l->head)
        held_send(l->head); /* answered now: the caller waits X-Delay-Ms itself */
}

int64_t sl_held_delay_ms(const sl_answer *r)
{
    if (r->status != 200)
        return 0;
    for (size_t i = 0; i < r->n_headers; i++) {
        const sl_answer_header *h = &r->headers[i];
        if (h->name_len == 10 && !memcmp(h->name, "X-Delay-Ms", 10)) {
            int64_t v = 0;
            for (size_t j = 0; j < h->value_len && v < INT64_MAX / 10 - 10; j++)
                v = v * 10 + (h->value[j] - '0');
            return v;
        }
    }
    return 0;
}
