/* eval/layer_resume.h: a scheme's pass that starts from the fp32 baseline's residual stream at the
 * first layer where the scheme differs from fp32 (a sensitivity's cells, a sweep's "fp32;L:c").
 *
 * Why it is exact: in a window's pass, layer l reads only the residual stream x at its input, its
 * own cache layer (written by this pass from position 0) and the positions' RoPE angles. A scheme
 * whose layers < L keep keys and values as plain fp32 (kv_spec_is_fp32: the cache holds the
 * computed rows, read in place) computes layers 0..L-1 exactly as the fp32 baseline does, batch by
 * batch, so its x at layer L's input is the baseline's, to the bit; and no layer >= L reads the
 * cache of a layer < L. So the baseline's pass holds x at the input of the layers some scheme
 * starts at, for every position of the window, and that scheme's pass, batch by batch as before
 * (the same batches, the same calls), puts the held rows into x and runs layers L..n_layers-1
 * only. The numbers are those of the whole pass; the pass costs (n_layers - L) / n_layers of its
 * layers (the lm_head and the scoring unchanged). A scheme that is fp32 in every layer starts at
 * "layer n_layers", the last layer's output: only the lm_head runs.
 *
 * Memory: one held layer is ctx x dim floats a window (TinyLlama, dim 2048, at ctx 1024: 8 MiB; a
 * sensitivity holds layers 1..n_layers-1, 21 of them: 176 MiB; at ctx 2048, 352 MiB). Only layers
 * where some scheme starts are held, and at most max_bytes of them: beyond that, the layers held
 * are the ones that save the most layer passes (layer_resume_choose), and a scheme starts at the
 * highest held layer not above its first non-fp32 one (0: the whole pass). */
#ifndef KVQ_LAYER_RESUME_H
#define KVQ_LAYER_RESUME_H

#include "model/model.h"

/* PplOptions.layer_resume_max_bytes 0: this much (1 GiB) of held layers at most. */
#define LAYER_RESUME_DEFAULT_MAX_BYTES ((size_t)1 << 30)

typedef struct {
    int n_layers, ctx;
    size_t dim;
    int n_schemes;
    int *start;        /* [n_schemes]: the layer scheme i's pass starts at, 0..n_layers (0: the whole pass) */
    float **x;         /* [n_layers + 1]: x at layer l's input ([ctx][dim], position p at row p), NULL when
                          not held; x[n_layers] the last layer's output (its rows from logits_from on) */
    size_t bytes;      /* of the held layers */
} LayerResume;

/* The first layer whose keys or values are not plain fp32 in scheme (NULL: the fp32 cache), or
 * n_layers when there is none. */
int layer_resume_first_quantized(const KvCacheScheme *scheme, int n_layers);

/* Which of the layers 1..n_layers to hold, when at most k can be: need[L] schemes start their
 * difference at layer L (need[0..n_layers]), a scheme starts at the highest held layer <= its L,
 * and the layers held are those that make the sum of the starts (the layer passes saved) the
 * largest (all of them when k allows). held[0..n_layers] gets 1 for a held layer; with no memory
 * for the choice, none is held (every pass whole: slower, the same numbers). */
void layer_resume_choose(const int *need, int n_layers, int k, unsigned char *held);

/* For a session of n_schemes schemes over windows of up to ctx positions: each scheme's start,
 * and room for the layers held (at most max_bytes; 0: LAYER_RESUME_DEFAULT_MAX_BYTES). With no
 * scheme to start past layer 0, nothing is held (r->bytes 0). -1: out of memory. */
int layer_resume_init(LayerResume *r, const Config *c, int ctx, const KvCacheScheme *const *schemes, int n_schemes,
                      size_t max_bytes, Error *err);
void layer_resume_free(LayerResume *r);

/* The baseline's forward call for positions pos..pos+T-1 of the window (forward's arguments):
 * forward, holding x at the input of each held layer, and the last layer's output when held. */
void layer_resume_forward_baseline(const LayerResume *r, const Model *m, RunState *s, KvCache *kv, const int *tokens,
                                   int T, int pos, int logits_from);
/* Scheme i's forward call for the same positions, after the baseline's pass of the same window:
 * from its start layer on, on the held x (forward itself when its start is 0). Returns the layers
 * it ran (n_layers - start). */
int layer_resume_forward_scheme(const LayerResume *r, int i, const Model *m, RunState *s, KvCache *kv,
                                const int *tokens, int T, int pos, int logits_from);

#endif
