/* model/kernels/gemm_neon.c: the NEON matmul path for 64-bit Arm (AArch64, where NEON and fused
 * multiply-add are always there: Apple silicon, Graviton, Raspberry Pi 4/5), compiled only when
 * the build targets it (__aarch64__ && __ARM_NEON). It mirrors the AVX2 path (model/kernels/gemm_avx2.c)
 * at half the width: a streaming GEMV for T < 4 (one weight row at a time, four 4-wide sums) and
 * the shared blocked driver with a 6 tokens x 16 rows microkernel (24 of the 32 q registers). */
#include "model/kernels/gemm.h"
#include "quant/half.h"
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)

/* Four weights at element i of a row, widened to f32 (dt is a constant after inlining):
 * bf16 is the high half of an f32, so widening is a 16-bit shift. */
static inline float32x4_t load4(DType dt, const void *row, int i) {
    if (dt == DT_BF16) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)row + i), 16));
    if (dt == DT_F16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + i)));
    return vld1q_f32((const float *)row + i);
}

/* out[t, r] for rows r0..r0+nr-1 and every t: one row at a time, four independent sums. */
static inline void gemv4_block(DType dt, float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows;
    size_t esize = dt == DT_F32 ? 4 : 2;
    for (int j = 0; j < nr; j++) {
        const unsigned char *row = (const unsigned char *)w->data + (size_t)(r0 + j) * K * esize;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
            int k = 0;
            for (; k + 16 <= K; k += 16)
                for (int u = 0; u < 4; u++)
                    acc[u] = vfmaq_f32(acc[u], load4(dt, row, k + 4 * u), vld1q_f32(xt + k + 4 * u));
            for (; k + 4 <= K; k += 4) acc[0] = vfmaq_f32(acc[0], load4(dt, row, k), vld1q_f32(xt + k));
            float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
            for (; k < K; k++) s += xt[k] * weight_at(dt, row, k);
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

/* A block of rows for gemv_drive (model/kernels/gemm_c.c); the dtype is a constant in each inlined loop. */
static void gemv_rows_neon(float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    if (w->dtype == DT_BF16) gemv4_block(DT_BF16, out, x, w, T, r0, nr);
    else if (w->dtype == DT_F16) gemv4_block(DT_F16, out, x, w, T, r0, nr);
    else gemv4_block(DT_F32, out, x, w, T, r0, nr);
}

#define NEON_MR 6
#define NEON_NR 16
/* One token's 16 sums of the tile, a value type: GCC keeps structs passed by value through inline
 * functions in registers, where it kept an acc[6][4] array in registers but also stored it to the
 * stack on every k (aarch64 GCC 12: 24 q-register stores per 24 FMAs). */
typedef struct {
    float32x4_t v0, v1, v2, v3;
} Row16;

static inline Row16 row16_zero(void) {
    Row16 r = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return r;
}

/* r += am * b[0..15] */
static inline Row16 row16_fma(Row16 r, float am, float32x4_t b0, float32x4_t b1, float32x4_t b2, float32x4_t b3) {
    r.v0 = vfmaq_n_f32(r.v0, b0, am);
    r.v1 = vfmaq_n_f32(r.v1, b1, am);
    r.v2 = vfmaq_n_f32(r.v2, b2, am);
    r.v3 = vfmaq_n_f32(r.v3, b3, am);
    return r;
}

static inline void row16_store(float *c, Row16 r, int accumulate) {
    if (accumulate) {
        r.v0 = vaddq_f32(r.v0, vld1q_f32(c));
        r.v1 = vaddq_f32(r.v1, vld1q_f32(c + 4));
        r.v2 = vaddq_f32(r.v2, vld1q_f32(c + 8));
        r.v3 = vaddq_f32(r.v3, vld1q_f32(c + 12));
    }
    vst1q_f32(c, r.v0);
    vst1q_f32(c + 4, r.v1);
    vst1q_f32(c + 8, r.v2);
    vst1q_f32(c + 12, r.v3);
}

/* c[6 x 16] (+)= a[6 x kc] . panel[kc x 16]: each token's value multiplies four vectors of the panel row. */
static void kernel_neon(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc, int accumulate) {
    const float *a0 = a_, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda, *a5 = a4 + lda;
    const float *b = panel;
    Row16 r0 = row16_zero(), r1 = r0, r2 = r0, r3 = r0, r4 = r0, r5 = r0;
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * NEON_NR;
        float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4), b2 = vld1q_f32(bk + 8), b3 = vld1q_f32(bk + 12);
        r0 = row16_fma(r0, a0[k], b0, b1, b2, b3);
        r1 = row16_fma(r1, a1[k], b0, b1, b2, b3);
        r2 = row16_fma(r2, a2[k], b0, b1, b2, b3);
        r3 = row16_fma(r3, a3[k], b0, b1, b2, b3);
        r4 = row16_fma(r4, a4[k], b0, b1, b2, b3);
        r5 = row16_fma(r5, a5[k], b0, b1, b2, b3);
    }
    row16_store(c, r0, accumulate);
    row16_store(c + ldc, r1, accumulate);
    row16_store(c + 2 * ldc, r2, accumulate);
    row16_store(c + 3 * ldc, r3, accumulate);
    row16_store(c + 4 * ldc, r4, accumulate);
    row16_store(c + 5 * ldc, r5, accumulate);
}

void matmul_neon(float *out, const float *x, const Matrix *w, int T) {
    if (T < GEMV_MAX_T) {
        gemv_drive(gemv_rows_neon, out, x, w, T);
        return;
    }
    static const GemmSpec spec = {NEON_MR, NEON_NR, pack_panel_f32, kernel_neon};
    gemm_drive(&spec, out, x, w->cols, w, T);
}
#endif
