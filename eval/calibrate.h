/* eval/calibrate.h: ./run calibrate — a model run over calibration text to fit the KV cache to it
 * (SCHEMES.md §8): per-channel statistics of its keys, values and queries, and the tables of the
 * fitted bases asked for (quant/codec.h's KvFit), written as a calibration file
 * (model/formats/calibration.h) that --calib then gives to every command.
 *
 * The flow: the text tokenized as the evaluation tokenizes WikiText, its first N tokens cut into
 * windows of ctx; each window runs from an empty fp32 cache with exact f32 matmuls, and every
 * position of every window is a calibration row (calib_collect). Then each fit's tables, one per
 * layer and side (and KV head for a per-head fit), each fitted by its codec, in parallel
 * (calib_fit_all). The default text is the calibration split, wiki.valid: numbers reported on
 * the test split stay held-out. */
#ifndef KVQ_CALIBRATE_H
#define KVQ_CALIBRATE_H

#include <stdio.h>
#include "model/formats/calibration.h"
#include "model/model.h"
#include "quant/scheme.h"

#define CALIB_DEFAULT_TEXT "data/wikitext-2-raw/wiki.valid.raw"
#define CALIB_DEFAULT_TOKENS 16384
#define CALIB_DEFAULT_CTX 1024
#define CALIB_MAX_FITS 48   /* at most 64 fit keys a file: model/formats/calibration_read.c */

/* What was collected: every calibration row of every layer, and the statistics' sums. */
typedef struct {
    int n_layers, n_heads, n_kv_heads, head_dim;
    int windows, ctx;            /* rows = windows * ctx positions, in the order (window, position) */
    long rows;
    /* [n_layers][n_kv_heads][rows][head_dim]: keys after RoPE, keys before RoPE (NULL when no fit
     * needs them), values */
    float *k, *kpre, *v;
    /* per layer and kind (k, kpre, v: n_kv_heads; q: n_heads) x head_dim channels: sums in double */
    double *sum[4], *sumsq[4], *amax[4];
} CalibRows;

enum { CALIB_K = 0, CALIB_KPRE = 1, CALIB_V = 2, CALIB_Q = 3 };

/* What calib_collect runs: windows of ctx tokens of tokens[0..windows*ctx), in batches of at
 * most `batch` tokens; keep_kpre: also keep the keys before RoPE (a +prerope fit). */
typedef struct {
    const int *tokens;
    int windows, ctx, batch;
    int keep_kpre;
} CalibWindows;

/* Runs the windows and collects every row. progress as PplOptions' (may be NULL). The model
 * must use exact matmuls. */
int calib_collect(const Model *m, const CalibWindows *cw, void (*progress)(void *user, int done, int total, long tokens,
                  double seconds), void *progress_user, CalibRows *rows, Error *err);
void calib_rows_free(CalibRows *rows);

/* The statistics of §8 into c (mean, mean square, max |x| of every channel). */
void calib_store_stats(const CalibRows *rows, Calibration *c);
/* +aw's weights of §9 into c (aw.{k,kpre,v}: from c's stats.q, so after calib_store_stats, and
 * from m's o_proj); every calibration holds them. */
int calib_store_aw(const Model *m, Calibration *c, Error *err);

/* One fit's spec for each side, parsed from --fit (a fit key, or any spec with a fitted base,
 * whose fit key is derived: BASE+had+res128 fits BASE+had). */
typedef struct {
    char key[96];
    KvSpec keys, values;
    int sides;                  /* 2, or 1 for a +prerope fit (keys only) */
} CalibFitSpec;

/* Parses --fit text for a model of n_layers x head_dim; 0 or -1 with why. */
int calib_fit_spec_parse(const char *text, int n_layers, int head_dim, CalibFitSpec *f, char *why, size_t why_len);

/* The units one table is fitted on: the rows of layer `layer` (and KV head `head`, or every
 * head when the table is shared: head -1) as the spec's base is given them (§8: after +had,
 * +prerope, +out; token groups complete within each window from position 0), into units
 * (calib_units_floats floats). Returns the number of units (the codec's fit makes its points). */
size_t calib_units_floats(const CalibRows *rows, const KvSpec *spec, int head);
size_t calib_units(const CalibRows *rows, const KvSpec *spec, int layer, int head, float *units);

/* Fits every table of every fit into c (fits already added to c in the order of specs), in
 * parallel; progress after each table. A fit whose points are fewer than 4 x its entries is
 * refused, naming the tokens it needs. */
int calib_fit_all(const CalibRows *rows, const CalibFitSpec *specs, int n_specs, Calibration *c,
                  void (*progress)(void *user, int done, int total, long tokens, double seconds), void *progress_user,
                  Error *err);

/* calib_fit_all, also adding up each fit's CPU seconds (its tables' thread time) into
 * cpu_seconds[n_specs] when not NULL: what the fits cost, apart from the machine's other load. */
int calib_fit_all_timed(const CalibRows *rows, const CalibFitSpec *specs, int n_specs, Calibration *c,
                        void (*progress)(void *user, int done, int total, long tokens, double seconds),
                        void *progress_user, double *cpu_seconds, Error *err);

/* ./run calibrate's options. */
typedef struct {
    const char *model_dir;      /* the model (NULL with random) */
    const char *random;         /* seeded random weights of TinyLlama's shape ("tinyllama") or of a
                                   config.json: for timing; the text is tokenized with TinyLlama's
                                   tokenizer then */
    const char *text_file;      /* default CALIB_DEFAULT_TEXT */
    int tokens, ctx, batch;     /* defaults CALIB_DEFAULT_TOKENS, CALIB_DEFAULT_CTX, min(ctx, 512) */
    const char *fits[CALIB_MAX_FITS];
    int n_fits;
    const char *out;            /* the calibration file; its heatmap is out + ".svg" */
    int quiet;
} CalibrateOptions;

/* The whole command: the calibration written to o->out (and the heatmap beside it), the outlier
 * table printed on out. */
int calibrate_run(const CalibrateOptions *o, FILE *out, Error *err);

#endif
