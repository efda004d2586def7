/* quant/lloyd.c: Lloyd's algorithm and its initialisations (SCHEMES.md §8; the rules are in
 * lloyd.h). The assignment is the hot loop: ~4 million 1-D points against 8 centroids for an nuq
 * table, 16,384 points of 4 floats against 256 centroids for each of thousands of vq codebooks,
 * up to 100 passes each. It is written in explicit vectors (see assign_blocks). */
#include "quant/lloyd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The distance must be computed as lloyd.h states, with no multiply-add fused: clang contracts
 * a + b*c into an FMA by default; gcc in ISO C mode (-std=c11, the Makefile's) does not. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* dist(x, c) of lloyd.h: (x_0 - c_0)^2 first, then + (x_j - c_j)^2 for j = 1, 2, ... */
static inline float squared_distance(const float *x, const float *c, int dim) {
    float t = x[0] - c[0];
    float d = t * t;
    for (int j = 1; j < dim; j++) {
        float u = x[j] - c[j];
        d = d + u * u;
    }
    return d;
}

int lloyd_nearest(const float *x, int dim, const float *centroids, int k) {
    float best = INFINITY;
    int best_c = 0;
    for (int c = 0; c < k; c++) {
        float d = squared_distance(x, centroids + (size_t)c * dim, dim);
        if (d < best) {   /* strictly lower: on equal distances the first (lower) index stays */
            best = d;
            best_c = c;
        }
    }
    return best_c;
}

/* Writes the codes of points [first, first + count) and returns how many differ from the codes
 * there before (when count_changes: codes then hold a previous assignment). */
static size_t store_codes(uint16_t *codes, size_t first, size_t count, const int32_t *best_c, int count_changes) {
    size_t changed = 0;
    for (size_t i = 0; i < count; i++) {
        uint16_t code = (uint16_t)best_c[i];
        changed += count_changes && codes[first + i] != code;
        codes[first + i] = code;
    }
    return changed;
}

#if defined(__GNUC__)
/* The vectorized assignment (gcc and clang: their generic vector extension, which each compiles
 * to the widest vectors the target has, AVX-512, AVX2, SSE or NEON, and to plain code otherwise).
 * Auto-vectorization of the same loop in plain C was unreliable: gcc 12 guarded its masked stores
 * with a branch per centroid (2-3x slower on 1-D tables), clang left it scalar (10x slower on vq).
 *
 * Points go in blocks of BLOCK = 2 vectors of LANES points, their coordinates transposed (xs[j]
 * holds coordinate j of the block's points), so that one lane follows one point through the
 * loop over centroids: lane by lane, the same float32 operations in the same order as
 * squared_distance, and the lane's best distance and code replaced only on a strictly lower
 * distance, as in lloyd_nearest. Blends are bitwise (mask & new | ~mask & old) because C's ?:
 * does not take vectors. dim is a compile-time constant in the specialised callers below. */
#if defined(__AVX512F__)
enum { LANES = 16 };
#elif defined(__AVX__)
enum { LANES = 8 };
#else
enum { LANES = 4 };    /* SSE2, NEON: 128-bit registers */
#endif
enum { BLOCK = 32, VECTORS = BLOCK / LANES };
typedef float FloatLanes __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t IntLanes __attribute__((vector_size(LANES * sizeof(int32_t))));

static inline size_t assign_blocks(const float *points, size_t n, const int dim, const float *centroids, int k,
                                   uint16_t *codes, int count_changes) {
    size_t changed = 0;
    for (size_t first = 0; first < n; first += BLOCK) {
        size_t count = n - first < BLOCK ? n - first : BLOCK;
        const float *p = points + first * (size_t)dim;
        float transposed[LLOYD_MAX_DIM][BLOCK];
        for (size_t i = 0; i < BLOCK; i++)    /* a last, partial block is padded with zeros */
            for (int j = 0; j < dim; j++) transposed[j][i] = i < count ? p[i * (size_t)dim + (size_t)j] : 0.0f;
        FloatLanes xs[LLOYD_MAX_DIM][VECTORS], best[VECTORS];
        IntLanes best_c[VECTORS];
        for (int j = 0; j < dim; j++) memcpy(xs[j], transposed[j], sizeof xs[j]);
        for (int v = 0; v < VECTORS; v++) {
            best[v] = (FloatLanes){0} + INFINITY;
            best_c[v] = (IntLanes){0};
        }
        for (int c = 0; c < k; c++) {
            const float *cen = centroids + (size_t)c * dim;
            for (int v = 0; v < VECTORS; v++) {
                FloatLanes t = xs[0][v] - cen[0];
                FloatLanes d = t * t;
                for (int j = 1; j < dim; j++) {
                    FloatLanes u = xs[j][v] - cen[j];
                    d = d + u * u;
                }
                IntLanes lower = d < best[v];   /* -1 in the lanes where this centroid is strictly closer */
                best[v] = (FloatLanes)(((IntLanes)d & lower) | ((IntLanes)best[v] & ~lower));
                best_c[v] = (lower & c) | (best_c[v] & ~lower);
            }
        }
        int32_t block_codes[BLOCK];
        memcpy(block_codes, best_c, sizeof block_codes);
        changed += store_codes(codes, first, count, block_codes, count_changes);
    }
    return changed;
}
#else
/* Any other compiler: the scalar rule, point by point (the same codes, slower). */
static inline size_t assign_blocks(const float *points, size_t n, const int dim, const float *centroids, int k,
                                   uint16_t *codes, int count_changes) {
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t code = lloyd_nearest(points + i * (size_t)dim, dim, centroids, k);
        changed += store_codes(codes, i, 1, &code, count_changes);
    }
    return changed;
}
#endif

/* One copy of assign_blocks per common dim, so that dim is a constant in each. */
static size_t assign_dim1(const float *p, size_t n, const float *c, int k, uint16_t *codes, int cc) {
    return assign_blocks(p, n, 1, c, k, codes, cc);
}
static size_t assign_dim2(const float *p, size_t n, const float *c, int k, uint16_t *codes, int cc) {
    return assign_blocks(p, n, 2, c, k, codes, cc);
}
static size_t assign_dim4(const float *p, size_t n, const float *c, int k, uint16_t *codes, int cc) {
    return assign_blocks(p, n, 4, c, k, codes, cc);
}
static size_t assign_dim8(const float *p, size_t n, const float *c, int k, uint16_t *codes, int cc) {
    return assign_blocks(p, n, 8, c, k, codes, cc);
}
static size_t assign_dim16(const float *p, size_t n, const float *c, int k, uint16_t *codes, int cc) {
    return assign_blocks(p, n, 16, c, k, codes, cc);
}

static size_t assign_all(const float *points, size_t n, int dim, const float *centroids, int k, uint16_t *codes,
                         int count_changes) {
    switch (dim) {
    case 1: return assign_dim1(points, n, centroids, k, codes, count_changes);
    case 2: return assign_dim2(points, n, centroids, k, codes, count_changes);
    case 4: return assign_dim4(points, n, centroids, k, codes, count_changes);
    case 8: return assign_dim8(points, n, centroids, k, codes, count_changes);
    case 16: return assign_dim16(points, n, centroids, k, codes, count_changes);
    default: return assign_blocks(points, n, dim, centroids, k, codes, count_changes);
    }
}

size_t lloyd_assign(const float *points, size_t n, int dim, const float *centroids, int k, uint16_t *codes) {
    return assign_all(points, n, dim, centroids, k, codes, 1);
}

size_t lloyd_scratch_bytes(int dim, int k) {
    return (size_t)k * (size_t)dim * sizeof(double) + (size_t)k * sizeof(size_t);
}

/* Each centroid with points moves to their mean: float64 sums in point order, one division,
 * one rounding to float32. A centroid with no points keeps its value. dim is a constant in the
 * specialised copies below (the 1-D tables' 4 million points make this loop count). */
static inline void move_centroids(const float *points, size_t n, const int dim, float *centroids, int k,
                                  const uint16_t *codes, void *scratch) {
    double *sums = scratch;
    size_t *counts = (size_t *)(sums + (size_t)k * dim);
    memset(sums, 0, (size_t)k * dim * sizeof *sums);
    memset(counts, 0, (size_t)k * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        double *sum = sums + (size_t)codes[i] * dim;
        const float *p = points + i * (size_t)dim;
        for (int j = 0; j < dim; j++) sum[j] += p[j];
        counts[codes[i]]++;
    }
    for (int c = 0; c < k; c++)
        if (counts[c] > 0)
            for (int j = 0; j < dim; j++)
                centroids[(size_t)c * dim + j] = (float)(sums[(size_t)c * dim + j] / (double)counts[c]);
}

static void move_dim1(const float *p, size_t n, float *c, int k, const uint16_t *codes, void *scratch) {
    move_centroids(p, n, 1, c, k, codes, scratch);
}
static void move_dim2(const float *p, size_t n, float *c, int k, const uint16_t *codes, void *scratch) {
    move_centroids(p, n, 2, c, k, codes, scratch);
}
static void move_dim4(const float *p, size_t n, float *c, int k, const uint16_t *codes, void *scratch) {
    move_centroids(p, n, 4, c, k, codes, scratch);
}
static void move_dim8(const float *p, size_t n, float *c, int k, const uint16_t *codes, void *scratch) {
    move_centroids(p, n, 8, c, k, codes, scratch);
}
static void move_dim16(const float *p, size_t n, float *c, int k, const uint16_t *codes, void *scratch) {
    move_centroids(p, n, 16, c, k, codes, scratch);
}

static void move_all(const float *points, size_t n, int dim, float *centroids, int k, const uint16_t *codes,
                     void *scratch) {
    switch (dim) {
    case 1: move_dim1(points, n, centroids, k, codes, scratch); break;
    case 2: move_dim2(points, n, centroids, k, codes, scratch); break;
    case 4: move_dim4(points, n, centroids, k, codes, scratch); break;
    case 8: move_dim8(points, n, centroids, k, codes, scratch); break;
    case 16: move_dim16(points, n, centroids, k, codes, scratch); break;
    default: move_centroids(points, n, dim, centroids, k, codes, scratch); break;
    }
}

LloydResult lloyd_fit(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                      uint16_t *codes, void *scratch) {
    LloydResult r = {0, 0};
    for (int pass = 0; pass < max_iterations; pass++) {
        /* The first pass has no earlier assignment to compare with: it always counts as a change. */
        size_t changed = assign_all(points, n, dim, centroids, k, codes, pass > 0);
        r.iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            /* The same points as last pass: moving would give the same means. */
            r.converged = 1;
            break;
        }
        move_all(points, n, dim, centroids, k, codes, scratch);
    }
    return r;
}

/* ---- initialisations ---- */

/* A float's bits as an unsigned key in the float order (negatives reversed below positives),
 * total on every bit pattern: -0 sorts before +0 and the sort is defined whatever the input. */
static uint32_t order_key(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static int compare_floats(const void *a, const void *b) {
    uint32_t ka = order_key(*(const float *)a), kb = order_key(*(const float *)b);
    return (ka > kb) - (ka < kb);
}

void lloyd_init_ranks(const float *points, size_t n, int k, float *centroids, float *sorted) {
    memcpy(sorted, points, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare_floats);
    /* floor((j + 1/2) n / k) = floor((2j + 1) n / (2k)), in integers: exact for any n. */
    for (int j = 0; j < k; j++) {
        size_t rank = (size_t)(((uint64_t)(2 * j + 1) * (uint64_t)n) / (2 * (uint64_t)k));
        centroids[j] = sorted[rank];
    }
}

void lloyd_init_spread(const float *points, size_t n, int dim, int k, float *centroids) {
    for (int c = 0; c < k; c++) {
        size_t index = (size_t)(((uint64_t)c * (uint64_t)n) / (uint64_t)k);
        memcpy(centroids + (size_t)c * dim, points + index * (size_t)dim, (size_t)dim * sizeof *centroids);
    }
}

double lloyd_objective(const float *points, size_t n, int dim, const float *centroids, int k) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        const float *p = points + i * (size_t)dim;
        double best = INFINITY;
        for (int c = 0; c < k; c++) {
            double d = 0;
            for (int j = 0; j < dim; j++) {
                double u = (double)p[j] - (double)centroids[(size_t)c * dim + j];
                d += u * u;
            }
            if (d < best) best = d;
        }
        total += best;
    }
    return total;
}
