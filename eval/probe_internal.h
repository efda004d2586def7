/* eval/probe_internal.h: what the probes' files share (eval/probe.c runs the caches; each task's
 * file makes its inputs and scores them): the work area, seeded draws, and each task's two steps. */
#ifndef KVQ_PROBE_INTERNAL_H
#define KVQ_PROBE_INTERNAL_H

#include "eval/probe.h"

typedef struct {
    const Model *m;
    const Tokenizer *tok;
    const ProbeOptions *o;     /* resolved */
    RunState s;                /* max_batch = o->batch */
    int *seq;                  /* [o->ctx]: the input being run */
    int *pieces, n_pieces;     /* copy: the word pieces drawn from */
    int *text, n_text;         /* passkey: the filler's tokens; diverge: the prompts' text's tokens */
    int *base;                 /* the fp32 cache's answers, to compare each scheme's with: copy: the top-1 of
                                  every scored token in order; passkey, diverge: each trial's generated ids */
    size_t n_base;
} ProbeWork;

/* A draw from (seed, a, b, c): splitmix64 of them, so every input is a function of the seed and
 * its indices alone (a trial does not depend on the ones before it). */
unsigned long long probe_draw(unsigned long long seed, unsigned long long a, unsigned long long b, unsigned long long c);

/* NLL of target under logits row[0..n): logsumexp - row[target], in double. */
double probe_row_nll(const float *row, int n, int target);

/* Greedy continuation: after prompt[0..n) run from position 0 (kv->len reset), `count` tokens
 * each the argmax of the last logits, into out (EOS too: the count is fixed). */
void probe_greedy(ProbeWork *w, KvCache *kv, const int *prompt, int n, int count, int *out);

/* Each task: prepare (its inputs' sources, the baseline's room) and one cache's run (cache 0:
 * fp32, whose answers it keeps in w->base), counts added into r's cells of that cache. */
int probe_copy_prepare(ProbeWork *w, Error *err);
void probe_copy_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r);
int probe_passkey_prepare(ProbeWork *w, Error *err);
int probe_passkey_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r, Error *err);
int probe_diverge_prepare(ProbeWork *w, Error *err);
void probe_diverge_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r);

/* passkey: the answer's tokens generated, and the room past the longest prompt it needs. */
#define PROBE_PASSKEY_ANSWER_TOKENS 8

#endif
