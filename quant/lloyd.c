/* quant/lloyd.c: Lloyd's algorithm and its initialisations (SCHEMES.md §8; the rules are in
 * lloyd.h). The assignment is the hot loop: ~4 million 1-D points against 8 centroids for an nuq
 * table, 16,384 points of 4 floats against 256 centroids for each of thousands of vq codebooks,
 * up to 100 passes each. It is written in explicit vectors (see assign_blocks). */
#include "quant/lloyd.h"
#include <math.h>
#include <stdint.h>
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

/* ---- 1-D points in ascending order ----
 * With the centroids ascending (c_0 <= c_1 <= ...: what 1-D Lloyd from the rank initialisation
 * keeps), the nearest centroid to x under lloyd.h's float32 rule is found without the scan. Let p
 * be the first index with c_p >= x. For j < p, t_j = fl(x - c_j) > 0 does not grow with j (the
 * rounding is monotone), so neither does d_j = fl(t_j^2); for j >= p, |t_j| = fl(c_j - x) does
 * not shrink, so neither does d_j. The least distance is therefore d_{p-1} or d_p, and the lowest
 * index holding it is p when d_p < d_{p-1}, else the first of the run of distances equal to
 * d_{p-1} that ends at p - 1 (the left side does not grow, so equal ones are contiguous). */

static int ascending(const float *centroids, int k) {
    for (int c = 1; c < k; c++)
        if (!(centroids[c - 1] <= centroids[c])) return 0;   /* also 0 on a NaN */
    return 1;
}

static inline float distance_1d(float x, float c) {
    float t = x - c;
    return t * t;
}

/* The nearest of the ascending centroids to x (not NaN), p being the first index with c_p >= x. */
static int nearest_ascending(float x, const float *c, int k, int p) {
    if (p == 0) return 0;
    float left = distance_1d(x, c[p - 1]), right = p < k ? distance_1d(x, c[p]) : INFINITY;
    int j = p - 1;
    if (j > 0 && distance_1d(x, c[j - 1]) == left) /* rare: walk the run of equal distances */
        while (j > 0 && distance_1d(x, c[j - 1]) == left) j--;
    return right < left ? p : j;   /* a select, not a branch: the two sides are a coin toss */
}

/* One pass over the points in ascending order (values: their values in that order): each one's
 * code as assign_all gives it, written in that order into sorted_codes, and the number that
 * differ from what sorted_codes held. The first centroid >= x only moves forward; equal points
 * (and -0, +0: the same distances) share a code. *monotone: the codes never go down along the
 * order (they can, when float32 rounding makes distinct entries equally near: nearest_ascending's
 * run of equal distances). */
static size_t walk_pass(const float *values, size_t n, const float *centroids, int k, uint16_t *sorted_codes,
                        int *monotone) {
    size_t changed = 0;
    int p = 0, code = 0, previous = 0, down = 0;
    float last = NAN;
    for (size_t s = 0; s < n; s++) {
        float x = values[s];
        if (!(x == last)) {
            while (p < k && centroids[p] < x) p++;
            code = nearest_ascending(x, centroids, k, p);
            last = x;
        }
        down |= code < previous;
        previous = code;
        changed += sorted_codes[s] != (uint16_t)code;
        sorted_codes[s] = (uint16_t)code;
    }
    *monotone = !down;
    return changed;
}

static void scatter_codes(const uint32_t *order, const uint16_t *sorted_codes, size_t n, uint16_t *codes) {
    for (size_t s = 0; s < n; s++) codes[order[s]] = sorted_codes[s];
}

/* The float64 sum of a cell's values v[0..count) (ascending) when every order of adding them
 * gives the same: all of one sign, each a multiple of u >= min|v| 2^-24 (u: the float32 ulp of
 * the smallest), and count max|v| < 2^29 min|v| <= 2^53 u, so that every partial sum is a multiple
 * of u below 2^53 u, exact in float64. Then four running sums give the point-order sum. Returns 0
 * (and leaves *sum) when the bound does not hold. */
static int exact_sum(const float *v, size_t count, double *sum) {
    float first = v[0], last = v[count - 1];
    if (!(first > 0 || last < 0)) return 0;
    double low = fmin(fabs(first), fabs(last)), high = fmax(fabs(first), fabs(last));
    if (!((double)count * high < 536870912.0 * low)) return 0;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= count; i += 4) {
        a0 += v[i];
        a1 += v[i + 1];
        a2 += v[i + 2];
        a3 += v[i + 3];
    }
    for (; i < count; i++) a0 += v[i];
    *sum = (a0 + a1) + (a2 + a3);
    return 1;
}

static int lowest_bit(uint64_t w) {
#if defined(__GNUC__)
    return __builtin_ctzll(w);
#else
    int b = 0;
    while (!(w >> b & 1u)) b++;
    return b;
#endif
}

/* The float64 sum, in point order, of the points at positions lo..hi-1 of the order: their
 * indices marked in bits (all zero before and after), then read back ascending. */
static double sum_in_point_order(const float *points, const uint32_t *order, size_t lo, size_t hi, uint64_t *bits) {
    size_t first = SIZE_MAX, last = 0;
    for (size_t s = lo; s < hi; s++) {
        size_t w = order[s] / 64;
        bits[w] |= (uint64_t)1 << (order[s] % 64);
        first = w < first ? w : first;
        last = w > last ? w : last;
    }
    double sum = 0;
    for (size_t w = first; w <= last; w++) {
        uint64_t word = bits[w];
        bits[w] = 0;
        for (; word; word &= word - 1) sum += points[w * 64 + (size_t)lowest_bit(word)];
    }
    return sum;
}

/* move_centroids for codes that never go down along the order: centroid c's points are the run
 * of positions holding c; it moves to their float64 sum in point order (exact_sum's, or summed in
 * point order) over their count, rounded once. A centroid with no points stays. */
static void move_ordered(const float *points, size_t n, const uint32_t *order, const float *values,
                         const uint16_t *sorted_codes, float *centroids, int k, uint64_t *bits) {
    size_t lo = 0;
    for (int c = 0; c < k && lo < n; c++) {
        size_t hi = lo;
        while (hi < n && sorted_codes[hi] == c) hi++;
        if (hi == lo) continue;
        double sum;
        if (!exact_sum(values + lo, hi - lo, &sum)) sum = sum_in_point_order(points, order, lo, hi, bits);
        centroids[c] = (float)(sum / (double)(hi - lo));
        lo = hi;
    }
}

static uint32_t order_key(float x);

size_t lloyd_order_scratch_bytes(size_t n) { return 3 * n * sizeof(uint32_t); }

/* A stable LSD radix sort of the points' order keys, a byte a pass: 4 passes between two pairs of
 * arrays (keys and indices), so the result ends in the first pair, in order. */
void lloyd_sort_order(const float *points, size_t n, uint32_t *order, void *scratch) {
    uint32_t *key = scratch, *other_key = key + n, *other_order = other_key + n;
    uint32_t *from_key = key, *from_order = order, *to_key = other_key, *to_order = other_order;
    for (size_t i = 0; i < n; i++) {
        key[i] = order_key(points[i]);
        order[i] = (uint32_t)i;
    }
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[(from_key[i] >> shift & 0xffu) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) {
            size_t at = count[from_key[i] >> shift & 0xffu]++;
            to_key[at] = from_key[i];
            to_order[at] = from_order[i];
        }
        uint32_t *t = from_key;
        from_key = to_key;
        to_key = t;
        t = from_order;
        from_order = to_order;
        to_order = t;
    }
}

/* From this many centroids the order pays: a pass by the cells' bounds beats the vectorized scan
 * even at 2 centroids (the walk alone, at 16,384 points, only from ~32). */
#define ORDERED_MIN_K 2

/* Lloyd's passes first..max_iterations-1 by the scan (codes: the assignment of pass first - 1
 * when first > 0), into r. */
static void scan_passes(const float *points, size_t n, int dim, float *centroids, int k, int first,
                        int max_iterations, uint16_t *codes, void *scratch, LloydResult *r) {
    for (int pass = first; pass < max_iterations; pass++) {
        /* The first pass has no earlier assignment to compare with: it always counts as a change. */
        size_t changed = assign_all(points, n, dim, centroids, k, codes, pass > 0);
        r->iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            /* The same points as last pass: moving would give the same means. */
            r->converged = 1;
            break;
        }
        move_all(points, n, dim, centroids, k, codes, scratch);
    }
}

size_t lloyd_ordered_scratch_bytes(size_t n, int k) {
    return lloyd_scratch_bytes(1, k) + (n + 63) / 64 * sizeof(uint64_t) + (n + 1) * sizeof(int64_t) +
           2 * ((size_t)k + 1) * sizeof(size_t) + n * (sizeof(float) + sizeof(uint16_t));
}

/* ---- cells by their bounds ----
 * When the ascending centroids are also well apart (separated), the codes of the points in order
 * are the cells [bounds[c], bounds[c + 1]) of centroid c, each bound found by a bisection, and a
 * cell's float64 sum, when exact_sum's bound holds, is the difference of two exact integer prefix
 * sums: a pass costs O(k log n) instead of O(n). */

/* Well apart: finite, |x| and |c| at most D with 2^-40 <= D <= 2^60, and every gap between
 * neighbouring centroids at least 2^-16 D. Then for x > c_a > c_b the float32 differences x - c_a
 * and x - c_b (each within 2^-23 D of the true one) differ by more than 0.98 x 2^-16 D, and their
 * squares by far more than the 2^-24 relative rounding of each (nor do they overflow): two
 * distinct centroids on the same side of x never give equal distances, so nearest_ascending's run
 * of equal distances is never longer than one, its code is p - 1 or p, and the code does not go
 * down along the order. */
static int separated(const float *values, size_t n, const float *c, int k) {
    double d = fmax(fmax(fabs(values[0]), fabs(values[n - 1])), fmax(fabs(c[0]), fabs(c[k - 1])));
    if (!(d >= 0x1p-40 && d <= 0x1p60)) return 0;   /* also 0 on an infinity */
    double gap = 0x1p-16 * d;
    for (int j = 1; j < k; j++)
        if (!((double)c[j] - (double)c[j - 1] >= gap)) return 0;
    return 1;
}

/* Whether x's code is j or more (1 <= j < k), for separated centroids: above c_j it is; at or
 * below c_{j-1} it is not; in between (p = j) nearest_ascending picks j when c_j is strictly
 * nearer. Along ascending x this goes from false to true once. */
static inline int code_at_least(float x, const float *c, int j) {
    if (x > c[j]) return 1;
    if (!(x > c[j - 1])) return 0;
    return distance_1d(x, c[j]) < distance_1d(x, c[j - 1]);
}

/* The first position in [lo, hi] (hi: none in [lo, hi)) where code_at_least(., c, j) holds,
 * searched outward from `near` (the last pass's bound, which rarely moves far) in doubling steps,
 * then by bisection. */
static size_t find_bound(const float *values, size_t lo, size_t hi, const float *c, int j, size_t near) {
    size_t at = near < lo ? lo : near > hi ? hi : near;
    if (at < hi && code_at_least(values[at], c, j)) {   /* the bound is at or below `at` */
        size_t step = 1;
        hi = at;
        while (hi - lo > step && code_at_least(values[hi - step], c, j)) {
            hi -= step;
            step *= 2;
        }
        if (hi - lo > step) lo = hi - step + 1;
    } else if (at < hi) {   /* above `at` */
        size_t step = 1;
        lo = at + 1;
        while (hi - lo > step && !code_at_least(values[lo + step - 1], c, j)) {
            lo += step;
            step *= 2;
        }
        if (hi - lo > step) hi = lo + step - 1;
    }
    while (lo < hi) {   /* the answer is in [lo, hi] */
        size_t mid = lo + (hi - lo) / 2;
        if (code_at_least(values[mid], c, j)) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* bounds[c] = the first position of the order whose code is c or more (bounds[0] = 0, bounds[k]
 * = n), each at or after the one before; near: the last pass's bounds, or NULL. */
static void find_bounds(const float *values, size_t n, const float *c, int k, const size_t *near, size_t *bounds) {
    bounds[0] = 0;
    for (int j = 1; j < k; j++) bounds[j] = find_bound(values, bounds[j - 1], n, c, j, near ? near[j] : bounds[j - 1]);
    bounds[k] = n;
}

/* The integer prefix sums of the values in order at a resolution of 2^*exponent: prefix[s] =
 * the sum of trunc(v 2^-exponent) over positions < s, every |term| below 2^62 / (n + 1), so no
 * sum overflows. A value of magnitude 2^(exponent + 23) or more is a multiple of 2^exponent (its
 * float32 ulp is), so a cell of such values has its exact sum as a difference. 0 when the values
 * are not all finite or all zero (no prefix then). */
static int prefix_sums(const float *values, size_t n, int64_t *prefix, int *exponent) {
    double most = fmax(fabs(values[0]), fabs(values[n - 1]));
    if (!(most > 0 && most <= 0x1p127)) return 0;
    int top, headroom = 62;
    frexp(most, &top);   /* most < 2^top */
    for (size_t m = n + 1; m > 1; m = (m + 1) / 2) headroom--;   /* 62 - ceil(log2(n + 1)) */
    *exponent = top - headroom;
    double scale = ldexp(1.0, -*exponent);   /* a power of two: v * scale is exact */
    prefix[0] = 0;
    for (size_t s = 0; s < n; s++) prefix[s + 1] = prefix[s] + (int64_t)((double)values[s] * scale);
    return 1;
}

/* The least magnitude of the nonzero values in [lo, hi) (ascending), +inf when all are zero: at
 * one end of a cell of one sign, else on either side of its zeros. */
static float least_nonzero(const float *values, size_t lo, size_t hi) {
    float first = values[lo], last = values[hi - 1];
    if (first > 0) return first;
    if (last < 0) return -last;
    size_t a = lo, b = hi;   /* a: the first value >= 0 (-0 included) */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (values[mid] < 0) a = mid + 1;
        else b = mid;
    }
    size_t z = a;   /* z: the first value > 0 */
    for (b = hi; z < b;) {
        size_t mid = z + (b - z) / 2;
        if (values[mid] > 0) b = mid;
        else z = mid + 1;
    }
    float least = INFINITY;
    if (a > lo) least = -values[a - 1];
    if (z < hi && values[z] < least) least = values[z];
    return least;
}

/* The ulp of float32 x != 0: what every float32 of magnitude >= |x| is a multiple of; 2^-149 for
 * a subnormal. Read from x's exponent field and built as a float64 power of two. */
static double ulp_of(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int field = (int)(bits >> 23 & 0xffu);   /* |x| in [2^(field - 127), 2^(field - 126)) when field > 0 */
    uint64_t power = (uint64_t)((field > 0 ? field : 1) - 150 + 1023) << 52;
    double ulp;
    memcpy(&ulp, &power, sizeof ulp);
    return ulp;
}

/* move_ordered for cells given by their bounds. Every value of a cell is a multiple of u, the
 * ulp of its least nonzero magnitude; when count x max|v| < 2^53 u, every partial sum of the
 * point-order float64 sum is a multiple of u below 2^53 u, so that sum is exact, as it is under
 * exact_sum's bound. Such a cell takes its exact sum from the prefix sums when u is at least
 * their resolution, else from exact_sum; any other cell is summed in point order. The same means
 * as move_ordered. */
static void move_bounded(const float *points, const uint32_t *order, const float *values, const size_t *bounds,
                         const int64_t *prefix, int exponent, float *centroids, int k, uint64_t *bits) {
    double resolution = prefix ? ldexp(1.0, exponent) : INFINITY;
    for (int c = 0; c < k; c++) {
        size_t lo = bounds[c], hi = bounds[c + 1];
        if (hi == lo) continue;
        double sum, count = (double)(hi - lo);
        float first = values[lo], last = values[hi - 1], least = least_nonzero(values, lo, hi);
        double high = fmax(fabs(first), fabs(last));
        double u = isinf(least) ? INFINITY : ulp_of(least);   /* all zeros: any unit */
        int one_sign = first > 0 || last < 0;
        int any_order = one_sign && count * high < 536870912.0 * least;   /* exact_sum's bound */
        int exact = any_order || count * high < 0x1p53 * u;
        if (prefix && exact && u >= resolution)
            sum = (double)(prefix[hi] - prefix[lo]) * resolution;   /* a power of two: exact */
        else if (!any_order || !exact_sum(values + lo, hi - lo, &sum))
            sum = sum_in_point_order(points, order, lo, hi, bits);
        centroids[c] = (float)(sum / count);
    }
}

/* Whether the cells changed since the last pass (previous: its bounds), then previous = bounds. */
static int bounds_changed(size_t *previous, const size_t *bounds, int k) {
    int changed = memcmp(previous, bounds, ((size_t)k + 1) * sizeof *bounds) != 0;
    memcpy(previous, bounds, ((size_t)k + 1) * sizeof *bounds);
    return changed;
}

/* The codes in order that bounds describe, with how many differ from what sorted_codes held. */
static size_t codes_from_bounds(const size_t *bounds, int k, uint16_t *sorted_codes) {
    size_t changed = 0;
    for (int c = 0; c < k; c++)
        for (size_t s = bounds[c]; s < bounds[c + 1]; s++) {
            changed += sorted_codes[s] != (uint16_t)c;
            sorted_codes[s] = (uint16_t)c;
        }
    return changed;
}

/* Lloyd in the order's terms while the centroids stay ascending: by the cells' bounds while they
 * are also separated, else walk_pass, then move_ordered (or move_all when the codes go down
 * somewhere); the scan from the first pass they are not ascending. sorted_codes holds the codes
 * of the last pass except while `stale` (the cells' bounds in `previous` hold them then). */
static LloydResult fit_ordered(const float *points, size_t n, const uint32_t *order, float *centroids, int k,
                               int max_iterations, uint16_t *codes, void *scratch) {
    char *base = scratch;
    size_t words = (n + 63) / 64;
    uint64_t *bits = (uint64_t *)(base + lloyd_scratch_bytes(1, k));
    int64_t *prefix = (int64_t *)(bits + words);
    size_t *bounds = (size_t *)(prefix + n + 1), *previous = bounds + k + 1;
    float *values = (float *)(previous + k + 1);
    uint16_t *sorted_codes = (uint16_t *)(values + n);
    memset(bits, 0, words * sizeof *bits);
    memset(sorted_codes, 0, n * sizeof *sorted_codes);
    for (size_t s = 0; s < n; s++) values[s] = points[order[s]];
    int exponent = 0, has_prefix = prefix_sums(values, n, prefix, &exponent), stale = 0;
    LloydResult r = {0, 0};
    int pass = 0;
    for (; pass < max_iterations && ascending(centroids, k); pass++) {
        int monotone = 1, by_bounds = separated(values, n, centroids, k);
        size_t changed;
        if (by_bounds) {
            find_bounds(values, n, centroids, k, stale ? previous : NULL, bounds);
            changed = stale ? (size_t)bounds_changed(previous, bounds, k) : codes_from_bounds(bounds, k, sorted_codes);
            if (!stale) memcpy(previous, bounds, ((size_t)k + 1) * sizeof *bounds);
            stale = 1;
        } else {
            if (stale) codes_from_bounds(previous, k, sorted_codes);
            stale = 0;
            changed = walk_pass(values, n, centroids, k, sorted_codes, &monotone);
        }
        r.iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            r.converged = 1;
            break;
        }
        if (by_bounds) {
            move_bounded(points, order, values, bounds, has_prefix ? prefix : NULL, exponent, centroids, k, bits);
        } else if (monotone) {
            move_ordered(points, n, order, values, sorted_codes, centroids, k, bits);
        } else {
            scatter_codes(order, sorted_codes, n, codes);
            move_all(points, n, 1, centroids, k, codes, scratch);
        }
    }
    if (stale) codes_from_bounds(previous, k, sorted_codes);
    scatter_codes(order, sorted_codes, n, codes);
    if (!r.converged && pass < max_iterations)
        scan_passes(points, n, 1, centroids, k, pass, max_iterations, codes, scratch, &r);
    return r;
}

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

static void scan_listed_all(const float *points, const uint32_t *which, size_t m, int dim, const float *centroids,
                            int k, int32_t *code, float *best, float *second) {
    switch (dim) {   /* dim a constant in each copy */
    case 2: scan_listed(points, which, m, 2, centroids, k, code, best, second); break;
    case 4: scan_listed(points, which, m, 4, centroids, k, code, best, second); break;
    case 8: scan_listed(points, which, m, 8, centroids, k, code, best, second); break;
    case 16: scan_listed(points, which, m, 16, centroids, k, code, best, second); break;
    default: scan_listed(points, which, m, dim, centroids, k, code, best, second); break;
    }
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
    scan_listed_all(points, b->pending, m, dim, centroids, k, b->code, b->best, b->second);
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
        scan_passes(points, n, dim, centroids, k, 0, max_iterations, codes, scratch, &r);
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
        move_all(points, n, dim, centroids, k, codes, scratch);
        move_bounds(centroids, k, dim, codes, n, &b);
    }
    return r;
}

LloydResult lloyd_fit(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                      uint16_t *codes, void *scratch) {
    LloydResult r = {0, 0};
    scan_passes(points, n, dim, centroids, k, 0, max_iterations, codes, scratch, &r);
    return r;
}

LloydResult lloyd_fit_ordered(const float *points, size_t n, const uint32_t *order, float *centroids, int k,
                              int max_iterations, uint16_t *codes, void *scratch) {
    int nan = 0;   /* a NaN point has no place in the order's walk: the scan then */
    for (size_t i = 0; i < n; i++) nan |= isnan(points[i]);
    if (nan || k < ORDERED_MIN_K || !ascending(centroids, k))
        return lloyd_fit(points, n, 1, centroids, k, max_iterations, codes, scratch);
    return fit_ordered(points, n, order, centroids, k, max_iterations, codes, scratch);
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

void lloyd_init_ranks_ordered(const float *points, size_t n, const uint32_t *order, int k, float *centroids) {
    for (int j = 0; j < k; j++) {
        size_t rank = (size_t)(((uint64_t)(2 * j + 1) * (uint64_t)n) / (2 * (uint64_t)k));
        centroids[j] = points[order[rank]];
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

double lloyd_objective_ordered(const float *points, size_t n, const uint32_t *order, const float *centroids, int k,
                               double *distances) {
    int nan = 0;
    for (size_t i = 0; i < n; i++) nan |= isnan(points[i]);
    if (nan || !ascending(centroids, k)) return lloyd_objective(points, n, 1, centroids, k);
    /* objective_ascending's least distance of each point, the first centroid >= x found by a
     * walk along the order instead of a bisection, then summed in point order as there */
    int lo = 0;
    for (size_t s = 0; s < n; s++) {
        float x = points[order[s]];
        while (lo < k && centroids[lo] < x) lo++;
        double best = INFINITY;
        for (int j = lo - 1; j <= lo; j++)
            if (j >= 0 && j < k) {
                double u = (double)x - (double)centroids[j];
                if (u * u < best) best = u * u;
            }
        distances[order[s]] = best;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) total += distances[i];
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
