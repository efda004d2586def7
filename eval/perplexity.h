/* eval/perplexity.h: perplexity over a token stream, with the KV cache quantized as it
 * is written, and how far the quantized model's predictions move from the baseline's. */
#ifndef KVQ_PERPLEXITY_H
#define KVQ_PERPLEXITY_H

#include "model/model.h"
#include "model/modeldir.h"
#include "eval/stats.h"
#include "eval/layer_replay.h"
#include "eval/layer_resume.h"

typedef enum {
    PPL_HF,        /* HF sliding window: windows of ctx advancing by stride, new tokens scored */
    PPL_LLAMACPP   /* llama.cpp's llama-perplexity: chunks of ctx, BOS first, second half scored */
} PplProtocol;

typedef struct {
    PplProtocol protocol;
    int ctx;                   /* window length (tokens) */
    int stride;                /* HF: how far each window advances (0: ppl_default_stride) */
    int max_windows;           /* 0: all */
    int shard_index, shard_count;   /* evaluate windows w with w % shard_count == shard_index */
    int batch;                 /* tokens per forward call */
    const KvCacheScheme *scheme;   /* how the cache stores keys and values (NULL: fp32, no calibration) */
    int compare;               /* also run an fp32-cache baseline: KL divergence and top-1 agreement */
    int layer_error;           /* with compare: each layer's attention error (eval/layer_replay.h) */
    /* With compare, a scheme that is fp32 below layer L starts its pass at layer L from the
     * baseline's residual stream there (eval/layer_resume.h): the same numbers, fewer layers run. */
    int layer_resume_off;             /* every pass runs every layer (tests compare the two ways) */
    size_t layer_resume_max_bytes;    /* of the baseline's layers held (0: LAYER_RESUME_DEFAULT_MAX_BYTES) */
    /* Called after each window (may be NULL). */
    void (*progress)(void *user, int windows_done, int windows_total, long tokens_done, double seconds);
    void *progress_user;
} PplOptions;

/* Sums, so that shards merge exactly by adding them. */
typedef struct {
    TokenSums sums;            /* per scored token (the baseline's part when compare) */
    int compared;              /* the baseline fields are filled */
    int windows;               /* windows evaluated by this run */
    int windows_total;         /* windows in the whole evaluation */
    long tokens_processed;     /* forward-pass tokens (both runs counted once) */
    double seconds;
} PplResult;

/* --stride's default for a window of ctx tokens: min(512, ctx), so that a short --ctx needs no
 * --stride of its own. */
int ppl_default_stride(int ctx);

/* An evaluation's model as ./run loads it: dir with its tokenizer, the matmul precision named
 * ("exact", or "bf16": activations in bf16, about 2x faster on CPUs with AVX-512 BF16 but
 * logits move by ~1e-2), and o's ctx 0 made the model's context, stride 0 its default and its
 * batch cut to ctx. */
int ppl_load_model(ModelDir *L, const char *dir, const char *precision, PplOptions *o, Error *err);

/* Number of windows the options give for n_tokens (before sharding / max_windows). */
int ppl_window_count(const PplOptions *o, int n_tokens);
/* How many of `total` windows shard `index` of `count` runs (windows index, index + count, ...). */
int ppl_shard_windows(int total, int index, int count);

/* Checks the options against the model and the tokens (ctx, stride, batch, vocabulary). */
int ppl_check(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, Error *err);

/* The windows of one evaluation with several caches at once (./run sweep; ppl is the case of
 * one): in each window the fp32 baseline runs once and its logits at the scored positions are
 * held while every scheme runs on the same window, so n schemes cost n + 1 forward passes
 * per window and KL is exact. */
/* One window: its tokens and which targets count. Target j (predicted by the logits at
 * j - 1) is scored when first_target <= j < n. */
typedef struct {
    const int *tokens;
    int n;
    int first_target;
} PplWindow;

/* One scored target's figures (token_sums_add's arguments). */
typedef struct {
    double nll, base_nll;   /* the target's NLL with the scheme's cache and the baseline's */
    double kl, dp;          /* KL(baseline || scheme), p_scheme(target) - p_baseline(target) */
    int agree;              /* top-1: the two rows' logits_argmax (model/sampler.h) are the same */
} PplTargetScore;

typedef struct {
    const Model *m;
    PplOptions o;               /* protocol, ctx, stride, batch; its schemes are not used */
    int n_schemes, compare;
    RunState s;
    KvCache base_kv;
    KvCache *kv;                /* [n_schemes] */
    /* the baseline at a window's scored targets, row r for target first_target + r: */
    float *base_logits;         /* [ctx][vocab] its logits */
    double *base_p;             /* [ctx][vocab] its probabilities */
    double *base_z, *base_p_sum;   /* [ctx] log-normalizer, sum of the probabilities */
    int *base_top;              /* [ctx] argmax */
    PplTargetScore *scores;     /* [batch]: one batch's per-target figures, before they are added */
    int *bos_chunk;             /* [batch]: a chunk's first tokens with BOS first (llama.cpp protocol) */
    PplWindow win;              /* the window begun last */
    /* With more than one scheme each scheme's cache is made when it runs and freed after it, so
     * that one is held at a time: a sensitivity's 2 x layers x candidates configurations would
     * otherwise hold as many (TinyLlama's fp32 cache at ctx 2048 is 92 MB). Making one is a few
     * allocations, nothing beside a forward pass. */
    int one_at_a_time;
    const KvCacheScheme **schemes;   /* [n_schemes], for making them */
    LayerReplay *replay;        /* the baseline's tapped rows of the window (o.layer_error), or NULL */
    LayerResume *resume;        /* the baseline's residual stream held for schemes that start later, or NULL */
    long layer_tokens;          /* layers x positions run by this session's forward passes, baselines included */
} PplSession;

/* schemes[i]: scheme i's cache (NULL: fp32); o's own scheme is not used. compare: run the
 * baseline. Every scheme's cache is made once here, so a scheme the model or the calibration
 * cannot hold is refused before any window runs. */
int ppl_session_init(PplSession *ps, const Model *m, const PplOptions *o, const KvCacheScheme *const *schemes,
                     int n_schemes, int compare, Error *err);
/* Begins window w: runs the baseline (when compare) and holds its logits. Returns the
 * forward-pass tokens it ran. */
long ppl_session_begin_window(PplSession *ps, const int *tokens, int n_tokens, int w);
/* Scheme i on the window begun last, its scored tokens added into sums (by position too, its
 * per-layer error with o.layer_error, and its cache's entropy-coded bits). Returns the tokens run,
 * or -1 when its cache or its code counters could not be made (out of memory; nothing added). */
long ppl_session_run_scheme(PplSession *ps, int i, TokenSums *sums);
void ppl_session_free(PplSession *ps);

/* The whole evaluation with o's schemes (progress after each window). */
int ppl_evaluate(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, PplResult *r, Error *err);

/* Target tok scored from a scheme's logits[0..n) against the baseline's base[0..n), by the
 * code the evaluation scores every target with; p: room for n doubles (the baseline's
 * probabilities). For tests of the scoring on rows made by hand (ties, extremes). */
PplTargetScore ppl_score_row(const float *base, const float *logits, int n, int tok, double *p);

/* Derived figures. */
double ppl_value(double nll_sum, long n);                   /* exp(mean NLL) */
double ppl_stderr_mean(double sum, double sumsq, long n);   /* standard error of a mean */

#endif
