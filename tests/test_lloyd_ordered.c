/* tests/test_lloyd_ordered.c: quant/lloyd_ordered.c, the ordered 1-D path (pcaB's fits), against
 * lloyd_fit (tests/test_lloyd.c holds it to SCHEMES.md §8).
 * - lloyd_sort_order ascends (-0 before +0, ties by index); its rank initialisation is
 *   lloyd_init_ranks'.
 * - lloyd_fit_ordered is lloyd_fit bit for bit (codes, passes, centroids): ties, -0, overflow,
 *   runs of equal distances, a NaN point, points like pcaB's components at pcaB's sizes, capped
 *   after any pass.
 * - The exactness guards of a cell's sum, each on a cell made for it (worked on paper below): a
 *   sum that rounds in point order, a least nonzero magnitude on either side of 0, a value one ulp
 *   finer than the prefix sums' resolution.
 * - lloyd_objective's bisection and lloyd_objective_ordered's walk are the float64 scan's sum. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "quant/lloyd.h"
#include "tests/lloyd_ref.h"
#include "tests/test.h"

/* ---- the ordered 1-D path (lloyd_sort_order, lloyd_fit_ordered) ---- */

/* 1-D points of one of several kinds: smooth, on a coarse grid (ties, -0 and +0), with a few
 * points whose squared distances overflow float32, or clustered in a tiny range around 1 so
 * that distinct centroids give equal float32 distances (the run-of-equal-distances case). */
static float ordered_point(int kind, uint64_t *seed) {
    float x = rnd(seed);
    switch (kind) {
    case 0: return x * fabsf(rnd(seed)) * 3.0f;
    case 1: return x < -0.9f ? -0.0f : roundf(x * 8) / 8;
    case 2: return fabsf(x) > 0.98f ? x * 3e20f : x;
    default: return x > 0.5f ? 1.0f + x * 1e-6f : x * 1e-7f;
    }
}

/* lloyd_fit_ordered must be lloyd_fit: codes, passes, convergence, centroids bit for bit. */
static int same_as_lloyd_fit(const float *p, size_t n, const uint32_t *order, const float *init, int k, int max_it) {
    Fit want = run_fit(p, n, 1, init, k, max_it);
    float *got = malloc((size_t)k * sizeof *got);
    uint16_t *codes = malloc(n * sizeof *codes);
    void *scratch = malloc(lloyd_ordered_scratch_bytes(n, k));
    memcpy(got, init, (size_t)k * sizeof *got);
    LloydResult r = lloyd_fit_ordered(p, n, order, got, k, max_it, codes, scratch);
    int same = r.iterations == want.result.iterations && r.converged == want.result.converged &&
               !memcmp(got, want.centroids, (size_t)k * sizeof *got) && !memcmp(codes, want.codes, n * sizeof *codes);
    free_fit(&want);
    free(got);
    free(codes);
    free(scratch);
    return same;
}

static void test_sort_order(void) {
    uint64_t seed = 77;
    int bad = 0;
    for (int kind = 0; kind < 4; kind++) {
        size_t n = 3000;
        float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), a[256], b[256];
        uint32_t *order = malloc(n * sizeof *order);
        void *scratch = malloc(lloyd_order_scratch_bytes(n));
        for (size_t i = 0; i < n; i++) p[i] = ordered_point(kind, &seed);
        lloyd_sort_order(p, n, order, scratch);
        for (size_t s = 1; s < n; s++) {
            float x = p[order[s - 1]], y = p[order[s]];
            int tie = !memcmp(&x, &y, sizeof x);
            bad += !(x < y || (x == y && (!signbit(y) || signbit(x)))) || (tie && order[s - 1] > order[s]);
        }
        for (int k = 1; k <= 256; k *= 4) {
            lloyd_init_ranks(p, n, k, a, sorted);
            lloyd_init_ranks_ordered(p, n, order, k, b);
            bad += memcmp(a, b, (size_t)k * sizeof *a) != 0;
        }
        free(p);
        free(sorted);
        free(order);
        free(scratch);
    }
    check(bad == 0, "lloyd_sort_order ascends (-0 before +0, ties by index) and its rank init = lloyd_init_ranks",
          "%d faults", bad);
}

static void test_fit_ordered(void) {
    uint64_t seed = 99;
    static const int ks[] = {2, 16, 64, 100, 256};
    int bad = 0, cases = 0;
    char where[128] = "";
    for (int kind = 0; kind < 4; kind++)
        for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
            for (int start = 0; start < 3; start++) {
                int k = ks[a];
                size_t n = 4 * (size_t)k + 37 * (size_t)(kind + 1) + (size_t)start;
                float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), init[256];
                uint32_t *order = malloc(n * sizeof *order);
                void *scratch = malloc(lloyd_order_scratch_bytes(n));
                for (size_t i = 0; i < n; i++) p[i] = ordered_point(kind, &seed);
                lloyd_sort_order(p, n, order, scratch);
                if (start == 0) lloyd_init_ranks(p, n, k, init, sorted);   /* pcaB's start: ascending */
                for (int j = 0; start == 1 && j < k; j++) init[j] = rnd(&seed);   /* not ascending: the scan */
                for (int j = 0; start == 2 && j < k; j++)   /* ascending, runs of near-equal entries */
                    init[j] = j < k / 2 ? (float)(j / 4) * 1e-9f : 1.0f + (float)j * 1e-7f;
                cases++;
                if (!same_as_lloyd_fit(p, n, order, init, k, LLOYD_MAX_ITERATIONS) ||
                    !same_as_lloyd_fit(p, n, order, init, k, 1)) {
                    bad++;
                    snprintf(where, sizeof where, "kind %d k %d start %d n %zu", kind, k, start, n);
                }
                free(p);
                free(sorted);
                free(order);
                free(scratch);
            }
    check(bad == 0, "lloyd_fit_ordered = lloyd_fit bit for bit (ties, -0, overflow, runs of equal distances)",
          "%d of %d differ, last %s", bad, cases, where);

    /* A point holding a NaN: the walk cannot place it, the scan gives it code 0. */
    float p[130], init[64];
    uint32_t order[130];
    char scratch[3 * 130 * 4];
    for (int i = 0; i < 130; i++) p[i] = (float)((i * 37) % 130) / 13.0f;
    p[5] = NAN;
    lloyd_sort_order(p, 130, order, scratch);
    for (int j = 0; j < 64; j++) init[j] = (float)j / 6.5f;
    check(same_as_lloyd_fit(p, 130, order, init, 64, LLOYD_MAX_ITERATIONS),
          "lloyd_fit_ordered with a NaN point = lloyd_fit", "differs");
}

/* pcaB's points: thousands of values of a principal component, bell-shaped around 0. kind 0
 * smooth; 1 with values so close to 0 that cells around it cannot be summed exactly in any order;
 * 2 with long runs of equal values (equal centroids at the start: not separated, walked); 3 one
 * sign only, far from 0 (every cell's sum exact). */
static float component_point(int kind, uint64_t *seed) {
    float x = (rnd(seed) + rnd(seed) + rnd(seed)) * 2.0f;
    switch (kind) {
    case 0: return x;
    case 1: return fabsf(x) < 0.05f ? x * 1e-25f : x;
    case 2: return fabsf(x) < 1.0f ? roundf(x * 4) / 4 : x;
    default: return 100.0f + x;
    }
}

/* The cells-by-bounds passes at pcaB's sizes: every pass count from 1 up, every k of pcaB. */
static void test_fit_ordered_components(void) {
    uint64_t seed = 4242;
    int bad = 0, cases = 0;
    char where[128] = "";
    for (int kind = 0; kind < 4; kind++) {
        size_t n = 6000 + 1000 * (size_t)kind;
        float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), init[256];
        uint32_t *order = malloc(n * sizeof *order);
        void *scratch = malloc(lloyd_order_scratch_bytes(n));
        for (size_t i = 0; i < n; i++) p[i] = component_point(kind, &seed);
        lloyd_sort_order(p, n, order, scratch);
        for (int k = 2; k <= 256; k *= 2) {
            lloyd_init_ranks(p, n, k, init, sorted);
            static const int passes[] = {1, 2, 3, 5, 8, LLOYD_MAX_ITERATIONS};
            for (size_t a = 0; a < sizeof passes / sizeof passes[0]; a++, cases++)
                if (!same_as_lloyd_fit(p, n, order, init, k, passes[a])) {
                    bad++;
                    snprintf(where, sizeof where, "kind %d k %d passes %d", kind, k, passes[a]);
                }
        }
        free(p);
        free(sorted);
        free(order);
        free(scratch);
    }
    check(bad == 0, "lloyd_fit_ordered = lloyd_fit on component-like points, k 2..256, capped at 1..100 passes",
          "%d of %d differ, last %s", bad, cases, where);

    /* Points all 0 and ascending centroids well apart: cells by bounds with no prefix sums. */
    float zeros[300] = {0}, init[4] = {-3.0f, -1.0f, 1.0f, 3.0f};
    uint32_t order[300];
    char scratch[3 * 300 * 4];
    lloyd_sort_order(zeros, 300, order, scratch);
    check(same_as_lloyd_fit(zeros, 300, order, init, 4, LLOYD_MAX_ITERATIONS),
          "lloyd_fit_ordered on points all 0 = lloyd_fit", "differs");

    /* A cell whose float64 sum in point order rounds: 2 + 2^-21, five 2s, then 12 times -2^-30 and
     * 2^-30 + 2^-53, then two 0s (32 values). In point order each 2^-53 is lost at 12 (ulp 2^-49):
     * the sum is 12 + 2^-21 and the mean 0.375 + 2^-26, a float32 tie, rounds to even, 0.375. The
     * exact sum, 12 + 2^-21 + 12 x 2^-53, rounds in float64 to 12 + 2^-21 + 2^-49, whose mean
     * rounds up to 0.375 + 2^-25. Every value is a multiple of 2^-53 (the prefix sums' resolution
     * here): the mean must not come from them. The other cell: eight 5s. */
    float cell[40];
    cell[0] = 2.0f + 0x1p-21f;
    for (int i = 1; i < 6; i++) cell[i] = 2.0f;
    for (int i = 0; i < 12; i++) {
        cell[6 + 2 * i] = -0x1p-30f;
        cell[7 + 2 * i] = 0x1p-30f + 0x1p-53f;
    }
    cell[30] = cell[31] = 0.0f;
    for (int i = 32; i < 40; i++) cell[i] = 5.0f;
    float two[2] = {0.375f, 5.0f};
    uint32_t cell_order[40];
    char cell_scratch[3 * 40 * 4];
    lloyd_sort_order(cell, 40, cell_order, cell_scratch);
    check(same_as_lloyd_fit(cell, 40, cell_order, two, 2, 1),
          "lloyd_fit_ordered sums a cell in point order where float64 rounds (mean 0.375, not 0.375 + 2^-25)",
          "differs");
}

/* ---- the exactness guards of a cell's sum, each where it decides the mean ----
 * Both cells below are of 5 points, the largest 1024 (a cell of its own), so the prefix sums'
 * resolution is 2^-48 (2^(11 - (62 - ceil(log2 6)))): a value that is not a multiple of 2^-48
 * is truncated there. A cell may take its sum from them only when its least nonzero magnitude's
 * float32 ulp u is at least 2^-48 (then every value of the cell is a multiple of it). Each cell's
 * mean lies within a float64 hair of a float32 midpoint, so the hair the prefix sums would lose
 * decides the rounding. */

/* The centroids after one pass of lloyd_fit_ordered from init; whether the fit, capped at one
 * pass and run to the end, is lloyd_fit's. */
static int ordered_one_pass(const float *p, size_t n, const float *init, int k, float *after) {
    uint32_t order[8];
    char sort_scratch[3 * 8 * 4];
    lloyd_sort_order(p, n, order, sort_scratch);
    uint16_t codes[8];
    void *scratch = malloc(lloyd_ordered_scratch_bytes(n, k));
    memcpy(after, init, (size_t)k * sizeof *after);
    lloyd_fit_ordered(p, n, order, after, k, 1, codes, scratch);
    free(scratch);
    return same_as_lloyd_fit(p, n, order, init, k, 1) && same_as_lloyd_fit(p, n, order, init, k, LLOYD_MAX_ITERATIONS);
}

/* A cell across 0: -2^-50, 1 + 2^-22, 1 + 2^-21, 2. Its least nonzero magnitude is 2^-50 (u =
 * 2^-73), so the sum is not provably exact and is taken in point order, where it is exact:
 * 4 + 3 x 2^-22 - 2^-50; the mean 1 + 3 x 2^-24 - 2^-52 is just below the midpoint of 1 + 2^-23
 * and 1 + 2^-22 and rounds down to 1 + 2^-23. Seen from the positive side alone (least 1 + 2^-22,
 * u = 2^-23) the prefix sums would be taken, -2^-50 truncated to 0: the midpoint, to even, 1 +
 * 2^-22. The same cell negated puts the tiny value on the other side of 0. */
static void test_least_nonzero_both_sides(void) {
    float p[5] = {1.0f + 0x1p-21f, -0x1p-50f, 2.0f, 1024.0f, 1.0f + 0x1p-22f}, init[2] = {1.0f, 1024.0f};
    float negated[5], negated_init[2] = {-1024.0f, -1.0f}, after[2], negated_after[2];
    for (int i = 0; i < 5; i++) negated[i] = -p[i];
    int same = ordered_one_pass(p, 5, init, 2, after);
    same &= ordered_one_pass(negated, 5, negated_init, 2, negated_after);
    check(same && after[0] == 1.0f + 0x1p-23f && negated_after[1] == -(1.0f + 0x1p-23f),
          "lloyd_fit_ordered: a cell's least nonzero magnitude is looked for on both sides of 0 (-2^-50 or +2^-50 "
          "beside values near 1: mean 1 + 2^-23, not 1 + 2^-22)",
          "same as lloyd_fit %d, means %a and %a", same, after[0], negated_after[1]);
}

/* A cell of one sign: 2^-26 + 2^-49, 1/4 - 2^-26, 1 + 2^-22, 2.75. Its least value's ulp is
 * 2^-49, one step finer than the resolution: the sum 4 + 2^-22 + 2^-49 is exact (every partial
 * sum a multiple of 2^-49 below 16) but not from the prefix sums, which would drop the 2^-49.
 * The mean 1 + 2^-24 + 2^-51 is just above the midpoint of 1 and 1 + 2^-23 and rounds up; the
 * prefix sums' 4 + 2^-22 would give the midpoint, to even, 1. */
static void test_ulp_against_resolution(void) {
    float p[5] = {0.25f - 0x1p-26f, 1024.0f, 0x1p-26f + 0x1p-49f, 2.75f, 1.0f + 0x1p-22f}, init[2] = {1.0f, 1024.0f};
    float after[2];
    int same = ordered_one_pass(p, 5, init, 2, after);
    check(same && after[0] == 1.0f + 0x1p-23f,
          "lloyd_fit_ordered: a cell value whose ulp is finer than the prefix sums' resolution is summed without them "
          "(mean 1 + 2^-23, not 1)",
          "same as lloyd_fit %d, mean %a", same, after[0]);
}

/* lloyd_objective's bisection (1-D, ascending centroids) against the plain float64 scan. */
static void test_objective_ascending(void) {
    uint64_t seed = 123;
    int bad = 0, bad_ordered = 0;
    for (int kind = 0; kind < 4; kind++)
        for (int k = 1; k <= 256; k *= 2) {
            size_t n = 700;
            float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), cen[256];
            for (size_t i = 0; i < n; i++) p[i] = ordered_point(kind, &seed);
            if (kind == 3) p[3] = -INFINITY, p[4] = INFINITY;
            lloyd_init_ranks(p + 10, n - 10, k, cen, sorted);
            double want = 0;
            for (size_t i = 0; i < n; i++) {
                double best = INFINITY;
                /* a plain compare, not fmin: aarch64 gcc 12 -O3 crashes vectorizing an fmin reduction */
                for (int c = 0; c < k; c++) {
                    double d = ref_distance_double(p + i, cen + c, 1);
                    if (d < best) best = d;
                }
                want += best;
            }
            double got = lloyd_objective(p, n, 1, cen, k);
            bad += memcmp(&got, &want, sizeof got) != 0;
            uint32_t *order = malloc(n * sizeof *order);
            double *distances = malloc(n * sizeof *distances);
            void *sort_scratch = malloc(lloyd_order_scratch_bytes(n));
            lloyd_sort_order(p, n, order, sort_scratch);
            got = lloyd_objective_ordered(p, n, order, cen, k, distances);
            bad_ordered += memcmp(&got, &want, sizeof got) != 0;
            free(order);
            free(distances);
            free(sort_scratch);
            free(p);
            free(sorted);
        }
    float q[3] = {0.5f, NAN, 2.0f}, c2[2] = {0.0f, 1.0f};
    bad += !isinf(lloyd_objective(q, 3, 1, c2, 2));   /* the scan's best stays +inf for a NaN point */
    check(bad == 0, "lloyd_objective with ascending 1-D centroids = the float64 scan bit for bit", "%d differ", bad);
    uint32_t q_order[3] = {0, 2, 1};
    double q_distances[3];
    bad_ordered += !isinf(lloyd_objective_ordered(q, 3, q_order, c2, 2, q_distances));
    check(bad_ordered == 0, "lloyd_objective_ordered = the float64 scan bit for bit (and +inf with a NaN point)",
          "%d differ", bad_ordered);
}
int main(void) {
    test_sort_order();
    test_fit_ordered();
    test_fit_ordered_components();
    test_least_nonzero_both_sides();
    test_ulp_against_resolution();
    test_objective_ascending();
    return test_exit_code();
}
