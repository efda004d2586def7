/* quant/pca.c: pcaB's fit and row transform (SCHEMES.md §9; the rules are in pca.h). */
#include "quant/pca.h"
#include <math.h>
#include <string.h>
#include "quant/lloyd.h"
#include "quant/transpose16.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* y = U x and x = U^T y must be computed as written (float32, left to right), like lloyd.c's
 * distance: clang would otherwise fuse multiply-adds. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define JACOBI_MAX_SWEEPS 100

size_t pca_head_floats(int d) { return (size_t)d * (size_t)(d + 2 + PCA_TABLE_STRIDE); }

void pca_head_view(const float *block, int d, PcaHead *h) {
    h->d = d;
    h->mean = block;
    h->basis = block + d;
    h->bits = h->basis + (size_t)d * d;
    h->tables = h->bits + d;
}

/* ---- eigen-decomposition ---- */

/* One Jacobi rotation zeroing a[p][q] (p < q) of the symmetric a, accumulated into v's columns. */
static void jacobi_rotate(double *a, double *v, int d, int p, int q) {
    double apq = a[(size_t)p * d + q];
    double theta = (a[(size_t)q * d + q] - a[(size_t)p * d + p]) / (2 * apq);
    double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
    double c = 1 / sqrt(t * t + 1), s = t * c;
    for (int k = 0; k < d; k++) {   /* columns p and q */
        double akp = a[(size_t)k * d + p], akq = a[(size_t)k * d + q];
        a[(size_t)k * d + p] = c * akp - s * akq;
        a[(size_t)k * d + q] = s * akp + c * akq;
    }
    for (int k = 0; k < d; k++) {   /* rows p and q */
        double apk = a[(size_t)p * d + k], aqk = a[(size_t)q * d + k];
        a[(size_t)p * d + k] = c * apk - s * aqk;
        a[(size_t)q * d + k] = s * apk + c * aqk;
    }
    for (int k = 0; k < d; k++) {
        double vkp = v[(size_t)k * d + p], vkq = v[(size_t)k * d + q];
        v[(size_t)k * d + p] = c * vkp - s * vkq;
        v[(size_t)k * d + q] = s * vkp + c * vkq;
    }
}

static double off_diagonal(const double *a, int d) {
    double s = 0;
    for (int p = 0; p < d; p++)
        for (int q = p + 1; q < d; q++) s += a[(size_t)p * d + q] * a[(size_t)p * d + q];
    return s;
}

/* Sweeps of rotations over every pair until the off-diagonal mass is negligible against the
 * diagonal (or stops shrinking); v receives the eigenvectors as columns. */
static int jacobi(double *a, double *v, int d) {
    for (int i = 0; i < d * d; i++) v[i] = 0;
    for (int i = 0; i < d; i++) v[(size_t)i * d + i] = 1;
    double diag = 0;
    for (int i = 0; i < d; i++) diag += a[(size_t)i * d + i] * a[(size_t)i * d + i];
    int sweep = 0;
    while (sweep < JACOBI_MAX_SWEEPS) {
        double off = off_diagonal(a, d);
        if (off == 0 || off <= 1e-30 * diag) break;
        sweep++;
        for (int p = 0; p < d; p++)
            for (int q = p + 1; q < d; q++)
                if (a[(size_t)p * d + q] != 0) jacobi_rotate(a, v, d, p, q);
    }
    return sweep;
}

/* Flips v (d values) so that its largest-magnitude entry, the first of equal magnitudes, is
 * positive: an eigenvector's sign is otherwise arbitrary. */
static void sign_vector(double *v, int d) {
    int big = 0;
    for (int i = 1; i < d; i++)
        if (fabs(v[i]) > fabs(v[big])) big = i;
    if (v[big] < 0)
        for (int i = 0; i < d; i++) v[i] = -v[i];
}

int pca_eigen(double *a, int d, double *values, double *vectors, void *scratch) {
    double *columns = vectors;   /* Jacobi's eigenvectors as columns, then reordered as rows */
    double *diag = scratch;
    int *order = (int *)(diag + d);
    int sweeps = jacobi(a, columns, d);
    for (int i = 0; i < d; i++) {
        diag[i] = a[(size_t)i * d + i];
        order[i] = i;
    }
    /* Insertion sort by descending eigenvalue: stable, so equal values keep Jacobi's order. */
    for (int i = 1; i < d; i++) {
        int o = order[i], j = i;
        for (; j > 0 && diag[order[j - 1]] < diag[o]; j--) order[j] = order[j - 1];
        order[j] = o;
    }
    /* Transpose in place (columns -> rows), then permute the rows by order. */
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++) {
            double t = columns[(size_t)i * d + j];
            columns[(size_t)i * d + j] = columns[(size_t)j * d + i];
            columns[(size_t)j * d + i] = t;
        }
    for (int i = 0; i < d; i++) {   /* a is free now: it holds the permuted rows */
        values[i] = diag[order[i]];
        memcpy(a + (size_t)i * d, vectors + (size_t)order[i] * d, (size_t)d * sizeof *a);
    }
    memcpy(vectors, a, (size_t)d * d * sizeof *a);
    for (int i = 0; i < d; i++) sign_vector(vectors + (size_t)i * d, d);
    return sweeps;
}

/* ---- bit allocation ---- */

size_t pca_allocate_scratch_bytes(int d, int budget) {
    return (size_t)(d + 1) * (size_t)(budget + 1) * sizeof(double);
}

/* best[i][r]: the least distortion of components i..d-1 with at most r bits, as the right-nested
 * sum cost[i][b] + best[i + 1][r - b]; then the forward pass takes, at each component, the fewest
 * bits that reach the optimum exactly: that is the lexicographically smallest optimal allocation. */
double pca_allocate(const double *cost, int d, int budget, int *bits, void *scratch) {
    if (budget < 0) budget = 0;
    double *best = scratch;
    size_t width = (size_t)budget + 1;
    for (int r = 0; r <= budget; r++) best[(size_t)d * width + r] = 0;
    for (int i = d - 1; i >= 0; i--)
        for (int r = 0; r <= budget; r++) {
            double m = INFINITY;
            for (int b = 0; b <= PCA_MAX_BITS && b <= r; b++) {
                double v = cost[(size_t)i * (PCA_MAX_BITS + 1) + b] + best[(size_t)(i + 1) * width + (r - b)];
                if (v < m) m = v;
            }
            best[(size_t)i * width + r] = m;
        }
    int r = budget;
    for (int i = 0; i < d; i++) {
        double target = best[(size_t)i * width + r];
        int b = 0;
        while (b < PCA_MAX_BITS && b < r &&
               !(cost[(size_t)i * (PCA_MAX_BITS + 1) + b] + best[(size_t)(i + 1) * width + (r - b)] == target))
            b++;
        bits[i] = b;
        r -= b;
    }
    return best[budget];
}

/* ---- fit ---- */

/* The scratch of pca_fit_head, carved from one block (doubles first for alignment). */
typedef struct {
    double *cov, *vectors, *values, *eigen_scratch, *cost, *dp, *distances;
    float *x, *y, *all_tables, *basis_t;
    uint32_t *order, *order_scratch;
    uint16_t *codes;
    void *lloyd;
    int *bits;
} FitScratch;

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The next aligned piece of `bytes` bytes at *at of base (NULL when only counting). */
static void *take(char *base, size_t *at, size_t bytes) {
    void *p = base ? base + *at : NULL;
    *at += align8(bytes);
    return p;
}

static size_t carve(FitScratch *s, void *base, size_t n, int d, int budget) {
    size_t dd = (size_t)d * d, at = 0;
    char *p = base;
    s->cov = take(p, &at, dd * sizeof(double));
    s->vectors = take(p, &at, dd * sizeof(double));
    s->values = take(p, &at, (size_t)d * sizeof(double));
    s->eigen_scratch = take(p, &at, (size_t)d * (sizeof(double) + sizeof(int)));
    s->cost = take(p, &at, (size_t)d * (PCA_MAX_BITS + 1) * sizeof(double));
    s->dp = take(p, &at, pca_allocate_scratch_bytes(d, budget));
    s->distances = take(p, &at, n * sizeof(double));
    s->lloyd = take(p, &at, lloyd_ordered_scratch_bytes(n, PCA_TABLE_STRIDE));
    s->x = take(p, &at, n * d * sizeof(float));
    s->y = take(p, &at, n * d * sizeof(float));
    s->order = take(p, &at, n * sizeof(uint32_t));
    s->order_scratch = take(p, &at, lloyd_order_scratch_bytes(n));
    s->all_tables = take(p, &at, (size_t)d * PCA_MAX_BITS * PCA_TABLE_STRIDE * sizeof(float));
    s->basis_t = take(p, &at, (size_t)d * d * sizeof(float));
    s->codes = take(p, &at, n * sizeof(uint16_t));
    s->bits = take(p, &at, (size_t)d * sizeof(int));
    return at;
}

size_t pca_fit_scratch_bytes(size_t n, int d, int budget) {
    FitScratch s;
    return carve(&s, NULL, n, d, budget);
}

/* Mean (float64, then stored float32) and covariance (float64, around the float64 mean) of the rows. */
static void moments(const float *x, size_t n, int d, double *mean64, float *mean, double *cov) {
    for (int c = 0; c < d; c++) mean64[c] = 0;
    for (size_t r = 0; r < n; r++)
        for (int c = 0; c < d; c++) mean64[c] += x[r * d + c];
    for (int c = 0; c < d; c++) {
        mean64[c] /= (double)n;
        mean[c] = (float)mean64[c];
    }
    memset(cov, 0, (size_t)d * d * sizeof *cov);
    double centered[4096];
    for (size_t r = 0; r < n; r++) {
        for (int c = 0; c < d; c++) centered[c] = x[r * d + c] - mean64[c];
        for (int i = 0; i < d; i++)
            for (int j = i; j < d; j++) cov[(size_t)i * d + j] += centered[i] * centered[j];
    }
    for (int i = 0; i < d; i++)
        for (int j = i; j < d; j++) cov[(size_t)j * d + i] = cov[(size_t)i * d + j] /= (double)n;
}

/* Component i's Lloyd tables for b = 1..8 into tables[(b - 1) * 256 ..] and D_i(0..8) into cost.
 * The component's values are put in order once for the 8 fits (lloyd_fit_ordered: lloyd_fit's
 * result, each pass O(n)). */
static void fit_component(const float *y, size_t n, float *tables, double *cost, FitScratch *s) {
    double energy = 0;
    for (size_t r = 0; r < n; r++) energy += (double)y[r] * y[r];
    cost[0] = energy;
    lloyd_sort_order(y, n, s->order, s->order_scratch);
    for (int b = 1; b <= PCA_MAX_BITS; b++) {
        int k = 1 << b;
        float *t = tables + (size_t)(b - 1) * PCA_TABLE_STRIDE;
        lloyd_init_ranks_ordered(y, n, s->order, k, t);
        lloyd_fit_ordered(y, n, s->order, t, k, LLOYD_MAX_ITERATIONS, s->codes, s->lloyd);
        cost[b] = lloyd_objective_ordered(y, n, s->order, t, k, s->distances);   /* = lloyd_objective */
    }
}

/* pca_project of each of the n rows into y transposed (component i's n values together), bit for
 * bit: every component's sum in pca_project's order, but the components side by side (the basis
 * transposed into basis_t, d x d), so that the loop over them vectorizes. */
static void project_rows(const PcaHead *h, const float *x, size_t n, float *basis_t, float *y) {
    int d = h->d;
    for (int i = 0; i < d; i++)
        for (int c = 0; c < d; c++) basis_t[(size_t)c * d + i] = h->basis[(size_t)i * d + c];
    for (size_t r = 0; r < n; r++) {
        float centered[4096], sum[4096];
        for (int c = 0; c < d; c++) centered[c] = x[r * d + c] - h->mean[c];
        for (int i = 0; i < d; i++) sum[i] = basis_t[i] * centered[0];
        for (int c = 1; c < d; c++) {
            const float *column = basis_t + (size_t)c * d;
            for (int i = 0; i < d; i++) sum[i] = sum[i] + column[i] * centered[c];
        }
        for (int i = 0; i < d; i++) y[(size_t)i * n + r] = sum[i];
    }
}

double pca_fit_head(const float *rows, size_t n, int d, const float *sqrt_w, int budget, float *block,
                    double *distortion, void *scratch) {
    float *mean = block, *basis = mean + d, *bits = basis + (size_t)d * d, *tables = bits + d;   /* pca_head_view */
    FitScratch s;
    carve(&s, scratch, n, d, budget);
    for (size_t r = 0; r < n; r++)
        for (int c = 0; c < d; c++) s.x[r * d + c] = sqrt_w ? sqrt_w[c] * rows[r * d + c] : rows[r * d + c];
    moments(s.x, n, d, s.values, mean, s.cov);   /* values holds the float64 mean for a moment */
    pca_eigen(s.cov, d, s.values, s.vectors, s.eigen_scratch);
    for (size_t i = 0; i < (size_t)d * d; i++) basis[i] = (float)s.vectors[i];
    PcaHead h = {.d = d, .mean = mean, .basis = basis};
    project_rows(&h, s.x, n, s.basis_t, s.y);
    for (int i = 0; i < d; i++)
        fit_component(s.y + (size_t)i * n, n, s.all_tables + (size_t)i * PCA_MAX_BITS * PCA_TABLE_STRIDE,
                      s.cost + (size_t)i * (PCA_MAX_BITS + 1), &s);
    double total = pca_allocate(s.cost, d, budget, s.bits, s.dp);
    memset(tables, 0, (size_t)d * PCA_TABLE_STRIDE * sizeof *tables);
    for (int i = 0; i < d; i++) {
        bits[i] = (float)s.bits[i];
        if (s.bits[i] > 0)
            memcpy(tables + (size_t)i * PCA_TABLE_STRIDE,
                   s.all_tables + ((size_t)i * PCA_MAX_BITS + (size_t)(s.bits[i] - 1)) * PCA_TABLE_STRIDE,
                   ((size_t)1 << s.bits[i]) * sizeof *tables);
    }
    if (distortion) memcpy(distortion, s.cost, (size_t)d * (PCA_MAX_BITS + 1) * sizeof *distortion);
    return total;
}

/* ---- rows ---- */

/* Component i's bits; anything outside 1..8 (only a hostile table holds it) stores nothing. */
static int stored_bits(const PcaHead *h, int i) {
    float v = h->bits[i];
    return v >= 1 && v <= PCA_MAX_BITS ? (int)v : 0;
}

#if defined(__AVX512F__)
/* Rows i0..i0+15, channels c0..c0+15 of the d x d basis, transposed into col[16]: col[j] lane m
 * = basis[i0 + m][c0 + j]. */
static void basis_tile_t(const float *basis, int d, int i0, int c0, __m512 col[16]) {
    transpose16_load(basis + (size_t)i0 * d + c0, (size_t)d, col);
}
#endif

/* out[r * d + i] = U_i . v_r for every row i of U and each of `rows` vectors v_r (v[r * d ..]),
 * each summed in channel order (s = u[0] v[0], then s = s + u[c] v[c]). The sums are
 * independent: AVX-512 takes 16 rows of U at once, one a lane, in that same order, from
 * transposed 16 x 16 tiles of U (one sum alone is a chain of dependent adds, which ran at the
 * add's latency: the top of a pca prefill's profile); each tile is transposed once for all the
 * vectors (the transposes cost several times the products: a query head group's 8 rows share
 * them), each vector's 16 sums kept in out between tiles. */
static void basis_dots(const float *basis, int d, const float *v, int rows, float *out) {
    int i0 = 0;
#if defined(__AVX512F__)
    if (d % 16 == 0)
        for (; i0 < d; i0 += 16)
            for (int c0 = 0; c0 < d; c0 += 16) {
                __m512 col[16];
                basis_tile_t(basis, d, i0, c0, col);
                for (int r = 0; r < rows; r++) {
                    const float *vr = v + (size_t)r * d;
                    float *sums = out + (size_t)r * d + i0;
                    __m512 acc = c0 ? _mm512_loadu_ps(sums) : _mm512_setzero_ps();
                    for (int j = 0; j < 16; j++) {   /* v[c] broadcast from memory: a load, not a permute */
                        __m512 term = _mm512_mul_ps(col[j], _mm512_set1_ps(vr[c0 + j]));
                        acc = c0 + j == 0 ? term : _mm512_add_ps(acc, term);
                    }
                    _mm512_storeu_ps(sums, acc);
                }
            }
#endif
    for (int r = 0; r < rows; r++)
        for (int i = i0; i < d; i++) {
            const float *u = basis + (size_t)i * d, *vr = v + (size_t)r * d;
            float s = u[0] * vr[0];
            for (int c = 1; c < d; c++) s = s + u[c] * vr[c];
            out[(size_t)r * d + i] = s;
        }
}

void pca_project(const PcaHead *h, const float *sqrt_w, const float *x, float *y) {
    int d = h->d;
    float centered[4096];
    centered[0] = 0.0f;   /* d >= 1; said so for the compiler's uninitialized-use check */
    for (int c = 0; c < d; c++) centered[c] = (sqrt_w ? sqrt_w[c] * x[c] : x[c]) - h->mean[c];
    basis_dots(h->basis, d, centered, 1, y);
}

/* lloyd_nearest(&y, 1, table, k): the entry of least (y - entry)^2, the first of equal ones, 0
 * when none is below infinity (NaN). Here for the call's cost on small tables, and 16 entries
 * at a time on large ones (the first lane holding the least distance is the scalar loop's
 * answer: it moves only on a strictly lower one). */
static int nearest_entry(float y, const float *table, int k) {
    int c = 0, best_c = 0;
    float best = INFINITY;
#if defined(__AVX512F__)
    if (k >= 16) {
        __m512 least = _mm512_set1_ps(INFINITY), yv = _mm512_set1_ps(y);
        for (; c + 16 <= k; c += 16) {
            __m512 t = _mm512_sub_ps(yv, _mm512_loadu_ps(table + c));
            least = _mm512_min_ps(_mm512_mul_ps(t, t), least);   /* a NaN distance keeps least */
        }
        best = _mm512_reduce_min_ps(least);
        for (int e = 0; e < c && best < INFINITY; e++) {
            float t = y - table[e];
            if (t * t == best) {
                best_c = e;
                break;
            }
        }
    }
#endif
    for (; c < k; c++) {
        float t = y - table[c];
        float d = t * t;
        if (d < best) {   /* strictly lower: on equal distances the first (lower) index stays */
            best = d;
            best_c = c;
        }
    }
    return best_c;
}

void pca_encode_row(const PcaHead *h, const float *sqrt_w, const float *x, uint8_t *codes) {
    float y[4096];
    pca_project(h, sqrt_w, x, y);
    for (int i = 0; i < h->d; i++) {
        int b = stored_bits(h, i);
        codes[i] = b > 0 ? (uint8_t)nearest_entry(y[i], h->tables + (size_t)i * PCA_TABLE_STRIDE, 1 << b) : 0;
    }
}

void pca_coefficients(const PcaHead *h, const uint8_t *codes, float *y) {
    for (int i = 0; i < h->d; i++)
        y[i] = stored_bits(h, i) ? h->tables[(size_t)i * PCA_TABLE_STRIDE + codes[i]] : 0.0f;
}

#if defined(__AVX512F__)
/* affine_row's channels c0 .. c0 + 16 * VECTORS - 1, the row in registers over every i (VECTORS a
 * constant where it is inlined, or GCC keeps the row on the stack). */
static inline __attribute__((always_inline)) void affine_chunk(const PcaHead *h, const float *sqrt_w, const float *y,
                                                               float *out, int c0, int vectors) {
    int d = h->d;
    __m512 acc[4];
    for (int v = 0; v < vectors; v++) acc[v] = _mm512_loadu_ps(out + c0 + 16 * v);
    for (int i = 0; i < d; i++) {
        if (stored_bits(h, i) == 0) continue;
        __m512 yi = _mm512_set1_ps(y[i]);
        const float *u = h->basis + (size_t)i * d + c0;
        for (int v = 0; v < vectors; v++) acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(yi, _mm512_loadu_ps(u + 16 * v)));
    }
    for (int v = 0; v < vectors; v++) {
        if (sqrt_w) {   /* pca_from_coefficients' rule: 0 where sqrt(w) is not positive */
            __m512 w = _mm512_loadu_ps(sqrt_w + c0 + 16 * v);
            acc[v] = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_GT_OQ), acc[v], w);
        }
        _mm512_storeu_ps(out + c0 + 16 * v, acc[v]);
    }
}
#endif

/* out[c] = (out[c] + the stored components' y[i] U[i][c], i ascending) / sqrt_w[c] (0 where
 * sqrt_w[c] is not positive; no division without sqrt_w): the sums of pca_from_coefficients and
 * pca_sum_from_coefficients. AVX-512: 64 channels (then 16) in registers over every i, the same
 * products and sums in the same order (no fused multiply-add), where the plain loop stored and
 * reloaded the row for each i (a coefficient-read prefill moves 32 rows a token and layer). */
static void affine_row(const PcaHead *h, const float *sqrt_w, const float *y, float *out) {
    int d = h->d, c0 = 0;
#if defined(__AVX512F__)
    for (; c0 + 64 <= d; c0 += 64) affine_chunk(h, sqrt_w, y, out, c0, 4);
    for (; c0 + 16 <= d; c0 += 16) affine_chunk(h, sqrt_w, y, out, c0, 1);
#endif
    for (int i = 0; i < d && c0 < d; i++) {
        if (stored_bits(h, i) == 0) continue;
        float yi = y[i];
        const float *u = h->basis + (size_t)i * d;
        for (int c = c0; c < d; c++) out[c] = out[c] + yi * u[c];
    }
    if (sqrt_w)   /* a channel of weight 0 was coded as 0 (it costs nothing): it decodes to 0 */
        for (int c = c0; c < d; c++) out[c] = sqrt_w[c] > 0 ? out[c] / sqrt_w[c] : 0.0f;
}

void pca_from_coefficients(const PcaHead *h, const float *sqrt_w, const float *y, float *out) {
    for (int c = 0; c < h->d; c++) out[c] = h->mean[c];
    affine_row(h, sqrt_w, y, out);
}

/* stored_bits' test 16 components at a time where AVX-512 has it: a coefficient move asks for
 * the slot once per row. */
int pca_unit_slot(const PcaHead *h) {
    int i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= h->d; i += 16) {
        __m512 v = _mm512_loadu_ps(h->bits + i);
        unsigned stored = _mm512_cmp_ps_mask(v, _mm512_set1_ps(1.0f), _CMP_GE_OQ) &
                          _mm512_cmp_ps_mask(v, _mm512_set1_ps((float)PCA_MAX_BITS), _CMP_LE_OQ);
        if (stored != 0xffffu) return i + __builtin_ctz(~stored);
    }
#endif
    for (; i < h->d; i++)
        if (stored_bits(h, i) == 0) return i;
    return -1;
}

void pca_sum_from_coefficients(const PcaHead *h, const float *sqrt_w, const float *y, int slot, float *out) {
    float weight = y[slot];
    for (int c = 0; c < h->d; c++) out[c] = h->mean[c] * weight;
    affine_row(h, sqrt_w, y, out);
}

void pca_decode_row(const PcaHead *h, const float *sqrt_w, const uint8_t *codes, float *out) {
    float y[4096];
    pca_coefficients(h, codes, y);
    pca_from_coefficients(h, sqrt_w, y, out);
}

void pca_query_to_coefficients(const PcaHead *h, const float *sqrt_w, const float *q, int rows, float *out) {
    int d = h->d, chunk = 4096 / d;   /* rows of q scaled at a time (copied first: out may be q) */
    float scaled[4096];
    scaled[0] = 0.0f;   /* d >= 1; said so for the compiler's uninitialized-use check */
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int n = rows - r0 < chunk ? rows - r0 : chunk;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < d; c++) {
                float x = q[(size_t)(r0 + r) * d + c];
                scaled[r * d + c] = !sqrt_w ? x : sqrt_w[c] > 0 ? x / sqrt_w[c] : 0.0f;
            }
        basis_dots(h->basis, d, scaled, n, out + (size_t)r0 * d);
    }
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < d; i++)
            if (stored_bits(h, i) == 0) out[(size_t)r * d + i] = 0.0f;   /* every stored row's coefficient i is 0 */
}
