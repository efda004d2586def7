/* quant/codec_vq.c: vqC-dD, coupled / vector quantization (CQ, CommVQ) with codebooks fitted to
 * the model (SCHEMES.md §8): a row is cut into d/D sub-vectors of D values, and each is stored as
 * the C-bit index of its nearest entry in its own codebook, with one fp16 norm per row.
 * C = 1..12 code bits, D = 1, 2, 4, 8 or 16 dividing the row.
 *
 * Per row of d values, in float32 (the norm summed in double, as tq's):
 *   r = fp16(||x||_2)
 *   z = x * sqrt(d) / r            so that z's values are about N(0, 1) in size
 *   code_j = the nearest entry of codebook C[h][j] to sub-vector j of z (squared distance in
 *            float32, ties -> the lower index: lloyd_nearest, the rule the fit assumed)
 *   x^ = (r / sqrt(d)) * entry     the sub-vector back, one multiply a value
 * KvBase.table is the KV head's codebooks [d/D][2^C][D] (per layer, side and head: bound by the
 * cache from the calibration). Edge cases (defined, never a crash): r = 0, NaN or not a finite
 * half -> codes 0, r stored 0, the row decodes to 0; with no table bound the row decodes to 0.
 *
 * Layout of a row: [the d/D codes, C bits each: code i in bits [i*C, i*C+C) of the stream, bit k
 * of the stream bit k%8 of byte k/8, the last byte padded with zeros][fp16 r, little-endian]. So
 * vq8-d4 at d = 64 takes (16 + 2) bytes = 2.25 bits a value, vq12-d8 1.75, vq8-d8 1.25 (C/D +
 * 16/d; a stream that does not fill its last byte costs the padding too), plus the codebooks:
 * 2^C x d floats per layer, side and KV head (a codebook is per model: reported apart). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/aw.h"
#include "quant/lloyd.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#include "quant/nearest_avx512.h"
#endif

/* The distances are computed as written (lloyd.h's rule): clang would fuse multiply-adds. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define MAX_CODE_BITS 12

/* ---- parsing ---- */

static int sub_dim(const KvBase *b) { return b->variant; }   /* D, this codec's own parameter */

static int vq_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "vq", &p) || *p < '0' || *p > '9') return 0;
    int bits, dim;
    if (kv_parse_number(&p, 1, MAX_CODE_BITS, &bits) || !kv_parse_prefix(p, "-d", &p) || kv_parse_number(&p, 1, 16, &dim) ||
        *p || (dim & (dim - 1)) != 0) {
        snprintf(why, why_len, "%.40s: expected vqC-dD with C = 1..%d code bits and D = 1, 2, 4, 8 or 16", name,
                 MAX_CODE_BITS);
        return -1;
    }
    b->bits = bits;
    b->variant = dim;
    snprintf(b->name, sizeof b->name, "vq%d-d%d", bits, dim);
    return 1;
}

static int vq_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n > KV_MAX_HEAD_DIM) {   /* encode's z is a buffer of that many floats */
        snprintf(why, why_len, "%s: rows of %d values: vq takes at most %d", b->name, n, KV_MAX_HEAD_DIM);
        return 0;
    }
    if (n % sub_dim(b) != 0) {
        snprintf(why, why_len, "%s: sub-vectors of %d do not divide rows of %d", b->name, sub_dim(b), n);
        return 0;
    }
    return 1;
}

static size_t code_bytes(const KvBase *b, int n) { return ((size_t)(n / sub_dim(b)) * (size_t)b->bits + 7) / 8; }

static size_t vq_unit_bytes(const KvBase *b, int n) { return code_bytes(b, n) + 2; }

/* The floats of one KV head's codebooks: d/D books of 2^C entries of D values. */
static size_t book_floats(const KvBase *b) { return ((size_t)1 << b->bits) * (size_t)sub_dim(b); }

/* ---- the code stream ---- */

static void put_code(unsigned char *codes, int i, int bits, unsigned code) {
    size_t bit = (size_t)i * (size_t)bits;
    for (int k = 0; k < bits; k++, bit++)
        if (code >> k & 1u) codes[bit / 8] |= (unsigned char)(1u << (bit % 8));
}

static unsigned get_code(const unsigned char *codes, int i, int bits) {
    size_t bit = (size_t)i * (size_t)bits;
    uint32_t w = 0;   /* the (at most 3) bytes the code touches */
    for (size_t k = bit / 8; k <= (bit + (size_t)bits - 1) / 8; k++) w |= (uint32_t)codes[k] << (8 * (k - bit / 8));
    return (unsigned)(w >> (bit % 8)) & ((1u << bits) - 1u);
}

/* ---- encode and decode ---- */

#if defined(__AVX512F__)
/* lloyd.h's distances from x (D = 4) to the 16 entries c0 .. c0+15 of a codebook: 4 registers
 * hold them as loaded (entry 4r + q in 128-bit lane q of register r), each minus x (x in every
 * lane) squared (times the channel's weight with +aw: weighted, w4 the weights as x4 holds x), and
 * a 4 x 4 transpose inside each 128-bit lane gives the squares of coordinate
 * i in register i, so that ((sq0 + sq1) + sq2) + sq3 is the distance, each step rounded as there
 * (no fma). Lane 4q + r holds entry c0 + 4r + q (see keep_lower). */
static inline __m512 distances16(const float *book, int c0, __m512 x4, __m512 w4, int weighted) {
    __m512 sq[4];
    for (int r = 0; r < 4; r++) {
        __m512 t = _mm512_sub_ps(_mm512_loadu_ps(book + (size_t)(c0 + 4 * r) * 4), x4);
        sq[r] = weighted ? _mm512_mul_ps(w4, _mm512_mul_ps(t, t)) : _mm512_mul_ps(t, t);
    }
    __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(sq[0], sq[1])), t1 = _mm512_castps_pd(_mm512_unpackhi_ps(sq[0], sq[1]));
    __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(sq[2], sq[3])), t3 = _mm512_castps_pd(_mm512_unpackhi_ps(sq[2], sq[3]));
    __m512 s0 = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2)), s1 = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    __m512 s2 = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3)), s3 = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), s2), s3);
}

/* Each lane keeps the first strictly lower distance of the entries it sees, in increasing order. */
static inline void keep_lower(__m512 d, int c0, __m512 *best, __m512i *best_entry) {
    const __m512i lane_entry = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __mmask16 lower = _mm512_cmp_ps_mask(d, *best, _CMP_LT_OQ);
    *best = _mm512_mask_mov_ps(*best, lower, d);
    *best_entry = _mm512_mask_mov_epi32(*best_entry, lower, _mm512_add_epi32(lane_entry, _mm512_set1_epi32(c0)));
}

/* lloyd_nearest (w NULL) or aw_nearest (w: the sub-vector's +aw weights, each square times its
 * channel's weight before the sums: aw.h's w_e * (t_e * t_e)) for D = 4 and a codebook of 16k
 * entries, 32 entries a step in two independent sets of lanes. The lowest distance over the 32
 * lanes with, among equal ones, the lowest entry is the scalar scan's answer; with no distance
 * below +inf (overflow everywhere) every lane still holds +inf and entry 0, and that is entry 0,
 * as there. */
static int nearest4_avx512(const float *x, const float *book, int k, const float *w) {
    const __m512 x4 = _mm512_broadcast_f32x4(_mm_loadu_ps(x));
    const __m512 w4 = w ? _mm512_broadcast_f32x4(_mm_loadu_ps(w)) : x4;
    __m512 best0 = _mm512_set1_ps(INFINITY), best1 = best0;
    __m512i entry0 = _mm512_setzero_si512(), entry1 = entry0;
    for (int c0 = 0; c0 < k; c0 += 32) {
        keep_lower(distances16(book, c0, x4, w4, w != NULL), c0, &best0, &entry0);
        if (c0 + 16 < k) keep_lower(distances16(book, c0 + 16, x4, w4, w != NULL), c0 + 16, &best1, &entry1);
    }
    __m512 low = _mm512_set1_ps(_mm512_reduce_min_ps(_mm512_min_ps(best0, best1)));   /* no NaN: either order */
    int e0 = _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(best0, low, _CMP_EQ_OQ), entry0);   /* none: INT_MAX */
    int e1 = _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(best1, low, _CMP_EQ_OQ), entry1);
    return e0 < e1 ? e0 : e1;
}
#endif

/* The code of sub-vector z (D values) in its book of k entries: lloyd_nearest's, or with +aw (w:
 * the sub-vector's weights, else NULL) aw_nearest's. */
static unsigned nearest(const float *z, int D, const float *book, int k, const float *w) {
#if defined(__AVX512F__)
    if (D == 4 && k % 16 == 0) return (unsigned)nearest4_avx512(z, book, k, w);
    if (D == 8 && k % 16 == 0) return (unsigned)nearest8_avx512(z, book, k, w);
#endif
    return w ? (unsigned)aw_nearest(z, D, book, k, w) : (unsigned)lloyd_nearest(z, D, book, k);
}

static void vq_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *codes = unit;
    memset(unit, 0, vq_unit_bytes(b, n));   /* r = 0 or no table: codes 0, r 0 */
    uint16_t r16 = f16_norm(x, n);
    if (r16 == 0 || !b->table) return;
    kv_put_u16(codes + code_bytes(b, n), r16);
    float r = f16_to_f32(r16), sqrt_d = sqrtf((float)n), z[KV_MAX_HEAD_DIM];
    for (int i = 0; i < n; i++) z[i] = x[i] * sqrt_d / r;
    int D = sub_dim(b), k = 1 << b->bits;
    for (int j = 0; j < n / D; j++) {
        const float *book = b->table + (size_t)j * book_floats(b);
        unsigned code = nearest(z + (size_t)j * D, D, book, k, b->weights ? b->weights + (size_t)j * D : NULL);
        if (b->bits == 8) codes[j] = (unsigned char)code;   /* a byte each: the stream's layout */
        else put_code(codes, j, b->bits, code);
    }
}

/* One row: x^ = scale * entry, scale = r / sqrt(d) rounded first (as vq_decode's header says).
 * D is a constant in each caller's copy, so the loop over an entry's values is a vector
 * multiply; 8-bit codes are bytes. */
static inline void row_decode(const KvBase *b, const unsigned char *row, int n, float scale, float *o, int D) {
    size_t book = book_floats(b);
    const float *books = b->table;
    for (int j = 0; j < n / D; j++) {
        unsigned code = b->bits == 8 ? row[j] : get_code(row, j, b->bits);
        const float *entry = books + (size_t)j * book + (size_t)code * (size_t)D;
        for (int i = 0; i < D; i++) o[j * D + i] = scale * entry[i];
    }
}

#if defined(__AVX512F__)
/* D = 4 and 8-bit codes, n a multiple of 16: four entries a register (a 128-bit load into each
 * lane), times the scale: row_decode's one multiply a value. */
static void row_decode4_avx512(const KvBase *b, const unsigned char *row, int n, float scale, float *o) {
    size_t book = book_floats(b);
    const float *books = b->table;
    const __m512 s = _mm512_set1_ps(scale);
    for (int j = 0; j < n / 4; j += 4) {
        const float *e = books + (size_t)j * book;
        __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(e + (size_t)row[j] * 4));
        v = _mm512_insertf32x4(v, _mm_loadu_ps(e + book + (size_t)row[j + 1] * 4), 1);
        v = _mm512_insertf32x4(v, _mm_loadu_ps(e + 2 * book + (size_t)row[j + 2] * 4), 2);
        v = _mm512_insertf32x4(v, _mm_loadu_ps(e + 3 * book + (size_t)row[j + 3] * 4), 3);
        _mm512_storeu_ps(o + 4 * j, _mm512_mul_ps(s, v));
    }
}
#endif

/* r / sqrt(d) of a row, the one rounding before the multiplies. */
static float row_scale(const KvBase *b, const unsigned char *row, int n) {
    return f16_to_f32((uint16_t)kv_get_u16(row + code_bytes(b, n))) / sqrtf((float)n);
}

static void vq_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = vq_unit_bytes(b, n);
    for (int r = 0; r < count; r++) {
        const unsigned char *row = (const unsigned char *)units + (size_t)(r0 + r) * ub;
        float *o = out + (size_t)r * n;
        if (!b->table) {   /* no table bound: the row decodes to 0 */
            memset(o, 0, sizeof(float) * (size_t)n);
            continue;
        }
        float scale = row_scale(b, row, n);
#if defined(__AVX512F__)
        if (sub_dim(b) == 4 && b->bits == 8 && n % 16 == 0) {
            row_decode4_avx512(b, row, n, scale, o);
            continue;
        }
#endif
        switch (sub_dim(b)) {   /* one copy per D: constant loop bounds */
        case 1: row_decode(b, row, n, scale, o, 1); break;
        case 2: row_decode(b, row, n, scale, o, 2); break;
        case 4: row_decode(b, row, n, scale, o, 4); break;
        case 8: row_decode(b, row, n, scale, o, 8); break;
        default: row_decode(b, row, n, scale, o, 16); break;
        }
    }
}

#if defined(__AVX512F__)
/* The fast shape (D = 4, 8-bit codes, n a multiple of 16) into attention's transposed key block,
 * kt[i * 64 + p] = value i of row p, 16 rows and one sub-vector a step: register r takes the
 * entries of rows 4r .. 4r+3 in its 128-bit lanes (a load each, as row_decode4_avx512), a 4 x 4
 * transpose inside each lane gives value i of the 16 rows in register i (row 4r + q at position
 * 4q + r), a permute puts them in row order, and each is times its row's r / sqrt(d), computed as
 * vq_decode does. Rows past count take a zero entry and are zeroed by the mask. */
static void rows4_transposed_avx512(const KvBase *b, const unsigned char *rows, size_t ub, int n, int count,
                                    float *kt) {
    static const float zero_entry[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const __m512i row_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    size_t book = book_floats(b);
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0 < 16 ? count - p0 : 16;
        __mmask16 live = left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *row[16];
        float scale[16] = {0};
        for (int p = 0; p < 16; p++) {
            row[p] = p < left ? rows + (size_t)(p0 + p) * ub : NULL;
            if (row[p]) scale[p] = row_scale(b, row[p], n);
        }
        __m512 s = _mm512_loadu_ps(scale);
        for (int j = 0; j < n / 4; j++) {
            const float *e = b->table + (size_t)j * book;
            __m512 a[4];
            for (int r = 0; r < 4; r++) {
                const float *q[4];
                for (int k = 0; k < 4; k++) q[k] = row[4 * r + k] ? e + (size_t)row[4 * r + k][j] * 4 : zero_entry;
                a[r] = _mm512_castps128_ps512(_mm_loadu_ps(q[0]));
                a[r] = _mm512_insertf32x4(a[r], _mm_loadu_ps(q[1]), 1);
                a[r] = _mm512_insertf32x4(a[r], _mm_loadu_ps(q[2]), 2);
                a[r] = _mm512_insertf32x4(a[r], _mm_loadu_ps(q[3]), 3);
            }
            __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(a[0], a[1])), t1 = _mm512_castps_pd(_mm512_unpackhi_ps(a[0], a[1]));
            __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(a[2], a[3])), t3 = _mm512_castps_pd(_mm512_unpackhi_ps(a[2], a[3]));
            __m512 v[4] = {
                _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2)), _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2)),
                _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3)), _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3)),
            };
            for (int i = 0; i < 4; i++)
                _mm512_storeu_ps(kt + (size_t)(4 * j + i) * 64 + p0,
                                 _mm512_maskz_mul_ps(live, s, _mm512_permutexvar_ps(row_order, v[i])));
        }
    }
}

/* Straight into attention's transposed key block, kt[i * 64 + p] = value i of row p, for rows
 * whose code stream is at least 4 bytes: per 16 rows, one gather brings their r (the 32-bit
 * word ending with it) and one per sub-vector their code (the word holding its bits, which
 * stays inside the row); then each of the D values is a gather from the sub-vector's codebook
 * times the row's r / sqrt(d), as vq_decode's. Lanes past count read nothing and are zeroed by
 * the mask. */
static void vq_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    size_t ub = vq_unit_bytes(b, n), cb = code_bytes(b, n), book = book_floats(b);
    if (!b->table || cb < 4) {   /* no table: zeros; a short stream: row by row, transposed */
        memset(kt, 0, sizeof(float) * 64 * (size_t)n);
        float row[KV_MAX_HEAD_DIM];
        for (int p = 0; p < count && b->table; p++) {
            vq_decode(b, units, n, r0 + p, 1, row);
            for (int i = 0; i < n; i++) kt[(size_t)i * 64 + p] = row[i];
        }
        return;
    }
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * ub;
    if (sub_dim(b) == 4 && b->bits == 8 && n % 16 == 0) {
        rows4_transposed_avx512(b, rows, ub, n, count, kt);
        return;
    }
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)ub));
    const __m512i code_mask = _mm512_set1_epi32((1 << b->bits) - 1);
    const __m512 sqrt_d = _mm512_set1_ps(sqrtf((float)n));
    int D = sub_dim(b);
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0;
        __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * ub;
        __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + cb - 2, 1);
        __m512 scale = _mm512_div_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(word, 16))), sqrt_d);
        for (int j = 0; j < n / D; j++) {
            size_t bit = (size_t)j * (size_t)b->bits, at = bit / 8 + 4 <= cb ? bit / 8 : cb - 4;
            __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + at, 1);
            __m512i code = _mm512_and_si512(_mm512_srli_epi32(w, (unsigned)(bit - 8 * at)), code_mask);
            __m512i entry = _mm512_mullo_epi32(code, _mm512_set1_epi32(D));
            const float *e = b->table + (size_t)j * book;
            for (int i = 0; i < D; i++) {
                __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, _mm512_add_epi32(entry, _mm512_set1_epi32(i)),
                                                    e, 4);
                _mm512_storeu_ps(kt + (size_t)(j * D + i) * 64 + p0, _mm512_maskz_mul_ps(live, scale, v));
            }
        }
    }
}
#define VQ_DECODE_T64 vq_decode_t64
#else
#define VQ_DECODE_T64 NULL   /* the caller decodes and transposes */
#endif

/* ---- fitting (SCHEMES.md §8) ---- */

/* Per KV head, d/D books of 2^C entries of D values (file: [n_kv_heads, d/D, 2^C, D]). */
static void vq_fit_layout(const KvBase *b, int n, KvFitLayout *layout) {
    *layout = (KvFitLayout){.per_head = 1, .n_tensors = 1,
                            .tensors = {{.name = "", .ndim = 3, .dims = {n / sub_dim(b), 1 << b->bits, sub_dim(b)}}}};
}

/* Scratch: one book's points, Lloyd's codes and sums. */
static size_t vq_fit_scratch_bytes(const KvBase *b, const KvFitRows *rows) {
    return lloyd_scratch_bytes(sub_dim(b), 1 << b->bits) + rows->count * (sub_dim(b) * sizeof(float) + sizeof(uint16_t));
}

static float *vq_scratch_points(const KvBase *b, void *scratch) {
    return (float *)((char *)scratch + lloyd_scratch_bytes(sub_dim(b), 1 << b->bits));
}

/* §8, each book apart: the points at indices floor(k n / K) as the start, then Lloyd. */
static int vq_fit(const KvBase *b, const KvFitRows *rows, float *table, void *scratch, KvFitShortfall *shortfall) {
    int D = sub_dim(b), k = 1 << b->bits;
    float *points = vq_scratch_points(b, scratch);
    uint16_t *codes = (uint16_t *)(points + rows->count * (size_t)D);
    for (int book = 0; book < rows->n / D; book++) {
        size_t n = kv_subvector_points(rows->units, rows->count, rows->n, sub_dim(b), book, points);
        if (n < 4 * (size_t)k) {
            *shortfall = (KvFitShortfall){.points = n, .entries = k};
            return -1;
        }
        float *entries = table + (size_t)book * book_floats(b);
        /* +aw: Lloyd on sqrt(w)-scaled points is the weighted fit (quant/aw.h) */
        float sqrt_w[16];
        if (rows->weights)
            for (int e = 0; e < D; e++) sqrt_w[e] = sqrtf(rows->weights[book * D + e]);
        if (rows->weights) aw_scale_points(points, n, D, sqrt_w);
        lloyd_init_spread(points, n, D, k, entries);
        lloyd_fit(points, n, D, entries, k, LLOYD_MAX_ITERATIONS, codes, scratch);
        if (rows->weights) aw_unscale_centroids(entries, k, D, sqrt_w);
    }
    return 0;
}

static double vq_fit_objective(const KvBase *b, const KvFitRows *rows, const float *table, void *scratch) {
    float *points = vq_scratch_points(b, scratch);
    double sum = 0;
    for (int book = 0; book < rows->n / sub_dim(b); book++) {
        size_t n = kv_subvector_points(rows->units, rows->count, rows->n, sub_dim(b), book, points);
        const float *entries = table + (size_t)book * book_floats(b);
        sum += rows->weights ? aw_objective(points, n, sub_dim(b), rows->weights + book * sub_dim(b), entries, 1 << b->bits)
                             : lloyd_objective(points, n, sub_dim(b), entries, 1 << b->bits);
    }
    return sum;
}

static const KvFit VQ_FIT = {
    .layout = vq_fit_layout,
    .scratch_bytes = vq_fit_scratch_bytes,
    .fit = vq_fit,
    .objective = vq_fit_objective,
};

/* SCHEMES.md §9: a slot is a sub-vector, the code its entry's index; the one parameter is the
 * row's fp16 norm (the stream's padding to a whole byte is not counted). */
static void vq_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n / sub_dim(b);
    *symbols = 1 << b->bits;
    *param_bits = 16;
}

static void vq_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    kv_unpack_codes(unit, b->bits, n / sub_dim(b), codes);
}

static void vq_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    kv_pack_codes(codes, b->bits, n / sub_dim(b), unit);
}

const KvCodec kv_codec_vq = {
    .syntax = "vqC-dD",
    .summary = "C-bit codes of D-value sub-vectors into codebooks fitted to the model (CQ, CommVQ; ./run calibrate), an fp16 "
        "norm per row",
    .examples = "vq8-d4 vq8-d8 vq12-d8",
    .parse = vq_parse,
    .check = vq_check,
    .unit_bytes = vq_unit_bytes,
    .encode = vq_encode,
    .decode = vq_decode,
    .code_layout = vq_code_layout,
    .codes = vq_codes,
    .put_codes = vq_put_codes,
    .decode_t64 = VQ_DECODE_T64,
    .fit = &VQ_FIT,
};
