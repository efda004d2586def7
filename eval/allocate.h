/* eval/allocate.h: ./run allocate — bits where they matter. From a sensitivity (eval/
 * sensitivity.h: each layer's and side's damage with each candidate, the rest fp32) it chooses one
 * candidate per layer and side that minimises the predicted damage, the sum of those single-layer
 * mean KLs, while the average bits per value stay within a budget.
 *
 * Bits are effective bits per value at the sensitivity's ctx (SCHEMES.md 6, as
 * kv_spec_effective_bits computes them: a +res or +sink window counts at 16 bits), and keys and
 * values weigh alike (each is head_dim values per KV head and position), so the average is the
 * plain mean over the 2 x layers choices. The choice is exact: every candidate's bits are a
 * fraction (bytes over values), the budget a decimal, and the knapsack (eval/knapsack.h) runs
 * over their common denominator, so no bit is rounded and no greedy step is taken.
 *
 * --verify runs the choice as a sweep (its journal, resumable) on held-out windows (default
 * WikiText-2 test, the sensitivity's ctx and stride), with every candidate used alone in all
 * layers that fits the budget, and reports predicted against measured KL and the best uniform
 * candidate within the same budget. */
#ifndef KVQ_ALLOCATE_H
#define KVQ_ALLOCATE_H

#include "eval/allocation.h"

/* The effective bits per value of spec over rows of n values in a cache of ctx positions (ctx <=
 * 0: stored bits), exactly: kv_spec_effective_bits' arithmetic in whole numbers. */
BitsFraction alloc_spec_bits(const KvSpec *spec, int n, int ctx);

/* One --budget value: a decimal number of bits below 1000 with at most 6 decimals ("3", "2.75")
 * as an exact fraction. -1 with why for anything else (not a number, negative, NaN, "1e3"). */
int alloc_parse_budget(const char *text, BitsFraction *out, char *why, size_t why_len);
/* --budget B[,B...]: up to ALLOC_MAX_BUDGETS of them into out[], each as written into texts[],
 * their count into *n. */
int alloc_parse_budgets(const char *list, BitsFraction *out, char (*texts)[32], int *n, char *why, size_t why_len);

/* One side's choice (names[choice[layer]] for every layer) as a LAYERED value: the candidate most
 * layers use as the base (a tie: the lower index), then each run of consecutive layers that use
 * another as an item "L:SPEC" or "L1-L2:SPEC". -1 with err when it needs more items than a
 * LAYERED value holds (KV_MAX_LAYER_ITEMS) or more than n characters. */
int alloc_layered_text(const int *choice, int n_layers, const char (*names)[SENS_SPEC_LEN], char *out, size_t n,
                       Error *err);

/* ./run allocate below its flags: reads o->from, checks the model, solves every budget, and prints
 * the choices (with --verify, after the verification sweep, with its table). */
int allocate_run(const AllocateOptions *o, FILE *out, FILE *log, Error *err);

#endif
