/* eval/layer_replay.h: the per-layer error of one window (eval/layer_error.h), measured by
 * replaying the fp32 run's layer inputs through a quantized cache.
 *
 * The fp32 baseline's forward pass over a window is tapped (model/model.h's ForwardTap): each
 * layer's keys before RoPE and values of every position, and its queries after RoPE and
 * attention outputs o. For a scheme, each layer then gets exactly those keys and values written
 * into the scheme's cache, batch by batch as the forward pass writes them, and attention runs
 * on those queries (model/model.h's forward_attention_replay): o_q. Every layer sees the fp32
 * run's inputs, so its error is its own, not what the layers below it left; an fp32 cache
 * gives o_q = o bit for bit.
 *
 * Cost, per window: memory for the tapped rows, n_layers x ctx x (2 kv_dim + 2 dim) floats
 * (mini-llama-brown at ctx 1024: 12 MiB; TinyLlama at ctx 2048: 830 MiB); per scheme, one
 * cache write of every position in every layer (what the scheme's own pass writes) and the
 * attention of the rows the baseline ran in every layer (the attention part of one forward
 * pass): no matmul, no lm_head, no scoring. */
#ifndef KVQ_LAYER_REPLAY_H
#define KVQ_LAYER_REPLAY_H

#include "model/model.h"
#include "eval/layer_error.h"

typedef struct {
    int n_layers, ctx, batch;
    size_t dim, kv_dim;
    float *k, *v;          /* [n_layers][ctx][kv_dim]: the baseline's keys before RoPE and values */
    float *q, *o;          /* [n_layers][ctx][dim]: its queries after RoPE and attention outputs */
    float *out;            /* [batch][dim]: one replayed batch's outputs */
    ForwardTap tap;
} LayerReplay;

/* For windows of up to ctx positions run in batches of batch. A model with more than
 * LAYER_ERR_MAX_LAYERS layers is refused. */
int layer_replay_init(LayerReplay *r, const Config *c, int ctx, int batch, Error *err);
void layer_replay_free(LayerReplay *r);

/* Before the baseline's forward call of the window's positions pos..: s's tap pointed at the
 * held rows from pos on. layer_replay_untap after the window. */
void layer_replay_tap(LayerReplay *r, RunState *s, int pos);
void layer_replay_untap(RunState *s);

/* The held window of n positions replayed through kv (any scheme; its content is replaced),
 * batch by batch as the baseline ran it: the relative error of positions first..last-1 (the
 * scored ones, the logits of position p predicting target p + 1) added into e, per layer. */
void layer_replay_run(LayerReplay *r, const Model *m, RunState *s, KvCache *kv, int n, int first, int last,
                      LayerErrorSums *e);

#endif
