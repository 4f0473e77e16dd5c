/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for ctlplane/etcd's answer decoders, the code sl_etcd_range and
 * sl_etcd_watch_run run on what the etcd gateway sends: the input as a /v3/kv/range answer
 * (sl_etcd_range_decode: JSON, keys and values base64) and as a /v3/watch body
 * (sl_etcd_stream_feed: JSON messages one per line). Properties: a decoded range has n entries,
 * each key and value NUL-terminated at its length; a refused one is empty. The stream gives the
 * same messages and the same result whether the body comes whole or in pieces of any size (the
 * first byte picks the piece size), its result never changes once set, and a line over the cap
 * ends it with -EMSGSIZE. A broken property traps; ASan catches overruns and leaks.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ctlplane/etcd.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
    size_t msgs, events;
    uint64_t sum;   /* a digest of what was delivered, to compare two runs */
    int stop_at;    /* end the watch from the callback at this message (0: never) */
} seen;

static void check_kv(const sl_etcd_kv *kv)
{
    CHECK(kv->key && kv->value);
    CHECK(kv->key[kv->key_len] == 0 && kv->value[kv->value_len] == 0);
}

static int on_msg(void *ud, const sl_etcd_watch_msg *m)
{
    seen *s = ud;
    s->msgs++;
    s->events += m->n_events;
    s->sum = s->sum * 31 + (uint64_t)m->revision + m->created + 2u * m->canceled;
    for (size_t i = 0; i < m->n_events; i++) {
        check_kv(&m->events[i].kv);
        CHECK(m->events[i].type == SL_ETCD_PUT || m->events[i].type == SL_ETCD_DELETE);
        s->sum = s->sum * 31 + m->events[i].kv.key_len + m->events[i].kv.value_len;
    }
    return s->stop_at && (int)s->msgs == s->stop_at ? 7 : 0;
}

static int run_stream(const char *p, size_t n, size_t piece, size_t max, int stop_at, seen *s,
                      bool *created)
{
    memset(s, 0, sizeof *s);
    s->stop_at = stop_at;
    sl_etcd_stream st;
    sl_etcd_stream_init(&st, max, on_msg, s);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        rc = sl_etcd_stream_feed(&st, p + i, k);
    }
    if (rc) {
        CHECK(st.result == rc);
        CHECK(sl_etcd_stream_feed(&st, "\n{}\n", 4) == rc); /* sticky */
        CHECK(strlen(st.err) < sizeof st.err);
    }
    *created = st.created;
    sl_etcd_stream_free(&st);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;

    sl_etcd_kvs kvs;
    int rc = sl_etcd_range_decode(text, size, &kvs);
    CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
    if (rc) {
        CHECK(kvs.n == 0 && kvs.kvs == NULL);
    } else {
        CHECK(kvs.n == 0 || kvs.kvs != NULL);
        for (size_t i = 0; i < kvs.n; i++)
            check_kv(&kvs.kvs[i]);
    }
    sl_etcd_kvs_free(&kvs);

    if (size < 1)
        return 0;
    size_t piece = (size_t)(data[0] % 17) + 1;
    int stop_at = data[0] >> 6; /* 0..3 */
    seen whole, cut;
    bool cw, cc;
    int rw = run_stream(text + 1, size - 1, size, 0, stop_at, &whole, &cw);
    int rcut = run_stream(text + 1, size - 1, piece, 0, stop_at, &cut, &cc);
    CHECK(rw == rcut && whole.msgs == cut.msgs && whole.events == cut.events &&
          whole.sum == cut.sum && cw == cc);
    CHECK(rw == 0 || rw == 7 || rw == -EPROTO || rw == -EIO || rw == -ERANGE || rw == -ENOMEM);
    if (rw == 7)
        CHECK((int)whole.msgs == stop_at);

    /* a small cap: a line longer than it ends the stream, never a bigger buffer */
    seen small;
    bool cs;
    int rs = run_stream(text + 1, size - 1, piece, 64, 0, &small, &cs);
    if (rs == -EMSGSIZE) {
        bool longline = false;
        size_t run = 0;
        for (size_t i = 1; i < size && !longline; i++) {
            run = text[i] == '\n' ? 0 : run + 1;
            longline = run + 1 > 64;
        }
        CHECK(longline);
    }
    return 0;
}
