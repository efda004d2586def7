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

/* One window: its tokens and which targets count. Target j (predicted by the logits at
 * j - 1) is scored when first_target <= j < n. */
typedef struct {
    const int *tokens;
    int n;
    int first_target;
} Window;

static Window make_window(const PplOptions *o, const int *tokens, int n_tokens, int w) {
    Window win;
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

typedef struct {
    RunState s, base_s;
    KvCache kv, base_kv;
    double *logp, *base_logp;   /* [vocab] */
    int *bos_chunk;             /* [batch]: a chunk's first tokens with BOS first (llama.cpp protocol) */
} Workspace;

static int workspace_init(Workspace *ws, const Model *m, const PplOptions *o, Error *err) {
    memset(ws, 0, sizeof *ws);
    const Config *c = &m->config;
    if (runstate_init(&ws->s, c, o->batch, err) ||
        kv_cache_init(&ws->kv, c, o->ctx, o->batch, o->k_scheme, o->v_scheme, m->rope_inv_freq, err))
        return -1;
    ws->logp = malloc((size_t)c->vocab_size * sizeof(double));
    ws->base_logp = malloc((size_t)c->vocab_size * sizeof(double));
    if (o->protocol == PPL_LLAMACPP) ws->bos_chunk = malloc((size_t)o->batch * sizeof(int));
    if (!ws->logp || !ws->base_logp || (o->protocol == PPL_LLAMACPP && !ws->bos_chunk))
        return error_set(err, "out of memory");
    if (!o->compare) return 0;
    if (runstate_init(&ws->base_s, c, o->batch, err) || kv_cache_init(&ws->base_kv, c, o->ctx, o->batch, NULL, NULL, NULL, err))
        return -1;
    return 0;
}

static void workspace_free(Workspace *ws) {
    runstate_free(&ws->s);
    runstate_free(&ws->base_s);
    kv_cache_free(&ws->kv);
    kv_cache_free(&ws->base_kv);
    free(ws->logp);
    free(ws->base_logp);
    free(ws->bos_chunk);
}

/* The first row of a batch at pos whose logits predict a scored target (T if none). */
static int first_scored_row(const Window *win, int pos, int T) {
    int row = win->first_target - 1 - pos;
    return row < 0 ? 0 : row > T ? T : row;
}

/* Scores the targets predicted by logits rows from..T-1 of a batch at positions pos..pos+T-1. */
static void score_batch(const Model *m, Workspace *ws, const Window *win, int pos, int from, int T,
                        int compare, PplResult *r) {
    int V = m->config.vocab_size;
    for (int t = from; t < T; t++) {
        int target = pos + t + 1;
        if (target >= win->n) continue;
        int tok = win->tokens[target];
        size_t row = (size_t)(t - from) * V;
        int top = log_softmax(ws->s.logits + row, V, ws->logp);
        double nll = -ws->logp[tok];
        r->scored++;
        r->nll_sum += nll;
        r->nll_sumsq += nll * nll;
        if (!compare) continue;
        int base_top = log_softmax(ws->base_s.logits + row, V, ws->base_logp);
        double base_nll = -ws->base_logp[tok], d = nll - base_nll;
        r->base_nll_sum += base_nll;
        r->base_nll_sumsq += base_nll * base_nll;
        r->diff_sum += d;
        r->diff_sumsq += d * d;
        r->kl_sum += kl_divergence(ws->base_logp, ws->logp, V);
        r->top1_agree += (top == base_top);
    }
}

static void evaluate_window(const Model *m, Workspace *ws, const Window *win, const PplOptions *o,
                            const int *bos_first, PplResult *r) {
    ws->kv.len = ws->base_kv.len = 0;
    for (int pos = 0; pos < win->n; pos += o->batch) {
        int T = win->n - pos < o->batch ? win->n - pos : o->batch;
        const int *toks = (pos == 0 && bos_first) ? bos_first : win->tokens + pos;
        /* Rows that predict no scored target skip the lm_head: the context half of a window. */
        int from = first_scored_row(win, pos, T);
        forward(m, &ws->s, &ws->kv, toks, T, pos, from);
        if (o->compare) forward(m, &ws->base_s, &ws->base_kv, toks, T, pos, from);
        score_batch(m, ws, win, pos, from, T, o->compare, r);
        r->tokens_processed += T;
    }
}

int ppl_evaluate(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, PplResult *r, Error *err) {
    memset(r, 0, sizeof *r);
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

    int total = ppl_window_count(o, n_tokens);
    if (o->max_windows > 0 && o->max_windows < total) total = o->max_windows;
    r->windows_total = total;
    r->compared = o->compare;
    Workspace ws;
    if (workspace_init(&ws, m, o, err)) { workspace_free(&ws); return -1; }
    int *bos_chunk = ws.bos_chunk;
    double t0 = seconds_now();
    for (int w = o->shard_index; w < total; w += o->shard_count) {
        Window win = make_window(o, tokens, n_tokens, w);
        if (bos_chunk) {   /* llama.cpp replaces each chunk's first token with BOS */
            int first = win.n < o->batch ? win.n : o->batch;
            memcpy(bos_chunk, win.tokens, (size_t)first * sizeof(int));
            bos_chunk[0] = c->bos_id;
        }
        evaluate_window(m, &ws, &win, o, bos_chunk, r);
        r->windows++;
        r->seconds = seconds_now() - t0;
        if (o->progress) o->progress(o->progress_user, r->windows, (total - o->shard_index + o->shard_count - 1) / o->shard_count,
                                     r->tokens_processed, r->seconds);
    }
    workspace_free(&ws);
    return 0;
}

double ppl_value(double nll_sum, long n) { return n > 0 ? exp(nll_sum / (double)n) : NAN; }

double ppl_stderr_mean(double sum, double sumsq, long n) {
    if (n < 2) return NAN;
    double mean = sum / n, var = (sumsq - n * mean * mean) / (n - 1);
    return sqrt(var > 0 ? var : 0) / sqrt((double)n);
}
