/* quant/scheme_f32.c: the "fp32" baseline scheme. The packed form is the
 * floats themselves, so quantize/dequantize copy and dot/axpy are the plain
 * loops; comparing a scheme against this row isolates quantization error. */
#include <string.h>
#include "quant/scheme_impl.h"

size_t f32_packed_bytes(const KvScheme *s, size_t n) {
    (void)s;
    return n * sizeof(float);
}

void f32_quantize(const KvScheme *s, const float *x, size_t n, void *packed) {
    (void)s;
    memcpy(packed, x, n * sizeof(float));
}

void f32_dequantize(const KvScheme *s, const void *packed, size_t n, float *x) {
    (void)s;
    memcpy(x, packed, n * sizeof(float));
}

float f32_dot(const KvScheme *s, const void *packed, const float *q, size_t n) {
    (void)s;
    const float *k = packed;   /* callers pass float-aligned cache rows */
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++)
        sum += q[i] * k[i];
    return sum;
}

void f32_axpy(const KvScheme *s, const void *packed, float w, float *out, size_t n) {
    (void)s;
    const float *v = packed;
    for (size_t i = 0; i < n; i++)
        out[i] += w * v[i];
}
