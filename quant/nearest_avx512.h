/* quant/nearest_avx512.h: the nearest entry of a book of D = 8 values an entry (lloyd_nearest's
 * rule, or with +aw weights aw_nearest's), 16 entries a step with AVX-512 and the same answer as
 * those scalar scans: the distances are summed as they sum them, lane by lane. Shared by the
 * codecs that search such books (quant/codec_vq.c, quant/codec_rvq.c); include only where
 * __AVX512F__ is defined. */
#ifndef KVQ_NEAREST_AVX512_H
#define KVQ_NEAREST_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

/* The distances are computed as written (lloyd.h's and aw.h's rule): clang would fuse multiply-adds. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* The distances from e (D = 8) to the 16 entries c0 .. c0+15 of a book, each as the scalar rule
 * sums it: t = e - entry per channel, t * t (times w_i with +aw, else as lloyd_nearest), then
 * added in channel order, each step rounded, no fma. Register r holds entries c0+2r, c0+2r+1
 * (a 256-bit half each); an 8 x 8 transpose inside each half (unpacks, then 128-bit chunks of
 * the two sets of four registers) leaves channel i of the 16 entries in register i, lane L
 * holding entry c0 + nearest8_keep_lower's lane_entry[L]. Always inlined: as a call it cost an
 * eighth of the search. */
static inline __attribute__((always_inline)) __m512 nearest8_distances16(const float *book, int c0, __m512 e2,
                                                                         __m512 w2, int weighted) {
    __m512 p[8];
    for (int r = 0; r < 8; r++) {
        __m512 t = _mm512_sub_ps(e2, _mm512_loadu_ps(book + (size_t)(c0 + 2 * r) * 8));
        p[r] = weighted ? _mm512_mul_ps(w2, _mm512_mul_ps(t, t)) : _mm512_mul_ps(t, t);
    }
    __m512 u[2][4];   /* u[h][k]: chunk q holds channel 4 (q % 2) + k of the entries of registers 4h .. 4h+3 */
    for (int h = 0; h < 2; h++) {
        const __m512 *q = p + 4 * h;
        __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(q[0], q[1])), t1 = _mm512_castps_pd(_mm512_unpackhi_ps(q[0], q[1]));
        __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(q[2], q[3])), t3 = _mm512_castps_pd(_mm512_unpackhi_ps(q[2], q[3]));
        u[h][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[h][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[h][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[h][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    __m512 d = _mm512_shuffle_f32x4(u[0][0], u[1][0], _MM_SHUFFLE(2, 0, 2, 0));   /* channel 0 */
    for (int i = 1; i < 8; i++) {
        int k = i % 4;
        __m512 ch = i < 4 ? _mm512_shuffle_f32x4(u[0][k], u[1][k], _MM_SHUFFLE(2, 0, 2, 0))
                          : _mm512_shuffle_f32x4(u[0][k], u[1][k], _MM_SHUFFLE(3, 1, 3, 1));
        d = _mm512_add_ps(d, ch);
    }
    return d;
}

/* Each lane keeps the first strictly lower distance of the entries it sees, in increasing order. */
static inline void nearest8_keep_lower(__m512 d, int c0, __m512 *best, __m512i *best_entry) {
    const __m512i lane_entry = _mm512_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    __mmask16 lower = _mm512_cmp_ps_mask(d, *best, _CMP_LT_OQ);
    *best = _mm512_mask_mov_ps(*best, lower, d);
    *best_entry = _mm512_mask_mov_epi32(*best_entry, lower, _mm512_add_epi32(lane_entry, _mm512_set1_epi32(c0)));
}

/* lloyd_nearest (w NULL) or aw_nearest for D = 8 and a book of 16k entries, 32 entries a step in
 * two independent sets of lanes. The lowest distance over the lanes with, among equal ones, the
 * lowest entry is the scalar scan's answer (NaN distances are never lower, as there); with none
 * below +inf every lane holds +inf and entry 0, and that is entry 0, as there. */
static inline int nearest8_avx512(const float *e, const float *book, int k, const float *w) {
    const __m512 e2 = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(e))));
    const __m512 w2 = w ? _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(w)))) : e2;
    __m512 best0 = _mm512_set1_ps(INFINITY), best1 = best0;
    __m512i entry0 = _mm512_setzero_si512(), entry1 = entry0;
    for (int c0 = 0; c0 < k; c0 += 32) {
        nearest8_keep_lower(nearest8_distances16(book, c0, e2, w2, w != NULL), c0, &best0, &entry0);
        if (c0 + 16 < k) nearest8_keep_lower(nearest8_distances16(book, c0 + 16, e2, w2, w != NULL), c0 + 16, &best1, &entry1);
    }
    __m512 low = _mm512_set1_ps(_mm512_reduce_min_ps(_mm512_min_ps(best0, best1)));   /* no NaN: either order */
    int a0 = _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(best0, low, _CMP_EQ_OQ), entry0);   /* none: INT_MAX */
    int a1 = _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(best1, low, _CMP_EQ_OQ), entry1);
    return a0 < a1 ? a0 : a1;
}

#endif
