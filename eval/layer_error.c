/* eval/layer_error.c: the per-layer error's sums (see layer_error.h). */
#include "eval/layer_error.h"
#include <math.h>

void layer_error_add(LayerErrorSums *s, int l, double rel) {
    s->rel_sum[l] += rel;
    s->rel_sumsq[l] += rel * rel;
}

void layer_error_merge(LayerErrorSums *into, const LayerErrorSums *from) {
    if (from->n_layers == 0) return;
    if (into->n_layers == 0) into->n_layers = from->n_layers;
    into->rows += from->rows;
    for (int l = 0; l < into->n_layers; l++) {
        into->rel_sum[l] += from->rel_sum[l];
        into->rel_sumsq[l] += from->rel_sumsq[l];
    }
}

double layer_error_mean(const LayerErrorSums *s, int l) {
    return s->rows > 0 && l < s->n_layers ? s->rel_sum[l] / (double)s->rows : NAN;
}

double layer_error_se(const LayerErrorSums *s, int l) {
    long n = s->rows;
    if (n < 2 || l >= s->n_layers) return NAN;
    double mean = s->rel_sum[l] / (double)n, var = (s->rel_sumsq[l] - (double)n * mean * mean) / (double)(n - 1);
    return sqrt((var > 0 ? var : 0) / (double)n);
}

static void numbers(FILE *f, const double *v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (isfinite(v[i])) fprintf(f, "%s%.17g", i ? ", " : "", v[i]);
        else fprintf(f, "%snull", i ? ", " : "");
    }
    fputc(']', f);
}

void layer_error_write(FILE *f, const LayerErrorSums *s) {
    fprintf(f, "{\"layers\": %d, \"rows\": %ld, \"sum\": ", s->n_layers, s->rows);
    numbers(f, s->rel_sum, s->n_layers);
    fputs(", \"sumsq\": ", f);
    numbers(f, s->rel_sumsq, s->n_layers);
    fputc('}', f);
}

/* The array a of n finite numbers into out. */
static int read_numbers(const JsonValue *a, int n, double *out) {
    if (!a || a->type != JSON_ARRAY || (int)a->count != n) return -1;
    for (int i = 0; i < n; i++) {
        if (a->items[i].type != JSON_NUMBER || !isfinite(a->items[i].number)) return -1;
        out[i] = a->items[i].number;
    }
    return 0;
}

int layer_error_read(const JsonValue *o, LayerErrorSums *s, const char *where, Error *err) {
    long long layers, rows;
    if (!o || o->type != JSON_OBJECT || json_integer(o, "layers", 0, LAYER_ERR_MAX_LAYERS, &layers) ||
        json_integer(o, "rows", 0, 1LL << 40, &rows))
        return error_set(err, "%s: the layer error is not {\"layers\", \"rows\", \"sum\", \"sumsq\"}", where);
    if (s->n_layers && layers && layers != s->n_layers)
        return error_set(err, "%s: the layer error holds %lld layers, not %d", where, layers, s->n_layers);
    LayerErrorSums part = {.n_layers = (int)layers, .rows = (long)rows};
    if (read_numbers(json_get(o, "sum"), part.n_layers, part.rel_sum) ||
        read_numbers(json_get(o, "sumsq"), part.n_layers, part.rel_sumsq))
        return error_set(err, "%s: the layer error's sums are not %lld numbers each", where, layers);
    layer_error_merge(s, &part);
    return 0;
}
