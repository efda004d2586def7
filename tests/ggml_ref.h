/* tests/ggml_ref.h: an independent reference for the q8_0, q4_0, q4_1, q5_0, q5_1 blocks, written
 * from the definition (SCHEMES.md section 6 and ggml's reference quantizers) without the codec's
 * code: fp16 rounding by double arithmetic, the single-rounding sum of q4_0/q5_0 as fmaf, the
 * layout packed and read bit by bit. tests/test_codec_ggml.c compares quant/codec_ggml.c against
 * it, and it against llama.cpp's blocks in the fixture (without that it would prove nothing). A
 * file of its own so the test file stays under 700 lines and the reference reads apart from the
 * checks. */
#ifndef KVQ_GGML_REF_H
#define KVQ_GGML_REF_H
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK 32

/* What SCHEMES.md and ggml's block structs say about each type. */
typedef struct {
    const char *name;
    int bits, has_min, block_bytes;
    double bits_per_value;
} TypeInfo;

static const TypeInfo TYPES[5] = {
    {"q8_0", 8, 0, 2 + 32, 8.5},
    {"q4_0", 4, 0, 2 + 16, 4.5},
    {"q4_1", 4, 1, 2 + 2 + 16, 5.0},
    {"q5_0", 5, 0, 2 + 4 + 16, 5.5},
    {"q5_1", 5, 1, 2 + 2 + 4 + 16, 6.0},
};

/* ---- fp16 by arithmetic (independent of quant/half.c) ---- */

static inline uint16_t t_fp16(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return (uint16_t)(sign | 0x7e00);
    double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);   /* 65504 + half a step rounds to inf */
    int e;
    frexp(a, &e);
    int exp = e - 1 < -14 ? -14 : e - 1;                  /* a in [2^exp, 2^(exp+1)), or subnormal */
    double k = nearbyint(a / ldexp(1.0, exp - 10));       /* ties to even; the division is exact */
    if (k < 1024) return (uint16_t)(sign | (uint16_t)k); /* zero or subnormal (exp = -14) */
    if (k == 2048) k = 1024, exp++;
    if (exp > 15) return (uint16_t)(sign | 0x7c00);
    return (uint16_t)(sign | (exp + 15) << 10 | ((int)k - 1024));
}

static inline float t_half_value(uint16_t h) {
    int exp = h >> 10 & 31, mant = h & 1023;
    double v = exp == 31 ? (mant ? NAN : INFINITY) : exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    return (float)(h & 0x8000 ? -v : v);
}

static inline int fp16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

/* ---- the definition, restated ---- */

/* trunc(t) in [0, top]; NaN and negatives 0 (the codec's documented choice where ggml's cast
 * is undefined). */
static inline int t_trunc_code(double t, int top) {
    if (isnan(t) || t <= 0) return 0;
    if (t >= top) return top;
    return (int)trunc(t);
}

static inline double t_round_half_away(float s) {
    double a = floor(fabs((double)s) + 0.5);
    return s < 0 ? -a : a;
}

typedef struct {
    float d, m;      /* as computed in float32, before fp16 */
    int q[QK];       /* codes as stored (q8_0 signed) */
} RefBlock;

static inline float t_inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

static inline RefBlock ref_codes(const TypeInfo *t, const float *x) {
    RefBlock r = {0.0f, 0.0f, {0}};
    int top = (1 << t->bits) - 1;
    if (t->bits == 8) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            if (!(amax > fabsf(x[j]))) amax = fabsf(x[j]);   /* MAX(a, b) = a > b ? a : b */
        r.d = amax / 127.0f;
        float id = t_inverse(r.d);
        for (int j = 0; j < QK; j++) {
            float s = x[j] * id;
            double q = t_round_half_away(s);
            r.q[j] = isnan(q) ? 0 : q > 127 ? 127 : q < -127 ? -127 : (int)q;
        }
    } else if (!t->has_min) {
        float half = (float)(1 << (t->bits - 1)), amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        r.d = max / -half;
        float id = t_inverse(r.d);
        for (int j = 0; j < QK; j++) r.q[j] = t_trunc_code(fmaf(x[j], id, half + 0.5f), top);
    } else {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < mn) mn = x[j];
            if (x[j] > mx) mx = x[j];
        }
        r.d = (mx - mn) / (float)top;
        r.m = mn;
        float id = t_inverse(r.d);
        for (int j = 0; j < QK; j++) {
            float s = (x[j] - mn) * id;
            float sum = s + 0.5f;
            r.q[j] = t_trunc_code(sum, top);
        }
    }
    return r;
}

/* The block layout: d, m (if any), qh (q5: bit j of a little-endian word = bit 4 of code j),
 * qs (q8: one int8 per value; q4, q5: byte j = low nibble of code j, high of code j+16). */
static inline void ref_pack(const TypeInfo *t, uint16_t d, uint16_t m, const int q[QK], unsigned char *blk) {
    memset(blk, 0, (size_t)t->block_bytes);
    size_t o = 0;
    blk[o++] = (unsigned char)(d & 255);
    blk[o++] = (unsigned char)(d >> 8);
    if (t->has_min) {
        blk[o++] = (unsigned char)(m & 255);
        blk[o++] = (unsigned char)(m >> 8);
    }
    if (t->bits == 8) {
        for (int j = 0; j < QK; j++) blk[o + j] = (unsigned char)(q[j] < 0 ? q[j] + 256 : q[j]);
        return;
    }
    if (t->bits == 5) {
        for (int j = 0; j < QK; j++)
            if (q[j] & 16) blk[o + j / 8] |= (unsigned char)(1 << (j % 8));
        o += 4;
    }
    for (int j = 0; j < QK / 2; j++) blk[o + j] = (unsigned char)((q[j] & 15) | (q[j + QK / 2] & 15) << 4);
}

static inline void ref_encode_block(const TypeInfo *t, const float *x, unsigned char *blk) {
    RefBlock r = ref_codes(t, x);
    ref_pack(t, t_fp16(r.d), t_fp16(r.m), r.q, blk);
}

static inline int ref_code_at(const TypeInfo *t, const unsigned char *blk, int j) {
    size_t o = t->has_min ? 4 : 2;
    if (t->bits == 8) return blk[o + j] >= 128 ? blk[o + j] - 256 : blk[o + j];
    int high = t->bits == 5 ? blk[o + j / 8] >> (j % 8) & 1 : 0;
    if (t->bits == 5) o += 4;
    int low = j < QK / 2 ? blk[o + j] & 15 : blk[o + j - QK / 2] >> 4;
    return low | high << 4;
}

static inline void ref_decode_block(const TypeInfo *t, const unsigned char *blk, float *out) {
    float d = t_half_value((uint16_t)(blk[0] | blk[1] << 8));
    float m = t->has_min ? t_half_value((uint16_t)(blk[2] | blk[3] << 8)) : 0.0f;
    int zero = t->bits == 8 || t->has_min ? 0 : 1 << (t->bits - 1);
    for (int j = 0; j < QK; j++) {
        float v = (float)(ref_code_at(t, blk, j) - zero) * d;
        out[j] = t->has_min ? v + m : v;
    }
}

/* ---- comparisons ---- */

static inline int same_float(float got, float want) {
    if (isnan(want)) return isnan(got);
    uint32_t a, b;
    memcpy(&a, &got, 4);
    memcpy(&b, &want, 4);
    return a == b;
}

/* Blocks equal, except that a NaN fp16 field matches any NaN (the payload is not defined). */
static inline int same_block(const TypeInfo *t, const unsigned char *got, const unsigned char *want) {
    for (int f = 0; f < (t->has_min ? 2 : 1); f++) {
        uint16_t g = (uint16_t)(got[2 * f] | got[2 * f + 1] << 8), w = (uint16_t)(want[2 * f] | want[2 * f + 1] << 8);
        if (fp16_is_nan(w) ? !fp16_is_nan(g) : g != w) return 0;
    }
    size_t o = t->has_min ? 4 : 2;
    return memcmp(got + o, want + o, (size_t)t->block_bytes - o) == 0;
}

#endif
