/* model/kernels/simd_avx512.h: small AVX-512 helpers shared by the GEMM (model/kernels/gemm_avx512.c) and
 * attention (model/kernels/attention_kernels.c) loops. Include only where __AVX512F__ is defined. */
#ifndef KVQ_SIMD_AVX512_H
#define KVQ_SIMD_AVX512_H

#include <immintrin.h>

/* Marks four vectors as living in registers from here on. Without it GCC folds each load
 * back into the four fmas that use the vector, so every key or value is loaded four times:
 * on this CPU (one 512-bit load per cycle, as many fmas) loads then set the pace. The empty
 * asm emits nothing; it only hides where the values came from. */
static inline void keep_in_registers(__m512 *a, __m512 *b, __m512 *c, __m512 *d) {
#if defined(__GNUC__)
    __asm__("" : "+v"(*a), "+v"(*b), "+v"(*c), "+v"(*d));
#else
    (void)a, (void)b, (void)c, (void)d;
#endif
}

/* r[i][j] -> r[j][i] for sixteen vectors of sixteen 32-bit lanes: pairs of lanes, then pairs
 * of pairs, then the four 128-bit quarters, which two rounds of shuffle_i32x4 transpose. */
static inline void transpose16_epi32(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {   /* u[i + c], quarter q: column 4q + c of rows i..i+3 */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
        r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
    }
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
/* Lanes of a and b rounded to bf16 (nearest even) as pairs: a's in the low half of each
 * 32-bit lane, b's in the high half. */
static inline __m512i bf16_pairs_of(__m512 a, __m512 b) {
    __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
    __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* n <= 32 consecutive floats from src as 16 bf16 pairs (src[2i], src[2i+1]), rounded to
 * nearest even; floats past n are 0, and the masked loads never touch memory past them. */
static inline __m512i load_bf16_pairs(const float *src, int n) {
    int lo = n < 16 ? n : 16, hi = n - lo;
    __m512 a = _mm512_maskz_loadu_ps((__mmask16)((1u << lo) - 1), src);
    __m512 b = _mm512_maskz_loadu_ps((__mmask16)((1u << hi) - 1), src + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(b, a);
}
#endif

#endif
