/* model/gemm_x86.c: matmul paths in x86 intrinsics, each compiled only when the build
 * targets the feature (-march=native sets __AVX2__, __AVX512F__, __AVX512BF16__).
 * Same structure as the plain-C path (model/gemm.h): a streaming GEMV for T < 4 and the
 * shared blocked driver with a register-tile microkernel for larger T.
 *   AVX2:        GEMV 8 wide; microkernel 6 tokens x 16 rows (12 ymm accumulators).
 *   AVX-512:     GEMV 16 wide; microkernel 14 tokens x 32 rows (28 zmm accumulators).
 *   AVX-512 BF16: activations rounded to bf16 once per call into scratch, then vdpbf16ps
 *                multiplies pairs: twice the multiply-adds per instruction of f32 FMA. */
#include "model/gemm.h"
#include "model/kernels.h"
#include "quant/half.h"
#include <string.h>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Rows per GEMV work item (each row is still read on its own, front to back). */
#define GEMV_BLOCK 16

/* ===================================================================== AVX2 */
#if defined(__AVX2__) && defined(__FMA__)

/* Eight weights at element i of a row, widened to f32 (dt is a constant after inlining). */
static inline __m256 load8(DType dt, const void *row, int i) {
    if (dt == DT_BF16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
#if defined(__F16C__)
    if (dt == DT_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
#endif
    return _mm256_loadu_ps((const float *)row + i);
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float widen1(DType dt, const void *row, int i) {
    if (dt == DT_BF16) return bf16_to_f32(((const uint16_t *)row)[i]);
    if (dt == DT_F16) return f16_to_f32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

/* out[t, r] for rows r0..r0+nr-1 and every t: one row at a time, four independent sums. */
static inline void gemv8_block(DType dt, float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows;
    size_t esize = dt == DT_F32 ? 4 : 2;
    for (int j = 0; j < nr; j++) {
        const unsigned char *row = (const unsigned char *)w->data + (size_t)(r0 + j) * K * esize;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            int k = 0;
            for (; k + 32 <= K; k += 32)
                for (int u = 0; u < 4; u++)
                    acc[u] = _mm256_fmadd_ps(load8(dt, row, k + 8 * u), _mm256_loadu_ps(xt + k + 8 * u), acc[u]);
            for (; k + 8 <= K; k += 8) acc[0] = _mm256_fmadd_ps(load8(dt, row, k), _mm256_loadu_ps(xt + k), acc[0]);
            float s = hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
            for (; k < K; k++) s += xt[k] * widen1(dt, row, k);
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

static void gemv_avx2(float *out, const float *x, const Matrix *w, int T) {
    int n_blocks = (w->rows + GEMV_BLOCK - 1) / GEMV_BLOCK;
    double work = (double)w->rows * w->cols * T;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK)
    for (int b = 0; b < n_blocks; b++) {
        int r0 = b * GEMV_BLOCK, nr = w->rows - r0 < GEMV_BLOCK ? w->rows - r0 : GEMV_BLOCK;
        if (w->dtype == DT_BF16) gemv8_block(DT_BF16, out, x, w, T, r0, nr);
        else if (w->dtype == DT_F16) gemv8_block(DT_F16, out, x, w, T, r0, nr);
        else gemv8_block(DT_F32, out, x, w, T, r0, nr);
    }
}

#define AVX2_MR 6
#define AVX2_NR 16
static void kernel_avx2(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc, int accumulate) {
    const float *a = a_, *b = panel;
    __m256 acc[AVX2_MR][2];
    for (int m = 0; m < AVX2_MR; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b + (size_t)k * AVX2_NR), b1 = _mm256_load_ps(b + (size_t)k * AVX2_NR + 8);
        for (int m = 0; m < AVX2_MR; m++) {
            __m256 am = _mm256_broadcast_ss(a + (size_t)m * lda + k);
            acc[m][0] = _mm256_fmadd_ps(am, b0, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(am, b1, acc[m][1]);
        }
    }
    for (int m = 0; m < AVX2_MR; m++) {
        float *cm = c + (size_t)m * ldc;
        if (accumulate) {
            acc[m][0] = _mm256_add_ps(acc[m][0], _mm256_loadu_ps(cm));
            acc[m][1] = _mm256_add_ps(acc[m][1], _mm256_loadu_ps(cm + 8));
        }
        _mm256_storeu_ps(cm, acc[m][0]);
        _mm256_storeu_ps(cm + 8, acc[m][1]);
    }
}

void matmul_avx2(float *out, const float *x, const Matrix *w, int T) {
    if (T < GEMV_MAX_T) {
        gemv_avx2(out, x, w, T);
        return;
    }
    static const GemmSpec spec = {AVX2_MR, AVX2_NR, pack_panel_f32, kernel_avx2};
    gemm_drive(&spec, out, x, w->cols, w, T);
}
#endif

/* =================================================================== AVX-512 */
#if defined(__AVX512F__)

static inline __m512 load16(DType dt, const void *row, int i) {
    if (dt == DT_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (dt == DT_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
    return _mm512_loadu_ps((const float *)row + i);
}

static inline float widen_one(DType dt, const void *row, int i) {
    if (dt == DT_BF16) return bf16_to_f32(((const uint16_t *)row)[i]);
    if (dt == DT_F16) return f16_to_f32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

/* One row at a time, front to back, four independent sums (see gemv_bf16_block). */
static inline void gemv16_block(DType dt, float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows;
    size_t esize = dt == DT_F32 ? 4 : 2;
    for (int j = 0; j < nr; j++) {
        const unsigned char *row = (const unsigned char *)w->data + (size_t)(r0 + j) * K * esize;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            int k = 0;
            for (; k + 64 <= K; k += 64)
                for (int u = 0; u < 4; u++)
                    acc[u] = _mm512_fmadd_ps(load16(dt, row, k + 16 * u), _mm512_loadu_ps(xt + k + 16 * u), acc[u]);
            for (; k + 16 <= K; k += 16) acc[0] = _mm512_fmadd_ps(load16(dt, row, k), _mm512_loadu_ps(xt + k), acc[0]);
            float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
            for (; k < K; k++) s += xt[k] * widen_one(dt, row, k);
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

static void gemv_avx512(float *out, const float *x, const Matrix *w, int T) {
    int n_blocks = (w->rows + GEMV_BLOCK - 1) / GEMV_BLOCK;
    double work = (double)w->rows * w->cols * T;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK)
    for (int b = 0; b < n_blocks; b++) {
        int r0 = b * GEMV_BLOCK, nr = w->rows - r0 < GEMV_BLOCK ? w->rows - r0 : GEMV_BLOCK;
        if (w->dtype == DT_BF16) gemv16_block(DT_BF16, out, x, w, T, r0, nr);
        else if (w->dtype == DT_F16) gemv16_block(DT_F16, out, x, w, T, r0, nr);
        else gemv16_block(DT_F32, out, x, w, T, r0, nr);
    }
}

#define AVX512_MR 14
#define AVX512_NR 32
static void kernel_avx512(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc,
                          int accumulate) {
    const float *a = a_, *b = panel;
    __m512 acc[AVX512_MR][2];
    for (int m = 0; m < AVX512_MR; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b + (size_t)k * AVX512_NR), b1 = _mm512_load_ps(b + (size_t)k * AVX512_NR + 16);
        for (int m = 0; m < AVX512_MR; m++) {
            __m512 am = _mm512_set1_ps(a[(size_t)m * lda + k]);
            acc[m][0] = _mm512_fmadd_ps(am, b0, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(am, b1, acc[m][1]);
        }
    }
    for (int m = 0; m < AVX512_MR; m++) {
        float *cm = c + (size_t)m * ldc;
        if (accumulate) {
            acc[m][0] = _mm512_add_ps(acc[m][0], _mm512_loadu_ps(cm));
            acc[m][1] = _mm512_add_ps(acc[m][1], _mm512_loadu_ps(cm + 16));
        }
        _mm512_storeu_ps(cm, acc[m][0]);
        _mm512_storeu_ps(cm + 16, acc[m][1]);
    }
}

void matmul_avx512(float *out, const float *x, const Matrix *w, int T) {
    if (T < GEMV_MAX_T) {
        gemv_avx512(out, x, w, T);
        return;
    }
    static const GemmSpec spec = {AVX512_MR, AVX512_NR, pack_panel_f32, kernel_avx512};
    gemm_drive(&spec, out, x, w->cols, w, T);
}
#endif

/* ============================================================== AVX-512 BF16 */
#if defined(__AVX512BF16__) && defined(__AVX512BW__)

/* x[T, K] -> bf16 pairs [T, units], units = ceil(K/2), rounding to nearest even; an odd K
 * gets a zero partner. */
static void activations_to_bf16(const float *x, int T, int K, uint32_t *dst) {
    int units = (K + 1) / 2;
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * K;
        uint32_t *d = dst + (size_t)t * units;
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xt + k + 16), _mm512_loadu_ps(xt + k));
            _mm512_storeu_si512((void *)(d + k / 2), (__m512i)v);
        }
        for (; k < K; k += 2) {
            uint32_t lo = f32_to_bf16(xt[k]), hi = k + 1 < K ? f32_to_bf16(xt[k + 1]) : 0u;
            d[k / 2] = lo | hi << 16;
        }
    }
}

/* Rows r0..r0+nr-1 against T bf16 inputs: 32 products per vdpbf16ps. One row at a time,
 * read front to back with four independent sums: a single sequential stream per thread is
 * what the hardware prefetcher serves fastest. */
static void gemv_bf16_block(float *out, const uint32_t *xb, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows, units = (K + 1) / 2;
    for (int j = 0; j < nr; j++) {
        const uint16_t *row = (const uint16_t *)w->data + (size_t)(r0 + j) * K;
        for (int t = 0; t < T; t++) {
            const uint32_t *xt = xb + (size_t)t * units;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            int k = 0;
            for (; k + 128 <= K; k += 128)
                for (int u = 0; u < 4; u++) {
                    __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xt + (k + 32 * u) / 2));
                    __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)(row + k + 32 * u));
                    acc[u] = _mm512_dpbf16_ps(acc[u], wv, xv);
                }
            for (; k + 32 <= K; k += 32) {
                __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xt + k / 2));
                acc[0] = _mm512_dpbf16_ps(acc[0], (__m512bh)_mm512_loadu_si512((const void *)(row + k)), xv);
            }
            float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
            for (int kk = k; kk < K; kk++) {
                uint16_t xbits = (uint16_t)(xt[kk / 2] >> (kk % 2 ? 16 : 0));
                s += bf16_to_f32(xbits) * bf16_to_f32(row[kk]);
            }
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

/* The bf16 GEMM turns the usual blocking around: the activations, which every weight row
 * meets, are packed once per call into strips of BF16_TOK tokens laid out [k pair][token],
 * and the weights are used in place: each 32-bit weight pair is broadcast against 48 tokens.
 * So no weight panel is ever copied, and the packing is amortized over all N rows. */
#define BF16_ROWS 8        /* weight rows per microkernel: 8 x 3 = 24 accumulators */
#define BF16_TOK 48        /* tokens per strip: three vectors of 16 */
#define BF16_KC 128        /* k pairs per block: a 24 KiB activation block stays in L1 */
#define BF16_GROUP 32      /* weight rows per work item; their 48-token tile lives in ct */

/* x [T, K] -> strips [ceil(T/48)][units][48] of bf16 pairs; padding tokens are zero. */
static void pack_activations_bf16(const float *x, int T, int K, uint32_t *rows_tmp, uint32_t *apack) {
    int units = K / 2, n_strips = (T + BF16_TOK - 1) / BF16_TOK;
    activations_to_bf16(x, T, K, rows_tmp);   /* row-major pairs, (K+1)/2 per token */
    int src_units = (K + 1) / 2;
    double work = (double)T * units;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int s = 0; s < n_strips; s++) {
        uint32_t *dst = apack + (size_t)s * units * BF16_TOK;
        for (int t = 0; t < BF16_TOK; t++) {
            int tok = s * BF16_TOK + t;
            const uint32_t *src = rows_tmp + (size_t)tok * src_units;
            if (tok < T)
                for (int k = 0; k < units; k++) dst[(size_t)k * BF16_TOK + t] = src[k];
            else
                for (int k = 0; k < units; k++) dst[(size_t)k * BF16_TOK + t] = 0;
        }
    }
}

static inline uint32_t load_pair(const uint16_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);   /* weights need not be 4-byte aligned */
    return v;
}

/* ct[r][t] (+)= sum over kc pairs of w_r . a[., t] for r < 8, t < 48. */
static void kernel_bf16(int kc, const uint32_t *a, const uint16_t *const *wrow, int k0, float *ct, int accumulate) {
    __m512 acc[BF16_ROWS][3];
    for (int r = 0; r < BF16_ROWS; r++)
        for (int j = 0; j < 3; j++) acc[r][j] = accumulate ? _mm512_loadu_ps(ct + r * BF16_TOK + 16 * j) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const uint32_t *ak = a + (size_t)k * BF16_TOK;
        __m512bh a0 = (__m512bh)_mm512_loadu_si512((const void *)ak);
        __m512bh a1 = (__m512bh)_mm512_loadu_si512((const void *)(ak + 16));
        __m512bh a2 = (__m512bh)_mm512_loadu_si512((const void *)(ak + 32));
        for (int r = 0; r < BF16_ROWS; r++) {
            __m512bh wv = (__m512bh)_mm512_set1_epi32((int)load_pair(wrow[r] + 2 * (size_t)(k0 + k)));
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], wv, a0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], wv, a1);
            acc[r][2] = _mm512_dpbf16_ps(acc[r][2], wv, a2);
        }
    }
    for (int r = 0; r < BF16_ROWS; r++)
        for (int j = 0; j < 3; j++) _mm512_storeu_ps(ct + r * BF16_TOK + 16 * j, acc[r][j]);
}

/* Rows g0..g0+31 (clipped to N) times every strip. */
static void gemm_bf16_group(float *out, const float *x, const uint32_t *apack, const Matrix *w, int T, int g0) {
    int K = w->cols, N = w->rows, units = K / 2;
    int n_strips = (T + BF16_TOK - 1) / BF16_TOK, rows = N - g0 < BF16_GROUP ? N - g0 : BF16_GROUP;
    _Alignas(64) float ct[BF16_GROUP * BF16_TOK];
    const uint16_t *wrow[BF16_GROUP];
    for (int r = 0; r < BF16_GROUP; r++)   /* rows past N repeat the last one; never stored */
        wrow[r] = (const uint16_t *)w->data + (size_t)(g0 + (r < rows ? r : rows - 1)) * K;
    for (int s = 0; s < n_strips; s++) {
        const uint32_t *as = apack + (size_t)s * units * BF16_TOK;
        for (int k0 = 0; k0 < units; k0 += BF16_KC) {
            int kc = units - k0 < BF16_KC ? units - k0 : BF16_KC;
            for (int r0 = 0; r0 < rows; r0 += BF16_ROWS)
                kernel_bf16(kc, as + (size_t)k0 * BF16_TOK, wrow + r0, k0, ct + r0 * BF16_TOK, k0 > 0);
        }
        if (units == 0) memset(ct, 0, sizeof ct);
        int t_end = T - s * BF16_TOK < BF16_TOK ? T - s * BF16_TOK : BF16_TOK;
        for (int t = 0; t < t_end; t++) {
            int tok = s * BF16_TOK + t;
            float *o = out + (size_t)tok * N + g0;
            for (int r = 0; r < rows; r++) o[r] = ct[r * BF16_TOK + t];
            if (K % 2) {   /* an odd last column: one more product, in the same bf16 terms */
                float xl = bf16_to_f32(f32_to_bf16(x[(size_t)tok * K + K - 1]));
                for (int r = 0; r < rows; r++) o[r] += xl * bf16_to_f32(wrow[r][K - 1]);
            }
        }
    }
}

void matmul_avx512_bf16(float *out, const float *x, const Matrix *w, int T, void *scratch) {
    uint32_t *xb = scratch;
    if (T < GEMV_MAX_T) {
        activations_to_bf16(x, T, w->cols, xb);
        int n_blocks = (w->rows + GEMV_BLOCK - 1) / GEMV_BLOCK;
        double work = (double)w->rows * w->cols * T;
        (void)work;   /* unused without OpenMP */
        #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK)
        for (int b = 0; b < n_blocks; b++) {
            int r0 = b * GEMV_BLOCK;
            gemv_bf16_block(out, xb, w, T, r0, w->rows - r0 < GEMV_BLOCK ? w->rows - r0 : GEMV_BLOCK);
        }
        return;
    }
    /* scratch: row-major bf16 copy first, then the packed strips after it */
    size_t rows_words = (size_t)T * ((w->cols + 1) / 2);
    uint32_t *apack = xb + (rows_words + 15) / 16 * 16;
    pack_activations_bf16(x, T, w->cols, xb, apack);
    int n_groups = (w->rows + BF16_GROUP - 1) / BF16_GROUP;
    double work = (double)w->rows * w->cols * T;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK)
    for (int g = 0; g < n_groups; g++) gemm_bf16_group(out, x, apack, w, T, g * BF16_GROUP);
}
#endif
