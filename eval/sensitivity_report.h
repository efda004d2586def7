/* eval/sensitivity_report.h: the report of a whole sensitivity (eval/sensitivity_report.c), from
 * the sweep's settings and totals and the grid alone. */
#ifndef KVQ_SENSITIVITY_REPORT_H
#define KVQ_SENSITIVITY_REPORT_H

#include "eval/sweep.h"
#include "eval/sensitivity_grid.h"

/* The end of a whole sensitivity (eval/sensitivity_report.c): the sweep's results.* and the
 * sensitivity.* files in out_dir, then on out the KL table and the files' names, or with json the
 * sensitivity.json just written. Reads the model directory's config.json (head_dim, the layers)
 * and hashes its model.safetensors (the report names the model by content). */
int sens_finish_report(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, const SensGrid *g,
                       int json, Error *err);

#endif
