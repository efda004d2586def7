/* eval/sweep_views.h: a sweep's position and layer views in its outputs (see sweep_views.c). */
#ifndef KVQ_SWEEP_VIEWS_H
#define KVQ_SWEEP_VIEWS_H

#include <stdio.h>
#include "eval/sweep.h"

/* The sections of results.md after the main table: damage by position (KL and NLL change per
 * bucket) and the per-layer attention error. */
void sweep_views_markdown(FILE *f, const SweepSettings *s, const SweepTotals *t);
/* results.csv's columns after the main ones: per bucket tokens_pos_A_B, kl_pos_A_B(_stderr),
 * dnll_pos_A_B(_stderr), top1_pos_A_B; per layer layerL_rel_err(_stderr). Header, and row i. */
void sweep_views_csv_header(FILE *f, const SweepSettings *s, const SweepTotals *t);
void sweep_views_csv_row(FILE *f, const SweepSettings *s, const SweepTotals *t, int i);
/* position.svg and layers.svg in dir (each atomically; one a view no configuration has is not written). */
int sweep_views_charts(const char *dir, const SweepSettings *s, const SweepTotals *t, Error *err);

#endif
