/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Status page tests (node/statuspage.h): the page gets the response's nonce in its script and
 * style tags and no mark is left, a nonce that is not 32 hex digits is refused, the CSP names the
 * nonce; the JSON document gathers the engine's decisions, the switchboard (a shadow switch, the
 * shed level of each worker), the quota file's state and the top keys, keeps a key that is markup
 * as a JSON string, and stays bounded: at most SL_STATUSPAGE_MAX_LIMITS (limit, event) rows of at
 * most SL_STATUSPAGE_TOP_KEYS keys, the busiest first; in a cluster, the peers (at most
 * SL_STATUSPAGE_MAX_PEERS) with this node marked (sl_router_peers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/statuspage.h"

static const char NONCE[] = "0123456789abcdef0123456789abcdef";

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static sl_engine *new_engine(void)
{
    sl_engine *e;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    return e;
}

static void test_page_gets_the_nonce(void **state)
{
    (void)state;
    char *page;
    size_t len;
    assert_int_equal(sl_statuspage_html(NONCE, false, &page, &len), 0);
    assert_int_equal(strlen(page), len);
    assert_non_null(strstr(page, "<script nonce=\"0123456789abcdef0123456789abcdef\">"));
    assert_non_null(strstr(page, "<style nonce=\"0123456789abcdef0123456789abcdef\">"));
    assert_non_null(strstr(page, "content=\"open\""));
    assert_null(strstr(page, "@NONCE@"));
    assert_null(strstr(page, "@AUTH@"));
    /* one script, one style: nothing else the CSP would have to allow */
    assert_int_equal(count(page, "<script"), 1);
    assert_int_equal(count(page, "<style"), 1);
    assert_null(strstr(page, "innerHTML"));
    assert_null(strstr(page, "http://"));
    assert_null(strstr(page, "https://"));
    free(page);

    assert_int_equal(sl_statuspage_html(NONCE, true, &page, &len), 0);
    assert_non_null(strstr(page, "content=\"token\""));
    free(page);

    const char *bad[] = {"", "0123", "0123456789abcdef0123456789abcdef0",
                         "0123456789abcdef0123456789abcdeg", "0123456789ABCDEF0123456789abcdef",
                         "\"><script>x</script>0123456789abcdef"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        page = (char *)1;
        assert_int_equal(sl_statuspage_html(bad[i], false, &page, &len), -EINVAL);
        assert_null(page);
    }
}

static void test_csp_and_nonce(void **state)
{
    (void)state;
    char csp[512];
    sl_statuspage_csp(NONCE, csp, sizeof csp);
    assert_non_null(strstr(csp, "default-src 'self'"));
    assert_non_null(strstr(csp, "script-src 'nonce-0123456789abcdef0123456789abcdef'"));
    assert_non_null(strstr(csp, "style-src 'nonce-0123456789abcdef0123456789abcdef'"));
    assert_non_null(strstr(csp, "frame-ancestors 'none'"));
    assert_null(strstr(csp, "unsafe"));

    char a[SL_STATUSPAGE_NONCE_LEN + 1], b[SL_STATUSPAGE_NONCE_LEN + 1];
    assert_int_equal(sl_statuspage_nonce(a), 0);
    assert_int_equal(sl_statuspage_nonce(b), 0);
    assert_int_equal(strlen(a), SL_STATUSPAGE_NONCE_LEN);
    assert_string_not_equal(a, b);
    char *page;
    size_t len;
    assert_int_equal(sl_statuspage_html(a, false, &page, &len), 0); /* a valid nonce */
    free(page);
}

static void test_json_gathers_the_parts(void **state)
{
    (void)state;
    sl_engine *e = new_engine();
    sl_killswitch *ks;
    sl_killswitch_config kc = {.max_entries = 8};
    assert_int_equal(sl_killswitch_new(&kc, &ks), 0);
    assert_int_equal(sl_killswitch_set(ks, "dark", 4, SL_KILLSWITCH_SHADOW), 0);
    sl_protect *p;
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = e;
    pc.switches = ks;
    pc.workers = 3;
    assert_int_equal(sl_protect_new(&pc, &p), 0);

    char path[] = "/tmp/sluice-statuspage-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char quotas[] = "limit:\n  key_default: {rate: 10, burst: 10}\n";
    assert_int_equal(write(fd, quotas, sizeof quotas - 1), (ssize_t)(sizeof quotas - 1));
    close(fd);
    sl_quotasrc *q;
    sl_quotasrc_config qc = {.conn.file = path};
    assert_int_equal(sl_quotasrc_new(&qc, &q), 0);

    /* decisions: 2 under, 1 over */
    sl_request req = {.name = "n", .name_len = 1, .unique_key = "k", .unique_key_len = 1,
                      .hits = 1, .limit = 2, .duration = 60000};
    sl_response resp;
    for (int i = 0; i < 3; i++)
        sl_engine_decide(e, &req, &resp, 1000 + i);

    /* who is limited: 20 limits, limit i with i + 1 events over i + 1 keys (up to 12), and a
     * key that is markup */
    sl_who *w = sl_protect_who(p);
    char name[16], key[16];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "limit-%02d", i);
        for (int j = 0; j <= i; j++) {
            snprintf(key, sizeof key, "key-%d", j % 12);
            sl_who_note(w, name, strlen(name), SL_WHO_REJECTED, key, strlen(key), 1000);
        }
    }
    static const char xss[] = "<img src=x onerror=alert(1)>";
    for (int j = 0; j < 40; j++)
        sl_who_note(w, "dark", 4, SL_WHO_WOULD_REJECT, xss, sizeof xss - 1, 1000);

    sl_statuspage_config c = {.instance = "node-a", .listen_addr = "127.0.0.1:81", .workers = 3,
                              .started_ms = 1000, .engine = e, .protect = p, .quotas = q};
    char *doc;
    size_t len;
    assert_int_equal(sl_statuspage_json(&c, 6000, &doc, &len), 0);
    assert_int_equal(strlen(doc), len);
    assert_non_null(strstr(doc, "\"instance\":\"node-a\""));
    assert_non_null(strstr(doc, "\"advertise\":null"));
    assert_non_null(strstr(doc, "\"uptime_ms\":5000"));
    assert_non_null(strstr(doc, "\"health\":{\"healthy\":true,\"peer_count\":1,\"reason\":\"\"}"));
    assert_non_null(strstr(doc, "\"peers\":[],\"peers_total\":0"));
    assert_non_null(strstr(doc, "\"under_limit\":2,\"over_limit\":1"));
    assert_non_null(strstr(doc, "\"keys\":1"));
    assert_non_null(strstr(doc, "{\"name\":\"dark\",\"mode\":\"shadow\",\"origin\":\"admin\"}"));
    assert_int_equal(count(doc, "\"worker\":"), 3);
    assert_non_null(strstr(doc, "\"mode\":\"file\",\"loaded\":true"));
    assert_non_null(strstr(doc, "\"last_error\":\"\""));
    assert_non_null(strstr(doc, path));
    /* the top: the busiest first (the markup key's 40 events), 16 of 21 rows, 10 keys at most */
    assert_non_null(strstr(doc, "\"limits_total\":21"));
    assert_int_equal(count(doc, "\"limit\":"), SL_STATUSPAGE_MAX_LIMITS);
    const char *first = strstr(doc, "\"limit\":");
    assert_ptr_equal(first, strstr(doc, "\"limit\":\"dark\""));
    assert_non_null(strstr(doc, "{\"key\":\"<img src=x onerror=alert(1)>\",\"count\":40"));
    assert_non_null(strstr(doc, "\"limit\":\"limit-19\""));
    assert_non_null(strstr(doc, "\"limit\":\"limit-05\""));
    assert_null(strstr(doc, "\"limit\":\"limit-04\"")); /* the 5 quietest are left out */
    const char *l19 = strstr(doc, "\"limit\":\"limit-19\"");
    const char *l18 = strstr(doc, "\"limit\":\"limit-18\"");
    assert_true(l19 < l18);
    char *end = strstr(l19, "]}");
    assert_non_null(end);
    *end = '\0';
    assert_int_equal(count(l19, "\"key\":"), SL_STATUSPAGE_TOP_KEYS);
    free(doc);

    /* without protection or quotas: null and mode none */
    sl_statuspage_config bare = {.engine = e};
    assert_int_equal(sl_statuspage_json(&bare, 6000, &doc, &len), 0);
    assert_non_null(strstr(doc, "\"switchboard\":null"));
    assert_non_null(strstr(doc, "\"top\":null"));
    assert_non_null(strstr(doc, "\"quotas\":{\"mode\":\"none\"}"));
    free(doc);

    sl_quotasrc_free(q);
    unlink(path);
    sl_protect_free(p);
    sl_killswitch_free(ks);
    sl_engine_free(e);
}

/* In a cluster: the peer list in the router's order, this node marked, all healthy before any
 * call; at most SL_STATUSPAGE_MAX_PEERS of them, with the list's length beside. */
static void test_json_peers(void **state)
{
    (void)state;
    sl_engine *e = new_engine();
    sl_router_config rc = {.engine = e, .discovery = SL_DISCOVERY_STATIC, .workers = 1,
                           .advertise_addr = "127.0.0.1:7001"};
    sl_router *r;
    assert_int_equal(sl_router_new(&rc, &r), 0);
    const char *two[] = {"127.0.0.1:7002", "127.0.0.1:7001"};
    sl_router_set_peers(r, two, 2);
    sl_router_peer peers[4];
    assert_int_equal(sl_router_peers(r, peers, 1), 2); /* the length, whatever the room */
    assert_int_equal(sl_router_peers(r, peers, 4), 2);
    int self = strcmp(peers[0].addr, "127.0.0.1:7001") == 0 ? 0 : 1;
    assert_string_equal(peers[self].addr, "127.0.0.1:7001");
    assert_true(peers[self].self && !peers[1 - self].self);
    assert_int_equal(peers[0].err, 0);

    sl_statuspage_config c = {.engine = e, .router = r, .advertise_addr = "127.0.0.1:7001"};
    char *doc;
    size_t len;
    assert_int_equal(sl_statuspage_json(&c, 6000, &doc, &len), 0);
    assert_non_null(strstr(doc, "\"advertise\":\"127.0.0.1:7001\""));
    assert_non_null(strstr(doc, "{\"addr\":\"127.0.0.1:7001\",\"self\":true,\"healthy\":true"));
    assert_non_null(strstr(doc, "{\"addr\":\"127.0.0.1:7002\",\"self\":false,\"healthy\":true"));
    assert_non_null(strstr(doc, "\"peers_total\":2"));
    assert_non_null(strstr(doc, "\"peer_count\":2"));
    free(doc);

    /* a long list: 64 shown, the length says 100 */
    char names[100][24];
    const char *many[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "127.0.0.1:%d", 8000 + i);
        many[i] = names[i];
    }
    sl_router_set_peers(r, many, 100);
    assert_int_equal(sl_statuspage_json(&c, 6000, &doc, &len), 0);
    assert_int_equal(count(doc, "\"addr\":"), SL_STATUSPAGE_MAX_PEERS);
    assert_non_null(strstr(doc, "\"peers_total\":100"));
    assert_non_null(strstr(doc, "\"healthy\":false")); /* this node is not in that list */
    free(doc);

    sl_router_free(r);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_gets_the_nonce),
        cmocka_unit_test(test_csp_and_nonce),
        cmocka_unit_test(test_json_gathers_the_parts),
        cmocka_unit_test(test_json_peers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
