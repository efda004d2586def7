/* eval/knapsack.c: the exact multiple-choice knapsack by dynamic programming over whole
 * weights (see eval/knapsack.h).
 *
 * f[g][w] is the least damage of groups g..G-1 whose weights, beyond each group's lightest
 * choice, add up to exactly w (in units of their greatest common divisor). It is filled from the
 * last group back to the first, so that choices can then be read off from group 0 forward, the
 * smallest index first; only two rows of f are kept, and a byte per cell records the choice
 * that reached it. */
#include "eval/knapsack.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>

static long long gcd(long long a, long long b) {
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The choices of group g. */
static int choices_of(const Knapsack *k, int g) { return k->group_choices ? k->group_choices[g] : k->n_choices; }

double knapsack_damage(const Knapsack *k, const int *choice) {
    double sum = 0;
    for (int g = k->n_groups - 1; g >= 0; g--) sum = k->damage[(size_t)g * k->n_choices + choice[g]] + sum;
    return sum;
}

/* Each group's lightest weight into lightest[], their sum into *base, and the greatest common
 * divisor of every weight beyond its group's lightest into *step (0 when all are equal). */
static int lightest_weights(const Knapsack *k, long long *lightest, long long *base, long long *step, Error *err) {
    int G = k->n_groups, C = k->n_choices;
    *base = 0;
    *step = 0;
    for (int g = 0; g < G; g++) {
        const long long *w = k->weight + (size_t)g * C;
        int n = choices_of(k, g);
        lightest[g] = w[0];
        for (int c = 0; c < n; c++) {
            if (w[c] < 0) return error_set(err, "knapsack: group %d, choice %d weighs %lld (< 0)", g, c, w[c]);
            if (w[c] < lightest[g]) lightest[g] = w[c];
        }
        if (*base > LLONG_MAX - lightest[g]) return error_set(err, "knapsack: the weights overflow");
        *base += lightest[g];
        for (int c = 0; c < n; c++) *step = gcd(*step, w[c] - lightest[g]);
    }
    return 0;
}

/* The extra units of choice c in group g: its weight beyond the lightest, over step. */
static long long units(const Knapsack *k, const long long *lightest, long long step, int g, int c) {
    return step ? (k->weight[(size_t)g * k->n_choices + c] - lightest[g]) / step : 0;
}

/* The units the table must reach: what the capacity leaves beyond the lightest choices, and
 * never more than the heaviest choices take. */
static long long room_of(const Knapsack *k, const long long *lightest, long long base, long long step) {
    long long room = step ? (k->capacity - base) / step : 0, heaviest = 0;
    for (int g = 0; g < k->n_groups && heaviest < room; g++) {
        long long most = 0;
        for (int c = 0; c < choices_of(k, g); c++) {
            long long u = units(k, lightest, step, g, c);
            if (u > most) most = u;
        }
        heaviest += most;
    }
    return heaviest < room ? heaviest : room;
}

int knapsack_solve(const Knapsack *k, int *choice, KnapsackResult *r, Error *err) {
    int G = k->n_groups, C = k->n_choices;
    r->feasible = 0;
    r->damage = NAN;
    r->weight = 0;
    if (G < 1 || C < 1 || C > KNAPSACK_MAX_CHOICES)
        return error_set(err, "knapsack: %d groups of %d choices (at least 1 of 1 to %d)", G, C, KNAPSACK_MAX_CHOICES);
    for (int g = 0; g < G; g++) {
        int n = choices_of(k, g);
        if (n < 1 || n > C) return error_set(err, "knapsack: group %d has %d choices (1 to %d)", g, n, C);
        for (int c = 0; c < n; c++)
            if (!isfinite(k->damage[(size_t)g * C + c]))
                return error_set(err, "knapsack: group %d, choice %d: damage not finite", g, c);
    }
    long long *lightest = malloc((size_t)G * sizeof *lightest), base, step;
    if (!lightest) return error_set(err, "out of memory");
    if (lightest_weights(k, lightest, &base, &step, err)) { free(lightest); return -1; }
    if (base > k->capacity) { free(lightest); return 0; }   /* not even the lightest choices fit */
    long long room = room_of(k, lightest, base, step);
    if (room + 1 > KNAPSACK_MAX_CELLS / G) {
        free(lightest);
        return error_set(err, "knapsack: a table of %d x %lld cells (more than %ld): the weights are too fine", G,
                         room + 1, KNAPSACK_MAX_CELLS);
    }
    size_t W = (size_t)room + 1;
    unsigned char *pick = malloc((size_t)G * W);
    double *next = malloc(W * sizeof *next), *cur = malloc(W * sizeof *cur);
    if (!pick || !next || !cur) {
        free(lightest);
        free(pick);
        free(next);
        free(cur);
        return error_set(err, "out of memory for a knapsack table of %d x %zu cells", G, W);
    }
    for (size_t w = 0; w < W; w++) next[w] = w ? INFINITY : 0;   /* no group left: only weight 0 */
    for (int g = G - 1; g >= 0; g--) {
        const double *d = k->damage + (size_t)g * C;
        int n = choices_of(k, g);
        for (size_t w = 0; w < W; w++) {
            double best = INFINITY;
            int best_c = 0;
            for (int c = 0; c < n; c++) {
                size_t u = (size_t)units(k, lightest, step, g, c);
                if (u > w || next[w - u] == INFINITY) continue;
                double v = d[c] + next[w - u];
                if (v < best) best = v, best_c = c;   /* strict: a tie keeps the smaller index */
            }
            cur[w] = best;
            pick[(size_t)g * W + w] = (unsigned char)best_c;
        }
        double *t = next;
        next = cur;
        cur = t;
    }
    size_t at = 0;   /* the lightest total of least damage; weight 0 is always reachable */
    for (size_t w = 1; w < W; w++)
        if (next[w] < next[at]) at = w;
    r->feasible = 1;
    r->damage = next[at];
    r->weight = base + (long long)at * step;
    for (int g = 0; g < G; g++) {
        choice[g] = pick[(size_t)g * W + at];
        at -= (size_t)units(k, lightest, step, g, choice[g]);
    }
    free(lightest);
    free(pick);
    free(next);
    free(cur);
    return 0;
}
