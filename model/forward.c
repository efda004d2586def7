/* model/forward.c: the Llama forward pass over a batch of T tokens.
 *
 * For each layer:  x += o_proj(attention(rope(q), rope(k), v))   on rmsnorm(x)
 *                  x += down(silu(gate(h)) * up(h))              on h = rmsnorm(x)
 * then logits = lm_head(rmsnorm(x)). Decoding one token is the same call with T = 1.
 * Keys and values go into the KV cache before attention reads them back, so with a
 * quantization scheme attention sees exactly what the cache kept. */
#include "model/model.h"
#include "model/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int thread_count(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int runstate_init(RunState *s, const Config *c, int max_batch, Error *err) {
    memset(s, 0, sizeof *s);
    size_t T = (size_t)max_batch, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    s->max_batch = max_batch;
    s->n_threads = thread_count();
    s->x = malloc(T * c->dim * sizeof(float));
    s->xb = malloc(T * c->dim * sizeof(float));
    s->xb2 = malloc(T * c->dim * sizeof(float));
    s->q = malloc(T * c->dim * sizeof(float));
    s->k = malloc(T * kv_dim * sizeof(float));
    s->v = malloc(T * kv_dim * sizeof(float));
    s->hb = malloc(T * c->hidden_dim * sizeof(float));
    s->hb2 = malloc(T * c->hidden_dim * sizeof(float));
    s->att = malloc((size_t)s->n_threads * c->max_seq_len * sizeof(float));
    s->logits = malloc(T * c->vocab_size * sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->q || !s->k || !s->v || !s->hb || !s->hb2 || !s->att || !s->logits) {
        runstate_free(s);
        return error_set(err, "out of memory for a batch of %d tokens", max_batch);
    }
    return 0;
}

void runstate_free(RunState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->att); free(s->logits);
    memset(s, 0, sizeof *s);
}

/* Causal attention for T queries at positions pos..pos+T-1 against the cache of one layer.
 * Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query attention). */
static void attention(const Model *m, RunState *s, const KvCache *cache, int layer, int T, int pos) {
    const Config *c = &m->config;
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    float scale = 1.0f / sqrtf((float)hd);
    const KvScheme *ks = cache->k_scheme, *vs = cache->v_scheme;
    double work = (double)T * c->n_heads * (pos + T) * hd;
    #pragma omp parallel for collapse(2) schedule(dynamic, 1) if (work >= PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < c->n_heads; h++) {
            const float *q = s->q + (size_t)t * c->dim + (size_t)h * hd;
            float *out = s->xb2 + (size_t)t * c->dim + (size_t)h * hd;
            float *score = s->att + (size_t)thread_index() * c->max_seq_len;
            int kvh = h / group, n_pos = pos + t + 1;
            for (int p = 0; p < n_pos; p++)
                score[p] = ks->dot(ks, kv_key_row(cache, layer, kvh, p), q, (size_t)hd) * scale;
            softmax(score, n_pos);
            memset(out, 0, (size_t)hd * sizeof(float));
            for (int p = 0; p < n_pos; p++)
                vs->axpy(vs, kv_value_row(cache, layer, kvh, p), score[p], out, (size_t)hd);
        }
    }
}

static void add_inplace(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* SiLU(gate) * up, elementwise; silu(x) = x * sigmoid(x). */
static void swiglu(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void layer_forward(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[l];
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;

    rmsnorm(s->xb, s->x, &w->attn_norm, T, c->dim, c->norm_eps);
    matmul(s->q, s->xb, &w->wq, T);
    matmul(s->k, s->xb, &w->wk, T);
    matmul(s->v, s->xb, &w->wv, T);
    for (int t = 0; t < T; t++) {
        rope(s->q + (size_t)t * c->dim, c->n_heads, c->head_dim, pos + t, m->rope_inv_freq);
        rope(s->k + t * kv_dim, c->n_kv_heads, c->head_dim, pos + t, m->rope_inv_freq);
        kv_cache_write(cache, l, pos + t, s->k + t * kv_dim, s->v + t * kv_dim);
    }
    attention(m, s, cache, l, T, pos);
    matmul(s->xb, s->xb2, &w->wo, T);
    add_inplace(s->x, s->xb, (size_t)T * c->dim);

    rmsnorm(s->xb, s->x, &w->mlp_norm, T, c->dim, c->norm_eps);
    matmul(s->hb, s->xb, &w->w_gate, T);
    matmul(s->hb2, s->xb, &w->w_up, T);
    swiglu(s->hb, s->hb2, (size_t)T * c->hidden_dim);
    matmul(s->xb, s->hb, &w->w_down, T);
    add_inplace(s->x, s->xb, (size_t)T * c->dim);
}

void forward(const Model *m, RunState *s, KvCache *cache, const int *tokens, int T, int pos, int logits_from) {
    const Config *c = &m->config;
    for (int t = 0; t < T; t++)
        matrix_row_f32(&m->weights.embed, tokens[t], s->x + (size_t)t * c->dim);
    for (int l = 0; l < c->n_layers; l++)
        layer_forward(m, s, cache, l, T, pos);
    if (pos + T > cache->len) cache->len = pos + T;

    /* Only the rows whose logits are wanted go through the final norm and lm_head. */
    int n = T - logits_from;
    if (n <= 0) return;
    rmsnorm(s->xb, s->x + (size_t)logits_from * c->dim, &m->weights.final_norm, n, c->dim, c->norm_eps);
    matmul(s->logits, s->xb, &m->weights.lm_head, n);
}
