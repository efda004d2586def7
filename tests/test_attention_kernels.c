/* tests/test_attention_kernels.c: attention's inner loops (model/kernels/attention_kernels.c)
 * against double sums: scores against transposed keys and weighted sums of value rows, for one
 * query and for four, in f32 (on AVX2 also bit for bit against in-order fmaf sums) and in bf16
 * pairs, and the pairs' two products on AMX tiles; bf16 attention's softmax (exp_pairs) and the
 * key-block transpose. The matmul paths
 * and the other vector loops are in tests/test_kernels.c. */
#include "tests/test.h"
#include "model/kernels/vector.h"
#include "model/kernels/attention_kernels.h"
#include "model/kernels/kernels.h"
#include "quant/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_TOL 1e-5   /* as tests/test_kernels.c: exact paths only reassociate f32 sums */

/* The AVX2 attention loops add in the plain loops' order, one fma per term (attention_kernels.c):
 * in-order fmaf sums give the same floats. */
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define ATTENTION_LOOPS_IN_ORDER 1
#else
#define ATTENTION_LOOPS_IN_ORDER 0
#endif
#if ATTENTION_LOOPS_IN_ORDER
/* How many of one query's scores acc (q against the hd x 64 keys kt) and weighted values out
 * (out0 plus w against n rows of v) differ from fmaf sums in order. */
static int fmaf_sums_differ(const float *q, const float *kt, const float *acc, const float *w, const float *v, int n,
                            int hd, const float *out0, const float *out) {
    int differ = 0;
    for (int p = 0; p < DOT_T_WIDTH; p++) {
        float sum = 0.0f;
        for (int d = 0; d < hd; d++) sum = fmaf(q[d], kt[d * DOT_T_WIDTH + p], sum);
        differ += sum != acc[p];
    }
    for (int d = 0; d < hd; d++) {
        float sum = out0[d];
        for (int p = 0; p < n; p++) sum = fmaf(w[p], v[p * hd + d], sum);
        differ += sum != out[d];
    }
    return differ;
}
#endif

/* Attention's inner loops (AVX-512 or plain C, whichever is built) against double sums. */
static void check_attention_loops(void) {
    enum { HD = 80, N = 37 };   /* HD: one 64-wide register block plus a plain-C tail */
    float q[HD], kt[HD * DOT_T_WIDTH], acc[DOT_T_WIDTH], w[N], v[N * HD], out[HD], out0[HD];
    uint64_t seed = 99;
    for (int i = 0; i < HD; i++) q[i] = rnd(&seed);
    for (int i = 0; i < HD * DOT_T_WIDTH; i++) kt[i] = rnd(&seed);
    for (int i = 0; i < N; i++) w[i] = rnd(&seed);
    for (int i = 0; i < N * HD; i++) v[i] = rnd(&seed);
    for (int i = 0; i < HD; i++) out[i] = out0[i] = rnd(&seed);
    dot_transposed64(q, kt, HD, acc);
    add_weighted_rows(out, w, v, N, HD);
    double worst = 0;
    for (int p = 0; p < DOT_T_WIDTH; p++) {
        double ref = 0, scale = 0;
        for (int d = 0; d < HD; d++) {
            ref += (double)q[d] * kt[d * DOT_T_WIDTH + p];
            scale += fabs((double)q[d] * kt[d * DOT_T_WIDTH + p]);
        }
        worst = max_or_inf(worst, fabs(acc[p] - ref) / scale);
    }
    check(worst <= EXACT_TOL, "dot_transposed64 within 1e-5 of the double sum (relative to sum|terms|)", "worst %.3g", worst);
    worst = 0;
    for (int d = 0; d < HD; d++) {
        double ref = out0[d], scale = fabs(out0[d]);
        for (int p = 0; p < N; p++) {
            ref += (double)w[p] * v[p * HD + d];
            scale += fabs((double)w[p] * v[p * HD + d]);
        }
        worst = max_or_inf(worst, fabs(out[d] - ref) / scale);
    }
    check(worst <= EXACT_TOL, "add_weighted_rows within 1e-5 of the double sum (relative to sum|terms|)", "worst %.3g", worst);
#if ATTENTION_LOOPS_IN_ORDER
    int differ = fmaf_sums_differ(q, kt, acc, w, v, N, HD, out0, out);
    check(differ == 0, "AVX2 dot_transposed64 and add_weighted_rows equal in-order fmaf sums bit for bit", "%d of %d differ",
          differ, DOT_T_WIDTH + HD);
#endif
}

/* The four-query versions: each query's result against the double sum, as above. */
static void check_attention_loops_x4(void) {
    enum { HD = 80, N = 37 };
    static float q[4][HD], kt[HD * DOT_T_WIDTH], acc[4][DOT_T_WIDTH], w[4][N], v[N * HD], out[4][HD], out0[4][HD];
    uint64_t seed = 7;
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < HD; i++) q[j][i] = rnd(&seed);
        for (int i = 0; i < N; i++) w[j][i] = rnd(&seed);
        for (int i = 0; i < HD; i++) out[j][i] = out0[j][i] = rnd(&seed);
    }
    for (int i = 0; i < HD * DOT_T_WIDTH; i++) kt[i] = rnd(&seed);
    for (int i = 0; i < N * HD; i++) v[i] = rnd(&seed);
    dot_transposed64_x4((const float *const[]){q[0], q[1], q[2], q[3]}, kt, HD,
                        (float *const[]){acc[0], acc[1], acc[2], acc[3]});
    add_weighted_rows_x4((float *const[]){out[0], out[1], out[2], out[3]}, (const float *const[]){w[0], w[1], w[2], w[3]},
                         v, N, HD);
    double worst_dot = 0, worst_rows = 0;
    for (int j = 0; j < 4; j++) {
        for (int p = 0; p < DOT_T_WIDTH; p++) {
            double ref = 0, scale = 0;
            for (int d = 0; d < HD; d++) {
                ref += (double)q[j][d] * kt[d * DOT_T_WIDTH + p];
                scale += fabs((double)q[j][d] * kt[d * DOT_T_WIDTH + p]);
            }
            worst_dot = max_or_inf(worst_dot, fabs(acc[j][p] - ref) / scale);
        }
        for (int d = 0; d < HD; d++) {
            double ref = out0[j][d], scale = fabs(out0[j][d]);
            for (int p = 0; p < N; p++) {
                ref += (double)w[j][p] * v[p * HD + d];
                scale += fabs((double)w[j][p] * v[p * HD + d]);
            }
            worst_rows = max_or_inf(worst_rows, fabs(out[j][d] - ref) / scale);
        }
    }
    check(worst_dot <= EXACT_TOL, "dot_transposed64_x4 within 1e-5 of the double sums (relative to sum|terms|)", "worst %.3g", worst_dot);
    check(worst_rows <= EXACT_TOL, "add_weighted_rows_x4 within 1e-5 of the double sums (relative to sum|terms|)", "worst %.3g", worst_rows);
#if ATTENTION_LOOPS_IN_ORDER
    int differ = 0;   /* passes of 24 and 16 columns */
    for (int j = 0; j < 4; j++) differ += fmaf_sums_differ(q[j], kt, acc[j], w[j], v, N, HD, out0[j], out[j]);
    check(differ == 0, "AVX2 dot_transposed64_x4 and add_weighted_rows_x4 equal in-order fmaf sums bit for bit",
          "%d of %d differ", differ, 4 * (DOT_T_WIDTH + HD));
#endif
}

/* bf16 of x as float (round to nearest even, as the pair conversions). */
static double bf16_value(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* bf16 attention's softmax (exp_pairs): each weight within bf16 rounding (2^-8 relative, plus
 * the coarse exp's 1e-5) of exp(scale (x - max)) in double, zero pairs from n to n_out, nothing
 * written past them, and 1 / sum within 1e-5 of the double sum's. max_value against a loop. */
static void check_exp_pairs(void) {
    enum { N = 1000 };
    float x[N];
    uint64_t seed = 17;
    for (int i = 0; i < N; i++) x[i] = rnd(&seed) * 400.0f;   /* scaled by 1/8: e^-100 .. e^0 */
    static const int sizes[][2] = {{1, 1}, {1, 2}, {5, 16}, {16, 16}, {17, 33}, {33, 64}, {63, 64}, {N - 3, N}};
    double worst = 0, worst_inv = 0;
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        int n = sizes[k][0], n_out = sizes[k][1];
        float y[N + 2], max = x[0];
        for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
        bad += max_value(x, n) != max;
        memcpy(y, x, (size_t)n * sizeof(float));
        for (int i = n; i < N + 2; i++) y[i] = 12345.0f;
        float inv = exp_pairs(y, n, max, 0.125f, n_out);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += exp(0.125 * ((double)x[i] - max));
        worst_inv = max_or_inf(worst_inv, fabs(inv * sum - 1.0));
        uint32_t pairs[N / 2 + 1];
        memcpy(pairs, y, (size_t)(n_out + 1) / 2 * sizeof(uint32_t));
        for (int i = 0; i < n_out; i++) {
            uint32_t half = (pairs[i / 2] >> (i % 2 ? 16 : 0)) & 0xffffu, bits = half << 16;
            float got;
            memcpy(&got, &bits, sizeof got);
            double ref = i < n ? exp(0.125 * ((double)x[i] - max)) : 0.0;
            worst = max_or_inf(worst, fabs(got - ref) - (1.0 / 256 + 1e-5) * ref);
        }
        if (n_out % 2) bad += pairs[n_out / 2] >> 16 != 0;   /* an odd n_out's last pairs with 0 */
        for (int i = (n_out + 1) / 2 > n ? (n_out + 1) / 2 : n; i < N + 2; i++) bad += y[i] != 12345.0f;
    }
    check(worst <= 1e-30, "exp_pairs: weights within bf16 rounding of exp(scale (x - max)), zero from n to n_out",
          "excess %.3g", worst);
    check(worst_inv <= 1e-5, "exp_pairs returns 1 / sum of the weights within 1e-5", "%.3g", worst_inv);
    check(bad == 0, "max_value equals a plain loop; exp_pairs writes nothing past its pairs", "%d wrong", bad);
}

/* The bf16-pair attention loops: the conversions against f32_to_bf16 (bit for bit, odd counts
 * paired with 0, in place as out of place), the sums against double sums of the rounded
 * values, for four queries at once and for one. */
static void check_attention_pairs(void) {
    enum { HD = 128, N = 37, P = DOT_T_WIDTH };
    static float q[4][HD], kt[HD * P], w[4][N + 1], v[N * HD], out[4][HD], out0[4][HD], acc[4][P];
    static uint32_t q2[4][HD / 2], kt2[HD / 2 * P], w2[4][(N + 1) / 2], v2[(N + 1) / 2 * HD];
    uint64_t seed = 11;
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < HD; i++) q[j][i] = rnd(&seed);
        for (int i = 0; i < N; i++) w[j][i] = rnd(&seed) + 1.0f;
        for (int i = 0; i < HD; i++) out0[j][i] = rnd(&seed);
    }
    for (int i = 0; i < HD * P; i++) kt[i] = rnd(&seed) * 3.0f;
    for (int i = 0; i < N * HD; i++) v[i] = rnd(&seed);
    int bad = 0;
    for (int j = 0; j < 4; j++) {
        bf16_pairs_along(q[j], HD, q2[j]);
        bf16_pairs_along(w[j], N, w2[j]);
        for (int i = 0; i < N; i++) bad += (uint16_t)(w2[j][i / 2] >> (i % 2 ? 16 : 0)) != f32_to_bf16(w[j][i]);
        bad += w2[j][N / 2] >> 16 != 0;   /* N odd: the last weight's partner is 0 */
        float copy[N + 1];
        memcpy(copy, w[j], sizeof copy);
        bf16_pairs_along(copy, N, (uint32_t *)copy);
        bad += memcmp(copy, w2[j], sizeof w2[j]) != 0;
    }
    bf16_pair_rows(kt, HD, P, kt2);
    bf16_pair_rows(v, N, HD, v2);
    for (int i = 0; i < HD * P; i++)
        bad += (uint16_t)(kt2[(i / P / 2) * P + i % P] >> (i / P % 2 ? 16 : 0)) != f32_to_bf16(kt[i]);
    for (int i = 0; i < N * HD; i++)
        bad += (uint16_t)(v2[(i / HD / 2) * HD + i % HD] >> (i / HD % 2 ? 16 : 0)) != f32_to_bf16(v[i]);
    for (int d = 0; d < HD; d++) bad += v2[N / 2 * HD + d] >> 16 != 0;
    check(bad == 0, "bf16 pair conversions round to nearest even, odd counts pair with 0, in place too", "%d wrong", bad);
    for (int n = 37; n <= P; n += P - 37) {   /* key rows straight to pairs == transpose, then pairs */
        static float rows[P * HD], t[HD * P];
        static uint32_t direct[HD / 2 * P], two_step[HD / 2 * P];
        for (int i = 0; i < n * HD; i++) rows[i] = rnd(&seed) * 5.0f;
        transpose_keys64(rows, n, HD, t);
        bf16_pair_rows(t, HD, P, two_step);
        memset(direct, 0xff, sizeof direct);
        key_pairs64(rows, n, HD, direct);
        char name[96];
        snprintf(name, sizeof name, "key_pairs64 equals transpose_keys64 + bf16_pair_rows (n %d)", n);
        check(memcmp(direct, two_step, sizeof direct) == 0, name, "differ");
    }

    double worst_dot = 0, worst_rows = 0;
    for (int nq = 4; nq >= 1; nq -= 3) {
        const uint32_t *qs[4] = {q2[0], q2[1], q2[2], q2[3]}, *ws[4] = {w2[0], w2[1], w2[2], w2[3]};
        memcpy(out, out0, sizeof out);
        dot_pairs64(nq, qs, kt2, HD / 2, (float *const[]){acc[0], acc[1], acc[2], acc[3]});
        add_weighted_pairs(nq, (float *const[]){out[0], out[1], out[2], out[3]}, ws, v2, (N + 1) / 2, HD);
        for (int j = 0; j < nq; j++) {
            for (int p = 0; p < P; p++) {
                double ref = 0, scale = 0;
                for (int d = 0; d < HD; d++) {
                    double t = bf16_value(q[j][d]) * bf16_value(kt[d * P + p]);
                    ref += t;
                    scale += fabs(t);
                }
                worst_dot = max_or_inf(worst_dot, fabs(acc[j][p] - ref) / scale);
            }
            for (int d = 0; d < HD; d++) {
                double ref = out0[j][d], scale = fabs(out0[j][d]);
                for (int p = 0; p < N; p++) {
                    double t = bf16_value(w[j][p]) * bf16_value(v[p * HD + d]);
                    ref += t;
                    scale += fabs(t);
                }
                worst_rows = max_or_inf(worst_rows, fabs(out[j][d] - ref) / scale);
            }
        }
    }
    check(worst_dot <= EXACT_TOL, "dot_pairs64 within 1e-5 of the double sums of the bf16 values (relative to sum|terms|)",
          "worst %.3g", worst_dot);
    check(worst_rows <= EXACT_TOL, "add_weighted_pairs within 1e-5 of the double sums of the bf16 values (relative to sum|terms|)",
          "worst %.3g", worst_rows);
}

/* The tiles' two products (attention_amx.c; plain C without AMX) against double sums of the
 * bf16 values: 32 query rows of head_dim 96 (three steps of 32 dims) against a block of keys,
 * 40 positions (computed up to 64) and 64, into rows of another stride, nothing written past
 * them; weighted values over three blocks (every other view, as attention.c's list of keys and
 * values) for 150 positions (computed up to 160) and 192. */
static void check_attention_tiles(void) {
    enum { HD = 96, P = DOT_T_WIDTH, STRIDE = 200, BLOCKS = 3, W_STRIDE = 100 };
#if defined(KVQ_AMX)
    if (!kernel_available(KERNEL_AMX_BF16, DT_BF16)) {
        printf("     (AMX tiles not granted by the OS: tile attention not checked)\n");
        return;
    }
#endif
    static float q[32][HD], kt[HD * P], w[32][BLOCKS * P], v[BLOCKS][P * HD], scores[32 * STRIDE], out[32 * HD];
    static uint32_t q2[32][HD / 2], kt2[HD / 2 * P], w2[32][W_STRIDE], v2[BLOCKS][P / 2 * HD];
    uint64_t seed = 23;
    for (int i = 0; i < 32; i++) {
        for (int d = 0; d < HD; d++) q[i][d] = rnd(&seed);
        for (int p = 0; p < BLOCKS * P; p++) w[i][p] = rnd(&seed) + 1.0f;
        bf16_pairs_along(q[i], HD, q2[i]);
        bf16_pairs_along(w[i], BLOCKS * P, w2[i]);
    }
    for (int i = 0; i < HD * P; i++) kt[i] = rnd(&seed) * 3.0f;
    bf16_pair_rows(kt, HD, P, kt2);
    const void *views[2 * BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        for (int i = 0; i < P * HD; i++) v[b][i] = rnd(&seed);
        bf16_pair_rows(v[b], P, HD, v2[b]);
        views[2 * b] = kt2;   /* keys' slot: not read */
        views[2 * b + 1] = v2[b];
    }
    double worst_dot = 0, worst_rows = 0;
    int bad = 0;
    attention_tiles_begin();
    for (int n = 40; n <= P; n += P - 40) {
        for (int i = 0; i < 32 * STRIDE; i++) scores[i] = -1.0f;
        tile_scores32(&q2[0][0], HD, kt2, n, scores, STRIDE);
        for (int i = 0; i < 32; i++)
            for (int p = 0; p < STRIDE; p++) {
                if (p >= P) {
                    bad += scores[i * STRIDE + p] != -1.0f;
                    continue;
                }
                double ref = 0, scale = 0;
                for (int d = 0; d < HD; d++) {
                    double t = bf16_value(q[i][d]) * bf16_value(kt[d * P + p]);
                    ref += t;
                    scale += fabs(t);
                }
                worst_dot = max_or_inf(worst_dot, fabs(scores[i * STRIDE + p] - ref) / scale);
            }
    }
    for (int n = 150; n <= BLOCKS * P; n += BLOCKS * P - 150) {
        int n32 = (n + 31) / 32 * 32;
        tile_weighted_values32(&w2[0][0], W_STRIDE, views + 1, 2, n, HD, out);
        for (int i = 0; i < 32; i++)
            for (int d = 0; d < HD; d++) {
                double ref = 0, scale = 0;
                for (int p = 0; p < n32; p++) {
                    double t = bf16_value(w[i][p]) * bf16_value(v[p / P][p % P * HD + d]);
                    ref += t;
                    scale += fabs(t);
                }
                worst_rows = max_or_inf(worst_rows, fabs(out[i * HD + d] - ref) / scale);
            }
    }
    attention_tiles_end();
    check(worst_dot <= EXACT_TOL, "tile_scores32 within 1e-5 of the double sums of the bf16 values (relative to sum|terms|)",
          "worst %.3g", worst_dot);
    check(bad == 0, "tile_scores32 writes 64 columns of 32 rows, nothing past them", "%d written", bad);
    check(worst_rows <= EXACT_TOL,
          "tile_weighted_values32 within 1e-5 of the double sums of the bf16 values over 3 blocks (relative to sum|terms|)",
          "worst %.3g", worst_rows);
}

/* transpose_keys64 (attention's key block for float rows) against the plain transpose:
 * partial and full blocks, a head_dim whose last dims miss the 16-wide vector loop. The
 * quantized rows' own transposed decode is checked in tests/test_codec_int.c. */
static void check_transpose_keys64(int hd) {
    enum { N = DOT_T_WIDTH };
    float *x = malloc((size_t)N * hd * sizeof(float)), *kt = malloc((size_t)hd * N * sizeof(float));
    uint64_t seed = 7 + (uint64_t)hd;
    for (int i = 0; i < N * hd; i++) x[i] = rnd(&seed) * (1 + i % 5);
    static const int counts[] = {1, 17, 37, N};
    int bad = 0;
    for (int c = 0; c < 4; c++) {
        int n = counts[c];
        memset(kt, 0xff, (size_t)hd * N * sizeof(float));
        transpose_keys64(x, n, hd, kt);
        for (int d = 0; d < hd; d++)
            for (int p = 0; p < N; p++) bad += kt[d * N + p] != (p < n ? x[p * hd + d] : 0.0f);
    }
    char name[96];
    snprintf(name, sizeof name, "transpose_keys64 equals the plain transpose (hd %d, rows 1, 17, 37, 64)", hd);
    check(bad == 0, name, "%d differ", bad);
    free(x); free(kt);
}

int main(void) {
    check_attention_loops();
    check_attention_loops_x4();
    check_attention_pairs();
    check_exp_pairs();
    check_attention_tiles();
    check_transpose_keys64(64);
    check_transpose_keys64(128);
    check_transpose_keys64(72);
    return test_exit_code();
}
