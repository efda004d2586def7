/* tests/test_kvcache_forward.c: the KV cache (model/kvcache.h) through the forward pass on
 * mini-llama-brown: a batched prefill gives the logits of decoding the same tokens one at a time,
 * and batches of 7 those of one batch, for schemes whose positions change form as the sequence
 * grows (residual window, token-axis groups, sinks, pre-RoPE keys). Both paths share the cache,
 * so this catches what differs between batch sizes, not what both get wrong: that is the
 * read-back's job (tests/test_kvcache.c, no model). */
#include "tests/test.h"
#include "model/model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- through the forward pass ---- */

#define N_TOKENS 200
/* A batched prefill computes keys and values with other matmul kernels than single tokens do
 * (GEMM and GEMV, summed in another order), so they differ in the last float bits, and a value
 * near a rounding boundary can get the neighbouring code: measured up to 1.9e-4 in the logits.
 * A position read from the wrong store (quantized where it should be full precision, or the
 * reverse) moves them by 0.06 to 1.2 on these schemes, so 1e-3 separates the two. */
#define PATHS_AGREE_TOL 1e-3

/* Logits of every position of tokens[0..n), forwarded in batches of `batch` tokens. */
static float *run_batches(const Model *m, const int *tokens, int n, int batch, const char *k_text, const char *v_text) {
    const Config *c = &m->config;
    RunState s;
    KvCache kv;
    Error err;
    KvCacheScheme scheme = {0};
    char why[160];
    if (kv_layered_parse(k_text, KV_SIDE_KEYS, &scheme.k, why, sizeof why) ||
        kv_layered_parse(v_text, KV_SIDE_VALUES, &scheme.v, why, sizeof why))
        return NULL;
    if (runstate_init(&s, c, batch, &err)) return NULL;
    if (kv_cache_init(&kv, c, n, batch, &scheme, m->rope_inv_freq, &err)) {
        runstate_free(&s);
        return NULL;
    }
    float *logits = malloc((size_t)n * c->vocab_size * sizeof(float));
    for (int done = 0; logits && done < n;) {
        int T = n - done < batch ? n - done : batch;
        forward(m, &s, &kv, tokens + done, T, done, 0);
        memcpy(logits + (size_t)done * c->vocab_size, s.logits, (size_t)T * c->vocab_size * sizeof(float));
        done += T;
    }
    kv_cache_free(&kv);
    runstate_free(&s);
    return logits;
}

static void check_batched_equals_stepwise(const Model *m, const int *tokens, const char *k_text, const char *v_text) {
    size_t count = (size_t)N_TOKENS * m->config.vocab_size;
    float *whole = run_batches(m, tokens, N_TOKENS, N_TOKENS, k_text, v_text);
    float *sevens = run_batches(m, tokens, N_TOKENS, 7, k_text, v_text);
    float *steps = run_batches(m, tokens, N_TOKENS, 1, k_text, v_text);
    double d1 = whole && steps ? max_abs_diff(whole, steps, count) : INFINITY;
    double d7 = whole && sevens ? max_abs_diff(whole, sevens, count) : INFINITY;
    char name[192];
    snprintf(name, sizeof name, "kvcache: K %s, V %s: a batch of %d gives the logits of one token at a time", k_text,
             v_text, N_TOKENS);
    check(d1 <= PATHS_AGREE_TOL, name, "max|d| %.3g > %.0e", d1, PATHS_AGREE_TOL);
    snprintf(name, sizeof name, "kvcache: K %s, V %s: batches of 7 give the logits of one batch", k_text, v_text);
    check(d7 <= PATHS_AGREE_TOL, name, "max|d| %.3g > %.0e", d7, PATHS_AGREE_TOL);
    printf("     max|d| %.3g and %.3g (tolerance %.0e)\n", d1, d7, PATHS_AGREE_TOL);
    free(whole);
    free(sevens);
    free(steps);
}

int main(void) {
    Model m;
    Error err;
    if (!check(model_load(&m, "data/models/mini-llama-brown", &err) == 0, "kvcache: mini-llama-brown loads", "%s", err.msg))
        return test_exit_code();
    int tokens[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) tokens[i] = 1 + (int)((7919u * (unsigned)i + 13u) % 31999u);
    check_batched_equals_stepwise(&m, tokens, "int2-t32-asym+res128", "int2-g32-asym+res128");
    check_batched_equals_stepwise(&m, tokens, "int4-t32-asym+res32", "int4-g32-asym+res32");
    check_batched_equals_stepwise(&m, tokens, "int2-t16+sink4+res8", "int3-g64+sink4+res16+had");
    check_batched_equals_stepwise(&m, tokens, "int4-g64+prerope+res5", "int4-g64+out2");
    model_free(&m);
    return test_exit_code();
}