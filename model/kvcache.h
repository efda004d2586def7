/* model/kvcache.h: the KV cache as explicit arrays.
 *
 * Layout: for each layer, keys and values are stored as rows of one token and one
 * KV head: k[layer][kv_head][position] -> a packed row of head_dim values in the
 * key scheme's format (quant/quant.h), likewise v with the value scheme. With the
 * "fp32" scheme a row is just head_dim floats. Every write goes through
 * kv_cache_write (the one place where values are quantized). Attention (model/forward.c)
 * decodes a block of rows at a time with the scheme's dequantize (int4 rows with a faster
 * decode of the same values) into a small buffer and runs its f32 kernels on it, so what
 * attention sees is exactly what the scheme kept, and the cache is never expanded whole. */
#ifndef KVQ_KVCACHE_H
#define KVQ_KVCACHE_H

#include <stddef.h>
#include "quant/quant.h"
#include "model/config.h"

typedef struct {
    int n_layers, n_kv_heads, head_dim, max_seq;
    const KvScheme *k_scheme, *v_scheme;
    size_t k_row_bytes, v_row_bytes;
    unsigned char *k, *v;  /* [n_layers][n_kv_heads][max_seq][row_bytes] */
    int len;               /* positions written so far (the caller advances it) */
} KvCache;

/* Allocates a cache for max_seq positions. Schemes must have group sizes dividing head_dim. */
int kv_cache_init(KvCache *c, const Config *cfg, int max_seq, const KvScheme *k_scheme,
                  const KvScheme *v_scheme, Error *err);
void kv_cache_free(KvCache *c);

/* The packed row of one layer, KV head and position. */
static inline unsigned char *kv_key_row(const KvCache *c, int layer, int head, int pos) {
    size_t i = ((size_t)layer * c->n_kv_heads + head) * c->max_seq + pos;
    return c->k + i * c->k_row_bytes;
}
static inline unsigned char *kv_value_row(const KvCache *c, int layer, int head, int pos) {
    size_t i = ((size_t)layer * c->n_kv_heads + head) * c->max_seq + pos;
    return c->v + i * c->v_row_bytes;
}

/* Stores one token's keys and values (each [n_kv_heads * head_dim], keys after RoPE). */
void kv_cache_write(KvCache *c, int layer, int pos, const float *k, const float *v);

/* Reads one row back as floats (what attention sees). */
void kv_cache_read_key(const KvCache *c, int layer, int head, int pos, float *out);
void kv_cache_read_value(const KvCache *c, int layer, int head, int pos, float *out);

#endif
