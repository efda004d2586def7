/* eval/probe_common.h: what the probes' files share, below them all (eval/probe.c runs the
 * caches; each task's file, probe_copy.c, probe_passkey.c and probe_diverge.c, makes its inputs
 * and scores them): the options, cells and result (eval/probe.h's API), the work area, seeded
 * draws and greedy decoding (eval/probe_common.c), and each task's steps and parts. */
#ifndef KVQ_PROBE_COMMON_H
#define KVQ_PROBE_COMMON_H

#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef enum { PROBE_COPY, PROBE_PASSKEY, PROBE_DIVERGE } ProbeTask;

#define PROBE_MAX_LENGTHS 12
#define PROBE_MAX_DEPTHS 11
#define PROBE_PASSKEY_DIGITS 5
#define PROBE_DEFAULT_PASSKEY_TEXT "data/wikitext-2-raw/wiki.valid.raw"   /* the calibration split */
#define PROBE_DEFAULT_DIVERGE_TEXT "data/wikitext-2-raw/wiki.test.raw"

typedef struct {
    ProbeTask task;
    int ctx;                   /* the longest input (0: the model's context) */
    int sequences;             /* copy: sequences per S; passkey: trials per (length, depth); diverge: prompts */
    unsigned long long seed;
    int lengths[PROBE_MAX_LENGTHS], n_lengths;   /* copy: S; passkey: tokens in all (0 lengths: the defaults) */
    int depths[PROBE_MAX_DEPTHS], n_depths;      /* passkey: depth in percent (0: 0, 25, 50, 75, 100) */
    int prompt_tokens, new_tokens;               /* diverge: P and M */
    const char *text_file;     /* passkey's filler, diverge's prompts (NULL: the defaults above) */
    int batch;                 /* positions a forward call (0: 512) */
} ProbeOptions;

/* One cache's counts in one cell (a length, or a length and depth):
 *   copy     n scored tokens, hits = top-1 right, sum/sumsq of their NLL, agree = top-1 the
 *            same as the fp32 cache's
 *   passkey  n trials, hits = exact matches, agree = the same answer as the fp32 cache's
 *   diverge  n prompts, hits = continuations identical to fp32's, sum/sumsq of the tokens
 *            before the first difference (M when identical) */
typedef struct {
    long n, hits, agree;
    double sum, sumsq;
} ProbeCell;

typedef struct {
    ProbeOptions o;            /* with the defaults filled in and lengths cut to what fits */
    int n_caches;              /* 1 + schemes: cache 0 is fp32 */
    int n_cells;               /* copy: lengths; passkey: lengths x depths; diverge: 1 */
    ProbeCell *cells;          /* [n_caches][n_cells] */
    int scored_per_sequence[PROBE_MAX_LENGTHS];   /* copy: tokens scored in each sequence of length i */
} ProbeResult;

static inline ProbeCell *probe_cell(const ProbeResult *r, int cache, int cell) {
    return &r->cells[(size_t)cache * r->n_cells + cell];
}

/* One run's work area, shared by probe.c and the task that runs. */
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

/* The tasks' parts, for tests that check them by an independent computation. */
/* The word pieces the copy probe draws from: "▁" and 2 to 12 lower-case ASCII letters (ordinary
 * words, no digits, punctuation or bytes); their ids into *ids (malloc'd), their count. */
int probe_word_pieces(const Tokenizer *tok, int **ids, Error *err);
/* Copy sequence `index` of copy length S: BOS, S pieces, the same S again, cut to ctx tokens; into
 * out (room for 2S + 1), its length returned. Targets from S + 2 on are scored. */
int probe_copy_sequence(const int *pieces, int n_pieces, int bos, unsigned long long seed, int S, int index, int ctx,
                        int *out);
/* The first target scored in a copy sequence of copy length S: the second copy's second token. */
static inline int probe_copy_first_scored(int S) { return S + 2; }
/* Greedy divergence's count: the tokens of a[0..M) before the first that differs from b's (M: none). */
int probe_first_difference(const int *a, const int *b, int M);
/* One continuation of M tokens into a diverge cell: a hit only when all M equal the baseline's. */
void probe_diverge_count(ProbeCell *cell, const int *out, const int *base, int M);
/* The passkey number of a trial (PROBE_PASSKEY_DIGITS digits, the first not 0), as text. */
void probe_passkey_number(unsigned long long seed, int trial, char out[PROBE_PASSKEY_DIGITS + 1]);
/* Whether a greedy answer's text holds the number: after spaces, its digits and then no digit. */
int probe_passkey_match(const char *answer, const char *number);

#endif
