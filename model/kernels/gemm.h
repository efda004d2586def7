/* model/kernels/gemm.h: internal to model/kernels/ — the pieces behind matmul() (kernels.h).
 *
 * out[T, N] = x[T, K] . W[N, K]^T. Two shapes of loop:
 *   GEMV (T < GEMV_MAX_T): each thread streams its share of weight rows once, dotting
 *     every row with the T inputs while it is in cache. Decode is this; it is bound by
 *     memory bandwidth, so the only aim is to read the weights once at full speed.
 *   GEMM (larger T): W is cut into panels of NR rows x KC columns, widened (or kept as
 *     bf16 pairs) into a contiguous buffer that stays in L1, and a microkernel multiplies
 *     MR tokens by the panel into an MR x NR tile of accumulators held in registers.
 *     Threads split the panels, so each weight is read from memory once per call.
 *
 * The driver (plain C, AVX2 and NEON) packs weight panels. The AVX-512 paths (model/kernels/gemm_avx512.c)
 * turn it around: they pack the activations and broadcast the weights in place. */
#ifndef KVQ_GEMM_H
#define KVQ_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include "model/kernels/kernels.h"
#include "model/kernels/matrix.h"
#include "quant/half.h"

#define GEMV_MAX_T 4
#define GEMV_MANY_MAX 4      /* matrices per gemv_many_avx512 call */
#define GEMM_KC 256            /* K units per panel: NR * KC * 4 bytes = 32 KiB at NR 32 */
#define GEMM_MAX_MR 16
#define GEMM_MAX_NR 32

/* Copies units [k0, k0+kc) of weight rows r0..r0+nr_valid-1 into panel[k][nr] (4-byte units),
 * rows past nr_valid as zeros. */
typedef void (*PackPanelFn)(const Matrix *w, int r0, int nr_valid, int nr, int k0, int kc, void *panel);

/* c[m*ldc + n] (+)= sum_k a[m*lda + k] * panel[k*nr + n] for m < mr, n < nr;
 * accumulate = 0 overwrites c. Full tiles only: the driver runs a last tile of fewer than mr tokens
 * as the full tile that ends there (a call of fewer than mr tokens on a padded copy), and a last
 * panel of fewer than nr rows with zero rows packed past the valid ones. */
typedef void (*MicroKernelFn)(int kc, const void *a, size_t lda, const void *panel, float *c, size_t ldc,
                              int accumulate);

typedef struct {
    int mr, nr;
    PackPanelFn pack;
    MicroKernelFn kernel;
} GemmSpec;

/* Element i of a weight row of dtype dt, as float (the vector paths' remainders). The cast is
 * safe because Matrix data is aligned for its dtype (matrix.h). */
static inline float weight_at(DType dt, const void *row, int i) {
    if (dt == DT_BF16) return bf16_to_f32(((const uint16_t *)row)[i]);
    if (dt == DT_F16) return f16_to_f32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

/* The blocked loop around a microkernel. a: T rows of `units` 4-byte units (lda = units). */
void gemm_drive(const GemmSpec *g, float *out, const void *a, int units, const Matrix *w, int T);

/* One path's GEMV on a block: out[t, r] for rows r0..r0+nr-1 of w and every t < T. */
typedef void (*GemvRowsFn)(float *out, const float *x, const Matrix *w, int T, int r0, int nr);
#define GEMV_BLOCK_ROWS 16
/* The streaming GEMV loop around it (AVX2 and NEON): blocks of GEMV_BLOCK_ROWS rows, each
 * thread its own contiguous run of them (model/kernels/worksplit.h), 8 blocks a claim. */
void gemv_drive(GemvRowsFn rows, float *out, const float *x, const Matrix *w, int T);

/* Panel packing for f32 paths: weights widened to float. */
void pack_panel_f32(const Matrix *w, int r0, int nr_valid, int nr, int k0, int kc, void *panel);

/* Plain C (model/kernels/gemm_c.c). */
void matmul_scalar(float *out, const float *x, const Matrix *w, int T);
void matmul_plain_c(float *out, const float *x, const Matrix *w, int T);

/* Intrinsics (model/kernels/gemm_avx2.c, gemm_neon.c, gemm_avx512.c); each exists only when its feature
 * macros are defined. scratch: matmul_scratch_bytes(T, K) (model/kernels/kernels.h). */
void matmul_avx2(float *out, const float *x, const Matrix *w, int T);
void matmul_neon(float *out, const float *x, const Matrix *w, int T);
void matmul_avx512(float *out, const float *x, const Matrix *w, int T, void *scratch);
void matmul_avx512_bf16(float *out, const float *x, const Matrix *w, int T, void *scratch);

/* AMX tiles (model/kernels/gemm_amx.c; KVQ_AMX: kernels.h). */
#if defined(KVQ_AMX)
/* 1 if the kernel lets this process use the tiles (asked each time: the answer is the kernel's). */
int gemm_amx_ready(void);
/* Sets this thread's eight tiles to 16 rows of 64 bytes (gemm_amx.c's and attention_amx.c's shape). */
void amx_configure_tiles(void);
/* A GEMM (any T >= 1, BF16 weights) with activations rounded to bf16. */
void matmul_amx(float *out, const float *x, const Matrix *w, int T, void *scratch);
#endif
/* outs[m] = x . ws[m]^T for m < n <= GEMV_MANY_MAX, T < GEMV_MAX_T, all ws of one width and
 * dtype (bf16_act: the AVX512_BF16 path, BF16 weights): the row blocks of all n matrices in
 * one parallel loop, so one fork/join (and one bf16 rounding of x) serves them all. */
/* The same for T >= GEMV_MAX_T (same conditions, n <= GEMV_MANY_MAX): activations packed once.
 * add: outs[m] += instead of = (K even when bf16_act: the odd column is added separately). */
void gemm_many_avx512(int n, float *const *outs, const Matrix *const *ws, const float *x, int T, int bf16_act,
                      int add, void *scratch);
void gemv_many_avx512(int n, float *const *outs, const Matrix *const *ws, const float *x, int T, int bf16_act,
                      void *scratch);
/* out (+)= down(silu(gate(x)) * up(x)) for T >= GEMV_MAX_T (see mlp_swiglu_add): gate and up of
 * one dtype and shape [hidden, K], down [N, hidden] of the same dtype, K and hidden even. */
void mlp_avx512(float *out, const SwigluWeights *w, const float *x, int T, int bf16_act, int add, void *scratch);

#endif
