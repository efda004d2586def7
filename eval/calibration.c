/* eval/calibration.c: which calibration a run uses, checked against its model (see
 * eval/calibration.h). */
#include "eval/calibration.h"
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include <string.h>

int calibration_for_run(const char *path, const char *model_dir, const ModelIdentity *identity, const Model *m,
                        int needed, Calibration *c, int *have, Error *err) {
    char default_path[4096];
    memset(c, 0, sizeof *c);
    *have = 0;
    if (!path) {
        snprintf(default_path, sizeof default_path, "%s/%s", model_dir, DEFAULT_CALIBRATION);
        if (!needed) return 0;
        if (!path_exists(default_path)) {   /* a fitted scheme then says what it lacks, and where it goes */
            snprintf(c->path, sizeof c->path, "%.255s", default_path);
            snprintf(c->model_dir, sizeof c->model_dir, "%.255s", model_dir);
            c->absent = 1;
            *have = 1;
            return 0;
        }
        path = default_path;
    }
    ModelIdentity computed;
    if (!identity && modeldir_identity(model_dir, &computed, err)) return -1;
    if (calibration_open(path, m, (identity ? identity : &computed)->weights_sha256, c, err)) return -1;
    snprintf(c->model_dir, sizeof c->model_dir, "%.255s", model_dir);
    *have = 1;
    return 0;
}

int calibration_open(const char *path, const Model *m, const char *model_sha256, Calibration *c, Error *err) {
    const Config *cfg = &m->config;
    CalibModel model = {cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, model_sha256};
    return calibration_load(path, &model, c, err);
}

int calibration_for_kv_file(const char *path, Calibration *c, int *have, Error *err) {
    memset(c, 0, sizeof *c);
    *have = 0;
    if (!path) return 0;
    if (calibration_load(path, NULL, c, err)) return -1;
    *have = 1;
    return 0;
}
