/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Embedding a whole sluice node in your own program (Gubernator's "use it as a library").
 *
 * The program starts a node inside its own process, with its own listener on a free loopback port,
 * decides some hits directly (sl_node_decide: no network), then asks the same node over gRPC with
 * the client library, the way a remote service would, and checks that both see one shared limit.
 *
 *   build/bin/example_embedded [extra sluiced options...]
 *
 * Exit status 0 when every answer was as expected.
 */
#include <stdio.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/node.h"

#define LIMIT 10

static sl_request request(int64_t hits)
{
    sl_request r = {0};
    r.name = "embedded";
    r.name_len = strlen(r.name);
    r.unique_key = "account:1";
    r.unique_key_len = strlen(r.unique_key);
    r.hits = hits;
    r.limit = LIMIT;
    r.duration = 60000;
    r.algorithm = SL_TOKEN_BUCKET;
    return r;
}

/* The same limit as the client library asks about it (its own type, not the engine's). */
static sl_client_request client_request(int64_t hits)
{
    sl_request e = request(hits);
    return (sl_client_request){.name = e.name, .name_len = e.name_len, .unique_key = e.unique_key,
                               .unique_key_len = e.unique_key_len, .hits = e.hits,
                               .limit = e.limit, .duration = e.duration,
                               .algorithm = e.algorithm};
}

int main(int argc, char **argv)
{
    char *args[64] = {"--listen-addr", "127.0.0.1:0", "--workers", "1"};
    int nargs = 4;
    for (int i = 1; i < argc && nargs < 64; i++)
        args[nargs++] = argv[i];

    sl_node *node;
    char err[256];
    if (sl_node_start(nargs, args, &node, err, sizeof err)) {
        fprintf(stderr, "embedded: %s\n", err);
        return 1;
    }
    int failures = 0;

    /* 1. Direct calls: four hits, one at a time. */
    for (int i = 0; i < 4; i++) {
        sl_request req = request(1);
        sl_response resp;
        if (sl_node_decide(node, &req, &resp, 1) || resp.error) {
            fprintf(stderr, "direct decide failed: %s\n", resp.error ? resp.error : "error");
            failures++;
            continue;
        }
        printf("direct  hit %d: status=%s remaining=%lld\n", i + 1,
               resp.status == SL_UNDER_LIMIT ? "UNDER_LIMIT" : "OVER_LIMIT",
               (long long)resp.remaining);
        if (resp.remaining != LIMIT - 1 - i)
            failures++;
    }

    /* 2. The same key over the network, through the node's own listener. */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", sl_node_port(node));
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 2000;
    o.fail_closed = true; /* this example wants to see real answers, not fail-open ones */
    sl_client *client;
    if (sl_client_new(addr, &o, &client)) {
        fprintf(stderr, "client for %s failed\n", addr);
        return 1;
    }
    sl_client_item item = {.req = client_request(6)};
    sl_client_check_reply reply;
    int rc = sl_client_check(client, &item, 1, 0, &reply);
    if (rc || reply.count != 1) {
        fprintf(stderr, "gRPC check failed: %d\n", rc);
        failures++;
    } else {
        const sl_client_response *r = &reply.items[0].resp;
        printf("gRPC    6 hits: status=%s remaining=%lld (via %s)\n",
               r->status == SL_UNDER_LIMIT ? "UNDER_LIMIT" : "OVER_LIMIT",
               (long long)r->remaining, addr);
        if (r->status != SL_UNDER_LIMIT || r->remaining != 0)
            failures++;
    }
    sl_client_check_reply_free(&reply);

    /* 3. The limit is spent for everyone now. */
    sl_request req = request(1);
    sl_response resp;
    if (sl_node_decide(node, &req, &resp, 1) || resp.status != SL_OVER_LIMIT) {
        fprintf(stderr, "expected OVER_LIMIT after the limit was spent\n");
        failures++;
    } else {
        printf("direct  hit 11: status=OVER_LIMIT remaining=0\n");
    }

    sl_client_free(client);
    sl_node_shutdown(node, 2000);
    sl_node_wait(node);
    sl_node_free(node);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
