/* eval/views.c: the position and layer views in ppl's reports and in a sweep's journal records
 * (see views.h). */
#include "eval/views.h"
#include "eval/stats.h"
#include "eval/json_out.h"
#include <math.h>
#include <string.h>

int views_position_complete(const TokenSums *s) { return s->scored > 0 && position_sums_count(&s->pos) == s->scored; }

int views_layer_complete(const TokenSums *s) {
    return s->scored > 0 && s->layer.n_layers > 0 && s->layer.rows == s->scored;
}

void views_ppl_text(FILE *f, const TokenSums *s) {
    if (views_position_complete(s)) {
        fprintf(f, "position:  by the position of the predicting token (its query reads positions 0..p)\n");
        fprintf(f, "  positions     tokens     KL mean +/- se          delta NLL +/- se      top-1 %%\n");
        for (int b = 0; b < POS_BUCKETS; b++) {
            PositionFigures p = position_figures(&s->pos, b);
            if (!p.n) continue;
            char range[32];
            snprintf(range, sizeof range, "%d-%d", position_bucket_low(b), position_bucket_high(b) - 1);
            char kl_se[32], diff_se[32];   /* "undefined" under 2 tokens in the bucket, as the report's */
            fprintf(f, "  %-11s %7ld   %9.3g +/- %-9s  %+8.4f +/- %-9s  %6.2f\n", range, p.n, p.kl_mean,
                    se_text(p.kl_se, "%.2g", kl_se, sizeof kl_se), p.diff_mean,
                    se_text(p.diff_se, "%.4f", diff_se, sizeof diff_se), 100 * p.top1);
        }
    }
    if (views_layer_complete(s)) {
        fprintf(f, "layers:    ||o_q - o|| / ||o|| of each layer's attention output on the fp32 run's inputs\n");
        for (int l = 0; l < s->layer.n_layers; l++) {
            char se[32];
            fprintf(f, "%slayer %d %.4g +/- %s%s", l % 4 ? "   " : "  ", l, layer_error_mean(&s->layer, l),
                    se_text(layer_error_se(&s->layer, l), "%.2g", se, sizeof se),
                    (l + 1) % 4 == 0 || l + 1 == s->layer.n_layers ? "\n" : "");
        }
    }
}

static void position_json(FILE *f, const TokenSums *s) {
    fprintf(f, "  \"position_sums\": ");
    position_sums_write(f, &s->pos);
    fprintf(f, ",\n  \"by_position\": [");
    int first = 1;
    for (int b = 0; b < POS_BUCKETS; b++) {
        PositionFigures p = position_figures(&s->pos, b);
        if (!p.n) continue;
        fprintf(f, "%s\n    {\"from\": %d, \"to\": %d, \"tokens\": %ld", first ? "" : ",", position_bucket_low(b),
                position_bucket_high(b) - 1, p.n);
        const char *names[] = {"kl_mean", "kl_stderr", "delta_nll_mean", "delta_nll_stderr", "top1", "top1_stderr",
                               "baseline_nll_mean"};
        double v[] = {p.kl_mean, p.kl_se, p.diff_mean, p.diff_se, p.top1, p.top1_se, p.base_nll_mean};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            if (isfinite(v[i])) fprintf(f, ", \"%s\": %.17g", names[i], v[i]);
            else fprintf(f, ", \"%s\": null", names[i]);
        }
        fprintf(f, "}");
        first = 0;
    }
    fprintf(f, "],\n");
}

static void layer_json(FILE *f, const TokenSums *s) {
    fprintf(f, "  \"layer_error_sums\": ");
    layer_error_write(f, &s->layer);
    fprintf(f, ",\n");
    for (int k = 0; k < 2; k++) {
        fprintf(f, "  \"%s\": [", k ? "layer_rel_error_stderr" : "layer_rel_error");
        for (int l = 0; l < s->layer.n_layers; l++) {
            double v = k ? layer_error_se(&s->layer, l) : layer_error_mean(&s->layer, l);
            if (isfinite(v)) fprintf(f, "%s%.17g", l ? ", " : "", v);
            else fprintf(f, "%snull", l ? ", " : "");
        }
        fprintf(f, "],\n");
    }
}

void views_json(FILE *f, const TokenSums *s) {
    if (views_position_complete(s)) position_json(f, s);
    if (views_layer_complete(s)) layer_json(f, s);
}

int views_ppl_read(const JsonValue *j, TokenSums *s, const char *where, Error *err) {
    const JsonValue *pos = json_get(j, "position_sums"), *layer = json_get(j, "layer_error_sums");
    if (pos && position_sums_read(pos, &s->pos, where, err)) return -1;
    if (layer && layer_error_read(layer, &s->layer, where, err)) return -1;
    return 0;
}

void views_record_write(FILE *f, const TokenSums *s) {
    fprintf(f, ", \"pos\": ");
    position_sums_write(f, &s->pos);
    if (s->layer.n_layers == 0) return;
    fprintf(f, ", \"layer_error\": ");
    layer_error_write(f, &s->layer);
}

int views_record_read(const JsonValue *r, double *pool, size_t *used, ViewsRecord *v, const char *where, Error *err) {
    memset(v, 0, sizeof *v);
    v->n_buckets = -1;
    v->values = pool;
    *used = 0;
    const JsonValue *pos = json_get(r, "pos"), *layer = json_get(r, "layer_error");
    if (pos) {
        PositionSums p = {0};
        if (position_sums_read(pos, &p, where, err)) return -1;
        v->n_buckets = 0;
        for (int b = 0; b < POS_BUCKETS; b++) {
            if (!p.n[b]) continue;
            double *e = pool + *used;
            e[0] = b, e[1] = (double)p.n[b], e[2] = (double)p.agree[b];
            e[3] = p.kl_sum[b], e[4] = p.kl_sumsq[b], e[5] = p.diff_sum[b], e[6] = p.diff_sumsq[b];
            e[7] = p.base_nll_sum[b];
            *used += 8;
            v->n_buckets++;
        }
    }
    if (layer) {
        LayerErrorSums l = {0};
        if (layer_error_read(layer, &l, where, err)) return -1;
        v->n_layers = l.n_layers;
        v->layer_rows = l.rows;
        memcpy(pool + *used, l.rel_sum, (size_t)l.n_layers * sizeof(double));
        memcpy(pool + *used + l.n_layers, l.rel_sumsq, (size_t)l.n_layers * sizeof(double));
        *used += 2 * (size_t)l.n_layers;
    }
    return 0;
}

void views_record_add(const ViewsRecord *v, TokenSums *s) {
    for (int i = 0; i < v->n_buckets; i++) {
        const double *e = v->values + 8 * i;
        int b = (int)e[0];
        s->pos.n[b] += (long)e[1];
        s->pos.agree[b] += (long)e[2];
        s->pos.kl_sum[b] += e[3];
        s->pos.kl_sumsq[b] += e[4];
        s->pos.diff_sum[b] += e[5];
        s->pos.diff_sumsq[b] += e[6];
        s->pos.base_nll_sum[b] += e[7];
    }
    if (v->n_layers == 0) return;
    LayerErrorSums l = {.n_layers = v->n_layers, .rows = v->layer_rows};
    const double *sums = v->values + 8 * (v->n_buckets > 0 ? v->n_buckets : 0);
    memcpy(l.rel_sum, sums, (size_t)v->n_layers * sizeof(double));
    memcpy(l.rel_sumsq, sums + v->n_layers, (size_t)v->n_layers * sizeof(double));
    layer_error_merge(&s->layer, &l);
}
