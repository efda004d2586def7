/* quant/metrics.h: quality of a quantized tensor against the original, and a
 * magnitude-pruning helper for sparsity experiments.
 * Accumulate every tensor of a cache into one KvMetrics (sums in double, so
 * millions of elements do not lose precision), then finish it:
 *   rmse              = sqrt(sum (x - x_hat)^2 / count)
 *   snr_db            = 10*log10(sum x^2 / sum (x - x_hat)^2)   (+inf when exact)
 *   cosine_similarity = sum x*x_hat / (sqrt(sum x^2) * sqrt(sum x_hat^2))
 *                       (1 when both are all zero, 0 when only one is)
 *   max_error         = max |x - x_hat|
 * These are the definitions of tests/fixtures/reference/kv-*.metrics.json. */
#ifndef KVQ_METRICS_H
#define KVQ_METRICS_H

#include <stddef.h>

typedef struct {
    double sum_err2;    /* sum (x - x_hat)^2 */
    double sum_x2;      /* sum x^2 */
    double sum_xhat2;   /* sum x_hat^2 */
    double sum_dot;     /* sum x * x_hat */
    double max_err;     /* max |x - x_hat| */
    size_t count;       /* elements seen */
} KvMetrics;

typedef struct {
    double rmse;
    double snr_db;
    double cosine_similarity;
    double max_error;
} KvQuality;

/* Sets every sum to zero. */
void kv_metrics_init(KvMetrics *m);
/* Adds n pairs (x[i], x_hat[i]). */
void kv_metrics_add(KvMetrics *m, const float *x, const float *x_hat, size_t n);
/* The four figures from the sums (rmse 0 for an empty accumulator). */
KvQuality kv_metrics_finish(const KvMetrics *m);

/* Zeroes the k = floor(fraction * n) values of x with the smallest magnitude.
 * fraction must be in [0, 1); scratch holds n floats (overwritten).
 * Ties at the threshold magnitude: the earliest indices are zeroed first, so
 * exactly k values are zeroed. NaN counts as the largest magnitude.
 * Uses quickselect (expected O(n)), not a full sort. Returns k. */
size_t kv_sparsify(float *x, size_t n, double fraction, float *scratch);

#endif
