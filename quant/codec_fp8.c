/* quant/codec_fp8.c: the 8-bit floating-point bases fp8-e4m3 and fp8-e5m2 (OCP FP8), no scale.
 *
 *   fp8-e4m3 (OCP E4M3FN): sign, 4 exponent bits (bias 7), 3 mantissa bits; subnormals; no
 *            infinities; 0x7F and 0xFF are NaN; largest finite 448 (0x7E).
 *   fp8-e5m2 (OCP E5M2):   sign, 5 exponent bits (bias 15), 2 mantissa bits; subnormals;
 *            0x7C/0xFC are +-inf, 0x7D-0x7F/0xFD-0xFF NaN; largest finite 57344 (0x7B).
 *
 * A row of n values is n bytes, value i in byte i: the format's code of x_i, rounded to the
 * nearest representable value, ties to even, straight from float32's bits (one rounding, no
 * detour through fp16), saturating at +-max. This is vLLM's kv_cache_dtype=fp8 / fp8_e5m2
 * with scale 1 on NVIDIA GPUs: __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), whose
 * non-finite cases are taken over exactly:
 *   - finite |x| > max, and +-inf           -> +-max (0x7E/0xFE, 0x7B/0xFB)
 *   - NaN (any sign or payload)             -> 0x7F, which decodes to NaN (in both formats)
 *   - |x| <= half the smallest subnormal    -> +-0 (the tie at exactly half goes to 0, the even
 *                                              code); -0.0 keeps its sign (0x80)
 * So an encoded row holds no infinity. Decoding is exact (every code is a float32): a 256-entry
 * table per format, built below from the format's definition as constant expressions, so the
 * portable decode loop is one table load a value; with AVX-512, 16 codes at a time go through
 * the F16C conversion instead (the same values). The e5m2 infinity codes, never written by
 * encode, decode to +-inf, and every NaN code to a quiet NaN. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* ---- the formats ---- */

typedef struct {
    int mant_bits;      /* 3 or 2 */
    int bias;           /* 7 or 15 */
    uint32_t max_bits;  /* float32 bits of the largest finite value */
    uint8_t max_code;   /* its code, positive */
    const float *table; /* code -> value */
} Fp8Format;

/* 2^k as an arithmetic constant expression, |k| <= 31 */
#define P2(k) ((k) >= 0 ? (float)(1u << ((k) < 0 ? -(k) : (k))) : 1.0f / (float)(1u << ((k) < 0 ? -(k) : (k))))
#define SIGN(c) (((c) & 0x80) ? -1.0f : 1.0f)

/* e4m3: exponent field e, mantissa m: e = 0 -> m * 2^-9; else (8 + m) * 2^(e - 10); S.1111.111 NaN */
#define E4M3_E(c) (((c) >> 3) & 15)
#define E4M3_M(c) ((c) & 7)
#define E4M3(c)                                                                                   \
    (((c) & 0x7f) == 0x7f ? NAN                                                                   \
                          : SIGN(c) * (float)(E4M3_E(c) ? 8 + E4M3_M(c) : E4M3_M(c)) *            \
                                P2((E4M3_E(c) ? E4M3_E(c) : 1) - 10))

/* e5m2: e = 0 -> m * 2^-16; e = 31 -> inf (m = 0) or NaN; else (4 + m) * 2^(e - 17) */
#define E5M2_E(c) (((c) >> 2) & 31)
#define E5M2_M(c) ((c) & 3)
#define E5M2(c)                                                                                   \
    (E5M2_E(c) == 31 ? (E5M2_M(c) ? NAN : SIGN(c) * INFINITY)                                     \
                     : SIGN(c) * (float)(E5M2_E(c) ? 4 + E5M2_M(c) : E5M2_M(c)) *                 \
                           P2((E5M2_E(c) ? E5M2_E(c) : 1) - 17))

#define T4(F, c) F(c), F((c) + 1), F((c) + 2), F((c) + 3)
#define T16(F, c) T4(F, c), T4(F, (c) + 4), T4(F, (c) + 8), T4(F, (c) + 12)
#define T64(F, c) T16(F, c), T16(F, (c) + 16), T16(F, (c) + 32), T16(F, (c) + 48)
#define T256(F) T64(F, 0), T64(F, 64), T64(F, 128), T64(F, 192)

static const float E4M3_TABLE[256] = {T256(E4M3)};
static const float E5M2_TABLE[256] = {T256(E5M2)};

static const Fp8Format E4M3_FORMAT = {3, 7, 0x43e00000u /* 448 */, 0x7e, E4M3_TABLE};
static const Fp8Format E5M2_FORMAT = {2, 15, 0x47600000u /* 57344 */, 0x7b, E5M2_TABLE};

extern const KvCodec kv_codec_fp8_e4m3, kv_codec_fp8_e5m2;

static const Fp8Format *format_of(const KvBase *b) {
    return b->codec == &kv_codec_fp8_e5m2 ? &E5M2_FORMAT : &E4M3_FORMAT;
}

/* The code of one float: nearest, ties to even, saturating (see the top of the file). */
static inline uint8_t fp8_code(const Fp8Format *f, float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint8_t sign = (uint8_t)(u >> 24 & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7f;                      /* NaN */
    if (a > f->max_bits) return (uint8_t)(sign | f->max_code);   /* beyond max, inf */
    int exp = (int)(a >> 23);
    int e = exp - 127 + f->bias;                           /* the exponent field in the format */
    if (e >= 1) {
        /* Normal: keep the top mant_bits of the 23-bit mantissa, round the rest to nearest
         * even. A carry out of the mantissa moves to the next exponent (the fields are
         * adjacent); it cannot pass max, since a <= max and max is representable. */
        int shift = 23 - f->mant_bits;
        uint32_t code = (uint32_t)e << f->mant_bits | (a & 0x7fffffu) >> shift;
        uint32_t rest = a & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (code & 1u))) code++;
        return (uint8_t)(sign | code);
    }
    /* Subnormal in the format (or zero): x = M * 2^(E - 150) with M the 24-bit significand
     * (E = 1 and no implicit bit for float subnormals); the format counts units of
     * 2^(1 - bias - mant_bits), so the code is M >> shift, rounded to nearest even. A carry
     * into bit mant_bits gives the smallest normal code, which is right. */
    uint32_t m = exp ? (a & 0x7fffffu) | 0x800000u : a;
    int shift = 151 - f->bias - f->mant_bits - (exp ? exp : 1);
    if (shift > 24) return sign;                           /* below half the smallest subnormal */
    uint32_t code = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (code & 1u))) code++;
    return (uint8_t)(sign | code);
}

/* ---- the codec's functions ---- */

/* Two rows of the table, one per format. The e4m3 row also refuses every other name that
 * starts with "fp8" (so the order of the rows does not matter). */
static int parse_fp8(const char *name, const char *want, KvBase *b) {
    if (strcmp(name, want) != 0) return 0;
    b->bits = 8;
    snprintf(b->name, sizeof b->name, "%s", want);
    return 1;
}

static int e4m3_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    if (strncmp(name, "fp8", 3) != 0 || !strcmp(name, "fp8-e5m2")) return 0;
    if (!parse_fp8(name, "fp8-e4m3", b)) {
        snprintf(why, why_len, "%.40s: the fp8 bases are fp8-e4m3 and fp8-e5m2", name);
        return -1;
    }
    return 1;
}

static int e5m2_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    (void)why, (void)why_len;
    return parse_fp8(name, "fp8-e5m2", b);
}

static int fp8_check(const KvBase *b, int n, char *why, size_t why_len) {
    (void)b, (void)n, (void)why, (void)why_len;
    return 1;
}

static size_t fp8_unit_bytes(const KvBase *b, int n) {
    (void)b;
    return (size_t)n;
}

static void fp8_encode(const KvBase *b, const float *x, int n, void *unit) {
    const Fp8Format *f = format_of(b);
    unsigned char *p = unit;
    for (int i = 0; i < n; i++) p[i] = fp8_code(f, x[i]);
}

#if defined(__AVX512F__)
/* 16 codes (one in the low byte of each 32-bit lane) -> 16 floats, the table's values: an e5m2
 * code is the top byte of the fp16 with the same value (inf and NaN included), and an e4m3 code
 * with its exponent and mantissa moved down one bit is an fp16 of value / 256 (its subnormals
 * land on fp16 subnormals), so one F16C conversion, times 256 for e4m3, then e4m3's NaN codes. */
static inline __m512 fp8x16_to_f32(__m512i c, int e5m2) {
    if (e5m2) return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_slli_epi32(c, 8)));
    __m512i low7 = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
    __m512i h = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 8), _mm512_slli_epi32(low7, 7));
    __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), _mm512_set1_ps(256.0f));
    return _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(low7, _mm512_set1_epi32(0x7f)), _mm512_set1_ps(NAN));
}
#endif

static void fp8_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    const float *t = format_of(b)->table;
    const unsigned char *p = (const unsigned char *)units + (size_t)r0 * (size_t)n;
    size_t total = (size_t)count * (size_t)n, i = 0;
#if defined(__AVX512F__)
    int e5m2 = t == E5M2_TABLE;
    for (; i + 16 <= total; i += 16)
        _mm512_storeu_ps(out + i, fp8x16_to_f32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + i))), e5m2));
#endif
    for (; i < total; i++) out[i] = t[p[i]];
}

/* kt[i * 64 + p] = value i of row r0 + p: a byte per value, so the rows are read in place and
 * no row-major copy is needed. With AVX-512 (n a multiple of 4): per 16 rows, one gather brings
 * 4 bytes of each, and each byte becomes a row of kt; lanes past count gather nothing and give
 * +0. */
static void fp8_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    const float *t = format_of(b)->table;
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * (size_t)n;
#if defined(__AVX512F__)
    if (n % 4 == 0) {
        int e5m2 = t == E5M2_TABLE;
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(n));
        for (int p0 = 0; p0 < 64; p0 += 16) {
            int left = count - p0;
            __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * (size_t)n;
            for (int j = 0; j < n; j += 4) {
                __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + j, 1);
                for (int k = 0; k < 4; k++) {
                    __m512i c = _mm512_and_si512(_mm512_srli_epi32(word, 8 * k), _mm512_set1_epi32(0xff));
                    _mm512_storeu_ps(kt + (size_t)(j + k) * 64 + p0, fp8x16_to_f32(c, e5m2));
                }
            }
        }
        return;
    }
#endif
    for (int i = 0; i < n; i++) {
        float *col = kt + (size_t)i * 64;
        for (int p = 0; p < count; p++) col[p] = t[rows[(size_t)p * (size_t)n + (size_t)i]];
        for (int p = count; p < 64; p++) col[p] = 0.0f;
    }
}

/* SCHEMES.md §9: a slot is a channel, the code its byte; no parameters. */
static void fp8_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    (void)b;
    *slots = n;
    *symbols = 256;
    *param_bits = 0;
}

static void fp8_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    (void)b;
    for (int i = 0; i < n; i++) codes[i] = ((const unsigned char *)unit)[i];
}

static void fp8_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    (void)b;
    for (int i = 0; i < n; i++) ((unsigned char *)unit)[i] = (unsigned char)codes[i];
}

const KvCodec kv_codec_fp8_e4m3 = {
    .syntax = "fp8-e4m3",
    .summary = "OCP FP8 E4M3FN (max 448, no inf), nearest-even, saturating; no scale",
    .examples = "fp8-e4m3",
    .parse = e4m3_parse,
    .check = fp8_check,
    .unit_bytes = fp8_unit_bytes,
    .encode = fp8_encode,
    .decode = fp8_decode,
    .decode_t64 = fp8_decode_t64,
    .code_layout = fp8_code_layout,
    .codes = fp8_codes,
    .put_codes = fp8_put_codes,
};

const KvCodec kv_codec_fp8_e5m2 = {
    .syntax = "fp8-e5m2",
    .summary = "OCP FP8 E5M2 (max 57344), nearest-even, saturating; no scale",
    .examples = "fp8-e5m2",
    .parse = e5m2_parse,
    .check = fp8_check,
    .unit_bytes = fp8_unit_bytes,
    .encode = fp8_encode,
    .decode = fp8_decode,
    .decode_t64 = fp8_decode_t64,
    .code_layout = fp8_code_layout,
    .codes = fp8_codes,
    .put_codes = fp8_put_codes,
};
