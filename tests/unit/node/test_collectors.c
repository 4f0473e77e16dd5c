/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node collector tests: the engine's families read the engine's own counters at render time (a
 * decision shows as one key held and one UNDER_LIMIT and one OVER_LIMIT decision of its
 * algorithm, without anything counted on the request path), with their labels and help; and the
 * server and Graphite families are absent until their sources are registered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/collectors.h"

static char *render(sl_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &text, &len), 0);
    return text;
}

static void test_engine_families(void **state)
{
    (void)state;
    sl_metrics *m = NULL;
    sl_engine *e = NULL;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    sl_collectors c = {0};
    assert_int_equal(sl_collectors_engine(&c, m, e), 0);

    char *before = render(m);
    assert_non_null(strstr(before, "sluice_keys{kind=\"keys\"} 0"));
    assert_non_null(strstr(before, "# TYPE sluice_decisions_total counter"));
    assert_null(strstr(before, "sluice_connections_open"));
    assert_null(strstr(before, "sluice_graphite_pushes_total"));
    free(before);

    sl_request req = {.name = "n", .name_len = 1, .unique_key = "k", .unique_key_len = 1,
                      .hits = 1, .limit = 1, .duration = 60000};
    sl_response resp;
    sl_engine_decide(e, &req, &resp, 1000);
    sl_engine_decide(e, &req, &resp, 1001);

    char *after = render(m);
    assert_non_null(strstr(after, "sluice_keys{kind=\"keys\"} 1"));
    assert_non_null(strstr(after, "sluice_keys{kind=\"capacity\"}"));
    assert_non_null(strstr(after, "sluice_store_bytes "));
    assert_non_null(strstr(after, "sluice_keys_removed_total{reason=\"evicted_limited\"} 0"));
    assert_non_null(strstr(after, "sluice_item_errors_total 0"));
    assert_non_null(strstr(after, "status=\"UNDER_LIMIT\"} 1"));
    assert_non_null(strstr(after, "status=\"OVER_LIMIT\"} 1"));
    free(after);

    sl_metrics_free(m);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
