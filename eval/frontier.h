/* eval/frontier.h: ./run frontier, the best KV-cache configuration found within each budget of
 * effective bits per value, chosen on one split and reported on another.
 *
 * The candidates are the lines of a sweep configs file plus, for each allocation.json given
 * (./run allocate --verify --out-dir D), its allocation at each budget asked for that the file
 * holds. Two sweeps of them run (or resume) inside OUT_DIR with the sweep machinery
 * (eval/sweep.h): OUT_DIR/valid on the calibration split and OUT_DIR/test on the held-out text,
 * the same windows otherwise. For each budget the CHOICE is the candidate of lowest mean KL on
 * the valid sweep among those whose effective bits are within the budget (a tie: the first in
 * the list); the REPORTED figures are that candidate's on the test sweep, so no number of the
 * table took part in choosing its row. OUT_DIR/frontier.md, frontier.json and frontier.svg hold
 * the table, its figures and the test sweep's chart with the chosen points ringed. */
#ifndef KVQ_FRONTIER_H
#define KVQ_FRONTIER_H

#include <stdio.h>
#include "eval/allocation.h"
#include "eval/perplexity.h"

#define FRONTIER_MAX_ALLOCATIONS 8
#define FRONTIER_VALID_TEXT "data/wikitext-2-raw/wiki.valid.raw"

typedef struct {
    const char *model_dir, *out_dir;
    const char *configs_file;                               /* sweep syntax: one K[:V] a line */
    const char *allocations[FRONTIER_MAX_ALLOCATIONS];      /* allocation.json files */
    int n_allocations;
    BitsFraction budgets[ALLOC_MAX_BUDGETS];
    char budget_texts[ALLOC_MAX_BUDGETS][32];               /* as written, for the table */
    int n_budgets;
    const char *valid_text, *test_text;                     /* the choosing and the reporting splits */
    const char *calib_path;                                 /* NULL: MODEL_DIR's kv-calib.safetensors */
    const char *precision;
    PplOptions ppl;                                         /* ctx, stride, windows, batch, layer_error */
    int max_tokens, quiet, json;
} FrontierOptions;

/* Runs (or resumes) both sweeps, then writes OUT_DIR/frontier.{md,json,svg} and prints the table
 * (frontier.json with json) on out; progress on log unless quiet. Every input is checked before
 * a sweep writes anything: the configs file, each allocation.json (its members, and that it is
 * this model's: model_sha256 against MODEL_DIR/model.safetensors). */
int frontier_run(const FrontierOptions *o, FILE *out, FILE *log, Error *err);

#endif
