/* eval/sensitivity_chart.c: the sensitivity's heatmap (see eval/sensitivity.h): two panels side
 * by side, keys (K) left and values (V) right; rows are layers (0 at the top), columns the
 * side's candidates; each cell's colour is its mean KL on one log scale shared by both panels (dark blue
 * the least, yellow the most: svg_ramp), with the value written in it. */
#include "eval/sensitivity_chart.h"
#include "eval/svg.h"
#include <math.h>
#include <string.h>

#define CELL_W 78
#define CELL_H 20
#define LEFT 56          /* the K panel's layer numbers */
#define GAP 44           /* between the panels: the V panel's layer numbers */
#define TOP 110          /* title, notes, panel names, candidate names and bits */
#define BAR_H 12         /* the colour bar under the panels */

/* The decades the positive finite KLs span: [lo, hi] of log10. */
static void kl_range(const double *kl, int n, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(kl[i]) && kl[i] > 0) {
            double v = log10(kl[i]);
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
    if (!(*lo <= *hi)) *lo = -6, *hi = 0;
    if (*hi - *lo < 1e-6) *lo -= 0.5, *hi += 0.5;
}

static int panel_x(const SensGrid *g, int side) { return LEFT + side * (g->n_candidates[SENS_KEYS] * CELL_W + GAP); }

static void panel(FILE *f, const SensGrid *g, int side, const double *kl, const double *bits, double lo, double hi) {
    int C = g->n_candidates[side];
    int x0 = panel_x(g, side);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", x0, TOP - 36,
            side == SENS_KEYS ? "K (keys)" : "V (values)");
    for (int c = 0; c < C; c++) {
        int xc = x0 + c * CELL_W + CELL_W / 2;
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">", xc, TOP - 18);
        svg_text(f, g->candidates[side][c]);
        fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\" fill=\"#555\">%.4g bits</text>\n",
                xc, TOP - 6, bits[c]);
    }
    for (int layer = 0; layer < g->n_layers; layer++) {
        int y = TOP + layer * CELL_H;
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%d</text>\n", x0 - 4, y + CELL_H - 6,
                layer);
        for (int c = 0; c < C; c++) {
            double v = kl[sens_config_index(g, side, layer, c)];
            int rgb[3] = {204, 204, 204}, drawn = isfinite(v) && v > 0;
            double t = drawn ? (log10(v) - lo) / (hi - lo) : 0;
            if (drawn) svg_ramp(t, rgb);
            fprintf(f, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\" "
                       "stroke=\"white\"><title>%s layer %d ", x0 + c * CELL_W, y, CELL_W, CELL_H, rgb[0], rgb[1], rgb[2],
                    side == SENS_KEYS ? "K" : "V", layer);
            svg_text(f, g->candidates[side][c]);
            fprintf(f, ": KL %.6g</title></rect>\n", v);
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"%s\">%.2g</text>\n",
                    x0 + c * CELL_W + CELL_W / 2, y + CELL_H - 6, drawn && t > 0.55 ? "black" : drawn ? "white" : "black",
                    v);
        }
    }
}

/* The colour bar: the ramp from 10^lo to 10^hi, a tick at every whole decade inside. */
static void colour_bar(FILE *f, int x0, int y0, int width, double lo, double hi) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">mean KL (nats/token), log scale; grey: 0 or not measured</text>\n",
            x0, y0 - 4);
    for (int i = 0; i < width; i += 2) {
        int rgb[3];
        svg_ramp((double)i / width, rgb);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"2\" height=\"%d\" fill=\"#%02x%02x%02x\"/>\n", x0 + i, y0, BAR_H, rgb[0],
                rgb[1], rgb[2]);
    }
    for (int d = (int)ceil(lo - 1e-9); d <= (int)floor(hi + 1e-9); d++) {
        double x = x0 + (d - lo) / (hi - lo) * width;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n", x, y0 + BAR_H, x, y0 + BAR_H + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">1e%d</text>\n", x, y0 + BAR_H + 15, d);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%.2g</text>\n", x0 - 4, y0 + BAR_H - 2, pow(10, lo));
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\">%.2g</text>\n", x0 + width + 4, y0 + BAR_H - 2, pow(10, hi));
}

int sens_write_heatmap_svg(FILE *f, const char *title, const SensGrid *g, const double *kl, const double *k_bits,
                           const double *v_bits) {
    int n = sens_cell_count(g);
    double lo, hi;
    kl_range(kl, n, &lo, &hi);
    int panels_w = (g->n_candidates[SENS_KEYS] + g->n_candidates[SENS_VALUES]) * CELL_W + GAP, bar_y = TOP + g->n_layers * CELL_H + 34;
    int width = LEFT + panels_w + 20, height = bar_y + BAR_H + 30;
    if (width < 660) width = 660;   /* the title's line */
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n", width, height, width, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    fprintf(f, "<text x=\"10\" y=\"18\" font-size=\"13\">Per-layer sensitivity: mean KL when one layer's keys (K) "
               "or values (V) use the candidate</text>\n<text x=\"10\" y=\"34\" font-size=\"11\">");
    svg_text(f, title ? title : "");
    fprintf(f, "</text>\n<text x=\"10\" y=\"50\" font-size=\"11\">rows: layers 0-%d; columns: candidates; every "
               "other layer and side stays fp32</text>\n", g->n_layers - 1);
    panel(f, g, SENS_KEYS, kl, k_bits, lo, hi);
    panel(f, g, SENS_VALUES, kl, v_bits, lo, hi);
    colour_bar(f, LEFT, bar_y, panels_w < 300 ? panels_w : 300, lo, hi);
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}
