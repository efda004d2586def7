/* eval/calib_report.h: where a calibration's outlier channels are — a per-layer table and an
 * SVG heatmap of every channel's max |x| (keys before and after RoPE, values). */
#ifndef KVQ_CALIB_REPORT_H
#define KVQ_CALIB_REPORT_H

#include <stdio.h>
#include "model/formats/calibration.h"

/* One layer's outlier figure for a kind (0 keys before RoPE, 1 keys after RoPE, 2 values): the
 * largest channel's max |x| over the median channel's, and where the largest is. */
typedef struct {
    float ratio, max;
    int head, channel;
} LayerOutliers;

LayerOutliers calib_layer_outliers(const Calibration *c, int kind, int layer);

/* The table: one line per layer. */
void calib_print_outliers(FILE *f, const Calibration *c);

/* The heatmap as a standalone SVG document (three panels, layers x channels, log colour scale).
 * Returns 0, or -1 when writing failed. */
int calib_write_heatmap_svg(FILE *f, const Calibration *c, const char *title);

#endif
