/* tests/nuq_vq_ref.h: the fitted bases of SCHEMES.md §8 restated, for the tests of nuqB-gG /
 * nuqB-tG (quant/codec_nuq.c: tests/test_codec_nuq.c) and vqC-dD (quant/codec_vq.c:
 * tests/test_codec_vq.c) and of their fits and scheme layer (tests/test_codec_nuq_vq_fit.c),
 * written from the definitions without the codecs' code:
 *   nuq, per group (G values along the row, or one channel along G positions):
 *     s = fp16(max|x|) over the finite values (65504 where fp16 would give inf); z = x / s;
 *     code = the nearest entry of T: argmin of the float32 squared distance, ties -> the lower
 *     index (z past the table's ends takes the end entry: +-inf and huge z included);
 *     s = 0 or z NaN -> the code of the entry nearest 0; x^ = T[code] * s.
 *   vq, per row of d values: r = fp16(||x||_2) (squares summed in double; r = 0 when not a
 *     finite half); z = x * sqrt(d) / r in float32; sub-vector j -> the nearest entry of
 *     codebook j ([d/D][2^C][D]; float32 squared distance summed left to right, each step
 *     rounded, ties -> the lower index); x^ = (r / sqrt(d)) * entry; r = 0 -> a zero unit.
 *   No table bound -> codes 0 and rows decode to 0.
 * Layouts read back bit by bit (code i in bits [i*B, i*B+B) of an LSB-first stream, fp16
 * little-endian after the codes; vq's last code byte padded with zeros). Also the seeded
 * tables and rows the three programs share. Only fp16 rounding is the library's (quant/half.h).
 * A file of its own so that each test file stays under 700 lines and the reference reads apart
 * from the checks. */
#ifndef KVQ_NUQ_VQ_REF_H
#define KVQ_NUQ_VQ_REF_H
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/scheme.h"
#include "tests/test_random.h"

static inline int same_float(float a, float b) { return to_bits(a) == to_bits(b); }
/* The same bits, or both NaN (decoding hostile bytes). */
static inline int same_or_nan(float a, float b) { return same_float(a, b) || (isnan(a) && isnan(b)); }

static inline KvBase base_of(const char *name) {
    KvBase b;
    char why[200] = "";
    if (kv_base_parse(name, &b, why, sizeof why) != 0) {
        printf("FAIL codec nuq/vq test setup: '%s' does not parse: %s\n", name, why);
        exit(1);
    }
    return b;
}

static inline void *alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL codec nuq/vq test setup: out of memory\n");
        exit(1);
    }
    return p;
}

/* How many of the n names bad[i][0] kv_base_parse refuses with a one-line message that names
 * the name and the part at fault (bad[i][1]); the first name that is not refused so goes into
 * first, for the check's failure line. */
static inline int count_refused(const char *const bad[][2], size_t n, char *first, size_t first_size) {
    int refused = 0;
    if (first_size) first[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        KvBase b;
        char why[200] = "";
        int rc = kv_base_parse(bad[i][0], &b, why, sizeof why);
        if (rc == -1 && strstr(why, bad[i][0]) && strstr(why, bad[i][1]) && !strchr(why, '\n')) refused++;
        else if (first_size && !first[0]) snprintf(first, first_size, "'%s': rc %d, why '%s'", bad[i][0], rc, why);
    }
    return refused;
}

/* The codec's decode_t64, where the build has one (AVX-512), against rows as they should
 * decode (want_rows[r * n + i], row r of the run): kt[i * 64 + p] = value i of row r0 + p for
 * p < count, +0 past count, bit for bit. Returns how many of the 64 * n values differ; 0
 * without a decode_t64. */
static inline int t64_differs(const KvBase *b, const uint8_t *units, int n, int r0, int count, const float *want_rows) {
    if (!b->codec->decode_t64) return 0;
    float *kt = alloc((size_t)64 * n * sizeof(float));
    memset(kt, 0xff, (size_t)64 * n * sizeof(float));
    b->codec->decode_t64(b, units, n, r0, count, kt);
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < 64; p++) {
            float want = p < count ? want_rows[(size_t)(r0 + p) * n + i] : 0.0f, got = kt[(size_t)i * 64 + p];
            bad += !same_float(got, want);
        }
    free(kt);
    return bad;
}

/* ---- shared pieces of the definitions -------------------------------------- */

/* Code i of a stream, bit by bit: stream bit k is bit k%8 of byte k/8. */
static inline unsigned get_bits(const uint8_t *p, size_t i, int bits) {
    unsigned c = 0;
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        c |= (unsigned)((p[bit / 8] >> (bit % 8)) & 1u) << k;
    }
    return c;
}

static inline void put_bits(uint8_t *p, size_t i, int bits, unsigned code) {
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        if ((code >> k) & 1u) p[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
}

static inline uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void set_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v & 0xff), p[1] = (uint8_t)(v >> 8); }

/* The float32 squared distance: each difference, square and partial sum rounded to float32
 * (volatile: no fused multiply-add), added left to right. */
static inline float ref_distance(const float *x, const float *c, int dim) {
    volatile float sum = 0.0f;
    for (int j = 0; j < dim; j++) {
        volatile float diff = x[j] - c[j];
        volatile float sq = diff * diff;
        sum = sum + sq;
    }
    return sum;
}

/* The nearest of k entries of dim values: first the smallest distance, then the lowest index
 * that has it (every distance NaN: 0). *tied counts points whose minimum two indices share. */
static inline int ref_nearest(const float *x, int dim, const float *book, int k, int *tied) {
    static float dist[1 << 12];
    float best = INFINITY;
    int have = 0;
    for (int c = 0; c < k; c++) {
        dist[c] = ref_distance(x, book + (size_t)c * dim, dim);
        if (!isnan(dist[c]) && (!have || dist[c] < best)) best = dist[c], have = 1;
    }
    if (!have) return 0;
    int first = -1, at_best = 0;
    for (int c = 0; c < k; c++)
        if (dist[c] == best) {
            if (first < 0) first = c;
            at_best++;
        }
    if (tied && at_best > 1) (*tied)++;
    return first;
}

/* ==== nuq ================================================================== */

typedef struct {
    int bits, group, tokens;
} NuqFmt;

static inline NuqFmt nuq_fmt(const KvBase *b) { return (NuqFmt){b->bits, b->group, b->axis == KV_AXIS_TOKENS}; }
static inline size_t nuq_values(NuqFmt f, int n) { return (size_t)n * (f.tokens ? (size_t)f.group : 1); }
static inline size_t nuq_code_bytes(NuqFmt f, int n) { return nuq_values(f, n) * (size_t)f.bits / 8; }
static inline size_t nuq_groups(NuqFmt f, int n) { return f.tokens ? (size_t)n : (size_t)(n / f.group); }
static inline size_t nuq_ref_unit_bytes(NuqFmt f, int n) { return nuq_code_bytes(f, n) + 2 * nuq_groups(f, n); }

/* First value of group g in a unit, and the step between its values. */
static inline size_t group_start(NuqFmt f, size_t g) { return f.tokens ? g : g * (size_t)f.group; }
static inline size_t group_stride(NuqFmt f, int n) { return f.tokens ? (size_t)n : 1; }

/* The code of z: past the table's ends, the end entry (the nearest, which a float32 distance
 * that overflows to inf for every entry would not tell); else the float32 argmin. */
static inline unsigned nuq_ref_code(const float *T, int K, float z, int *tied) {
    float lo = T[0], hi = T[0];
    for (int k = 1; k < K; k++) {
        if (T[k] < lo) lo = T[k];
        if (T[k] > hi) hi = T[k];
    }
    if (z < lo) z = lo;
    if (z > hi) z = hi;
    return (unsigned)ref_nearest(&z, 1, T, K, tied);
}

/* The scale of a group: fp16 of the largest finite |x|, 65504 in place of inf. */
static inline uint16_t nuq_ref_scale(const float *x, size_t stride, int count) {
    float amax = 0.0f;
    for (int i = 0; i < count; i++) {
        float v = x[(size_t)i * stride];
        if (isfinite(v) && fabsf(v) > amax) amax = fabsf(v);
    }
    uint16_t h = f32_to_f16(amax);
    return h == 0x7c00 ? 0x7bff : h;
}

/* One group: codes into q, x^ into xh[0], xh[stride], ...; returns the scale's bits. */
static inline uint16_t nuq_ref_group(const float *T, int K, const float *x, size_t stride, int count, unsigned *q,
                              float *xh, int *tied) {
    uint16_t h = nuq_ref_scale(x, stride, count);
    float s = f16_to_f32(h);
    const float zero = 0.0f;
    unsigned zero_code = T ? (unsigned)ref_nearest(&zero, 1, T, K, NULL) : 0;
    for (int i = 0; i < count; i++) {
        unsigned code = 0;
        if (T) {
            if (s == 0.0f) {
                code = zero_code;
            } else {
                volatile float z = x[(size_t)i * stride] / s;
                code = isnan(z) ? zero_code : nuq_ref_code(T, K, z, tied);
            }
        }
        q[i] = code;
        xh[(size_t)i * stride] = T ? T[code] * s : 0.0f;
    }
    return h;
}

/* One unit (gG: one row of n; tG: G rows of n): the expected bytes into want, x^ into xh. */
static inline void nuq_ref_unit(NuqFmt f, const float *T, const float *x, int n, uint8_t *want, float *xh, int *tied) {
    static unsigned q[4096];
    size_t cb = nuq_code_bytes(f, n);
    memset(want, 0, nuq_ref_unit_bytes(f, n));
    for (size_t g = 0; g < nuq_groups(f, n); g++) {
        size_t at = group_start(f, g);
        uint16_t h = nuq_ref_group(T, 1 << f.bits, x + at, group_stride(f, n), f.group, q, xh + at, tied);
        for (int i = 0; i < f.group; i++) put_bits(want, g * (size_t)f.group + (size_t)i, f.bits, q[i]);
        set_u16(want + cb + 2 * g, h);
    }
}

/* What decoding any unit's bytes gives, read through the layout: x^ = T[code] * fp16 scale. */
static inline void nuq_ref_decode_unit(NuqFmt f, const float *T, const uint8_t *unit, int n, float *xh) {
    size_t cb = nuq_code_bytes(f, n);
    for (size_t g = 0; g < nuq_groups(f, n); g++) {
        float s = f16_to_f32(get_u16(unit + cb + 2 * g));
        for (int i = 0; i < f.group; i++) {
            unsigned code = get_bits(unit, g * (size_t)f.group + (size_t)i, f.bits);
            xh[group_start(f, g) + (size_t)i * group_stride(f, n)] = T ? T[code] * s : 0.0f;
        }
    }
}

/* ---- tables ---- */

enum { TABLE_ASCENDING, TABLE_DUPLICATES, TABLE_GRID, TABLE_UNSORTED, TABLE_KINDS };
static const char *const TABLE_NAMES[TABLE_KINDS] = {"ascending", "with duplicates", "1/K grid", "unsorted"};

static inline int compare_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* A K-entry table: sorted normals; the same with entries 1 = 2 and K-2 = K-1 (duplicates); the
 * grid (k - K/2) * 2/K, whose midpoints are exact floats (and which holds 0); normals unsorted. */
static inline void make_table(int kind, int K, float *T, uint64_t *rng) {
    for (int k = 0; k < K; k++) T[k] = normal(rng) * 0.6f;
    if (kind == TABLE_UNSORTED) return;
    qsort(T, (size_t)K, sizeof *T, compare_float);
    if (kind == TABLE_DUPLICATES) {
        T[2] = T[1];
        T[K - 1] = T[K - 2];
    }
    if (kind == TABLE_GRID)
        for (int k = 0; k < K; k++) T[k] = (float)(k - K / 2) * (2.0f / (float)K);
}

/* ---- seeded groups (nuq) ---- */

/* Value i of a group of the given kind, with table T (K entries) for the kinds built on it. */
static inline float group_value(int kind, int i, const float *T, int K, float sc, uint64_t *rng) {
    float s0 = ldexpf(1.0f, (int)(next_u64(rng) % 13) - 6);   /* a power of two: z = x / s0 exact */
    switch (kind) {
    case 0: return sc * normal(rng) * (i == 5 ? 6.0f : 1.0f);
    case 1: {   /* on the entries: x = T[k] * s, with s = the group's max (value 0) */
        if (i == 0) return sc;
        float t = T[next_u64(rng) % (uint64_t)K];
        return fabsf(t) <= 1.0f ? t * sc : 0.0f;
    }
    case 2: {   /* on the midpoints of neighbouring entries */
        if (i == 0) return sc;
        int k = (int)(next_u64(rng) % (uint64_t)(K - 1));
        float m = (T[k] + T[k + 1]) / 2;
        return fabsf(m) <= 1.0f ? m * sc : 0.0f;
    }
    case 3: return 0.0f;                                    /* s = 0 */
    case 4: return 1e-9f * normal(rng);                     /* max below 2^-25: s = 0 */
    case 5: return sc * (float)(2 * uniform(rng) - 1);
    case 6: return 3e-6f * normal(rng);                     /* s a subnormal half */
    default: return s0 * normal(rng);
    }
}
enum { GROUP_KINDS = 8 };

/* Scales of groups of kinds 1 and 2 must be exact halves for z to land on entries. */
static inline float group_scale_for(int kind, uint64_t *rng) {
    if (kind == 1 || kind == 2) return ldexpf(1.0f, (int)(next_u64(rng) % 13) - 6);
    return (float)pow(10.0, uniform(rng) * 5 - 2);
}

/* The code the codec gives x in the group {amax, x, 0, ...} of nuq?-g8 with table T. */
static inline unsigned nuq_code_in_group(const KvBase *b, float amax, float x) {
    float row[8] = {amax, x, 0, 0, 0, 0, 0, 0};
    uint8_t unit[8 * 4 / 8 + 2];
    b->codec->encode(b, row, 8, unit);
    return get_bits(unit, 1, b->bits);
}

/* ==== vq =================================================================== */

static inline size_t vq_code_bytes(int C, int D, int n) { return ((size_t)(n / D) * (size_t)C + 7) / 8; }
static inline size_t vq_book_floats(int C, int D) { return ((size_t)1 << C) * (size_t)D; }

/* r's fp16 bits: the squares summed in double, the root rounded to float32 then to fp16; 0
 * when that is not a finite half. */
static inline uint16_t vq_ref_norm(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    double norm = sqrt(sum);
    float nf = isfinite(norm) && norm <= (double)FLT_MAX ? (float)norm : INFINITY;
    uint16_t h = f32_to_f16(nf);
    return (h & 0x7c00) == 0x7c00 ? 0 : h;
}

/* One row: the expected unit into want, x^ into xh. T = [n/D][2^C][D] or NULL. */
static inline void vq_ref_row(const float *T, int C, int D, const float *x, int n, uint8_t *want, float *xh, int *tied) {
    size_t cb = vq_code_bytes(C, D, n);
    memset(want, 0, cb + 2);
    uint16_t h = T ? vq_ref_norm(x, n) : 0;
    float r = f16_to_f32(h), sqrt_d = sqrtf((float)n);
    static float z[KV_MAX_HEAD_DIM];
    if (h != 0) {
        for (int i = 0; i < n; i++) {
            volatile float p = x[i] * sqrt_d;
            z[i] = p / r;
        }
        set_u16(want + cb, h);
    }
    volatile float scale = r / sqrt_d;
    for (int j = 0; j < n / D; j++) {
        const float *book = T ? T + (size_t)j * vq_book_floats(C, D) : NULL;
        unsigned code = h && T ? (unsigned)ref_nearest(z + (size_t)j * D, D, book, 1 << C, tied) : 0;
        put_bits(want, (size_t)j, C, code);
        for (int i = 0; i < D; i++) xh[j * D + i] = T ? scale * book[(size_t)code * D + i] : 0.0f;
    }
}

/* What decoding any row's bytes gives through the layout. */
static inline void vq_ref_decode_row(const float *T, int C, int D, const uint8_t *unit, int n, float *xh) {
    size_t cb = vq_code_bytes(C, D, n);
    volatile float scale = f16_to_f32(get_u16(unit + cb)) / sqrtf((float)n);
    for (int j = 0; j < n / D; j++) {
        unsigned code = get_bits(unit, (size_t)j, C);
        for (int i = 0; i < D; i++)
            xh[j * D + i] = T ? scale * T[(size_t)j * vq_book_floats(C, D) + (size_t)code * D + i] : 0.0f;
    }
}

/* Row kinds: normal at a random scale, an outlier channel, zero, tiny (r = 0), a subnormal r,
 * near the top of fp16 (r ~ 60000), uniform. */
static inline void vq_row(int kind, float *x, int n, uint64_t *rng) {
    float sc = (float)pow(10.0, uniform(rng) * 6 - 3);
    for (int i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = sc * normal(rng); break;
        case 1: x[i] = sc * normal(rng) * (i == 3 ? 30.0f : 1.0f); break;
        case 2: x[i] = 0.0f; break;
        case 3: x[i] = 1e-10f * normal(rng); break;
        case 4: x[i] = 2e-7f * normal(rng); break;
        case 5: x[i] = 60000.0f / sqrtf((float)n) * normal(rng) * 0.7f; break;
        default: x[i] = sc * (float)(2 * uniform(rng) - 1); break;
        }
    }
}
enum { VQ_ROW_KINDS = 7 };

#endif
