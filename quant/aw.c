/* quant/aw.c: the +aw channel weights (SCHEMES.md §9; the rules are in aw.h). */
#include "quant/aw.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

/* The weighted distance is computed as written: clang would fuse multiply-adds. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

int aw_nearest(const float *x, int dim, const float *centroids, int k, const float *w) {
    float best = INFINITY;
    int best_c = 0;
    for (int c = 0; c < k; c++) {
        const float *e = centroids + (size_t)c * dim;
        float t = x[0] - e[0], dist = w[0] * (t * t);
        for (int i = 1; i < dim; i++) {
            float u = x[i] - e[i];
            dist = dist + w[i] * (u * u);
        }
        if (dist < best) {   /* strictly lower: the first of equal distances stays */
            best = dist;
            best_c = c;
        }
    }
    return best_c;
}

/* Divides each head's d weights (float64) by their mean and stores them as float32; a head whose
 * weights have no mass gets all ones (then +aw is the plain distance). */
static void normalize_head(const double *sum, int d, float *w) {
    double mean = 0;
    for (int c = 0; c < d; c++) mean += sum[c];
    mean /= d;
    for (int c = 0; c < d; c++) w[c] = mean > 0 ? (float)(sum[c] / mean) : 1.0f;
}

void aw_key_weights(const float *stats_q, int n_heads, int n_kv_heads, int d, int prerope, float *w) {
    int group = n_heads / n_kv_heads;
    double sum[4096];
    for (int h = 0; h < n_kv_heads; h++) {
        for (int c = 0; c < d; c++) {
            double s = 0;
            for (int g = h * group; g < (h + 1) * group; g++) s += stats_q[((size_t)g * d + c) * 3 + 1];
            sum[c] = s;
        }
        if (prerope)   /* RoPE turns each pair (c, c + d/2) at every relative position */
            for (int c = 0; c < d / 2; c++) sum[c] = sum[c + d / 2] = (sum[c] + sum[c + d / 2]) / 2;
        normalize_head(sum, d, w + (size_t)h * d);
    }
}

void aw_value_weights(const float *wo, int dim, int n_heads, int n_kv_heads, int d, float *w) {
    int group = n_heads / n_kv_heads;
    size_t row = (size_t)n_heads * d;
    double sum[4096];
    for (int h = 0; h < n_kv_heads; h++) {
        for (int c = 0; c < d; c++) {
            double s = 0;
            for (int g = h * group; g < (h + 1) * group; g++)
                for (int i = 0; i < dim; i++) {
                    double v = wo[(size_t)i * row + (size_t)g * d + c];
                    s += v * v;
                }
            sum[c] = s;
        }
        normalize_head(sum, d, w + (size_t)h * d);
    }
}

/* Each entry to the weighted mean of its points; an entry without weight stays. */
static void move_weighted(const float *points, const float *weights, size_t n, float *centroids, int k,
                          const uint16_t *codes, double *scratch) {
    double *sum = scratch, *mass = scratch + k;
    memset(scratch, 0, 2 * (size_t)k * sizeof *scratch);
    for (size_t i = 0; i < n; i++) {
        sum[codes[i]] += (double)weights[i] * points[i];
        mass[codes[i]] += weights[i];
    }
    for (int c = 0; c < k; c++)
        if (mass[c] > 0) centroids[c] = (float)(sum[c] / mass[c]);
}

LloydResult aw_lloyd_fit_1d(const float *points, const float *weights, size_t n, float *centroids, int k,
                            int max_iterations, uint16_t *codes, double *scratch) {
    LloydResult r = {0, 0};
    memset(codes, 0, n * sizeof *codes);
    for (int pass = 0; pass < max_iterations; pass++) {
        size_t changed = lloyd_assign(points, n, 1, centroids, k, codes);
        r.iterations = pass + 1;
        if (pass > 0 && changed == 0) {
            r.converged = 1;
            break;
        }
        move_weighted(points, weights, n, centroids, k, codes, scratch);
    }
    return r;
}

void aw_scale_points(float *points, size_t n, int dim, const float *sqrt_w) {
    for (size_t i = 0; i < n; i++)
        for (int e = 0; e < dim; e++) points[i * dim + e] *= sqrt_w[e];
}

void aw_unscale_centroids(float *centroids, int k, int dim, const float *sqrt_w) {
    for (int c = 0; c < k; c++)
        for (int e = 0; e < dim; e++)
            centroids[(size_t)c * dim + e] = sqrt_w[e] > 0 ? centroids[(size_t)c * dim + e] / sqrt_w[e] : 0.0f;
}

double aw_objective(const float *points, size_t n, int dim, const float *w, const float *centroids, int k) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        double best = INFINITY;
        for (int c = 0; c < k; c++) {
            double s = 0;
            for (int e = 0; e < dim; e++) {
                double t = (double)points[i * dim + e] - centroids[(size_t)c * dim + e];
                s += w[e] * t * t;
            }
            if (s < best) best = s;
        }
        total += best;
    }
    return total;
}
