/* quant/lloyd.h: Lloyd's algorithm (k-means) as SCHEMES.md §8 defines it for the fitted bases
 * (nuqB: 1-D tables; vqC-dD: codebooks of D-dimensional sub-vectors), and its two initialisations.
 *
 * Given n points of dim floats (row-major, in calibration order) and k initial centroids, repeat
 * at most max_iterations (§8: 100) times: assign each point to its nearest centroid, move each
 * centroid to the mean of its points (sums in float64, the mean rounded once to float32; a
 * centroid with no points stays), until a pass changes no assignment.
 *
 * "Nearest" is exact for the distance as computed here, which is the float32 squared distance
 *     dist(x, c) = (x_0 - c_0)^2 + (x_1 - c_1)^2 + ... + (x_{dim-1} - c_{dim-1})^2
 * each difference and square rounded to float32, added left to right in float32, never fused
 * into an FMA (gcc's -std=c11 does not contract; clang is told not to in lloyd_internal.h), and the
 * nearest centroid is the lowest index c whose distance is not above any other's: the scan keeps
 * the first of equal distances. lloyd_nearest computes exactly this for one point, so an encoder
 * that calls it (or lloyd_assign) picks the codes the fit assumed, bit for bit. A point with a NaN
 * coordinate (every distance NaN) takes code 0; so does a point whose distances all overflow to
 * +inf (all equal: the lowest index). Points are expected finite.
 *
 * Pure arithmetic: no allocation, no I/O, no global state; the caller passes the scratch. Single-
 * threaded and re-entrant: run independent fits in parallel (one scratch each).
 * Speed: the assignment runs over blocks of 32 points, their coordinates transposed, in vectors of
 * the target's width (gcc/clang vector extensions; one lane per point), each lane keeping the first
 * strictly lower distance exactly as the scalar scan does; dim 1, 2, 4, 8 and 16 are compiled as
 * constants. On a Zen 5 core (AVX-512): a pass over 4.2M 1-D points and 8 centroids ~10 ms (the
 * float64 sums of the move are most of it), over 16,384 4-D points and 256 centroids ~0.4 ms
 * (tests/bench_lloyd.c). */
#ifndef KVQ_LLOYD_H
#define KVQ_LLOYD_H

#include <stddef.h>
#include <stdint.h>

#define LLOYD_MAX_ITERATIONS 100     /* §8's cap */
#define LLOYD_MAX_DIM 16             /* vq's largest sub-vector (D = 16) */
#define LLOYD_MAX_K 65536            /* codes are uint16_t (vq12 needs 4096) */

typedef struct {
    int iterations;   /* assignment passes made, 1..max_iterations */
    int converged;    /* 1 when the last pass changed no assignment (0: stopped by the cap) */
} LloydResult;

/* Bytes of scratch lloyd_fit needs for dim and k: the float64 sums and the counts of each
 * centroid. Aligned to 8 bytes by the caller (malloc's is enough). */
size_t lloyd_scratch_bytes(int dim, int k);

/* Fits centroids (k x dim floats, in: the initial centroids, out: the fitted ones) to the n points
 * (n x dim floats). codes (n entries) receives the assignment of the last pass: each point's
 * nearest centroid among the centroids that pass saw, i.e. the nearest of the final centroids
 * when converged. Requires n >= 1, 1 <= dim <= LLOYD_MAX_DIM, 1 <= k <= LLOYD_MAX_K,
 * max_iterations >= 1. */
LloydResult lloyd_fit(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                      uint16_t *codes, void *scratch);

/* lloyd_fit's result (codes, passes, centroids bit for bit), faster when most points keep their
 * centroid from pass to pass (vq's and rvq's codebooks of 256 entries): each point carries bounds
 * on its distances (Hamerly's algorithm, widened by more than float32's rounding), and only points
 * whose bounds do not settle their code are scanned. Points or centroids beyond 2^40 in magnitude
 * (or NaN) take lloyd_fit's scan. Scratch lloyd_bounded_scratch_bytes(n, dim, k) bytes. */
size_t lloyd_bounded_scratch_bytes(size_t n, int dim, int k);
LloydResult lloyd_fit_bounded(const float *points, size_t n, int dim, float *centroids, int k, int max_iterations,
                              uint16_t *codes, void *scratch);

/* 1-D points fitted many times (pcaB fits 8 tables to each component): their ascending order,
 * computed once, makes each pass O(n) instead of O(n k).
 * lloyd_sort_order: order[0..n) = the points' indices by ascending value (-0 before +0, equal
 * values by index; a stable radix sort), scratch lloyd_order_scratch_bytes(n) bytes.
 * lloyd_fit_ordered: exactly lloyd_fit(points, n, 1, ...) (codes, passes, centroids bit for bit),
 * given that order; scratch lloyd_ordered_scratch_bytes(n, k) bytes. While the centroids are
 * ascending and well apart (every gap >= 2^-16 of the largest magnitude), each centroid's points
 * are a run of the order whose ends a bisection finds (O(k log n) a pass, see lloyd_ordered.c); merely
 * ascending, a pass walks the points in order (the first centroid >= x moves only forward; the
 * least distance is at it or the one before). Each centroid moves to the mean of its run: the
 * sum is taken from exact integer prefix sums, or in any order, when it is provably exact in
 * float64 (then every order gives it), else in point order. Otherwise, and for points holding a
 * NaN or a single centroid, the scan.
 * lloyd_init_ranks_ordered: lloyd_init_ranks' centroids from the order (no sort). */
size_t lloyd_order_scratch_bytes(size_t n);
size_t lloyd_ordered_scratch_bytes(size_t n, int k);
void lloyd_sort_order(const float *points, size_t n, uint32_t *order, void *scratch);
LloydResult lloyd_fit_ordered(const float *points, size_t n, const uint32_t *order, float *centroids, int k,
                              int max_iterations, uint16_t *codes, void *scratch);
void lloyd_init_ranks_ordered(const float *points, size_t n, const uint32_t *order, int k, float *centroids);

/* codes[i] = the nearest of the k centroids to point i (the distance and tie rule above).
 * Returns how many codes differ from what codes held before (so callers can see a change). */
size_t lloyd_assign(const float *points, size_t n, int dim, const float *centroids, int k, uint16_t *codes);

/* The nearest of the k centroids to one point x (dim floats): the scalar statement of the rule,
 * giving the same code as lloyd_assign bit for bit. */
int lloyd_nearest(const float *x, int dim, const float *centroids, int k);

/* §8's nuq initialisation (1-D points): centroid j = the element of rank floor((j + 1/2) n / k)
 * (0-based) of the sorted points, j = 0..k-1, so ascending. sorted (n floats, scratch) receives
 * the points sorted ascending (-0 before +0); points are not modified. */
void lloyd_init_ranks(const float *points, size_t n, int k, float *centroids, float *sorted);

/* §8's vq initialisation: centroid c = point floor(c n / k), c = 0..k-1 (dim floats each). */
void lloyd_init_spread(const float *points, size_t n, int dim, int k, float *centroids);

/* Sum over the points of the squared distance to the nearest centroid, all in float64: the
 * objective Lloyd lowers, for comparing two codebooks of the same points. For 1-D points and
 * ascending centroids the nearest is found by bisection (the same sum, bit for bit). */
double lloyd_objective(const float *points, size_t n, int dim, const float *centroids, int k);

/* lloyd_objective(points, n, 1, centroids, k) bit for bit, for 1-D points in lloyd_sort_order's
 * order: a walk along it instead of a bisection a point. distances: n doubles of scratch. */
double lloyd_objective_ordered(const float *points, size_t n, const uint32_t *order, const float *centroids, int k,
                               double *distances);

#endif
