/* eval/chart.h: an SVG chart of a KV-cache quantization sweep — quality against effective bits
 * per value, one labelled point per configuration, in two panels sharing the x axis: mean KL
 * divergence (log scale, with the Pareto front drawn as a line) above, delta perplexity below.
 * Plain SVG 1.1 (svg, g, rect, line, polyline, circle, text), so librsvg and browsers render it. */
#ifndef KVQ_CHART_H
#define KVQ_CHART_H

#include <stdio.h>

typedef struct {
    const char *label;      /* configuration name shown next to the point, e.g. "int4-g64" or "K int2-t32 / V int2-g32" */
    double bits;            /* x: effective bits per value (> 0) */
    double kl_mean;         /* y of the top panel: mean KL divergence, nats/token (log scale; may be 0 or tiny) */
    double dppl_pct;        /* y of the bottom panel: perplexity change in percent (may be negative) */
} ChartPoint;

/* Writes a standalone SVG document to f: two panels stacked, sharing the x axis. Top panel: x =
 * effective bits per value (linear), y = mean KL (log10 scale), one labelled point per configuration,
 * the Pareto front (points for which no other point has both fewer-or-equal bits and lower-or-equal KL,
 * strictly better in one) joined by a line in increasing bits. Bottom panel: x the same, y = delta ppl %
 * (linear, may be negative, include 0 as a reference line), same points and labels. Title at the top
 * (title may be NULL). Returns 0, or -1 if a write to f failed (check ferror).
 *
 * As built: a point whose bits or dppl_pct is not finite is left out (a note counts them), and the
 * front is taken over the points drawn. A KL <= 0 or not finite is drawn on the lowest decade line,
 * its label marked "(KL <= 0)" or "(KL not finite)"; with such a point the axis goes one decade below
 * the smallest positive KL, so it stands apart from the measured ones. Labels are XML-escaped; bytes
 * that XML cannot hold (control bytes, invalid UTF-8) are written as '?'. Also returns -1 when memory
 * for the layout runs out (nothing is written then). 900 x 720 user units, same input -> same bytes;
 * point markers are <circle class="front"> or <circle class="other"> (the tests count them). */
int chart_write_svg(FILE *f, const char *title, const ChartPoint *points, int n);
/* The Pareto front of the top panel: marks front[i] = 1 for points on it (used by the tables too).
 * Only points with finite bits and finite KL take part (the others get 0 and dominate nothing); a KL
 * below 0 (rounding) counts as 0. Points equal in both are all on the front. */
void chart_pareto_front(const ChartPoint *points, int n, unsigned char *front);

#endif
