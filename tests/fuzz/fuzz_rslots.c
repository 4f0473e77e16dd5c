/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for redis/rslots (Redis Cluster routing): the input is read as RESP by
 * hiredis's reader, as the store receives a CLUSTER SLOTS reply, and every reply is given to
 * sl_rslots_from_reply; an accepted table names at most SL_RSLOTS_NODES_MAX nodes, each with a
 * host and a port in range, and every slot it serves points at one of them; a refused one is
 * empty. The same bytes are read as an error answer (MOVED / ASK): a redirection parsed has a slot
 * below 16384 and a port in range, and applying it leaves the slot served by the node named. A
 * broken property traps; ASan catches reads past the input.
 *
 * The reader is the store's own (redis/rconn.h sl_rconn_reader, bounded by the smallest
 * --redis-max-reply, 1 MiB: an array header counts 64 bytes an element against it), so
 * "*300000000" stops the reader instead of making it allocate 2.4 GB for the table.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/rconn.h"
#include "redis/rslots.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sl_rslots table;

static void check_table(const sl_rslots *t)
{
    CHECK(t->n_nodes <= SL_RSLOTS_NODES_MAX);
    for (size_t i = 0; i < t->n_nodes; i++) {
        size_t hl = strnlen(t->node[i].host, SL_RSLOTS_HOST_MAX);
        CHECK(hl > 0 && hl < SL_RSLOTS_HOST_MAX);
        CHECK(t->node[i].port >= 1 && t->node[i].port <= 65535);
    }
    for (unsigned s = 0; s < SL_RSLOTS_SLOTS; s++)
        CHECK(t->owner[s] == SL_RSLOTS_NONE || t->owner[s] < t->n_nodes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_rslots_init(&table, 1000);
    sl_rconn_reader *rd;
    if (sl_rconn_reader_new((size_t)1 << 20, &rd) == 0) {
        if (sl_rconn_reader_feed(rd, data, size) == 0) {
            for (int n = 0; n < 4; n++) {
                void *reply;
                const char *why;
                if (sl_rconn_reader_next(rd, &reply, &why) != 1)
                    break;
                int rc = sl_rslots_from_reply(&table, reply, n & 1 ? NULL : "10.0.0.1");
                check_table(&table);
                if (rc)
                    CHECK(table.n_nodes == 0);
                freeReplyObject(reply);
            }
        }
        sl_rconn_reader_free(rd);
    }

    sl_rslots_redirect r;
    sl_rslots_kind k = sl_rslots_redirect_parse((const char *)data, size, &r);
    CHECK(k == r.kind);
    if (k != SL_RSLOTS_OTHER) {
        CHECK(r.slot < SL_RSLOTS_SLOTS && r.port >= 1 && r.port <= 65535);
        CHECK(strnlen(r.host, SL_RSLOTS_HOST_MAX) < SL_RSLOTS_HOST_MAX);
        bool refresh;
        int idx = sl_rslots_redirect_apply(&table, &r, "10.0.0.2", 5000, &refresh);
        if (idx >= 0) {
            CHECK((size_t)idx < table.n_nodes && table.node[idx].port == r.port);
            if (k == SL_RSLOTS_MOVED)
                CHECK(table.owner[r.slot] == idx);
            else
                CHECK(!refresh);
        }
        check_table(&table);
    }
    return 0;
}
