/* eval/frontier_report.h: what ./run frontier measured and chose (eval/frontier.h), and its
 * report: OUT_DIR/frontier.md (the table), frontier.json (its figures, every candidate's too)
 * and frontier.svg (the test sweep's chart, eval/chart.h, with the chosen points ringed). */
#ifndef KVQ_FRONTIER_REPORT_H
#define KVQ_FRONTIER_REPORT_H

#include "eval/frontier.h"
#include "eval/stats.h"
#include "eval/sweep.h"

/* Where a candidate came from: "configs", or "allocation B bits" of an allocation.json. */
typedef struct {
    char source[64];
    char file[1024];             /* the allocation.json ("" for configs) */
    double claimed_bits;         /* its "bits" (checked against the schemes' bits) */
} FrontierOrigin;

typedef struct {
    FrontierOrigin *origins;     /* [SWEEP_MAX_CONFIGS], in the sweeps' order */
    int n, from_configs;         /* candidates; the first from_configs are the configs file's */
} FrontierCandidates;

/* One candidate on one split. */
typedef struct {
    char k_text[512], v_text[512];
    PplSummary y;
    double stored_bits, effective_bits, entropy_bits, codebook_bytes;   /* K and V averaged; bytes per model */
} FrontierRow;

/* One of the two sweeps, as keep_split took it from the sweep's totals. */
typedef struct {
    FrontierRow *rows;
    int n;
    char dir[4200], text_file[1024], model_id[65], calib_sha256[65];
    int ctx, stride, protocol, windows, n_tokens;
    long scored;
    double baseline_ppl;
} FrontierSplit;

typedef struct {
    const FrontierOptions *o;
    const FrontierCandidates *c;
    const FrontierSplit *valid, *test;
    int chosen[ALLOC_MAX_BUDGETS];   /* per budget: the candidate, or -1 when none is within it */
} FrontierReport;

/* eval/frontier.c. The candidates into s (parsed, not bound) and their origins into c. */
int frontier_candidates(const FrontierOptions *o, const char *weights_sha256, SweepSettings *s, FrontierCandidates *c,
                        Error *err);
/* eval/frontier.c. The candidate of lowest mean KL on valid among those of effective bits at most
 * budget (a tie: the first), or -1. */
int frontier_choose(const FrontierSplit *valid, BitsFraction budget);

/* frontier.md, frontier.json, frontier.svg in r->o->out_dir, each atomically. */
int frontier_write_report(const FrontierReport *r, Error *err);
/* The table (frontier.md's text), or with json frontier.json's. */
void frontier_print(FILE *f, const FrontierReport *r, int json);

#endif
