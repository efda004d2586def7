/* eval/line_chart.c: lines over categories on a log y axis (see line_chart.h). One pass of
 * fprintf calls over a fixed layout: title, plot with grid and ticks, legend at the right.
 * Every coordinate goes through clamp() so no input can put NaN or inf into the file. */
#include "eval/line_chart.h"
#include "eval/svg.h"
#include <math.h>

#define W 1080.0
#define H 560.0
#define PLOT_L 84.0
#define PLOT_R 660.0
#define PLOT_T 56.0
#define PLOT_B 470.0
#define LEGEND_X 680.0

/* Ten distinguishable colours; past ten series the lines are dashed, past twenty dotted. */
static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_COLORS 10

static double clamp(double v, double lo, double hi) { return v >= lo ? (v <= hi ? v : hi) : lo; }

static int drawn(double y) { return isfinite(y) && y > 0; }

/* The decades lo..hi (powers of ten) that hold every drawn value and error bar. */
static void decades(const LineSeries *s, int n, int n_x, int *lo, int *hi) {
    double min = INFINITY, max = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int x = 0; x < n_x; x++) {
            double y = s[i].y[x];
            if (!drawn(y)) continue;
            double e = s[i].se && isfinite(s[i].se[x]) ? s[i].se[x] : 0;
            double top = y + e, bottom = y - e > y / 10 ? y - e : y / 10;   /* a bar below y/10 is cut there */
            if (bottom < min) min = bottom;
            if (top > max) max = top;
        }
    if (!(min <= max)) min = 1e-3, max = 1;
    *lo = (int)floor(log10(min));
    *hi = (int)ceil(log10(max));
    if (*hi <= *lo) *hi = *lo + 1;
    if (*lo < -30) *lo = -30;
    if (*hi > 30) *hi = 30;
}

typedef struct {
    int lo, hi, n_x;
} Axes;

static double px(const Axes *a, int x) {
    return a->n_x > 1 ? PLOT_L + 30 + (PLOT_R - PLOT_L - 60) * x / (a->n_x - 1) : (PLOT_L + PLOT_R) / 2;
}

static double py(const Axes *a, double y) {
    double t = (log10(y) - a->lo) / (a->hi - a->lo);
    return clamp(PLOT_B - t * (PLOT_B - PLOT_T), PLOT_T - 4, PLOT_B + 4);
}

static void axes(FILE *f, const LineChart *c, const Axes *a) {
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", PLOT_L,
            PLOT_T, PLOT_R - PLOT_L, PLOT_B - PLOT_T);
    for (int d = a->lo; d <= a->hi; d++) {
        double y = py(a, pow(10, d));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", PLOT_L, y, PLOT_R, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">1e%d</text>\n", PLOT_L - 6, y + 4, d);
    }
    for (int x = 0; x < a->n_x; x++) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", px(a, x), PLOT_T,
                px(a, x), PLOT_B);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", px(a, x), PLOT_B + 18);
        svg_text(f, c->x_labels[x]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">", (PLOT_L + PLOT_R) / 2, PLOT_B + 42);
    svg_text(f, c->x_title);
    fprintf(f, "</text>\n<text x=\"18\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">",
            (PLOT_T + PLOT_B) / 2, (PLOT_T + PLOT_B) / 2);
    svg_text(f, c->y_title);
    fprintf(f, "</text>\n");
}

static void series_line(FILE *f, const Axes *a, const LineSeries *s, int i) {
    const char *color = COLORS[i % N_COLORS];
    const char *dash = i / N_COLORS == 1 ? " stroke-dasharray=\"6 3\"" : i / N_COLORS >= 2 ? " stroke-dasharray=\"2 2\"" : "";
    fprintf(f, "<g class=\"series\">\n");
    for (int x = 0; x < a->n_x;) {   /* one polyline per run of drawn points */
        while (x < a->n_x && !drawn(s->y[x])) x++;
        if (x >= a->n_x) break;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s points=\"", color, dash);
        for (int first = 1; x < a->n_x && drawn(s->y[x]); x++, first = 0)
            fprintf(f, "%s%.1f,%.1f", first ? "" : " ", px(a, x), py(a, s->y[x]));
        fprintf(f, "\"/>\n");
    }
    for (int x = 0; x < a->n_x; x++) {
        double y = s->y[x];
        if (y == 0)   /* exactly 0 (a lossless stretch): an open circle on the bottom edge */
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.2\" fill=\"white\" stroke=\"%s\"/>\n", px(a, x), PLOT_B,
                    color);
        if (!drawn(y)) continue;
        double e = s->se && isfinite(s->se[x]) ? s->se[x] : 0;
        if (e > 0) {
            double bottom = y - e > y / 10 ? y - e : y / 10;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>\n",
                    px(a, x), py(a, bottom), px(a, x), py(a, y + e), color);
        }
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.8\" fill=\"%s\"/>\n", px(a, x), py(a, y), color);
    }
    fprintf(f, "</g>\n");
}

static void legend(FILE *f, const LineSeries *s, int n) {
    double step = n > 0 && (PLOT_B - PLOT_T) / n < 18 ? (PLOT_B - PLOT_T) / n : 18;
    for (int i = 0; i < n; i++) {
        double y = PLOT_T + 8 + i * step;
        const char *dash = i / N_COLORS == 1 ? " stroke-dasharray=\"6 3\"" : i / N_COLORS >= 2 ? " stroke-dasharray=\"2 2\"" : "";
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", LEGEND_X,
                y, LEGEND_X + 24, y, COLORS[i % N_COLORS], dash);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\">", LEGEND_X + 30, y + 4, step < 14 ? 10.0 : 12.0);
        svg_text(f, s[i].label);
        fprintf(f, "</text>\n");
    }
}

int line_chart_write_svg(FILE *f, const LineChart *c, const LineSeries *series, int n_series) {
    Axes a = {0, 1, c->n_x};
    decades(series, n_series, c->n_x, &a.lo, &a.hi);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    if (c->title) {
        fprintf(f, "<text x=\"%.1f\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">", W / 2);
        svg_text(f, c->title);
        fprintf(f, "</text>\n");
    }
    axes(f, c, &a);
    for (int i = 0; i < n_series; i++) series_line(f, &a, &series[i], i);
    legend(f, series, n_series);
    if (c->note) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">", PLOT_L, H - 22);
        svg_text(f, c->note);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}
