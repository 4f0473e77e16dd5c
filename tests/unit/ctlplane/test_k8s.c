/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes discovery tests (ctlplane/k8s): the pure half. EndpointSlice and Pod lists become
 * peer sets (ready endpoints only, the named or fixed port, IPv6 bracketed, the list's
 * resourceVersion kept); watch events apply to the set (ADDED, MODIFIED to not-ready or
 * terminating, DELETED, BOOKMARK moving the resourceVersion only, ERROR 410 asking for a relist,
 * malformed and oversized events refused without touching the set); the stream splitter takes
 * events cut anywhere and refuses a line over the byte cap; a relist after 410 keeps every
 * member; request paths are encoded; the retry backoff grows and stays within its bounds on
 * virtual time (no clock); the source refuses a configuration it cannot run. The transport is
 * exercised against the suite's test API server by tests/system/test_k8s.py.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctlplane/k8s.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The set's peers, sorted, comma-separated. */
static const char *peers(const sl_k8s_set *s)
{
    static char out[4096];
    char **v = NULL;
    int n = sl_k8s_set_addrs(s, &v);
    assert_true(n >= 0);
    qsort(v, (size_t)n, sizeof *v, cmp);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, v[i]);
        free(v[i]);
    }
    free(v);
    return out;
}

static int ev(sl_k8s_set *s, const char *json)
{
    return sl_k8s_set_event(s, json, strlen(json));
}

static int list(sl_k8s_set *s, const char *json)
{
    return sl_k8s_set_list(s, json, strlen(json));
}

#define SLICE(name, rv, eps)                                                                       \
    "{\"metadata\":{\"name\":\"" name "\",\"resourceVersion\":\"" rv "\"},"                        \
    "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"http\",\"port\":80},"                         \
    "{\"name\":\"grpc\",\"port\":1051}],\"endpoints\":[" eps "]}"
#define EP(ip, ready) "{\"addresses\":[\"" ip "\"],\"conditions\":{\"ready\":" ready "}}"

static const char *LIST =
    "{\"kind\":\"EndpointSliceList\",\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
    SLICE("svc-a", "90", EP("10.0.0.1", "true") "," EP("10.0.0.2", "false") ","
          "{\"addresses\":[\"10.0.0.3\"],\"conditions\":{}},"
          "{\"addresses\":[\"10.0.0.4\"],\"conditions\":{\"ready\":true,\"terminating\":true}}")
    ",{\"metadata\":{\"name\":\"svc-b\",\"resourceVersion\":\"95\"},\"addressType\":\"IPv6\","
    "\"ports\":[{\"name\":\"grpc\",\"port\":1051}],\"endpoints\":[" EP("fd00::7", "true") "]}"
    ",{\"metadata\":{\"name\":\"svc-c\",\"resourceVersion\":\"96\"},\"addressType\":\"IPv4\","
    "\"ports\":[{\"name\":\"metrics\",\"port\":9}],\"endpoints\":[" EP("10.9.9.9", "true") "]}"
    "]}";

static void test_list(void **st)
{
    (void)st;
    sl_k8s_set s;
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);
    /* ready and ready-unknown count; not ready and terminating do not; svc-c has no grpc port */
    assert_string_equal(peers(&s), "10.0.0.1:1051,10.0.0.3:1051,[fd00::7]:1051");
    assert_string_equal(s.rv, "100");
    sl_k8s_set_free(&s);

    /* a fixed port wins over the names */
    sl_k8s_set_init(&s, SL_K8S_SLICES, "grpc", 7000, 0);
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.1:7000,10.0.0.3:7000,10.9.9.9:7000,[fd00::7]:7000");
    sl_k8s_set_free(&s);

    /* another port name */
    sl_k8s_set_init(&s, SL_K8S_SLICES, "http", 0, 0);
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.1:80,10.0.0.3:80");
    sl_k8s_set_free(&s);
}

static void test_list_refused(void **st)
{
    (void)st;
    sl_k8s_set s;
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);
    const char *bad[] = {
        "", "[]", "{", "{\"items\":[]}", /* no resourceVersion */
        "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":{}}",
        "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{}}]}",
        "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[" SLICE("x", "1", "{\"addresses\":7}") "]}",
        "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[" SLICE("x", "1", "{\"addresses\":[1]}") "]}",
        ("{\"metadata\":{\"resourceVersion\":\"01234567890123456789012345678901234567890123456789"
         "0123456789012345\"},\"items\":[]}"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(list(&s, bad[i]), -EPROTO);
    /* the set is as it was */
    assert_string_equal(peers(&s), "10.0.0.1:1051,10.0.0.3:1051,[fd00::7]:1051");
    assert_string_equal(s.rv, "100");
    /* an address that is not an IP or a name is skipped, not reported */
    assert_int_equal(list(&s, "{\"metadata\":{\"resourceVersion\":\"2\"},\"items\":["
                              SLICE("x", "1", EP("10.0.0.1,evil", "true") "," EP("1.2.3.4", "true"))
                              "]}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "1.2.3.4:1051");
    sl_k8s_set_free(&s);

    /* over the byte cap */
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 64);
    assert_int_equal(list(&s, LIST), -EMSGSIZE);
    assert_string_equal(peers(&s), "");
    sl_k8s_set_free(&s);
}

static void test_events(void **st)
{
    (void)st;
    sl_k8s_set s;
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);

    /* a new slice joins */
    assert_int_equal(ev(&s, "{\"type\":\"ADDED\",\"object\":" SLICE("svc-d", "101", EP("10.0.1.1", "true")) "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.1:1051,10.0.0.3:1051,10.0.1.1:1051,[fd00::7]:1051");
    assert_string_equal(s.rv, "101");
    /* the same again: no change (a resync), the resourceVersion still moves */
    assert_int_equal(ev(&s, "{\"type\":\"MODIFIED\",\"object\":" SLICE("svc-d", "102", EP("10.0.1.1", "true")) "}"), 0);
    assert_string_equal(s.rv, "102");
    /* marked not ready: it leaves on this one event */
    assert_int_equal(ev(&s, "{\"type\":\"MODIFIED\",\"object\":" SLICE("svc-d", "103", EP("10.0.1.1", "false")) "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.1:1051,10.0.0.3:1051,[fd00::7]:1051");
    /* terminating (a rolling update): leaves at once, even while still ready */
    assert_int_equal(ev(&s, "{\"type\":\"MODIFIED\",\"object\":" SLICE("svc-a", "104",
                            "{\"addresses\":[\"10.0.0.1\"],\"conditions\":{\"ready\":true,\"terminating\":true}},"
                            EP("10.0.0.3", "true")) "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.3:1051,[fd00::7]:1051");
    /* a bookmark moves the resourceVersion only */
    assert_int_equal(ev(&s, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"EndpointSlice\","
                            "\"metadata\":{\"resourceVersion\":\"150\"}}}"),
                     0);
    assert_string_equal(s.rv, "150");
    assert_string_equal(peers(&s), "10.0.0.3:1051,[fd00::7]:1051");
    /* deleted */
    assert_int_equal(ev(&s, "{\"type\":\"DELETED\",\"object\":" SLICE("svc-b", "151", EP("fd00::7", "true")) "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.3:1051");
    /* deleting what has no peers or is unknown changes nothing */
    assert_int_equal(ev(&s, "{\"type\":\"DELETED\",\"object\":" SLICE("svc-zz", "152", "") "}"), 0);
    assert_string_equal(s.rv, "152");

    /* 410 Gone: the caller lists again */
    assert_int_equal(ev(&s, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
                            "\"reason\":\"Expired\",\"code\":410}}"),
                     SL_K8S_GONE);
    assert_int_equal(ev(&s, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500}}"), -EPROTO);

    /* malformed events are refused and change nothing */
    const char *bad[] = {
        "{", "[]", "{\"type\":\"ADDED\"}", "{\"type\":7,\"object\":{}}",
        "{\"type\":\"WHAT\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"n\"}}}", /* no resourceVersion */
        "{\"type\":\"ADDED\",\"object\":" SLICE("svc-e", "200", "7") "}",
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(ev(&s, bad[i]), -EPROTO);
    assert_string_equal(peers(&s), "10.0.0.3:1051");
    assert_string_equal(s.rv, "152");

    /* a relist after 410 loses no member: the list is the whole truth */
    assert_int_equal(list(&s, LIST), SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.0.0.1:1051,10.0.0.3:1051,[fd00::7]:1051");
    assert_string_equal(s.rv, "100");
    sl_k8s_set_free(&s);

    /* an event over the byte cap */
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 32);
    assert_int_equal(ev(&s, "{\"type\":\"ADDED\",\"object\":" SLICE("svc-d", "101", EP("10.0.1.1", "true")) "}"),
                     -EMSGSIZE);
    sl_k8s_set_free(&s);
}

static void test_feed(void **st)
{
    (void)st;
    const char *stream =
        "{\"type\":\"ADDED\",\"object\":" SLICE("a", "2", EP("10.1.0.1", "true")) "}\n"
        "\n"
        "{\"type\":\"ADDED\",\"object\":" SLICE("b", "3", EP("10.1.0.2", "true")) "}\r\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
        "{\"type\":\"MODIFIED\",\"object\":" SLICE("a", "10", EP("10.1.0.1", "false")) "}\n";
    /* in one piece, and cut after every byte: the same result */
    for (int mode = 0; mode < 2; mode++) {
        sl_k8s_set s;
        sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
        int changed = 0;
        size_t n = strlen(stream);
        if (mode == 0) {
            changed = sl_k8s_set_feed(&s, stream, n);
        } else {
            for (size_t i = 0; i < n; i++) {
                int rc = sl_k8s_set_feed(&s, stream + i, 1);
                assert_true(rc == 0 || rc == SL_K8S_CHANGED);
                changed |= rc;
            }
        }
        assert_int_equal(changed, SL_K8S_CHANGED);
        assert_string_equal(peers(&s), "10.1.0.2:1051");
        assert_string_equal(s.rv, "10");
        /* an unfinished event waits for its newline */
        const char *half = "{\"type\":\"DELETED\",\"object\":" SLICE("b", "11", "");
        assert_int_equal(sl_k8s_set_feed(&s, half, strlen(half)), 0);
        assert_string_equal(peers(&s), "10.1.0.2:1051");
        assert_int_equal(sl_k8s_set_feed(&s, "}\n", 2), SL_K8S_CHANGED);
        assert_string_equal(peers(&s), "");
        sl_k8s_set_free(&s);
    }

    /* the first 410 or bad event stops the feed */
    sl_k8s_set s;
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
    const char *gone = "{\"type\":\"ERROR\",\"object\":{\"code\":410}}\n"
                       "{\"type\":\"ADDED\",\"object\":" SLICE("a", "2", EP("10.1.0.1", "true")) "}\n";
    assert_int_equal(sl_k8s_set_feed(&s, gone, strlen(gone)), SL_K8S_GONE);
    assert_string_equal(peers(&s), "");
    sl_k8s_set_free(&s);
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 0);
    assert_int_equal(sl_k8s_set_feed(&s, "not json\n", 9), -EPROTO);
    sl_k8s_set_free(&s);

    /* a line longer than the cap, even without a newline yet */
    sl_k8s_set_init(&s, SL_K8S_SLICES, NULL, 0, 100);
    char big[300];
    memset(big, 'x', sizeof big);
    assert_int_equal(sl_k8s_set_feed(&s, big, 60), 0);
    assert_int_equal(sl_k8s_set_feed(&s, big, 60), -EMSGSIZE);
    /* a list starts over */
    assert_int_equal(list(&s, "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}"),
                     SL_K8S_CHANGED);
    const char *bm = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"6\"}}}\n";
    assert_int_equal(sl_k8s_set_feed(&s, bm, strlen(bm)), 0);
    assert_string_equal(s.rv, "6");
    sl_k8s_set_free(&s);
}

#define POD(name, ip, ready, extra)                                                                \
    "{\"metadata\":{\"name\":\"" name "\",\"resourceVersion\":\"7\"" extra "},"                    \
    "\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"name\":\"grpc\",\"containerPort\":81}]}]},"  \
    "\"status\":{\"podIP\":\"" ip "\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"" ready "\"}]}}"

static void test_pods(void **st)
{
    (void)st;
    sl_k8s_set s;
    sl_k8s_set_init(&s, SL_K8S_PODS, NULL, 0, 0);
    assert_int_equal(list(&s, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":["
                              POD("p1", "10.2.0.1", "True", "") ","
                              POD("p2", "10.2.0.2", "False", "") ","
                              POD("p3", "10.2.0.3", "True", ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"") ","
                              "{\"metadata\":{\"name\":\"p4\"},\"status\":{\"phase\":\"Pending\"}}]}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.2.0.1:81");
    assert_int_equal(ev(&s, "{\"type\":\"MODIFIED\",\"object\":" POD("p2", "10.2.0.2", "True", "") "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.2.0.1:81,10.2.0.2:81");
    assert_int_equal(ev(&s, "{\"type\":\"MODIFIED\",\"object\":" POD("p1", "10.2.0.1", "False", "") "}"),
                     SL_K8S_CHANGED);
    assert_string_equal(peers(&s), "10.2.0.2:81");
    sl_k8s_set_free(&s);
}

static void test_path(void **st)
{
    (void)st;
    char p[512];
    assert_true(sl_k8s_path(p, sizeof p, SL_K8S_SLICES, "default", "sluice", NULL, 0, NULL, 0) > 0);
    assert_string_equal(p, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
                           "?labelSelector=kubernetes.io%2Fservice-name%3Dsluice");
    assert_true(sl_k8s_path(p, sizeof p, SL_K8S_SLICES, "ns", "s", NULL, 1, "42", 300) > 0);
    assert_string_equal(p, "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices"
                           "?labelSelector=kubernetes.io%2Fservice-name%3Ds"
                           "&watch=1&allowWatchBookmarks=true&resourceVersion=42&timeoutSeconds=300");
    assert_true(sl_k8s_path(p, sizeof p, SL_K8S_PODS, "ns", NULL, "app=sluice,tier in (a b)", 0,
                            NULL, 0) > 0);
    assert_string_equal(p, "/api/v1/namespaces/ns/pods?labelSelector=app%3Dsluice%2Ctier%20in%20%28a%20b%29");
    assert_int_equal(sl_k8s_path(p, 40, SL_K8S_SLICES, "default", "sluice", NULL, 0, NULL, 0),
                     -ENAMETOOLONG);
}

/* The backoff on virtual time: the total delay of retries grows, each delay stays in bounds. */
static void test_backoff(void **st)
{
    (void)st;
    int64_t prev_max = 0, now = 0;
    for (unsigned a = 0; a < 40; a++) {
        int64_t lo = sl_k8s_backoff_ms(a, 0xffffffffu), hi = sl_k8s_backoff_ms(a, 0);
        for (uint32_t r = 0; r < 1000; r += 37) {
            int64_t d = sl_k8s_backoff_ms(a, r);
            assert_true(d >= SL_K8S_BACKOFF_MIN_MS * 3 / 4 && d <= SL_K8S_BACKOFF_MAX_MS);
            assert_true(d <= hi);
        }
        assert_true(lo <= hi);
        assert_true(hi >= prev_max); /* never shrinks */
        prev_max = hi;
        now += lo;
    }
    assert_int_equal(sl_k8s_backoff_ms(0, 0), SL_K8S_BACKOFF_MIN_MS);
    assert_int_equal(sl_k8s_backoff_ms(1, 0), 2 * SL_K8S_BACKOFF_MIN_MS);
    assert_int_equal(sl_k8s_backoff_ms(1000, 0), SL_K8S_BACKOFF_MAX_MS);
    /* forty failures in a row take over ten minutes of virtual time: no hot loop */
    assert_true(now > 10 * 60 * 1000);
}

static void on_list(void *ud, char *const *a, size_t n)
{
    (void)ud;
    (void)a;
    (void)n;
}

static void test_start_refuses(void **st)
{
    (void)st;
    sl_k8s *k = NULL;
    sl_k8s_config c = {.api = "https://127.0.0.1:1", .ns = "default", .ca_file = "/nonexistent"};
    assert_int_equal(sl_k8s_start(&c, NULL, on_list, NULL, &k), -EINVAL); /* no service */
    c.service = "s";
    c.selector = "app=x";
    assert_int_equal(sl_k8s_start(&c, NULL, on_list, NULL, &k), -EINVAL); /* both */
    c.selector = NULL;
    assert_int_equal(sl_k8s_start(&c, NULL, on_list, NULL, &k), -EINVAL); /* a CA that is not */
    assert_null(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_list_refused),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_feed),
        cmocka_unit_test(test_pods),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_start_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
