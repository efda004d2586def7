/* model/kernels/vector.c: arithmetic on float arrays shared by the matmul dispatch (kernels.c),
 * the GEMM paths (gemm_*.c) and the forward pass: dot products, axpy, SwiGLU's activation,
 * softmax and the row maximum, bf16 attention's exponentials as pairs. Plain C loops the
 * compiler vectorizes; AVX-512 where it does not, and AVX2 where it does so poorly (softmax). See vector.h. */
#include "model/kernels/vector.h"
#include "model/kernels/worksplit.h"
#include "quant/half.h"
#include <stdint.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

float dot_f32(const float *x, const float *y, int n) {
    /* 16 independent sums: no reassociation needed for the compiler to use SIMD. */
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += x[i + j] * y[i + j];
    float sum = 0.0f;
    for (int j = 0; j < 16; j++) sum += acc[j];
    for (; i < n; i++) sum += x[i] * y[i];
    return sum;
}

void axpy_f32(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* condition ? a : b by masking bits. Written as ?: on floats, GCC (which may not move a
 * floating-point operation past a branch, since it could trap) leaves a branch in the loop,
 * and the loop does not vectorize; integer masks it turns into vector selects. */
static inline float select_f32(int condition, float a, float b) {
    uint32_t mask = (uint32_t)0 - (uint32_t)(condition != 0), ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    uint32_t bits = (ua & mask) | (ub & ~mask);
    float r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

static inline double select_f64(int condition, double a, double b) {
    uint64_t mask = (uint64_t)0 - (uint64_t)(condition != 0), ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    uint64_t bits = (ua & mask) | (ub & ~mask);
    double r;
    memcpy(&r, &bits, sizeof r);
    return r;
}

/* Cephes' expf, shared by exp_vec and its vector forms (exp16, exp8), which give the same bits
 * only while they use these same numbers: the clamps to the normal range, log2(e), ln 2 in two
 * parts (the first exact in a product with n), and the polynomial's coefficients, highest first. */
static const float EXP_MIN = -87.3f, EXP_MAX = 88.7f, EXP_LOG2E = 1.44269504088896341f;
static const float EXP_LN2_HI = 0.693359375f, EXP_LN2_LO = -2.12194440e-4f;
static const float EXP_POLY[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

/* e^x within ~2 ulp (Cephes' expf polynomial): branch-free, so loops over it vectorize,
 * where a libm call per element would not. Inputs are clamped to the normal range; NaN passes. */
static inline float exp_vec(float x_in) {
    /* selects rather than fminf/fmaxf, which are library calls under C11 rules */
    float x = select_f32(x_in > EXP_MIN, select_f32(x_in < EXP_MAX, x_in, EXP_MAX), EXP_MIN);
    float n = rintf(x * EXP_LOG2E);
    float r = x - n * EXP_LN2_HI;          /* ln 2 in two parts: exact product first */
    r = r - n * EXP_LN2_LO;
    float p = EXP_POLY[0];
    p = mul_add(p, r, EXP_POLY[1]);
    p = mul_add(p, r, EXP_POLY[2]);
    p = mul_add(p, r, EXP_POLY[3]);
    p = mul_add(p, r, EXP_POLY[4]);
    p = mul_add(p, r, EXP_POLY[5]);
    p = mul_add(p, r * r, r + 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;  /* 2^n, n in [-126, 128) after the clamp */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = select_f32(x_in < EXP_MIN, 0.0f, p * scale);   /* underflow (and -inf) -> 0 */
    return select_f32(x_in == x_in, y, x_in);                 /* NaN stays NaN */
}

void swiglu(float *gate, const float *up, size_t n) {
    /* elementwise, so a prefill batch splits over the threads with the same results */
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN_WORK)
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + exp_vec(-gate[i])) * up[i];
}

#if defined(__AVX512F__)
/* exp_vec on 16 lanes, operation for operation (the same bits). GCC leaves softmax's scalar
 * loops partly unvectorized (its running max, the tails), so it gets its own loops here. */
static inline __m512 exp16(__m512 x_in) {
    __m512 x = _mm512_min_ps(_mm512_max_ps(x_in, _mm512_set1_ps(EXP_MIN)), _mm512_set1_ps(EXP_MAX));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(EXP_POLY[0]);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[1]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[2]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[3]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[4]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[5]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(x_in, _mm512_set1_ps(EXP_MIN), _CMP_NLT_UQ), p, _mm512_castsi512_ps(bits));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x_in, x_in, _CMP_UNORD_Q), y, x_in);
}

void softmax(float *x, int n) {
    int full = n / 16 * 16;
    __mmask16 tail = (__mmask16)((1u << (n - full)) - 1);
    __m512 m = _mm512_set1_ps(x[0]);
    for (int i = 0; i < full; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    m = _mm512_max_ps(_mm512_mask_loadu_ps(m, tail, x + full), m);
    __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(m)), sum = _mm512_setzero_ps();
    for (int i = 0; i < full; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
        _mm512_storeu_ps(x + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), vmax));
    _mm512_mask_storeu_ps(x + full, tail, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(tail, e));
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int i = 0; i < full; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    _mm512_mask_storeu_ps(x + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), inv));
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
/* 2^t for t <= 0 to ~3.5e-6 relative, enough for weights that are rounded to bf16 (2^-9) next:
 * t = n + f with |f| <= 1/2, 2^f by a degree-4 polynomial (interpolated at the Chebyshev nodes
 * of [-1/2, 1/2], so its error is near the least possible for the degree), scaled by 2^n in one
 * instruction (vscalefps, which also takes t below ~-150 to 0). */
static inline __m512 exp2_16_coarse(__m512 t) {
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(0.00966636837f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0559219755f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240223497f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693121016f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

float exp_pairs(float *x, int n, float max, float scale, int n_out) {
    /* exp(scale (x - max)) = 2^(x s - max s) with s = scale log2(e): one fused multiply-subtract */
    float s = scale * 1.44269504088896341f;
    /* two sums (even and odd 16s): one sum's two adds per step were a chain as long as the step */
    __m512 vs = _mm512_set1_ps(s), vms = _mm512_set1_ps(max * s), sum = _mm512_setzero_ps(), sum_b = sum;
    uint32_t *out = (uint32_t *)x;
    for (int i = 0; i < n_out; i += 32) {
        /* the 32 floats at i are read before their 16 pairs go to out[i / 2 ..), below i + 32 */
        int left = n - i < 0 ? 0 : n - i < 32 ? n - i : 32, lo = left < 16 ? left : 16;
        __mmask16 in_lo = (__mmask16)((1u << lo) - 1), in_hi = (__mmask16)((1u << (left - lo)) - 1);
        __m512 a = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(in_lo, x + i), vs, vms);
        __m512 b = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(in_hi, x + i + 16), vs, vms);
        __m512 ea = _mm512_maskz_mov_ps(in_lo, exp2_16_coarse(a)), eb = _mm512_maskz_mov_ps(in_hi, exp2_16_coarse(b));
        sum = _mm512_add_ps(sum, ea);
        sum_b = _mm512_add_ps(sum_b, eb);
        int pairs = (n_out - i + 1) / 2 < 16 ? (n_out - i + 1) / 2 : 16;
        _mm512_mask_storeu_epi32(out + i / 2, (__mmask16)((1u << pairs) - 1), (__m512i)_mm512_cvtne2ps_pbh(eb, ea));
    }
    return 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum, sum_b));
}
#endif

float max_value(const float *x, int n) {
    /* four running maxes: one waits on vmaxps's latency (4 cycles) per 16 floats, where the
     * loads allow two per cycle. The max is the same in any order. */
    int full = n / 16 * 16, i = 0;
    __m512 m = _mm512_set1_ps(x[0]), m1 = m, m2 = m, m3 = m;
    for (; i + 64 <= full; i += 64) {
        m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    m = _mm512_max_ps(_mm512_max_ps(m, m1), _mm512_max_ps(m2, m3));
    for (; i < full; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    __mmask16 tail = (__mmask16)((1u << (n - full)) - 1);
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_mask_loadu_ps(m, tail, x + full), m));
}
#else
#if defined(__AVX__)
/* GCC does not vectorize the plain loop below (its lanes are a reduction through selects). */
float max_value(const float *x, int n) {
    __m256 m = _mm256_set1_ps(x[0]);
    int i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);   /* a NaN in x is skipped */
    float lane_max[8], max = x[0];
    _mm256_storeu_ps(lane_max, m);
    for (int j = 0; j < 8; j++) max = lane_max[j] > max ? lane_max[j] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}
#else
float max_value(const float *x, int n) {
    float lane_max[16], max = x[0];   /* 16 lanes: see softmax */
    for (int j = 0; j < 16; j++) lane_max[j] = x[0];
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane_max[j] = x[i + j] > lane_max[j] ? x[i + j] : lane_max[j];
    for (int j = 0; j < 16; j++) max = lane_max[j] > max ? lane_max[j] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
/* exp_vec on 8 lanes, operation for operation (the same bits: exp_vec's mul_add is fused on a
 * CPU with FMA). GCC's vectorization of exp_vec spends 33 instructions on 8 exponentials, its
 * clamps and selects as integer masks; here min/max and one blend (README.md in this folder,
 * "Exponentials"). */
static inline __m256 exp8(__m256 x_in) {
    __m256 x = _mm256_min_ps(_mm256_max_ps(x_in, _mm256_set1_ps(EXP_MIN)), _mm256_set1_ps(EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(EXP_LN2_HI)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(EXP_LN2_LO)));
    __m256 p = _mm256_set1_ps(EXP_POLY[0]);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[1]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[2]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[3]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[4]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[5]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 not_under = _mm256_cmp_ps(x_in, _mm256_set1_ps(EXP_MIN), _CMP_NLT_UQ);   /* underflow -> 0 */
    __m256 y = _mm256_and_ps(not_under, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
    return _mm256_blendv_ps(y, x_in, _mm256_cmp_ps(x_in, x_in, _CMP_UNORD_Q));   /* NaN stays NaN */
}

/* The plain loop's arithmetic in its order: lane j of the 16 sums takes x[i + j], the lanes
 * are added in order, then the tail. The exponentials and their sum in one pass. */
void softmax(float *x, int n) {
    __m256 max = _mm256_set1_ps(max_value(x, n)), sum_lo = _mm256_setzero_ps(), sum_hi = sum_lo;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), max));
        __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), max));
        _mm256_storeu_ps(x + i, lo);
        _mm256_storeu_ps(x + i + 8, hi);
        sum_lo = _mm256_add_ps(sum_lo, lo);
        sum_hi = _mm256_add_ps(sum_hi, hi);
    }
    float lane_sum[16], sum = 0.0f;
    _mm256_storeu_ps(lane_sum, sum_lo);
    _mm256_storeu_ps(lane_sum + 8, sum_hi);
    for (int j = 0; j < 16; j++) sum += lane_sum[j];
    for (; i < n; i++) {
        x[i] = _mm256_cvtss_f32(exp8(_mm256_sub_ps(_mm256_set1_ps(x[i]), max)));
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (i = 0; i < n; i++) x[i] *= inv;
}
#else
void softmax(float *x, int n) {
    /* max and sum in 16 lanes, like dot_f32: a single running max or sum is a serial
     * chain the compiler may not vectorize (float order matters to C) */
    float lane_sum[16] = {0}, max = max_value(x, n);
    int i;
    for (i = 0; i < n; i++) x[i] = exp_vec(x[i] - max);
    for (i = 0; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane_sum[j] += x[i + j];
    float sum = 0.0f;
    for (int j = 0; j < 16; j++) sum += lane_sum[j];
    for (; i < n; i++) sum += x[i];
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
#endif
#endif

/* Without AVX-512 BF16 (the tests' reference elsewhere): the same weights, one at a time. */
#if !(defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__))
float exp_pairs(float *x, int n, float max, float scale, int n_out) {
    /* floats and pairs share the memory: memcpy reads and writes it as bytes */
    unsigned char *bytes = (unsigned char *)x;
    float sum = 0.0f;
    for (int i = 0; 2 * i < n_out; i++) {
        float e[2] = {0.0f, 0.0f};
        for (int h = 0; h < 2; h++) {
            if (2 * i + h >= n) continue;
            float v;
            memcpy(&v, bytes + (size_t)(2 * i + h) * sizeof v, sizeof v);
            e[h] = exp_vec((v - max) * scale);
            sum += e[h];
        }
        uint32_t pair = f32_to_bf16(e[0]) | (uint32_t)f32_to_bf16(e[1]) << 16;
        memcpy(bytes + (size_t)i * sizeof pair, &pair, sizeof pair);
    }
    return 1.0f / sum;
}
#endif

/* ---- exponentials in double, summed: scoring a row of logits ---- */

/* 2^m for an integer-valued m in [-1022, 1023]: the exponent field m + 1023 built from the low
 * bits of (m + 1023) + 2^52 (the double whose last mantissa bits are that integer), shifted in
 * place. No conversion to an integer type, so loops over it vectorize on any SIMD width. */
static inline double pow2_integer(double m) {
    double biased = (m + 1023.0) + 0x1p52;
    uint64_t bits;
    memcpy(&bits, &biased, sizeof bits);
    bits <<= 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return scale;
}

/* e^x within 1 ulp, branch-free (libm's exp is a call per element; this vectorizes).
 * x = k ln2 + r with |r| <= ln2/2: ln 2 in fdlibm's two parts, the high one with 32 significant
 * bits so that k * high is exact and nothing is lost to cancellation. e^r by its Taylor series
 * to r^13 (the first term left out is below 5e-18 of the result), times 2^k in two factors
 * 2^k1 2^k2: the first product is exact, the second rounds once, also into the subnormals, and
 * overflows to infinity where e^x does. Outside [-1100, 710] (e^x is 0 or infinite there) the
 * arithmetic goes wrong and a select at the end replaces it; a NaN fails both comparisons and
 * stays NaN. */
static inline double exp_f64(double x) {
    double k = rint(x * 1.4426950408889634);
    double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    /* 1/13!, 1/12!, ..., 1/2!, then 1, 1: written out, so that no loop is left inside the caller's */
    double p = fma_f64(1.6059043836821613e-10, r, 2.08767569878681e-09);
    p = fma_f64(p, r, 2.505210838544172e-08);
    p = fma_f64(p, r, 2.755731922398589e-07);
    p = fma_f64(p, r, 2.7557319223985893e-06);
    p = fma_f64(p, r, 2.48015873015873e-05);
    p = fma_f64(p, r, 0.0001984126984126984);
    p = fma_f64(p, r, 0.001388888888888889);
    p = fma_f64(p, r, 0.008333333333333333);
    p = fma_f64(p, r, 0.041666666666666664);
    p = fma_f64(p, r, 0.16666666666666666);
    p = fma_f64(p, r, 0.5);
    p = fma_f64(p, r, 1.0);
    p = fma_f64(p, r, 1.0);
    double k1 = rint(k * 0.5), k2 = k - k1;
    double e = p * pow2_integer(k1) * pow2_integer(k2);
    e = select_f64(x < -1100.0, 0.0, e);
    return select_f64(x > 710.0, (double)INFINITY, e);
}

double exp_sum_f64(const float *x, int n, double shift, double *out) {
    /* chunks of 256: the exponentials in one plain loop (which the compiler vectorizes), then
     * added into the lanes in blocks of 8 (element i0 + j into lane j % 8, i0 a multiple of 8) */
    enum { CHUNK = 256 };
    double lane[8] = {0}, chunk[CHUNK];
    for (int i0 = 0; i0 < n; i0 += CHUNK) {
        int m = n - i0 < CHUNK ? n - i0 : CHUNK, j = 0;
        double *e = out ? out + i0 : chunk;
        for (int i = 0; i < m; i++) e[i] = exp_f64((double)x[i0 + i] - shift);
        for (; j + 8 <= m; j += 8)
            for (int l = 0; l < 8; l++) lane[l] += e[j + l];
        for (; j < m; j++) lane[j % 8] += e[j];
    }
    double sum = 0.0;
    for (int l = 0; l < 8; l++) sum += lane[l];
    return sum;
}
