/* quant/codec_nf4.c: nf4-gG, 4-bit NormalFloat codes with an fp16 absmax per group of G values
 * along the row (QLoRA / bitsandbytes' NF4 data type). G is a multiple of 8 from 8 to 4096 and
 * must divide the row.
 *
 * Per group, all in float32:
 *   s = fp16(max|x|)             nearest-even half of the float32 maximum
 *   z = x / s                    division by the stored (fp16-rounded) scale
 *   code = index of the NF4 value nearest to z, ties -> the lower index
 *   x^ = NF4[code] * s           one float32 multiply
 * with NF4 the 16 values below (float32 literals, exactly as SCHEMES.md writes them). "Nearest"
 * is exact: the code counts the midpoints of adjacent NF4 values (doubles, computed exactly)
 * that lie strictly below z, so a z exactly on a midpoint takes the lower index. Over every
 * float z with |z| <= 1.01 this gives the same codes as argmin_i |z - NF4[i]| computed in
 * float32 with the first index on ties (checked once, exhaustively), and past +-1 both give the
 * end codes: the two readings of the definition agree.
 *
 * Zero, NaN and infinities (defined, never a crash, and no NaN or infinity in what encode
 * writes; hostile bytes may hold an inf or NaN scale, which decodes as the arithmetic says):
 *   - s = 0 (max|x| <= 2^-25, fp16's tie to 0): all codes are 7 (NF4[7] = 0), x^ = +0.0.
 *   - max|x| skips NaN and +-inf; a NaN value gets code 7 (x^ = 0), +-inf gets code 15 or 0
 *     (x^ = +-s), or 0 when s = 0.
 *   - max|x| >= 65520, where fp16() would give inf, stores the largest half, 65504, instead;
 *     then |z| may pass 1 and such values come back as +-65504.
 *
 * Layout of a row of n values (like intB-gG): [n/2 code bytes][n/G fp16 scales, little-endian].
 * Code i is the low nibble of byte i/2 when i is even, the high nibble when odd. So nf4-g64
 * takes 4 + 16/64 = 4.25 bits a value. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define MAX_GROUP 4096
#define ZERO_CODE 7
#define F16_MAX 0x7bffu

#define NF4_0 -1.0f
#define NF4_1 -0.6961928009986877f
#define NF4_2 -0.5250730514526367f
#define NF4_3 -0.39491748809814453f
#define NF4_4 -0.28444138169288635f
#define NF4_5 -0.18477343022823334f
#define NF4_6 -0.09105003625154495f
#define NF4_7 0.0f
#define NF4_8 0.07958029955625534f
#define NF4_9 0.16093020141124725f
#define NF4_10 0.24611230194568634f
#define NF4_11 0.33791524171829224f
#define NF4_12 0.44070982933044434f
#define NF4_13 0.5626170039176941f
#define NF4_14 0.7229568362236023f
#define NF4_15 1.0f

static const float NF4[16] = {
    NF4_0, NF4_1, NF4_2,  NF4_3,  NF4_4,  NF4_5,  NF4_6,  NF4_7,
    NF4_8, NF4_9, NF4_10, NF4_11, NF4_12, NF4_13, NF4_14, NF4_15,
};

/* The exact midpoints: two floats add exactly in double, and halving is exact. */
#define MID(a, b) (((double)(a) + (double)(b)) * 0.5)
static const double MIDPOINT[15] = {
    MID(NF4_0, NF4_1),   MID(NF4_1, NF4_2),   MID(NF4_2, NF4_3),   MID(NF4_3, NF4_4),   MID(NF4_4, NF4_5),
    MID(NF4_5, NF4_6),   MID(NF4_6, NF4_7),   MID(NF4_7, NF4_8),   MID(NF4_8, NF4_9),   MID(NF4_9, NF4_10),
    MID(NF4_10, NF4_11), MID(NF4_11, NF4_12), MID(NF4_12, NF4_13), MID(NF4_13, NF4_14), MID(NF4_14, NF4_15),
};

/* ---- parsing ---- */

static int nf4_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "nf4", &p)) return 0;
    int group;
    if (!kv_parse_prefix(p, "-g", &p) || kv_parse_number(&p, 1, MAX_GROUP, &group) || group % 8 != 0 || *p) {
        snprintf(why, why_len, "%.40s: expected nf4-gG, G a multiple of 8 from 8 to %d", name, MAX_GROUP);
        return -1;
    }
    b->bits = 4;
    b->group = group;
    snprintf(b->name, sizeof b->name, "nf4-g%d", group);
    return 1;
}

static int nf4_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n % b->group != 0) {
        snprintf(why, why_len, "%s: group %d does not divide rows of %d", b->name, b->group, n);
        return 0;
    }
    return 1;
}

static size_t nf4_unit_bytes(const KvBase *b, int n) { return (size_t)n / 2 + (size_t)(n / b->group) * 2; }

/* ---- encode ---- */

/* The code of z = x / s (s > 0): how many midpoints lie strictly below z, so a z exactly on a
 * midpoint takes the lower index. NaN compares false everywhere; it is sent to code 7. */
static inline unsigned nf4_code(float z) {
    if (z != z) return ZERO_CODE;
    unsigned code = 0;
    for (int i = 0; i < 15; i++) code += (double)z > MIDPOINT[i];
    return code;
}

static void nf4_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *codes = unit, *scales = codes + n / 2;
    int G = b->group;
    for (int g = 0; g < n / G; g++) {
        const float *xg = x + (size_t)g * G;
        float amax = 0.0f;
        for (int i = 0; i < G; i++) {
            float a = fabsf(xg[i]);
            if (a <= 3.40282347e38f && a > amax) amax = a;   /* finite values only */
        }
        uint16_t h = f32_to_f16(amax);
        if (h == 0x7c00u) h = F16_MAX;
        kv_put_u16(scales + 2 * g, h);
        float s = f16_to_f32(h);
        unsigned char *cg = codes + (size_t)g * G / 2;
        for (int i = 0; i < G; i += 2) {
            unsigned c0 = ZERO_CODE, c1 = ZERO_CODE;
            if (s != 0.0f) {
                c0 = nf4_code(xg[i] / s);
                c1 = nf4_code(xg[i + 1] / s);
            }
            cg[i / 2] = (unsigned char)(c0 | c1 << 4);
        }
    }
}

/* ---- decode ---- */

static void row_decode_scalar(const KvBase *b, const unsigned char *row, int n, float *out) {
    const unsigned char *scales = row + n / 2;
    int G = b->group;
    for (int g = 0; g < n / G; g++) {
        float s = f16_to_f32((uint16_t)kv_get_u16(scales + 2 * g));
        const unsigned char *cg = row + (size_t)g * G / 2;
        float *og = out + (size_t)g * G;
        for (int j = 0; j < G / 2; j++) {
            og[2 * j] = NF4[cg[j] & 15] * s;
            og[2 * j + 1] = NF4[cg[j] >> 4] * s;
        }
    }
}

#if defined(__AVX512F__)
/* Groups of 32k: 16 code bytes -> low nibbles (even values) and high nibbles (odd values), each
 * a permute through the 16-entry table in one register, times the scale, interleaved back by
 * two permutes. One multiply per value, as in the scalar loop: the same values. */
static void row_decode_avx512(const KvBase *b, const unsigned char *row, int n, float *out) {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i nibble = _mm512_set1_epi32(15);
    const __m512 table = _mm512_loadu_ps(NF4);
    for (int d0 = 0; d0 < n; d0 += 32) {
        __m512 scale = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(row + n / 2 + (size_t)(d0 / b->group) * 2)));
        __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + d0 / 2)));
        __m512 even = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_and_si512(bytes, nibble), table), scale);
        __m512 odd = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table), scale);
        _mm512_storeu_ps(out + d0, _mm512_permutex2var_ps(even, first, odd));
        _mm512_storeu_ps(out + d0 + 16, _mm512_permutex2var_ps(even, second, odd));
    }
}
#endif

static void row_decode(const KvBase *b, const unsigned char *row, int n, float *out) {
#if defined(__AVX512F__)
    if (b->group % 32 == 0) {
        row_decode_avx512(b, row, n, out);
        return;
    }
#endif
    row_decode_scalar(b, row, n, out);
}

static void nf4_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t rb = nf4_unit_bytes(b, n);
    for (int r = 0; r < count; r++)
        row_decode(b, (const unsigned char *)units + (size_t)(r0 + r) * rb, n, out + (size_t)r * n);
}

#if defined(__AVX512F__)
/* Straight into attention's transposed key block, kt[i * 64 + p] = value i of row p: per 16 rows
 * and 4 code bytes (8 values), one gather brings the bytes of 16 rows; each nibble is a permute
 * through the table and a multiply, written as a row of kt. Lanes past count read nothing and
 * come out 0 (code 0 times scale 0 is -1 * 0 = -0; the mask zeroes them instead). */
static void rows_transposed_avx512(const KvBase *b, const unsigned char *rows, size_t row_bytes, int n, int count,
                                   float *kt) {
    __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32((int)row_bytes));
    const __m512i nibble = _mm512_set1_epi32(15);
    const __m512 table = _mm512_loadu_ps(NF4);
    int G = b->group;
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0;
        __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * row_bytes;
        for (int g = 0; g < n / G; g++) {
            /* the scale is 2 bytes; gather the 4-byte word ending with it (a row has n/2 >= 4
             * code bytes before its scales, so the word stays inside the row) */
            const unsigned char *par = base + n / 2 + (size_t)g * 2 - 2;
            __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, par, 1);
            __m512 scale = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(word, 16)));
            for (int j = g * G / 8; j < (g + 1) * G / 8; j++) {
                __m512i codes = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + 4 * j, 1);
                for (int k = 0; k < 8; k++) {
                    __m512i c = _mm512_and_si512(_mm512_srli_epi32(codes, 4 * k), nibble);
                    _mm512_storeu_ps(kt + (size_t)(8 * j + k) * 64 + p0,
                                     _mm512_maskz_mul_ps(live, _mm512_permutexvar_ps(c, table), scale));
                }
            }
        }
    }
}
#endif

#if defined(__AVX512F__)
static void nf4_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    size_t rb = nf4_unit_bytes(b, n);
    rows_transposed_avx512(b, (const unsigned char *)units + (size_t)r0 * rb, rb, n, count, kt);
}
#define NF4_DECODE_T64 nf4_decode_t64
#else
#define NF4_DECODE_T64 NULL   /* the caller decodes and transposes */
#endif

/* SCHEMES.md §9: a slot is a channel, the code its nibble; params are each group's fp16 absmax. */
static void nf4_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n;
    *symbols = 16;
    *param_bits = (n / b->group) * 16;
}

static void nf4_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    (void)b;
    kv_unpack_codes(unit, 4, n, codes);
}

static void nf4_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    (void)b;
    kv_pack_codes(codes, 4, n, unit);
}

const KvCodec kv_codec_nf4 = {
    .syntax = "nf4-gG",
    .summary = "4-bit NormalFloat (QLoRA's NF4) codes, an fp16 absmax per group of G along the row",
    .examples = "nf4-g64 nf4-g32 nf4-g128",
    .parse = nf4_parse,
    .check = nf4_check,
    .unit_bytes = nf4_unit_bytes,
    .encode = nf4_encode,
    .decode = nf4_decode,
    .decode_t64 = NF4_DECODE_T64,
    .code_layout = nf4_code_layout,
    .codes = nf4_codes,
    .put_codes = nf4_put_codes,
};
