/* tests/test_codec_vq.c: the fitted base vqC-dD of SCHEMES.md §8 (quant/codec_vq.c), with
 * hand-made codebooks set in KvBase.table (a calibration fits the real ones), against the
 * definition restated in tests/nuq_vq_ref.h: names, refusals and bits a value; seeded rows and
 * codebooks (C 1-12, D 1-16, d 64 and 128), bytes and x^ bit for bit, runs of rows and
 * decode_t64; +aw's weighted search (rows and exact ties); exact ties (the lower index, in books
 * of 16 and 256 entries); z rounded as written
 * (nuq's too); r = 0, NaN, inf, huge values, hostile bytes; no table; layouts worked out by
 * hand, byte by byte. nuq is tests/test_codec_nuq.c; the fits and the scheme layer
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
    char first[300] = "";
    int refused = count_refused(bad, sizeof bad / sizeof bad[0], first, sizeof first);
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


/* ---- random rows ---- */

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

/* ---- +aw (SCHEMES.md §9) ---- */

/* The weighted nearest entry as aw.h defines it: sum over channels in order of w_e * (t_e * t_e),
 * t = x - entry, each step rounded; the first of equal distances. *tied counts searches whose
 * nearest distance more than one entry has. */
static int ref_aw_nearest(const float *x, int dim, const float *book, int k, const float *w, int *tied) {
    float best = INFINITY;
    int best_c = 0, tie = 0;
    for (int c = 0; c < k; c++) {
        float d = 0.0f;
        for (int e = 0; e < dim; e++) {
            volatile float t = x[e] - book[(size_t)c * dim + e];
            volatile float sq = t * t;
            volatile float term = w[e] * sq;
            d = d + term;
        }
        if (d < best) best = d, best_c = c, tie = 0;
        else if (d == best) tie = 1;
    }
    *tied += tie;
    return best_c;
}

/* vq_ref_row with +aw's weights w[n]: the codes of the weighted search, the rest as there. */
static void vq_ref_row_aw(const float *T, int C, int D, const float *w, const float *x, int n, uint8_t *want, float *xh,
                          int *tied) {
    int ignored = 0;
    vq_ref_row(T, C, D, x, n, want, xh, &ignored);
    uint16_t h = get_u16(want + vq_code_bytes(C, D, n));
    if (h == 0) return;
    float r = f16_to_f32(h), sqrt_d = sqrtf((float)n), z[KV_MAX_HEAD_DIM];
    for (int i = 0; i < n; i++) {
        volatile float p = x[i] * sqrt_d;
        z[i] = p / r;
    }
    volatile float scale = r / sqrt_d;
    memset(want, 0, vq_code_bytes(C, D, n));
    for (int j = 0; j < n / D; j++) {
        const float *book = T + (size_t)j * vq_book_floats(C, D);
        unsigned code = (unsigned)ref_aw_nearest(z + (size_t)j * D, D, book, 1 << C, w + (size_t)j * D, tied);
        put_bits(want, (size_t)j, C, code);
        for (int i = 0; i < D; i++) xh[j * D + i] = scale * book[(size_t)code * D + i];
    }
}

/* +aw rows against the weighted definition, where the encoder searches with vectors (D = 4, books
 * of 16k entries) and where it does not (D = 8, 3-bit codes); one channel weighs 0. Then exact
 * ties in weighted books of 256 entries (vq8-d4+aw): book j holds z's sub-vector at two entries. */
static void test_vq_aw(uint64_t *rng) {
    static const char *const names[] = {"vq8-d4", "vq4-d4", "vq8-d8", "vq3-d4"};
    enum { N = 64, ROWS = 64 };
    char name[200];
    float w[N];
    for (int i = 0; i < N; i++) w[i] = i == 6 ? 0.0f : (float)(0.05 + 3.0 * uniform(rng));
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        KvBase b = base_of(names[k]);
        int C = b.bits, D = b.variant, ties = 0, bad = 0;
        size_t ub = b.codec->unit_bytes(&b, N), tf = (size_t)(N / D) * vq_book_floats(C, D);
        float *T = alloc(tf * sizeof(float)), x[N], got[N], want[N];
        uint8_t *unit = alloc(ub), *ref = alloc(ub);
        for (size_t i = 0; i < tf; i++) T[i] = normal(rng);
        b.table = T;
        b.weights = w;
        for (int r = 0; r < ROWS; r++) {
            vq_row(r % VQ_ROW_KINDS, x, N, rng);
            b.codec->encode(&b, x, N, unit);
            b.codec->decode(&b, unit, N, 0, 1, got);
            vq_ref_row_aw(T, C, D, w, x, N, ref, want, &ties);
            bad += memcmp(unit, ref, ub) != 0;
            for (int i = 0; i < N; i++) bad += !same_float(got[i], want[i]);
        }
        snprintf(name, sizeof name, "codec vq: %s+aw, %d seeded rows (a channel of weight 0): codes and x^ = the "
                 "weighted definition's, bit for bit", names[k], ROWS);
        check(bad == 0, name, "%d differ", bad);
        free(T); free(unit); free(ref);
    }
    enum { D = 4, K = 256, BOOKS = N / D };
    static const int pairs[BOOKS][2] = {{3, 35}, {3, 19}, {3, 4},    {17, 34},  {200, 255}, {0, 255},
                                        {16, 32}, {31, 240}, {100, 101}, {64, 128}, {5, 21},   {250, 251},
                                        {15, 16}, {47, 48},  {1, 2},     {128, 129}};
    static float T[BOOKS * K * D];
    float x[N], out[N], want[N];
    uint8_t unit[BOOKS + 2], ref[BOOKS + 2];
    unit_row(x, N, rng);   /* r = 8, z = x exactly */
    for (int i = 0; i < BOOKS * K * D; i++) T[i] = 5.0f;
    for (int j = 0; j < BOOKS; j++)
        for (int e = 0; e < 2; e++)
            for (int i = 0; i < D; i++) T[((size_t)j * K + (size_t)pairs[j][e]) * D + i] = x[j * D + i];
    KvBase b = base_of("vq8-d4");
    b.table = T;
    b.weights = w;
    int ties = 0, bad = 0;
    b.codec->encode(&b, x, N, unit);
    b.codec->decode(&b, unit, N, 0, 1, out);
    vq_ref_row_aw(T, 8, D, w, x, N, ref, want, &ties);
    bad += memcmp(unit, ref, sizeof unit) != 0;
    for (int j = 0; j < BOOKS; j++) bad += unit[j] != pairs[j][0];
    for (int i = 0; i < N; i++) bad += !same_float(out[i], want[i]);
    check(bad == 0 && ties == BOOKS, "codec vq: vq8-d4+aw exact ties in books of 256 entries -> the lower index",
          "%d wrong, %d ties in the reference (want %d), codes %u %u %u %u", bad, ties, BOOKS, unit[0], unit[1], unit[2],
          unit[3]);
}

int main(void) {
    /* The seed's state where test_codec_nuq.c's checks leave it (these were one program): the
     * rows and codebooks are those the checks were written against. */
    uint64_t rng = 17233232654861478356ull;
    test_vq_names();

    const int dims[] = {64, 128}, Ds[] = {1, 2, 4, 8, 16}, Cs[] = {1, 4, 8, 12};
    for (int a = 0; a < 2; a++)
        for (int d = 0; d < 5; d++)
            for (int c = 0; c < 4; c++) test_vq_random(dims[a], Ds[d], Cs[c], &rng);
    test_vq_ties(&rng);
    test_vq_ties_wide(&rng);
    test_z_rounding(&rng);
    test_vq_special(&rng);
    test_vq_layout(&rng);
    test_vq_aw(&rng);
    return test_exit_code();
}
