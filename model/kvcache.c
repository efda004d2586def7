/* model/kvcache.c: allocation and the single write/read path of the KV cache. */
#include "model/kvcache.h"
#include "model/hugepages.h"
#include <stdlib.h>
#include <string.h>

static int check_scheme(const KvScheme *s, int head_dim, Error *err) {
    if (s->group_size > 0 && head_dim % s->group_size != 0)
        return error_set(err, "KV scheme %s: group size %d does not divide head size %d",
                         s->name, s->group_size, head_dim);
    return 0;
}

int kv_cache_init(KvCache *c, const Config *cfg, int max_seq, const KvScheme *k_scheme,
                  const KvScheme *v_scheme, Error *err) {
    memset(c, 0, sizeof *c);
    if (check_scheme(k_scheme, cfg->head_dim, err) || check_scheme(v_scheme, cfg->head_dim, err))
        return -1;
    c->n_layers = cfg->n_layers;
    c->n_kv_heads = cfg->n_kv_heads;
    c->head_dim = cfg->head_dim;
    c->max_seq = max_seq;
    c->k_scheme = k_scheme;
    c->v_scheme = v_scheme;
    c->k_row_bytes = k_scheme->packed_bytes(k_scheme, (size_t)cfg->head_dim);
    c->v_row_bytes = v_scheme->packed_bytes(v_scheme, (size_t)cfg->head_dim);
    size_t rows = (size_t)cfg->n_layers * cfg->n_kv_heads * (size_t)max_seq;
    c->k = huge_calloc(rows, c->k_row_bytes);   /* attention streams it: see model/hugepages.c */
    c->v = huge_calloc(rows, c->v_row_bytes);
    if (!c->k || !c->v) {
        kv_cache_free(c);
        return error_set(err, "KV cache: out of memory for %d positions", max_seq);
    }
    return 0;
}

void kv_cache_free(KvCache *c) {
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

void kv_cache_write(KvCache *c, int layer, int pos, const float *k, const float *v) {
    for (int h = 0; h < c->n_kv_heads; h++) {
        const float *kh = k + (size_t)h * c->head_dim;
        const float *vh = v + (size_t)h * c->head_dim;
        c->k_scheme->quantize(c->k_scheme, kh, (size_t)c->head_dim, kv_key_row(c, layer, h, pos));
        c->v_scheme->quantize(c->v_scheme, vh, (size_t)c->head_dim, kv_value_row(c, layer, h, pos));
    }
}

void kv_cache_read_key(const KvCache *c, int layer, int head, int pos, float *out) {
    c->k_scheme->dequantize(c->k_scheme, kv_key_row(c, layer, head, pos), (size_t)c->head_dim, out);
}

void kv_cache_read_value(const KvCache *c, int layer, int head, int pos, float *out) {
    c->v_scheme->dequantize(c->v_scheme, kv_value_row(c, layer, head, pos), (size_t)c->head_dim, out);
}
