/* eval/perplexity.c: sliding-window perplexity (HF recipe) and llama.cpp's chunked protocol.
 *
 * HF: window w covers tokens [w*stride, min(w*stride + ctx, n)); each window starts from an
 * empty cache at position 0, and only targets not scored by an earlier window count.
 * llama.cpp: chunk c covers [c*ctx, (c+1)*ctx) with its first token replaced by BOS, and
 * the predictions of tokens ctx/2+1 .. ctx-1 count.
 * With compare set, every window also runs with an fp32 cache, so the two next-token
 * distributions can be compared position by position. */
#include "eval/perplexity.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ppl_window_count(const PplOptions *o, int n_tokens) {
    if (o->protocol == PPL_LLAMACPP) return n_tokens / o->ctx;
    if (n_tokens <= o->ctx) return 1;
    return (n_tokens - o->ctx + o->stride - 1) / o->stride + 1;
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

/* log-softmax of row into out; returns the argmax. */
static int log_softmax(const float *row, int n, double *out) {
    int best = 0;
    for (int i = 1; i < n; i++) if (row[i] > row[best]) best = i;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)row[i] - row[best]);
    double log_z = row[best] + log(sum);
    for (int i = 0; i < n; i++) out[i] = row[i] - log_z;
    return best;
}

/* KL(p || q) from log-probabilities. */
static double kl_divergence(const double *logp, const double *logq, int n) {
    double kl = 0;
    for (int i = 0; i < n; i++) kl += exp(logp[i]) * (logp[i] - logq[i]);
    return kl;
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

int ppl_session_init(PplSession *ps, const Model *m, const PplOptions *o, const KvLayered *const *k,
                     const KvLayered *const *v, int n_schemes, int compare, Error *err) {
    memset(ps, 0, sizeof *ps);
    const Config *c = &m->config;
    ps->m = m;
    ps->o = *o;
    ps->compare = compare;
    ps->kv = calloc((size_t)n_schemes, sizeof *ps->kv);
    if (!ps->kv) return error_set(err, "out of memory");
    if (runstate_init(&ps->s, c, o->batch, err)) return -1;
    for (int i = 0; i < n_schemes; i++) {
        if (kv_cache_init(&ps->kv[i], c, o->ctx, o->batch, k[i], v[i], m->rope_inv_freq, err)) return -1;
        ps->n_schemes = i + 1;
    }
    ps->logp = malloc((size_t)c->vocab_size * sizeof(double));
    ps->base_logp = malloc((size_t)c->vocab_size * sizeof(double));
    if (o->protocol == PPL_LLAMACPP) ps->bos_chunk = malloc((size_t)o->batch * sizeof(int));
    if (!ps->logp || !ps->base_logp || (o->protocol == PPL_LLAMACPP && !ps->bos_chunk))
        return error_set(err, "out of memory");
    if (!compare) return 0;
    if (kv_cache_init(&ps->base_kv, c, o->ctx, o->batch, NULL, NULL, NULL, err)) return -1;
    size_t held = (size_t)o->ctx * (size_t)c->vocab_size;   /* at most ctx - 1 targets per window */
    if (!(ps->base_logits = malloc(held * sizeof(float))))
        return error_set(err, "out of memory for the baseline's logits of one window (%.0f MiB)",
                         (double)held * sizeof(float) / 1048576.0);
    return 0;
}

void ppl_session_free(PplSession *ps) {
    runstate_free(&ps->s);
    for (int i = 0; i < ps->n_schemes; i++) kv_cache_free(&ps->kv[i]);
    free(ps->kv);
    kv_cache_free(&ps->base_kv);
    free(ps->base_logits);
    free(ps->logp);
    free(ps->base_logp);
    free(ps->bos_chunk);
    memset(ps, 0, sizeof *ps);
}

/* The first row of a batch at pos whose logits predict a scored target (T if none). */
static int first_scored_row(const PplWindow *win, int pos, int T) {
    int row = win->first_target - 1 - pos;
    return row < 0 ? 0 : row > T ? T : row;
}

/* One scored target: its logits with the scheme's cache against the baseline's (NULL: none). */
static void score_target(PplSession *ps, const float *logits, const float *base, int tok, TokenSums *sums) {
    int V = ps->m->config.vocab_size;
    int top = log_softmax(logits, V, ps->logp);
    double nll = -ps->logp[tok];
    if (!base) {
        token_sums_add(sums, nll, 0, 0, 0, 0, 0);
        return;
    }
    int base_top = log_softmax(base, V, ps->base_logp);
    double base_nll = -ps->base_logp[tok];
    token_sums_add(sums, nll, 1, base_nll, kl_divergence(ps->base_logp, ps->logp, V), top == base_top,
                   exp(-nll) - exp(-base_nll));
}

/* Runs the window through the model with cache kv, batch by batch. Scoring run (sums set):
 * each scored target is scored against the held baseline (when compare). Baseline run (sums
 * NULL): the scored targets' logits are kept in base_logits. Returns the tokens it ran. */
static long run_window(PplSession *ps, KvCache *kv, const PplWindow *win, const int *bos_first, TokenSums *sums) {
    const PplOptions *o = &ps->o;
    size_t V = (size_t)ps->m->config.vocab_size;
    long ran = 0;
    kv->len = 0;
    for (int pos = 0; pos < win->n; pos += o->batch) {
        int T = win->n - pos < o->batch ? win->n - pos : o->batch;
        const int *toks = (pos == 0 && bos_first) ? bos_first : win->tokens + pos;
        /* Rows that predict no scored target skip the lm_head: the context half of a window. */
        int from = first_scored_row(win, pos, T);
        forward(ps->m, &ps->s, kv, toks, T, pos, from);
        ran += T;
        for (int t = from; t < T; t++) {
            int target = pos + t + 1;
            if (target >= win->n) continue;
            const float *row = ps->s.logits + (size_t)(t - from) * V;
            float *held = ps->base_logits + (size_t)(target - win->first_target) * V;
            if (!sums) memcpy(held, row, V * sizeof(float));
            else score_target(ps, row, ps->compare ? held : NULL, win->tokens[target], sums);
        }
    }
    return ran;
}

long ppl_session_begin_window(PplSession *ps, const int *tokens, int n_tokens, int w) {
    ps->win = make_window(&ps->o, tokens, n_tokens, w);
    if (ps->bos_chunk) {   /* llama.cpp replaces each chunk's first token with BOS */
        int first = ps->win.n < ps->o.batch ? ps->win.n : ps->o.batch;
        memcpy(ps->bos_chunk, ps->win.tokens, (size_t)first * sizeof(int));
        ps->bos_chunk[0] = ps->m->config.bos_id;
    }
    return ps->compare ? run_window(ps, &ps->base_kv, &ps->win, ps->bos_chunk, NULL) : 0;
}

long ppl_session_run_scheme(PplSession *ps, int i, TokenSums *sums) {
    return run_window(ps, &ps->kv[i], &ps->win, ps->bos_chunk, sums);
}

int ppl_evaluate(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, PplResult *r, Error *err) {
    memset(r, 0, sizeof *r);
    if (ppl_check(m, tokens, n_tokens, o, err)) return -1;
    int total = ppl_window_count(o, n_tokens);
    if (o->max_windows > 0 && o->max_windows < total) total = o->max_windows;
    r->windows_total = total;
    r->compared = o->compare;
    PplSession ps;
    if (ppl_session_init(&ps, m, o, &o->k_scheme, &o->v_scheme, 1, o->compare, err)) {
        ppl_session_free(&ps);
        return -1;
    }
    double t0 = seconds_now();
    int mine = (total - o->shard_index + o->shard_count - 1) / o->shard_count;
    for (int w = o->shard_index; w < total; w += o->shard_count) {
        ppl_session_begin_window(&ps, tokens, n_tokens, w);
        r->tokens_processed += ppl_session_run_scheme(&ps, 0, &r->sums);   /* the two runs of a token count once */
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
