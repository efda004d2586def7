/* model/kvcache.c: the KV cache's arrays, its one write path (where values are quantized)
 * and the reads attention makes. The policies of the scheme language that need positions —
 * residual window, sinks, token-axis groups, pre-RoPE keys — live here; the arithmetic of a
 * row lives in quant/. See model/kvcache.h. */
#include "model/kvcache.h"
#include "model/kernels/hugepages.h"
#include "model/kernels/kernels.h"
#include "model/formats/calib_bind.h"
#include "quant/rans.h"
#include <stdlib.h>
#include <string.h>

/* ---- allocation ---- */

static int sinks_of(const KvStore *st) { return st->plain ? 0 : st->spec->sinks; }

static int needs_window(const KvSpec *spec) { return spec->residual > 0 || spec->base.axis == KV_AXIS_TOKENS; }

static int out_of_memory(const KvCache *c, Error *err) {
    return error_set(err, "KV cache: out of memory for %d positions", c->max_seq);
}

/* Rows leave the codec in the natural order (no +had, +out, llama.cpp key order or inner
 * rotation in between): a transposed block of them can be rotated by RoPE as it is. */
static int codec_rows_natural(const KvSpec *spec) {
    const KvCodec *codec = spec->base.codec;
    return !spec->hadamard && !spec->outliers && !codec->rotate && !codec->llama_key_order;
}

/* See kvcache.h, Coefficient reads: only when every position read is quantized, as a
 * full-precision row would have to enter the coefficients through U (sqrt(w) x - mu), which
 * equals the decoded rows' algebra only for an orthonormal U. */
static int coefficients_possible(const KvStore *st, const KvCache *c) {
    const KvSpec *spec = st->spec;
    const KvCodec *codec = spec->base.codec;
    if (st->plain || st->natural_reads || !codec->decode_coefficients || spec->sinks || needs_window(spec) ||
        !codec_rows_natural(spec))
        return 0;
    for (int h = 0; h < c->n_kv_heads; h++)
        if (!codec->coefficients_ready(&st->head_specs[h].base, c->head_dim)) return 0;
    return 1;
}

static int store_init(KvStore *st, const KvSpec *spec, const KvCache *c, const Calibration *calib, int layer,
                      Error *err) {
    int d = c->head_dim, is_key = spec->side == KV_SIDE_KEYS;
    memset(st, 0, sizeof *st);
    st->head_specs = malloc((size_t)c->n_kv_heads * sizeof *st->head_specs);
    if (!st->head_specs) return out_of_memory(c, err);
    /* a fitted base's table per KV head (shared or each its own, as its codec declares) */
    if (calib_bind_heads(spec, calib, layer, c->n_kv_heads, d, st->head_specs, err)) return -1;
    st->spec = st->head_specs;
    st->plain = kv_spec_is_fp32(spec);
    st->natural_reads = is_key && spec->prerope;
    st->coefficient_reads = coefficients_possible(st, c);
    st->transposed_rope = st->natural_reads && !st->plain && spec->base.codec->decode_t64 && codec_rows_natural(spec);
    st->group = spec->base.rows;
    st->unit_bytes = kv_spec_unit_bytes(spec, d);
    int s = sinks_of(st), stored = c->max_seq > s ? c->max_seq - s : 0;
    st->head_units = (size_t)((stored + st->group - 1) / st->group);
    st->encoded_end = s;
    size_t heads = (size_t)c->n_kv_heads;
    st->units = huge_calloc(heads * (st->head_units ? st->head_units : 1), st->unit_bytes);
    if (!st->units) return out_of_memory(c, err);
    if (s > 0 && !(st->sinks = malloc(heads * (size_t)s * d * sizeof(float)))) return out_of_memory(c, err);
    if (!st->plain && needs_window(spec)) {
        long rows = (long)spec->residual + st->group + c->max_batch;
        st->window_rows = rows < c->max_seq ? (int)rows : c->max_seq;
        st->window = huge_alloc(heads * (size_t)st->window_rows * d * sizeof(float));
        if (!st->window) return out_of_memory(c, err);
    }
    if (!st->plain && st->group > 1 && !(st->pack_rows = malloc(heads * 2 * (size_t)st->group * d * sizeof(float))))
        return out_of_memory(c, err);
    if ((st->coefficient_reads || st->transposed_rope) && spec->base.codec->block_codes && st->group == 1) {
        st->head_blocks = (st->head_units + 63) / 64;
        if (!(st->blocks = huge_calloc(heads * (st->head_blocks ? st->head_blocks : 1), 64 * st->unit_bytes)))
            return out_of_memory(c, err);
    }
    return 0;
}

static void store_free(KvStore *st) {
    free(st->head_specs);
    free(st->units);
    free(st->sinks);
    free(st->window);
    free(st->pack_rows);
    free(st->blocks);
    memset(st, 0, sizeof *st);
}

/* The cos and sin of every position, for keys that are rotated when they are read. */
static int init_rope_table(KvCache *c, const float *rope_inv_freq, Error *err) {
    int any = 0;
    for (int l = 0; l < c->n_layers; l++) any |= kv_layered_at(&c->k_scheme, l)->prerope;
    if (!any) return 0;
    if (!rope_inv_freq) return error_set(err, "KV cache: +prerope keys need the model's RoPE frequencies");
    c->rope_cos_sin = malloc((size_t)c->max_seq * c->head_dim * sizeof(float));
    c->rope_by_angle = malloc((size_t)c->max_seq * c->head_dim * sizeof(float));
    if (!c->rope_cos_sin || !c->rope_by_angle) return error_set(err, "KV cache: out of memory for %d positions", c->max_seq);
    for (int p = 0; p < c->max_seq; p++) rope_angles(p, c->head_dim, rope_inv_freq, c->rope_cos_sin + (size_t)p * c->head_dim);
    for (int p = 0; p < c->max_seq; p++)
        for (int i = 0; i < c->head_dim; i++)
            c->rope_by_angle[(size_t)i * c->max_seq + p] = c->rope_cos_sin[(size_t)p * c->head_dim + i];
    return 0;
}

static int bind_scheme(KvLayered *dst, const KvLayered *src, const Config *cfg, KvSide side, Error *err) {
    char why[256];
    if (src) *dst = *src;
    else if (kv_layered_parse(KV_CACHE_DEFAULT_SCHEME, side, dst, why, sizeof why)) return error_set(err, "KV cache: %s", why);
    if (kv_layered_bind(dst, cfg->n_layers, cfg->head_dim, side, why, sizeof why))
        return error_set(err, "%s scheme %s", side == KV_SIDE_KEYS ? "key" : "value", why);
    return 0;
}

int kv_cache_init(KvCache *c, const Config *cfg, int max_seq, int max_batch, const KvCacheScheme *scheme,
                  const float *rope_inv_freq, Error *err) {
    memset(c, 0, sizeof *c);
    const Calibration *calib = scheme ? scheme->calib : NULL;
    if (bind_scheme(&c->k_scheme, scheme ? &scheme->k : NULL, cfg, KV_SIDE_KEYS, err) ||
        bind_scheme(&c->v_scheme, scheme ? &scheme->v : NULL, cfg, KV_SIDE_VALUES, err))
        return -1;
    c->n_layers = cfg->n_layers;
    c->n_kv_heads = cfg->n_kv_heads;
    c->head_dim = cfg->head_dim;
    c->max_seq = max_seq;
    c->max_batch = max_batch < 1 ? 1 : max_batch;
    c->keys = calloc((size_t)c->n_layers, sizeof *c->keys);
    c->values = calloc((size_t)c->n_layers, sizeof *c->values);
    int bad = !c->keys || !c->values;
    if (bad) error_set(err, "KV cache: out of memory for %d positions", max_seq);
    for (int l = 0; l < c->n_layers && !bad; l++)
        bad = store_init(&c->keys[l], kv_layered_at(&c->k_scheme, l), c, calib, l, err) ||
              store_init(&c->values[l], kv_layered_at(&c->v_scheme, l), c, calib, l, err);
    if (bad) {
        kv_cache_free(c);
        return -1;
    }
    if (init_rope_table(c, rope_inv_freq, err)) {
        kv_cache_free(c);
        return -1;
    }
    return 0;
}

void kv_cache_free(KvCache *c) {
    for (int l = 0; c->keys && l < c->n_layers; l++) store_free(&c->keys[l]);
    for (int l = 0; c->values && l < c->n_layers; l++) store_free(&c->values[l]);
    free(c->keys);
    free(c->values);
    free(c->rope_cos_sin);
    free(c->rope_by_angle);
    c->keys = c->values = NULL;
    c->rope_cos_sin = c->rope_by_angle = NULL;
}

/* The block layout goes too: what remains is the path before any of them. */
static void stop_fast_reads(KvStore *st) {
    st->coefficient_reads = st->transposed_rope = 0;
    free(st->blocks);
    st->blocks = NULL;
    st->head_blocks = 0;
    st->blocks_end = 0;
}

void kv_cache_decoded_reads(KvCache *c) {
    for (int l = 0; l < c->n_layers; l++) {
        stop_fast_reads(&c->keys[l]);
        stop_fast_reads(&c->values[l]);
    }
}

size_t kv_cache_bytes(const KvCache *c) {
    size_t total = 0, heads = (size_t)c->n_kv_heads, d = (size_t)c->head_dim;
    for (int side = 0; side < 2; side++)
        for (int l = 0; l < c->n_layers; l++) {
            const KvStore *st = side ? &c->values[l] : &c->keys[l];
            total += heads * (st->head_units * st->unit_bytes + st->head_blocks * 64 * st->unit_bytes +
                              ((size_t)sinks_of(st) + st->window_rows) * d * sizeof(float));
        }
    return total;
}

double kv_cache_position_bytes(const KvCache *c) {
    double total = 0;
    for (int l = 0; l < c->n_layers; l++)
        total += (double)c->keys[l].unit_bytes / c->keys[l].group + (double)c->values[l].unit_bytes / c->values[l].group;
    return total * c->n_kv_heads;
}

/* ---- addresses ---- */

static unsigned char *head_units(const KvStore *st, int head) {
    return st->units + (size_t)head * st->head_units * st->unit_bytes;
}

static float *sink_row(const KvCache *c, const KvStore *st, int head, int pos) {
    return st->sinks + ((size_t)head * sinks_of(st) + pos) * c->head_dim;
}

static float *window_row(const KvCache *c, const KvStore *st, int head, int pos) {
    return st->window + ((size_t)head * st->window_rows + pos % st->window_rows) * c->head_dim;
}

/* ---- writing ---- */

/* RoPE backwards (a rotation by -angle): an already rotated key, for a +prerope layer. */
static void unrotate(float *x, int d, const float *cos_sin) {
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half], cs = cos_sin[i], sn = cos_sin[half + i];
        x[i] = a * cs + b * sn;
        x[i + half] = b * cs - a * sn;
    }
}

/* One head's row of one store: row is what the scheme quantizes (for +prerope keys, the key
 * before RoPE). Channel-axis rows are encoded now, from the float32 row; token-axis groups
 * wait in the window for kv_cache_commit. */
static void store_put(const KvCache *c, KvStore *st, int head, int pos, const float *row) {
    int d = c->head_dim, s = sinks_of(st);
    if (st->plain) {
        memcpy(head_units(st, head) + (size_t)pos * st->unit_bytes, row, (size_t)d * sizeof(float));
        return;
    }
    if (pos < s) {
        memcpy(sink_row(c, st, head, pos), row, (size_t)d * sizeof(float));
        return;
    }
    if (st->window) memcpy(window_row(c, st, head, pos), row, (size_t)d * sizeof(float));
    if (st->group == 1) {
        float scratch[KV_MAX_HEAD_DIM];
        kv_spec_encode(&st->head_specs[head], row, d, head_units(st, head) + (size_t)(pos - s) * st->unit_bytes, scratch);
    }
}

void kv_cache_write(KvCache *c, int layer, int pos, const float *k, const float *v, const float *cos_sin) {
    int d = c->head_dim;
    KvStore *keys = &c->keys[layer];
    for (int h = 0; h < c->n_kv_heads; h++) {
        float row[KV_MAX_HEAD_DIM];
        memcpy(row, k + (size_t)h * d, (size_t)d * sizeof(float));
        if (cos_sin && !keys->natural_reads) rope(row, 1, d, cos_sin);
        if (!cos_sin && keys->natural_reads) unrotate(row, d, c->rope_cos_sin + (size_t)pos * d);
        store_put(c, keys, h, pos, row);
        store_put(c, &c->values[layer], h, pos, v + (size_t)h * d);
    }
}

static unsigned char *head_block(const KvStore *st, int head, int row) {
    return st->blocks + ((size_t)head * st->head_blocks + (size_t)row / 64) * 64 * st->unit_bytes;
}

/* The block layout of the units' rows written since the last commit (a gap left by positions
 * never committed is filled from the units too, where rows not yet written read code 0). */
static void store_blocks(const KvCache *c, KvStore *st, int first, int end) {
    int s = sinks_of(st), from = first - s < st->blocks_end ? first - s : st->blocks_end, to = end - s;
    if (from < 0) from = 0;
    #pragma omp parallel for schedule(static) if (to - from > 64)   /* heads' blocks are apart: a prefill's split */
    for (int h = 0; h < c->n_kv_heads; h++) {
        const KvBase *b = &st->head_specs[h].base;
        for (int r = from; r < to;) {
            int n = 64 - r % 64 < to - r ? 64 - r % 64 : to - r;
            b->codec->block_codes(b, head_units(st, h), c->head_dim, r, n, head_block(st, h, r));
            r += n;
        }
    }
    if (to > from) st->blocks_end = to;
}

/* Packs the token-axis groups that positions below end completed. */
static void store_commit(const KvCache *c, KvStore *st, int first, int end) {
    int d = c->head_dim, g = st->group, s = sinks_of(st);
    if (st->blocks) store_blocks(c, st, first, end);
    if (st->plain || g == 1) return;
    if (st->encoded_end > first) st->encoded_end = first <= s ? s : s + g * ((first - s) / g);
    int from = st->encoded_end, groups = end - from < g ? 0 : (end - from) / g;
    /* heads are independent (each has its own pack rows): a prefill's many groups split over
     * the threads */
    #pragma omp parallel for schedule(static) if (groups > 1)
    for (int h = 0; h < c->n_kv_heads; h++) {
        float *rows = st->pack_rows + (size_t)h * 2 * g * d;
        for (int k = 0; k < groups; k++) {
            int p0 = from + k * g, r = (p0 - s) / g;
            for (int i = 0; i < g; i++)
                memcpy(rows + (size_t)i * d, window_row(c, st, h, p0 + i), (size_t)d * sizeof(float));
            kv_spec_encode(&st->head_specs[h], rows, d, head_units(st, h) + (size_t)r * st->unit_bytes, rows + (size_t)g * d);
        }
    }
    st->encoded_end = from + groups * g;
}

void kv_cache_commit(KvCache *c, int layer, int first, int end) {
    store_commit(c, &c->keys[layer], first, end);
    store_commit(c, &c->values[layer], first, end);
}

/* ---- reading ---- */

int kv_cache_quantized_end(const KvStore *st, int n) {
    return st->plain ? n : kv_spec_quantized_end(st->spec, n);
}

/* A full-precision row (sink or window) into the read domain. */
static void full_row(const KvCache *c, const KvStore *st, const float *src, int pos, float *out) {
    memcpy(out, src, (size_t)c->head_dim * sizeof(float));
    if (st->natural_reads) rope(out, 1, c->head_dim, c->rope_cos_sin + (size_t)pos * c->head_dim);
    else kv_spec_to_domain(st->spec, out, c->head_dim);
}

/* Quantized rows [p0, p0+n) are the first of one block of the block layout (coefficient reads
 * have no sinks, so attention's blocks of 64 positions are the layout's). */
static int in_blocks(const KvStore *st, int p0, int n) {
    int r = p0 - sinks_of(st);
    return st->blocks && r >= 0 && r % 64 == 0 && n <= 64 && r + n <= st->blocks_end;
}

/* Quantized rows [p0, p0+n) decoded into the read domain. */
static void quantized_rows(const KvCache *c, const KvStore *st, int head, int p0, int n, float *out) {
    int d = c->head_dim;
    if (st->coefficient_reads) {
        const KvBase *b = &st->head_specs[head].base;
        if (in_blocks(st, p0, n)) b->codec->block_read(b, head_block(st, head, p0), d, n, KV_BLOCK_COEFFICIENTS, out);
        else b->codec->decode_coefficients(b, head_units(st, head), d, p0 - sinks_of(st), n, out);
        return;
    }
    kv_spec_decode(&st->head_specs[head], head_units(st, head), d, p0 - sinks_of(st), n, out);
    if (!st->natural_reads) return;
    for (int i = 0; i < n; i++) {
        float *row = out + (size_t)i * d;
        kv_spec_from_domain(st->spec, row, d);
        rope(row, 1, d, c->rope_cos_sin + (size_t)(p0 + i) * d);
    }
}

const float *kv_cache_rows(const KvCache *c, const KvStore *st, int head, int p0, int np, int q_end, float *buf) {
    int d = c->head_dim, s = sinks_of(st);
    if (st->plain) return (const float *)(head_units(st, head) + (size_t)p0 * st->unit_bytes);
    for (int j = p0; j < p0 + np;) {
        float *out = buf + (size_t)(j - p0) * d;
        if (j < s) {
            full_row(c, st, sink_row(c, st, head, j), j, out);
            j++;
        } else if (j < q_end) {
            int n = (q_end < p0 + np ? q_end : p0 + np) - j;
            quantized_rows(c, st, head, j, n, out);
            j += n;
        } else {
            full_row(c, st, window_row(c, st, head, j), j, out);
            j++;
        }
    }
    return buf;
}

/* rope() on a transposed block kt[i * 64 + p] of np rows from position p0: the same
 * products, with the positions innermost (and so the angles' table by angle, contiguous). */
static void rope_t64(const KvCache *c, float *kt, int p0, int np) {
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float *x = kt + (size_t)i * 64, *y = kt + (size_t)(i + half) * 64;
        const float *cos_i = c->rope_by_angle + (size_t)i * c->max_seq + p0;
        const float *sin_i = c->rope_by_angle + (size_t)(half + i) * c->max_seq + p0;
        for (int p = 0; p < np; p++) {
            float a = x[p], b = y[p];
            x[p] = a * cos_i[p] - b * sin_i[p];
            y[p] = b * cos_i[p] + a * sin_i[p];
        }
    }
}

int kv_cache_rows_t64(const KvCache *c, const KvStore *st, int head, int p0, int np, int q_end, int bf16, float *kt) {
    int s = sinks_of(st);
    const KvBase *b = &st->head_specs[head].base;
    if (st->plain || (st->natural_reads && !st->transposed_rope) || p0 < s || p0 + np > q_end) return 0;
    if (st->coefficient_reads) {
        if (!in_blocks(st, p0, np)) return 0;
        b->codec->block_read(b, head_block(st, head, p0), c->head_dim, np, KV_BLOCK_COEFFICIENTS_T64, kt);
        return 1;
    }
    if (!kv_spec_has_decode_t64(st->spec)) return 0;
    if (in_blocks(st, p0, np))
        b->codec->block_read(b, head_block(st, head, p0), c->head_dim, np,
                             bf16 ? KV_BLOCK_DECODED_T64_BF16 : KV_BLOCK_DECODED_T64, kt);
    else kv_spec_decode_t64(&st->head_specs[head], head_units(st, head), c->head_dim, p0 - s, np, kt);
    if (st->natural_reads) rope_t64(c, kt, p0, np);
    return 1;
}

void kv_cache_queries_to_domain(const KvCache *c, int layer, int kv_head, float *q, int rows) {
    const KvStore *st = &c->keys[layer];
    if (st->coefficient_reads) {
        const KvBase *b = &st->head_specs[kv_head].base;
        b->codec->coefficients(b, q, c->head_dim, rows, KV_TO_INNER);
    } else if (!st->plain && !st->natural_reads) {
        for (int r = 0; r < rows; r++) kv_spec_to_domain(st->spec, q + (size_t)r * c->head_dim, c->head_dim);
    }
}

void kv_cache_query_to_domain(const KvCache *c, int layer, int kv_head, float *q) {
    kv_cache_queries_to_domain(c, layer, kv_head, q, 1);
}

void kv_cache_output_from_domain(const KvCache *c, int layer, int kv_head, float *out) {
    const KvStore *st = &c->values[layer];
    if (st->coefficient_reads) {
        const KvBase *b = &st->head_specs[kv_head].base;
        b->codec->coefficients(b, out, c->head_dim, 1, KV_FROM_INNER);
    } else if (!st->plain) {
        kv_spec_from_domain(st->spec, out, c->head_dim);
    }
}

static void read_row(const KvCache *c, const KvStore *st, int head, int pos, float *out) {
    float buf[KV_MAX_HEAD_DIM];
    if (st->coefficient_reads) {   /* every position is quantized: the decoded row itself */
        kv_spec_decode(&st->head_specs[head], head_units(st, head), c->head_dim, pos, 1, out);
        return;
    }
    const float *row = kv_cache_rows(c, st, head, pos, 1, kv_cache_quantized_end(st, c->len), buf);
    memcpy(out, row, (size_t)c->head_dim * sizeof(float));
    if (!st->plain && !st->natural_reads) kv_spec_from_domain(st->spec, out, c->head_dim);
}

void kv_cache_read_key(const KvCache *c, int layer, int head, int pos, float *out) {
    read_row(c, &c->keys[layer], head, pos, out);
}

void kv_cache_read_value(const KvCache *c, int layer, int head, int pos, float *out) {
    read_row(c, &c->values[layer], head, pos, out);
}

/* ---- entropy bits per value (SCHEMES.md §9) ---- */

static KvStreamCounts *counts_of(const KvCodeCounts *e, int side, int layer) { return &e->stores[side * e->n_layers + layer]; }

static int counts_store_init(KvStreamCounts *sc, const KvCache *c, const KvStore *st, size_t *codes_len) {
    const KvBase *b = &st->spec->base;
    int d = c->head_dim, param_bits = 0;
    sc->stored_bits = st->plain ? 32.0 : kv_spec_stored_bits(st->spec, d);
    if (st->plain || !b->codec->code_layout) return 0;
    b->codec->code_layout(b, d, &sc->slots, &sc->symbols, &param_bits);
    sc->unit_param_bits = param_bits + 24.0 * b->rows * st->spec->outliers;
    size_t len = (size_t)b->rows * (size_t)sc->slots;
    if (len > *codes_len) *codes_len = len;
    sc->counts = calloc((size_t)c->n_kv_heads * sc->slots * sc->symbols, sizeof *sc->counts);
    return sc->counts ? 0 : -1;
}

int kv_code_counts_init(KvCodeCounts *e, const KvCache *c, Error *err) {
    memset(e, 0, sizeof *e);
    e->n_layers = c->n_layers;
    e->n_kv_heads = c->n_kv_heads;
    e->stores = calloc(2 * (size_t)c->n_layers, sizeof *e->stores);
    size_t codes_len = 1;
    int bad = !e->stores;
    for (int side = 0; side < 2 && !bad; side++)
        for (int l = 0; l < c->n_layers && !bad; l++)
            bad = counts_store_init(counts_of(e, side, l), c, side ? &c->values[l] : &c->keys[l], &codes_len);
    if (!bad) bad = !(e->codes = malloc(codes_len * sizeof *e->codes));
    if (!bad) return 0;
    kv_code_counts_free(e);
    return error_set(err, "KV cache: out of memory for the code counts");
}

void kv_code_counts_free(KvCodeCounts *e) {
    for (int i = 0; e->stores && i < 2 * e->n_layers; i++) free(e->stores[i].counts);
    free(e->stores);
    free(e->codes);
    memset(e, 0, sizeof *e);
}

/* One store's codes at positions [S, Q(len)) counted, its other positions at 16 bits. */
static void count_store(KvCodeCounts *e, int side, KvStreamCounts *sc, const KvCache *c, const KvStore *st) {
    int d = c->head_dim, n = c->len, g = st->group;
    double per_head = (double)n * d;
    e->values[side] += per_head * c->n_kv_heads;
    if (st->plain) {
        e->fixed_bits[side] += per_head * c->n_kv_heads * sc->stored_bits;
        return;
    }
    int quantized = kv_cache_quantized_end(st, n) - sinks_of(st);
    if (quantized < 0) quantized = 0;
    double full = (double)(n - quantized) * d * 16.0;
    if (!sc->slots) {
        e->fixed_bits[side] += c->n_kv_heads * (full + (double)quantized * d * sc->stored_bits);
        return;
    }
    const KvBase *b = &st->spec->base;
    size_t units = (size_t)(quantized / g), row_codes = (size_t)sc->slots;
    e->fixed_bits[side] += c->n_kv_heads * (full + (double)units * sc->unit_param_bits);
    for (int h = 0; h < c->n_kv_heads; h++) {
        unsigned *counts = sc->counts + (size_t)h * sc->slots * sc->symbols;
        for (size_t u = 0; u < units; u++) {
            b->codec->codes(b, head_units(st, h) + u * st->unit_bytes, d, e->codes);
            for (size_t i = 0; i < (size_t)g * row_codes; i++) counts[(i % row_codes) * sc->symbols + e->codes[i]]++;
        }
    }
}

void kv_code_counts_add(KvCodeCounts *e, const KvCache *c) {
    for (int l = 0; l < c->n_layers; l++) {
        count_store(e, 0, counts_of(e, 0, l), c, &c->keys[l]);
        count_store(e, 1, counts_of(e, 1, l), c, &c->values[l]);
    }
}

double kv_stream_entropy_bits(const unsigned *counts, int symbols) { return rans_stream_entropy_bits(counts, symbols); }

static double side_code_bits(const KvCodeCounts *e, int side) {
    double bits = 0;
    for (int l = 0; l < e->n_layers; l++) {
        const KvStreamCounts *sc = counts_of(e, side, l);
        for (size_t k = 0; k < (size_t)e->n_kv_heads * sc->slots; k++)
            bits += kv_stream_entropy_bits(sc->counts + k * sc->symbols, sc->symbols);
    }
    return bits + e->fixed_bits[side];
}

void kv_code_counts_total(const KvCodeCounts *e, int side, double *bits, double *values) {
    *bits = *values = 0;
    for (int s = 0; s < 2; s++)
        if (side < 0 || side == s) *bits += side_code_bits(e, s), *values += e->values[s];
}

double kv_code_counts_bits(const KvCodeCounts *e, int side) {
    double bits, values;
    kv_code_counts_total(e, side, &bits, &values);
    return values > 0 ? bits / values : 0;
}

