/* eval/calib_fit.c: the tables of fitted bases from calibration rows (SCHEMES.md §8): each
 * table's points as its codec defines them, its start, Lloyd's algorithm (quant/lloyd.h), all
 * tables of all fits in parallel. See eval/calibrate.h. */
#include "eval/calibrate.h"
#include "eval/progress.h"
#include "quant/aw.h"
#include "quant/lloyd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int calib_fit_spec_parse(const char *text, int n_layers, int head_dim, CalibFitSpec *f, char *why, size_t why_len) {
    KvLayered keys, values;
    memset(f, 0, sizeof *f);
    if (strchr(text, ';')) {
        snprintf(why, why_len, "one spec, not per-layer items (a fit covers every layer)");
        return -1;
    }
    if (kv_layered_parse(text, KV_SIDE_KEYS, &keys, why, why_len) ||
        kv_layered_bind(&keys, n_layers, head_dim, KV_SIDE_KEYS, why, why_len))
        return -1;
    f->keys = keys.all;
    if (!kv_spec_is_fitted(&f->keys)) {
        snprintf(why, why_len, "%s is not a fitted base (nuqB-gG, nuqB-tG, vqC-dD, pcaB)", f->keys.base.name);
        return -1;
    }
    kv_spec_fit_key(&f->keys, f->key, sizeof f->key);
    f->sides = f->keys.prerope ? 1 : 2;   /* +prerope is for keys only */
    if (f->sides == 2) {
        if (kv_layered_parse(text, KV_SIDE_VALUES, &values, why, why_len) ||
            kv_layered_bind(&values, n_layers, head_dim, KV_SIDE_VALUES, why, why_len))
            return -1;
        f->values = values.all;
    }
    return 0;
}

/* ---- one table's points ---- */

/* Units a spec forms on one KV head's rows: rows one by one, or for a token-axis base the
 * complete groups of G positions of each window, from position 0. */
static size_t head_units(const CalibRows *r, const KvSpec *spec) {
    int g = spec->base.rows;
    return g == 1 ? (size_t)r->rows : (size_t)r->windows * (size_t)(r->ctx / g);
}

static int heads_of(const CalibRows *r, int head) { return head < 0 ? r->n_kv_heads : 1; }

size_t calib_units_floats(const CalibRows *r, const KvSpec *spec, int head) {
    return head_units(r, spec) * (size_t)heads_of(r, head) * (size_t)spec->base.rows * (size_t)r->head_dim;
}

/* The rows a spec's base sees in layer l, KV head h: keys after RoPE, keys before RoPE
 * (+prerope), or values. */
static const float *source_rows(const CalibRows *r, const KvSpec *spec, int l, int h) {
    const float *base = spec->side == KV_SIDE_VALUES ? r->v : spec->prerope ? r->kpre : r->k;
    return base + (((size_t)l * r->n_kv_heads + (size_t)h) * (size_t)r->rows) * (size_t)r->head_dim;
}

size_t calib_points(const CalibRows *r, const KvSpec *spec, int layer, int head, int book, float *units, float *points) {
    int d = r->head_dim, g = spec->base.rows;
    size_t count = 0;
    for (int h = head < 0 ? 0 : head; h < (head < 0 ? r->n_kv_heads : head + 1); h++) {
        const float *rows = source_rows(r, spec, layer, h);
        for (int w = 0; w < r->windows; w++)
            for (int p = 0; p + g <= r->ctx; p += g, count++)
                for (int i = 0; i < g; i++) {
                    float *row = units + (count * g + (size_t)i) * d;
                    memcpy(row, rows + ((size_t)w * r->ctx + p + i) * d, (size_t)d * sizeof(float));
                    kv_spec_codec_input(spec, row, d);
                }
    }
    return spec->base.codec->fit->points(&spec->base, units, count, d, book, points);
}

/* ---- the fits ---- */

/* One table to fit: a fit's side of one layer, one KV head's (or every head's, shared). */
typedef struct {
    int fit, side, layer, head;
} FitTask;

static const KvSpec *spec_of(const CalibFitSpec *f, int side) { return side == 0 ? &f->keys : &f->values; }

static int task_list(const CalibRows *r, const CalibFitSpec *specs, int n_specs, FitTask **out) {
    int n = 0, cap = 0;
    FitTask *t = NULL;
    for (int f = 0; f < n_specs; f++)
        for (int side = 0; side < specs[f].sides; side++) {
            KvTableShape shape;
            const KvSpec *spec = spec_of(&specs[f], side);
            spec->base.codec->fit->shape(&spec->base, r->head_dim, &shape);
            for (int l = 0; l < r->n_layers; l++)
                for (int h = shape.per_head ? 0 : -1; h < (shape.per_head ? r->n_kv_heads : 0); h++) {
                    if (n == cap) {
                        FitTask *grown = realloc(t, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *t);
                        if (!grown) {
                            free(t);
                            return -1;
                        }
                        t = grown;
                    }
                    t[n++] = (FitTask){f, side, l, h};
                }
        }
    *out = t;
    return n;
}

/* Buffers of one task: its units, its points, the start's scratch, Lloyd's codes and sums. */
typedef struct {
    float *units, *points, *scratch;
    uint16_t *codes;
    void *lloyd;
} FitBuffers;

static void buffers_free(FitBuffers *b) {
    free(b->units);
    free(b->points);
    free(b->scratch);
    free(b->codes);
    free(b->lloyd);
}

static int buffers_alloc(FitBuffers *b, const CalibRows *r, const KvSpec *spec, int head, const KvTableShape *shape) {
    size_t floats = calib_units_floats(r, spec, head);
    memset(b, 0, sizeof *b);
    b->units = malloc(floats * sizeof(float));
    b->points = malloc(floats * sizeof(float));
    b->scratch = malloc(floats * sizeof(float));
    b->codes = malloc(floats * sizeof(uint16_t));
    b->lloyd = malloc(lloyd_scratch_bytes(shape->dim, shape->entries));
    return b->units && b->points && b->scratch && b->codes && b->lloyd ? 0 : -1;
}

/* Lloyd keeps 1-D centroids in order, except after equal starts ({0, 0, 10} can end {1, 0, 9}). */
static void sort_ascending(float *x, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            float t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
}

/* A codec that fits a KV head's table at once (pca): the head's rows as the codec is given them. */
static int fit_whole_table(const CalibRows *r, const KvSpec *spec, const FitTask *t, const float *weights, float *table,
                           char *why, size_t why_len) {
    int d = r->head_dim;
    const KvFit *fit = spec->base.codec->fit;
    size_t count = (size_t)r->rows;
    float *rows = malloc(count * (size_t)d * sizeof *rows);
    void *scratch = malloc(fit->fit_scratch_bytes(&spec->base, count, d));
    if (!rows || !scratch) {
        free(rows);
        free(scratch);
        snprintf(why, why_len, "out of memory for the fit of %s", spec->text);
        return -1;
    }
    memcpy(rows, source_rows(r, spec, t->layer, t->head), count * (size_t)d * sizeof *rows);
    for (size_t i = 0; i < count; i++) kv_spec_codec_input(spec, rows + i * d, d);
    fit->fit_table(&spec->base, rows, count, d, weights, table, scratch);
    free(rows);
    free(scratch);
    return 0;
}

/* +aw's weights of a task's KV head (NULL without +aw, or for a table the heads share). */
static const float *task_weights(const Calibration *c, const CalibRows *r, const KvSpec *spec, const FitTask *t) {
    if (!spec->aw || t->head < 0) return NULL;
    const float *w = calibration_aw(c, spec->side == KV_SIDE_VALUES ? 'v' : 'k', spec->prerope, t->layer);
    return w ? w + (size_t)t->head * r->head_dim : NULL;
}

/* The table of one task into `table` (the layer's, or the head's part of it). */
static int fit_task(const CalibRows *r, const KvSpec *spec, const FitTask *t, const float *weights, float *table,
                    char *why, size_t why_len) {
    KvTableShape shape;
    spec->base.codec->fit->shape(&spec->base, r->head_dim, &shape);
    if (spec->base.codec->fit->fit_table) return fit_whole_table(r, spec, t, weights, table, why, why_len);
    FitBuffers b;
    int rc = buffers_alloc(&b, r, spec, t->head, &shape);
    if (rc) snprintf(why, why_len, "out of memory for the fit of %s", spec->text);
    size_t book_floats = (size_t)shape.entries * shape.dim;
    for (int book = 0; book < shape.books && !rc; book++) {
        size_t n = calib_points(r, spec, t->layer, t->head, book, b.units, b.points);
        size_t need = 4 * (size_t)shape.entries;
        if (n < need) {   /* the points grow with the tokens: as many more tokens as points are missing */
            size_t tokens = n ? ((size_t)r->rows * need + n - 1) / n : need;
            snprintf(why, why_len, "the fit %.60s has %zu points in layer %d, fewer than 4 x its %d entries: give "
                     "--tokens %zu or more", spec->text, n, t->layer, shape.entries, tokens);
            rc = -1;
            break;
        }
        float *entries = table + (size_t)book * book_floats;
        /* +aw on a head's sub-vectors (vq): Lloyd on sqrt(w)-scaled points is the weighted fit (quant/aw.h) */
        float sqrt_w[LLOYD_MAX_DIM];
        if (weights)
            for (int e = 0; e < shape.dim; e++) sqrt_w[e] = sqrtf(weights[book * shape.dim + e]);
        if (weights) aw_scale_points(b.points, n, shape.dim, sqrt_w);
        spec->base.codec->fit->start(&spec->base, b.points, n, entries, b.scratch);
        lloyd_fit(b.points, n, shape.dim, entries, shape.entries, LLOYD_MAX_ITERATIONS, b.codes, b.lloyd);
        if (weights) aw_unscale_centroids(entries, shape.entries, shape.dim, sqrt_w);
        if (shape.dim == 1) sort_ascending(entries, shape.entries);   /* §8 stores a table of values ascending */
    }
    buffers_free(&b);
    return rc;
}

/* Where a task's table lies in the calibration: the layer's side, then the head's part. */
static float *task_table(Calibration *c, const CalibRows *r, const CalibFitSpec *specs, const FitTask *t) {
    CalibFit *fit = &c->fits[t->fit];
    float *layer_side = fit->codebooks + ((size_t)t->layer * fit->sides + (size_t)t->side) * fit->codebook_floats;
    size_t head_floats = fit->codebook_floats / (size_t)(t->head < 0 ? 1 : r->n_kv_heads);
    (void)specs;
    return layer_side + (t->head < 0 ? 0 : (size_t)t->head * head_floats);
}

int calib_fit_all(const CalibRows *r, const CalibFitSpec *specs, int n_specs, Calibration *c,
                  void (*progress)(void *user, int done, int total, long tokens, double seconds), void *progress_user,
                  Error *err) {
    FitTask *tasks = NULL;
    int n = task_list(r, specs, n_specs, &tasks);
    if (n < 0) return error_set(err, "out of memory for the list of fits");
    int failed = 0, done = 0;
    char why[256] = "";
    double t0 = seconds_now();
    /* tables are independent: each task has its own buffers and writes its own part of c */
    #pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        int skip;
        #pragma omp atomic read
        skip = failed;
        if (skip) continue;
        char mine[256];
        const FitTask *t = &tasks[i];
        const KvSpec *spec = spec_of(&specs[t->fit], t->side);
        if (fit_task(r, spec, t, task_weights(c, r, spec, t), task_table(c, r, specs, t), mine, sizeof mine)) {
            #pragma omp critical(calib_fit_failure)
            if (!failed) {
                failed = 1;
                snprintf(why, sizeof why, "%s", mine);
            }
            continue;
        }
        #pragma omp critical(calib_fit_progress)
        {
            done++;
            if (progress) progress(progress_user, done, n, 0, seconds_now() - t0);
        }
    }
    free(tasks);
    return failed ? error_set(err, "%s", why) : 0;
}
