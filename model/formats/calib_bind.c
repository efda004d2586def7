/* model/formats/calib_bind.c: fitted tables bound per KV head (see model/formats/calib_bind.h). */
#include "model/formats/calib_bind.h"

int calib_bind_heads(const KvSpec *spec, const Calibration *calib, int layer, int n_kv_heads, int head_dim,
                     KvSpec *head_specs, Error *err) {
    const char *side = spec->side == KV_SIDE_KEYS ? "key" : "value";
    for (int h = 0; h < n_kv_heads; h++) head_specs[h] = *spec;
    if (!kv_spec_is_fitted(spec)) return 0;
    char key[96];
    kv_spec_fit_key(spec, key, sizeof key);
    if (!calib)   /* no model directory known (a KV cache file's): the command in general terms */
        return error_set(err, "%s scheme %s: its base is fitted to the model and needs a calibration (--calib FILE; "
                         "./run calibrate MODEL_DIR --fit %s --out FILE makes one)", side, spec->text, key);
    if (calib->absent)   /* the model directory's default calibration, which the command makes */
        return error_set(err, "%s scheme %s: its base is fitted to the model and needs a calibration, and %s has none "
                         "(./run calibrate %s --fit %s --out %s makes it; or --calib FILE)", side, spec->text,
                         calib->model_dir, calib->model_dir, key, calib->path);
    const CalibFit *fit = calibration_find_fit(calib, key);
    char side_name = spec->side == KV_SIDE_KEYS ? 'k' : 'v';
    const float *table = calibration_codebook(calib, key, side_name, layer);
    if ((!fit || !table) && calib->model_dir[0])   /* a new file: --out over this one would drop its other fits */
        return error_set(err, "%s scheme %s: %s has no fit %s (./run calibrate %s --fit %s --out %s/kv-calib-%s.safetensors "
                         "makes it; then --calib that file)", side, spec->text, calib->path, key, calib->model_dir, key,
                         calib->model_dir, key);
    if (!fit || !table)
        return error_set(err, "%s scheme %s: %s has no fit %s (./run calibrate MODEL_DIR --fit %s --out FILE makes it)",
                         side, spec->text, calib->path, key, key);
    KvFitLayout layout;
    spec->base.codec->fit->layout(&spec->base, head_dim, &layout);
    size_t layer_floats = kv_fit_table_floats(&layout) * (layout.per_head ? (size_t)n_kv_heads : 1);
    if (fit->layer_floats != layer_floats || calib->n_kv_heads != n_kv_heads)
        return error_set(err, "%s scheme %s: the fit %s in %s has %zu floats a layer, not the %zu these rows need", side,
                         spec->text, key, calib->path, fit->layer_floats, layer_floats);
    for (int h = 0; h < n_kv_heads; h++) head_specs[h].base.table = calibration_table(calib, key, side_name, layer, h);
    if (!spec->aw) return 0;
    const float *weights = calibration_aw(calib, side_name, spec->prerope, layer);
    if (!weights)
        return error_set(err, "%s scheme %s: %s has no +aw weights aw.* (./run calibrate MODEL_DIR --fit %s --out FILE "
                         "makes them)", side, spec->text, calib->path, key);
    for (int h = 0; h < n_kv_heads; h++) head_specs[h].base.weights = weights + (size_t)h * head_dim;
    return 0;
}
