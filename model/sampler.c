/* model/sampler.c: greedy and top-p sampling. */
#include "model/sampler.h"
#include "model/kernels/vector.h"
#include <string.h>
#include <math.h>
#include <stdlib.h>

int sampler_init(Sampler *s, int vocab, float temperature, float top_p, unsigned long long seed, Error *err) {
    s->vocab = vocab;
    s->temperature = temperature;
    s->top_p = top_p;
    s->rng = seed * 2654435761ull + 1;   /* never 0: xorshift would stay at 0 */
    s->buf = malloc((size_t)vocab * sizeof *s->buf);
    return s->buf ? 0 : error_set(err, "out of memory for the sampler");
}

void sampler_free(Sampler *s) {
    free(s->buf);
    s->buf = NULL;
}

/* xorshift64*: uniform in [0, 1). */
static float random_unit(unsigned long long *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (float)((*state * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

/* The max first (vectorized, model/kernels/vector.h), then the first entry equal to it: the
 * evaluation calls this for every scored row of the vocabulary, where one scalar loop of
 * compares would cost a good part of the exponentials' time. max_value skips a NaN as the
 * scan would, and starts from x[0], so a NaN there makes top NaN, which nothing equals: 0. */
int logits_argmax(const float *x, int n) {
    float top = max_value(x, n);
    for (int i = 0; i < n; i++)
        if (x[i] == top) return i;
    return 0;
}

/* Decreasing probability, of equal ones the lowest id first: qsort is not stable, and which
 * of two tied tokens falls inside the top-p set must not depend on the C library. */
static int by_prob_desc(const void *a, const void *b) {
    const ProbIndex *x = a, *y = b;
    if (x->p != y->p) return (x->p < y->p) - (x->p > y->p);
    return (x->id > y->id) - (x->id < y->id);
}

int sampler_next(Sampler *s, float *logits) {
    int n = s->vocab;
    if (s->temperature == 0.0f) return logits_argmax(logits, n);
    float max = logits[logits_argmax(logits, n)], sum = 0.0f;
    for (int i = 0; i < n; i++) { logits[i] = expf((logits[i] - max) / s->temperature); sum += logits[i]; }
    for (int i = 0; i < n; i++) { s->buf[i].p = logits[i] / sum; s->buf[i].id = i; }
    qsort(s->buf, (size_t)n, sizeof *s->buf, by_prob_desc);
    float cum = 0.0f;
    int last = n - 1;
    for (int i = 0; i < n; i++) { cum += s->buf[i].p; if (cum >= s->top_p) { last = i; break; } }
    float r = random_unit(&s->rng) * cum, acc = 0.0f;
    for (int i = 0; i <= last; i++) { acc += s->buf[i].p; if (r < acc) return s->buf[i].id; }
    return s->buf[last].id;
}

void top_k_indices(const float *x, int n, int k, int *best) {
    for (int j = 0; j < k; j++) best[j] = -1;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            if (best[j] < 0 || x[i] > x[best[j]]) {   /* insert at j, shifting the rest down */
                memmove(&best[j + 1], &best[j], (size_t)(k - 1 - j) * sizeof *best);
                best[j] = i;
                break;
            }
        }
    }
}
