/* model/forward.c: the Llama forward pass over a batch of T tokens.
 *
 * For each layer:  x += o_proj(attention(rope(q), rope(k), v))   on rmsnorm(x)
 *                  x += down(silu(gate(h)) * up(h))              on h = rmsnorm(x)
 * then logits = lm_head(rmsnorm(x)). Decoding one token is the same call with T = 1.
 * Keys and values go into the KV cache before attention reads them back, so with a
 * quantization scheme attention sees exactly what the cache kept (model/attention.c). */
#include "model/model.h"
#include "model/attention.h"
#include "model/kernels/kernels.h"
#include "model/kernels/hugepages.h"
#include "model/kernels/worksplit.h"
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

int runstate_init(RunState *s, const Config *c, int max_batch, Error *err) {
    memset(s, 0, sizeof *s);
    size_t T = (size_t)max_batch, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    s->max_batch = max_batch;
    s->n_threads = thread_count();
    /* The largest buffers, estimated in double: a config can ask for more than size_t holds. */
    double widest = c->vocab_size > c->hidden_dim ? c->vocab_size : c->hidden_dim;
    double att = attention_buffer_floats(c, s->n_threads);
    if (att * sizeof(float) > 1e15 || (double)max_batch * widest * sizeof(float) > 1e15)
        return error_set(err, "a batch of %d tokens with this config needs more memory than exists", max_batch);
    s->x = huge_alloc(T * c->dim * sizeof(float));
    s->xb = huge_alloc(T * c->dim * sizeof(float));
    s->xb2 = huge_alloc(T * c->dim * sizeof(float));
    s->q = huge_alloc(T * c->dim * sizeof(float));
    s->q2 = huge_alloc(T * ((size_t)c->dim / 2) * sizeof(uint32_t));
    s->k = huge_alloc(T * kv_dim * sizeof(float));
    s->v = huge_alloc(T * kv_dim * sizeof(float));
    s->hb = huge_alloc(T * c->hidden_dim * sizeof(float));
    s->hb2 = huge_alloc(T * c->hidden_dim * sizeof(float));
    int att_failed = attention_buffers_alloc(s, c, max_batch);
    s->logits = huge_alloc(T * c->vocab_size * sizeof(float));
    s->rope_cs = malloc(T * c->head_dim * sizeof(float));
    s->norm_w = malloc((size_t)c->dim * sizeof(float));
    /* mlp_swiglu_add's need, the largest; in size_t: each size may be up to 2^30 */
    size_t scratch = matmul_scratch_bytes(max_batch, (size_t)c->hidden_dim + (size_t)c->dim);
    s->mm_scratch = huge_alloc(scratch);
    if (att_failed || !s->mm_scratch || !s->x || !s->xb || !s->xb2 || !s->q || !s->q2 || !s->k || !s->v || !s->hb ||
        !s->hb2 || !s->logits || !s->rope_cs || !s->norm_w) {
        runstate_free(s);
        return error_set(err, "out of memory for a batch of %d tokens", max_batch);
    }
    return 0;
}

void runstate_free(RunState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->q2); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->att); free(s->logits); free(s->mm_scratch); free(s->rope_cs);
    free(s->norm_w); free(s->att_blocks); free(s->att_views);
    memset(s, 0, sizeof *s);
}

/* The tap's copies of token t's key before RoPE and value, its query after RoPE, and its attention
 * output in layer l (the last layer has queries and outputs only from logits_from on). */
static size_t tap_row(const RunState *s, int l, int t) {
    size_t rows = (size_t)(s->tap->layer_rows > 0 ? s->tap->layer_rows : s->max_batch);
    return (size_t)l * rows + (size_t)t;
}

static void tap_key(const RunState *s, const Config *c, int l, int t, const float *k, const float *v) {
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim, row = tap_row(s, l, t);
    if (s->tap->k_pre) memcpy(s->tap->k_pre + row * kv_dim, k, kv_dim * sizeof(float));
    if (s->tap->v) memcpy(s->tap->v + row * kv_dim, v, kv_dim * sizeof(float));
}

static void tap_query(const RunState *s, const Config *c, int l, int t, const float *q) {
    if (s->tap->q) memcpy(s->tap->q + tap_row(s, l, t) * c->dim, q, (size_t)c->dim * sizeof(float));
}

static void tap_output(const RunState *s, const Config *c, int l, int t, const float *out) {
    if (s->tap->att) memcpy(s->tap->att + tap_row(s, l, t) * c->dim, out, (size_t)c->dim * sizeof(float));
}

/* The tap's copies of the batch's keys before RoPE and values (every row), and of its queries
 * after RoPE (rows r0..T-1, s->q's row 0 first). */
static void tap_inputs(const RunState *s, const Config *c, int l, int T, int r0) {
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    for (int t = 0; t < T; t++) tap_key(s, c, l, t, s->k + t * kv_dim, s->v + t * kv_dim);
    for (int t = r0; t < T; t++) tap_query(s, c, l, t, s->q + (size_t)(t - r0) * c->dim);
}

/* One layer for the T tokens at positions pos..pos+T-1. Rows before r0 are needed only as
 * keys and values (the last layer, when their logits are not wanted: nothing reads their
 * outputs), so their queries, attention, o_proj and MLP are skipped. r0 = 0 is the full layer. */
static void layer_forward(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int r0) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[l];
    int n = T - r0;   /* rows whose outputs are needed */
    float *x = s->x + (size_t)r0 * c->dim;

    rmsnorm(s->xb, s->x, &w->attn_norm, T, c->dim, c->norm_eps, s->norm_w);
    if (r0 == 0) {
        matmul_many(3, (float *const[]){s->q, s->k, s->v}, (const Matrix *const[]){&w->wq, &w->wk, &w->wv}, s->xb, T,
                    m->precision, s->mm_scratch);
    } else {
        matmul_many(2, (float *const[]){s->k, s->v}, (const Matrix *const[]){&w->wk, &w->wv}, s->xb, T, m->precision,
                    s->mm_scratch);
        if (n > 0) matmul(s->q, s->xb + (size_t)r0 * c->dim, &w->wq, n, m->precision, s->mm_scratch);
    }
    #pragma omp parallel for schedule(static) if ((double)n * c->dim >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < n; t++)
        rope(s->q + (size_t)t * c->dim, c->n_heads, c->head_dim, s->rope_cs + (size_t)(r0 + t) * c->head_dim);
    if (s->tap) tap_inputs(s, c, l, T, r0);
    cached_attention(m, s, cache, l, T, pos, r0);   /* keys get their RoPE in the cache */
    if (n == 0) return;
    for (int t = 0; s->tap && t < n; t++) tap_output(s, c, l, r0 + t, s->xb2 + (size_t)t * c->dim);
    matmul_add(x, s->xb2, &w->wo, n, m->precision, s->xb, s->mm_scratch);

    rmsnorm(s->xb, x, &w->mlp_norm, n, c->dim, c->norm_eps, s->norm_w);
    const MlpScratch mlp = {.hb = s->hb, .hb2 = s->hb2, .tmp = s->xb, .scratch = s->mm_scratch};
    mlp_swiglu_add(x, &(SwigluWeights){&w->w_gate, &w->w_up, &w->w_down}, s->xb, n, m->precision, &mlp);
}

void forward_begin(const Model *m, RunState *s, const int *tokens, int T, int pos) {
    const Config *c = &m->config;
    for (int t = 0; tokens && t < T; t++)
        matrix_row_f32(&m->weights.embed, tokens[t], s->x + (size_t)t * c->dim);
    for (int t = 0; t < T; t++)   /* the rotation of each position, once for all layers */
        rope_angles(pos + t, c->head_dim, m->rope_inv_freq, s->rope_cs + (size_t)t * c->head_dim);
}

void forward_layer(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int logits_from) {
    int skip = logits_from < 0 ? 0 : logits_from > T ? T : logits_from;
    layer_forward(m, s, cache, l, T, pos, l == m->config.n_layers - 1 ? skip : 0);
}

void forward_end(const Model *m, RunState *s, KvCache *cache, int T, int pos, int logits_from) {
    const Config *c = &m->config;
    if (pos + T > cache->len) cache->len = pos + T;

    /* Only the rows whose logits are wanted go through the final norm and lm_head. */
    int n = T - logits_from;
    if (n <= 0) return;
    rmsnorm(s->xb, s->x + (size_t)logits_from * c->dim, &m->weights.final_norm, n, c->dim, c->norm_eps,
            s->norm_w);
    matmul(s->logits, s->xb, &m->weights.lm_head, n, m->precision, s->mm_scratch);
}

void forward(const Model *m, RunState *s, KvCache *cache, const int *tokens, int T, int pos, int logits_from) {
    forward_begin(m, s, tokens, T, pos);
    for (int l = 0; l < m->config.n_layers; l++) forward_layer(m, s, cache, l, T, pos, logits_from);
    forward_end(m, s, cache, T, pos, logits_from);
}
