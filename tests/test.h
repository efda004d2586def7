/* tests/test.h: the smallest test harness that does the job.
 * Each check prints "PASS name" or "FAIL name: why"; tests/run_tests.sh counts
 * those lines over every test program and prints "N passed, N failed". */
#ifndef KVQ_TEST_H
#define KVQ_TEST_H
#include <stdio.h>
#include <stdarg.h>

static int test_failures = 0;

/* Report one named check. Returns ok so callers can stop a dependent block. */
static inline int check(int ok, const char *name, const char *fmt, ...) {
    if (ok) {
        printf("PASS %s\n", name);
    } else {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL %s: ", name);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        test_failures++;
    }
    fflush(stdout);
    return ok;
}

/* Exit code of a test program: nonzero when any check failed. */
static inline int test_exit_code(void) { return test_failures ? 1 : 0; }

#endif
