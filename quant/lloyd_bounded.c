/* quant/lloyd_bounded.c: lloyd_fit with Hamerly's distance bounds (lloyd.h's lloyd_fit_bounded),
 * bit for bit: the points whose bounds settle their code skip the scan (vq's and rvq's codebooks
 * of 256 entries, many passes). */
#include "quant/lloyd_internal.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- Lloyd with distance bounds (Hamerly's) ----
 * Each point keeps an upper bound on its true (real-number) distance to its centroid and a lower
 * bound on its true distance to every other; when a centroid moves by delta, the first grows by
 * its centroid's delta and the second shrinks by the largest other delta (the triangle
 * inequality). A point whose bounds keep its centroid nearer than any other by more than the
 * float32 rounding of lloyd.h's distance keeps its code without a scan: the scan would give it
 * the same (strictly least computed distance, so no tie is involved). The others are scanned as
 * lloyd_assign scans. Codes, passes and centroids are lloyd_fit's, bit for bit. */

/* lloyd.h's float32 distance over <= 16 coordinates, finite and at most 2^40 in magnitude, is
 * within BOUND_RELATIVE x the true squared distance plus BOUND_ABSOLUTE (underflow) of it: each
 * difference and square rounds by 2^-24 relative, the sum of <= 16 nonnegative terms by 15 x
 * 2^-24; 18 x 2^-24 < 2^-18. Bounds in float64 round by ~2^-53: widened by 2^-40 at each step. */
#define BOUND_RELATIVE 0x1p-18
#define BOUND_ABSOLUTE 0x1p-120
#define BOUND_WIDEN 0x1p-40
#define BOUND_MAX_COORDINATE 0x1p40

static double upper_from(float computed) {
    return sqrt(((double)computed + BOUND_ABSOLUTE) / (1 - BOUND_RELATIVE)) * (1 + BOUND_WIDEN);
}

static double lower_from(float computed) {
    double d = ((double)computed - BOUND_ABSOLUTE) / (1 + BOUND_RELATIVE);
    return d > 0 ? sqrt(d) * (1 - BOUND_WIDEN) : 0;
}

/* Whether the computed distance to the point's centroid is surely below every other's. */
static int keeps_code(double upper, double lower) {
    return lower > 0 && upper * upper * (1 + BOUND_RELATIVE) + BOUND_ABSOLUTE <
                            lower * lower * (1 - BOUND_RELATIVE) - BOUND_ABSOLUTE;
}

static int within_bounds_range(const float *x, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (!(fabsf(x[i]) <= BOUND_MAX_COORDINATE)) return 0;   /* also 0 on a NaN */
    return 1;
}

/* Per point: the two bounds, then for the points a pass scans their index, code and two
 * distances; per centroid: its displacement and last position. */
size_t lloyd_bounded_scratch_bytes(size_t n, int dim, int k) {
    return lloyd_scratch_bytes(dim, k) + n * (2 * sizeof(double) + sizeof(uint32_t) + sizeof(int32_t) + 2 * sizeof(float)) +
           (size_t)k * (sizeof(double) + (size_t)dim * sizeof(float));
}

typedef struct {
    double *upper, *lower, *moved;
    float *old, *best, *second;
    uint32_t *pending;
    int32_t *code;
} BoundScratch;

static BoundScratch bound_scratch(void *scratch, size_t n, int dim, int k) {
    BoundScratch b;
    char *p = (char *)scratch + lloyd_scratch_bytes(dim, k);
    b.upper = (double *)p;
    b.lower = b.upper + n;
    b.moved = b.lower + n;
    b.old = (float *)(b.moved + k);
    b.best = b.old + (size_t)k * dim;
    b.second = b.best + n;
    b.pending = (uint32_t *)(b.second + n);
    b.code = (int32_t *)(b.pending + n);
    return b;
}

/* One assignment pass: the points whose bounds do not keep their code (the upper one tightened
 * to the computed distance first), and every point on the first pass, scanned; their codes and
 * bounds renewed. Returns how many codes changed. */
static size_t bounded_pass(const float *points, size_t n, int dim, const float *centroids, int k, uint16_t *codes,
                           int first_pass, BoundScratch *b) {
    size_t m = 0, changed = 0;
    for (size_t i = 0; i < n; i++) {
        if (!first_pass) {
            if (keeps_code(b->upper[i], b->lower[i])) continue;
            b->upper[i] = upper_from(squared_distance(points + i * (size_t)dim, centroids + (size_t)codes[i] * dim, dim));
            if (keeps_code(b->upper[i], b->lower[i])) continue;
        }
        b->pending[m++] = (uint32_t)i;
    }
    lloyd_scan_listed(points, b->pending, m, dim, centroids, k, b->code, b->best, b->second);
    for (size_t j = 0; j < m; j++) {
        uint32_t i = b->pending[j];
        uint16_t code = (uint16_t)b->code[j];
        changed += codes[i] != code;
        codes[i] = code;
        b->upper[i] = upper_from(b->best[j]);
        b->lower[i] = lower_from(b->second[j]);
    }
    return changed;
}

/* After a move: each centroid's true displacement (widened), and every point's bounds moved by it. */
static void move_bounds(const float *centroids, int k, int dim, const uint16_t *codes, size_t n, BoundScratch *b) {
    double most = 0, next = 0;
    int most_c = -1;
    for (int c = 0; c < k; c++) {
        double sum = 0;
        for (int j = 0; j < dim; j++) {
            double t = (double)centroids[(size_t)c * dim + j] - (double)b->old[(size_t)c * dim + j];
            sum += t * t;
        }
        double moved = sqrt(sum) * (1 + BOUND_WIDEN);
        b->moved[c] = moved;
        if (moved > most) {
            next = most;
            most = moved;
            most_c = c;
        } else if (moved > next) {
            next = moved;
        }
    }
    for (size_t i = 0; i < n; i++) {
        b->upper[i] = (b->upper[i] + b->moved[codes[i]]) * (1 + BOUND_WIDEN);
        b->lower[i] = (b->lower[i] - (codes[i] == most_c ? next : most)) * (1 - BOUND_WIDEN);
    }
}

LloydResult lloyd_fit_bounded(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                              uint16_t *codes, void *scratch) {
    LloydResult r = {0, 0};
    if (!within_bounds_range(points, n * (size_t)dim) || !within_bounds_range(centroids, (size_t)k * dim)) {
        lloyd_scan_passes(points, n, dim, centroids, k, 0, max_iterations, codes, scratch, &r);
        return r;
    }
    BoundScratch b = bound_scratch(scratch, n, dim, k);
    for (int pass = 0; pass < max_iterations; pass++) {
        size_t changed = bounded_pass(points, n, dim, centroids, k, codes, pass == 0, &b);
        r.iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            r.converged = 1;
            break;
        }
        memcpy(b.old, centroids, (size_t)k * dim * sizeof *centroids);
        lloyd_move_all(points, n, dim, centroids, k, codes, scratch);
        move_bounds(centroids, k, dim, codes, n, &b);
    }
    return r;
}

