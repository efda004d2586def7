/* quant/pca.h: the arithmetic of pcaB, PCA transform coding (SCHEMES.md §9). Pure arithmetic: no allocation, no I/O, no global state; the
 * caller passes the scratch (pca_fit_scratch_bytes).
 *
 * A pcaB fit, per (layer, side, KV head), from calibration rows x (through sqrt(w) (.) x with +aw):
 *   mean mu and covariance Sigma = E[(x - mu)(x - mu)^T] in float64;
 *   the basis U: Sigma's eigenvectors (cyclic Jacobi) as rows, by descending eigenvalue (ties keep
 *     the solver's order), each signed so that its largest-magnitude entry (first on ties) is
 *     positive, stored float32;
 *   components y_i = U_i . (x - mu) in float32 (mu as float32, summed in channel order);
 *   per component and b = 1..8 a 2^b-entry table: §8's 1-D Lloyd (quant/lloyd.h, initialised at
 *     the sorted ranks floor((j + 1/2) n / K)), its distortion D_i(b) = sum (y_i - nearest)^2 in
 *     float64, and D_i(0) = sum y_i^2;
 *   bits b_i in 0..8 minimizing sum_i D_i(b_i) with sum_i b_i <= budget (pca_allocate).
 * A row is coded as code_i = the nearest entry of T_{i,b_i} to y_i (ties -> lower index,
 * lloyd_nearest; b_i = 0 stores nothing) and decoded as mu + sum_i yhat_i U_i (divided by sqrt(w)
 * with +aw). */
#ifndef KVQ_PCA_H
#define KVQ_PCA_H

#include <stddef.h>
#include <stdint.h>

#define PCA_MAX_BITS 8          /* bits of one component's code */
#define PCA_TABLE_STRIDE 256    /* floats per component in a tables array: 2^PCA_MAX_BITS */

/* One KV head's fitted transform, as the calibration file stores it (§9): mean [d], basis [d][d]
 * (row i = component i), bits [d] (whole numbers), tables [d][256] (the first 2^bits[i] entries
 * ascending, the rest 0). */
typedef struct {
    int d;
    const float *mean, *basis, *bits, *tables;
} PcaHead;

/* One KV head's fit as one block of floats, the four arrays back to back in that order (what a
 * codec's table holds): pca_head_floats(d) floats. */
size_t pca_head_floats(int d);
void pca_head_view(const float *block, int d, PcaHead *h);

/* ---- eigen-decomposition ---- */

/* Eigen-decomposition of the symmetric d x d matrix a (row-major, float64, destroyed) by cyclic
 * Jacobi rotations: values[d] descending, vectors[d][d] with row i the unit eigenvector of
 * values[i], signed by §9's rule. scratch: d doubles + d ints. Returns the sweeps made. */
int pca_eigen(double *a, int d, double *values, double *vectors, void *scratch);

/* ---- bit allocation ---- */

/* The exact dynamic programme of §9: bits[i] in 0..8 for i < d minimizing sum_i cost[i][bits[i]]
 * (cost: d rows of PCA_MAX_BITS + 1 float64 distortions) subject to sum_i bits[i] <= budget;
 * among allocations whose sums compare equal (sums evaluated as cost[0] + (cost[1] + (...))), the
 * lexicographically smallest (bits[0], bits[1], ...). scratch: pca_allocate_scratch_bytes.
 * Returns the minimum. */
double pca_allocate(const double *cost, int d, int budget, int *bits, void *scratch);
size_t pca_allocate_scratch_bytes(int d, int budget);

/* ---- fit ---- */

/* Scratch for pca_fit_head with n rows of d values and a budget of `budget` bits a row. */
size_t pca_fit_scratch_bytes(size_t n, int d, int budget);

/* Fits one KV head from n rows of d values (n >= 1). sqrt_w: NULL, or d weights' square roots
 * (+aw: the rows are scaled by them before anything else). Writes the head's block (pca_head_view's
 * order: mean[d], basis[d*d], bits[d] as floats, tables[d*256]); distortion (optional, d * 9
 * float64) receives D_i(b). Returns the minimum total distortion the allocation reached. */
double pca_fit_head(const float *rows, size_t n, int d, const float *sqrt_w, int budget, float *block,
                    double *distortion, void *scratch);

/* ---- rows ---- */

/* The components y = U (x' - mu) of one row (x' = sqrt_w (.) x with +aw, else x): y[d]. */
void pca_project(const PcaHead *h, const float *sqrt_w, const float *x, float *y);

/* codes[i] = the nearest entry of component i's table to y_i (0 where bits[i] = 0). */
void pca_encode_row(const PcaHead *h, const float *sqrt_w, const float *x, uint8_t *codes);

/* The row back: yhat_i = T_i[codes[i]] (0 where bits[i] = 0), x = mu + sum_i yhat_i U_i, then
 * divided by sqrt_w when given. out[d]. pca_coefficients, then pca_from_coefficients. */
void pca_decode_row(const PcaHead *h, const float *sqrt_w, const uint8_t *codes, float *out);

/* ---- attention on the coefficients ----
 * A decoded row is affine in its stored coefficients yhat: x = (mu + U^T yhat) / s, s = sqrt(w)
 * (1 without +aw). So for a query q, q . x = q' . yhat + (q / s) . mu with q' = U (q / s), and
 * for weights p_t, sum_t p_t x_t = (mu sum_t p_t + U^T sum_t p_t yhat_t) / s. Attention can then
 * read d coefficients a row (O(d)) instead of decoding it (O(d^2)), moving each query in and
 * each output back once per head. The term (q / s) . mu is the same for every row a query
 * reads, which softmax ignores, so it is dropped. sum_t p_t is carried by the unit slot: a
 * component of 0 bits (coefficient 0 in every row, q'_i = 0) that the cache's rows set to 1,
 * so that the sum of the weights attention actually used (bf16-rounded ones too, which do not
 * sum to 1 exactly) weighs the mean, as it does in the decoded rows. A head that stores every
 * component (near-isotropic rows: pca2 on random weights) has no unit slot; its mean is then
 * weighed by 1, softmax's sum, which bf16 weights miss by their rounding (~2^-9), as they do
 * the decoded rows' values. */

/* The first component of 0 bits (the unit slot), or -1 when every component is stored. */
int pca_unit_slot(const PcaHead *h);
/* out = (mu y[slot] + sum_i y_i U_i over components with bits[i] > 0) / sqrt_w (0 where sqrt_w
 * is 0): a weighted sum of coefficient rows, the unit slot holding the weights' sum, decoded. */
void pca_sum_from_coefficients(const PcaHead *h, const float *sqrt_w, const float *y, int slot, float *out);

/* yhat[d]: T_i[codes[i]], 0 where bits[i] = 0. */
void pca_coefficients(const PcaHead *h, const uint8_t *codes, float *y);
/* out = (mu + sum_i y_i U_i over components with bits[i] > 0) / sqrt_w (0 where sqrt_w is 0). */
void pca_from_coefficients(const PcaHead *h, const float *sqrt_w, const float *y, float *out);
/* out[i] = U_i . (q / sqrt_w) for components with bits[i] > 0, else 0 (q / 0 read as 0), for
 * `rows` rows of q and out (d floats each, back to back; out may be q). */
void pca_query_to_coefficients(const PcaHead *h, const float *sqrt_w, const float *q, int rows, float *out);

#endif
