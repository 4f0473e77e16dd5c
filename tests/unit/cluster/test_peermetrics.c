/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster metric family tests: registering fills every handle, each peer-call method has its own
 * ok and error series under sluice_peer_calls_total, the rendering lists every family, and no
 * registry leaves the handles NULL (the metrics calls then do nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/peermetrics.h"

static void test_register_and_render(void **state)
{
    (void)state;
    sl_metrics *m = NULL;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_peermetrics pm = {0};
    sl_peermetrics_register(&pm, m);
    for (int i = 0; i < SL_PEERMETRICS_METHODS; i++) {
        assert_non_null(pm.calls_ok[i]);
        assert_non_null(pm.calls_err[i]);
        assert_ptr_not_equal(pm.calls_ok[i], pm.calls_err[i]);
    }
    assert_non_null(pm.call_seconds);
    assert_non_null(pm.items);
    assert_non_null(pm.retries);
    assert_non_null(pm.fail_open);
    assert_non_null(pm.global_local);
    assert_non_null(pm.updates);
    assert_non_null(pm.views);
    assert_non_null(pm.peers);
    assert_non_null(pm.handoff_sent);
    assert_non_null(pm.handoff_failed);
    assert_non_null(pm.handoff_bytes);
    sl_metrics_counter_add(pm.calls_err[SL_PEERMETRICS_BCAST], 2);
    sl_metrics_counter_inc(pm.items);
    assert_int_equal(sl_metrics_counter_value(pm.calls_err[SL_PEERMETRICS_BCAST]), 2);
    assert_int_equal(sl_metrics_counter_value(pm.calls_ok[SL_PEERMETRICS_BCAST]), 0);

    char *text = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &text, &len), 0);
    const char *want[] = {
        "sluice_peer_calls_total{method=\"UpdatePeerGlobals\",result=\"error\"} 2",
        "method=\"GetPeerRateLimits\"",
        "method=\"GetPeerRateLimits.global\"",
        "sluice_peer_forwarded_items_total 1",
        "sluice_peer_retries_total",
        "sluice_peer_fail_open_total",
        "sluice_global_local_answers_total",
        "sluice_global_updates_total",
        "sluice_membership_changes_total",
        "sluice_cluster_peers",
        "sluice_handoff_keys_total{result=\"sent\"}",
        "sluice_handoff_keys_total{result=\"failed\"}",
        "sluice_handoff_bytes_total",
        "sluice_peer_call_seconds_bucket",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_non_null(strstr(text, want[i]));
    free(text);
    sl_metrics_free(m);
}

static void test_no_registry(void **state)
{
    (void)state;
    sl_peermetrics pm = {0};
    sl_peermetrics_register(&pm, NULL);
    for (int i = 0; i < SL_PEERMETRICS_METHODS; i++)
        assert_null(pm.calls_ok[i]);
    assert_null(pm.items);
    assert_null(pm.call_seconds);
    sl_metrics_counter_inc(pm.items); /* accepted, does nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_and_render),
        cmocka_unit_test(test_no_registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
