/* eval/calibration.h: a run's cache recipe — the schemes of keys and values and the calibration
 * their fitted bases read — resolved once from the flags and checked against the run's model.
 * A calibration (model/formats/calibration.h, made by ./run calibrate) holds the tables of the
 * fitted bases (SCHEMES.md §8). Every command that takes a scheme takes --calib FILE; without the
 * flag, MODEL_DIR/kv-calib.safetensors is used when it exists. */
#ifndef KVQ_EVAL_CALIBRATION_H
#define KVQ_EVAL_CALIBRATION_H

#include "model/formats/calibration.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "model/modeldir.h"

#define DEFAULT_CALIBRATION "kv-calib.safetensors"   /* in the model directory */

/* A run's cache as its flags ask for it (run.c fills it): the schemes of keys and values
 * (--k-scheme, --v-scheme, --kv-scheme; KV_CACHE_DEFAULT_SCHEME for a side none names) and --calib. */
typedef struct {
    KvLayered k, v;
    const char *calib_path;    /* --calib; NULL: MODEL_DIR/kv-calib.safetensors when it exists */
} KvCacheFlags;

/* A run's cache resolved: the scheme every cache of the run is made with (kv_cache_init), whose
 * calib is the calibration the recipe owns (NULL without one). Free it with kv_cache_recipe_free. */
typedef struct {
    KvCacheScheme scheme;
    Calibration *owned;
} KvCacheRecipe;

/* Flags naming no scheme: both sides KV_CACHE_DEFAULT_SCHEME, --calib calib_path (a sweep's
 * configurations carry their own schemes; its calibration is still the run's). */
void kv_cache_flags_default(KvCacheFlags *f, const char *calib_path);

/* The recipe of a run on model m from model_dir: flags' schemes and their calibration. A file
 * named by --calib is always loaded; the default one only when it is needed (a scheme of flags,
 * or others_fitted: another scheme of the run, is fitted), since checking it needs the model's
 * identity: model_sha256 (the run's, computed once) or, NULL, modeldir_identity of model_dir
 * then. Refused, with one line naming the file: another model's (its model_sha256), another
 * geometry, anything calibration_load refuses. model_dir NULL with m: random weights, no default
 * file (model_sha256 is their recipe's). model_dir and m NULL: a command on KV cache files
 * (compress, decompress, kv-info), which has neither a default file nor a model sha256 to
 * compare; --calib is loaded with every check calibration_load makes of a file alone. */
int kv_cache_recipe_resolve(KvCacheRecipe *r, const KvCacheFlags *flags, int others_fitted, const char *model_dir,
                            const char *model_sha256, const Model *m, Error *err);
void kv_cache_recipe_free(KvCacheRecipe *r);

/* 1 when c was fitted on text_file (the file's sha256 is c's text_sha256): numbers measured on it
 * with c are then not held out; 0 when another text; -1 with err when the file cannot be hashed. */
int calibration_fitted_on(const Calibration *c, const char *text_file, Error *err);

#endif
