/* model/attention.c: causal attention of a batch of queries against one layer of the KV cache,
 * and the part of a layer around it (write, commit, the codec's domain: cached_attention).
 *
 * The work is cut into items of ATT_TOKENS query tokens x the query heads of one KV head, each
 * against blocks of ATT_POSITIONS cache rows: a block is decoded once (or read in place from an
 * fp32 cache) and serves every query of the item, so a packed cache is never expanded whole.
 * Within that, three ways to run an item: f32 (attention_block), bf16 pairs of dims
 * (attention_in_pairs: AVX-512 BF16), and AMX tiles (attention_block_tiles) over blocks that a
 * prefill batch decodes once for all its items (share_blocks). Schemes whose queries read some
 * of their own recent positions at full precision read a block two ways (QuantizedSpan). */
#include "model/attention.h"
#include "model/kernels/kernels.h"
#include "model/kernels/vector.h"
#include "model/kernels/attention_kernels.h"
#include "model/kernels/hugepages.h"
#include "model/kernels/worksplit.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Attention works on blocks: ATT_TOKENS query tokens x the n_heads / n_kv_heads query heads
 * that share one KV head, against ATT_POSITIONS cache rows at a time. Each block of rows is
 * decoded once (or read in place from an fp32 cache) and then serves every query of the
 * group, so a packed cache is decoded once per row per block, never expanded whole. */
#define ATT_TOKENS 16
#define ATT_POSITIONS DOT_T_WIDTH
_Static_assert(ATT_POSITIONS % 2 == 0, "bf16 attention pairs positions within a block");

/* Per-thread attention scratch (floats): scores of one work item (rows padded to whole blocks);
 * two views of a block of rows (see attention_block), each as rows and as a transposed block;
 * the second view's scores; four rows' weights split between the views; each row's 1 / sum of
 * its exps (bf16 pairs, see attention_weights); on AMX tiles, the queries as contiguous pair
 * rows and 32 rows of outputs (see attention_block_tiles). Rows are counted up to a multiple of
 * 32 there: the tiles take 32 at a time. */
typedef struct {
    float *score, *rows, *kt, *rows_b, *kt_b, *score_b, *w, *row_inv, *q_tiles, *out_tiles;
} AttentionScratch;

/* Score rows of n_max positions are this long: the bf16 path writes whole blocks of scores. */
static int padded_positions(int n_max) { return (n_max + ATT_POSITIONS - 1) / ATT_POSITIONS * ATT_POSITIONS; }

static int round_up32(int n) { return (n + 31) / 32 * 32; }

/* Query heads per KV head (grouped-query attention): a work item's group (AttentionItem). */
static int query_group(const Config *c) { return c->n_heads / c->n_kv_heads; }

/* Query rows of a work item: ATT_TOKENS tokens x the group's heads, up to a multiple of 32. */
static int scratch_rows(const Config *c) { return round_up32(ATT_TOKENS * query_group(c)); }

static double attention_scratch_count(const Config *c) {
    double rows = scratch_rows(c), block = (double)ATT_POSITIONS * c->head_dim;
    double padded = ceil((double)c->max_seq_len / ATT_POSITIONS) * ATT_POSITIONS;
    double row = padded + ATT_POSITIONS + 1 + c->head_dim / 2;
    return rows * row + 4 * block + 8 * ATT_POSITIONS + 32.0 * c->head_dim;
}

static size_t attention_scratch_floats(const Config *c) { return (size_t)attention_scratch_count(c); }

/* Blocks of ATT_POSITIONS cache rows over a whole context, and the floats of one (a block of
 * keys or of values, f32 or bf16 pairs: see key_block). */
static int context_blocks(const Config *c) { return (c->max_seq_len + ATT_POSITIONS - 1) / ATT_POSITIONS; }
static size_t block_floats(const Config *c) { return (size_t)ATT_POSITIONS * c->head_dim; }

static AttentionScratch attention_scratch(const Config *c, float *base) {
    size_t rows = (size_t)scratch_rows(c), block = (size_t)ATT_POSITIONS * c->head_dim;
    AttentionScratch a;
    a.score = base;
    a.rows = a.score + rows * (size_t)padded_positions(c->max_seq_len);
    a.kt = a.rows + block;
    a.rows_b = a.kt + block;
    a.kt_b = a.rows_b + block;
    a.score_b = a.kt_b + block;
    a.w = a.score_b + rows * ATT_POSITIONS;
    a.row_inv = a.w + 8 * ATT_POSITIONS;
    a.q_tiles = a.row_inv + rows;
    a.out_tiles = a.q_tiles + rows * (size_t)(c->head_dim / 2);
    return a;
}

/* A block of one KV head's cache rows: positions p0..p0+np-1 of store st (keys or values),
 * those below q_end read quantized (kv_cache_rows). */
typedef struct {
    const KvCache *cache;
    const KvStore *st;
    int kvh, p0, np, q_end;
} CacheBlock;

/* Keys of a block as a transposed block (see dot_transposed64): scores then come out of
 * vertical multiply-adds over positions, with no horizontal sum per query and key. f32:
 * kt[d][ATT_POSITIONS]; pairs: the same as bf16 pairs of dims (see key_pairs64). Returns the
 * block: kt, or buf for pairs decoded straight into kt. */
static const void *key_block(const CacheBlock *b, int hd, int pairs, float *buf, float *kt) {
    if (kv_cache_rows_t64(b->cache, b->st, b->kvh, b->p0, b->np, b->q_end, pairs, kt)) {
        if (!pairs) return kt;
        bf16_pair_rows(kt, hd, ATT_POSITIONS, (uint32_t *)buf);
        return buf;
    }
    const float *rows = kv_cache_rows(b->cache, b->st, b->kvh, b->p0, b->np, b->q_end, buf);
    if (pairs) key_pairs64(rows, b->np, hd, (uint32_t *)kt);
    else transpose_keys64(rows, b->np, hd, kt);
    return kt;
}

/* Which cached positions a work item's queries read quantized. The query at position pos + t
 * sees n = pos + t + 1 positions written and reads [S, Q(n)) quantized (SCHEMES.md 1). Q grows
 * with t, so over tokens t0..t1-1 it runs from lo = Q(pos + t0 + 1) to hi = Q(pos + t1): a block
 * outside [lo, hi) reads the same for every query (view "A", positions below hi quantized); a
 * block that meets [lo, hi) is read twice, also as view "B" (below lo quantized), and each
 * query takes position p from A when p < its own Q, else from B. For most schemes Q(n) = n,
 * and no block needs B (positions at or past a query's n are masked anyway). */
typedef struct {
    int lo, hi;
    int lagging;   /* some query reads a position of its own at full precision past its Q */
} QuantizedSpan;

static QuantizedSpan quantized_span(const KvStore *st, int pos, int t0, int t1) {
    QuantizedSpan q = {kv_cache_quantized_end(st, pos + t0 + 1), kv_cache_quantized_end(st, pos + t1), 0};
    for (int t = t0; t < t1 && !q.lagging; t++) q.lagging = kv_cache_quantized_end(st, pos + t + 1) < pos + t + 1;
    return q;
}

/* With Q(n) = n for every query, positions at or past a query's Q are masked for it: no B. */
static int needs_second_view(QuantizedSpan q, int p0, int np) {
    return q.lagging && q.lo < q.hi && p0 < q.hi && q.lo < p0 + np;
}

/* One work item of attention(): the query tokens t0..t1-1 (at positions pos + t) of the
 * group of query heads that share KV head kvh. Everything the helpers below need that does not
 * change while the item runs is worked out here once, so that each helper takes the item and
 * only what varies per call (a block of positions, a range of query rows). The first fields
 * are the same for every item of one attention() call (see attention_item). */
typedef struct {
    const Config *c;
    RunState *s;                     /* queries in s->q (f32) or s->q2 (pairs); outputs to s->xb2 */
    const KvCache *cache;
    const KvStore *keys, *values;    /* this layer's */
    int pos;                         /* the batch's first position */
    int group;                       /* query heads per KV head (query_group) */
    int pairs;                       /* queries, keys, weights and values as bf16 pairs */
    float scale;                     /* 1 / sqrt(head_dim) */
    int shared;                      /* blocks shared across the items (share_blocks) */
    /* this item's */
    int kvh, t0, t1;
    int rows;                        /* query rows: (t1 - t0) * group, row i = (token, head) of query_row */
    int n_max;                       /* pos + t1: the positions its last token sees */
    size_t stride;                   /* floats per score row: n_max padded to whole blocks */
    QuantizedSpan kq, vq;            /* what its queries read quantized, of keys and of values */
    const void *const *views;        /* this KV head's shared blocks, or NULL (shared = 0) */
    AttentionScratch a;              /* the running thread's scratch */
} AttentionItem;

/* The item of KV head kvh and tokens t0..t1-1, from call's fields common to the whole call. */
static AttentionItem attention_item(const AttentionItem *call, int kvh, int t0, int t1, float *scratch) {
    AttentionItem it = *call;
    it.kvh = kvh;
    it.t0 = t0;
    it.t1 = t1;
    it.rows = (t1 - t0) * it.group;
    it.n_max = it.pos + t1;
    it.stride = (size_t)padded_positions(it.n_max);
    it.kq = quantized_span(it.keys, it.pos, t0, t1);
    it.vq = quantized_span(it.values, it.pos, t0, t1);
    it.views = it.shared ? it.s->att_views + 2 * (size_t)kvh * context_blocks(it.c) : NULL;
    it.a = attention_scratch(it.c, scratch);
    return it;
}

/* Query row i of a work item: its token and head. Row i = (t0 + i / group, head kvh * group +
 * i % group): a token's heads of the group lie side by side, as they do in q and xb2. */
typedef struct {
    int t, h;
} QueryRow;

static QueryRow query_row(const AttentionItem *it, int i) {
    return (QueryRow){it->t0 + i / it->group, it->kvh * it->group + i % it->group};
}

/* Positions of the block at p0 (np of them) that query row i may attend to: causal. */
static int row_end(const AttentionItem *it, int i, int p0, int np) {
    int end = it->pos + query_row(it, i).t + 1 - p0;
    return end < 0 ? 0 : end < np ? end : np;
}

/* Scores of query rows i0..i0+nq-1 (nq = 4 or 1) against one transposed block of keys at p0
 * (np positions): out[i * stride + p] = scale * q_i . key p for the positions row i may attend
 * to. With pairs the queries are s->q2 and kt holds pair rows of keys; the scores are then not
 * scaled (exp_pairs does it) and fill the whole block, past the causal end too (the rows are
 * padded to whole blocks). Otherwise f32 queries (s->q). */
static void block_scores(const AttentionItem *it, const void *kt, int p0, int np, float *out, size_t stride, int i0,
                         int nq) {
    const Config *c = it->c;
    int hd = c->head_dim;
    float acc[4][ATT_POSITIONS];
    float *const sums[4] = {acc[0], acc[1], acc[2], acc[3]};
    if (row_end(it, i0 + nq - 1, p0, np) == 0) return;   /* all masked */
    if (it->pairs) {
        const uint32_t *q[4];
        float *rows[4];
        for (int j = 0; j < nq; j++) {
            QueryRow r = query_row(it, i0 + j);
            q[j] = it->s->q2 + (size_t)r.t * (c->dim / 2) + (size_t)r.h * (hd / 2);
            rows[j] = out + (size_t)(i0 + j) * stride;
        }
        dot_pairs64(nq, q, kt, hd / 2, rows);
        return;
    }
    const float *q[4];
    for (int j = 0; j < nq; j++) {
        QueryRow r = query_row(it, i0 + j);
        q[j] = it->s->q + (size_t)r.t * c->dim + (size_t)r.h * hd;
    }
    if (nq == 4) dot_transposed64_x4(q, kt, hd, sums);
    else dot_transposed64(q[0], kt, hd, acc[0]);
    for (int j = 0; j < nq; j++) {
        int end = row_end(it, i0 + j, p0, np);
        float *row = out + (size_t)(i0 + j) * stride;
        for (int p = 0; p < end; p++) row[p] = acc[j][p] * it->scale;
    }
}

/* block_scores for every query row of the item, four at a time (then one at a time). */
static void all_block_scores(const AttentionItem *it, const void *kt, int p0, int np, float *out, size_t stride) {
    for (int i = 0; i < it->rows;) {
        int nq = it->rows - i >= 4 ? 4 : 1;
        block_scores(it, kt, p0, np, out, stride, i, nq);
        i += nq;
    }
}

/* Scores for a block that needs both views: view B's scores replace A's at each row's positions
 * from its own Q on. */
static void mixed_block_scores(const AttentionItem *it, int p0, int np) {
    const AttentionScratch *a = &it->a;
    const CacheBlock block = {it->cache, it->keys, it->kvh, p0, np, it->kq.lo};
    const void *keys_b = key_block(&block, it->c->head_dim, it->pairs, a->rows_b, a->kt_b);
    all_block_scores(it, keys_b, p0, np, a->score_b, ATT_POSITIONS);
    for (int i = 0; i < it->rows; i++) {
        int own = kv_cache_quantized_end(it->keys, it->pos + query_row(it, i).t + 1);
        int end = row_end(it, i, p0, np);
        float *row = a->score + (size_t)i * it->stride + p0;
        for (int p = own - p0 < 0 ? 0 : own - p0; p < end; p++) row[p] = a->score_b[(size_t)i * ATT_POSITIONS + p];
    }
}

/* The weights of one score row as f32 for the positions of one block (bf16 pairs unpacked). */
static const float *block_weights(const float *row, int pairs, int p0, int np, float *buf) {
    if (!pairs) return row + p0;
    const uint32_t *pair = (const uint32_t *)row + p0 / 2;
    for (int p = 0; p < np; p += 2) {
        uint32_t lo = pair[p / 2] << 16, hi = pair[p / 2] & 0xffff0000u;
        memcpy(&buf[p], &lo, sizeof lo);
        if (p + 1 < np) memcpy(&buf[p + 1], &hi, sizeof hi);
    }
    return buf;
}

/* Where query row i's output goes: its token's row of xb2, at its head. */
static float *output_row(const AttentionItem *it, int i) {
    QueryRow r = query_row(it, i);
    return it->s->xb2 + (size_t)r.t * it->c->dim + (size_t)r.h * it->c->head_dim;
}

/* Values for a block that needs both views, in f32, four query rows at a time: each row's
 * weights split at its own Q between the two views' rows (A's below it in rows_a, B's from it
 * on in the scratch's rows_b). */
static void mixed_block_values(const AttentionItem *it, const float *rows_a, int p0, int np) {
    const AttentionScratch *a = &it->a;
    int hd = it->c->head_dim;
    for (int i = 0; i < it->rows;) {
        int nq = it->rows - i >= 4 ? 4 : 1;
        int end = row_end(it, i + nq - 1, p0, np);   /* the longest */
        float *out[4];
        const float *w_a[4], *w_b[4];
        for (int j = 0; j < nq; j++) {
            int own = kv_cache_quantized_end(it->values, it->pos + query_row(it, i + j).t + 1);
            const float *w = block_weights(a->score + (size_t)(i + j) * it->stride, it->pairs, p0, np,
                                           a->score_b + (size_t)j * ATT_POSITIONS);
            float *wa = a->w + (size_t)2 * j * ATT_POSITIONS, *wb = wa + ATT_POSITIONS;
            for (int p = 0; p < end; p++) {   /* zero past the row's causal end already */
                int quantized = p0 + p < own;
                wa[p] = quantized ? w[p] : 0.0f;
                wb[p] = quantized ? 0.0f : w[p];
            }
            out[j] = output_row(it, i + j);
            w_a[j] = wa;
            w_b[j] = wb;
        }
        if (end > 0 && nq == 4) {
            add_weighted_rows_x4(out, w_a, rows_a, end, hd);
            add_weighted_rows_x4(out, w_b, a->rows_b, end, hd);
        } else if (end > 0) {
            add_weighted_rows(out[0], w_a[0], rows_a, end, hd);
            add_weighted_rows(out[0], w_b[0], a->rows_b, end, hd);
        }
        i += nq;
    }
}

/* Values for a block read one way by every row (vb: np rows of values in f32; value_pairs: the
 * same as bf16 pair rows), four query rows at a time. */
static void block_values(const AttentionItem *it, const float *vb, const uint32_t *value_pairs, int p0, int np) {
    int hd = it->c->head_dim;
    const float *score = it->a.score;
    for (int i = 0; i < it->rows;) {
        int nq = it->rows - i >= 4 ? 4 : 1;
        float *out[4];
        const float *w[4];
        const uint32_t *w2[4];
        for (int j = 0; j < nq; j++) {
            out[j] = output_row(it, i + j);
            w[j] = score + (size_t)(i + j) * it->stride + p0;
            w2[j] = (const uint32_t *)(score + (size_t)(i + j) * it->stride) + p0 / 2;
        }
        int end = row_end(it, i + nq - 1, p0, np);   /* the last row's is the longest */
        if (end > 0 && it->pairs) add_weighted_pairs(nq, out, w2, value_pairs, (end + 1) / 2, hd);
        else if (end > 0 && nq == 4) add_weighted_rows_x4(out, w, vb, end, hd);
        else if (end > 0) add_weighted_rows(out[0], w[0], vb, end, hd);
        i += nq;
    }
}

/* Softmax of each query row's scores over the positions it may attend to, zero past them up
 * to width (n_max; the tiles read up to the next 32). bf16 pairs: left unnormalized, as pairs
 * (exp_pairs), with 1 / sum in row_inv. */
static void attention_weights(const AttentionItem *it, int width) {
    const AttentionScratch *a = &it->a;
    for (int i = 0; i < it->rows; i++) {
        int n = it->pos + query_row(it, i).t + 1;
        float *row = a->score + (size_t)i * it->stride;
        if (it->pairs) {
            a->row_inv[i] = exp_pairs(row, n, max_value(row, n), it->scale, width);
            continue;
        }
        softmax(row, n);
        memset(row + n, 0, (size_t)(width - n) * sizeof(float));
    }
}

/* One work item (see AttentionItem): scores, softmax, weighted values, into xb2.
 * Query rows go four at a time so that each key and value loaded serves four of them; after
 * the softmax a row's weights past its causal end are zero, so four rows can share one
 * range of positions. pairs: queries, keys, weights and values as bf16 pairs (see
 * attention()); positions then pair up too, and blocks start at even positions. Queries are
 * in the keys' read domain and outputs come out in the values' (model/kvcache.h). Query row
 * i's scores are at score[i * stride]. */
static void attention_block(const AttentionItem *it) {
    const Config *c = it->c;
    const AttentionScratch *a = &it->a;
    int hd = c->head_dim, group = it->group, n_max = it->n_max;
    for (int t = it->t0; t < it->t1; t++)   /* a token's query heads of this group lie side by side, as its rows */
        memset(it->s->xb2 + (size_t)t * c->dim + (size_t)it->kvh * group * hd, 0, (size_t)group * hd * sizeof(float));
    for (int p0 = 0; p0 < n_max; p0 += ATT_POSITIONS) {
        int np = n_max - p0 < ATT_POSITIONS ? n_max - p0 : ATT_POSITIONS;
        const CacheBlock block = {it->cache, it->keys, it->kvh, p0, np, it->kq.hi};
        const void *keys =
            it->views ? it->views[2 * (p0 / ATT_POSITIONS)] : key_block(&block, hd, it->pairs, a->rows, a->kt);
        all_block_scores(it, keys, p0, np, a->score + p0, it->stride);
        if (needs_second_view(it->kq, p0, np)) mixed_block_scores(it, p0, np);
    }
    attention_weights(it, n_max);
    for (int p0 = 0; p0 < n_max; p0 += ATT_POSITIONS) {
        int np = n_max - p0 < ATT_POSITIONS ? n_max - p0 : ATT_POSITIONS;
        const void *shared_values = it->views ? it->views[2 * (p0 / ATT_POSITIONS) + 1] : NULL;
        const float *vb = shared_values ? shared_values
                                        : kv_cache_rows(it->cache, it->values, it->kvh, p0, np, it->vq.hi, a->rows);
        const uint32_t *value_pairs = (const uint32_t *)(shared_values ? shared_values : a->kt);
        if (needs_second_view(it->vq, p0, np)) {
            kv_cache_rows(it->cache, it->values, it->kvh, p0, np, it->vq.lo, a->rows_b);
            mixed_block_values(it, vb, p0, np);
            continue;
        }
        if (it->pairs && !shared_values) bf16_pair_rows(vb, np, hd, (uint32_t *)a->kt);   /* kt is free in this pass */
        block_values(it, vb, value_pairs, p0, np);
    }
    for (int i = 0; it->pairs && i < it->rows; i++) {   /* the weights were unnormalized */
        float *out = output_row(it, i);
        for (int d = 0; d < hd; d++) out[d] *= a->row_inv[i];
    }
}

/* bf16 precision on a CPU with bf16 dot products: attention in bf16 pairs too, as the
 * matmuls (llama.cpp computes it from an F16 cache). Positions pair within a block. On the
 * AMX path only where the tiles take it (attention_on_tiles): there (Intel cores) vdpbf16ps
 * does half the f32 FMA's multiply-adds per second, so f32 attention is the faster one
 * (model/kernels/README.md). */
static int attention_in_pairs(const Model *m) {
    return kernel_choose(m->precision, m->weights.layers[0].wq.dtype) == KERNEL_AVX512_BF16 &&
           m->config.head_dim % 64 == 0;
}

/* The amx-bf16 path: attention in bf16 pairs on the tiles (attention_block_tiles) for batches
 * whose blocks are shared (blocks_shareable: prefill and ppl windows); f32 for the rest. */
static int attention_on_tiles(const Model *m) {
    return kernel_choose(m->precision, m->weights.layers[0].wq.dtype) == KERNEL_AMX_BF16 &&
           m->config.head_dim % 64 == 0;
}

/* Tiles take 32 query rows at a time (work item rows i0..i0+31, up to the padding): the
 * positions the last real one of them attends to, which covers the others (causal). */
static int tile_rows_end(const AttentionItem *it, int i0) {
    int last = i0 + 31 < it->rows ? i0 + 31 : it->rows - 1;
    return it->pos + query_row(it, last).t + 1;
}

/* attention_block on AMX tiles, for shared blocks (views: keys and values of every block as
 * bf16 pairs, see share_blocks). The work item's queries are copied into contiguous pair rows
 * (a token's heads lie side by side in q2, tokens dim / 2 apart), padded with zero rows to a
 * multiple of 32. Scores go 32 rows x one block at a time; the softmax writes zero weights past
 * n_max up to the next 32 positions, as the tiles read them; each 32 rows' weighted values come out
 * of the tiles once, scaled by 1 / sum into xb2. */
static void attention_block_tiles(const AttentionItem *it) {
    const Config *c = it->c;
    const AttentionScratch *a = &it->a;
    int hd = c->head_dim, half = hd / 2, group = it->group, rows = it->rows, padded_rows = round_up32(rows);
    size_t stride = it->stride;
    uint32_t *q = (uint32_t *)a->q_tiles;
    for (int t = it->t0; t < it->t1; t++)
        memcpy(q + (size_t)(t - it->t0) * group * half,
               it->s->q2 + (size_t)t * (c->dim / 2) + (size_t)it->kvh * group * half, (size_t)group * half * sizeof *q);
    memset(q + (size_t)rows * half, 0, (size_t)(padded_rows - rows) * half * sizeof *q);
    for (int i0 = 0; i0 < padded_rows; i0 += 32) {
        int end = tile_rows_end(it, i0);
        for (int p0 = 0; p0 < end; p0 += ATT_POSITIONS) {
            int n = end - p0 < ATT_POSITIONS ? end - p0 : ATT_POSITIONS;
            tile_scores32(q + (size_t)i0 * half, hd, it->views[2 * (p0 / ATT_POSITIONS)], n, a->score + i0 * stride + p0,
                          stride);
        }
    }
    /* weights zero up to the next 32 positions past n_max: the tiles read them */
    attention_weights(it, round_up32(it->n_max));
    for (int i0 = 0; i0 < padded_rows; i0 += 32) {
        int end = tile_rows_end(it, i0);
        tile_weighted_values32((const uint32_t *)(a->score + i0 * stride), stride, it->views + 1, 2, end, hd,
                               a->out_tiles);
        for (int i = i0; i < rows && i < i0 + 32; i++) {
            float *out = output_row(it, i);
            for (int d = 0; d < hd; d++) out[d] = a->out_tiles[(size_t)(i - i0) * hd + d] * a->row_inv[i];
        }
    }
}

/* A batch of one block of tokens is one work item per KV head: nothing to share (and a
 * RunState for such batches has no shared blocks). */
static int batch_may_share(const RunState *s, int T) { return s->att_blocks && T > ATT_TOKENS; }

/* Whether every work item of a batch reads each block of the cache the same way: no query
 * reads a position of its own at full precision past its Q (most schemes, and an fp32 cache),
 * so a block of rows that one query reads quantized is quantized for all that can see it. */
static int blocks_shareable(const RunState *s, const KvCache *cache, int layer, int T, int pos) {
    return batch_may_share(s, T) &&
           !quantized_span(kv_cache_keys(cache, layer), pos, 0, T).lagging &&
           !quantized_span(kv_cache_values(cache, layer), pos, 0, T).lagging;
}

/* Every block of keys and values up to pos + T, decoded (or read in place) and converted to
 * what the attention loops read (transposed keys, bf16 pairs) once per layer: done inside each
 * work item, a batch of 512 tokens repeated it for every ATT_TOKENS of them. s->att_views gets
 * [kvh][block] = {keys, values}. A query past a row's position does not see that row (causal),
 * so reading rows up to pos + T quantized changes nothing that any query of the batch reads. */
static void share_blocks(const Model *m, RunState *s, const KvCache *cache, int layer, int T, int pos, int pairs) {
    const Config *c = &m->config;
    const KvStore *keys_st = kv_cache_keys(cache, layer), *values_st = kv_cache_values(cache, layer);
    int hd = c->head_dim, n_max = pos + T, n_blocks = (n_max + ATT_POSITIONS - 1) / ATT_POSITIONS;
    int k_end = kv_cache_quantized_end(keys_st, n_max), v_end = kv_cache_quantized_end(values_st, n_max);
    size_t block = block_floats(c), per_thread = attention_scratch_floats(c);
    double work = (double)c->n_kv_heads * n_blocks * block;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int item = 0; item < c->n_kv_heads * n_blocks; item++) {
        int kvh = item / n_blocks, p0 = item % n_blocks * ATT_POSITIONS;
        int np = n_max - p0 < ATT_POSITIONS ? n_max - p0 : ATT_POSITIONS;
        size_t slot = (size_t)kvh * context_blocks(c) + (size_t)(p0 / ATT_POSITIONS);
        float *keys = s->att_blocks + 2 * slot * block, *values = keys + block;
        AttentionScratch a = attention_scratch(c, s->att + (size_t)thread_index() * per_thread);
        const CacheBlock key_rows = {cache, keys_st, kvh, p0, np, k_end};
        const void *kb = key_block(&key_rows, hd, pairs, a.rows, keys);
        if (kb != keys) memcpy(keys, kb, block * sizeof(float));   /* pairs made from a decoded transposed block */
        const float *vb = kv_cache_rows(cache, values_st, kvh, p0, np, v_end, pairs ? a.rows : values);
        if (pairs) {   /* pair rows past np's are zero: the tiles read a block's rows 16 at a time */
            bf16_pair_rows(vb, np, hd, (uint32_t *)values);
            memset((uint32_t *)values + (size_t)(np + 1) / 2 * hd, 0, (size_t)(ATT_POSITIONS - np) / 2 * hd * sizeof(uint32_t));
        }
        s->att_views[2 * slot] = keys;
        s->att_views[2 * slot + 1] = pairs ? values : vb;
    }
}

/* Causal attention for T queries at positions pos..pos+T-1 against the cache of one layer.
 * Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query attention). The work is
 * split into items of one KV head x ATT_TOKENS tokens (AttentionItem). */
static void attention(const Model *m, RunState *s, const KvCache *cache, int layer, int T, int pos) {
    const Config *c = &m->config;
    int n_blocks = (T + ATT_TOKENS - 1) / ATT_TOKENS, items = c->n_kv_heads * n_blocks;
    size_t per_thread = attention_scratch_floats(c);
    int shared = blocks_shareable(s, cache, layer, T, pos);
    int tiles = shared && attention_on_tiles(m), pairs = attention_in_pairs(m) || tiles;
    if (shared) share_blocks(m, s, cache, layer, T, pos, pairs);
    /* what every item of this call has in common; attention_item adds each item's own */
    const AttentionItem call = {.c = c, .s = s, .cache = cache, .keys = kv_cache_keys(cache, layer),
                                .values = kv_cache_values(cache, layer), .pos = pos,
                                .group = query_group(c), .pairs = pairs,
                                .scale = 1.0f / sqrtf((float)c->head_dim), .shared = shared};
    double work = (double)T * c->n_heads * (pos + T) * c->head_dim;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel if (work >= PARALLEL_MIN_WORK)
    {
        if (tiles) attention_tiles_begin();   /* per thread: the tile shapes are thread state */
        #pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < items; item++) {
            /* last tokens first: they attend to the most positions, and the dynamic schedule
             * then ends on short items, so neither thread waits long for the other */
            int kvh = item % c->n_kv_heads, t0 = (n_blocks - 1 - item / c->n_kv_heads) * ATT_TOKENS;
            int t1 = t0 + ATT_TOKENS < T ? t0 + ATT_TOKENS : T;
            float *scratch = s->att + (size_t)thread_index() * per_thread;
            AttentionItem it = attention_item(&call, kvh, t0, t1, scratch);
            if (tiles) attention_block_tiles(&it);
            else attention_block(&it);
        }
        if (tiles) attention_tiles_end();
    }
}

double attention_buffer_floats(const Config *c, int n_threads) {
    return n_threads * attention_scratch_count(c) +
           2.0 * c->n_kv_heads * ceil((double)c->max_seq_len / ATT_POSITIONS) * ATT_POSITIONS * c->head_dim;
}

int attention_buffers_alloc(RunState *s, const Config *c, int max_batch) {
    s->att = huge_alloc((size_t)s->n_threads * attention_scratch_floats(c) * sizeof(float));
    if (!s->att) return -1;
    if (max_batch <= ATT_TOKENS) return 0;   /* see batch_may_share */
    size_t shared_blocks = (size_t)c->n_kv_heads * context_blocks(c);
    s->att_blocks = huge_alloc(2 * shared_blocks * block_floats(c) * sizeof(float));
    s->att_views = malloc(2 * shared_blocks * sizeof *s->att_views);
    return s->att_blocks && s->att_views ? 0 : -1;
}

void cached_attention(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int from) {
    const Config *c = &m->config;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    int n = T - from, group = query_group(c);   /* rows whose attention runs; query heads a KV head */
    /* queries as bf16 pairs too (s->q2) where attention reads them: the tiles take only batches
     * whose blocks may be shared (not decode) */
    int pairs = attention_in_pairs(m) || (attention_on_tiles(m) && batch_may_share(s, n));
    /* tokens are independent here (a quantizing cache write is the costly part): a prefill
     * batch splits them over the threads */
    #pragma omp parallel for schedule(static) if ((double)T * (c->dim + kv_dim) >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < T; t++) {
        const float *cs = s->rope_cs + (size_t)t * c->head_dim;
        kv_cache_write(cache, l, pos + t, s->k + t * kv_dim, s->v + t * kv_dim, cs);   /* the cache applies RoPE */
        if (t < from) continue;
        float *q = s->q + (size_t)(t - from) * c->dim;
        for (int kvh = 0; kvh < c->n_kv_heads; kvh++)   /* a KV head's query heads lie side by side */
            kv_cache_queries_to_domain(cache, l, kvh, q + (size_t)kvh * group * c->head_dim, group);
        if (pairs) bf16_pairs_along(q, c->dim, s->q2 + (size_t)(t - from) * (c->dim / 2));   /* while q is in cache */
    }
    kv_cache_commit(cache, l, pos, pos + T);
    if (n == 0) return;
    attention(m, s, cache, l, n, pos + from);
    #pragma omp parallel for schedule(static) if ((double)n * c->dim >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < n; t++)
        for (int h = 0; h < c->n_heads; h++)
            kv_cache_output_from_domain(cache, l, h / group, s->xb2 + (size_t)t * c->dim + (size_t)h * c->head_dim);
}

void forward_attention_replay(const Model *m, RunState *s, KvCache *cache, const AttentionReplay *r) {
    const Config *c = &m->config;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim, n = (size_t)(r->T - r->from);
    for (int t = 0; t < r->T; t++)
        rope_angles(r->pos + t, c->head_dim, m->rope_inv_freq, s->rope_cs + (size_t)t * c->head_dim);
    memcpy(s->k, r->k_pre, (size_t)r->T * kv_dim * sizeof(float));
    memcpy(s->v, r->v, (size_t)r->T * kv_dim * sizeof(float));
    memcpy(s->q, r->q, n * c->dim * sizeof(float));
    cached_attention(m, s, cache, r->layer, r->T, r->pos, r->from);
    memcpy(r->out, s->xb2, n * c->dim * sizeof(float));
}
