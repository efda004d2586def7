/* model/sampler.h: choosing the next token from logits — greedy, or temperature plus
 * nucleus (top-p) sampling with a seeded generator, so a run with the same seed repeats. */
#ifndef KVQ_SAMPLER_H
#define KVQ_SAMPLER_H

#include "model/formats/error.h"

typedef struct {
    float p;
    int id;
} ProbIndex;

typedef struct {
    int vocab;
    float temperature;        /* 0: greedy, the argmax (of tied logits the lowest id) */
    float top_p;              /* keep the smallest set of tokens whose probability reaches top_p,
                                 taken by decreasing probability, of equal ones the lowest id first */
    unsigned long long rng;   /* xorshift64* state */
    ProbIndex *buf;           /* [vocab] */
} Sampler;

/* The index of the largest of x[0..n), n >= 1, and of tied largest values the lowest: kvq's one
 * argmax, for greedy decoding (sampler_next at temperature 0), the evaluation's top-1 agreement
 * (eval/perplexity.c) and top_k_indices' first. The same answer as a left-to-right scan keeping
 * only a strictly larger value: a NaN never wins, except one at x[0], which gives 0. */
int logits_argmax(const float *x, int n);

int sampler_init(Sampler *s, int vocab, float temperature, float top_p, unsigned long long seed, Error *err);
void sampler_free(Sampler *s);
/* The next token; logits[0..vocab) is overwritten. */
int sampler_next(Sampler *s, float *logits);

/* The k (<= n) largest of x[0..n) as indices, largest first (ties: the lower index, so best[0]
 * is logits_argmax's). */
void top_k_indices(const float *x, int n, int k, int *best);

#endif
