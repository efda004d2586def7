/* tests/test_pca.c: quant/pca.c (pcaB's arithmetic, SCHEMES.md §9) and quant/aw.c (+aw's weights).
 * - Eigen: a 2x2 case on paper (values, vectors, the sign rule on a tie of magnitudes); random
 *   covariances of d = 16 reconstructed as U^T diag(values) U, U orthonormal, values descending,
 *   each row's largest-magnitude entry positive.
 * - The allocation against brute force over every allocation of small d (random costs, and
 *   integer costs full of exact ties for the lexicographic rule).
 * - A whole fit: D_i(0) is the energy of component i, each D_i(b) the objective of a Lloyd table,
 *   the kept tables no worse than 1% over a differently started full Lloyd on the same points, the
 *   bits summing to the budget's optimum, and encode/decode of every calibration row leaving
 *   exactly the allocated distortion (plain and with +aw's weights).
 * - +aw: key and value weights against sums done on paper (group of 2 query heads, the RoPE pair
 *   average for pre-RoPE keys, a head of zero mass). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "quant/aw.h"
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"
#include "quant/pca.h"
#include "tests/test.h"

/* ---- eigen ---- */

static void test_eigen_by_hand(void) {
    double a[4] = {2, 1, 1, 2}, values[2], vectors[4];
    char scratch[64];
    pca_eigen(a, 2, values, vectors, scratch);
    double r = sqrt(0.5);
    check(fabs(values[0] - 3) < 1e-12 && fabs(values[1] - 1) < 1e-12, "pca_eigen_2x2_values", "%g %g", values[0],
          values[1]);
    /* (1, 1)/sqrt2 and (1, -1)/sqrt2: both entries tie in magnitude, so the first is made positive */
    check(fabs(vectors[0] - r) < 1e-12 && fabs(vectors[1] - r) < 1e-12 && fabs(vectors[2] - r) < 1e-12 &&
              fabs(vectors[3] + r) < 1e-12,
          "pca_eigen_2x2_vectors_signed", "%g %g / %g %g", vectors[0], vectors[1], vectors[2], vectors[3]);
    /* diag(1, 5): the order is by value, the second vector is -e1 flipped to +e1 */
    double b[4] = {1, 0, 0, 5};
    pca_eigen(b, 2, values, vectors, scratch);
    check(values[0] == 5 && values[1] == 1 && vectors[0] == 0 && vectors[1] == 1 && vectors[2] == 1 &&
              vectors[3] == 0,
          "pca_eigen_diagonal_sorted", "%g %g", values[0], values[1]);
    /* a negative largest entry: [[1, -2], [-2, 1]] has (1, -1)/sqrt2 for 3 -> signed (+, -) already,
     * and (1, 1)/sqrt2 for -1 */
    double c[4] = {1, -2, -2, 1};
    pca_eigen(c, 2, values, vectors, scratch);
    check(fabs(values[0] - 3) < 1e-12 && vectors[0] > 0 && vectors[1] < 0 && vectors[2] > 0 && vectors[3] > 0,
          "pca_eigen_2x2_negative_pair", "%g: %g %g", values[0], vectors[0], vectors[1]);
}

static void test_eigen_random(void) {
    enum { D = 16, N = 200 };
    uint64_t seed = 7;
    double worst_rec = 0, worst_orth = 0;
    int descending = 1, signed_ok = 1;
    for (int trial = 0; trial < 5; trial++) {
        static double a[D * D], a0[D * D], values[D], vectors[D * D];
        double x[N][D];
        for (int r = 0; r < N; r++)
            for (int c = 0; c < D; c++) x[r][c] = rnd(&seed) * (1 + c % 5) + (c > 0 ? 0.5 * x[r][c - 1] : 0);
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                double s = 0;
                for (int r = 0; r < N; r++) s += x[r][i] * x[r][j];
                a[i * D + j] = a0[i * D + j] = s / N;
            }
        char scratch[D * 16];
        pca_eigen(a, D, values, vectors, scratch);
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                double rec = 0, dot = 0;
                for (int k = 0; k < D; k++) {
                    rec += vectors[k * D + i] * values[k] * vectors[k * D + j];
                    dot += vectors[i * D + k] * vectors[j * D + k];
                }
                worst_rec = max_or_inf(worst_rec, fabs(rec - a0[i * D + j]));
                worst_orth = max_or_inf(worst_orth, fabs(dot - (i == j)));
            }
        for (int i = 0; i + 1 < D; i++) descending &= values[i] >= values[i + 1];
        for (int i = 0; i < D; i++) {
            int big = 0;
            for (int k = 1; k < D; k++)
                if (fabs(vectors[i * D + k]) > fabs(vectors[i * D + big])) big = k;
            signed_ok &= vectors[i * D + big] > 0;
        }
    }
    check(worst_rec < 1e-10, "pca_eigen_reconstructs", "max |U^T L U - A| = %g", worst_rec);
    check(worst_orth < 1e-12, "pca_eigen_orthonormal", "max |U U^T - I| = %g", worst_orth);
    check(descending, "pca_eigen_descending", "values out of order");
    check(signed_ok, "pca_eigen_sign_rule", "a row's largest-magnitude entry is negative");
}

/* ---- allocation ---- */

/* Every allocation of d components in lexicographic order; the first of the least sums, the sum
 * nested as pca_allocate states. */
static double brute_allocate(const double *cost, int d, int budget, int *bits) {
    int b[8] = {0};
    double best = INFINITY;
    for (;;) {
        int used = 0;
        for (int i = 0; i < d; i++) used += b[i];
        if (used <= budget) {
            double s = cost[(d - 1) * 9 + b[d - 1]];
            for (int i = d - 2; i >= 0; i--) s = cost[i * 9 + b[i]] + s;
            if (s < best) {
                best = s;
                memcpy(bits, b, (size_t)d * sizeof *b);
            }
        }
        int i = d - 1;   /* next in lexicographic order: the last digit counts fastest */
        while (i >= 0 && b[i] == PCA_MAX_BITS) b[i--] = 0;
        if (i < 0) break;
        b[i]++;
    }
    return best;
}

static void test_allocate_brute(void) {
    uint64_t seed = 11;
    int mismatches = 0, trials = 0, tie_mismatches = 0, tie_trials = 0;
    static char scratch[1 << 16];
    for (int d = 1; d <= 4; d++)
        for (int trial = 0; trial < 6; trial++)
            for (int budget = 0; budget <= 8 * d + 1; budget += 3) {
                double cost[4 * 9], ties[4 * 9];
                for (int i = 0; i < d; i++) {
                    double v = 1 + 10 * fabs(rnd(&seed)), t = 6 + (int)(4 * fabs(rnd(&seed)));
                    for (int b = 0; b <= 8; b++) {
                        cost[i * 9 + b] = v;
                        v *= 0.2 + 0.5 * fabs(rnd(&seed));
                        ties[i * 9 + b] = t;   /* whole numbers, decreasing by 0..2: many exact ties */
                        t = t - (int)(3 * fabs(rnd(&seed)));
                        if (t < 0) t = 0;
                    }
                }
                int got[4], want[4];
                double g = pca_allocate(cost, d, budget, got, scratch), w = brute_allocate(cost, d, budget, want);
                trials++;
                mismatches += g != w || memcmp(got, want, (size_t)d * sizeof *got) != 0;
                g = pca_allocate(ties, d, budget, got, scratch);
                w = brute_allocate(ties, d, budget, want);
                tie_trials++;
                tie_mismatches += g != w || memcmp(got, want, (size_t)d * sizeof *got) != 0;
            }
    check(mismatches == 0, "pca_allocate_vs_brute_force", "%d of %d differ", mismatches, trials);
    check(tie_mismatches == 0, "pca_allocate_ties_lexicographic", "%d of %d differ", tie_mismatches, tie_trials);
    /* on paper: two equal components, 3 bits: (1, 2) and (2, 1) both cost 5; (1, 2) is the smaller */
    double flat[2 * 9] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 4, 3, 2, 2, 2, 2, 2, 2, 2};
    int bits[2];
    double m = pca_allocate(flat, 2, 3, bits, scratch);
    check(m == 5 && bits[0] == 1 && bits[1] == 2, "pca_allocate_by_hand", "%g: %d %d", m, bits[0], bits[1]);
}

/* ---- a whole fit ---- */

enum { FIT_D = 8, FIT_N = 1100 };   /* the codec's fit takes 4 x 256 rows or more */

static void make_rows(float *rows, uint64_t seed) {
    for (int r = 0; r < FIT_N; r++) {
        float common = rnd(&seed);
        for (int c = 0; c < FIT_D; c++)
            rows[r * FIT_D + c] = 0.3f * (float)c + common * (float)(c + 1) + 0.4f * rnd(&seed) * (c % 3 ? 1 : 4);
    }
}

static void test_fit(const char *tag, const float *w) {
    static float rows[FIT_N * FIT_D], block[FIT_D + FIT_D * FIT_D + FIT_D + FIT_D * 256];
    float *mean = block, *basis = mean + FIT_D, *bits = basis + FIT_D * FIT_D, *tables = bits + FIT_D;
    static double cost[FIT_D * 9];
    make_rows(rows, 3);
    float sqrt_w[FIT_D];
    for (int c = 0; c < FIT_D; c++) sqrt_w[c] = w ? sqrtf(w[c]) : 1;
    int budget = 2 * FIT_D;
    void *scratch = malloc(pca_fit_scratch_bytes(FIT_N, FIT_D, budget));
    double total = pca_fit_head(rows, FIT_N, FIT_D, w ? sqrt_w : NULL, budget, block, cost, scratch);
    free(scratch);
    char name[96];
    PcaHead h = {.d = FIT_D, .mean = mean, .basis = basis, .bits = bits, .tables = tables};

    /* the components of the calibration rows, transposed */
    static float y[FIT_D][FIT_N];
    for (int r = 0; r < FIT_N; r++) {
        float yr[FIT_D];
        pca_project(&h, w ? sqrt_w : NULL, rows + r * FIT_D, yr);
        for (int i = 0; i < FIT_D; i++) y[i][r] = yr[i];
    }
    double worst_energy = 0, sum_kept = 0, sum_other = 0;
    int used = 0, ascending = 1;
    for (int i = 0; i < FIT_D; i++) {
        double e = 0;
        for (int r = 0; r < FIT_N; r++) e += (double)y[i][r] * y[i][r];
        worst_energy = max_or_inf(worst_energy, fabs(e - cost[i * 9]) / (e + 1e-30));
        int b = (int)bits[i];
        used += b;
        if (b == 0) continue;
        int k = 1 << b;
        const float *t = tables + i * 256;
        for (int j = 1; j < k; j++) ascending &= t[j - 1] <= t[j];
        for (int j = k; j < 256; j++) ascending &= t[j] == 0;
        sum_kept += lloyd_objective(y[i], FIT_N, 1, t, k);
        /* an independent full Lloyd: started at spread points, not at ranks */
        float other[256];
        static uint16_t codes[FIT_N];
        static char lloyd_scratch[1 << 16];
        lloyd_init_spread(y[i], FIT_N, 1, k, other);
        lloyd_fit(y[i], FIT_N, 1, other, k, LLOYD_MAX_ITERATIONS, codes, lloyd_scratch);
        sum_other += lloyd_objective(y[i], FIT_N, 1, other, k);
    }
    snprintf(name, sizeof name, "pca_fit%s_energy_is_D0", tag);
    check(worst_energy < 1e-5, name, "relative error %g", worst_energy);
    snprintf(name, sizeof name, "pca_fit%s_tables_ascending_zero_padded", tag);
    check(ascending, name, "a table out of order or unpadded");
    snprintf(name, sizeof name, "pca_fit%s_budget", tag);
    check(used <= budget && used >= budget - 1, name, "%d bits of %d", used, budget);
    snprintf(name, sizeof name, "pca_fit%s_tables_vs_full_lloyd", tag);
    check(sum_kept <= 1.01 * sum_other, name, "kept %g, other start %g", sum_kept, sum_other);

    /* decode(encode(x)) leaves exactly the allocated distortion, in the weighted domain */
    double err = 0;
    for (int r = 0; r < FIT_N; r++) {
        uint8_t codes[FIT_D];
        float back[FIT_D];
        pca_encode_row(&h, w ? sqrt_w : NULL, rows + r * FIT_D, codes);
        pca_decode_row(&h, w ? sqrt_w : NULL, codes, back);
        for (int c = 0; c < FIT_D; c++) {
            double e = (double)back[c] - rows[r * FIT_D + c];
            err += (w ? w[c] : 1) * e * e;
        }
    }
    snprintf(name, sizeof name, "pca_fit%s_roundtrip_error_is_allocated", tag);
    check(fabs(err - total) <= 1e-3 * total, name, "rows lose %g, the allocation says %g", err, total);
}

/* ---- +aw ---- */

static void test_aw(void) {
    /* 4 query heads, 2 KV heads, d = 4; stats_q[g][c][1] = 1 + g + c*c (mean and max around it) */
    float stats_q[4 * 4 * 3], w[8];
    for (int g = 0; g < 4; g++)
        for (int c = 0; c < 4; c++) {
            stats_q[(g * 4 + c) * 3 + 0] = 99;
            stats_q[(g * 4 + c) * 3 + 1] = (float)(1 + g + c * c);
            stats_q[(g * 4 + c) * 3 + 2] = -99;
        }
    /* head 0: sums over g = 0, 1: 3, 5, 11, 21 (mean 10); head 1 (g = 2, 3): 7, 9, 15, 25 (mean 14) */
    float want[8] = {0.3f, 0.5f, 1.1f, 2.1f, 7 / 14.0f, 9 / 14.0f, 15 / 14.0f, 25 / 14.0f};
    aw_key_weights(stats_q, 4, 2, 4, 0, w);
    check(max_abs_diff(w, want, 8) < 1e-6, "aw_keys_by_hand", "%g %g %g %g", w[0], w[1], w[2], w[3]);
    /* pre-RoPE: pairs (0, 2), (1, 3): head 0: 7, 13, 7, 13 / 10; head 1: 11, 17, 11, 17 / 14 */
    float want_pre[8] = {0.7f, 1.3f, 0.7f, 1.3f, 11 / 14.0f, 17 / 14.0f, 11 / 14.0f, 17 / 14.0f};
    aw_key_weights(stats_q, 4, 2, 4, 1, w);
    check(max_abs_diff(w, want_pre, 8) < 1e-6, "aw_keys_prerope_pair_average", "%g %g %g %g", w[0], w[1], w[2],
          w[3]);
    /* values: o_proj of dim 2 rows x (4 heads * 2 channels); head 1's query heads all zero */
    float wo[2 * 8] = {1, 2, 0, 1, 0, 0, 0, 0,   /* row 0: g0 c0 c1, g1 c0 c1, g2.., g3.. */
                       1, 0, 3, 1, 0, 0, 0, 0};
    float wv[4];
    /* head 0, channel 0: 1 + 0 + 1 + 9 = 11; channel 1: 4 + 1 + 0 + 1 = 6; mean 8.5 */
    aw_value_weights(wo, 2, 4, 2, 2, wv);
    float want_v[4] = {11 / 8.5f, 6 / 8.5f, 1, 1};
    check(max_abs_diff(wv, want_v, 4) < 1e-6, "aw_values_by_hand_zero_head_ones", "%g %g %g %g", wv[0], wv[1], wv[2],
          wv[3]);
}

/* A weighted Lloyd stated plainly (scalar, weighted assignment, plain-mean move), for the scaled fit. */
static double weighted_objective(const float *p, size_t n, int dim, const float *w, const float *c, int k) {
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        double best = INFINITY;
        for (int j = 0; j < k; j++) {
            double s = 0;
            for (int e = 0; e < dim; e++) s += w[e] * ((double)p[i * dim + e] - c[j * dim + e]) * ((double)p[i * dim + e] - c[j * dim + e]);
            if (s < best) best = s;
        }
        total += best;
    }
    return total;
}

static void plain_weighted_lloyd(const float *p, size_t n, int dim, const float *w, float *c, int k) {
    static int code[4096];
    for (int pass = 0; pass < 100; pass++) {
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            double best = INFINITY;
            int bc = 0;
            for (int j = 0; j < k; j++) {
                double s = 0;
                for (int e = 0; e < dim; e++) s += w[e] * ((double)p[i * dim + e] - c[j * dim + e]) * ((double)p[i * dim + e] - c[j * dim + e]);
                if (s < best) best = s, bc = j;
            }
            changed += pass == 0 || code[i] != bc;
            code[i] = bc;
        }
        if (!changed) break;
        for (int j = 0; j < k; j++) {
            double sum[16] = {0};
            int count = 0;
            for (size_t i = 0; i < n; i++)
                if (code[i] == j) {
                    count++;
                    for (int e = 0; e < dim; e++) sum[e] += p[i * dim + e];
                }
            for (int e = 0; e < dim && count; e++) c[j * dim + e] = (float)(sum[e] / count);
        }
    }
}

static void test_aw_nearest_ties(void) {
    /* on paper: (0, 0) is 1 from both (1, 0) and (0, 1) with weights 1: the lower index; with weights
     * (2, 1) the second entry is nearer (1 < 2) */
    float x[2] = {0, 0}, c[4] = {1, 0, 0, 1}, ones[2] = {1, 1}, w[2] = {2, 1};
    check(aw_nearest(x, 2, c, 2, ones) == 0 && aw_nearest(x, 2, c, 2, w) == 1, "aw_nearest: ties to the lower index, weights decide",
          "%d %d", aw_nearest(x, 2, c, 2, ones), aw_nearest(x, 2, c, 2, w));
}

static void test_aw_lloyd(void) {
    /* 1-D weighted means on paper: {0, 1, 10} weighing {1, 3, 1} from {0, 10}: 0 and 1 go to the first
     * entry, at (0 + 3) / 4 = 0.75 (the plain mean would be 0.5) */
    float pts[3] = {0, 1, 10}, wts[3] = {1, 3, 1}, c[2] = {0, 10};
    uint16_t codes[3];
    double scratch[4];
    LloydResult r = aw_lloyd_fit_1d(pts, wts, 3, c, 2, 100, codes, scratch);
    check(c[0] == 0.75f && c[1] == 10 && r.converged && codes[1] == 0, "aw_lloyd_1d_weighted_mean_by_hand",
          "%g %g", c[0], c[1]);
    /* the scaled fit of 4-D points reaches the weighted objective of a plainly stated weighted Lloyd */
    enum { N = 2000, DIM = 4, K = 16 };
    static float p[N * DIM], scaled[N * DIM], mine[K * DIM], plain[K * DIM];
    static uint16_t lcodes[N];
    static char lscratch[1 << 16];
    uint64_t seed = 5;
    for (int i = 0; i < N * DIM; i++) p[i] = rnd(&seed) + (i % DIM == 1 ? 2 * rnd(&seed) : 0);
    float w[DIM] = {4, 0.25f, 1, 2}, sqrt_w[DIM];
    for (int e = 0; e < DIM; e++) sqrt_w[e] = sqrtf(w[e]);
    memcpy(scaled, p, sizeof p);
    aw_scale_points(scaled, N, DIM, sqrt_w);
    lloyd_init_spread(scaled, N, DIM, K, mine);
    lloyd_fit(scaled, N, DIM, mine, K, LLOYD_MAX_ITERATIONS, lcodes, lscratch);
    aw_unscale_centroids(mine, K, DIM, sqrt_w);
    lloyd_init_spread(p, N, DIM, K, plain);
    plain_weighted_lloyd(p, N, DIM, w, plain, K);
    double o_mine = weighted_objective(p, N, DIM, w, mine, K), o_plain = weighted_objective(p, N, DIM, w, plain, K);
    double o_unweighted;
    {
        float u[K * DIM];
        lloyd_init_spread(p, N, DIM, K, u);
        lloyd_fit(p, N, DIM, u, K, LLOYD_MAX_ITERATIONS, lcodes, lscratch);
        o_unweighted = weighted_objective(p, N, DIM, w, u, K);
    }
    check(fabs(o_mine - o_plain) <= 0.01 * o_plain && o_mine < o_unweighted, "aw_scaled_fit_vs_weighted_lloyd",
          "scaled %g, weighted Lloyd %g, unweighted fit %g", o_mine, o_plain, o_unweighted);
}

/* ---- the codecs: pcaB through its KvFit and its packed rows; vq's +aw distance ---- */

static void test_codec_pca_names(void) {
    KvBase b;
    char why[200];
    int ok = kv_base_parse("pca2", &b, why, sizeof why) == 0 && !strcmp(b.name, "pca2") && b.codec->unit_bytes(&b, 64) == 16;
    ok &= kv_base_parse("pca1.25", &b, why, sizeof why) == 0 && !strcmp(b.name, "pca1.25") && b.codec->unit_bytes(&b, 64) == 10;
    ok &= kv_base_parse("pca0.50", &b, why, sizeof why) == 0 && !strcmp(b.name, "pca0.5") && b.codec->unit_bytes(&b, 64) == 4;
    check(ok, "codec pca: names, canonical spelling and bytes a row (pca2 16, pca1.25 10, pca0.5 4 at d 64)", "%s", b.name);
    int refused = kv_base_parse("pca9", &b, why, sizeof why) == -1 && kv_base_parse("pca0", &b, why, sizeof why) == -1 &&
                  kv_base_parse("pca1.12345", &b, why, sizeof why) == -1;
    refused &= kv_base_parse("pca0.3", &b, why, sizeof why) == 0 && !kv_base_check(&b, 64, why, sizeof why) &&
               strstr(why, "19.2") != NULL && kv_base_check(&b, 80, why, sizeof why);
    check(refused, "codec pca: pca9, pca0, five decimals refused; pca0.3 refused at d 64 (19.2 bits), taken at d 80", "%s",
          why);
}

static void test_codec_pca_fit(const char *tag, const float *w) {
    enum { D = FIT_D, N = FIT_N };
    static float rows[N * D];
    make_rows(rows, 9);
    KvBase b;
    char why[200], name[160];
    kv_base_parse("pca1.5", &b, why, sizeof why);   /* 12 bits over 8 components */
    KvFitLayout layout;
    b.codec->fit->layout(&b, D, &layout);
    size_t floats = kv_fit_table_floats(&layout);
    float *table = calloc(floats, sizeof *table);
    KvFitRows fr = {.units = rows, .count = N, .n = D, .weights = w, .weight_rows = w ? 1 : 0};
    void *scratch = malloc(b.codec->fit->scratch_bytes(&b, &fr));
    KvFitShortfall sf;
    int rc = b.codec->fit->fit(&b, &fr, table, scratch, &sf);
    double objective = b.codec->fit->objective(&b, &fr, table, scratch);
    KvFitRows few = fr;
    few.count = 1023;
    KvFitShortfall short_of = {0, 0};
    snprintf(name, sizeof name, "codec pca%s: 1023 rows (fewer than 4 x 256) are refused with the count", tag);
    check(b.codec->fit->fit(&b, &few, table, scratch, &short_of) == -1 && short_of.points == 1023 &&
              short_of.entries == 256, name, "%zu points, %d entries", short_of.points, short_of.entries);
    snprintf(name, sizeof name, "codec pca%s: the fit declares mean, basis, bits, tables and passes its own check", tag);
    check(rc == 0 && layout.per_head && layout.n_tensors == 4 && floats == pca_head_floats(D) &&
              b.codec->fit->check(&b, D, table, why, sizeof why),
          name, "rc %d, %zu floats: %s", rc, floats, why);
    /* every row through the codec's packed bytes and back: the (weighted) error is the objective */
    b.table = table;
    b.weights = w;
    double err = 0;
    for (int r = 0; r < N; r++) {
        unsigned char unit[64];
        float back[D];
        b.codec->encode(&b, rows + r * D, D, unit);
        b.codec->decode(&b, unit, D, 0, 1, back);
        for (int c = 0; c < D; c++) {
            double e = (double)back[c] - rows[r * D + c];
            err += (w ? w[c] : 1) * e * e;
        }
    }
    snprintf(name, sizeof name, "codec pca%s: packed rows decode with the objective's error (mean added back)", tag);
    check(fabs(err - objective) <= 1e-3 * objective, name, "rows lose %g, objective %g", err, objective);
    /* the code streams (SCHEMES.md §9): a component's code at its own width b_i, in component
     * order; codes() of an encoded row gives the codes that decode reads, and put_codes() is its
     * inverse, touching nothing else (the unit's padding bits stay) */
    int codes_ok = 1, fills = 0;
    PcaHead hv;
    pca_head_view(table, D, &hv);
    for (int c = 0; c < D; c++) fills += (int)hv.bits[c];
    for (int r = 0; r < 16 && codes_ok; r++) {
        unsigned char unit[64], again[64];
        unsigned short codes[D], zeros[D] = {0};
        size_t bytes = b.codec->unit_bytes(&b, D);
        b.codec->encode(&b, rows + r * D, D, unit);
        b.codec->codes(&b, unit, D, codes);
        size_t at = 0;
        for (int c = 0; c < D; c++) {   /* restated: bits [at, at + b_c) of the row */
            unsigned want = 0;
            for (int k = 0; k < (int)hv.bits[c]; k++) want |= (unsigned)(unit[(at + k) / 8] >> ((at + k) % 8) & 1u) << k;
            codes_ok &= codes[c] == want;
            at += (size_t)hv.bits[c];
        }
        memcpy(again, unit, bytes);
        b.codec->put_codes(&b, zeros, D, again);
        b.codec->put_codes(&b, codes, D, again);
        codes_ok &= !memcmp(again, unit, bytes);
    }
    snprintf(name, sizeof name, "codec pca%s: codes() reads each component at its fitted width; put_codes() is its inverse", tag);
    check(codes_ok && fills <= 8 * (int)b.codec->unit_bytes(&b, D), name, "codes differ, or %d bits in a %zu-byte row",
          fills, b.codec->unit_bytes(&b, D));
    /* a table whose bits exceed B x d is refused by the check */
    PcaHead h;
    pca_head_view(table, D, &h);
    ((float *)h.bits)[0] += 8;
    snprintf(name, sizeof name, "codec pca%s: the check refuses bits over the budget or not whole", tag);
    int over = !b.codec->fit->check(&b, D, table, why, sizeof why);
    ((float *)h.bits)[0] -= 7.5f;
    check(over && !b.codec->fit->check(&b, D, table, why, sizeof why), name, "accepted");
    free(table);
    free(scratch);
}

/* vq8-d4 with +aw: each sub-vector's code minimizes the weighted error, so no row's weighted error
 * is above the plain encoder's, and some are below. */
static void test_codec_vq_weighted(void) {
    enum { D = 64, ROWS = 200 };
    KvBase b;
    char why[160];
    kv_base_parse("vq4-d4", &b, why, sizeof why);
    static float table[16 * 16 * 4], x[ROWS * D], w[D];
    uint64_t seed = 21;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) table[i] = 2 * rnd(&seed);
    for (int i = 0; i < ROWS * D; i++) x[i] = rnd(&seed);
    for (int c = 0; c < D; c++) w[c] = c % 4 == 0 ? 8.0f : 0.125f;
    b.table = table;
    int worse = 0, better = 0;
    for (int r = 0; r < ROWS; r++) {
        unsigned char unit[64];
        float plain[D], weighted[D];
        b.weights = NULL;
        b.codec->encode(&b, x + r * D, D, unit);
        b.codec->decode(&b, unit, D, 0, 1, plain);
        b.weights = w;
        b.codec->encode(&b, x + r * D, D, unit);
        b.codec->decode(&b, unit, D, 0, 1, weighted);
        double ep = 0, ew = 0;
        for (int c = 0; c < D; c++) {
            ep += w[c] * ((double)plain[c] - x[r * D + c]) * ((double)plain[c] - x[r * D + c]);
            ew += w[c] * ((double)weighted[c] - x[r * D + c]) * ((double)weighted[c] - x[r * D + c]);
        }
        worse += ew > ep * (1 + 1e-6);
        better += ew < ep * (1 - 1e-6);
    }
    check(worse == 0 && better > ROWS / 2, "codec vq +aw: the weighted distance picks codes of least weighted error",
          "%d rows worse, %d better of %d", worse, better, ROWS);
}

/* vq8-d4 +aw's codes restated from §9: z = x sqrt(d) / r (r = fp16 of the norm), each sub-vector's
 * entry minimizing sum_e w_e (t_e t_e) in float32, ties to the lower index. */
static void test_codec_vq_weighted_codes(void) {
    enum { D = 64, ROWS = 100, K = 256 };
    KvBase b;
    char why[160];
    kv_base_parse("vq8-d4", &b, why, sizeof why);
    static float table[16 * K * 4], x[ROWS * D], w[D];
    uint64_t seed = 23;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) table[i] = 2 * rnd(&seed);
    for (int i = 0; i < ROWS * D; i++) x[i] = rnd(&seed);
    for (int c = 0; c < D; c++) w[c] = 0.1f + 3 * fabsf(rnd(&seed));
    b.table = table;
    b.weights = w;
    int differ = 0;
    for (int r = 0; r < ROWS; r++) {
        unsigned char unit[32];
        b.codec->encode(&b, x + r * D, D, unit);
        double sum = 0;
        for (int c = 0; c < D; c++) sum += (double)x[r * D + c] * x[r * D + c];
        float rn = f16_to_f32(f32_to_f16((float)sqrt(sum))), sqrt_d = sqrtf((float)D);
        for (int j = 0; j < D / 4; j++) {
            float z[4];
            for (int e = 0; e < 4; e++) z[e] = x[r * D + j * 4 + e] * sqrt_d / rn;
            int best = 0;
            float best_d = INFINITY;
            for (int k = 0; k < K; k++) {
                const float *c = table + ((size_t)j * K + k) * 4;
                float t = z[0] - c[0], dist = w[j * 4] * (t * t);
                for (int e = 1; e < 4; e++) {
                    float u = z[e] - c[e];
                    dist = dist + w[j * 4 + e] * (u * u);
                }
                if (dist < best_d) best_d = dist, best = k;
            }
            differ += unit[j] != best;
        }
    }
    check(differ == 0, "codec vq +aw: codes are §9's weighted nearest entries", "%d of %d codes differ", differ,
          ROWS * D / 4);
}

/* nuq3-g64 +aw's fit: each entry at the weighted mean of its points, so its weighted objective is
 * below the plain fit's on the same rows (channels of unequal weight and spread). */
static void test_codec_nuq_weighted_fit(void) {
    enum { D = 64, ROWS = 300 };
    KvBase b;
    char why[160];
    kv_base_parse("nuq3-g64", &b, why, sizeof why);
    static float x[ROWS * D], w[D];
    uint64_t seed = 29;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < D; c++) x[r * D + c] = (c < 8 ? 3.0f : 0.5f) * rnd(&seed) + (c % 2 ? 0.4f : -0.2f) * rnd(&seed);
    for (int c = 0; c < D; c++) w[c] = c < 8 ? 0.05f : (c % 3 == 0 ? 4.0f : 1.0f);
    float plain[8], weighted[8];
    KvFitRows fr = {.units = x, .count = ROWS, .n = D};
    void *scratch = malloc(b.codec->fit->scratch_bytes(&b, &fr));
    KvFitShortfall sf;
    int rc = b.codec->fit->fit(&b, &fr, plain, scratch, &sf);
    fr.weights = w;
    fr.weight_rows = 1;
    rc |= b.codec->fit->fit(&b, &fr, weighted, scratch, &sf);
    double o_plain = b.codec->fit->objective(&b, &fr, plain, scratch), o_weighted = b.codec->fit->objective(&b, &fr, weighted, scratch);
    free(scratch);
    check(rc == 0 && o_weighted < 0.99 * o_plain, "codec nuq +aw: the weighted fit lowers the weighted objective",
          "rc %d: weighted fit %g, plain fit %g", rc, o_weighted, o_plain);
}

/* vq4-d4 +aw's fit (Lloyd on sqrt(w)-scaled points, centroids scaled back): its weighted
 * objective is below the plain fit's on the same rows. */
static void test_codec_vq_weighted_fit(void) {
    enum { D = 16, ROWS = 400 };
    KvBase b;
    char why[160];
    kv_base_parse("vq4-d4", &b, why, sizeof why);
    static float x[ROWS * D], w[D], plain[4 * 16 * 4], weighted[4 * 16 * 4];
    uint64_t seed = 31;
    for (int i = 0; i < ROWS * D; i++) x[i] = rnd(&seed) * (i % 4 == 1 ? 3.0f : 1.0f);
    for (int c = 0; c < D; c++) w[c] = c % 4 == 1 ? 0.05f : c % 4 == 2 ? 5.0f : 1.0f;
    KvFitRows fr = {.units = x, .count = ROWS, .n = D};
    void *scratch = malloc(b.codec->fit->scratch_bytes(&b, &fr));
    KvFitShortfall sf;
    int rc = b.codec->fit->fit(&b, &fr, plain, scratch, &sf);
    fr.weights = w;
    fr.weight_rows = 1;
    rc |= b.codec->fit->fit(&b, &fr, weighted, scratch, &sf);
    double o_plain = b.codec->fit->objective(&b, &fr, plain, scratch), o_weighted = b.codec->fit->objective(&b, &fr, weighted, scratch);
    free(scratch);
    check(rc == 0 && o_weighted < 0.95 * o_plain, "codec vq +aw: the weighted fit lowers the weighted objective",
          "rc %d: weighted fit %g, plain fit %g", rc, o_weighted, o_plain);
}

/* rvq8x2-d8 +aw's codes restated from §9: z as vq's; per sub-vector, stage by stage, the entry of
 * least weighted distance to what the stages before it left (float32, ties to the lower index). */
static void test_codec_rvq_weighted_codes(void) {
    enum { D = 64, SUB = 8, S = 2, K = 256, ROWS = 40 };
    KvBase b;
    char why[160];
    if (!check(kv_base_parse("rvq8x2-d8", &b, why, sizeof why) == 0, "codec rvq +aw: rvq8x2-d8 parses", "%s", why)) return;
    static float table[(D / SUB) * S * K * SUB], x[ROWS * D], w[D];
    uint64_t seed = 37;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) table[i] = rnd(&seed);
    for (int i = 0; i < ROWS * D; i++) x[i] = rnd(&seed);
    for (int c = 0; c < D; c++) w[c] = 0.1f + 3 * fabsf(rnd(&seed));
    b.table = table;
    b.weights = w;
    int differ = 0;
    for (int r = 0; r < ROWS; r++) {
        unsigned char unit[64];
        b.codec->encode(&b, x + r * D, D, unit);
        double sum = 0;
        for (int c = 0; c < D; c++) sum += (double)x[r * D + c] * x[r * D + c];
        float rn = f16_to_f32(f32_to_f16((float)sqrt(sum))), sqrt_d = sqrtf((float)D);
        for (int j = 0; j < D / SUB; j++) {
            float e[SUB];
            for (int i = 0; i < SUB; i++) e[i] = x[r * D + j * SUB + i] * sqrt_d / rn;
            for (int s = 0; s < S; s++) {
                const float *book = table + ((size_t)j * S + s) * K * SUB;
                int best = 0;
                float best_d = INFINITY;
                for (int k = 0; k < K; k++) {
                    float t = e[0] - book[k * SUB], dist = w[j * SUB] * (t * t);
                    for (int i = 1; i < SUB; i++) {
                        float u = e[i] - book[k * SUB + i];
                        dist = dist + w[j * SUB + i] * (u * u);
                    }
                    if (dist < best_d) best_d = dist, best = k;
                }
                differ += unit[j * S + s] != best;
                for (int i = 0; i < SUB; i++) e[i] -= book[best * SUB + i];
            }
        }
    }
    check(differ == 0, "codec rvq +aw: every stage's code is §9's weighted nearest entry to the residual",
          "%d of %d codes differ", differ, ROWS * D / SUB * S);
}

int main(void) {
    test_eigen_by_hand();
    test_eigen_random();
    test_allocate_brute();
    test_fit("", NULL);
    float w[FIT_D] = {0.5f, 2, 1, 0.25f, 3, 1, 0.125f, 0.125f};
    test_fit("_aw", w);
    test_aw();
    test_aw_lloyd();
    test_aw_nearest_ties();
    test_codec_pca_names();
    test_codec_pca_fit("", NULL);
    test_codec_pca_fit(" +aw", w);
    test_codec_vq_weighted();
    test_codec_vq_weighted_codes();
    test_codec_nuq_weighted_fit();
    test_codec_vq_weighted_fit();
    test_codec_rvq_weighted_codes();
    return test_failures ? 1 : 0;
}
