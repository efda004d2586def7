/* quant/codec_int.c: uniform integer groups, intB-gG[-asym] and intB-tG[-asym], B = 2, 3, 4, 8.
 *
 * A group is G values: along the row (intB-gG: G consecutive channels of one position), or
 * along the positions (intB-tG, KIVI's keys: one channel across G consecutive positions).
 * Per group, all in float32, fp16() = nearest-even half, rint = ties to even:
 *   sym:  scale = fp16(max|x| / (2^(B-1)-1)); q = clamp(rint(x/scale), -2^(B-1), 2^(B-1)-1); x^ = q*scale
 *   asym: lo = fp16(min x); scale = fp16((max-min) / (2^B-1)); q = clamp(rint((x-lo)/scale), 0, 2^B-1);
 *         x^ = q*scale + lo
 * x/scale divides by the fp16-rounded scale; a group whose scale is 0 gets codes 0 (x^ = 0,
 * or lo). q*scale is rounded before + lo (two statements: no fused multiply-add).
 * NaN and infinities: min, max and max|x| skip NaN values, a NaN gets the lowest code
 * (-2^(B-1) or 0), and an infinite value makes its group's scale infinite (its values then
 * decode to infinities and NaN): defined, never a crash.
 *
 * Layout. Codes are stored unsigned (sym q + 2^(B-1), asym q); code i of a stream occupies bits
 * [i*B, i*B+B), stream bit k being bit k%8 of byte k/8, so every 8 codes are exactly B bytes.
 *   gG row (n values):    [codes of the n values][n/G groups: fp16 scale (, fp16 lo)]
 *   tG unit (G rows of n): [channel 0's G codes][channel 1's] ... [n channels: fp16 scale (, fp16 lo)]
 * Parameters are little-endian. So int4-g64 takes 4 + 16/64 = 4.25 bits a value, int2-t32-asym
 * 2 + 32/32 = 3. Aliases: "intB" and "intB-asym" mean G = 64 along the row, and "-sym" may
 * follow a symmetric name ("int4-g64-sym", as the reference metrics files write it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define MAX_GROUP 4096

/* ---- parsing ---- */

static int int_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "int", &p) || *p < '0' || *p > '9') return 0;
    int bits, group = 64;
    KvAxis axis = KV_AXIS_CHANNELS;
    if (kv_parse_number(&p, 0, 99, &bits) || (bits != 2 && bits != 3 && bits != 4 && bits != 8)) {
        snprintf(why, why_len, "%.40s: bits must be 2, 3, 4 or 8", name);
        return -1;
    }
    if (*p == '-' && (p[1] == 'g' || p[1] == 't')) {
        axis = p[1] == 't' ? KV_AXIS_TOKENS : KV_AXIS_CHANNELS;
        p += 2;
        if (kv_parse_number(&p, 1, MAX_GROUP, &group) || group % 8 != 0) {
            snprintf(why, why_len, "%.40s: the group must be a multiple of 8 from 8 to %d", name, MAX_GROUP);
            return -1;
        }
    }
    int asym = 0;
    if (!strcmp(p, "-asym")) asym = 1;
    else if (*p && strcmp(p, "-sym")) {
        snprintf(why, why_len, "%.40s: expected intB-gG, intB-tG, optionally -asym", name);
        return -1;
    }
    b->bits = bits;
    b->group = group;
    b->variant = asym;   /* is_asym */
    b->axis = axis;
    b->rows = axis == KV_AXIS_TOKENS ? group : 1;
    snprintf(b->name, sizeof b->name, "int%d-%c%d%s", bits, axis == KV_AXIS_TOKENS ? 't' : 'g', group,
             asym ? "-asym" : "");
    return 1;
}

static int int_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (b->axis == KV_AXIS_CHANNELS && n % b->group != 0) {
        snprintf(why, why_len, "%s: group %d does not divide rows of %d", b->name, b->group, n);
        return 0;
    }
    return 1;
}

/* "-asym": a minimum beside the scale (KvBase.variant, this codec's own parameter). */
static int is_asym(const KvBase *b) { return b->variant; }

static int n_params(const KvBase *b) { return is_asym(b) ? 2 : 1; }

static size_t code_bytes(const KvBase *b, int n) { return (size_t)n * (size_t)b->rows * (size_t)b->bits / 8; }

static size_t int_unit_bytes(const KvBase *b, int n) {
    size_t groups = b->axis == KV_AXIS_TOKENS ? (size_t)n : (size_t)(n / b->group);
    return code_bytes(b, n) + groups * (size_t)n_params(b) * 2;
}

/* ---- the arithmetic of one group ---- */

typedef struct {
    float scale, lo;   /* lo = 0 for symmetric groups */
    int32_t zero;      /* subtracted from stored codes: 2^(B-1) sym, 0 asym */
} GroupParams;

/* Chooses a group's parameters from its count values x[0], x[stride], ... and stores them at p. */
static GroupParams choose_params(const KvBase *b, const float *x, size_t stride, int count, unsigned char *p) {
    GroupParams gp = {0.0f, 0.0f, 0};
    float mn = x[0], mx = x[0], amax = 0.0f;
    /* fminf/fmaxf written as comparisons (each is a library call without -ffinite-math-only),
     * with the same result: a NaN is skipped, also when it is the first value */
    for (int i = 0; i < count; i++) {
        float v = x[(size_t)i * stride];
        if (v < mn || mn != mn) mn = v;
        if (v > mx || mx != mx) mx = v;
        if (fabsf(v) > amax) amax = fabsf(v);
    }
    if (!is_asym(b)) {
        uint16_t scale = f32_to_f16(amax / (float)((1 << (b->bits - 1)) - 1));
        kv_put_u16(p, scale);
        gp.scale = f16_to_f32(scale);
        gp.zero = 1 << (b->bits - 1);
    } else {
        uint16_t lo = f32_to_f16(mn), scale = f32_to_f16((mx - mn) / (float)((1 << b->bits) - 1));
        kv_put_u16(p, scale);
        kv_put_u16(p + 2, lo);
        gp.scale = f16_to_f32(scale);
        gp.lo = f16_to_f32(lo);
    }
    return gp;
}

static GroupParams read_params(const KvBase *b, const unsigned char *p) {
    GroupParams gp;
    gp.scale = f16_to_f32((uint16_t)kv_get_u16(p));
    gp.lo = is_asym(b) ? f16_to_f32((uint16_t)kv_get_u16(p + 2)) : 0.0f;
    gp.zero = is_asym(b) ? 0 : (int32_t)1 << (b->bits - 1);
    return gp;
}

/* One value's stored (unsigned) code, clamped to the code range; NaN goes to the lowest code. */
static uint32_t code_of(const KvBase *b, float x, GroupParams gp) {
    if (gp.scale == 0.0f) return (uint32_t)gp.zero;   /* code 0 */
    int32_t qmin = is_asym(b) ? 0 : -(1 << (b->bits - 1));
    int32_t qmax = is_asym(b) ? (1 << b->bits) - 1 : (1 << (b->bits - 1)) - 1;
    float q = rintf((x - gp.lo) / gp.scale);
    if (!(q >= (float)qmin)) q = (float)qmin;   /* also NaN */
    if (q > (float)qmax) q = (float)qmax;
    return (uint32_t)((int32_t)q + gp.zero);
}

/* q*scale + lo as two statements: C may contract a*b+c into one fma only within an
 * expression, and the definition rounds the product first. */
static inline float dequant_value(int32_t q, GroupParams gp) {
    float v = (float)q * gp.scale;
    return v + gp.lo;
}

/* Eight codes of `bits` bits <-> `bits` bytes, the first code in the lowest bits. */
static inline void pack8(const uint32_t c[8], int bits, unsigned char *p) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w |= (uint64_t)c[k] << (k * bits);
    for (int i = 0; i < bits; i++) p[i] = (unsigned char)(w >> (8 * i));
}

static inline void unpack8(const unsigned char *p, int bits, int32_t zero, int32_t c[8]) {
    uint64_t w = 0;
    for (int i = 0; i < bits; i++) w |= (uint64_t)p[i] << (8 * i);
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    for (int k = 0; k < 8; k++) c[k] = (int32_t)((w >> (k * bits)) & mask) - zero;
}

/* Codes of count values x[0], x[stride], ... (count a multiple of 8) into a code stream. */
static void encode_codes(const KvBase *b, const float *x, size_t stride, int count, GroupParams gp,
                         unsigned char *codes) {
    for (int j = 0; j < count; j += 8) {
        uint32_t c[8];
        for (int k = 0; k < 8; k++) c[k] = code_of(b, x[(size_t)(j + k) * stride], gp);
        pack8(c, b->bits, codes + (size_t)j / 8 * (size_t)b->bits);
    }
}

/* Values j0 .. j1-1 of a code stream, dequantized into out[0], out[stride], ... The width is a
 * parameter so that each caller's copy (constant bits after inlining) has constant shifts. */
static inline void decode_codes(const unsigned char *codes, int bits, GroupParams gp, int j0, int j1, float *out,
                                size_t stride) {
    if ((j0 & 7) == 0 && (j1 & 7) == 0) {   /* whole runs of 8: no per-value range test */
        for (int j = j0; j < j1; j += 8) {
            int32_t c[8];
            unpack8(codes + (size_t)j / 8 * (size_t)bits, bits, gp.zero, c);
            for (int k = 0; k < 8; k++) out[(size_t)(j + k - j0) * stride] = dequant_value(c[k], gp);
        }
        return;
    }
    for (int j = j0 & ~7; j < j1; j += 8) {
        int32_t c[8];
        unpack8(codes + (size_t)j / 8 * (size_t)bits, bits, gp.zero, c);
        for (int k = 0; k < 8; k++)
            if (j + k >= j0 && j + k < j1) out[(size_t)(j + k - j0) * stride] = dequant_value(c[k], gp);
    }
}

/* ---- channel axis (intB-gG): a unit is one row ---- */

static void row_encode(const KvBase *b, const float *x, int n, unsigned char *row) {
    size_t gs = (size_t)b->group;
    unsigned char *params = row + code_bytes(b, n);
    for (size_t g = 0; g < (size_t)n / gs; g++) {
        GroupParams gp = choose_params(b, x + g * gs, 1, (int)gs, params + g * (size_t)n_params(b) * 2);
        encode_codes(b, x + g * gs, 1, (int)gs, gp, row + g * gs / 8 * (size_t)b->bits);
    }
}

static inline void row_decode_bits(const KvBase *b, const unsigned char *row, int n, float *out, int bits) {
    size_t gs = (size_t)b->group;
    const unsigned char *params = row + (size_t)n * (size_t)bits / 8;
    for (size_t g = 0; g < (size_t)n / gs; g++) {
        GroupParams gp = read_params(b, params + g * (size_t)n_params(b) * 2);
        decode_codes(row + g * gs / 8 * (size_t)bits, bits, gp, 0, (int)gs, out + g * gs, 1);
    }
}

#if defined(__AVX512F__)
/* 4-bit rows with groups of 32k: 16 code bytes -> low nibbles (even values) and high nibbles
 * (odd values) in two registers, interleaved back by two permutes. c*scale is exact (4-bit
 * code, 11-bit scale), so one fma rounds as dequant_value does: the same values. */
static void row_decode4_avx512(const KvBase *b, const unsigned char *row, int n, float *out) {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i nibble = _mm512_set1_epi32(15);
    for (int d0 = 0; d0 < n; d0 += 32) {
        const unsigned char *par = row + n / 2 + (size_t)(d0 / b->group) * (is_asym(b) ? 4 : 2);
        __m512 scale = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(par)));
        __m512 bias = is_asym(b) ? _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(par + 2)))
                              : _mm512_mul_ps(scale, _mm512_set1_ps(-8.0f));
        __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + d0 / 2)));
        __m512 even = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(bytes, nibble)), scale, bias);
        __m512 odd = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4)), scale, bias);
        _mm512_storeu_ps(out + d0, _mm512_permutex2var_ps(even, first, odd));
        _mm512_storeu_ps(out + d0 + 16, _mm512_permutex2var_ps(even, second, odd));
    }
}
#endif

#if defined(__AVX512F__)
/* 16 two-bit codes (4 bytes, the first in the lowest bits) dequantized: code * scale + bias,
 * bias = lo (asym) or -2 * scale (sym). A 2-bit code times an fp16 scale is exact, so one fma
 * rounds once, as dequant_value's two statements do: the same values. */
static inline __m512 decode16_2bit(const unsigned char *p, __m512 scale, __m512 bias) {
    const __m512i shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    uint32_t w;
    memcpy(&w, p, sizeof w);
    __m512i c = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)w), shifts), _mm512_set1_epi32(3));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), scale, bias);
}

/* A group's scale and bias (see decode16_2bit) as vectors. */
static inline void params_2bit(const KvBase *b, const unsigned char *par, __m512 *scale, __m512 *bias) {
    *scale = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(par)));
    *bias = is_asym(b) ? _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(par + 2)))
                    : _mm512_mul_ps(*scale, _mm512_set1_ps(-2.0f));
}

/* 2-bit rows with groups of 16k: 16 values per 4 code bytes. */
static void row_decode2_avx512(const KvBase *b, const unsigned char *row, int n, float *out) {
    for (int d0 = 0; d0 < n; d0 += 16) {
        __m512 scale, bias;
        params_2bit(b, row + n / 4 + (size_t)(d0 / b->group) * (is_asym(b) ? 4 : 2), &scale, &bias);
        _mm512_storeu_ps(out + d0, decode16_2bit(row + d0 / 4, scale, bias));
    }
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
/* AVX2 (without AVX-512): 8 codes at a time, dequantized as dequant_value does, in its two
 * statements (q*scale rounded, then + lo): the same values bit for bit, non-finite scales too. */
static inline void store8_dequant(__m256i codes, GroupParams gp, float *out) {
    __m256 q = _mm256_cvtepi32_ps(_mm256_sub_epi32(codes, _mm256_set1_epi32(gp.zero)));
    __m256 v = _mm256_mul_ps(q, _mm256_set1_ps(gp.scale));
    _mm256_storeu_ps(out, _mm256_add_ps(v, _mm256_set1_ps(gp.lo)));
}

/* 4-bit rows with groups of 32k: 16 code bytes split into low nibbles (even values) and high
 * nibbles (odd values), interleaved back byte by byte, then 8 at a time to 32 bits. */
static void row_decode4_avx2(const KvBase *b, const unsigned char *row, int n, float *out) {
    const __m128i nibble = _mm_set1_epi8(15);
    for (int d0 = 0; d0 < n; d0 += 32) {
        GroupParams gp = read_params(b, row + n / 2 + (size_t)(d0 / b->group) * (size_t)n_params(b) * 2);
        __m128i bytes = _mm_loadu_si128((const __m128i *)(row + d0 / 2));
        __m128i even = _mm_and_si128(bytes, nibble), odd = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
        __m128i first = _mm_unpacklo_epi8(even, odd), second = _mm_unpackhi_epi8(even, odd);   /* values 0-15, 16-31 */
        store8_dequant(_mm256_cvtepu8_epi32(first), gp, out + d0);
        store8_dequant(_mm256_cvtepu8_epi32(_mm_srli_si128(first, 8)), gp, out + d0 + 8);
        store8_dequant(_mm256_cvtepu8_epi32(second), gp, out + d0 + 16);
        store8_dequant(_mm256_cvtepu8_epi32(_mm_srli_si128(second, 8)), gp, out + d0 + 24);
    }
}

/* 2-bit rows with groups of 16k: each 8 values are 2 code bytes, shifted apart per lane. */
static void row_decode2_avx2(const KvBase *b, const unsigned char *row, int n, float *out) {
    const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), three = _mm256_set1_epi32(3);
    for (int d0 = 0; d0 < n; d0 += 16) {
        GroupParams gp = read_params(b, row + n / 4 + (size_t)(d0 / b->group) * (size_t)n_params(b) * 2);
        for (int h = 0; h < 2; h++) {
            int pair = row[d0 / 4 + 2 * h] | row[d0 / 4 + 2 * h + 1] << 8;
            __m256i c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(pair), shifts), three);
            store8_dequant(c, gp, out + d0 + 8 * h);
        }
    }
}
#endif

static void row_decode(const KvBase *b, const unsigned char *row, int n, float *out) {
    switch (b->bits) {   /* one copy per width: constant shifts */
    case 2:
#if defined(__AVX512F__)
        if (n % 16 == 0 && b->group % 16 == 0) { row_decode2_avx512(b, row, n, out); break; }
#elif defined(__AVX2__)
        if (n % 16 == 0 && b->group % 16 == 0) { row_decode2_avx2(b, row, n, out); break; }
#endif
        row_decode_bits(b, row, n, out, 2);
        break;
    case 3: row_decode_bits(b, row, n, out, 3); break;
    case 4:
#if defined(__AVX512F__)
        if (n % 32 == 0 && b->group % 32 == 0) { row_decode4_avx512(b, row, n, out); break; }
#elif defined(__AVX2__)
        if (n % 32 == 0 && b->group % 32 == 0) { row_decode4_avx2(b, row, n, out); break; }
#endif
        row_decode_bits(b, row, n, out, 4);
        break;
    default: row_decode_bits(b, row, n, out, 8); break;
    }
}

#if defined(__AVX512F__)
/* 4-bit rows straight into attention's transposed key block: per 16 rows and 4 code bytes, one
 * gather brings 8 values of 16 positions, and each nibble becomes a row of kt with a shift, a
 * mask, a convert and an fma. Lanes past count read nothing and come out 0. */
static void rows4_transposed_avx512(const KvBase *b, const unsigned char *rows, size_t row_bytes, int n, int count,
                                    float *kt) {
    __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32((int)row_bytes));
    __m512i nibble = _mm512_set1_epi32(15);
    int gs = b->group, pbytes = is_asym(b) ? 4 : 2;
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0;
        __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * row_bytes;
        for (int g = 0; g < n / gs; g++) {
            /* the group's parameters for 16 rows in one gather of the 32-bit word holding them; a
             * symmetric scale is a row's last 2 bytes, so its word starts 2 bytes early */
            const unsigned char *par = base + n / 2 + (size_t)g * (size_t)pbytes;
            __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, is_asym(b) ? par : par - 2, 1);
            __m512i lo16 = is_asym(b) ? word : _mm512_srli_epi32(word, 16);
            __m512 scale = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(lo16));
            __m512 bias = is_asym(b) ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(word, 16)))
                                  : _mm512_mul_ps(scale, _mm512_set1_ps(-8.0f));
            for (int j = g * gs / 8; j < (g + 1) * gs / 8; j++) {
                __m512i codes = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + 4 * j, 1);
                for (int k = 0; k < 8; k++) {
                    __m512i c = _mm512_and_si512(_mm512_srli_epi32(codes, 4 * k), nibble);
                    _mm512_storeu_ps(kt + (size_t)(8 * j + k) * 64 + p0, _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), scale, bias));
                }
            }
        }
    }
}
#endif

/* ---- token axis (intB-tG): a unit is G rows, each channel a group along them ---- */

static size_t channel_code_bytes(const KvBase *b) { return (size_t)b->group * (size_t)b->bits / 8; }

static void tokens_encode(const KvBase *b, const float *x, int n, unsigned char *unit) {
    unsigned char *params = unit + code_bytes(b, n);
    for (int c = 0; c < n; c++) {
        GroupParams gp = choose_params(b, x + c, (size_t)n, b->group, params + (size_t)c * n_params(b) * 2);
        encode_codes(b, x + c, (size_t)n, b->group, gp, unit + (size_t)c * channel_code_bytes(b));
    }
}

/* Rows r0 .. r0+count-1 of a run of token units: value c of row r lands at out[(r - r0) * row_stride
 * + c * channel_stride], so the same loop writes row-major rows or a transposed block. */
static inline void tokens_decode_bits(const KvBase *b, const unsigned char *units, int n, int r0, int count,
                                      float *out, size_t row_stride, size_t channel_stride, int bits) {
    size_t ub = int_unit_bytes(b, n);
    int G = b->group;
    for (int r = r0; r < r0 + count;) {
        int u = r / G, j0 = r % G, j1 = G < j0 + (r0 + count - r) ? G : j0 + (r0 + count - r);
        const unsigned char *unit = units + (size_t)u * ub, *params = unit + (size_t)n * (size_t)G * (size_t)bits / 8;
        for (int c = 0; c < n; c++) {
            GroupParams gp = read_params(b, params + (size_t)c * n_params(b) * 2);
            decode_codes(unit + (size_t)c * G * bits / 8, bits, gp, j0, j1, out + (size_t)(r - r0) * row_stride +
                         (size_t)c * channel_stride, row_stride);
        }
        r += j1 - j0;
    }
}

#if defined(__AVX512F__)
/* tokens_decode_bits for 2 bits into a transposed block (positions contiguous per channel),
 * when the rows wanted start and end on 16-row boundaries of the groups: 16 positions of a
 * channel per 4 code bytes. */
static void tokens_decode2_t64_avx512(const KvBase *b, const unsigned char *units, int n, int r0, int count,
                                      float *kt) {
    size_t ub = int_unit_bytes(b, n);
    int G = b->group;
    for (int r = r0; r < r0 + count; r += 16) {
        const unsigned char *unit = units + (size_t)(r / G) * ub, *params = unit + (size_t)n * (size_t)G / 4;
        int j = r % G;
        for (int c = 0; c < n; c++) {
            __m512 scale, bias;
            params_2bit(b, params + (size_t)c * n_params(b) * 2, &scale, &bias);
            _mm512_storeu_ps(kt + (size_t)c * 64 + (r - r0), decode16_2bit(unit + (size_t)c * G / 4 + j / 4, scale, bias));
        }
    }
}
#endif

static void tokens_decode(const KvBase *b, const unsigned char *units, int n, int r0, int count, float *out,
                          size_t row_stride, size_t channel_stride) {
#if defined(__AVX512F__)
    if (b->bits == 2 && row_stride == 1 && channel_stride == 64 && b->group % 16 == 0 && r0 % 16 == 0 &&
        count % 16 == 0) {
        tokens_decode2_t64_avx512(b, units, n, r0, count, out);
        return;
    }
#endif
    switch (b->bits) {
    case 2: tokens_decode_bits(b, units, n, r0, count, out, row_stride, channel_stride, 2); break;
    case 3: tokens_decode_bits(b, units, n, r0, count, out, row_stride, channel_stride, 3); break;
    case 4: tokens_decode_bits(b, units, n, r0, count, out, row_stride, channel_stride, 4); break;
    default: tokens_decode_bits(b, units, n, r0, count, out, row_stride, channel_stride, 8); break;
    }
}

/* ---- the codec's functions ---- */

static void int_encode(const KvBase *b, const float *x, int n, void *unit) {
    if (b->axis == KV_AXIS_TOKENS) tokens_encode(b, x, n, unit);
    else row_encode(b, x, n, unit);
}

static void int_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    if (b->axis == KV_AXIS_TOKENS) {
        tokens_decode(b, units, n, r0, count, out, (size_t)n, 1);
        return;
    }
    size_t rb = int_unit_bytes(b, n);
    for (int r = 0; r < count; r++) row_decode(b, (const unsigned char *)units + (size_t)(r0 + r) * rb, n, out + (size_t)r * n);
}

/* A token-axis unit keeps each channel's codes along the positions, kt's order, so it is
 * decoded straight into kt; so are 4-bit rows with AVX-512. Other channel-axis rows are
 * decoded one at a time into a column of kt each (the transpose attention would do). */
static void int_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    if (b->axis == KV_AXIS_TOKENS) {
        tokens_decode(b, units, n, r0, count, kt, 1, 64);
        for (int c = 0; c < n; c++) memset(kt + (size_t)c * 64 + count, 0, (size_t)(64 - count) * sizeof(float));
        return;
    }
    size_t rb = int_unit_bytes(b, n);
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * rb;
#if defined(__AVX512F__)
    if (b->bits == 4 && n % 32 == 0 && b->group % 32 == 0) {
        rows4_transposed_avx512(b, rows, rb, n, count, kt);
        return;
    }
#endif
    float row[KV_MAX_HEAD_DIM];
    for (int p = 0; p < count; p++) {
        row_decode(b, rows + (size_t)p * rb, n, row);
        for (int i = 0; i < n; i++) kt[(size_t)i * 64 + p] = row[i];
    }
    for (int i = 0; i < n; i++) memset(kt + (size_t)i * 64 + count, 0, (size_t)(64 - count) * sizeof(float));
}

/* SCHEMES.md §9: a slot is a channel; params are the fp16 scale (and minimum) of each group. The
 * stream of a unit is row-major for gG, channel-major (G codes a channel) for tG. */
static void int_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    size_t groups = b->axis == KV_AXIS_TOKENS ? (size_t)n : (size_t)(n / b->group);
    *slots = n;
    *symbols = 1 << b->bits;
    *param_bits = (int)(groups * (size_t)n_params(b) * 16);
}

static void int_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    if (b->axis == KV_AXIS_CHANNELS) {
        kv_unpack_codes(unit, b->bits, n, codes);
        return;
    }
    unsigned short channel[MAX_GROUP];
    for (int c = 0; c < n; c++) {
        kv_unpack_codes((const unsigned char *)unit + (size_t)c * channel_code_bytes(b), b->bits, b->group, channel);
        for (int r = 0; r < b->group; r++) codes[(size_t)r * n + c] = channel[r];
    }
}

static void int_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    if (b->axis == KV_AXIS_CHANNELS) {
        kv_pack_codes(codes, b->bits, n, unit);
        return;
    }
    unsigned short channel[MAX_GROUP];
    for (int c = 0; c < n; c++) {
        for (int r = 0; r < b->group; r++) channel[r] = codes[(size_t)r * n + c];
        kv_pack_codes(channel, b->bits, b->group, (unsigned char *)unit + (size_t)c * channel_code_bytes(b));
    }
}

const KvCodec kv_codec_int = {
    .syntax = "intB-gG[-asym], intB-tG[-asym]",
    .summary = "B = 2, 3, 4, 8 bit integers, an fp16 scale (and minimum) per group of G: gG along the row, tG along positions",
    .examples = "int8-g64 int4-g64 int4-g32-asym int3-g64 int2-g64 int2-t32-asym int4-t32-asym",
    .parse = int_parse,
    .check = int_check,
    .unit_bytes = int_unit_bytes,
    .encode = int_encode,
    .decode = int_decode,
    .decode_t64 = int_decode_t64,
    .code_layout = int_code_layout,
    .codes = int_codes,
    .put_codes = int_put_codes,
};
