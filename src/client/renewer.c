/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's lease renewer (include/sluice/client.h, "lease renewer"): keeps held leases alive
 * for work that outlasts their duration. client/renewsched.c decides when each lease is due; this
 * file holds what a renewal sends (the lease id and, per dialect, the resource or the item), runs
 * one scheduling thread that sleeps until the next due time, and starts each due renewal as an
 * async call of the client (so renewals run on the client's I/O thread and never block each
 * other). Their callbacks report back into the schedule under the renewer's mutex.
 *
 * Bounded: at most max_leases leases, each with its strings in one allocation (a name, a key, a
 * resource and a lease id, each bounded by the limits the calls check); at most one renewal per
 * lease in flight.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/renewsched.h"
#include "sluice/client.h"
#include "sluice/clock.h"

#define DEFAULT_MAX_LEASES 1024
#define BATCH 64 /* renewals started per wake-up at most (the rest on the next pass) */
#define MAX_LEASE_ID 256
#define MAX_RESOURCE 4096

typedef struct lease {
    bool gub;           /* a Gubernator item, else a Levee lease */
    char *lease_id;     /* all strings live in one block, freed with lease_id */
    char *resource;     /* Levee: X-Resource, or NULL */
    sl_client_request item; /* Gubernator: name and key point into the block */
} lease;

typedef struct renewal {
    sl_client_renewer *r;
    uint64_t h;
} renewal;

struct sl_client_renewer {
    sl_client *c;
    sl_client_renewer_options opt;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* the scheduler's wake-up (CLOCK_MONOTONIC) */
    pthread_cond_t idle_cv; /* inflight reached 0 */
    pthread_t th;
    bool stopping;
    size_t inflight;        /* renewals out (their callbacks still to come) */
    sl_renewsched sched;
    lease *leases;          /* by slot, parallel to sched.slots */
};

static int64_t now_ms(void)
{
    return sl_mono_ns() / 1000000;
}

void sl_client_renewer_options_default(sl_client_renewer_options *o)
{
    o->max_leases = DEFAULT_MAX_LEASES;
    o->timeout_ms = 0;
}

static size_t slot_index(uint64_t h)
{
    return (size_t)(h & 0xffffffffu) - 1;
}

static void lease_clear(lease *l)
{
    free(l->lease_id);
    memset(l, 0, sizeof *l);
}

/* ---------------------------------------------------------------- completions */

static void finish(sl_client_renewer *r, uint64_t h, int outcome)
{
    pthread_mutex_lock(&r->mu);
    /* a lease stopped while its renewal was out: its strings were taken out with it, and
     * done() frees its slot now */
    sl_renewsched_done(&r->sched, h, now_ms(), outcome);
    r->inflight--;
    pthread_cond_signal(&r->cv); /* the lease may be due again sooner than the thread thought */
    if (r->inflight == 0)
        pthread_cond_broadcast(&r->idle_cv);
    pthread_mutex_unlock(&r->mu);
}

static void levee_done(void *ud, int rc, const sl_attempt_reply *reply)
{
    (void)reply;
    renewal *w = ud;
    finish(w->r, w->h, rc == 0 || rc == -ENOENT ? rc : -EIO);
    free(w);
}

/* A renewal item's answer: renewed, lost (any item error: "lease not found", or an item the
 * server will never accept), or no answer (the call failed, or was shed: retry). */
static void item_done(void *ud, int rc, sl_client_check_reply *reply)
{
    renewal *w = ud;
    int outcome = -EIO;
    if (rc == 0 && reply && !reply->err && !reply->shed && reply->count == 1)
        outcome = reply->items[0].resp.error ? -ENOENT : 0;
    finish(w->r, w->h, outcome);
    free(w);
}

/* ---------------------------------------------------------------- the scheduling thread */

typedef struct pending {
    uint64_t h;
    bool gub;
    sl_client_item item;
    sl_client_kv md;
    sl_attempt a;
    char *lease_id;
} pending;

static void start_renewal(sl_client_renewer *r, pending *p)
{
    renewal *w = malloc(sizeof *w);
    int rc = -ENOMEM;
    if (w) {
        w->r = r;
        w->h = p->h;
        rc = p->gub ? sl_client_check_async(r->c, &p->item, 1, r->opt.timeout_ms, item_done, w)
                    : sl_client_renew_async(r->c, &p->a, p->lease_id, r->opt.timeout_ms,
                                            levee_done, w);
    }
    if (rc < 0) { /* the callback will not come */
        free(w);
        finish(r, p->h, rc);
    }
}

static void wait_until(sl_client_renewer *r, int64_t due)
{
    if (due == INT64_MAX) {
        pthread_cond_wait(&r->cv, &r->mu);
        return;
    }
    int64_t ms = due - now_ms();
    if (ms <= 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

static void *renewer_main(void *arg)
{
    sl_client_renewer *r = arg;
    uint64_t hs[BATCH];
    pending ps[BATCH];
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        size_t n = sl_renewsched_take_due(&r->sched, now_ms(), hs, BATCH);
        if (n == 0) {
            wait_until(r, sl_renewsched_next_due(&r->sched));
            continue;
        }
        /* what each renewal sends, copied out of the table: the calls copy it again, and a lease
         * stopped meanwhile must not free strings under them */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const lease *l = &r->leases[slot_index(hs[i])];
            pending *p = &ps[m];
            memset(p, 0, sizeof *p);
            p->h = hs[i];
            p->gub = l->gub;
            p->lease_id = strdup(l->lease_id);
            const char *res = l->resource;
            if (l->gub) {
                p->item.req = l->item;
                p->item.req.name = l->item.name ? strndup(l->item.name, l->item.name_len) : NULL;
                p->item.req.unique_key =
                    l->item.unique_key ? strndup(l->item.unique_key, l->item.unique_key_len) : NULL;
            } else if (res) {
                p->a.resource = strdup(res);
            }
            r->inflight++;
            m++;
        }
        pthread_mutex_unlock(&r->mu);
        for (size_t i = 0; i < m; i++) {
            pending *p = &ps[i];
            p->md = (sl_client_kv){"lease_id", p->lease_id};
            p->item.metadata = &p->md;
            p->item.metadata_count = 1;
            bool ok = p->lease_id &&
                      (p->gub ? (!p->item.req.name_len || p->item.req.name) &&
                                    (!p->item.req.unique_key_len || p->item.req.unique_key)
                              : true);
            if (ok)
                start_renewal(r, p);
            else
                finish(r, p->h, -ENOMEM);
            free(p->lease_id);
            free((char *)p->item.req.name);
            free((char *)p->item.req.unique_key);
            free((char *)p->a.resource);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

int sl_client_renewer_new(sl_client *c, const sl_client_renewer_options *o,
                          sl_client_renewer **out)
{
    sl_client_renewer_options def;
    if (!o) {
        sl_client_renewer_options_default(&def);
        o = &def;
    }
    if (!c || !out || o->max_leases == 0 || o->max_leases > 65536)
        return -EINVAL;
    sl_client_renewer *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->c = c;
    r->opt = *o;
    int rc = sl_renewsched_init(&r->sched, o->max_leases);
    if (rc) {
        free(r);
        return rc;
    }
    r->leases = calloc(o->max_leases, sizeof *r->leases);
    if (!r->leases) {
        sl_renewsched_free(&r->sched);
        free(r);
        return -ENOMEM;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, &ca);
    pthread_cond_init(&r->idle_cv, NULL);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&r->th, NULL, renewer_main, r) != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_cond_destroy(&r->idle_cv);
        pthread_mutex_destroy(&r->mu);
        free(r->leases);
        sl_renewsched_free(&r->sched);
        free(r);
        return -EAGAIN;
    }
    *out = r;
    return 0;
}

void sl_client_renewer_free(sl_client_renewer *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    pthread_mutex_lock(&r->mu);
    while (r->inflight)
        pthread_cond_wait(&r->idle_cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < r->sched.cap; i++)
        lease_clear(&r->leases[i]);
    free(r->leases);
    sl_renewsched_free(&r->sched);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->idle_cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ---------------------------------------------------------------- leases */

static int add(sl_client_renewer *r, const lease *tmpl, int64_t duration_ms, uint64_t *handle)
{
    pthread_mutex_lock(&r->mu);
    uint64_t h;
    int rc = sl_renewsched_add(&r->sched, now_ms(), duration_ms, &h);
    if (rc == 0) {
        r->leases[slot_index(h)] = *tmpl;
        *handle = h;
        pthread_cond_signal(&r->cv); /* it may be due before what the thread waits for */
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static bool id_ok(const char *id)
{
    return id && id[0] && strnlen(id, MAX_LEASE_ID + 1) <= MAX_LEASE_ID;
}

int sl_client_renewer_add_levee(sl_client_renewer *r, const sl_attempt *a, const char *lease_id,
                                int64_t duration_ms, uint64_t *handle)
{
    const char *res = a ? a->resource : NULL;
    if (!r || !handle || !id_ok(lease_id) || duration_ms < 2 ||
        (res && strnlen(res, MAX_RESOURCE + 1) > MAX_RESOURCE))
        return -EINVAL;
    size_t il = strlen(lease_id) + 1, rl = res ? strlen(res) + 1 : 0;
    lease l = {0};
    l.lease_id = malloc(il + rl);
    if (!l.lease_id)
        return -ENOMEM;
    memcpy(l.lease_id, lease_id, il);
    if (res) {
        l.resource = l.lease_id + il;
        memcpy(l.resource, res, rl);
    }
    int rc = add(r, &l, duration_ms, handle);
    if (rc)
        lease_clear(&l);
    return rc;
}

int sl_client_renewer_add_item(sl_client_renewer *r, const sl_client_item *item,
                               const char *lease_id, uint64_t *handle)
{
    if (!r || !item || !handle || !id_ok(lease_id) || item->req.duration < 2 ||
        item->req.name_len > SL_MAX_NAME_LEN || item->req.unique_key_len > SL_MAX_KEY_LEN ||
        (item->req.name_len && !item->req.name) ||
        (item->req.unique_key_len && !item->req.unique_key))
        return -EINVAL;
    size_t il = strlen(lease_id) + 1, nl = item->req.name_len, kl = item->req.unique_key_len;
    lease l = {.gub = true};
    l.lease_id = malloc(il + nl + 1 + kl + 1);
    if (!l.lease_id)
        return -ENOMEM;
    memcpy(l.lease_id, lease_id, il);
    char *name = l.lease_id + il, *key = name + nl + 1;
    if (nl)
        memcpy(name, item->req.name, nl);
    name[nl] = 0;
    if (kl)
        memcpy(key, item->req.unique_key, kl);
    key[kl] = 0;
    l.item = item->req;
    l.item.name = name;
    l.item.unique_key = key;
    l.item.hits = 0;
    l.item.algorithm = SL_CONCURRENCY;
    int rc = add(r, &l, item->req.duration, handle);
    if (rc)
        lease_clear(&l);
    return rc;
}

/* Take the lease out of the table (a renewal out keeps its own copies). *l: what it was. 0 held,
 * 1 lost, or -EINVAL / -ENOENT (then *l is empty). */
static int take_out(sl_client_renewer *r, uint64_t handle, lease *l)
{
    memset(l, 0, sizeof *l);
    if (!r)
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    const sl_renew_slot *s = sl_renewsched_get(&r->sched, handle);
    bool lost = s && s->state == SL_RENEW_LOST;
    int rc = sl_renewsched_remove(&r->sched, handle);
    if (rc == 0) {
        *l = r->leases[slot_index(handle)];
        memset(&r->leases[slot_index(handle)], 0, sizeof *l);
    }
    pthread_mutex_unlock(&r->mu);
    return rc ? rc : lost ? 1 : 0;
}

int sl_client_renewer_stop(sl_client_renewer *r, uint64_t handle)
{
    lease l;
    int rc = take_out(r, handle, &l);
    lease_clear(&l);
    return rc < 0 ? rc : 0;
}

int sl_client_renewer_release(sl_client_renewer *r, uint64_t handle, int timeout_ms)
{
    lease l;
    int rc = take_out(r, handle, &l);
    if (rc != 0) { /* unknown, or lost: nothing to give back */
        lease_clear(&l);
        return rc < 0 ? rc : -ENOENT;
    }
    if (l.gub) {
        sl_client_kv md = {"lease_id", l.lease_id};
        sl_client_item it = {.req = l.item, .metadata = &md, .metadata_count = 1};
        it.req.hits = -1;
        sl_client_check_reply rep;
        rc = sl_client_check(r->c, &it, 1, timeout_ms, &rep);
        if (rc == 0 && rep.err)
            rc = rep.err;
        else if (rc == 0 && rep.count == 1 && rep.items[0].resp.error)
            rc = -ENOENT;
        sl_client_check_reply_free(&rep);
    } else {
        sl_attempt a = {.resource = l.resource};
        rc = sl_client_release(r->c, &a, l.lease_id, timeout_ms, NULL);
    }
    lease_clear(&l);
    return rc;
}

int sl_client_renewer_status(sl_client_renewer *r, uint64_t handle, sl_client_lease_status *out)
{
    if (!r || !out)
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    const sl_renew_slot *s = sl_renewsched_get(&r->sched, handle);
    if (s) {
        out->lost = s->state == SL_RENEW_LOST;
        out->renewals = s->renewals;
        out->failures = s->failures;
    }
    pthread_mutex_unlock(&r->mu);
    return s ? 0 : -ENOENT;
}

size_t sl_client_renewer_count(sl_client_renewer *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = 0;
    for (size_t i = 0; i < r->sched.cap; i++)
        n += r->sched.slots[i].state != SL_RENEW_FREE && !r->sched.slots[i].removed;
    pthread_mutex_unlock(&r->mu);
    return n;
}
