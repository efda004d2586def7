/* model/modeldir.h: a model directory as the commands use it — config.json,
 * model.safetensors and tokenizer.bin loaded together — and running a prompt. */
#ifndef KVQ_MODELDIR_H
#define KVQ_MODELDIR_H

#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    Model model;
    Tokenizer *tok;       /* NULL when loaded without a tokenizer */
} ModelDir;

/* Loads dir; the tokenizer too when need_tokenizer (its size must match the vocabulary). */
int modeldir_load(ModelDir *md, const char *dir, int need_tokenizer, Error *err);
void modeldir_free(ModelDir *md);

/* Runs tokens[0..n) from position 0 in batches of at most s->max_batch; leaves the last
 * token's logits in s->logits. */
void prefill(const Model *m, RunState *s, KvCache *kv, const int *tokens, int n);

#endif
