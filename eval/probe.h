/* eval/probe.h: probes of what a quantized KV cache breaks that perplexity hides — each run with
 * an fp32 cache and with every scheme given, on the same seeded inputs:
 *
 *   copy      seeded sequences of S random word pieces, then the same S again: from the second
 *             copy's second token on, only reading the first copy through the cache (induction)
 *             predicts the next token. Top-1 accuracy and mean NLL on those tokens, per S.
 *   passkey   a five-digit number in a sentence buried at a depth of 0..100% of filler text from
 *             the calibration split, the question at the end, the digits decoded greedily:
 *             exact matches per (length, depth).
 *   diverge   seeded prompts from the test split, M tokens generated greedily: tokens until the
 *             scheme's continuation first differs from the fp32 cache's, and the share identical.
 *
 * Every figure is a count or a sum (ProbeCell), so the reports derive means and standard errors
 * from them alone. eval/probe_report.c prints and writes them; eval/probe_sweep.c runs them on a
 * sweep's configurations. */
#ifndef KVQ_PROBE_H
#define KVQ_PROBE_H

#include <stdio.h>
#include "model/model.h"
#include "eval/calibration.h"
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

/* Fills o's defaults for model m (ctx, lengths, depths, sequences, ...) and checks them: a length
 * that does not fit ctx is refused, naming it. */
int probe_options_resolve(ProbeOptions *o, const Model *m, Error *err);

/* Runs o's task on m: an fp32 cache, then each scheme i (schemes[i]: its keys, values and the
 * fitted bases' calibration), one cache held at a time. r->cells allocated (probe_result_free). */
int probe_run(const Model *m, const Tokenizer *tok, const ProbeOptions *o, const KvCacheScheme *const *schemes,
              int n_schemes, ProbeResult *r, Error *err);
void probe_result_free(ProbeResult *r);

/* ./run probe: MODEL_DIR loaded, kv's recipe resolved for it (eval/calibration.h), o run with
 * the fp32 cache and that one scheme. */
int probe_run_from_dir(const char *model_dir, const KvCacheFlags *kv, const ProbeOptions *o, ProbeResult *r,
                       Error *err);

/* The parts, for tests that check them by an independent computation. */
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
/* The passkey number of a trial (PROBE_PASSKEY_DIGITS digits, the first not 0), as text. */
void probe_passkey_number(unsigned long long seed, int trial, char out[PROBE_PASSKEY_DIGITS + 1]);
/* Whether a greedy answer's text holds the number: after spaces, its digits and then no digit. */
int probe_passkey_match(const char *answer, const char *number);

/* Names of a task ("copy", "passkey", "diverge") and back (-1: none). */
const char *probe_task_name(ProbeTask t);
int probe_task_parse(const char *name);

/* The report: a table per task, fp32 first ("not meaningful" when fp32 fails it), the schemes'
 * labels labels[0..n_caches-1] (labels[0]: "fp32"). Text (markdown tables) and JSON. */
void probe_report_text(FILE *f, const ProbeResult *r, const char *model, const char *const *labels);
void probe_report_json(FILE *f, const ProbeResult *r, const char *model, const char *const *labels);
/* CSV: one row per cache and cell. */
void probe_report_csv(FILE *f, const ProbeResult *r, const char *const *labels);

/* The figures of a cell: a rate hits/n with its binomial standard error sqrt(p(1-p)/n), and the
 * mean of sum with its standard error (NAN where undefined). */
double probe_rate(const ProbeCell *c);
double probe_rate_se(const ProbeCell *c);
double probe_mean(const ProbeCell *c);
double probe_mean_se(const ProbeCell *c);

#endif
