/* tests/test_kernels.c: every compiled matmul path against the scalar definition, on odd
 * sizes, T = 1 (decode), small T (GEMV) and T > 1 (GEMM with edge tiles), F32/F16/BF16
 * weights at unaligned addresses (safetensors does not align tensors); plus the forward
 * pass with bf16 activations against the f32 reference logits, with its looser bound, and
 * the vector loops beside them (softmax, SwiGLU, exp_sum_f64). Attention's own loops are in
 * tests/test_attention_kernels.c.
 *
 * Error measure: |out - scalar| / sum_k |x_k w_k| (the scale the rounding errors of a dot
 * product are proportional to). Exact paths only reassociate f32 sums: <= 1e-5. The bf16
 * path rounds each activation to 8 significant bits (relative error <= 2^-9): <= 2^-8. */
#include "tests/test.h"
#include "model/model.h"
#include "model/kernels/kernels.h"
#include "model/kernels/vector.h"
#include "quant/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_TOL 1e-5
#define BF16_TOL (1.0 / 256)

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
    double tol = p == KERNEL_AVX512_BF16 || p == KERNEL_AMX_BF16 ? BF16_TOL : EXACT_TOL;
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
        const MlpScratch buf = {.hb = hb, .hb2 = hb2, .tmp = x, .scratch = scratch};
        mlp_swiglu_add(res, &(SwigluWeights){&gate.m, &up.m, &down.m}, x, T, precision, &buf);
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


/* Logits of tokens[0..T) in one batch with the model's current precision. */
static float *forward_logits(const Model *m, const int *tokens, int T) {
    RunState s;
    KvCache kv;
    Error err;
    if (runstate_init(&s, &m->config, T, &err)) return NULL;
    if (kv_cache_init(&kv, &m->config, T, T, NULL, NULL, &err)) {
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
