/*
 * Skips that ctest can see. cmocka's skip() ends a test without failing it, but the binary still
 * exits 0, so ctest would print "Passed" for a test that never ran. CMakeLists.txt sets
 * SKIP_RETURN_CODE 77 on every unit test; a test marks its skip with SL_SKIP() and main() returns
 * sl_skip_exit(rc), which turns "no failure, at least one skip" into 77. A binary with some tests
 * passed and some skipped therefore shows as Skipped: a skip is never hidden behind a pass.
 * Include after <cmocka.h>.
 */
#ifndef SLUICE_TESTS_SKIP_H
#define SLUICE_TESTS_SKIP_H

#include <stdbool.h>

#define SL_SKIP_RETURN_CODE 77

static bool sl_skip_seen;

#define SL_SKIP()                                                                                  \
    do {                                                                                           \
        sl_skip_seen = true;                                                                       \
        skip();                                                                                    \
    } while (0)

static inline int sl_skip_exit(int rc)
{
    return rc == 0 && sl_skip_seen ? SL_SKIP_RETURN_CODE : rc;
}

#endif
