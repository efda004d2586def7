/* eval/sensitivity.h: per-layer sensitivity (./run sensitivity): for every layer, side (keys,
 * values) and candidate scheme, the damage when only that layer's keys (or values) use the
 * candidate and everything else stays fp32.
 *
 * It is a sweep (eval/sweep.h) whose configurations are generated: for side K, layer L and
 * candidate c the keys "fp32;L:c" and the values "fp32"; for side V the other way round. So it
 * has the sweep's session (each window's fp32 baseline once, then 2 x layers x candidates
 * quantized passes), its journal (resumable), its shards (put together by ./run sweep-merge,
 * which recognises a sensitivity's configurations and writes its report too) and its numbers.
 *
 * Its report, beside the sweep's results.*: sensitivity.md (a table of mean KL by layer and
 * candidate for keys and for values, and every figure of every cell), sensitivity.csv,
 * sensitivity.json (what ./run allocate reads) and sensitivity.svg (a heatmap, K and V panels,
 * eval/sensitivity_chart.c). */
#ifndef KVQ_SENSITIVITY_H
#define KVQ_SENSITIVITY_H

#include "eval/sweep.h"

#define SENS_MAX_CANDIDATES 32
#define SENS_SPEC_LEN 96                 /* a candidate's canonical spelling (KvSpec.text) */
#define SENS_DEFAULT_TEXT "data/wikitext-2-raw/wiki.valid.raw"   /* the calibration split */

typedef enum { SENS_KEYS = 0, SENS_VALUES = 1 } SensSide;

/* The grid: candidates (canonical spellings, in the order given) x layers x sides. */
typedef struct {
    int n_layers, n_candidates;
    char candidates[SENS_MAX_CANDIDATES][SENS_SPEC_LEN];
} SensGrid;

/* --candidates "SPEC,SPEC,...": each one SPEC (no per-layer items), valid for keys and for
 * values, written once. Fills g's candidates (n_layers left as it is). */
int sens_parse_candidates(const char *list, SensGrid *g, Error *err);
/* The configuration of (side, layer, candidate): side-major, then layer, then candidate. */
int sens_config_index(const SensGrid *g, int side, int layer, int candidate);
/* Appends the grid's 2 x n_layers x n_candidates configurations to s (s->configs holds
 * SWEEP_MAX_CONFIGS). */
int sens_add_configs(SweepSettings *s, const SensGrid *g, Error *err);
/* 1, with g filled, when s's configurations are exactly a sensitivity's (as sens_add_configs
 * makes them); else 0. */
int sens_grid_of(const SweepSettings *s, SensGrid *g);

/* ./run sensitivity below its flags: s holds the sweep's settings but its configurations (the
 * model, text, window, calibration path), g the candidates. Reads the model's layer count and
 * head_dim, checks every candidate against them, generates the configurations and runs the sweep
 * into out_dir (sweep_run_and_report_as), then writes and prints the report (a shard: its line). */
int sensitivity_run_and_report(SweepSettings *s, SensGrid *g, const SweepRun *run, Error *err);

/* The end of a whole sensitivity (eval/sensitivity_report.c): the sweep's results.* and the
 * sensitivity.* files in out_dir, then on out the KL table and the files' names, or with json the
 * sensitivity.json just written. Reads the model directory's config.json (head_dim, the layers)
 * and hashes its model.safetensors (the report names the model by content). */
int sens_finish_report(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, const SensGrid *g,
                       int json, Error *err);

/* What ./run sweep-merge ends with: for a sensitivity's configurations its report (the sweep's
 * results.* and the sensitivity.* files, the table printed), otherwise sweep_finish. */
int sens_or_sweep_finish(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                         Error *err);

/* ---- DIR/sensitivity.json, read back (./run allocate) ---- */

typedef struct {
    char model[1024], model_sha256[65], text_file[1024], calib_sha256[65], precision[8], protocol[16];
    int ctx, stride, head_dim, windows, windows_total;
    long scored;                         /* scored tokens of every cell */
    double baseline_ppl;
    SensGrid g;
    double *kl;                          /* [sens_config_index]: each cell's mean KL */
    double *kl_se;
} SensData;

/* Reads and checks dir/sensitivity.json: every cell once, finite, the grid complete. */
int sens_read(const char *dir, SensData *d, Error *err);
void sens_data_free(SensData *d);

/* ---- the heatmap (eval/sensitivity_chart.c) ---- */

/* An SVG of kl[sens_config_index] (mean KL; <= 0 or not finite drawn grey), under a fixed title
 * and the line `title` (what was measured, e.g. the model and text): K panel left, V
 * panel right, rows the layers, columns the candidates (labelled with bits[c]), one log colour
 * scale for both panels with its bar. Each cell is a <rect class="cell"> holding a <title>
 * "K layer 3 tq2: KL 0.0123" (so a viewer shows it and a test can read it). 0, or -1 when a
 * write to f failed. */
int sens_write_heatmap_svg(FILE *f, const char *title, const SensGrid *g, const double *kl, const double *bits);

#endif
