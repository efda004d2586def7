/* eval/perplexity.h: perplexity over a token stream, with the KV cache quantized as it
 * is written, and how far the quantized model's predictions move from the baseline's. */
#ifndef KVQ_PERPLEXITY_H
#define KVQ_PERPLEXITY_H

#include "model/model.h"

typedef enum {
    PPL_HF,        /* HF sliding window: windows of ctx advancing by stride, new tokens scored */
    PPL_LLAMACPP   /* llama.cpp's llama-perplexity: chunks of ctx, BOS first, second half scored */
} PplProtocol;

typedef struct {
    PplProtocol protocol;
    int ctx;                   /* window length (tokens) */
    int stride;                /* HF: how far each window advances */
    int max_windows;           /* 0: all */
    int shard_index, shard_count;   /* evaluate windows w with w % shard_count == shard_index */
    int batch;                 /* tokens per forward call */
    const KvLayered *k_scheme, *v_scheme; /* how the cache stores keys and values (NULL: fp32) */
    int compare;               /* also run an fp32-cache baseline: KL divergence and top-1 agreement */
    /* Called after each window (may be NULL). */
    void (*progress)(void *user, int windows_done, int windows_total, long tokens_done, double seconds);
    void *progress_user;
} PplOptions;

/* Sums, so that shards merge exactly by adding them. */
typedef struct {
    long scored;               /* tokens whose NLL counts */
    double nll_sum, nll_sumsq; /* with the chosen schemes */
    double base_nll_sum, base_nll_sumsq;  /* baseline, when compare */
    double diff_sum, diff_sumsq;          /* per-token (nll - base_nll), for the error of the delta */
    double kl_sum;             /* sum over scored positions of KL(baseline || quantized) */
    long top1_agree;           /* positions where both argmaxes agree */
    int compared;              /* the baseline fields are filled */
    int windows;               /* windows evaluated by this run */
    int windows_total;         /* windows in the whole evaluation */
    long tokens_processed;     /* forward-pass tokens (both runs counted once) */
    double seconds;
} PplResult;

/* Number of windows the options give for n_tokens (before sharding / max_windows). */
int ppl_window_count(const PplOptions *o, int n_tokens);

int ppl_evaluate(const Model *m, const int *tokens, int n_tokens, const PplOptions *o, PplResult *r, Error *err);

/* Derived figures. */
double ppl_value(double nll_sum, long n);                   /* exp(mean NLL) */
double ppl_stderr_mean(double sum, double sumsq, long n);   /* standard error of a mean */

#endif
