/* tests/test_codec_nuq_vq_fit.c: the fits of the fitted bases nuqB-gG / nuqB-tG and vqC-dD
 * (SCHEMES.md §8; quant/codec_nuq.c, quant/codec_vq.c) and the two through the scheme layer,
 * against the definitions restated in tests/nuq_vq_ref.h: the KvFit layout; the whole fit against
 * §8's points, starts and Lloyd restated (bit for bit, a shortfall refused, a table Lloyd leaves
 * out of order stored ascending) and nuq's table check; the fit key; +had, +out, +res, +sink and
 * +prerope parsed and bound; kv_spec_encode/decode with a table against the definition on the
 * domain rows. The codecs alone are tests/test_codec_nuq.c and tests/test_codec_vq.c. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"
#include "quant/scheme.h"
#include "tests/nuq_vq_ref.h"
#include "tests/test.h"
#include "tests/test_random.h"

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
    /* The seed's state where test_codec_vq.c's checks leave it (these were one program): the
     * rows are those the checks were written against, and the point counts the names give. */
    uint64_t rng = 16902146414060146707ull;
    test_fit_layout();
    test_fit_nuq(&rng);
    test_fit_vq(&rng);

    test_fit_key();
    test_scheme_parse();
    test_scheme_codec(&rng);
    return test_exit_code();
}
