/* model/kvcache.h: the KV cache as explicit arrays, quantized as it is written.
 *
 * Each layer has a key scheme and a value scheme (quant/scheme.h: a base codec and modifiers).
 * For one layer and side the cache holds, per KV head:
 *   units   the stored form: codec units for positions S, S+1, ... (S = sinks; a token-axis
 *           base packs G positions into one unit), written by the codec, read by attention
 *           block by block (never expanded whole);
 *   sinks   positions 0..S-1 (+sinkS), full precision;
 *   window  the most recent positions (+resR, and a token-axis base's incomplete group), full
 *           precision, in a ring of R + G + max_batch rows.
 * Full precision means float32: the values the model computed (a compressed file stores them
 * as fp16; see model/formats/compress.c). Which positions a query reads quantized follows SCHEMES.md
 * §1 and §4: with n positions written, [S, kv_cache_quantized_end(n)) from the units, the rest
 * from sinks and window. A quantized value is made once, from the computed float32 row, and
 * never changes.
 *
 * Reading. Rows come back in the layer's *read domain*: the scheme's domain (quant/scheme.h:
 * llama.cpp key order, Hadamard rotation, the codec's inner rotation), or the natural order for
 * +prerope keys, which are decoded and then rotated by RoPE at their position. Attention moves
 * each query into the key domain and each output back from the value domain once
 * (kv_cache_query_to_domain, kv_cache_output_from_domain): the same numbers as decoding every
 * row to the natural order, at O(head_dim log head_dim) per query and head.
 *
 * Coefficient reads. A codec whose rows are an affine map of stored coefficients (pcaB, per KV
 * head: quant/pca.h) is read as its coefficients when every position a query reads is quantized
 * (no sinks, no window) and keys are not +prerope: the key domain's query is U (q / sqrt(w)) and
 * scores every row by the same constant less than q does (softmax ignores it), and the value
 * domain's output goes back through mu sum(p) + U^T y, divided by sqrt(w), once (a component
 * of 0 bits reads 1 in every row and so carries sum(p): quant/pca.h's unit slot; 1 where there is none). That is O(d) a row
 * instead of decoding each at O(d^2) for every query step. +prerope pca keys cannot move the
 * query (RoPE turns it by the row's own position): they are decoded straight into transposed
 * blocks (the codec's decode_t64) and rotated there; for attention's bf16 pairs a block in the
 * block layout is decoded at bf16 working precision (KV_BLOCK_DECODED_T64_BF16: twice the
 * multiply-adds per instruction, for keys that are rounded to bf16 next). Both read a codec's block layout where it
 * has one (pca: each 64 rows' codes component by component, KvCodec.block_codes), a copy of the
 * units that kv_cache_commit keeps: twice the packed bytes, still a fraction of fp32's. */
#ifndef KVQ_KVCACHE_H
#define KVQ_KVCACHE_H

#include <stddef.h>
#include "quant/scheme.h"
#include "model/config.h"
#include "model/formats/calibration.h"

/* One layer's keys or values. */
typedef struct {
    const KvSpec *spec;        /* the layer's spec: head_specs[0] */
    KvSpec *head_specs;        /* [n_kv_heads]: copies whose base holds that head's fitted table (SCHEMES.md
                                  §8, from the calibration; the same spec for every head otherwise) */
    int plain;                 /* fp32 without modifiers: units are the rows, read in place */
    int natural_reads;         /* +prerope keys: rows are read in the natural order, RoPE applied */
    int coefficient_reads;     /* rows are read as the codec's coefficients (see Coefficient reads) */
    int transposed_rope;       /* +prerope keys decoded into transposed blocks and rotated there */
    int group;                 /* rows per unit: G for a token-axis base, else 1 */
    size_t unit_bytes;
    size_t head_units;         /* units per KV head */
    unsigned char *units;      /* [n_kv_heads][head_units][unit_bytes]; row r is position S + r */
    float *sinks;              /* [n_kv_heads][S][head_dim], or NULL */
    float *window;             /* [n_kv_heads][window_rows][head_dim], position p at p % window_rows, or NULL */
    int window_rows;
    int encoded_end;           /* token axis: positions [S, encoded_end) are in units */
    float *pack_rows;          /* token axis, per head: 2 * G * head_dim floats, one group and the encoder's scratch */
    unsigned char *blocks;     /* [n_kv_heads][head_blocks][64 * unit_bytes]: the units of each 64 rows in the
                                  codec's block layout (block_codes), for its fast reads; or NULL */
    size_t head_blocks;
    int blocks_end;            /* rows [0, blocks_end) of the units are in blocks (kv_cache_commit) */
} KvStore;

typedef struct {
    int n_layers, n_kv_heads, head_dim, max_seq, max_batch;
    KvLayered k_scheme, v_scheme;   /* bound to this model: kv_layered_bind */
    KvStore *keys, *values;         /* [n_layers] */
    float *rope_cos_sin;            /* [max_seq][head_dim] when a key layer is +prerope, else NULL */
    float *rope_by_angle;           /* the same transposed, [head_dim][max_seq]: positions innermost */
    int len;                        /* positions written so far (the caller advances it) */
} KvCache;

/* The scheme of a side no flag names, and of a cache made without a scheme. */
#define KV_CACHE_DEFAULT_SCHEME "fp32"

/* How a cache stores what it is given: LAYERED schemes parsed for keys (k) and for values (v),
 * and the calibration holding the tables of their fitted bases (NULL: none; a fitted base is
 * then refused, as it is when calib lacks its fit). eval/calibration.h makes one from a run's
 * flags. */
typedef struct {
    KvLayered k, v;
    const Calibration *calib;
} KvCacheScheme;

/* A cache for max_seq positions, written in batches of at most max_batch positions, storing as
 * scheme says (NULL: KV_CACHE_DEFAULT_SCHEME for both sides, no calibration); the schemes are
 * checked against cfg here. rope_inv_freq (the model's, [head_dim / 2]) is needed when a key
 * layer is +prerope. */
int kv_cache_init(KvCache *c, const Config *cfg, int max_seq, int max_batch, const KvCacheScheme *scheme,
                  const float *rope_inv_freq, Error *err);
void kv_cache_free(KvCache *c);
/* Turns off coefficient reads and transposed RoPE (see Coefficient reads): attention then
 * decodes every row, as it did before them; for comparing the two (tests, bench). */
void kv_cache_decoded_reads(KvCache *c);

/* Stores position pos of one layer: k and v are [n_kv_heads * head_dim]. k is before RoPE
 * when cos_sin (the position's rope_angles) is given — the cache applies RoPE, or for +prerope
 * keeps the key as it is — and already rotated when cos_sin is NULL. Positions of one batch
 * may be written in parallel; then kv_cache_commit. */
void kv_cache_write(KvCache *c, int layer, int pos, const float *k, const float *v, const float *cos_sin);
/* After the writes of positions [first, end) of a layer: packs the token-axis groups they
 * completed. Writing again from an earlier position (a new window) starts over from there. */
void kv_cache_commit(KvCache *c, int layer, int first, int end);

/* Positions [S, end) that a query reads quantized when n positions are written. */
int kv_cache_quantized_end(const KvStore *st, int n);
/* The store of one layer's keys or values. */
static inline const KvStore *kv_cache_keys(const KvCache *c, int layer) { return &c->keys[layer]; }
static inline const KvStore *kv_cache_values(const KvCache *c, int layer) { return &c->values[layer]; }

/* Rows p0 .. p0+np-1 of one KV head in the read domain, as a query would see them that reads
 * positions below q_end quantized: a pointer into the cache (plain fp32), else decoded into
 * buf [np][head_dim]. */
const float *kv_cache_rows(const KvCache *c, const KvStore *st, int head, int p0, int np, int q_end, float *buf);
/* The same rows as a transposed block kt[i * 64 + p] (np <= 64, zeros beyond) when the codec
 * has a direct way and every row is quantized; else 0. bf16: the keys are for attention's bf16
 * pairs, so a block in the block layout may be decoded at that precision
 * (KV_BLOCK_DECODED_T64_BF16); 0: the quantized rows' values, bit for bit. */
int kv_cache_rows_t64(const KvCache *c, const KvStore *st, int head, int p0, int np, int q_end, int bf16, float *kt);

/* One query row of a query head that reads KV head kv_head into the key read domain of a
 * layer, one output row of such a head back from the value read domain, in place. */
void kv_cache_query_to_domain(const KvCache *c, int layer, int kv_head, float *q);
/* The same for `rows` query rows of KV head kv_head side by side (head_dim floats each): a pca
 * key layer moves them together, sharing its basis's transposed tiles. */
void kv_cache_queries_to_domain(const KvCache *c, int layer, int kv_head, float *q, int rows);
void kv_cache_output_from_domain(const KvCache *c, int layer, int kv_head, float *out);

/* One row as attention sees it with c->len positions written, in the natural order. */
void kv_cache_read_key(const KvCache *c, int layer, int head, int pos, float *out);
void kv_cache_read_value(const KvCache *c, int layer, int head, int pos, float *out);

/* Bytes of one position's stored form over every layer, side and KV head (units / group). */
double kv_cache_position_bytes(const KvCache *c);
/* Bytes the cache holds (units, their block layout where a codec has one, sinks, windows). */
size_t kv_cache_bytes(const KvCache *c);

/* ---- entropy bits per value (SCHEMES.md §9) ----
 * The codes a cache holds, counted per stream (layer, side, KV head, slot: quant/codec.h's
 * code_layout), added up over a run (one call after each window), and the figure they give:
 * (sum over streams of sum_s -n_s log2(n_s / N) + every unit's parameters at their stored bits +
 * full-precision positions (sinks, the window, a token-axis base's incomplete group) at 16 bits)
 * / values cached. A base without code streams (fp16, bf16) counts at its stored bits, plain
 * fp32 at 32, as effective bits do (kv_spec_effective_bits). Codebooks are reported apart. */
typedef struct {
    int slots, symbols;        /* of the codec's code layout; slots = 0: no code streams */
    double unit_param_bits;    /* a unit's parameters: the codec's and +out's (fp16 + u8 index each) */
    double stored_bits;        /* per quantized value, for a base without code streams */
    unsigned *counts;          /* [n_kv_heads][slots][symbols] */
} KvStreamCounts;

typedef struct {
    int n_layers, n_kv_heads;
    KvStreamCounts *stores;    /* [2][n_layers]: keys, then values */
    double values[2];          /* values cached, keys and values */
    double fixed_bits[2];      /* bits counted at their stored size: parameters, full precision, float bases */
    unsigned short *codes;     /* one unit's codes */
} KvCodeCounts;

/* Counters for the streams of c's schemes, all zero. 0, or -1 (out of memory). */
int kv_code_counts_init(KvCodeCounts *e, const KvCache *c, Error *err);
void kv_code_counts_free(KvCodeCounts *e);
/* Adds what the cache holds with c->len positions written (eval/perplexity.c: a window's end). */
void kv_code_counts_add(KvCodeCounts *e, const KvCache *c);
/* The bits (code streams' entropy + bits at stored size) and the values counted, of the keys
 * (side 0), the values (1), or both together (-1). */
void kv_code_counts_total(const KvCodeCounts *e, int side, double *bits, double *values);
/* Their ratio: entropy bits per value; 0 when nothing was counted. */
double kv_code_counts_bits(const KvCodeCounts *e, int side);
/* The zeroth-order entropy of one stream in bits: sum over symbols of -n_s log2(n_s / N). */
double kv_stream_entropy_bits(const unsigned *counts, int symbols);

#endif
