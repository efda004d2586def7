/* model/kernels/simd_avx2.h: small AVX2 helpers shared by the GEMM (model/kernels/gemm_avx2.c) and
 * attention (model/kernels/attention_kernels.c) loops. Include only where __AVX2__ is defined. */
#ifndef KVQ_SIMD_AVX2_H
#define KVQ_SIMD_AVX2_H

#include <immintrin.h>

/* r[i] element j <-> r[j] element i: pairs interleaved, then quadruples, then the 128-bit halves. */
static inline void transpose8_ps(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);       /* r_i0 r_(i+1)0 r_i1 r_(i+1)1 | the same for 4, 5 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);   /* elements 2, 3 | 6, 7 */
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));       /* element 0 of 4 rows | 4 */
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));   /* element 1 | 5 */
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));   /* 2 | 6 */
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));   /* 3 | 7 */
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

#endif
