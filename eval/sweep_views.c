/* eval/sweep_views.c: a sweep's position and layer views (eval/views.h) in its outputs: sections
 * of results.md after the main table, columns at the end of results.csv, and the charts
 * position.svg (KL against position, log scale, one line per configuration) and layers.svg (each
 * layer's attention error). A configuration whose journal records predate a view (no sums for
 * it) leaves that view's cells empty; a view no configuration has is left out. */
#include "eval/sweep_views.h"
#include "eval/stats.h"
#include "eval/line_chart.h"
#include "eval/views.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "int4-g64" when keys and values share the scheme, else "K ... / V ...", as the main table. */
static void label_of(const SweepConfig *c, char *out, size_t n) {
    if (!strcmp(c->k_text, c->v_text)) snprintf(out, n, "%s", c->k_text);
    else snprintf(out, n, "K %s / V %s", c->k_text, c->v_text);
}

/* Which buckets hold tokens in some configuration with complete position sums; their count. */
static int buckets_shown(const SweepSettings *s, const SweepTotals *t, unsigned char shown[POS_BUCKETS]) {
    memset(shown, 0, POS_BUCKETS);
    int n = 0;
    for (int i = 0; i < s->n_configs; i++)
        for (int b = 0; b < POS_BUCKETS; b++)
            if (views_position_complete(&t->sums[i]) && t->sums[i].pos.n[b] && !shown[b]) shown[b] = 1, n++;
    return n;
}

/* The layers measured: the largest count of a configuration with a complete layer view (0: none). */
static int layers_shown(const SweepSettings *s, const SweepTotals *t) {
    int n = 0;
    for (int i = 0; i < s->n_configs; i++)
        if (views_layer_complete(&t->sums[i]) && t->sums[i].layer.n_layers > n) n = t->sums[i].layer.n_layers;
    return n;
}

static void bucket_name(int b, char *out, size_t n) {
    snprintf(out, n, "%d-%d", position_bucket_low(b), position_bucket_high(b) - 1);
}

/* One table of the position view: kl (1) or the NLL change (0) per bucket. */
static void position_table(FILE *f, const SweepSettings *s, const SweepTotals *t, const unsigned char *shown, int kl) {
    char name[1100];
    fprintf(f, "| configuration |");
    for (int b = 0; b < POS_BUCKETS; b++)
        if (shown[b]) {
            bucket_name(b, name, sizeof name);
            fprintf(f, " %s |", name);
        }
    fprintf(f, "\n|---|");
    for (int b = 0; b < POS_BUCKETS; b++)
        if (shown[b]) fprintf(f, "---:|");
    fprintf(f, "\n");
    for (int i = 0; i < s->n_configs; i++) {
        label_of(&s->configs[i], name, sizeof name);
        fprintf(f, "| %s |", name);
        int complete = views_position_complete(&t->sums[i]);
        char se[32];   /* "undefined" under 2 tokens, as the main table's */
        for (int b = 0; b < POS_BUCKETS; b++) {
            if (!shown[b]) continue;
            PositionFigures p = position_figures(&t->sums[i].pos, b);
            if (!complete || !p.n) fprintf(f, " |");
            else if (kl) fprintf(f, " %.3g +/- %s |", p.kl_mean, se_text(p.kl_se, "%.2g", se, sizeof se));
            else fprintf(f, " %+.4f +/- %s |", p.diff_mean, se_text(p.diff_se, "%.4f", se, sizeof se));
        }
        fprintf(f, "\n");
    }
}

static void position_markdown(FILE *f, const SweepSettings *s, const SweepTotals *t) {
    unsigned char shown[POS_BUCKETS];
    if (!buckets_shown(s, t, shown)) return;
    const TokenSums *any = NULL;
    for (int i = 0; i < s->n_configs && !any; i++)
        if (views_position_complete(&t->sums[i])) any = &t->sums[i];
    fprintf(f, "\n## Damage by position\n\nScored tokens by the position p of the token that predicts them (its query "
               "reads the cached positions 0..p), mean +/- standard error. Tokens per bucket:");
    char name[64];
    for (int b = 0, first = 1; b < POS_BUCKETS; b++)
        if (shown[b]) {
            bucket_name(b, name, sizeof name);
            fprintf(f, "%s %s: %ld", first ? "" : ",", name, any->pos.n[b]);
            first = 0;
        }
    if (s->ppl.protocol == PPL_HF && s->ppl.stride < s->ppl.ctx)
        fprintf(f, " (with stride %d < ctx %d only the first window scores positions below %d).", s->ppl.stride,
                s->ppl.ctx, s->ppl.ctx - s->ppl.stride - 1);
    else
        fprintf(f, ".");
    fprintf(f, "\n\nKL(fp32 || quantized), nats per token:\n\n");
    position_table(f, s, t, shown, 1);
    fprintf(f, "\nNLL change (quantized - fp32), nats per token:\n\n");
    position_table(f, s, t, shown, 0);
}

static void layer_markdown(FILE *f, const SweepSettings *s, const SweepTotals *t) {
    int L = layers_shown(s, t);
    if (!L) return;
    long rows = 0;
    for (int i = 0; i < s->n_configs && !rows; i++)
        if (views_layer_complete(&t->sums[i])) rows = t->sums[i].layer.rows;
    fprintf(f, "\n## Per-layer attention error\n\n||o_q - o|| / ||o|| of each layer's attention output (all heads, "
               "before o_proj), the quantized cache against the fp32 cache, both on the fp32 run's inputs to that layer "
               "(so no layer inherits the error of the layers below), mean over the %ld scored positions +/- standard "
               "error.\n\n| configuration |", rows);
    for (int l = 0; l < L; l++) fprintf(f, " layer %d |", l);
    fprintf(f, "\n|---|");
    for (int l = 0; l < L; l++) fprintf(f, "---:|");
    fprintf(f, "\n");
    char name[1100];
    for (int i = 0; i < s->n_configs; i++) {
        label_of(&s->configs[i], name, sizeof name);
        fprintf(f, "| %s |", name);
        const LayerErrorSums *e = &t->sums[i].layer;
        int complete = views_layer_complete(&t->sums[i]);
        char se[32];
        for (int l = 0; l < L; l++) {
            if (!complete || l >= e->n_layers) fprintf(f, " |");
            else fprintf(f, " %.3g +/- %s |", layer_error_mean(e, l), se_text(layer_error_se(e, l), "%.2g", se, sizeof se));
        }
        fprintf(f, "\n");
    }
}

void sweep_views_markdown(FILE *f, const SweepSettings *s, const SweepTotals *t) {
    position_markdown(f, s, t);
    layer_markdown(f, s, t);
}

void sweep_views_csv_header(FILE *f, const SweepSettings *s, const SweepTotals *t) {
    unsigned char shown[POS_BUCKETS];
    buckets_shown(s, t, shown);
    for (int b = 0; b < POS_BUCKETS; b++)
        if (shown[b]) {
            int lo = position_bucket_low(b), hi = position_bucket_high(b) - 1;
            fprintf(f, ",tokens_pos_%d_%d,kl_pos_%d_%d,kl_pos_%d_%d_stderr,dnll_pos_%d_%d,dnll_pos_%d_%d_stderr,"
                       "top1_pos_%d_%d", lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi);
        }
    for (int l = 0, L = layers_shown(s, t); l < L; l++) fprintf(f, ",layer%d_rel_err,layer%d_rel_err_stderr", l, l);
}

static void csv_number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.9g", v);
    else fprintf(f, ",");
}

void sweep_views_csv_row(FILE *f, const SweepSettings *s, const SweepTotals *t, int i) {
    unsigned char shown[POS_BUCKETS];
    buckets_shown(s, t, shown);
    const TokenSums *x = &t->sums[i];
    int complete = views_position_complete(x);
    for (int b = 0; b < POS_BUCKETS; b++) {
        if (!shown[b]) continue;
        PositionFigures p = position_figures(&x->pos, b);
        if (!complete) p = (PositionFigures){0, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
        if (complete) fprintf(f, ",%ld", p.n);
        else fprintf(f, ",");
        double v[] = {p.kl_mean, p.kl_se, p.diff_mean, p.diff_se, p.top1};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) csv_number(f, v[k]);
    }
    int layers = views_layer_complete(x);
    for (int l = 0, L = layers_shown(s, t); l < L; l++) {
        csv_number(f, layers ? layer_error_mean(&x->layer, l) : NAN);
        csv_number(f, layers ? layer_error_se(&x->layer, l) : NAN);
    }
}

/* The series of every configuration into y/se ([n_configs][n_x]) and labels; kind 0: KL by
 * bucket, 1: error by layer. */
static int write_chart(const char *dir, const char *file, const SweepSettings *s, const SweepTotals *t, int kind,
                       Error *err) {
    unsigned char shown[POS_BUCKETS];
    int n_x = kind == 0 ? buckets_shown(s, t, shown) : layers_shown(s, t), C = s->n_configs;
    if (n_x == 0) return 0;
    double *y = malloc((size_t)C * n_x * sizeof *y), *se = malloc((size_t)C * n_x * sizeof *se);
    char (*labels)[1100] = malloc((size_t)C * sizeof *labels), (*ticks)[32] = malloc((size_t)n_x * sizeof *ticks);
    LineSeries *series = malloc((size_t)C * sizeof *series);
    const char **tick_ptrs = malloc((size_t)n_x * sizeof *tick_ptrs);
    int rc = y && se && labels && ticks && series && tick_ptrs ? 0 : error_set(err, "out of memory");
    for (int i = 0; i < C && !rc; i++) {
        const TokenSums *x = &t->sums[i];
        label_of(&s->configs[i], labels[i], sizeof labels[i]);
        series[i] = (LineSeries){labels[i], y + (size_t)i * n_x, se + (size_t)i * n_x};
        for (int k = 0, b = 0; k < n_x; k++) {
            double v = NAN, e = NAN;
            if (kind == 0) {
                while (!shown[b]) b++;
                PositionFigures p = position_figures(&x->pos, b++);
                if (views_position_complete(x)) v = p.kl_mean, e = p.kl_se;
            } else if (views_layer_complete(x)) {
                v = layer_error_mean(&x->layer, k), e = layer_error_se(&x->layer, k);
            }
            y[(size_t)i * n_x + k] = v;
            se[(size_t)i * n_x + k] = e;
        }
    }
    for (int k = 0, b = 0; k < n_x && !rc; k++) {
        if (kind == 0) {
            while (!shown[b]) b++;
            bucket_name(b++, ticks[k], sizeof ticks[k]);
        } else {
            snprintf(ticks[k], sizeof ticks[k], "%d", k);
        }
        tick_ptrs[k] = ticks[k];
    }
    char title[1400], path[4200];
    snprintf(title, sizeof title, kind == 0 ? "KL(fp32 || quantized) by position on %s (ctx %d)"
                                            : "Each layer's attention error on %s (ctx %d), fp32 run's inputs",
             s->model, s->ppl.ctx);
    LineChart chart = {title, kind == 0 ? "position of the predicting token" : "layer",
                       kind == 0 ? "KL mean, nats/token (log)" : "||o_q - o|| / ||o|| (log)", tick_ptrs, n_x,
                       kind == 0 ? "bars: +/- one standard error; open circles on the bottom edge: a KL of exactly 0"
                                 : "bars: +/- one standard error over the scored positions; open circles on the bottom edge: exactly 0"};
    snprintf(path, sizeof path, "%s/%s", dir, file);
    AtomicFile af;
    if (!rc && !atomic_open(&af, path, err)) {
        line_chart_write_svg(af.f, &chart, series, C);
        rc = atomic_commit(&af, err);
    } else if (!rc) {
        rc = -1;
    }
    free(y);
    free(se);
    free(labels);
    free(ticks);
    free(series);
    free(tick_ptrs);
    return rc;
}

int sweep_views_charts(const char *dir, const SweepSettings *s, const SweepTotals *t, Error *err) {
    return write_chart(dir, "position.svg", s, t, 0, err) || write_chart(dir, "layers.svg", s, t, 1, err) ? -1 : 0;
}
