/* transpose16.h: a 16 x 16 block of floats transposed in AVX-512 registers, shared by pca's
 * basis tiles (quant/pca.c) and its coefficient blocks (quant/codec_pca.c). Only with AVX-512F:
 * the callers keep their plain loops for other machines. */
#ifndef KVQ_TRANSPOSE16_H
#define KVQ_TRANSPOSE16_H

#if defined(__AVX512F__)
#include <immintrin.h>
#include <stddef.h>

/* col[j] lane i = src[i * stride + j] for i, j < 16: interleaving 32-bit, then 64-bit pairs
 * within 128-bit lanes, then the lanes twice. */
static inline void transpose16_load(const float *src, size_t stride, __m512 col[16]) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + (size_t)i * stride);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        col[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        col[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
    }
}
#endif

#endif
