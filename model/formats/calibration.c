/* model/formats/calibration.c: a calibration in memory (init, fits, lookups), the checks its
 * values and metadata must pass, the file's names and tensor layout, and the writer
 * (calibration_save). The reader, which holds a file to the same names, layout and checks, is
 * calibration_read.c; what the two share is the last section of calibration.h, which also
 * describes the file. */
#include "model/formats/calibration.h"
#include "model/formats/st_checksum.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *const CALIB_STAT_NAMES[4] = {"q", "kpre", "k", "v"};
const char CALIB_SIDE_NAMES[2] = {'k', 'v'};
const char *const CALIB_AW_NAMES[3] = {"k", "kpre", "v"};

/* ---- fit keys ---- */

/* 2 sides, or 1 (keys) for a +prerope fit: values never see RoPE. */
static int fit_sides(const KvSpec *spec) { return spec->prerope ? 1 : 2; }

int calib_file_fit_declare(CalibFit *f, const char *key, int n_kv_heads, int head_dim, char *why, size_t why_size) {
    memset(f, 0, sizeof *f);
    if (strlen(key) > CALIB_KEY_MAX) {
        snprintf(why, why_size, "longer than %d characters", CALIB_KEY_MAX);
        return -1;
    }
    if (kv_fit_key_parse(key, head_dim, &f->spec, why, why_size)) return -1;
    snprintf(f->key, sizeof f->key, "%s", key);
    f->spec.base.codec->fit->layout(&f->spec.base, head_dim, &f->layout);
    f->sides = fit_sides(&f->spec);
    f->table_floats = kv_fit_table_floats(&f->layout);
    f->layer_floats = f->table_floats * (size_t)(f->layout.per_head ? n_kv_heads : 1);
    return 0;
}

/* ---- the in-memory calibration ---- */

static size_t stats_floats(const Calibration *c, int heads) {
    return (size_t)c->n_layers * (size_t)heads * (size_t)c->head_dim * 3;
}

void calibration_free(Calibration *c) {
    free(c->stats_k);
    free(c->stats_kpre);
    free(c->stats_v);
    free(c->stats_q);
    free(c->aw_k);
    free(c->aw_kpre);
    free(c->aw_v);
    for (int i = 0; i < c->n_fits; i++) free(c->fits[i].codebooks);
    free(c->fits);
    memset(c, 0, sizeof *c);
}

int calib_file_geometry_ok(int n_layers, int n_heads, int n_kv_heads, int head_dim) {
    return n_layers >= 1 && n_layers <= CALIB_MAX_LAYERS && n_heads >= 1 && n_heads <= CALIB_MAX_HEADS &&
           n_kv_heads >= 1 && n_kv_heads <= CALIB_MAX_HEADS && head_dim >= 1 && head_dim <= CALIB_MAX_HEAD_DIM;
}

int calibration_init(Calibration *c, int n_layers, int n_heads, int n_kv_heads, int head_dim, Error *err) {
    memset(c, 0, sizeof *c);
    if (!calib_file_geometry_ok(n_layers, n_heads, n_kv_heads, head_dim))
        return error_set(err, "calibration geometry %d layers, %d heads, %d KV heads, head_dim %d is out of range",
                         n_layers, n_heads, n_kv_heads, head_dim);
    c->n_layers = n_layers;
    c->n_heads = n_heads;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->stats_k = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_kpre = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_v = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_q = calloc(stats_floats(c, n_heads), sizeof(float));
    size_t aw_floats = (size_t)n_layers * (size_t)n_kv_heads * (size_t)head_dim;
    c->aw_k = calloc(aw_floats, sizeof(float));
    c->aw_kpre = calloc(aw_floats, sizeof(float));
    c->aw_v = calloc(aw_floats, sizeof(float));
    if (!c->stats_k || !c->stats_kpre || !c->stats_v || !c->stats_q || !c->aw_k || !c->aw_kpre || !c->aw_v) {
        calibration_free(c);
        return error_set(err, "out of memory for the calibration statistics");
    }
    return 0;
}

const CalibFit *calibration_find_fit(const Calibration *c, const char *key) {
    for (int i = 0; i < c->n_fits; i++)
        if (!strcmp(c->fits[i].key, key)) return &c->fits[i];
    return NULL;
}

CalibFit *calibration_add_fit(Calibration *c, const char *key, Error *err) {
    char why[160], shown[72];
    CalibFit fresh;
    if (calib_file_fit_declare(&fresh, key, c->n_kv_heads, c->head_dim, why, sizeof why)) {
        error_set(err, "fit key '%s': %s", error_shown(key, shown), why);
        return NULL;
    }
    if (calibration_find_fit(c, key)) {
        error_set(err, "fit key '%s' is already in the calibration", key);
        return NULL;
    }
    CalibFit *grown = realloc(c->fits, (size_t)(c->n_fits + 1) * sizeof *grown);
    if (!grown) {
        error_set(err, "out of memory for fit '%s'", key);
        return NULL;
    }
    c->fits = grown;
    CalibFit *f = &c->fits[c->n_fits];
    *f = fresh;
    f->codebooks = calloc((size_t)c->n_layers * (size_t)f->sides * f->layer_floats, sizeof(float));
    if (!f->codebooks) {
        error_set(err, "out of memory for fit '%s'", key);
        return NULL;
    }
    c->n_fits++;
    return f;
}

const float *calibration_codebook(const Calibration *c, const char *key, char side, int layer) {
    const CalibFit *f = calibration_find_fit(c, key);
    int s = side == 'k' ? 0 : side == 'v' ? 1 : -1;
    if (!f || s < 0 || s >= f->sides || layer < 0 || layer >= c->n_layers) return NULL;
    return f->codebooks + ((size_t)layer * (size_t)f->sides + (size_t)s) * f->layer_floats;
}

const float *calibration_table(const Calibration *c, const char *key, char side, int layer, int head) {
    const float *tables = calibration_codebook(c, key, side, layer);
    if (!tables || head < 0 || head >= c->n_kv_heads) return NULL;
    const CalibFit *f = calibration_find_fit(c, key);
    return tables + (f->layout.per_head ? (size_t)head * f->table_floats : 0);
}

/* ---- names, tensor layout and checks (shared with calibration_read.c) ---- */

int calib_file_hash_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
    return n == CALIB_HASH_HEX;
}

void calib_file_stat_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "stats.%s.%d", CALIB_STAT_NAMES[which], layer);
}

/* fit.KEY.S.L, or fit.KEY.S.L.NAME for a declared tensor with a name. */
void calib_file_fit_name(char *buf, size_t cap, const CalibFit *f, int side, int layer, int tensor) {
    const char *name = f->layout.tensors[tensor].name;
    snprintf(buf, cap, "fit.%s.%c.%d%s%s", f->key, CALIB_SIDE_NAMES[side], layer, name[0] ? "." : "", name);
}

/* Where tensor t of a table starts within it: the tensors before it. */
static size_t tensor_offset(const CalibFit *f, int tensor) {
    size_t at = 0;
    for (int i = 0; i < tensor; i++) at += kv_fit_tensor_floats(&f->layout.tensors[i]);
    return at;
}

/* The tables' heads: n_kv_heads for a per-head fit, else one. */
static int fit_heads(const Calibration *c, const CalibFit *f) { return f->layout.per_head ? c->n_kv_heads : 1; }

/* File tensor t of (fit, layer, side) <-> the tables in memory: each head's part of it. A fit
 * of one tensor is stored as the file has it; several per-head tensors interleave. */
static void tensor_gather(const Calibration *c, const CalibFit *f, const float *tables, int tensor, float *out) {
    size_t off = tensor_offset(f, tensor), n = kv_fit_tensor_floats(&f->layout.tensors[tensor]);
    for (int h = 0; h < fit_heads(c, f); h++)
        memcpy(out + (size_t)h * n, tables + (size_t)h * f->table_floats + off, n * sizeof(float));
}

/* in: the file's bytes, which need not be aligned for float. */
void calib_file_tensor_scatter(const Calibration *c, const CalibFit *f, float *tables, int tensor, const unsigned char *in) {
    size_t off = tensor_offset(f, tensor), n = kv_fit_tensor_floats(&f->layout.tensors[tensor]);
    for (int h = 0; h < fit_heads(c, f); h++)
        memcpy(tables + (size_t)h * f->table_floats + off, in + (size_t)h * n * sizeof(float), n * sizeof(float));
}

/* A file tensor's shape: [n_kv_heads, dims...] per head, else [dims...]; returns ndim. */
_Static_assert(1 + KV_FIT_MAX_DIMS <= ST_MAX_DIMS, "a per-head fit tensor's dims fit a safetensors shape");
int calib_file_tensor_shape(const CalibFit *f, int n_kv_heads, int tensor, int64_t shape[ST_MAX_DIMS]) {
    const KvFitTensor *t = &f->layout.tensors[tensor];
    int ndim = 0;
    if (f->layout.per_head) shape[ndim++] = n_kv_heads;
    for (int i = 0; i < t->ndim; i++) shape[ndim++] = t->dims[i];
    return ndim;
}

void calib_file_aw_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "aw.%s.%d", CALIB_AW_NAMES[which], layer);
}

float *calib_file_aw_array(const Calibration *c, int which) {
    float *arrays[3] = {c->aw_k, c->aw_kpre, c->aw_v};
    return arrays[which];
}

static size_t aw_layer_floats(const Calibration *c) { return (size_t)c->n_kv_heads * (size_t)c->head_dim; }

const float *calibration_aw(const Calibration *c, char side, int prerope, int layer) {
    if (!c->has_aw || layer < 0 || layer >= c->n_layers || (side != 'k' && side != 'v')) return NULL;
    int which = side == 'v' ? 2 : prerope ? 1 : 0;
    return calib_file_aw_array(c, which) + (size_t)layer * aw_layer_floats(c);
}

float *calib_file_stats_array(const Calibration *c, int which) {
    float *arrays[4] = {c->stats_q, c->stats_kpre, c->stats_k, c->stats_v};
    return arrays[which];
}

static int stats_heads(const Calibration *c, int which) { return which == 0 ? c->n_heads : c->n_kv_heads; }

/* Every value finite; in statistics, the mean square and max |x| (2nd and 3rd of each triple)
 * are never negative. */
static int check_floats(const float *x, size_t n, int is_stats, const char *path, const char *name, Error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return error_set(err, "%s: tensor '%s' holds a non-finite value at element %zu", path, name, i);
        if (is_stats && i % 3 != 0 && x[i] < 0)
            return error_set(err, "%s: tensor '%s' holds a negative %s (%g) at element %zu", path, name,
                             i % 3 == 1 ? "mean square" : "max |x|", (double)x[i], i);
    }
    return 0;
}

/* The tables of (fit, layer, side): each file tensor finite (the element as the file numbers
 * it), then each table as its codec checks it. */
static int check_fit_tables(const Calibration *c, const CalibFit *f, int layer, int side, const char *path, Error *err) {
    const float *tables = calibration_codebook(c, f->key, CALIB_SIDE_NAMES[side], layer);
    char name[128], why[160];
    for (int t = 0; t < f->layout.n_tensors; t++) {
        size_t off = tensor_offset(f, t), n = kv_fit_tensor_floats(&f->layout.tensors[t]);
        calib_file_fit_name(name, sizeof name, f, side, layer, t);
        for (int h = 0; h < fit_heads(c, f); h++)
            for (size_t i = 0; i < n; i++)
                if (!isfinite(tables[(size_t)h * f->table_floats + off + i]))
                    return error_set(err, "%s: tensor '%s' holds a non-finite value at element %zu", path, name,
                                     (size_t)h * n + i);
    }
    const KvFit *fit = f->spec.base.codec->fit;
    for (int h = 0; h < fit_heads(c, f) && fit->check; h++)
        if (!fit->check(&f->spec.base, c->head_dim, tables + (size_t)h * f->table_floats, why, sizeof why)) {
            calib_file_fit_name(name, sizeof name, f, side, layer, 0);
            if (f->layout.per_head) return error_set(err, "%s: tensor '%s', KV head %d: %s", path, name, h, why);
            return error_set(err, "%s: tensor '%s' %s", path, name, why);
        }
    return 0;
}

int calibration_check(const Calibration *c, const char *path, Error *err) {
    if (!calib_file_hash_ok(c->model_sha256) || !calib_file_hash_ok(c->text_sha256))
        return error_set(err, "%s: model_sha256 and text_sha256 must be 64 lowercase hex digits", path);
    if (c->tokens < 1 || c->ctx < 1 || c->tokens > INT32_MAX || c->ctx > INT32_MAX)
        return error_set(err, "%s: tokens (%ld) and ctx (%ld) must be positive integers below 2^31", path, c->tokens,
                         c->ctx);
    if (!calib_file_geometry_ok(c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim))
        return error_set(err, "%s: calibration geometry out of range", path);
    char name[128];
    for (int which = 0; which < 4; which++) {
        size_t per_layer = (size_t)stats_heads(c, which) * (size_t)c->head_dim * 3;
        for (int l = 0; l < c->n_layers; l++) {
            calib_file_stat_name(name, sizeof name, which, l);
            if (check_floats(calib_file_stats_array(c, which) + (size_t)l * per_layer, per_layer, 1, path, name, err)) return -1;
        }
    }
    for (int which = 0; which < 3 && c->has_aw; which++)
        for (int l = 0; l < c->n_layers; l++) {
            const float *w = calib_file_aw_array(c, which) + (size_t)l * aw_layer_floats(c);
            calib_file_aw_name(name, sizeof name, which, l);
            if (check_floats(w, aw_layer_floats(c), 0, path, name, err)) return -1;
            for (size_t i = 0; i < aw_layer_floats(c); i++)
                if (w[i] < 0)
                    return error_set(err, "%s: tensor '%s' holds a negative weight (%g) at element %zu", path, name,
                                     (double)w[i], i);
        }
    for (int i = 0; i < c->n_fits; i++)
        for (int l = 0; l < c->n_layers; l++)
            for (int s = 0; s < c->fits[i].sides; s++)
                if (check_fit_tables(c, &c->fits[i], l, s, path, err)) return -1;
    return 0;
}

/* ---- writing ---- */

/* A per-head fit of several tensors interleaves them in memory: the file's copy of each is
 * gathered into buffers (one block for all); other fits are written from memory as they lie. */
static size_t gathered_floats(const Calibration *c) {
    size_t n = 0;
    for (int i = 0; i < c->n_fits; i++)
        if (c->fits[i].layout.per_head && c->fits[i].layout.n_tensors > 1)
            n += (size_t)c->n_layers * (size_t)c->fits[i].sides * c->fits[i].layer_floats;
    return n;
}

int calibration_save(const char *path, const Calibration *c, Error *err) {
    if (calibration_check(c, path, err)) return -1;
    int per_layer = 4 + (c->has_aw ? 3 : 0);
    for (int i = 0; i < c->n_fits; i++) per_layer += c->fits[i].sides * c->fits[i].layout.n_tensors;
    size_t n_tensors = (size_t)c->n_layers * (size_t)per_layer;
    StTensorOut *t = calloc(n_tensors, sizeof *t);
    char (*names)[128] = calloc(n_tensors, sizeof *names);
    float *gathered = malloc((gathered_floats(c) + 1) * sizeof(float)), *next = gathered;
    int rc = -1;
    if (!t || !names || !gathered) {
        error_set(err, "%s: out of memory", path);
        goto done;
    }
    size_t at = 0;
    for (int l = 0; l < c->n_layers; l++) {
        for (int which = 0; which < 4; which++, at++) {
            int heads = stats_heads(c, which);
            calib_file_stat_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 3,
                                  .shape = {heads, c->head_dim, 3},
                                  .data = calib_file_stats_array(c, which) + (size_t)l * (size_t)heads * (size_t)c->head_dim * 3};
        }
        for (int which = 0; which < 3 && c->has_aw; which++, at++) {
            calib_file_aw_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 2, .shape = {c->n_kv_heads, c->head_dim},
                                  .data = calib_file_aw_array(c, which) + (size_t)l * aw_layer_floats(c)};
        }
        for (int i = 0; i < c->n_fits; i++) {
            const CalibFit *f = &c->fits[i];
            int interleaved = f->layout.per_head && f->layout.n_tensors > 1;
            for (int s = 0; s < f->sides; s++) {
                const float *tables = calibration_codebook(c, f->key, CALIB_SIDE_NAMES[s], l);
                for (int k = 0; k < f->layout.n_tensors; k++, at++) {
                    calib_file_fit_name(names[at], sizeof names[at], f, s, l, k);
                    t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32};
                    t[at].ndim = calib_file_tensor_shape(f, c->n_kv_heads, k, t[at].shape);
                    if (interleaved) {
                        tensor_gather(c, f, tables, k, next);
                        t[at].data = next;
                        next += (size_t)fit_heads(c, f) * kv_fit_tensor_floats(&f->layout.tensors[k]);
                    } else {
                        t[at].data = tables + tensor_offset(f, k);
                    }
                }
            }
        }
    }
    char tokens[24], ctx[24];
    snprintf(tokens, sizeof tokens, "%ld", c->tokens);
    snprintf(ctx, sizeof ctx, "%ld", c->ctx);
    const char *keys[5] = {"format", "model_sha256", "text_sha256", "tokens", "ctx"};
    const char *values[5] = {CALIB_FORMAT, c->model_sha256, c->text_sha256, tokens, ctx};
    rc = st_write_checksummed(path, t, (int)n_tensors, keys, values, 5, err);
done:
    free(t);
    free(names);
    free(gathered);
    return rc;
}
