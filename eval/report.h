/* eval/report.h: ./run ppl's run below its flags, its results as text for people and JSON for
 * scripts, and the merge of sharded runs (./run ppl --shard I/N ... then ./run ppl-merge). */
#ifndef KVQ_REPORT_H
#define KVQ_REPORT_H

#include <stdio.h>
#include "eval/perplexity.h"
#include "model/json.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char model[1024];
    char text_file[1024];
    char k_scheme[512], v_scheme[512];
    double k_bits[2], v_bits[2];   /* stored bits per value, and effective at ctx (SCHEMES.md 6) */
    char precision[8];          /* "exact" (f32 activations) or "bf16" */
    int protocol_llamacpp;
    int ctx, stride, n_tokens;
    int shard_index, shard_count;   /* this run's part of the windows (0 of 1: all) */
    int merged_shards;          /* ppl-merge: how many shard files were added up (0: a run) */
    PplResult result;
} PplReport;

/* Fills r's description of a run (r->result is left as is): model, text, the schemes of o and
 * their stored and effective bits at o->ctx for c's shape, precision, protocol, windows, shard. */
void ppl_report_describe(PplReport *r, const char *model, const char *text_file, const char *precision,
                         const Config *c, const PplOptions *o, int n_tokens);

/* ./run ppl: the tokens of text_file (at most max_tokens; 0: all) evaluated with o and r filled:
 * the result and the description of the run (model_dir, precision: as ./run was given them). */
int ppl_run(const Model *m, const Tokenizer *tok, const PplOptions *o, const char *model_dir, const char *text_file,
            const char *precision, int max_tokens, PplReport *r, Error *err);

void report_ppl_text(FILE *f, const PplReport *r);
/* The JSON lines of the schemes and their stored / effective bits, shared with the sweep's outputs. */
void report_schemes_json(FILE *f, const char *k_scheme, const char *v_scheme, const double k_bits[2],
                         const double v_bits[2]);
/* The JSON lines of the comparison figures (eval/stats.h), shared with the sweep's outputs. */
void report_summary_json(FILE *f, PplSummary y);
/* The sums a merge needs beyond ppl's (KL square sum and maximum, p(correct) sums, KL histogram),
 * as JSON lines, and read back from an object holding them (adding into s). */
void report_sums_json(FILE *f, const TokenSums *s);
int report_sums_read(const JsonValue *j, TokenSums *s, const char *path, Error *err);
void report_ppl_json(FILE *f, const PplReport *r);

/* Reads the --json outputs of shards 0..N-1 of one evaluation and adds them up.
 * Refuses files from different evaluations, a repeated shard or a missing one. */
int ppl_merge_files(char *const *paths, int n, PplReport *out, Error *err);

#endif
