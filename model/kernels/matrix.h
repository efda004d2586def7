/* model/kernels/matrix.h: a weight matrix as the kernels read it — a view of the file's bytes
 * in the file's dtype (F32, F16 or BF16), never copied to f32 as a whole — with its rows widened
 * to f32 a piece at a time (model/kernels/matrix.c), and the precision a matmul runs at.
 * model/model.h binds every weight of a Llama to one. */
#ifndef KVQ_MATRIX_H
#define KVQ_MATRIX_H

#include "model/formats/safetensors.h"

/* A weight matrix [rows, cols] (row-major, as HF stores nn.Linear: out x in), or a vector (rows = 1). */
typedef struct {
    const void *data;     /* aligned for dtype: the kernels read it through float / uint16_t
                             pointers (model_load copies a tensor the file misaligns) */
    DType dtype;          /* DT_F32, DT_F16 or DT_BF16; converted to f32 on the fly */
    int rows, cols;
} Matrix;

/* How matmuls treat the activations when the weights are BF16. */
typedef enum {
    MATMUL_EXACT = 0,     /* f32 activations, exact products, f32 sums: matches the f32 references */
    MATMUL_BF16_ACT = 1   /* activations rounded to bf16 so the CPU's bf16 dot products (AVX-512 BF16)
                             apply: faster prefill, relative error ~2^-9 per product, as llama.cpp
                             does for BF16 weights. Same as EXACT on CPUs without them. */
} MatmulPrecision;

/* Row `row` of w widened to f32 into out[0..cols). */
void matrix_row_f32(const Matrix *w, int row, float *out);
/* Elements [k0, k0+n) of row `row` widened to f32 (F32/F16/BF16). */
void matrix_segment_f32(const Matrix *w, int row, int k0, int n, float *out);

#endif
