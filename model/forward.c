/* model/forward.c: the Llama forward pass over a batch of T tokens.
 *
 * For each layer:  x += o_proj(attention(rope(q), rope(k), v))   on rmsnorm(x)
 *                  x += down(silu(gate(h)) * up(h))              on h = rmsnorm(x)
 * then logits = lm_head(rmsnorm(x)). Decoding one token is the same call with T = 1.
 * Keys and values go into the KV cache before attention reads them back, so with a
 * quantization scheme attention sees exactly what the cache kept. */
#include "model/model.h"
#include "model/kernels.h"
#include "model/attention_kernels.h"
#include "model/hugepages.h"
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

/* Attention works on blocks: ATT_TOKENS query tokens x the n_heads / n_kv_heads query heads
 * that share one KV head, against ATT_POSITIONS cache rows at a time. Each block of rows is
 * widened to f32 once (or read in place from an fp32 cache) and then serves every query of
 * the group, so a packed cache is decoded once per row per block, never expanded whole. */
#define ATT_TOKENS 16
#define ATT_POSITIONS DOT_T_WIDTH
_Static_assert(ATT_POSITIONS % 2 == 0, "bf16 attention pairs positions within a block");

/* Floats of per-thread attention scratch: scores of one work item, two row blocks and the
 * work item's queries as bf16 pairs. */
static size_t attention_scratch_floats(const Config *c) {
    size_t group = (size_t)(c->n_heads / c->n_kv_heads);
    return ATT_TOKENS * group * ((size_t)c->max_seq_len + (size_t)c->head_dim / 2 + 1) +
           2 * (size_t)ATT_POSITIONS * c->head_dim;
}

int runstate_init(RunState *s, const Config *c, int max_batch, Error *err) {
    memset(s, 0, sizeof *s);
    size_t T = (size_t)max_batch, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    s->max_batch = max_batch;
    s->n_threads = thread_count();
    /* The largest buffers, estimated in double: a config can ask for more than size_t holds. */
    double group = (double)(c->n_heads / c->n_kv_heads);
    double widest = c->vocab_size > c->hidden_dim ? c->vocab_size : c->hidden_dim;
    double att = s->n_threads * (ATT_TOKENS * group * (c->max_seq_len + c->head_dim / 2.0 + 1) + 2.0 * ATT_POSITIONS * c->head_dim);
    if (att * sizeof(float) > 1e15 || (double)max_batch * widest * sizeof(float) > 1e15)
        return error_set(err, "a batch of %d tokens with this config needs more memory than exists", max_batch);
    s->x = huge_alloc(T * c->dim * sizeof(float));
    s->xb = huge_alloc(T * c->dim * sizeof(float));
    s->xb2 = huge_alloc(T * c->dim * sizeof(float));
    s->q = huge_alloc(T * c->dim * sizeof(float));
    s->k = huge_alloc(T * kv_dim * sizeof(float));
    s->v = huge_alloc(T * kv_dim * sizeof(float));
    s->hb = huge_alloc(T * c->hidden_dim * sizeof(float));
    s->hb2 = huge_alloc(T * c->hidden_dim * sizeof(float));
    s->att = huge_alloc((size_t)s->n_threads * attention_scratch_floats(c) * sizeof(float));
    s->logits = malloc(T * c->vocab_size * sizeof(float));
    s->rope_cs = malloc(T * c->head_dim * sizeof(float));
    s->norm_w = malloc((size_t)c->dim * sizeof(float));
    /* mlp_swiglu_add's need, the largest; in size_t: each size may be up to 2^30 */
    size_t scratch = matmul_scratch_bytes(max_batch, (size_t)c->hidden_dim + (size_t)c->dim);
    s->mm_scratch = huge_alloc(scratch);
    if (!s->mm_scratch || !s->x || !s->xb || !s->xb2 || !s->q || !s->k || !s->v || !s->hb || !s->hb2 || !s->att ||
        !s->logits || !s->rope_cs || !s->norm_w) {
        runstate_free(s);
        return error_set(err, "out of memory for a batch of %d tokens", max_batch);
    }
    return 0;
}

void runstate_free(RunState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->att); free(s->logits); free(s->mm_scratch); free(s->rope_cs);
    free(s->norm_w);
    memset(s, 0, sizeof *s);
}

/* The cache's rows as Int4Rows when the int4 attention kernels can read them in place. */
static int int4_layout(const KvScheme *scheme, size_t row_bytes, int hd, Int4Rows *f) {
    *f = (Int4Rows){hd, scheme->group_size, scheme->symmetric, row_bytes};
    return scheme->bits == 4 && scheme->axis == KV_AXIS_CHANNELS && !scheme->pre_rope &&
           scheme->n_params == (scheme->symmetric ? 1 : 2) && int4_rows_supported(f);
}

/* Rows p0..p0+n-1 of one layer and KV head as f32: a pointer into an fp32 cache (rows of
 * one head are contiguous), else decoded into buf. */
static const float *row_block(const KvScheme *scheme, const unsigned char *first_row, size_t row_bytes,
                              int n, int hd, float *buf) {
    Int4Rows f;
    if (scheme->bits == 32) return (const float *)first_row;
    if (int4_layout(scheme, row_bytes, hd, &f)) {
        int4_decode_rows(&f, first_row, n, buf);
        return buf;
    }
    for (int i = 0; i < n; i++)
        scheme->dequantize(scheme, first_row + (size_t)i * row_bytes, (size_t)hd, buf + (size_t)i * hd);
    return buf;
}

/* Keys of rows p0..p0+n-1 as a transposed block (see dot_transposed64): scores then come out
 * of vertical multiply-adds over positions, with no horizontal sum per query and key. f32:
 * kt[d][ATT_POSITIONS]; pairs: the same as bf16 pairs of dims (see key_pairs64). A 4-bit
 * cache is decoded straight into the f32 order; others go through row_block. Returns the
 * block: kt, or buf for a 4-bit cache's pairs. */
static const void *key_block(const KvScheme *scheme, const unsigned char *first_row, size_t row_bytes, int n, int hd,
                             int pairs, float *buf, float *kt) {
    Int4Rows f;
    if (int4_layout(scheme, row_bytes, hd, &f)) {
        int4_keys_transposed64(&f, first_row, n, kt);
        if (!pairs) return kt;
        bf16_pair_rows(kt, hd, ATT_POSITIONS, (uint32_t *)buf);
        return buf;
    }
    const float *rows = row_block(scheme, first_row, row_bytes, n, hd, buf);
    if (pairs) key_pairs64(rows, n, hd, (uint32_t *)kt);
    else transpose_keys64(rows, n, hd, kt);
    return kt;
}

/* Query row i of a work item (see attention_block): its token and head. */
typedef struct {
    int t, h;
} QueryRow;

static QueryRow query_row(int t0, int kvh, int group, int i) {
    return (QueryRow){t0 + i / group, kvh * group + i % group};
}

/* Positions of the block at p0 (np of them) that query token t may attend to: causal. */
static int causal_end(int pos, int t, int p0, int np) {
    int end = pos + t + 1 - p0;
    return end < 0 ? 0 : end < np ? end : np;
}

/* Scores of query rows i0..i0+nq-1 (nq = 4 or 1) against one transposed block of keys:
 * score row i gets scale * q . key for the positions it may attend to. q2: the work item's
 * queries as bf16 pairs (rows of hd / 2), with kt then pair rows of keys; NULL: f32 (s->q). */
static void block_scores(const RunState *s, const Config *c, const void *kt, const uint32_t *q2, int t0, int kvh,
                         int i0, int nq, int pos, int p0, int np, int n_max, float scale, float *score) {
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    float acc[4][ATT_POSITIONS];
    float *const sums[4] = {acc[0], acc[1], acc[2], acc[3]};
    if (causal_end(pos, query_row(t0, kvh, group, i0 + nq - 1).t, p0, np) == 0) return;   /* all masked */
    if (q2) {
        const uint32_t *q[4];
        for (int j = 0; j < nq; j++) q[j] = q2 + (size_t)(i0 + j) * (hd / 2);
        dot_pairs64(nq, q, kt, hd / 2, sums);
    } else {
        const float *q[4];
        for (int j = 0; j < nq; j++) {
            QueryRow r = query_row(t0, kvh, group, i0 + j);
            q[j] = s->q + (size_t)r.t * c->dim + (size_t)r.h * hd;
        }
        if (nq == 4) dot_transposed64_x4(q, kt, hd, sums);
        else dot_transposed64(q[0], kt, hd, acc[0]);
    }
    for (int j = 0; j < nq; j++) {
        int end = causal_end(pos, query_row(t0, kvh, group, i0 + j).t, p0, np);
        float *out = score + (size_t)(i0 + j) * n_max + p0;
        for (int p = 0; p < end; p++) out[p] = acc[j][p] * scale;
    }
}

/* Query tokens t0..t1-1 (positions pos+t) of KV head kvh: scores, softmax, weighted values.
 * Query rows go four at a time so that each key and value loaded serves four of them; after
 * the softmax a row's weights past its causal end are zero, so four rows can share one
 * range of positions. pairs: queries, keys, weights and values as bf16 pairs (see
 * attention()); positions then pair up too, and blocks start at even positions. */
static void attention_block(const Model *m, RunState *s, const KvCache *cache, int layer, int kvh, int t0, int t1,
                            int pos, int pairs, float *scratch) {
    const Config *c = &m->config;
    int hd = c->head_dim, group = c->n_heads / c->n_kv_heads, n_max = pos + t1;
    float scale = 1.0f / sqrtf((float)hd);
    float *score = scratch, *kbuf = scratch + (size_t)ATT_TOKENS * group * c->max_seq_len;
    float *kt = kbuf + (size_t)ATT_POSITIONS * hd;
    uint32_t *q2 = NULL;
    /* query row i = (t0 + i / group, head kvh * group + i % group); its scores at score[i * n_max] */
    int rows = (t1 - t0) * group;
    if (pairs) {
        q2 = (uint32_t *)(kt + (size_t)ATT_POSITIONS * hd);
        for (int i = 0; i < rows; i++) {
            QueryRow r = query_row(t0, kvh, group, i);
            bf16_pairs_along(s->q + (size_t)r.t * c->dim + (size_t)r.h * hd, hd, q2 + (size_t)i * (hd / 2));
        }
    }
    for (int p0 = 0; p0 < n_max; p0 += ATT_POSITIONS) {
        int np = n_max - p0 < ATT_POSITIONS ? n_max - p0 : ATT_POSITIONS;
        const void *keys = key_block(cache->k_scheme, kv_key_row(cache, layer, kvh, p0), cache->k_row_bytes, np, hd,
                                     pairs, kbuf, kt);
        for (int i = 0; i < rows;) {
            int nq = rows - i >= 4 ? 4 : 1;
            block_scores(s, c, keys, q2, t0, kvh, i, nq, pos, p0, np, n_max, scale, score);
            i += nq;
        }
    }
    for (int i = 0; i < rows; i++) {
        QueryRow r = query_row(t0, kvh, group, i);
        float *row = score + (size_t)i * n_max;
        softmax(row, pos + r.t + 1);
        memset(row + pos + r.t + 1, 0, (size_t)(n_max - (pos + r.t + 1)) * sizeof(float));
        if (pairs) bf16_pairs_along(row, n_max, (uint32_t *)row);   /* in place: pair p / 2 at p / 2 */
        memset(s->xb2 + (size_t)r.t * c->dim + (size_t)r.h * hd, 0, (size_t)hd * sizeof(float));
    }
    for (int p0 = 0; p0 < n_max; p0 += ATT_POSITIONS) {
        int np = n_max - p0 < ATT_POSITIONS ? n_max - p0 : ATT_POSITIONS;
        const float *vb = row_block(cache->v_scheme, kv_value_row(cache, layer, kvh, p0), cache->v_row_bytes, np, hd, kbuf);
        if (pairs) bf16_pair_rows(vb, np, hd, (uint32_t *)kt);   /* kt is free in this pass */
        for (int i = 0; i < rows;) {
            int nq = rows - i >= 4 ? 4 : 1;
            float *out[4];
            const float *w[4];
            const uint32_t *w2[4];
            for (int j = 0; j < nq; j++) {
                QueryRow r = query_row(t0, kvh, group, i + j);
                out[j] = s->xb2 + (size_t)r.t * c->dim + (size_t)r.h * hd;
                w[j] = score + (size_t)(i + j) * n_max + p0;
                w2[j] = (const uint32_t *)(score + (size_t)(i + j) * n_max) + p0 / 2;
            }
            int end = causal_end(pos, query_row(t0, kvh, group, i + nq - 1).t, p0, np);   /* the last row's is the longest */
            if (end > 0 && pairs) add_weighted_pairs(nq, out, w2, (const uint32_t *)kt, (end + 1) / 2, hd);
            else if (end > 0 && nq == 4) add_weighted_rows_x4(out, w, vb, end, hd);
            else if (end > 0) add_weighted_rows(out[0], w[0], vb, end, hd);
            i += nq;
        }
    }
}

/* Causal attention for T queries at positions pos..pos+T-1 against the cache of one layer.
 * Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query attention). */
static void attention(const Model *m, RunState *s, const KvCache *cache, int layer, int T, int pos) {
    const Config *c = &m->config;
    int n_blocks = (T + ATT_TOKENS - 1) / ATT_TOKENS, items = c->n_kv_heads * n_blocks;
    size_t per_thread = attention_scratch_floats(c);
    /* bf16 precision on a CPU with bf16 dot products: attention in bf16 pairs too, as the
     * matmuls (llama.cpp computes it from an F16 cache). Positions pair within a block. */
    int pairs = kernel_choose(m->precision, m->weights.layers[0].wq.dtype) == KERNEL_AVX512_BF16 &&
                c->head_dim % 64 == 0;
    double work = (double)T * c->n_heads * (pos + T) * c->head_dim;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(dynamic, 1) if (work >= PARALLEL_MIN_WORK)
    for (int item = 0; item < items; item++) {
        /* last tokens first: they attend to the most positions, and the dynamic schedule
         * then ends on short items, so neither thread waits long for the other */
        int kvh = item % c->n_kv_heads, t0 = (n_blocks - 1 - item / c->n_kv_heads) * ATT_TOKENS;
        int t1 = t0 + ATT_TOKENS < T ? t0 + ATT_TOKENS : T;
        attention_block(m, s, cache, layer, kvh, t0, t1, pos, pairs, s->att + (size_t)thread_index() * per_thread);
    }
}

/* One layer for the T tokens at positions pos..pos+T-1. Rows before r0 are needed only as
 * keys and values (the last layer, when their logits are not wanted: nothing reads their
 * outputs), so their queries, attention, o_proj and MLP are skipped. r0 = 0 is the full layer. */
static void layer_forward(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int r0) {
    const Config *c = &m->config;
    const LayerWeights *w = &m->weights.layers[l];
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
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
    /* tokens are independent here (a quantizing cache write is the costly part): a prefill
     * batch splits them over the threads */
    #pragma omp parallel for schedule(static) if ((double)T * (c->dim + kv_dim) >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < T; t++) {
        const float *cs = s->rope_cs + (size_t)t * c->head_dim;
        rope(s->k + t * kv_dim, c->n_kv_heads, c->head_dim, cs);
        kv_cache_write(cache, l, pos + t, s->k + t * kv_dim, s->v + t * kv_dim);
        if (t >= r0) rope(s->q + (size_t)(t - r0) * c->dim, c->n_heads, c->head_dim, cs);
    }
    if (n == 0) return;
    attention(m, s, cache, l, n, pos + r0);
    matmul_add(x, s->xb2, &w->wo, n, m->precision, s->xb, s->mm_scratch);

    rmsnorm(s->xb, x, &w->mlp_norm, n, c->dim, c->norm_eps, s->norm_w);
    mlp_swiglu_add(x, &w->w_gate, &w->w_up, &w->w_down, s->xb, n, m->precision, s->hb, s->hb2, s->xb, s->mm_scratch);
}

void forward(const Model *m, RunState *s, KvCache *cache, const int *tokens, int T, int pos, int logits_from) {
    const Config *c = &m->config;
    for (int t = 0; t < T; t++)
        matrix_row_f32(&m->weights.embed, tokens[t], s->x + (size_t)t * c->dim);
    int skip = logits_from < 0 ? 0 : logits_from > T ? T : logits_from;
    for (int t = 0; t < T; t++)   /* the rotation of each position, once for all layers */
        rope_angles(pos + t, c->head_dim, m->rope_inv_freq, s->rope_cs + (size_t)t * c->head_dim);
    for (int l = 0; l < c->n_layers; l++)
        layer_forward(m, s, cache, l, T, pos, l == c->n_layers - 1 ? skip : 0);
    if (pos + T > cache->len) cache->len = pos + T;

    /* Only the rows whose logits are wanted go through the final norm and lm_head. */
    int n = T - logits_from;
    if (n <= 0) return;
    rmsnorm(s->xb, s->x + (size_t)logits_from * c->dim, &m->weights.final_norm, n, c->dim, c->norm_eps,
            s->norm_w);
    matmul(s->logits, s->xb, &m->weights.lm_head, n, m->precision, s->mm_scratch);
}
