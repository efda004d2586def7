/* model/formats/calibration.c: calibration files, written and validated (layout in calibration.h). */
#include "model/formats/calibration.h"
#include "model/formats/sha256.h"
#include "model/formats/st_checksum.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sizes beyond any real model, so that products of them stay far from overflow. */
#define CALIB_MAX_LAYERS 4096
#define CALIB_MAX_HEADS 4096
#define CALIB_MAX_HEAD_DIM 65536

static const char *const STAT_NAMES[4] = {"q", "kpre", "k", "v"};   /* the file's order within a layer */
static const char SIDE_NAMES[2] = {'k', 'v'};
static const char *const AW_NAMES[3] = {"k", "kpre", "v"};   /* +aw's weights, the file's order */

/* ---- fit keys ---- */

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

/* A fit key parsed for rows of head_dim values (kv_fit_key_parse, within the file's length limit). */
static int fit_key_parse(const char *key, int head_dim, KvSpec *spec, char *why, size_t why_size) {
    if (strlen(key) > CALIB_KEY_MAX) {
        snprintf(why, why_size, "longer than %d characters", CALIB_KEY_MAX);
        return -1;
    }
    return kv_fit_key_parse(key, head_dim, spec, why, why_size);
}

/* 2 sides, or 1 (keys) for a +prerope fit: values never see RoPE. */
static int fit_sides(const KvSpec *spec) { return spec->prerope ? 1 : 2; }

/* The codec's declaration of what the fit stores, and its sizes, for this geometry. */
static void fit_declare(CalibFit *f, int n_kv_heads, int head_dim) {
    f->spec.base.codec->fit->layout(&f->spec.base, head_dim, &f->layout);
    f->sides = fit_sides(&f->spec);
    f->table_floats = kv_fit_table_floats(&f->layout);
    f->layer_floats = f->table_floats * (size_t)(f->layout.per_head ? n_kv_heads : 1);
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

static int geometry_ok(int n_layers, int n_heads, int n_kv_heads, int head_dim) {
    return n_layers >= 1 && n_layers <= CALIB_MAX_LAYERS && n_heads >= 1 && n_heads <= CALIB_MAX_HEADS &&
           n_kv_heads >= 1 && n_kv_heads <= CALIB_MAX_HEADS && head_dim >= 1 && head_dim <= CALIB_MAX_HEAD_DIM;
}

int calibration_init(Calibration *c, int n_layers, int n_heads, int n_kv_heads, int head_dim, Error *err) {
    memset(c, 0, sizeof *c);
    if (!geometry_ok(n_layers, n_heads, n_kv_heads, head_dim))
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
    KvSpec spec;
    if (fit_key_parse(key, c->head_dim, &spec, why, sizeof why)) {
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
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    f->spec = spec;
    fit_declare(f, c->n_kv_heads, c->head_dim);
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

/* ---- checks shared by the reader and the writer ---- */

static int hash_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
    return n == CALIB_HASH_HEX;
}

/* "36068468...c60034": enough of a valid hash to tell two apart in a message. */
static const char *short_hash(const char *h, char out[24]) {
    snprintf(out, 24, "%.8s...%.6s", h, h + CALIB_HASH_HEX - 6);
    return out;
}

static void stat_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "stats.%s.%d", STAT_NAMES[which], layer);
}

/* fit.KEY.S.L, or fit.KEY.S.L.NAME for a declared tensor with a name. */
static void fit_name(char *buf, size_t cap, const CalibFit *f, int side, int layer, int tensor) {
    const char *name = f->layout.tensors[tensor].name;
    snprintf(buf, cap, "fit.%s.%c.%d%s%s", f->key, SIDE_NAMES[side], layer, name[0] ? "." : "", name);
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
static void tensor_scatter(const Calibration *c, const CalibFit *f, float *tables, int tensor, const unsigned char *in) {
    size_t off = tensor_offset(f, tensor), n = kv_fit_tensor_floats(&f->layout.tensors[tensor]);
    for (int h = 0; h < fit_heads(c, f); h++)
        memcpy(tables + (size_t)h * f->table_floats + off, in + (size_t)h * n * sizeof(float), n * sizeof(float));
}

/* A file tensor's shape: [n_kv_heads, dims...] per head, else [dims...]; returns ndim. */
_Static_assert(1 + KV_FIT_MAX_DIMS <= ST_MAX_DIMS, "a per-head fit tensor's dims fit a safetensors shape");
static int tensor_shape(const CalibFit *f, int n_kv_heads, int tensor, int64_t shape[ST_MAX_DIMS]) {
    const KvFitTensor *t = &f->layout.tensors[tensor];
    int ndim = 0;
    if (f->layout.per_head) shape[ndim++] = n_kv_heads;
    for (int i = 0; i < t->ndim; i++) shape[ndim++] = t->dims[i];
    return ndim;
}

static void aw_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "aw.%s.%d", AW_NAMES[which], layer);
}

static float *aw_array(const Calibration *c, int which) {
    float *arrays[3] = {c->aw_k, c->aw_kpre, c->aw_v};
    return arrays[which];
}

static size_t aw_layer_floats(const Calibration *c) { return (size_t)c->n_kv_heads * (size_t)c->head_dim; }

const float *calibration_aw(const Calibration *c, char side, int prerope, int layer) {
    if (!c->has_aw || layer < 0 || layer >= c->n_layers || (side != 'k' && side != 'v')) return NULL;
    int which = side == 'v' ? 2 : prerope ? 1 : 0;
    return aw_array(c, which) + (size_t)layer * aw_layer_floats(c);
}

static float *stats_array(const Calibration *c, int which) {
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
    const float *tables = calibration_codebook(c, f->key, SIDE_NAMES[side], layer);
    char name[128], why[160];
    for (int t = 0; t < f->layout.n_tensors; t++) {
        size_t off = tensor_offset(f, t), n = kv_fit_tensor_floats(&f->layout.tensors[t]);
        fit_name(name, sizeof name, f, side, layer, t);
        for (int h = 0; h < fit_heads(c, f); h++)
            for (size_t i = 0; i < n; i++)
                if (!isfinite(tables[(size_t)h * f->table_floats + off + i]))
                    return error_set(err, "%s: tensor '%s' holds a non-finite value at element %zu", path, name,
                                     (size_t)h * n + i);
    }
    const KvFit *fit = f->spec.base.codec->fit;
    for (int h = 0; h < fit_heads(c, f) && fit->check; h++)
        if (!fit->check(&f->spec.base, c->head_dim, tables + (size_t)h * f->table_floats, why, sizeof why)) {
            fit_name(name, sizeof name, f, side, layer, 0);
            if (f->layout.per_head) return error_set(err, "%s: tensor '%s', KV head %d: %s", path, name, h, why);
            return error_set(err, "%s: tensor '%s' %s", path, name, why);
        }
    return 0;
}

int calibration_check(const Calibration *c, const char *path, Error *err) {
    if (!hash_ok(c->model_sha256) || !hash_ok(c->text_sha256))
        return error_set(err, "%s: model_sha256 and text_sha256 must be 64 lowercase hex digits", path);
    if (c->tokens < 1 || c->ctx < 1 || c->tokens > INT32_MAX || c->ctx > INT32_MAX)
        return error_set(err, "%s: tokens (%ld) and ctx (%ld) must be positive integers below 2^31", path, c->tokens,
                         c->ctx);
    if (!geometry_ok(c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim))
        return error_set(err, "%s: calibration geometry out of range", path);
    char name[128];
    for (int which = 0; which < 4; which++) {
        size_t per_layer = (size_t)stats_heads(c, which) * (size_t)c->head_dim * 3;
        for (int l = 0; l < c->n_layers; l++) {
            stat_name(name, sizeof name, which, l);
            if (check_floats(stats_array(c, which) + (size_t)l * per_layer, per_layer, 1, path, name, err)) return -1;
        }
    }
    for (int which = 0; which < 3 && c->has_aw; which++)
        for (int l = 0; l < c->n_layers; l++) {
            const float *w = aw_array(c, which) + (size_t)l * aw_layer_floats(c);
            aw_name(name, sizeof name, which, l);
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
            stat_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 3,
                                  .shape = {heads, c->head_dim, 3},
                                  .data = stats_array(c, which) + (size_t)l * (size_t)heads * (size_t)c->head_dim * 3};
        }
        for (int which = 0; which < 3 && c->has_aw; which++, at++) {
            aw_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 2, .shape = {c->n_kv_heads, c->head_dim},
                                  .data = aw_array(c, which) + (size_t)l * aw_layer_floats(c)};
        }
        for (int i = 0; i < c->n_fits; i++) {
            const CalibFit *f = &c->fits[i];
            int interleaved = f->layout.per_head && f->layout.n_tensors > 1;
            for (int s = 0; s < f->sides; s++) {
                const float *tables = calibration_codebook(c, f->key, SIDE_NAMES[s], l);
                for (int k = 0; k < f->layout.n_tensors; k++, at++) {
                    fit_name(names[at], sizeof names[at], f, s, l, k);
                    t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32};
                    t[at].ndim = tensor_shape(f, c->n_kv_heads, k, t[at].shape);
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

/* ---- reading ---- */

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
        if (!hash_ok(h))
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
    CalibFit *f = &r->fits[fit];
    memset(f, 0, sizeof *f);
    if (fit_key_parse(key, r->head_dim, &f->spec, why, sizeof why))
        return error_set(err, "%s: tensor '%s': fit key: %s", r->path, error_shown(name, shown), why);
    snprintf(f->key, sizeof f->key, "%s", key);
    fit_declare(f, r->n_kv_heads, r->head_dim);
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
            size_t n = strlen(STAT_NAMES[which]);
            if ((size_t)(dot - (name + 6)) == n && !strncmp(name + 6, STAT_NAMES[which], n)) {
                role->slot = which;
                role->layer = *layer_raw = (int)layer;
                return 0;
            }
        }
    } else if (strncmp(name, "aw.", 3) == 0 && layer >= 0) {
        for (int which = 0; which < 3; which++) {
            size_t n = strlen(AW_NAMES[which]);
            if ((size_t)(dot - (name + 3)) == n && !strncmp(name + 3, AW_NAMES[which], n)) {
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
    return tensor_shape(&r->fits[fit], r->n_kv_heads, tensor, shape);
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
        if (!geometry_ok(r->n_layers, r->n_heads, r->n_kv_heads, r->head_dim))
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
        stat_name(buf, cap, slot, layer);
        return;
    }
    if (slot < FIT_SLOT0) {
        aw_name(buf, cap, slot - AW_SLOT0, layer);
        return;
    }
    slot_parts(slot, &fit, &side, &tensor);
    fit_name(buf, cap, &r->fits[fit], side, layer, tensor);
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
            memcpy(stats_array(c, roles[i].slot) + (size_t)roles[i].layer * t->numel, t->data, t->nbytes);
            continue;
        }
        if (roles[i].slot < FIT_SLOT0) {
            memcpy(aw_array(c, roles[i].slot - AW_SLOT0) + (size_t)roles[i].layer * t->numel, t->data, t->nbytes);
            continue;
        }
        int fit, side, tensor;
        slot_parts(roles[i].slot, &fit, &side, &tensor);
        const CalibFit *f = &c->fits[fit];
        float *tables = (float *)calibration_codebook(c, f->key, SIDE_NAMES[side], roles[i].layer);
        tensor_scatter(c, f, tables, tensor, (const unsigned char *)t->data);
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

int calibration_from_safetensors(const SafeTensors *st, const CalibModel *model, Calibration *c, Error *err) {
    memset(c, 0, sizeof *c);
    if (check_checksums(st, err)) return -1;
    Calibration meta;
    memset(&meta, 0, sizeof meta);
    if (read_metadata(st, &meta, err)) return -1;
    if (model && model->model_sha256 && strcmp(model->model_sha256, meta.model_sha256)) {
        char mine[24], theirs[24], shown[72];
        if (!hash_ok(model->model_sha256))
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
