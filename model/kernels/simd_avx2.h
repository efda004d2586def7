/* model/kernels/simd_avx2.h: small AVX2 helpers shared by the GEMM (model/kernels/gemm_avx2.c) and
 * attention (model/kernels/attention_kernels.c) loops. Include only where __AVX2__ and __FMA__ are
 * defined. */
#ifndef KVQ_SIMD_AVX2_H
#define KVQ_SIMD_AVX2_H

#include <immintrin.h>

/* 16 floats as two named vectors: a row of a tile's sums, or the 16 values that a row of sums
 * takes one term from per step. GCC keeps a struct passed by value through inline functions in
 * registers, where it kept arrays of sums in registers but also stored most of them to the
 * stack at every step (gemm_avx2.c's kernel ran at a third of the FMA units' rate so). */
typedef struct {
    __m256 lo, hi;
} Row16;

/* x[0..16). The empty asm emits nothing; it hides where the vectors came from, so that GCC keeps
 * them in registers instead of loading them again inside each fma that uses them. */
static inline Row16 row16_load(const float *x) {
    Row16 r = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)};
    __asm__("" : "+x"(r.lo), "+x"(r.hi));
    return r;
}

static inline void row16_store(float *x, Row16 r) {
    _mm256_storeu_ps(x, r.lo);
    _mm256_storeu_ps(x + 8, r.hi);
}

/* r += *s * x */
static inline Row16 row16_fma(Row16 r, const float *s, Row16 x) {
    __m256 b = _mm256_broadcast_ss(s);
    return (Row16){_mm256_fmadd_ps(b, x.lo, r.lo), _mm256_fmadd_ps(b, x.hi, r.hi)};
}

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
