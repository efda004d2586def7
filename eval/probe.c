/* eval/probe.c: the probes' options, the run over caches (fp32 first, then each scheme, one cache
 * held at a time) and the figures of a cell (see probe.h); each task's inputs and scoring are in
 * probe_copy.c, probe_passkey.c and probe_diverge.c. */
#include "eval/probe.h"
#include "eval/calibration.h"
#include "model/modeldir.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const TASK_NAMES[] = {"copy", "passkey", "diverge"};

const char *probe_task_name(ProbeTask t) { return TASK_NAMES[t]; }

int probe_task_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, TASK_NAMES[i])) return i;
    return -1;
}

/* Powers of two from `first` below `limit`, then `last` (0: none) when above them. */
static void default_lengths(ProbeOptions *o, int first, int limit, int last) {
    o->n_lengths = 0;
    for (int L = first; L <= limit && o->n_lengths < PROBE_MAX_LENGTHS; L *= 2) o->lengths[o->n_lengths++] = L;
    if (last > 0 && (o->n_lengths == 0 || o->lengths[o->n_lengths - 1] < last) && o->n_lengths < PROBE_MAX_LENGTHS)
        o->lengths[o->n_lengths++] = last;
}

int probe_options_resolve(ProbeOptions *o, const Model *m, Error *err) {
    int max_ctx = m->config.max_seq_len;
    if (o->ctx == 0) o->ctx = max_ctx;
    if (o->ctx > max_ctx) return error_set(err, "--ctx %d exceeds the model's context of %d", o->ctx, max_ctx);
    if (o->batch <= 0) o->batch = 512;
    if (o->batch > o->ctx) o->batch = o->ctx;
    static const int default_sequences[] = {8, 4, 16};
    if (o->sequences <= 0) o->sequences = default_sequences[o->task];
    if (o->task == PROBE_COPY) {
        if (o->n_lengths == 0) default_lengths(o, 64, o->ctx / 2, 0);
        if (o->n_lengths == 0 && o->ctx >= 4) o->lengths[o->n_lengths++] = o->ctx / 2;   /* a ctx under 128 */
        for (int i = 0; i < o->n_lengths; i++)
            if (o->lengths[i] < 2 || o->lengths[i] > o->ctx / 2)
                return error_set(err, "copy length %d: must be in [2, ctx/2 = %d]", o->lengths[i], o->ctx / 2);
    } else if (o->task == PROBE_PASSKEY) {
        int room = o->ctx - PROBE_PASSKEY_ANSWER_TOKENS;
        if (o->n_lengths == 0) default_lengths(o, 256, room - 1, room);
        if (o->n_depths == 0) {
            static const int depths[] = {0, 25, 50, 75, 100};
            memcpy(o->depths, depths, sizeof depths);
            o->n_depths = 5;
        }
        for (int i = 0; i < o->n_lengths; i++)
            if (o->lengths[i] < 128 || o->lengths[i] > room)
                return error_set(err, "passkey length %d: must be in [128, ctx - %d = %d]", o->lengths[i],
                                 PROBE_PASSKEY_ANSWER_TOKENS, room);
        for (int i = 0; i < o->n_depths; i++)
            if (o->depths[i] < 0 || o->depths[i] > 100)
                return error_set(err, "passkey depth %d: must be a percentage in [0, 100]", o->depths[i]);
        if (!o->text_file) o->text_file = PROBE_DEFAULT_PASSKEY_TEXT;
    } else {
        /* 64 and 64, or what a short ctx holds of them (a sweep's ctx 128) */
        if (o->prompt_tokens <= 0) o->prompt_tokens = (o->ctx - 1) / 2 < 64 ? (o->ctx - 1) / 2 : 64;
        if (o->new_tokens <= 0) o->new_tokens = o->ctx - 1 - o->prompt_tokens < 64 ? o->ctx - 1 - o->prompt_tokens : 64;
        if (1 + o->prompt_tokens + o->new_tokens > o->ctx)
            return error_set(err, "diverge: BOS + --prompt-tokens %d + --new-tokens %d exceed --ctx %d",
                             o->prompt_tokens, o->new_tokens, o->ctx);
        if (!o->text_file) o->text_file = PROBE_DEFAULT_DIVERGE_TEXT;
    }
    return 0;
}

static int cells_of(const ProbeOptions *o) {
    return o->task == PROBE_COPY ? o->n_lengths : o->task == PROBE_PASSKEY ? o->n_lengths * o->n_depths : 1;
}

static void work_free(ProbeWork *w) {
    runstate_free(&w->s);
    free(w->seq);
    free(w->pieces);
    free(w->text);
    free(w->base);
    memset(w, 0, sizeof *w);
}

/* One cache's pass of the task. */
static int run_cache(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r, Error *err) {
    if (w->o->task == PROBE_COPY) probe_copy_run(w, kv, cache, r);
    else if (w->o->task == PROBE_DIVERGE) probe_diverge_run(w, kv, cache, r);
    else return probe_passkey_run(w, kv, cache, r, err);
    return 0;
}

int probe_run(const Model *m, const Tokenizer *tok, const ProbeOptions *opt, const KvCacheScheme *const *schemes,
              int n_schemes, ProbeResult *r, Error *err) {
    memset(r, 0, sizeof *r);
    r->o = *opt;
    if (probe_options_resolve(&r->o, m, err)) return -1;
    r->n_caches = 1 + n_schemes;
    r->n_cells = cells_of(&r->o);
    r->cells = calloc((size_t)r->n_caches * r->n_cells, sizeof *r->cells);
    ProbeWork w = {.m = m, .tok = tok, .o = &r->o};
    w.seq = malloc((size_t)r->o.ctx * sizeof *w.seq);
    int rc = r->cells && w.seq ? 0 : error_set(err, "out of memory");
    if (!rc) rc = runstate_init(&w.s, &m->config, r->o.batch, err);
    /* every scheme's cache made once before anything runs: a scheme the model cannot hold is
     * refused first */
    for (int i = 0; i < n_schemes && !rc; i++) {
        KvCache kv = {0};
        rc = kv_cache_init(&kv, &m->config, r->o.ctx, r->o.batch, schemes[i], m->rope_inv_freq, err);
        kv_cache_free(&kv);
    }
    if (!rc) {
        if (r->o.task == PROBE_COPY) rc = probe_copy_prepare(&w, err);
        else if (r->o.task == PROBE_PASSKEY) rc = probe_passkey_prepare(&w, err);
        else rc = probe_diverge_prepare(&w, err);
    }
    for (int c = 0; c < r->n_caches && !rc; c++) {
        KvCache kv = {0};
        rc = kv_cache_init(&kv, &m->config, r->o.ctx, r->o.batch, c ? schemes[c - 1] : NULL, m->rope_inv_freq, err);
        if (!rc) rc = run_cache(&w, &kv, c, r, err);
        kv_cache_free(&kv);
    }
    work_free(&w);
    if (rc) probe_result_free(r);
    return rc;
}

void probe_result_free(ProbeResult *r) {
    free(r->cells);
    r->cells = NULL;
}

int probe_run_from_dir(const char *model_dir, const KvCacheFlags *kv, const ProbeOptions *o, ProbeResult *r,
                       Error *err) {
    ModelDir L;
    KvCacheRecipe recipe;
    if (modeldir_load(&L, model_dir, 1, err)) return -1;
    int rc = kv_cache_recipe_resolve(&recipe, kv, 0, model_dir, NULL, &L.model, err);
    const KvCacheScheme *schemes[1] = {&recipe.scheme};
    if (!rc) rc = probe_run(&L.model, L.tok, o, schemes, 1, r, err);
    kv_cache_recipe_free(&recipe);
    modeldir_free(&L);
    return rc;
}

double probe_rate(const ProbeCell *c) { return c->n > 0 ? (double)c->hits / c->n : NAN; }

double probe_rate_se(const ProbeCell *c) {
    if (c->n < 2) return NAN;
    double p = (double)c->hits / c->n;
    return sqrt(p * (1 - p) / c->n);
}

double probe_mean(const ProbeCell *c) { return c->n > 0 ? c->sum / c->n : NAN; }

double probe_mean_se(const ProbeCell *c) {
    if (c->n < 2) return NAN;
    double mean = c->sum / c->n, var = (c->sumsq - c->n * mean * mean) / (c->n - 1);
    return sqrt(var > 0 ? var / c->n : 0);
}
