/* eval/stats.c: sums of a quantized run against its baseline, and the figures derived from
 * them (see stats.h). */
#include "eval/stats.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- KL histogram ---- */

int kl_bin(double kl) {
    if (!(kl >= 1e-12)) return 0;   /* also NaN: counted, never lost */
    double b = floor((log10(kl) - KL_LOWEST_DECADE) * KL_BINS_PER_DECADE) + 1;
    return b >= KL_BINS - 1 ? KL_BINS - 1 : b < 1 ? 1 : (int)b;
}

double kl_bin_low(int bin) {
    return bin <= 0 ? 0.0 : pow(10.0, KL_LOWEST_DECADE + (double)(bin - 1) / KL_BINS_PER_DECADE);
}

void kl_histogram_add(KlHistogram *h, double kl) { h->count[kl_bin(kl)]++; }

void kl_histogram_merge(KlHistogram *into, const KlHistogram *from) {
    for (int i = 0; i < KL_BINS; i++) into->count[i] += from->count[i];
}

long long quantile_rank(double q, long long n) {
    double r = ceil(q * (double)n);
    if (!(r > 1)) return 1;   /* also NaN */
    return r < (double)n ? (long long)r : n;
}

double kl_histogram_quantile(const KlHistogram *h, double q, double max) {
    long long n = 0;
    for (int i = 0; i < KL_BINS; i++) n += h->count[i];
    if (n == 0) return NAN;
    long long rank = quantile_rank(q, n), below = 0;
    int bin = 0;
    /* rank <= n: the walk ends at the bin holding it, inside the histogram */
    while (bin < KL_BINS - 1 && below + h->count[bin] < rank) below += h->count[bin++];
    if (bin == 0) return 0.0;
    /* the bin's tokens spread evenly in log KL: the r-th of c sits at (r - 1/2) / c of the way */
    double frac = ((double)(rank - below) - 0.5) / (double)h->count[bin];
    double lo = kl_bin_low(bin), hi = bin == KL_BINS - 1 ? max : kl_bin_low(bin + 1);
    double v = hi > lo ? lo * pow(hi / lo, frac) : lo;
    return v > max ? max : v;
}

/* ---- sums ---- */

void token_sums_add(TokenSums *s, double nll, int compared, double base_nll, double kl, int agree, double dp) {
    s->scored++;
    s->nll_sum += nll;
    s->nll_sumsq += nll * nll;
    if (!compared) return;
    double d = nll - base_nll;
    s->base_nll_sum += base_nll;
    s->base_nll_sumsq += base_nll * base_nll;
    s->diff_sum += d;
    s->diff_sumsq += d * d;
    s->kl_sum += kl;
    s->kl_sumsq += kl * kl;
    if (kl > s->kl_max) s->kl_max = kl;
    s->dp_sum += dp;
    s->dp_sumsq += dp * dp;
    s->top1_agree += agree != 0;
    kl_histogram_add(&s->kl_hist, kl);
}

void token_sums_merge(TokenSums *into, const TokenSums *from) {
    into->scored += from->scored;
    into->nll_sum += from->nll_sum;
    into->nll_sumsq += from->nll_sumsq;
    into->base_nll_sum += from->base_nll_sum;
    into->base_nll_sumsq += from->base_nll_sumsq;
    into->diff_sum += from->diff_sum;
    into->diff_sumsq += from->diff_sumsq;
    into->kl_sum += from->kl_sum;
    into->kl_sumsq += from->kl_sumsq;
    if (from->kl_max > into->kl_max) into->kl_max = from->kl_max;
    into->dp_sum += from->dp_sum;
    into->dp_sumsq += from->dp_sumsq;
    into->top1_agree += from->top1_agree;
    kl_histogram_merge(&into->kl_hist, &from->kl_hist);
    position_sums_merge(&into->pos, &from->pos);
    layer_error_merge(&into->layer, &from->layer);
    for (int side = 0; side < 2; side++) {
        into->code_bits[side] += from->code_bits[side];
        into->code_values[side] += from->code_values[side];
    }
}

double token_sums_entropy_bits(const TokenSums *s, int side) {
    double bits = 0, values = 0;
    for (int k = 0; k < 2; k++)
        if (side < 0 || side == k) bits += s->code_bits[k], values += s->code_values[k];
    return values > 0 ? bits / values : 0;
}

/* ---- figures ---- */

/* Sample variance of n values from their sum and sum of squares. */
static double variance(double sum, double sumsq, long n) {
    if (n < 2) return NAN;
    double mean = sum / (double)n, v = (sumsq - (double)n * mean * mean) / (double)(n - 1);
    return v > 0 ? v : 0;
}

PplSummary token_sums_summarize(const TokenSums *s) {
    PplSummary r;
    long n = s->scored;
    double dn = (double)n;
    r.n = n;
    double var_q = variance(s->nll_sum, s->nll_sumsq, n), var_b = variance(s->base_nll_sum, s->base_nll_sumsq, n);
    double var_d = variance(s->diff_sum, s->diff_sumsq, n);
    r.ppl = exp(s->nll_sum / dn);
    r.base_ppl = exp(s->base_nll_sum / dn);
    /* delta method: ppl = exp(mean NLL), so se(ppl) = ppl se(mean NLL) */
    r.ppl_se = r.ppl * sqrt(var_q / dn);
    r.base_ppl_se = r.base_ppl * sqrt(var_b / dn);
    r.ln_ratio = s->diff_sum / dn;
    r.ln_ratio_se = sqrt(var_d / dn);
    r.delta = r.ppl - r.base_ppl;
    /* the two means are correlated (same tokens): cov = (var_q + var_b - var_d) / 2 */
    double cov = 0.5 * (var_q + var_b - var_d);
    double var_delta = (r.ppl * r.ppl * var_q + r.base_ppl * r.base_ppl * var_b - 2 * r.ppl * r.base_ppl * cov) / dn;
    r.delta_se = isnan(var_delta) ? NAN : sqrt(var_delta > 0 ? var_delta : 0);
    r.delta_pct = 100.0 * (r.ppl / r.base_ppl - 1.0);
    r.delta_pct_se = 100.0 * (r.ppl / r.base_ppl) * r.ln_ratio_se;   /* ratio = exp(mean difference) */
    r.kl_mean = s->kl_sum / dn;
    r.kl_se = sqrt(variance(s->kl_sum, s->kl_sumsq, n) / dn);
    r.kl_median = kl_histogram_quantile(&s->kl_hist, 0.5, s->kl_max);
    r.kl_p90 = kl_histogram_quantile(&s->kl_hist, 0.9, s->kl_max);
    r.kl_p99 = kl_histogram_quantile(&s->kl_hist, 0.99, s->kl_max);
    r.kl_p999 = kl_histogram_quantile(&s->kl_hist, 0.999, s->kl_max);
    r.kl_max = s->kl_max;
    r.top1 = (double)s->top1_agree / dn;
    r.top1_se = sqrt(r.top1 * (1 - r.top1) / dn);
    r.dp_mean = s->dp_sum / dn;
    r.dp_rms = sqrt(s->dp_sumsq / dn);
    if (n < 2) r.top1_se = NAN;   /* the binomial formula gives 0 for one token: no spread is known */
    return r;
}

const char *se_text(double se, const char *fmt, char *buf, size_t n) {
    if (isfinite(se)) snprintf(buf, n, fmt, se);
    else snprintf(buf, n, "%s", SE_UNDEFINED);
    return buf;
}
