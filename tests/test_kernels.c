/* tests/test_kernels.c: every compiled matmul path against the scalar definition, on odd
 * sizes, T = 1 (decode), small T (GEMV) and T > 1 (GEMM with edge tiles), F32/F16/BF16
 * weights at unaligned addresses (safetensors does not align tensors); plus the forward
 * pass with bf16 activations against the f32 reference logits, with its looser bound.
 *
 * Error measure: |out - scalar| / sum_k |x_k w_k| (the scale the rounding errors of a dot
 * product are proportional to). Exact paths only reassociate f32 sums: <= 1e-5. The bf16
 * path rounds each activation to 8 significant bits (relative error <= 2^-9): <= 2^-8. */
#include "tests/test.h"
#include "model/model.h"
#include "model/kernels/kernels.h"
#include "model/kernels/vector.h"
#include "model/kernels/attention_kernels.h"
#include "quant/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_TOL 1e-5
#define BF16_TOL (1.0 / 256)

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int)(*s >> 40) - (1 << 23)) / (float)(1 << 23);
}

/* A rows x cols matrix of dtype at an address 2 bytes past 64-byte alignment (+ its f32 values). */
typedef struct {
    Matrix m;
    unsigned char *block;
    float *values;
} TestMatrix;

static void make_matrix(TestMatrix *t, DType dt, int rows, int cols, uint64_t seed) {
    size_t n = (size_t)rows * cols, es = dtype_size(dt);
    t->block = malloc(n * es + 64);
    t->values = malloc(n * sizeof(float));
    unsigned char *data = t->block + (dt == DT_F32 ? 4 : 2);
    for (size_t i = 0; i < n; i++) {
        float v = rnd(&seed);
        uint16_t h;
        if (dt == DT_F32) memcpy(data + i * 4, &v, 4);
        else {
            h = dt == DT_F16 ? f32_to_f16(v) : f32_to_bf16(v);
            memcpy(data + i * 2, &h, 2);
            v = dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        t->values[i] = v;
    }
    t->m.data = data;
    t->m.dtype = dt;
    t->m.rows = rows;
    t->m.cols = cols;
}

static void free_matrix(TestMatrix *t) {
    free(t->block);
    free(t->values);
}

/* Worst |out - ref| / sum|x w| over all outputs. */
static double worst_error(const float *out, const float *ref, const float *x, const TestMatrix *w, int T) {
    int N = w->m.rows, K = w->m.cols;
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < N; r++) {
            double scale = 0;
            for (int k = 0; k < K; k++) scale += fabs((double)x[(size_t)t * K + k] * w->values[(size_t)r * K + k]);
            worst = max_or_inf(worst, fabs((double)out[(size_t)t * N + r] - ref[(size_t)t * N + r]) / (scale + 1e-30));
        }
    return worst;
}

static void check_path(KernelPath p, DType dt) {
    static const int sizes[][3] = {   /* N, K, T */
        {1, 1, 1}, {5, 3, 1}, {37, 19, 1}, {37, 19, 2}, {64, 64, 3}, {33, 130, 4}, {67, 301, 17},
        {21, 45, 2},     /* GEMV: 45 = 32 + 13, so the 8- and 4-wide remainder loops run */
        {100, 64, 48}, {129, 257, 50}, {256, 512, 64}, {40, 1000, 97},
        {70, 200, 80},   /* a last strip of 32 tokens: the two-vector kernel (50, 64: one vector) */
        {9, 2051, 49},   /* several k blocks on every path (bf16 pairs: 1025 units), odd K */
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int N = sizes[i][0], K = sizes[i][1], T = sizes[i][2];
        TestMatrix w;
        make_matrix(&w, dt, N, K, 42 + i);
        uint64_t seed = 7 + i;
        float *x = malloc((size_t)T * K * sizeof(float));
        for (size_t j = 0; j < (size_t)T * K; j++) x[j] = rnd(&seed) * 3.0f;
        float *ref = malloc((size_t)T * N * sizeof(float)), *out = malloc((size_t)T * N * sizeof(float));
        void *scratch = aligned_alloc(64, (matmul_scratch_bytes(T, K) + 63) / 64 * 64);
        for (size_t j = 0; j < (size_t)T * N; j++) out[j] = NAN;   /* every output must be written */
        matmul_with(KERNEL_SCALAR, ref, x, &w.m, T, scratch);
        matmul_with(p, out, x, &w.m, T, scratch);
        worst = max_or_inf(worst, worst_error(out, ref, x, &w, T));
        free(x); free(ref); free(out); free(scratch);
        free_matrix(&w);
    }
    double tol = p == KERNEL_AVX512_BF16 ? BF16_TOL : EXACT_TOL;
    char name[128];
    snprintf(name, sizeof name, "matmul %s on %s weights matches scalar within %.0e relative", kernel_name(p),
             dtype_name(dt), tol);
    check(worst <= tol, name, "worst relative error %.3g", worst);
    printf("     %s %s: worst |d| / sum|x w| = %.3g\n", kernel_name(p), dtype_name(dt), worst);
}

/* Paths with the shared blocked driver (gemm_drive, model/kernels/gemm_c.c): a token's outputs
 * do not depend on how many tokens share the call, bit for bit. The driver's edge_tile runs a
 * last tile of fewer than MR tokens as the full tile that ends there, and a call of fewer than
 * MR tokens through a padded copy; against a call of 120 tokens (a multiple of every MR), where
 * those tokens sit in full tiles. */
static void check_batch_invariance(KernelPath p, DType dt) {
    enum { N = 37, K = 301, T_FULL = 120 };   /* 37: a last panel of 5 rows; 301: two k blocks */
    static const int Ts[] = {4, 5, 9, 50, 119};
    TestMatrix w;
    make_matrix(&w, dt, N, K, 99);
    uint64_t seed = 5;
    float *x = malloc((size_t)T_FULL * K * sizeof(float));
    float *full = malloc((size_t)T_FULL * N * sizeof(float)), *part = malloc((size_t)T_FULL * N * sizeof(float));
    for (size_t j = 0; j < (size_t)T_FULL * K; j++) x[j] = rnd(&seed) * 3.0f;
    void *scratch = aligned_alloc(64, (matmul_scratch_bytes(T_FULL, K) + 63) / 64 * 64);
    matmul_with(p, full, x, &w.m, T_FULL, scratch);
    int differ = 0;
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        matmul_with(p, part, x, &w.m, Ts[i], scratch);
        differ += memcmp(part, full, (size_t)Ts[i] * N * sizeof(float)) != 0;
    }
    char name[160];
    snprintf(name, sizeof name, "matmul %s on %s weights: T = 4, 5, 9, 50, 119 give the first T rows of T = 120 bit for bit",
             kernel_name(p), dtype_name(dt));
    check(differ == 0, name, "%d of 5 calls differ", differ);
    free(x); free(full); free(part); free(scratch);
    free_matrix(&w);
}

/* The scalar path is the definition; check it once against double precision. */
static void check_scalar_definition(void) {
    TestMatrix w;
    make_matrix(&w, DT_BF16, 7, 333, 3);
    uint64_t seed = 5;
    float x[2 * 333], out[2 * 7];
    for (int j = 0; j < 2 * 333; j++) x[j] = rnd(&seed);
    matmul_with(KERNEL_SCALAR, out, x, &w.m, 2, NULL);
    double worst = 0;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 7; r++) {
            double ref = 0, scale = 0;
            for (int k = 0; k < 333; k++) {
                ref += (double)x[t * 333 + k] * w.values[r * 333 + k];
                scale += fabs((double)x[t * 333 + k] * w.values[r * 333 + k]);
            }
            worst = max_or_inf(worst, fabs(out[t * 7 + r] - ref) / scale);
        }
    check(worst <= 1e-5, "scalar matmul equals the double-precision dot within 1e-5 relative", "worst %.3g", worst);
    free_matrix(&w);
}

/* softmax and SwiGLU use a polynomial exp (vectorizable); compare with double libm. */
static void check_softmax_swiglu(void) {
    enum { N = 1000 };
    float x[N], gate[N], up[N];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++) {
        x[i] = rnd(&seed) * 100.0f;   /* spans e^-200 .. e^0 after the max shift */
        gate[i] = rnd(&seed) * 120.0f;
        up[i] = rnd(&seed);
    }
    static const int sizes[] = {1, 5, 16, 17, 33, N};   /* whole vectors and tails */
    double worst = 0;
    for (int k = 0; k < 6; k++) {
        int n = sizes[k];
        double max = x[0], sum = 0;
        for (int i = 1; i < n; i++) if (x[i] > max) max = x[i];
        for (int i = 0; i < n; i++) sum += exp((double)x[i] - max);
        float y[N + 1];
        memcpy(y, x, sizeof x);
        y[n] = 12345.0f;   /* past the end: must stay untouched */
        softmax(y, n);
        for (int i = 0; i < n; i++) {
            double ref = exp((double)x[i] - max) / sum;
            worst = max_or_inf(worst, fabs(y[i] - ref) - 1e-6 * ref);
        }
        if (y[n] != 12345.0f) worst = 1;
    }
    check(worst <= 1e-30, "softmax within 1e-6 relative of double exp (below 1e-30 absolute), n 1 to 1000", "excess %.3g", worst);
    /* a score of -inf weighs 0 and the rest still sum to 1; a NaN anywhere (first, in a vector,
     * in the tail) makes the whole row NaN rather than vanishing into a finite weight */
    int ok = 1;
    for (int k = 0; k < 6; k++) {
        int n = sizes[k];
        float y[N];
        memcpy(y, x, sizeof x);
        if (n > 1) {   /* a row of only -inf has no softmax */
            y[n / 2] = -INFINITY;
            softmax(y, n);
            double sum = 0;
            for (int i = 0; i < n; i++) sum += y[i];
            ok &= y[n / 2] == 0.0f && fabs(sum - 1.0) < 1e-5;
        }
        for (int at = 0; at < n; at += (n > 3 ? n / 3 : 1)) {
            memcpy(y, x, sizeof x);
            y[at] = NAN;
            softmax(y, n);
            for (int i = 0; i < n; i++) ok &= isnan(y[i]);
        }
    }
    check(ok, "softmax: -inf gives weight 0 (n 5 to 1000), a NaN anywhere gives a NaN row (n 1 to 1000)", "not so");
    float g[N];
    memcpy(g, gate, sizeof g);
    swiglu(g, up, N);
    worst = 0;
    for (int i = 0; i < N; i++) {
        double ref = gate[i] / (1.0 + exp(-(double)gate[i])) * up[i];
        worst = max_or_inf(worst, fabs(g[i] - ref) / (fabs(gate[i] * up[i]) + 1e-30));
    }
    check(worst <= 1e-6, "swiglu within 1e-6 of double silu(gate)*up, relative to |gate*up|", "worst %.3g", worst);
}

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

/* The bf16-pair attention loops: the conversions against f32_to_bf16 (bit for bit, odd counts
 * paired with 0, in place as out of place), the sums against double sums of the rounded
 * values, for four queries at once and for one. */
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

/* Units in the last place between two non-negative doubles (their bit patterns are ordered
 * like their values); 0 when both are NaN, a large number when only one is. */
static uint64_t ulp_distance(double a, double b) {
    if (a != a || b != b) return (a != a) == (b != b) ? 0 : UINT64_MAX;
    uint64_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    return ua > ub ? ua - ub : ub - ua;
}

/* exp_sum_f64 (the scoring of a row of logits): each exponential within 1 ulp of libm's
 * exp((double)x - shift), across normal, subnormal, zero and infinite results, -inf, NaN; the
 * sum within 1e-15 of libm's values added the same way (element i into lane i % 8, lanes in
 * order); the same sum without out; nothing written past n. */
static void check_exp_sum_f64(void) {
    enum { N = 32003 };
    static float x[N];
    static double out[N + 1];
    uint64_t seed = 29;
    for (int i = 0; i < N; i++) x[i] = rnd(&seed) * 800.0f;   /* e^-1100 .. e^500 after the shift */
    static const int sizes[] = {1, 7, 8, 9, 100, N};
    uint64_t worst_ulp = 0;
    double worst_sum = 0;
    int bad = 0;
    for (int k = 0; k < 6; k++) {
        int n = sizes[k];
        out[n] = 12345.0;
        double sum = exp_sum_f64(x, n, 300.0, out), lane[8] = {0}, ref_sum = 0;
        for (int i = 0; i < n; i++) {
            double ref = exp((double)x[i] - 300.0);
            worst_ulp = ulp_distance(out[i], ref) > worst_ulp ? ulp_distance(out[i], ref) : worst_ulp;
            lane[i % 8] += ref;
        }
        for (int j = 0; j < 8; j++) ref_sum += lane[j];
        worst_sum = max_or_inf(worst_sum, fabs(sum - ref_sum) / (ref_sum > 0 ? ref_sum : 1.0));   /* n 1: e^-1000 */
        bad += out[n] != 12345.0;
        bad += exp_sum_f64(x, n, 300.0, NULL) != sum;
    }
    /* -inf, NaN, +inf, results from overflow down to the least subnormal and below */
    static const float special[] = {-INFINITY, NAN, INFINITY, 0.0f, -708.0f, -720.5f, -744.0f, -745.2f, -746.0f,
                                    709.7f, 710.0f, -1e30f, 1e30f, -0.0f, 1e-30f, -103.97f, 88.72f};
    enum { S = sizeof special / sizeof special[0] };
    double got[S];
    exp_sum_f64(special, S, 0.0, got);
    for (int i = 0; i < S; i++)
        worst_ulp = ulp_distance(got[i], exp((double)special[i])) > worst_ulp ? ulp_distance(got[i], exp((double)special[i]))
                                                                             : worst_ulp;
    check(worst_ulp <= 1, "exp_sum_f64: each exp within 1 ulp of libm (normal, subnormal, 0, inf, NaN)", "%llu ulp",
          (unsigned long long)worst_ulp);
    check(worst_sum <= 1e-15, "exp_sum_f64: the sum within 1e-15 of libm's in the same order", "%.3g", worst_sum);
    check(bad == 0, "exp_sum_f64: the same sum without out, nothing written past n", "%d wrong", bad);
}

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

static const char *precision_name(MatmulPrecision p) { return p == MATMUL_EXACT ? "exact" : "bf16"; }

/* matmul_many against one matmul per matrix (bit-identical: the same row kernels), for
 * decode-sized T (GEMV) and GEMM-sized T (activations packed once: one strip, and several),
 * with K odd too (the bf16 path's last column outside the pairs). */
static void check_matmul_many(DType dt, MatmulPrecision precision, int K) {
    enum { NQ = 70, NK = 17, NV = 33 };
    static const int Ts[] = {1, 3, 5, 100};
    TestMatrix w[3];
    make_matrix(&w[0], dt, NQ, K, 1);
    make_matrix(&w[1], dt, NK, K, 2);
    make_matrix(&w[2], dt, NV, K, 3);
    for (int i = 0; i < 4; i++) {
        int T = Ts[i], bad = 0;
        uint64_t seed = 5 + (uint64_t)T;
        float *x = malloc((size_t)T * K * sizeof(float)), *got[3], *ref[3];
        for (int j = 0; j < T * K; j++) x[j] = rnd(&seed);
        void *scratch = aligned_alloc(64, (matmul_scratch_bytes(T, K) + 63) / 64 * 64);
        for (int m = 0; m < 3; m++) {
            got[m] = malloc((size_t)T * w[m].m.rows * sizeof(float));
            ref[m] = malloc((size_t)T * w[m].m.rows * sizeof(float));
            matmul(ref[m], x, &w[m].m, T, precision, scratch);
            for (int j = 0; j < T * w[m].m.rows; j++) got[m][j] = NAN;
        }
        matmul_many(3, got, (const Matrix *const[]){&w[0].m, &w[1].m, &w[2].m}, x, T, precision, scratch);
        for (int m = 0; m < 3; m++)
            for (int j = 0; j < T * w[m].m.rows; j++) bad += !(got[m][j] == ref[m][j]);
        char name[128];
        snprintf(name, sizeof name, "matmul_many equals one matmul per matrix (%s weights, %s, K %d, T %d)",
                 dtype_name(dt), precision_name(precision), K, T);
        check(bad == 0, name, "%d differ", bad);
        for (int m = 0; m < 3; m++) { free(got[m]); free(ref[m]); }
        free(x); free(scratch);
    }
    for (int m = 0; m < 3; m++) free_matrix(&w[m]);
}

/* mlp_swiglu_add against its definition, matmul_many(gate, up) + swiglu + matmul(down) added
 * to the residual, bit for bit: GEMV-sized T, one strip, a last strip of one and of two
 * vectors, several strips; hidden 70 (a last group of 6 units) and 33 (odd: not fused, the
 * definition itself); tmp the input itself, as the forward pass calls it. */
static void check_mlp_swiglu_add(DType dt, MatmulPrecision precision, int hidden) {
    enum { DIM = 96 };
    static const int Ts[] = {3, 5, 48, 64, 80, 100};
    TestMatrix gate, up, down;
    make_matrix(&gate, dt, hidden, DIM, 11);
    make_matrix(&up, dt, hidden, DIM, 12);
    make_matrix(&down, dt, DIM, hidden, 13);
    for (int i = 0; i < 6; i++) {
        int T = Ts[i], bad = 0;
        uint64_t seed = 9 + (uint64_t)T;
        size_t n = (size_t)T * DIM;
        float *x = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
        float *hb = malloc((size_t)T * hidden * sizeof(float)), *hb2 = malloc((size_t)T * hidden * sizeof(float));
        for (size_t j = 0; j < n; j++) x[j] = rnd(&seed) * 2.0f;
        for (size_t j = 0; j < n; j++) res[j] = rnd(&seed);
        void *scratch = aligned_alloc(64, (matmul_scratch_bytes(T, DIM + hidden) + 63) / 64 * 64);
        matmul_many(2, (float *const[]){hb, hb2}, (const Matrix *const[]){&gate.m, &up.m}, x, T, precision, scratch);
        swiglu(hb, hb2, (size_t)T * hidden);
        matmul(ref, hb, &down.m, T, precision, scratch);
        for (size_t j = 0; j < n; j++) ref[j] = res[j] + ref[j];
        memset(hb, 0xff, (size_t)T * hidden * sizeof(float));   /* NaN: the fused path must not need them */
        memset(hb2, 0xff, (size_t)T * hidden * sizeof(float));
        mlp_swiglu_add(res, &gate.m, &up.m, &down.m, x, T, precision, hb, hb2, x, scratch);
        for (size_t j = 0; j < n; j++) bad += !(res[j] == ref[j]);
        char name[160];
        snprintf(name, sizeof name, "mlp_swiglu_add equals matmul_many + swiglu + matmul, added (%s weights, %s, hidden %d, T %d)",
                 dtype_name(dt), precision_name(precision), hidden, T);
        check(bad == 0, name, "%d differ", bad);
        free(x); free(res); free(ref); free(hb); free(hb2); free(scratch);
    }
    free_matrix(&gate); free_matrix(&up); free_matrix(&down);
}

/* matmul_add against matmul then +=, bit for bit: GEMV and GEMM sizes, K even and odd (the
 * bf16 path's odd column: not fused). */
static void check_matmul_add(DType dt, MatmulPrecision precision, int K) {
    enum { N = 70 };
    static const int Ts[] = {3, 50, 100};
    TestMatrix w;
    make_matrix(&w, dt, N, K, 21);
    for (int i = 0; i < 3; i++) {
        int T = Ts[i], bad = 0;
        uint64_t seed = 3 + (uint64_t)T;
        float *x = malloc((size_t)T * K * sizeof(float)), *out = malloc((size_t)T * N * sizeof(float));
        float *ref = malloc((size_t)T * N * sizeof(float)), *tmp = malloc((size_t)T * N * sizeof(float));
        for (int j = 0; j < T * K; j++) x[j] = rnd(&seed);
        for (int j = 0; j < T * N; j++) out[j] = rnd(&seed);
        void *scratch = aligned_alloc(64, (matmul_scratch_bytes(T, K) + 63) / 64 * 64);
        matmul(ref, x, &w.m, T, precision, scratch);
        for (int j = 0; j < T * N; j++) ref[j] = out[j] + ref[j];
        matmul_add(out, x, &w.m, T, precision, tmp, scratch);
        for (int j = 0; j < T * N; j++) bad += !(out[j] == ref[j]);
        char name[128];
        snprintf(name, sizeof name, "matmul_add equals matmul, then += (%s weights, %s, K %d, T %d)", dtype_name(dt),
                 precision_name(precision), K, T);
        check(bad == 0, name, "%d differ", bad);
        free(x); free(out); free(ref); free(tmp); free(scratch);
    }
    free_matrix(&w);
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

/* Logits of tokens[0..T) in one batch with the model's current precision. */
static float *forward_logits(const Model *m, const int *tokens, int T) {
    RunState s;
    KvCache kv;
    Error err;
    if (runstate_init(&s, &m->config, T, &err)) return NULL;
    if (kv_cache_init(&kv, &m->config, T, T, NULL, NULL, NULL, &err)) {
        runstate_free(&s);
        return NULL;
    }
    forward(m, &s, &kv, tokens, T, 0, 0);
    float *out = malloc((size_t)T * m->config.vocab_size * sizeof(float));
    if (out) memcpy(out, s.logits, (size_t)T * m->config.vocab_size * sizeof(float));
    kv_cache_free(&kv);
    runstate_free(&s);
    return out;
}

/* With bf16 activations the whole model drifts from the exact path (which test_forward
 * holds to the f32 reference within 1e-4). The bound: max |dlogit| <= BF16_FORWARD_TOL. */
#define BF16_FORWARD_TOL 0.05
static void check_bf16_forward(const char *dir) {
    Model m;
    Error err;
    char name[160];
    snprintf(name, sizeof name, "%s loads for the bf16-activation check", dir);
    if (!check(model_load(&m, dir, &err) == 0, name, "%s", err.msg)) return;
    int T = 40, tokens[40];
    for (int i = 0; i < T; i++) tokens[i] = (i * 37 + 1) % m.config.vocab_size;
    m.precision = MATMUL_EXACT;
    float *exact = forward_logits(&m, tokens, T);
    m.precision = MATMUL_BF16_ACT;
    float *fast = forward_logits(&m, tokens, T);
    double worst = exact && fast ? max_abs_diff(exact, fast, (size_t)T * m.config.vocab_size) : INFINITY;
    snprintf(name, sizeof name, "%s: forward with bf16 activations within %.2g of exact logits", dir, BF16_FORWARD_TOL);
    check(worst <= BF16_FORWARD_TOL, name, "max|dlogit| = %.3g", worst);
    printf("     %s: max|dlogit| bf16 activations vs exact = %.3g (path %s)\n", dir, worst,
           kernel_name(kernel_choose(MATMUL_BF16_ACT, m.weights.layers[0].wq.dtype)));
    free(exact);
    free(fast);
    model_free(&m);
}

int main(void) {
    check_scalar_definition();
    check_softmax_swiglu();
    check_attention_loops();
    check_attention_loops_x4();
    check_attention_pairs();
    check_exp_pairs();
    check_exp_sum_f64();
    for (int K = 96; K <= 97; K++) {
        check_matmul_many(DT_BF16, MATMUL_BF16_ACT, K);
        check_matmul_many(DT_BF16, MATMUL_EXACT, K);
        check_matmul_many(DT_F32, MATMUL_EXACT, K);
        check_matmul_add(DT_BF16, MATMUL_BF16_ACT, K);
        check_matmul_add(DT_BF16, MATMUL_EXACT, K);
        check_matmul_add(DT_F32, MATMUL_EXACT, K);
    }
    for (int hidden = 70; hidden >= 33; hidden -= 37) {
        check_mlp_swiglu_add(DT_BF16, MATMUL_BF16_ACT, hidden);
        check_mlp_swiglu_add(DT_BF16, MATMUL_EXACT, hidden);
        check_mlp_swiglu_add(DT_F16, MATMUL_EXACT, hidden);
    }
    check_transpose_keys64(64);
    check_transpose_keys64(128);
    check_transpose_keys64(72);
    static const DType dtypes[] = {DT_F32, DT_F16, DT_BF16};
    for (int p = KERNEL_C; p < KERNEL_COUNT; p++)
        for (int d = 0; d < 3; d++) {
            if (!kernel_available((KernelPath)p, dtypes[d])) {
                if (d == 2) printf("     (path %s not compiled in)\n", kernel_name((KernelPath)p));
                continue;
            }
            check_path((KernelPath)p, dtypes[d]);
            if (p == KERNEL_C || p == KERNEL_AVX2 || p == KERNEL_NEON) check_batch_invariance((KernelPath)p, dtypes[d]);
        }
    check_bf16_forward("data/models/mini-llama-brown");
    check_bf16_forward("data/models/random-gqa8");
    return test_exit_code();
}
