/* eval/calib_collect.c: calibration rows and statistics (SCHEMES.md §8): windows of text run
 * from an empty fp32 cache, every position's keys (after and before RoPE), values and queries
 * of every layer kept or summed. See eval/calibrate.h. */
#include "eval/calibrate.h"
#include "eval/progress.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows of one kind in layer l, KV head h, from position 0 of the run. */
static float *rows_at(const CalibRows *r, float *base, int l, int h) {
    return base + (((size_t)l * r->n_kv_heads + (size_t)h) * (size_t)r->rows) * (size_t)r->head_dim;
}

/* Channels of one kind's statistics in a layer: heads x head_dim. */
static size_t kind_channels(const CalibRows *r, int kind) {
    return (size_t)(kind == CALIB_Q ? r->n_heads : r->n_kv_heads) * (size_t)r->head_dim;
}

static int rows_alloc(CalibRows *r, int keep_kpre) {
    size_t per_kind = (size_t)r->n_layers * r->n_kv_heads * (size_t)r->rows * r->head_dim;
    r->k = malloc(per_kind * sizeof(float));
    r->v = malloc(per_kind * sizeof(float));
    if (keep_kpre) r->kpre = malloc(per_kind * sizeof(float));
    int ok = r->k && r->v && (!keep_kpre || r->kpre);
    for (int kind = 0; kind < 4 && ok; kind++) {
        size_t n = (size_t)r->n_layers * kind_channels(r, kind);
        r->sum[kind] = calloc(n, sizeof(double));
        r->sumsq[kind] = calloc(n, sizeof(double));
        r->amax[kind] = calloc(n, sizeof(double));
        ok = r->sum[kind] && r->sumsq[kind] && r->amax[kind];
    }
    return ok ? 0 : -1;
}

void calib_rows_free(CalibRows *r) {
    free(r->k);
    free(r->kpre);
    free(r->v);
    for (int kind = 0; kind < 4; kind++) {
        free(r->sum[kind]);
        free(r->sumsq[kind]);
        free(r->amax[kind]);
    }
    memset(r, 0, sizeof *r);
}

/* count values of a kind, channels first.. of layer l, into the sums. */
static void add_values(CalibRows *r, int kind, int l, size_t first, const float *x, size_t count) {
    size_t at = (size_t)l * kind_channels(r, kind) + first;
    double *sum = r->sum[kind] + at, *sumsq = r->sumsq[kind] + at, *amax = r->amax[kind] + at;
    for (size_t i = 0; i < count; i++) {
        double v = x[i];
        sum[i] += v;
        sumsq[i] += v * v;
        if (fabs(v) > amax[i]) amax[i] = fabs(v);
    }
}

/* After a forward call of T tokens at positions pos..: its queries and pre-RoPE keys, from the tap. */
static void take_batch(CalibRows *r, const ForwardTap *tap, int max_batch, long row0, int T) {
    size_t dim = (size_t)r->n_heads * r->head_dim, kv_dim = (size_t)r->n_kv_heads * r->head_dim, d = (size_t)r->head_dim;
    for (int l = 0; l < r->n_layers; l++)
        for (int t = 0; t < T; t++) {
            const float *q = tap->q + ((size_t)l * max_batch + t) * dim;
            const float *k = tap->k_pre + ((size_t)l * max_batch + t) * kv_dim;
            add_values(r, CALIB_Q, l, 0, q, dim);
            add_values(r, CALIB_KPRE, l, 0, k, kv_dim);
            for (int h = 0; r->kpre && h < r->n_kv_heads; h++)
                memcpy(rows_at(r, r->kpre, l, h) + (size_t)(row0 + t) * d, k + (size_t)h * d, d * sizeof(float));
        }
}

/* After a window: its keys (after RoPE, as the cache computed them) and values, from the cache. */
static void take_window(CalibRows *r, const KvCache *kv, long row0) {
    size_t d = (size_t)r->head_dim;
    for (int l = 0; l < r->n_layers; l++)
        for (int h = 0; h < r->n_kv_heads; h++)
            for (int p = 0; p < r->ctx; p++) {
                float *key = rows_at(r, r->k, l, h) + (size_t)(row0 + p) * d;
                float *value = rows_at(r, r->v, l, h) + (size_t)(row0 + p) * d;
                kv_cache_read_key(kv, l, h, p, key);
                kv_cache_read_value(kv, l, h, p, value);
                add_values(r, CALIB_K, l, (size_t)h * d, key, d);
                add_values(r, CALIB_V, l, (size_t)h * d, value, d);
            }
}

/* The tap's buffers and the run's state, for batches of at most `batch` tokens. */
typedef struct {
    RunState s;
    KvCache kv;
    ForwardTap tap;
} Collector;

static void collector_free(Collector *c) {
    free(c->tap.q);
    free(c->tap.k_pre);
    kv_cache_free(&c->kv);
    runstate_free(&c->s);
}

static int collector_init(Collector *c, const Model *m, int ctx, int batch, Error *err) {
    const Config *cfg = &m->config;
    memset(c, 0, sizeof *c);
    if (runstate_init(&c->s, cfg, batch, err) || kv_cache_init(&c->kv, cfg, ctx, batch, NULL, NULL, err)) {
        collector_free(c);
        return -1;
    }
    size_t kv_dim = (size_t)cfg->n_kv_heads * cfg->head_dim;
    c->tap.q = malloc((size_t)cfg->n_layers * batch * cfg->dim * sizeof(float));
    c->tap.k_pre = malloc((size_t)cfg->n_layers * batch * kv_dim * sizeof(float));
    if (!c->tap.q || !c->tap.k_pre) {
        collector_free(c);
        return error_set(err, "out of memory for calibration batches of %d tokens", batch);
    }
    c->s.tap = &c->tap;
    return 0;
}

int calib_collect(const Model *m, const CalibWindows *cw, void (*progress)(void *user, int done, int total, long tokens,
                  double seconds), void *progress_user, CalibRows *r, Error *err) {
    const int *tokens = cw->tokens;
    int windows = cw->windows, ctx = cw->ctx, batch = cw->batch, keep_kpre = cw->keep_kpre;
    const Config *cfg = &m->config;
    memset(r, 0, sizeof *r);
    r->n_layers = cfg->n_layers;
    r->n_heads = cfg->n_heads;
    r->n_kv_heads = cfg->n_kv_heads;
    r->head_dim = cfg->head_dim;
    r->windows = windows;
    r->ctx = ctx;
    r->rows = (long)windows * ctx;
    if (rows_alloc(r, keep_kpre)) {
        calib_rows_free(r);
        return error_set(err, "out of memory for %ld calibration rows of %d layers", r->rows, cfg->n_layers);
    }
    Collector c;
    if (collector_init(&c, m, ctx, batch, err)) {
        calib_rows_free(r);
        return -1;
    }
    double t0 = seconds_now();
    for (int w = 0; w < windows; w++) {
        const int *win = tokens + (size_t)w * ctx;
        for (int done = 0; done < ctx;) {
            int T = ctx - done < batch ? ctx - done : batch;
            forward(m, &c.s, &c.kv, win + done, T, done, 0);   /* logits of every row: the last layer's queries too */
            take_batch(r, &c.tap, batch, (long)w * ctx + done, T);
            done += T;
        }
        take_window(r, &c.kv, (long)w * ctx);
        if (progress) progress(progress_user, w + 1, windows, (long)(w + 1) * ctx, seconds_now() - t0);
    }
    collector_free(&c);
    return 0;
}

void calib_store_stats(const CalibRows *r, Calibration *c) {
    float *out[4] = {c->stats_k, c->stats_kpre, c->stats_v, c->stats_q};
    for (int kind = 0; kind < 4; kind++) {
        size_t n = (size_t)r->n_layers * kind_channels(r, kind);
        for (size_t i = 0; i < n; i++) {
            out[kind][3 * i + 0] = (float)(r->sum[kind][i] / (double)r->rows);
            out[kind][3 * i + 1] = (float)(r->sumsq[kind][i] / (double)r->rows);
            out[kind][3 * i + 2] = (float)r->amax[kind][i];
        }
    }
}
