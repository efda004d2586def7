/* quant/half.c: float32 <-> IEEE half (fp16) and float32 -> bfloat16, by bit
 * manipulation so the results do not depend on compiler support for _Float16
 * or on the FPU's rounding mode. Every rounding is to nearest, ties to even. */
#include "quant/half.h"
#include <math.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Keeps value >> shift rounded to nearest, ties to even (shift in 1..31). */
static uint32_t shift_round_even(uint32_t value, int shift) {
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

uint16_t f32_to_f16(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    int32_t exp = (int32_t)((u >> 23) & 0xffu);
    uint32_t mant = u & 0x7fffffu;

    if (exp == 0xff) {
        if (mant == 0)
            return (uint16_t)(sign | 0x7c00u);
        /* NaN: keep the top payload bits and force the quiet bit, so a
         * payload living only in the low bits cannot turn into infinity. */
        return (uint16_t)(sign | 0x7e00u | (mant >> 13));
    }
    int32_t e = exp - 127 + 15;          /* the exponent in half's bias */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e >= 1) {
        /* Normal half: round the 23-bit mantissa to 10 bits. A carry out of
         * the mantissa bumps the exponent, and out of exponent 30 gives inf:
         * exactly IEEE behaviour, because the fields are adjacent. */
        uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    /* Subnormal half (or zero): value = M * 2^(exp-150) with M the mantissa
     * plus implicit bit, and a half subnormal counts units of 2^-24, so the
     * count is M >> (14 - e). A carry into bit 10 yields the smallest normal. */
    if (exp == 0)
        return sign;                     /* float zero or subnormal: far below 2^-25 */
    int shift = 14 - e;
    if (shift > 24)
        return sign;                     /* below half the smallest subnormal */
    return (uint16_t)(sign | shift_round_even(mant | 0x800000u, shift));
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f)                     /* inf or NaN, payload kept */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp != 0)
        return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return bits_float(sign);
    /* Subnormal half: normalize so the leading 1 becomes the implicit bit. */
    uint32_t e = 113;                    /* float exponent of 2^-14 */
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu))
        return (uint16_t)((u >> 16) | 0x40u);   /* NaN: quiet, never rounded into inf */
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry
     * propagates into the exponent and, at the top, to infinity. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void f32_to_f16_bytes(const float *x, size_t n, unsigned char *p) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = f32_to_f16(x[i]);
        p[2 * i] = (unsigned char)(h & 0xffu);
        p[2 * i + 1] = (unsigned char)(h >> 8);
    }
}

void f16_bytes_to_f32(const unsigned char *p, size_t n, float *out) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)   /* F16C widening: exact, so the same values as f16_to_f32 */
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i))));
#endif
    for (; i < n; i++) out[i] = f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
}

uint16_t f16_norm(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    double norm = sqrt(sum);
    if (!(norm < 1e30)) return 0;   /* NaN or huge: also keeps the double -> float conversion in range */
    uint16_t h = f32_to_f16((float)norm);
    return (h & 0x7c00u) == 0x7c00u ? 0 : h;
}
