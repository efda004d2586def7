/* quant/lloyd.c: Lloyd's algorithm by the scan and its initialisations (SCHEMES.md §8; the rules
 * are in lloyd.h): the assignment of every point to its nearest centroid, the move to the means,
 * the passes of lloyd_fit, the two initialisations and the objective. The assignment is the hot
 * loop: ~4 million 1-D points against 8 centroids for an nuq table, 16,384 points of 4 floats
 * against 256 centroids for each of thousands of vq codebooks, up to 100 passes each. It is written
 * in explicit vectors (see assign_blocks). The faster fits with the same result are in
 * lloyd_ordered.c (sorted 1-D points) and lloyd_bounded.c (Hamerly's bounds). */
#include "quant/lloyd_internal.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* For the points listed in which[0..m): each one's code as assign_blocks gives it, its distance
 * (best) and the least distance to any other centroid (second: the second smallest distance,
 * equal to best on a tie), in blocks of BLOCK points gathered by index, lane by lane as
 * assign_blocks. */
static inline void scan_listed(const float *points, const uint32_t *which, size_t m, const int dim,
                               const float *centroids, int k, int32_t *code, float *best, float *second) {
    for (size_t first = 0; first < m; first += BLOCK) {
        size_t count = m - first < BLOCK ? m - first : BLOCK;
        float transposed[LLOYD_MAX_DIM][BLOCK];
        for (size_t i = 0; i < BLOCK; i++)    /* a last, partial block is padded with zeros */
            for (int j = 0; j < dim; j++)
                transposed[j][i] = i < count ? points[(size_t)which[first + i] * (size_t)dim + (size_t)j] : 0.0f;
        FloatLanes xs[LLOYD_MAX_DIM][VECTORS], lane_best[VECTORS], lane_second[VECTORS];
        IntLanes lane_code[VECTORS];
        for (int j = 0; j < dim; j++) memcpy(xs[j], transposed[j], sizeof xs[j]);
        for (int v = 0; v < VECTORS; v++) {
            lane_best[v] = lane_second[v] = (FloatLanes){0} + INFINITY;
            lane_code[v] = (IntLanes){0};
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
                IntLanes lower = d < lane_best[v], below_second = d < lane_second[v];
                FloatLanes runner = (FloatLanes)(((IntLanes)d & below_second) | ((IntLanes)lane_second[v] & ~below_second));
                lane_second[v] = (FloatLanes)(((IntLanes)lane_best[v] & lower) | ((IntLanes)runner & ~lower));
                lane_best[v] = (FloatLanes)(((IntLanes)d & lower) | ((IntLanes)lane_best[v] & ~lower));
                lane_code[v] = (lower & c) | (lane_code[v] & ~lower);
            }
        }
        int32_t block_code[BLOCK];
        float block_best[BLOCK], block_second[BLOCK];
        memcpy(block_code, lane_code, sizeof block_code);
        memcpy(block_best, lane_best, sizeof block_best);
        memcpy(block_second, lane_second, sizeof block_second);
        memcpy(code + first, block_code, count * sizeof *code);
        memcpy(best + first, block_best, count * sizeof *best);
        memcpy(second + first, block_second, count * sizeof *second);
    }
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
/* scan_listed of the vectorized path, point by point. */
static inline void scan_listed(const float *points, const uint32_t *which, size_t m, const int dim,
                               const float *centroids, int k, int32_t *code, float *best, float *second) {
    for (size_t i = 0; i < m; i++) {
        const float *x = points + (size_t)which[i] * (size_t)dim;
        float least = INFINITY, runner = INFINITY;
        int32_t at = 0;
        for (int c = 0; c < k; c++) {
            float d = squared_distance(x, centroids + (size_t)c * dim, dim);
            if (d < least) {
                runner = least;
                least = d;
                at = c;
            } else if (d < runner) {
                runner = d;
            }
        }
        code[i] = at;
        best[i] = least;
        second[i] = runner;
    }
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

void lloyd_move_all(const float *points, size_t n, int dim, float *centroids, int k, const uint16_t *codes,
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

/* scan_listed for lloyd_fit_bounded's pending points. */
void lloyd_scan_listed(const float *points, const uint32_t *which, size_t m, int dim, const float *centroids, int k,
                       int32_t *code, float *best, float *second) {
    switch (dim) {   /* dim a constant in each copy */
    case 2: scan_listed(points, which, m, 2, centroids, k, code, best, second); break;
    case 4: scan_listed(points, which, m, 4, centroids, k, code, best, second); break;
    case 8: scan_listed(points, which, m, 8, centroids, k, code, best, second); break;
    case 16: scan_listed(points, which, m, 16, centroids, k, code, best, second); break;
    default: scan_listed(points, which, m, dim, centroids, k, code, best, second); break;
    }
}

/* lloyd_fit's passes, also where the faster fits hand over to the scan. */
void lloyd_scan_passes(const float *points, size_t n, int dim, float *centroids, int k, int first, int max_iterations,
                       uint16_t *codes, void *scratch, LloydResult *r) {
    for (int pass = first; pass < max_iterations; pass++) {
        /* The first pass has no earlier assignment to compare with: it always counts as a change. */
        size_t changed = assign_all(points, n, dim, centroids, k, codes, pass > 0);
        r->iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            /* The same points as last pass: moving would give the same means. */
            r->converged = 1;
            break;
        }
        lloyd_move_all(points, n, dim, centroids, k, codes, scratch);
    }
}

LloydResult lloyd_fit(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                      uint16_t *codes, void *scratch) {
    LloydResult r = {0, 0};
    lloyd_scan_passes(points, n, dim, centroids, k, 0, max_iterations, codes, scratch, &r);
    return r;
}

/* ---- initialisations ---- */

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

/* lloyd_objective for 1-D points and ascending centroids: the float64 distance, like the float32
 * one, does not grow left of the first centroid >= x and does not shrink from it on, so the least
 * is at one of those two (found by bisection); the same value the scan finds, summed in the same
 * order. */
static double objective_ascending(const float *points, size_t n, const float *c, int k) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        float x = points[i];
        if (isnan(x)) {   /* every distance NaN: the scan's best stays +inf */
            total += INFINITY;
            continue;
        }
        /* lo = the first index with c >= x (k when none): a bisection whose steps are selects,
         * not branches (the points come in no order, so a branch would be a coin toss) */
        int base = 0, len = k;
        while (len > 1) {
            int half = len / 2;
            base = c[base + half - 1] < x ? base + half : base;
            len -= half;
        }
        int lo = base + (c[base] < x);
        double best = INFINITY;
        for (int j = lo - 1; j <= lo; j++)
            if (j >= 0 && j < k) {
                double u = (double)x - (double)c[j];
                if (u * u < best) best = u * u;
            }
        total += best;
    }
    return total;
}

double lloyd_objective(const float *points, size_t n, int dim, const float *centroids, int k) {
    if (dim == 1 && ascending(centroids, k)) return objective_ascending(points, n, centroids, k);
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
