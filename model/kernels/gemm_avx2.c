/* model/kernels/gemm_avx2.c: the AVX2 + FMA matmul path, compiled only when the build targets it
 * (__AVX2__ and __FMA__; -march=native on any x86-64 of the last decade). Same structure as
 * the plain-C path (model/kernels/gemm.h): a streaming GEMV for T < 4 (8 wide, one weight row at a
 * time) and the shared blocked driver with a 6 tokens x 16 rows microkernel (12 ymm sums). */
#include "model/kernels/gemm.h"
#include "quant/half.h"
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include "model/kernels/simd_avx2.h"
#endif

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
            for (; k < K; k++) s += xt[k] * weight_at(dt, row, k);
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

/* A block of rows for gemv_drive (model/kernels/gemm_c.c); the dtype is a constant in each inlined loop. */
static void gemv_rows_avx2(float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    if (w->dtype == DT_BF16) gemv8_block(DT_BF16, out, x, w, T, r0, nr);
    else if (w->dtype == DT_F16) gemv8_block(DT_F16, out, x, w, T, r0, nr);
    else gemv8_block(DT_F32, out, x, w, T, r0, nr);
}

#define AVX2_MR 6
#define AVX2_NR 16

/* One row of the output tile (a token's 16 sums, model/kernels/simd_avx2.h): stored, or added to
 * what c already holds. */
static inline void store_tile_row(float *c, Row16 r, int accumulate) {
    if (accumulate) r = (Row16){_mm256_add_ps(r.lo, _mm256_loadu_ps(c)), _mm256_add_ps(r.hi, _mm256_loadu_ps(c + 8))};
    row16_store(c, r);
}

static void kernel_avx2(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc, int accumulate) {
    const float *a0 = a_, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda, *a5 = a4 + lda;
    const float *b = panel;
    Row16 r0 = {_mm256_setzero_ps(), _mm256_setzero_ps()}, r1 = r0, r2 = r0, r3 = r0, r4 = r0, r5 = r0;
    for (int k = 0; k < kc; k++) {
        Row16 w = row16_load(b + (size_t)k * AVX2_NR);   /* the panel's 16 weight rows at k */
        r0 = row16_fma(r0, a0 + k, w);
        r1 = row16_fma(r1, a1 + k, w);
        r2 = row16_fma(r2, a2 + k, w);
        r3 = row16_fma(r3, a3 + k, w);
        r4 = row16_fma(r4, a4 + k, w);
        r5 = row16_fma(r5, a5 + k, w);
    }
    store_tile_row(c, r0, accumulate);
    store_tile_row(c + ldc, r1, accumulate);
    store_tile_row(c + 2 * ldc, r2, accumulate);
    store_tile_row(c + 3 * ldc, r3, accumulate);
    store_tile_row(c + 4 * ldc, r4, accumulate);
    store_tile_row(c + 5 * ldc, r5, accumulate);
}

/* The panel of weight rows r0..r0+15 for k0..k0+kc-1, widened to f32 as dst[k * 16 + r] (rows
 * past nr_valid zero): what pack_panel_f32 (gemm_c.c) makes, 8 rows x 8 k at a time through a
 * register transpose. pack_panel_f32 widens a row into a buffer and scatters it one float at a
 * time, 64 bytes apart, a cost the ppl path felt (model/kernels/README.md). */
static inline void pack_panel16(DType dt, const Matrix *w, int r0, int nr_valid, int k0, int kc, float *dst) {
    size_t row_bytes = (size_t)w->cols * (dt == DT_F32 ? 4 : 2);
    const unsigned char *base = (const unsigned char *)w->data + (size_t)r0 * row_bytes;
    int k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int g = 0; g < AVX2_NR; g += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = g + i < nr_valid ? load8(dt, base + (size_t)(g + i) * row_bytes, k0 + k) : _mm256_setzero_ps();
            transpose8_ps(r);
            for (int j = 0; j < 8; j++) _mm256_store_ps(dst + (size_t)(k + j) * AVX2_NR + g, r[j]);
        }
    for (; k < kc; k++)
        for (int i = 0; i < AVX2_NR; i++)
            dst[(size_t)k * AVX2_NR + i] = i < nr_valid ? weight_at(dt, base + (size_t)i * row_bytes, k0 + k) : 0.0f;
}

/* A GemmSpec pack for AVX2_NR = 16 rows; the dtype is a constant in each inlined loop. */
static void pack_panel_avx2(const Matrix *w, int r0, int nr_valid, int nr, int k0, int kc, void *panel) {
    (void)nr;   /* always AVX2_NR */
    if (w->dtype == DT_BF16) pack_panel16(DT_BF16, w, r0, nr_valid, k0, kc, panel);
#if defined(__F16C__)
    else if (w->dtype == DT_F16) pack_panel16(DT_F16, w, r0, nr_valid, k0, kc, panel);
#endif
    else if (w->dtype == DT_F32) pack_panel16(DT_F32, w, r0, nr_valid, k0, kc, panel);
    else pack_panel_f32(w, r0, nr_valid, nr, k0, kc, panel);
}

void matmul_avx2(float *out, const float *x, const Matrix *w, int T) {
    if (T < GEMV_MAX_T) {
        gemv_drive(gemv_rows_avx2, out, x, w, T);
        return;
    }
    static const GemmSpec spec = {AVX2_MR, AVX2_NR, pack_panel_avx2, kernel_avx2};
    gemm_drive(&spec, out, x, w->cols, w, T);
}
#endif
