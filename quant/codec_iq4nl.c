/* quant/codec_iq4nl.c: llama.cpp's KV block type iq4_nl (`-ctk iq4_nl`), bit-exact to ggml's
 * quantize_row_iq4_nl_ref (ggml-quants.c: quantize_row_iq4_nl_impl with no importance weights
 * and ntry = -1), which is what llama.cpp's CPU backend writes into an iq4_nl cache, and to
 * dequantize_row_iq4_nl. SCHEMES.md section 8 defines it.
 *
 * A unit is one row of n values (n a multiple of 32): n/32 blocks of 32 consecutive values, back
 * to back, each in ggml's block_iq4_nl layout, 18 bytes, so 4.5 bits a value:
 *   [d: fp16, little-endian, nearest-even][qs: 16 bytes; byte j = code j | code (j+16) << 4]
 * A code indexes the non-linear table KVALUE (ggml's kvalues_iq4nl); x^ = d * KVALUE[code], a
 * product exact in float32 (11 + 8 significant bits).
 *
 * Encoding one block, in float32, in ggml's order of operations:
 *   max   = the first value of largest |x|, with its sign (ggml's `if (ax > amax)`)
 *   amax < 1e-15 (GROUP_MAX_EPS): d = 0, and ggml leaves the codes undefined (it packs an
 *           array it never wrote); here every code is 8 (KVALUE 1), so the block decodes to +0
 *   d0    = max / -127 (max / kvalues[0]);  id = 1 / d0
 *   code  = best_index_int8(id * x): 0 at or below -127, 15 at or above 113, else the nearer of
 *           the two entries around it, a tie going to the upper one (ggml compares
 *           x - lower < upper - x)
 *   w = x*x, k = KVALUE[code];  sumqx = sum of (w*k)*x,  sumq2 = sum of (w*k)*k, in value order
 *   d     = sumqx / sumq2, stored as fp16; the codes are kept (no second pass)
 *
 * Contraction. Every product above is rounded to float before it is added, as SCHEMES.md's
 * float32 definition and ggml's source read in ISO C say: fusing (w*k)*x + sumqx into one fma
 * changes d in its last bits, and its fp16 in about 7 of 100,000 gaussian blocks (in none of
 * the fixture's 8, which therefore cannot tell the two apart). So each product is its own
 * statement, which the C standard never lets a compiler fuse (clang, which fuses within one
 * expression by default, keeps them apart; the standard pragma below tells it so anyway). GCC
 * ignores that pragma (and warns under -Wall, hence the #if), but with -std=c11, as the
 * Makefile builds, its default is -ffp-contract=off; only in a GNU dialect (-std=gnu11) is it
 * -ffp-contract=fast, which fuses across statements, so there the file asks GCC itself.
 * tests/test_codec_iq4nl.c's seeded rows fail when the sums are fused (checked with -std=gnu11
 * and the GCC pragma removed).
 *
 * Undefined corners. ggml has no float-to-integer casts here, so NaN and infinities already
 * follow IEEE arithmetic there; this file gives the same results:
 *   - NaN is skipped when max is picked; its code is 15 (every comparison in best_index_int8 is
 *     false, so the bisection runs to the top), its weight is NaN, so d is NaN and the whole
 *     block decodes to NaN. A NaN in a block whose other values are all below 1e-15 gives d = 0.
 *   - An infinity makes max infinite: id = -0 or +0, finite values get code 8 and the infinity
 *     NaN's code 15; its weight is inf and sumqx / sumq2 is NaN: the block decodes to NaN.
 *   - Finite blocks whose sums overflow (|x| beyond ~1.4e12) or whose d is beyond fp16's range
 *     store d = +-inf or NaN and decode to infinities and NaN, as ggml's would.
 * Decoding reads any bytes: every nibble is a valid code; the fp16 d is whatever it holds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__STRICT_ANSI__)
#pragma GCC optimize("fp-contract=off")
#endif

#define QK 32            /* values per block */
#define BLOCK_BYTES 18   /* fp16 d + 16 bytes of codes */
#define GROUP_MAX_EPS 1e-15f
#define ZERO_BLOCK_CODE 8

/* ggml's kvalues_iq4nl, as floats: ggml converts each int8 entry to float where it uses it. */
static const float KVALUE[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- parsing ---- */

static int iq4nl_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    (void)why, (void)why_len;
    if (strcmp(name, "iq4_nl") != 0) return 0;
    b->bits = 4;
    b->group = QK;
    snprintf(b->name, sizeof b->name, "iq4_nl");
    return 1;
}

static int iq4nl_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n % QK != 0) {
        snprintf(why, why_len, "%s: its blocks of %d values do not divide rows of %d", b->name, QK, n);
        return 0;
    }
    return 1;
}

static size_t iq4nl_unit_bytes(const KvBase *b, int n) {
    (void)b;
    return (size_t)(n / QK) * BLOCK_BYTES;
}

/* ---- encoding one block ---- */

/* ggml's best_index_int8 on the table: the entries around x are found by its bisection's
 * invariant, KVALUE[upper - 1] <= x < KVALUE[upper]; a NaN x satisfies no `x < entry` and ends at
 * upper = 15, as the bisection does. */
static int nearest_code(float x) {
    if (x <= KVALUE[0]) return 0;
    if (x >= KVALUE[15]) return 15;
    int upper = 1;
    while (upper < 15 && !(x < KVALUE[upper])) upper++;
    return x - KVALUE[upper - 1] < KVALUE[upper] - x ? upper - 1 : upper;
}

/* The first value of largest magnitude, with its sign; NaN never compares larger. */
static float signed_absmax(const float *x, float *amax) {
    float max = 0.0f;
    *amax = 0.0f;
    for (int j = 0; j < QK; j++)
        if (fabsf(x[j]) > *amax) {
            *amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* Codes from d0 = max / -127, then the x^2-weighted least-squares d for those codes. Each
 * product is its own statement (see Contraction in the header). */
static float fitted_scale(const float *x, float max, unsigned codes[QK]) {
    float d0 = max / KVALUE[0], id = 1.0f / d0;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < QK; j++) {
        codes[j] = (unsigned)nearest_code(id * x[j]);
        float k = KVALUE[codes[j]], w = x[j] * x[j];
        float wk = w * k;
        float wkx = wk * x[j];
        float wkk = wk * k;
        sumqx += wkx;
        sumq2 += wkk;
    }
    return sumqx / sumq2;
}

static void encode_block(const float *x, unsigned char *blk) {
    unsigned codes[QK];
    float amax, max = signed_absmax(x, &amax), d = 0.0f;
    if (amax < GROUP_MAX_EPS)
        for (int j = 0; j < QK; j++) codes[j] = ZERO_BLOCK_CODE;
    else
        d = fitted_scale(x, max, codes);
    kv_put_u16(blk, f32_to_f16(d));
    for (int j = 0; j < QK / 2; j++) blk[2 + j] = (unsigned char)(codes[j] | codes[j + QK / 2] << 4);
}

static void iq4nl_encode(const KvBase *b, const float *x, int n, void *unit) {
    (void)b;
    for (int i = 0; i < n / QK; i++) encode_block(x + (size_t)i * QK, (unsigned char *)unit + (size_t)i * BLOCK_BYTES);
}

/* ---- decoding ---- */

/* Rows r0 .. r0+count-1 are one run of count * n/32 blocks. Per block the 16 products d * KVALUE
 * are made once and looked up: the same floats as ggml's d * kvalues[code], each exact. */
static void decode_scalar(const unsigned char *blk, size_t nblocks, float *out) {
    for (size_t i = 0; i < nblocks; i++, blk += BLOCK_BYTES, out += QK) {
        float d = f16_to_f32((uint16_t)kv_get_u16(blk)), value[16];
        for (int c = 0; c < 16; c++) value[c] = d * KVALUE[c];
        for (int j = 0; j < QK / 2; j++) {
            out[j] = value[blk[2 + j] & 15];
            out[j + QK / 2] = value[blk[2 + j] >> 4];
        }
    }
}

#if defined(__AVX512F__)
/* The same with the 16 products in one register: the 16 code bytes of a block widened to 32-bit
 * lanes, the low nibbles (values 0-15) and the high nibbles (values 16-31) each one permute
 * through it. The products are the scalar loop's d * KVALUE[c], one multiply each. */
static void decode_avx512(const unsigned char *blk, size_t nblocks, float *out) {
    const __m512 kvalue = _mm512_loadu_ps(KVALUE);
    const __m512i nibble = _mm512_set1_epi32(15);
    for (size_t i = 0; i < nblocks; i++, blk += BLOCK_BYTES, out += QK) {
        __m512 value = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(blk))), kvalue);
        __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_and_si512(bytes, nibble), value));
        _mm512_storeu_ps(out + QK / 2, _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), value));
    }
}
#elif defined(__AVX2__)
/* AVX2 (without AVX-512): the 16 products in two registers of 8, the low nibbles (values 0-15)
 * and the high ones (16-31) 8 at a time, an entry picked from each register by the code's low 3
 * bits and the right one by its bit 3 (moved to the sign for the blend). */
static void decode_avx2(const unsigned char *blk, size_t nblocks, float *out) {
    const __m256 k_low = _mm256_loadu_ps(KVALUE), k_high = _mm256_loadu_ps(KVALUE + 8);
    const __m128i nibble = _mm_set1_epi8(15);
    for (size_t i = 0; i < nblocks; i++, blk += BLOCK_BYTES, out += QK) {
        __m256 d = _mm256_set1_ps(f16_to_f32((uint16_t)kv_get_u16(blk)));
        __m256 low = _mm256_mul_ps(d, k_low), high = _mm256_mul_ps(d, k_high);
        __m128i bytes = _mm_loadu_si128((const __m128i *)(blk + 2));
        __m128i codes[2] = {_mm_and_si128(bytes, nibble), _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble)};
        for (int h = 0; h < 4; h++) {   /* values 8h .. 8h+7 */
            __m256i c = _mm256_cvtepu8_epi32(h % 2 ? _mm_srli_si128(codes[h / 2], 8) : codes[h / 2]);
            __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(low, c), _mm256_permutevar8x32_ps(high, c),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
            _mm256_storeu_ps(out + 8 * h, v);
        }
    }
}
#endif

static void iq4nl_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    const unsigned char *blk = (const unsigned char *)units + (size_t)r0 * iq4nl_unit_bytes(b, n);
    size_t nblocks = (size_t)count * (size_t)(n / QK);
#if defined(__AVX512F__)
    decode_avx512(blk, nblocks, out);
    return;
#elif defined(__AVX2__)
    decode_avx2(blk, nblocks, out);
    return;
#endif
    decode_scalar(blk, nblocks, out);
}

#if defined(__AVX512F__)
/* Straight into attention's transposed key block, kt[i * 64 + p] = value i of row p: per 16 rows
 * and block, one gather brings the 16 rows' d (the block's first 4 bytes), and four gathers
 * their 16 code bytes, 4 at a time; each nibble becomes a row of kt with a permute through
 * KVALUE and a multiply by d, the scalar loop's d * KVALUE[c]. Lanes past count read nothing
 * and are zeroed by the mask. */
static void iq4nl_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    size_t rb = iq4nl_unit_bytes(b, n);
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * rb;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)rb));
    const __m512i nibble = _mm512_set1_epi32(15);
    const __m512 kvalue = _mm512_loadu_ps(KVALUE);
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0;
        __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * rb;
        for (int k = 0; k < n / QK; k++) {
            const unsigned char *blk = base + (size_t)k * BLOCK_BYTES;
            float *out = kt + (size_t)k * QK * 64 + p0;
            __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, blk, 1);
            __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(word));   /* the low 16 bits */
            for (int q = 0; q < 4; q++) {
                __m512i codes = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, blk + 2 + 4 * q, 1);
                for (int j = 4 * q; j < 4 * q + 4; j++, codes = _mm512_srli_epi32(codes, 8)) {
                    __m512i lo = _mm512_and_si512(codes, nibble), hi = _mm512_and_si512(_mm512_srli_epi32(codes, 4), nibble);
                    _mm512_storeu_ps(out + (size_t)j * 64, _mm512_maskz_mul_ps(live, d, _mm512_permutexvar_ps(lo, kvalue)));
                    _mm512_storeu_ps(out + (size_t)(j + QK / 2) * 64,
                                     _mm512_maskz_mul_ps(live, d, _mm512_permutexvar_ps(hi, kvalue)));
                }
            }
        }
    }
}
#define IQ4NL_DECODE_T64 iq4nl_decode_t64
#else
#define IQ4NL_DECODE_T64 NULL   /* the caller decodes and transposes */
#endif

/* SCHEMES.md §9: a slot is a channel, the code a KVALUE index; params are each block's fp16 d. */
static void iq4nl_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    (void)b;
    *slots = n;
    *symbols = 16;
    *param_bits = (n / QK) * 16;
}

static void iq4nl_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    (void)b;
    const unsigned char *blk = unit;
    for (int k = 0; k < n / QK; k++, blk += BLOCK_BYTES, codes += QK)
        for (int j = 0; j < QK / 2; j++) codes[j] = blk[2 + j] & 15, codes[j + QK / 2] = blk[2 + j] >> 4;
}

static void iq4nl_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    (void)b;
    unsigned char *blk = unit;
    for (int k = 0; k < n / QK; k++, blk += BLOCK_BYTES, codes += QK)
        for (int j = 0; j < QK / 2; j++) blk[2 + j] = (unsigned char)((codes[j] & 15u) | (codes[j + QK / 2] & 15u) << 4);
}

const KvCodec kv_codec_iq4nl = {
    .syntax = "iq4_nl",
    .summary = "llama.cpp's iq4_nl KV block type: blocks of 32, an fp16 scale, 4-bit codes of a non-linear table",
    .examples = "iq4_nl",
    .parse = iq4nl_parse,
    .check = iq4nl_check,
    .unit_bytes = iq4nl_unit_bytes,
    .encode = iq4nl_encode,
    .decode = iq4nl_decode,
    .decode_t64 = IQ4NL_DECODE_T64,
    .code_layout = iq4nl_code_layout,
    .codes = iq4nl_codes,
    .put_codes = iq4nl_put_codes,
    .llama_key_order = 1,   /* a llama.cpp cache type: keys in llama.cpp's channel order */
};
