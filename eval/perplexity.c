/* eval/perplexity.c: sliding-window perplexity (HF recipe) and llama.cpp's chunked protocol.
 *
 * HF: window w covers tokens [w*stride, min(w*stride + ctx, n)); each window starts from an
 * empty cache at position 0, and only targets not scored by an earlier window count.
 * llama.cpp: chunk c covers [c*ctx, (c+1)*ctx) with its first token replaced by BOS, and
 * the predictions of tokens ctx/2+1 .. ctx-1 count.
 * With compare set, every window also runs with an fp32 cache, so the two next-token
 * distributions can be compared position by position. */
#include "eval/perplexity.h"
#include "eval/progress.h"
#include "model/kernels/hugepages.h"
#include "model/kernels/vector.h"
#include "model/sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ppl_window_count(const PplOptions *o, int n_tokens) {
    if (o->protocol == PPL_LLAMACPP) return n_tokens / o->ctx;
    if (n_tokens <= o->ctx) return 1;
    return (n_tokens - o->ctx + o->stride - 1) / o->stride + 1;
}

int ppl_shard_windows(int total, int index, int count) {
    return (total - index + count - 1) / count;   /* index < count: never negative */
}

static PplWindow make_window(const PplOptions *o, const int *tokens, int n_tokens, int w) {
    PplWindow win;
    if (o->protocol == PPL_LLAMACPP) {
        win.tokens = tokens + (size_t)w * o->ctx;
        win.n = o->ctx;
        win.first_target = o->ctx / 2 + 1;
        return win;
    }
    int begin = w * o->stride;
    int end = begin + o->ctx < n_tokens ? begin + o->ctx : n_tokens;
    int prev_end = w == 0 ? 0 : (begin - o->stride + o->ctx < n_tokens ? begin - o->stride + o->ctx : n_tokens);
    win.tokens = tokens + begin;
    win.n = end - begin;
    win.first_target = w == 0 ? 1 : prev_end - begin;
    return win;
}

/* A row of logits' log-normalizer log(sum_i exp(x_i)) and its argmax (logits_argmax: of ties
 * the lowest index, the sampler's rule). exp_out (may be NULL) receives exp(x_i - max) and *sum
 * their sum: the distribution up to that factor. Everything in double, from the float logits;
 * the exponentials and the sum by exp_sum_f64 (model/kernels/vector.h), since they are most of
 * the scoring's time. */
static double log_normalizer(const float *row, int n, int *argmax, double *exp_out, double *sum_out) {
    int best = logits_argmax(row, n);
    float top = row[best];
    double sum = exp_sum_f64(row, n, top, exp_out);
    *argmax = best;
    if (sum_out) *sum_out = sum;
    return top + log(sum);
}

/* Sums over the vocabulary are kept in 8 lanes (element i into lane i % 8, the lanes added in
 * order), like exp_sum_f64's: one running double sum is a chain of dependent adds the compiler
 * may not reorder, four cycles an entry. */
enum { LANES = 8 };

static double sum_lanes(const double lane[LANES]) {
    double sum = 0;
    for (int j = 0; j < LANES; j++) sum += lane[j];
    return sum;
}

/* KL(base || q) from the baseline's probabilities p (summing to p_sum) and both rows of logits:
 * sum_i p_i (log p_i - log q_i) = sum_i p_i (xb_i - xq_i) + (Z_q - Z_b) p_sum, one pass of
 * multiply-adds where the log-softmax form would need an exp per entry. */
static double kl_divergence(const double *p, double p_sum, const float *base, double z_base, const float *q, double z_q,
                            int n) {
    double lane[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += p[i + j] * ((double)base[i + j] - (double)q[i + j]);
    for (; i < n; i++) lane[i % LANES] += p[i] * ((double)base[i] - (double)q[i]);
    return sum_lanes(lane) + (z_q - z_base) * p_sum;
}

/* ---- one window, several caches ---- */

int ppl_check(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, Error *err) {
    const Config *c = &m->config;
    if (o->ctx < 2 || o->ctx > c->max_seq_len)
        return error_set(err, "context %d must be in [2, %d] (the model's max_position_embeddings)", o->ctx, c->max_seq_len);
    if (o->protocol == PPL_HF && (o->stride < 1 || o->stride > o->ctx))
        return error_set(err, "stride %d must be in [1, ctx = %d]", o->stride, o->ctx);
    if (n_tokens < 2 || (o->protocol == PPL_LLAMACPP && n_tokens < o->ctx))
        return error_set(err, "only %d tokens: too few to evaluate with ctx %d", n_tokens, o->ctx);
    if (o->batch < 1) return error_set(err, "batch must be positive");
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size) return error_set(err, "token %d out of vocabulary", tokens[i]);
    return 0;
}

/* The baseline's residual stream held for the schemes fp32 below some layer (layer_resume.h);
 * none to hold (every scheme differs from layer 0): no LayerResume, every pass as forward runs it. */
static int init_resume(PplSession *ps, const Config *c, Error *err) {
    LayerResume *r = malloc(sizeof *r);
    if (!r) return error_set(err, "out of memory");
    if (layer_resume_init(r, c, ps->o.ctx, ps->schemes, ps->n_schemes, ps->o.layer_resume_max_bytes, err)) {
        free(r);
        return -1;
    }
    if (r->bytes == 0) {
        layer_resume_free(r);
        free(r);
        return 0;
    }
    ps->resume = r;
    return 0;
}

int ppl_session_init(PplSession *ps, const Model *m, const PplOptions *o, const KvCacheScheme *const *schemes,
                     int n_schemes, int compare, Error *err) {
    memset(ps, 0, sizeof *ps);
    const Config *c = &m->config;
    ps->m = m;
    ps->o = *o;
    ps->compare = compare;
    ps->kv = calloc((size_t)n_schemes, sizeof *ps->kv);
    if (!ps->kv) return error_set(err, "out of memory");
    if (runstate_init(&ps->s, c, o->batch, err)) return -1;
    ps->one_at_a_time = n_schemes > 1;
    ps->schemes = malloc((size_t)n_schemes * sizeof *ps->schemes);
    if (!ps->schemes) return error_set(err, "out of memory");
    for (int i = 0; i < n_schemes; i++) {
        ps->schemes[i] = schemes[i];
        if (kv_cache_init(&ps->kv[i], c, o->ctx, o->batch, schemes[i], m->rope_inv_freq, err)) return -1;
        ps->n_schemes = i + 1;
        if (ps->one_at_a_time) kv_cache_free(&ps->kv[i]);   /* made again when it runs */
    }
    if (o->protocol == PPL_LLAMACPP && !(ps->bos_chunk = malloc((size_t)o->batch * sizeof(int))))
        return error_set(err, "out of memory");
    if (!(ps->scores = malloc((size_t)o->batch * sizeof *ps->scores))) return error_set(err, "out of memory");
    if (!compare) return 0;
    if (o->layer_error) {
        if (!(ps->replay = malloc(sizeof *ps->replay))) return error_set(err, "out of memory");
        if (layer_replay_init(ps->replay, c, o->ctx, o->batch, err)) {
            free(ps->replay);
            ps->replay = NULL;
            return -1;
        }
    }
    if (kv_cache_init(&ps->base_kv, c, o->ctx, o->batch, NULL, NULL, err)) return -1;
    if (!o->layer_resume_off && init_resume(ps, c, err)) return -1;
    size_t rows = (size_t)o->ctx, held = rows * (size_t)c->vocab_size;   /* at most ctx - 1 targets per window */
    /* hundreds of MiB written once a window: on 2 MiB pages a run takes 1/7 of the page faults */
    ps->base_logits = huge_alloc(held * sizeof(float));
    ps->base_p = huge_alloc(held * sizeof(double));
    ps->base_z = malloc(rows * sizeof(double));
    ps->base_p_sum = malloc(rows * sizeof(double));
    ps->base_top = malloc(rows * sizeof(int));
    if (!ps->base_logits || !ps->base_p || !ps->base_z || !ps->base_p_sum || !ps->base_top)
        return error_set(err, "out of memory for the baseline's distributions of one window (%.0f MiB)",
                         (double)held * (sizeof(float) + sizeof(double)) / 1048576.0);
    return 0;
}

void ppl_session_free(PplSession *ps) {
    runstate_free(&ps->s);
    for (int i = 0; i < ps->n_schemes; i++) kv_cache_free(&ps->kv[i]);
    free(ps->kv);
    free(ps->schemes);
    kv_cache_free(&ps->base_kv);
    free(ps->base_logits);
    free(ps->base_p);
    free(ps->base_z);
    free(ps->base_p_sum);
    free(ps->base_top);
    free(ps->scores);
    free(ps->bos_chunk);
    if (ps->replay) layer_replay_free(ps->replay);
    free(ps->replay);
    if (ps->resume) layer_resume_free(ps->resume);
    free(ps->resume);
    memset(ps, 0, sizeof *ps);
}

/* The first row of a batch at pos whose logits predict a scored target (T if none). */
static int first_scored_row(const PplWindow *win, int pos, int T) {
    int row = win->first_target - 1 - pos;
    return row < 0 ? 0 : row > T ? T : row;
}

/* The baseline's figures of one row of V logits, computed once for every scheme that follows:
 * its probabilities into p[V], their sum, its log-normalizer and argmax. */
typedef struct {
    const float *logits;
    double *p;
    double z, p_sum;
    int top;
} BaseRow;

static void baseline_row(BaseRow *b, size_t V) {
    double sum, *p = b->p;
    b->z = log_normalizer(b->logits, (int)V, &b->top, p, &sum);
    double lane[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= V; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += (p[i + j] /= sum);
    for (; i < V; i++) lane[i % LANES] += (p[i] /= sum);
    b->p_sum = sum_lanes(lane);
}

/* The baseline's row for target row r of the window: its logits are kept, and its figures
 * (baseline_row) held in the session's arrays. */
static void hold_baseline(PplSession *ps, size_t r, const float *logits) {
    size_t V = (size_t)ps->m->config.vocab_size;
    BaseRow b = {ps->base_logits + r * V, ps->base_p + r * V, 0, 0, 0};
    memcpy(ps->base_logits + r * V, logits, V * sizeof(float));
    baseline_row(&b, V);
    ps->base_z[r] = b.z;
    ps->base_p_sum[r] = b.p_sum;
    ps->base_top[r] = b.top;
}

/* Scores target tok from a scheme's V logits, against the baseline's row b (NULL: no baseline). */
static PplTargetScore score_row(const float *logits, int V, int tok, const BaseRow *b) {
    int top;
    PplTargetScore x = {0, 0, 0, 0, 0};
    double z = log_normalizer(logits, V, &top, NULL, NULL);
    x.nll = z - (double)logits[tok];
    if (!b) return x;
    x.base_nll = b->z - (double)b->logits[tok];
    x.kl = kl_divergence(b->p, b->p_sum, b->logits, b->z, logits, z, V);
    x.agree = top == b->top;
    x.dp = exp(-x.nll) - exp(-x.base_nll);
    return x;
}

/* Scores one target (token tok, row r of the window's targets) from the scheme's logits,
 * against the held baseline when compare is set. */
static PplTargetScore score_target(const PplSession *ps, const float *logits, size_t r, int tok) {
    size_t V = (size_t)ps->m->config.vocab_size;
    if (!ps->compare) return score_row(logits, (int)V, tok, NULL);   /* no baseline held */
    BaseRow b = {ps->base_logits + r * V, ps->base_p + r * V, ps->base_z[r], ps->base_p_sum[r], ps->base_top[r]};
    return score_row(logits, (int)V, tok, &b);
}

PplTargetScore ppl_score_row(const float *base, const float *logits, int n, int tok, double *p) {
    BaseRow b = {base, p, 0, 0, 0};
    baseline_row(&b, (size_t)n);
    return score_row(logits, n, tok, &b);
}

/* Rows from..T-1 of a batch at pos: the baseline's held (sums NULL), or the scheme's scored and
 * added into sums. Rows are independent (a pass over the vocabulary each, as costly as a small
 * model's forward pass), so the threads share them; the sums are added in token order after,
 * the same for any number of threads. */
static void score_rows(PplSession *ps, const PplWindow *win, int pos, int from, int T, TokenSums *sums) {
    size_t V = (size_t)ps->m->config.vocab_size;
    int last = win->n - 1 - pos < T ? win->n - 1 - pos : T;   /* rows predicting a target inside the window */
    #pragma omp parallel for schedule(static)
    for (int t = from; t < last; t++) {
        const float *row = ps->s.logits + (size_t)(t - from) * V;
        size_t r = (size_t)(pos + t + 1 - win->first_target);
        if (!sums) hold_baseline(ps, r, row);
        else ps->scores[t] = score_target(ps, row, r, win->tokens[pos + t + 1]);
    }
    for (int t = from; sums && t < last; t++) {
        const PplTargetScore *x = &ps->scores[t];
        token_sums_add(sums, x->nll, ps->compare, x->base_nll, x->kl, x->agree, x->dp);
        if (ps->compare) position_sums_add(&sums->pos, pos + t, x->kl, x->nll - x->base_nll, x->agree, x->base_nll);
    }
}

/* One forward call of the window: the baseline's (scheme -1), holding its residual stream where
 * a scheme will start, or scheme i's, from its start layer (layer_resume.h). */
static void window_forward(PplSession *ps, int scheme, KvCache *kv, const int *toks, int T, int pos, int from) {
    int layers = ps->m->config.n_layers;
    if (!ps->resume) forward(ps->m, &ps->s, kv, toks, T, pos, from);
    else if (scheme < 0) layer_resume_forward_baseline(ps->resume, ps->m, &ps->s, kv, toks, T, pos, from);
    else layers = layer_resume_forward_scheme(ps->resume, scheme, ps->m, &ps->s, kv, toks, T, pos, from);
    ps->layer_tokens += (long)layers * T;
}

/* Runs the window through the model with cache kv, batch by batch. Scoring run (sums set):
 * each scored target is scored against the held baseline (when compare). Baseline run (sums
 * NULL, scheme -1): the scored targets' logits are kept in base_logits, and with the per-layer
 * error each layer's rows tapped. Returns the tokens it ran. */
static long run_window(PplSession *ps, int scheme, KvCache *kv, const PplWindow *win, const int *bos_first,
                       TokenSums *sums) {
    const PplOptions *o = &ps->o;
    long ran = 0;
    kv->len = 0;
    for (int pos = 0; pos < win->n; pos += o->batch) {
        int T = win->n - pos < o->batch ? win->n - pos : o->batch;
        const int *toks = (pos == 0 && bos_first) ? bos_first : win->tokens + pos;
        /* Rows that predict no scored target skip the lm_head: the context half of a window. */
        int from = first_scored_row(win, pos, T);
        if (!sums && ps->replay) layer_replay_tap(ps->replay, &ps->s, pos);
        window_forward(ps, scheme, kv, toks, T, pos, from);
        ran += T;
        score_rows(ps, win, pos, from, T, sums);
    }
    layer_replay_untap(&ps->s);
    return ran;
}

long ppl_session_begin_window(PplSession *ps, const int *tokens, int n_tokens, int w) {
    ps->win = make_window(&ps->o, tokens, n_tokens, w);
    if (ps->bos_chunk) {   /* llama.cpp replaces each chunk's first token with BOS */
        int first = ps->win.n < ps->o.batch ? ps->win.n : ps->o.batch;
        memcpy(ps->bos_chunk, ps->win.tokens, (size_t)first * sizeof(int));
        ps->bos_chunk[0] = ps->m->config.bos_id;
    }
    return ps->compare ? run_window(ps, -1, &ps->base_kv, &ps->win, ps->bos_chunk, NULL) : 0;
}

/* The entropy-coded bits of the cache at the window's end (SCHEMES.md §9): a window's cache is
 * what a file of it would store, so each window's streams are counted apart and the bits added.
 * The counters live for one window (a cache of 12-bit codes, one a value, has tens of MB of them). */
static void add_code_bits(KvCodeCounts *counts, const KvCache *kv, TokenSums *sums) {
    kv_code_counts_add(counts, kv);
    for (int side = 0; side < 2; side++) {
        double bits, values;
        kv_code_counts_total(counts, side, &bits, &values);
        sums->code_bits[side] += bits;
        sums->code_values[side] += values;
    }
}

/* Scheme i's cache on the window begun last: its scoring run, then with the per-layer error the
 * baseline's tapped rows replayed through the same cache (layer_replay.h). */
static long run_scheme_window(PplSession *ps, int i, TokenSums *sums) {
    KvCodeCounts counts;
    Error ignored;   /* out of memory: refused before anything is added, as a cache that cannot be made */
    if (kv_code_counts_init(&counts, &ps->kv[i], &ignored)) return -1;
    long ran = run_window(ps, i, &ps->kv[i], &ps->win, ps->bos_chunk, sums);
    add_code_bits(&counts, &ps->kv[i], sums);   /* before the replay writes the baseline's rows */
    kv_code_counts_free(&counts);
    const PplWindow *w = &ps->win;
    if (ps->replay) layer_replay_run(ps->replay, ps->m, &ps->s, &ps->kv[i], w->n, w->first_target - 1, w->n - 1, &sums->layer);
    return ran;
}

long ppl_session_run_scheme(PplSession *ps, int i, TokenSums *sums) {
    if (!ps->one_at_a_time) return run_scheme_window(ps, i, sums);
    Error ignored;   /* it was made once in ppl_session_init: only memory can fail now */
    if (kv_cache_init(&ps->kv[i], &ps->m->config, ps->o.ctx, ps->o.batch, ps->schemes[i], ps->m->rope_inv_freq, &ignored))
        return -1;
    long ran = run_scheme_window(ps, i, sums);
    kv_cache_free(&ps->kv[i]);
    return ran;
}

int ppl_evaluate(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, PplResult *r, Error *err) {
    memset(r, 0, sizeof *r);
    if (ppl_check(m, tokens, n_tokens, o, err)) return -1;
    int total = ppl_window_count(o, n_tokens);
    if (o->max_windows > 0 && o->max_windows < total) total = o->max_windows;
    r->windows_total = total;
    r->compared = o->compare;
    PplSession ps;
    if (ppl_session_init(&ps, m, o, &o->scheme, 1, o->compare, err)) {
        ppl_session_free(&ps);
        return -1;
    }
    double t0 = seconds_now();
    int mine = ppl_shard_windows(total, o->shard_index, o->shard_count);
    for (int w = o->shard_index; w < total; w += o->shard_count) {
        ppl_session_begin_window(&ps, tokens, n_tokens, w);
        long ran = ppl_session_run_scheme(&ps, 0, &r->sums);   /* the two runs of a token count once */
        if (ran < 0) {
            ppl_session_free(&ps);
            return error_set(err, "out of memory for the KV cache's code counters");
        }
        r->tokens_processed += ran;
        r->windows++;
        r->seconds = seconds_now() - t0;
        if (o->progress) o->progress(o->progress_user, r->windows, mine, r->tokens_processed, r->seconds);
    }
    ppl_session_free(&ps);
    return 0;
}

double ppl_value(double nll_sum, long n) { return n > 0 ? exp(nll_sum / (double)n) : NAN; }

double ppl_stderr_mean(double sum, double sumsq, long n) {
    if (n < 2) return NAN;
    double mean = sum / n, var = (sumsq - n * mean * mean) / (n - 1);
    return sqrt(var > 0 ? var : 0) / sqrt((double)n);
}

int ppl_default_stride(int ctx) { return ctx < 512 ? ctx : 512; }

int ppl_load_model(ModelDir *L, const char *dir, const char *precision, PplOptions *o, Error *err) {
    if (modeldir_load(L, dir, 1, err)) return -1;
    L->model.precision = strcmp(precision, "bf16") ? MATMUL_EXACT : MATMUL_BF16_ACT;
    if (!o->ctx) o->ctx = L->model.config.max_seq_len;
    if (!o->stride) o->stride = ppl_default_stride(o->ctx);
    if (o->batch > o->ctx) o->batch = o->ctx;
    return 0;
}
