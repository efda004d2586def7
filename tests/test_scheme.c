/* tests/test_scheme.c: the scheme language (quant/scheme.h) — parsing, canonical spelling,
 * refusals that name the offending part, the residual / sink / token-group rule of SCHEMES.md
 * §4, stored and effective bits (§6), and the row modifiers (+had, +out, llama.cpp key order)
 * checked against their written definitions. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "quant/scheme.h"
#include "quant/half.h"
#include "tests/test.h"
#include "tests/test_random.h"

/* ---- parsing ---- */

static void test_canonical(void) {
    static const char *const cases[][2] = {
        {"int4-g64", "int4-g64"},
        {"int4", "int4-g64"},
        {"int4-g64-sym", "int4-g64"},
        {"int2-t32-asym+res128", "int2-t32-asym+res128"},
        {"int2-g64+sink4+had", "int2-g64+had+sink4"},
        {"int3-g64+res16+out1+prerope", "int3-g64+prerope+out1+res16"},
        {"fp32", "fp32"},
        {"bf16+had", "bf16+had"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvSpec s;
        char why[200] = "", name[80];
        int rc = kv_spec_parse(cases[i][0], KV_SIDE_KEYS, &s, why, sizeof why);
        snprintf(name, sizeof name, "scheme: '%s' parses as '%s'", cases[i][0], cases[i][1]);
        check(rc == 0 && !strcmp(s.text, cases[i][1]), name, "rc %d, text '%s', why '%s'", rc, rc ? "" : s.text, why);
    }
    KvSpec s;
    char why[200];
    int rc = kv_spec_parse("int2-t32-asym+res128+sink4+out3", KV_SIDE_KEYS, &s, why, sizeof why);
    check(rc == 0 && s.residual == 128 && s.sinks == 4 && s.outliers == 3 && s.base.rows == 32 &&
              s.base.axis == KV_AXIS_TOKENS && s.base.variant && s.base.bits == 2,
          "scheme: modifier numbers and token-axis base fields", "rc %d res %d sink %d out %d", rc, s.residual, s.sinks,
          s.outliers);
}

/* Each bad spelling is refused, and the message names the part. */
static void test_refusals(void) {
    static const char *const cases[][2] = {
        {"", "empty"},
        {"int5-g64", "int5-g64"},
        {"int4-g65", "int4-g65"},
        {"int4-g64+hadd", "+hadd"},
        {"int4-g64+had+had", "twice"},
        {"int4-g64++had", "empty modifier"},
        {"int4-g64+", "empty modifier"},
        {"int4-g64+res0", "+res0"},
        {"int4-g64+res99999999999999999999", "+res9999"},
        {"int4-g64+out65", "+out65"},
        {"int4-g64+sink-1", "+sink-1"},
        {"nope", "unknown base 'nope'"},
        {"int4-g64;", "empty layer item"},
        {"int4-g64;;0:fp32", "empty layer item"},
        {"int4-g64;0:", "empty scheme"},
        {"int4-g64;fp32", "needs layers"},
        {"0:int4-g64", "first item"},
        {"int4-g64;3-1:fp32", "3-1"},
        {"int4-g64;a:fp32", "'a'"},
        {"int4-g64;0-5:fp32;5:int8-g64", "overlap"},
        {"int4-g64;99999999999:fp32", "layers must be"},
        {"int4-g64;0:int9", "int9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvLayered l;
        char why[200] = "", name[96];
        int rc = kv_layered_parse(cases[i][0], KV_SIDE_KEYS, &l, why, sizeof why);
        snprintf(name, sizeof name, "scheme: '%s' is refused naming '%s'", cases[i][0], cases[i][1]);
        check(rc == -1 && strstr(why, cases[i][1]) && !strchr(why, '\n'), name, "rc %d, why '%s'", rc, why);
    }
}

static void test_layers(void) {
    KvLayered l;
    char why[200] = "";
    int rc = kv_layered_parse("int2-g64;0:int8-g64;20-21:int4-g32-asym", KV_SIDE_KEYS, &l, why, sizeof why);
    rc = rc ? rc : kv_layered_bind(&l, 22, 64, KV_SIDE_KEYS, why, sizeof why);
    check(rc == 0 && !strcmp(kv_layered_at(&l, 0)->text, "int8-g64") && !strcmp(kv_layered_at(&l, 1)->text, "int2-g64") &&
              !strcmp(kv_layered_at(&l, 19)->text, "int2-g64") && !strcmp(kv_layered_at(&l, 20)->text, "int4-g32-asym") &&
              !strcmp(kv_layered_at(&l, 21)->text, "int4-g32-asym") &&
              !strcmp(l.text, "int2-g64;0:int8-g64;20-21:int4-g32-asym"),
          "scheme: per-layer items pick each layer's spec", "rc %d why '%s' text '%s'", rc, why, l.text);
    check(!kv_layered_is_fp32(&l), "scheme: a quantized layered scheme is not fp32", "");
    rc = kv_layered_parse("fp32;0:fp32", KV_SIDE_VALUES, &l, why, sizeof why);
    check(rc == 0 && kv_layered_is_fp32(&l), "scheme: fp32 everywhere is fp32", "rc %d", rc);
    rc = kv_layered_parse("fp32;3:fp16", KV_SIDE_VALUES, &l, why, sizeof why);
    check(rc == 0 && !kv_layered_is_fp32(&l), "scheme: one fp16 layer makes it not fp32", "rc %d", rc);
}

/* Refusals that need the model: layer range, head_dim, side. */
static void test_bind(void) {
    static const struct {
        const char *text;
        int layers, head_dim;
        KvSide side;
        const char *why;
    } cases[] = {
        {"int4-g64;22:fp32", 22, 64, KV_SIDE_KEYS, "layer 22 is out of range"},
        {"int4-g64;5-30:fp32", 22, 64, KV_SIDE_KEYS, "layer 30"},
        {"int4-g64", 22, 96, KV_SIDE_KEYS, "96"},
        {"int4-g32+had", 22, 96, KV_SIDE_KEYS, "power of two"},
        {"int4-g64+prerope", 22, 64, KV_SIDE_VALUES, "keys only"},
        {"int2-t32+out2", 22, 64, KV_SIDE_KEYS, "+out"},
        {"int4-g64+out64", 22, 64, KV_SIDE_KEYS, "+out64"},
        {"fp32;0:int4-g64+had", 4, 48, KV_SIDE_VALUES, "int4-g64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvLayered l;
        char why[200] = "", name[96];
        int rc = kv_layered_parse(cases[i].text, cases[i].side, &l, why, sizeof why);
        if (rc == 0) rc = kv_layered_bind(&l, cases[i].layers, cases[i].head_dim, cases[i].side, why, sizeof why);
        snprintf(name, sizeof name, "scheme: '%s' on %d layers, head_dim %d is refused", cases[i].text, cases[i].layers,
                 cases[i].head_dim);
        check(rc == -1 && strstr(why, cases[i].why), name, "rc %d, why '%s' (want '%s')", rc, why, cases[i].why);
    }
    KvLayered l;
    char why[200] = "";
    int rc = kv_layered_parse("int4-g32+had+prerope+res8+sink2+out1", KV_SIDE_KEYS, &l, why, sizeof why);
    rc = rc ? rc : kv_layered_bind(&l, 4, 64, KV_SIDE_KEYS, why, sizeof why);
    check(rc == 0 && l.all.side == KV_SIDE_KEYS, "scheme: every modifier at once binds on keys", "why '%s'", why);
}

/* A scheme's side is fixed when it is parsed: it cannot be parsed for no side, bound for the
 * other side (keys in llama.cpp's order would be coded as values), or bound unparsed. */
static void test_sides(void) {
    KvLayered l;
    char why[200] = "";
    int rc = kv_layered_parse("int4-g64", KV_SIDE_UNBOUND, &l, why, sizeof why);
    check(rc == -1 && strstr(why, "keys or for values"), "scheme: parsing for no side is refused", "rc %d why '%s'", rc, why);
    rc = kv_layered_parse("q4_0;1:q8_0", KV_SIDE_KEYS, &l, why, sizeof why);
    rc = rc ? rc : kv_layered_bind(&l, 4, 64, KV_SIDE_VALUES, why, sizeof why);
    check(rc == -1 && strstr(why, "parsed for keys, used for values"), "scheme: a key scheme bound for values is refused",
          "rc %d why '%s'", rc, why);
    rc = kv_layered_parse("fp32;1:q8_0", KV_SIDE_VALUES, &l, why, sizeof why);
    l.items[0].spec.side = KV_SIDE_KEYS;   /* one item of another side, as a careless caller might make */
    rc = rc ? rc : kv_layered_bind(&l, 4, 64, KV_SIDE_VALUES, why, sizeof why);
    check(rc == -1 && strstr(why, "q8_0: parsed for keys"), "scheme: a layer item of the other side is refused",
          "rc %d why '%s'", rc, why);
    memset(&l, 0, sizeof l);
    rc = kv_base_parse("int4-g64", &l.all.base, why, sizeof why);
    snprintf(l.all.text, sizeof l.all.text, "int4-g64");
    rc = rc ? rc : kv_layered_bind(&l, 4, 64, KV_SIDE_KEYS, why, sizeof why);
    check(rc == -1 && strstr(why, "parsed for no side"), "scheme: an unbound (zeroed) scheme is refused", "rc %d why '%s'",
          rc, why);
}

/* ---- the positions rule and bits ---- */

static KvSpec spec_of(const char *text) {
    KvSpec s;
    char why[200];
    if (kv_spec_parse(text, KV_SIDE_KEYS, &s, why, sizeof why)) memset(&s, 0, sizeof s);
    return s;
}

/* SCHEMES.md §4, restated: quantized positions [S, end) with n written. */
static int expected_end(int axis_tokens, int g, int s, int r, int n) {
    if (axis_tokens) {
        int free_positions = n - s - r;
        return s + (free_positions > 0 ? g * (free_positions / g) : 0);
    }
    return n - r > s ? n - r : s;
}

static void test_quantized_end(void) {
    static const struct {
        const char *text;
        int tokens, g, s, r;
    } cases[] = {
        {"int4-g64", 0, 1, 0, 0}, {"int4-g64+res32", 0, 1, 0, 32}, {"int2-g64+sink4", 0, 1, 4, 0},
        {"int2-t32-asym+res128", 1, 32, 0, 128}, {"int4-t32-asym", 1, 32, 0, 0}, {"int2-t16+res8+sink3", 1, 16, 3, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvSpec s = spec_of(cases[i].text);
        int bad = -1;
        for (int n = 0; n <= 400 && bad < 0; n++)
            if (kv_spec_quantized_end(&s, n) != expected_end(cases[i].tokens, cases[i].g, cases[i].s, cases[i].r, n)) bad = n;
        char name[96];
        snprintf(name, sizeof name, "scheme: %s quantizes the positions SCHEMES.md 4 says, n = 0..400", cases[i].text);
        check(bad < 0, name, "n = %d: got %d", bad, bad < 0 ? 0 : kv_spec_quantized_end(&s, bad));
    }
    /* hand-worked: int2-t32-asym+res128 at n = 200 -> 32 * floor(72 / 32) = 64; at 160 -> 32; at 159 -> 0 */
    KvSpec s = spec_of("int2-t32-asym+res128");
    check(kv_spec_quantized_end(&s, 200) == 64 && kv_spec_quantized_end(&s, 160) == 32 && kv_spec_quantized_end(&s, 159) == 0,
          "scheme: int2-t32-asym+res128 at n = 159, 160, 200 holds 0, 32, 64 quantized", "%d %d %d",
          kv_spec_quantized_end(&s, 159), kv_spec_quantized_end(&s, 160), kv_spec_quantized_end(&s, 200));
}

static void test_bits(void) {
    static const struct {
        const char *text;
        double stored;
    } cases[] = {
        {"int4-g64", 4.25}, {"int4-g32", 4.5}, {"int4-g64-asym", 4.5}, {"int2-t32-asym", 3.0},
        {"int3-g64+out1", 3.25 + 24.0 / 64}, {"fp16", 16}, {"bf16", 16}, {"fp32", 32}, {"int8-g64+had", 8.25},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        KvSpec s = spec_of(cases[i].text);
        double got = s.base.codec ? kv_spec_stored_bits(&s, 64) : -1;
        char name[96];
        snprintf(name, sizeof name, "scheme: %s stores %.4g bits a value at head_dim 64", cases[i].text, cases[i].stored);
        check(fabs(got - cases[i].stored) < 1e-12, name, "got %.6f", got);
    }
    /* effective bits: int4-g64+res128 at ctx 1024: 896 positions at 4.25, 128 at 16 */
    KvSpec s = spec_of("int4-g64+res128");
    double want = (896 * 4.25 + 128 * 16.0) / 1024, got = kv_spec_effective_bits(&s, 64, 1024);
    check(fabs(got - want) < 1e-12, "scheme: effective bits of int4-g64+res128 at 1024 count 128 positions at 16 bits",
          "got %.6f want %.6f", got, want);
    s = spec_of("int2-t32-asym+res128+sink4");   /* n = 1024: end = 4 + 32 * floor(892 / 32) = 868 */
    want = ((868 - 4) * 3.0 + (1024 - 864) * 16.0) / 1024, got = kv_spec_effective_bits(&s, 64, 1024);
    check(fabs(got - want) < 1e-12, "scheme: effective bits of a token-axis scheme with sinks", "got %.6f want %.6f", got, want);
}

/* ---- row modifiers ---- */

static uint64_t rng_state = 12345;
static float uniform_pm1(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* H restated from SCHEMES.md §5: the matrix of Sylvester's construction, entry (i, j) =
 * (-1)^popcount(i & j), scaled by 1/sqrt(n), applied as a plain matrix product. */
static void hadamard_by_matrix(const float *x, int n, float *out) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[j];
        out[i] = (float)(s / sqrt((double)n));
    }
}

static void test_had_domain(void) {
    KvSpec s = spec_of("fp32+had");
    float x[64], y[64], want[64];
    for (int i = 0; i < 64; i++) x[i] = uniform_pm1();
    memcpy(y, x, sizeof x);
    kv_spec_to_domain(&s, y, 64);
    hadamard_by_matrix(x, 64, want);
    double d = max_abs_diff(y, want, 64);
    check(d <= 1e-6, "scheme: +had's domain is H x (the matrix of SCHEMES.md 5)", "max diff %.3g (tolerance 1e-6)", d);
    kv_spec_from_domain(&s, y, 64);
    d = max_abs_diff(y, x, 64);
    check(d <= 1e-6, "scheme: +had's domain and back is the row", "max diff %.3g (tolerance 1e-6)", d);
    /* fp32+had stores H x; decoding gives H x, and back gives x */
    unsigned char unit[64 * 4];
    float scratch[64], dec[64];
    kv_spec_encode(&s, x, 64, unit, scratch);
    kv_spec_decode(&s, unit, 64, 0, 1, dec);
    d = max_abs_diff(dec, want, 64);
    check(d <= 1e-6, "scheme: fp32+had stores the rotated row", "max diff %.3g (tolerance 1e-6)", d);
}

/* int4-g64+had against the definition: rotate, quantize with int4-g64, dequantize, rotate back. */
static void test_had_composes(void) {
    KvSpec had = spec_of("int4-g64+had"), plain = spec_of("int4-g64");
    float x[64], hx[64], scratch[64], plain_dec[64], had_dec[64];
    unsigned char unit_a[64], unit_b[64];
    for (int i = 0; i < 64; i++) x[i] = uniform_pm1() * (i == 5 ? 20.0f : 1.0f);
    memcpy(hx, x, sizeof x);
    kv_spec_to_domain(&had, hx, 64);                   /* = H x */
    kv_spec_encode(&plain, hx, 64, unit_a, scratch);    /* int4-g64 of H x */
    kv_spec_encode(&had, x, 64, unit_b, scratch);
    check(kv_spec_unit_bytes(&had, 64) == 34 && !memcmp(unit_a, unit_b, 34),
          "scheme: int4-g64+had stores int4-g64 of H x", "");
    kv_spec_decode(&plain, unit_a, 64, 0, 1, plain_dec);
    kv_spec_decode(&had, unit_b, 64, 0, 1, had_dec);
    check(max_abs_diff(plain_dec, had_dec, 64) == 0, "scheme: int4-g64+had decodes in the rotated domain", "");
}

/* +outK: the K largest |x| kept as fp16 with their index, zeroed before the base. */
static void test_outliers(void) {
    KvSpec s = spec_of("int3-g64+out2"), base = spec_of("int3-g64");
    float x[64], scratch[64], dec[64], zeroed[64], base_dec[64];
    for (int i = 0; i < 64; i++) x[i] = uniform_pm1();
    x[10] = 9.0f;
    x[40] = -9.0f;   /* a tie in |x|: both kept */
    x[50] = 8.5f;    /* third largest: quantized */
    unsigned char unit[64];
    kv_spec_encode(&s, x, 64, unit, scratch);
    kv_spec_decode(&s, unit, 64, 0, 1, dec);
    memcpy(zeroed, x, sizeof x);
    zeroed[10] = zeroed[40] = 0.0f;
    unsigned char base_unit[64];
    kv_spec_encode(&base, zeroed, 64, base_unit, scratch);
    kv_spec_decode(&base, base_unit, 64, 0, 1, base_dec);
    base_dec[10] = 9.0f;
    base_dec[40] = -9.0f;
    check(kv_spec_unit_bytes(&s, 64) == kv_spec_unit_bytes(&base, 64) + 6 && max_abs_diff(dec, base_dec, 64) == 0,
          "scheme: +out2 keeps the two largest |x| exactly and quantizes the rest without them",
          "max diff %.3g", max_abs_diff(dec, base_dec, 64));
    /* ties in |x| go to the lower index: with three equal magnitudes, +out2 keeps the first two */
    for (int i = 0; i < 64; i++) x[i] = 0.25f;
    x[7] = -3.0f, x[3] = 3.0f, x[60] = 3.0f;
    kv_spec_encode(&s, x, 64, unit, scratch);
    kv_spec_decode(&s, unit, 64, 0, 1, dec);
    /* the kept indices are the bytes after each fp16 value, after the 26 bytes of int3-g64 */
    check(dec[3] == 3.0f && dec[7] == -3.0f && unit[26 + 2] == 3 && unit[26 + 5] == 7,
          "scheme: +out ties in |x| keep the lower index", "kept indices %d %d", unit[28], unit[31]);
    /* fp16 rounding of a kept value, and a NaN counts as the largest */
    for (int i = 0; i < 64; i++) x[i] = 0.1f * (float)(i % 5);
    x[20] = 1000.123f;
    x[30] = NAN;
    kv_spec_encode(&s, x, 64, unit, scratch);
    kv_spec_decode(&s, unit, 64, 0, 1, dec);
    check(isnan(dec[30]) && dec[20] == round_to_f16(1000.123f), "scheme: +out keeps NaN first and rounds kept values to fp16",
          "dec[30] %g dec[20] %g", dec[30], dec[20]);
    int finite = 1;
    for (int i = 0; i < 64; i++)
        if (i != 30 && !isfinite(dec[i])) finite = 0;
    check(finite, "scheme: a NaN taken as an outlier leaves the rest of the row finite", "");
}

/* The llama.cpp key order, checked through a float base (fp32 stores the row as given) given
 * the flag of llama.cpp's block types: a key row is stored as (x0, x32, x1, x33, ...); values
 * keep their order. */
static void test_llama_order(void) {
    KvSpec s = spec_of("fp32");
    KvCodec fp32_in_llama_order = *s.base.codec;
    fp32_in_llama_order.llama_key_order = 1;
    s.base.codec = &fp32_in_llama_order;
    float x[64], scratch[64], stored[64], back[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    kv_spec_encode(&s, x, 64, stored, scratch);
    int ok = 1;
    for (int i = 0; i < 32; i++) ok = ok && stored[2 * i] == (float)i && stored[2 * i + 1] == (float)(i + 32);
    memcpy(back, stored, sizeof back);
    kv_spec_from_domain(&s, back, 64);
    check(ok && max_abs_diff(back, x, 64) == 0, "scheme: llama.cpp bases store key rows as (0, d/2, 1, d/2+1, ...)", "");
    s.side = KV_SIDE_VALUES;
    kv_spec_encode(&s, x, 64, stored, scratch);
    check(max_abs_diff(stored, x, 64) == 0, "scheme: llama.cpp bases keep value rows in order", "");
}

/* +outK read back in the natural order (decode, then kv_spec_from_domain: what attention's
 * output and kv_cache_read_* see), against the written rows: for every base of the codec table
 * that takes +out at head_dim 64 (fitted bases need a table: not here), the mean squared error
 * relative to the rows' energy with +out2 is at most the base's own (the two largest |x| come
 * back as fp16 and no longer set the scales), with 1e-6 for the fp16 rounding of those two
 * where the base is exact. A codec with an inner rotation (tq) returns +out rows out of it
 * already: a domain that rotated them back again would read back other rows altogether. */
static double natural_round_trip_error(const KvSpec *s, const float *rows, int n_rows) {
    unsigned char unit[1024];
    float scratch[64], back[64];
    double err = 0, energy = 0;
    for (int r = 0; r < n_rows; r++) {
        const float *x = rows + (size_t)r * 64;
        kv_spec_encode(s, x, 64, unit, scratch);
        kv_spec_decode(s, unit, 64, 0, 1, back);
        kv_spec_from_domain(s, back, 64);
        for (int i = 0; i < 64; i++) {
            err += ((double)back[i] - x[i]) * ((double)back[i] - x[i]);
            energy += (double)x[i] * x[i];
        }
    }
    return err / energy;
}

static void test_outliers_natural_order(void) {
    enum { ROWS = 64 };
    static float rows[ROWS * 64];
    uint64_t seed = 7;
    for (int i = 0; i < ROWS * 64; i++) rows[i] = normal(&seed) * (i % 64 == 9 ? 8.0f : 1.0f);   /* channel 9 an outlier channel */
    char worst[200] = "";
    int bases = 0, bad = 0;
    double worst_ratio = 0;
    for (int c = 0; c < kv_codec_count(); c++) {
        char list[256];
        snprintf(list, sizeof list, "%s", kv_codec_at(c)->examples);
        for (char *save = NULL, *name = strtok_r(list, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
            char text[96], why[200];
            snprintf(text, sizeof text, "%s+out2", name);
            KvSpec base, out;
            if (kv_spec_parse(name, KV_SIDE_KEYS, &base, why, sizeof why) || kv_spec_is_fitted(&base) ||
                kv_spec_parse(text, KV_SIDE_KEYS, &out, why, sizeof why))
                continue;
            KvLayered l;
            if (kv_layered_parse(text, KV_SIDE_KEYS, &l, why, sizeof why) || kv_layered_bind(&l, 1, 64, KV_SIDE_KEYS, why, sizeof why) ||
                kv_spec_unit_bytes(&out, 64) > 1024)
                continue;   /* a token-axis base, or one that does not fit rows of 64 */
            double e_base = natural_round_trip_error(&base, rows, ROWS), e_out = natural_round_trip_error(&out, rows, ROWS);
            bases++;
            if (e_base > 1e-6 && e_out / e_base > worst_ratio) worst_ratio = e_out / e_base;
            if (!(e_out <= (e_base > 1e-6 / 1.05 ? 1.05 * e_base : 1e-6))) {
                if (!bad++) snprintf(worst, sizeof worst, "%s: relative error %.3g, %s alone %.3g", text, e_out, name, e_base);
            }
        }
    }
    check(bases >= 10 && !bad,
          "scheme: every row base +out2 read back in the natural order is no worse than the base alone (1.05x, 1e-6 where exact)",
          "%d of %d bases worse; first: %s", bad, bases, worst);
    printf("     +out2 in the natural order: %d bases, error at most %.3f x the base's\n", bases, worst_ratio);
}

/* An outlier index in the unit's bytes equal to the row's length, or past it (only hostile bytes
 * hold one: encode writes indices below n), is skipped: decode writes inside its row. */
static void test_outlier_index_past_row(void) {
    KvSpec s = spec_of("int4-g64+out2"), base = spec_of("int4-g64");
    float x[64], scratch[64], dec[65], base_dec[64];
    uint64_t seed = 31;
    for (int i = 0; i < 64; i++) x[i] = normal(&seed);
    unsigned char unit[64];
    kv_spec_encode(&s, x, 64, unit, scratch);
    size_t codec_bytes = kv_spec_unit_bytes(&base, 64);
    unit[codec_bytes + 2] = 64;    /* outlier 0 at index n */
    unit[codec_bytes + 5] = 255;   /* outlier 1 far past the row */
    dec[64] = 12345.0f;            /* the float after the row */
    kv_spec_decode(&s, unit, 64, 0, 1, dec);
    kv_spec_decode(&base, unit, 64, 0, 1, base_dec);
    check(dec[64] == 12345.0f && max_abs_diff(dec, base_dec, 64) == 0,
          "scheme: +out indices n and 255 in a unit's bytes are skipped: nothing written past the row, the rest = the base",
          "after the row %g, max diff to the base %.3g", dec[64], max_abs_diff(dec, base_dec, 64));
}

int main(void) {
    test_canonical();
    test_refusals();
    test_layers();
    test_sides();
    test_bind();
    test_quantized_end();
    test_bits();
    test_had_domain();
    test_had_composes();
    test_outliers();
    test_llama_order();
    test_outliers_natural_order();
    test_outlier_index_past_row();
    return test_exit_code();
}
