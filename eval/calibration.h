/* eval/calibration.h: which calibration a run uses (--calib), checked against its model.
 * A calibration (model/formats/calibration.h, made by ./run calibrate) holds the tables of the
 * fitted bases (SCHEMES.md §8). Every command that takes a scheme takes --calib FILE; without the
 * flag, MODEL_DIR/kv-calib.safetensors is used when it exists. */
#ifndef KVQ_EVAL_CALIBRATION_H
#define KVQ_EVAL_CALIBRATION_H

#include "model/formats/calibration.h"
#include "model/model.h"
#include "model/modeldir.h"

#define DEFAULT_CALIBRATION "kv-calib.safetensors"   /* in the model directory */

/* Loads the calibration of a run on model m from model_dir: path (--calib; NULL: the default
 * file, when it exists). A file named by --calib is always loaded; the default one only when
 * `needed` (a scheme of the run is fitted), since checking it needs the model's identity:
 * identity (the run's, computed once) or, NULL, modeldir_identity of model_dir then.
 * Refused, with one line naming the file: another model's (its model_sha256), another geometry,
 * anything calibration_load refuses. *have = 1 when c holds one (free it with calibration_free). */
int calibration_for_run(const char *path, const char *model_dir, const ModelIdentity *identity, const Model *m,
                        int needed, Calibration *c, int *have, Error *err);
/* path loaded for model m whose identity (model.safetensors' sha256, or random weights' recipe)
 * is model_sha256: refused when it is another model's or another geometry. */
int calibration_open(const char *path, const Model *m, const char *model_sha256, Calibration *c, Error *err);
/* --calib FILE of a command on KV cache files (compress, decompress, kv-info): path (NULL:
 * none, *have = 0) loaded with every check calibration_load makes of a file. Such a command has
 * no model directory: no default file, and no model sha256 to compare; compress checks the
 * calibration's geometry against the cache, decompress and kv-info the sha256 a compressed file
 * records. */
int calibration_for_kv_file(const char *path, Calibration *c, int *have, Error *err);

#endif
