/* eval/generate.h: the model run directly on tokens, outside any evaluation: text sampled and
 * streamed from a prompt (./run generate) and the logits of every position of a token list
 * (./run logits). */
#ifndef KVQ_GENERATE_H
#define KVQ_GENERATE_H

#include <stdio.h>
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *prompt;
    int chat;                  /* wrap the prompt in TinyLlama-Chat's template */
    int steps;                 /* positions in all, the prompt's included (capped at the model's context) */
    float temperature, top_p;
    unsigned long long seed;
    const KvLayered *scheme;   /* how the cache stores keys and values */
} GenerateOptions;

typedef struct {
    int prompt_tokens, generated;
    double prompt_seconds, generate_seconds;   /* prefill, then the sampled tokens */
} GenerateStats;

/* Writes the prompt's text and then each sampled token's to out as it comes (flushed, so a
 * reader sees the text grow), until o->steps positions or the end-of-sequence token. */
int generate_text(const Model *m, const Tokenizer *tok, const GenerateOptions *o, FILE *out, GenerateStats *st,
                  Error *err);

/* Runs ids[0..n) from position 0 with the cache in scheme and leaves every position's logits,
 * [n][vocab], in s->logits. The caller frees s (runstate_free), also after a failure. */
int logits_of_tokens(const Model *m, const int *ids, int n, const KvLayered *scheme, RunState *s, Error *err);

#endif
