/* model/kernels/vector.h: arithmetic on plain float arrays (model/kernels/vector.c), shared by
 * the matmul dispatch (kernels.c), the GEMM and attention loops and the forward pass. It
 * includes no other kernel's header, so every file of model/kernels/ can use it: the matmul
 * paths and their dispatcher meet here, not in each other. */
#ifndef KVQ_VECTOR_H
#define KVQ_VECTOR_H

#include <math.h>
#include <stddef.h>

/* a * b + c, fused where the CPU has FMA (C11 code is compiled without contraction, so
 * plain a * b + c is two roundings and two instructions); exact-enough either way. */
static inline float mul_add(float a, float b, float c) {
#ifdef FP_FAST_FMAF
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

/* a * b + c in double, fused where the CPU has FMA (see mul_add). */
static inline double fma_f64(double a, double b, double c) {
#ifdef FP_FAST_FMA
    return fma(a, b, c);
#else
    return a * b + c;
#endif
}

/* gate[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x) (SwiGLU). */
void swiglu(float *gate, const float *up, size_t n);

/* In-place softmax of x[0..n). */
void softmax(float *x, int n);
/* The largest of x[0..n), n >= 1. */
float max_value(const float *x, int n);
/* bf16 attention's softmax, left unnormalized: e_p = exp(scale * (x[p] - max)) for p < n, 0
 * for n <= p < n_out, written over x as bf16 pairs (pair i = (e_2i, e_2i+1) at
 * ((uint32_t *)x)[i], see model/kernels/attention_kernels.h); returns 1 / sum of the e_p (in f32).
 * The caller scales the weighted sum of values by it: one pass over the scores, where
 * scaling, normalizing and pairing them took three. */
float exp_pairs(float *x, int n, float max, float scale, int n_out);

/* out[i] = exp((double)x[i] - shift) for i < n (out may be NULL), each within 1 ulp of the
 * exact value, by a polynomial the compiler vectorizes; returns their sum, added in 8 lanes
 * (element i into lane i % 8, the lanes in order). The scoring of a row of logits
 * (eval/perplexity.c) spends its time here: one exponential per vocabulary entry. */
double exp_sum_f64(const float *x, int n, double shift, double *out);

/* sum x[i]*y[i], written with independent partial sums so the compiler vectorizes it. */
float dot_f32(const float *x, const float *y, int n);

/* y[i] += a * x[i]. */
void axpy_f32(float *y, float a, const float *x, int n);

#endif
