/* model/attention.h: attention inside a layer of the forward pass (model/attention.c) — the
 * batch's keys and values into the KV cache, its queries against the cache, in the codec's
 * domain and out of it — and the sizes of the RunState buffers attention uses. Internal to
 * model/: callers outside it use forward and forward_attention_replay (model/model.h). */
#ifndef KVQ_ATTENTION_H
#define KVQ_ATTENTION_H

#include "model/model.h"

/* Floats of attention's buffers for n_threads threads at this config, in double: a config can
 * ask for more than size_t holds (runstate_init refuses it before allocating). */
double attention_buffer_floats(const Config *c, int n_threads);

/* Allocates s->att (s->n_threads threads' scratch) and, for batches of more than one block of
 * tokens, the blocks shared by a batch's work items (s->att_blocks, s->att_views). 0, or -1
 * out of memory (runstate_free frees what was allocated). */
int attention_buffers_alloc(RunState *s, const Config *c, int max_batch);

/* The middle of a layer, for the T tokens at positions pos..pos+T-1: their keys s->k (before
 * RoPE: the cache applies it at s->rope_cs) and values s->v written into layer l of the cache
 * and committed, then the attention of the queries s->q (rows from..T-1, after RoPE, row 0
 * first) into s->xb2 ([T - from][dim], natural order). Queries are moved into the keys' read
 * domain and outputs out of the values' (model/kvcache.h); s->q is left in the domain. */
void cached_attention(const Model *m, RunState *s, KvCache *cache, int l, int T, int pos, int from);

#endif
