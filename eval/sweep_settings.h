/* eval/sweep_settings.h: what a sweep is and what it adds up, apart from how it is run: its
 * configurations and settings (DIR/sweep.json) and the totals of its journal (eval/sweep_journal.h).
 * eval/sweep.h declares the commands on them. */
#ifndef KVQ_SWEEP_SETTINGS_H
#define KVQ_SWEEP_SETTINGS_H

#include "eval/perplexity.h"

typedef struct {
    char k_text[512], v_text[512];   /* the schemes as given (V = K when not given) */
    KvCacheScheme scheme;            /* parsed (not filled by sweep_merge); its calib is the run's */
    double k_bits[2], v_bits[2];     /* stored and effective bits per value at ctx (SCHEMES.md 6) */
    double codebook_bytes;           /* the fitted tables both sides read, per model (SCHEMES.md 8: apart from bits) */
} SweepConfig;

/* Whether a sweep's numbers are held out from its calibration: was the calibration fitted on
 * another text than the one measured (its text_sha256 against the text file's sha256, taken when
 * the sweep starts and recorded in sweep.json)? Unknown in the files of a kvq that did not record
 * it. Only said of a sweep with a calibration. */
typedef enum { CALIB_HELD_OUT_UNKNOWN = 0, CALIB_HELD_OUT, CALIB_NOT_HELD_OUT } CalibHeldOut;

/* What identifies a sweep: equal settings, equal numbers. The model and the text are compared by
 * content (model_id, tokens_hash), never by their paths. */
typedef struct {
    char model[1024];            /* the model directory as given (shown, not compared) */
    char model_id[65];           /* its identity by content (model/formats/model_identity.h) */
    char text_file[1024];
    char precision[8];           /* "exact" or "bf16" */
    char calib_path[1024];       /* --calib as given ("": the model directory's kv-calib.safetensors, if any) */
    char calib[1024];            /* the calibration the sweep used ("" without one) and its file's sha256: */
    char calib_sha256[65];       /* a resumed sweep must use the same */
    char calib_text_sha256[65];  /* the text that calibration was fitted on (its text_sha256; "": unknown) */
    CalibHeldOut calib_held_out; /* ... against this sweep's text, as recorded when the sweep started */
    PplOptions ppl;              /* protocol, ctx, stride, max_windows, batch, shard; schemes unused */
    int n_tokens;
    unsigned long long tokens_hash;   /* FNV-1a of the token ids: the same text, tokenized the same */
    int windows_total;           /* after max_windows */
    SweepConfig *configs;
    int n_configs;
} SweepSettings;

/* The sums of every configuration over the windows the journal(s) hold. */
typedef struct {
    TokenSums *sums;             /* [n_configs] */
    int windows;                 /* windows whose every configuration is in */
    long tokens_processed;       /* forward-pass tokens of all records */
    double seconds;              /* compute time of all records (not counting the baselines) */
    double run_seconds;          /* this process: wall time of the windows it ran, baselines included */
    long run_tokens;             /* ... and their forward-pass tokens */
    long run_layer_tokens;       /* ... and layers x tokens their passes ran (eval/layer_resume.h skips some) */
} SweepTotals;

/* eval/sweep_journal.c. Frees t->sums and zeroes t. */
void sweep_totals_free(SweepTotals *t);

#endif
