/* tests/test_codec_nuq.c: the fitted base nuqB-gG / nuqB-tG of SCHEMES.md §8
 * (quant/codec_nuq.c), with hand-made tables set in KvBase.table (a calibration fits the real
 * ones), against the definition restated in tests/nuq_vq_ref.h: names, refusals and bits a value
 * (and every fitted codec's examples); seeded rows on both axes with ascending, duplicated, grid
 * and unsorted tables, bytes and x^ bit for bit; exact ties, z on entries, s = 0; NaN, inf, huge
 * values, hostile bytes; runs of rows across token-axis units and decode_t64; no table; layouts
 * worked out by hand, byte by byte. vq is tests/test_codec_vq.c; the fits and the scheme layer
 * tests/test_codec_nuq_vq_fit.c. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/scheme.h"
#include "tests/nuq_vq_ref.h"
#include "tests/test.h"
#include "tests/test_random.h"

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
    char first[300] = "";
    int refused = count_refused(bad, sizeof bad / sizeof bad[0], first, sizeof first);
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
    /* ref: room for nuq_ref_unit's unit of 8 values under any nuq base, the bound gcc checks when it inlines it */
    uint8_t unit[5], ref[16];
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

int main(void) {
    uint64_t rng = 20240611;
    test_nuq_names();
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
    return test_exit_code();
}
