/* model/kernels.h: the arithmetic of the forward pass on plain float arrays.
 * Weights arrive as Matrix (F32/F16/BF16 in the file's layout) and are widened to
 * f32 a row at a time, so the model is never copied to f32 in memory. */
#ifndef KVQ_KERNELS_H
#define KVQ_KERNELS_H

#include "model/model.h"

/* Below this many multiply-adds a loop runs on one thread: waking threads costs more
 * than it saves on tiny models (stories260K decodes 10x faster this way). */
#define PARALLEL_MIN_WORK (1 << 18)

/* out[t, r] = sum_c x[t, c] * w[r, c] for t < T: a linear layer over T tokens.
 * OpenMP splits the weight rows, so each weight row is read once per call. */
void matmul(float *out, const float *x, const Matrix *w, int T);

/* Row `row` of w widened to f32 into out[0..cols). */
void matrix_row_f32(const Matrix *w, int row, float *out);

/* out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for T rows of n. */
void rmsnorm(float *out, const float *x, const Matrix *weight, int T, int n, float eps);

/* HF rotate-half RoPE on n_heads vectors of head_dim at position pos, in place:
 * pairs (i, i + head_dim/2) rotate by pos * inv_freq[i]. */
void rope(float *vec, int n_heads, int head_dim, int pos, const float *inv_freq);

/* In-place softmax of x[0..n). */
void softmax(float *x, int n);

/* sum x[i]*y[i], written with independent partial sums so the compiler vectorizes it. */
float dot_f32(const float *x, const float *y, int n);

#endif
