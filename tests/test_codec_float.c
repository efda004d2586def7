/* tests/test_codec_float.c: quant/half.c and the floating-point codecs (quant/codec_float.c).
 * fp16: all 65,536 halves round-trip, and float -> half rounding is compared with an
 * independent nearest-value search over a large sample of floats (halfway cases, subnormals,
 * the overflow boundary). bf16 likewise. The codecs fp32, fp16 and bf16 against their
 * definitions: unit sizes, stored bytes (fp32 native floats; fp16 and bf16 nearest-even,
 * little-endian), decoding any run of rows, NaN and infinities kept, any row width; the
 * bulk fp16 conversions (F16C where there is one) against the scalar ones; and the codec
 * table: every listed example parses back to itself. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "tests/test.h"
#include "tests/test_random.h"

/* splitmix64: a small deterministic generator, state passed explicitly. */
/* ---- fp16 -------------------------------------------------------------- */

/* Value of a finite half from the IEEE definition, independent of half.c;
 * pattern 0x7c00 (one past the largest finite) stands for 2^16, the value the
 * next binade would start at, which is what overflow rounding compares with. */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

/* Nearest half by binary search over the ordered positive halves. */
static uint16_t ref_f32_to_f16(float f) {
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    unsigned lo = 0, hi = 0x7c00;             /* half_value(lo) <= a < half_value(hi) */
    if (a >= half_value(0x7c00))
        return sign | 0x7c00;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (half_value((uint16_t)mid) <= a) lo = mid; else hi = mid;
    }
    double dlo = a - half_value((uint16_t)lo), dhi = half_value((uint16_t)hi) - a;
    unsigned pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint16_t)(sign | pick);
}

static int check_one_f16(float f, int *bad, uint32_t *first_bad) {
    if (isnan(f))
        return 1;
    if (f32_to_f16(f) != ref_f32_to_f16(f)) {
        if (!(*bad)++) *first_bad = to_bits(f);
        return 0;
    }
    return 1;
}

static void test_f16(void) {
    int bad_rt = 0, bad_val = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_to_f32((uint16_t)h);
        int is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (is_nan) {
            uint16_t back = f32_to_f16(f);
            bad_nan += !(isnan(f) && ((back >> 10) & 31) == 31 && (back & 1023) && (back & 0x200) &&
                         (back & 0x8000) == (h & 0x8000));
            continue;
        }
        bad_rt += f32_to_f16(f) != h;
        double want = ((h >> 10) & 31) == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY) : half_value((uint16_t)h);
        bad_val += (double)f != want || !signbit(f) != !signbit(want);
    }
    check(bad_rt == 0, "f16 all 63,488 non-NaN halves round-trip f16->f32->f16", "%d differ", bad_rt);
    check(bad_val == 0, "f16->f32 exact for every half (IEEE definition)", "%d differ", bad_val);
    check(bad_nan == 0, "f16 every NaN stays a quiet NaN of the same sign", "%d differ", bad_nan);

    int bad = 0;
    uint32_t first = 0;
    long n = 0;
    /* Every halfway point between adjacent halves, and its float neighbours. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float mid = (float)((half_value((uint16_t)h) + half_value((uint16_t)(h + 1))) / 2);
        float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++, n += 2) {
            check_one_f16(probes[k], &bad, &first);
            check_one_f16(-probes[k], &bad, &first);
        }
    }
    /* A stride through all 2^32 patterns, and random patterns. */
    for (uint64_t u = 0; u < 0x100000000ull; u += 1021, n++)
        check_one_f16(from_bits((uint32_t)u), &bad, &first);
    uint64_t rng = 1;
    for (int i = 0; i < 2000000; i++, n++)
        check_one_f16(from_bits((uint32_t)next_u64(&rng)), &bad, &first);
    check(bad == 0, "f32->f16 nearest-even matches independent search", "%d of %ld differ, first 0x%08x",
          bad, n, first);
    printf("     (%ld floats compared: all halfway points +-1 ulp, stride 1021, 2M random)\n", n);

    struct { float f; uint16_t h; const char *what; } cases[] = {
        {65520.0f, 0x7c00, "65520 -> inf"},
        {65519.99f, 0x7bff, "65519.99 -> 65504"},
        {-65520.0f, 0xfc00, "-65520 -> -inf"},
        {65504.0f, 0x7bff, "65504 exact"},
        {-0.0f, 0x8000, "-0 keeps its sign"},
        {0x1.0p-25f, 0x0000, "2^-25 (half of min subnormal) ties to 0"},
        {0x1.000002p-25f, 0x0001, "just above 2^-25 -> min subnormal"},
        {0x1.8p-24f, 0x0002, "1.5 * 2^-24 ties to even (2)"},
        {0x1.ffcp-15f, 0x0400, "top subnormal halfway carries to min normal"},
        {1.0f + 0x1.0p-11f, 0x3c00, "1 + 2^-11 ties to even (1)"},
        {1.0f + 0x1.8p-10f, 0x3c02, "1 + 1.5 ulp ties to even"},
        {INFINITY, 0x7c00, "inf"},
        {1e-45f, 0x0000, "float subnormal -> 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = f32_to_f16(cases[i].f);
        char name[96];
        snprintf(name, sizeof name, "f32->f16 %s", cases[i].what);
        check(got == cases[i].h, name, "got 0x%04x want 0x%04x", got, cases[i].h);
    }
    uint16_t qn = f32_to_f16(from_bits(0x7f800001u));   /* payload only in low bits */
    check((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff), "f32->f16 signalling NaN with low payload stays NaN",
          "got 0x%04x", qn);
}

/* ---- bf16 -------------------------------------------------------------- */

/* Nearest bf16: the truncation t and t+1 are the only candidates. */
static uint16_t ref_f32_to_bf16(float f) {
    uint32_t u = to_bits(f);
    uint16_t t = (uint16_t)(u >> 16);
    double a = fabs((double)f);
    double vlo = fabs((double)bf16_to_f32(t));
    uint16_t up = (uint16_t)(t + 1);
    double vhi = (up & 0x7f80) == 0x7f80 ? ldexp(1.0, 128) : fabs((double)bf16_to_f32(up));
    double dlo = a - vlo, dhi = vhi - a;
    return dlo < dhi ? t : dhi < dlo ? up : (t % 2 == 0 ? t : up);
}

static void test_bf16(void) {
    int bad_rt = 0, bad_nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = bf16_to_f32((uint16_t)b);
        if (isnan(f)) {
            uint16_t back = f32_to_bf16(f);
            bad_nan += !(isnan(bf16_to_f32(back)) && (back & 0x40) && (back & 0x8000) == (b & 0x8000));
        } else {
            bad_rt += f32_to_bf16(f) != b;
        }
    }
    check(bad_rt == 0, "bf16 all non-NaN patterns round-trip", "%d differ", bad_rt);
    check(bad_nan == 0, "bf16 every NaN stays a quiet NaN of the same sign", "%d differ", bad_nan);

    int bad = 0;
    long n = 0;
    uint32_t first = 0;
    uint64_t rng = 7;
    for (long i = 0; i < 6000000; i++) {
        uint32_t u;
        if (i < 2000000)      /* halfway and neighbours: low 16 bits 0x8000 +- 1 */
            u = ((uint32_t)next_u64(&rng) & 0xffff0000u) | (uint32_t)(0x7fff + i % 3);
        else if (i < 4000000)
            u = (uint32_t)next_u64(&rng);
        else
            u = (uint32_t)(i - 4000000) * 2147u;
        float f = from_bits(u);
        if (isnan(f))
            continue;
        n++;
        if (f32_to_bf16(f) != ref_f32_to_bf16(f) && !bad++)
            first = u;
    }
    check(bad == 0, "f32->bf16 nearest-even matches independent candidates", "%d of %ld differ, first 0x%08x",
          bad, n, first);
    check(f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80, "f32->bf16 FLT_MAX overflows to inf", "got 0x%04x",
          f32_to_bf16(from_bits(0x7f7fffffu)));
    check(f32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0, "f32->bf16 low-payload NaN stays NaN (quiet)",
          "got 0x%04x", f32_to_bf16(from_bits(0x7f800001u)));
    check(f32_to_bf16(-0.0f) == 0x8000, "f32->bf16 -0", "got 0x%04x", f32_to_bf16(-0.0f));
}

/* ---- the float codecs ---------------------------------------------------- */

static int parse_base(const char *name, KvBase *b) {
    char why[200];
    return kv_base_parse(name, b, why, sizeof why) == 0;
}

/* Test rows: every half pattern's value (NaN, inf, subnormals, -0 among them), then random
 * floats of every magnitude, halfway cases for fp16 and bf16, and values past fp16's range. */
static size_t fill_floats(float *x, size_t n, uint64_t *rng) {
    size_t i = 0;
    for (uint32_t h = 0; h < 65536 && i < n; h++) x[i++] = f16_to_f32((uint16_t)h);
    for (; i < n; i++) {
        switch (i % 4) {
        case 0: x[i] = from_bits((uint32_t)next_u64(rng)); break;
        case 1: x[i] = (float)((half_value((uint16_t)(i % 0x7bff)) + half_value((uint16_t)(i % 0x7bff + 1))) / 2); break;
        case 2: x[i] = from_bits(((uint32_t)next_u64(rng) & 0xffff0000u) | 0x8000u); break;
        default: x[i] = (float)(normal(rng) * 1e5); break;
        }
    }
    return n;
}

/* One float codec on R rows of n values: unit size, stored bytes per its definition, the
 * decode of the whole run and of every r0..r0+count-1, written with the row width n. */
static void test_float_codec(const char *text, int n, uint64_t *rng) {
    KvBase b;
    char name[160];
    snprintf(name, sizeof name, "codec float: %s parses (no groups, one row a unit; rows of %d)", text, n);
    if (!check(parse_base(text, &b) && !strcmp(b.name, text) && b.group == 0 && b.rows == 1 && !b.variant &&
                   b.axis == KV_AXIS_CHANNELS && b.codec->decode_t64 == NULL && b.codec->rotate == NULL,
               name, "refused or wrong fields"))
        return;
    int width = b.bits / 8;
    enum { R = 1100 };
    size_t total = (size_t)R * n;
    float *x = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
    unsigned char *units = malloc(total * (size_t)width + 1), *at = units + 1;   /* odd address */
    fill_floats(x, total, rng);
    size_t ub = b.codec->unit_bytes(&b, n);
    snprintf(name, sizeof name, "codec float: %s unit of %d values = %d bytes", text, n, n * width);
    check(ub == (size_t)n * width, name, "got %zu", ub);
    snprintf(name, sizeof name, "codec float: %s stores rows of any width (1, 7, 64, 4097; rows of %d)", text, n);
    char why[200] = "";
    check(kv_base_check(&b, 1, why, sizeof why) && kv_base_check(&b, 7, why, sizeof why) &&
              kv_base_check(&b, 64, why, sizeof why) && kv_base_check(&b, 4097, why, sizeof why),
          name, "%s", why);
    for (int r = 0; r < R; r++) b.codec->encode(&b, x + (size_t)r * n, n, at + (size_t)r * ub);

    /* stored bytes: fp32 the float's bytes as they are; fp16 / bf16 the nearest-even 16-bit
     * pattern (the conversions checked above), low byte first */
    size_t bad_bytes = 0;
    for (size_t i = 0; i < total; i++) {
        const unsigned char *p = at + i * (size_t)width;
        if (width == 4) {
            bad_bytes += memcmp(p, &x[i], 4) != 0;
        } else {
            uint16_t want = !strcmp(text, "fp16") ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
            bad_bytes += (uint16_t)(p[0] | p[1] << 8) != want;
        }
    }
    snprintf(name, sizeof name, "codec float: %s stores each value as defined (%zu values: half patterns, halfway cases, random)",
             text, total);
    check(bad_bytes == 0, name, "%zu values differ", bad_bytes);

    /* decode: fp32 gives the input back bit for bit (NaN payloads too); fp16 / bf16 the stored
     * pattern's exact value */
    memset(got, 0xff, total * sizeof(float));
    b.codec->decode(&b, at, n, 0, R, got);
    size_t bad = 0;
    for (size_t i = 0; i < total; i++) {
        const unsigned char *p = at + i * (size_t)width;
        uint16_t h = (uint16_t)(p[0] | p[1] << 8);
        float want = width == 4 ? x[i] : !strcmp(text, "fp16") ? f16_to_f32(h) : bf16_to_f32(h);
        bad += to_bits(got[i]) != to_bits(want);
    }
    snprintf(name, sizeof name, "codec float: %s decodes every stored value exactly (NaN and inf kept; rows of %d)", text, n);
    check(bad == 0, name, "%zu values differ", bad);

    size_t bad_part = 0;
    static const int runs[][2] = {{0, 1}, {1, 1}, {3, 17}, {R - 1, 1}, {5, R - 5}, {500, 33}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        int r0 = runs[k][0], count = runs[k][1];
        float *part = malloc((size_t)count * n * sizeof(float));
        b.codec->decode(&b, at, n, r0, count, part);
        for (size_t i = 0; i < (size_t)count * n; i++) bad_part += to_bits(part[i]) != to_bits(got[(size_t)r0 * n + i]);
        free(part);
    }
    snprintf(name, sizeof name, "codec float: %s decode of rows r0..r0+count-1 at width %d = those rows of the whole run",
             text, n);
    check(bad_part == 0, name, "%zu values differ", bad_part);
    free(x);
    free(got);
    free(units);
}

/* Same value, or NaN both with the same sign (F16C widens a signalling NaN half to a quiet
 * NaN, the scalar conversion keeps its payload as is). */
static int same_or_both_nan(float a, float b) {
    return isnan(a) && isnan(b) ? !signbit(a) == !signbit(b) : to_bits(a) == to_bits(b);
}

/* f32_to_f16_bytes / f16_bytes_to_f32 (the fp16 codec's bulk conversions, F16C where there is
 * one) against the scalar conversions, for every length 0..40 (vector body and tail) and every
 * half pattern. */
static void test_f16_bytes(uint64_t *rng) {
    enum { N = 65536 + 40 };
    float *x = malloc(N * sizeof(float)), *back = malloc(N * sizeof(float));
    unsigned char *p = malloc(2 * N);
    fill_floats(x, N, rng);
    int bad = 0;
    for (size_t len = 0; len <= 40; len++) {
        memset(p, 0xAA, 2 * 41);
        f32_to_f16_bytes(x + 65536, len, p);
        for (size_t i = 0; i < len; i++) bad += (uint16_t)(p[2 * i] | p[2 * i + 1] << 8) != f32_to_f16(x[65536 + i]);
        bad += p[2 * len] != 0xAA;   /* nothing written past the end */
        f16_bytes_to_f32(p, len, back);
        for (size_t i = 0; i < len; i++) bad += !same_or_both_nan(back[i], f16_to_f32(f32_to_f16(x[65536 + i])));
    }
    for (uint32_t h = 0; h < 65536; h++) p[2 * h] = (unsigned char)h, p[2 * h + 1] = (unsigned char)(h >> 8);
    f16_bytes_to_f32(p, 65536, back);
    for (uint32_t h = 0; h < 65536; h++) bad += !same_or_both_nan(back[h], f16_to_f32((uint16_t)h));
    check(bad == 0, "codec float: bulk fp16 conversions equal the scalar ones (lengths 0..40, every half; NaN stays NaN)", "%d differ", bad);
    free(x);
    free(back);
    free(p);
}

/* The table: every row's listed examples parse back to themselves, by that row. */
static void test_table(void) {
    int ok = 1, n_examples = 0;
    char first[160] = "";
    for (int i = 0; i < kv_codec_count(); i++) {
        const KvCodec *c = kv_codec_at(i);
        char list[512];
        snprintf(list, sizeof list, "%s", c->examples);
        for (char *e = strtok(list, " "); e; e = strtok(NULL, " ")) {
            KvBase b;
            int good = parse_base(e, &b) && !strcmp(b.name, e) && b.codec == c && c->unit_bytes(&b, 64) > 0;
            if (!good && ok) snprintf(first, sizeof first, "'%s' (row %d)", e, i);
            ok &= good;
            n_examples++;
        }
    }
    check(ok && n_examples > 0 && kv_codec_at(kv_codec_count()) == NULL && kv_codec_at(-1) == NULL,
          "codec table: every row's examples parse back to themselves by that row", "%s", first);
    static const char *const bad[] = {"fp16-sym", "FP16", "fp32-g64", "bf16-asym", "fp16 "};
    int refused = 0;
    for (int i = 0; i < 5; i++) {
        KvBase b;
        char why[200] = "";
        refused += kv_base_parse(bad[i], &b, why, sizeof why) == -1 && strstr(why, "unknown base");
    }
    check(refused == 5, "codec float: fp16-sym, FP16, fp32-g64, bf16-asym, 'fp16 ' are unknown bases", "%d of 5 refused",
          refused);
}

int main(void) {
    uint64_t rng = 12345;
    test_f16();
    test_bf16();
    test_f16_bytes(&rng);
    test_float_codec("fp32", 64, &rng);
    test_float_codec("fp16", 64, &rng);
    test_float_codec("bf16", 64, &rng);
    test_float_codec("fp16", 7, &rng);
    test_float_codec("bf16", 1, &rng);
    test_table();
    return test_exit_code();
}
