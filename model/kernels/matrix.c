/* model/kernels/matrix.c: a weight matrix's rows widened to f32 (see matrix.h). */
#include "model/kernels/matrix.h"
#include "quant/half.h"
#include <stdint.h>
#include <string.h>

void matrix_segment_f32(const Matrix *w, int row, int k0, int n, float *out) {
    size_t start = (size_t)row * w->cols + (size_t)k0;
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

void matrix_row_f32(const Matrix *w, int row, float *out) { matrix_segment_f32(w, row, 0, w->cols, out); }
