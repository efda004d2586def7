/* model/kernels/kernels.h: the arithmetic of the forward pass — matmuls and the SwiGLU MLP on
 * their kernel paths, RMSNorm, RoPE. Element-wise loops (softmax, dot products, ...) are in
 * model/kernels/vector.h. Weights arrive as Matrix (F32/F16/BF16 in the file's layout,
 * model/kernels/matrix.h) and are widened to f32 (or used as bf16) a panel at a time, so the
 * model is never copied to f32 in memory.
 *
 * A matmul runs on one of several kernel paths. The scalar path is the definition (one
 * dot product per output, sums in order); the others are checked against it by
 * tests/test_kernels.c. Which intrinsics paths exist is fixed at build time by the
 * compiler's feature macros (-march=native); the plain-C path is always there. */
#ifndef KVQ_KERNELS_H
#define KVQ_KERNELS_H

#include <stddef.h>
#include "model/kernels/matrix.h"

/* Intel's AMX tiles with bf16 products, where the compiler targets them and AVX-512 BF16 (GCC
 * and clang spell the AMX macros differently): KERNEL_AMX_BF16 and bench's AMX probe. */
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__)) && \
    defined(__AVX512BF16__) && defined(__AVX512BW__)
#define KVQ_AMX 1
#endif

typedef enum {
    KERNEL_SCALAR,       /* reference: one in-order dot product per output */
    KERNEL_C,            /* blocked GEMM and streaming GEMV in plain C the compiler vectorizes */
    KERNEL_AVX2,         /* AVX2 + FMA intrinsics (__AVX2__ && __FMA__) */
    KERNEL_AVX512,       /* AVX-512F intrinsics (__AVX512F__) */
    KERNEL_AVX512_BF16,  /* vdpbf16ps (__AVX512BF16__): BF16 weights, activations rounded to bf16 */
    KERNEL_AMX_BF16,     /* the same with Intel's AMX tiles for the GEMM (KVQ_AMX above, and the
                            OS's consent); GEMV (T < 4) as KERNEL_AVX512_BF16 */
    KERNEL_NEON,         /* NEON intrinsics on 64-bit Arm (__aarch64__ && __ARM_NEON) */
    KERNEL_COUNT
} KernelPath;

/* 1 if the path was compiled in (and, for the bf16 paths, can serve this weight dtype; for AMX,
 * the OS lets the process use the tiles). */
int kernel_available(KernelPath p, DType weight_dtype);
const char *kernel_name(KernelPath p);
/* The fastest path for this precision and weight dtype. */
KernelPath kernel_choose(MatmulPrecision precision, DType weight_dtype);

/* Bytes of scratch matmul needs for T tokens of cols inputs (x packed for the GEMM);
 * mlp_swiglu_add needs matmul_scratch_bytes(T, dim + hidden). */
size_t matmul_scratch_bytes(int T, size_t cols);

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

/* out += x . W^T: a linear layer added to the residual stream. On the AVX-512 GEMM paths the
 * sum is made where each output tile is stored, a pass over out fewer; elsewhere through tmp
 * (T x w->rows floats, not x). Bit for bit the same as matmul into tmp, then out += tmp. */
void matmul_add(float *out, const float *x, const Matrix *w, int T, MatmulPrecision precision, float *tmp,
                void *scratch);

/* The SwiGLU MLP's weights: gate and up [hidden, dim], down [dim, hidden]. */
typedef struct {
    const Matrix *gate, *up, *down;
} SwigluWeights;

/* Its buffers: hb and hb2 hold T x hidden floats each, tmp T x dim (may be x), for the paths
 * that need them; scratch: matmul_scratch_bytes(T, dim + hidden). */
typedef struct {
    float *hb, *hb2, *tmp;
    void *scratch;
} MlpScratch;

/* out += down(silu(gate(x)) * up(x)), the SwiGLU MLP over T tokens added to the residual
 * stream. On the AVX-512 GEMM paths gate and up are computed for the same hidden units in
 * one work item and their product goes straight into down's packed input, so the two
 * T x hidden arrays are never written nor read back: the same numbers as matmul_many +
 * swiglu + matmul_add, bit for bit. */
void mlp_swiglu_add(float *out, const SwigluWeights *w, const float *x, int T, MatmulPrecision precision,
                    const MlpScratch *buf);

/* out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for T rows of n. wbuf: n floats for the
 * weight widened to f32 (RunState.norm_w), so the forward pass allocates nothing. */
void rmsnorm(float *out, const float *x, const Matrix *weight, int T, int n, float eps, float *wbuf);

/* cos_sin[i] = cos(pos * inv_freq[i]), cos_sin[head_dim/2 + i] = sin(...) for i < head_dim/2:
 * one position's rotation, the same for every layer and head. */
void rope_angles(int pos, int head_dim, const float *inv_freq, float *cos_sin);
/* HF rotate-half RoPE on n_heads vectors of head_dim, in place: pairs (i, i + head_dim/2)
 * rotate by the angles of rope_angles. */
void rope(float *vec, int n_heads, int head_dim, const float *cos_sin);

#endif
