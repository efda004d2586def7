/* quant/metrics.c: error metrics accumulated in double, and magnitude pruning
 * by selection. Definitions are in quant/metrics.h. */
#include <math.h>
#include "quant/metrics.h"

void kv_metrics_init(KvMetrics *m) {
    m->sum_err2 = m->sum_x2 = m->sum_xhat2 = m->sum_dot = m->max_err = 0.0;
    m->count = 0;
}

void kv_metrics_add(KvMetrics *m, const float *x, const float *x_hat, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double a = x[i], b = x_hat[i];
        double e = a - b;    /* exact: both are floats, the difference fits a double */
        m->sum_err2 += e * e;
        m->sum_x2 += a * a;
        m->sum_xhat2 += b * b;
        m->sum_dot += a * b;
        if (!(fabs(e) <= m->max_err))   /* a NaN error makes the maximum NaN: no check passes over it */
            m->max_err = fabs(e);
    }
    m->count += n;
}

KvQuality kv_metrics_finish(const KvMetrics *m) {
    KvQuality q;
    q.rmse = m->count ? sqrt(m->sum_err2 / (double)m->count) : 0.0;
    q.snr_db = m->sum_err2 > 0 ? 10.0 * log10(m->sum_x2 / m->sum_err2) : INFINITY;
    double norms = sqrt(m->sum_x2) * sqrt(m->sum_xhat2);
    if (norms > 0)
        q.cosine_similarity = m->sum_dot / norms;
    else
        q.cosine_similarity = (m->sum_x2 == 0 && m->sum_xhat2 == 0) ? 1.0 : 0.0;
    q.max_error = m->max_err;
    return q;
}

/* Magnitude used for ranking: NaN ranks above everything. */
static float rank_key(float v) { return isnan(v) ? INFINITY : fabsf(v); }

static void swap(float *a, float *b) {
    float t = *a;
    *a = *b;
    *b = t;
}

static float median3(float a, float b, float c) {
    if (a > b) {
        float t = a;
        a = b;
        b = t;
    }
    return c < a ? a : (c > b ? b : c);
}

/* Returns the k-th smallest (0-based) of a[0..n), rearranging a. Quickselect
 * with a three-way partition, so runs of equal magnitudes (zeros, say) cost
 * one pass; every round shrinks the range because the pivot block is never
 * empty. a must hold no NaN. */
static float select_kth(float *a, size_t n, size_t k) {
    size_t lo = 0, hi = n;   /* the answer lies in a[lo..hi) */
    for (;;) {
        float pivot = median3(a[lo], a[lo + (hi - lo) / 2], a[hi - 1]);
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {     /* [lo,lt) < pivot, [lt,i) == pivot, [gt,hi) > pivot */
            if (a[i] < pivot)
                swap(&a[lt++], &a[i++]);
            else if (a[i] > pivot)
                swap(&a[i], &a[--gt]);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
}

size_t kv_sparsify(float *x, size_t n, double fraction, float *scratch) {
    if (!(fraction > 0.0) || n == 0)
        return 0;
    size_t k = (size_t)(fraction * (double)n);
    if (k == 0)
        return 0;
    if (k > n)
        k = n;
    for (size_t i = 0; i < n; i++)
        scratch[i] = rank_key(x[i]);
    float threshold = select_kth(scratch, n, k - 1);
    /* Everything strictly below the k-th smallest magnitude goes; then values
     * equal to it, earliest first, until k are zeroed. */
    size_t below = 0;
    for (size_t i = 0; i < n; i++)
        below += rank_key(x[i]) < threshold;
    size_t ties_left = k - below;
    for (size_t i = 0; i < n; i++) {
        float r = rank_key(x[i]);
        if (r < threshold) {
            x[i] = 0.0f;
        } else if (r == threshold && ties_left > 0) {
            x[i] = 0.0f;
            ties_left--;
        }
    }
    return k;
}
