/* model/formats/kvfile.c: save, load, check and describe KV cache files (layout in kvfile.h). */
#include "model/formats/kvfile.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include "quant/half.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t kv_snapshot_layer_size(const KvSnapshot *s) {
    return (size_t)s->n_kv_heads * s->seq_len * s->head_dim;
}

int kv_snapshot_alloc(KvSnapshot *s, Error *err) {
    size_t per_layer = kv_snapshot_layer_size(s);
    if (s->n_layers <= 0 || per_layer == 0 || per_layer > SIZE_MAX / sizeof(float) / (size_t)s->n_layers)
        return error_set(err, "KV cache of %d layers x %zu values is empty or too large", s->n_layers, per_layer);
    s->k = malloc(per_layer * s->n_layers * sizeof(float));
    s->v = malloc(per_layer * s->n_layers * sizeof(float));
    if (!s->k || !s->v) {
        kv_snapshot_free(s);
        return error_set(err, "out of memory for a KV cache of %zu values", per_layer * s->n_layers * 2);
    }
    return 0;
}

void kv_snapshot_free(KvSnapshot *s) {
    free(s->k);
    free(s->v);
    s->k = s->v = NULL;
}

/* ---- saving ---- */

/* The metadata, as pairs: into __metadata__ (all strings) and the sidecar JSON; the optional
 * fields (tokens, model_id, model_sha256) only when known. Returns how many. */
#define KV_META_FIELDS 9

static int meta_pairs(const KvSnapshot *s, char values[KV_META_FIELDS][4096], const char **keys) {
    static const char *names[KV_META_FIELDS] = {"num_layers", "num_kv_heads", "seq_len", "head_dim", "dtype",
                                               "model_name", "tokens", "model_id", "model_sha256"};
    const char *optional[3] = {s->tokens, s->model_id, s->model_sha256};
    snprintf(values[0], 4096, "%d", s->n_layers);
    snprintf(values[1], 4096, "%d", s->n_kv_heads);
    snprintf(values[2], 4096, "%d", s->seq_len);
    snprintf(values[3], 4096, "%d", s->head_dim);
    snprintf(values[4], 4096, "%s", s->dtype);
    snprintf(values[5], 4096, "%s", s->model_name);
    int n = 6;
    for (int i = 0; i < 3; i++) {
        if (!optional[i][0]) continue;
        keys[n] = names[6 + i];
        snprintf(values[n++], 4096, "%s", optional[i]);
    }
    for (int i = 0; i < 6; i++) keys[i] = names[i];
    return n;
}

static void json_escaped(char *out, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') n += (size_t)snprintf(out + n, cap - n, "\\%c", ch);
        else if (ch < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        else out[n++] = (char)ch;
    }
    out[n] = 0;
}

static int write_sidecar(const char *path, const KvSnapshot *s, Error *err) {
    char values[KV_META_FIELDS][4096], esc[8192], sidecar[4200];
    const char *keys[KV_META_FIELDS];
    int n = meta_pairs(s, values, keys);
    char text[40000];
    int len = snprintf(text, sizeof text, "{\n \"num_layers\": %d,\n \"num_kv_heads\": %d,\n \"seq_len\": %d,\n"
                       " \"head_dim\": %d", s->n_layers, s->n_kv_heads, s->seq_len, s->head_dim);
    for (int i = 4; i < n; i++) {   /* the strings */
        json_escaped(esc, sizeof esc, values[i]);
        len += snprintf(text + len, sizeof text - (size_t)len, ",\n \"%s\": \"%s\"", keys[i], esc);
    }
    snprintf(text + len, sizeof text - (size_t)len, "\n}\n");
    snprintf(sidecar, sizeof sidecar, "%s.metadata.json", path);
    return write_text_file(sidecar, text, err);
}

int kv_snapshot_save(const char *path, const KvSnapshot *s, DType dtype, Error *err) {
    if (dtype != DT_F32 && dtype != DT_F16) return error_set(err, "%s: KV caches are saved as F32 or F16", path);
    KvSnapshot meta = *s;
    snprintf(meta.dtype, sizeof meta.dtype, dtype == DT_F32 ? "float32" : "float16");
    size_t per_layer = kv_snapshot_layer_size(s), total = per_layer * s->n_layers;
    uint16_t *halves = NULL;
    if (dtype == DT_F16) {
        halves = malloc(total * 2 * sizeof(uint16_t));
        if (!halves) return error_set(err, "%s: out of memory", path);
        for (size_t i = 0; i < total; i++) {
            halves[i] = f32_to_f16(s->k[i]);
            halves[total + i] = f32_to_f16(s->v[i]);
        }
    }
    int n_tensors = 2 * s->n_layers;
    StTensorOut *t = calloc((size_t)n_tensors, sizeof *t);
    char (*names)[32] = calloc((size_t)n_tensors, sizeof *names);
    int rc = -1;
    if (!t || !names) { error_set(err, "%s: out of memory", path); goto done; }
    for (int i = 0; i < n_tensors; i++) {
        int layer = i / 2, is_value = i % 2;
        snprintf(names[i], sizeof names[i], "layer_%d_%s", layer, is_value ? "value" : "key");
        t[i].name = names[i];
        t[i].dtype = dtype;
        t[i].ndim = 4;
        t[i].shape[0] = 1;
        t[i].shape[1] = s->n_kv_heads;
        t[i].shape[2] = s->seq_len;
        t[i].shape[3] = s->head_dim;
        size_t at = (size_t)layer * per_layer + (is_value ? total : 0);
        if (halves) t[i].data = halves + at;
        else t[i].data = (is_value ? s->v : s->k) + (size_t)layer * per_layer;
    }
    char values[KV_META_FIELDS][4096];
    const char *keys[KV_META_FIELDS], *vals[KV_META_FIELDS];
    int n_meta = meta_pairs(&meta, values, keys);
    for (int i = 0; i < n_meta; i++) vals[i] = values[i];
    if (st_write(path, t, n_tensors, keys, vals, n_meta, err) == 0) rc = write_sidecar(path, &meta, err);
done:
    free(t);
    free(names);
    free(halves);
    return rc;
}

/* ---- loading ---- */

static int meta_int(const SafeTensors *st, const char *key, int *out) {
    const char *v = st_meta(st, key);
    if (!v) return 0;     /* absent: the tensors decide */
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 0 || x > (1L << 30)) return -1;
    *out = (int)x;
    return 1;
}

/* Widens one tensor's data (F32, F16 or BF16, checked by check_tensor) to f32; data may be unaligned. */
static void tensor_to_f32(const Tensor *t, float *out) {
    const unsigned char *p = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        if (t->dtype == DT_F32) {
            memcpy(&out[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
    }
}

/* Checks one layer_{i}_{key,value} tensor against the shape of layer 0's key. */
static int check_tensor(const Tensor *t, const KvSnapshot *s, const char *path, Error *err) {
    if (t->dtype != DT_F32 && t->dtype != DT_F16 && t->dtype != DT_BF16)
        return error_set(err, "%s: tensor '%s' has dtype %s (F32, F16 or BF16 expected)", path, t->name, dtype_name(t->dtype));
    if (t->ndim != 4 || t->shape[0] != 1)
        return error_set(err, "%s: tensor '%s' must have shape [1, kv_heads, seq_len, head_dim]", path, t->name);
    if (t->shape[1] != s->n_kv_heads || t->shape[2] != s->seq_len || t->shape[3] != s->head_dim)
        return error_set(err, "%s: tensor '%s' has shape [1, %lld, %lld, %lld], expected [1, %d, %d, %d]", path, t->name,
                         (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                         s->n_kv_heads, s->seq_len, s->head_dim);
    return 0;
}

/* Reads the geometry from layer_0_key and the metadata, which must agree. */
static int read_geometry(const SafeTensors *st, KvSnapshot *s, Error *err) {
    const char *path = st->path;
    const Tensor *k0 = st_find(st, "layer_0_key");
    if (!k0) return error_set(err, "%s: no tensor 'layer_0_key': not a KV cache file", path);
    if (k0->ndim != 4 || k0->shape[0] != 1 || k0->shape[1] < 1 || k0->shape[2] < 1 || k0->shape[3] < 1 ||
        k0->shape[1] > (1 << 20) || k0->shape[2] > (1 << 24) || k0->shape[3] > (1 << 20))
        return error_set(err, "%s: tensor 'layer_0_key' must have shape [1, kv_heads, seq_len, head_dim]", path);
    s->n_kv_heads = (int)k0->shape[1];
    s->seq_len = (int)k0->shape[2];
    s->head_dim = (int)k0->shape[3];
    s->n_layers = st->n_tensors / 2;
    const char *names[4] = {"num_layers", "num_kv_heads", "seq_len", "head_dim"};
    int *fields[4] = {&s->n_layers, &s->n_kv_heads, &s->seq_len, &s->head_dim};
    for (int i = 0; i < 4; i++) {
        int v = 0, got = meta_int(st, names[i], &v);
        if (got < 0) return error_set(err, "%s: metadata %s is not a number", path, names[i]);
        if (got && v != *fields[i])
            return error_set(err, "%s: metadata %s = %d but the tensors say %d", path, names[i], v, *fields[i]);
    }
    if (st->n_tensors != 2 * s->n_layers)
        return error_set(err, "%s: %d tensors; a KV cache has a key and a value per layer", path, st->n_tensors);
    const char *name = st_meta(st, "model_name"), *tokens = st_meta(st, "tokens");
    snprintf(s->model_name, sizeof s->model_name, "%s", name ? name : "");
    snprintf(s->tokens, sizeof s->tokens, "%s", tokens ? tokens : "");
    snprintf(s->dtype, sizeof s->dtype, k0->dtype == DT_F32 ? "float32" : k0->dtype == DT_F16 ? "float16" : "bfloat16");
    return kv_snapshot_read_identity(st, s, err);
}

int kv_snapshot_read_identity(const SafeTensors *st, KvSnapshot *s, Error *err) {
    const char *keys[2] = {"model_id", "model_sha256"};
    char *fields[2] = {s->model_id, s->model_sha256}, shown[72];
    for (int i = 0; i < 2; i++) {
        const char *v = st_meta(st, keys[i]);
        fields[i][0] = '\0';
        if (!v) continue;
        if (!sha256_hex_valid(v))
            return error_set(err, "%s: metadata '%s' = '%s' is invalid (64 lowercase hex digits)", st->path, keys[i],
                             error_shown(v, shown));
        memcpy(fields[i], v, 65);
    }
    return 0;
}

/* layer_{l}_key or layer_{l}_value, checked against the geometry; NULL after an error. */
static const Tensor *layer_tensor(const SafeTensors *st, const KvSnapshot *s, int l, int is_value, Error *err) {
    char name[48];
    snprintf(name, sizeof name, "layer_%d_%s", l, is_value ? "value" : "key");
    const Tensor *t = st_find(st, name);
    if (!t) { error_set(err, "%s: missing tensor '%s'", st->path, name); return NULL; }
    return check_tensor(t, s, st->path, err) ? NULL : t;
}

int kv_snapshot_from_safetensors(const SafeTensors *st, KvSnapshot *s, Error *err) {
    memset(s, 0, sizeof *s);
    if (read_geometry(st, s, err)) return -1;
    /* Every tensor is checked before anything is allocated: the sizes then come from data
     * that is really in the file, not from a header that merely claims it. */
    for (int l = 0; l < s->n_layers; l++)
        if (!layer_tensor(st, s, l, 0, err) || !layer_tensor(st, s, l, 1, err)) return -1;
    if (kv_snapshot_alloc(s, err)) return -1;
    size_t per_layer = kv_snapshot_layer_size(s);
    for (int l = 0; l < s->n_layers; l++)
        for (int is_value = 0; is_value < 2; is_value++) {
            const Tensor *t = layer_tensor(st, s, l, is_value, err);
            float *x = (is_value ? s->v : s->k) + (size_t)l * per_layer;
            tensor_to_f32(t, x);
            /* A real cache is finite; NaN/inf would silently poison every metric downstream. */
            for (size_t i = 0; i < per_layer; i++)
                if (!isfinite(x[i])) {
                    error_set(err, "%s: tensor '%s' holds a non-finite value at element %zu", st->path, t->name, i);
                    kv_snapshot_free(s);
                    return -1;
                }
        }
    return 0;
}

int kv_snapshot_load(const char *path, KvSnapshot *s, Error *err) {
    SafeTensors st;
    if (st_open(&st, path, err)) return -1;
    int rc = kv_snapshot_from_safetensors(&st, s, err);
    st_close(&st);
    return rc;
}

/* ---- checks and statistics ---- */

void kv_snapshot_stats(const KvSnapshot *s, KvStats *out) {
    memset(out, 0, sizeof *out);
    size_t half = kv_snapshot_layer_size(s) * s->n_layers;
    double sum = 0, sumsq = 0, lo = INFINITY, hi = -INFINITY;
    for (int which = 0; which < 2; which++) {
        const float *x = which ? s->v : s->k;
        for (size_t i = 0; i < half; i++) {
            sum += x[i];
            sumsq += (double)x[i] * x[i];
            if (x[i] < lo) lo = x[i];
            if (x[i] > hi) hi = x[i];
        }
    }
    out->elements = 2 * half;
    out->bytes = out->elements * (strcmp(s->dtype, "float32") ? 2 : 4);
    out->megabytes = out->bytes / (1024.0 * 1024.0);
    out->mean = out->elements ? sum / out->elements : 0;
    double var = out->elements ? sumsq / out->elements - out->mean * out->mean : 0;
    out->std = sqrt(var > 0 ? var : 0);
    out->min = lo;
    out->max = hi;
}
