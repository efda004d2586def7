/* quant/scheme_int.c: integer group quantization, symmetric and asymmetric,
 * for 2, 3, 4 and 8 bits. Formulas (per group of group_size values, all in
 * float32, fp16() = nearest-even half, rint = ties to even):
 *   sym:  scale = fp16(max|x| / (2^(b-1)-1)); q = clamp(rint(x/scale), -2^(b-1), 2^(b-1)-1);
 *         x_hat = q*scale
 *   asym: lo = fp16(min); scale = fp16((max-min)/(2^b-1)); q = clamp(rint((x-lo)/scale), 0, 2^b-1);
 *         x_hat = q*scale + lo
 * x/scale divides by the fp16-rounded scale; a group whose scale is 0 gets
 * codes 0. Layout: see quant/quant.h. Every block of 8 codes is exactly
 * `bits` bytes, so codes are moved 8 at a time through one 64-bit word. */
#include <math.h>
#include <stdint.h>
#include "quant/half.h"
#include "quant/scheme_impl.h"

/* The float parameters of one group, decoded from their fp16 storage. */
typedef struct {
    float scale;
    float lo;       /* 0 for symmetric groups */
    int32_t zero;   /* subtracted from stored codes: 2^(b-1) sym, 0 asym */
} GroupParams;

size_t int_packed_bytes(const KvScheme *s, size_t n) {
    return n / 8 * (size_t)s->bits + n / (size_t)s->group_size * (size_t)s->n_params * 2;
}

static void put_f16(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)(h & 0xffu);
    p[1] = (uint8_t)(h >> 8);
}

static uint16_t get_f16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Where group g's parameters start: after all codes. */
static const uint8_t *params_at(const KvScheme *s, const uint8_t *base, size_t n, size_t g) {
    return base + n / 8 * (size_t)s->bits + g * (size_t)s->n_params * 2;
}

static GroupParams read_params(const KvScheme *s, const uint8_t *p) {
    GroupParams gp;
    gp.scale = f16_to_f32(get_f16(p));
    gp.lo = s->symmetric ? 0.0f : f16_to_f32(get_f16(p + 2));
    gp.zero = s->symmetric ? (int32_t)1 << (s->bits - 1) : 0;
    return gp;
}

/* Eight codes of `bits` bits -> `bits` bytes, first code in the lowest bits. */
static inline void pack8(const uint32_t c[8], int bits, uint8_t *p) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++)
        w |= (uint64_t)c[k] << (k * bits);
    for (int i = 0; i < bits; i++)
        p[i] = (uint8_t)(w >> (8 * i));
}

/* The inverse of pack8, with the zero point removed (signed code values). */
static inline void unpack8(const uint8_t *p, int bits, int32_t zero, int32_t c[8]) {
    uint64_t w = 0;
    for (int i = 0; i < bits; i++)
        w |= (uint64_t)p[i] << (8 * i);
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    for (int k = 0; k < 8; k++)
        c[k] = (int32_t)((w >> (k * bits)) & mask) - zero;
}

/* Chooses the group's fp16 parameters from its values and stores them. */
static GroupParams choose_params(const KvScheme *s, const float *x, uint8_t *p) {
    int b = s->bits;
    GroupParams gp = {0.0f, 0.0f, 0};
    float mn = x[0], mx = x[0], amax = 0.0f;
    for (int i = 0; i < s->group_size; i++) {
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
        amax = fmaxf(amax, fabsf(x[i]));
    }
    if (s->symmetric) {
        uint16_t scale = f32_to_f16(amax / (float)((1 << (b - 1)) - 1));
        put_f16(p, scale);
        gp.scale = f16_to_f32(scale);
        gp.zero = 1 << (b - 1);
    } else {
        uint16_t lo = f32_to_f16(mn);
        uint16_t scale = f32_to_f16((mx - mn) / (float)((1 << b) - 1));
        put_f16(p, scale);
        put_f16(p + 2, lo);
        gp.scale = f16_to_f32(scale);
        gp.lo = f16_to_f32(lo);
    }
    return gp;
}

/* One value's stored (unsigned) code. qmin/qmax are the signed code range. */
static uint32_t code_of(float x, GroupParams gp, int32_t qmin, int32_t qmax) {
    if (gp.scale == 0.0f)
        return (uint32_t)gp.zero;        /* code 0 */
    float q = rintf((x - gp.lo) / gp.scale);
    q = fminf(fmaxf(q, (float)qmin), (float)qmax);
    return (uint32_t)((int32_t)q + gp.zero);
}

void int_quantize(const KvScheme *s, const float *x, size_t n, void *packed) {
    uint8_t *codes = packed;
    int b = s->bits;
    size_t gs = (size_t)s->group_size;
    int32_t qmin = s->symmetric ? -(1 << (b - 1)) : 0;
    int32_t qmax = s->symmetric ? (1 << (b - 1)) - 1 : (1 << b) - 1;
    for (size_t g = 0; g < n / gs; g++) {
        const float *xg = x + g * gs;
        GroupParams gp = choose_params(s, xg, (uint8_t *)params_at(s, codes, n, g));
        for (size_t j = 0; j < gs; j += 8) {
            uint32_t c[8];
            for (int k = 0; k < 8; k++)
                c[k] = code_of(xg[j + k], gp, qmin, qmax);
            pack8(c, b, codes + (g * gs + j) / 8 * (size_t)b);
        }
    }
}

/* q*scale + lo as two statements: C allows contracting a*b+c into one fma
 * only within an expression, and the reference rounds the product first. */
static inline float dequant_value(int32_t q, GroupParams gp) {
    float v = (float)q * gp.scale;
    return v + gp.lo;
}

/* One copy per width (constant `bits` after inlining: constant shifts). Attention decodes
 * cache rows through this, so it is as hot as dot/axpy; the arithmetic is dequant_value. */
static inline void dequantize_bits(const KvScheme *s, const uint8_t *codes, size_t n, float *x, int b) {
    size_t gs = (size_t)s->group_size;
    for (size_t g = 0; g < n / gs; g++) {
        GroupParams gp = read_params(s, params_at(s, codes, n, g));
        if (b == 4) {   /* two codes per byte, low nibble first: a loop the compiler vectorizes */
            const uint8_t *p = codes + g * gs / 2;
            float *xg = x + g * gs;
            for (size_t i = 0; i < gs / 2; i++) {
                xg[2 * i] = dequant_value((int32_t)(p[i] & 15u) - gp.zero, gp);
                xg[2 * i + 1] = dequant_value((int32_t)(p[i] >> 4) - gp.zero, gp);
            }
            continue;
        }
        for (size_t j = 0; j < gs; j += 8) {
            int32_t c[8];
            unpack8(codes + (g * gs + j) / 8 * (size_t)b, b, gp.zero, c);
            for (int k = 0; k < 8; k++)
                x[g * gs + j + k] = dequant_value(c[k], gp);
        }
    }
}

void int_dequantize(const KvScheme *s, const void *packed, size_t n, float *x) {
    switch (s->bits) {
    case 2: dequantize_bits(s, packed, n, x, 2); break;
    case 3: dequantize_bits(s, packed, n, x, 3); break;
    case 4: dequantize_bits(s, packed, n, x, 4); break;
    default: dequantize_bits(s, packed, n, x, 8); break;
    }
}

/* sum_i q[i]*c[i] over one group, in 8 independent lanes so the compiler can
 * keep them in one vector register (a single float accumulator would force a
 * serial chain, since float addition may not be reordered). Inlined with a
 * constant `bits`, so the unpacking shifts are constants. */
static inline void group_dot(const uint8_t *p, int bits, int32_t zero, const float *q,
                             size_t gs, float *sum_qc, float *sum_q) {
    float acc_qc[8] = {0}, acc_q[8] = {0};
    for (size_t j = 0; j < gs; j += 8) {
        int32_t c[8];
        unpack8(p + j / 8 * (size_t)bits, bits, zero, c);
        for (int k = 0; k < 8; k++) {
            acc_qc[k] += q[j + k] * (float)c[k];
            acc_q[k] += q[j + k];
        }
    }
    float a = 0.0f, b = 0.0f;
    for (int k = 0; k < 8; k++) {
        a += acc_qc[k];
        b += acc_q[k];
    }
    *sum_qc = a;
    *sum_q = b;
}

/* dot = sum over groups of scale*sum(q*c) + lo*sum(q): the dequantized values
 * q*scale + lo factored so the inner loop touches only codes. */
static float dot_bits(const KvScheme *s, const uint8_t *codes, const float *q, size_t n, int bits) {
    size_t gs = (size_t)s->group_size;
    float total = 0.0f;
    for (size_t g = 0; g < n / gs; g++) {
        GroupParams gp = read_params(s, params_at(s, codes, n, g));
        float sum_qc, sum_q;
        group_dot(codes + g * gs / 8 * (size_t)bits, bits, gp.zero, q + g * gs, gs, &sum_qc, &sum_q);
        total += gp.scale * sum_qc;
        if (!s->symmetric)
            total += gp.lo * sum_q;
    }
    return total;
}

float int_dot(const KvScheme *s, const void *packed, const float *q, size_t n) {
    switch (s->bits) {   /* one specialised copy per width: constant shifts */
    case 2: return dot_bits(s, packed, q, n, 2);
    case 3: return dot_bits(s, packed, q, n, 3);
    case 4: return dot_bits(s, packed, q, n, 4);
    default: return dot_bits(s, packed, q, n, 8);
    }
}

/* out += w * (c*scale + lo), with w folded into the group's parameters. */
static void axpy_bits(const KvScheme *s, const uint8_t *codes, float w, float *out, size_t n, int bits) {
    size_t gs = (size_t)s->group_size;
    for (size_t g = 0; g < n / gs; g++) {
        GroupParams gp = read_params(s, params_at(s, codes, n, g));
        float ws = w * gp.scale, wl = w * gp.lo;
        const uint8_t *p = codes + g * gs / 8 * (size_t)bits;
        float *o = out + g * gs;
        for (size_t j = 0; j < gs; j += 8) {
            int32_t c[8];
            unpack8(p + j / 8 * (size_t)bits, bits, gp.zero, c);
            for (int k = 0; k < 8; k++)
                o[j + k] += ws * (float)c[k] + wl;
        }
    }
}

void int_axpy(const KvScheme *s, const void *packed, float w, float *out, size_t n) {
    switch (s->bits) {
    case 2: axpy_bits(s, packed, w, out, n, 2); break;
    case 3: axpy_bits(s, packed, w, out, n, 3); break;
    case 4: axpy_bits(s, packed, w, out, n, 4); break;
    default: axpy_bits(s, packed, w, out, n, 8); break;
    }
}
