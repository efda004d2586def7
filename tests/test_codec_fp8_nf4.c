/* tests/test_codec_fp8_nf4.c: the fp8-e4m3, fp8-e5m2 and nf4-gG codecs (quant/codec_fp8.c,
 * quant/codec_nf4.c), through the codec table as the cache calls them.
 * fp8: all 256 codes of each format decode to the OCP definition (written here with ldexp);
 * every finite code round-trips; every midpoint between adjacent values, and the floats one
 * ulp either side, round to nearest with ties to even; a stride through all 2^32 float
 * patterns against an independent nearest search; saturation, infinities, NaN, subnormals,
 * signed zero; rows, offsets and the transposed decode.
 * nf4: the table is SCHEMES.md's 16 numbers; random groups against a brute-force nearest
 * search (codes, scales and values bit for bit); ties at every midpoint (through scales 1,
 * powers of two and a non-power-of-two scale) take the lower index; zero, tiny, NaN, infinite
 * and huge groups; hostile bytes; rows, offsets and the transposed decode. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/scheme.h"
#include "quant/half.h"
#include "tests/test.h"
#include "tests/test_random.h"

/* Same float, or both NaN. */
static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || to_bits(a) == to_bits(b); }

static KvBase base_of(const char *name) {
    KvBase b;
    char why[128] = "";
    if (kv_base_parse(name, &b, why, sizeof why) != 0) {
        printf("FAIL parse %s: %s\n", name, why);
        exit(1);
    }
    return b;
}

/* decode_t64 (when the codec has it) equals decode transposed, +0 past count. */
static int t64_matches(const KvBase *b, const void *units, int n, int r0, int count, const float *rows,
                       int *used) {
    static float kt[4096 * 64];
    for (size_t i = 0; i < sizeof kt / sizeof kt[0]; i++) kt[i] = 12345.0f;
    *used = b->codec->decode_t64 != NULL;
    if (!*used) return 1;
    b->codec->decode_t64(b, units, n, r0, count, kt);
    for (int i = 0; i < n; i++)
        for (int p = 0; p < 64; p++) {
            float want = p < count ? rows[(size_t)p * n + i] : 0.0f;
            if (!same_float(kt[(size_t)i * 64 + p], want)) return 0;
        }
    return 1;
}

/* ==== fp8 ================================================================ */

typedef struct {
    const char *name;
    int exp_bits, mant_bits, bias;
    uint8_t max_code;
    double max;
} Fp8Ref;

static const Fp8Ref E4M3 = {"fp8-e4m3", 4, 3, 7, 0x7e, 448.0};
static const Fp8Ref E5M2 = {"fp8-e5m2", 5, 2, 15, 0x7b, 57344.0};

/* The OCP definition of a code's value: NaN for e4m3's S.1111.111 and e5m2's exponent 31 with a
 * mantissa, inf for e5m2's exponent 31 without one. */
static double fp8_ref_value(const Fp8Ref *f, unsigned c) {
    unsigned e = (c & 0x7f) >> f->mant_bits, m = c & ((1u << f->mant_bits) - 1), emax = (1u << f->exp_bits) - 1;
    double sign = (c & 0x80) ? -1.0 : 1.0;
    if (f->exp_bits == 4 && e == emax && m == (1u << f->mant_bits) - 1) return NAN;
    if (f->exp_bits == 5 && e == emax) return m ? NAN : sign * INFINITY;
    double v = e ? ldexp((double)((1u << f->mant_bits) + m), (int)e - f->bias - f->mant_bits)
                 : ldexp((double)m, 1 - f->bias - f->mant_bits);
    return sign * v;
}

/* Nearest code by binary search over the positive finite codes (their values increase with
 * the code), ties to the even code, saturating; NaN -> 0x7F. */
static uint8_t fp8_ref_encode(const Fp8Ref *f, float x) {
    static double values[2][128];
    static int ready[2];
    int k = f->exp_bits == 5;
    if (!ready[k]) {
        for (unsigned c = 0; c <= f->max_code; c++) values[k][c] = fp8_ref_value(f, c);
        ready[k] = 1;
    }
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs((double)x);
    if (a >= f->max) return (uint8_t)(sign | f->max_code);
    unsigned lo = 0, hi = f->max_code;   /* values[lo] <= a < values[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (values[k][mid] <= a) lo = mid; else hi = mid;
    }
    double dlo = a - values[k][lo], dhi = values[k][hi] - a;   /* exact: a and both neighbours are close */
    unsigned pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint8_t)(sign | pick);
}

static uint8_t enc1(const KvBase *b, float x) {
    uint8_t c;
    b->codec->encode(b, &x, 1, &c);
    return c;
}

static float dec1(const KvBase *b, uint8_t c) {
    float v;
    b->codec->decode(b, &c, 1, 0, 1, &v);
    return v;
}

static void test_fp8_format(const Fp8Ref *f) {
    KvBase b = base_of(f->name);
    char name[160], why[128];

    /* every code's value */
    int bad_val = 0, n_nan = 0, first_bad = -1;
    for (unsigned c = 0; c < 256; c++) {
        double want = fp8_ref_value(f, c);
        float got = dec1(&b, (uint8_t)c);
        int ok = isnan(want) ? isnan(got) : ((double)got == want && !signbit(got) == !signbit(want));
        n_nan += isnan(want) != 0;
        if (!ok && !bad_val++) first_bad = (int)c;
    }
    snprintf(name, sizeof name, "%s decode: all 256 codes equal the OCP definition (%d NaN codes)", f->name, n_nan);
    check(bad_val == 0 && n_nan == (f->exp_bits == 4 ? 2 : 6), name, "%d differ, first 0x%02x", bad_val, first_bad);
    /* the same 256 codes as one row (the vector path, where there is one) and transposed */
    {
        static unsigned char all[64 * 4];
        static float vals[256];
        for (int c = 0; c < 256; c++) all[c] = (unsigned char)c;
        b.codec->decode(&b, all, 256, 0, 1, vals);
        int bad_row = 0;
        for (int c = 0; c < 256; c++) bad_row += !same_float(vals[c], dec1(&b, (uint8_t)c));
        int used = 0, ok = t64_matches(&b, all, 4, 0, 64, vals, &used);   /* 64 rows of 4 codes */
        b.codec->decode(&b, all, 6, 0, 42, vals);                           /* 42 rows of 6 */
        ok = ok && t64_matches(&b, all, 6, 0, 42, vals, &used);
        snprintf(name, sizeof name, "%s decode of a row holding all 256 codes and decode_t64 (n = 4, 6) agree", f->name);
        check(bad_row == 0 && ok && used, name, "%d differ, t64 ok %d", bad_row, ok);
    }

    /* every finite code round-trips */
    int bad_rt = 0, n_rt = 0;
    first_bad = -1;
    for (unsigned c = 0; c < 256; c++) {
        float v = dec1(&b, (uint8_t)c);
        if (isnan(v) || isinf(v)) continue;
        n_rt++;
        if (enc1(&b, v) != c && !bad_rt++) first_bad = (int)c;
    }
    snprintf(name, sizeof name, "%s encode(decode(code)) == code for all %d finite codes", f->name, n_rt);
    check(bad_rt == 0, name, "%d differ, first 0x%02x", bad_rt, first_bad);

    /* midpoints of adjacent finite values, exactly and one float either side, both signs */
    int bad_mid = 0, n_mid = 0;
    for (unsigned c = 0; c < f->max_code; c++) {
        double lo = fp8_ref_value(f, c), hi = fp8_ref_value(f, c + 1);
        float m = (float)((lo + hi) / 2);
        if ((double)m != (lo + hi) / 2) { bad_mid++; continue; }   /* always a float */
        unsigned even = c % 2 == 0 ? c : c + 1;
        float below = nextafterf(m, 0.0f), above = nextafterf(m, INFINITY);
        for (int s = 0; s < 2; s++) {
            uint8_t sg = s ? 0x80 : 0;
            float k = s ? -1.0f : 1.0f;
            n_mid += 3;
            if (enc1(&b, k * m) != (sg | even)) {
                if (!bad_mid++) printf("     %s midpoint %.9g -> 0x%02x, want 0x%02x\n", f->name, k * m, enc1(&b, k * m), sg | even);
            }
            if (enc1(&b, k * below) != (sg | c)) bad_mid++;
            if (enc1(&b, k * above) != (sg | (c + 1))) bad_mid++;
        }
    }
    snprintf(name, sizeof name, "%s every midpoint ties to even, midpoint -+ 1 ulp to the nearer (%d floats)", f->name, n_mid);
    check(bad_mid == 0, name, "%d wrong", bad_mid);

    /* a stride through all float patterns, and a dense sweep of the format's range */
    long n = 0;
    int bad = 0;
    uint32_t first = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 251, n++) {
        float x = from_bits((uint32_t)u);
        if (enc1(&b, x) != fp8_ref_encode(f, x) && !bad++) first = (uint32_t)u;
    }
    float lo_x = (float)ldexp(1.0, -f->bias - f->mant_bits - 2), hi_x = (float)(f->max * 1.25);
    for (uint32_t u = to_bits(lo_x); u <= to_bits(hi_x); u += 61, n += 2) {
        float x = from_bits(u);
        if (enc1(&b, x) != fp8_ref_encode(f, x) && !bad++) first = u;
        if (enc1(&b, -x) != fp8_ref_encode(f, -x) && !bad++) first = u | 0x80000000u;
    }
    snprintf(name, sizeof name, "%s encode matches an independent nearest-even search (%ld floats)", f->name, n);
    check(bad == 0, name, "%d differ, first 0x%08x", bad, first);

    /* saturation and non-finite inputs */
    float maxf = (float)f->max;
    float half_ulp_above = (float)(f->max + ldexp(1.0, (int)floor(log2(f->max)) - f->mant_bits - 1));
    struct { float x; unsigned code; const char *what; } cases[] = {
        {maxf, f->max_code, "max exact"},
        {-maxf, 0x80u | f->max_code, "-max exact"},
        {nextafterf(maxf, INFINITY), f->max_code, "max + 1 float ulp saturates"},
        {half_ulp_above, f->max_code, "max + half a format ulp saturates"},
        {nextafterf(half_ulp_above, INFINITY), f->max_code, "just past max + half ulp saturates"},
        {2 * maxf, f->max_code, "2 max saturates"},
        {-1e30f, 0x80u | f->max_code, "-1e30 saturates to -max"},
        {FLT_MAX, f->max_code, "FLT_MAX saturates"},
        {INFINITY, f->max_code, "+inf -> +max"},
        {-INFINITY, 0x80u | f->max_code, "-inf -> -max"},
        {NAN, 0x7f, "NaN -> 0x7F"},
        {-NAN, 0x7f, "-NaN -> 0x7F"},
        {from_bits(0x7f800001u), 0x7f, "signalling NaN -> 0x7F"},
        {from_bits(0xffbfffffu), 0x7f, "negative NaN with payload -> 0x7F"},
        {0.0f, 0x00, "+0"},
        {-0.0f, 0x80, "-0 keeps its sign"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t got = enc1(&b, cases[i].x);
        snprintf(name, sizeof name, "%s %s", f->name, cases[i].what);
        check(got == cases[i].code, name, "got 0x%02x want 0x%02x", got, cases[i].code);
    }
    snprintf(name, sizeof name, "%s NaN codes 0x7F and 0xFF decode to NaN", f->name);
    check(isnan(dec1(&b, 0x7f)) && isnan(dec1(&b, 0xff)), name, "no");
    float nz = dec1(&b, 0x80);
    snprintf(name, sizeof name, "%s 0x80 decodes to -0.0", f->name);
    check(nz == 0.0f && signbit(nz), name, "got %g", nz);

    /* subnormals */
    double sub = ldexp(1.0, 1 - f->bias - f->mant_bits);   /* the smallest subnormal */
    struct { double x; unsigned code; const char *what; } subs[] = {
        {sub, 0x01, "smallest subnormal exact"},
        {sub / 2, 0x00, "half the smallest subnormal ties to 0"},
        {(double)nextafterf((float)(sub / 2), 1.0f), 0x01, "just above half the smallest subnormal -> it"},
        {1.5 * sub, 0x02, "1.5 subnormal units tie to even (2)"},
        {2.5 * sub, 0x02, "2.5 subnormal units tie to even (2)"},
        {ldexp(1.0, 1 - f->bias) - sub / 2, 1u << f->mant_bits, "top subnormal + half unit carries to the smallest normal"},
        {1e-40, 0x00, "a float subnormal -> 0"},
        {-1e-40, 0x80, "a negative float subnormal -> -0"},
        {-sub / 4, 0x80, "-sub/4 -> -0"},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        uint8_t got = enc1(&b, (float)subs[i].x);
        snprintf(name, sizeof name, "%s %s", f->name, subs[i].what);
        check(got == subs[i].code, name, "got 0x%02x want 0x%02x", got, subs[i].code);
    }
    if (f->exp_bits == 5) {
        check(isinf(dec1(&b, 0x7c)) && dec1(&b, 0x7c) > 0 && isinf(dec1(&b, 0xfc)) && dec1(&b, 0xfc) < 0,
              "fp8-e5m2 codes 0x7C/0xFC (never written) decode to +-inf", "got %g %g", dec1(&b, 0x7c), dec1(&b, 0xfc));
    }

    /* the codec interface: names, sizes, rows and offsets, the transposed decode */
    snprintf(name, sizeof name, "%s parses with canonical name, 8 bits, n bytes a row", f->name);
    check(!strcmp(b.name, f->name) && b.bits == 8 && b.rows == 1 && b.codec->unit_bytes(&b, 64) == 64 &&
              kv_spec_stored_bits(&(KvSpec){.base = b}, 64) == 8.0 && kv_base_check(&b, 7, why, sizeof why),
          name, "name %s bits %d unit %zu", b.name, b.bits, b.codec->unit_bytes(&b, 64));
    enum { N = 64, R = 70 };
    static float x[R * N], out[R * N], ref[R * N];
    static unsigned char units[R * N];
    uint64_t rng = 11;
    for (int i = 0; i < R * N; i++) x[i] = normal(&rng) * (float)(i % 5 == 0 ? 100.0 : 2.0);
    for (int r = 0; r < R; r++) b.codec->encode(&b, x + r * N, N, units + r * N);
    int bad_rows = 0;
    for (int i = 0; i < R * N; i++) {
        bad_rows += units[i] != fp8_ref_encode(f, x[i]);
        ref[i] = (float)fp8_ref_value(f, fp8_ref_encode(f, x[i]));
    }
    b.codec->decode(&b, units, N, 3, 64, out);
    for (int i = 0; i < 64 * N; i++) bad_rows += !same_float(out[i], ref[3 * N + i]);
    snprintf(name, sizeof name, "%s rows of 64: bytes and decode(r0=3, count=64) match", f->name);
    check(bad_rows == 0, name, "%d differ", bad_rows);
    int used, ok = 1;
    for (int count = 1; count <= 64 && ok; count += 21) ok = t64_matches(&b, units, N, 5, count, ref + 5 * N, &used);
    snprintf(name, sizeof name, "%s decode_t64 equals decode transposed, 0 past count", f->name);
    check(ok && used, name, "mismatch (used %d)", used);
}

static void test_fp8_names(void) {
    KvBase b;
    char why[128];
    const char *bad[] = {"fp8", "fp8-e4m3fn", "fp8-E4M3", "fp8-e3m4", "fp8-e5m2x", "fp8_e4m3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        char name[96];
        snprintf(name, sizeof name, "fp8 refuses '%s' with a reason", bad[i]);
        check(kv_base_parse(bad[i], &b, why, sizeof why) == -1 && strstr(why, "fp8-e4m3 and fp8-e5m2"), name,
              "why '%s'", why);
    }
    check(kv_base_parse("fp16", &b, why, sizeof why) == 0 && !strcmp(b.name, "fp16"), "fp8 rows leave fp16 alone",
          "%s", why);
}

/* ==== nf4 ================================================================ */

/* SCHEMES.md §3, as written there */
static const char *NF4_TEXT[16] = {
    "-1", "-0.6961928009986877", "-0.5250730514526367", "-0.39491748809814453", "-0.28444138169288635",
    "-0.18477343022823334", "-0.09105003625154495", "0", "0.07958029955625534", "0.16093020141124725",
    "0.24611230194568634", "0.33791524171829224", "0.44070982933044434", "0.5626170039176941",
    "0.7229568362236023", "1",
};
static float NF4[16];

/* Reference group: s = fp16(max finite |x|) (65504 in place of inf), code = argmin |z - NF4[i]|
 * in double (first index on ties), NaN and s = 0 -> code 7. */
static float nf4_ref_group(const float *x, int G, uint8_t *codes, uint16_t *scale_out) {
    float amax = 0.0f;
    for (int i = 0; i < G; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > amax) amax = fabsf(x[i]);
    uint16_t h = f32_to_f16(amax);
    if (h == 0x7c00) h = 0x7bff;
    float s = f16_to_f32(h);
    for (int i = 0; i < G; i++) {
        float z = x[i] / s;
        int best = 7;
        if (s != 0.0f && !isnan(z)) {
            best = 0;
            for (int k = 1; k < 16; k++)
                if (fabs((double)z - NF4[k]) < fabs((double)z - NF4[best])) best = k;
        }
        codes[i] = (uint8_t)best;
    }
    *scale_out = h;
    return s;
}

/* Encodes one row with the codec and compares bytes and decoded values with the reference. */
static int nf4_row_matches(const KvBase *b, const float *x, int n, unsigned char *unit, float *out, char *msg,
                           size_t msg_len) {
    int G = b->group;
    b->codec->encode(b, x, n, unit);
    b->codec->decode(b, unit, n, 0, 1, out);
    uint8_t codes[4096];
    for (int g = 0; g < n / G; g++) {
        uint16_t h;
        float s = nf4_ref_group(x + g * G, G, codes, &h);
        unsigned got_h = kv_get_u16(unit + n / 2 + 2 * g);
        if (got_h != h) {
            snprintf(msg, msg_len, "group %d scale 0x%04x want 0x%04x", g, got_h, h);
            return 0;
        }
        for (int i = 0; i < G; i++) {
            int j = g * G + i;
            unsigned c = (unit[j / 2] >> (4 * (j % 2))) & 15;
            float want = NF4[codes[i]] * s;
            if (c != codes[i] || to_bits(out[j]) != to_bits(want)) {
                snprintf(msg, msg_len, "value %d (x=%.9g, s=%g): code %u want %u, x^ %.9g want %.9g", j, x[j], s, c,
                         codes[i], out[j], want);
                return 0;
            }
        }
    }
    return 1;
}

/* The code the codec gives x in a group of G whose max |x| is amax (the group: amax, x, 0...). */
static unsigned nf4_code_in_group(const KvBase *b, float amax, float x) {
    float row[8] = {amax, x, 0, 0, 0, 0, 0, 0};
    unsigned char unit[8 / 2 + 2];
    b->codec->encode(b, row, 8, unit);
    return unit[0] >> 4;
}

static void test_nf4_names(void) {
    KvBase b;
    char why[128], name[128];
    struct { const char *in, *canon; int group; } good[] = {
        {"nf4-g64", "nf4-g64", 64}, {"nf4-g8", "nf4-g8", 8}, {"nf4-g4096", "nf4-g4096", 4096}, {"nf4-g032", "nf4-g32", 32},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int rc = kv_base_parse(good[i].in, &b, why, sizeof why);
        snprintf(name, sizeof name, "nf4 parses '%s' as %s", good[i].in, good[i].canon);
        check(rc == 0 && !strcmp(b.name, good[i].canon) && b.group == good[i].group && b.bits == 4 && b.rows == 1,
              name, "rc %d name %s group %d", rc, rc ? why : b.name, b.group);
    }
    const char *bad[] = {"nf4", "nf4-g", "nf4-g0", "nf4-g12", "nf4-g4", "nf4-g4104", "nf4-g64x", "nf4-t64", "nf4-g64-asym",
                         "nf4-g99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        snprintf(name, sizeof name, "nf4 refuses '%s' with a reason", bad[i]);
        check(kv_base_parse(bad[i], &b, why, sizeof why) == -1 && strstr(why, "multiple of 8"), name, "why '%s'", why);
    }
    b = base_of("nf4-g64");
    check(kv_base_check(&b, 64, why, sizeof why) && kv_base_check(&b, 256, why, sizeof why) &&
              !kv_base_check(&b, 96, why, sizeof why) && strstr(why, "does not divide"),
          "nf4-g64 check: rows of 64 and 256 yes, 96 no", "why '%s'", why);
    check(b.codec->unit_bytes(&b, 64) == 34 && b.codec->unit_bytes(&b, 256) == 136 && kv_spec_stored_bits(&(KvSpec){.base = b}, 64) == 4.25,
          "nf4-g64: 34 bytes a row of 64, 4.25 bits a value", "%zu", b.codec->unit_bytes(&b, 64));
    b = base_of("nf4-g8");
    check(b.codec->unit_bytes(&b, 64) == 48 && kv_spec_stored_bits(&(KvSpec){.base = b}, 64) == 6.0, "nf4-g8: 4 + 16/8 = 6 bits a value", "%zu",
          b.codec->unit_bytes(&b, 64));
}

static void test_nf4_table(void) {
    for (int i = 0; i < 16; i++) NF4[i] = strtof(NF4_TEXT[i], NULL);
    /* a group holding the 16 values themselves: max 1, so s = 1 and each value is its own code */
    KvBase b = base_of("nf4-g16");
    unsigned char unit[16 / 2 + 2];
    float out[16];
    b.codec->encode(&b, NF4, 16, unit);
    b.codec->decode(&b, unit, 16, 0, 1, out);
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += ((unit[i / 2] >> (4 * (i % 2))) & 15) != (unsigned)i || to_bits(out[i]) != to_bits(NF4[i]);
    check(bad == 0 && kv_get_u16(unit + 8) == 0x3c00, "nf4 the 16 values are SCHEMES.md's, codes 0..15 in order, s = 1",
          "%d differ", bad);
    int ascending = 1;
    for (int i = 0; i < 15; i++) ascending &= NF4[i] < NF4[i + 1];
    check(ascending, "nf4 table ascending", "no");
}

static void test_nf4_random(void) {
    static float x[8192], out[8192];
    static unsigned char unit[8192];
    char msg[256] = "", name[160];
    int groups[] = {8, 16, 24, 32, 64, 128, 256};
    uint64_t rng = 5;
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        char bn[32];
        snprintf(bn, sizeof bn, "nf4-g%d", groups[gi]);
        KvBase b = base_of(bn);
        int ok = 1, rows = 0;
        for (int trial = 0; trial < 300 && ok; trial++, rows++) {
            int n = groups[gi] * (1 + trial % 4);
            int kind = trial % 6;
            float scale = (float)ldexp(1.0, (int)(next_u64(&rng) % 40) - 25);
            for (int i = 0; i < n; i++) {
                float v = normal(&rng) * scale;
                if (kind == 1 && i % 17 == 3) v *= 40.0f;                               /* outliers */
                if (kind == 2) v = (float)(uniform(&rng) * 2 - 1) * scale;             /* uniform */
                if (kind == 3) v = NF4[next_u64(&rng) % 16] * 0.7109375f;             /* on the grid of s = 0.7109375 */
                if (kind == 4 && i % 5 == 0) v = 0.0f;
                if (kind == 5) v = from_bits((uint32_t)next_u64(&rng) & 0xbfffffffu); /* any exponent below 2^1 */
                x[i] = v;
            }
            if (kind == 3) x[0] = 0.7109375f;
            ok = nf4_row_matches(&b, x, n, unit, out, msg, sizeof msg);
        }
        snprintf(name, sizeof name, "%s %d random rows: scales, codes and values equal the brute-force reference", bn, rows);
        check(ok, name, "%s", msg);
    }
}

static void test_nf4_ties(void) {
    KvBase b = base_of("nf4-g8");
    int bad = 0, exact = 0, checked = 0;
    char why[200] = "";
    for (int i = 0; i < 15; i++) {
        double m = ((double)NF4[i] + NF4[i + 1]) / 2;
        float t = (float)m;
        if ((double)t > m) t = nextafterf(t, -INFINITY);   /* the largest float <= m */
        int on = (double)t == m;
        exact += on;
        float up = nextafterf(t, INFINITY), down = nextafterf(t, -INFINITY);
        /* z = t exactly, through scales 1, 2^-6, 2^5 (x = t*s is exact and x/s gives back t) */
        float scales[] = {1.0f, 0x1.0p-6f, 32.0f};
        for (int k = 0; k < 3; k++) {
            float s = scales[k];
            unsigned ct = nf4_code_in_group(&b, s, t * s), cu = nf4_code_in_group(&b, s, up * s),
                     cd = nf4_code_in_group(&b, s, down * s);
            checked += 3;
            if (ct != (unsigned)i || cu != (unsigned)i + 1 || cd != (unsigned)i) {
                if (!bad++)
                    snprintf(why, sizeof why, "midpoint %d (%s, s=%g): codes %u %u %u, want %d %d %d", i,
                             on ? "a float" : "not a float", s, cd, ct, cu, i, i, i + 1);
            }
        }
    }
    char name[160];
    snprintf(name, sizeof name,
             "nf4 at each of the 15 midpoints (%d of them floats) z = midpoint -> lower index, +1 ulp -> upper (%d)",
             exact, checked);
    check(bad == 0, name, "%s", why);

    /* a non-power-of-two scale: an x whose quotient x / s is exactly a float midpoint */
    float s = 0.7109375f;   /* a half */
    int found = 0, bad2 = 0;
    for (int i = 0; i < 15; i++) {
        double m = ((double)NF4[i] + NF4[i + 1]) / 2;
        float t = (float)m;
        if ((double)t != m) continue;
        float x0 = t * s;
        for (int d = -4; d <= 4; d++) {
            float x = x0;
            for (int j = 0; j < (d < 0 ? -d : d); j++) x = nextafterf(x, d < 0 ? -INFINITY : INFINITY);
            if (x / s != t) continue;
            found++;
            if (nf4_code_in_group(&b, s, x) != (unsigned)i) bad2++;
        }
    }
    check(found > 0 && bad2 == 0, "nf4 ties through a non-power-of-two scale (x / 0.7109375 exactly a midpoint) -> lower",
          "%d found, %d wrong", found, bad2);
}

static void test_nf4_special(void) {
    KvBase b = base_of("nf4-g8");
    unsigned char unit[16 / 2 + 4];
    float out[16];
    char name[160];
    int bad;

    float zeros[8] = {0, -0.0f, 0, 0, 0, 0, -0.0f, 0};
    b.codec->encode(&b, zeros, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 4; i++) bad += unit[i] != 0x77;
    for (int i = 0; i < 8; i++) bad += to_bits(out[i]) != 0;
    check(bad == 0 && kv_get_u16(unit + 4) == 0, "nf4 all-zero group: s = 0, codes 7 (0x77 bytes), decodes to +0", "%d", bad);

    float tiny[8] = {0x1.0p-26f, -0x1.0p-27f, 1e-30f, 0, 0x1.0p-25f, 0, 0, -1e-40f};
    b.codec->encode(&b, tiny, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 8; i++) bad += out[i] != 0.0f;
    check(bad == 0 && kv_get_u16(unit + 4) == 0 && unit[0] == 0x77,
          "nf4 group with max|x| <= 2^-25: fp16 scale 0, all codes 7, decodes to 0", "%d", bad);

    /* NaN values: ignored by the max, coded 7 (x^ = 0); the rest as if they were 0 */
    float with_nan[8] = {0.5f, NAN, -0.25f, 0.1f, -NAN, 0.3f, -0.7f, 0.05f};
    float as_zero[8];
    for (int i = 0; i < 8; i++) as_zero[i] = isnan(with_nan[i]) ? 0.0f : with_nan[i];
    unsigned char unit2[16];
    float out2[8];
    b.codec->encode(&b, with_nan, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    b.codec->encode(&b, as_zero, 8, unit2);
    b.codec->decode(&b, unit2, 8, 0, 1, out2);
    check(memcmp(unit, unit2, 6) == 0 && (unit[0] >> 4) == 7 && (unit[2] & 15) == 7 && out[1] == 0.0f && out[4] == 0.0f,
          "nf4 NaN values: skipped by max|x|, code 7, decode to 0, the group otherwise unchanged", "differ");

    float all_nan[8] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    b.codec->encode(&b, all_nan, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 8; i++) bad += out[i] != 0.0f;
    check(bad == 0 && kv_get_u16(unit + 4) == 0, "nf4 all-NaN group: s = 0, decodes to 0", "%d", bad);

    float with_inf[8] = {0.5f, INFINITY, -0.25f, -INFINITY, 0, 0.3f, -0.7f, 0.05f};
    b.codec->encode(&b, with_inf, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    float s = f16_to_f32((uint16_t)kv_get_u16(unit + 4));
    check(s == f16_to_f32(f32_to_f16(0.7f)) && out[1] == s && out[3] == -s && out[6] == -s,
          "nf4 +-inf: skipped by max|x|, code 15 / 0, decode to +-s", "s %g out %g %g", s, out[1], out[3]);

    float inf_only[8] = {INFINITY, 0, 0, -INFINITY, 0, 0, 0, 0};
    b.codec->encode(&b, inf_only, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 8; i++) bad += out[i] != 0.0f;
    check(bad == 0, "nf4 +-inf in an otherwise zero group: s = 0, decodes to 0", "%d", bad);

    float huge[8] = {1e5f, -3e4f, 65504.0f, 65519.0f, 65520.0f, 1, -1e38f, FLT_MAX};
    b.codec->encode(&b, huge, 8, unit);
    b.codec->decode(&b, unit, 8, 0, 1, out);
    bad = 0;
    for (int i = 0; i < 8; i++) bad += !isfinite(out[i]);
    check(bad == 0 && kv_get_u16(unit + 4) == 0x7bff && out[0] == 65504.0f && out[7] == 65504.0f && out[6] == -65504.0f,
          "nf4 max|x| >= 65520: scale 65504 (largest half), values saturate to +-65504, all finite", "%d non-finite, %g", bad,
          out[0]);
    float big[8] = {65519.0f, 1, 2, 3, 4, 5, 6, 7};
    b.codec->encode(&b, big, 8, unit);
    check(kv_get_u16(unit + 4) == 0x7bff, "nf4 max|x| 65519 rounds to the half 65504", "0x%04x", kv_get_u16(unit + 4));

    /* any input bit pattern decodes to finite values */
    uint64_t rng = 99;
    static float x[4096], y[4096];
    static unsigned char u[4096];
    KvBase b64 = base_of("nf4-g64");
    bad = 0;
    for (int t = 0; t < 2000; t++) {
        for (int i = 0; i < 256; i++) x[i] = from_bits((uint32_t)next_u64(&rng));
        b64.codec->encode(&b64, x, 256, u);
        b64.codec->decode(&b64, u, 256, 0, 1, y);
        for (int i = 0; i < 256; i++) bad += !isfinite(y[i]);
    }
    check(bad == 0, "nf4 2000 rows of random float bit patterns (NaN, inf, huge) decode to finite values", "%d", bad);

    /* hostile bytes (any codes, NaN / inf / subnormal scales) decode without trouble, every path */
    int total = 0;
    for (int t = 0; t < 200; t++) {
        for (int i = 0; i < 64 * 34; i++) u[i] = (unsigned char)next_u64(&rng);
        b64.codec->decode(&b64, u, 64, 0, 64, y);
        int used;
        total += t64_matches(&b64, u, 64, 0, 64, y, &used);
    }
    snprintf(name, sizeof name, "nf4 hostile bytes: decode and decode_t64 agree on 200 random blocks of 64 rows");
    check(total == 200, name, "%d of 200", total);
}

static void test_nf4_rows(void) {
    enum { R = 70 };
    static float x[R * 256], out[R * 256], ref[R * 256];
    static unsigned char units[R * 256];
    uint64_t rng = 21;
    const char *names[] = {"nf4-g64", "nf4-g32", "nf4-g8", "nf4-g16", "nf4-g128", "nf4-g256"};
    int ns[] = {64, 64, 64, 128, 128, 256};
    for (int k = 0; k < 6; k++) {
        KvBase b = base_of(names[k]);
        int n = ns[k];
        size_t rb = b.codec->unit_bytes(&b, n);
        for (int i = 0; i < R * n; i++) x[i] = normal(&rng) * (i % 13 == 0 ? 8.0f : 1.0f);
        for (int r = 0; r < R; r++) b.codec->encode(&b, x + (size_t)r * n, n, units + r * rb);
        for (int r = 0; r < R; r++) {
            for (int g = 0; g < n / b.group; g++) {
                uint8_t codes[4096];
                uint16_t h;
                float s = nf4_ref_group(x + (size_t)r * n + g * b.group, b.group, codes, &h);
                for (int i = 0; i < b.group; i++) ref[(size_t)r * n + g * b.group + i] = NF4[codes[i]] * s;
            }
        }
        int bad = 0;
        b.codec->decode(&b, units, n, 4, 64, out);
        for (int i = 0; i < 64 * n; i++) bad += to_bits(out[i]) != to_bits(ref[4 * n + i]);
        b.codec->decode(&b, units, n, 69, 1, out);
        for (int i = 0; i < n; i++) bad += to_bits(out[i]) != to_bits(ref[69 * n + i]);
        char name[160];
        snprintf(name, sizeof name, "%s rows of %d: decode(r0=4, count=64) and the last row equal the reference", names[k], n);
        check(bad == 0, name, "%d differ", bad);
        int used = 0, ok = 1;
        for (int count = 1; count <= 64 && ok; count += 9) ok = t64_matches(&b, units, n, 6 - count % 5, count, ref + (6 - count % 5) * n, &used);
        snprintf(name, sizeof name, "%s decode_t64 equals decode transposed, 0 past count%s", names[k],
                 used ? "" : " (not provided here)");
        check(ok, name, "mismatch");
    }
}

int main(void) {
    test_fp8_names();
    test_fp8_format(&E4M3);
    test_fp8_format(&E5M2);
    test_nf4_table();
    test_nf4_names();
    test_nf4_random();
    test_nf4_ties();
    test_nf4_special();
    test_nf4_rows();
    return test_exit_code();
}
