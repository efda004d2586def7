/* eval/sensitivity_grid.h: the grid of a sensitivity (eval/sensitivity.h): candidates x layers x
 * sides, and where each cell's configuration stands. Below the sensitivity's run, its report and
 * its heatmap, which all index by it. */
#ifndef KVQ_SENSITIVITY_GRID_H
#define KVQ_SENSITIVITY_GRID_H

#define SENS_MAX_CANDIDATES 32
#define SENS_SPEC_LEN 96                 /* a candidate's canonical spelling (KvSpec.text) */
/* "kvq_sensitivity": 2 ends in the CRC-32C of its text (model/formats/checked_json.h); 1, the files
 * written before it, has none and is read after its cells are checked against their own sums
 * (kl_mean = kl_sum / scored_tokens, exactly as written). */
#define SENS_JSON_VERSION 2

typedef enum { SENS_KEYS = 0, SENS_VALUES = 1 } SensSide;

/* The grid: candidates (canonical spellings, in the order given) x layers x sides. */
typedef struct {
    int n_layers, n_candidates;
    char candidates[SENS_MAX_CANDIDATES][SENS_SPEC_LEN];
} SensGrid;

/* The configuration of (side, layer, candidate): side-major, then layer, then candidate. */
static inline int sens_config_index(const SensGrid *g, int side, int layer, int candidate) {
    return (side * g->n_layers + layer) * g->n_candidates + candidate;
}

#endif
