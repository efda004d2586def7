/* tests/bench_pca_attention.c: CPU time of one layer's decode-step attention at a long context,
 * per cache scheme, on random TinyLlama weights with a calibration of them: what a pca cache's
 * reads cost against fp32's, without the matmuls that the whole step (`./run bench`) adds and
 * that a shared machine's load makes noisy. Not a test (no PASS/FAIL; `make test` does not run it):
 *   make build/rel/tests/bench_pca_attention &&
 *   OMP_NUM_THREADS=1 build/rel/tests/bench_pca_attention CALIB [ctx] [reps] [exact|bf16] [K V] [decode|prefill]
 * CALIB: `./run calibrate --random tinyllama --fit pca2+prerope+aw --fit pca2+aw ...`. Every
 * layer's cache holds ctx - 1 seeded positions; each rep writes position ctx - 1 and runs the
 * attention of its 32 query heads (forward_attention_replay, T = 1) in every layer: one decode
 * step's attention, fp32's 88 MiB read from memory as in a real step. Reports the thread's CPU
 * ms per rep (minimum and median); then a prefill of 512 tokens from position 0 in every layer
 * (writes, commits, attention: what a cache scheme changes in bench's prefill 512). exact: f32
 * attention instead of bf16 pairs (bench's default precision is bf16). K V: time that pair of
 * schemes alone (for a profiler), and decode or prefill: that phase alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/model.h"
#include "model/formats/calibration.h"
#include "model/kernels/kernels.h"
#include "tests/test.h"

#define CONFIG "data/tinyllama-1.1b-chat-v1.0/config.json"
#define PREFILL 512

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Which phases time_scheme runs. */
typedef enum { PHASES_BOTH, PHASE_DECODE, PHASE_PREFILL } Phases;

static void time_scheme(const Model *m, const Calibration *calib, const char *k_text, const char *v_text, int ctx,
                        int reps, Phases phases) {
    const Config *c = &m->config;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    KvCacheScheme scheme = {.calib = calib};
    char why[256];
    Error err;
    if (kv_layered_parse(k_text, KV_SIDE_KEYS, &scheme.k, why, sizeof why) ||
        kv_layered_parse(v_text, KV_SIDE_VALUES, &scheme.v, why, sizeof why)) {
        printf("%s / %s: %s\n", k_text, v_text, why);
        return;
    }
    KvCache kv;
    RunState s;
    if (runstate_init(&s, c, PREFILL, &err) || kv_cache_init(&kv, c, ctx, PREFILL, &scheme, m->rope_inv_freq, &err)) {
        printf("%s / %s: %s\n", k_text, v_text, err.msg);
        return;
    }
    float *k = malloc(kv_dim * sizeof(float)), *v = malloc(kv_dim * sizeof(float)), *q = malloc(c->dim * sizeof(float)),
          *out = malloc(c->dim * sizeof(float)), cs[512];
    double *ms = malloc((size_t)reps * sizeof *ms);
    uint64_t seed = 7;
    for (int p = 0; p < ctx - 1 && phases != PHASE_PREFILL; p++) {   /* the decode's context */
        for (size_t i = 0; i < kv_dim; i++) k[i] = (float)rnd(&seed), v[i] = (float)rnd(&seed);
        rope_angles(p, c->head_dim, m->rope_inv_freq, cs);
        for (int l = 0; l < c->n_layers; l++) {
            kv_cache_write(&kv, l, p, k, v, cs);
            kv_cache_commit(&kv, l, p, p + 1);
        }
    }
    kv.len = ctx - 1;
    for (int i = 0; i < c->dim; i++) q[i] = (float)rnd(&seed);
    for (int r = 0; r < reps && phases != PHASE_PREFILL; r++) {
        double t0 = cpu_ms();
        for (int l = 0; l < c->n_layers; l++) {
            AttentionReplay ar = {.layer = l, .k_pre = k, .v = v, .q = q, .T = 1, .pos = ctx - 1, .from = 0, .out = out};
            forward_attention_replay(m, &s, &kv, &ar);
        }
        ms[r] = cpu_ms() - t0;
    }
    qsort(ms, (size_t)reps, sizeof *ms, compare_doubles);
    if (phases != PHASE_PREFILL)
        printf("%-22s %-14s ctx %d: a decode step's attention (%d layers) min %.1f median %.1f ms CPU\n", k_text, v_text,
           ctx, c->n_layers, ms[0], ms[reps / 2]);
    /* a prefill of PREFILL tokens from position 0: the cache writes (encode, commit) and attention */
    float *kp = malloc(PREFILL * kv_dim * sizeof(float)), *vp = malloc(PREFILL * kv_dim * sizeof(float)),
          *qp = malloc((size_t)PREFILL * c->dim * sizeof(float)), *outp = malloc((size_t)PREFILL * c->dim * sizeof(float));
    for (size_t i = 0; i < PREFILL * kv_dim; i++) kp[i] = (float)rnd(&seed), vp[i] = (float)rnd(&seed);
    for (size_t i = 0; i < (size_t)PREFILL * c->dim; i++) qp[i] = (float)rnd(&seed);
    int prefill_reps = phases == PHASE_DECODE ? 0 : reps < 5 ? reps : 5;
    for (int r = 0; r < prefill_reps; r++) {
        double t0 = cpu_ms();
        for (int l = 0; l < c->n_layers; l++) {
            AttentionReplay ar = {.layer = l, .k_pre = kp, .v = vp, .q = qp, .T = PREFILL, .pos = 0, .from = 0, .out = outp};
            forward_attention_replay(m, &s, &kv, &ar);
        }
        ms[r] = cpu_ms() - t0;
    }
    qsort(ms, (size_t)prefill_reps, sizeof *ms, compare_doubles);
    if (prefill_reps)
        printf("%-22s %-14s prefill %d: its attention and cache writes (%d layers) min %.1f ms CPU\n", k_text, v_text,
           PREFILL, c->n_layers, ms[0]);
    free(kp), free(vp), free(qp), free(outp);
    free(k), free(v), free(q), free(out), free(ms);
    kv_cache_free(&kv);
    runstate_free(&s);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CALIB [ctx] [reps] [exact|bf16] [K V] [decode|prefill]\n", argv[0]);
        return 2;
    }
    int ctx = argc > 2 ? atoi(argv[2]) : 2048, reps = argc > 3 ? atoi(argv[3]) : 100;
    Model m;
    Error err;
    if (model_init_random(&m, CONFIG, DT_BF16, 1, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    m.precision = argc > 4 && !strcmp(argv[4], "exact") ? MATMUL_EXACT : MATMUL_BF16_ACT;
    CalibModel geometry = {m.config.n_layers, m.config.n_heads, m.config.n_kv_heads, m.config.head_dim, NULL};
    Calibration calib = {0};
    if (calibration_load(argv[1], &geometry, &calib, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    printf("precision %s\n", m.precision == MATMUL_EXACT ? "exact (f32 attention)" : "bf16");
    Phases phases = argc > 7 && !strcmp(argv[7], "decode") ? PHASE_DECODE
                    : argc > 7 && !strcmp(argv[7], "prefill") ? PHASE_PREFILL : PHASES_BOTH;
    if (argc > 6) {
        time_scheme(&m, &calib, argv[5], argv[6], ctx, reps, phases);
    } else {
        time_scheme(&m, &calib, "fp32", "fp32", ctx, reps, phases);
        time_scheme(&m, &calib, "pca2+prerope+aw", "pca2+aw", ctx, reps, phases);
        time_scheme(&m, &calib, "pca2+aw", "pca2+aw", ctx, reps, phases);
    }
    calibration_free(&calib);
    model_free(&m);
    return 0;
}
