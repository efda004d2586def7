/* tests/test_codec_rvq.c: rvqCxS-dD (quant/codec_rvq.c, SCHEMES.md §9) against a restatement of
 * its definition: names and bits, a row coded stage by stage against an independent encoder and
 * decoder (bit for bit, seeded tables), and the fit: stage 1 is vq's fit of the same points (the
 * vq codec's own), stage s Lloyd on what the stages before it leave; more stages lower the
 * objective; too few points refused. The file layout through model/formats/calibration.c: the
 * shape [n_kv_heads, d/D, S, 2^C, D] comes from the codec's declaration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/formats/calibration.h"
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"
#include "quant/scheme.h"
#include "tests/test.h"
#include "tests/test_random.h"

static KvBase base_of(const char *name) {
    KvBase b;
    char why[200];
    if (kv_base_parse(name, &b, why, sizeof why)) memset(&b, 0, sizeof b);
    return b;
}

static void *alloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

/* ---- names and bits ---- */

static void test_names(void) {
    static const struct {
        const char *text;
        int n;
        double bits;
    } ok[] = {{"rvq8x2-d8", 64, 2.25}, {"rvq8x2-d16", 64, 1.25}, {"rvq4x3-d4", 64, 3.25}, {"rvq12x4-d16", 128, 3.125},
              {"rvq1x2-d1", 64, 2.25}};
    int bad = 0;
    char first[200] = "";
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        KvSpec s;
        char why[200];
        int good = kv_spec_parse(ok[i].text, KV_SIDE_KEYS, &s, why, sizeof why) == 0 && !strcmp(s.base.name, ok[i].text) &&
                   kv_spec_is_fitted(&s) && fabs(kv_spec_stored_bits(&s, ok[i].n) - ok[i].bits) < 1e-12;
        if (!good && !bad++) snprintf(first, sizeof first, "%s: %g bits", ok[i].text, kv_spec_stored_bits(&s, ok[i].n));
    }
    check(bad == 0, "codec rvq: names parse to themselves, are fitted, S*C/D + 16/d bits (rvq8x2-d8 2.25, rvq8x2-d16 1.25)",
          "%s", first);
    const char *refused[] = {"rvq8x5-d8", "rvq8x1-d8", "rvq13x2-d4", "rvq0x2-d4", "rvq8x2-d3", "rvq8x2-d32", "rvq8x2",
                             "rvq8-d8", "rvq8x2-d8x", "rvq08x2-d8"};
    bad = 0;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        KvBase b;
        char why[200] = "";
        int rc = kv_base_parse(refused[i], &b, why, sizeof why);
        if (!strcmp(refused[i], "rvq08x2-d8")) {   /* a leading zero parses, but to the canonical name */
            if (rc != 0 || strcmp(b.name, "rvq8x2-d8")) bad++;
            continue;
        }
        if ((rc == 0 || !strstr(why, "rvqCxS-dD")) && !bad++) snprintf(first, sizeof first, "%s: %s", refused[i], why);
    }
    check(bad == 0, "codec rvq: rvq8x5-d8, rvq8x1-d8, rvq13x2-d4, D 3 or 32, missing parts refused naming rvqCxS-dD", "%s",
          first);
    KvBase b = base_of("rvq8x2-d16");
    char why[200];
    check(b.codec && !kv_base_check(&b, 40, why, sizeof why) && strstr(why, "do not divide rows of 40") &&
              kv_base_check(&b, 64, why, sizeof why),
          "codec rvq: sub-vectors must divide the row", "%s", why);
}

/* ---- one row, restated ---- */

/* The definition: r, z as vq; each sub-vector's stages greedily, residuals in float32; codes
 * (j, s) at index j * S + s of a C-bit stream; x^ = (r / sqrt d) * the stages' entries summed in
 * stage order. w: +aw's channel weights (each square times its weight, then summed in channel
 * order), or NULL; ties counts the searches whose nearest distance more than one entry has
 * (the lower index stays). */
static void ref_row_aw(const float *T, int C, int S, int D, const float *w, const float *x, int n, unsigned char *unit,
                       float *xh, int *ties) {
    int K = 1 << C, subs = n / D;
    size_t cb = ((size_t)subs * S * C + 7) / 8;
    memset(unit, 0, cb + 2);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    uint16_t r16 = f32_to_f16((float)sqrt(sum));
    if ((r16 & 0x7c00u) == 0x7c00u) r16 = 0;
    unit[cb] = (unsigned char)(r16 & 0xff), unit[cb + 1] = (unsigned char)(r16 >> 8);
    float r = f16_to_f32(r16), sqrt_d = sqrtf((float)n);
    for (int j = 0; j < subs; j++) {
        float e[16], acc[16] = {0};
        for (int i = 0; i < D; i++) e[i] = r16 ? x[j * D + i] * sqrt_d / r : 0.0f;
        for (int s = 0; s < S; s++) {
            const float *book = T + ((size_t)j * S + s) * (size_t)K * D;
            int best = 0, tied = 0;
            float best_d = INFINITY;
            for (int k = 0; k < K; k++) {
                float d = 0;
                for (int i = 0; i < D; i++) {
                    volatile float t = e[i] - book[(size_t)k * D + i];
                    volatile float sq = t * t;
                    volatile float term = w ? w[j * D + i] * sq : sq;
                    d = d + term;
                }
                if (d < best_d) best_d = d, best = k, tied = 0;
                else if (d == best_d) tied = 1;
            }
            *ties += tied;
            if (!r16) best = 0;
            for (int i = 0; i < D; i++) {
                e[i] -= book[(size_t)best * D + i];
                acc[i] = s == 0 ? book[(size_t)best * D + i] : acc[i] + book[(size_t)best * D + i];
            }
            size_t bit = (size_t)(j * S + s) * C;
            for (int k = 0; k < C; k++, bit++)
                if (best >> k & 1) unit[bit / 8] |= (unsigned char)(1u << (bit % 8));
        }
        for (int i = 0; i < D; i++) xh[j * D + i] = (r / sqrt_d) * acc[i];   /* r = 0: zero (signed as vq's) */
    }
}

static void ref_row(const float *T, int C, int S, int D, const float *x, int n, unsigned char *unit, float *xh) {
    int ties = 0;
    ref_row_aw(T, C, S, D, NULL, x, n, unit, xh, &ties);
}

static void test_rows(uint64_t *rng) {
    static const char *const names[] = {"rvq8x2-d8", "rvq4x3-d4", "rvq3x4-d2", "rvq5x2-d16", "rvq2x2-d1", "rvq12x2-d8"};
    char name[200];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        KvBase b = base_of(names[k]);
        int n = 64, C = b.bits, D = b.variant % 32, S = b.variant / 32, K = 1 << C;
        size_t floats = (size_t)(n / D) * S * K * D, ub = b.codec->unit_bytes(&b, n);
        float *T = alloc(floats * sizeof(float)), x[64], got[64], want[64];
        for (size_t i = 0; i < floats; i++) T[i] = normal(rng) * (i % 3 == 0 ? 1.0f : 0.3f);
        b.table = T;
        unsigned char *unit = alloc(ub), *ref = alloc(ub);
        int bad = 0;
        for (int row = 0; row < 40; row++) {
            for (int i = 0; i < n; i++) x[i] = row == 0 ? 0.0f : normal(rng) * (row % 4 == 1 ? 30.0f : 1.0f);
            b.codec->encode(&b, x, n, unit);
            b.codec->decode(&b, unit, n, 0, 1, got);
            ref_row(T, C, S, D, x, n, ref, want);
            for (int i = 0; i < n; i++) bad += to_bits(got[i]) != to_bits(want[i]);
            bad += memcmp(unit, ref, ub) != 0;
        }
        snprintf(name, sizeof name, "codec rvq: %s rows of 64 (a zero row, 39 random): bytes and x^ = the definition's, "
                 "bit for bit (%zu bytes a row)", names[k], ub);
        check(bad == 0 && ub == ((size_t)(n / D) * S * C + 7) / 8 + 2, name, "%d differ", bad);
        b.table = NULL;
        b.codec->decode(&b, unit, n, 0, 1, got);
        int zero = 1;
        for (int i = 0; i < n; i++) zero &= got[i] == 0.0f;
        if (k == 0) check(zero, "codec rvq: with no table bound a row decodes to 0", "not zero");
        free(T); free(unit); free(ref);
    }
}

/* +aw rows (weights bound as the cache binds them) and a run of rows decoded at once, against
 * the definition: the shapes with a vector search (D = 8, books of 16k entries) and a byte
 * decode (8-bit codes, D = 4, 8, 16) and shapes without (3-bit codes). One channel weighs 0. */
static void test_aw_rows(uint64_t *rng) {
    static const char *const names[] = {"rvq8x2-d8", "rvq4x3-d8", "rvq8x2-d4", "rvq8x2-d16", "rvq3x2-d8", "rvq8x4-d8"};
    enum { N = 64, ROWS = 96 };
    char name[200];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        KvBase b = base_of(names[k]);
        int C = b.bits, D = b.variant % 32, S = b.variant / 32, K = 1 << C, ties = 0, bad = 0;
        size_t floats = (size_t)(N / D) * S * K * D, ub = b.codec->unit_bytes(&b, N);
        float *T = alloc(floats * sizeof(float)), *x = alloc(ROWS * N * sizeof(float));
        float *got = alloc(ROWS * N * sizeof(float)), *want = alloc(ROWS * N * sizeof(float)), w[N];
        for (size_t i = 0; i < floats; i++) T[i] = normal(rng) * (i % 3 == 0 ? 1.0f : 0.3f);
        for (int i = 0; i < N; i++) w[i] = i == 5 ? 0.0f : (float)(0.05 + 3.0 * uniform(rng));
        for (int i = 0; i < ROWS * N; i++) x[i] = normal(rng) * (i / N % 4 == 1 ? 30.0f : 1.0f);
        b.table = T;
        b.weights = w;
        unsigned char *units = alloc(ROWS * ub), *ref = alloc(ub);
        for (int r = 0; r < ROWS; r++) {
            b.codec->encode(&b, x + (size_t)r * N, N, units + (size_t)r * ub);
            ref_row_aw(T, C, S, D, w, x + (size_t)r * N, N, ref, want + (size_t)r * N, &ties);
            bad += memcmp(units + (size_t)r * ub, ref, ub) != 0;
        }
        b.codec->decode(&b, units, N, 3, ROWS - 3, got);
        for (int i = 0; i < (ROWS - 3) * N; i++) bad += to_bits(got[i]) != to_bits(want[3 * N + i]);
        snprintf(name, sizeof name, "codec rvq: %s+aw, %d rows (a channel of weight 0): bytes = the weighted "
                 "definition's, rows 3..%d decoded at once = its x^, bit for bit", names[k], ROWS, ROWS - 1);
        check(bad == 0, name, "%d differ", bad);
        free(T); free(x); free(got); free(want); free(units); free(ref);
    }
}

/* Exact ties in books of 256 entries, both stages, plain and +aw: a search that scans entries in
 * blocks, lanes or several running minima must still give the first of equal distances. Stage 1
 * of sub-vector j holds z's sub-vector itself at two entries (the rest far), stage 2 a zero
 * entry at two others: both stages meet a tie at distance 0, the pairs adjacent, 16, 32, 64 apart,
 * at the ends. */
static void test_ties(uint64_t *rng) {
    enum { N = 64, D = 8, S = 2, K = 256, SUBS = N / D };
    static const int pairs[SUBS * S][2] = {{3, 35}, {3, 19}, {3, 4},     {17, 34},  {200, 255}, {0, 255}, {16, 32}, {31, 240},
                                           {100, 101}, {64, 128}, {5, 21}, {250, 251}, {15, 16}, {47, 48}, {1, 2}, {128, 129}};
    static float T[SUBS * S * K * D];
    float x[N], w[N], got[N], want[N];
    unsigned char unit[SUBS * S + 2], ref[SUBS * S + 2];
    for (int i = 0; i < N; i++) x[i] = (next_u64(rng) & 1) ? 1.0f : -1.0f;   /* r = 8: z = x exactly */
    for (int i = 0; i < N; i++) w[i] = (float)(0.5 + uniform(rng));
    for (int i = 0; i < SUBS * S * K * D; i++) T[i] = 5.0f;
    for (int j = 0; j < SUBS; j++)
        for (int s = 0; s < S; s++)
            for (int e = 0; e < 2; e++)
                for (int i = 0; i < D; i++)
                    T[(((size_t)j * S + s) * K + (size_t)pairs[j * S + s][e]) * D + i] = s == 0 ? x[j * D + i] : 0.0f;
    for (int weighted = 0; weighted < 2; weighted++) {
        KvBase b = base_of("rvq8x2-d8");
        b.table = T;
        b.weights = weighted ? w : NULL;
        int ties = 0, bad = 0;
        b.codec->encode(&b, x, N, unit);
        b.codec->decode(&b, unit, N, 0, 1, got);
        ref_row_aw(T, 8, S, D, b.weights, x, N, ref, want, &ties);
        bad += memcmp(unit, ref, sizeof unit) != 0;
        for (int c = 0; c < SUBS * S; c++) bad += unit[c] != pairs[c][0];
        for (int i = 0; i < N; i++) bad += to_bits(got[i]) != to_bits(want[i]);
        check(bad == 0 && ties == SUBS * S,
              weighted ? "codec rvq: rvq8x2-d8+aw exact ties in both stages' books of 256 entries -> the lower index"
                       : "codec rvq: rvq8x2-d8 exact ties in both stages' books of 256 entries -> the lower index",
              "%d wrong, %d ties in the reference (want %d), codes %u %u %u %u", bad, ties, SUBS * S, unit[0], unit[1],
              unit[2], unit[3]);
    }
}

/* Any bytes decode as the layout reads them: codes (j, s) at index j * S + s, r the fp16 after
 * them (NaN, inf and subnormal r among random ones), x^ = (r / sqrt d) x the entries summed in
 * stage order; runs of rows decoded at once as row by row. */
static void test_hostile_bytes(uint64_t *rng) {
    static const char *const names[] = {"rvq8x2-d8", "rvq8x2-d4", "rvq4x3-d8"};
    enum { N = 64, ROWS = 70 };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        KvBase b = base_of(names[k]);
        int C = b.bits, D = b.variant % 32, S = b.variant / 32, K = 1 << C, bad = 0;
        size_t floats = (size_t)(N / D) * S * K * D, ub = b.codec->unit_bytes(&b, N), cb = ub - 2;
        float *T = alloc(floats * sizeof(float)), *got = alloc(ROWS * N * sizeof(float)), want[N];
        unsigned char *units = alloc(ROWS * ub);
        for (size_t i = 0; i < floats; i++) T[i] = normal(rng);
        for (size_t i = 0; i < ROWS * ub; i++) units[i] = (unsigned char)next_u64(rng);
        static const uint16_t special[] = {0x7c01, 0xfe00, 0x7c00, 0xfc00, 0x0001, 0x8000, 0x3c00};
        for (int r = 0; r < 7; r++) units[r * ub + cb] = special[r] & 0xff, units[r * ub + cb + 1] = special[r] >> 8;
        b.table = T;
        b.codec->decode(&b, units, N, 1, ROWS - 1, got);
        for (int r = 1; r < ROWS; r++) {
            const unsigned char *u = units + (size_t)r * ub;
            volatile float scale = f16_to_f32((uint16_t)(u[cb] | u[cb + 1] << 8)) / sqrtf((float)N);
            for (int j = 0; j < N / D; j++) {
                float acc[16] = {0};
                for (int s = 0; s < S; s++) {
                    size_t bit = (size_t)(j * S + s) * C;
                    unsigned code = 0;
                    for (int c = 0; c < C; c++, bit++) code |= (unsigned)(u[bit / 8] >> (bit % 8) & 1u) << c;
                    const float *e = T + (((size_t)j * S + s) * K + code) * D;
                    for (int i = 0; i < D; i++) acc[i] = s == 0 ? e[i] : acc[i] + e[i];
                }
                for (int i = 0; i < D; i++) want[j * D + i] = scale * acc[i];
            }
            for (int i = 0; i < N; i++) bad += to_bits(got[(size_t)(r - 1) * N + i]) != to_bits(want[i]);
        }
        char name[200];
        snprintf(name, sizeof name, "codec rvq: %s, %d rows of random bytes (r NaN, inf, subnormal, -0 among them) decode "
                 "as the layout reads them, rows 1..%d at once", names[k], ROWS, ROWS - 1);
        check(bad == 0, name, "%d values differ", bad);
        free(T); free(got); free(units);
    }
}

/* ---- the fit ---- */

static int run_fit(const KvBase *b, const float *units, size_t count, int n, float *table, KvFitShortfall *sf) {
    KvFitRows rows = {.units = units, .count = count, .n = n};
    void *scratch = alloc(b->codec->fit->scratch_bytes(b, &rows));
    int rc = b->codec->fit->fit(b, &rows, table, scratch, sf);
    free(scratch);
    return rc;
}

static double objective(const KvBase *b, const float *units, size_t count, int n, const float *table) {
    KvFitRows rows = {.units = units, .count = count, .n = n};
    void *scratch = alloc(b->codec->fit->scratch_bytes(b, &rows));
    double o = b->codec->fit->objective(b, &rows, table, scratch);
    free(scratch);
    return o;
}

/* Rows with structure a second stage can use: a few directions plus noise, one zero row. */
static float *fit_rows(size_t count, int n, uint64_t *rng) {
    float *x = alloc(count * (size_t)n * sizeof(float)), dirs[4][64];
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < n; i++) dirs[d][i] = normal(rng);
    for (size_t r = 1; r < count; r++)
        for (int i = 0; i < n; i++) x[r * n + i] = dirs[r % 4][i] * (1.0f + 0.2f * normal(rng)) + 0.5f * normal(rng);
    return x;
}

static void test_fit(uint64_t *rng) {
    const int n = 32;
    const size_t count = 300;
    float *x = fit_rows(count, n, rng);
    static const struct {
        const char *rvq, *vq;
    } cases[] = {{"rvq4x2-d4", "vq4-d4"}, {"rvq3x3-d8", "vq3-d8"}, {"rvq2x2-d1", "vq2-d1"}};
    char name[240];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        KvBase b = base_of(cases[c].rvq), v = base_of(cases[c].vq);
        int D = b.variant % 32, S = b.variant / 32, K = 1 << b.bits;
        size_t stage = (size_t)K * D, floats = (size_t)(n / D) * S * stage;
        float *T = alloc(floats * sizeof(float)), *V = alloc((size_t)(n / D) * stage * sizeof(float));
        KvFitShortfall sf = {0, 0};
        int rc = run_fit(&b, x, count, n, T, &sf) | run_fit(&v, x, count, n, V, &sf);
        /* stage 1 of every sub-vector = vq's book of it */
        int bad1 = 0;
        for (int j = 0; j < n / D; j++) bad1 += memcmp(T + (size_t)j * S * stage, V + (size_t)j * stage, stage * sizeof(float)) != 0;
        snprintf(name, sizeof name, "codec rvq fit: %s stage 1 of each sub-vector = the vq codec's %s fit of the same rows",
                 cases[c].rvq, cases[c].vq);
        check(rc == 0 && bad1 == 0, name, "rc %d, %d sub-vectors differ", rc, bad1);
        /* stage s = Lloyd (spread start) on the residuals the fitted stages before it leave */
        int bad = 0;
        float *p = alloc(count * D * sizeof(float)), *want = alloc(stage * sizeof(float));
        uint16_t *codes = alloc(count * sizeof(uint16_t));
        void *ls = alloc(lloyd_scratch_bytes(D, K));
        float sqrt_d = sqrtf((float)n);
        for (int j = 0; j < n / D; j++) {
            size_t np = 0;
            for (size_t r = 0; r < count; r++) {
                double sum = 0;
                for (int i = 0; i < n; i++) sum += (double)x[r * n + i] * x[r * n + i];
                uint16_t h = f32_to_f16((float)sqrt(sum));
                if (h == 0) continue;
                for (int i = 0; i < D; i++) p[np * D + i] = x[r * n + j * D + i] * sqrt_d / f16_to_f32(h);
                np++;
            }
            for (int s = 1; s < S; s++) {
                const float *prev = T + ((size_t)j * S + s - 1) * stage;
                for (size_t q = 0; q < np; q++) {
                    int a = lloyd_nearest(p + q * D, D, prev, K);
                    for (int i = 0; i < D; i++) p[q * D + i] -= prev[(size_t)a * D + i];
                }
                for (int k = 0; k < K; k++) memcpy(want + (size_t)k * D, p + (size_t)((double)k * np / K) * D, D * sizeof(float));
                lloyd_fit(p, np, D, want, K, LLOYD_MAX_ITERATIONS, codes, ls);
                bad += memcmp(want, T + ((size_t)j * S + s) * stage, stage * sizeof(float)) != 0;
            }
        }
        snprintf(name, sizeof name, "codec rvq fit: %s stage s = Lloyd on the residuals stages 1..s-1 leave, every sub-vector",
                 cases[c].rvq);
        check(bad == 0, name, "%d stages differ", bad);
        double o_rvq = objective(&b, x, count, n, T), o_vq = objective(&v, x, count, n, V);
        snprintf(name, sizeof name, "codec rvq fit: %s objective below %s's on its rows (%.4g < %.4g)", cases[c].rvq,
                 cases[c].vq, o_rvq, o_vq);
        check(o_rvq < o_vq, name, "not lower");
        rc = run_fit(&b, x, 4 * (size_t)K - 1, n, T, &sf);
        snprintf(name, sizeof name, "codec rvq fit: %s on %d rows (one zero) is refused: fewer than 4 x %d points", cases[c].rvq,
                 4 * K - 1, K);
        check(rc == -1 && sf.entries == K && sf.points == 4 * (size_t)K - 2, name, "rc %d, %zu points", rc, sf.points);
        free(T); free(V); free(p); free(want); free(codes); free(ls);
    }
    free(x);
}

/* ---- in a calibration file ---- */

static void test_file(void) {
    char dir[] = "/tmp/kvq_test_rvq_XXXXXX", path[80];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    Calibration c, back;
    Error err = {{0}};
    int rc = calibration_init(&c, 2, 2, 2, 8, &err);
    CalibFit *f = rc ? NULL : calibration_add_fit(&c, "rvq4x3-d2", &err);
    if (f)
        for (size_t i = 0; i < 2 * 2 * f->layer_floats; i++) f->codebooks[i] = (float)i * 0.001f;
    memset(c.model_sha256, 'a', 64);
    memset(c.text_sha256, 'b', 64);
    c.tokens = c.ctx = 16;
    rc = !f || calibration_save(path, &c, &err) || calibration_load(path, NULL, &back, &err);
    SafeTensors st;
    const Tensor *t = NULL;
    if (!rc && st_open(&st, path, &err) == 0) t = st_find(&st, "fit.rvq4x3-d2.v.1");
    int shape_ok = t && t->ndim == 5 && t->shape[0] == 2 && t->shape[1] == 4 && t->shape[2] == 3 && t->shape[3] == 16 &&
                   t->shape[4] == 2;
    check(!rc && f->layer_floats == 2 * 4 * 3 * 16 * 2 && shape_ok && back.n_fits == 1 &&
              !memcmp(back.fits[0].codebooks, c.fits[0].codebooks, 2 * 2 * f->layer_floats * sizeof(float)) &&
              calibration_table(&back, "rvq4x3-d2", 'v', 1, 1) == calibration_codebook(&back, "rvq4x3-d2", 'v', 1) + 4 * 3 * 16 * 2,
          "codec rvq in a calibration: fit.KEY.v.1 [n_kv_heads, d/D, S, 2^C, D] = [2, 4, 3, 16, 2] from the codec's "
          "declaration, written and read back exactly, head 1's table after head 0's",
          "%s", rc ? err.msg : "wrong shape or data");
    if (t) st_close(&st);
    if (!rc) calibration_free(&back);
    calibration_free(&c);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    uint64_t rng = 0x5eed0f1e5ULL;
    test_names();
    test_rows(&rng);
    test_aw_rows(&rng);
    test_ties(&rng);
    test_hostile_bytes(&rng);
    test_fit(&rng);
    test_file();
    return test_exit_code();
}
