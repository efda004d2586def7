/* eval/knapsack.h: the exact multiple-choice knapsack that ./run allocate solves: pick one
 * choice in every group so that the summed damage is least while the summed weight stays
 * within a capacity. Weights are whole numbers (allocate scales every candidate's bits by a
 * common denominator, so no bit is rounded), and the table of dynamic programming runs over
 * every reachable weight: the optimum is exact, not a greedy approximation.
 *
 * The damages of a choice are added from the last group to the first, d[0] + (d[1] + (...)),
 * in double precision; the optimum is the least such sum (rounded addition is monotone, so the
 * dynamic programme finds the least rounded sum). Ties go to the smaller total weight, then to
 * the smaller choice index in group 0, then in group 1, and so on. Pure arithmetic. */
#ifndef KVQ_KNAPSACK_H
#define KVQ_KNAPSACK_H

#include "model/formats/error.h"

/* At most this many cells (groups x reachable weights) in the dynamic programme's table of
 * choices: one byte each. */
#define KNAPSACK_MAX_CELLS (1L << 27)
#define KNAPSACK_MAX_CHOICES 255

typedef struct {
    int n_groups, n_choices;
    const long long *weight;     /* [n_groups * n_choices], each of a group's choices >= 0 */
    const double *damage;        /* [n_groups * n_choices], each of a group's choices finite */
    long long capacity;          /* the summed weight may not exceed it */
    const int *group_choices;    /* [n_groups]: group g's choices are 0..group_choices[g]-1 (1..n_choices; the
                                    rest of its row is not looked at); NULL: n_choices in every group */
} Knapsack;

typedef struct {
    int feasible;                /* 0: even the lightest choices weigh more than the capacity */
    double damage;               /* the least summed damage (added as above) */
    long long weight;            /* its summed weight */
} KnapsackResult;

/* Solves k: choice[g] for every group (when feasible). -1 with err for a problem it cannot
 * take (no groups or choices, a group's count of choices out of range, a negative weight, a damage that is not finite, a table larger
 * than KNAPSACK_MAX_CELLS, out of memory). */
int knapsack_solve(const Knapsack *k, int *choice, KnapsackResult *r, Error *err);

/* The summed damage of a choice, added in the order knapsack_solve adds it. */
double knapsack_damage(const Knapsack *k, const int *choice);

#endif
