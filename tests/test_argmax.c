/* tests/test_argmax.c: kvq's one tie rule for picking the largest logit — the lowest id —
 * wherever a maximum's index is picked: logits_argmax (model/sampler.h) against a plain
 * left-to-right scan on rows with exact ties (also NaN, signed zeros and infinities, and
 * lengths around the vector widths), greedy decoding, top_k_indices, the order in which top-p
 * takes tied tokens, and the evaluation's top-1 agreement (ppl_score_row, the code that scores
 * every target) on pairs of tied rows, whose answer a "highest id" rule would change. */
#include "tests/test.h"
#include "model/sampler.h"
#include "eval/perplexity.h"
#include <stdlib.h>
#include <string.h>

#define MAX_N 32000

/* The rule written out: scan left to right, keep an entry only when strictly larger. */
static int scan_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The highest id among the entries equal to the largest (the rule a test must tell apart). */
static int highest_tied(const float *x, int n) {
    int best = scan_argmax(x, n);
    for (int i = n - 1; i > best; i--)
        if (x[i] == x[best]) return i;
    return best;
}

/* A row of n logits of kind k: 0 few distinct values (ties everywhere), 1 all equal, 2 the
 * largest value planted at three places (the last among them), 3 like 0 with NaN sprinkled
 * (never at 0), 4 NaN at 0, 5 the largest a zero of either sign, 6 all -inf, 7 +inf twice. */
static void make_row(float *x, int n, int kind, uint64_t *rng) {
    for (int i = 0; i < n; i++) x[i] = (float)(int)(4.0f * (rnd(rng) + 1.0f)) - 8.0f;   /* -8..-1 */
    if (kind == 1) for (int i = 0; i < n; i++) x[i] = 1.5f;
    if (kind == 2) {
        int a = (int)((rnd(rng) + 1.0f) * 0.5f * n) % n, b = (a + n / 3 + 1) % n;
        x[a] = x[b] = x[n - 1] = 2.5f;
    }
    if (kind == 3) for (int i = 1; i < n; i += 7) x[i] = NAN;
    if (kind == 4) x[0] = NAN;
    if (kind == 5) for (int i = n / 4; i < n; i += 5) x[i] = i % 2 ? -0.0f : 0.0f;
    if (kind == 6) for (int i = 0; i < n; i++) x[i] = -INFINITY;
    if (kind == 7) x[n / 2] = x[n - 1] = INFINITY;
}

/* Lengths: every one up to 70 (the 8-, 16- and 64-wide loops and their tails), around 128,
 * and the vocabularies of the bundled models (512) and TinyLlama (32000). */
static int lengths(int *out) {
    static const int more[] = {127, 128, 129, 512, 1000, MAX_N};
    int k = 0;
    for (int n = 1; n <= 70; n++) out[k++] = n;
    for (int i = 0; i < 6; i++) out[k++] = more[i];
    return k;
}

static void check_logits_argmax(float *x) {
    int ns[80], count = lengths(ns), rows = 0, wrong = 0, told_apart = 0;
    uint64_t rng = 39;
    char first[160] = "";
    for (int li = 0; li < count; li++)
        for (int kind = 0; kind < 8; kind++)
            for (int rep = 0; rep < 3; rep++) {
                int n = ns[li];
                make_row(x, n, kind, &rng);
                int got = logits_argmax(x, n), want = scan_argmax(x, n);
                rows++;
                told_apart += highest_tied(x, n) != want;
                if (got != want && !wrong++)
                    snprintf(first, sizeof first, "n %d kind %d: %d, the scan %d", n, kind, got, want);
            }
    check(wrong == 0 && told_apart > rows / 2,
          "logits_argmax = a left-to-right scan keeping a strictly larger value (lowest id of ties) on rows of 1..70, "
          "127..129, 512, 1000, 32000 logits with exact ties, NaN, signed zeros, infinities",
          "%d of %d rows differ (first %s); %d rows tell the lowest from the highest tied id", wrong, rows, first,
          told_apart);
    printf("     %d rows, %d of them with the largest value tied (the highest id differs)\n", rows, told_apart);
    float planted[10] = {0, 3, 1, 3, 3, 2, 0, 3, -1, 3};
    int at_end = logits_argmax(planted + 5, 5), big;
    for (int i = 0; i < MAX_N; i++) x[i] = -1.0f;
    x[5] = x[17] = x[MAX_N - 1] = 4.0f;
    big = logits_argmax(x, MAX_N);
    check(logits_argmax(planted, 10) == 1 && at_end == 2 && big == 5,
          "logits_argmax of hand-made ties: {1,3,4,7,9} -> 1, {7,9} -> 7, {5, 17, 31999} of 32000 -> 5",
          "%d, %d (of the last 5), %d", logits_argmax(planted, 10), at_end, big);
}

/* Greedy decoding and top_k_indices follow the same rule on tied rows. */
static void check_greedy_and_top_k(float *x) {
    int n = 600, wrong_greedy = 0, wrong_top = 0;
    uint64_t rng = 77;
    Sampler s;
    Error err;
    if (!check(sampler_init(&s, n, 0.0f, 1.0f, 1, &err) == 0, "sampler_init for the tie tests", "%s", err.msg)) return;
    float *work = malloc((size_t)n * sizeof *work);
    for (int rep = 0; rep < 200; rep++) {
        make_row(x, n, rep % 3 == 2 ? 2 : rep % 2, &rng);   /* kinds 0, 1, 2: no NaN (top-k skips none) */
        memcpy(work, x, (size_t)n * sizeof *x);
        wrong_greedy += sampler_next(&s, work) != scan_argmax(x, n);
        int best[5], want[5], k = 0;
        top_k_indices(x, n, 5, best);
        /* by value, then id: the five largest in the scan's order */
        for (float v = INFINITY; k < 5;) {
            float next = -INFINITY;
            for (int i = 0; i < n; i++) if (x[i] < v && x[i] > next) next = x[i];
            for (int i = 0; i < n && k < 5; i++) if (x[i] == next) want[k++] = i;
            v = next;
        }
        wrong_top += memcmp(best, want, sizeof best) != 0 || best[0] != logits_argmax(x, n);
    }
    check(wrong_greedy == 0, "greedy decoding (temperature 0) on 200 rows of 600 tied logits = the lowest tied id",
          "%d of 200 differ", wrong_greedy);
    check(wrong_top == 0, "top_k_indices(5) on 200 rows of tied logits: by value, of equal ones the lowest id first",
          "%d of 200 differ", wrong_top);
    free(work);
    sampler_free(&s);
}

/* Top-p over four equal logits with top_p 0.5 keeps two tokens: the lowest ids, 0 and 1. */
static void check_top_p_ties(void) {
    Sampler s;
    Error err;
    if (!check(sampler_init(&s, 4, 1.0f, 0.5f, 7, &err) == 0, "sampler_init for top-p ties", "%s", err.msg)) return;
    long counts[4] = {0};
    for (int d = 0; d < 2000; d++) {
        float logits[4] = {0.5f, 0.5f, 0.5f, 0.5f};
        counts[sampler_next(&s, logits)]++;
    }
    check(counts[2] == 0 && counts[3] == 0 && counts[0] > 800 && counts[1] > 800,
          "top-p 0.5 over four equal logits keeps the lowest ids 0 and 1 (2000 draws)", "counts %ld %ld %ld %ld",
          counts[0], counts[1], counts[2], counts[3]);
    sampler_free(&s);
}

/* log(sum exp(x)) in long double, for the independent figures. */
static long double log_sum_exp(const float *x, int n) {
    long double top = x[scan_argmax(x, n)], sum = 0;
    for (int i = 0; i < n; i++) sum += expl((long double)x[i] - top);
    return top + logl(sum);
}

/* The evaluation's top-1 agreement on hand-made pairs of rows, and on many random pairs with
 * ties, against the scan's argmaxes; its NLLs and KL on the same rows against direct sums. */
static void check_top1_agreement(float *base, float *q, double *p) {
    int n = 50;
    for (int i = 0; i < n; i++) base[i] = q[i] = -(float)(i % 11);
    base[3] = base[7] = 2.5f;                           /* base: ties {3, 7} */
    q[3] = q[9] = 2.5f;                                 /* q: ties {3, 9}: the lowest ids agree */
    int a = ppl_score_row(base, q, n, 4, p).agree;
    base[3] = 0.0f;                                     /* base: 7 alone */
    q[5] = q[7] = 3.0f;                                 /* q: ties {5, 7} above 3 and 9: lowest ids differ */
    int b = ppl_score_row(base, q, n, 4, p).agree;
    check(a == 1 && b == 0, "top-1 agreement on tied rows: ties {3, 7} vs {3, 9} agree (3 = 3); {7} vs ties {5, 7} do "
                            "not (7 vs 5)", "agree %d and %d", a, b);
    int ns[] = {37, 50, 512, MAX_N}, pairs = 0, wrong = 0, told_apart = 0;
    uint64_t rng = 2024;
    double worst = 0;
    for (int li = 0; li < 4; li++)
        for (int rep = 0; rep < 60; rep++) {
            n = ns[li];
            make_row(base, n, rep % 3 == 2 ? 2 : 0, &rng);
            make_row(q, n, rep % 4 == 3 ? 2 : 0, &rng);
            int tok = rep % n;
            PplTargetScore x = ppl_score_row(base, q, n, tok, p);
            int want = scan_argmax(base, n) == scan_argmax(q, n);
            pairs++;
            wrong += x.agree != want;
            told_apart += (highest_tied(base, n) == highest_tied(q, n)) != want;
            long double zb = log_sum_exp(base, n), zq = log_sum_exp(q, n), kl = 0;
            for (int i = 0; i < n; i++) kl += expl(base[i] - zb) * (((long double)base[i] - zb) - ((long double)q[i] - zq));
            double nll = (double)(zq - q[tok]), base_nll = (double)(zb - base[tok]);
            worst = max_or_inf(worst, fabs(x.nll - nll) / nll);
            worst = max_or_inf(worst, fabs(x.base_nll - base_nll) / base_nll);
            worst = max_or_inf(worst, fabs(x.kl - (double)kl) / (double)kl);
            worst = max_or_inf(worst, fabs(x.dp - (exp(-nll) - exp(-base_nll))));
        }
    check(wrong == 0 && told_apart > 0,
          "top-1 agreement (ppl_score_row) on 240 pairs of tied rows of 37, 50, 512, 32000 logits = the scan's "
          "lowest-id argmaxes equal",
          "%d of %d pairs differ; %d pairs where the highest tied ids would answer otherwise", wrong, pairs, told_apart);
    printf("     %d pairs, %d of them answered otherwise by the highest tied ids\n", pairs, told_apart);
    check(worst <= 1e-9, "ppl_score_row on the tied rows: NLLs, KL and p(target) change = direct long-double sums (1e-9)",
          "worst relative difference %.3g", worst);
}

int main(void) {
    float *x = malloc(MAX_N * sizeof *x), *y = malloc(MAX_N * sizeof *y);
    double *p = malloc(MAX_N * sizeof *p);
    if (!check(x && y && p, "test_argmax buffers", "out of memory")) return 1;
    check_logits_argmax(x);
    check_greedy_and_top_k(x);
    check_top_p_ties();
    check_top1_agreement(x, y, p);
    free(x);
    free(y);
    free(p);
    return test_exit_code();
}
