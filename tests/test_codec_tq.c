/* tests/test_codec_tq.c: the tqB codec (quant/codec_tq.c) against SCHEMES.md §3, restated in
 * tests/tq_ref.h: r = fp16(||x||), signs from bit 63 of (i+1)*0x9E3779B97F4A7C15, u = H(s.x)
 * with H taken from its matrix definition (Sylvester, entry (-1)^popcount(i&j) / sqrt(d)) in
 * double, z = u*sqrt(d)/r, nearest Lloyd-Max centroid with ties to the lower index (argmin of
 * |z - c_k|, first minimum), x^ = s.H(c*r/sqrt(d)). Codes and r are read from the unit by the
 * documented layout, bit by bit.
 * The codec's float32 Hadamard differs from the double one by rounding, so a code may differ
 * from the double restatement's only where z is within 1e-4 of a midpoint (then either
 * neighbour is accepted); exact ties are built so that every rounding is exact.
 * Also: inner domain (decode, rotate), dot products both ways, layout sizes, runs of units,
 * names, widths, the mean squared error against Lloyd-Max's, and NaN/inf/huge/tiny rows. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/scheme.h"
#include "quant/half.h"
#include "tests/test.h"
#include "tests/test_random.h"
#include "tests/tq_ref.h"

extern const KvCodec kv_codec_tq;

/* ---- helpers ---- */

/* |a - b| <= tol, false on NaN. */
static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol; }

static KvBase tq_base(int B) {
    KvBase b;
    char name[16], why[128];
    snprintf(name, sizeof name, "tq%d", B);
    if (kv_base_parse(name, &b, why, sizeof why) != 0) {
        printf("FAIL tq_setup_parse_%s: %s\n", name, why);
        exit(1);
    }
    return b;
}

/* ---- one row against the restatement ---- */

/* What check_row can find wrong; each kind counts its problems and keeps the first one's text. */
enum { BAD_R, BAD_CODE, BAD_GUARD, BAD_INNER, BAD_NATURAL, BAD_DOT, BAD_KINDS };

typedef struct {
    int rows, ambiguous, bad[BAD_KINDS];
    char first[BAD_KINDS][200];
} RowStats;

static void note(RowStats *st, int kind, const char *fmt, ...) {
    if (!st->bad[kind]++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->first[kind], sizeof st->first[kind], fmt, ap);
        va_end(ap);
    }
}

/* Encodes x, checks r and codes against ref_quantize, decode (inner: c*r/sqrt(d) to 2^-22
 * relative), decode + rotate back (x^ to 1e-5 r) and <q, x^> both ways (to 1e-5 ||q|| r). */
static void check_row(const KvBase *b, const float *x, int d, uint64_t *rng, RowStats *st) {
    static RefRow ref;
    static unsigned char unit[MAXD + 64];
    static float inner[MAXD], natural[MAXD], q[MAXD];
    static double xhat[MAXD];
    int B = b->bits, codes[MAXD];
    size_t ub = b->codec->unit_bytes(b, d);
    memset(unit, 0xa5, sizeof unit);
    b->codec->encode(b, x, d, unit);
    st->rows++;
    for (size_t k = ub; k < ub + 16; k++)
        if (unit[k] != 0xa5) { note(st, BAD_GUARD, "wrote byte %zu past a unit of %zu bytes", k, ub); break; }
    ref_quantize(B, x, d, &ref);
    uint16_t r16 = unit_r16(unit, B, d);
    if (r16 != ref.r16) note(st, BAD_R, "r bits %04x, definition %04x (row %d)", r16, ref.r16, st->rows);
    double r = f16_to_f32(ref.r16);
    for (int i = 0; i < d; i++) {
        codes[i] = unit_code(unit, B, i);
        if (codes[i] != ref.code[i] && codes[i] != ref.alt[i])
            note(st, BAD_CODE, "code %d, nearest centroid %d at value %d", codes[i], ref.code[i], i);
        else if (ref.alt[i] >= 0) st->ambiguous++;
    }
    b->codec->decode(b, unit, d, 0, 1, inner);
    for (int i = 0; i < d; i++) {
        double want = ref.r16 ? centroid(B, codes[i]) * r / sqrt((double)d) : 0.0;
        if (!close_to(inner[i], want, fabs(want) * 0x1p-22))
            note(st, BAD_INNER, "inner %.9g, c*r/sqrt(d) %.9g at %d", inner[i], want, i);
    }
    memcpy(natural, inner, (size_t)d * sizeof *natural);
    b->codec->rotate(b, natural, d, KV_FROM_INNER);
    ref_reconstruct(B, codes, ref.r16, d, xhat);
    for (int i = 0; i < d; i++)
        if (!close_to(natural[i], xhat[i], 1e-5 * r))
            note(st, BAD_NATURAL, "x^ %.9g, definition %.9g at %d (tol 1e-5 r)", natural[i], xhat[i], i);
    double qnorm = 0.0, dot_natural = 0.0, dot_inner = 0.0;
    for (int i = 0; i < d; i++) {
        q[i] = normal(rng);
        qnorm += (double)q[i] * q[i];
        dot_natural += (double)q[i] * xhat[i];
    }
    b->codec->rotate(b, q, d, KV_TO_INNER);
    for (int i = 0; i < d; i++) dot_inner += (double)q[i] * inner[i];
    if (!close_to(dot_inner, dot_natural, 1e-5 * sqrt(qnorm) * r))
        note(st, BAD_DOT, "<Hs q, decode> %.9g, <q, x^> %.9g (tol 1e-5 |q| r)", dot_inner, dot_natural);
}

static void report(const char *prefix, const RowStats *st) {
    char name[160];
    snprintf(name, sizeof name, "%s_r", prefix);
    check(!st->bad[BAD_R], name, "%d of %d rows: %s", st->bad[BAD_R], st->rows, st->first[BAD_R]);
    snprintf(name, sizeof name, "%s_codes", prefix);
    check(!st->bad[BAD_CODE] && !st->bad[BAD_GUARD], name, "%d bad codes (%d rows, %d near a midpoint) %s; %d overruns %s",
          st->bad[BAD_CODE], st->rows, st->ambiguous, st->first[BAD_CODE], st->bad[BAD_GUARD], st->first[BAD_GUARD]);
    snprintf(name, sizeof name, "%s_decode_inner", prefix);
    check(!st->bad[BAD_INNER], name, "%d values: %s", st->bad[BAD_INNER], st->first[BAD_INNER]);
    snprintf(name, sizeof name, "%s_decode_rotated_back", prefix);
    check(!st->bad[BAD_NATURAL], name, "%d values: %s", st->bad[BAD_NATURAL], st->first[BAD_NATURAL]);
    snprintf(name, sizeof name, "%s_dot_both_ways", prefix);
    check(!st->bad[BAD_DOT], name, "%d rows: %s", st->bad[BAD_DOT], st->first[BAD_DOT]);
}

/* ---- random rows ---- */

static void test_random_rows(void) {
    static float x[MAXD];
    const int widths[] = {8, 16, 64, 128, 256};
    uint64_t rng = 12345;
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
            int d = widths[w];
            RowStats st = {0};
            for (int row = 0; row < 60; row++) {
                /* scales from 1e-3 to 1e3, and every fourth row with one outlier channel */
                double scale = pow(10.0, -3.0 + 6.0 * uniform(&rng));
                for (int i = 0; i < d; i++) x[i] = (float)(normal(&rng) * scale);
                if (row % 4 == 3) x[next_u64(&rng) % (uint64_t)d] *= 50.0f;
                check_row(&b, x, d, &rng, &st);
            }
            char prefix[64];
            snprintf(prefix, sizeof prefix, "tq%d_d%d_random", B, d);
            report(prefix, &st);
        }
    }
    /* the widest row check() allows, once */
    KvBase b = tq_base(3);
    RowStats st = {0};
    for (int i = 0; i < MAXD; i++) x[i] = normal(&rng);
    check_row(&b, x, MAXD, &rng, &st);
    report("tq3_d4096_random", &st);
}

/* ---- hand-made rows: zero, constant, one-hot, huge, tiny, NaN, inf ---- */

enum { ROW_ZERO, ROW_CONST, ROW_NEG_CONST, ROW_ONE_HOT, ROW_ALTERNATING, ROW_RAMP, ROW_SIGNS, ROW_F16_MAX,
       ROW_F16_MAX_ROUNDS, ROW_F16_OVERFLOW, ROW_FLT_MAX, ROW_HUGE, ROW_SUBNORMAL_F32, ROW_SUBNORMAL_R,
       ROW_NAN, ROW_ALL_NAN, ROW_POS_INF, ROW_NEG_INF, ROW_KINDS };

static const char *const ROW_NAMES[ROW_KINDS] = {
    "zero", "constant", "neg_constant", "one_hot", "alternating", "ramp", "signs", "norm_65504",
    "norm_65519", "norm_65520", "flt_max", "huge_1e30", "subnormal_f32", "subnormal_r",
    "nan", "all_nan", "pos_inf", "neg_inf",
};

static void make_row(int kind, float *x, int d) {
    for (int i = 0; i < d; i++) x[i] = 0.0f;
    switch (kind) {
    case ROW_ZERO: break;
    case ROW_CONST: for (int i = 0; i < d; i++) x[i] = 0.75f; break;
    case ROW_NEG_CONST: for (int i = 0; i < d; i++) x[i] = -3.0f; break;
    case ROW_ONE_HOT: x[d / 2 + 1] = 2.5f; break;
    case ROW_ALTERNATING: for (int i = 0; i < d; i++) x[i] = (i & 1) ? -1.0f : 1.0f; break;
    case ROW_RAMP: for (int i = 0; i < d; i++) x[i] = (float)i - (float)d / 2; break;
    case ROW_SIGNS: for (int i = 0; i < d; i++) x[i] = (float)ref_sign(i); break;   /* u = sqrt(d) e_0 */
    case ROW_F16_MAX: x[3] = 65504.0f; break;
    case ROW_F16_MAX_ROUNDS: x[3] = 65519.0f; break;   /* fp16(65519) = 65504: finite */
    case ROW_F16_OVERFLOW: x[3] = 65520.0f; break;     /* fp16(65520) = inf: stored as zero */
    case ROW_FLT_MAX: for (int i = 0; i < d; i++) x[i] = (i & 1) ? -FLT_MAX : FLT_MAX; break;
    case ROW_HUGE: x[0] = 1e30f; break;
    case ROW_SUBNORMAL_F32: for (int i = 0; i < d; i++) x[i] = 1e-40f; break;   /* r rounds to 0 */
    case ROW_SUBNORMAL_R: for (int i = 0; i < d; i++) x[i] = (i % 3 ? 1e-7f : -2e-7f); break;
    case ROW_NAN: for (int i = 0; i < d; i++) x[i] = 1.0f; x[5] = NAN; break;
    case ROW_ALL_NAN: for (int i = 0; i < d; i++) x[i] = NAN; break;
    case ROW_POS_INF: for (int i = 0; i < d; i++) x[i] = 1.0f; x[2] = INFINITY; break;
    case ROW_NEG_INF: for (int i = 0; i < d; i++) x[i] = 1.0f; x[2] = -INFINITY; break;
    }
}

/* Rows the codec stores as zero rows (documented: r not finite, or fp16(||x||) = 0). */
static int stored_as_zero(int kind) {
    return kind == ROW_ZERO || kind == ROW_F16_OVERFLOW || kind == ROW_FLT_MAX || kind == ROW_HUGE ||
           kind == ROW_SUBNORMAL_F32 || kind == ROW_NAN || kind == ROW_ALL_NAN || kind == ROW_POS_INF ||
           kind == ROW_NEG_INF;
}

static void test_hand_rows(void) {
    static float x[MAXD], out[MAXD];
    static unsigned char unit[MAXD];
    uint64_t rng = 777;
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        for (int kind = 0; kind < ROW_KINDS; kind++) {
            RowStats st = {0};
            int bad_zero = 0;
            for (int d = 8; d <= 256; d *= 2) {
                make_row(kind, x, d);
                check_row(&b, x, d, &rng, &st);
                if (stored_as_zero(kind)) {
                    size_t ub = b.codec->unit_bytes(&b, d);
                    b.codec->encode(&b, x, d, unit);
                    for (size_t k = 0; k < ub; k++) bad_zero += unit[k] != 0;
                    b.codec->decode(&b, unit, d, 0, 1, out);
                    b.codec->rotate(&b, out, d, KV_FROM_INNER);
                    for (int i = 0; i < d; i++) bad_zero += !(out[i] == 0.0f);
                }
            }
            char prefix[64];
            snprintf(prefix, sizeof prefix, "tq%d_%s", B, ROW_NAMES[kind]);
            report(prefix, &st);
            if (stored_as_zero(kind)) {
                char name[96];
                snprintf(name, sizeof name, "tq%d_%s_is_zero_row", B, ROW_NAMES[kind]);
                check(!bad_zero, name, "%d nonzero unit bytes or decoded values (want an all-zero unit, x^ = 0)",
                      bad_zero);
            }
        }
    }
}

/* ---- saturation and the zero midpoint ---- */

/* x = s . (1.5/8) (d = 64): u = 1.5 e_0 exactly, r = 1.5, z = (8, 0, ..., 0). z_0 = 8 lies beyond
 * the largest centroid (top code); z = 0 is the tie between the two middle centroids, which
 * goes to the lower one, -c_min. */
static void test_saturation_and_zero_ties(void) {
    float x[64];
    unsigned char unit[64];
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        for (int i = 0; i < 64; i++) x[i] = (float)ref_sign(i) * 0.1875f;
        b.codec->encode(&b, x, 64, unit);
        int top = (1 << B) - 1, middle_low = (1 << (B - 1)) - 1, bad = 0;
        for (int i = 1; i < 64; i++) bad += unit_code(unit, B, i) != middle_low;
        char name[64];
        snprintf(name, sizeof name, "tq%d_saturates_to_top_code", B);
        check(unit_code(unit, B, 0) == top, name, "code %d, want %d (z = 8)", unit_code(unit, B, 0), top);
        snprintf(name, sizeof name, "tq%d_zero_tie_lower_index", B);
        check(!bad, name, "%d of 63 values with z = 0 not at code %d", bad, middle_low);
        snprintf(name, sizeof name, "tq%d_saturated_r", B);
        check(unit_r16(unit, B, 64) == f32_to_f16(1.5f), name, "r bits %04x", unit_r16(unit, B, 64));
    }
}

/* ---- exact ties at nonzero midpoints ---- */

/* d = 64, u = (u0, u1, 0, ...) with u0, u1 multiples of 2^-22, u0 + u1 below 4, r = fp16(||u||) in
 * [1, 2): then x = s.H(u) has entries s_i (u0 +- u1)/8, exact floats, and every step of a
 * float32 Hadamard on s.x is exact, so the codec sees z_0 = u0 * 8 / r, which is exactly the
 * midpoint m when chosen so (both evaluation orders of u*sqrt(d)/r are checked). Finds
 * u0 = m r / 8 rounded to the grid, for some r, with the norm inside r's fp16 interval. */
static int tie_construction(double m, double *u0_out, double *u1_out, float *r_out) {
    const double g = 0x1p-22;
    for (int j = 0; j < 1024; j++) {
        float r = 1.0f + (float)j / 1024.0f;
        double u0 = nearbyint(m * r / 8.0 / g) * g;
        int ok = 1;
        for (int step = -1; step <= 1 && ok; step++) {
            float v = (float)(u0 + step * g), z1 = v * 8.0f / r, z2 = v * (8.0f / r), mf = (float)m;
            ok = step == 0 ? (z1 == mf && z2 == mf) : step < 0 ? (z1 < mf && z2 < mf) : (z1 > mf && z2 > mf);
        }
        if (!ok) continue;
        double u1 = nearbyint(sqrt((double)r * r - u0 * u0) / g) * g;
        for (int step = -1; step <= 1 && ok; step++) {
            double v = u0 + step * g;
            ok = fabs(sqrt(v * v + u1 * u1) - r) <= 0x1p-14;
        }
        if (!ok) continue;
        *u0_out = u0, *u1_out = u1, *r_out = r;
        return 1;
    }
    return 0;
}

static void test_exact_ties(void) {
    float x[64];
    unsigned char unit[64];
    int tested = 0;
    for (int B = 3; B <= 4; B++) {
        KvBase b = tq_base(B);
        int levels = 1 << B;
        for (int k = levels / 2; k + 1 < levels; k++) {
            double m = (centroid(B, k) + centroid(B, k + 1)) / 2.0;
            if ((double)(float)m != m) continue;   /* no float z can sit exactly on it */
            double u0 = 0.0, u1 = 0.0;
            float r = 0.0f;
            char name[96];
            snprintf(name, sizeof name, "tq%d_tie_%d_%d_constructed", B, k, k + 1);
            if (!check(tie_construction(m, &u0, &u1, &r), name, "no exact construction for midpoint %.9g", m))
                continue;
            /* z_0 = +m: ties to k; just above: k+1; just below: k. z_0 = -m: the midpoint of
             * levels-2-k and levels-1-k, ties to levels-2-k; further out stays, nearer zero moves up. */
            const struct { int sign, step, want; const char *what; } cases[] = {
                {+1, 0, k, "pos_exact"}, {+1, +1, k + 1, "pos_above"}, {+1, -1, k, "pos_below"},
                {-1, 0, levels - 2 - k, "neg_exact"}, {-1, +1, levels - 2 - k, "neg_beyond"},
                {-1, -1, levels - 1 - k, "neg_inside"},
            };
            int bad_rest = 0;
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                double v0 = cases[c].sign * (u0 + cases[c].step * 0x1p-22);
                for (int i = 0; i < 64; i++) x[i] = (float)(ref_sign(i) * (v0 + ((i & 1) ? -u1 : u1)) / 8.0);
                b.codec->encode(&b, x, 64, unit);
                for (int i = 2; i < 64; i++) bad_rest += unit_code(unit, B, i) != levels / 2 - 1;
                snprintf(name, sizeof name, "tq%d_tie_%d_%d_%s", B, k, k + 1, cases[c].what);
                check(unit_code(unit, B, 0) == cases[c].want && unit_code(unit, B, 1) == levels - 1 &&
                      unit_r16(unit, B, 64) == f32_to_f16(r), name,
                      "codes %d, %d (want %d, %d), r %04x (want %04x); m = %.9g", unit_code(unit, B, 0),
                      unit_code(unit, B, 1), cases[c].want, levels - 1, unit_r16(unit, B, 64), f32_to_f16(r), m);
            }
            snprintf(name, sizeof name, "tq%d_tie_%d_%d_rest_zero_z", B, k, k + 1);
            check(!bad_rest, name, "%d values with z = 0 not at code %d", bad_rest, levels / 2 - 1);
            tested++;
        }
    }
    /* SCHEMES.md's tables have float midpoints 0.50055, 1.04996, 1.74793 (B=3) and
     * 0.52240, 1.43714, 2.40080 (B=4) */
    check(tested == 6, "tq_tie_midpoints_found", "%d float midpoints, want 6", tested);
}

/* ---- signs, rotation ---- */

static void test_signs_and_rotation(void) {
    int bad = 0;
    for (int i = 0; i < 64; i++) bad += ref_sign(i) != (SIGNS64[i] == '-' ? -1 : 1);
    check(!bad, "tq_sign_restatements_agree", "%d of 64 signs differ between the two restatements", bad);

    KvBase b = tq_base(2);
    static float e[MAXD];
    static double want[MAXD], y[MAXD];
    /* TO_INNER of e_j is s_j H e_j, whose first entry is s_j / sqrt(d): the codec's signs */
    bad = 0;
    for (int j = 0; j < 64; j++) {
        for (int i = 0; i < 64; i++) e[i] = i == j ? 1.0f : 0.0f;
        b.codec->rotate(&b, e, 64, KV_TO_INNER);
        bad += !(e[0] == (SIGNS64[j] == '-' ? -0.125f : 0.125f));
    }
    check(!bad, "tq_rotate_signs", "%d of 64 signs differ from SCHEMES.md's", bad);

    uint64_t rng = 99;
    for (int d = 8; d <= 1024; d *= 2) {
        static float x[MAXD], t[MAXD];
        double norm = 0.0, err_to = 0.0, err_from = 0.0, err_back = 0.0;
        for (int i = 0; i < d; i++) {
            x[i] = normal(&rng);
            norm += (double)x[i] * x[i];
        }
        norm = sqrt(norm);
        memcpy(t, x, (size_t)d * sizeof *t);
        for (int i = 0; i < d; i++) y[i] = ref_sign(i) * (double)x[i];
        ref_hadamard(y, want, d);
        b.codec->rotate(&b, t, d, KV_TO_INNER);
        /* max_or_inf, not fmax: it fails on NaN, and aarch64 gcc 12 -O3 crashes vectorizing these fmax loops */
        for (int i = 0; i < d; i++) err_to = max_or_inf(err_to, fabs(t[i] - want[i]));
        b.codec->rotate(&b, t, d, KV_FROM_INNER);
        for (int i = 0; i < d; i++) err_back = max_or_inf(err_back, fabs(t[i] - x[i]));
        for (int i = 0; i < d; i++) y[i] = x[i];
        ref_hadamard(y, want, d);
        memcpy(t, x, (size_t)d * sizeof *t);
        b.codec->rotate(&b, t, d, KV_FROM_INNER);
        for (int i = 0; i < d; i++) err_from = max_or_inf(err_from, fabs(t[i] - ref_sign(i) * want[i]));
        char name[64];
        snprintf(name, sizeof name, "tq_rotate_d%d", d);
        check(err_to <= 1e-6 * norm && err_from <= 1e-6 * norm && err_back <= 1e-6 * norm, name,
              "max error H(s.x) %.3g, s.H(x) %.3g, round trip %.3g (tol 1e-6 |x| = %.3g)", err_to, err_from,
              err_back, 1e-6 * norm);
    }
}

/* ---- the error the codebook is designed for ---- */

/* Gaussian rows rotate to near-N(0,1) z, so the mean of ||x - x^||^2 / ||x||^2 is Lloyd-Max's
 * distortion of N(0,1) (Max 1960: 1 - 2/pi, 0.1175, 0.03454, 0.009497). */
static void test_mse(void) {
    static const double LLOYD_MAX_MSE[5] = {0, 0.36338, 0.11748, 0.03454, 0.009497};
    static float x[256], xh[256];
    static unsigned char unit[256];
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        for (int d = 64; d <= 256; d *= 4) {
            uint64_t rng = 4242 + (uint64_t)d;
            double sum = 0.0;
            int rows = 1000;
            for (int row = 0; row < rows; row++) {
                double err = 0.0, norm = 0.0;
                for (int i = 0; i < d; i++) x[i] = normal(&rng);
                b.codec->encode(&b, x, d, unit);
                b.codec->decode(&b, unit, d, 0, 1, xh);
                b.codec->rotate(&b, xh, d, KV_FROM_INNER);
                for (int i = 0; i < d; i++) {
                    err += ((double)x[i] - xh[i]) * ((double)x[i] - xh[i]);
                    norm += (double)x[i] * x[i];
                }
                sum += err / norm;
            }
            double mse = sum / rows, want = LLOYD_MAX_MSE[B];
            char name[64];
            snprintf(name, sizeof name, "tq%d_d%d_mse_lloyd_max", B, d);
            check(close_to(mse, want, 0.05 * want), name, "relative MSE %.5f, Lloyd-Max %.5f (tol 5%%)", mse, want);
        }
    }
}

/* ---- decode's documented arithmetic ---- */

/* decode is c[code] * (r / sqrt(d)) in float32, bit for bit, on every path (n = 8 is decoded
 * without SIMD, wider rows with it where there is AVX-512). */
static void test_decode_products(void) {
    static float x[256], out[256];
    static unsigned char unit[256];
    uint64_t rng = 31;
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        int bad = 0;
        char first[160] = "";
        for (int d = 8; d <= 256; d *= 2)
            for (int row = 0; row < 8; row++) {
                for (int i = 0; i < d; i++) x[i] = normal(&rng) * (float)(row + 1);
                b.codec->encode(&b, x, d, unit);
                b.codec->decode(&b, unit, d, 0, 1, out);
                float scale = f16_to_f32(unit_r16(unit, B, d)) / sqrtf((float)d);
                for (int i = 0; i < d; i++) {
                    float want = (float)centroid(B, unit_code(unit, B, i)) * scale;
                    if (memcmp(&want, &out[i], sizeof want) && !bad++)
                        snprintf(first, sizeof first, "d %d value %d: %.9g, want %.9g", d, i, out[i], want);
                }
            }
        char name[64];
        snprintf(name, sizeof name, "tq%d_decode_exact_products", B);
        check(!bad, name, "%d values differ from c * (r / sqrt(d)) in float32: %s", bad, first);
    }
}

/* ---- runs of units ---- */

static void test_runs(void) {
    enum { ROWS = 9, D = 64 };
    static float x[ROWS * D], one[D], many[ROWS * D];
    static unsigned char units[ROWS * (D / 2 + 2)];
    uint64_t rng = 5;
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        size_t ub = b.codec->unit_bytes(&b, D);
        for (int i = 0; i < ROWS * D; i++) x[i] = normal(&rng) * (float)(1 + i / D);
        make_row(ROW_ZERO, x + 3 * D, D);
        make_row(ROW_NAN, x + 6 * D, D);
        for (int r = 0; r < ROWS; r++) b.codec->encode(&b, x + r * D, D, units + r * ub);
        int bad = 0;
        const int spans[][2] = {{0, ROWS}, {2, 3}, {5, 1}, {ROWS - 1, 1}, {1, ROWS - 1}};
        for (size_t s = 0; s < sizeof spans / sizeof *spans; s++) {
            int r0 = spans[s][0], count = spans[s][1];
            b.codec->decode(&b, units, D, r0, count, many);
            for (int r = 0; r < count; r++) {
                b.codec->decode(&b, units + (size_t)(r0 + r) * ub, D, 0, 1, one);
                bad += memcmp(one, many + r * D, sizeof one) != 0;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "tq%d_run_decode_matches_rows", B);
        check(!bad, name, "%d rows decoded from a run differ bitwise from the row alone", bad);
    }
}

/* ---- sizes, bits, names, widths ---- */

static void test_sizes_and_bits(void) {
    int bad_bytes = 0, bad_bits = 0;
    for (int B = 1; B <= 4; B++) {
        KvBase b = tq_base(B);
        for (int n = 8; n <= 4096; n *= 2) {
            bad_bytes += b.codec->unit_bytes(&b, n) != (size_t)(B * n / 8 + 2);
            bad_bits += !close_to(kv_spec_stored_bits(&(KvSpec){.base = b}, n), B + 16.0 / n, 1e-12);
        }
    }
    check(!bad_bytes, "tq_unit_bytes_layout", "%d (B, n) with unit_bytes != B*n/8 + 2", bad_bytes);
    check(!bad_bits, "tq_bits_per_value", "%d (B, n) with stored bits != B + 16/n", bad_bits);
    KvBase b = tq_base(3);
    check(close_to(kv_spec_stored_bits(&(KvSpec){.base = b}, 64), 3.25, 1e-12), "tq3_d64_bits_3_25", "%.6f", kv_spec_stored_bits(&(KvSpec){.base = b}, 64));
}

static void test_names(void) {
    int listed = 0;
    for (int i = 0; i < kv_codec_count(); i++) listed += kv_codec_at(i) == &kv_codec_tq;
    check(listed == 1, "tq_in_codec_table", "listed %d times", listed);
    check(kv_codec_tq.rotate != NULL, "tq_has_rotation", "rotate is NULL");
    for (int B = 1; B <= 4; B++) {
        char name[16], why[128] = "";
        KvBase b, again;
        snprintf(name, sizeof name, "tq%d", B);
        int ok = kv_base_parse(name, &b, why, sizeof why) == 0 && b.codec == &kv_codec_tq && b.bits == B &&
                 b.rows == 1 && b.group == 0 && !strcmp(b.name, name);
        ok = ok && kv_base_parse(b.name, &again, why, sizeof why) == 0 && !memcmp(&again, &b, sizeof b);
        char test[48];
        snprintf(test, sizeof test, "tq_parse_%s_round_trip", name);
        check(ok, test, "%s: %s", name, why);
    }
    const char *bad[] = {"tq0", "tq5", "tq9", "tq12", "tq03", "tq3-g64", "tq3x", "tq3 ", "tq4+had",
                         "tq", "tq-3", "TQ3", "tq_3", " tq3"};
    int bad_count = 0;
    char first[200] = "";
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        KvBase b;
        char why[128] = "";
        /* refused, with a why that names the offending base */
        if (kv_base_parse(bad[i], &b, why, sizeof why) != -1 || !strstr(why, bad[i])) {
            if (!bad_count++) snprintf(first, sizeof first, "'%s' -> '%s'", bad[i], why);
        }
    }
    check(!bad_count, "tq_parse_rejects_bad_names", "%d accepted or without a naming why: %s", bad_count, first);
    KvBase b;
    char why[128] = "";
    kv_base_parse("tq5", &b, why, sizeof why);
    check(strstr(why, "1, 2, 3 or 4") != NULL, "tq_parse_why_bits", "why: %s", why);
}

static void test_widths(void) {
    KvBase b = tq_base(4);
    int bad_ok = 0;
    char why[128];
    for (int n = 8; n <= 4096; n *= 2) bad_ok += kv_base_check(&b, n, why, sizeof why) != 1;
    check(!bad_ok, "tq_check_accepts_powers_of_two", "%d powers of two from 8 to 4096 refused", bad_ok);
    const int refused[] = {0, -8, 1, 2, 4, 3, 6, 12, 48, 65, 96, 100, 192, 8192, 1 << 20};
    int bad_refused = 0;
    char first[200] = "";
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        why[0] = 0;
        if (kv_base_check(&b, refused[i], why, sizeof why) != 0 || !why[0]) {
            if (!bad_refused++) snprintf(first, sizeof first, "n = %d", refused[i]);
        }
    }
    check(!bad_refused, "tq_check_refuses_widths", "%d widths accepted or refused silently: %s", bad_refused, first);
    why[0] = 0;
    b.codec->check(&b, 48, why, sizeof why);
    check(strstr(why, "power of two") != NULL, "tq_check_why_power_of_two", "why: %s", why);
    why[0] = 0;
    b.codec->check(&b, 4, why, sizeof why);
    check(strstr(why, "8 to 4096") != NULL, "tq_check_why_range", "why: %s", why);
    /* a refused width is ignored, not overrun */
    float x[48] = {1.0f}, out[48];
    unsigned char unit[64];
    memset(unit, 0xa5, sizeof unit);
    for (int i = 0; i < 48; i++) out[i] = 7.0f;
    b.codec->encode(&b, x, 48, unit);
    b.codec->decode(&b, unit, 48, 0, 1, out);
    b.codec->rotate(&b, x, 48, KV_TO_INNER);
    int touched = out[0] != 7.0f || x[0] != 1.0f;
    for (size_t i = 0; i < sizeof unit; i++) touched += unit[i] != 0xa5;
    check(!touched, "tq_refused_width_untouched", "%d bytes or values written for n = 48", touched);
}

/* ---- units encode() never writes ---- */

/* r = inf or NaN in a unit: decode multiplies the centroids by it, so +-inf or NaN, no crash. */
static void test_hostile_units(void) {
    unsigned char unit[34];
    float out[64];
    KvBase b = tq_base(4);
    for (int i = 0; i < 32; i++) unit[i] = (unsigned char)(0x0f + 16 * (i % 16));   /* codes 15, i%16, ... */
    kv_put_u16(unit + 32, 0x7c00);
    b.codec->decode(&b, unit, 64, 0, 1, out);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        double c = centroid(4, unit_code(unit, 4, i));
        bad += !(isinf(out[i]) && (out[i] > 0) == (c > 0));
    }
    check(!bad, "tq_unit_r_inf_decodes_inf", "%d values not +-inf with the centroid's sign", bad);
    kv_put_u16(unit + 32, 0x7e00);
    b.codec->decode(&b, unit, 64, 0, 1, out);
    b.codec->rotate(&b, out, 64, KV_FROM_INNER);
    bad = 0;
    for (int i = 0; i < 64; i++) bad += !isnan(out[i]);
    check(!bad, "tq_unit_r_nan_decodes_nan", "%d values not NaN", bad);
}

int main(void) {
    test_names();
    test_widths();
    test_sizes_and_bits();
    test_signs_and_rotation();
    test_random_rows();
    test_hand_rows();
    test_saturation_and_zero_ties();
    test_exact_ties();
    test_mse();
    test_decode_products();
    test_runs();
    test_hostile_units();
    return test_exit_code();
}
