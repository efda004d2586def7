/* tests/test_sampler.c: model/sampler.c on hand-made distributions whose answers are known:
 * temperature 0 is the argmax (ties: the lowest id), top-p keeps the smallest set of tokens
 * whose probability reaches p, the seed fixes the sequence, and draw frequencies match the
 * probabilities (after temperature and top-p) within a stated statistical tolerance. */
#include "tests/test.h"
#include "model/sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCAB 64
#define SIGMAS 5.0   /* a correct sampler lands this far off one probability with chance < 6e-7 */

/* Logits log(p): softmax at temperature 1 gives back p. */
static void logits_of(const double *p, int n, float *logits) {
    for (int i = 0; i < n; i++) logits[i] = (float)log(p[i]);
}

/* counts[i] = how often id i was drawn in `draws` draws (logits refilled each time: the
 * sampler overwrites them). Returns the number of ids outside 0..n-1 (must be 0). */
static int draw_counts(Sampler *s, const float *logits, int n, long draws, long *counts) {
    float work[MAX_VOCAB];
    int outside = 0;
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (long d = 0; d < draws; d++) {
        memcpy(work, logits, (size_t)n * sizeof *work);
        int id = sampler_next(s, work);
        if (id < 0 || id >= n) outside++;
        else counts[id]++;
    }
    return outside;
}

/* Largest |frequency - p| in units of its standard deviation sqrt(p (1 - p) / draws); +Inf
 * when an id of probability 0 was drawn. */
static double worst_sigmas(const long *counts, const double *p, int n, long draws) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double f = (double)counts[i] / draws, sd = sqrt(p[i] * (1 - p[i]) / draws);
        worst = max_or_inf(worst, sd > 0 ? fabs(f - p[i]) / sd : (f == p[i] ? 0 : INFINITY));
    }
    return worst;
}

static int make_sampler(Sampler *s, int vocab, float temperature, float top_p, unsigned long long seed,
                        const char *name) {
    Error err = {{0}};
    return check(sampler_init(s, vocab, temperature, top_p, seed, &err) == 0, name, "%s", err.msg);
}

/* Temperature 0 against an argmax written here, on seeded random logits, and the tie rule. */
static void check_greedy(void) {
    Sampler s;
    if (!make_sampler(&s, 50, 0.0f, 0.9f, 1, "sampler_init for greedy decoding")) return;
    unsigned long long state = 12345;
    int wrong = 0;
    for (int trial = 0; trial < 200; trial++) {
        float logits[50];
        int best = 0;
        for (int i = 0; i < 50; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            logits[i] = (float)(state >> 40) / (float)(1 << 24) * 20.0f - 10.0f;
            if (logits[i] > logits[best]) best = i;
        }
        wrong += sampler_next(&s, logits) != best;
    }
    check(wrong == 0, "temperature 0 picks the argmax (200 random logit vectors)", "%d of 200 differ", wrong);
    float ties[50] = {0};
    ties[7] = ties[3] = ties[41] = 2.5f;
    int got = sampler_next(&s, ties);
    check(got == 3, "temperature 0: of tied largest logits the lowest id wins (3, 7, 41 -> 3)", "got %d", got);
    sampler_free(&s);
}

/* Top-p on p = {.10, .45, .05, .30, .07, .03} (sorted: 1, 3, 0, 4, 2, 5; running mass .45,
 * .75, .85, .92, .97, 1): the smallest set reaching p, and frequencies within it equal to
 * the renormalized probabilities. */
static void check_top_p(double top_p, int kept_count) {
    static const double p[6] = {0.10, 0.45, 0.05, 0.30, 0.07, 0.03};
    static const int order[6] = {1, 3, 0, 4, 2, 5};
    enum { DRAWS = 40000 };
    double want[6] = {0}, kept_mass = 0;
    for (int i = 0; i < kept_count; i++) kept_mass += p[order[i]];
    for (int i = 0; i < kept_count; i++) want[order[i]] = p[order[i]] / kept_mass;
    float logits[6];
    logits_of(p, 6, logits);
    char name[160];
    snprintf(name, sizeof name, "sampler_init with top-p %.2f", top_p);
    Sampler s;
    if (!make_sampler(&s, 6, 1.0f, (float)top_p, 7, name)) return;
    long counts[6];
    int outside = draw_counts(&s, logits, 6, DRAWS, counts);
    int set_ok = outside == 0;
    for (int i = 0; i < 6; i++) set_ok &= (counts[i] > 0) == (want[i] > 0);
    snprintf(name, sizeof name, "top-p %.2f draws exactly the most probable %d of 6 ids (the smallest set of mass >= %.2f)",
             top_p, kept_count, top_p);
    check(set_ok, name, "counts %ld %ld %ld %ld %ld %ld", counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]);
    double worst = worst_sigmas(counts, want, 6, DRAWS);
    snprintf(name, sizeof name, "top-p %.2f frequencies within %.0f sigma of the renormalized probabilities", top_p, SIGMAS);
    check(worst <= SIGMAS, name, "worst %.2f sigma", worst);
    printf("     top-p %.2f: worst %.2f sigma over %d draws\n", top_p, worst, DRAWS);
    sampler_free(&s);
}

/* With top-p 1 every id is kept; at temperature T the probabilities are p^(1/T), renormalized. */
static void check_frequencies(float temperature) {
    static const double p[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
    enum { DRAWS = 100000 };
    double want[5], total = 0;
    for (int i = 0; i < 5; i++) total += want[i] = pow(p[i], 1.0 / temperature);
    for (int i = 0; i < 5; i++) want[i] /= total;
    float logits[5];
    logits_of(p, 5, logits);
    char name[128];
    snprintf(name, sizeof name, "sampler_init at temperature %.1f", temperature);
    Sampler s;
    if (!make_sampler(&s, 5, temperature, 1.0f, 2024, name)) return;
    long counts[5];
    int outside = draw_counts(&s, logits, 5, DRAWS, counts);
    double worst = outside ? INFINITY : worst_sigmas(counts, want, 5, DRAWS);
    snprintf(name, sizeof name, "temperature %.1f: frequencies within %.0f sigma of softmax(logits / T)", temperature, SIGMAS);
    check(worst <= SIGMAS, name, "worst %.2f sigma (%d ids out of range)", worst, outside);
    printf("     temperature %.1f: worst %.2f sigma over %d draws\n", temperature, worst, DRAWS);
    sampler_free(&s);
}

/* 1000 draws from 16 equally likely ids. */
static int draw_sequence(unsigned long long seed, int *seq) {
    Sampler s;
    Error err;
    if (sampler_init(&s, 16, 1.0f, 1.0f, seed, &err)) return -1;
    for (int d = 0; d < 1000; d++) {
        float logits[16] = {0};
        seq[d] = sampler_next(&s, logits);
    }
    sampler_free(&s);
    return 0;
}

static void check_seeds(void) {
    static int a[1000], b[1000], c[1000];
    if (!check(draw_sequence(42, a) == 0 && draw_sequence(42, b) == 0 && draw_sequence(43, c) == 0,
               "sampler_init for the seed checks", "out of memory"))
        return;
    int same_seed_differ = 0, other_seed_agree = 0;
    for (int d = 0; d < 1000; d++) {
        same_seed_differ += a[d] != b[d];
        other_seed_agree += a[d] == c[d];
    }
    check(same_seed_differ == 0, "same seed, same 1000 draws", "%d positions differ", same_seed_differ);
    /* independent sequences agree at 1/16 of the positions (62 expected, sd 8); 500 is far off */
    check(other_seed_agree < 500, "seeds 42 and 43 give different sequences (fewer than 500 of 1000 draws agree)",
          "%d of 1000 agree", other_seed_agree);
    printf("     seeds 42 and 43 agree at %d of 1000 draws (1/16 expected: 62)\n", other_seed_agree);
}

int main(void) {
    check_greedy();
    check_top_p(0.40, 1);
    check_top_p(0.50, 2);
    check_top_p(0.80, 3);
    check_top_p(0.95, 5);
    check_top_p(1.00, 6);
    check_frequencies(1.0f);
    check_frequencies(0.5f);
    check_frequencies(2.0f);
    check_seeds();
    return test_exit_code();
}
