/* eval/calibration.c: a run's cache recipe from its flags: which calibration it uses, checked
 * against its model (see eval/calibration.h). */
#include "eval/calibration.h"
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include <stdlib.h>
#include <string.h>

void kv_cache_flags_default(KvCacheFlags *f, const char *calib_path) {
    char why[256];
    memset(f, 0, sizeof *f);
    kv_layered_parse(KV_CACHE_DEFAULT_SCHEME, KV_SIDE_KEYS, &f->k, why, sizeof why);
    kv_layered_parse(KV_CACHE_DEFAULT_SCHEME, KV_SIDE_VALUES, &f->v, why, sizeof why);
    f->calib_path = calib_path;
}

/* The file a run loads: --calib, else the model's default one (formed in buf, n bytes) when it
 * is needed; NULL: none. *absent: the default is needed but not there (a fitted scheme then says
 * what it lacks, and where the command that makes it puts it). */
static const char *calibration_path(const KvCacheFlags *flags, int needed, const char *model_dir, char *buf, size_t n,
                                    int *absent) {
    *absent = 0;
    if (flags->calib_path) return flags->calib_path;
    if (!model_dir || !needed) return NULL;
    snprintf(buf, n, "%s/%s", model_dir, DEFAULT_CALIBRATION);
    *absent = !path_exists(buf);
    return buf;
}

/* path loaded for model m whose identity (model.safetensors' sha256, or random weights' recipe)
 * is model_sha256: refused when it is another model's or another geometry. */
static int calibration_open(const char *path, const Model *m, const char *model_sha256, Calibration *c, Error *err) {
    const Config *cfg = &m->config;
    CalibModel model = {cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, model_sha256};
    return calibration_load(path, &model, c, err);
}

static int load_calibration(const char *path, const char *model_dir, const char *model_sha256, const Model *m,
                            Calibration *c, Error *err) {
    if (!m) return calibration_load(path, NULL, c, err);
    ModelIdentity computed;
    if (!model_sha256 && modeldir_identity(model_dir, &computed, err)) return -1;
    return calibration_open(path, m, model_sha256 ? model_sha256 : computed.weights_sha256, c, err);
}

int kv_cache_recipe_resolve(KvCacheRecipe *r, const KvCacheFlags *flags, int others_fitted, const char *model_dir,
                            const char *model_sha256, const Model *m, Error *err) {
    char default_path[4096];
    memset(r, 0, sizeof *r);
    r->scheme.k = flags->k;
    r->scheme.v = flags->v;
    int needed = others_fitted || kv_layered_is_fitted(&flags->k) || kv_layered_is_fitted(&flags->v);
    int absent;
    const char *path = calibration_path(flags, needed, model_dir, default_path, sizeof default_path, &absent);
    if (!path) return 0;
    r->owned = calloc(1, sizeof *r->owned);
    if (!r->owned) return error_set(err, "out of memory");
    if (absent) {   /* nothing loaded: the binding's message names the file and the command that makes it */
        snprintf(r->owned->path, sizeof r->owned->path, "%.255s", path);
        r->owned->absent = 1;
    } else if (load_calibration(path, model_dir, model_sha256, m, r->owned, err)) {
        kv_cache_recipe_free(r);
        return -1;
    }
    if (model_dir) snprintf(r->owned->model_dir, sizeof r->owned->model_dir, "%.255s", model_dir);
    r->scheme.calib = r->owned;
    return 0;
}

void kv_cache_recipe_free(KvCacheRecipe *r) {
    if (r->owned) calibration_free(r->owned);
    free(r->owned);
    r->owned = NULL;
    r->scheme.calib = NULL;
}

int calibration_fitted_on(const Calibration *c, const char *text_file, Error *err) {
    char sha[SHA256_HEX_CHARS + 1];
    if (sha256_file_hex(text_file, sha, err)) return -1;
    return !strcmp(sha, c->text_sha256);
}
