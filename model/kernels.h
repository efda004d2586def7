/* model/kernels.h: the arithmetic of the forward pass on plain float arrays.
 * Weights arrive as Matrix (F32/F16/BF16 in the file's layout) and are widened to
 * f32 (or used as bf16) a panel at a time, so the model is never copied to f32 in memory.
 *
 * A matmul runs on one of several kernel paths. The scalar path is the definition (one
 * dot product per output, sums in order); the others are checked against it by
 * tests/test_kernels.c. Which intrinsics paths exist is fixed at build time by the
 * compiler's feature macros (-march=native); the plain-C path is always there. */
#ifndef KVQ_KERNELS_H
#define KVQ_KERNELS_H

#include <math.h>
#include <stdint.h>
#include "model/model.h"

/* Below this many multiply-adds a loop runs on one thread: waking threads costs more
 * than it saves on tiny models (stories260K decodes 10x faster this way). */
#define PARALLEL_MIN_WORK (1 << 18)

typedef enum {
    KERNEL_SCALAR,       /* reference: one in-order dot product per output */
    KERNEL_C,            /* blocked GEMM and streaming GEMV in plain C the compiler vectorizes */
    KERNEL_AVX2,         /* AVX2 + FMA intrinsics (__AVX2__ && __FMA__) */
    KERNEL_AVX512,       /* AVX-512F intrinsics (__AVX512F__) */
    KERNEL_AVX512_BF16,  /* vdpbf16ps (__AVX512BF16__): BF16 weights, activations rounded to bf16 */
    KERNEL_COUNT
} KernelPath;

/* 1 if the path was compiled in (and, for AVX512_BF16, can serve this weight dtype). */
int kernel_available(KernelPath p, DType weight_dtype);
const char *kernel_name(KernelPath p);
/* The fastest path for this precision and weight dtype. */
KernelPath kernel_choose(MatmulPrecision precision, DType weight_dtype);

/* Bytes of scratch matmul needs for T tokens of cols inputs (x packed for the GEMM);
 * mlp_swiglu needs matmul_scratch_bytes(T, dim + hidden). */
size_t matmul_scratch_bytes(int T, int cols);

/* out[t, r] = sum_c x[t, c] * w[r, c] for t < T: a linear layer over T tokens.
 * scratch: matmul_scratch_bytes(T, w->cols) bytes, 64-byte aligned (unused on exact paths).
 * T < 4 streams the weights once (GEMV); larger T runs a blocked GEMM whose weight panels
 * stay in L1 while every token passes over them. OpenMP splits the weight rows. */
void matmul(float *out, const float *x, const Matrix *w, int T, MatmulPrecision precision, void *scratch);
/* The same on an explicit path (tests; the path must be available). */
void matmul_with(KernelPath path, float *out, const float *x, const Matrix *w, int T, void *scratch);

/* outs[m] = matmul(x, ws[m]) for m < n: several layers reading the same input (q/k/v,
 * gate/up). Decoding runs them as one parallel loop (one fork/join instead of n); results
 * are the same as n matmul calls. */
void matmul_many(int n, float *const outs[], const Matrix *const ws[], const float *x, int T,
                 MatmulPrecision precision, void *scratch);

/* out = down(silu(gate(x)) * up(x)), the SwiGLU MLP over T tokens; out may be x. hb and hb2
 * hold T x hidden floats each for the paths that need them. On the AVX-512 GEMM paths gate
 * and up are computed for the same hidden units in one work item and their product goes
 * straight into down's packed input, so the two T x hidden arrays are never written nor
 * read back: the same numbers as matmul_many + swiglu + matmul, bit for bit. */
void mlp_swiglu(float *out, const Matrix *gate, const Matrix *up, const Matrix *down, const float *x, int T,
                MatmulPrecision precision, float *hb, float *hb2, void *scratch);

/* Row `row` of w widened to f32 into out[0..cols). */
void matrix_row_f32(const Matrix *w, int row, float *out);
/* Elements [k0, k0+n) of row `row` widened to f32 (F32/F16/BF16). */
void matrix_segment_f32(const Matrix *w, int row, int k0, int n, float *out);

/* out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for T rows of n. */
void rmsnorm(float *out, const float *x, const Matrix *weight, int T, int n, float eps);

/* HF rotate-half RoPE on n_heads vectors of head_dim at position pos, in place:
 * pairs (i, i + head_dim/2) rotate by pos * inv_freq[i]. */
void rope(float *vec, int n_heads, int head_dim, int pos, const float *inv_freq);

/* a * b + c, fused where the CPU has FMA (C11 code is compiled without contraction, so
 * plain a * b + c is two roundings and two instructions); exact-enough either way. */
static inline float mul_add(float a, float b, float c) {
#ifdef FP_FAST_FMAF
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

/* Attention's two inner loops (model/forward.c), with AVX-512 versions that keep their
 * sums in registers, split in two partial sums (even and odd terms) added at the end:
 * within f32 rounding of the plain loops, which add in order (tests/test_kernels.c). */
#define DOT_T_WIDTH 64
/* acc[p] = sum_d q[d] * kt[d * DOT_T_WIDTH + p] for p < DOT_T_WIDTH: one query against 64
 * keys stored transposed. */
void dot_transposed64(const float *q, const float *kt, int hd, float *acc);
/* out[0..hd) += sum_p w[p] * v[p * hd + .] for p < n, in order of p. */
void add_weighted_rows(float *out, const float *w, const float *v, int n, int hd);
/* The same for four queries at once (acc[j], q[j]; out[j], w[j]): each key or value vector
 * loaded serves four queries, so the loops run at the FMA units' rate, not the loads'. */
void dot_transposed64_x4(const float *const q[4], const float *kt, int hd, float *const acc[4]);
void add_weighted_rows_x4(float *const out[4], const float *const w[4], const float *v, int n, int hd);

/* The same two loops on bf16 pairs, for nq <= 4 queries: the MATMUL_BF16_ACT precision's
 * attention, twice the multiply-adds per instruction with vdpbf16ps (AVX-512 BF16; plain C
 * elsewhere, the tests' reference). A pair is 32 bits: element 2i rounded to bf16 (nearest
 * even) in the low half, element 2i + 1 in the high half.
 *   bf16_pair_rows: out[k][c] = (x[2k][c], x[2k+1][c]) for rows of width floats (a multiple of
 *     16), ceil(n/2) pair rows; an odd n's last row pairs with 0.
 *   bf16_pairs_along: out[i] = (x[2i], x[2i+1]) for 2i < n, an odd n's last with 0; out may
 *     be x itself (each pair is written after its two floats are read).
 *   dot_pairs64: acc[j][p] = sum over units i of q[j][i] . kt[i * DOT_T_WIDTH + p] (keys as
 *     pair rows of a transposed block).
 *   add_weighted_pairs: out[j][0..hd) += sum_k w[j][k] . v[k * hd + .] for pair rows of
 *     values (hd a multiple of 64). */
void bf16_pair_rows(const float *x, int n, int width, uint32_t *out);
void bf16_pairs_along(const float *x, int n, uint32_t *out);
void dot_pairs64(int nq, const uint32_t *const q[4], const uint32_t *kt, int units, float *const acc[4]);
void add_weighted_pairs(int nq, float *const out[4], const uint32_t *const w[4], const uint32_t *v, int n_pairs, int hd);

/* Rows of a packed 4-bit KV cache, read in place (layout of quant/quant.h): head_dim / 2 code
 * bytes (dim 2i in the low nibble of byte i, 2i+1 in the high one), then per group of
 * group_size dims an fp16 scale, or scale and minimum when asymmetric. A value is
 * c * scale + bias with bias = -8 * scale (symmetric) or the minimum: c * scale is exact
 * (4-bit c times an 11-bit scale), so one fma rounds as quant's dequantize does and the
 * values come out bit-identical to scheme->dequantize. */
typedef struct {
    int head_dim, group_size, symmetric;
    size_t row_bytes;
} Int4Rows;
/* 1 if the kernels below serve this layout (head_dim and group_size multiples of 32). */
int int4_rows_supported(const Int4Rows *f);
/* kt[d * DOT_T_WIDTH + p] = value d of row p for p < n (n <= DOT_T_WIDTH), 0 for p >= n:
 * keys decoded straight into the transposed block dot_transposed64 reads. */
void int4_keys_transposed64(const Int4Rows *f, const unsigned char *rows, int n, float *kt);
/* out[p * head_dim + d] = value d of row p for p < n: value rows for add_weighted_rows. */
void int4_decode_rows(const Int4Rows *f, const unsigned char *rows, int n, float *out);
/* Keys [n][hd] (f32 rows) -> kt[d * DOT_T_WIDTH + p], 0 for n <= p < DOT_T_WIDTH. */
void transpose_keys64(const float *k, int n, int hd, float *kt);

/* gate[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x) (SwiGLU). */
void swiglu(float *gate, const float *up, size_t n);

/* In-place softmax of x[0..n). */
void softmax(float *x, int n);

/* sum x[i]*y[i], written with independent partial sums so the compiler vectorizes it. */
float dot_f32(const float *x, const float *y, int n);

/* y[i] += a * x[i]. */
void axpy_f32(float *y, float a, const float *x, int n);

#endif
