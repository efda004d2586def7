/* eval/chart.c: the SVG chart of a quantization sweep (see eval/chart.h). One pass of fprintf
 * calls over a fixed layout: header band (title, legend), KL panel, delta-ppl panel, shared x
 * axis below. Every coordinate goes through fit() so no input can put NaN, inf or a point
 * outside the viewBox into the file. */
#include "eval/chart.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 900.0
#define H 720.0
#define PLOT_L 86.0         /* room for tick labels and the rotated axis title */
#define PLOT_R 880.0
#define LABEL_FS 11.0       /* point labels: width estimated as 0.6 * font size per character */
#define LABEL_GAP 7.0       /* from the point's centre to its label */
#define MAX_NUDGES 8         /* rows tried above and below a label that overlaps */
#define VALUE_LIMIT 1e15    /* larger magnitudes are drawn at this, so spans stay finite */

static const char FRONT_COLOR[] = "#d62728", OTHER_COLOR[] = "#1f77b4", GRID[] = "stroke=\"#e3e3e3\"";

typedef struct { double top, bottom; } Panel;
typedef struct { double lo, hi, step; } Axis;    /* linear, ticks at the multiples of step */
typedef struct { double x0, y0, x1, y1; } Box;

static const Panel TOP = {62, 360}, BOTTOM = {388, 650};

typedef struct {
    FILE *f;
    const ChartPoint *p;
    int n, n_boxes;
    Box *boxes;                     /* markers and labels placed so far in the current panel (2n) */
    int *order;                     /* the front's points in increasing bits */
    unsigned char *shown, *front;   /* per point: drawn (finite bits and dppl); on the drawn front */
    Axis x, d;                      /* bits; delta ppl % */
    int klo, khi;                   /* KL decades 10^klo .. 10^khi, and kpad decades of margin */
    double kpad;
} Chart;

static int takes_part(const ChartPoint *p) { return isfinite(p->bits) && isfinite(p->kl_mean); }

/* A KL of -1e-12 is rounding, not a better configuration than one with KL 0. */
static double kl_key(const ChartPoint *p) { return p->kl_mean < 0 ? 0 : p->kl_mean; }

static int dominates(const ChartPoint *a, const ChartPoint *b) {
    double ka = kl_key(a), kb = kl_key(b);
    return a->bits <= b->bits && ka <= kb && (a->bits < b->bits || ka < kb);
}

/* The front among the points with mask[i] set (mask NULL: all points). */
static void front_among(const ChartPoint *p, int n, const unsigned char *mask, unsigned char *front) {
    for (int i = 0; i < n; i++) {
        front[i] = takes_part(&p[i]) && (!mask || mask[i]);
        for (int j = 0; j < n && front[i]; j++)
            if (j != i && takes_part(&p[j]) && (!mask || mask[j]) && dominates(&p[j], &p[i])) front[i] = 0;
    }
}

void chart_pareto_front(const ChartPoint *points, int n, unsigned char *front) {
    front_among(points, n, NULL, front);
}

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

/* Axis over the drawn points' bits (which = 0) or delta ppl (which = 1, always including 0). */
static Axis data_axis(const Chart *c, int which) {
    double lo = which ? 0 : INFINITY, hi = which ? 0 : -INFINITY;
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double v = tame(which ? c->p[i].dppl_pct : c->p[i].bits);
        lo = fmin(lo, v), hi = fmax(hi, v);
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

static double map_lin(Axis a, Panel pn, double v) {
    return fit(pn.bottom - (tame(v) - a.lo) / (a.hi - a.lo) * (pn.bottom - pn.top), H);
}

static double map_log(const Chart *c, double log_kl) {
    double lo = c->klo - c->kpad, hi = c->khi + c->kpad;
    return fit(TOP.bottom - (log_kl - lo) / (hi - lo) * (TOP.bottom - TOP.top), H);
}

static double map_kl(const Chart *c, double kl) { return map_log(c, kl_clamped(kl) ? c->klo : log10(kl)); }

/* Length of the valid UTF-8 sequence at s, or 0: XML parsers reject a file with invalid UTF-8. */
static int utf8_len(const unsigned char *s) {
    unsigned char c = s[0];
    int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len < 2) return len;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)    /* stops at the NUL, which is no continuation byte */
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* s as XML character data; control bytes and invalid UTF-8 become '?'. */
static void xml_text(FILE *f, const char *s) {
    static const char special[] = "&<>\"'", *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        int len = utf8_len(u);
        const char *hit = strchr(special, *u);
        if (hit) fputs(entity[hit - special], f);
        else if (len == 0 || *u < 0x20) fputc('?', f);
        else fwrite(u, 1, (size_t)len, f);
        u += len ? len : 1;
    }
}

/* Characters (not bytes) in s, for the width estimate. */
static int text_chars(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void text_at(FILE *f, double x, double y, const char *anchor, const char *attrs, const char *s) {
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\"%s>", fit(x, W), fit(y, H), anchor, attrs);
    xml_text(f, s);
    fputs("</text>\n", f);
}

static void line(FILE *f, double x1, double y1, double x2, double y2, const char *style) {
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>\n", fit(x1, W), fit(y1, H), fit(x2, W),
            fit(y2, H), style);
}

static void hline(FILE *f, double y, const char *style) { line(f, PLOT_L, y, PLOT_R, y, style); }

static void tick_label(char *buf, size_t len, Axis a, double v) {
    int decimals = a.step >= 1 ? 0 : (int)fmin(12, ceil(-log10(a.step) - 1e-9));
    if (fabs(v) < a.step * 1e-6) v = 0;    /* 3 * 0.1 - 0.3 is not 0 and would print "-0.0" */
    snprintf(buf, len, "%.*f", decimals, v);
}

/* Grid lines at the ticks of a linear axis across panel pn (vertical: the bits axis, labelled under
 * the panel when asked; else the delta ppl axis, labelled left). Ticks are the multiples of the step. */
static void lin_grid(const Chart *c, Axis a, Panel pn, int vertical, int labels) {
    long first = (long)ceil(a.lo / a.step), last = (long)floor(a.hi / a.step);
    for (long i = first; i <= last && i < first + 40; i++) {
        double v = (double)i * a.step, at = vertical ? map_x(c, v) : map_lin(a, pn, v);
        char buf[64];
        tick_label(buf, sizeof buf, a, v);
        if (vertical) line(c->f, at, pn.top, at, pn.bottom, GRID);
        else hline(c->f, at, GRID);
        if (labels)
            text_at(c->f, vertical ? at : PLOT_L - 6, vertical ? pn.bottom + 17 : at + 4, vertical ? "middle" : "end", "", buf);
    }
}

static void kl_grid(const Chart *c) {
    int decades = c->khi - c->klo, every = (decades + 7) / 8;    /* at most ~8 labelled decades */
    for (int k = c->klo; k <= c->khi; k++) {
        double y = map_log(c, k);
        char buf[32];
        snprintf(buf, sizeof buf, k == 0 ? "1" : "1e%d", k);
        if ((k - c->klo) % every == 0) {    /* the others' grid lines would only shade the panel */
            hline(c->f, y, GRID);
            text_at(c->f, PLOT_L - 6, y + 4, "end", "", buf);
        }
        for (int m = 2; m <= 9 && k < c->khi && decades <= 6; m++)    /* minor ticks on the axis */
            line(c->f, PLOT_L, map_log(c, k + log10(m)), PLOT_L + 4, map_log(c, k + log10(m)), "stroke=\"#333\"");
    }
}

static void frame(FILE *f, Panel pn) {
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"#333\"/>\n",
            PLOT_L, pn.top, PLOT_R - PLOT_L, pn.bottom - pn.top);
}

static void y_title(FILE *f, Panel pn, const char *s) {
    double y = (pn.top + pn.bottom) / 2;
    fprintf(f, "<text x=\"18.00\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"13\" "
               "transform=\"rotate(-90 18.00 %.2f)\">%s</text>\n", y, y, s);
}

static int overlaps(const Chart *c, Box b) {
    for (int i = 0; i < c->n_boxes; i++) {
        const Box *o = &c->boxes[i];
        if (b.x0 < o->x1 && o->x0 < b.x1 && b.y0 < o->y1 && o->y0 < b.y1) return 1;
    }
    return 0;
}

/* The label's box with its baseline at y: right of the point, or left when it would leave the plot. */
static Box label_box(double px, double y, int chars) {
    double w = 0.6 * LABEL_FS * chars, x0 = px + LABEL_GAP + w > PLOT_R ? px - LABEL_GAP - w : px + LABEL_GAP;
    Box b = {x0, y - 0.8 * LABEL_FS, x0 + w, y + 0.25 * LABEL_FS};
    return b;
}

/* Places the label of point i (drawn at px, py); when it would overlap an earlier label, the
 * nearest free row above or below within the panel (joined to its point by a thin line), else
 * where it was: an overlap is better than a label outside the panel. */
static void label(Chart *c, Panel pn, int i, double px, double py, const char *suffix) {
    const char *s = c->p[i].label ? c->p[i].label : "";
    int chars = text_chars(s) + text_chars(suffix);
    double y = py + 0.35 * LABEL_FS;
    Box b = label_box(px, y, chars);
    int moved = 0;
    for (int k = 1; k <= 2 * MAX_NUDGES && overlaps(c, b); k++) {
        Box t = label_box(px, y + (k + 1) / 2 * (k % 2 ? 1 : -1) * (LABEL_FS + 1), chars);
        if (t.y0 >= pn.top && t.y1 <= pn.bottom && !overlaps(c, t)) b = t, moved = 1;
    }
    c->boxes[c->n_boxes++] = b;
    int left = b.x0 < px;
    if (moved)
        line(c->f, px, py, left ? b.x1 + 1 : b.x0 - 1, (b.y0 + b.y1) / 2, "stroke=\"#999\" stroke-width=\"0.7\"");
    fprintf(c->f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\">", fit(left ? b.x1 : b.x0, W),
            fit(b.y0 + 0.8 * LABEL_FS, H), left ? "end" : "start");
    xml_text(c->f, s);
    xml_text(c->f, suffix);
    fputs("</text>\n", c->f);
}

static void marker(FILE *f, double x, double y, int on_front) {
    fprintf(f, "<circle class=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"4\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
            on_front ? "front" : "other", x, y, on_front ? FRONT_COLOR : "white", on_front ? FRONT_COLOR : OTHER_COLOR);
}

static double point_y(const Chart *c, int i, int top) {
    return top ? map_kl(c, c->p[i].kl_mean) : map_lin(c->d, BOTTOM, c->p[i].dppl_pct);
}

/* Markers first, then labels, so no marker hides a label. */
static void points(Chart *c, Panel pn, int top) {
    c->n_boxes = 0;
    fprintf(c->f, "<g font-size=\"%.0f\" fill=\"#222\">\n", LABEL_FS);
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double x = map_x(c, c->p[i].bits), y = point_y(c, i, top);
        marker(c->f, x, y, c->front[i]);
        Box b = {x - 5, y - 5, x + 5, y + 5};    /* labels keep off the markers too */
        c->boxes[c->n_boxes++] = b;
    }
    for (int i = 0; i < c->n; i++) {
        if (!c->shown[i]) continue;
        double kl = c->p[i].kl_mean;
        const char *suffix = !top || !kl_clamped(kl) ? "" : isfinite(kl) ? " (KL <= 0)" : " (KL not finite)";
        label(c, pn, i, map_x(c, c->p[i].bits), point_y(c, i, top), suffix);
    }
    fputs("</g>\n", c->f);
}

/* The front joined in increasing bits. Front points with equal bits have equal KL, so an insertion
 * sort that keeps the input order of ties gives the same file for the same input. */
static void front_line(Chart *c) {
    int *order = c->order, m = 0;
    for (int i = 0; i < c->n; i++) {
        if (!c->front[i]) continue;
        int j = m++;
        for (; j > 0 && c->p[order[j - 1]].bits > c->p[i].bits; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    if (m < 2) return;
    fprintf(c->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", FRONT_COLOR);
    for (int k = 0; k < m; k++)
        fprintf(c->f, "%s%.2f,%.2f", k ? " " : "", map_x(c, c->p[order[k]].bits), map_kl(c, c->p[order[k]].kl_mean));
    fputs("\"/>\n", c->f);
}

static void header(FILE *f, const char *title) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H, W, H, W, H);
    if (title) text_at(f, W / 2, 26, "middle", " font-size=\"16\" font-weight=\"bold\"", title);
    fprintf(f, "<g font-size=\"11\">\n<line x1=\"470\" y1=\"46\" x2=\"494\" y2=\"46\" stroke=\"%s\" "
               "stroke-width=\"1.5\"/>\n", FRONT_COLOR);
    marker(f, 482, 46, 1);
    text_at(f, 502, 50, "start", "", "Pareto front (bits vs KL)");
    marker(f, 700, 46, 0);
    text_at(f, 708, 50, "start", "", "not on the front");
    fputs("</g>\n", f);
}

static void notes(const Chart *c, int drawn) {
    if (drawn == 0)
        text_at(c->f, (PLOT_L + PLOT_R) / 2, (TOP.top + TOP.bottom) / 2, "middle", " font-size=\"16\" fill=\"#777\"",
                "no points");
    if (drawn < c->n)
        fprintf(c->f, "<text x=\"%.2f\" y=\"714.00\" font-size=\"10\" fill=\"#777\">%d of %d configurations not "
                      "shown: effective bits or delta ppl not finite</text>\n", PLOT_L, c->n - drawn, c->n);
}

static int draw(Chart *c, const char *title) {
    int drawn = 0;
    for (int i = 0; i < c->n; i++) {
        c->shown[i] = isfinite(c->p[i].bits) && isfinite(c->p[i].dppl_pct);
        drawn += c->shown[i];
    }
    front_among(c->p, c->n, c->shown, c->front);
    c->x = data_axis(c, 0);
    c->d = data_axis(c, 1);
    kl_decades(c);
    header(c->f, title);
    lin_grid(c, c->x, TOP, 1, 0);
    kl_grid(c);
    lin_grid(c, c->x, BOTTOM, 1, 1);
    lin_grid(c, c->d, BOTTOM, 0, 1);
    hline(c->f, map_lin(c->d, BOTTOM, 0), "stroke=\"#777\" stroke-dasharray=\"5 3\"");    /* 0 is always in range */
    frame(c->f, TOP);
    frame(c->f, BOTTOM);
    y_title(c->f, TOP, "mean KL divergence (nats/token)");
    y_title(c->f, BOTTOM, "delta perplexity (%)");
    text_at(c->f, (PLOT_L + PLOT_R) / 2, BOTTOM.bottom + 42, "middle", " font-size=\"13\"", "effective bits per value");
    front_line(c);
    points(c, TOP, 1);
    points(c, BOTTOM, 0);
    notes(c, drawn);
    fputs("</svg>\n", c->f);
    return fflush(c->f) == 0 && !ferror(c->f) ? 0 : -1;
}

int chart_write_svg(FILE *f, const char *title, const ChartPoint *points, int n) {
    Chart c = {0};
    c.f = f, c.p = points, c.n = n > 0 ? n : 0;
    size_t m = (size_t)c.n + 1;    /* + 1: calloc(0) may return NULL */
    /* One block, most aligned first: 2m boxes, m ints, 2m bytes. */
    c.boxes = calloc(m, 2 * sizeof *c.boxes + sizeof *c.order + 2);
    if (!c.boxes) return -1;
    c.order = (int *)(c.boxes + 2 * m);
    c.shown = (unsigned char *)(c.order + m);
    c.front = c.shown + m;
    int rc = draw(&c, title);
    free(c.boxes);
    return rc;
}
