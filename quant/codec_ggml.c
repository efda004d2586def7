/* quant/codec_ggml.c: llama.cpp's KV-cache block types q8_0, q4_0, q4_1, q5_0 and q5_1, bit-exact
 * to ggml's reference quantizers (quantize_row_q*_ref and dequantize_row_q* in ggml-quants.c).
 *
 * One codec parses all five names: they share the block of 32 values, the parsing, the width
 * check and the unit layout, and differ only in a handful of constants (KvBase.bits = 8, 4 or 5;
 * KvBase.variant = 1 for the "_1" types, which store a minimum beside the scale), so five rows in
 * the table would repeat the same functions five times.
 *
 * A unit is one row of n values (n a multiple of 32): n/32 blocks of 32 consecutive values, back
 * to back, each in ggml's block layout (fp16 fields little-endian, nearest-even rounding):
 *   q8_0  34 bytes: [d fp16][qs: 32 x int8, value j in byte j]
 *   q4_0  18 bytes: [d fp16][qs: 16 bytes; byte j = code j | code (j+16) << 4]
 *   q4_1  20 bytes: [d fp16][m fp16][qs as q4_0]
 *   q5_0  22 bytes: [d fp16][qh: uint32 LE, bit j = bit 4 of code j][qs: low 4 bits, as q4_0]
 *   q5_1  24 bytes: [d fp16][m fp16][qh][qs as q5_0]
 * So a value costs 8.5, 4.5, 5, 5.5 and 6 bits. Decoding: q8_0 x = q*d; q4_0 x = (q-8)*d;
 * q5_0 x = (q-16)*d; q4_1 and q5_1 x = q*d + m (the products are exact: at most 8 + 11 bits).
 *
 * Encoding, per block, in float32 unless stated, in ggml's order of operations:
 *   q8_0:       amax = max |x| (ggml's MAX(a,b) = a > b ? a : b, in value order); d = amax/127;
 *               id = d ? 1/d : 0; q = roundf(x*id) (ties away from zero)
 *   q4_0, q5_0: max = the first value of largest |x|, with its sign; d = max/-8 (/-16);
 *               id = d ? 1/d : 0; q = min(15 (31), trunc(x*id + 8.5 (16.5))), the sum rounded
 *               ONCE: t = float(double(x)*double(id) + 8.5) (the product is exact in double)
 *   q4_1, q5_1: min, max of the block; d = (max-min)/15 (/31); m = min; id = d ? 1/d : 0;
 *               q = min(15 (31), trunc(s + 0.5)) with s = (x-min)*id rounded to float first
 * The single rounding in q4_0 and q5_0 is what gguf-py/gguf/quants.py computes ("Q4_0's
 * reference rounding is cursed and depends on FMA") and what ggml's C gives when the compiler
 * fuses x*id + 8.5 into one fma (GCC's default on FMA machines): rounding x*id first changes
 * the code of values within a float ulp of a halfway point (about 5% of blocks of tie-heavy
 * data, none of plain gaussian blocks). q4_1 and q5_1 round s first, as quants.py does.
 * An all-zero block gives q4_0 and q5_0 d = 0/-8 = -0 (fp16 0x8000), as ggml stores it.
 *
 * Undefined corners. ggml converts those floats to int8_t / uint8_t with a C cast, which is
 * undefined for NaN and for values outside the type. For finite inputs with d and 1/d finite the
 * codes always lie inside [-127, 127], [0, 15] or [0, 31] and this file gives ggml's bytes.
 * Elsewhere the codes are defined here: a NaN code value becomes stored code 0 (all code bits
 * zero, what ggml's scalar x86 build happens to store), and anything else saturates to the
 * nearest end of the range. The cases (ggml's C semantics; numpy's max/argmax would instead
 * let any NaN make d NaN):
 *   - NaN inputs are skipped when q4_0/q5_0 pick their max and q4_1/q5_1 their min and max
 *     (ggml compares with < and >), and are stored as code 0 (decode to -8d, -16d or m).
 *     q8_0's MAX(amax, NaN) is NaN and MAX(NaN, v) is v, so a NaN restarts the running max:
 *     values before it may then saturate at +-127, and a NaN in the last place makes d NaN
 *     (the whole block decodes to NaN).
 *   - An infinite input makes d infinite: id = 0, so finite values get the middle code and the
 *     infinities NaN's code 0; q4_0/q5_0 then decode the infinities to the first infinity of
 *     the block and the rest to NaN (0 * inf); q8_0, q4_1 and q5_1 decode the block to NaN.
 *   - Tiny blocks whose d is a float subnormal with 1/d = inf get saturated codes; their fp16
 *     d is 0, so they decode to 0 (or m) just as ggml's would.
 *   - Finite blocks beyond fp16's range store d = +-inf (fp16 rounding), decoding to +-inf and
 *     NaN; a _1 block whose max - min overflows gets d = inf, id = 0, codes 0 and decodes to NaN.
 * Ties: q8_0 rounds half away from zero (roundf); the others add 8.5, 16.5 or 0.5 and truncate,
 * so a code value exactly halfway rounds up (toward +inf). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"

#define QK 32   /* values per block, in every type here */

/* ---- parsing ---- */

/* "qB_V": llama.cpp's names. Anything starting with q and a digit is taken as meant for this
 * codec, so "q6_0" is told what exists rather than "unknown base". */
static int ggml_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p = name;
    if (p[0] != 'q' || p[1] < '0' || p[1] > '9') return 0;
    p++;
    int bits, variant;
    if (kv_parse_number(&p, 0, 99, &bits) || (bits != 4 && bits != 5 && bits != 8)) {
        snprintf(why, why_len, "%.40s: the bits must be 8, 4 or 5 (q8_0, q4_0, q4_1, q5_0, q5_1; or iq4_nl)", name);
        return -1;
    }
    if (*p != '_' || (p++, kv_parse_number(&p, 0, 9, &variant)) || *p != '\0') {
        snprintf(why, why_len, "%.40s: expected q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl (llama.cpp's KV cache types; "
                 "its k-quants such as q4_k are not among them)", name);
        return -1;
    }
    if (variant > 1 || (bits == 8 && variant != 0)) {
        snprintf(why, why_len, "%.40s: the variant must be _0 or _1 (q8 only _0)", name);
        return -1;
    }
    b->bits = bits;
    b->group = QK;
    b->variant = variant;   /* has_min */
    snprintf(b->name, sizeof b->name, "q%d_%d", bits, variant);
    return 1;
}

static int ggml_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n % QK != 0) {
        snprintf(why, why_len, "%s: its blocks of %d values do not divide rows of %d", b->name, QK, n);
        return 0;
    }
    return 1;
}

/* The "_1" types store a minimum m beside the scale d (KvBase.variant, this codec's own parameter). */
static int has_min(const KvBase *b) { return b->variant; }

/* d, m if has_min, then 32 codes of `bits` bits (q5's qh and qs together are 32*5/8 bytes). */
static size_t block_bytes(const KvBase *b) { return 2 + 2 * (size_t)has_min(b) + QK * (size_t)b->bits / 8; }

static size_t ggml_unit_bytes(const KvBase *b, int n) { return (size_t)(n / QK) * block_bytes(b); }

/* ---- encoding one block ---- */

/* ggml tests `d ? 1/d : 0`: NaN counts as nonzero there, so id is NaN too. */
static float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* trunc(t) in [0, top], where ggml's cast is defined; NaN and negatives (only reachable where it
 * is not) give 0, too large values top. */
static inline unsigned truncated_code(float t, unsigned top) {
    if (!(t >= 0.0f)) return 0;
    if (t >= (float)top) return top;
    return (unsigned)t;
}

/* The same for a sum held in double: its rounding to float matters only inside the range. */
static inline unsigned truncated_code64(double t64, unsigned top) {
    if (!(t64 >= 0.0)) return 0;
    if (t64 >= (double)top) return top;
    return truncated_code((float)t64, top);
}

static void encode_q8_0(const float *x, unsigned char *blk) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;   /* ggml's MAX, NaN behaviour included */
    }
    float d = amax / 127.0f, id = inverse_or_zero(d);
    kv_put_u16(blk, f32_to_f16(d));
    for (int j = 0; j < QK; j++) {
        float q = roundf(x[j] * id);
        int code = q != q ? 0 : q < -127.0f ? -127 : q > 127.0f ? 127 : (int)q;
        blk[2 + j] = (unsigned char)(code & 0xff);   /* two's complement int8 */
    }
}

/* The first value of largest magnitude, with its sign (0 when every value is 0 or NaN). */
static float signed_absmax(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* q4_0 and q5_0: codes of x*id + 2^(bits-1) + 0.5, rounded once, then truncated. The product
 * of two floats is exact in double, so t64 is that sum rounded to double, then to float:
 * gguf-py's restatement. Where the float rounding can reach an integer the double sum is
 * exact, so the code is also fmaf(x, id, 8.5)'s: ggml's reference with a fused multiply-add
 * (see the header). t64 is clamped before the narrowing, which then stays in range. */
static void symmetric_codes(const float *x, int bits, unsigned char *blk, unsigned codes[QK]) {
    float half_range = (float)(1 << (bits - 1));
    float d = signed_absmax(x) / -half_range, id = inverse_or_zero(d);
    unsigned top = (1u << bits) - 1;
    kv_put_u16(blk, f32_to_f16(d));
    for (int j = 0; j < QK; j++) {
        double t64 = (double)x[j] * (double)id + ((double)half_range + 0.5);
        codes[j] = truncated_code64(t64, top);
    }
}

/* q4_1 and q5_1: codes of (x-min)*id + 0.5, truncated; NaN values do not count for min, max. */
static void offset_codes(const float *x, int bits, unsigned char *blk, unsigned codes[QK]) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    float d = (max - min) / (float)((1 << bits) - 1), id = inverse_or_zero(d);
    kv_put_u16(blk, f32_to_f16(d));
    kv_put_u16(blk + 2, f32_to_f16(min));
    for (int j = 0; j < QK; j++) {
        float scaled = (x[j] - min) * id;
        codes[j] = truncated_code(scaled + 0.5f, (1u << bits) - 1);
    }
}

/* Low 4 bits of codes j and j+16 share byte j; bit 4 of code j is bit j of qh (q5 only). */
static void pack_nibbles(const unsigned codes[QK], unsigned char *qs) {
    for (int j = 0; j < QK / 2; j++) qs[j] = (unsigned char)((codes[j] & 15u) | (codes[j + QK / 2] & 15u) << 4);
}

static void pack_high_bits(const unsigned codes[QK], unsigned char *qh) {
    uint32_t bits = 0;
    for (int j = 0; j < QK; j++) bits |= (uint32_t)(codes[j] >> 4 & 1u) << j;
    for (int i = 0; i < 4; i++) qh[i] = (unsigned char)(bits >> (8 * i));
}

static void encode_block(const KvBase *b, const float *x, unsigned char *blk) {
    unsigned codes[QK];
    if (b->bits == 8) {
        encode_q8_0(x, blk);
        return;
    }
    size_t params = has_min(b) ? 4 : 2;
    if (has_min(b)) offset_codes(x, b->bits, blk, codes);
    else symmetric_codes(x, b->bits, blk, codes);
    if (b->bits == 5) pack_high_bits(codes, blk + params);
    pack_nibbles(codes, blk + params + (b->bits == 5 ? 4 : 0));
}

static void ggml_encode(const KvBase *b, const float *x, int n, void *unit) {
    size_t bb = block_bytes(b);
    for (int i = 0; i < n / QK; i++) encode_block(b, x + (size_t)i * QK, (unsigned char *)unit + (size_t)i * bb);
}

/* ---- decoding: nblocks consecutive blocks into 32 * nblocks floats ---- */

static float f16_at(const unsigned char *p) { return f16_to_f32((uint16_t)kv_get_u16(p)); }

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void decode_q8_0(const unsigned char *restrict blk, size_t nblocks, float *restrict out) {
    for (size_t i = 0; i < nblocks; i++, blk += 34, out += QK) {
        float d = f16_at(blk);
        const signed char *qs = (const signed char *)(blk + 2);
        for (int j = 0; j < QK; j++) out[j] = (float)qs[j] * d;
    }
}

/* x = (q - zero)*d for the _0 types; q*d + m for the _1 types. The _0 types must not add a
 * zero m: -0 + 0 is +0, and ggml's all-zero q4_0 block decodes to -0. */
static inline float dequant(int q, int zero, float d, float m, int asym) {
    float v = (float)(q - zero) * d;
    return asym ? v + m : v;
}

/* q4 and q5 decode in steps per block, the codes into a small array, then one multiply loop
 * over 32 values: written so, GCC vectorizes each step (interleaving the two halves' stores
 * kept q4 scalar, 10x slower; extracting qh's bits inside the float loop kept q5 scalar).
 * asym is a constant in each caller, so each type gets its own loops. */
static inline void decode_q4(const unsigned char *restrict blk, size_t nblocks, int asym, float *restrict out) {
    size_t bb = asym ? 20 : 18;
    int zero = asym ? 0 : 8;
    for (size_t i = 0; i < nblocks; i++, blk += bb, out += QK) {
        float d = f16_at(blk), m = asym ? f16_at(blk + 2) : 0.0f;
        const unsigned char *qs = blk + (asym ? 4 : 2);
        int code[QK];
        for (int j = 0; j < QK / 2; j++) code[j] = qs[j] & 15, code[j + QK / 2] = qs[j] >> 4;
        for (int j = 0; j < QK; j++) out[j] = dequant(code[j], zero, d, m, asym);
    }
}

/* Bit j of qh is bit 4 of code j. Testing it against a table of masks rather than shifting qh
 * by j vectorizes without per-lane shifts (SSE2 has none): 7x faster in a portable build. */
static const uint32_t QH_BIT[QK] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31,
};

/* As q4, with bit 4 of each code from qh. */
static inline void decode_q5(const unsigned char *restrict blk, size_t nblocks, int asym, float *restrict out) {
    size_t bb = asym ? 24 : 22;
    int zero = asym ? 0 : 16;
    for (size_t i = 0; i < nblocks; i++, blk += bb, out += QK) {
        float d = f16_at(blk), m = asym ? f16_at(blk + 2) : 0.0f;
        uint32_t qh = u32_at(blk + (asym ? 4 : 2));
        const unsigned char *qs = blk + (asym ? 8 : 6);
        int code[QK];
        for (int j = 0; j < QK / 2; j++) code[j] = qs[j] & 15, code[j + QK / 2] = qs[j] >> 4;
        for (int j = 0; j < QK; j++) code[j] |= qh & QH_BIT[j] ? 16 : 0;
        for (int j = 0; j < QK; j++) out[j] = dequant(code[j], zero, d, m, asym);
    }
}

/* Rows of a run of units are whole blocks back to back, so rows r0 .. r0+count-1 are one run of
 * count * n/32 blocks. */
static void ggml_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    const unsigned char *first = (const unsigned char *)units + (size_t)r0 * ggml_unit_bytes(b, n);
    size_t nblocks = (size_t)count * (size_t)(n / QK);
    switch (b->bits * 2 + has_min(b)) {   /* constant arguments: one specialized loop each */
    case 16: decode_q8_0(first, nblocks, out); break;
    case 8: decode_q4(first, nblocks, 0, out); break;
    case 9: decode_q4(first, nblocks, 1, out); break;
    case 10: decode_q5(first, nblocks, 0, out); break;
    default: decode_q5(first, nblocks, 1, out); break;
    }
}

/* SCHEMES.md §9: a slot is a channel (in llama.cpp's key order for keys, as the blocks hold it),
 * the code as stored (q8_0: the int8's byte); params are each block's fp16 d (and m). */
static void ggml_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n;
    *symbols = 1 << b->bits;
    *param_bits = (n / QK) * 16 * (1 + has_min(b));
}

static void ggml_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    const unsigned char *blk = unit;
    for (int k = 0; k < n / QK; k++, blk += block_bytes(b), codes += QK) {
        const unsigned char *qs = blk + 2 + 2 * has_min(b);
        if (b->bits == 8) {
            for (int j = 0; j < QK; j++) codes[j] = qs[j];
            continue;
        }
        uint32_t qh = b->bits == 5 ? u32_at(qs) : 0;
        if (b->bits == 5) qs += 4;
        for (int j = 0; j < QK / 2; j++) codes[j] = qs[j] & 15, codes[j + QK / 2] = qs[j] >> 4;
        for (int j = 0; j < QK; j++) codes[j] |= qh & QH_BIT[j] ? 16 : 0;
    }
}

static void ggml_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    unsigned char *blk = unit;
    for (int k = 0; k < n / QK; k++, blk += block_bytes(b), codes += QK) {
        unsigned char *qs = blk + 2 + 2 * has_min(b);
        if (b->bits == 8) {
            for (int j = 0; j < QK; j++) qs[j] = (unsigned char)codes[j];
            continue;
        }
        if (b->bits == 5) {
            uint32_t qh = 0;
            for (int j = 0; j < QK; j++) qh |= (uint32_t)(codes[j] >> 4 & 1u) << j;
            for (int j = 0; j < 4; j++) qs[j] = (unsigned char)(qh >> (8 * j));
            qs += 4;
        }
        for (int j = 0; j < QK / 2; j++) qs[j] = (unsigned char)((codes[j] & 15u) | (codes[j + QK / 2] & 15u) << 4);
    }
}

const KvCodec kv_codec_ggml = {
    .syntax = "q8_0, q4_0, q4_1, q5_0, q5_1",
    .summary = "llama.cpp's KV block types: blocks of 32, an fp16 scale (and minimum for _1), ggml's byte layout",
    .examples = "q8_0 q4_0 q4_1 q5_0 q5_1",
    .parse = ggml_parse,
    .check = ggml_check,
    .unit_bytes = ggml_unit_bytes,
    .encode = ggml_encode,
    .decode = ggml_decode,
    .code_layout = ggml_code_layout,
    .codes = ggml_codes,
    .put_codes = ggml_put_codes,
    .llama_key_order = 1,
};
