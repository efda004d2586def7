/* quant/aw.h: the `+aw` attention-aware channel weights of SCHEMES.md §9. An error in a cached key
 * costs attention through q.k, an error in a value through o_proj; the fitted bases (nuq, vq, rvq,
 * pca) with +aw measure distances with these per-channel weights w[h][c] (KV head h, channel c).
 * Pure arithmetic: no allocation, no I/O. */
#ifndef KVQ_AW_H
#define KVQ_AW_H

#include <stddef.h>
#include <stdint.h>
#include "quant/lloyd.h"

/* Key weights [n_kv_heads][d] of one layer from its stats.q [n_heads][d][3] (mean, mean square,
 * max|x| of each query channel): w[h][c] = the sum of stats_q[g][c][1] over the query heads g of
 * h's group (g / (n_heads / n_kv_heads) = h); with prerope each RoPE pair (c, c + d/2) takes its
 * average; then each head divided by its mean over c (a zero mean -> all ones). Computed in
 * float64, stored float32. */
void aw_key_weights(const float *stats_q, int n_heads, int n_kv_heads, int d, int prerope, float *w);

/* Value weights [n_kv_heads][d]: w[h][c] = sum over h's query heads g and over the rows i < dim
 * of o_proj (wo: dim rows of n_heads*d floats, W_o[i][g*d + c]) of W_o[i][g*d + c]^2, then each
 * head divided by its mean as for keys. */
void aw_value_weights(const float *wo, int dim, int n_heads, int n_kv_heads, int d, float *w);

/* nuq's +aw fit (§9): Lloyd on 1-D points where each point has a weight (its channel's w): the
 * assignment is lloyd_assign's (a scalar's nearest entry does not depend on its weight), the move
 * puts each entry at the weighted mean of its points (sums in float64, rounded once to float32; an
 * entry with no weight stays), until a pass changes no assignment or max_iterations. scratch: 2k
 * doubles. */
LloydResult aw_lloyd_fit_1d(const float *points, const float *weights, size_t n, float *centroids, int k,
                            int max_iterations, uint16_t *codes, double *scratch);

/* vq's and rvq's +aw fit (§9): the weighted distance sum_e w_e (u_e - c_e)^2 is the plain one of
 * sqrt(w) (.) u, and a cluster's plain mean scales the same way, so Lloyd on the scaled points
 * gives the weighted fit (up to float rounding in the distances). These scale n points of dim
 * values by sqrt_w[dim] in place, and k centroids back by 1 / sqrt_w (a weight of 0: 0). */
void aw_scale_points(float *points, size_t n, int dim, const float *sqrt_w);
void aw_unscale_centroids(float *centroids, int k, int dim, const float *sqrt_w);

/* +aw's nearest entry (§9, vq and rvq): the entry of the k (dim values each) minimizing
 * sum_e w_e * (t_e * t_e), t = x - entry, in float32, summed in channel order, no multiply-add
 * fused; ties -> the lower index (as lloyd_nearest for the plain distance). */
int aw_nearest(const float *x, int dim, const float *centroids, int k, const float *w);

/* The weighted objective: sum over the points of min over the k centroids of sum_e w_e (p_e - c_e)^2,
 * in float64 (what a +aw fit lowers; for comparing tables of the same points). */
double aw_objective(const float *points, size_t n, int dim, const float *w, const float *centroids, int k);

#endif
