/* model/kernels.c: matmul, RMSNorm, RoPE and softmax for the forward pass.
 * Plain C loops that the compiler can vectorize; OpenMP over output rows. */
#include "model/kernels.h"
#include "quant/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void matrix_row_f32(const Matrix *w, int row, float *out) {
    size_t start = (size_t)row * w->cols;
    int n = w->cols;
    if (w->dtype == DT_F32) {
        memcpy(out, (const float *)w->data + start, (size_t)n * sizeof(float));
    } else if (w->dtype == DT_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + start;
        for (int i = 0; i < n; i++) out[i] = bf16_to_f32(p[i]);
    } else {
        const uint16_t *p = (const uint16_t *)w->data + start;
        for (int i = 0; i < n; i++) out[i] = f16_to_f32(p[i]);
    }
}

float dot_f32(const float *x, const float *y, int n) {
    /* 16 independent sums: no reassociation needed for the compiler to use SIMD. */
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += x[i + j] * y[i + j];
    float sum = 0.0f;
    for (int j = 0; j < 16; j++) sum += acc[j];
    for (; i < n; i++) sum += x[i] * y[i];
    return sum;
}

/* Rows of w handled together: widened once, then used for every token. */
#define MATMUL_ROW_BLOCK 8

void matmul(float *out, const float *x, const Matrix *w, int T) {
    int rows = w->rows, cols = w->cols;
    double work = (double)rows * cols * T;
    #pragma omp parallel if (work >= PARALLEL_MIN_WORK)
    {
        float *wbuf = malloc((size_t)MATMUL_ROW_BLOCK * cols * sizeof(float));
        #pragma omp for schedule(static)
        for (int r0 = 0; r0 < rows; r0 += MATMUL_ROW_BLOCK) {
            int nr = rows - r0 < MATMUL_ROW_BLOCK ? rows - r0 : MATMUL_ROW_BLOCK;
            for (int r = 0; r < nr; r++) matrix_row_f32(w, r0 + r, wbuf + (size_t)r * cols);
            for (int t = 0; t < T; t++) {
                const float *xt = x + (size_t)t * cols;
                for (int r = 0; r < nr; r++)
                    out[(size_t)t * rows + r0 + r] = dot_f32(xt, wbuf + (size_t)r * cols, cols);
            }
        }
        free(wbuf);
    }
}

void rmsnorm(float *out, const float *x, const Matrix *weight, int T, int n, float eps) {
    float *w = malloc((size_t)n * sizeof(float));
    matrix_row_f32(weight, 0, w);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *ot = out + (size_t)t * n;
        float ss = dot_f32(xt, xt, n) / (float)n;
        float inv = 1.0f / sqrtf(ss + eps);
        for (int i = 0; i < n; i++) ot[i] = w[i] * (xt[i] * inv);
    }
    free(w);
}

void rope(float *vec, int n_heads, int head_dim, int pos, const float *inv_freq) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        for (int h = 0; h < n_heads; h++) {
            float *v = vec + (size_t)h * head_dim;
            float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}

void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - max); sum += x[i]; }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
