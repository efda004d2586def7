/* tests/test_lloyd_bounded.c: quant/lloyd_bounded.c, lloyd_fit_bounded (Hamerly's bounds), against
 * lloyd_fit (tests/test_lloyd.c holds it to SCHEMES.md §8): codes, passes, convergence and
 * centroids bit for bit on random and grid points (exact ties) of dims 1..16, K up to 256, capped
 * or run to the end, clustered points and points beyond the bounds' range; a point whose float32
 * distances tie where its true ones do not, which only the bounds' float32 margin rescans. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "quant/lloyd.h"
#include "tests/lloyd_ref.h"
#include "tests/test.h"

/* ---- lloyd_fit_bounded ---- */

/* lloyd_fit_bounded must be lloyd_fit: codes, passes, convergence, centroids bit for bit. */
static int bounded_same(const float *p, size_t n, int dim, const float *init, int k, int max_it) {
    Fit want = run_fit(p, n, dim, init, k, max_it);
    float *got = malloc((size_t)k * dim * sizeof *got);
    uint16_t *codes = malloc(n * sizeof *codes);
    void *scratch = malloc(lloyd_bounded_scratch_bytes(n, dim, k));
    memcpy(got, init, (size_t)k * dim * sizeof *got);
    LloydResult r = lloyd_fit_bounded(p, n, dim, got, k, max_it, codes, scratch);
    int same = r.iterations == want.result.iterations && r.converged == want.result.converged &&
               !memcmp(got, want.centroids, (size_t)k * dim * sizeof *got) && !memcmp(codes, want.codes, n * sizeof *codes);
    free_fit(&want);
    free(got);
    free(codes);
    free(scratch);
    return same;
}

/* Random and grid points (exact ties) of every specialised dim and others, K up to 256, from
 * the spread start, run to the cap or capped after a few passes; clustered points (rvq's second
 * stage: residuals near 0, many passes); points beyond the bounds' range (the scan). */
static void test_fit_bounded(void) {
    static const int dims[] = {1, 2, 3, 4, 8, 16};
    static const int ks[] = {2, 16, 256};
    uint64_t seed = 515;
    int bad = 0, cases = 0;
    char where[128] = "";
    for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
            for (int grid = 0; grid < 2; grid++) {
                int dim = dims[a], k = ks[b];
                size_t n = 4 * (size_t)k + 301;
                float *p = random_points(n, dim, &seed, grid), *init = malloc((size_t)k * dim * sizeof *init);
                for (size_t i = 0; grid == 0 && i < n * (size_t)dim; i++) p[i] *= (float)(1 + i % 3);   /* uneven spread */
                lloyd_init_spread(p, n, dim, k, init);
                for (int cap = 2; cap <= LLOYD_MAX_ITERATIONS; cap *= 7, cases++)   /* 2, 14, 98 */
                    if (!bounded_same(p, n, dim, init, k, cap)) {
                        bad++;
                        snprintf(where, sizeof where, "dim %d k %d grid %d cap %d", dim, k, grid, cap);
                    }
                free(p);
                free(init);
            }
    check(bad == 0, "lloyd_fit_bounded = lloyd_fit bit for bit (dims 1..16, K 2..256, ties, capped)",
          "%d of %d differ, last %s", bad, cases, where);

    size_t n = 3000;
    float *p = random_points(n, 8, &seed, 0), init[64 * 8];
    for (size_t i = 0; i < n * 8; i++) p[i] = p[i] * p[i] * p[i] * 1e-3f;   /* dense near 0 */
    lloyd_init_spread(p, n, 8, 64, init);
    int small = bounded_same(p, n, 8, init, 64, LLOYD_MAX_ITERATIONS);
    p[17] = 3e20f;   /* beyond 2^40: the plain scan */
    lloyd_init_spread(p, n, 8, 64, init);
    check(small && bounded_same(p, n, 8, init, 64, LLOYD_MAX_ITERATIONS),
          "lloyd_fit_bounded = lloyd_fit on points near 0 and with a point of 3e20", "differs");
    free(p);
}

/* The bounds' float32 margin where it decides a code. Points 1, 3 and -2^-30, centroids -1 and
 * 1.5. Pass 1: the point 1 goes to 1.5 (distance 0.5; the other 2), 3 too, -2^-30 to -1; the
 * centroids move to -2^-30 and 2, each straight along the line to or from the point 1, so its
 * bounds' triangle steps are exact: its true distance to its own is 0.5 + 0.5 = 1, to the other
 * 2 - (1 - 2^-30) = 1 + 2^-30. By the true distances it keeps its code, but lloyd.h's float32
 * distances tie (1 - (-2^-30) rounds to 1): pass 2's scan gives the lower index, 0. Bounds widened
 * by 2^-40 alone (no float32 margin) would keep code 1; the margin sends the point to the scan. */
static void test_float32_margin(void) {
    float p[3] = {1.0f, 3.0f, -0x1p-30f}, init[2] = {-1.0f, 1.5f};
    Fit two = run_fit(p, 3, 1, init, 2, 2);
    int tie = two.codes[0] == 0 && two.centroids[0] == 0.5f && two.centroids[1] == 3.0f;
    free_fit(&two);
    check(tie && bounded_same(p, 3, 1, init, 2, 2) && bounded_same(p, 3, 1, init, 2, LLOYD_MAX_ITERATIONS),
          "lloyd_fit_bounded: a point 2^-30 nearer its own centroid in true distance but tied in float32 is rescanned "
          "(code 0, as lloyd_fit)",
          "lloyd_fit gives the tie's code 0 after 2 passes: %d", tie);
}

int main(void) {
    test_fit_bounded();
    test_float32_margin();
    return test_exit_code();
}
