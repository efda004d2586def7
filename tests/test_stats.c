/* tests/test_stats.c: eval/stats.c's figures against direct computations from per-token
 * values: the KL percentiles of the histogram against sorted values (within the stated bin
 * width), the means and standard errors against two-pass formulas, the delta method's
 * standard error of delta ppl against a bootstrap, and merging = one pass over all tokens.
 * Also eval/progress.c's ETA: the pace after the first update, which holds the start-up. */
#include "tests/test.h"
#include "tests/test_random.h"
#include "eval/stats.h"
#include "eval/progress.h"
#include <stdlib.h>
#include <string.h>

#define N 20000

typedef struct {
    double nll[N], base[N], kl[N], dp[N];
    int agree[N];
} Tokens;

/* Realistic per-token figures: NLLs around 3 with a spread, a quantized NLL a little higher
 * and correlated, KL log-normal around 1e-3 with a few zeros, top-1 agreement ~97%. */
static void make_tokens(Tokens *t, uint64_t *rng) {
    for (int i = 0; i < N; i++) {
        t->base[i] = 3.0 + 1.5 * normal(rng);
        if (t->base[i] < 0.01) t->base[i] = 0.01;
        t->nll[i] = t->base[i] + 0.02 + 0.05 * normal(rng);
        t->kl[i] = i % 500 == 0 ? 0.0 : exp(log(1e-3) + 1.5 * normal(rng));
        t->dp[i] = exp(-t->nll[i]) - exp(-t->base[i]);
        t->agree[i] = uniform(rng) < 0.97;
    }
}

static TokenSums sums_of(const Tokens *t, int from, int to) {
    TokenSums s;
    memset(&s, 0, sizeof s);
    for (int i = from; i < to; i++) token_sums_add(&s, t->nll[i], 1, t->base[i], t->kl[i], t->agree[i], t->dp[i]);
    return s;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The value of rank ceil(q n) in increasing order: the definition kl_histogram_quantile states. */
static double exact_quantile(const double *sorted, int n, double q) {
    int rank = (int)ceil(q * n);
    return sorted[(rank < 1 ? 1 : rank) - 1];
}

static double mean_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

/* Standard error of the mean, two-pass. */
static double se_of(const double *x, int n) {
    double m = mean_of(x, n), v = 0;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    return sqrt(v / (n - 1) / n);
}

static void test_quantiles(const Tokens *t, const PplSummary *y) {
    double *sorted = malloc(N * sizeof *sorted);
    memcpy(sorted, t->kl, N * sizeof *sorted);
    qsort(sorted, N, sizeof *sorted, by_value);
    const double qs[] = {0.5, 0.9, 0.99, 0.999};
    const double got[] = {y->kl_median, y->kl_p90, y->kl_p99, y->kl_p999};
    double worst = 0;
    for (int i = 0; i < 4; i++) {
        double want = exact_quantile(sorted, N, qs[i]);
        worst = max_or_inf(worst, fabs(got[i] - want) / want);
    }
    /* one bin is a factor 10^(1/200) = 1.0116 wide; the estimate stays inside the bin */
    check(worst <= 0.0116, "stats: KL median, p90, p99, p99.9 within one histogram bin (1.16%) of the sorted values",
          "worst relative error %.4g", worst);
    printf("     worst relative error of the four percentiles %.2e (bin width 1.16e-02)\n", worst);
    check(y->kl_max == sorted[N - 1], "stats: KL max is the largest value exactly", "%.17g vs %.17g", y->kl_max,
          sorted[N - 1]);
    free(sorted);
}

static void test_histogram_edges(void) {
    KlHistogram h;
    memset(&h, 0, sizeof h);
    check(isnan(kl_histogram_quantile(&h, 0.5, 1.0)), "stats: quantile of an empty histogram is NaN", "not NaN");
    kl_histogram_add(&h, -1e-17);   /* rounding's tiny negatives */
    kl_histogram_add(&h, 0.0);
    kl_histogram_add(&h, NAN);
    check(h.count[0] == 3 && kl_histogram_quantile(&h, 1.0, 0.0) == 0.0,
          "stats: negative, zero and NaN KL land in bin 0, whose quantile is 0", "bin 0 holds %lld", h.count[0]);
    int ok = kl_bin(1e-12) == 1 && kl_bin(1e5) == KL_BINS - 1 && kl_bin(1.0) == 1 + 12 * KL_BINS_PER_DECADE &&
             fabs(kl_bin_low(kl_bin(3.7e-4)) - 3.7e-4) / 3.7e-4 < 0.0116 && kl_bin_low(kl_bin(3.7e-4)) <= 3.7e-4;
    check(ok, "stats: bins are 1/200 decade from 1e-12, the last holds 1e3 and above", "bin(1) = %d", kl_bin(1.0));
}

/* quantile_rank against the integer ceiling of q n for the percentiles the reports print (q as
 * thousandths: median, p90, p99, p99.9) and every n in 1..2000, and held to 1..n for q at or
 * beyond the ends (0, negative, NaN; 1, above 1, infinite). */
static void test_quantile_rank(void) {
    static const int permille[] = {500, 900, 990, 999};
    static const double low[] = {0.0, -0.5, 1e-300, NAN}, high[] = {1.0, 1.0 + 1e-12, 2.0, INFINITY};
    int wrong = 0, out_of_range = 0;
    long long first_wrong = 0;
    for (long long n = 1; n <= 2000; n++) {
        for (int i = 0; i < 4; i++) {
            long long want = (permille[i] * n + 999) / 1000, got = quantile_rank(permille[i] / 1000.0, n);
            if (got != want && !wrong++) first_wrong = n;
            out_of_range += got < 1 || got > n;
        }
        for (int i = 0; i < 4; i++) out_of_range += quantile_rank(low[i], n) != 1 || quantile_rank(high[i], n) != n;
    }
    check(wrong == 0 && out_of_range == 0,
          "stats: quantile rank = ceil(q n) for the median, p90, p99, p99.9 and every n in 1..2000, held to 1..n for "
          "q <= 0, NaN, q >= 1",
          "%d ranks differ (first at n = %lld), %d out of 1..n", wrong, first_wrong, out_of_range);
}

/* The percentiles token_sums_summarize reports, for every n in 1..2000 tokens, against the
 * exact order statistics of the sorted values (rank ceil(q n) by integer arithmetic): the
 * histogram's answer must lie in the bin of the exact value (within one bin, 1.16%). The KL
 * values spread log-uniformly over 11 decades (about 2200 bins) with zeros and repeats among
 * them, so the neighbouring order statistic is mostly in another bin: a rank off by one is
 * seen. Also the extremes of every n through kl_histogram_quantile: q = 1 is the largest
 * value's bin and a tiny q the smallest's. */
static void test_quantiles_every_n(void) {
    enum { MAX_N = 2000 };
    uint64_t rng = 4470999;   /* its own seed: the other tests' draws stay as they were */
    static const int permille[] = {500, 900, 990, 999};
    double *kl = malloc(MAX_N * sizeof *kl), *sorted = malloc(MAX_N * sizeof *sorted);
    TokenSums *s = calloc(1, sizeof *s);
    if (!kl || !sorted || !s) { check(0, "stats: percentiles for every n in 1..2000", "out of memory"); return; }
    for (int i = 0; i < MAX_N; i++)
        kl[i] = i % 97 == 0 ? 0.0 : i % 41 == 0 ? kl[i - 1] : pow(10.0, -9.0 + 11.0 * uniform(&rng));
    int wrong = 0, wrong_ends = 0;
    char first[200] = "";
    for (int n = 1; n <= MAX_N; n++) {
        token_sums_add(s, 3.0, 1, 3.0, kl[n - 1], 1, 0.0);
        int at = n - 1;   /* insertion keeps sorted[0..n) in order */
        while (at > 0 && sorted[at - 1] > kl[n - 1]) { sorted[at] = sorted[at - 1]; at--; }
        sorted[at] = kl[n - 1];
        PplSummary y = token_sums_summarize(s);
        const double got[] = {y.kl_median, y.kl_p90, y.kl_p99, y.kl_p999};
        for (int i = 0; i < 4; i++) {
            double want = sorted[(permille[i] * n + 999) / 1000 - 1];
            if (kl_bin(got[i]) != kl_bin(want) && !wrong++)
                snprintf(first, sizeof first, "n = %d, q = %d/1000: %.6g, exact %.6g", n, permille[i], got[i], want);
        }
        wrong_ends += kl_bin(kl_histogram_quantile(&s->kl_hist, 1.0, s->kl_max)) != kl_bin(sorted[n - 1]) ||
                      kl_bin(kl_histogram_quantile(&s->kl_hist, 1e-9, s->kl_max)) != kl_bin(sorted[0]);
    }
    check(wrong == 0, "stats: KL median, p90, p99, p99.9 of every n in 1..2000 tokens in the bin of the exact order "
                      "statistic", "%d wrong, first %s", wrong, first);
    check(wrong_ends == 0, "stats: the q = 1 and q = 1e-9 quantiles of every n in 1..2000 in the bins of the largest "
                           "and smallest values", "%d of 2000 n wrong", wrong_ends);
    free(kl);
    free(sorted);
    free(s);
}

static void test_means(const Tokens *t, const PplSummary *y) {
    double d[N];
    for (int i = 0; i < N; i++) d[i] = t->nll[i] - t->base[i];
    double ppl = exp(mean_of(t->nll, N)), base = exp(mean_of(t->base, N));
    double agree = 0, dp2 = 0;
    for (int i = 0; i < N; i++) agree += t->agree[i], dp2 += t->dp[i] * t->dp[i];
    agree /= N;
    double rel[] = {
        fabs(y->ppl - ppl) / ppl, fabs(y->base_ppl - base) / base,
        fabs(y->ln_ratio - mean_of(d, N)) / fabs(mean_of(d, N)), fabs(y->ln_ratio_se - se_of(d, N)) / se_of(d, N),
        fabs(y->kl_mean - mean_of(t->kl, N)) / mean_of(t->kl, N), fabs(y->kl_se - se_of(t->kl, N)) / se_of(t->kl, N),
        fabs(y->ppl_se - ppl * se_of(t->nll, N)) / (ppl * se_of(t->nll, N)),
        fabs(y->delta_pct - 100 * (ppl / base - 1)) / fabs(100 * (ppl / base - 1)),
        /* delta % = 100 (exp(mean d) - 1): its error by the delta method, 100 exp(mean d) se(d) */
        fabs(y->delta_pct_se - 100 * exp(mean_of(d, N)) * se_of(d, N)) / (100 * exp(mean_of(d, N)) * se_of(d, N)),
        fabs(y->top1 - agree) / agree, fabs(y->top1_se - sqrt(agree * (1 - agree) / N)) / sqrt(agree * (1 - agree) / N),
        fabs(y->dp_mean - mean_of(t->dp, N)) / fabs(mean_of(t->dp, N)), fabs(y->dp_rms - sqrt(dp2 / N)) / sqrt(dp2 / N),
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) worst = max_or_inf(worst, rel[i]);
    check(worst <= 1e-9, "stats: ppl, ln ratio, delta %, KL, top-1, p(correct) means and errors = two-pass formulas (1e-9 rel)",
          "worst relative difference %.3g", worst);
}

/* The delta method's standard error of delta ppl against the spread of delta ppl over
 * bootstrap resamples of the tokens (pairs kept together). */
static void test_delta_se(const Tokens *t, const PplSummary *y, uint64_t *rng) {
    const int B = 400;
    double sum = 0, sumsq = 0, pct_sum = 0, pct_sumsq = 0;
    for (int b = 0; b < B; b++) {
        double a = 0, c = 0;
        for (int i = 0; i < N; i++) {
            int k = (int)(uniform(rng) * N);
            a += t->nll[k];
            c += t->base[k];
        }
        double delta = exp(a / N) - exp(c / N), pct = 100 * (exp(a / N) / exp(c / N) - 1);
        sum += delta;
        sumsq += delta * delta;
        pct_sum += pct;
        pct_sumsq += pct * pct;
    }
    double sd = sqrt((sumsq - sum * sum / B) / (B - 1)), rel = fabs(y->delta_se - sd) / sd;
    /* a bootstrap of 400 resamples knows its spread to ~1/sqrt(2 * 400) = 3.5%: allow 4 sigma */
    check(rel <= 0.15, "stats: delta ppl standard error (delta method) = bootstrap spread within 15%",
          "%.5g vs bootstrap %.5g (rel %.3g)", y->delta_se, sd, rel);
    double sd_pct = sqrt((pct_sumsq - pct_sum * pct_sum / B) / (B - 1)), rel_pct = fabs(y->delta_pct_se - sd_pct) / sd_pct;
    check(rel_pct <= 0.15, "stats: delta ppl % standard error (delta method) = bootstrap spread within 15%",
          "%.5g vs bootstrap %.5g (rel %.3g)", y->delta_pct_se, sd_pct, rel_pct);
    printf("     delta ppl %.5f, standard error %.5f, bootstrap %.5f\n", y->delta, y->delta_se, sd);
}

static void test_merge(const Tokens *t, const TokenSums *whole) {
    TokenSums parts = sums_of(t, 0, 7001), tail = sums_of(t, 7001, N);
    token_sums_merge(&parts, &tail);
    PplSummary a = token_sums_summarize(&parts), b = token_sums_summarize(whole);
    int same_hist = !memcmp(&parts.kl_hist, &whole->kl_hist, sizeof parts.kl_hist);
    double rel = fabs(a.kl_mean - b.kl_mean) / b.kl_mean + fabs(a.ppl - b.ppl) / b.ppl;
    check(same_hist && parts.scored == whole->scored && parts.top1_agree == whole->top1_agree &&
              parts.kl_max == whole->kl_max && a.kl_median == b.kl_median && a.kl_p999 == b.kl_p999 && rel < 1e-12,
          "stats: two merged parts give the counts, histogram, maximum and percentiles of one pass", "rel %.3g, hist %d",
          rel, same_hist);
}

/* 10 steps: the first takes 10 s (start-up), the others 2 s each. After step 1 only the first
 * pace is known (9 x 10 s); from step 2 on, the later steps' (8 x 2 s after step 2). */
static void test_eta(void) {
    Progress p;
    progress_init(&p, "test", 1);
    double before = progress_eta(&p, 0, 10, 0);
    progress_update(&p, 1, 10, 100, 10.0);
    double after_first = progress_eta(&p, 1, 10, 10.0);
    progress_update(&p, 2, 10, 200, 12.0);
    double after_second = progress_eta(&p, 2, 10, 12.0), after_fifth = progress_eta(&p, 5, 10, 18.0);
    check(before < 0 && fabs(after_first - 90.0) < 1e-9 && fabs(after_second - 16.0) < 1e-9 &&
              fabs(after_fifth - 10.0) < 1e-9,
          "progress ETA: the pace of the steps after the first (unknown before any, 90 s, 16 s, 10 s)",
          "%g %g %g %g", before, after_first, after_second, after_fifth);
}

/* One scored token says nothing of a spread: every standard error is undefined (NaN; JSON null,
 * "undefined" in reports), not 0; two tokens give finite ones. */
static void test_one_token_se(void) {
    TokenSums s;
    memset(&s, 0, sizeof s);
    token_sums_add(&s, 2.0, 1, 2.5, 0.01, 1, 0.1);
    PplSummary y = token_sums_summarize(&s);
    double se[] = {y.ppl_se, y.base_ppl_se, y.delta_se, y.delta_pct_se, y.ln_ratio_se, y.kl_se, y.top1_se};
    int finite = -1;
    for (int i = 0; i < 7; i++)
        if (!isnan(se[i])) finite = i;
    check(finite < 0, "stats: one scored token leaves every standard error undefined (NaN), not 0", "se %d is %g", finite,
          finite >= 0 ? se[finite] : 0.0);
    char buf[32];
    check(!strcmp(se_text(y.delta_se, "%.4f", buf, sizeof buf), "undefined") &&
              !strcmp(se_text(0.25, "%.4f", buf, sizeof buf), "0.2500"),
          "stats: se_text writes 'undefined' for an undefined error, the number otherwise", "'%s'", buf);
    token_sums_add(&s, 3.0, 1, 2.0, 0.02, 0, -0.1);
    y = token_sums_summarize(&s);
    check(isfinite(y.delta_se) && isfinite(y.kl_se) && isfinite(y.top1_se), "stats: two scored tokens give finite errors",
          "delta %g, kl %g, top-1 %g", y.delta_se, y.kl_se, y.top1_se);
}

int main(void) {
    test_one_token_se();
    uint64_t rng = 20261123;
    Tokens *t = malloc(sizeof *t);
    make_tokens(t, &rng);
    TokenSums whole = sums_of(t, 0, N);
    PplSummary y = token_sums_summarize(&whole);
    test_histogram_edges();
    test_quantiles(t, &y);
    test_quantile_rank();
    test_quantiles_every_n();
    test_means(t, &y);
    test_delta_se(t, &y, &rng);
    test_merge(t, &whole);
    test_eta();
    free(t);
    return test_exit_code();
}
