/* tests/test_codec_nuq_vq.c: the fitted bases of SCHEMES.md §8, nuqB-gG / nuqB-tG
 * (quant/codec_nuq.c) and vqC-dD (quant/codec_vq.c), with hand-made tables set in KvBase.table
 * (a calibration fits the real ones), against the definitions restated here:
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
 * little-endian after the codes; vq's last code byte padded with zeros) and checked byte by byte
 * on hand-made rows whose bytes were worked out by hand. Also: names, refusals and bits a value;
 * seeded random rows and codebooks (ascending, duplicated, grid, unsorted tables), exact ties,
 * z on entries, s = 0 / r = 0, NaN, inf, huge values, hostile bytes; runs of rows across
 * token-axis units; the KvFit functions (shape, points, start, restated); and the scheme layer
 * (+had, +out, +res, +sink, the fit key). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"
#include "quant/scheme.h"
#include "tests/test.h"
#include "tests/test_random.h"

static int same_float(float a, float b) { return to_bits(a) == to_bits(b); }
/* The same bits, or both NaN (decoding hostile bytes). */
static int same_or_nan(float a, float b) { return same_float(a, b) || (isnan(a) && isnan(b)); }

static KvBase base_of(const char *name) {
    KvBase b;
    char why[200] = "";
    if (kv_base_parse(name, &b, why, sizeof why) != 0) {
        printf("FAIL codec nuq/vq test setup: '%s' does not parse: %s\n", name, why);
        exit(1);
    }
    return b;
}

static void *alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL codec nuq/vq test setup: out of memory\n");
        exit(1);
    }
    return p;
}

/* The codec's decode_t64, where the build has one (AVX-512), against rows as they should
 * decode (want_rows[r * n + i], row r of the run): kt[i * 64 + p] = value i of row r0 + p for
 * p < count, +0 past count, bit for bit. Returns how many of the 64 * n values differ; 0
 * without a decode_t64. */
static int t64_differs(const KvBase *b, const uint8_t *units, int n, int r0, int count, const float *want_rows) {
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
static unsigned get_bits(const uint8_t *p, size_t i, int bits) {
    unsigned c = 0;
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        c |= (unsigned)((p[bit / 8] >> (bit % 8)) & 1u) << k;
    }
    return c;
}

static void put_bits(uint8_t *p, size_t i, int bits, unsigned code) {
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        if ((code >> k) & 1u) p[bit / 8] |= (uint8_t)(1u << (bit % 8));
    }
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void set_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v & 0xff), p[1] = (uint8_t)(v >> 8); }

/* The float32 squared distance: each difference, square and partial sum rounded to float32
 * (volatile: no fused multiply-add), added left to right. */
static float ref_distance(const float *x, const float *c, int dim) {
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
static int ref_nearest(const float *x, int dim, const float *book, int k, int *tied) {
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

static NuqFmt nuq_fmt(const KvBase *b) { return (NuqFmt){b->bits, b->group, b->axis == KV_AXIS_TOKENS}; }
static size_t nuq_values(NuqFmt f, int n) { return (size_t)n * (f.tokens ? (size_t)f.group : 1); }
static size_t nuq_code_bytes(NuqFmt f, int n) { return nuq_values(f, n) * (size_t)f.bits / 8; }
static size_t nuq_groups(NuqFmt f, int n) { return f.tokens ? (size_t)n : (size_t)(n / f.group); }
static size_t nuq_ref_unit_bytes(NuqFmt f, int n) { return nuq_code_bytes(f, n) + 2 * nuq_groups(f, n); }

/* First value of group g in a unit, and the step between its values. */
static size_t group_start(NuqFmt f, size_t g) { return f.tokens ? g : g * (size_t)f.group; }
static size_t group_stride(NuqFmt f, int n) { return f.tokens ? (size_t)n : 1; }

/* The code of z: past the table's ends, the end entry (the nearest, which a float32 distance
 * that overflows to inf for every entry would not tell); else the float32 argmin. */
static unsigned nuq_ref_code(const float *T, int K, float z, int *tied) {
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
static uint16_t nuq_ref_scale(const float *x, size_t stride, int count) {
    float amax = 0.0f;
    for (int i = 0; i < count; i++) {
        float v = x[(size_t)i * stride];
        if (isfinite(v) && fabsf(v) > amax) amax = fabsf(v);
    }
    uint16_t h = f32_to_f16(amax);
    return h == 0x7c00 ? 0x7bff : h;
}

/* One group: codes into q, x^ into xh[0], xh[stride], ...; returns the scale's bits. */
static uint16_t nuq_ref_group(const float *T, int K, const float *x, size_t stride, int count, unsigned *q,
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
static void nuq_ref_unit(NuqFmt f, const float *T, const float *x, int n, uint8_t *want, float *xh, int *tied) {
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
static void nuq_ref_decode_unit(NuqFmt f, const float *T, const uint8_t *unit, int n, float *xh) {
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

static int compare_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* A K-entry table: sorted normals; the same with entries 1 = 2 and K-2 = K-1 (duplicates); the
 * grid (k - K/2) * 2/K, whose midpoints are exact floats (and which holds 0); normals unsorted. */
static void make_table(int kind, int K, float *T, uint64_t *rng) {
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

/* ---- names, sizes, bits ---- */

static void test_nuq_names(void) {
    static const struct {
        const char *text, *canonical;
        int bits, group, tokens;
    } ok[] = {
        {"nuq2-g64", "nuq2-g64", 2, 64, 0},     {"nuq3-g64", "nuq3-g64", 3, 64, 0},
        {"nuq4-g64", "nuq4-g64", 4, 64, 0},     {"nuq3-g8", "nuq3-g8", 3, 8, 0},
        {"nuq4-g4096", "nuq4-g4096", 4, 4096, 0}, {"nuq3-g064", "nuq3-g64", 3, 64, 0},
        {"nuq2-t64", "nuq2-t64", 2, 64, 1},     {"nuq3-t8", "nuq3-t8", 3, 8, 1},
        {"nuq4-t32", "nuq4-t32", 4, 32, 1},     {"nuq2-t4096", "nuq2-t4096", 2, 4096, 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        KvBase b;
        char why[200] = "", name[200];
        int rc = kv_base_parse(ok[i].text, &b, why, sizeof why);
        snprintf(name, sizeof name, "codec nuq: '%s' parses as %s (B %d, G %d, %s axis, %d rows a unit, no table yet)",
                 ok[i].text, ok[i].canonical, ok[i].bits, ok[i].group, ok[i].tokens ? "token" : "channel",
                 ok[i].tokens ? ok[i].group : 1);
        check(rc == 0 && !strcmp(b.name, ok[i].canonical) && b.bits == ok[i].bits && b.group == ok[i].group &&
                  b.axis == (ok[i].tokens ? KV_AXIS_TOKENS : KV_AXIS_CHANNELS) && b.rows == (ok[i].tokens ? ok[i].group : 1) &&
                  b.table == NULL && b.codec && b.codec->fit && strstr(b.codec->syntax, "nuqB"),
              name, "rc %d (%s) name '%s' bits %d group %d axis %d rows %d", rc, why, rc ? "" : b.name, b.bits, b.group,
              (int)b.axis, b.rows);
    }
    /* refused, the message naming the name and the part at fault */
    static const char *const bad[][2] = {
        {"nuq5-g64", "B = 2, 3 or 4"}, {"nuq1-g64", "B = 2, 3 or 4"},   {"nuq3-g63", "multiple of 8"},
        {"nuq3-g0", "multiple of 8"},  {"nuq3-g4104", "8 to 4096"},     {"nuq3-t12", "multiple of 8"},
        {"nuq3-x64", "nuqB-gG or nuqB-tG"}, {"nuq3", "nuqB-gG or nuqB-tG"}, {"nuq3-g", "group"},
        {"nuq3-g64x", "nuq3-g64x"},    {"nuq3-g64-asym", "nuq3-g64-asym"}, {"nuq3-t64+", "nuq3-t64+"},
        {"nuq", "nuqB-gG"},            {"nuq3g64", "nuqB-gG"},
    };
    int refused = 0;
    char first[300] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        KvBase b;
        char why[200] = "";
        int rc = kv_base_parse(bad[i][0], &b, why, sizeof why);
        if (rc == -1 && strstr(why, bad[i][0]) && strstr(why, bad[i][1]) && !strchr(why, '\n')) refused++;
        else if (!first[0]) snprintf(first, sizeof first, "'%s': rc %d, why '%s'", bad[i][0], rc, why);
    }
    check(refused == (int)(sizeof bad / sizeof bad[0]),
          "codec nuq: nuq5-g64, nuq3-g63, nuq3-x64, nuq3, trailing junk ... refused, the message naming the name and part",
          "%s", first);

    KvBase b = base_of("nuq3-g64");
    char why[200] = "";
    int ok_g = kv_base_check(&b, 128, why, sizeof why) && !kv_base_check(&b, 96, why, sizeof why) &&
               strstr(why, "64") && strstr(why, "96");
    check(ok_g, "codec nuq: nuq3-g64 stores rows of 128, not of 96 (the message names 64 and 96)", "why '%s'", why);
    b = base_of("nuq2-t32");
    check(kv_base_check(&b, 24, why, sizeof why) && kv_base_check(&b, 64, why, sizeof why) &&
              !kv_base_check(&b, 0, why, sizeof why),
          "codec nuq: nuq2-t32 stores rows of any width (24, 64), not of 0", "why '%s'", why);

    /* bytes and bits: codes B bits a value, an fp16 scale a group (gG: n/G a row; tG: n a unit) */
    static const struct {
        const char *text;
        int n;
        size_t bytes;
        double bits;
    } sizes[] = {
        {"nuq3-g64", 64, 24 + 2, 3.25},       {"nuq2-t64", 64, 1024 + 128, 2.25}, {"nuq4-g64", 64, 32 + 2, 4.25},
        {"nuq2-g64", 64, 16 + 2, 2.25},       {"nuq3-g8", 64, 24 + 16, 5.0},      {"nuq4-t8", 40, 160 + 80, 6.0},
        {"nuq3-g128", 256, 96 + 4, 3.125},    {"nuq3-t16", 64, 384 + 128, 4.0},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        b = base_of(sizes[i].text);
        KvSpec s = {.base = b};
        size_t got = b.codec->unit_bytes(&b, sizes[i].n);
        double bits = kv_spec_stored_bits(&s, sizes[i].n);
        char name[200];
        snprintf(name, sizeof name, "codec nuq: %s at d %d: %zu bytes a unit, %.4g stored bits a value", sizes[i].text,
                 sizes[i].n, sizes[i].bytes, sizes[i].bits);
        check(got == sizes[i].bytes && got == nuq_ref_unit_bytes(nuq_fmt(&b), sizes[i].n) && bits == sizes[i].bits, name,
              "bytes %zu bits %.17g", got, bits);
    }
    b = base_of("nuq3-g64");
    check(b.codec->rotate == NULL && !b.codec->llama_key_order, "codec nuq: no inner rotation, natural key order",
          "rotate %s, llama order %d", b.codec->rotate ? "set" : "NULL", b.codec->llama_key_order);
}

static void test_vq_names(void) {
    static const struct {
        const char *text, *canonical;
        int bits, dim;
    } ok[] = {
        {"vq8-d4", "vq8-d4", 8, 4},   {"vq8-d8", "vq8-d8", 8, 8},     {"vq12-d8", "vq12-d8", 12, 8},
        {"vq1-d1", "vq1-d1", 1, 1},   {"vq12-d16", "vq12-d16", 12, 16}, {"vq5-d4", "vq5-d4", 5, 4},
        {"vq4-d2", "vq4-d2", 4, 2},   {"vq08-d04", "vq8-d4", 8, 4},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        KvBase b;
        char why[200] = "", name[200];
        int rc = kv_base_parse(ok[i].text, &b, why, sizeof why);
        snprintf(name, sizeof name, "codec vq: '%s' parses as %s (C %d, D %d, one row a unit, no table yet)", ok[i].text,
                 ok[i].canonical, ok[i].bits, ok[i].dim);
        check(rc == 0 && !strcmp(b.name, ok[i].canonical) && b.bits == ok[i].bits && b.variant == ok[i].dim &&
                  b.rows == 1 && b.axis == KV_AXIS_CHANNELS && b.table == NULL && b.codec && b.codec->fit &&
                  strstr(b.codec->syntax, "vqC-dD"),
              name, "rc %d (%s) name '%s' bits %d D %d rows %d", rc, why, rc ? "" : b.name, b.bits, b.variant, b.rows);
    }
    static const char *const bad[][2] = {
        {"vq13-d4", "C = 1..12"}, {"vq0-d4", "C = 1..12"},  {"vq8-d3", "D = 1, 2, 4, 8 or 16"},
        {"vq8-d32", "D = 1, 2, 4, 8 or 16"}, {"vq8-d0", "D = 1, 2"}, {"vq8-d4x", "vq8-d4x"},
        {"vq8", "vqC-dD"},        {"vq8-g4", "vqC-dD"},     {"vq8-d", "vqC-dD"},
        {"vq8-d4-d4", "vq8-d4-d4"}, {"vq4096-d4", "C = 1..12"},
    };
    int refused = 0;
    char first[300] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        KvBase b;
        char why[200] = "";
        int rc = kv_base_parse(bad[i][0], &b, why, sizeof why);
        if (rc == -1 && strstr(why, bad[i][0]) && strstr(why, bad[i][1]) && !strchr(why, '\n')) refused++;
        else if (!first[0]) snprintf(first, sizeof first, "'%s': rc %d, why '%s'", bad[i][0], rc, why);
    }
    /* names vq does not claim: another codec's complaint or "unknown base" */
    KvBase b;
    char why[200] = "";
    int unknown = kv_base_parse("vq-d4", &b, why, sizeof why) == -1 && strstr(why, "unknown base 'vq-d4'");
    check(refused == (int)(sizeof bad / sizeof bad[0]) && unknown,
          "codec vq: vq13-d4, vq8-d3, vq8-d32, vq0-d4, trailing junk ... refused, the message naming the name and part",
          "%s / vq-d4: '%s'", first, why);

    b = base_of("vq8-d8");
    int ok_w = kv_base_check(&b, 64, why, sizeof why) && kv_base_check(&b, 8, why, sizeof why) &&
               !kv_base_check(&b, 12, why, sizeof why) && strstr(why, "8") && strstr(why, "12");
    check(ok_w, "codec vq: vq8-d8 stores rows of 64 and 8, not of 12 (the message names 8 and 12)", "why '%s'", why);
    b = base_of("vq8-d4");
    why[0] = '\0';
    int big = kv_base_check(&b, KV_MAX_HEAD_DIM, why, sizeof why) && !kv_base_check(&b, KV_MAX_HEAD_DIM + 4, why, sizeof why);
    check(big && strstr(why, "4100"), "codec vq: vq8-d4 stores rows of up to KV_MAX_HEAD_DIM (4096) values, not 4100 "
          "(encode's z lives in a buffer of that size)", "why '%s'", why);

    /* bytes: ceil(d/D * C / 8) code bytes, then the fp16 norm */
    static const struct {
        const char *text;
        int n;
        size_t bytes;
        double bits;
    } sizes[] = {
        {"vq8-d4", 64, 16 + 2, 2.25},  {"vq8-d8", 64, 8 + 2, 1.25},   {"vq12-d8", 64, 12 + 2, 1.75},
        {"vq5-d4", 64, 10 + 2, 1.5},   {"vq5-d16", 64, 3 + 2, 0.625}, {"vq9-d16", 48, 4 + 2, 1.0},
        {"vq1-d1", 11, 2 + 2, 4 * 8.0 / 11}, {"vq12-d16", 128, 12 + 2, 0.875}, {"vq3-d2", 64, 12 + 2, 1.75},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        b = base_of(sizes[i].text);
        KvSpec s = {.base = b};
        size_t got = b.codec->unit_bytes(&b, sizes[i].n);
        size_t formula = ((size_t)(sizes[i].n / b.variant) * (size_t)b.bits + 7) / 8 + 2;
        double bits = kv_spec_stored_bits(&s, sizes[i].n);
        char name[200];
        snprintf(name, sizeof name, "codec vq: %s at d %d: %zu bytes a row (%d codes of %d bits, padded), %.4g bits a value",
                 sizes[i].text, sizes[i].n, sizes[i].bytes, sizes[i].n / b.variant, b.bits, sizes[i].bits);
        check(got == sizes[i].bytes && got == formula && fabs(bits - sizes[i].bits) < 1e-12, name, "bytes %zu bits %.17g",
              got, bits);
    }
    b = base_of("vq8-d4");
    check(b.codec->rotate == NULL && !b.codec->llama_key_order, "codec vq: no inner rotation, natural key order",
          "rotate %s, llama order %d", b.codec->rotate ? "set" : "NULL", b.codec->llama_key_order);
}

/* Each fitted codec's `examples` (what ./run schemes lists) parse to themselves, store rows of 64,
 * are fitted and declare every part of KvFit but the optional check; nuq and vq are among them. */
static void test_examples(void) {
    int nuq = 0, vq = 0, bad = 0;
    char first[200] = "";
    for (int i = 0; i < kv_codec_count(); i++) {
        const KvCodec *c = kv_codec_at(i);
        if (!c->fit) continue;
        nuq += !strncmp(c->syntax, "nuqB", 4);
        vq += !strncmp(c->syntax, "vqC", 3);
        if (!c->fit->layout || !c->fit->scratch_bytes || !c->fit->fit || !c->fit->objective) {
            if (!bad++) snprintf(first, sizeof first, "%s: a KvFit function missing", c->syntax);
            continue;
        }
        char list[512];
        snprintf(list, sizeof list, "%s", c->examples);
        for (char *e = strtok(list, " "); e; e = strtok(NULL, " ")) {
            KvBase b;
            char why[200];
            KvSpec s;
            int ok = kv_base_parse(e, &b, why, sizeof why) == 0 && b.codec == c && !strcmp(b.name, e) &&
                     kv_base_check(&b, 64, why, sizeof why) && kv_spec_parse(e, KV_SIDE_KEYS, &s, why, sizeof why) == 0 &&
                     kv_spec_is_fitted(&s) && kv_spec_stored_bits(&s, 64) > 0;
            if (!ok && !bad++) snprintf(first, sizeof first, "'%.40s': %.150s", e, why);
        }
    }
    check(nuq == 1 && vq == 1 && bad == 0,
          "codec nuq/vq examples (./run schemes) of every fitted codec parse to themselves, take rows of 64 and are fitted",
          "nuq %d, vq %d, %d bad (%s)", nuq, vq, bad, first);
}

/* ---- random rows on both axes ---- */

/* Value i of a group of the given kind, with table T (K entries) for the kinds built on it. */
static float group_value(int kind, int i, const float *T, int K, float sc, uint64_t *rng) {
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
static float group_scale_for(int kind, uint64_t *rng) {
    if (kind == 1 || kind == 2) return ldexpf(1.0f, (int)(next_u64(rng) % 13) - 6);
    return (float)pow(10.0, uniform(rng) * 5 - 2);
}

static void test_nuq_random(const char *text, int n, int U, uint64_t *rng) {
    KvBase b = base_of(text);
    NuqFmt f = nuq_fmt(&b);
    int K = 1 << f.bits, G = f.group, rows = U * b.rows;
    size_t ub = b.codec->unit_bytes(&b, n), vals = (size_t)rows * n;
    float *x = alloc(vals * sizeof(float)), *want = alloc(vals * sizeof(float)), *got = alloc(vals * sizeof(float));
    float *one = alloc((size_t)n * sizeof(float)), T[16];
    uint8_t *buf = alloc((size_t)U * ub + 1), *units = buf + 1, *ref_bytes = alloc(ub);   /* units at an odd address */
    char name[240];
    for (int t = 0; t < TABLE_KINDS; t++) {
        make_table(t, K, T, rng);
        b.table = T;
        for (int u = 0; u < U; u++)
            for (size_t g = 0; g < nuq_groups(f, n); g++) {
                int kind = (int)((g + (size_t)u * 3 + (size_t)t) % GROUP_KINDS);
                float sc = group_scale_for(kind, rng);
                float *xg = x + (size_t)u * b.rows * n + group_start(f, g);
                for (int i = 0; i < G; i++) xg[(size_t)i * group_stride(f, n)] = group_value(kind, i, T, K, sc, rng);
            }
        memset(buf, 0xAA, (size_t)U * ub + 1);
        int bad_units = 0, ties = 0;
        size_t first_byte = 0;
        for (int u = 0; u < U; u++) {
            size_t at = (size_t)u * b.rows * n;
            b.codec->encode(&b, x + at, n, units + (size_t)u * ub);
            nuq_ref_unit(f, T, x + at, n, ref_bytes, want + at, &ties);
            if (memcmp(units + (size_t)u * ub, ref_bytes, ub) && !bad_units++)
                while (first_byte < ub && units[(size_t)u * ub + first_byte] == ref_bytes[first_byte]) first_byte++;
        }
        memset(got, 0xff, vals * sizeof(float));
        b.codec->decode(&b, units, n, 0, rows, got);
        int bad = 0;
        for (size_t i = 0; i < vals; i++) bad += !same_float(got[i], want[i]);
        snprintf(name, sizeof name, "codec nuq: %s d %d, %s table: codes, scales and x^ equal the definition bit for bit "
                 "(%d rows)", text, n, TABLE_NAMES[t], rows);
        check(bad_units == 0 && bad == 0, name, "%d units differ (first at byte %zu), %d values differ", bad_units,
              first_byte, bad);
        if (t == TABLE_GRID || t == TABLE_DUPLICATES) {
            snprintf(name, sizeof name, "codec nuq: %s d %d, %s table: the rows hold z with two nearest entries", text, n,
                     TABLE_NAMES[t]);
            check(ties > 0, name, "no ties in the data: the tie rule went unchecked");
        }
        /* single rows, and runs that start and end inside units and cross their boundaries */
        int bad_one = 0, bad_run = 0;
        for (int r = 0; r < rows; r++) {
            b.codec->decode(&b, units, n, r, 1, one);
            for (int i = 0; i < n; i++) bad_one += !same_float(one[i], want[(size_t)r * n + i]);
        }
        const int runs[][2] = {{0, 1}, {b.rows - 1, 2}, {3, 2 * b.rows}, {b.rows + 5, b.rows}, {1, rows - 1},
                               {2 * b.rows - 3, b.rows + 3}, {b.rows, b.rows}, {rows - 1, 1}};
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            int r0 = runs[k][0], count = runs[k][1];
            if (r0 < 0 || count < 1 || r0 + count > rows) continue;
            memset(got, 0xff, vals * sizeof(float));
            b.codec->decode(&b, units, n, r0, count, got);
            for (size_t i = 0; i < (size_t)count * n; i++) bad_run += !same_float(got[i], want[(size_t)r0 * n + i]);
        }
        snprintf(name, sizeof name, "codec nuq: %s d %d, %s table: a single row r and any run r0..r0+count-1 decode "
                 "to those rows%s", text, n, TABLE_NAMES[t], f.tokens ? " (row r = row r%G of unit r/G, runs across units)" : "");
        check(bad_one == 0 && bad_run == 0, name, "%d single-row, %d run values differ", bad_one, bad_run);
        /* attention's transposed blocks: whole blocks of 64 and runs of 16k (the token axis's
         * fast path), and runs that start and end anywhere */
        int bad_t64 = 0;
        const int blocks[][2] = {{0, 64}, {64, 64}, {16, 32}, {1, 63}, {5, 3}, {b.rows + 5, b.rows}, {rows - 1, 1},
                                 {0, rows}, {rows - 17, 17}};
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
            int r0 = blocks[k][0], count = blocks[k][1];
            if (r0 < 0 || count < 1 || count > 64 || r0 + count > rows) continue;
            bad_t64 += t64_differs(&b, units, n, r0, count, want);
        }
        snprintf(name, sizeof name, "codec nuq: %s d %d, %s table: decode_t64 (where built) gives the rows transposed, "
                 "0 past count", text, n, TABLE_NAMES[t]);
        check(bad_t64 == 0, name, "%d values differ", bad_t64);
    }
    free(x); free(want); free(got); free(one); free(buf); free(ref_bytes);
}

/* ---- ties, entries, zeros ---- */

/* The code the codec gives x in the group {amax, x, 0, ...} of nuq?-g8 with table T. */
static unsigned nuq_code_in_group(const KvBase *b, float amax, float x) {
    float row[8] = {amax, x, 0, 0, 0, 0, 0, 0};
    uint8_t unit[8 * 4 / 8 + 2];
    b->codec->encode(b, row, 8, unit);
    return get_bits(unit, 1, b->bits);
}

static void test_nuq_ties(void) {
    KvBase b = base_of("nuq3-g8");
    float grid[8];
    for (int k = 0; k < 8; k++) grid[k] = (float)(k - 4) * 0.25f;   /* -1, -0.75, ..., 0.75 */
    b.table = grid;
    /* z = each midpoint (exact: multiples of 1/8) through scales 1, 2^-6, 32: the lower index;
     * one float above: the upper, one below: the lower */
    int bad = 0, checked = 0;
    char why[240] = "";
    const float scales[] = {1.0f, 0x1.0p-6f, 32.0f};
    for (int k = 0; k < 7; k++) {
        float m = (grid[k] + grid[k + 1]) / 2, up = nextafterf(m, INFINITY), down = nextafterf(m, -INFINITY);
        for (int i = 0; i < 3; i++) {
            float s = scales[i];
            unsigned cm = nuq_code_in_group(&b, s, m * s), cu = nuq_code_in_group(&b, s, up * s),
                     cd = nuq_code_in_group(&b, s, down * s);
            checked += 3;
            if ((cm != (unsigned)k || cu != (unsigned)k + 1 || cd != (unsigned)k) && !bad++)
                snprintf(why, sizeof why, "midpoint %g (s %g): codes %u %u %u, want %d %d %d", m, s, cd, cm, cu, k, k, k + 1);
        }
    }
    char name[240];
    snprintf(name, sizeof name, "codec nuq: z on each of the 7 midpoints of a 1/4 grid -> the lower index, "
             "1 ulp above -> the upper (%d codes)", checked);
    check(bad == 0, name, "%s", why);

    /* a non-power-of-two scale: x with x / s exactly a midpoint */
    const float s = 0.7109375f;   /* a half */
    int found = 0, bad2 = 0;
    for (int k = 0; k < 7; k++) {
        float m = (grid[k] + grid[k + 1]) / 2, x = m * s;
        for (int d = -4; d <= 4; d++) {
            float y = x;
            for (int j = 0; j < abs(d); j++) y = nextafterf(y, d < 0 ? -INFINITY : INFINITY);
            if (y / s != m) continue;
            found++;
            bad2 += nuq_code_in_group(&b, s, y) != (unsigned)k;
        }
    }
    check(found >= 7 && bad2 == 0, "codec nuq: ties through the scale 0.7109375 (x / s exactly a midpoint) -> the lower index",
          "%d found, %d wrong", found, bad2);

    /* z exactly on each entry -> that entry; duplicated entries -> the lower of the two */
    float dup[8] = {-0.9f, -0.5f, -0.5f, -0.125f, 0.25f, 0.25f, 0.25f, 0.875f};
    const unsigned want_dup[8] = {0, 1, 1, 3, 4, 4, 4, 7};
    b.table = dup;
    int bad3 = 0;
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 3; i++) bad3 += nuq_code_in_group(&b, scales[i], dup[k] * scales[i]) != want_dup[k];
    /* z near a duplicated pair, either side: still the lower */
    bad3 += nuq_code_in_group(&b, 1.0f, -0.49f) != 1 || nuq_code_in_group(&b, 1.0f, -0.51f) != 1;
    bad3 += nuq_code_in_group(&b, 1.0f, 0.3f) != 4 || nuq_code_in_group(&b, 1.0f, 0.2f) != 4;
    check(bad3 == 0, "codec nuq: z exactly on each entry -> its index; duplicated entries -> the lowest of them", "%d wrong",
          bad3);

    /* s = 0: every code the entry nearest 0, x^ = T[code] * 0; a table without 0 whose two
     * nearest entries to 0 tie takes the lower */
    float sym[8] = {-1.0f, -0.5f, -0.25f, -0.125f, 0.125f, 0.25f, 0.5f, 1.0f};
    b.table = sym;
    float zeros[8] = {0, -0.0f, 0, 1e-9f, -2e-8f, 0, 0, 0x1.0p-25f}, out[8];
    uint8_t unit[5];
    b.codec->encode(&b, zeros, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    int bad4 = get_u16(unit + 3) != 0;
    for (int i = 0; i < 8; i++) bad4 += get_bits(unit, (size_t)i, 3) != 3 || !same_float(out[i], -0.125f * 0.0f);
    check(bad4 == 0, "codec nuq: a group with max|x| <= 2^-25: s = 0, every code the entry nearest 0 (-0.125 and 0.125 "
          "tie: the lower, 3), x^ = T[3] * 0 = -0", "%d wrong", bad4);
}

/* ---- NaN, infinities, huge values ---- */

static void test_nuq_nonfinite(uint64_t *rng) {
    KvBase b = base_of("nuq3-g8");
    float T[8] = {-1.0f, -0.6f, -0.3f, -0.1f, 0.05f, 0.2f, 0.5f, 0.95f};
    b.table = T;
    uint8_t unit[5], ref[5];
    float out[8], want[8];
    char name[240];
    static const struct {
        float x[8];
        const char *what;
        int idx;          /* a value to check: its code ... */
        unsigned code;
    } cases[] = {
        {{0.5f, NAN, -0.25f, 0.1f, -NAN, 0.3f, -0.7f, 0.05f}, "NaN values skipped by max|x|, coded as the entry nearest 0", 1, 4},
        {{0.5f, INFINITY, -0.25f, -INFINITY, 0, 0.3f, -0.7f, 0.05f}, "+inf skipped by max|x|, coded as the largest entry", 1, 7},
        {{0.5f, INFINITY, -0.25f, -INFINITY, 0, 0.3f, -0.7f, 0.05f}, "-inf skipped by max|x|, coded as the smallest entry", 3, 0},
        {{1e30f, 1, 2, -3, 4, 5, 6, -1e30f}, "1e30 past fp16: s = 65504, z huge -> the largest entry", 0, 7},
        {{1e30f, 1, 2, -3, 4, 5, 6, -1e30f}, "-1e30 past fp16: s = 65504, z huge -> the smallest entry", 7, 0},
        {{FLT_MAX, 0, 0, 0, 0, 0, 0, -70000.0f}, "FLT_MAX: s = 65504, the largest entry", 0, 7},
        {{65519.0f, 1, 2, 3, 4, 5, 6, 7}, "max|x| 65519 rounds to the half 65504", 0, 7},
        {{INFINITY, 0, 0, -INFINITY, 0, 0, 0, 0}, "+-inf in an otherwise zero group: s = 0, the code of 0", 0, 4},
        {{NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN}, "an all-NaN group: s = 0, the code of 0", 5, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ties = 0;
        memset(unit, 0xAA, sizeof unit);
        b.codec->encode(&b, cases[i].x, 8, unit);
        b.codec->decode(&b, unit, 8, 0, 1, out);
        nuq_ref_unit(nuq_fmt(&b), T, cases[i].x, 8, ref, want, &ties);
        int bad = memcmp(unit, ref, sizeof unit) != 0;
        for (int k = 0; k < 8; k++) bad += !same_float(out[k], want[k]) || !isfinite(out[k]);
        unsigned code = get_bits(unit, (size_t)cases[i].idx, 3);
        snprintf(name, sizeof name, "codec nuq: %s (bytes and x^ as defined, all finite)", cases[i].what);
        check(bad == 0 && code == cases[i].code, name, "%d differ, code of value %d %u want %u, scale 0x%04x", bad,
              cases[i].idx, code, cases[i].code, get_u16(unit + 3));
    }
    /* scale checks the cases above rely on */
    float inf_group[8] = {0.5f, INFINITY, -0.25f, -INFINITY, 0, 0.3f, -0.7f, 0.05f};
    b.codec->encode(&b, inf_group, 8, unit);
    check(get_u16(unit + 3) == f32_to_f16(0.7f), "codec nuq: the scale of a group holding +-inf is fp16 of its largest "
          "finite |x| (0.7)", "scale 0x%04x", get_u16(unit + 3));
    float huge[8] = {1e30f, 1, 2, -3, 4, 5, 6, -1e30f};
    b.codec->encode(&b, huge, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    check(get_u16(unit + 3) == 0x7bff && out[0] == 0.95f * 65504.0f && out[7] == -65504.0f,
          "codec nuq: +-1e30 in a group: scale 65504 (0x7bff), x^ = 0.95 * 65504 and -1 * 65504 (signs kept)",
          "scale 0x%04x, x^ %g %g", get_u16(unit + 3), out[0], out[7]);

    /* random bit patterns (NaN, inf, huge, subnormal) on both axes: as defined, all finite */
    const char *texts[] = {"nuq4-g64", "nuq2-t8"};
    for (int k = 0; k < 2; k++) {
        KvBase c = base_of(texts[k]);
        NuqFmt f = nuq_fmt(&c);
        float Tk[16];
        make_table(TABLE_ASCENDING, 1 << f.bits, Tk, rng);
        c.table = Tk;
        int n = 64, rows = c.rows;
        size_t ub = c.codec->unit_bytes(&c, n), vals = (size_t)rows * n;
        float *x = alloc(vals * sizeof(float)), *got = alloc(vals * sizeof(float)), *w = alloc(vals * sizeof(float));
        uint8_t *u = alloc(ub), *r = alloc(ub);
        int bad = 0, nonfinite = 0, ties = 0;
        for (int t = 0; t < 300; t++) {
            for (size_t i = 0; i < vals; i++)
                x[i] = i % 3 == 0 ? from_bits((uint32_t)next_u64(rng)) : normal(rng) * (float)(t % 7);
            c.codec->encode(&c, x, n, u);
            c.codec->decode(&c, u, n, 0, rows, got);
            nuq_ref_unit(f, Tk, x, n, r, w, &ties);
            bad += memcmp(u, r, ub) != 0;
            for (size_t i = 0; i < vals; i++) bad += !same_float(got[i], w[i]), nonfinite += !isfinite(got[i]);
        }
        snprintf(name, sizeof name, "codec nuq: %s 300 units of random float bit patterns: bytes and x^ as defined, all finite",
                 texts[k]);
        check(bad == 0 && nonfinite == 0, name, "%d differ, %d non-finite", bad, nonfinite);

        /* hostile bytes (any codes, NaN/inf/subnormal scales) decode as the layout reads */
        int bad_bytes = 0, bad_t64 = 0;
        for (int t = 0; t < 200; t++) {
            for (size_t i = 0; i < ub; i++) u[i] = (uint8_t)next_u64(rng);
            c.codec->decode(&c, u, n, 0, rows, got);
            nuq_ref_decode_unit(f, Tk, u, n, w);
            for (size_t i = 0; i < vals; i++) bad_bytes += !same_or_nan(got[i], w[i]);
            bad_t64 += t64_differs(&c, u, n, 0, rows, got);
        }
        snprintf(name, sizeof name, "codec nuq: %s 200 units of random bytes decode as the layout reads them "
                 "(T[code] * fp16 scale)", texts[k]);
        check(bad_bytes == 0, name, "%d values differ", bad_bytes);
        snprintf(name, sizeof name, "codec nuq: %s random bytes: decode_t64 (where built) = decode transposed, bit for "
                 "bit (NaN included)", texts[k]);
        check(bad_t64 == 0, name, "%d values differ", bad_t64);
        free(x); free(got); free(w); free(u); free(r);
    }
}

/* ---- no table, and the layout by hand ---- */

static void test_nuq_layout(uint64_t *rng) {
    /* nuq3-g8, rows of 16, T = {-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 1}: group 0 has s = 2 and
     * codes 7 0 3 5 1 6 2 4, group 1 s = 0.5 and codes 0..7. Worked out by hand: the 3-bit codes
     * LSB-first give C7 1A 8B and 88 C6 FA, then fp16 2 = 0x4000 and 0.5 = 0x3800, LE. */
    KvBase b = base_of("nuq3-g8");
    float T[8] = {-1.0f, -0.75f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 1.0f};
    b.table = T;
    const unsigned c0[8] = {7, 0, 3, 5, 1, 6, 2, 4};
    float x[16], out[16];
    for (int i = 0; i < 8; i++) x[i] = 2.0f * T[c0[i]], x[8 + i] = 0.5f * T[i];
    const uint8_t want[10] = {0xC7, 0x1A, 0x8B, 0x88, 0xC6, 0xFA, 0x00, 0x40, 0x00, 0x38};
    uint8_t unit[10];
    memset(unit, 0x55, sizeof unit);
    b.codec->encode(&b, x, 16, unit);
    b.codec->decode(&b, unit, 16, 0, 1, out);
    int bad = memcmp(unit, want, sizeof want) != 0;
    for (int i = 0; i < 16; i++) bad += !same_float(out[i], x[i]);
    check(bad == 0, "codec nuq: nuq3-g8 hand-made row: bytes C7 1A 8B 88 C6 FA | 00 40 00 38 (3-bit codes LSB-first, "
          "then fp16 scales LE), decoded back exactly",
          "got %02X %02X %02X %02X %02X %02X | %02X %02X %02X %02X", unit[0], unit[1], unit[2], unit[3], unit[4], unit[5],
          unit[6], unit[7], unit[8], unit[9]);

    /* nuq2-t8, rows of 2, T = {-1, -0.25, 0.25, 1}: channel 0 along the 8 positions has s = 4 and
     * codes 3 2 1 0 0 1 2 3, channel 1 s = 0.25 and codes 1 3 0 2 2 0 3 1: by hand 1B E4 | 8D 72 |
     * fp16 4 = 0x4400, 0.25 = 0x3400. */
    KvBase t = base_of("nuq2-t8");
    float T2[4] = {-1.0f, -0.25f, 0.25f, 1.0f};
    t.table = T2;
    const unsigned ch0[8] = {3, 2, 1, 0, 0, 1, 2, 3}, ch1[8] = {1, 3, 0, 2, 2, 0, 3, 1};
    for (int j = 0; j < 8; j++) x[2 * j] = 4.0f * T2[ch0[j]], x[2 * j + 1] = 0.25f * T2[ch1[j]];
    const uint8_t want_t[8] = {0x1B, 0xE4, 0x8D, 0x72, 0x00, 0x44, 0x00, 0x34};
    memset(unit, 0x55, sizeof unit);
    t.codec->encode(&t, x, 2, unit);
    t.codec->decode(&t, unit, 2, 0, 8, out);
    bad = memcmp(unit, want_t, sizeof want_t) != 0;
    for (int i = 0; i < 16; i++) bad += !same_float(out[i], x[i]);
    check(bad == 0, "codec nuq: nuq2-t8 hand-made unit of 8 rows of 2: bytes 1B E4 | 8D 72 | 00 44 00 34 (each channel's "
          "codes along the positions, then one fp16 scale a channel), decoded back exactly",
          "got %02X %02X %02X %02X | %02X %02X %02X %02X", unit[0], unit[1], unit[2], unit[3], unit[4], unit[5], unit[6],
          unit[7]);

    /* no table: codes 0, the scales as usual, rows decode to +0; a unit written with a table
     * decodes to +0 without one */
    const char *texts[] = {"nuq3-g64", "nuq2-t16"};
    for (int k = 0; k < 2; k++) {
        KvBase c = base_of(texts[k]);
        NuqFmt f = nuq_fmt(&c);
        int n = 64;
        size_t ub = c.codec->unit_bytes(&c, n), vals = (size_t)c.rows * n;
        float *xs = alloc(vals * sizeof(float)), *o = alloc(vals * sizeof(float)), *w = alloc(vals * sizeof(float));
        uint8_t *u = alloc(ub), *r = alloc(ub);
        for (size_t i = 0; i < vals; i++) xs[i] = normal(rng);
        int ties = 0;
        memset(u, 0x55, ub);
        c.codec->encode(&c, xs, n, u);
        nuq_ref_unit(f, NULL, xs, n, r, w, &ties);
        int bad_null = memcmp(u, r, ub) != 0;
        for (size_t i = 0; i < nuq_code_bytes(f, n); i++) bad_null += u[i] != 0;
        c.codec->decode(&c, u, n, 0, c.rows, o);
        for (size_t i = 0; i < vals; i++) bad_null += !same_float(o[i], 0.0f);
        float Tk[8];
        make_table(TABLE_ASCENDING, 1 << f.bits, Tk, rng);
        c.table = Tk;
        c.codec->encode(&c, xs, n, u);
        c.table = NULL;
        c.codec->decode(&c, u, n, 0, c.rows, o);
        for (size_t i = 0; i < vals; i++) bad_null += !same_float(o[i], 0.0f);
        char name[200];
        snprintf(name, sizeof name, "codec nuq: %s with no table: codes 0, scales as defined, every row decodes to +0 "
                 "(also a unit written with a table)", texts[k]);
        check(bad_null == 0, name, "%d wrong", bad_null);
        free(xs); free(o); free(w); free(u); free(r);
    }
}

/* ==== vq =================================================================== */

static size_t vq_code_bytes(int C, int D, int n) { return ((size_t)(n / D) * (size_t)C + 7) / 8; }
static size_t vq_book_floats(int C, int D) { return ((size_t)1 << C) * (size_t)D; }

/* r's fp16 bits: the squares summed in double, the root rounded to float32 then to fp16; 0
 * when that is not a finite half. */
static uint16_t vq_ref_norm(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    double norm = sqrt(sum);
    float nf = isfinite(norm) && norm <= (double)FLT_MAX ? (float)norm : INFINITY;
    uint16_t h = f32_to_f16(nf);
    return (h & 0x7c00) == 0x7c00 ? 0 : h;
}

/* One row: the expected unit into want, x^ into xh. T = [n/D][2^C][D] or NULL. */
static void vq_ref_row(const float *T, int C, int D, const float *x, int n, uint8_t *want, float *xh, int *tied) {
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
static void vq_ref_decode_row(const float *T, int C, int D, const uint8_t *unit, int n, float *xh) {
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
static void vq_row(int kind, float *x, int n, uint64_t *rng) {
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

static void test_vq_random(int n, int D, int C, uint64_t *rng) {
    char text[32], name[240];
    snprintf(text, sizeof text, "vq%d-d%d", C, D);
    KvBase b = base_of(text);
    int K = 1 << C, R = C >= 12 ? 8 : 21;
    size_t ub = b.codec->unit_bytes(&b, n), tf = (size_t)(n / D) * vq_book_floats(C, D);
    float *T = alloc(tf * sizeof(float)), *x = alloc((size_t)R * n * sizeof(float));
    float *want = alloc((size_t)R * n * sizeof(float)), *got = alloc((size_t)R * n * sizeof(float));
    uint8_t *buf = alloc((size_t)R * ub + 1), *units = buf + 1, *ref = alloc(ub);
    for (size_t i = 0; i < tf; i++) T[i] = normal(rng);
    b.table = T;
    for (int r = 0; r < R; r++) vq_row(r % VQ_ROW_KINDS, x + (size_t)r * n, n, rng);
    memset(buf, 0xAA, (size_t)R * ub + 1);
    int bad_units = 0, ties = 0, zero_rows = 0, distinct = 0;
    size_t first_byte = 0;
    unsigned first_code = ~0u;
    for (int r = 0; r < R; r++) {
        b.codec->encode(&b, x + (size_t)r * n, n, units + (size_t)r * ub);
        vq_ref_row(T, C, D, x + (size_t)r * n, n, ref, want + (size_t)r * n, &ties);
        zero_rows += get_u16(ref + vq_code_bytes(C, D, n)) == 0;
        for (int j = 0; j < n / D; j++) {
            unsigned code = get_bits(ref, (size_t)j, C);
            if (first_code == ~0u) first_code = code;
            distinct += code != first_code;
        }
        if (memcmp(units + (size_t)r * ub, ref, ub) && !bad_units++)
            while (first_byte < ub && units[(size_t)r * ub + first_byte] == ref[first_byte]) first_byte++;
    }
    memset(got, 0xff, (size_t)R * n * sizeof(float));
    b.codec->decode(&b, units, n, 0, R, got);
    int bad = 0;
    for (size_t i = 0; i < (size_t)R * n; i++) bad += !same_float(got[i], want[i]);
    int bad_run = 0;
    for (int r0 = 0; r0 < R; r0 += 5) {
        int count = R - r0 < 7 ? R - r0 : 7;
        memset(got, 0xff, (size_t)count * n * sizeof(float));
        b.codec->decode(&b, units, n, r0, count, got);
        for (size_t i = 0; i < (size_t)count * n; i++) bad_run += !same_float(got[i], want[(size_t)r0 * n + i]);
    }
    int bad_t64 = 0;
    for (int r0 = 0; r0 < R; r0 += 4) bad_t64 += t64_differs(&b, units, n, r0, R - r0, want);
    snprintf(name, sizeof name, "codec vq: %s at d %d (%d books of %d entries), %d seeded rows: codes, r and x^ equal the "
             "definition bit for bit, any run of rows decodes alike (decode_t64 too, where built)", text, n, n / D, K, R);
    check(bad_units == 0 && bad == 0 && bad_run == 0 && bad_t64 == 0 && zero_rows >= 2 && distinct > 0, name,
          "%d rows' bytes differ (first at byte %zu), %d values, %d run values, %d t64 values; %d zero rows, %d varied codes",
          bad_units, first_byte, bad, bad_run, bad_t64, zero_rows, distinct);
    (void)ties;

    /* hostile bytes: any codes and r (NaN, inf, subnormal) decode as the layout reads them */
    int bad_bytes = 0;
    for (int t = 0; t < 20; t++) {
        for (size_t i = 0; i < ub; i++) units[i] = (uint8_t)next_u64(rng);
        b.codec->decode(&b, units, n, 0, 1, got);
        vq_ref_decode_row(T, C, D, units, n, want);
        for (int i = 0; i < n; i++) bad_bytes += !same_or_nan(got[i], want[i]);
    }
    /* and a run of random rows through decode_t64, against decode (NaN included) */
    for (size_t i = 0; i < (size_t)R * ub; i++) units[i] = (uint8_t)next_u64(rng);
    b.codec->decode(&b, units, n, 0, R, got);
    int bad_t64_bytes = t64_differs(&b, units, n, 0, R, got) + t64_differs(&b, units, n, 3, R - 3, got);
    snprintf(name, sizeof name, "codec vq: %s at d %d: random bytes decode as the layout reads them ((r/sqrt(d)) * entry); "
             "decode_t64 (where built) = decode transposed", text, n);
    check(bad_bytes == 0 && bad_t64_bytes == 0, name, "%d values differ, %d t64 values", bad_bytes, bad_t64_bytes);
    free(T); free(x); free(want); free(got); free(buf); free(ref);
}

/* A row of +-1 (seeded signs): ||x|| = sqrt(64) = 8 exactly, so r = 8 and z = x * 8 / 8 = x. */
static void unit_row(float *x, int n, uint64_t *rng) {
    for (int i = 0; i < n; i++) x[i] = (next_u64(rng) & 1) ? 1.0f : -1.0f;
}

static void test_vq_ties(uint64_t *rng) {
    KvBase b = base_of("vq4-d4");
    const int n = 64, D = 4, K = 16, books = n / D;
    float x[64], out[64], want[64], T[16 * 16 * 4];
    uint8_t unit[10], ref[10];   /* 16 codes of 4 bits, then r */
    unit_row(x, n, rng);
    /* every entry far (5.0 in each value) but for a designed few per book */
    for (int i = 0; i < books * K * D; i++) T[i] = 5.0f;
    const unsigned want_code[4] = {3, 3, 5, 1};
    for (int j = 0; j < books; j++) {
        float *bk = T + (size_t)j * K * D;
        const float *zj = x + j * D;
        switch (j % 4) {
        case 0:   /* equidistant along the first value: z + 0.5 e0 at 3, z - 0.5 e0 at 7 */
        case 1:   /* ... and the same pair the other way round */
            for (int i = 0; i < D; i++) bk[3 * D + i] = bk[7 * D + i] = zj[i];
            bk[3 * D] += j % 4 == 0 ? 0.5f : -0.5f;
            bk[7 * D] += j % 4 == 0 ? -0.5f : 0.5f;
            break;
        case 2:   /* z itself at 5 and at 9 */
            for (int i = 0; i < D; i++) bk[5 * D + i] = bk[9 * D + i] = zj[i];
            break;
        default:  /* equidistant in two different directions: z + 0.5 e0 at 2, z - 0.5 e1 at 1 */
            for (int i = 0; i < D; i++) bk[1 * D + i] = bk[2 * D + i] = zj[i];
            bk[2 * D] += 0.5f;
            bk[1 * D + 1] -= 0.5f;
            break;
        }
    }
    b.table = T;
    int ties = 0;
    b.codec->encode(&b, x, n, unit);
    b.codec->decode(&b, unit, n, 0, 1, out);
    vq_ref_row(T, 4, D, x, n, ref, want, &ties);
    int bad = memcmp(unit, ref, sizeof unit) != 0 || get_u16(unit + 8) != 0x4800;
    for (int j = 0; j < books; j++) bad += get_bits(unit, (size_t)j, 4) != want_code[j % 4];
    for (int i = 0; i < n; i++) bad += !same_float(out[i], want[i]);
    check(bad == 0 && ties == books, "codec vq: exact ties (a sub-vector equidistant to two entries, either order or "
          "direction; two equal entries) -> the lower index, r = 8 stored 0x4800",
          "%d wrong, %d ties in the reference (want %d), codes %u %u %u %u", bad, ties, books, get_bits(unit, 0, 4),
          get_bits(unit, 1, 4), get_bits(unit, 2, 4), get_bits(unit, 3, 4));

    /* the same books for a row of +-0.3: r = fp16(2.4) = 2.400390625, z = x * 8 / r just inside
     * +-1, off the ties: the definition decides */
    float y[64];
    for (int i = 0; i < n; i++) y[i] = 0.3f * x[i];
    uint8_t u2[10];
    b.codec->encode(&b, y, n, u2);
    vq_ref_row(T, 4, D, y, n, ref, want, &ties);
    check(memcmp(u2, ref, sizeof u2) == 0 && get_u16(u2 + 8) == f32_to_f16(2.4f),
          "codec vq: the tie books with a row of +-0.3 (r = fp16(2.4), z off the ties) code as the definition", "differs");
}

/* Exact ties in books of 256 entries (vq8-d4): a search that scans the entries in blocks, lanes
 * or several running minima must still give the first of equal distances. Book j holds z's
 * sub-vector itself (distance 0) at two entries, the pairs spread over the whole book: adjacent
 * entries, entries 16, 32 or 64 apart, the higher one first in some scan orders, the ends. */
static void test_vq_ties_wide(uint64_t *rng) {
    KvBase b = base_of("vq8-d4");
    enum { N = 64, D = 4, K = 256, BOOKS = N / D };
    static const int pairs[BOOKS][2] = {{3, 35}, {3, 19}, {3, 4},    {17, 34},  {200, 255}, {0, 255},
                                        {16, 32}, {31, 240}, {100, 101}, {64, 128}, {5, 21},   {250, 251},
                                        {15, 16}, {47, 48},  {1, 2},     {128, 129}};
    float x[N], out[N], want[N];
    static float T[BOOKS * K * D];
    uint8_t unit[BOOKS + 2], ref[BOOKS + 2];
    unit_row(x, N, rng);   /* r = 8, z = x exactly */
    for (int i = 0; i < BOOKS * K * D; i++) T[i] = 5.0f;
    for (int j = 0; j < BOOKS; j++)
        for (int e = 0; e < 2; e++)
            for (int i = 0; i < D; i++) T[((size_t)j * K + (size_t)pairs[j][e]) * D + i] = x[j * D + i];
    b.table = T;
    int ties = 0, bad = 0;
    b.codec->encode(&b, x, N, unit);
    b.codec->decode(&b, unit, N, 0, 1, out);
    vq_ref_row(T, 8, D, x, N, ref, want, &ties);
    bad += memcmp(unit, ref, sizeof unit) != 0;
    for (int j = 0; j < BOOKS; j++) bad += unit[j] != pairs[j][0];
    for (int i = 0; i < N; i++) bad += !same_float(out[i], want[i]);
    check(bad == 0 && ties == BOOKS, "codec vq: exact ties in books of 256 entries (pairs adjacent, 16, 32, 64 apart, at "
          "the ends) -> the lower index", "%d wrong, %d ties in the reference (want %d), codes %u %u %u %u", bad, ties,
          BOOKS, unit[0], unit[1], unit[2], unit[3]);
}


/* z as written, to the last bit: tables holding both z = x / s and the other way to round it,
 * x * (1 / s) (nuq), or z = (x * sqrt(d)) / r and x * (sqrt(d) / r), x / (r / sqrt(d)) (vq),
 * where they differ, must give the entry of the written one. */
static void test_z_rounding(uint64_t *rng) {
    KvBase b = base_of("nuq3-g8");
    int found = 0, bad = 0;
    for (int t = 0; t < 4000 && found < 200; t++) {
        float amax = (float)(0.5 + uniform(rng) * 40), s = round_to_f16(amax);
        float x = (float)(2 * uniform(rng) - 1) * s;
        volatile float inv = 1.0f / s;
        volatile float z_div = x / s, z_mul = x * inv;
        if (z_div == z_mul) continue;
        found++;
        float T[8] = {-10, z_div, z_mul, 10, 11, 12, 13, 14};
        if (found % 2) T[1] = z_mul, T[2] = z_div;
        b.table = T;
        bad += nuq_code_in_group(&b, amax, x) != (found % 2 ? 2u : 1u);
    }
    check(found == 200 && bad == 0, "codec nuq: z = x / s to the last bit (200 values where x * (1/s) rounds "
          "differently, both in the table: the codes of x / s)", "%d found, %d wrong", found, bad);

    KvBase v = base_of("vq2-d1");
    const int n = 128;
    float x[128], T[128 * 4], out[128], want[128];
    uint8_t unit[34], ref[34];
    int differ = 0, bad_vq = 0;
    for (int t = 0; t < 8; t++) {
        for (int i = 0; i < n; i++) x[i] = normal(rng) * (float)(t + 1);
        float r = f16_to_f32(vq_ref_norm(x, n)), sd = sqrtf((float)n);
        for (int j = 0; j < n; j++) {
            volatile float p = x[j] * sd, q = sd / r, w = r / sd;
            volatile float z1 = p / r, z2 = x[j] * q, z3 = x[j] / w;
            differ += z1 != z2 || z1 != z3;
            float *bk = T + 4 * j;
            bk[0] = z1, bk[1] = z2, bk[2] = z3, bk[3] = 1000.0f;
            if (j % 2 && z1 != z2) bk[0] = z2, bk[1] = z1;
        }
        v.table = T;
        int ties = 0;
        v.codec->encode(&v, x, n, unit);
        v.codec->decode(&v, unit, n, 0, 1, out);
        vq_ref_row(T, 2, 1, x, n, ref, want, &ties);
        bad_vq += memcmp(unit, ref, sizeof unit) != 0;
        for (int i = 0; i < n; i++) bad_vq += !same_float(out[i], want[i]);
    }
    check(differ > 20 && bad_vq == 0, "codec vq: z = (x * sqrt(d)) / r to the last bit at d 128 (codebooks holding it "
          "and x * (sqrt(d) / r), x / (r / sqrt(d)) where those round differently)", "%d values differ, %d wrong",
          differ, bad_vq);
}

static void test_vq_special(uint64_t *rng) {
    KvBase b = base_of("vq8-d4");
    const int n = 64, C = 8, D = 4;
    size_t tf = (size_t)(n / D) * vq_book_floats(C, D);
    float *T = alloc(tf * sizeof(float)), x[64], out[64], want[64];
    for (size_t i = 0; i < tf; i++) T[i] = normal(rng);
    b.table = T;
    uint8_t unit[18], ref[18];
    char name[200];
    static const struct {
        const char *what;
        int zero;   /* the row must come out as the all-zero unit */
    } cases[] = {
        {"a zero row: r = 0, an all-zero unit, x^ = (0/8) * entry 0", 1},
        {"a row with ||x|| < 2^-25: r = 0, an all-zero unit", 1},
        {"a NaN in the row: r = 0, an all-zero unit, decodes to zeros", 1},
        {"+inf in the row: r = 0, an all-zero unit", 1},
        {"-inf in the row: r = 0, an all-zero unit", 1},
        {"||x|| >= 65520 (past fp16): r = 0, an all-zero unit", 1},
        {"finite values whose squares overflow float32 (1e20): r = 0, an all-zero unit", 1},
        {"||x|| = 65504 exactly: r = 0x7bff, coded", 0},
        {"||x|| = 65519: r rounds to 65504, coded", 0},
        {"||x|| a subnormal half (~1e-6): coded", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int i = 0; i < n; i++) x[i] = normal(rng);
        switch (k) {
        case 0: memset(x, 0, sizeof x); break;
        case 1: for (int i = 0; i < n; i++) x[i] *= 1e-10f; break;
        case 2: x[17] = NAN; break;
        case 3: x[0] = INFINITY; break;
        case 4: x[63] = -INFINITY; break;
        case 5: memset(x, 0, sizeof x), x[5] = 65520.0f; break;
        case 6: for (int i = 0; i < n; i++) x[i] = 1e20f; break;
        case 7: memset(x, 0, sizeof x), x[9] = -65504.0f; break;
        case 8: memset(x, 0, sizeof x), x[9] = 65519.0f; break;
        default: for (int i = 0; i < n; i++) x[i] *= 1.5e-7f; break;
        }
        int ties = 0;
        memset(unit, 0x55, sizeof unit);
        b.codec->encode(&b, x, n, unit);
        b.codec->decode(&b, unit, n, 0, 1, out);
        vq_ref_row(T, C, D, x, n, ref, want, &ties);
        int bad = memcmp(unit, ref, sizeof unit) != 0;
        int zero_unit = 1;
        for (size_t i = 0; i < sizeof unit; i++) zero_unit &= unit[i] == 0;
        for (int i = 0; i < n; i++) bad += !same_float(out[i], want[i]) || !isfinite(out[i]) || (cases[k].zero && out[i] != 0.0f);
        snprintf(name, sizeof name, "codec vq: %s", cases[k].what);
        check(bad == 0 && zero_unit == cases[k].zero, name, "%d differ, zero unit %d, r 0x%04x", bad, zero_unit,
              get_u16(unit + 16));
    }

    /* no table: an all-zero unit, zeros; a unit written with a table decodes to zeros without one */
    for (int i = 0; i < n; i++) x[i] = normal(rng);
    b.table = NULL;
    memset(unit, 0x55, sizeof unit);
    b.codec->encode(&b, x, n, unit);
    b.codec->decode(&b, unit, n, 0, 1, out);
    int bad = 0;
    for (size_t i = 0; i < sizeof unit; i++) bad += unit[i] != 0;
    for (int i = 0; i < n; i++) bad += !same_float(out[i], 0.0f);
    b.table = T;
    b.codec->encode(&b, x, n, unit);
    b.table = NULL;
    b.codec->decode(&b, unit, n, 0, 1, out);
    for (int i = 0; i < n; i++) bad += !same_float(out[i], 0.0f);
    check(bad == 0 && get_u16(unit + 16) != 0, "codec vq: with no table an all-zero unit and +0 rows; a unit written with "
          "a table decodes to +0 without one", "%d wrong", bad);

    /* random float bit patterns: as defined, finite */
    b.table = T;
    int bad_rand = 0, nonfinite = 0;
    for (int t = 0; t < 500; t++) {
        for (int i = 0; i < n; i++) x[i] = t % 2 ? from_bits((uint32_t)next_u64(rng)) : normal(rng) * (float)(t % 11);
        if (t % 2) x[t % n] = normal(rng);
        int ties = 0;
        b.codec->encode(&b, x, n, unit);
        b.codec->decode(&b, unit, n, 0, 1, out);
        vq_ref_row(T, C, D, x, n, ref, want, &ties);
        bad_rand += memcmp(unit, ref, sizeof unit) != 0;
        for (int i = 0; i < n; i++) bad_rand += !same_float(out[i], want[i]), nonfinite += !isfinite(out[i]);
    }
    check(bad_rand == 0 && nonfinite == 0, "codec vq: 500 rows of random float bit patterns and normals: bytes and x^ as "
          "defined, all finite", "%d differ, %d non-finite", bad_rand, nonfinite);
    free(T);
}

/* The layout by hand: books whose only near entry is the one chosen, rows of +-1 (r = 8, z = x). */
static void vq_layout_case(const char *text, int n, const unsigned *codes, const uint8_t *want_codes, size_t n_bytes,
                           uint64_t *rng, const char *name) {
    KvBase b = base_of(text);
    int C = b.bits, D = b.variant, K = 1 << C;
    size_t tf = (size_t)(n / D) * vq_book_floats(C, D), ub = b.codec->unit_bytes(&b, n);
    float *T = alloc(tf * sizeof(float)), *x = alloc((size_t)n * sizeof(float)), *out = alloc((size_t)n * sizeof(float));
    uint8_t *unit = alloc(ub);
    int pm_one = n == 64;   /* else: signs coded by +-5 entries in a 1-bit, D = 1 codebook */
    if (pm_one) unit_row(x, n, rng);
    for (size_t i = 0; i < tf; i++) T[i] = 9.0f;
    for (int j = 0; j < n / D; j++) {
        float *bk = T + (size_t)j * K * D;
        if (pm_one) {
            for (int i = 0; i < D; i++) bk[(size_t)codes[j] * D + i] = x[j * D + i];
        } else {
            x[j] = codes[j] ? 1.0f : -1.0f;
            bk[0] = -5.0f, bk[1] = 5.0f;
        }
    }
    b.table = T;
    memset(unit, 0xFF, ub);   /* the padding must come out 0 */
    b.codec->encode(&b, x, n, unit);
    b.codec->decode(&b, unit, n, 0, 1, out);
    uint16_t r = pm_one ? 0x4800 : f32_to_f16((float)sqrt((double)n));
    int bad = ub != n_bytes + 2 || memcmp(unit, want_codes, n_bytes) != 0 || get_u16(unit + n_bytes) != r;
    float scale = f16_to_f32(r) / sqrtf((float)n);
    for (int j = 0; j < n / D; j++)
        for (int i = 0; i < D; i++) bad += !same_float(out[j * D + i], scale * T[(size_t)j * K * D + (size_t)codes[j] * D + i]);
    char got[64] = "";
    for (size_t i = 0; i < ub && i < 14; i++) snprintf(got + 3 * i, sizeof got - 3 * i, "%02X ", unit[i]);
    check(bad == 0, name, "got %s", got);
    free(T); free(x); free(out); free(unit);
}

static void test_vq_layout(uint64_t *rng) {
    /* worked out by hand: codes c_j at bits [j*C, j*C+C), LSB-first */
    const unsigned c5[4] = {0x15, 0x0A, 0x1F, 0x03};
    const uint8_t b5[3] = {0x55, 0xFD, 0x01};
    vq_layout_case("vq5-d16", 64, c5, b5, 3, rng,
                   "codec vq: vq5-d16 hand-made row: codes 15 0A 1F 03 -> bytes 55 FD 01 (20 bits, 4 bits of zero padding), "
                   "then r = 8 as 00 48");
    const unsigned c12[8] = {0xABC, 0x123, 0xFFF, 0x000, 0x801, 0x7FE, 0x555, 0xAAA};
    const uint8_t b12[12] = {0xBC, 0x3A, 0x12, 0xFF, 0x0F, 0x00, 0x01, 0xE8, 0x7F, 0x55, 0xA5, 0xAA};
    vq_layout_case("vq12-d8", 64, c12, b12, 12, rng,
                   "codec vq: vq12-d8 hand-made row: codes ABC 123 FFF 000 801 7FE 555 AAA -> bytes BC 3A 12 FF 0F 00 01 "
                   "E8 7F 55 A5 AA, then r = 8 as 00 48");
    const unsigned c1[11] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1};
    const uint8_t b1[2] = {0x4D, 0x07};
    vq_layout_case("vq1-d1", 11, c1, b1, 2, rng,
                   "codec vq: vq1-d1 hand-made row of 11: codes 1 0 1 1 0 0 1 0 1 1 1 -> bytes 4D 07 (5 bits of zero "
                   "padding), then r = fp16(sqrt(11))");
}

/* ==== the fit (KvFit) ======================================================== */

static void test_fit_layout(void) {
    static const struct {
        const char *text;
        int n, ndim, d0, d1, d2, per_head;
    } cases[] = {
        {"nuq3-g64", 64, 1, 8, 0, 0, 0},      {"nuq2-t32", 64, 1, 4, 0, 0, 0},      {"nuq4-g8", 128, 1, 16, 0, 0, 0},
        {"vq8-d4", 64, 3, 16, 256, 4, 1},     {"vq12-d8", 128, 3, 16, 4096, 8, 1}, {"vq1-d1", 64, 3, 64, 2, 1, 1},
        {"vq5-d16", 64, 3, 4, 32, 16, 1},
    };
    int bad = 0;
    char first[200] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvBase b = base_of(cases[i].text);
        KvFitLayout l;
        memset(&l, 0xff, sizeof l);
        b.codec->fit->layout(&b, cases[i].n, &l);
        const KvFitTensor *t = &l.tensors[0];
        int dims_ok = t->dims[0] == cases[i].d0 && (t->ndim < 2 || t->dims[1] == cases[i].d1) &&
                      (t->ndim < 3 || t->dims[2] == cases[i].d2);
        if (l.n_tensors != 1 || strcmp(t->name, "") || t->ndim != cases[i].ndim || !dims_ok || l.per_head != cases[i].per_head) {
            if (!bad++)
                snprintf(first, sizeof first, "%s d %d: %d tensors, ndim %d, dims %d %d %d, per head %d", cases[i].text,
                         cases[i].n, l.n_tensors, t->ndim, t->dims[0], t->dims[1], t->dims[2], l.per_head);
        }
    }
    check(bad == 0, "codec nuq/vq fit layout: nuq one tensor [2^B] shared by the heads; vq one [d/D, 2^C, D] per head",
          "%s", first);
}

/* nuq's points restated: the z = x / s of every group with s != 0 (NaN z left out), units in
 * order, groups in order (gG along the row; tG channel by channel), values in order. */
static size_t nuq_ref_points(NuqFmt f, const float *units, size_t count, int n, float *points) {
    size_t made = 0, uv = nuq_values(f, n);
    for (size_t u = 0; u < count; u++)
        for (size_t g = 0; g < nuq_groups(f, n); g++) {
            const float *xg = units + u * uv + group_start(f, g);
            float s = f16_to_f32(nuq_ref_scale(xg, group_stride(f, n), f.group));
            if (s == 0.0f) continue;
            for (int i = 0; i < f.group; i++) {
                volatile float z = xg[(size_t)i * group_stride(f, n)] / s;
                if (!isnan(z)) points[made++] = z;
            }
        }
    return made;
}

/* vq's points restated: sub-vector `book` of z of every row with r != 0, in order. */
static size_t vq_ref_points(int D, const float *rows, size_t count, int n, int book, float *points) {
    size_t made = 0;
    float sqrt_d = sqrtf((float)n);
    for (size_t u = 0; u < count; u++) {
        const float *x = rows + u * (size_t)n;
        uint16_t h = vq_ref_norm(x, n);
        if (h == 0) continue;
        float r = f16_to_f32(h);
        for (int i = 0; i < D; i++) {
            volatile float p = x[book * D + i] * sqrt_d;
            points[made * D + (size_t)i] = p / r;
        }
        made++;
    }
    return made;
}

static int same_floats(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!same_float(a[i], b[i])) return 0;
    return 1;
}

/* A fit through the codec's KvFit, in a scratch of the size it asks for; -1 and shortfall when refused. */
static int codec_fit(const KvBase *b, const float *units, size_t count, int n, float *table, KvFitShortfall *shortfall) {
    KvFitRows rows = {.units = units, .count = count, .n = n};
    void *scratch = alloc(b->codec->fit->scratch_bytes(b, &rows));
    int rc = b->codec->fit->fit(b, &rows, table, scratch, shortfall);
    free(scratch);
    return rc;
}

static void sort_floats(float *x, size_t n) {
    for (size_t i = 1; i < n; i++)   /* insertion sort: plain and independent */
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            float t = x[j];
            x[j] = x[j - 1], x[j - 1] = t;
        }
}

/* nuq's fit restated (§8): its points, the sorted points at ranks floor((j + 1/2) n / K) as the
 * start, Lloyd (quant/lloyd.h, tested in test_lloyd), the table sorted ascending. */
static size_t nuq_ref_fit(NuqFmt f, const float *units, size_t count, int n, float *T) {
    size_t vals = count * nuq_values(f, n);
    float *points = alloc(vals * sizeof(float)), *sorted = alloc(vals * sizeof(float));
    uint16_t *codes = alloc(vals * sizeof(uint16_t));
    int K = 1 << f.bits;
    void *scratch = alloc(lloyd_scratch_bytes(1, K));
    size_t np = nuq_ref_points(f, units, count, n, points);
    memcpy(sorted, points, np * sizeof(float));
    sort_floats(sorted, np);
    for (int j = 0; j < K; j++) T[j] = sorted[(size_t)floor(((double)j + 0.5) * (double)np / (double)K)];
    lloyd_fit(points, np, 1, T, K, LLOYD_MAX_ITERATIONS, codes, scratch);
    sort_floats(T, (size_t)K);
    free(points); free(sorted); free(codes); free(scratch);
    return np;
}

/* vq's fit restated (§8): per book its points, the points at indices floor(k n / K) as the start, Lloyd. */
static size_t vq_ref_fit(int C, int D, const float *rows, size_t count, int n, float *T) {
    int K = 1 << C;
    float *points = alloc(count * (size_t)D * sizeof(float));
    uint16_t *codes = alloc(count * sizeof(uint16_t));
    void *scratch = alloc(lloyd_scratch_bytes(D, K));
    size_t np = 0;
    for (int book = 0; book < n / D; book++) {
        np = vq_ref_points(D, rows, count, n, book, points);
        float *entries = T + (size_t)book * vq_book_floats(C, D);
        for (int k = 0; k < K; k++) memcpy(entries + (size_t)k * D, points + (size_t)floor((double)k * (double)np / K) * D, (size_t)D * sizeof(float));
        lloyd_fit(points, np, D, entries, K, LLOYD_MAX_ITERATIONS, codes, scratch);
    }
    free(points); free(codes); free(scratch);
    return np;
}

static void test_fit_nuq(uint64_t *rng) {
    static const struct {
        const char *text;
        int n;
        size_t count;
    } nuqs[] = {{"nuq3-g64", 128, 9}, {"nuq2-g8", 64, 7}, {"nuq4-t8", 40, 3}, {"nuq3-t32", 64, 2}};
    char name[240];
    for (size_t k = 0; k < sizeof nuqs / sizeof nuqs[0]; k++) {
        KvBase b = base_of(nuqs[k].text);
        NuqFmt f = nuq_fmt(&b);
        int n = nuqs[k].n, K = 1 << f.bits;
        size_t count = nuqs[k].count, vals = count * nuq_values(f, n);
        float *x = alloc(vals * sizeof(float)), T[16], want[16], got[16];
        make_table(TABLE_ASCENDING, K, T, rng);
        for (size_t u = 0; u < count; u++)
            for (size_t g = 0; g < nuq_groups(f, n); g++) {
                int kind = (int)((u + g) % GROUP_KINDS);
                float sc = group_scale_for(kind, rng);
                float *xg = x + u * nuq_values(f, n) + group_start(f, g);
                for (int i = 0; i < f.group; i++) xg[(size_t)i * group_stride(f, n)] = group_value(kind, i, T, K, sc, rng);
            }
        x[1] = NAN;   /* a NaN value is left out of the points (the codec's documented choice) */
        size_t np = nuq_ref_fit(f, x, count, n, want);
        KvFitShortfall sf = {0, 0};
        int rc = codec_fit(&b, x, count, n, got, &sf);
        snprintf(name, sizeof name, "codec nuq fit: %s d %d, %zu units: the table of §8's points (%zu: groups with s = 0 "
                 "and NaN values left out), rank start, Lloyd, ascending", nuqs[k].text, n, count, np);
        check(rc == 0 && np < vals - 1 && same_floats(got, want, (size_t)K), name, "rc %d, table differs", rc);
        /* fewer units than 4 x K points: refused, saying how many points there were */
        float *points = alloc(vals * sizeof(float));
        size_t few = 0;
        while (nuq_ref_points(f, x, few + 1, n, points) < 4 * (size_t)K && few + 1 < count) few++;
        size_t few_points = nuq_ref_points(f, x, few, n, points);
        if (few_points < 4 * (size_t)K) {
            rc = codec_fit(&b, x, few, n, got, &sf);
            snprintf(name, sizeof name, "codec nuq fit: %s on %zu units (fewer than 4 x %d points) is refused with the count",
                     nuqs[k].text, few, K);
            check(rc == -1 && sf.entries == K && sf.points == few_points, name, "rc %d, %zu points", rc, sf.points);
        }
        free(points);
        free(x);
    }
    /* Equal starts: groups {1, 0.5, 0 x 6} start at {0, 0, 0, 1}; Lloyd moves the first 0 to the
     * halves and leaves the others, {0.5, 0, 0, 1}: the table is stored ascending all the same. */
    {
        KvBase b = base_of("nuq2-g8");
        float x[8 * 20], T[4], want[4] = {0.0f, 0.0f, 0.5f, 1.0f};
        for (int u = 0; u < 20; u++)
            for (int i = 0; i < 8; i++) x[u * 8 + i] = i == 0 ? 1.0f : i == 1 ? 0.5f : 0.0f;
        KvFitShortfall sf;
        int rc = codec_fit(&b, x, 20, 8, T, &sf);
        check(rc == 0 && same_floats(T, want, 4), "codec nuq fit: a table Lloyd leaves out of order (equal starts) is "
              "stored ascending", "rc %d, {%g, %g, %g, %g}", rc, T[0], T[1], T[2], T[3]);
    }
    KvBase b = base_of("nuq2-g8");
    float bad[4] = {-1, 0.5f, 0.25f, 1}, good[4] = {-1, 0.25f, 0.25f, 1};
    char why[160] = "";
    check(!b.codec->fit->check(&b, 8, bad, why, sizeof why) && strstr(why, "not ascending (entry 2 = 0.25 after 0.5)") &&
              b.codec->fit->check(&b, 8, good, why, sizeof why),
          "codec nuq fit check: a table out of order refused naming the entry, equal neighbours accepted", "%s", why);
}

static void test_fit_vq(uint64_t *rng) {
    static const struct {
        const char *text;
        int n;
        size_t count;
    } vqs[] = {{"vq4-d4", 64, 200}, {"vq4-d16", 128, 200}, {"vq2-d1", 64, 40}, {"vq3-d8", 48, 60}};
    char name[240];
    for (size_t k = 0; k < sizeof vqs / sizeof vqs[0]; k++) {
        KvBase b = base_of(vqs[k].text);
        int n = vqs[k].n, D = b.variant, C = b.bits;
        size_t count = vqs[k].count, floats = (size_t)(n / D) * vq_book_floats(C, D);
        float *x = alloc(count * (size_t)n * sizeof(float)), *want = alloc(floats * sizeof(float)), *got = alloc(floats * sizeof(float));
        for (size_t r = 0; r < count; r++) vq_row((int)(r % VQ_ROW_KINDS), x + r * (size_t)n, n, rng);
        x[5 * (size_t)n + 2] = NAN;   /* a row with a NaN: r = 0, left out */
        size_t np = vq_ref_fit(C, D, x, count, n, want);
        KvFitShortfall sf = {0, 0};
        int rc = codec_fit(&b, x, count, n, got, &sf);
        snprintf(name, sizeof name, "codec vq fit: %s d %d: every book from sub-vector j of z of the rows with r != 0 "
                 "(%zu of %zu), spread start, Lloyd", vqs[k].text, n, np, count);
        check(rc == 0 && np < count && np >= 4u << C && same_floats(got, want, floats), name, "rc %d, table differs", rc);
        rc = codec_fit(&b, x, 2, n, got, &sf);
        snprintf(name, sizeof name, "codec vq fit: %s on 2 rows is refused (fewer than 4 x %d points)", vqs[k].text, 1 << C);
        check(rc == -1 && sf.entries == 1 << C && sf.points <= 2, name, "rc %d, %zu points", rc, sf.points);
        free(x); free(want); free(got);
    }
}

/* ==== through the scheme layer ================================================ */

static int parse_spec(const char *text, KvSide side, KvSpec *s, char *why, size_t why_len) {
    return kv_spec_parse(text, side, s, why, why_len);
}

static void test_fit_key(void) {
    static const struct {
        const char *text, *key;
        KvSide side;
    } cases[] = {
        {"nuq3-g64+out2+prerope+had+res8+sink4", "nuq3-g64+had+prerope+out2", KV_SIDE_KEYS},
        {"nuq3-g64", "nuq3-g64", KV_SIDE_KEYS},
        {"nuq2-t32+sink4+had+res8", "nuq2-t32+had", KV_SIDE_VALUES},
        {"nuq4-g32+res128", "nuq4-g32", KV_SIDE_VALUES},
        {"nuq3-t64+prerope", "nuq3-t64+prerope", KV_SIDE_KEYS},
        {"vq8-d4+res16+out1", "vq8-d4+out1", KV_SIDE_VALUES},
        {"vq12-d8+prerope+had", "vq12-d8+had+prerope", KV_SIDE_KEYS},
        {"vq8-d8+sink2", "vq8-d8", KV_SIDE_KEYS},
        {"int4-g64+had+out2", "", KV_SIDE_KEYS},
        {"nf4-g64+prerope", "", KV_SIDE_KEYS},
        {"tq3+had", "", KV_SIDE_VALUES},
        {"fp16", "", KV_SIDE_VALUES},
        {"q4_0+had", "", KV_SIDE_KEYS},
    };
    int bad = 0;
    char first[240] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvSpec s;
        char why[200] = "", key[96];
        memset(key, 'x', sizeof key);
        int rc = parse_spec(cases[i].text, cases[i].side, &s, why, sizeof why);
        if (rc == 0) kv_spec_fit_key(&s, key, sizeof key);
        int fitted = cases[i].key[0] != '\0';
        if ((rc != 0 || strcmp(key, cases[i].key) || kv_spec_is_fitted(&s) != fitted) && !bad++)
            snprintf(first, sizeof first, "'%s': rc %d (%s), key '%.60s', fitted %d", cases[i].text, rc, why,
                     rc ? "" : key, rc ? -1 : kv_spec_is_fitted(&s));
    }
    check(bad == 0, "codec nuq/vq fit key: the base, then +had, +prerope, +outK in that order, never +res/+sink "
          "(nuq3-g64+out2+prerope+had+res8+sink4 -> nuq3-g64+had+prerope+out2); \"\" and not fitted for other bases",
          "%s", first);
    /* a short buffer: cut, terminated, nothing written past it */
    KvSpec s;
    char why[200], key[12];
    memset(key, 'x', sizeof key);
    parse_spec("nuq3-g64+had+prerope+out2", KV_SIDE_KEYS, &s, why, sizeof why);
    kv_spec_fit_key(&s, key, 10);
    check(strlen(key) == 9 && !strncmp(key, "nuq3-g64+", 9) && key[10] == 'x' && key[11] == 'x',
          "codec nuq fit key into a 10-byte buffer: cut to 9 characters, terminated, nothing past it", "'%.12s'", key);
}

static void test_scheme_parse(void) {
    char why[240] = "";
    KvSpec s;
    int ok = parse_spec("nuq3-g64+res8+sink4", KV_SIDE_KEYS, &s, why, sizeof why) == 0 && !strcmp(s.text, "nuq3-g64+res8+sink4") &&
             s.residual == 8 && s.sinks == 4 && kv_spec_quantized_end(&s, 100) == 92 &&
             parse_spec("nuq2-t32+sink4+res8", KV_SIDE_VALUES, &s, why, sizeof why) == 0 &&
             !strcmp(s.text, "nuq2-t32+res8+sink4") && kv_spec_quantized_end(&s, 100) == 4 + 32 * 2 &&
             parse_spec("vq8-d4+res8+sink4", KV_SIDE_KEYS, &s, why, sizeof why) == 0 && kv_spec_quantized_end(&s, 100) == 92;
    check(ok, "codec nuq/vq +res and +sink parse, canonical order, quantized end as §4 (channel axis n - R; nuq-t32: "
          "S + 32 floor((n - S - R) / 32))", "%s", why);

    /* +out: parses on both; bound only on channel-axis bases */
    KvLayered l;
    int good = kv_layered_parse("nuq3-g64+out2", KV_SIDE_KEYS, &l, why, sizeof why) == 0 &&
               kv_layered_bind(&l, 2, 64, KV_SIDE_KEYS, why, sizeof why) == 0 &&
               kv_layered_parse("vq8-d4+had+out2", KV_SIDE_VALUES, &l, why, sizeof why) == 0 &&
               kv_layered_bind(&l, 2, 64, KV_SIDE_VALUES, why, sizeof why) == 0;
    why[0] = '\0';
    int refused = kv_layered_parse("nuq2-t32+out2", KV_SIDE_KEYS, &l, why, sizeof why) == 0 &&
                  kv_layered_bind(&l, 2, 64, KV_SIDE_KEYS, why, sizeof why) == -1 && strstr(why, "+out") &&
                  strstr(why, "token-axis");
    check(good && refused, "codec nuq/vq +out2 binds on nuq3-g64 and vq8-d4, is refused on nuq2-t32 (token axis, named)",
          "why '%s'", why);
    why[0] = '\0';
    int pre = parse_spec("nuq3-g64+prerope", KV_SIDE_VALUES, &s, why, sizeof why) == -1 && strstr(why, "keys only") &&
              parse_spec("vq8-d4+prerope", KV_SIDE_KEYS, &s, why, sizeof why) == 0;
    check(pre, "codec nuq/vq +prerope: keys yes, values refused", "why '%s'", why);
    /* +had binds on powers of two only; bits with +out */
    int had = kv_layered_parse("vq8-d4+had", KV_SIDE_KEYS, &l, why, sizeof why) == 0 &&
              kv_layered_bind(&l, 1, 48, KV_SIDE_KEYS, why, sizeof why) == -1 && strstr(why, "power of two");
    parse_spec("nuq3-g64+out2", KV_SIDE_KEYS, &s, why, sizeof why);
    double b1 = kv_spec_stored_bits(&s, 64);
    parse_spec("vq8-d4+out1", KV_SIDE_KEYS, &s, why, sizeof why);
    double b2 = kv_spec_stored_bits(&s, 64);
    check(had && b1 == (26 + 6) * 8.0 / 64 && b2 == (18 + 3) * 8.0 / 64,
          "codec nuq/vq +had refused at d 48; +out2 on nuq3-g64 = (26 + 6) bytes, +out1 on vq8-d4 = (18 + 3) bytes a row",
          "had %d, bits %g %g", had, b1, b2);
}

/* The spec's encode and decode against the definition given the rows the codec sees: each row
 * moved into the domain (kv_spec_to_domain: +had), +outK's K largest |x| (ties: the lower index)
 * taken out as fp16 + index and zeroed, the base's reference, the outliers written back. */
static void test_scheme_codec(uint64_t *rng) {
    static const struct {
        const char *text;
        int n;
    } cases[] = {
        {"nuq3-g64+had", 64},       {"nuq4-g32+out2", 64},   {"nuq2-g64+had+out1", 128}, {"nuq2-t16+had", 64},
        {"nuq3-t8+res4+sink2", 32}, {"vq8-d4+had", 64},      {"vq4-d8+out2", 64},        {"vq6-d2+had+out3", 128},
        {"vq12-d16+prerope", 64},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        KvSpec s;
        char why[200], name[240];
        if (parse_spec(cases[k].text, KV_SIDE_KEYS, &s, why, sizeof why)) {
            snprintf(name, sizeof name, "codec nuq/vq scheme %s parses", cases[k].text);
            check(0, name, "%s", why);
            continue;
        }
        int n = cases[k].n, rows = s.base.rows, is_vq = s.base.codec->fit && !strncmp(s.base.name, "vq", 2);
        int C = s.base.bits, D = s.base.variant, K = s.outliers;
        size_t tf = is_vq ? (size_t)(n / D) * vq_book_floats(C, D) : (size_t)1 << C;
        float *T = alloc(tf * sizeof(float));
        if (is_vq) for (size_t i = 0; i < tf; i++) T[i] = normal(rng);
        else make_table(TABLE_ASCENDING, 1 << C, T, rng);
        s.base.table = T;
        size_t ub = kv_spec_unit_bytes(&s, n), cb = s.base.codec->unit_bytes(&s.base, n), vals = (size_t)rows * n;
        float *x = alloc(vals * sizeof(float)), *dom = alloc(vals * sizeof(float)), *scratch = alloc(vals * sizeof(float));
        float *got = alloc(vals * sizeof(float)), *want = alloc(vals * sizeof(float));
        uint8_t *unit = alloc(ub), *ref = alloc(ub);
        int bad = 0, ties = 0;
        for (int t = 0; t < 12; t++) {
            for (size_t i = 0; i < vals; i++) x[i] = normal(rng) * (i % 11 == 3 ? 9.0f : 1.0f);
            if (t == 1) x[7] = x[9] = 50.0f;   /* equal magnitudes: +out takes the lower index first */
            memcpy(dom, x, vals * sizeof(float));
            for (int r = 0; r < rows; r++) kv_spec_to_domain(&s, dom + (size_t)r * n, n);
            memset(ref, 0, ub);
            for (int j = 0; j < K; j++) {   /* channel-axis: one row */
                int best = -1;
                for (int i = 0; i < n; i++) {
                    int taken = 0;
                    for (int m = 0; m < j; m++) taken |= ref[cb + 3 * (size_t)m + 2] == i;
                    if (!taken && (best < 0 || fabsf(dom[i]) > fabsf(dom[best]))) best = i;
                }
                set_u16(ref + cb + 3 * (size_t)j, f32_to_f16(dom[best]));
                ref[cb + 3 * (size_t)j + 2] = (uint8_t)best;
            }
            for (int j = 0; j < K; j++) dom[ref[cb + 3 * (size_t)j + 2]] = 0.0f;
            if (is_vq) vq_ref_row(T, C, D, dom, n, ref, want, &ties);
            else nuq_ref_unit(nuq_fmt(&s.base), T, dom, n, ref, want, &ties);
            for (int j = 0; j < K; j++) want[ref[cb + 3 * (size_t)j + 2]] = f16_to_f32(get_u16(ref + cb + 3 * (size_t)j));
            kv_spec_encode(&s, x, n, unit, scratch);
            kv_spec_decode(&s, unit, n, 0, rows, got);
            bad += memcmp(unit, ref, ub) != 0;
            for (size_t i = 0; i < vals; i++) bad += !same_float(got[i], want[i]);
        }
        snprintf(name, sizeof name, "codec nuq/vq scheme %s at d %d with a table: kv_spec_encode/decode = the definition "
                 "on the domain rows (+had), outliers out and back (+out)", cases[k].text, n);
        check(bad == 0, name, "%d differ", bad);
        free(T); free(x); free(dom); free(scratch); free(got); free(want); free(unit); free(ref);
    }
}

int main(void) {
    uint64_t rng = 20240611;
    test_nuq_names();
    test_vq_names();
    test_examples();

    static const struct {
        const char *text;
        int n, units;
    } nuqs[] = {
        {"nuq2-g64", 64, 40},  {"nuq3-g64", 64, 40},  {"nuq4-g64", 128, 24}, {"nuq3-g8", 64, 30},
        {"nuq4-g32", 96, 20},  {"nuq2-g128", 256, 8}, {"nuq3-g4096", 4096, 2},
        {"nuq3-t8", 64, 4},    {"nuq2-t32", 48, 3},   {"nuq4-t64", 64, 3},   {"nuq3-t16", 40, 3}, {"nuq2-t8", 8, 5},
    };
    for (size_t i = 0; i < sizeof nuqs / sizeof nuqs[0]; i++) test_nuq_random(nuqs[i].text, nuqs[i].n, nuqs[i].units, &rng);
    test_nuq_ties();
    test_nuq_nonfinite(&rng);
    test_nuq_layout(&rng);

    const int dims[] = {64, 128}, Ds[] = {1, 2, 4, 8, 16}, Cs[] = {1, 4, 8, 12};
    for (int a = 0; a < 2; a++)
        for (int d = 0; d < 5; d++)
            for (int c = 0; c < 4; c++) test_vq_random(dims[a], Ds[d], Cs[c], &rng);
    test_vq_ties(&rng);
    test_vq_ties_wide(&rng);
    test_z_rounding(&rng);
    test_vq_special(&rng);
    test_vq_layout(&rng);

    test_fit_layout();
    test_fit_nuq(&rng);
    test_fit_vq(&rng);

    test_fit_key();
    test_scheme_parse();
    test_scheme_codec(&rng);
    return test_exit_code();
}
