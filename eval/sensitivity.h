/* eval/sensitivity.h: per-layer sensitivity (./run sensitivity): for every layer, side (keys,
 * values) and candidate scheme, the damage when only that layer's keys (or values) use the
 * candidate and everything else stays fp32.
 *
 * Keys and values may have their own candidates (--k-candidates, --v-candidates; --candidates
 * gives both the same list): a key-only scheme such as +prerope is a key candidate only.
 *
 * It is a sweep (eval/sweep.h) whose configurations are generated: for side K, layer L and key
 * candidate c the keys "fp32;L:c" and the values "fp32"; for side V the other way round. So it
 * has the sweep's session (each window's fp32 baseline once, then layers x (key + value
 * candidates) quantized passes), its journal (resumable), its shards (put together by ./run sweep-merge,
 * which recognises a sensitivity's configurations and writes its report too) and its numbers.
 *
 * Its report, beside the sweep's results.*: sensitivity.md (a table of mean KL by layer and
 * candidate for keys and for values, and every figure of every cell), sensitivity.csv,
 * sensitivity.json (what ./run allocate reads) and sensitivity.svg (a heatmap, K and V panels,
 * eval/sensitivity_chart.c), written by eval/sensitivity_report.c. */
#ifndef KVQ_SENSITIVITY_H
#define KVQ_SENSITIVITY_H

#include "eval/sweep.h"
#include "eval/sensitivity_grid.h"

#define SENS_DEFAULT_TEXT "data/wikitext-2-raw/wiki.valid.raw"   /* the calibration split */

/* --candidates "SPEC,SPEC,...": each one SPEC (no per-layer items), valid for keys and for
 * values, written once. Fills both sides' candidates (n_layers left as it is). */
int sens_parse_candidates(const char *list, SensGrid *g, Error *err);
/* --k-candidates / --v-candidates: the same for one side's list only (a value candidate with
 * +prerope is refused); the other side's list is left as it is. */
int sens_parse_side_candidates(const char *list, SensSide side, SensGrid *g, Error *err);
/* Appends the grid's n_layers x (key + value candidates) configurations to s (s->configs holds
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

/* ./run sweep-merge past its flags: the shards' directories merged (sweep_merge), out_dir claimed
 * (sweep_merge_claim_out_dir) and, for a sensitivity's configurations, its report (the sweep's
 * results.* and the sensitivity.* files, the table printed on out), otherwise sweep_finish's. */
int sweep_merge_run(char *const *dirs, int n, const char *out_dir, FILE *out, int json, Error *err);

/* ---- DIR/sensitivity.json, read back (./run allocate) ---- */

/* SENS_JSON_VERSION: eval/sensitivity_grid.h (the report writes it, allocate reads it). */
/* A cell's mean KL above this many nats a token is refused as damage: a uniform guess over a
 * 32,000-token vocabulary costs 10.4, and one layer's quantized keys or values far less. */
#define SENS_KL_ABSURD 100.0

typedef struct {
    char model[1024], model_sha256[65], text_file[1024], calib_sha256[65], precision[8], protocol[16];
    char calib_text_sha256[65];          /* the calibration's held-out state as the sensitivity recorded it */
    CalibHeldOut calib_held_out;         /* (unknown in a sensitivity.json of an older kvq) */
    int ctx, stride, head_dim, windows, windows_total;
    long scored;                         /* scored tokens of every cell */
    double baseline_ppl;
    SensGrid g;
    double *kl;                          /* [sens_config_index]: each cell's mean KL */
    double *kl_se;
} SensData;

/* Reads and checks dir/sensitivity.json (versions 1 to SENS_JSON_VERSION): its CRC-32C (2 on), every cell once, the grid
 * complete, each mean KL in [0, SENS_KL_ABSURD] and its stderr neither negative nor infinite, and (both
 * versions) each mean KL its kl_sum / scored_tokens. Errors name the file. */
int sens_read(const char *dir, SensData *d, Error *err);
void sens_data_free(SensData *d);

#endif
