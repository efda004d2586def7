/* eval/layer_error.h: the per-layer error of the attention output, as sums that merge exactly
 * like TokenSums: for each layer l and each scored position, the relative error
 * ||o_q - o|| / ||o|| of the attention output (all heads, before o_proj) computed with the
 * quantized cache against the fp32 cache's, both on the fp32 run's inputs to that layer
 * (eval/layer_replay.h), so that one layer's error does not carry into the next. */
#ifndef KVQ_LAYER_ERROR_H
#define KVQ_LAYER_ERROR_H

#include <stdio.h>
#include "model/formats/error.h"
#include "model/formats/json.h"

#define LAYER_ERR_MAX_LAYERS 128   /* a deeper model's layer error is not measured (n_layers stays 0) */

typedef struct {
    int n_layers;     /* 0: not measured */
    long rows;        /* positions measured (the scored ones), the same in every layer */
    double rel_sum[LAYER_ERR_MAX_LAYERS], rel_sumsq[LAYER_ERR_MAX_LAYERS];
} LayerErrorSums;

/* One position's relative error in layer l (n_layers set by the caller). */
void layer_error_add(LayerErrorSums *s, int l, double rel);
/* Adds from into into; a part that measured nothing (n_layers 0) adds nothing. Parts measured
 * with different layer counts cannot come from one evaluation: into's count is kept. */
void layer_error_merge(LayerErrorSums *into, const LayerErrorSums *from);
/* The mean over positions of layer l and its standard error (NAN without rows). */
double layer_error_mean(const LayerErrorSums *s, int l);
double layer_error_se(const LayerErrorSums *s, int l);

/* As JSON: {"layers": L, "rows": N, "sum": [...], "sumsq": [...]} (17 digits: exact), and read
 * back, adding into s (where names it in the error). */
void layer_error_write(FILE *f, const LayerErrorSums *s);
int layer_error_read(const JsonValue *o, LayerErrorSums *s, const char *where, Error *err);

#endif
