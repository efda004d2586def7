/* eval/position.h: damage by position in the window — the KL divergence, the NLL change and
 * top-1 agreement of scored tokens in buckets of the position that predicts them (0-63, 64-127,
 * 128-255, ... doubling up to the context), as sums that merge exactly like TokenSums (shards,
 * sweep windows, ppl-merge).
 *
 * A target at window position j is predicted by the logits of position p = j - 1, whose query
 * reads the p + 1 cached positions 0..p: p is the position bucketed. The HF protocol scores a
 * window's first half only in its first window (later windows score positions ctx - stride ..
 * ctx - 1), so the low buckets hold few tokens unless stride = ctx. */
#ifndef KVQ_POSITION_H
#define KVQ_POSITION_H

#include <stdio.h>
#include "model/formats/error.h"
#include "model/formats/json.h"

#define POS_FIRST_WIDTH 64   /* bucket 0 is [0, 64); bucket b >= 1 is [64 * 2^(b-1), 64 * 2^b) */
#define POS_BUCKETS 16       /* up to 64 * 2^15 = 2^21 positions, past any ctx kvq takes (2^20) */

typedef struct {
    long n[POS_BUCKETS];            /* scored tokens */
    long agree[POS_BUCKETS];        /* of them, top-1 the same as the baseline's */
    double kl_sum[POS_BUCKETS], kl_sumsq[POS_BUCKETS];       /* KL(baseline || quantized) */
    double diff_sum[POS_BUCKETS], diff_sumsq[POS_BUCKETS];   /* NLL quantized - NLL baseline */
    double base_nll_sum[POS_BUCKETS];                        /* the baseline's NLL: what context buys */
} PositionSums;

/* The bucket of position p >= 0 and its bounds [low, high). */
int position_bucket(int p);
int position_bucket_low(int b);
int position_bucket_high(int b);
/* The buckets a window of ctx positions reaches: 1 + position_bucket(ctx - 1). */
int position_buckets_for(int ctx);

void position_sums_add(PositionSums *s, int p, double kl, double diff, int agree, double base_nll);
void position_sums_merge(PositionSums *into, const PositionSums *from);
long position_sums_count(const PositionSums *s);   /* tokens over every bucket */

/* One bucket's figures (NAN where it has too few tokens). */
typedef struct {
    long n;
    double kl_mean, kl_se, diff_mean, diff_se, top1, top1_se, base_nll_mean;
} PositionFigures;
PositionFigures position_figures(const PositionSums *s, int b);

/* The sums as a JSON array of the non-empty buckets, [bucket, n, agree, kl_sum, kl_sumsq,
 * diff_sum, diff_sumsq, base_nll_sum] each, doubles with 17 digits (they read back exactly). */
void position_sums_write(FILE *f, const PositionSums *s);
/* Adds such an array (a) into s; where names it in the error. A bucket twice, out of range or a
 * count that is not a whole number is refused. */
int position_sums_read(const JsonValue *a, PositionSums *s, const char *where, Error *err);

#endif
