/* tests/test_lloyd.c: quant/lloyd.c against SCHEMES.md §8 restated plainly here.
 * - A scalar restatement of Lloyd's algorithm (float32 distances as lloyd.h defines them, float64
 *   sums in point order, first index on ties, a centroid without points stays, stop at an
 *   unchanged assignment or the cap) must give the same codes, pass count and bit-identical
 *   centroids on random instances of every dim 1..16 (the vectorized specialisations 1, 2, 4, 8,
 *   16 and the generic path), K from 1 to 300, n around the block size of 32.
 * - A restatement in float64 throughout gives the same codes and centroids within float rounding.
 * - Hand-made cases computed on paper: exact ties, an empty cluster, convergence after a known
 *   number of passes, the iteration cap, the two initialisations, NaN and overflowing points.
 * - 1-D fits from §8's initialisation come out ascending.
 * The faster fits with lloyd_fit's result are tested in tests/test_lloyd_ordered.c (sorted 1-D
 * points) and tests/test_lloyd_bounded.c (Hamerly's bounds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "quant/lloyd.h"
#include "tests/lloyd_ref.h"
#include "tests/test.h"

/* ---- the plain restatement ---- */

/* §8 word for word; in_double picks float64 distances. Returns the passes made. */
static int ref_lloyd(const float *p, size_t n, int dim, float *cen, int k, int max_it, int *codes, int in_double,
                     int *converged) {
    int *prev = malloc(n * sizeof *prev);
    double *sums = malloc((size_t)k * dim * sizeof *sums);
    size_t *counts = malloc((size_t)k * sizeof *counts);
    int passes = 0;
    *converged = 0;
    for (int it = 0; it < max_it; it++) {
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            int best_c = 0;
            double best = INFINITY;
            for (int c = 0; c < k; c++) {
                double d = in_double ? ref_distance_double(p + i * dim, cen + c * dim, dim)
                                     : (double)ref_distance(p + i * dim, cen + c * dim, dim);
                if (d < best) {
                    best = d;
                    best_c = c;
                }
            }
            if (it == 0 || prev[i] != best_c) changed = 1;
            codes[i] = prev[i] = best_c;
        }
        passes = it + 1;
        if (!changed) {
            *converged = 1;
            break;
        }
        memset(sums, 0, (size_t)k * dim * sizeof *sums);
        memset(counts, 0, (size_t)k * sizeof *counts);
        for (size_t i = 0; i < n; i++) {
            counts[codes[i]]++;
            for (int j = 0; j < dim; j++) sums[codes[i] * dim + j] += p[i * dim + j];
        }
        for (int c = 0; c < k; c++)
            if (counts[c])
                for (int j = 0; j < dim; j++) cen[c * dim + j] = (float)(sums[c * dim + j] / (double)counts[c]);
    }
    free(prev);
    free(sums);
    free(counts);
    return passes;
}
/* ---- against the restatements ---- */

static void test_against_reference(void) {
    static const int dims[] = {1, 2, 3, 4, 5, 8, 16};
    static const int ks[] = {1, 2, 7, 16, 33, 256};
    static const size_t ns[] = {1, 5, 31, 32, 33, 100, 1000};
    uint64_t seed = 42;
    int cases = 0, random_bad = 0, grid_bad = 0, dbl_bad = 0, dbl_cases = 0;
    double worst_rel = 0;
    char where[160] = "", where_grid[160] = "", where_dbl[160] = "";
    for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++)
                for (int grid = 0; grid < 2; grid++) {
                    int dim = dims[a], k = ks[b];
                    size_t n = ns[c];
                    if (k > 64 && n < 100) continue;
                    float *p = random_points(n, dim, &seed, grid);
                    float *init = malloc((size_t)k * dim * sizeof *init), *ref = malloc((size_t)k * dim * sizeof *ref);
                    for (int i = 0; i < k * dim; i++) init[i] = rnd(&seed);
                    memcpy(ref, init, (size_t)k * dim * sizeof *ref);
                    int *ref_codes = malloc(n * sizeof *ref_codes), converged;
                    int passes = ref_lloyd(p, n, dim, ref, k, LLOYD_MAX_ITERATIONS, ref_codes, 0, &converged);
                    Fit f = run_fit(p, n, dim, init, k, LLOYD_MAX_ITERATIONS);
                    cases++;
                    int codes_same = 1;
                    for (size_t i = 0; i < n; i++) codes_same &= f.codes[i] == ref_codes[i];
                    int cen_same = !memcmp(f.centroids, ref, (size_t)k * dim * sizeof *ref);
                    int passes_same = f.result.iterations == passes && f.result.converged == converged;
                    if (!(codes_same && cen_same && passes_same)) {
                        if (grid) grid_bad++;
                        else random_bad++;
                        snprintf(grid ? where_grid : where, 160, "dim %d k %d n %zu: codes %d centroids %d passes %d/%d",
                                 dim, k, n, codes_same, cen_same, f.result.iterations, passes);
                    }
                    if (!grid) {
                        /* The float64 restatement: same codes, centroids within float rounding. */
                        memcpy(ref, init, (size_t)k * dim * sizeof *ref);
                        ref_lloyd(p, n, dim, ref, k, LLOYD_MAX_ITERATIONS, ref_codes, 1, &converged);
                        dbl_cases++;
                        int same = 1;
                        for (size_t i = 0; i < n; i++) same &= f.codes[i] == ref_codes[i];
                        for (int i = 0; i < k * dim; i++) {
                            double rel = fabs((double)f.centroids[i] - ref[i]) / fmax(fabs(ref[i]), 1e-3);
                            worst_rel = max_or_inf(worst_rel, rel);
                        }
                        if (!same) {
                            dbl_bad++;
                            snprintf(where_dbl, sizeof where_dbl, "dim %d k %d n %zu", dim, k, n);
                        }
                    }
                    free_fit(&f);
                    free(p);
                    free(init);
                    free(ref);
                    free(ref_codes);
                }
    check(random_bad == 0, "lloyd_fit = the float32 restatement on random points (codes, passes, centroids bit for bit)",
          "%d of %d differ, last %s", random_bad, cases / 2, where);
    check(grid_bad == 0, "lloyd_fit = the float32 restatement on grid points full of exact ties",
          "%d differ, last %s", grid_bad, where_grid);
    check(dbl_bad == 0 && worst_rel <= 2e-6, "lloyd_fit = the float64 restatement (same codes, centroids within 2e-6)",
          "%d of %d differ in codes (last %s), worst relative centroid difference %.3g", dbl_bad, dbl_cases, where_dbl,
          worst_rel);
}

/* lloyd_assign (vectorized) and lloyd_nearest (scalar) give the same code for every point, and
 * lloyd_assign counts the changes it makes. */
static void test_assign_matches_nearest(void) {
    uint64_t seed = 7;
    int bad = 0, count_bad = 0, cases = 0;
    char where[128] = "";
    for (int dim = 1; dim <= 16; dim++)
        for (int grid = 0; grid < 2; grid++)
            for (int k = 1; k <= 70; k += 23) {
                size_t n = 97;
                float *p = random_points(n, dim, &seed, grid), *cen = random_points((size_t)k, dim, &seed, grid);
                uint16_t *codes = malloc(n * sizeof *codes);
                for (size_t i = 0; i < n; i++) codes[i] = (uint16_t)(i % 3);   /* a previous assignment */
                size_t expect_changed = 0;
                for (size_t i = 0; i < n; i++) expect_changed += lloyd_nearest(p + i * dim, dim, cen, k) != (int)(i % 3);
                size_t changed = lloyd_assign(p, n, dim, cen, k, codes);
                for (size_t i = 0; i < n; i++)
                    if (codes[i] != lloyd_nearest(p + i * dim, dim, cen, k)) {
                        bad++;
                        snprintf(where, sizeof where, "dim %d k %d grid %d point %zu", dim, k, grid, i);
                    }
                count_bad += changed != expect_changed;
                cases++;
                free(p);
                free(cen);
                free(codes);
            }
    check(bad == 0, "lloyd_assign = lloyd_nearest for every point, dims 1..16, with and without ties",
          "%d codes differ (last %s)", bad, where);
    check(count_bad == 0, "lloyd_assign returns the number of codes it changed", "%d of %d cases wrong", count_bad, cases);
}

/* ---- hand-made cases ---- */

static void test_ties(void) {
    /* 1-D: the point 1 is at distance 1 from both 0 and 2; 40 copies cover every lane and a tail. */
    float p[40], cen[2] = {0.0f, 2.0f};
    for (int i = 0; i < 40; i++) p[i] = 1.0f;
    uint16_t codes[40];
    lloyd_assign(p, 40, 1, cen, 2, codes);
    int all_zero = 1;
    for (int i = 0; i < 40; i++) all_zero &= codes[i] == 0;
    check(all_zero && lloyd_nearest(p, 1, cen, 2) == 0, "lloyd tie at a midpoint -> the lower index",
          "codes[0] %d, codes[39] %d", codes[0], codes[39]);
    float rev[2] = {2.0f, 0.0f};   /* the lower index, not the lower value */
    lloyd_assign(p, 40, 1, rev, 2, codes);
    check(codes[0] == 0 && codes[39] == 0 && lloyd_nearest(p, 1, rev, 2) == 0,
          "lloyd tie -> the lower index even when it holds the larger value", "codes %d %d", codes[0], codes[39]);

    /* 2-D: (0,0) and (1,1) are equally far from (1,0) and (0,1); (0.5, 0.5) from all four corners. */
    float p2[6] = {0, 0, 1, 1, 0.5f, 0.5f};
    float c2[8] = {1, 1, 1, 0, 0, 1, 0, 0};   /* (1,1) (1,0) (0,1) (0,0) */
    uint16_t codes2[3];
    lloyd_assign(p2, 3, 2, c2 + 2, 2, codes2);   /* only (1,0) and (0,1) */
    int two = codes2[0] == 0 && codes2[1] == 0;
    lloyd_assign(p2, 3, 2, c2, 4, codes2);
    check(two && codes2[0] == 3 && codes2[1] == 0 && codes2[2] == 0, "lloyd 2-D ties -> the lower index",
          "codes %d %d %d", codes2[0], codes2[1], codes2[2]);

    /* Three equal centroids at the points' mean: every point to the first, which stays at the
     * mean, and the others get no points and stay too: converged in 2 passes. */
    float p3[4] = {-1, 0, 1, 2}, c3[3] = {0.5f, 0.5f, 0.5f};
    Fit f = run_fit(p3, 4, 1, c3, 3, LLOYD_MAX_ITERATIONS);
    check(f.codes[0] == 0 && f.codes[3] == 0 && f.centroids[0] == 0.5f && f.centroids[1] == 0.5f &&
              f.centroids[2] == 0.5f && f.result.iterations == 2 && f.result.converged,
          "lloyd equal centroids: all points to the first, the rest stay",
          "centroids %g %g %g after %d passes", f.centroids[0], f.centroids[1], f.centroids[2], f.result.iterations);
    free_fit(&f);
}

static void test_empty_cluster(void) {
    /* The centroid 100 is never nearest: it keeps its value exactly. */
    float p[6] = {0, 0.25f, 0.5f, 1, 1.25f, 1.5f}, init[3] = {0, 100, 1.5f};
    Fit f = run_fit(p, 6, 1, init, 3, LLOYD_MAX_ITERATIONS);
    check(f.centroids[1] == 100.0f && f.centroids[0] == 0.25f && f.centroids[2] == 1.25f,
          "lloyd a centroid with no points stays where it is", "centroids %g %g %g", f.centroids[0], f.centroids[1],
          f.centroids[2]);
    free_fit(&f);

    /* Duplicated initial centroids in 1-D: the second never gets points, stays, and the first
     * moves past it, so the result is not ascending (a caller storing a table sorts it). */
    float q[3] = {1, 1, 9}, dup[3] = {0, 0, 10};
    f = run_fit(q, 3, 1, dup, 3, LLOYD_MAX_ITERATIONS);
    check(f.centroids[0] == 1.0f && f.centroids[1] == 0.0f && f.centroids[2] == 9.0f,
          "lloyd 1-D with duplicated initial centroids gives {1, 0, 9} (not ascending)", "centroids %g %g %g",
          f.centroids[0], f.centroids[1], f.centroids[2]);
    free_fit(&f);
}

static void test_convergence_and_cap(void) {
    /* On paper: {0,1,2,10} from {0,1}. Pass 1: {0} {1,2,10} -> 0, 13/3. Pass 2: {0,1,2} {10} ->
     * 1, 10. Pass 3: the same assignment: stop, 3 passes, converged. */
    float p[4] = {0, 1, 2, 10}, init[2] = {0, 1};
    Fit f = run_fit(p, 4, 1, init, 2, LLOYD_MAX_ITERATIONS);
    check(f.result.iterations == 3 && f.result.converged && f.centroids[0] == 1.0f && f.centroids[1] == 10.0f &&
              f.codes[2] == 0 && f.codes[3] == 1,
          "lloyd stops at the first unchanged assignment (3 passes on paper)", "%d passes, converged %d, centroids %g %g",
          f.result.iterations, f.result.converged, f.centroids[0], f.centroids[1]);
    free_fit(&f);

    /* Cap 1: one assignment and one move, reported as not converged. */
    f = run_fit(p, 4, 1, init, 2, 1);
    check(f.result.iterations == 1 && !f.result.converged && f.centroids[0] == 0.0f &&
              f.centroids[1] == (float)(13.0 / 3.0),
          "lloyd cap of 1 pass: one move, not converged", "%d passes, centroids %g %g", f.result.iterations,
          f.centroids[0], f.centroids[1]);
    free_fit(&f);

    /* Already at the means: pass 2 sees the same assignment. */
    float q[4] = {0, 0, 10, 10}, at[2] = {0, 10};
    f = run_fit(q, 4, 1, at, 2, LLOYD_MAX_ITERATIONS);
    check(f.result.iterations == 2 && f.result.converged && f.centroids[0] == 0.0f && f.centroids[1] == 10.0f,
          "lloyd from the fixed point: 2 passes", "%d passes", f.result.iterations);
    free_fit(&f);

    /* A slow instance (points 0..199, centroids 0 and 1: the boundary creeps up a few points a
     * pass): the cap of 100 binds and 5 stops at 5; both equal the restatement's centroids. */
    float slow[200], two[2] = {0, 1}, ref[2];
    for (int i = 0; i < 200; i++) slow[i] = (float)(i * i) / 200.0f;
    int ref_codes[200], converged;
    memcpy(ref, two, sizeof ref);
    int ref_passes = ref_lloyd(slow, 200, 1, ref, 2, 1000, ref_codes, 0, &converged);
    f = run_fit(slow, 200, 1, two, 2, LLOYD_MAX_ITERATIONS);
    Fit g = run_fit(slow, 200, 1, two, 2, 5);
    memcpy(ref, two, sizeof ref);
    ref_lloyd(slow, 200, 1, ref, 2, 5, ref_codes, 0, &converged);
    check(ref_passes > 5 && g.result.iterations == 5 && !g.result.converged && !memcmp(g.centroids, ref, sizeof ref),
          "lloyd cap of 5 passes on a slow instance = the restatement's 5 passes", "restatement needs %d passes; fit %d",
          ref_passes, g.result.iterations);
    free_fit(&f);
    free_fit(&g);

    /* The default cap: a 1-D instance that needs more than 100 passes stops at exactly 100. */
    float *many = malloc(20000 * sizeof *many), start[8];
    uint64_t seed = 99;
    for (int i = 0; i < 20000; i++) many[i] = rnd(&seed) * rnd(&seed) * rnd(&seed);
    for (int j = 0; j < 8; j++) start[j] = -0.01f + 0.001f * (float)j;   /* all crowded at one end */
    float ref8[8];
    int *codes8 = malloc(20000 * sizeof *codes8);
    memcpy(ref8, start, sizeof ref8);
    ref_passes = ref_lloyd(many, 20000, 1, ref8, 8, 1000, codes8, 0, &converged);
    f = run_fit(many, 20000, 1, start, 8, LLOYD_MAX_ITERATIONS);
    check(ref_passes > LLOYD_MAX_ITERATIONS && f.result.iterations == LLOYD_MAX_ITERATIONS && !f.result.converged,
          "lloyd stops at the cap of 100 passes", "restatement converges after %d, fit made %d", ref_passes,
          f.result.iterations);
    free_fit(&f);
    free(many);
    free(codes8);
}

static void test_initialisations(void) {
    /* n = 8, K = 4: ranks floor((2j+1) 8 / 8) = 1, 3, 5, 7 of -1, -0, +0, 1, 2, 3, 5, 7. */
    float p[8] = {5, -1, 3, 0.0f, 2, -0.0f, 7, 1}, keep[8], cen[4], sorted[8];
    memcpy(keep, p, sizeof p);
    lloyd_init_ranks(p, 8, 4, cen, sorted);
    check(cen[0] == 0.0f && signbit(cen[0]) && cen[1] == 1.0f && cen[2] == 3.0f && cen[3] == 7.0f,
          "lloyd_init_ranks n=8 K=4: ranks 1,3,5,7 (-0 sorts before +0)", "got %g %g %g %g", cen[0], cen[1], cen[2],
          cen[3]);
    int ascending = 1;
    for (int i = 1; i < 8; i++) ascending &= sorted[i - 1] <= sorted[i];
    check(ascending && signbit(sorted[1]) && !signbit(sorted[2]) && !memcmp(p, keep, sizeof p),
          "lloyd_init_ranks leaves the points alone and the scratch sorted", "sorted[1] %g sorted[2] %g", sorted[1],
          sorted[2]);

    /* n = 10, K = 3: ranks floor(10/6) = 1, floor(30/6) = 5, floor(50/6) = 8 of 0..9 (given reversed). */
    float q[10], c3[3], s10[10];
    for (int i = 0; i < 10; i++) q[i] = (float)(9 - i);
    lloyd_init_ranks(q, 10, 3, c3, s10);
    check(c3[0] == 1.0f && c3[1] == 5.0f && c3[2] == 8.0f, "lloyd_init_ranks n=10 K=3: ranks 1, 5, 8",
          "got %g %g %g", c3[0], c3[1], c3[2]);

    /* n = 3 < K = 4: ranks floor((2j+1) 3 / 8) = 0, 1, 1, 2. */
    float r[3] = {30, 10, 20}, c4[4], s3[3];
    lloyd_init_ranks(r, 3, 4, c4, s3);
    check(c4[0] == 10.0f && c4[1] == 20.0f && c4[2] == 20.0f && c4[3] == 30.0f,
          "lloyd_init_ranks n=3 K=4: ranks 0, 1, 1, 2", "got %g %g %g %g", c4[0], c4[1], c4[2], c4[3]);

    /* vq: n = 10, K = 4, dim 2: points floor(k 10 / 4) = 0, 2, 5, 7. */
    float v[20], out[8];
    for (int i = 0; i < 20; i++) v[i] = (float)(i / 2) + (i % 2 ? 0.5f : 0.0f);
    lloyd_init_spread(v, 10, 2, 4, out);
    check(out[0] == 0 && out[1] == 0.5f && out[2] == 2 && out[3] == 2.5f && out[4] == 5 && out[5] == 5.5f &&
              out[6] == 7 && out[7] == 7.5f,
          "lloyd_init_spread n=10 K=4: points 0, 2, 5, 7", "got (%g,%g) (%g,%g) (%g,%g) (%g,%g)", out[0], out[1], out[2],
          out[3], out[4], out[5], out[6], out[7]);
    /* n = 3 < K = 4: points floor(3k / 4) = 0, 0, 1, 2 (1-D). */
    float three[3] = {10, 20, 30}, c4s[4];
    lloyd_init_spread(three, 3, 1, 4, c4s);
    check(c4s[0] == 10 && c4s[1] == 10 && c4s[2] == 20 && c4s[3] == 30, "lloyd_init_spread n=3 K=4: points 0, 0, 1, 2",
          "got %g %g %g %g", c4s[0], c4s[1], c4s[2], c4s[3]);
    /* K = n: every point once, in order. */
    float all[20];
    lloyd_init_spread(v, 10, 2, 10, all);
    check(!memcmp(all, v, sizeof all), "lloyd_init_spread K=n takes every point in order", "differs");
}

/* 1-D fits from the rank initialisation on data with many repeated values come out ascending. */
static void test_1d_sorted(void) {
    uint64_t seed = 2024;
    int bad = 0, cases = 0;
    for (int trial = 0; trial < 40; trial++) {
        size_t n = 500 + (size_t)trial * 97;
        int k = 2 << (trial % 4);   /* 2, 4, 8, 16: nuq's table sizes */
        float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), cen[16];
        for (size_t i = 0; i < n; i++) {
            float x = rnd(&seed) * rnd(&seed);
            p[i] = trial % 2 ? roundf(x * 64) / 64 : x;   /* odd trials: many equal values */
        }
        lloyd_init_ranks(p, n, k, cen, sorted);
        int init_strict = 1;
        for (int j = 1; j < k; j++) init_strict &= cen[j - 1] < cen[j];
        Fit f = run_fit(p, n, 1, cen, k, LLOYD_MAX_ITERATIONS);
        if (init_strict) {
            cases++;
            for (int j = 1; j < k; j++) bad += !(f.centroids[j - 1] < f.centroids[j]);
        }
        free_fit(&f);
        free(p);
        free(sorted);
    }
    check(cases >= 30 && bad == 0, "lloyd 1-D fits from distinct rank initialisations stay strictly ascending",
          "%d out of order in %d cases", bad, cases);
}

static void test_special_points(void) {
    /* NaN coordinates: every distance NaN, never lower than +inf: code 0. Huge coordinates:
     * every distance overflows to +inf, all equal: code 0. Then a finite point picks normally. */
    float p[6] = {NAN, 1, 3e30f, -3e30f, 0.9f, 0.8f}, cen[4] = {0, 0, 1, 1};
    uint16_t codes[3];
    lloyd_assign(p, 3, 2, cen, 2, codes);
    check(codes[0] == 0 && codes[1] == 0 && codes[2] == 1 && lloyd_nearest(p, 2, cen, 2) == 0 &&
              lloyd_nearest(p + 2, 2, cen, 2) == 0,
          "lloyd NaN and overflowing points take code 0", "codes %d %d %d", codes[0], codes[1], codes[2]);

    /* K = 1: every code 0, the centroid is the mean (1 pass changes, pass 2 does not). */
    float q[5] = {1, 2, 3, 4, 10}, one = -7;
    Fit f = run_fit(q, 5, 1, &one, 1, LLOYD_MAX_ITERATIONS);
    check(f.centroids[0] == 4.0f && f.result.iterations == 2 && f.result.converged, "lloyd K=1 gives the mean",
          "centroid %g after %d passes", f.centroids[0], f.result.iterations);
    free_fit(&f);
}

static void test_objective(void) {
    float p[4] = {0, 1, 2, 10}, cen[2] = {1, 10};
    double obj = lloyd_objective(p, 4, 1, cen, 2);
    check(obj == 2.0, "lloyd_objective on paper: {0,1,2,10} to {1,10} = 2", "got %.17g", obj);

    /* Float64 throughout: 0.1f's square differs from its float32 square. */
    float x = 0.1f, zero = 0;
    double want = (double)0.1f * (double)0.1f;
    check(lloyd_objective(&x, 1, 1, &zero, 1) == want, "lloyd_objective sums in float64", "got %.17g want %.17g",
          lloyd_objective(&x, 1, 1, &zero, 1), want);

    /* Lloyd never raises the objective: after a fit it is at most the initial codebook's. */
    uint64_t seed = 5;
    int bad = 0;
    for (int trial = 0; trial < 10; trial++) {
        int dim = 1 << (trial % 5), k = 16;
        size_t n = 400;
        float *pts = random_points(n, dim, &seed, 0), init[16 * 16];
        lloyd_init_spread(pts, n, dim, k, init);
        Fit f = run_fit(pts, n, dim, init, k, LLOYD_MAX_ITERATIONS);
        bad += lloyd_objective(pts, n, dim, f.centroids, k) > lloyd_objective(pts, n, dim, init, k);
        free_fit(&f);
        free(pts);
    }
    check(bad == 0, "lloyd fits never raise the objective", "%d of 10 raised it", bad);
}

/* Many blocks: a 1-D nuq-like fit of 100,000 points, bit for bit as the restatement. */
static void test_large_1d(void) {
    size_t n = 100000;
    uint64_t seed = 31337;
    float *p = malloc(n * sizeof *p), *sorted = malloc(n * sizeof *sorted), cen[8], ref[8];
    for (size_t i = 0; i < n; i++) p[i] = rnd(&seed) * fabsf(rnd(&seed));
    lloyd_init_ranks(p, n, 8, cen, sorted);
    memcpy(ref, cen, sizeof ref);
    int *ref_codes = malloc(n * sizeof *ref_codes), converged;
    int passes = ref_lloyd(p, n, 1, ref, 8, LLOYD_MAX_ITERATIONS, ref_codes, 0, &converged);
    Fit f = run_fit(p, n, 1, cen, 8, LLOYD_MAX_ITERATIONS);
    int same = f.result.iterations == passes && !memcmp(f.centroids, ref, sizeof ref);
    for (size_t i = 0; i < n; i++) same &= f.codes[i] == ref_codes[i];
    check(same, "lloyd 100,000 1-D points, K=8 = the restatement bit for bit", "%d vs %d passes", f.result.iterations,
          passes);
    free_fit(&f);
    free(p);
    free(sorted);
    free(ref_codes);
}

int main(void) {
    test_against_reference();
    test_assign_matches_nearest();
    test_ties();
    test_empty_cluster();
    test_convergence_and_cap();
    test_initialisations();
    test_1d_sorted();
    test_special_points();
    test_objective();
    test_large_1d();
    return test_exit_code();
}
