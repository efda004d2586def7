/* tests/bench_lloyd.c: how long quant/lloyd.c's fits take at TinyLlama's calibration shape, to
 * project `./run calibrate`'s fitting time. Not a test (no PASS/FAIL; `make test` does not run it):
 *   make build/rel/tests/bench_lloyd && build/rel/tests/bench_lloyd [fits_per_shape]
 * Synthetic points shaped like the real ones: nuq3-g64's z = x / max|x| over groups of 64
 * Gaussian values (~4.2M 1-D points: 16,384 tokens x 4 KV heads x 64 channels), K = 8; vq8-d4's
 * sub-vectors of rows scaled to norm sqrt(64) (16,384 points of 4 floats), K = 256; and vq8-d8.
 * Times are CPU seconds of this thread (the machine is shared), for the whole fit including the
 * initialisation, with the passes made; TinyLlama needs 22 layers x 2 sides = 44 nuq fits per
 * key and 44 x 4 KV heads x 64/D vq fits per key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "quant/lloyd.h"
#include "tests/test.h"

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A standard normal value (Box-Muller on test.h's reproducible uniforms). */
static float gaussian(uint64_t *s) {
    double u = 0.5 * (rnd(s) + 1.0) + 1e-12, v = 0.5 * (rnd(s) + 1.0);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Groups of 64 Gaussian values with a few heavier channels, each divided by its max |x|. */
static void make_nuq_points(float *z, size_t n, uint64_t *seed) {
    for (size_t g = 0; g < n / 64; g++) {
        float x[64], m = 0;
        for (int i = 0; i < 64; i++) {
            x[i] = gaussian(seed) * (i % 16 == 3 ? 4.0f : 1.0f);
            if (fabsf(x[i]) > m) m = fabsf(x[i]);
        }
        for (int i = 0; i < 64; i++) z[g * 64 + i] = x[i] / m;
    }
}

/* Rows of 64 correlated Gaussian values scaled to norm sqrt(64); sub-vector j of each row. */
static void make_vq_points(float *p, size_t n, int dim, int j, uint64_t *seed) {
    for (size_t r = 0; r < n; r++) {
        float x[64];
        double norm = 0;
        float common = gaussian(seed);
        for (int i = 0; i < 64; i++) {
            x[i] = 0.6f * common + gaussian(seed) * (1.0f + (float)(i % 7));
            norm += (double)x[i] * x[i];
        }
        float scale = (float)(8.0 / sqrt(norm));
        for (int i = 0; i < dim; i++) p[r * (size_t)dim + (size_t)i] = x[j * dim + i] * scale;
    }
}

typedef struct {
    double seconds;
    int passes;
} Timing;

static Timing fit_nuq(const float *z, size_t n, int k, float *sorted, uint16_t *codes, void *scratch) {
    float centroids[16];
    double t0 = cpu_seconds();
    lloyd_init_ranks(z, n, k, centroids, sorted);
    double t1 = cpu_seconds();
    LloydResult r = lloyd_fit(z, n, 1, centroids, k, LLOYD_MAX_ITERATIONS, codes, scratch);
    double t2 = cpu_seconds();
    printf("  nuq K=%d n=%zu: init (sort) %.3f s, %d passes%s %.3f s (%.2f ms a pass), table %.4f .. %.4f\n", k, n,
           t1 - t0, r.iterations, r.converged ? " (converged)" : " (cap)", t2 - t1, 1e3 * (t2 - t1) / r.iterations,
           centroids[0], centroids[k - 1]);
    return (Timing){t2 - t0, r.iterations};
}

static Timing fit_vq(const float *p, size_t n, int dim, int k, float *centroids, uint16_t *codes, void *scratch) {
    double t0 = cpu_seconds();
    lloyd_init_spread(p, n, dim, k, centroids);
    LloydResult r = lloyd_fit(p, n, dim, centroids, k, LLOYD_MAX_ITERATIONS, codes, scratch);
    double t1 = cpu_seconds();
    return (Timing){t1 - t0, r.iterations};
}

int main(int argc, char **argv) {
    int fits = argc > 1 ? atoi(argv[1]) : 4;
    if (fits < 1) fits = 1;
    uint64_t seed = 12345;
    const size_t n_nuq = 16384u * 4u * 64u, n_vq = 16384;
    float *z = malloc(n_nuq * sizeof *z), *sorted = malloc(n_nuq * sizeof *sorted);
    uint16_t *codes = malloc(n_nuq * sizeof *codes);
    void *scratch = malloc(lloyd_scratch_bytes(16, 4096));
    float *points = malloc(n_vq * 16 * sizeof *points), *centroids = malloc(4096 * 16 * sizeof *centroids);

    printf("nuq (1-D, %zu points):\n", n_nuq);
    double nuq3 = 0;
    for (int f = 0; f < fits; f++) {
        make_nuq_points(z, n_nuq, &seed);
        nuq3 += fit_nuq(z, n_nuq, 8, sorted, codes, scratch).seconds / fits;
    }
    fit_nuq(z, n_nuq, 4, sorted, codes, scratch);
    fit_nuq(z, n_nuq, 16, sorted, codes, scratch);

    static const int dims[] = {4, 8, 2, 16};
    double vq_fit[17] = {0};
    for (int d = 0; d < 4; d++) {
        int dim = dims[d];
        double total = 0, worst = 0;
        int passes = 0, capped = 0;
        for (int f = 0; f < fits; f++) {
            make_vq_points(points, n_vq, dim, f % (64 / dim), &seed);
            Timing t = fit_vq(points, n_vq, dim, 256, centroids, codes, scratch);
            total += t.seconds;
            passes += t.passes;
            capped += t.passes == LLOYD_MAX_ITERATIONS;
            if (t.seconds > worst) worst = t.seconds;
        }
        vq_fit[dim] = total / fits;
        printf("vq8-d%d (%zu points of %d, K=256): %.3f s a fit on average (worst %.3f), %.1f passes on average "
               "(%d of %d at the cap), %.2f ms a pass\n", dim, n_vq, dim, total / fits, worst, (double)passes / fits,
               capped, fits, 1e3 * total / passes);
    }
    /* vq12-d8: the largest codebook SCHEMES.md names (4096 centroids), needs 4 x 4096 points. */
    make_vq_points(points, n_vq, 8, 0, &seed);
    Timing t12 = fit_vq(points, n_vq, 8, 4096, centroids, codes, scratch);
    printf("vq12-d8 (%zu points of 8, K=4096): %.3f s, %d passes\n", n_vq, t12.seconds, t12.passes);

    int nuq_fits = 22 * 2, vq_fits = 22 * 2 * 4 * (64 / 4);
    double one_core = nuq_fits * nuq3 + vq_fits * vq_fit[4];
    printf("projection for TinyLlama (nuq3-g64: %d fits, vq8-d4: %d fits): %.0f s on one core, %.0f s on two\n",
           nuq_fits, vq_fits, one_core, one_core / 2);
    free(z);
    free(sorted);
    free(codes);
    free(scratch);
    free(points);
    free(centroids);
    return 0;
}
