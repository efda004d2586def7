/* eval/svg.h: what every SVG that kvq draws shares — text written as XML character data, and the
 * colour ramp of its heatmaps. The charts themselves (eval/chart.c, line_chart.c,
 * sensitivity_chart.c, calib_report.c) are plain SVG 1.1 written with fprintf. */
#ifndef KVQ_SVG_H
#define KVQ_SVG_H

#include <stddef.h>
#include <stdio.h>

/* s as XML character data: & < > " ' as entities; control bytes, DEL and bytes that are not
 * valid UTF-8 as '?' (a label can be any string a user gave: a path, a scheme, a model name). */
void svg_text(FILE *f, const char *s);
/* The same for the first n bytes of s (a UTF-8 sequence cut by the n-th byte becomes '?'). */
void svg_text_n(FILE *f, const char *s, size_t n);

/* A heatmap colour for t in [0, 1] (clamped): dark blue (lowest) through teal and green to
 * yellow (highest), linear between four stops, as viridis. */
void svg_ramp(double t, int rgb[3]);

#endif
