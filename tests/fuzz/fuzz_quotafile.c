/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the quota file (--quota-file) as the daemon reads it: the same text through
 * both of its parsers, config/quotafile.c (limit: and factor:) and config/killswitchfile.c
 * (killswitch:, concurrency:, fleet:), each into a fresh, bounded tree or board; and the text as
 * an etcd key and value (the first line the key, the rest the value) applied to a quota tree
 * (sl_quota_tree_apply_put, the etcd source's path) and to a switchboard
 * (sl_killswitch_board_apply). Properties: 0 or a negative errno with a message that fits; a tree
 * never holds more entries than its cap; every entry holds a value within quota.h's bounds (rate,
 * burst, factor) and is found again by its path; a refused switchboard value leaves no entry
 * under its key. A broken property traps; ASan catches overruns and leaks.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/killswitch.h"
#include "config/killswitchfile.h"
#include "config/quota.h"
#include "config/quotafile.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define MAX_ENTRIES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct walk {
    const sl_quota_tree *t;
    size_t n;
} walk;

/* Every entry holds a value within the documented bounds and is found again by its path. */
static int visit(void *ud, const sl_quota_path *p, const sl_quota *q, uint32_t factor)
{
    walk *w = ud;
    w->n++;
    CHECK(p->key_len <= SL_QUOTA_MAX_KEY && p->sub_len <= SL_QUOTA_MAX_KEY);
    if (p->kind >= SL_QUOTA_FACTOR_DEFAULT) {
        uint32_t f;
        CHECK(factor >= 1 && factor <= SL_QUOTA_MAX_FACTOR);
        CHECK(sl_quota_tree_get_factor(w->t, p, &f) && f == factor);
    } else {
        sl_quota got;
        CHECK(q != NULL && q->rate >= 0 && q->rate <= SL_QUOTA_MAX_RATE && q->burst >= 0 &&
              q->burst <= SL_QUOTA_MAX_BURST);
        CHECK(sl_quota_tree_get_quota(w->t, p, &got) && got.rate == q->rate &&
              got.burst == q->burst);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char err[256];

    sl_quota_tree *t;
    CHECK(sl_quota_tree_new(MAX_ENTRIES, &t) == 0);
    err[0] = 0;
    int rc = sl_quotafile_parse(text, size, t, err, sizeof err);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOSPC || rc == -ENOMEM);
    if (rc)
        CHECK(err[0] && strlen(err) < sizeof err);
    walk w = {.t = t};
    sl_quota_tree_visit(t, visit, &w);
    CHECK(w.n == sl_quota_tree_count(t) && w.n <= MAX_ENTRIES);
    sl_quota_tree *copy;
    if (sl_quota_tree_clone(t, &copy) == 0) {
        CHECK(sl_quota_tree_count(copy) == sl_quota_tree_count(t));
        sl_quota_tree_free(copy);
    }

    sl_killswitch_board b;
    sl_killswitch_board_init(&b, MAX_ENTRIES, 1);
    err[0] = 0;
    rc = sl_killswitchfile_parse(text, size, &b, err, sizeof err);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOSPC || rc == -ENOMEM);
    if (rc)
        CHECK(err[0] && strlen(err) < sizeof err);
    CHECK(sl_killswitchfile_check_text(text, size, err, sizeof err) == (rc == 0 ? 0 : rc) ||
          rc == -ENOSPC);

    /* the same bytes as one etcd key (first line) and its value (the rest) */
    const char *nl = memchr(text, '\n', size);
    size_t klen = nl ? (size_t)(nl - text) : size;
    const char *val = nl ? nl + 1 : text + size;
    size_t vlen = size - klen - (nl ? 1 : 0);
    const char *why = NULL;
    rc = sl_quota_tree_apply_put(t, "/levee", text, klen, val, vlen, &why);
    CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -ENOSPC || rc == -ENOMEM);
    if (rc == -EINVAL)
        CHECK(why != NULL);
    w.n = 0;
    sl_quota_tree_visit(t, visit, &w); /* the etcd value too */
    CHECK(w.n == sl_quota_tree_count(t) && w.n <= MAX_ENTRIES);
    (void)sl_quota_tree_apply_delete(t, "/levee", text, klen);
    sl_killswitch_key key;
    why = NULL;
    rc = sl_killswitch_board_apply(&b, text, klen, val, vlen, false, &key, &why);
    CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -ENOSPC || rc == -ENOMEM);
    if (rc && rc != -ENOENT)
        CHECK(why != NULL);
    if (rc == -EINVAL && key.kind)
        CHECK(sl_killswitch_board_get(&b, key.kind, key.name, key.len) == NULL);
    (void)sl_killswitch_board_apply(&b, text, klen, NULL, 0, true, &key, &why);

    sl_killswitch_board_free(&b);
    sl_quota_tree_free(t);
    return 0;
}
