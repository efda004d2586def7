/* eval/sweep.h: many KV-cache configurations over the same windows (./run sweep).
 *
 * Windows are the outer loop and configurations the inner one (eval/perplexity.h's
 * PplSession): each window's fp32 baseline runs once and every configuration is compared
 * with it, so N configurations cost N + 1 forward passes per window and KL stays exact.
 *
 * Each (window, configuration) result becomes one line of DIR/journal.jsonl the moment it
 * exists, carrying the CRC-32C of its content (model/formats/checked_line.h). DIR/sweep.json
 * holds the arguments and the model's identity; a sweep started again with the same ones skips
 * what the journal holds, and refuses different ones, another model (weights or config.json
 * changed at the same path), a sweep.json without a model_id, a journal without its sweep.json,
 * and a record whose CRC does not match. Totals are always added up from the
 * journal in (window, configuration) order, so an interrupted and resumed sweep, an
 * uninterrupted one and shards put together by sweep-merge give the same numbers to the bit.
 * sweep.json also records whether the calibration was fitted on the text measured (CalibHeldOut):
 * the reports, sweep-merge's too, say what was recorded, never what a calibration now says. */
#ifndef KVQ_SWEEP_H
#define KVQ_SWEEP_H

#include "eval/perplexity.h"
#include "eval/progress.h"
#include "eval/sweep_settings.h"
#include "model/formats/json.h"
#include "model/formats/run_lock.h"
#include "tokenizer/tokenizer.h"

#define SWEEP_MAX_CONFIGS 1024   /* a sensitivity of 22 layers x 2 sides takes 44 a candidate */
/* OUT_DIR/sweep.lock: held (model/formats/run_lock.h) from the first file written to the last, so
 * that a second ./run on the same directory is refused with the first one's pid. */
#define SWEEP_LOCK_FILE "sweep.lock"

/* eval/sweep_config.c. "W of N windows" for a report's header, and, when --windows asked for fewer
 * than the text holds, how many it holds: "16 of 16 windows (--windows 16; the text has 666)". */
void sweep_print_windows(FILE *f, const SweepSettings *s, int windows);

/* eval/sweep_config.c. Adds one configuration "K[:V]" (--config): its schemes parsed now and
 * checked against the model by sweep_bind_configs. s->configs holds SWEEP_MAX_CONFIGS. */
int sweep_add_config(SweepSettings *s, const char *text, Error *err);
/* --configs FILE: one K[:V] a line; '#' starts a comment; blank lines are skipped. A line that
 * is not a configuration is refused naming the file and its line number. */
int sweep_add_config_file(SweepSettings *s, const char *path, Error *err);
/* Binds each configuration to the model (a scheme it cannot hold: an error naming the
 * configuration) and computes its stored and effective bits at ctx and its codebook bytes. */
int sweep_bind_configs(SweepSettings *s, const Config *c, int ctx, Error *err);
/* 1 when some configuration has a fitted base (needs a calibration). */
int sweep_needs_calibration(const SweepSettings *s);
/* Every bound configuration takes calib (the run's; NULL: none), and each fitted base of each
 * finds its tables there: the refusal the caches would make, made before the sweep writes
 * anything. */
int sweep_use_calibration(SweepSettings *s, const Config *c, const Calibration *calib, Error *err);

/* The settings that come from the model and the text (s->text_file, s->ppl already set): the
 * text's tokens, at most max_tokens (0: all), into *tokens (malloc'd), their count and hash,
 * the windows they make, and the configurations bound to the model. */
int sweep_prepare(SweepSettings *s, const Model *m, const Tokenizer *tok, int max_tokens, int **tokens, Error *err);

/* Writes out_dir's files (sweep_write_outputs) and prints to f what ./run sweep prints: the
 * table and the files' names, or with json the results.json just written. */
int sweep_finish(FILE *f, const char *out_dir, const SweepSettings *s, const SweepTotals *totals, int json,
                 Error *err);

/* How a sweep's run is told to report, from the flags: into out_dir's files, on out the table
 * (JSON with json), on log a progress bar and this run's figures unless quiet; max_tokens: of
 * the text's tokens, the first max_tokens (0: all). */
typedef struct {
    const char *out_dir;
    int max_tokens, quiet, json;
    FILE *out, *log;
} SweepRun;

/* ./run sweep below its flags, s holding the settings they give (s->ppl.ctx 0: the model's
 * context): loads s->model (ppl_load_model), prepares s, runs it into run->out_dir, then prints
 * on run->out the shard's line, or for a whole sweep what sweep_finish prints. */
int sweep_run_and_report(SweepSettings *s, const SweepRun *run, Error *err);

/* The same for a command built on a sweep (./run sensitivity, allocate --verify): label names it
 * on the progress line and the log, plan (NULL: none) is a line printed on log once every check
 * has passed, just before the run, and a whole sweep ends with finish(out, out_dir, s, totals,
 * json, user, err) in place of sweep_finish. out_dir is locked for the run (SWEEP_LOCK_FILE). */
typedef int (*SweepFinish)(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                           void *user, Error *err);
typedef struct {
    const char *label, *plan;
    SweepFinish finish;
    void *user;
} SweepDriver;
int sweep_run_and_report_as(const SweepDriver *d, SweepSettings *s, const SweepRun *run, Error *err);

unsigned long long sweep_tokens_hash(const int *tokens, int n);

/* Runs (or resumes) the sweep into out_dir: the windows of s's shard, every configuration.
 * Fills totals from the journal when done; a journal still short of a (window, configuration)
 * then is an error naming the first one missing, as sweep_merge's. progress may be NULL. */
int sweep_run(const Model *m, const int *tokens, const SweepSettings *s, const char *out_dir, Progress *progress,
              SweepTotals *totals, Error *err);

/* Reads the n shard directories of one sweep (shards 0..n-1 of n, each complete) into s
 * (configurations' texts and bits; s->configs allocated) and totals. */
int sweep_merge(char *const *dirs, int n, SweepSettings *s, SweepTotals *totals, Error *err);
/* sweep-merge's --out-dir before anything is written there: refused when it is a sweep's own
 * directory (it holds a sweep.json: its results.* would be replaced, its journal left), else
 * made and locked (SWEEP_LOCK_FILE) until run_lock_release. */
int sweep_merge_claim_out_dir(const char *out_dir, RunLock *lock, Error *err);

/* A sweep.json's or a report's calib_text_sha256 and calib_held_out (eval/sweep.c), into sha and
 * *h: both absent (a file of an older kvq, or no calibration) is unknown; refused, naming path, when
 * they are not a 64-digit hex sha256 and true or false. */
int calib_held_out_read(const JsonValue *j, char sha[65], CalibHeldOut *h, const char *path, Error *err);
/* eval/sweep_report.c. What the reports say of it: words that follow "Calibration FILE (sha256
 * ...)" — nothing when held out, else that it is NOT held out or that it is not recorded — and
 * the JSON members PREFIXcalib_text_sha256 and PREFIXcalib_held_out (true, false, or null: unknown). */
const char *calib_held_out_words(CalibHeldOut h);
void calib_held_out_json(FILE *f, const char *prefix, const char *text_sha256, CalibHeldOut h);

/* results.md, results.csv, results.json and chart.svg in out_dir (each written atomically). */
int sweep_write_outputs(const char *out_dir, const SweepSettings *s, const SweepTotals *totals, Error *err);

/* The Markdown table alone (what ./run sweep prints). */
void sweep_print_table(FILE *f, const SweepSettings *s, const SweepTotals *totals);

#endif
