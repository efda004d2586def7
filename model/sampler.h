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
    float top_p;              /* keep the smallest set of tokens whose probability reaches top_p */
    unsigned long long rng;   /* xorshift64* state */
    ProbIndex *buf;           /* [vocab] */
} Sampler;

int sampler_init(Sampler *s, int vocab, float temperature, float top_p, unsigned long long seed, Error *err);
void sampler_free(Sampler *s);
/* The next token; logits[0..vocab) is overwritten. */
int sampler_next(Sampler *s, float *logits);

/* The k (<= n) largest of x[0..n) as indices, largest first (ties: the lower index). */
void top_k_indices(const float *x, int n, int k, int *best);

#endif
