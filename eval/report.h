/* eval/report.h: ./run ppl's run below its flags, its results as text for people and JSON for
 * scripts, and the merge of sharded runs (./run ppl --shard I/N ... then ./run ppl-merge). */
#ifndef KVQ_REPORT_H
#define KVQ_REPORT_H

#include <stdio.h>
#include "eval/perplexity.h"
#include "eval/calibration.h"
#include "model/formats/json.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char model[1024];           /* the model directory as given (shown, never compared) */
    char model_id[65];          /* its identity by content (model/formats/model_identity.h): shards merge on it */
    char text_file[1024];
    char k_scheme[512], v_scheme[512];
    char calib[1024];           /* the calibration's path, "" without one */
    char calib_sha256[65];      /* its file's sha256 */
    int calib_on_text;          /* 1: the calibration was fitted on this very text (its text_sha256): NOT held out */
    double k_bits[2], v_bits[2];   /* stored bits per value, and effective at ctx (SCHEMES.md 6) */
    char precision[8];          /* "exact" (f32 activations) or "bf16" */
    int protocol_llamacpp;
    int ctx, stride, n_tokens;
    int shard_index, shard_count;   /* this run's part of the windows (0 of 1: all) */
    int merged_shards;          /* ppl-merge: how many shard files were added up (0: a run) */
    PplResult result;
} PplReport;

/* Fills r's description of a run (r->result is left as is): model and its identity, text, the
 * schemes of o and their stored and effective bits at o->ctx for c's shape, precision, protocol,
 * windows, shard. */
void ppl_report_describe(PplReport *r, const char *model, const char *model_id, const char *text_file,
                         const char *precision, const Config *c, const PplOptions *o, int n_tokens);

/* ./run ppl as its flags give it. */
typedef struct {
    const char *model_dir, *text_file, *precision;   /* precision: "exact" or "bf16" */
    int max_tokens;             /* of the text's tokens, the first max_tokens (0: all) */
    int quiet;                  /* no progress bar */
    PplOptions o;               /* ctx 0: the model's context; o.scheme is resolved from kv */
    KvCacheFlags kv;            /* the cache's schemes and --calib */
} PplRun;

/* The model loaded (ppl_load_model), the text's tokens evaluated with run->o, and r filled:
 * the result and the description of the run. */
int ppl_run(const PplRun *run, PplReport *r, Error *err);

void report_ppl_text(FILE *f, const PplReport *r);
/* The JSON lines of the schemes and their stored / effective bits, shared with the sweep's outputs. */
void report_schemes_json(FILE *f, const char *k_scheme, const char *v_scheme, const double k_bits[2],
                         const double v_bits[2]);
/* The JSON lines of the entropy bits per value of keys and values (SCHEMES.md §9) and their sums. */
void report_entropy_json(FILE *f, const TokenSums *s);
/* ... and the sums it writes (code_bits, code_values) added into s; absent: nothing added. */
int report_entropy_read(const JsonValue *j, TokenSums *s, const char *where, Error *err);
/* The JSON lines of the comparison figures (eval/stats.h), shared with the sweep's outputs. */
void report_summary_json(FILE *f, PplSummary y);
/* The sums a merge needs beyond ppl's (KL square sum and maximum, p(correct) sums, KL histogram),
 * as JSON lines, and read back from an object holding them (adding into s). */
void report_sums_json(FILE *f, const TokenSums *s);
int report_sums_read(const JsonValue *j, TokenSums *s, const char *path, Error *err);
void report_ppl_json(FILE *f, const PplReport *r);

/* Reads the --json outputs of shards 0..N-1 of one evaluation and adds them up.
 * Refuses files from different evaluations (another model_id, whatever the model's path), a
 * shard without a model_id, a repeated shard or a missing one. */
int ppl_merge_files(char *const *paths, int n, PplReport *out, Error *err);

#endif
