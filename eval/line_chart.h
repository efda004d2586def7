/* eval/line_chart.h: an SVG chart of lines over categories — one line per configuration, a
 * point per category (equally spaced on x), y on a log scale, each point with its standard
 * error as a vertical bar, a legend at the right. The sweep draws the KL divergence against
 * position (position.svg) and the per-layer attention error against the layer (layers.svg)
 * with it. Plain SVG 1.1 (svg, g, rect, line, polyline, circle, text), same input -> same bytes. */
#ifndef KVQ_LINE_CHART_H
#define KVQ_LINE_CHART_H

#include <stdio.h>

typedef struct {
    const char *label;      /* the configuration's name, in the legend */
    const double *y;        /* [n_x]: the values; one <= 0 or not finite is no point (the line breaks),
                               except that exactly 0 gets an open circle on the plot's bottom edge */
    const double *se;       /* [n_x]: their standard errors (NULL, or NAN: no bar) */
} LineSeries;

typedef struct {
    const char *title;      /* at the top (NULL: none) */
    const char *x_title, *y_title;
    const char *const *x_labels;   /* [n_x]: the categories' tick labels */
    int n_x;
    const char *note;       /* a line under the plot (NULL: none) */
} LineChart;

/* Writes a standalone SVG document to f: y on a log10 axis spanning the decades of every drawn
 * value and its error bar (the bar's lower end held above 0). Labels are XML-escaped; bytes that
 * are not printable ASCII are written as '?'. Returns 0, or -1 when a write failed. */
int line_chart_write_svg(FILE *f, const LineChart *c, const LineSeries *series, int n_series);

#endif
