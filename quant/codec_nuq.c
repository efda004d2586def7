/* quant/codec_nuq.c: nuqB-gG and nuqB-tG, KVQuant's non-uniform datatype (without its Fisher
 * weights): B-bit codes into a table T of 2^B values fitted to the model (SCHEMES.md §8), an fp16
 * absmax per group. B = 2, 3, 4; G a multiple of 8 from 8 to 4096.
 *
 * A group is G values: along the row (gG: G consecutive channels of one position, as nf4-gG), or
 * along the positions (tG: one channel across G consecutive positions, as intB-tG). Per group,
 * in float32:
 *   s = fp16(max|x|)               over the group's finite values
 *   z = x / s                      division by the stored (fp16-rounded) scale
 *   code = the nearest entry of T  squared distance in float32, ties -> the lower index
 *                                  (lloyd_nearest: the rule the fit assumed), z first clamped
 *                                  to [min T, max T], which keeps the nearest entry
 *   x^ = T[code] * s               one float32 multiply
 * T is one layer's and side's table, shared by its KV heads (KvBase.table, bound by the cache
 * from the calibration; §8 fits it on the z of every group the base forms on the calibration
 * rows). Edge cases (defined, never a crash): s = 0 or a NaN value -> the code of the entry
 * nearest 0 (x^ = 0 when s = 0); a group whose max|x| passes fp16 stores the largest half,
 * 65504, as nf4 does; +-inf, and values so far past 65504 that (z - T[k])^2 overflows, take the
 * largest / smallest entry (the clamp: without it every distance is inf, and the tie rule gave
 * index 0, the most negative entry, to +inf and +1e30 alike); with no table bound (a scheme not
 * yet given its calibration) codes are 0 and rows decode to 0.
 *
 * Layout, as intB's (codes unsigned, code i in bits [i*B, i*B+B) of the stream, every 8 codes
 * exactly B bytes; scales fp16 little-endian):
 *   gG row (n values):     [codes of the n values][n/G fp16 scales]
 *   tG unit (G rows of n): [channel 0's G codes][channel 1's] ... [n fp16 scales, one a channel]
 * So nuq3-g64 takes 3 + 16/64 = 3.25 bits a value, plus one table of 8 floats per layer and side
 * (a codebook is per model, not per position: reported apart). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/aw.h"
#include "quant/lloyd.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define MAX_GROUP 4096
#define F16_MAX 0x7bffu

/* ---- parsing ---- */

static int nuq_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "nuq", &p)) return 0;
    int bits, group;
    if (kv_parse_number(&p, 2, 4, &bits) || *p != '-' || (p[1] != 'g' && p[1] != 't')) {
        snprintf(why, why_len, "%.40s: expected nuqB-gG or nuqB-tG with B = 2, 3 or 4", name);
        return -1;
    }
    KvAxis axis = p[1] == 't' ? KV_AXIS_TOKENS : KV_AXIS_CHANNELS;
    p += 2;
    if (kv_parse_number(&p, 1, MAX_GROUP, &group) || group % 8 != 0 || *p) {
        snprintf(why, why_len, "%.40s: the group must be a multiple of 8 from 8 to %d", name, MAX_GROUP);
        return -1;
    }
    b->bits = bits;
    b->group = group;
    b->axis = axis;
    b->rows = axis == KV_AXIS_TOKENS ? group : 1;
    snprintf(b->name, sizeof b->name, "nuq%d-%c%d", bits, axis == KV_AXIS_TOKENS ? 't' : 'g', group);
    return 1;
}

static int nuq_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (b->axis == KV_AXIS_CHANNELS && n % b->group != 0) {
        snprintf(why, why_len, "%s: group %d does not divide rows of %d", b->name, b->group, n);
        return 0;
    }
    return 1;
}

static int entries(const KvBase *b) { return 1 << b->bits; }

static size_t code_bytes(const KvBase *b, int n) { return (size_t)n * (size_t)b->rows * (size_t)b->bits / 8; }

static size_t groups_of(const KvBase *b, int n) {
    return b->axis == KV_AXIS_TOKENS ? (size_t)n : (size_t)(n / b->group);
}

static size_t nuq_unit_bytes(const KvBase *b, int n) { return code_bytes(b, n) + 2 * groups_of(b, n); }

/* ---- one group ---- */

/* fp16 of the largest finite |x| of count values x[0], x[stride], ...; 65504 past fp16's range. */
static uint16_t group_scale(const float *x, size_t stride, int count) {
    float amax = 0.0f;
    for (int i = 0; i < count; i++) {
        float a = fabsf(x[(size_t)i * stride]);
        if (a <= 3.40282347e38f && a > amax) amax = a;   /* finite values only */
    }
    uint16_t h = f32_to_f16(amax);
    return h == 0x7c00u ? F16_MAX : h;
}

/* The table's smallest and largest entries. */
typedef struct {
    float lo, hi;
} Range;

static Range table_range(const float *table, int k) {
    Range r = {table[0], table[0]};
    for (int i = 1; i < k; i++) {
        if (table[i] < r.lo) r.lo = table[i];
        if (table[i] > r.hi) r.hi = table[i];
    }
    return r;
}

/* The code of z against the table (or 0 without one); NaN and s = 0 take zero_code. z past an
 * end of the table is moved onto it: the nearest entry is the same, and a z whose distances
 * would all overflow to inf (+-inf, or |z| > ~1.8e19 under the 65504 scale) finds it. */
static unsigned code_of(const float *table, int k, Range range, float z, unsigned zero_code) {
    if (!table || z != z) return zero_code;
    if (z < range.lo) z = range.lo;
    if (z > range.hi) z = range.hi;
    return (unsigned)lloyd_nearest(&z, 1, table, k);
}

static unsigned zero_code_of(const KvBase *b) {
    const float zero = 0.0f;
    return b->table ? (unsigned)lloyd_nearest(&zero, 1, b->table, entries(b)) : 0u;
}

static void pack8(const unsigned c[8], int bits, unsigned char *p) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w |= (uint64_t)c[k] << (k * bits);
    for (int i = 0; i < bits; i++) p[i] = (unsigned char)(w >> (8 * i));
}

static void unpack8(const unsigned char *p, int bits, unsigned c[8]) {
    uint64_t w = 0;
    for (int i = 0; i < bits; i++) w |= (uint64_t)p[i] << (8 * i);
    for (int k = 0; k < 8; k++) c[k] = (unsigned)(w >> (k * bits)) & ((1u << bits) - 1u);
}

/* Quantizes count values x[0], x[stride], ... (count a multiple of 8) into a code stream, their
 * scale into *scale_at. */
static void encode_group(const KvBase *b, const float *x, size_t stride, int count, unsigned char *codes,
                         unsigned char *scale_at) {
    uint16_t h = group_scale(x, stride, count);
    kv_put_u16(scale_at, h);
    float s = f16_to_f32(h);
    unsigned zero = zero_code_of(b);
    Range range = b->table ? table_range(b->table, entries(b)) : (Range){0.0f, 0.0f};
    for (int j = 0; j < count; j += 8) {
        unsigned c[8];
        for (int k = 0; k < 8; k++)
            c[k] = s != 0.0f ? code_of(b->table, entries(b), range, x[(size_t)(j + k) * stride] / s, zero) : zero;
        pack8(c, b->bits, codes + (size_t)j / 8 * (size_t)b->bits);
    }
}

/* Values j0 .. j1-1 of a group's code stream into out[0], out[stride], ... */
static void decode_group(const KvBase *b, const unsigned char *codes, float s, int j0, int j1, float *out,
                         size_t stride) {
    for (int j = j0 & ~7; j < j1; j += 8) {
        unsigned c[8];
        unpack8(codes + (size_t)j / 8 * (size_t)b->bits, b->bits, c);
        for (int k = 0; k < 8; k++)
            if (j + k >= j0 && j + k < j1) out[(size_t)(j + k - j0) * stride] = b->table ? b->table[c[k]] * s : 0.0f;
    }
}

/* ---- the codec's functions ---- */

static void nuq_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *codes = unit, *scales = codes + code_bytes(b, n);
    if (b->axis == KV_AXIS_TOKENS) {   /* channel c of G rows: a group along the positions */
        for (int c = 0; c < n; c++)
            encode_group(b, x + c, (size_t)n, b->group, codes + (size_t)c * b->group * b->bits / 8, scales + 2 * c);
        return;
    }
    int G = b->group;
    for (int g = 0; g < n / G; g++)
        encode_group(b, x + (size_t)g * G, 1, G, codes + (size_t)g * G * b->bits / 8, scales + 2 * g);
}

static float scale_at(const unsigned char *scales, int i) { return f16_to_f32((uint16_t)kv_get_u16(scales + 2 * i)); }

/* Rows r0 .. r0+count-1 of a run of token units: value c of row r lands at out[(r - r0) *
 * row_stride + c * channel_stride], so the same loop writes row-major rows or a transposed block
 * (a channel's codes run along the positions). */
static void tokens_decode(const KvBase *b, const unsigned char *units, int n, int r0, int count, float *out,
                          size_t row_stride, size_t channel_stride) {
    size_t ub = nuq_unit_bytes(b, n);
    int G = b->group;
    for (int r = r0; r < r0 + count;) {
        int j0 = r % G, j1 = G < j0 + (r0 + count - r) ? G : j0 + (r0 + count - r);
        const unsigned char *unit = units + (size_t)(r / G) * ub;
        const unsigned char *scales = unit + code_bytes(b, n);
        for (int c = 0; c < n; c++)
            decode_group(b, unit + (size_t)c * G * b->bits / 8, scale_at(scales, c), j0, j1,
                         out + (size_t)(r - r0) * row_stride + (size_t)c * channel_stride, row_stride);
        r += j1 - j0;
    }
}

static void row_decode_scalar(const KvBase *b, const unsigned char *row, int n, float *out) {
    const unsigned char *scales = row + code_bytes(b, n);
    int G = b->group;
    for (int g = 0; g < n / G; g++)
        decode_group(b, row + (size_t)g * G * b->bits / 8, scale_at(scales, g), 0, G, out + (size_t)g * G, 1);
}

#if defined(__AVX512F__) || defined(__AVX2__)
/* The table padded to 16 entries (entries past 2^B are never indexed: zeros). */
static void table16(const KvBase *b, float t[16]) {
    memset(t, 0, sizeof(float) * 16);
    memcpy(t, b->table, sizeof(float) * (size_t)entries(b));
}

/* The `bits` bytes of 8 codes (2, 3 or 4) as a little-endian word, in loads of their own size
 * (one wider load of bytes just stored as narrower ones stalls). */
static inline uint32_t word8(const unsigned char *p, int bits) {
    uint32_t w = 0;
    if (bits == 4) {
        memcpy(&w, p, 4);   /* x86: little-endian, the stream's order */
        return w;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return bits == 3 ? (uint32_t)h | (uint32_t)p[2] << 16 : h;
}

#endif

#if defined(__AVX512F__)
/* The table in one register. */
static __m512 table_register(const KvBase *b) {
    float t[16];
    table16(b, t);
    return _mm512_loadu_ps(t);
}

/* The 16 codes of `bits` bits at p (2 * bits bytes) in 32-bit lanes: the first 8 codes' word in
 * lanes 0-7, the next 8's in lanes 8-15, each lane shifted to its code and masked. */
static inline __m512i codes16(const unsigned char *p, int bits) {
    __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)word8(p, bits))),
                                       _mm256_set1_epi32((int)word8(p + bits, bits)), 1);
    __m512i shifts = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7),
                                        _mm512_set1_epi32(bits));
    return _mm512_and_si512(_mm512_srlv_epi32(words, shifts), _mm512_set1_epi32((1 << bits) - 1));
}

/* A row with groups of 16k and a table: 16 values at a time, each code a permute through the
 * table and T[code] * s one multiply, as decode_group's. */
static inline void row_decode_avx512(const KvBase *b, __m512 table, const unsigned char *row, int n, float *out,
                                     int bits) {
    const unsigned char *scales = row + (size_t)n * (size_t)bits / 8;
    int G = b->group;
    for (int g = 0; g < n / G; g++) {
        __m512 s = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(scales + 2 * g)));
        for (int d0 = g * G; d0 < (g + 1) * G; d0 += 16) {
            __m512 t = _mm512_permutexvar_ps(codes16(row + (size_t)d0 * (size_t)bits / 8, bits), table);
            _mm512_storeu_ps(out + d0, _mm512_mul_ps(t, s));
        }
    }
}
#elif defined(__AVX2__)
/* AVX2 (without AVX-512): 8 values at a time, the table in two registers of 8 entries, an entry
 * picked from each by the code's low 3 bits and the right one by its bit 3 (moved to the sign for
 * the blend); then T[code] * s, one multiply, as decode_group's. */
static inline void row_decode_avx2(const KvBase *b, const float t[16], const unsigned char *row, int n, float *out,
                                   int bits) {
    const __m256 low = _mm256_loadu_ps(t), high = _mm256_loadu_ps(t + 8);
    const __m256i shifts = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(bits));
    const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
    const unsigned char *scales = row + (size_t)n * (size_t)bits / 8;
    int G = b->group;
    for (int g = 0; g < n / G; g++) {
        __m256 s = _mm256_set1_ps(scale_at(scales, g));
        for (int d0 = g * G; d0 < (g + 1) * G; d0 += 8) {
            __m256i c = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32((int)word8(row + (size_t)d0 * (size_t)bits / 8, bits)), shifts), mask);
            __m256 v = _mm256_permutevar8x32_ps(low, c);
            if (bits == 4)
                v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(high, c), _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
            _mm256_storeu_ps(out + d0, _mm256_mul_ps(v, s));
        }
    }
}
#endif

static void nuq_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    if (b->axis == KV_AXIS_TOKENS) {
        tokens_decode(b, units, n, r0, count, out, (size_t)n, 1);
        return;
    }
    size_t ub = nuq_unit_bytes(b, n);
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * ub;
#if defined(__AVX512F__)
    if (b->table && b->group % 16 == 0) {   /* a table, groups of 16k */
        __m512 table = table_register(b);
        for (int r = 0; r < count; r++) {   /* one copy per width: constant shifts */
            const unsigned char *row = rows + (size_t)r * ub;
            float *o = out + (size_t)r * n;
            if (b->bits == 2) row_decode_avx512(b, table, row, n, o, 2);
            else if (b->bits == 3) row_decode_avx512(b, table, row, n, o, 3);
            else row_decode_avx512(b, table, row, n, o, 4);
        }
        return;
    }
#elif defined(__AVX2__)
    if (b->table) {   /* a table (groups are multiples of 8) */
        float t[16];
        table16(b, t);
        for (int r = 0; r < count; r++) {   /* one copy per width: constant shifts */
            const unsigned char *row = rows + (size_t)r * ub;
            float *o = out + (size_t)r * n;
            if (b->bits == 2) row_decode_avx2(b, t, row, n, o, 2);
            else if (b->bits == 3) row_decode_avx2(b, t, row, n, o, 3);
            else row_decode_avx2(b, t, row, n, o, 4);
        }
        return;
    }
#endif
    for (int r = 0; r < count; r++) row_decode_scalar(b, rows + (size_t)r * ub, n, out + (size_t)r * n);
}

#if defined(__AVX512F__)
/* Channel-axis rows straight into attention's transposed key block, kt[i * 64 + p] = value i of
 * row p: per 16 rows, one gather brings a group's 16 scales (the 32-bit word ending with each),
 * and one gather per 8 values their 8 codes (bits * 8 <= 32 bits from byte bits * j: the last
 * such word ends at most 2 bytes past the codes, inside the scales); each code becomes a row of
 * kt with a shift, a mask, a permute through the table and T[code] * s. Lanes past count read
 * nothing and are zeroed by the mask. */
static inline void rows_transposed_avx512(const KvBase *b, __m512 table, const unsigned char *rows, size_t rb, int n,
                                          int count, float *kt, int bits) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)rb));
    const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
    int G = b->group;
    size_t scales = (size_t)n * (size_t)bits / 8;
    for (int p0 = 0; p0 < 64; p0 += 16) {
        int left = count - p0;
        __mmask16 live = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        const unsigned char *base = rows + (size_t)(left > 0 ? p0 : 0) * rb;
        for (int g = 0; g < n / G; g++) {
            __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + scales + 2 * g - 2, 1);
            __m512 s = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(word, 16)));
            for (int j = g * G / 8; j < (g + 1) * G / 8; j++) {
                __m512i codes = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + bits * j, 1);
                for (int k = 0; k < 8; k++) {
                    __m512i c = _mm512_and_si512(_mm512_srli_epi32(codes, bits * k), mask);
                    _mm512_storeu_ps(kt + (size_t)(8 * j + k) * 64 + p0,
                                     _mm512_maskz_mul_ps(live, _mm512_permutexvar_ps(c, table), s));
                }
            }
        }
    }
}

/* Token-axis units into kt when the rows wanted start and end on 16-position boundaries: a
 * channel's codes run along the positions, so 16 positions of a channel are one codes16. */
static inline void tokens_t64_avx512(const KvBase *b, __m512 table, const unsigned char *units, int n, int r0,
                                     int count, float *kt, int bits) {
    size_t ub = nuq_unit_bytes(b, n), channel_bytes = (size_t)b->group * (size_t)bits / 8;
    int G = b->group;
    for (int r = r0; r < r0 + count; r += 16) {
        const unsigned char *unit = units + (size_t)(r / G) * ub, *scales = unit + code_bytes(b, n);
        const unsigned char *codes = unit + (size_t)(r % G) * (size_t)bits / 8;
        for (int c = 0; c < n; c++) {
            __m512 s = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(scales + 2 * c)));
            __m512 t = _mm512_permutexvar_ps(codes16(codes + (size_t)c * channel_bytes, bits), table);
            _mm512_storeu_ps(kt + (size_t)c * 64 + (r - r0), _mm512_mul_ps(t, s));
        }
    }
}

static void nuq_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    if (!b->table) {   /* every value decodes to 0 */
        memset(kt, 0, sizeof(float) * 64 * (size_t)n);
        return;
    }
    __m512 table = table_register(b);
    int bits = b->bits;
    if (b->axis == KV_AXIS_TOKENS) {
        if (b->group % 16 == 0 && r0 % 16 == 0 && count % 16 == 0) {   /* one copy per width: constant shifts */
            if (bits == 2) tokens_t64_avx512(b, table, units, n, r0, count, kt, 2);
            else if (bits == 3) tokens_t64_avx512(b, table, units, n, r0, count, kt, 3);
            else tokens_t64_avx512(b, table, units, n, r0, count, kt, 4);
        } else {
            tokens_decode(b, units, n, r0, count, kt, 1, 64);
        }
        for (int c = 0; c < n; c++) memset(kt + (size_t)c * 64 + count, 0, sizeof(float) * (size_t)(64 - count));
        return;
    }
    size_t ub = nuq_unit_bytes(b, n);
    const unsigned char *rows = (const unsigned char *)units + (size_t)r0 * ub;
    if (bits == 2) rows_transposed_avx512(b, table, rows, ub, n, count, kt, 2);
    else if (bits == 3) rows_transposed_avx512(b, table, rows, ub, n, count, kt, 3);
    else rows_transposed_avx512(b, table, rows, ub, n, count, kt, 4);
}
#define NUQ_DECODE_T64 nuq_decode_t64
#else
#define NUQ_DECODE_T64 NULL   /* the caller decodes and transposes */
#endif

/* ---- fitting (SCHEMES.md §8) ---- */

/* One table of 2^B single values per layer and side, shared by the heads (file: [2^B]). */
static void nuq_fit_layout(const KvBase *b, int n, KvFitLayout *layout) {
    (void)n;
    *layout = (KvFitLayout){.per_head = 0, .n_tensors = 1, .tensors = {{.name = "", .ndim = 1, .dims = {entries(b)}}}};
}

/* §8 stores T ascending (equal neighbours, which only degenerate data gives, are accepted). */
static int nuq_fit_check(const KvBase *b, int n, const float *table, char *why, size_t why_len) {
    (void)n;
    for (int e = 1; e < entries(b); e++)
        if (!(table[e - 1] <= table[e])) {
            snprintf(why, why_len, "is not ascending (entry %d = %g after %g)", e, (double)table[e], (double)table[e - 1]);
            return 0;
        }
    return 1;
}

/* The z = x / s of every group of the rows, groups with s = 0 left out; NaN values too (a
 * calibration row holds none; they would only poison the fit). With +aw (rows->weights, and
 * point_weights given) each point's weight is its channel's w of its unit's KV head (the units
 * of the weight rows' heads lie back to back, equally many). */
static size_t nuq_fit_points(const KvBase *b, const KvFitRows *rows, float *points, float *point_weights) {
    size_t made = 0, unit_values = (size_t)b->rows * rows->n;
    int n = rows->n, G = b->group, tokens = b->axis == KV_AXIS_TOKENS;
    const float *weights = point_weights ? rows->weights : NULL;
    size_t per_head = weights && rows->weight_rows > 0 ? rows->count / (size_t)rows->weight_rows : 1;
    for (size_t u = 0; u < rows->count; u++) {
        const float *x = rows->units + u * unit_values;
        const float *w = weights ? weights + (u / (per_head ? per_head : 1)) * (size_t)n : NULL;
        for (int g = 0; g < (tokens ? n : n / G); g++) {
            const float *xg = tokens ? x + g : x + (size_t)g * G;
            size_t stride = tokens ? (size_t)n : 1;
            float s = f16_to_f32(group_scale(xg, stride, G));
            if (s == 0.0f) continue;
            for (int i = 0; i < G; i++) {
                float z = xg[(size_t)i * stride] / s;
                if (z != z) continue;
                if (w) point_weights[made] = w[tokens ? g : g * G + i];
                points[made++] = z;
            }
        }
    }
    return made;
}

/* Scratch: Lloyd's sums (plain, or +aw's weighted ones), the points, the sorted copy the start
 * needs, the points' +aw weights, the codes. */
typedef struct {
    float *points, *sorted, *weights;
    uint16_t *codes;
    void *lloyd;
    double *weighted;
} NuqScratch;

static size_t nuq_values(const KvBase *b, const KvFitRows *rows) { return rows->count * (size_t)b->rows * rows->n; }

static size_t nuq_fit_scratch_bytes(const KvBase *b, const KvFitRows *rows) {
    size_t v = nuq_values(b, rows);
    return lloyd_scratch_bytes(1, entries(b)) + 2 * (size_t)entries(b) * sizeof(double) + 3 * v * sizeof(float) +
           v * sizeof(uint16_t) + 8;
}

static NuqScratch nuq_scratch(const KvBase *b, const KvFitRows *rows, void *scratch) {
    size_t v = nuq_values(b, rows);
    NuqScratch s;
    s.lloyd = scratch;   /* first: Lloyd's float64 sums keep the caller's alignment */
    s.weighted = (double *)((char *)scratch + lloyd_scratch_bytes(1, entries(b)));
    s.points = (float *)(s.weighted + 2 * (size_t)entries(b));
    s.sorted = s.points + v;
    s.weights = s.sorted + v;
    s.codes = (uint16_t *)(s.weights + v);
    return s;
}

/* Lloyd keeps 1-D centroids in order, except after equal starts ({0, 0, 10} can end {1, 0, 9}). */
static void sort_ascending(float *x, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            float t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
}

/* §8: the points' ranks as the start, Lloyd, the table stored ascending. */
static int nuq_fit(const KvBase *b, const KvFitRows *rows, float *table, void *scratch, KvFitShortfall *shortfall) {
    NuqScratch s = nuq_scratch(b, rows, scratch);
    size_t n = nuq_fit_points(b, rows, s.points, s.weights);
    if (n < 4 * (size_t)entries(b)) {
        *shortfall = (KvFitShortfall){.points = n, .entries = entries(b)};
        return -1;
    }
    lloyd_init_ranks(s.points, n, entries(b), table, s.sorted);
    if (rows->weights)   /* +aw (§9): an entry moves to the weighted mean of its points */
        aw_lloyd_fit_1d(s.points, s.weights, n, table, entries(b), LLOYD_MAX_ITERATIONS, s.codes, s.weighted);
    else
        lloyd_fit(s.points, n, 1, table, entries(b), LLOYD_MAX_ITERATIONS, s.codes, s.lloyd);
    sort_ascending(table, entries(b));
    return 0;
}

static double nuq_fit_objective(const KvBase *b, const KvFitRows *rows, const float *table, void *scratch) {
    NuqScratch s = nuq_scratch(b, rows, scratch);
    size_t n = nuq_fit_points(b, rows, s.points, s.weights);
    if (!rows->weights) return lloyd_objective(s.points, n, 1, table, entries(b));
    double sum = 0;   /* +aw: each point's squared error times its weight */
    for (size_t i = 0; i < n; i++) {
        double e = (double)s.points[i] - table[lloyd_nearest(&s.points[i], 1, table, entries(b))];
        sum += s.weights[i] * e * e;
    }
    return sum;
}

static const KvFit NUQ_FIT = {
    .layout = nuq_fit_layout,
    .check = nuq_fit_check,
    .scratch_bytes = nuq_fit_scratch_bytes,
    .fit = nuq_fit,
    .objective = nuq_fit_objective,
};

/* SCHEMES.md §9: a slot is a channel; params are the fp16 absmax of each group. The stream of a
 * unit is row-major for gG, channel-major (G codes a channel) for tG. */
static void nuq_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n;
    *symbols = entries(b);
    *param_bits = (int)(16 * groups_of(b, n));
}

static void nuq_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    if (b->axis == KV_AXIS_CHANNELS) {
        kv_unpack_codes(unit, b->bits, n, codes);
        return;
    }
    unsigned short channel[MAX_GROUP];
    for (int c = 0; c < n; c++) {
        kv_unpack_codes((const unsigned char *)unit + (size_t)c * b->group * b->bits / 8, b->bits, b->group, channel);
        for (int r = 0; r < b->group; r++) codes[(size_t)r * n + c] = channel[r];
    }
}

static void nuq_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    if (b->axis == KV_AXIS_CHANNELS) {
        kv_pack_codes(codes, b->bits, n, unit);
        return;
    }
    unsigned short channel[MAX_GROUP];
    for (int c = 0; c < n; c++) {
        for (int r = 0; r < b->group; r++) channel[r] = codes[(size_t)r * n + c];
        kv_pack_codes(channel, b->bits, b->group, (unsigned char *)unit + (size_t)c * b->group * b->bits / 8);
    }
}

const KvCodec kv_codec_nuq = {
    .syntax = "nuqB-gG, nuqB-tG",
    .summary = "B = 2, 3, 4 bit codes into a table fitted to the model (KVQuant's nuqB; ./run calibrate), an fp16 absmax "
        "per group of G: gG along the row, tG along positions",
    .examples = "nuq4-g64 nuq3-g64 nuq2-g64 nuq2-t64",
    .parse = nuq_parse,
    .check = nuq_check,
    .unit_bytes = nuq_unit_bytes,
    .encode = nuq_encode,
    .decode = nuq_decode,
    .decode_t64 = NUQ_DECODE_T64,
    .code_layout = nuq_code_layout,
    .codes = nuq_codes,
    .put_codes = nuq_put_codes,
    .fit = &NUQ_FIT,
};
