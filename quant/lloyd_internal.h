/* quant/lloyd_internal.h: what the three files of Lloyd's algorithm share, outside lloyd.h's
 * interface. quant/lloyd.c holds the scan (the vectorized assignment, the move, the passes) and
 * exports the pieces the faster fits build on or fall back to: quant/lloyd_ordered.c (sorted 1-D
 * points) and quant/lloyd_bounded.c (Hamerly's bounds). Included by those three files only. */
#ifndef KVQ_LLOYD_INTERNAL_H
#define KVQ_LLOYD_INTERNAL_H

#include "quant/lloyd.h"
#include <stdint.h>
#include <string.h>

/* The distance must be computed as lloyd.h states, with no multiply-add fused: clang contracts
 * a + b*c into an FMA by default; gcc in ISO C mode (-std=c11, the Makefile's) does not. The
 * pragma holds to the end of each file that includes this header. */
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

/* Whether c_0 <= c_1 <= ... <= c_{k-1}: what 1-D Lloyd from the rank initialisation keeps. */
static inline int ascending(const float *centroids, int k) {
    for (int c = 1; c < k; c++)
        if (!(centroids[c - 1] <= centroids[c])) return 0;   /* also 0 on a NaN */
    return 1;
}

/* A float's bits as an unsigned key in the float order (negatives reversed below positives),
 * total on every bit pattern: -0 sorts before +0 and the sort is defined whatever the input. */
static inline uint32_t order_key(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* Lloyd's move: each centroid with points to their mean (float64 sums in point order, one
 * rounding to float32); scratch lloyd_scratch_bytes(dim, k) bytes. */
void lloyd_move_all(const float *points, size_t n, int dim, float *centroids, int k, const uint16_t *codes,
                    void *scratch);

/* Lloyd's passes first..max_iterations-1 by the scan (codes: the assignment of pass first - 1
 * when first > 0), into r. */
void lloyd_scan_passes(const float *points, size_t n, int dim, float *centroids, int k, int first, int max_iterations,
                       uint16_t *codes, void *scratch, LloydResult *r);

/* For the points listed in which[0..m): each one's code as lloyd_assign gives it, its distance
 * (best) and the least distance to any other centroid (second: equal to best on a tie). */
void lloyd_scan_listed(const float *points, const uint32_t *which, size_t m, int dim, const float *centroids, int k,
                       int32_t *code, float *best, float *second);

#endif
