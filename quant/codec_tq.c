/* quant/codec_tq.c: tqB, B = 1..4, TurboQuant-style rotated Lloyd-Max codes (MSE variant),
 * as SCHEMES.md §3 defines it, on whole rows of d values (d a power of two, 8 <= d <= 4096):
 *   r   = fp16(||x||_2)
 *   s_i = -1 if bit 63 of ((i+1) * 0x9E3779B97F4A7C15 mod 2^64) is set, else +1
 *   u   = H(s . x)                        (H: the orthonormal Walsh-Hadamard rotation, hadamard.h)
 *   z   = u * sqrt(d) / r                 (float32, evaluated (u * sqrt(d)) / r as written)
 *   code_i = the nearest of the 2^B Lloyd-Max centroids of N(0,1) to z_i, ties to the lower index
 *   x^  = s . H(c[code] * r / sqrt(d));   r = 0 gives x^ = 0.
 * After the rotation each z_i is close to N(0,1) whatever the row looks like, which is what
 * lets one fixed codebook serve every row.
 *
 * Inner domain (codec.h). decode() returns c[code] * (r / sqrt(d)), the rotated values, and
 * rotate() moves rows between the domains: KV_TO_INNER x <- H(s . x), KV_FROM_INNER
 * x <- s . H(x). Both are orthonormal, so <q, x^> = <H(s . q), decode(x)>: attention rotates
 * the query (and its output) once per head instead of every cached row. encode() takes rows
 * in the natural domain.
 *
 * Layout of a unit (one row of n values), unit_bytes = B*n/8 + 2:
 *   bytes [0, B*n/8)       the n codes, unsigned 0 .. 2^B-1 (ascending centroids): code i
 *                          at bits [i*B, i*B+B) of a stream whose bit k is bit k%8 of byte
 *                          k/8 (the first code in the lowest bits; as quant/codec_int.c)
 *   bytes [B*n/8, +2)      r as fp16, little-endian
 * n >= 8 so that the codes fill whole bytes: B + 16/n stored bits per value (tq3, d=64: 3.25).
 *
 * Numerics and edge cases:
 * - ||x|| sums the squares in double, in index order, then takes the square root in double and
 *   rounds it to float32 and then to fp16. A float*float square is exact in double and the
 *   sum's error is ~1e-16 relative, so the float32 norm is (all but always) the correctly
 *   rounded ||x||, which every float32 summation order approximates within a few ulps; fp16
 *   rounding then erases the difference unless ||x|| lies within those ulps of an fp16
 *   rounding boundary. It also cannot overflow for finite inputs.
 * - Nearest centroid: z is compared, in double, with the exact midpoints (c_k + c_k+1)/2
 *   (a sum of two floats is exact in double), and the code counts the midpoints z exceeds:
 *   exact nearest-centroid, and a z exactly on a midpoint stays at the lower index. (A float32
 *   argmin |z - c_k| can disagree only for z within an ulp of a midpoint, or |z| below half
 *   an ulp of the smallest centroid, where it rounds both distances to the same value.)
 * - A row whose r is not finite (it holds a NaN or an infinity, or ||x|| >= 65520 rounds to
 *   fp16 infinity) is stored like a zero row: r = 0, all codes 0 (an all-zero unit), so it
 *   decodes to zeros. That keeps one bad row from turning every attention score into NaN.
 *   Codes are found by comparisons, never by float->int conversions.
 * - A row with r = 0 (a zero row, or ||x|| < 2^-25, below fp16's smallest subnormal) has all
 *   codes 0 and decodes to (signed) zeros, as the definition's "r = 0 -> x^ = 0" says.
 * - decode computes c[code] * (r / sqrt(d)) (float32, r / sqrt(d) rounded first: one product
 *   per table entry, then a lookup per code; with AVX-512, 16 codes per permute, same values),
 *   for whatever r a unit holds: units encode() did not write with r = inf or NaN decode to
 *   +-inf or NaN, without any undefined behaviour.
 * - Widths check() refuses (n not a power of two, n < 8, n > 4096) make encode, decode and
 *   rotate do nothing rather than overrun a row; callers check first (kv_base_check). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/hadamard.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#define TQ_MIN_N 8      /* the codes of a row fill whole bytes */
#define TQ_MAX_N 4096   /* encode's scratch row lives on the stack */

/* The B-bit Lloyd-Max quantizers of N(0,1), ascending (SCHEMES.md §3, float32 literals). */
static const float TQ_CENTROIDS[5][16] = {
    {0},
    {-0.7978845834732056f, 0.7978845834732056f},
    {-1.5104175806045532f, -0.4527800381183624f, 0.4527800381183624f, 1.5104175806045532f},
    {-2.1519455909729004f, -1.3439092636108398f, -0.7560052871704102f, -0.2450941801071167f,
     0.2450941801071167f, 0.7560052871704102f, 1.3439092636108398f, 2.1519455909729004f},
    {-2.7325894832611084f, -2.069017171859741f, -1.6180464029312134f, -1.2562311887741089f,
     -0.9423404335975647f, -0.6567591428756714f, -0.38804829120635986f, -0.12839503586292267f,
     0.12839503586292267f, 0.38804829120635986f, 0.6567591428756714f, 0.9423404335975647f,
     1.2562311887741089f, 1.6180464029312134f, 2.069017171859741f, 2.7325894832611084f},
};

/* ---- parsing ---- */

/* "tq" and a digit is this codec's name; exactly one digit 1..4 and nothing after it is valid. */
static int tq_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "tq", &p) || *p < '0' || *p > '9') return 0;
    if (*p < '1' || *p > '4' || (p[1] >= '0' && p[1] <= '9')) {
        snprintf(why, why_len, "%.40s: bits must be 1, 2, 3 or 4 (tq1 .. tq4)", name);
        return -1;
    }
    if (p[1] != '\0') {
        snprintf(why, why_len, "%.40s: tqB takes no parameters after the bits (the norm is per row)", name);
        return -1;
    }
    b->bits = *p - '0';
    b->group = 0;
    b->rows = 1;
    snprintf(b->name, sizeof b->name, "tq%d", b->bits);
    return 1;
}

static int tq_width_ok(int n) { return n >= TQ_MIN_N && n <= TQ_MAX_N && hadamard_size_ok(n); }

static int tq_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (!hadamard_size_ok(n)) {
        snprintf(why, why_len, "%s: rows of %d values: the Hadamard rotation needs a power of two", b->name, n);
        return 0;
    }
    if (!tq_width_ok(n)) {
        snprintf(why, why_len, "%s: rows of %d values: tq takes %d to %d values a row", b->name, n, TQ_MIN_N,
                 TQ_MAX_N);
        return 0;
    }
    return 1;
}

static size_t code_bytes(const KvBase *b, int n) { return (size_t)n * (size_t)b->bits / 8; }

static size_t tq_unit_bytes(const KvBase *b, int n) { return code_bytes(b, n) + 2; }

/* ---- the rotation ---- */

/* s_i = -1 when bit 63 of (i+1) * golden-ratio constant (mod 2^64, unsigned wrap) is set. */
static inline int sign_is_negative(int i) {
    uint64_t h = (uint64_t)(i + 1) * UINT64_C(0x9E3779B97F4A7C15);
    return (int)(h >> 63);
}

static void apply_signs(float *x, int n) {
    for (int i = 0; i < n; i++)
        if (sign_is_negative(i)) x[i] = -x[i];
}

static void tq_rotate(const KvBase *b, float *x, int n, KvRotation direction) {
    (void)b;
    if (!tq_width_ok(n)) return;
    if (direction == KV_TO_INNER) {
        apply_signs(x, n);
        hadamard(x, n);
    } else {
        hadamard(x, n);
        apply_signs(x, n);
    }
}

/* ---- encode ---- */

/* The code of z: how many midpoints between neighbouring centroids lie strictly below z. */
static inline uint32_t nearest_code(float z, const double *midpoints, int count) {
    uint32_t code = 0;
    for (int k = 0; k < count; k++) code += (double)z > midpoints[k];
    return code;
}

/* Eight codes of `bits` bits -> `bits` bytes, the first code in the lowest bits. */
static inline void pack8(const uint32_t c[8], int bits, unsigned char *p) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w |= (uint64_t)c[k] << (k * bits);
    for (int i = 0; i < bits; i++) p[i] = (unsigned char)(w >> (8 * i));
}

static void tq_encode(const KvBase *b, const float *x, int n, void *unit) {
    if (!tq_width_ok(n)) return;
    unsigned char *codes = unit;
    uint16_t r16 = f16_norm(x, n);
    memset(unit, 0, tq_unit_bytes(b, n));   /* r = 0: codes 0, r 0 */
    if (r16 == 0) return;
    kv_put_u16(codes + code_bytes(b, n), r16);

    const float *c = TQ_CENTROIDS[b->bits];
    int levels = 1 << b->bits;
    double midpoints[15];
    for (int k = 0; k + 1 < levels; k++) midpoints[k] = ((double)c[k] + (double)c[k + 1]) / 2.0;

    float u[TQ_MAX_N];
    memcpy(u, x, (size_t)n * sizeof *u);
    tq_rotate(b, u, n, KV_TO_INNER);
    float r = f16_to_f32(r16), sqrt_d = sqrtf((float)n);
    for (int j = 0; j < n; j += 8) {
        uint32_t c8[8];
        for (int k = 0; k < 8; k++) {
            float z = u[j + k] * sqrt_d / r;
            c8[k] = nearest_code(z, midpoints, levels - 1);
        }
        pack8(c8, b->bits, codes + (size_t)j / 8 * (size_t)b->bits);
    }
}

/* ---- decode ---- */

/* One row: the centroids scaled by r / sqrt(n) once, then a table lookup per code. `bits` is
 * a parameter so that each caller's copy has constant shifts. */
static inline void row_decode_bits(const unsigned char *row, int n, float *out, int bits) {
    const float *c = TQ_CENTROIDS[bits];
    const unsigned char *rp = row + (size_t)n * (size_t)bits / 8;
    float scale = f16_to_f32((uint16_t)kv_get_u16(rp)) / sqrtf((float)n);
    float table[16];
    for (int k = 0; k < (1 << bits); k++) table[k] = c[k] * scale;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    for (int j = 0; j < n; j += 8) {
        const unsigned char *p = row + (size_t)j / 8 * (size_t)bits;
        uint64_t w = 0;
        for (int i = 0; i < bits; i++) w |= (uint64_t)p[i] << (8 * i);
        for (int k = 0; k < 8; k++) out[j + k] = table[(w >> (k * bits)) & mask];
    }
}

#if defined(__AVX512F__)
/* Rows of a multiple of 16 values, 16 codes (2B bytes) a step: lanes 0-7 hold the bits of the
 * first 8 codes, lanes 8-15 those of the next 8, each lane shifts its own code down, and one
 * permute looks the 16 codes up in the 16-float table (unused entries of TQ_CENTROIDS are 0).
 * The table is the same products c[k] * (r / sqrt(n)) as the scalar path's: the same values. */
static inline void row_decode_avx512(const unsigned char *row, int n, float *out, int bits) {
    const __m512i shifts = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7),
                                              _mm512_set1_epi32(bits));
    const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
    const unsigned char *rp = row + (size_t)n * (size_t)bits / 8;
    __m512 r = _mm512_cvtph_ps(_mm256_set1_epi16((short)kv_get_u16(rp)));
    __m512 scale = _mm512_div_ps(r, _mm512_set1_ps(sqrtf((float)n)));
    __m512 table = _mm512_mul_ps(_mm512_loadu_ps(TQ_CENTROIDS[bits]), scale);
    for (int j = 0; j < n; j += 16) {
        const unsigned char *p = row + (size_t)j / 8 * (size_t)bits;
        uint64_t w = 0;
        for (int i = 0; i < 2 * bits; i++) w |= (uint64_t)p[i] << (8 * i);
        __m512i lanes = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32((int)(uint32_t)w),
                                                _mm512_set1_epi32((int)(uint32_t)(w >> (8 * bits))));
        __m512i codes = _mm512_and_si512(_mm512_srlv_epi32(lanes, shifts), mask);
        _mm512_storeu_ps(out + j, _mm512_permutexvar_ps(codes, table));
    }
}
#endif

static void row_decode(const unsigned char *row, int n, float *out, int bits) {
#if defined(__AVX512F__)
    if (n % 16 == 0) {
        switch (bits) {
        case 1: row_decode_avx512(row, n, out, 1); return;
        case 2: row_decode_avx512(row, n, out, 2); return;
        case 3: row_decode_avx512(row, n, out, 3); return;
        default: row_decode_avx512(row, n, out, 4); return;
        }
    }
#endif
    switch (bits) {   /* one copy per width: constant shifts */
    case 1: row_decode_bits(row, n, out, 1); break;
    case 2: row_decode_bits(row, n, out, 2); break;
    case 3: row_decode_bits(row, n, out, 3); break;
    default: row_decode_bits(row, n, out, 4); break;
    }
}

static void tq_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    if (!tq_width_ok(n)) return;
    size_t ub = tq_unit_bytes(b, n);
    for (int r = 0; r < count; r++)
        row_decode((const unsigned char *)units + (size_t)(r0 + r) * ub, n, out + (size_t)r * (size_t)n, b->bits);
}

/* SCHEMES.md §9: a slot is a channel after the rotation, the code its centroid's index; the one
 * parameter is the row's fp16 norm. */
static void tq_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n;
    *symbols = 1 << b->bits;
    *param_bits = 16;
}

static void tq_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    kv_unpack_codes(unit, b->bits, n, codes);
}

static void tq_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    kv_pack_codes(codes, b->bits, n, unit);
}

const KvCodec kv_codec_tq = {
    .syntax = "tqB",
    .summary = "B = 1..4 bit Lloyd-Max codes of N(0,1) after random signs and a Hadamard rotation, an fp16 norm per row "
        "(TurboQuant, MSE)",
    .examples = "tq4 tq3 tq2 tq1",
    .parse = tq_parse,
    .check = tq_check,
    .unit_bytes = tq_unit_bytes,
    .encode = tq_encode,
    .decode = tq_decode,
    .code_layout = tq_code_layout,
    .codes = tq_codes,
    .put_codes = tq_put_codes,
    .rotate = tq_rotate,
};
