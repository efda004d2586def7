/* eval/allocation.h: what one ./run allocate knows (eval/allocate.h): its options, bits as exact
 * fractions, the sensitivity and the knapsack's answers (Alloc) and the held-out check's
 * configurations (Verify). eval/allocate.c fills them; eval/allocate_report.c prints them and
 * needs nothing else of it. */
#ifndef KVQ_ALLOCATION_H
#define KVQ_ALLOCATION_H

#include "eval/sensitivity.h"
#include "eval/knapsack.h"

#define ALLOC_MAX_BUDGETS 8

/* A number of bits as an exact fraction num / den (den > 0, in lowest terms). */
typedef struct {
    long long num, den;
} BitsFraction;

/* ./run allocate's flags, as run.c reads them. */
typedef struct {
    const char *model_dir;       /* the model the sensitivity measured (checked by its sha256) */
    const char *from;            /* the sensitivity's out dir (its sensitivity.json) */
    const char *candidates;      /* a subset of the sensitivity's ("SPEC,SPEC") for keys and values; NULL: all */
    const char *side_candidates[2];   /* --k-candidates, --v-candidates: one side's subset (before candidates) */
    BitsFraction budgets[ALLOC_MAX_BUDGETS];
    char budget_texts[ALLOC_MAX_BUDGETS][32];
    int n_budgets;
    int json, quiet;
    /* --verify: */
    int verify;
    const char *out_dir;         /* the verification sweep's directory */
    const char *text_file;       /* held-out text (default WikiText-2 test) */
    const char *calib_path;      /* NULL: the model directory's kv-calib.safetensors */
    int windows, max_tokens, batch;
} AllocateOptions;

/* One allocation run: the sensitivity, the candidates chosen from, the knapsack and its answers.
 * A "uniform" configuration is the i-th key candidate in every layer's keys with the i-th value
 * candidate in every layer's values (with one list for both, a candidate used alone). */
typedef struct {
    const AllocateOptions *o;
    SensData d;
    int n_cand[2];                                     /* each side's candidates to choose from ... */
    int idx[2][SENS_MAX_CANDIDATES];                   /* ... as indices into d.g's of that side */
    char names[2][SENS_MAX_CANDIDATES][SENS_SPEC_LEN];
    BitsFraction bits[2][SENS_MAX_CANDIDATES];         /* exact effective bits, keys and values */
    long long D;                                       /* their common denominator */
    int G;                                             /* groups: K layers 0..L-1, then V layers */
    int C;                                             /* a group's row: the larger side's count */
    int *group_choices;                                /* [G]: the side's count of candidates */
    long long *weight;                                 /* [G x C]: bits x D */
    double *damage;                                    /* [G x C]: the cells' mean KL */
    Knapsack k;
    int *choice[ALLOC_MAX_BUDGETS];                    /* [G] per budget */
    KnapsackResult result[ALLOC_MAX_BUDGETS];
    char k_scheme[ALLOC_MAX_BUDGETS][512], v_scheme[ALLOC_MAX_BUDGETS][512];
} Alloc;

/* The check on held-out windows: which sweep configuration holds what. */
typedef struct {
    const Alloc *a;
    int cfg_alloc[ALLOC_MAX_BUDGETS];                  /* budget b's allocation */
    int n_uniform;
    int uniform[SENS_MAX_CANDIDATES];                  /* uniform configurations (their i) that fit the largest budget */
    int cfg_uniform[SENS_MAX_CANDIDATES];
    int fits[ALLOC_MAX_BUDGETS][SENS_MAX_CANDIDATES];  /* uniform[i] used alone fits budget b (exact arithmetic) */
    const SweepSettings *s;                            /* the finished sweep */
    const SweepTotals *t;
} Verify;

#endif
