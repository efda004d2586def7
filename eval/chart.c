/* eval/chart.c: the SVG chart of a quantization sweep drawn (see eval/chart.h; which points are on
 * the fronts and where each number goes is decided in eval/chart_layout.c). One pass of fprintf
 * calls over a fixed layout: header band (title), the KL panel with its legend, the delta-ppl
 * panel with its legend, the shared x axis, then the key of the points' numbers. Every
 * coordinate goes through fit() so no input can put NaN, inf or a point outside the viewBox into
 * the file.
 *
 * Why numbers and a key, not names beside the points: a sweep puts several schemes at the same
 * bits (4.25: int4-g64, nf4, tq4, q4_0...), and in the delta-ppl panel many of them near 0 too;
 * their names, 8 to 46 characters, cannot all sit beside their points, and names moved away in a
 * fan cannot be told apart. A number of one or two digits finds room near its point; each is placed
 * by its box (text widths of DejaVu Sans, the widest usual sans-serif face, rounded up), so none
 * covers another number or a marker or leaves its panel. */
#include "eval/chart.h"
#include "eval/chart_layout.h"
#include "eval/svg.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 900.0
#define PLOT_L 86.0         /* room for tick labels and the rotated axis title */
#define PLOT_R 880.0
#define NUM_FS 11.0         /* the points' numbers */
#define KEY_FS 12.0         /* the key's entries */
#define KEY_LINE 16.0       /* the key's line spacing: more than a line's box, 1.17 x KEY_FS */
#define KEY_TOP 690.0       /* baseline of the key's first line */
#define KEY_X0 24.0         /* the key's three columns span KEY_X0 .. W - KEY_X0 */
#define KEY_COLUMNS 3
#define LEGEND_FS 11.0
#define ASCENT 0.93         /* a line of text's box above and below its baseline, in em (DejaVu Sans) */
#define DESCENT 0.24
#define VALUE_LIMIT 1e15    /* larger magnitudes are drawn at this, so spans stay finite */

static const char FRONT_COLOR[] = "#d62728", DFRONT_COLOR[] = "#2ca02c", OTHER_COLOR[] = "#1f77b4",
                  BAR_COLOR[] = "#666", GRID[] = "stroke=\"#e3e3e3\"";

typedef struct { double top, bottom; } Panel;
typedef struct { double lo, hi, step; } Axis;    /* linear, ticks at the multiples of step */

static const Panel TOP = {60, 340}, BOTTOM = {372, 620};

typedef struct {
    FILE *f;
    const ChartPoint *p;
    int n, n_boxes;
    double h;                       /* the document's height: the key's rows decide it */
    int numbered;                   /* points carry numbers and the key lists them (n small enough) */
    int unplaced;                   /* numbers for which no free box was found (left out) */
    Box *boxes;                     /* obstacles in the current panel: markers, bars, numbers (3n) */
    double *mx, *my;                /* per point: its marker's centre in the current panel */
    int *order;                     /* scratch: point indices */
    int *crowd;                     /* per point: markers near it in the current panel */
    unsigned char *shown, *front, *dfront;   /* per point: drawn (finite bits and dppl); on each front */
    Axis x, d;                      /* bits; delta ppl % */
    int klo, khi;                   /* KL decades 10^klo .. 10^khi, and kpad decades of margin */
    double kpad;
    ChartStyle style;
} Chart;

/* --- axes ------------------------------------------------------------------------------------- */

/* v clamped to [0, max]; NaN becomes 0. The last guard between the arithmetic and the file. */
static double fit(double v, double max) { return v >= 0 ? (v <= max ? v : max) : 0; }

static double tame(double v) { return v > VALUE_LIMIT ? VALUE_LIMIT : v < -VALUE_LIMIT ? -VALUE_LIMIT : v; }

/* The 1, 2 or 5 x 10^k nearest to span / target. */
static double nice_step(double span, double target) {
    double raw = span / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

/* Data range lo..hi with 5% margins; a range that is (nearly) one value is widened around it,
 * since a zero span would divide by zero and a span below the doubles' resolution repeats ticks. */
static Axis lin_axis(double lo, double hi) {
    double big = fmax(fabs(lo), fabs(hi)), span = hi - lo;
    double w = fmax(span > big * 1e-6 ? 0.05 * span : big > 0 ? 0.1 * big : 1, 1e-12);    /* 1e-12: underflow */
    Axis a = {lo - w, hi + w, nice_step(hi - lo + 2 * w, 7)};
    return a;
}

/* A bar's half length: the standard error when it is a finite positive number, else none. */
static double bar_half(const ChartPoint *p) {
    return isfinite(p->dppl_pct_se) && p->dppl_pct_se > 0 ? p->dppl_pct_se : 0;
}

/* Axis over the drawn points' bits (which = 0) or delta ppl with its bars (which = 1, always
 * including 0). */
static Axis data_axis(const Chart *c, int which) {
    double lo = which ? 0 : INFINITY, hi = which ? 0 : -INFINITY;
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double v = which ? c->p[i].dppl_pct : c->p[i].bits, half = which ? bar_half(&c->p[i]) : 0;
        lo = fmin(lo, tame(v - half)), hi = fmax(hi, tame(v + half));
    }
    if (lo > hi) lo = 2, hi = 16;    /* nothing drawn: the usual range of a sweep */
    return lin_axis(lo, hi);
}

static int kl_clamped(double kl) { return !(isfinite(kl) && kl > 0); }

/* Whole decades around the positive KLs; one more below when a KL must be clamped, so that
 * the clamped points sit on a line of their own. */
static void kl_decades(Chart *c) {
    double mn = INFINITY, mx = 0;
    int clamped = 0;
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double kl = c->p[i].kl_mean;
        if (kl_clamped(kl)) clamped = 1;
        else mn = fmin(mn, kl), mx = fmax(mx, kl);
    }
    c->klo = mn == INFINITY ? -5 : (int)floor(log10(mn)) - clamped;    /* nothing positive: 1e-5 .. 1 */
    c->khi = mn == INFINITY ? 0 : (int)ceil(log10(mx));
    if (c->khi <= c->klo) c->khi = c->klo + 1;
    c->kpad = 0.05 * (c->khi - c->klo);
}

static double map_x(const Chart *c, double bits) {
    return fit(PLOT_L + (tame(bits) - c->x.lo) / (c->x.hi - c->x.lo) * (PLOT_R - PLOT_L), W);
}

static double map_lin(const Chart *c, Axis a, Panel pn, double v) {
    return fit(pn.bottom - (tame(v) - a.lo) / (a.hi - a.lo) * (pn.bottom - pn.top), c->h);
}

static double map_log(const Chart *c, double log_kl) {
    double lo = c->klo - c->kpad, hi = c->khi + c->kpad;
    return fit(TOP.bottom - (log_kl - lo) / (hi - lo) * (TOP.bottom - TOP.top), c->h);
}

static double map_kl(const Chart *c, double kl) { return map_log(c, kl_clamped(kl) ? c->klo : log10(kl)); }

static double point_y(const Chart *c, int i, int top) {
    return top ? map_kl(c, c->p[i].kl_mean) : map_lin(c, c->d, BOTTOM, c->p[i].dppl_pct);
}

/* --- text ------------------------------------------------------------------------------------- */

/* A character's advance in DejaVu Sans, in em, rounded up by class (i 0.278 -> 0.28, r 0.412 -> 0.42,
 * digits 0.636 -> 0.64, O 0.787 -> 0.79, W 0.989 -> 1); the usual other faces are narrower, so boxes
 * sized by it hold. Its bold face is at most 1.25 times as wide (i 0.343, W 1.104). */
static double char_em(unsigned char c) {
    if (c >= 0x80 || strchr("mwMW%@#+<=>^~", c)) return 1.0;    /* a non-ASCII character: as wide as any */
    if (strchr("ijl'", c)) return 0.28;
    if (strchr("IJ ,./:;\\|", c)) return 0.34;
    if (strchr("-()[]t!rf", c)) return 0.42;
    if ((c >= 'A' && c <= 'Z') || c == '&') return 0.79;
    return 0.64;
}

/* The width of the first n bytes of s at font size fs (a UTF-8 sequence counts once). */
static double text_width_n(const char *s, size_t n, double fs) {
    double em = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) em += char_em((unsigned char)s[i]);
    return em * fs;
}

static double text_width(const char *s, double fs) { return text_width_n(s, strlen(s), fs); }

static void text_at(const Chart *c, double x, double y, const char *anchor, double fs, const char *attrs, const char *s) {
    fprintf(c->f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\" font-size=\"%.4g\"%s>", fit(x, W), fit(y, c->h), anchor,
            fs, attrs);
    svg_text(c->f, s);
    fputs("</text>\n", c->f);
}

static void line(const Chart *c, double x1, double y1, double x2, double y2, const char *style) {
    fprintf(c->f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>\n", fit(x1, W), fit(y1, c->h), fit(x2, W),
            fit(y2, c->h), style);
}

static void hline(const Chart *c, double y, const char *style) { line(c, PLOT_L, y, PLOT_R, y, style); }

/* --- grid, frames, titles ---------------------------------------------------------------------- */

/* A tick's label: fixed decimals for the usual ranges; 3 significant digits and a short exponent
 * ("2e14", "5e-6") for huge or tiny ones, whose fixed spelling would run off the chart. */
static void tick_label(char *buf, size_t len, Axis a, double v) {
    int decimals = a.step >= 1 ? 0 : (int)fmin(12, ceil(-log10(a.step) - 1e-9));
    if (fabs(v) < a.step * 1e-6) v = 0;    /* 3 * 0.1 - 0.3 is not 0 and would print "-0.0" */
    if (fmax(fabs(a.lo), fabs(a.hi)) < 1e6 && a.step >= 1e-4) {
        snprintf(buf, len, "%.*f", decimals, v);
        return;
    }
    char raw[64], mantissa[32];
    int exponent;
    snprintf(raw, sizeof raw, "%.3g", v);
    if (sscanf(raw, "%31[^e]e%d", mantissa, &exponent) == 2) snprintf(buf, len, "%se%d", mantissa, exponent);
    else snprintf(buf, len, "%s", raw);    /* "2e+14" -> "2e14", "5e-06" -> "5e-6" above */
}

/* Grid lines at the ticks of a linear axis across panel pn (vertical: the bits axis, labelled under
 * the panel when asked; else the delta ppl axis, labelled left). Ticks are the multiples of the step. */
static void lin_grid(const Chart *c, Axis a, Panel pn, int vertical, int labels) {
    long first = (long)ceil(a.lo / a.step), last = (long)floor(a.hi / a.step);
    for (long i = first; i <= last && i < first + 40; i++) {
        double v = (double)i * a.step, at = vertical ? map_x(c, v) : map_lin(c, a, pn, v);
        char buf[64];
        tick_label(buf, sizeof buf, a, v);
        if (vertical) line(c, at, pn.top, at, pn.bottom, GRID);
        else hline(c, at, GRID);
        if (labels)
            text_at(c, vertical ? at : PLOT_L - 6, vertical ? pn.bottom + 17 : at + 4, vertical ? "middle" : "end", 12, "",
                    buf);
    }
}

static void kl_grid(const Chart *c) {
    int decades = c->khi - c->klo, every = (decades + 7) / 8;    /* at most ~8 labelled decades */
    for (int k = c->klo; k <= c->khi; k++) {
        double y = map_log(c, k);
        char buf[32];
        snprintf(buf, sizeof buf, k == 0 ? "1" : "1e%d", k);
        if ((k - c->klo) % every == 0) {    /* the others' grid lines would only shade the panel */
            hline(c, y, GRID);
            text_at(c, PLOT_L - 6, y + 4, "end", 12, "", buf);
        }
        for (int m = 2; m <= 9 && k < c->khi && decades <= 6; m++)    /* minor ticks on the axis */
            line(c, PLOT_L, map_log(c, k + log10(m)), PLOT_L + 4, map_log(c, k + log10(m)), "stroke=\"#333\"");
    }
}

static void frame(const Chart *c, Panel pn) {
    fprintf(c->f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"#333\"/>\n",
            PLOT_L, pn.top, PLOT_R - PLOT_L, pn.bottom - pn.top);
}

static void y_title(const Chart *c, Panel pn, const char *s) {
    double y = (pn.top + pn.bottom) / 2;
    fprintf(c->f, "<text x=\"18.00\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"13\" "
                  "transform=\"rotate(-90 18.00 %.2f)\">%s</text>\n", y, y, s);
}

/* --- markers, fronts, bars ---------------------------------------------------------------------- */

/* A marker: class "front" (the KL panel's front), "dfront" (the delta-ppl panel's) or "other". */
static void marker(const Chart *c, double x, double y, const char *cls, const char *color) {
    int filled = strcmp(cls, "other") != 0;
    fprintf(c->f, "<circle class=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"%.0f\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
            cls, fit(x, W), fit(y, c->h), MARKER_R, filled ? color : "white", color);
}

/* The ring around a marker of a point the caller singled out (ChartStyle.ringed). */
static void ring(const Chart *c, double x, double y) {
    fprintf(c->f, "<circle class=\"ringed\" cx=\"%.2f\" cy=\"%.2f\" r=\"%.0f\" fill=\"none\" stroke=\"black\" "
                  "stroke-width=\"1.5\"/>\n", fit(x, W), fit(y, c->h), MARKER_R + 3);
}

/* A panel's front joined in increasing bits. Front points with equal bits have equal values, so an
 * insertion sort that keeps the input order of ties gives the same file for the same input. */
static void front_line(Chart *c, const unsigned char *front, int top, const char *color) {
    int *order = c->order, m = 0;
    for (int i = 0; i < c->n; i++) {
        if (!front[i]) continue;
        int j = m++;
        for (; j > 0 && c->p[order[j - 1]].bits > c->p[i].bits; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    if (m < 2) return;
    fprintf(c->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (int k = 0; k < m; k++)
        fprintf(c->f, "%s%.2f,%.2f", k ? " " : "", map_x(c, c->p[order[k]].bits), point_y(c, order[k], top));
    fputs("\"/>\n", c->f);
}

/* The delta-ppl panel's bars of +/- one standard error, with caps; their boxes are obstacles. */
static void bars(Chart *c) {
    for (int i = 0; i < c->n; i++) {
        double half = bar_half(&c->p[i]);
        if (!c->shown[i] || half == 0) continue;
        double x = map_x(c, c->p[i].bits), d = c->p[i].dppl_pct;
        double y0 = map_lin(c, c->d, BOTTOM, d + half), y1 = map_lin(c, c->d, BOTTOM, d - half);
        char style[64];
        snprintf(style, sizeof style, "stroke=\"%s\" stroke-width=\"1\"", BAR_COLOR);
        line(c, x, y0, x, y1, style);
        line(c, x - 3, y0, x + 3, y0, style);
        line(c, x - 3, y1, x + 3, y1, style);
        c->boxes[c->n_boxes++] = (Box){x - 3.5, y0 - 0.5, x + 3.5, y1 + 0.5};
    }
}

/* q's number in the box b, with its leader line. */
static void draw_number(const Chart *c, const Placing *q, Box b) {
    double seg[4];
    if (chart_leader(q->px, q->py, b, q->touching, seg))
        line(c, seg[0], seg[1], seg[2], seg[3], "stroke=\"#888\" stroke-width=\"0.7\"");
    fprintf(c->f, "<text class=\"num\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"%.0f\">%d</text>\n",
            fit((b.x0 + b.x1) / 2, W), fit(b.y1 - 1 - DESCENT * NUM_FS, c->h), NUM_FS, q->i + 1);
}

/* The numbers of a panel: the least crowded points first (a lone point keeps the place beside it;
 * a cluster's numbers then spread around it), ties in input order. */
static void numbers(Chart *c, Panel pn, int top) {
    int *order = c->order, m = 0;
    for (int i = 0; i < c->n; i++)
        if (c->shown[i]) c->mx[i] = map_x(c, c->p[i].bits), c->my[i] = point_y(c, i, top);
    NumberRoom room = {{PLOT_L, pn.top, PLOT_R, pn.bottom}, c->mx, c->my, c->shown, c->n, c->boxes, c->n_boxes};
    for (int i = 0; i < c->n; i++)
        if (c->shown[i]) c->crowd[i] = chart_neighbours(&room, i, 30);
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        int j = m++;
        for (; j > 0 && c->crowd[order[j - 1]] > c->crowd[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < m; k++) {
        char num[16];
        Placing q = {.i = order[k]};
        snprintf(num, sizeof num, "%d", q.i + 1);
        q.px = c->mx[q.i], q.py = c->my[q.i];
        q.w = text_width(num, NUM_FS) + 2, q.h = (ASCENT + DESCENT) * NUM_FS + 2;
        q.touching = chart_neighbours(&room, q.i, 2 * MARKER_R + 4) > 0;
        Box b;
        if (!chart_find_room(&room, &q, &b)) { c->unplaced++; continue; }
        room.boxes[room.n_boxes++] = b;
        draw_number(c, &q, b);
    }
    c->n_boxes = room.n_boxes;
}

/* A panel's points: its markers (the front filled in the panel's colour), and the numbers placed
 * around them, markers first so that every number keeps off every marker. */
static void points(Chart *c, Panel pn, int top) {
    const unsigned char *front = top ? c->front : c->dfront;
    const char *color = top ? FRONT_COLOR : DFRONT_COLOR, *cls = top ? "front" : "dfront";
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double x = map_x(c, c->p[i].bits), y = point_y(c, i, top);
        marker(c, x, y, front[i] ? cls : "other", front[i] ? color : OTHER_COLOR);
        int ringed = c->style.ringed && c->style.ringed[i];
        if (ringed) ring(c, x, y);
        double r = ringed ? MARKER_R + 4 : MARKER_R + 1;   /* numbers keep off the ring too */
        c->boxes[c->n_boxes++] = (Box){x - r, y - r, x + r, y + r};
    }
    if (c->numbered) numbers(c, pn, top);
}

/* --- header, legends, key, notes ------------------------------------------------------------------ */

/* The title, bold, its size cut down to fit the width (a long model path). */
static void header(const Chart *c, const char *title) {
    fprintf(c->f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, c->h, W, c->h, W, c->h);
    if (!title) return;
    double fs = 16, bold = 1.25;    /* see char_em() */
    if (text_width(title, fs) * bold > W - 20) fs = fmax(8, (W - 20) / (text_width(title, 1) * bold));
    text_at(c, W / 2, 26, "middle", fs, " font-weight=\"bold\"", title);
}

/* One legend entry at x on baseline y: its symbol, then its text; returns where the next may start. */
static double legend_entry(const Chart *c, double x, double y, const char *kind, const char *color, const char *s) {
    double my = y - 4;
    if (!strcmp(kind, "bar")) {
        char style[64];
        snprintf(style, sizeof style, "stroke=\"%s\" stroke-width=\"1\"", BAR_COLOR);
        line(c, x + 12, my - 7, x + 12, my + 7, style);
        line(c, x + 9, my - 7, x + 15, my - 7, style);
        line(c, x + 9, my + 7, x + 15, my + 7, style);
    } else if (!strcmp(kind, "ringed")) {
        marker(c, x + 12, my, "other", OTHER_COLOR);
        ring(c, x + 12, my);
    } else {
        if (strcmp(kind, "other")) {
            char style[64];
            snprintf(style, sizeof style, "stroke=\"%s\" stroke-width=\"1.5\"", color);
            line(c, x, my, x + 24, my, style);
        }
        marker(c, x + 12, my, kind, color);
    }
    text_at(c, x + 30, y, "start", LEGEND_FS, "", s);
    return x + 30 + text_width(s, LEGEND_FS) + 24;
}

/* Each panel's legend, above it: its own front, the points off it (and the bottom panel's bars). */
static void legends(const Chart *c) {
    double x = legend_entry(c, PLOT_L, TOP.top - 10, "front", FRONT_COLOR, "Pareto front of bits and KL (this panel)");
    x = legend_entry(c, x, TOP.top - 10, "other", OTHER_COLOR, "not on it");
    int any = 0;
    for (int i = 0; c->style.ringed && i < c->n; i++) any |= c->style.ringed[i] && c->shown[i];
    if (any) legend_entry(c, x, TOP.top - 10, "ringed", "black", c->style.ringed_legend ? c->style.ringed_legend : "ringed");
    x = legend_entry(c, PLOT_L, BOTTOM.top - 10, "dfront", DFRONT_COLOR,
                     "Pareto front of bits and delta ppl (this panel)");
    x = legend_entry(c, x, BOTTOM.top - 10, "other", OTHER_COLOR, "not on it");
    legend_entry(c, x, BOTTOM.top - 10, "bar", BAR_COLOR, "+/- 1 standard error");
}

/* The text a point has in the key: its label, and what the top panel did with a KL it cannot draw. */
static const char *key_suffix(const ChartPoint *p) {
    return !kl_clamped(p->kl_mean) ? "" : isfinite(p->kl_mean) ? " (KL <= 0)" : " (KL not finite)";
}

#define KEY_NUM_W (KEY_FS * 0.64 * 4)    /* room for a number of up to 4 digits, right-aligned */
#define KEY_TEXT_W ((W - 2 * KEY_X0) / KEY_COLUMNS - KEY_NUM_W - 6 - 12)    /* 6 after the number, 12 between columns */

/* Bytes of s in its next line of the key: all of it when it fits in KEY_TEXT_W, else the most that
 * fits, broken after a " / " (a "K ... / V ..." label), else after the last ' ', '+', ';', ',' or ':',
 * else anywhere between characters. The lines, put back together, are the text. */
static size_t key_line_len(const char *s) {
    size_t n = strlen(s), fit_n = 0, brk = 0, slash = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) == 0x80) continue;    /* inside a UTF-8 sequence */
        if (text_width_n(s, i + 1, KEY_FS) > KEY_TEXT_W) break;
        fit_n = i + 1;
        while (fit_n < n && ((unsigned char)s[fit_n] & 0xC0) == 0x80) fit_n++;
        if (strchr(" +;,:", s[i])) brk = fit_n;
        if (i >= 2 && !strncmp(s + i - 2, " / ", 3)) slash = fit_n;
    }
    if (fit_n == 0 && n > 0) fit_n = 1;    /* a column narrower than one character: one a line */
    return fit_n == n ? n : slash > 0 ? slash : brk > 0 ? brk : fit_n;
}

/* The lines of a key entry's text. */
static int key_lines(const char *text) {
    int lines = 0;
    for (const char *s = text; *s; lines++) s += key_line_len(s);
    return lines > 0 ? lines : 1;
}

/* The key's entry text of point i (label and suffix) in buf. */
static void key_text(const Chart *c, int i, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", c->p[i].label ? c->p[i].label : "", key_suffix(&c->p[i]));
}

/* Lays the key out in KEY_COLUMNS columns, filled top to bottom in point order; column_of and row_of
 * get each drawn point's place (NULL: only count). Returns the rows of the longest column. */
static int key_layout(const Chart *c, int *column_of, int *row_of) {
    int total = 0, rows[KEY_COLUMNS] = {0}, col = 0;
    char text[1200];
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        key_text(c, i, text, sizeof text);
        total += key_lines(text);
    }
    int per_column = (total + KEY_COLUMNS - 1) / KEY_COLUMNS;
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        key_text(c, i, text, sizeof text);
        int k = key_lines(text);
        if (rows[col] > 0 && rows[col] + k > per_column && col + 1 < KEY_COLUMNS) col++;
        if (column_of) column_of[i] = col, row_of[i] = rows[col];
        rows[col] += k;
    }
    int most = 0;
    for (int k = 0; k < KEY_COLUMNS; k++) most = rows[k] > most ? rows[k] : most;
    return most;
}

static void key(Chart *c) {
    int *column_of = c->order, *row_of = calloc((size_t)c->n + 1, sizeof *row_of);
    if (!row_of) return;
    key_layout(c, column_of, row_of);
    char text[1200], num[16];
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double x = KEY_X0 + column_of[i] * (W - 2 * KEY_X0) / KEY_COLUMNS, y = KEY_TOP + row_of[i] * KEY_LINE;
        snprintf(num, sizeof num, "%d", i + 1);
        fprintf(c->f, "<text class=\"key\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" font-size=\"%.0f\" "
                      "font-weight=\"bold\">%s</text>\n", fit(x + KEY_NUM_W, W), fit(y, c->h), KEY_FS, num);
        key_text(c, i, text, sizeof text);
        for (const char *s = text; *s; y += KEY_LINE) {
            size_t len = key_line_len(s);
            fprintf(c->f, "<text class=\"key\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"start\" font-size=\"%.0f\">",
                    fit(x + KEY_NUM_W + 6, W), fit(y, c->h), KEY_FS);
            svg_text_n(c->f, s, len);
            fputs("</text>\n", c->f);
            s += len;
        }
    }
    free(row_of);
}

/* The notes under the key: points not drawn, not numbered, numbers with no room. */
static void notes(const Chart *c, int drawn, double y) {
    char buf[200];
    if (drawn == 0)
        text_at(c, (PLOT_L + PLOT_R) / 2, (TOP.top + TOP.bottom) / 2, "middle", 16, " fill=\"#777\"", "no points");
    if (drawn < c->n) {
        snprintf(buf, sizeof buf, "%d of %d configurations not shown: effective bits or delta ppl not finite",
                 c->n - drawn, c->n);
        text_at(c, PLOT_L, y, "start", 10, " fill=\"#777\"", buf), y += 14;
    }
    if (!c->numbered && drawn > 0) {
        snprintf(buf, sizeof buf, "%d configurations: too many to number (more than %d); see the table", drawn,
                 CHART_MAX_NUMBERED);
        text_at(c, PLOT_L, y, "start", 10, " fill=\"#777\"", buf), y += 14;
    }
    if (c->unplaced > 0) {
        snprintf(buf, sizeof buf, c->unplaced == 1 ? "%d number left out: no room beside its point"
                                                    : "%d numbers left out: no room beside their points", c->unplaced);
        text_at(c, PLOT_L, y, "start", 10, " fill=\"#777\"", buf);
    }
}

/* --- the whole chart ------------------------------------------------------------------------------- */

static int draw(Chart *c) {
    const char *title = c->style.title;
    int drawn = 0;
    for (int i = 0; i < c->n; i++) {
        c->shown[i] = isfinite(c->p[i].bits) && isfinite(c->p[i].dppl_pct);
        drawn += c->shown[i];
    }
    c->numbered = drawn <= CHART_MAX_NUMBERED;
    chart_front_among(c->p, c->n, c->shown, 0, c->front);
    chart_front_among(c->p, c->n, c->shown, 1, c->dfront);
    c->x = data_axis(c, 0);
    c->d = data_axis(c, 1);
    kl_decades(c);
    double key_end = KEY_TOP + (c->numbered ? key_layout(c, NULL, NULL) : 0) * KEY_LINE;
    int n_notes = (drawn < c->n) + (!c->numbered && drawn > 0) + 1;    /* + 1: room for "left out" */
    c->h = fmax(720, key_end + 14.0 * n_notes);
    header(c, title);
    legends(c);
    lin_grid(c, c->x, TOP, 1, 0);
    kl_grid(c);
    lin_grid(c, c->x, BOTTOM, 1, 1);
    lin_grid(c, c->d, BOTTOM, 0, 1);
    hline(c, map_lin(c, c->d, BOTTOM, 0), "stroke=\"#777\" stroke-dasharray=\"5 3\"");    /* 0 is always in range */
    frame(c, TOP);
    frame(c, BOTTOM);
    y_title(c, TOP, "mean KL divergence (nats/token)");
    y_title(c, BOTTOM, "delta perplexity (%)");
    text_at(c, (PLOT_L + PLOT_R) / 2, BOTTOM.bottom + 40, "middle", 13, "",
            c->style.x_title ? c->style.x_title : "effective bits per value");
    c->n_boxes = 0;
    front_line(c, c->front, 1, FRONT_COLOR);
    points(c, TOP, 1);
    c->n_boxes = 0;
    bars(c);
    front_line(c, c->dfront, 0, DFRONT_COLOR);
    points(c, BOTTOM, 0);
    if (c->numbered) key(c);
    notes(c, drawn, key_end + 4);
    fputs("</svg>\n", c->f);
    return fflush(c->f) == 0 && !ferror(c->f) ? 0 : -1;
}

int chart_write_svg(FILE *f, const char *title, const ChartPoint *points, int n) {
    ChartStyle style = {title, NULL, NULL, NULL};
    return chart_write_svg_styled(f, &style, points, n);
}

int chart_write_svg_styled(FILE *f, const ChartStyle *style, const ChartPoint *points, int n) {
    Chart c = {0};
    c.style = *style;
    c.f = f, c.p = points, c.n = n > 0 ? n : 0;
    size_t m = (size_t)c.n + 1;    /* + 1: calloc(0) may return NULL */
    /* One block, most aligned first: 3m boxes (markers, bars, numbers), 2m doubles, 2m ints, 3m bytes. */
    c.boxes = calloc(m, 3 * sizeof *c.boxes + 2 * sizeof *c.mx + 2 * sizeof *c.order + 3);
    if (!c.boxes) return -1;
    c.mx = (double *)(c.boxes + 3 * m);
    c.my = c.mx + m;
    c.order = (int *)(c.my + m);
    c.crowd = c.order + m;
    c.shown = (unsigned char *)(c.crowd + m);
    c.front = c.shown + m;
    c.dfront = c.front + m;
    int rc = draw(&c);
    free(c.boxes);
    return rc;
}
