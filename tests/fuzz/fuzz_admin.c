/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the admin API's inputs: the first line of the input is the query of
 * GET /v1/admin/top (node/adminsrv.c sl_adminsrv_top_query, the target's "?limit=&n="), the rest a
 * POST /v1/admin/killswitch body (protect/admin.c sl_admin_handle, over a real switchboard and
 * protection service with a small cap), then a GET of the switchboard. Properties: a query is
 * taken (n 1..1000, a limit of at most SL_WHO_NAME_MAX bytes, then rendered by the top-keys JSON)
 * or refused with a 400 line; every answer is a JSON object with a status of 200, 400 or 507; a
 * 200 POST names the switch it set. A broken property traps; ASan catches overruns and leaks
 * (the switchboard keeps what the POSTs set, within its cap).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "node/adminsrv.h"
#include "protect/admin.h"
#include "protect/protect.h"
#include "protect/who.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sl_engine *engine;
static sl_killswitch *ks;
static sl_protect *prot;

static void setup(void)
{
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    CHECK(sl_engine_new(&ec, &engine) == 0);
    sl_killswitch_config kc = {.max_entries = 16};
    CHECK(sl_killswitch_new(&kc, &ks) == 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = engine;
    pc.switches = ks;
    pc.workers = 1;
    CHECK(sl_protect_new(&pc, &prot) == 0);
}

static json_t *check_answer(const sl_admin_response *a)
{
    CHECK(a->body != NULL && a->body_len == strlen(a->body));
    CHECK(a->content_type && !strcmp(a->content_type, "application/json"));
    CHECK(a->status == 200 || a->status == 400 || a->status == 507);
    json_error_t e;
    json_t *j = json_loadb(a->body, a->body_len, 0, &e);
    CHECK(json_is_object(j));
    return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!prot)
        setup();
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t qlen = nl ? (size_t)(nl - text) : size;

    /* the query, after the path as a request target carries it */
    char target[600];
    size_t plen = sizeof SL_ADMINSRV_TOP_PATH - 1;
    if (qlen <= sizeof target - plen) {
        memcpy(target, SL_ADMINSRV_TOP_PATH, plen);
        memcpy(target + plen, text, qlen);
        char limit[SL_WHO_NAME_MAX + 1];
        bool filter;
        size_t want;
        const char *why = NULL;
        int rc = sl_adminsrv_top_query(target, plen + qlen, limit, sizeof limit, &filter, &want,
                                       &why);
        if (rc == 0) {
            CHECK(want >= 1 && want <= SL_WHO_MAX_K);
            CHECK(strlen(limit) <= SL_WHO_NAME_MAX && (filter || !limit[0]));
            char *body;
            size_t len;
            if (sl_who_top_json(sl_protect_who(prot), filter ? limit : NULL, want,
                                1700000000000, &body, &len) == 0) {
                json_error_t e;
                json_t *j = json_loadb(body, len, 0, &e);
                CHECK(j != NULL);
                json_decref(j);
                free(body);
            }
        } else {
            CHECK(why != NULL && why[strlen(why) - 1] == '\n');
        }
    }

    /* the rest as a POST body, then the switchboard read back */
    const uint8_t *body = nl ? data + qlen + 1 : data + size;
    size_t blen = nl ? size - qlen - 1 : 0;
    sl_admin_response a;
    sl_admin_handle(prot, "POST", body, blen, &a);
    json_t *j = check_answer(&a);
    if (a.status == 200)
        CHECK(json_is_string(json_object_get(j, "name")) &&
              json_is_string(json_object_get(j, "mode")));
    else
        CHECK(json_is_string(json_object_get(j, "error")));
    json_decref(j);
    free(a.body);
    sl_admin_handle(prot, "GET", NULL, 0, &a);
    j = check_answer(&a);
    CHECK(a.status == 200 && json_is_array(json_object_get(j, "switches")));
    json_decref(j);
    free(a.body);
    return 0;
}
