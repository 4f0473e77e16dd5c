/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SL_SKIP_RETURN_CODE 77

static bool sl_skip_seen;

#define SL_SKIP()                                                                                  \
    do {                                                                                           \
        sl_skip_seen = true;                                                                       \
        skip();                                                                                    \
    } while (0)

/* CI=true (as CI and `make fresh-test` run the tests): a missing program fails instead of
 * skipping, because there it means an install step scripts/install-deps.sh lacks. */
static inline bool sl_skip_in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0);
}

/* The test needs the program at `path`, which Debian's `package` installs: present, the test goes
 * on; missing, it fails naming the package under CI=true, and is skipped (saying so) elsewhere. */
#define SL_NEED(path, package)                                                                     \
    do {                                                                                           \
        if (access((path), X_OK) != 0) {                                                           \
            if (sl_skip_in_ci())                                                                   \
                fail_msg("CI=true and %s is not installed: apt-get install %s "                   \
                         "(scripts/install-deps.sh test installs it)", (path), (package));          \
            print_message("skipped: %s is not installed (apt-get install %s)\n", (path),         \
                          (package));                                                               \
            SL_SKIP();                                                                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static inline int sl_skip_exit(int rc)
{
    return rc == 0 && sl_skip_seen ? SL_SKIP_RETURN_CODE : rc;
}

#endif
