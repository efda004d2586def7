/* tests/test_quant.c: quant/half.c and the scheme table.
 * fp16: all 65,536 halves round-trip, and float -> half rounding is compared
 * with an independent nearest-value search over a large sample of floats
 * (halfway cases, subnormals, the overflow boundary). bf16 likewise.
 * Schemes: every row against a reference written here from the formulas
 * (x_hat bit for bit, stored codes and parameters byte for byte), packed
 * sizes, dot/axpy against dequantize-then-loop, zero and constant groups,
 * name lookup. Also kv_sparsify against a sort-based reference. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/half.h"
#include "quant/metrics.h"
#include "quant/quant.h"
#include "tests/test.h"

/* splitmix64: a small deterministic generator, state passed explicitly. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static float normal(uint64_t *s) {
    double u = uniform(s) + 1e-300, v = uniform(s);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

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

/* ---- schemes ----------------------------------------------------------- */

/* Straight from the definitions in tests/fixtures/reference/kv-*.metrics.json,
 * one value at a time. q_out gets the signed code, params the fp16 bits. */
static void ref_quantize(int bits, int gs, int sym, const float *x, size_t n, float *x_hat, int *q_out,
                         uint16_t *params) {
    for (size_t g = 0; g < n / (size_t)gs; g++) {
        const float *xg = x + g * gs;
        float mn = xg[0], mx = xg[0], amax = 0;
        for (int i = 0; i < gs; i++) {
            if (xg[i] < mn) mn = xg[i];
            if (xg[i] > mx) mx = xg[i];
            if (fabsf(xg[i]) > amax) amax = fabsf(xg[i]);
        }
        uint16_t hs, hl = 0;
        float scale, lo = 0;
        int qmin, qmax;
        if (sym) {
            qmax = (1 << (bits - 1)) - 1;
            qmin = -(1 << (bits - 1));
            hs = f32_to_f16(amax / (float)qmax);
        } else {
            qmin = 0;
            qmax = (1 << bits) - 1;
            hl = f32_to_f16(mn);
            lo = f16_to_f32(hl);
            hs = f32_to_f16((mx - mn) / (float)qmax);
        }
        scale = f16_to_f32(hs);
        params[g * 2] = hs;
        params[g * 2 + 1] = hl;
        for (int i = 0; i < gs; i++) {
            int q = 0;
            if (scale != 0) {
                float r = rintf(sym ? xg[i] / scale : (xg[i] - lo) / scale);
                q = r < qmin ? qmin : r > qmax ? qmax : (int)r;
            }
            q_out[g * gs + i] = q;
            volatile float prod = (float)q * scale;   /* rounded before adding lo */
            x_hat[g * gs + i] = sym ? prod : prod + lo;
        }
    }
}

/* Stored code i read bit by bit from the documented layout. */
static unsigned read_code(const uint8_t *p, size_t i, int bits) {
    unsigned c = 0;
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        c |= (unsigned)((p[bit / 8] >> (bit % 8)) & 1) << k;
    }
    return c;
}

/* Value i of a group built so x/scale (sym) or (x-lo)/scale (asym) lands
 * exactly on k + 0.5: the scale comes out as exactly 0.25, so every value
 * but the extremes is a rounding tie (rint must pick the even neighbour). */
static float tie_value(const KvScheme *s, int i) {
    if (s->bits == 32)
        return (float)i;
    int levels = s->symmetric ? (1 << (s->bits - 1)) - 1 : (1 << s->bits) - 1;
    if (i == 0)
        return levels * 0.25f;                       /* max (and max|x|) */
    if (i == 1)
        return s->symmetric ? -levels * 0.25f : 0.0f; /* min */
    int j = i % levels;                                 /* 0 .. levels-1 */
    return s->symmetric ? (j - levels / 2 - 0.5f) * 0.25f : (j + 0.5f) * 0.25f;
}

/* Test data: groups with different scales, outliers, zeros, constants, ties. */
static void fill_groups(float *x, size_t n, const KvScheme *s, uint64_t *rng) {
    int gs = s->group_size ? s->group_size : 64;
    for (size_t g = 0; g < n / (size_t)gs; g++) {
        float *xg = x + g * gs;
        int kind = (int)(g % 8);
        float sc = (float)pow(10.0, uniform(rng) * 6 - 3);
        for (int i = 0; i < gs; i++) {
            switch (kind) {
            case 0: xg[i] = 0.0f; break;                                  /* zero group */
            case 1: xg[i] = -1.375f * sc; break;                          /* constant */
            case 2: xg[i] = (i == 5) ? 3.0f * sc : 0.0f; break;          /* one spike */
            case 3: xg[i] = tie_value(s, i); break;                       /* rounding ties */
            case 4: xg[i] = 0.5f + 1e-4f * normal(rng); break;            /* offset, small range */
            default: xg[i] = sc * normal(rng) * (i == 7 ? 8.0f : 1.0f);  /* outlier */
            }
        }
    }
}

/* |fp16(min)| of the group holding x[i] for asymmetric schemes, else 0. */
static double group_lo(const KvScheme *s, const float *x, size_t i) {
    if (s->symmetric || !s->group_size)
        return 0.0;
    size_t g0 = i / (size_t)s->group_size * (size_t)s->group_size;
    float mn = x[g0];
    for (size_t j = g0; j < g0 + (size_t)s->group_size; j++)
        mn = fminf(mn, x[j]);
    return fabs((double)round_to_f16(mn));
}

static void test_scheme(const KvScheme *s, uint64_t *rng) {
    const size_t n = 1024;
    float x[1024], got[1024], want[1024], qv[1024], out[1024], out_ref[1024];
    int q[1024];
    uint16_t params[2 * 1024];
    uint8_t packed[8192];
    char name[128];
    fill_groups(x, n, s, rng);

    size_t pb = s->packed_bytes(s, n);
    size_t want_pb = s->bits == 32 ? n * 4 : n * s->bits / 8 + n / s->group_size * s->n_params * 2;
    snprintf(name, sizeof name, "%s packed_bytes(1024) = %zu", s->name, want_pb);
    check(pb == want_pb && pb <= sizeof packed, name, "got %zu", pb);
    memset(packed, 0xAA, sizeof packed);
    s->quantize(s, x, n, packed);
    s->dequantize(s, packed, n, got);

    if (s->bits == 32) {
        memcpy(want, x, sizeof x);
    } else {
        ref_quantize(s->bits, s->group_size, s->symmetric, x, n, want, q, params);
        int bad_code = 0, bad_param = 0;
        for (size_t i = 0; i < n; i++)
            bad_code += read_code(packed, i, s->bits) != (unsigned)(q[i] + (s->symmetric ? 1 << (s->bits - 1) : 0));
        const uint8_t *pp = packed + n * s->bits / 8;
        for (size_t g = 0; g < n / s->group_size; g++)
            for (int k = 0; k < s->n_params; k++) {
                const uint8_t *b = pp + (g * s->n_params + k) * 2;
                bad_param += (uint16_t)(b[0] | b[1] << 8) != params[g * 2 + k];
            }
        snprintf(name, sizeof name, "%s stored codes and fp16 parameters follow the documented layout", s->name);
        check(!bad_code && !bad_param, name, "%d codes, %d parameters differ", bad_code, bad_param);
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += to_bits(got[i]) != to_bits(want[i]);
    snprintf(name, sizeof name, "%s x_hat bit-identical to the reference formulas (1024 values)", s->name);
    check(bad == 0, name, "%d values differ", bad);

    if (s->group_size) {   /* zero group stays zero; constant asym group is exact up to fp16(min) */
        int zero_ok = 1, const_ok = 1;
        for (int i = 0; i < s->group_size; i++) {
            zero_ok &= got[i] == 0.0f;
            float c = x[s->group_size + i];
            const_ok &= s->symmetric ? fabsf(got[s->group_size + i] - c) <= fabsf(c) * 0x1.0p-3f
                                     : got[s->group_size + i] == round_to_f16(c);
        }
        snprintf(name, sizeof name, "%s zero group -> 0, constant group (%s)", s->name,
                 s->symmetric ? "within 1/8 relative" : "max==min -> exactly fp16(min)");
        check(zero_ok && const_ok, name, "zero %d constant %d", zero_ok, const_ok);
    }

    /* dot and axpy from the codes vs dequantize-then-loop in double. The
     * bound: per element |q|*(|x_hat| + 2|lo|), the size of the terms the
     * factored sum scale*sum(q*c) + lo*sum(q) adds (lo = group minimum, asym). */
    double worst_dot = 0, worst_axpy = 0;
    int dot_ok = 1, axpy_ok = 1;
    for (int trial = 0; trial < 20; trial++) {
        size_t len = (size_t)(trial % 4 + 1) * 256;
        float pk[1024];
        s->quantize(s, x, len, packed);   /* a shorter vector packs its own layout */
        s->dequantize(s, packed, len, pk);
        for (size_t i = 0; i < len; i++) {
            qv[i] = normal(rng);
            out[i] = out_ref[i] = normal(rng);
        }
        double ref = 0, mag = 0;
        for (size_t i = 0; i < len; i++) {
            ref += (double)qv[i] * pk[i];
            mag += fabs((double)qv[i]) * (fabs((double)pk[i]) + 2.0 * group_lo(s, x, i));
        }
        double d = fabs(s->dot(s, packed, qv, len) - ref);
        worst_dot = max_or_inf(worst_dot, d / (mag + 1e-300));
        dot_ok &= d <= 1e-5 * mag + 1e-30;
        float w = normal(rng);
        s->axpy(s, packed, w, out, len);
        for (size_t i = 0; i < len; i++) {
            double r = (double)out_ref[i] + (double)w * pk[i];
            double m = fabs((double)out_ref[i]) + fabs((double)w) * (fabs((double)pk[i]) + 2.0 * group_lo(s, x, i));
            double e = fabs(out[i] - r);
            worst_axpy = max_or_inf(worst_axpy, e / (m + 1e-300));
            axpy_ok &= e <= 1e-6 * m + 1e-30;
        }
    }
    snprintf(name, sizeof name, "%s dot from codes = dequantize+dot within 1e-5*sum|q|(|x_hat|+2|lo|)", s->name);
    check(dot_ok, name, "worst relative %.3g", worst_dot);
    snprintf(name, sizeof name, "%s axpy from codes = dequantize+axpy within 1e-6*(|out|+|w|(|x_hat|+2|lo|))",
             s->name);
    check(axpy_ok, name, "worst relative %.3g", worst_axpy);
    printf("     %s: worst dot error %.2e, axpy %.2e (relative to the magnitude bound)\n", s->name, worst_dot,
           worst_axpy);
}

static void test_lookup(void) {
    struct { const char *alias, *name; } ok[] = {
        {"int4-g64-sym", "int4-g64"}, {"int4-g32-sym", "int4-g32"}, {"int4-g128-sym", "int4-g128"},
        {"int8-g64-sym", "int8-g64"}, {"int2-g64-sym", "int2-g64"}, {"int4", "int4-g64"},
        {"int8", "int8-g64"}, {"int4-asym", "int4-g64-asym"}, {"fp32", "fp32"},
        {"int4-g64-asym", "int4-g64-asym"}, {"int3-g64", "int3-g64"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const KvScheme *s = kv_scheme_find(ok[i].alias);
        char name[96];
        snprintf(name, sizeof name, "kv_scheme_find(\"%s\") = %s", ok[i].alias, ok[i].name);
        check(s && strcmp(s->name, ok[i].name) == 0, name, "got %s", s ? s->name : "NULL");
    }
    const char *bad[] = {"int4-g64-asym-sym", "fp32-sym", "int5", "", "int4-g63", "float16", NULL};
    int found = 0;
    for (int i = 0; i < 7; i++)
        found += kv_scheme_find(bad[i]) != NULL;
    check(found == 0, "kv_scheme_find rejects unknown names and -sym on asym rows", "%d accepted", found);
    double r = kv_scheme_ratio_vs_f16(kv_scheme_find("int4-g64"));
    check(r == 128.0 / 34.0, "int4-g64 compression vs fp16 = 64*2/(32+2) = 3.7647", "got %.17g", r);
    int fields_ok = 1;
    for (int i = 0; i < kv_scheme_count(); i++) {
        const KvScheme *s = kv_scheme_at(i);
        fields_ok &= s->axis == KV_AXIS_CHANNELS && s->pre_rope == 0 && kv_scheme_find(s->name) == s;
    }
    check(fields_ok && kv_scheme_at(kv_scheme_count()) == NULL, "every row: found by its name, axis channels, not pre-RoPE",
          "mismatch");
}

/* kv_sparsify against a full sort by (magnitude, index). */
static int cmp_rank(const void *a, const void *b) {
    const double *x = a, *y = b;   /* pairs (magnitude, index) */
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void test_sparsify(uint64_t *rng) {
    enum { N = 5000 };
    static float x[N], want[N], scratch[N];
    static double pairs[2 * N];
    int all_ok = 1;
    double fracs[] = {0.0, 0.1, 0.5, 0.9, 0.999};
    for (int t = 0; t < 10; t++) {
        for (int i = 0; i < N; i++)   /* coarse values: many ties, both signs */
            x[i] = t % 2 ? (float)((int)(normal(rng) * 4)) / 4 : normal(rng);
        double f = fracs[t % 5];
        size_t k = (size_t)(f * N);
        for (int i = 0; i < N; i++) {
            pairs[2 * i] = fabsf(x[i]);
            pairs[2 * i + 1] = i;
            want[i] = x[i];
        }
        qsort(pairs, N, 2 * sizeof(double), cmp_rank);
        for (size_t j = 0; j < k; j++)
            want[(int)pairs[2 * j + 1]] = 0.0f;
        size_t got_k = kv_sparsify(x, N, f, scratch);
        all_ok &= got_k == k && memcmp(x, want, sizeof x) == 0;
    }
    check(all_ok, "kv_sparsify zeroes floor(S*n) smallest |x|, ties earliest first (vs sort)", "mismatch");
}

int main(void) {
    uint64_t rng = 12345;
    test_f16();
    test_bf16();
    test_lookup();
    for (int i = 0; i < kv_scheme_count(); i++)
        test_scheme(kv_scheme_at(i), &rng);
    test_sparsify(&rng);
    return test_exit_code();
}
