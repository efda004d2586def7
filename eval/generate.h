/* eval/generate.h: the model and the tokenizer used directly, outside any evaluation: text
 * sampled and streamed from a prompt (./run generate), the logits of every position of a token
 * list (./run logits) and the ids of a text (./run tokenize). */
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

/* The five largest logits of each of n positions, one line each: "pos 3: 450 (12.3456) ...". */
void logits_print_top5(FILE *f, const float *logits, int n, int vocab);

/* "1,450,4996" (--tokens) -> n ids, each checked against the vocabulary; NULL with the reason. */
int *token_ids_parse(const char *text, int vocab, int *n, Error *err);

/* Prints the ids of text, or of the file text_file's contents, with the tokenizer of
 * model_dir, on one line; BOS first when bos. */
int tokenize_print(FILE *f, const char *model_dir, const char *text, const char *text_file, int bos, Error *err);

#endif
