/* eval/sensitivity_chart.h: a sensitivity's heatmap (eval/sensitivity_chart.c). */
#ifndef KVQ_SENSITIVITY_CHART_H
#define KVQ_SENSITIVITY_CHART_H

#include <stdio.h>
#include "eval/sensitivity_grid.h"

/* An SVG of kl[sens_config_index] (mean KL; <= 0 or not finite drawn grey), under a fixed title
 * and the line `title` (what was measured, e.g. the model and text): K panel left, V
 * panel right, rows the layers, columns the side's candidates (labelled with k_bits[c] or v_bits[c]), one log colour
 * scale for both panels with its bar. Each cell is a <rect class="cell"> holding a <title>
 * "K layer 3 tq2: KL 0.0123" (so a viewer shows it and a test can read it). 0, or -1 when a
 * write to f failed. */
int sens_write_heatmap_svg(FILE *f, const char *title, const SensGrid *g, const double *kl, const double *k_bits,
                           const double *v_bits);

#endif
