/* eval/calib_report.c: what a calibration shows a person — where the outlier channels are.
 * A per-layer table (the largest channel magnitude over the median one, for keys before and
 * after RoPE and for values, and the channel that holds it), and an SVG heatmap of every
 * channel's max |x| by layer (as KVQuant's Figure 2): keys before RoPE, keys after RoPE, values.
 * See eval/calib_report.h. */
#include "eval/calib_report.h"
#include "eval/svg.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ---- */

static const char *const KIND_NAMES[3] = {"keys before RoPE", "keys after RoPE", "values"};

/* A layer's max |x| of every KV channel (heads x head_dim) of one kind: 0 kpre, 1 k, 2 v. */
static const float *kind_stats(const Calibration *c, int kind, int layer) {
    const float *s = kind == 0 ? c->stats_kpre : kind == 1 ? c->stats_k : c->stats_v;
    return s + (size_t)layer * c->n_kv_heads * c->head_dim * 3;
}

static int compare_floats(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

LayerOutliers calib_layer_outliers(const Calibration *c, int kind, int layer) {
    int n = c->n_kv_heads * c->head_dim;
    const float *s = kind_stats(c, kind, layer);
    float *mags = malloc((size_t)n * sizeof *mags);
    LayerOutliers o = {0, 0, 0, 0};
    if (!mags) return o;
    for (int i = 0; i < n; i++) {
        mags[i] = s[3 * i + 2];
        if (mags[i] > o.max) o.max = mags[i], o.head = i / c->head_dim, o.channel = i % c->head_dim;
    }
    qsort(mags, (size_t)n, sizeof *mags, compare_floats);
    float median = n % 2 ? mags[n / 2] : 0.5f * (mags[n / 2 - 1] + mags[n / 2]);
    o.ratio = median > 0 ? o.max / median : 0;
    free(mags);
    return o;
}

void calib_print_outliers(FILE *f, const Calibration *c) {
    fprintf(f, "outlier channels: max |x| of the largest channel / of the median channel (KV head:channel)\n");
    fprintf(f, "%-6s", "layer");
    for (int kind = 0; kind < 3; kind++) fprintf(f, "  %-24s", KIND_NAMES[kind]);
    fprintf(f, "\n");
    for (int l = 0; l < c->n_layers; l++) {
        fprintf(f, "%-6d", l);
        for (int kind = 0; kind < 3; kind++) {
            LayerOutliers o = calib_layer_outliers(c, kind, l);
            char cell[64];
            snprintf(cell, sizeof cell, "%7.1fx (%d:%d, %.3g)", o.ratio, o.head, o.channel, o.max);
            fprintf(f, "  %-24s", cell);
        }
        fprintf(f, "\n");
    }
}

/* ---- the heatmap ---- */

#define CELL_H 14            /* a layer's row */
#define PANEL_W 768          /* channels are stretched or squeezed to this width */
#define LEFT 60
#define TOP 40
#define PANEL_GAP 46


/* The decades one kind spans over every layer (log10 of the smallest positive and largest max |x|). */
static void kind_range(const Calibration *c, int kind, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int l = 0; l < c->n_layers; l++) {
        const float *s = kind_stats(c, kind, l);
        for (int i = 0; i < c->n_kv_heads * c->head_dim; i++)
            if (s[3 * i + 2] > 0) {
                double v = log10(s[3 * i + 2]);
                if (v < *lo) *lo = v;
                if (v > *hi) *hi = v;
            }
    }
    if (!(*lo <= *hi)) *lo = 0, *hi = 1;
    if (*hi - *lo < 1e-6) *hi = *lo + 1;
}

static void panel(FILE *f, const Calibration *c, int kind, int y0) {
    int channels = c->n_kv_heads * c->head_dim;
    double lo, hi, w = (double)PANEL_W / channels;
    kind_range(c, kind, &lo, &hi);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\">%s: max |x| per channel, log colour from %.3g (dark) to %.3g "
               "(yellow)</text>\n", LEFT, y0 - 6, KIND_NAMES[kind], pow(10, lo), pow(10, hi));
    for (int l = 0; l < c->n_layers; l++) {
        const float *s = kind_stats(c, kind, l);
        for (int i = 0; i < channels; i++) {
            int rgb[3];
            svg_ramp(s[3 * i + 2] > 0 ? (log10(s[3 * i + 2]) - lo) / (hi - lo) : 0, rgb);
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#%02x%02x%02x\"/>\n", LEFT + i * w,
                    y0 + l * CELL_H, w + 0.05, CELL_H, rgb[0], rgb[1], rgb[2]);
        }
        if (l % 2 == 0 || c->n_layers <= 8)
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%d</text>\n", LEFT - 4,
                    y0 + l * CELL_H + CELL_H - 3, l);
    }
    for (int h = 1; h < c->n_kv_heads; h++)   /* KV head boundaries */
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"white\" stroke-width=\"1\"/>\n",
                LEFT + h * c->head_dim * w, y0, LEFT + h * c->head_dim * w, y0 + c->n_layers * CELL_H);
}

int calib_write_heatmap_svg(FILE *f, const Calibration *c, const char *title) {
    int panel_h = c->n_layers * CELL_H, width = LEFT + PANEL_W + 20, height = TOP + 3 * (panel_h + PANEL_GAP) + 10;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n", width, height, width, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\">", LEFT);
    svg_text(f, title);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"32\" font-size=\"11\">rows: layers 0-%d (top to bottom); columns: KV head x "
               "channel (%d x %d), white lines between heads</text>\n", LEFT, c->n_layers - 1, c->n_kv_heads, c->head_dim);
    for (int kind = 0; kind < 3; kind++) panel(f, c, kind, TOP + 18 + kind * (panel_h + PANEL_GAP));
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}
