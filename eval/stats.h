/* eval/stats.h: how far a quantized run moved from its fp32 baseline, as figures a person
 * can compare with papers and llama.cpp's --kl-divergence report: perplexity and its change
 * with paired standard errors, the KL divergence's mean, percentiles and maximum, top-1
 * agreement, and the change in the probability of the correct token.
 *
 * Everything is derived from sums that merge by adding (PplResult: shards, sweep windows),
 * including the KL percentiles: each token's KL lands in a bin of a fixed log-spaced
 * histogram (KL_BINS_PER_DECADE bins per factor of ten), so a percentile is exact to the
 * width of one bin, 1.2% (0.6% from the bin's geometric middle), and any split of the work
 * gives the same counts. */
#ifndef KVQ_STATS_H
#define KVQ_STATS_H

#include <stddef.h>
#include "eval/layer_error.h"
#include "eval/position.h"

#define KL_BINS_PER_DECADE 200
#define KL_LOWEST_DECADE (-12)   /* bin 0 holds KL below 1e-12 (and rounding's tiny negatives) */
#define KL_HIGHEST_DECADE 3      /* the last bin holds KL at or above 1e3 */
#define KL_BINS (2 + (KL_HIGHEST_DECADE - KL_LOWEST_DECADE) * KL_BINS_PER_DECADE)

typedef struct {
    long long count[KL_BINS];
} KlHistogram;

int kl_bin(double kl);                                 /* the bin of one token's KL */
double kl_bin_low(int bin);                            /* its lower edge (0 for bin 0) */
void kl_histogram_add(KlHistogram *h, double kl);
void kl_histogram_merge(KlHistogram *into, const KlHistogram *from);
/* The 1-based rank of the q-quantile of n >= 1 values: ceil(q n), held to 1..n (q at or below
 * 0, or NaN, gives 1; q at or above 1 gives n). */
long long quantile_rank(double q, long long n);
/* The q-quantile (0 < q <= 1) of n = the histogram's total: the value of the token of rank
 * quantile_rank(q, n) in increasing order, placed geometrically inside its bin by its rank
 * there; never above max (the largest KL seen). NAN when empty. */
double kl_histogram_quantile(const KlHistogram *h, double q, double max);

/* Sums over scored tokens (the baseline's fields when a baseline ran). Adding two gives the
 * sums of both parts, which is how shards and sweep windows combine. */
typedef struct {
    long scored;
    double nll_sum, nll_sumsq;            /* NLL of the target with the quantized cache */
    double base_nll_sum, base_nll_sumsq;  /* ... with the fp32 cache */
    double diff_sum, diff_sumsq;          /* nll - base_nll, for paired errors */
    double kl_sum, kl_sumsq, kl_max;      /* KL(baseline || quantized) of the next-token distributions */
    double dp_sum, dp_sumsq;              /* p_quantized(target) - p_baseline(target) */
    long top1_agree;                      /* both argmaxes the same */
    KlHistogram kl_hist;
    PositionSums pos;                     /* the compared figures by position (eval/position.h) */
    LayerErrorSums layer;                 /* per-layer attention error (eval/layer_error.h; n_layers 0: none) */
    /* entropy bits per value (SCHEMES.md §9), keys [0] and values [1]: each window's cache's
     * entropy-coded bits and the values it cached, added over windows (code_bits / code_values) */
    double code_bits[2], code_values[2];
} TokenSums;

/* One scored token. The baseline's figures (base_nll .. dp) count when compared is set. */
void token_sums_add(TokenSums *s, double nll, int compared, double base_nll, double kl, int agree, double dp);
void token_sums_merge(TokenSums *into, const TokenSums *from);
/* Entropy bits per value of the keys (side 0), the values (1) or both (-1); 0 when none were counted. */
double token_sums_entropy_bits(const TokenSums *s, int side);

typedef struct {
    long n;                          /* scored tokens */
    double ppl, ppl_se;              /* with the quantized cache; se by the delta method */
    double base_ppl, base_ppl_se;    /* fp32 cache */
    double delta, delta_se;          /* ppl - base_ppl, se from the paired NLLs */
    double delta_pct, delta_pct_se;  /* 100 (ppl / base_ppl - 1) */
    double ln_ratio, ln_ratio_se;    /* ln(ppl / base_ppl) = mean NLL difference */
    double kl_mean, kl_se, kl_median, kl_p90, kl_p99, kl_p999, kl_max;
    double top1, top1_se;            /* fraction of tokens whose argmax agrees; binomial se */
    double dp_mean, dp_rms;          /* p(correct token) quantized minus baseline */
} PplSummary;

/* The figures of sums with a baseline. With fewer than 2 scored tokens every standard error is
 * NAN: one token says nothing of the spread (not 0, which would claim an exact figure). */
PplSummary token_sums_summarize(const TokenSums *s);

#define SE_UNDEFINED "undefined"
/* A standard error for people: printf's fmt of se ("%.4f"), or SE_UNDEFINED when se is not
 * finite (fewer than 2 scored tokens); in JSON such a value is null (eval/json_out.h). Returns buf. */
const char *se_text(double se, const char *fmt, char *buf, size_t n);

#endif
