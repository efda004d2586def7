/* eval/validate.h: ./run --validate — does quantizing the KV cache keep perplexity within a
 * threshold? Six steps: load the model; build a KV cache from a prompt; baseline perplexity;
 * compress that cache (ratio, RMSE, SNR); load the compressed file back and check it equals
 * the in-memory dequantization; perplexity with every key and value quantized as it is
 * written. Steps 3 and 6 are evaluated side by side over the same windows. A fitted scheme
 * (SCHEMES.md §8) takes its tables from a calibration (--calib) in steps 4 to 6 alike. */
#ifndef KVQ_VALIDATE_H
#define KVQ_VALIDATE_H

#include <stdio.h>
#include "model/model.h"
#include "eval/calibration.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model_dir;
    const char *model_note;        /* why this model: "--model", "models/tinyllama", "bundled" */
    const char *text_file;
    /* The cache's schemes and --calib: validate_default_run resolves them (eval/calibration.h)
     * into the scheme validate_run uses for steps 4-6 and the report names. */
    KvCacheFlags kv;
    /* Pass when delta < the larger of threshold_ppl and threshold_percent % of the baseline
     * (0 turns a bar off). The default, 0.5 and 1%, is the seed's Δppl < 0.5 on TinyLlama
     * (ppl ~7-8, where 1% is only ~0.08) and stays meaningful on models whose ppl is ~300. */
    double threshold_ppl;
    double threshold_percent;
    int windows;                   /* HF windows of ctx tokens */
    int ctx, stride;
    int quiet;                     /* no progress bar */
} ValidateOptions;

typedef struct {
    double baseline_ppl, compressed_ppl, delta, delta_percent;
    double delta_nll, delta_nll_stderr;   /* per-token mean NLL difference and its standard error */
    double kl_mean, top1_agreement;
    double compression_ratio, rmse, snr_db, cosine_similarity, max_error;   /* keys and values together */
    double key_rmse, value_rmse;   /* each side with its own scheme */
    int cache_tokens;              /* step 2's prompt length */
    int roundtrip_ok;              /* step 5 */
    long scored_tokens;
    int windows, windows_total;
    double seconds;
    double threshold;              /* the bar delta was held to, in perplexity points */
    int passed;
} ValidateResult;

/* --threshold's value: "0.5" a perplexity delta, "0.5%" a relative one; either replaces both
 * default bars. -1 when it is neither (a positive finite number, then perhaps '%'). */
int validate_parse_threshold(const char *text, ValidateOptions *o);

/* ./run --validate below its flags: the model is o->model_dir, else TinyLlama once exported to
 * models/tinyllama, else the bundled model (out is told how to get TinyLlama); ctx 0 is the
 * model's context. The six steps with the report on out (NULL: silent) and the JSON on json
 * (NULL: none); *passed: delta within the threshold. */
int validate_default_run(ValidateOptions *o, FILE *out, FILE *json, int *passed, Error *err);

/* Runs the six steps, printing the report to out (NULL: silent). */
int validate_run(const Model *m, const Tokenizer *tok, const ValidateOptions *o, const KvCacheScheme *scheme, FILE *out,
                 ValidateResult *r, Error *err);
void validate_print_results(FILE *out, const ValidateOptions *o, const KvCacheScheme *scheme, const ValidateResult *r);
void validate_print_json(FILE *out, const ValidateOptions *o, const KvCacheScheme *scheme, const ValidateResult *r);

#endif
