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
/* c[6 x 16] (+)= a[6 x kc] . panel[kc x 16]: each token's value multiplies four vectors of the panel row. */
static void kernel_neon(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc, int accumulate) {
    const float *a = a_, *b = panel;
    float32x4_t acc[NEON_MR][4];
    for (int m = 0; m < NEON_MR; m++)
        for (int v = 0; v < 4; v++) acc[m][v] = vdupq_n_f32(0.0f);
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * NEON_NR;
        float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4), b2 = vld1q_f32(bk + 8), b3 = vld1q_f32(bk + 12);
        for (int m = 0; m < NEON_MR; m++) {
            float am = a[(size_t)m * lda + k];
            acc[m][0] = vfmaq_n_f32(acc[m][0], b0, am);
            acc[m][1] = vfmaq_n_f32(acc[m][1], b1, am);
            acc[m][2] = vfmaq_n_f32(acc[m][2], b2, am);
            acc[m][3] = vfmaq_n_f32(acc[m][3], b3, am);
        }
    }
    for (int m = 0; m < NEON_MR; m++) {
        float *cm = c + (size_t)m * ldc;
        for (int v = 0; v < 4; v++) {
            if (accumulate) acc[m][v] = vaddq_f32(acc[m][v], vld1q_f32(cm + 4 * v));
            vst1q_f32(cm + 4 * v, acc[m][v]);
        }
    }
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
