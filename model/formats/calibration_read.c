/* model/formats/calibration_read.c: a calibration file read and validated (calibration_load,
 * calibration_from_safetensors): the checksums, the metadata, the model's sha256, the geometry,
 * every tensor's name, dtype and shape, a fit missing a layer, side or tensor, then the values
 * through calibration_check. The names, layout and checks it holds a file to are calibration.c's
 * (the last section of calibration.h, which also describes the file). */
#include "model/formats/calibration.h"
#include "model/formats/sha256.h"
#include "model/formats/st_checksum.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CALIB_MAX_FITS 64

/* What one tensor of the file is: slot 0..3 = stats q, kpre, k, v; AW_SLOT0 + 0..2 = aw k, kpre,
 * v; fit_slot(fit, side, tensor) = one declared tensor of a fit's side. */
typedef struct {
    int slot, layer;
} TensorRole;

enum { AW_SLOT0 = 4, FIT_SLOT0 = 7 };
#define SLOTS (FIT_SLOT0 + 2 * CALIB_MAX_FITS * KV_FIT_MAX_TENSORS)

static int fit_slot(int fit, int side, int tensor) { return FIT_SLOT0 + (fit * 2 + side) * KV_FIT_MAX_TENSORS + tensor; }

/* The reader's working state: the file, the geometry it is checked against, the fits found
 * (declared, without tables). */
typedef struct {
    const SafeTensors *st;
    const char *path;
    int n_layers, n_heads, n_kv_heads, head_dim;
    CalibFit fits[CALIB_MAX_FITS];
    int n_fits;
    int has_aw;   /* some aw.* tensor was seen: then every layer needs all three */
} Reader;

/* Reads a canonical decimal number (no sign, no leading zero) at *s, advancing *s; -1 if none or
 * above limit. */
static long read_number(const char **s, long limit) {
    const char *p = *s;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        int digit = *p - '0';
        if (v > (limit - digit) / 10) return -1;   /* checked before it could overflow */
        v = v * 10 + digit;
    }
    *s = p;
    return v;
}

/* A canonical non-negative decimal within limit, the whole string; -1 otherwise. */
static long whole_number(const char *s, long limit) {
    const char *p = s;
    long v = read_number(&p, limit);
    return *p ? -1 : v;
}

static int read_metadata(const SafeTensors *st, Calibration *out, Error *err) {
    const char *path = st->path, *format = st_meta(st, "format");
    char shown[72];
    if (!format) return error_set(err, "%s: not a kvq calibration (no 'format' in __metadata__)", path);
    if (strcmp(format, CALIB_FORMAT))
        return error_set(err, "%s: not a kvq calibration (format '%s')", path, error_shown(format, shown));
    static const char *const hash_keys[2] = {"model_sha256", "text_sha256"};
    char *hash_out[2] = {out->model_sha256, out->text_sha256};
    for (int i = 0; i < 2; i++) {
        const char *h = st_meta(st, hash_keys[i]);
        if (!h) return error_set(err, "%s: metadata '%s' missing", path, hash_keys[i]);
        if (!calib_file_hash_ok(h))
            return error_set(err, "%s: metadata '%s' = '%s' is not 64 lowercase hex digits", path, hash_keys[i],
                             error_shown(h, shown));
        memcpy(hash_out[i], h, CALIB_HASH_HEX + 1);
    }
    static const char *const count_keys[2] = {"tokens", "ctx"};
    long *count_out[2] = {&out->tokens, &out->ctx};
    for (int i = 0; i < 2; i++) {
        const char *v = st_meta(st, count_keys[i]);
        if (!v) return error_set(err, "%s: metadata '%s' missing", path, count_keys[i]);
        long x = whole_number(v, INT32_MAX);
        if (x < 1)
            return error_set(err, "%s: metadata '%s' = '%s' is not a positive integer", path, count_keys[i],
                             error_shown(v, shown));
        *count_out[i] = x;
    }
    return 0;
}

/* A statistics tensor's [heads, head_dim, 3], F32; heads and head_dim out. */
static int stats_shape(const Tensor *t, int *heads, int *head_dim) {
    if (t->dtype != DT_F32 || t->ndim != 3 || t->shape[2] != 3 || t->shape[0] < 1 || t->shape[0] > CALIB_MAX_HEADS ||
        t->shape[1] < 1 || t->shape[1] > CALIB_MAX_HEAD_DIM)
        return -1;
    *heads = (int)t->shape[0];
    *head_dim = (int)t->shape[1];
    return 0;
}

/* The layer a tensor name ends with (…L or …L.NAME), -1 for none. */
static long name_layer(const char *name) {
    const char *dot = strrchr(name, '.');
    long layer = dot ? whole_number(dot + 1, CALIB_MAX_LAYERS - 1) : -1;
    if (layer >= 0 || !dot) return layer;
    const char *prev = dot;
    while (prev > name && prev[-1] != '.') prev--;
    char digits[16];
    size_t len = (size_t)(dot - prev);
    if (prev == name || len >= sizeof digits) return -1;
    memcpy(digits, prev, len);
    digits[len] = '\0';
    return whole_number(digits, CALIB_MAX_LAYERS - 1);
}

static int unexpected(const Reader *r, const char *name, Error *err) {
    char shown[72];
    return error_set(err, "%s: unexpected tensor '%s' (not stats.{q,kpre,k,v}.L or fit.KEY.{k,v}.L[.NAME])", r->path,
                     error_shown(name, shown));
}

/* The fit of key in r, parsed and declared the first time it is seen; -1 when refused. */
static int reader_fit(Reader *r, const char *name, const char *key, Error *err) {
    char shown[72], why[160];
    int fit = 0;
    while (fit < r->n_fits && strcmp(r->fits[fit].key, key)) fit++;
    if (fit < r->n_fits) return fit;
    if (r->n_fits == CALIB_MAX_FITS) return error_set(err, "%s: more than %d fit keys", r->path, CALIB_MAX_FITS);
    if (calib_file_fit_declare(&r->fits[fit], key, r->n_kv_heads, r->head_dim, why, sizeof why))
        return error_set(err, "%s: tensor '%s': fit key: %s", r->path, error_shown(name, shown), why);
    r->n_fits++;
    return fit;
}

/* fit.KEY.S.L[.NAME], read from the right (a key may hold a '.', as a fractional number of bits would). */
static int parse_fit_name(Reader *r, const char *name, TensorRole *role, int *layer_raw, Error *err) {
    char shown[72], key[CALIB_KEY_MAX + 1];
    const char *dot = strrchr(name, '.'), *tensor_name = "";
    long layer = name_layer(name);
    if (layer >= 0 && whole_number(dot + 1, CALIB_MAX_LAYERS - 1) < 0) {   /* .L.NAME */
        tensor_name = dot + 1;
        do dot--;
        while (*dot != '.');
    }
    if (layer < 0 || dot - name < 7 || dot[-2] != '.' || (dot[-1] != 'k' && dot[-1] != 'v')) return unexpected(r, name, err);
    size_t key_len = (size_t)(dot - 2 - (name + 4));
    if (key_len > CALIB_KEY_MAX)
        return error_set(err, "%s: tensor '%s': fit key longer than %d characters", r->path, error_shown(name, shown),
                         CALIB_KEY_MAX);
    memcpy(key, name + 4, key_len);
    key[key_len] = '\0';
    int fit = reader_fit(r, name, key, err), side = dot[-1] == 'v';
    if (fit < 0) return -1;
    const CalibFit *f = &r->fits[fit];
    if (side >= f->sides)
        return error_set(err, "%s: tensor '%s': a +prerope fit has keys' codebooks only", r->path, error_shown(name, shown));
    int tensor = 0;
    while (tensor < f->layout.n_tensors && strcmp(f->layout.tensors[tensor].name, tensor_name)) tensor++;
    if (tensor == f->layout.n_tensors) return unexpected(r, name, err);
    role->slot = fit_slot(fit, side, tensor);
    role->layer = *layer_raw = (int)layer;
    return 0;
}

/* Splits a tensor name into its role; -1 with the reason when it is not a calibration tensor. */
static int parse_name(Reader *r, const char *name, TensorRole *role, int *layer_raw, Error *err) {
    const char *dot = strrchr(name, '.');
    long layer = dot ? whole_number(dot + 1, CALIB_MAX_LAYERS - 1) : -1;
    if (strncmp(name, "stats.", 6) == 0 && layer >= 0) {
        for (int which = 0; which < 4; which++) {
            size_t n = strlen(CALIB_STAT_NAMES[which]);
            if ((size_t)(dot - (name + 6)) == n && !strncmp(name + 6, CALIB_STAT_NAMES[which], n)) {
                role->slot = which;
                role->layer = *layer_raw = (int)layer;
                return 0;
            }
        }
    } else if (strncmp(name, "aw.", 3) == 0 && layer >= 0) {
        for (int which = 0; which < 3; which++) {
            size_t n = strlen(CALIB_AW_NAMES[which]);
            if ((size_t)(dot - (name + 3)) == n && !strncmp(name + 3, CALIB_AW_NAMES[which], n)) {
                role->slot = AW_SLOT0 + which;
                role->layer = *layer_raw = (int)layer;
                r->has_aw = 1;
                return 0;
            }
        }
    } else if (strncmp(name, "fit.", 4) == 0) {
        return parse_fit_name(r, name, role, layer_raw, err);
    }
    return unexpected(r, name, err);
}

/* The fit, side and tensor of a fit slot. */
static void slot_parts(int slot, int *fit, int *side, int *tensor) {
    *fit = (slot - FIT_SLOT0) / KV_FIT_MAX_TENSORS / 2;
    *side = (slot - FIT_SLOT0) / KV_FIT_MAX_TENSORS % 2;
    *tensor = (slot - FIT_SLOT0) % KV_FIT_MAX_TENSORS;
}

/* The shape a tensor of this role must have. */
static int expected_shape(const Reader *r, const TensorRole *role, int64_t shape[ST_MAX_DIMS]) {
    if (role->slot < 4) {
        shape[0] = role->slot == 0 ? r->n_heads : r->n_kv_heads;
        shape[1] = r->head_dim;
        shape[2] = 3;
        return 3;
    }
    if (role->slot < FIT_SLOT0) {
        shape[0] = r->n_kv_heads;
        shape[1] = r->head_dim;
        return 2;
    }
    int fit, side, tensor;
    slot_parts(role->slot, &fit, &side, &tensor);
    return calib_file_tensor_shape(&r->fits[fit], r->n_kv_heads, tensor, shape);
}

static void shape_text(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static int check_tensor(const Reader *r, const Tensor *t, const TensorRole *role, Error *err) {
    char shown[72], want[96], got[96];
    if (t->dtype != DT_F32)
        return error_set(err, "%s: tensor '%s' has dtype %s (F32 expected)", r->path, error_shown(t->name, shown),
                         dtype_name(t->dtype));
    int64_t shape[ST_MAX_DIMS];
    int ndim = expected_shape(r, role, shape);
    if (t->ndim != ndim || memcmp(t->shape, shape, (size_t)ndim * sizeof *shape)) {
        shape_text(want, sizeof want, shape, ndim);
        shape_text(got, sizeof got, t->shape, t->ndim);
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s", r->path, error_shown(t->name, shown), got,
                         want);
    }
    return 0;
}

/* The geometry: the model's when given (the file must agree), else the file's own (heads and
 * head_dim from layer 0's statistics, layers from the largest layer any tensor names). */
static int read_geometry(Reader *r, const CalibModel *model, Error *err) {
    const char *path = r->path;
    const Tensor *q0 = st_find(r->st, "stats.q.0"), *k0 = st_find(r->st, "stats.k.0");
    if (!q0) return error_set(err, "%s: missing tensor 'stats.q.0'", path);
    if (!k0) return error_set(err, "%s: missing tensor 'stats.k.0'", path);
    int head_dim_k;
    if (stats_shape(q0, &r->n_heads, &r->head_dim) || stats_shape(k0, &r->n_kv_heads, &head_dim_k) ||
        head_dim_k != r->head_dim)
        return error_set(err, "%s: tensors 'stats.q.0' and 'stats.k.0' must be F32 [heads, head_dim, 3] of one head_dim",
                         path);
    if (model) {
        /* Layers: the model's; a file with fewer misses a tensor, one with more names a layer past them. */
        r->n_layers = model->n_layers;
        if (r->n_heads != model->n_heads || r->n_kv_heads != model->n_kv_heads || r->head_dim != model->head_dim)
            return error_set(err, "%s: made for %d heads, %d KV heads, head_dim %d; the model has %d, %d, %d", path,
                             r->n_heads, r->n_kv_heads, r->head_dim, model->n_heads, model->n_kv_heads,
                             model->head_dim);
        if (!calib_file_geometry_ok(r->n_layers, r->n_heads, r->n_kv_heads, r->head_dim))
            return error_set(err, "%s: the model's geometry is out of range", path);
        return 0;
    }
    r->n_layers = 0;
    for (int i = 0; i < r->st->n_tensors; i++) {
        long layer = name_layer(r->st->tensors[i].name);
        if (layer >= r->n_layers) r->n_layers = (int)layer + 1;
    }
    return 0;
}

/* The name of the tensor of (slot, layer), for a message about it. */
static void role_name(const Reader *r, int slot, int layer, char *buf, size_t cap) {
    int fit, side, tensor;
    if (slot < 4) {
        calib_file_stat_name(buf, cap, slot, layer);
        return;
    }
    if (slot < FIT_SLOT0) {
        calib_file_aw_name(buf, cap, slot - AW_SLOT0, layer);
        return;
    }
    slot_parts(slot, &fit, &side, &tensor);
    calib_file_fit_name(buf, cap, &r->fits[fit], side, layer, tensor);
}

/* Classifies and checks every tensor (roles[i] for tensor i), then checks that each layer has
 * its statistics and every fit its codebooks. */
static int check_tensors(Reader *r, TensorRole *roles, Error *err) {
    const int slots = SLOTS;
    unsigned char *seen = calloc((size_t)r->n_layers * slots, 1);
    if (!seen) return error_set(err, "%s: out of memory", r->path);
    int rc = 0;
    char shown[72], name[128];
    for (int i = 0; i < r->st->n_tensors && rc == 0; i++) {
        const Tensor *t = &r->st->tensors[i];
        int layer = -1;
        rc = parse_name(r, t->name, &roles[i], &layer, err);
        if (rc == 0 && layer >= r->n_layers)
            rc = error_set(err, "%s: tensor '%s' is for layer %d; the model has %d layers", r->path,
                           error_shown(t->name, shown), layer, r->n_layers);
        if (rc == 0) rc = check_tensor(r, t, &roles[i], err);
        if (rc == 0) seen[(size_t)roles[i].layer * slots + (size_t)roles[i].slot] = 1;
    }
    for (int l = 0; l < r->n_layers && rc == 0; l++)
        for (int slot = 0; slot < fit_slot(r->n_fits, 0, 0) && rc == 0; slot++) {
            int fit, side, tensor;
            if (slot >= AW_SLOT0 && slot < FIT_SLOT0 && !r->has_aw) continue;   /* files before §9 have none */
            slot_parts(slot, &fit, &side, &tensor);
            if (slot >= FIT_SLOT0 && (side >= r->fits[fit].sides || tensor >= r->fits[fit].layout.n_tensors)) continue;
            if (!seen[(size_t)l * slots + (size_t)slot]) {
                role_name(r, slot, l, name, sizeof name);
                rc = error_set(err, "%s: missing tensor '%s'", r->path, name);
            }
        }
    free(seen);
    return rc;
}

/* Copies every tensor into c (sizes all checked). */
static void copy_tensors(const Reader *r, const TensorRole *roles, Calibration *c) {
    for (int i = 0; i < r->st->n_tensors; i++) {
        const Tensor *t = &r->st->tensors[i];
        if (roles[i].slot < 4) {
            memcpy(calib_file_stats_array(c, roles[i].slot) + (size_t)roles[i].layer * t->numel, t->data, t->nbytes);
            continue;
        }
        if (roles[i].slot < FIT_SLOT0) {
            memcpy(calib_file_aw_array(c, roles[i].slot - AW_SLOT0) + (size_t)roles[i].layer * t->numel, t->data, t->nbytes);
            continue;
        }
        int fit, side, tensor;
        slot_parts(roles[i].slot, &fit, &side, &tensor);
        const CalibFit *f = &c->fits[fit];
        float *tables = (float *)calibration_codebook(c, f->key, CALIB_SIDE_NAMES[side], roles[i].layer);
        calib_file_tensor_scatter(c, f, tables, tensor, (const unsigned char *)t->data);
    }
}

/* A calibration's checksums (st_checksum.h), before anything else of it is read; a file of
 * another format is left to read_metadata to name. */
static int check_checksums(const SafeTensors *st, Error *err) {
    const char *format = st_meta(st, "format");
    if (!format || strcmp(format, CALIB_FORMAT)) return 0;
    if (!st_has_checksums(st))
        return error_set(err, "%s: a calibration without checksums (written before they were added, or stripped): "
                         "make it again with ./run calibrate", st->path);
    return st_verify_checksums(st, err);
}

/* "36068468...c60034": enough of a valid hash to tell two apart in a message. */
static const char *short_hash(const char *h, char out[24]) {
    snprintf(out, 24, "%.8s...%.6s", h, h + CALIB_HASH_HEX - 6);
    return out;
}

int calibration_from_safetensors(const SafeTensors *st, const CalibModel *model, Calibration *c, Error *err) {
    memset(c, 0, sizeof *c);
    if (check_checksums(st, err)) return -1;
    Calibration meta;
    memset(&meta, 0, sizeof meta);
    if (read_metadata(st, &meta, err)) return -1;
    if (model && model->model_sha256 && strcmp(model->model_sha256, meta.model_sha256)) {
        char mine[24], theirs[24], shown[72];
        if (!calib_file_hash_ok(model->model_sha256))
            return error_set(err, "%s: the model's sha256 '%s' is not 64 lowercase hex digits", st->path,
                             error_shown(model->model_sha256, shown));
        return error_set(err, "%s: calibration of another model (model_sha256 %s; this model's is %s)", st->path,
                         short_hash(meta.model_sha256, theirs), short_hash(model->model_sha256, mine));
    }
    Reader *r = calloc(1, sizeof *r);
    TensorRole *roles = calloc((size_t)st->n_tensors + 1, sizeof *roles);
    int rc = -1;
    if (!r || !roles) {
        error_set(err, "%s: out of memory", st->path);
        goto done;
    }
    r->st = st;
    r->path = st->path;
    if (read_geometry(r, model, err) || check_tensors(r, roles, err)) goto done;
    if (calibration_init(c, r->n_layers, r->n_heads, r->n_kv_heads, r->head_dim, err)) {
        error_set(err, "%s: out of memory for the calibration", st->path);
        goto done;
    }
    for (int i = 0; i < r->n_fits; i++)
        if (!calibration_add_fit(c, r->fits[i].key, err)) {
            error_set(err, "%s: out of memory for the calibration", st->path);
            goto done;
        }
    memcpy(c->model_sha256, meta.model_sha256, sizeof c->model_sha256);
    memcpy(c->text_sha256, meta.text_sha256, sizeof c->text_sha256);
    c->tokens = meta.tokens;
    c->ctx = meta.ctx;
    c->has_aw = r->has_aw;
    copy_tensors(r, roles, c);
    rc = calibration_check(c, st->path, err);
done:
    if (rc) calibration_free(c);
    free(r);
    free(roles);
    return rc;
}

int calibration_load(const char *path, const CalibModel *model, Calibration *c, Error *err) {
    SafeTensors st;
    memset(c, 0, sizeof *c);
    if (st_open(&st, path, err)) return -1;
    int rc = calibration_from_safetensors(&st, model, c, err);
    st_close(&st);
    if (rc == 0) snprintf(c->path, sizeof c->path, "%s", path);
    if (rc == 0 && sha256_file_hex(path, c->file_sha256, err)) {
        calibration_free(c);
        return -1;
    }
    return rc;
}
