/* model/model.h: a Llama model as plain structs — Config, Weights (views into the
 * mmapped safetensors file, in the file's dtype; copies of the tensors it leaves misaligned),
 * and the forward pass entry points. */
#ifndef KVQ_MODEL_H
#define KVQ_MODEL_H

#include "model/config.h"
#include "model/formats/safetensors.h"
#include "model/kvcache.h"
#include "model/kernels/matrix.h"

/* Every weight is a Matrix (model/kernels/matrix.h): a view in the file's dtype. */
typedef struct {
    Matrix attn_norm;     /* input_layernorm [dim] */
    Matrix wq, wk, wv, wo;/* q_proj [dim, dim], k_proj/v_proj [kv_dim, dim], o_proj [dim, dim] */
    Matrix mlp_norm;      /* post_attention_layernorm [dim] */
    Matrix w_gate, w_up;  /* [hidden, dim] */
    Matrix w_down;        /* [dim, hidden] */
} LayerWeights;

typedef struct {
    Matrix embed;         /* embed_tokens [vocab, dim] */
    LayerWeights *layers;
    Matrix final_norm;    /* model.norm [dim] */
    Matrix lm_head;       /* [vocab, dim]; the embedding when tied */
} Weights;

typedef struct {
    Config config;
    Weights weights;
    SafeTensors file;     /* owns the mapping the weights point into */
    void *owned_weights;  /* or this buffer: every weight of model_init_random; a loaded file's
                             tensors that were misaligned for their dtype (NULL when none) */
    float *rope_inv_freq; /* [head_dim/2] */
    MatmulPrecision precision;  /* MATMUL_EXACT after loading */
} Model;

/* Loads dir/config.json and dir/model.safetensors and binds every weight by its HF name,
 * checking dtypes and shapes against the config. */
int model_load(Model *m, const char *dir, Error *err);
/* Same with explicit files (tests, bench with random weights). */
int model_load_files(Model *m, const char *config_path, const char *weights_path, Error *err);
void model_free(Model *m);
/* Fills m->rope_inv_freq from the config (HF's float32 formula); model_load calls it. */
int model_init_rope(Model *m, Error *err);

/* A model of config_path's shape with seeded random weights of dtype (F32, F16 or BF16) in one
 * owned buffer, bound through the same Matrix views (benchmarks: no download needed). Weights are
 * uniform in +-0.05 (norms 1), so activations stay finite through every layer. */
int model_init_random(Model *m, const char *config_path, DType dtype, uint64_t seed, Error *err);

/* Copies of each layer's queries after RoPE and keys before RoPE, rows 0..T-1 of a forward
 * call: what calibration reads besides the cache (eval/calibrate.c); with values and attention
 * outputs too, what the per-layer error replays (eval/layer_replay.c). NULL in every other run.
 * Row t of layer l is at (l * layer_rows + t) * width; a NULL buffer is not written. */
typedef struct {
    float *q;       /* [n_layers][layer_rows][dim] */
    float *k_pre;   /* [n_layers][layer_rows][n_kv_heads * head_dim] */
    float *v;       /* [n_layers][layer_rows][n_kv_heads * head_dim] (may be NULL) */
    float *att;     /* [n_layers][layer_rows][dim]: attention outputs before o_proj, in the natural
                       order (the rows whose attention runs: all but the last layer's skipped rows) */
    int layer_rows; /* 0: max_batch */
} ForwardTap;

/* Scratch buffers for a batch of up to max_batch tokens. One per concurrent forward pass. */
typedef struct {
    int max_batch;
    float *x, *xb, *xb2;      /* [T, dim] residual stream and normalized input / attention output */
    float *q, *k, *v;         /* [T, dim], [T, kv_dim], [T, kv_dim] */
    uint32_t *q2;             /* [T, dim / 2]: q after RoPE as bf16 pairs, when attention reads pairs */
    float *hb, *hb2;          /* [T, hidden] */
    float *att;               /* per thread: attention scores and decoded cache rows (attention.c) */
    float *att_blocks;        /* a layer's keys and values, block by block, for all threads (attention.c) */
    const void **att_views;   /* [n_kv_heads][blocks][2]: each block's keys and values as read */
    float *logits;            /* [T, vocab] */
    float *rope_cs;           /* [T, head_dim]: each token's RoPE cos and sin (rope_angles) */
    float *norm_w;            /* [dim]: the current norm's weights widened to f32 (rmsnorm) */
    void *mm_scratch;         /* matmul_scratch_bytes(max_batch, dim + hidden) */
    int n_threads;
    ForwardTap *tap;          /* NULL, or where forward copies each layer's queries and keys */
} RunState;

int runstate_init(RunState *s, const Config *c, int max_batch, Error *err);
void runstate_free(RunState *s);

/* Runs tokens[0..T) at positions pos..pos+T-1, writing their keys and values into the
 * cache. Logits of tokens logits_from..T-1 land in s->logits, row 0 first ([T - logits_from,
 * vocab]): 0 gives every row, T - 1 only the last (generation), T none (cache filling).
 * The last layer computes only what those rows need (keys and values for all), as llama.cpp
 * does, so hidden states of earlier rows are not left in s->x.
 * T <= s->max_batch, pos + T <= cache->max_seq and <= config.max_seq_len (scratch is sized
 * by it). m->precision picks exact f32 or bf16-activation matmuls (model/kernels/kernels.h). */
void forward(const Model *m, RunState *s, KvCache *cache, const int *tokens, int T, int pos, int logits_from);

/* forward in its three steps, for a caller that holds or replaces the residual stream s->x between
 * layers (eval/layer_resume.h): forward_begin (each token's embedding into s->x, skipped when tokens
 * is NULL because the caller fills s->x; each position's RoPE angles), forward_layer for layers
 * l = first..n_layers-1 in order, forward_end (the cache's length, the logits). forward is these
 * with first = 0: the same arithmetic in the same order. */
void forward_begin(const Model *m, RunState *s, const int *tokens, int T, int pos);
void forward_layer(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int logits_from);
void forward_end(const Model *m, RunState *s, KvCache *cache, int T, int pos, int logits_from);

/* One layer's attention replayed on given inputs, as layer_forward runs it between the cache
 * write and o_proj (the per-layer error: eval/layer_replay.c): the keys before RoPE k_pre and
 * values v ([T][kv_dim]) of positions pos..pos+T-1 written into layer `layer` of the cache and
 * committed, then the attention of rows from..T-1 for the queries q ([T - from][dim], after
 * RoPE, natural order) into out ([T - from][dim], natural order). from <= T <= s->max_batch
 * (from = T: the cache write alone). */
typedef struct {
    int layer;
    const float *k_pre, *v;
    const float *q;
    int T, pos, from;
    float *out;
} AttentionReplay;

/* Uses s's scratch (its q, k, v, xb2 and RoPE rows are overwritten); model/attention.c. */
void forward_attention_replay(const Model *m, RunState *s, KvCache *cache, const AttentionReplay *r);

#endif
