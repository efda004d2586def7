/* eval/calib_fit.c: the tables of fitted bases from calibration rows (SCHEMES.md §8, §9): each
 * table's rows as its codec is given them, fitted by the codec (KvFit, quant/codec.h), all tables
 * of all fits in parallel. See eval/calibrate.h. */
#include "eval/calibrate.h"
#include "eval/progress.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
        char fitted[128];
        kv_fitted_syntaxes(fitted, sizeof fitted);
        snprintf(why, why_len, "%s is not a fitted base (%s)", f->keys.base.name, fitted);
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

/* ---- one table's rows ---- */

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
static const float *source_base(const CalibRows *r, const KvSpec *spec) {
    return spec->side == KV_SIDE_VALUES ? r->v : spec->prerope ? r->kpre : r->k;
}

static const float *source_rows(const CalibRows *r, const KvSpec *spec, int l, int h) {
    return source_base(r, spec) + (((size_t)l * r->n_kv_heads + (size_t)h) * (size_t)r->rows) * (size_t)r->head_dim;
}

/* Rows collected without what spec reads (keys before RoPE are kept only when a fit asks): 1,
 * with why naming it. */
static int source_missing(const CalibRows *r, const KvSpec *spec, char *why, size_t why_len) {
    if (source_base(r, spec)) return 0;
    snprintf(why, why_len, "the fit %.60s reads the %s, which these calibration rows were collected without",
             spec->text, spec->side == KV_SIDE_VALUES ? "values" : spec->prerope ? "keys before RoPE" : "keys after RoPE");
    return 1;
}

size_t calib_units(const CalibRows *r, const KvSpec *spec, int layer, int head, float *units) {
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
    return count;
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
            KvFitLayout layout;
            const KvSpec *spec = spec_of(&specs[f], side);
            spec->base.codec->fit->layout(&spec->base, r->head_dim, &layout);
            for (int l = 0; l < r->n_layers; l++)
                for (int h = layout.per_head ? 0 : -1; h < (layout.per_head ? r->n_kv_heads : 0); h++) {
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

/* The table of one task into `table` (the layer's, or the head's part of it): its rows, then
 * the codec's fit in its own scratch. */
static int fit_task(const CalibRows *r, const KvSpec *spec, const FitTask *t, const Calibration *c, float *table,
                    char *why, size_t why_len) {
    const KvFit *fit = spec->base.codec->fit;
    if (source_missing(r, spec, why, why_len)) return -1;
    float *units = malloc(calib_units_floats(r, spec, t->head) * sizeof(float));
    void *scratch = NULL;
    int rc = -1;
    if (units) {
        KvFitRows rows = {.units = units, .count = calib_units(r, spec, t->layer, t->head, units), .n = r->head_dim};
        /* +aw (§9): the head's weights, or every head's for a table they share */
        const float *w = spec->aw ? calibration_aw(c, spec->side == KV_SIDE_VALUES ? 'v' : 'k', spec->prerope, t->layer) : NULL;
        if (w) {
            rows.weights = w + (t->head < 0 ? 0 : (size_t)t->head * r->head_dim);
            rows.weight_rows = t->head < 0 ? r->n_kv_heads : 1;
        }
        KvFitShortfall shortfall = {0, 0};
        scratch = malloc(fit->scratch_bytes(&spec->base, &rows));
        if (scratch && (rc = fit->fit(&spec->base, &rows, table, scratch, &shortfall)) != 0) {
            /* the points grow with the tokens: as many more tokens as points are missing */
            size_t need = 4 * (size_t)shortfall.entries, n = shortfall.points;
            size_t tokens = n ? ((size_t)r->rows * need + n - 1) / n : need;
            snprintf(why, why_len, "the fit %.60s has %zu points in layer %d, fewer than 4 x its %d entries: give "
                     "--tokens %zu or more", spec->text, n, t->layer, shortfall.entries, tokens);
        }
    }
    if (!units || !scratch) snprintf(why, why_len, "out of memory for the fit of %s", spec->text);
    free(units);
    free(scratch);
    return units && scratch ? rc : -1;
}

/* Where a task's table lies in the calibration: the layer's side, then the head's part. */
static float *task_table(Calibration *c, const FitTask *t) {
    CalibFit *fit = &c->fits[t->fit];
    float *layer_side = fit->codebooks + ((size_t)t->layer * fit->sides + (size_t)t->side) * fit->layer_floats;
    return layer_side + (t->head < 0 ? 0 : (size_t)t->head * fit->table_floats);
}

/* CPU seconds of the calling thread: a task's own time, whatever else the machine runs. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int calib_fit_all(const CalibRows *r, const CalibFitSpec *specs, int n_specs, Calibration *c,
                  void (*progress)(void *user, int done, int total, long tokens, double seconds), void *progress_user,
                  Error *err) {
    return calib_fit_all_timed(r, specs, n_specs, c, progress, progress_user, NULL, err);
}

int calib_fit_all_timed(const CalibRows *r, const CalibFitSpec *specs, int n_specs, Calibration *c,
                        void (*progress)(void *user, int done, int total, long tokens, double seconds),
                        void *progress_user, double *cpu_seconds, Error *err) {
    if (cpu_seconds)
        for (int f = 0; f < n_specs; f++) cpu_seconds[f] = 0;
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
        double started = thread_seconds();
        if (fit_task(r, spec_of(&specs[t->fit], t->side), t, c, task_table(c, t), mine, sizeof mine)) {
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
            if (cpu_seconds) cpu_seconds[t->fit] += thread_seconds() - started;
            if (progress) progress(progress_user, done, n, 0, seconds_now() - t0);
        }
    }
    free(tasks);
    return failed ? error_set(err, "%s", why) : 0;
}
