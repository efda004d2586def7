/* tests/test_codec_int.c: the integer codec (quant/codec_int.c: intB-gG[-asym], intB-tG[-asym])
 * against its definition, restated here one value at a time:
 *   sym:  scale = fp16(max|x| / (2^(B-1)-1)); q = clamp(rint(x/scale), -2^(B-1), 2^(B-1)-1); x^ = q*scale
 *   asym: lo = fp16(min x); scale = fp16((max-min) / (2^B-1)); q = clamp(rint((x-lo)/scale), 0, 2^B-1);
 *         x^ = q*scale + lo
 * with rint = round half to even (written out by hand below, not rintf), the division by the
 * fp16-rounded scale, codes 0 for a group whose scale is 0, and q*scale rounded before + lo.
 * NaN and infinities: min, max and max|x| skip NaN, a NaN (any quotient that is NaN) gets the
 * lowest code, an infinite value makes the scale infinite.
 * Layout, read back bit by bit: code i of a stream at bits [i*B, i*B+B), stream bit k = bit k%8
 * of byte k/8, codes stored unsigned (sym q + 2^(B-1)); little-endian fp16 parameters after
 * the codes, scale then (asym) minimum;
 *   gG unit = one row: [codes of the n values][n/G groups' parameters]
 *   tG unit = G rows:  [channel 0's G codes][channel 1's] ... [n channels' parameters]
 * Checked for every width and both axes: the parsed names and their aliases, unit sizes,
 * stored bytes, x^ bit for bit, ties, zero and constant groups, NaN/inf/huge/subnormal groups,
 * decoding any run of rows (across token units), and decode_t64 (attention's transposed
 * 64-row key block, with the AVX-512 fast paths) against decode + transpose. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/scheme.h"
#include "tests/test.h"
#include "tests/test_random.h"

/* splitmix64: a small deterministic generator, state passed explicitly. */
static int same_float(float a, float b) { return to_bits(a) == to_bits(b); }

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int f16_is_finite(uint16_t h) { return (h & 0x7c00) != 0x7c00; }

/* ---- the definition ------------------------------------------------------ */

/* A base as the test reads its name: bits, group, asym, token axis. */
typedef struct {
    int bits, group, asym, tokens;
} Fmt;

static int qmin_of(Fmt f) { return f.asym ? 0 : -(1 << (f.bits - 1)); }
static int qmax_of(Fmt f) { return f.asym ? (1 << f.bits) - 1 : (1 << (f.bits - 1)) - 1; }
static int n_params(Fmt f) { return f.asym ? 2 : 1; }

/* Round half to even, by hand. */
static float ref_rint(float r) {
    float f = floorf(r), d = r - f;
    if (d < 0.5f) return f;
    if (d > 0.5f) return f + 1.0f;
    return fmodf(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

typedef struct {
    uint16_t scale, lo;   /* fp16 bits; lo = 0 for symmetric groups */
} RefParams;

/* One group of count values x[0], x[stride], ...: signed codes into q[0..count), x^ into
 * xh[0], xh[stride], ... */
static RefParams ref_group(Fmt f, const float *x, size_t stride, int count, int *q, float *xh) {
    float mn = NAN, mx = NAN, amax = 0.0f;
    int seen = 0;
    for (int i = 0; i < count; i++) {
        float v = x[(size_t)i * stride];
        if (isnan(v)) continue;
        if (!seen || v < mn) mn = v;
        if (!seen || v > mx) mx = v;
        if (fabsf(v) > amax) amax = fabsf(v);
        seen = 1;
    }
    int qmin = qmin_of(f), qmax = qmax_of(f);
    RefParams p = {0, 0};
    float lo = 0.0f;
    if (!f.asym) {
        p.scale = f32_to_f16(amax / (float)qmax);
    } else {
        p.lo = f32_to_f16(mn);
        lo = f16_to_f32(p.lo);
        p.scale = f32_to_f16((mx - mn) / (float)qmax);
    }
    float scale = f16_to_f32(p.scale);
    for (int i = 0; i < count; i++) {
        float v = x[(size_t)i * stride];
        int c = 0;
        if (scale != 0.0f) {
            volatile float diff = f.asym ? v - lo : v;
            float r = diff / scale;
            if (isnan(r)) {
                c = qmin;
            } else {
                float k = ref_rint(r);
                c = k < (float)qmin ? qmin : k > (float)qmax ? qmax : (int)k;
            }
        }
        q[i] = c;
        volatile float prod = (float)c * scale;   /* rounded before adding lo */
        xh[(size_t)i * stride] = f.asym ? prod + lo : prod;
    }
    return p;
}

/* Stored code i of a stream, read bit by bit from the documented layout. */
static unsigned read_code(const uint8_t *p, size_t i, int bits) {
    unsigned c = 0;
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        c |= (unsigned)((p[bit / 8] >> (bit % 8)) & 1) << k;
    }
    return c;
}

static uint16_t read_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Unit bytes from the layout: codes, then fp16 parameters per group. */
static size_t ref_unit_bytes(Fmt f, int n) {
    if (f.tokens) return (size_t)f.group * n * f.bits / 8 + (size_t)n * n_params(f) * 2;
    return (size_t)n * f.bits / 8 + (size_t)(n / f.group) * n_params(f) * 2;
}

/* The reference of one unit (gG: one row of n; tG: G rows of n): x^ into xh (same shape),
 * the expected unit bytes into want. */
static void ref_unit(Fmt f, const float *x, int n, float *xh, uint8_t *want) {
    int q[4096];
    if (!f.tokens) {
        uint8_t *params = want + (size_t)n * f.bits / 8;
        memset(want, 0, (size_t)n * f.bits / 8);
        for (int g = 0; g < n / f.group; g++) {
            RefParams p = ref_group(f, x + (size_t)g * f.group, 1, f.group, q, xh + (size_t)g * f.group);
            for (int i = 0; i < f.group; i++) {
                size_t idx = (size_t)g * f.group + i;
                unsigned c = (unsigned)(f.asym ? q[i] : q[i] + (1 << (f.bits - 1)));
                for (int k = 0; k < f.bits; k++) {
                    size_t bit = idx * (size_t)f.bits + (size_t)k;
                    want[bit / 8] |= (uint8_t)(((c >> k) & 1) << (bit % 8));
                }
            }
            uint8_t *pp = params + (size_t)g * n_params(f) * 2;
            pp[0] = (uint8_t)p.scale, pp[1] = (uint8_t)(p.scale >> 8);
            if (f.asym) pp[2] = (uint8_t)p.lo, pp[3] = (uint8_t)(p.lo >> 8);
        }
        return;
    }
    size_t channel_bytes = (size_t)f.group * f.bits / 8;
    uint8_t *params = want + (size_t)n * channel_bytes;
    memset(want, 0, (size_t)n * channel_bytes);
    for (int c = 0; c < n; c++) {
        RefParams p = ref_group(f, x + c, (size_t)n, f.group, q, xh + c);
        for (int j = 0; j < f.group; j++) {
            unsigned code = (unsigned)(f.asym ? q[j] : q[j] + (1 << (f.bits - 1)));
            for (int k = 0; k < f.bits; k++) {
                size_t bit = (size_t)j * f.bits + (size_t)k;
                want[(size_t)c * channel_bytes + bit / 8] |= (uint8_t)(((code >> k) & 1) << (bit % 8));
            }
        }
        uint8_t *pp = params + (size_t)c * n_params(f) * 2;
        pp[0] = (uint8_t)p.scale, pp[1] = (uint8_t)(p.scale >> 8);
        if (f.asym) pp[2] = (uint8_t)p.lo, pp[3] = (uint8_t)(p.lo >> 8);
    }
}

/* Compares a stored unit with the reference through the layout, reading codes bit by bit
 * and parameters as fp16 (two NaN parameters count as equal: an all-NaN asym group's minimum
 * is some NaN). Adds the differences to *codes and *params. */
static void compare_unit(Fmt f, const uint8_t *got, const uint8_t *want, int n, int *codes, int *params) {
    size_t values = (size_t)n * (f.tokens ? f.group : 1);
    for (size_t i = 0; i < values; i++) *codes += read_code(got, i, f.bits) != read_code(want, i, f.bits);
    size_t groups = f.tokens ? (size_t)n : (size_t)(n / f.group);
    const uint8_t *gp = got + values * f.bits / 8, *wp = want + values * f.bits / 8;
    for (size_t k = 0; k < groups * n_params(f); k++) {
        uint16_t a = read_u16(gp + 2 * k), b = read_u16(wp + 2 * k);
        *params += a != b && !(f16_is_nan(a) && f16_is_nan(b));
    }
}

/* ---- names ---------------------------------------------------------------- */

static int parse_base(const char *name, KvBase *b) {
    char why[200];
    return kv_base_parse(name, b, why, sizeof why) == 0;
}

static void test_names(void) {
    static const struct {
        const char *text, *canonical;
        Fmt f;
    } ok[] = {
        {"int4-g64", "int4-g64", {4, 64, 0, 0}},       {"int4-g64-sym", "int4-g64", {4, 64, 0, 0}},
        {"int4-g32-sym", "int4-g32", {4, 32, 0, 0}},   {"int4-g128-sym", "int4-g128", {4, 128, 0, 0}},
        {"int8-g64-sym", "int8-g64", {8, 64, 0, 0}},   {"int2-g64-sym", "int2-g64", {2, 64, 0, 0}},
        {"int4", "int4-g64", {4, 64, 0, 0}},           {"int8", "int8-g64", {8, 64, 0, 0}},
        {"int4-asym", "int4-g64-asym", {4, 64, 1, 0}}, {"int4-g64-asym", "int4-g64-asym", {4, 64, 1, 0}},
        {"int3-g64", "int3-g64", {3, 64, 0, 0}},       {"int3-g8-asym", "int3-g8-asym", {3, 8, 1, 0}},
        {"int8-g4096", "int8-g4096", {8, 4096, 0, 0}}, {"int2-t32-asym", "int2-t32-asym", {2, 32, 1, 1}},
        {"int4-t8", "int4-t8", {4, 8, 0, 1}},          {"int8-t16-sym", "int8-t16", {8, 16, 0, 1}},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        KvBase b;
        char name[128];
        int parsed = parse_base(ok[i].text, &b);
        Fmt f = ok[i].f;
        snprintf(name, sizeof name, "codec int: '%s' parses as %s (bits %d, group %d, %s, %s axis)", ok[i].text,
                 ok[i].canonical, f.bits, f.group, f.asym ? "asym" : "sym", f.tokens ? "token" : "channel");
        check(parsed && !strcmp(b.name, ok[i].canonical) && b.bits == f.bits && b.group == f.group && b.variant == f.asym &&
                  b.axis == (f.tokens ? KV_AXIS_TOKENS : KV_AXIS_CHANNELS) && b.rows == (f.tokens ? f.group : 1) &&
                  b.codec && !b.codec->llama_key_order && strstr(b.codec->syntax, "intB"),
              name, "parsed %d name '%s' bits %d group %d asym %d axis %d rows %d", parsed, parsed ? b.name : "",
              b.bits, b.group, b.variant, (int)b.axis, b.rows);
    }
    /* refused, the message naming the part (or "unknown base" when no codec claims the name) */
    static const char *const bad[][2] = {
        {"int4-g64-asym-sym", "int4-g64-asym-sym"}, {"int5", "bits must be 2, 3, 4 or 8"},
        {"int16-g64", "bits must be"},              {"int4-g63", "multiple of 8"},
        {"int4-g0", "multiple of 8"},               {"int4-g4104", "multiple of 8 from 8 to 4096"},
        {"int4-t12", "multiple of 8"},              {"int4-g", "int4-g"},
        {"int4-x64", "int4-x64"},                   {"int4-g64-", "int4-g64-"},
        {"int", "unknown base 'int'"},              {"fp32-sym", "unknown base 'fp32-sym'"},
        {"", "unknown base ''"},                    {"float16", "unknown base 'float16'"},
    };
    int refused = 0;
    char first[256] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        KvBase b;
        char why[200] = "";
        int rc = kv_base_parse(bad[i][0], &b, why, sizeof why);
        if (rc == -1 && strstr(why, bad[i][1]) && !strchr(why, '\n')) refused++;
        else if (!first[0]) snprintf(first, sizeof first, "'%s': rc %d, why '%s'", bad[i][0], rc, why);
    }
    check(refused == (int)(sizeof bad / sizeof bad[0]), "codec int: bad names refused, the message naming the part",
          "%s", first);

    /* rows a base can store: gG needs G | n; tG any n */
    KvBase b;
    char why[200] = "";
    int ok_g = parse_base("int4-g64", &b) && !kv_base_check(&b, 96, why, sizeof why) && strstr(why, "group 64") &&
               strstr(why, "96") && kv_base_check(&b, 128, why, sizeof why);
    check(ok_g, "codec int: int4-g64 stores rows of 128 values, not of 96 (the message names the group and 96)",
          "why '%s'", why);
    int ok_t = parse_base("int2-t32-asym", &b) && kv_base_check(&b, 24, why, sizeof why) &&
               kv_base_check(&b, 64, why, sizeof why) && !kv_base_check(&b, 0, why, sizeof why);
    check(ok_t, "codec int: int2-t32-asym stores rows of any width (24, 64), not of 0", "why '%s'", why);

    /* bits a value, and the ratio to fp16 the seed's metrics files call compression_ratio */
    parse_base("int4-g64", &b);
    double r = 16.0 / kv_spec_stored_bits(&(KvSpec){.base = b}, 64);
    check(kv_spec_stored_bits(&(KvSpec){.base = b}, 64) == 4.25 && r == 128.0 / 34.0, "codec int: int4-g64 = 4.25 bits, vs fp16 64*2/(32+2) = 3.7647",
          "bits %.17g ratio %.17g", kv_spec_stored_bits(&(KvSpec){.base = b}, 64), r);
    parse_base("int2-t32-asym", &b);
    check(kv_spec_stored_bits(&(KvSpec){.base = b}, 64) == 3.0, "codec int: int2-t32-asym = 2 + 32/32 = 3 bits a value", "got %.17g",
          kv_spec_stored_bits(&(KvSpec){.base = b}, 64));
}

/* ---- test data ------------------------------------------------------------ */

/* Value i of a group built so x/scale (sym) or (x-lo)/scale (asym) lands exactly on k + 0.5:
 * the scale comes out as exactly 0.25, so every value but the extremes is a rounding tie
 * (rint must pick the even neighbour). */
static float tie_value(Fmt f, int i) {
    int levels = qmax_of(f);
    if (i == 0) return (float)levels * 0.25f;                       /* max (and max|x|) */
    if (i == 1) return f.asym ? 0.0f : -(float)levels * 0.25f;      /* min */
    int j = i % levels;                                             /* 0 .. levels-1 */
    return f.asym ? ((float)j + 0.5f) * 0.25f : ((float)j - (float)(levels / 2) - 0.5f) * 0.25f;
}

enum { KIND_ZERO, KIND_CONSTANT, KIND_SPIKE, KIND_TIES, KIND_OFFSET, KIND_NORMAL, KIND_COUNT = 8 };

/* Value i of a group of the given kind (kinds 5..7: normal with an outlier at i = 7). */
static float group_value(Fmt f, int kind, int i, float sc, uint64_t *rng) {
    switch (kind) {
    case KIND_ZERO: return 0.0f;
    case KIND_CONSTANT: return -1.375f * sc;
    case KIND_SPIKE: return i == 5 ? 3.0f * sc : 0.0f;
    case KIND_TIES: return tie_value(f, i);
    case KIND_OFFSET: return 0.5f + 1e-4f * normal(rng);
    default: return sc * normal(rng) * (i == 7 ? 8.0f : 1.0f);
    }
}

static float random_scale(uint64_t *rng) { return (float)pow(10.0, uniform(rng) * 6 - 3); }

/* How many of a tie group's quotients land exactly on k + 0.5 (scale 0.25, minimum 0), so
 * that the tie check means something. */
static int count_ties(Fmt f, int count) {
    int ties = 0;
    for (int i = 0; i < count; i++) {
        float r = tie_value(f, i) / 0.25f;
        ties += r - floorf(r) == 0.5f;
    }
    return ties;
}

/* ---- channel axis: a unit is one row ------------------------------------- */

static void test_rows(const char *text, uint64_t *rng) {
    KvBase b;
    char name[160];
    if (!parse_base(text, &b)) {
        snprintf(name, sizeof name, "codec int: %s parses", text);
        check(0, name, "refused");
        return;
    }
    Fmt f = {b.bits, b.group, b.variant, 0};
    const int n = f.group < 64 ? 64 : f.group, rows = 1024 / n;
    float x[1024], want[1024], got[1024], part[1024];
    size_t ub = b.codec->unit_bytes(&b, n);
    snprintf(name, sizeof name, "codec int: %s unit of %d values = %zu bytes (codes, then fp16 parameters)", text, n,
             ref_unit_bytes(f, n));
    check(ub == ref_unit_bytes(f, n), name, "got %zu", ub);
    if (ub != ref_unit_bytes(f, n)) return;

    /* groups of every kind, in order along the flat run of rows */
    for (int g = 0; g < 1024 / f.group; g++) {
        float sc = random_scale(rng);
        for (int i = 0; i < f.group; i++) x[g * f.group + i] = group_value(f, g % KIND_COUNT, i, sc, rng);
    }
    uint8_t *buf = malloc((size_t)rows * ub + 1), *units = buf + 1;   /* rows at an odd address */
    uint8_t *ref_bytes = malloc(ub);
    memset(buf, 0xAA, (size_t)rows * ub + 1);
    int bad_codes = 0, bad_params = 0;
    for (int r = 0; r < rows; r++) {
        b.codec->encode(&b, x + (size_t)r * n, n, units + (size_t)r * ub);
        ref_unit(f, x + (size_t)r * n, n, want + (size_t)r * n, ref_bytes);
        compare_unit(f, units + (size_t)r * ub, ref_bytes, n, &bad_codes, &bad_params);
    }
    snprintf(name, sizeof name, "codec int: %s stored codes and fp16 parameters follow the documented layout", text);
    check(!bad_codes && !bad_params, name, "%d codes, %d parameters differ", bad_codes, bad_params);

    memset(got, 0xff, sizeof got);
    b.codec->decode(&b, units, n, 0, rows, got);
    int bad = 0;
    for (int i = 0; i < 1024; i++) bad += !same_float(got[i], want[i]);
    snprintf(name, sizeof name, "codec int: %s x^ bit-identical to the definition (1024 values in %d rows)", text, rows);
    check(bad == 0, name, "%d values differ", bad);

    int bad_part = 0;
    for (int r0 = 0; r0 < rows; r0++)
        for (int count = 1; r0 + count <= rows; count += 2) {
            memset(part, 0xff, sizeof part);
            b.codec->decode(&b, units, n, r0, count, part);
            for (int i = 0; i < count * n; i++) bad_part += !same_float(part[i], got[(size_t)r0 * n + i]);
        }
    snprintf(name, sizeof name, "codec int: %s decode of rows r0..r0+count-1 = those rows of the whole run", text);
    check(bad_part == 0, name, "%d values differ", bad_part);

    /* zero group stays zero; constant sym group within 1/8 relative; constant asym group exactly fp16(c) */
    int zero_ok = 1, const_ok = 1;
    for (int i = 0; i < f.group; i++) {
        zero_ok &= got[KIND_ZERO * f.group + i] == 0.0f;
        float c = x[KIND_CONSTANT * f.group + i], v = got[KIND_CONSTANT * f.group + i];
        const_ok &= f.asym ? v == round_to_f16(c) : fabsf(v - c) <= fabsf(c) * 0x1.0p-3f;
    }
    snprintf(name, sizeof name, "codec int: %s zero group -> 0, constant group (%s)", text,
             f.asym ? "max == min -> exactly fp16(min)" : "within 1/8 relative");
    check(zero_ok && const_ok, name, "zero %d constant %d", zero_ok, const_ok);

    /* the tie group (scale 0.25, minimum 0): most quotients are exact halves, and every one
     * of them decoded to an even code (none is clamped) */
    int ties = count_ties(f, f.group), odd = 0;
    for (int i = 2; i < f.group; i++) odd += fmodf(got[KIND_TIES * f.group + i] / 0.25f, 2.0f) != 0.0f;
    snprintf(name, sizeof name, "codec int: %s rounding ties go to the even code (%d ties in a group of %d)", text, ties,
             f.group);
    check(ties >= f.group / 2 && odd == 0, name, "%d ties, %d odd codes", ties, odd);
    free(buf);
    free(ref_bytes);
}

/* ---- token axis: a unit is G rows, each channel a group along them -------- */

static void test_tokens(const char *text, int n, uint64_t *rng) {
    KvBase b;
    char name[160];
    if (!parse_base(text, &b)) {
        snprintf(name, sizeof name, "codec int: %s parses", text);
        check(0, name, "refused");
        return;
    }
    Fmt f = {b.bits, b.group, b.variant, 1};
    const int G = f.group, U = 3, R = U * G;
    size_t ub = b.codec->unit_bytes(&b, n);
    snprintf(name, sizeof name, "codec int: %s unit of %d rows of %d = %zu bytes (channel codes, then fp16 parameters)",
             text, G, n, ref_unit_bytes(f, n));
    check(ub == ref_unit_bytes(f, n) && b.rows == G, name, "got %zu, rows %d", ub, b.rows);
    if (ub != ref_unit_bytes(f, n)) return;

    float *x = malloc((size_t)R * n * sizeof(float)), *want = malloc((size_t)R * n * sizeof(float));
    float *got = malloc((size_t)R * n * sizeof(float)), *one = malloc((size_t)n * sizeof(float));
    uint8_t *buf = malloc((size_t)U * ub + 1), *units = buf + 1, *ref_bytes = malloc(ub);
    /* each channel of each unit a group of some kind along the positions */
    for (int u = 0; u < U; u++)
        for (int c = 0; c < n; c++) {
            float sc = random_scale(rng);
            int kind = (c + u) % KIND_COUNT;
            for (int j = 0; j < G; j++) x[((size_t)u * G + j) * n + c] = group_value(f, kind, j, sc, rng);
        }
    memset(buf, 0xAA, (size_t)U * ub + 1);
    int bad_codes = 0, bad_params = 0;
    for (int u = 0; u < U; u++) {
        b.codec->encode(&b, x + (size_t)u * G * n, n, units + (size_t)u * ub);
        ref_unit(f, x + (size_t)u * G * n, n, want + (size_t)u * G * n, ref_bytes);
        compare_unit(f, units + (size_t)u * ub, ref_bytes, n, &bad_codes, &bad_params);
    }
    snprintf(name, sizeof name, "codec int: %s stored codes (per channel along %d positions) and parameters follow the layout",
             text, G);
    check(!bad_codes && !bad_params, name, "%d codes, %d parameters differ", bad_codes, bad_params);

    b.codec->decode(&b, units, n, 0, R, got);
    int bad = 0;
    for (size_t i = 0; i < (size_t)R * n; i++) bad += !same_float(got[i], want[i]);
    snprintf(name, sizeof name, "codec int: %s x^ bit-identical to the definition, each channel quantized along %d positions",
             text, G);
    check(bad == 0, name, "%d of %d values differ", bad, R * n);

    /* single rows, then runs that start and end inside units and cross their boundaries */
    int bad_one = 0, bad_run = 0;
    for (int r = 0; r < R; r++) {
        b.codec->decode(&b, units, n, r, 1, one);
        for (int i = 0; i < n; i++) bad_one += !same_float(one[i], want[(size_t)r * n + i]);
    }
    const int runs[][2] = {{0, 1}, {G - 1, 2}, {3, 2 * G}, {G + 5, G}, {1, R - 1}, {2 * G - 3, G + 3}, {G, G}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        int r0 = runs[k][0], count = runs[k][1];
        memset(got, 0xff, (size_t)R * n * sizeof(float));
        b.codec->decode(&b, units, n, r0, count, got);
        for (int r = 0; r < count; r++) {
            b.codec->decode(&b, units, n, r0 + r, 1, one);
            for (int i = 0; i < n; i++) bad_run += !same_float(got[(size_t)r * n + i], one[i]);
        }
    }
    snprintf(name, sizeof name, "codec int: %s a single row r decodes to row r%%%d of unit r/%d", text, G, G);
    check(bad_one == 0, name, "%d values differ", bad_one);
    snprintf(name, sizeof name, "codec int: %s decode of rows r0..r0+count-1 across units = the single-row decodes", text);
    check(bad_run == 0, name, "%d values differ", bad_run);
    free(x); free(want); free(got); free(one); free(buf); free(ref_bytes);
}

/* ---- NaN, infinities, huge and subnormal values --------------------------- */

/* Group kinds: a NaN among normal values, a NaN first, +inf, -inf, all NaN, huge values whose
 * range overflows, subnormals (scale rounds to 0), and a plain group. */
static float hostile_value(int kind, int i, uint64_t *rng) {
    float v = normal(rng);
    switch (kind) {
    case 0: return i == 3 ? NAN : v;
    case 1: return i == 0 ? NAN : v;
    case 2: return i == 2 ? INFINITY : v;
    case 3: return i == 6 ? -INFINITY : v;
    case 4: return NAN;
    case 5: return i % 2 ? 3e38f : -3e38f;
    case 6: return v * 1e-40f;
    default: return v;
    }
}

static void test_nonfinite(const char *text, uint64_t *rng) {
    KvBase b;
    char name[192];
    if (!parse_base(text, &b)) {
        snprintf(name, sizeof name, "codec int: %s parses", text);
        check(0, name, "refused");
        return;
    }
    Fmt f = {b.bits, b.group, b.variant, b.axis == KV_AXIS_TOKENS};
    /* channel axis: one row of 8 groups; token axis: G rows of 8 channels, one kind each */
    int n = f.tokens ? 8 : 8 * f.group, values = f.tokens ? 8 * f.group : n;
    float *x = malloc((size_t)values * sizeof(float)), *want = malloc((size_t)values * sizeof(float));
    float *got = malloc((size_t)values * sizeof(float));
    size_t ub = b.codec->unit_bytes(&b, n);
    uint8_t *unit = malloc(ub), *ref_bytes = malloc(ub);
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < f.group; i++) {
            size_t at = f.tokens ? (size_t)i * n + k : (size_t)k * f.group + i;
            x[at] = hostile_value(k, i, rng);
        }
    b.codec->encode(&b, x, n, unit);
    ref_unit(f, x, n, want, ref_bytes);
    int bad_codes = 0, bad_params = 0;
    compare_unit(f, unit, ref_bytes, n, &bad_codes, &bad_params);
    snprintf(name, sizeof name, "codec int: %s NaN/inf/huge/subnormal input: codes and parameters as defined "
             "(NaN -> lowest code, inf -> infinite scale)", text);
    check(!bad_codes && !bad_params, name, "%d codes, %d parameters differ", bad_codes, bad_params);

    /* where the stored scale is finite, x^ is the formula's; where it is not, every value of
     * the group is NaN or infinite (the AVX-512 4-bit path gives NaN where the formula gives
     * +-inf: c*inf - 8*inf) */
    b.codec->decode(&b, unit, n, 0, b.rows, got);
    int bad_finite = 0, bad_nonfinite = 0, infinite_groups = 0;
    const uint8_t *params = ref_bytes + (size_t)values * f.bits / 8;
    for (int k = 0; k < 8; k++) {
        uint16_t scale = read_u16(params + (size_t)k * n_params(f) * 2);
        infinite_groups += !f16_is_finite(scale);
        for (int i = 0; i < f.group; i++) {
            size_t at = f.tokens ? (size_t)i * n + k : (size_t)k * f.group + i;
            if (f16_is_finite(scale)) bad_finite += !same_float(got[at], want[at]);
            else bad_nonfinite += isfinite(got[at]) != 0;
        }
    }
    snprintf(name, sizeof name, "codec int: %s decoding NaN/inf groups: the formula where the scale is finite, "
             "non-finite values where it is not", text);
    check(!bad_finite && !bad_nonfinite && infinite_groups >= 3, name, "%d finite-scale values differ, %d finite values "
          "in infinite-scale groups, %d infinite-scale groups", bad_finite, bad_nonfinite, infinite_groups);
    free(x); free(want); free(got); free(unit); free(ref_bytes);
}

/* ---- decode_t64: attention's transposed key block -------------------------- */

/* decode_t64(units, r0, count) against decode + transpose: kt[i * 64 + p] = value i of row
 * r0 + p for p < count, +0 beyond; rows at an odd address. Returns how many of the tried
 * (r0, count) pairs took a fast path; -1 on a mismatch (reported). */
static int check_t64(const char *text, int n, uint64_t *rng, char *why, size_t why_len) {
    KvBase b;
    if (!parse_base(text, &b)) return snprintf(why, why_len, "%s refused", text), -1;
    const int max_r0 = 16, total = max_r0 + 64;
    int units_n = (total + b.rows - 1) / b.rows;
    size_t ub = b.codec->unit_bytes(&b, n);
    float *x = malloc((size_t)units_n * b.rows * n * sizeof(float));
    float *rows = malloc((size_t)64 * n * sizeof(float)), *kt = malloc((size_t)64 * n * sizeof(float));
    uint8_t *buf = malloc((size_t)units_n * ub + 1), *units = buf + 1;
    for (int r = 0; r < units_n * b.rows; r++) {
        float sc = random_scale(rng);
        for (int i = 0; i < n; i++) x[(size_t)r * n + i] = sc * normal(rng) * (1 + i % 5);
    }
    for (int u = 0; u < units_n; u++) b.codec->encode(&b, x + (size_t)u * b.rows * n, n, units + (size_t)u * ub);
    /* 16-aligned starts and counts as well: the 2-bit AVX-512 path takes only those */
    static const int counts[] = {1, 17, 32, 37, 64};
    static const int starts[] = {0, 3, 5, max_r0};
    int fast = 0;
    for (int s = 0; s < 4; s++)
        for (int c = 0; c < 5; c++) {
            int r0 = starts[s], count = counts[c], bad = 0;
            b.codec->decode(&b, units, n, r0, count, rows);
            memset(kt, 0xff, (size_t)64 * n * sizeof(float));
            if (!b.codec->decode_t64) continue;
            b.codec->decode_t64(&b, units, n, r0, count, kt);
            fast++;
            for (int i = 0; i < n; i++)
                for (int p = 0; p < 64; p++)
                    bad += !same_float(kt[(size_t)i * 64 + p], p < count ? rows[(size_t)p * n + i] : 0.0f);
            if (bad) {
                snprintf(why, why_len, "%s n %d r0 %d count %d: %d values differ", text, n, r0, count, bad);
                fast = -1;
                goto done;
            }
        }
done:
    free(x); free(rows); free(kt); free(buf);
    return fast;
}

static void test_t64(uint64_t *rng) {
    static const struct {
        const char *text;
        int n;
    } cases[] = {
        {"int4-g64", 64}, {"int4-g32", 64}, {"int4-g64-asym", 64}, {"int4-g32-asym", 128}, {"int4-g128", 128},
        {"int4-g128-asym", 256}, {"int4-g8", 64}, {"int4-g16-asym", 48}, {"int2-g64", 64}, {"int3-g32-asym", 64},
        {"int8-g64", 128}, {"int8-g32-asym", 64},
        {"int4-t32", 64}, {"int4-t32-asym", 64}, {"int2-t32-asym", 64}, {"int3-t8", 40}, {"int8-t16-asym", 64},
        {"int2-t64", 128}, {"int4-t8-asym", 24},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char why[200] = "", name[160];
        int fast = check_t64(cases[k].text, cases[k].n, rng, why, sizeof why);
        KvBase b;
        parse_base(cases[k].text, &b);
        (void)b;
        /* the int codec always has decode_t64: the token axis and 4-bit rows (AVX-512) decode
         * straight into the block, other rows one at a time into its columns */
        snprintf(name, sizeof name, "codec int: %s decode_t64 at n %d = decode + transpose (rows 1, 17, 32, 37, 64 "
                 "from r0 0, 3, 5, 16; zeros beyond)", cases[k].text, cases[k].n);
        if (fast < 0) check(0, name, "%s", why);
        else check(fast == 20, name, "transposed decode taken %d of 20 times", fast);
    }
}

/* ---- through the scheme layer --------------------------------------------- */

/* A plain integer spec is its codec: kv_spec_encode/decode/unit_bytes/decode_t64 give the
 * same bytes and values; with +out there is no transposed fast path and kt stays untouched. */
static void test_spec_layer(uint64_t *rng) {
    static const char *const texts[] = {"int4-g32", "int3-g64-asym", "int2-t32-asym", "int8-t8"};
    int ok = 1;
    char first[256] = "";
    for (int k = 0; k < 4; k++) {
        KvSpec s;
        char why[200];
        if (kv_spec_parse(texts[k], KV_SIDE_KEYS, &s, why, sizeof why)) {
            ok = 0;
            snprintf(first, sizeof first, "%s: %s", texts[k], why);
            break;
        }
        const int n = 64, R = s.base.rows;
        size_t ub = kv_spec_unit_bytes(&s, n);
        float *x = malloc((size_t)R * n * sizeof(float)), *scratch = malloc((size_t)R * n * sizeof(float));
        float *a = malloc((size_t)R * n * sizeof(float)), *c = malloc((size_t)R * n * sizeof(float));
        float *kt1 = malloc(64 * (size_t)n * sizeof(float)), *kt2 = malloc(64 * (size_t)n * sizeof(float));
        uint8_t *u1 = malloc(ub), *u2 = malloc(ub);
        for (int i = 0; i < R * n; i++) x[i] = normal(rng);
        kv_spec_encode(&s, x, n, u1, scratch);
        s.base.codec->encode(&s.base, x, n, u2);
        kv_spec_decode(&s, u1, n, 0, R, a);
        s.base.codec->decode(&s.base, u2, n, 0, R, c);
        int same = ub == s.base.codec->unit_bytes(&s.base, n) && !memcmp(u1, u2, ub) && !memcmp(a, c, (size_t)R * n * 4);
        memset(kt1, 0, 64 * (size_t)n * sizeof(float));
        memset(kt2, 0, 64 * (size_t)n * sizeof(float));
        int f1 = kv_spec_has_decode_t64(&s), f2 = s.base.codec->decode_t64 != NULL;
        if (f1) kv_spec_decode_t64(&s, u1, n, 0, R < 64 ? R : 64, kt1);
        if (f2) s.base.codec->decode_t64(&s.base, u2, n, 0, R < 64 ? R : 64, kt2);
        same = same && f1 == f2 && !memcmp(kt1, kt2, 64 * (size_t)n * sizeof(float));
        if (!same && ok) snprintf(first, sizeof first, "%s differs", texts[k]);
        ok &= same;
        free(x); free(scratch); free(a); free(c); free(kt1); free(kt2); free(u1); free(u2);
    }
    check(ok, "codec int: a plain int spec encodes, decodes and decodes transposed as its codec", "%s", first);

    KvSpec s;
    char why[200];
    kv_spec_parse("int4-g32+out2", KV_SIDE_KEYS, &s, why, sizeof why);
    float x[64], scratch[64];
    uint8_t unit[64];
    for (int i = 0; i < 64; i++) x[i] = normal(rng);
    kv_spec_encode(&s, x, 64, unit, scratch);
    int fast = kv_spec_has_decode_t64(&s);
    check(kv_spec_unit_bytes(&s, 64) == 36 + 6 && fast == 0,
          "codec int: int4-g32+out2 units are 36 + 2*3 bytes and have no transposed decode (outliers go back over rows)",
          "bytes %zu transposed %d", kv_spec_unit_bytes(&s, 64), fast);
}

int main(void) {
    uint64_t rng = 12345;
    test_names();
    static const char *const rows[] = {
        "int8-g64", "int8-g32", "int8-g128", "int4-g32", "int4-g64", "int4-g128", "int3-g32", "int3-g64", "int3-g128",
        "int2-g32", "int2-g64", "int2-g128", "int8-g64-asym", "int8-g32-asym", "int4-g32-asym", "int4-g64-asym",
        "int4-g128-asym", "int3-g64-asym", "int2-g64-asym", "int2-g128-asym", "int4-g8", "int3-g16-asym", "int2-g8-asym",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) test_rows(rows[i], &rng);
    static const struct {
        const char *text;
        int n;
    } tokens[] = {
        {"int2-t32-asym", 64}, {"int2-t32", 64}, {"int4-t32-asym", 64}, {"int4-t32", 64}, {"int3-t8", 64},
        {"int3-t16-asym", 40}, {"int8-t8", 64}, {"int8-t16-asym", 24}, {"int4-t64", 64}, {"int2-t128-asym", 32},
    };
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) test_tokens(tokens[i].text, tokens[i].n, &rng);
    static const char *const hostile[] = {
        "int4-g32", "int4-g64-asym", "int2-g64", "int8-g64", "int3-g32-asym", "int4-t8", "int4-t8-asym", "int8-t16-asym",
        "int2-t32",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) test_nonfinite(hostile[i], &rng);
    test_t64(&rng);
    test_spec_layer(&rng);
    return test_exit_code();
}
