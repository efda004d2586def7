/* eval/layer_replay.c: the per-layer error by replaying the fp32 run's layer inputs (see
 * layer_replay.h). */
#include "eval/layer_replay.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int layer_replay_init(LayerReplay *r, const Config *c, int ctx, int batch, Error *err) {
    memset(r, 0, sizeof *r);
    if (c->n_layers > LAYER_ERR_MAX_LAYERS)
        return error_set(err, "the per-layer error takes models of at most %d layers, not %d", LAYER_ERR_MAX_LAYERS,
                         c->n_layers);
    r->n_layers = c->n_layers;
    r->ctx = ctx;
    r->batch = batch;
    r->dim = (size_t)c->dim;
    r->kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t rows = (size_t)c->n_layers * (size_t)ctx;
    r->k = malloc(rows * r->kv_dim * sizeof(float));
    r->v = malloc(rows * r->kv_dim * sizeof(float));
    r->q = malloc(rows * r->dim * sizeof(float));
    r->o = malloc(rows * r->dim * sizeof(float));
    r->out = malloc((size_t)batch * r->dim * sizeof(float));
    if (!r->k || !r->v || !r->q || !r->o || !r->out) {
        double mib = (double)rows * (2 * r->kv_dim + 2 * r->dim) * sizeof(float) / 1048576.0;
        layer_replay_free(r);
        return error_set(err, "out of memory for the per-layer error's rows of one window (%.0f MiB)", mib);
    }
    return 0;
}

void layer_replay_free(LayerReplay *r) {
    free(r->k);
    free(r->v);
    free(r->q);
    free(r->o);
    free(r->out);
    memset(r, 0, sizeof *r);
}

void layer_replay_tap(LayerReplay *r, RunState *s, int pos) {
    r->tap.k_pre = r->k + (size_t)pos * r->kv_dim;
    r->tap.v = r->v + (size_t)pos * r->kv_dim;
    r->tap.q = r->q + (size_t)pos * r->dim;
    r->tap.att = r->o + (size_t)pos * r->dim;
    r->tap.layer_rows = r->ctx;
    s->tap = &r->tap;
}

void layer_replay_untap(RunState *s) { s->tap = NULL; }

/* ||a - b|| / ||b|| over n floats, in double. A zero reference with a zero difference is 0. */
static double relative_error(const float *a, const float *b, size_t n) {
    double diff = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        ref += (double)b[i] * (double)b[i];
    }
    return diff == 0 ? 0 : sqrt(diff / (ref > 0 ? ref : 1e-300));
}

void layer_replay_run(LayerReplay *r, const Model *m, RunState *s, KvCache *kv, int n, int first, int last,
                      LayerErrorSums *e) {
    e->n_layers = r->n_layers;
    kv->len = 0;
    for (int pos = 0; pos < n; pos += r->batch) {
        int T = n - pos < r->batch ? n - pos : r->batch;
        /* the batch's measured rows: t in [from, to) */
        int from = first - pos < 0 ? 0 : first - pos > T ? T : first - pos;
        int to = last - pos < from ? from : last - pos > T ? T : last - pos;
        for (int l = 0; l < r->n_layers; l++) {
            /* the rows whose attention the baseline ran: all of them but in the last layer, where
             * forward skips the rows before the first scored one (their logits are not wanted).
             * The same rows in the same calls give an fp32 cache's outputs bit for bit: a call of
             * fewer rows may take another path through attention (blocks shared or not). */
            int r0 = l == r->n_layers - 1 ? from : 0;
            size_t row = (size_t)l * r->ctx + (size_t)pos;
            const AttentionReplay replay = {.layer = l, .k_pre = r->k + row * r->kv_dim, .v = r->v + row * r->kv_dim,
                                            .q = r->q + (row + (size_t)r0) * r->dim, .T = T, .pos = pos, .from = r0,
                                            .out = r->out};
            forward_attention_replay(m, s, kv, &replay);
            for (int t = from; t < to; t++)
                layer_error_add(e, l, relative_error(r->out + (size_t)(t - r0) * r->dim,
                                                     r->o + (row + (size_t)t) * r->dim, r->dim));
        }
        kv->len = pos + T;
        e->rows += to - from;
    }
}
