/* tests/test.h: the smallest test harness that does the job.
 * Each check prints "PASS name" or "FAIL name: why"; tests/run_tests.sh counts
 * those lines over every test program and prints "N passed, N failed". */
#ifndef KVQ_TEST_H
#define KVQ_TEST_H
#include <stdio.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The running maximum of errors for a check `worst <= tolerance`. Any comparison with NaN is
 * false, so the usual `if (e > worst) worst = e` skips a NaN error and the check passes on
 * garbage; here a NaN or infinite error makes the result +Inf for good, and the check fails. */
static inline double max_or_inf(double worst, double err) {
    return isfinite(err) ? (err > worst ? err : worst) : INFINITY;
}

/* max |a[i] - b[i]| over n floats; +Inf when either array holds a NaN or an infinity
 * (their difference is then NaN or infinite). */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = max_or_inf(worst, fabs((double)a[i] - (double)b[i]));
    return worst;
}

/* A reproducible float in [-1, 1) from the state *s (a 64-bit LCG, its top bits). */
static inline float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int)(*s >> 40) - (1 << 23)) / (float)(1 << 23);
}

/* KVQ_QUICK=1 (`make check`): the long tests check a sample of their reference rows (each says
 * which, in a line that is neither PASS nor FAIL); unset or 0 (`make test`, CI) they check all. */
static inline int test_quick(void) {
    const char *q = getenv("KVQ_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* Exit code of a test program: nonzero when any check failed. */
static inline int test_exit_code(void) { return test_failures ? 1 : 0; }

#endif
