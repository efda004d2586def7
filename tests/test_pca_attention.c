/* tests/test_pca_attention.c: attention on pca's stored coefficients, and +prerope pca keys
 * rotated in transposed blocks (model/kvcache.h, Coefficient reads), against attention on rows
 * decoded one by one (kv_cache_decoded_reads: the path before them).
 *
 * mini-llama-brown-outliers' shape (4 query heads on 2 KV heads: GQA, head_dim 64, 4 layers,
 * its RoPE) with the reference's §9 calibration (tests/fixtures/reference/kv-calib9-*: fitted
 * bases, +aw weights that are not uniform, a basis per layer and KV head). Each layer's
 * attention is replayed (forward_attention_replay) on the same seeded keys, values and queries
 * into two caches, one read each way: a prefill of 96 positions (blocks shared across the
 * batch) and then 64 single steps (the decode path), so both caches hold the same codes and only
 * attention's arithmetic differs. That is the same sums in another order: the query's mean
 * term dropped (softmax ignores it), U applied to the query once instead of to every row, a
 * weighted sum of coefficients moved back once, and bf16 pairs rounding coefficients instead of
 * decoded rows where attention runs in pairs. Measured: up to 7e-7 of the largest |output| (f32
 * attention). Dropping the mean from the values, U for U^T, or one KV head's basis for
 * another's move the outputs by far more (see tests/README.md's mutations): 1e-4 separates them. (Through the whole forward pass the two
 * paths' rounding can flip a code of a later layer's key, which then moves logits by 1e-2: not
 * a test of attention.)
 *
 * Also each coefficient-read cache must actually read coefficients, and its fast-path stores keep
 * every row in the block layout the fast reads use (a silently disabled fast path would pass the
 * comparison). */
#include "tests/test.h"
#include "tests/calib_known.h"
#include "model/model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test_random.h"

#define PREFILL 96
#define STEPS 64
#define N_POSITIONS (PREFILL + STEPS)
#define FAST_PATH_TOL 1e-4

typedef struct {
    float *k, *v, *q;   /* [layer][position][kv_dim or dim] */
} Inputs;

/* Every layer's attention outputs [layer][position][dim] with a cache of these schemes.
 * decoded: attention on decoded rows. *coefficients, *transposed: stores taking each fast path;
 * *in_blocks: stores whose block layout (KvCodec.block_codes) holds every row at the end. */
static float *replay(const Model *m, const Calibration *calib, const Inputs *in, const char *k_text, const char *v_text,
                     int decoded, int *coefficients, int *transposed, int *in_blocks, char *why, size_t why_len) {
    const Config *c = &m->config;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim, dim = (size_t)c->dim;
    RunState s;
    KvCache kv;
    Error err;
    KvCacheScheme scheme = {.calib = calib};
    if (kv_layered_parse(k_text, KV_SIDE_KEYS, &scheme.k, why, why_len) ||
        kv_layered_parse(v_text, KV_SIDE_VALUES, &scheme.v, why, why_len))
        return NULL;
    if (runstate_init(&s, c, PREFILL, &err)) {
        snprintf(why, why_len, "%.150s", err.msg);
        return NULL;
    }
    if (kv_cache_init(&kv, c, N_POSITIONS, PREFILL, &scheme, m->rope_inv_freq, &err)) {
        snprintf(why, why_len, "%.150s", err.msg);
        runstate_free(&s);
        return NULL;
    }
    if (decoded) kv_cache_decoded_reads(&kv);
    *coefficients = *transposed = 0;
    for (int l = 0; l < c->n_layers; l++) {
        *coefficients += kv.keys[l].coefficient_reads + kv.values[l].coefficient_reads;
        *transposed += kv.keys[l].transposed_rope;
    }
    int blocked = 0;   /* stores whose block layout holds every row: a layout never written would pass the rest */
    float *out = malloc((size_t)c->n_layers * N_POSITIONS * dim * sizeof(float));
    for (int l = 0; out && l < c->n_layers; l++)
        for (int pos = 0; pos < N_POSITIONS;) {
            int T = pos == 0 ? PREFILL : 1;
            size_t at = (size_t)l * N_POSITIONS + (size_t)pos;
            AttentionReplay r = {.layer = l, .k_pre = in->k + at * kv_dim, .v = in->v + at * kv_dim,
                                 .q = in->q + at * dim, .T = T, .pos = pos, .from = 0, .out = out + at * dim};
            forward_attention_replay(m, &s, &kv, &r);
            pos += T;
        }
    for (int l = 0; l < c->n_layers; l++)
        for (int side = 0; side < 2; side++) {
            const KvStore *st = side ? &kv.values[l] : &kv.keys[l];
            blocked += st->blocks != NULL && st->blocks_end == N_POSITIONS - st->spec->sinks;
        }
    *in_blocks = blocked;
    kv_cache_free(&kv);
    runstate_free(&s);
    return out;
}

/* want_coefficients / want_transposed: stores (layers x sides) that must take each fast path. */
static void check_cache(const Model *m, const Calibration *calib, const Inputs *in, const char *k_text,
                        const char *v_text, int want_coefficients, int want_transposed) {
    char why[200] = "", name[256];
    int coef_fast, t_fast, coef_slow, t_slow, blocks_fast, blocks_slow;
    float *fast = replay(m, calib, in, k_text, v_text, 0, &coef_fast, &t_fast, &blocks_fast, why, sizeof why);
    float *slow = fast ? replay(m, calib, in, k_text, v_text, 1, &coef_slow, &t_slow, &blocks_slow, why, sizeof why) : NULL;
    snprintf(name, sizeof name, "pca attention: K %s, V %s: both caches replay every layer", k_text, v_text);
    if (check(fast && slow, name, "%s", why)) {
        snprintf(name, sizeof name, "pca attention: K %s, V %s: fast paths taken where kvcache.h says", k_text, v_text);
        check(coef_fast == want_coefficients && t_fast == want_transposed && coef_slow == 0 && t_slow == 0, name,
              "coefficient reads in %d stores (want %d), transposed RoPE in %d (want %d); decoded: %d and %d", coef_fast,
              want_coefficients, t_fast, want_transposed, coef_slow, t_slow);
        snprintf(name, sizeof name, "pca attention: K %s, V %s: the fast paths' stores keep every row in the block layout",
                 k_text, v_text);
        check(blocks_fast == want_coefficients + want_transposed && blocks_slow == 0, name,
              "%d stores (want %d); decoded: %d (want 0)", blocks_fast, want_coefficients + want_transposed, blocks_slow);
        size_t count = (size_t)m->config.n_layers * N_POSITIONS * m->config.dim;
        double d = max_abs_diff(fast, slow, count), scale = 0;
        for (size_t i = 0; i < count; i++) scale = fabs(slow[i]) > scale ? fabs(slow[i]) : scale;
        snprintf(name, sizeof name,
                 "pca attention: K %s, V %s: every layer's outputs over a prefill of %d and %d steps = those of decoded "
                 "rows (%.0e of the largest)",
                 k_text, v_text, PREFILL, STEPS, FAST_PATH_TOL);
        check(d <= FAST_PATH_TOL * scale, name, "max|d| %.3g, largest |output| %.3g", d, scale);
        printf("     K %s, V %s: max|d| %.3g of largest |output| %.3g\n", k_text, v_text, d, scale);
    }
    free(fast);
    free(slow);
}

int main(void) {
    Model m;
    Error err;
    if (!check(model_load(&m, "data/models/mini-llama-brown-outliers", &err) == 0,
               "pca attention: mini-llama-brown-outliers loads", "%s", err.msg))
        return test_exit_code();
    CalibModel geometry = {m.config.n_layers, m.config.n_heads, m.config.n_kv_heads, m.config.head_dim, NULL};
    Calibration calib = {0};
    const Config *c = &m.config;
    size_t rows = (size_t)c->n_layers * N_POSITIONS, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    Inputs in = {malloc(rows * kv_dim * sizeof(float)), malloc(rows * kv_dim * sizeof(float)),
                 malloc(rows * c->dim * sizeof(float))};
    if (check(in.k && in.v && in.q &&
                  load_known_fits("tests/fixtures/reference/kv-calib9-mini-llama-brown-outliers.safetensors", &geometry,
                                  &calib, &err) == 0,
              "pca attention: the section 9 calibration loads", "%s", err.msg)) {
        uint64_t seed = 50;
        for (size_t i = 0; i < rows * kv_dim; i++) in.k[i] = normal(&seed), in.v[i] = normal(&seed);
        for (size_t i = 0; i < rows * c->dim; i++) in.q[i] = normal(&seed);
        int L = c->n_layers;
        check_cache(&m, &calib, &in, "pca2+aw", "pca2+aw", 2 * L, 0);
        check_cache(&m, &calib, &in, "pca2+prerope+aw", "pca2+aw", L, L);
        check_cache(&m, &calib, &in, "pca2", "pca2", 2 * L, 0);
        check_cache(&m, &calib, &in, "pca1.25+aw", "pca2+aw+res64", L, 0);   /* a window: values decoded */
    }
    free(in.k);
    free(in.v);
    free(in.q);
    calibration_free(&calib);
    model_free(&m);
    return test_exit_code();
}
