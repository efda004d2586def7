/* eval/chart.h: an SVG chart of a KV-cache quantization sweep — quality against effective bits
 * per value, one numbered point per configuration, in two panels sharing the x axis: mean KL
 * divergence (log scale) above, delta perplexity with its standard-error bars below, each panel
 * with its own Pareto front drawn and named in its legend, and a key of the numbers under the plot.
 * Plain SVG 1.1 (svg, g, rect, line, polyline, circle, text), so librsvg and browsers render it. */
#ifndef KVQ_CHART_H
#define KVQ_CHART_H

#include <stdio.h>

typedef struct {
    const char *label;      /* configuration name in the key, e.g. "int4-g64" or "K int2-t32 / V int2-g32" */
    double bits;            /* x: effective bits per value (> 0) */
    double kl_mean;         /* y of the top panel: mean KL divergence, nats/token (log scale; may be 0 or tiny) */
    double dppl_pct;        /* y of the bottom panel: perplexity change in percent (may be negative) */
    double dppl_pct_se;     /* its standard error: a bar of +/- one (0 or not finite: no bar) */
} ChartPoint;

/* Writes a standalone SVG document to f: two panels stacked, sharing the x axis. Top panel: x =
 * effective bits per value (linear), y = mean KL (log10 scale), the Pareto front of bits and KL (points
 * for which no other point has both fewer-or-equal bits and lower-or-equal KL, strictly better in one)
 * filled and joined by a line in increasing bits. Bottom panel: x the same, y = delta ppl % (linear, may
 * be negative, 0 always in range as a reference line) with a bar of +/- one standard error, and its own
 * Pareto front, of bits and delta ppl, drawn the same way in another colour. Each panel's legend, above
 * it, names its front. Every point carries its number (its index + 1, the row of the sweep's table) in
 * both panels, placed by its box where it covers no other number, no marker and stays inside the
 * panel (joined to its point by a thin line when it had to move away); the key under the plot gives
 * each number's label. Title at the top (title may be NULL; its size shrinks to fit the width).
 * Returns 0, or -1 if a write to f failed (check ferror).
 *
 * As built: a point whose bits or dppl_pct is not finite is left out (a note counts them), and the
 * fronts are taken over the points drawn. A KL <= 0 or not finite is drawn on the lowest decade line,
 * its key entry marked "(KL <= 0)" or "(KL not finite)"; with such a point the axis goes one decade
 * below the smallest positive KL, so it stands apart from the measured ones. Labels are XML-escaped;
 * bytes that XML cannot hold (control bytes, invalid UTF-8) are written as '?'. Also returns -1 when
 * memory for the layout runs out (nothing is written then). 900 units wide, as tall as the key needs;
 * same input -> same bytes. Markers are <circle class="front"> (top panel's front), "dfront" (bottom
 * panel's front) or "other"; numbers <text class="num">, key entries <text class="key"> (the tests
 * read them). More than CHART_MAX_NUMBERED points are drawn without numbers or key (a note says so). */
#define CHART_MAX_NUMBERED 150
int chart_write_svg(FILE *f, const char *title, const ChartPoint *points, int n);
/* The same chart with its x axis named otherwise (./run sweep's chart-entropy.svg: entropy-coded
 * bits) or some points ringed (./run frontier's chosen configurations): a black ring, <circle
 * class="ringed">, around each of their markers in both panels, and ringed_legend in the top
 * panel's legend when some point is ringed. chart_write_svg is this with title alone. */
typedef struct {
    const char *title;              /* may be NULL */
    const char *x_title;            /* NULL: "effective bits per value" */
    const unsigned char *ringed;    /* NULL, or per point: 1 ringed */
    const char *ringed_legend;      /* NULL: "ringed" */
} ChartStyle;
int chart_write_svg_styled(FILE *f, const ChartStyle *style, const ChartPoint *points, int n);
/* The Pareto front of the top panel: marks front[i] = 1 for points on it (used by the tables too).
 * Only points with finite bits and finite KL take part (the others get 0 and dominate nothing); a KL
 * below 0 (rounding) counts as 0. Points equal in both are all on the front. */
void chart_pareto_front(const ChartPoint *points, int n, unsigned char *front);
/* The Pareto front of the bottom panel, of bits and delta ppl % (lower is better, negative too): the
 * same rule over the points with finite bits and delta ppl. */
void chart_pareto_front_dppl(const ChartPoint *points, int n, unsigned char *front);

#endif
