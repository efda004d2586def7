/* tests/lloyd_ref.h: what tests/test_lloyd.c, test_lloyd_ordered.c and test_lloyd_bounded.c
 * share: lloyd.h's distance restated plainly (float32 as lloyd.h defines it, and in float64), a
 * plain lloyd_fit run into its own buffers (the reference the faster fits must equal bit for bit),
 * and random points. */
#ifndef KVQ_LLOYD_REF_H
#define KVQ_LLOYD_REF_H
#include <stdlib.h>
#include <string.h>
#include "quant/lloyd.h"
#include "tests/test.h"

/* The distance as lloyd.h defines it: no multiply-add fused (clang would fuse by default). The
 * pragma holds to the end of each test that includes this header. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* lloyd.h's float32 distance, left to right. */
static inline float ref_distance(const float *x, const float *c, int dim) {
    float t = x[0] - c[0];
    float d = t * t;
    for (int j = 1; j < dim; j++) {
        float u = x[j] - c[j];
        d = d + u * u;
    }
    return d;
}

/* The same distance in float64 throughout. */
static inline double ref_distance_double(const float *x, const float *c, int dim) {
    double d = 0;
    for (int j = 0; j < dim; j++) d += ((double)x[j] - c[j]) * ((double)x[j] - c[j]);
    return d;
}

/* lloyd_fit's result in buffers of its own (run_fit; free_fit frees them). */
typedef struct {
    float *centroids;
    uint16_t *codes;
    LloydResult result;
} Fit;

static inline Fit run_fit(const float *points, size_t n, int dim, const float *init, int k, int max_it) {
    Fit f;
    f.centroids = malloc((size_t)k * dim * sizeof(float));
    memcpy(f.centroids, init, (size_t)k * dim * sizeof(float));
    f.codes = malloc(n * sizeof(uint16_t));
    void *scratch = malloc(lloyd_scratch_bytes(dim, k));
    f.result = lloyd_fit(points, n, dim, f.centroids, k, max_it, f.codes, scratch);
    free(scratch);
    return f;
}

static inline void free_fit(Fit *f) {
    free(f->centroids);
    free(f->codes);
}

/* Points: random in [-1, 1), or (grid) small multiples of 1/4 so that many distances tie exactly. */
static inline float *random_points(size_t n, int dim, uint64_t *seed, int grid) {
    float *p = malloc(n * dim * sizeof *p);
    for (size_t i = 0; i < n * dim; i++) p[i] = grid ? (float)((int)(4 * rnd(seed) * 3)) / 4.0f : rnd(seed);
    return p;
}

#endif
