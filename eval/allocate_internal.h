/* eval/allocate_internal.h: what eval/allocate.c (the choice, the check's sweep) hands to
 * eval/allocate_report.c (its tables and JSON). Not for use beyond those two files. */
#ifndef KVQ_ALLOCATE_INTERNAL_H
#define KVQ_ALLOCATE_INTERNAL_H

#include "eval/allocate.h"
#include "eval/knapsack.h"

/* One allocation run: the sensitivity, the candidates chosen from, the knapsack and its answers. */
typedef struct {
    const AllocateOptions *o;
    SensData d;
    int n_cand;                                        /* the candidates to choose from ... */
    int idx[SENS_MAX_CANDIDATES];                      /* ... as indices into d.g's */
    char names[SENS_MAX_CANDIDATES][SENS_SPEC_LEN];
    BitsFraction bits[2][SENS_MAX_CANDIDATES];         /* exact effective bits, keys and values */
    long long D;                                       /* their common denominator */
    int G;                                             /* groups: K layers 0..L-1, then V layers */
    long long *weight;                                 /* [G x n_cand]: bits x D */
    double *damage;                                    /* [G x n_cand]: the cells' mean KL */
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
    int uniform[SENS_MAX_CANDIDATES];                  /* candidates used alone that fit the largest budget */
    int cfg_uniform[SENS_MAX_CANDIDATES];
    const SweepSettings *s;                            /* the finished sweep */
    const SweepTotals *t;
} Verify;

/* 1 when candidate c used alone on both sides fits budget (exact arithmetic). */
int alloc_uniform_fits(const Alloc *a, int c, BitsFraction budget);
void alloc_free(Alloc *a);

/* eval/allocate_report.c: the choices, and with v (NULL: no check) the check's table, as text or
 * JSON on f; alloc_write_report writes both as allocation.md and allocation.json into dir. */
void alloc_print(FILE *f, const Alloc *a, const Verify *v, int json);
int alloc_write_report(const char *dir, const Alloc *a, const Verify *v, Error *err);

#endif
