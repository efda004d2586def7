/* eval/sensitivity_grid.h: the grid of a sensitivity (eval/sensitivity.h): sides x layers x that
 * side's candidates (keys and values have their own lists), and where each cell's configuration
 * stands. Below the sensitivity's run, its report and
 * its heatmap, which all index by it. */
#ifndef KVQ_SENSITIVITY_GRID_H
#define KVQ_SENSITIVITY_GRID_H

#include <string.h>

#define SENS_MAX_CANDIDATES 32          /* a side's */
#define SENS_SPEC_LEN 96                 /* a candidate's canonical spelling (KvSpec.text) */
/* "kvq_sensitivity": 3 lists the keys' and the values' candidates apart ("k_candidates",
 * "v_candidates"); 2 and 1 have one list, "candidates", for both. 3 and 2 end in the CRC-32C of
 * their text (model/formats/checked_json.h); 1, the files written before it, has none and is read
 * after its cells are checked against their own sums (kl_mean = kl_sum / scored_tokens, exactly as
 * written). */
#define SENS_JSON_VERSION 3

typedef enum { SENS_KEYS = 0, SENS_VALUES = 1 } SensSide;

/* The grid: sides x layers x the side's candidates (canonical spellings, in the order given). */
typedef struct {
    int n_layers;
    int n_candidates[2];                                   /* [SensSide] */
    char candidates[2][SENS_MAX_CANDIDATES][SENS_SPEC_LEN];
} SensGrid;

/* The configuration of (side, layer, candidate of that side): side-major (every key cell, then
 * every value cell), then layer, then candidate. */
static inline int sens_config_index(const SensGrid *g, int side, int layer, int candidate) {
    int before = side == SENS_VALUES ? g->n_layers * g->n_candidates[SENS_KEYS] : 0;
    return before + layer * g->n_candidates[side] + candidate;
}

/* Every cell of the grid: layers x (keys' + values' candidates). */
static inline int sens_cell_count(const SensGrid *g) {
    return g->n_layers * (g->n_candidates[SENS_KEYS] + g->n_candidates[SENS_VALUES]);
}

/* 1 when keys and values have the same candidates in the same order (as --candidates gives). */
static inline int sens_same_candidates(const SensGrid *g) {
    if (g->n_candidates[SENS_KEYS] != g->n_candidates[SENS_VALUES]) return 0;
    for (int c = 0; c < g->n_candidates[SENS_KEYS]; c++)
        if (strcmp(g->candidates[SENS_KEYS][c], g->candidates[SENS_VALUES][c])) return 0;
    return 1;
}

#endif
