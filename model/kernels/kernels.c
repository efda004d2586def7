/* model/kernels/kernels.c: matmul dispatch (paths: gemm_c.c, gemm_avx2.c, gemm_avx512.c, gemm_neon.c
 * in this folder), the SwiGLU MLP, RMSNorm and RoPE for the forward pass. The dispatch calls
 * down into the paths (gemm.h); the paths and the dispatch both use vector.h, never this file.
 * Softmax and the other float-array loops: vector.c. Attention's inner loops: attention_kernels.c. */
#include "model/kernels/kernels.h"
#include "model/kernels/gemm.h"
#include "model/kernels/vector.h"
#include "model/kernels/worksplit.h"
#include <math.h>

/* ---- kernel paths ---- */

int kernel_available(KernelPath p, DType weight_dtype) {
    switch (p) {
    case KERNEL_SCALAR:
    case KERNEL_C:
        return 1;
    case KERNEL_AVX2:
#if defined(__AVX2__) && defined(__FMA__)
        return 1;
#else
        return 0;
#endif
    case KERNEL_AVX512:
#if defined(__AVX512F__)
        return 1;
#else
        return 0;
#endif
    case KERNEL_AVX512_BF16:
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
        return weight_dtype == DT_BF16;
#else
        (void)weight_dtype;
        return 0;
#endif
    case KERNEL_AMX_BF16:
#if defined(KVQ_AMX)
        return weight_dtype == DT_BF16 && gemm_amx_ready();
#else
        return 0;
#endif
    case KERNEL_NEON:
#if defined(__aarch64__) && defined(__ARM_NEON)
        return 1;
#else
        return 0;
#endif
    default:
        return 0;
    }
}

const char *kernel_name(KernelPath p) {
    static const char *const names[KERNEL_COUNT] = {"scalar", "plain-c", "avx2", "avx512", "avx512-bf16", "amx-bf16",
                                                      "neon"};
    return p >= 0 && p < KERNEL_COUNT ? names[p] : "?";
}

KernelPath kernel_choose(MatmulPrecision precision, DType weight_dtype) {
    if (precision == MATMUL_BF16_ACT && kernel_available(KERNEL_AMX_BF16, weight_dtype)) return KERNEL_AMX_BF16;
    if (precision == MATMUL_BF16_ACT && kernel_available(KERNEL_AVX512_BF16, weight_dtype))
        return KERNEL_AVX512_BF16;
    if (kernel_available(KERNEL_AVX512, weight_dtype)) return KERNEL_AVX512;
    if (kernel_available(KERNEL_AVX2, weight_dtype)) return KERNEL_AVX2;
    if (kernel_available(KERNEL_NEON, weight_dtype)) return KERNEL_NEON;
    return KERNEL_C;
}

size_t matmul_scratch_bytes(int T, size_t cols) {
    /* AVX-512 paths: activations packed in strips (T padded to a whole strip of < 64 tokens),
     * as floats or bf16 pairs (at most as big); alignment slack. */
    size_t K = cols > 0 ? cols : 1, T_pad = (size_t)T + 64;
    size_t amx = ((size_t)T + 31) / 32 * 32 * ((K + 31) / 32 * 32) * 2;   /* gemm_amx.c: padded bf16 */
    size_t packed = T_pad * K * sizeof(float);
    return (amx > packed ? amx : packed) + 256;
}

void matmul_with(KernelPath path, float *out, const float *x, const Matrix *w, int T, void *scratch) {
    (void)scratch;   /* only the bf16 path uses it */
    switch (path) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    case KERNEL_AVX512_BF16: matmul_avx512_bf16(out, x, w, T, scratch); return;
#endif
#if defined(KVQ_AMX)
    case KERNEL_AMX_BF16:   /* decode streams the weights: no tiles to fill */
        if (T < GEMV_MAX_T) matmul_avx512_bf16(out, x, w, T, scratch);
        else matmul_amx(out, x, w, T, scratch);
        return;
#endif
#if defined(__AVX512F__)
    case KERNEL_AVX512: matmul_avx512(out, x, w, T, scratch); return;
#endif
#if defined(__AVX2__) && defined(__FMA__)
    case KERNEL_AVX2: matmul_avx2(out, x, w, T); return;
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
    case KERNEL_NEON: matmul_neon(out, x, w, T); return;
#endif
    case KERNEL_SCALAR: matmul_scalar(out, x, w, T); return;
    default: matmul_plain_c(out, x, w, T); return;
    }
}

void matmul(float *out, const float *x, const Matrix *w, int T, MatmulPrecision precision, void *scratch) {
    matmul_with(kernel_choose(precision, w->dtype), out, x, w, T, scratch);
}

void matmul_many(int n, float *const outs[], const Matrix *const ws[], const float *x, int T,
                 MatmulPrecision precision, void *scratch) {
    KernelPath path = kernel_choose(precision, ws[0]->dtype);
    int alike = n <= GEMV_MANY_MAX;
    for (int m = 1; m < n; m++) alike = alike && ws[m]->cols == ws[0]->cols && ws[m]->dtype == ws[0]->dtype;
#if defined(__AVX512F__)
    int gemv_bf16 = T < GEMV_MAX_T && path == KERNEL_AMX_BF16;   /* AMX decodes as avx512-bf16 does */
    if (alike && (path == KERNEL_AVX512 || path == KERNEL_AVX512_BF16 || gemv_bf16)) {
        if (T < GEMV_MAX_T) gemv_many_avx512(n, outs, ws, x, T, path != KERNEL_AVX512, scratch);
        else gemm_many_avx512(n, outs, ws, x, T, path == KERNEL_AVX512_BF16, 0, scratch);
        return;
    }
#else
    (void)alike;
#endif
    for (int m = 0; m < n; m++) matmul_with(path, outs[m], x, ws[m], T, scratch);
}

void matmul_add(float *out, const float *x, const Matrix *w, int T, MatmulPrecision precision, float *tmp,
                void *scratch) {
    KernelPath path = kernel_choose(precision, w->dtype);
#if defined(__AVX512F__)
    if (T >= GEMV_MAX_T && (path == KERNEL_AVX512 || (path == KERNEL_AVX512_BF16 && w->cols % 2 == 0))) {
        gemm_many_avx512(1, &out, &w, x, T, path == KERNEL_AVX512_BF16, 1, scratch);
        return;
    }
#endif
    matmul_with(path, tmp, x, w, T, scratch);
    size_t n = (size_t)T * w->rows;
    for (size_t i = 0; i < n; i++) out[i] += tmp[i];
}

void mlp_swiglu_add(float *out, const SwigluWeights *w, const float *x, int T, MatmulPrecision precision,
                    const MlpScratch *buf) {
    const Matrix *gate = w->gate, *up = w->up, *down = w->down;
    KernelPath path = kernel_choose(precision, gate->dtype);
#if defined(__AVX512F__)
    int fusable = T >= GEMV_MAX_T && (path == KERNEL_AVX512 || path == KERNEL_AVX512_BF16) &&
                  up->dtype == gate->dtype && down->dtype == gate->dtype && up->rows == gate->rows &&
                  up->cols == gate->cols && down->cols == gate->rows && gate->cols % 2 == 0 && gate->rows % 2 == 0;
    if (fusable) {
        mlp_avx512(out, w, x, T, path == KERNEL_AVX512_BF16, 1, buf->scratch);
        return;
    }
#else
    (void)path;
#endif
    matmul_many(2, (float *const[]){buf->hb, buf->hb2}, (const Matrix *const[]){gate, up}, x, T, precision,
                buf->scratch);
    swiglu(buf->hb, buf->hb2, (size_t)T * gate->rows);
    matmul_add(out, buf->hb, down, T, precision, buf->tmp, buf->scratch);
}

void rmsnorm(float *out, const float *x, const Matrix *weight, int T, int n, float eps, float *wbuf) {
    const float *w = wbuf;
    matrix_row_f32(weight, 0, wbuf);
    /* rows are independent: a prefill batch splits them over the threads */
    #pragma omp parallel for schedule(static) if ((double)T * n >= PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *ot = out + (size_t)t * n;
        float ss = dot_f32(xt, xt, n) / (float)n;
        float inv = 1.0f / sqrtf(ss + eps);
        for (int i = 0; i < n; i++) ot[i] = w[i] * (xt[i] * inv);
    }
}

void rope_angles(int pos, int head_dim, const float *inv_freq, float *cos_sin) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i];
        cos_sin[i] = cosf(angle);
        cos_sin[half + i] = sinf(angle);
    }
}

void rope(float *vec, int n_heads, int head_dim, const float *cos_sin) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = vec + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half], c = cos_sin[i], s = cos_sin[half + i];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}
