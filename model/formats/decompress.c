/* model/formats/decompress.c: a compressed KV file read back (kv_decompress_file,
 * kv_load_any): the format and its checksums first, then the metadata (shape, schemes, the
 * calibration the file records), every tensor's size bounded by the file's before anything is
 * allocated, each tensor unpacked (compress_plan.h) and refused if it decodes to a non-finite
 * value; and the bits a value of each tensor (kv_load_any_bits). See compress.h for the file. */
#include "model/formats/compress.h"
#include "model/formats/compress_plan.h"
#include "model/formats/st_checksum.h"
#include "model/formats/entropy_pack.h"
#include "quant/lz4.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ENTROPY_MAX_EXPANSION 4096.0        /* an entropy-coded file holds at least 1/4096 of its units' bytes */

/* ---- checksums (format 3) ---- */

/* A format-3 file's header against its header_crc32c (st_checksum.h), which a format-3 file must have. */
static int check_header_crc(const SafeTensors *st, Error *err) {
    if (!st_meta(st, ST_HEADER_CRC_KEY))
        return error_set(err, "%s: metadata '" ST_HEADER_CRC_KEY "' missing: a " COMPRESSED_FORMAT " file has one", st->path);
    return st_check_header(st, err);
}

/* A format-2 file has no checksums: one that holds format 3's was a format-3 file whose format
 * name changed (one flipped bit turns -3 into -2), and is refused rather than read unchecked. */
static int check_no_crc(const SafeTensors *st, Error *err) {
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], ST_HEADER_CRC_KEY) || !strncmp(st->meta_keys[i], COMPRESSED_TENSOR_CRC_PREFIX, 7))
            return error_set(err, "%s: format " COMPRESSED_FORMAT_V2 " with the checksums of " COMPRESSED_FORMAT " (metadata '%s'): its "
                             "format name is damaged or was edited", st->path, st->meta_keys[i]);
    return 0;
}

static int meta_number(const SafeTensors *st, const char *key, long lo, long hi, long *out, Error *err) {
    const char *v = st_meta(st, key);
    char *end;
    if (!v) return error_set(err, "%s: metadata '%s' missing: not a kvq compressed file", st->path, key);
    long x = strtol(v, &end, 10);
    char shown[72];
    if (end == v || *end || x < lo || x > hi)
        return error_set(err, "%s: metadata '%s' = '%s' is invalid", st->path, key, error_shown(v, shown));
    *out = x;
    return 0;
}

/* The scheme of one side from the metadata, bound to the file's shape. */
static int meta_scheme(const SafeTensors *st, const char *key, long layers, long head_dim, KvSide side, KvLayered *l,
                       Error *err) {
    const char *text = st_meta(st, key);
    char why[256], shown[72];
    if (!text) return error_set(err, "%s: metadata '%s' missing: not a kvq compressed file", st->path, key);
    if (kv_layered_parse(text, side, l, why, sizeof why) ||
        compressed_scheme_bind(l, (int)layers, (int)head_dim, side, why, sizeof why)) {
        for (char *c = why; *c; c++)   /* the refusal quotes the file's text: keep it one line */
            if ((unsigned char)*c < 0x20 || *c == 0x7F) *c = '?';
        return error_set(err, "%s: metadata %s '%s': %s", st->path, key, error_shown(text, shown), why);
    }
    return 0;
}

/* Index of the first NaN or infinite value of x[0..n), or n. */
static size_t first_non_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* How a file stores its tensors: .packed as LZ4 blocks, as entropy-coded sections (format 4) or
 * as the units themselves; with CRC-32Cs to check (formats 3 and 4) or without (format 2). */
typedef struct {
    int lz4, entropy, checksummed;
} StoredForm;

/* Copies one tensor's packed units (inflating LZ4, decoding entropy-coded sections) and full rows
 * out of the file, checked. */
static int read_tensor(const SafeTensors *st, const char *base, const TensorPlan *p, const StoredForm *form,
                       unsigned char *packed, uint16_t *full, Error *err) {
    char name[64];
    size_t want = plan_packed_bytes(p);
    snprintf(name, sizeof name, "%s.packed", base);
    const Tensor *t = st_find(st, name);
    if (!t || t->dtype != DT_U8 || t->ndim != 1)
        return error_set(err, "%s: missing or malformed tensor '%s'", st->path, name);
    if (form->checksummed && st_check_tensor(st, t, err)) return -1;
    if (form->entropy) {
        char what[4200];
        EntropyShape shape = plan_entropy_shape(p);
        snprintf(what, sizeof what, "%s: tensor '%s'", st->path, name);
        if (entropy_unpack(plan_specs(p), p->head_specs != NULL, &shape, t->data, t->nbytes, packed, what, err)) return -1;
    } else if (form->lz4) {
        size_t got = 0;
        int e = lz4_decompress(t->data, t->nbytes, packed, want, &got);
        if (e != LZ4_OK) return error_set(err, "%s: tensor '%s': LZ4 block is corrupt (%s)", st->path, name, lz4_error_name(e));
        if (got != want) return error_set(err, "%s: tensor '%s' holds %zu bytes, expected %zu", st->path, name, got, want);
    } else {
        if (t->nbytes != want)
            return error_set(err, "%s: tensor '%s' holds %zu bytes, expected %zu", st->path, name, t->nbytes, want);
        if (want) memcpy(packed, t->data, want);
    }
    int rows = plan_full_rows(p);
    snprintf(name, sizeof name, "%s.full", base);
    t = st_find(st, name);
    if (rows == 0) return t ? error_set(err, "%s: tensor '%s' is not expected under this scheme", st->path, name) : 0;
    if (!t || t->dtype != DT_F16 || t->ndim != 3 || t->shape[0] != p->heads || t->shape[1] != rows || t->shape[2] != p->row)
        return error_set(err, "%s: tensor '%s' missing or not F16 [%d, %d, %d]", st->path, name, p->heads, rows, p->row);
    if (form->checksummed && st_check_tensor(st, t, err)) return -1;
    memcpy(full, t->data, t->nbytes);
    return 0;
}

static int read_shape(const SafeTensors *st, KvSnapshot *out, long *lz4, Error *err) {
    long layers = 0, heads = 0, seq = 0, dim = 0;
    if (meta_number(st, "num_layers", 1, 4096, &layers, err) || meta_number(st, "num_kv_heads", 1, 4096, &heads, err) ||
        meta_number(st, "seq_len", 1, 1 << 24, &seq, err) || meta_number(st, "head_dim", 1, 4096, &dim, err) ||
        meta_number(st, "lz4", 0, 1, lz4, err))
        return -1;
    out->n_layers = (int)layers;
    out->n_kv_heads = (int)heads;
    out->seq_len = (int)seq;
    out->head_dim = (int)dim;
    const char *name = st_meta(st, "model_name"), *dtype = st_meta(st, "dtype");
    snprintf(out->model_name, sizeof out->model_name, "%s", name ? name : "");
    snprintf(out->dtype, sizeof out->dtype, "%s", dtype && !strcmp(dtype, "float16") ? "float16" : "float32");
    return 0;
}

/* A file packed with fitted tables records the sha256 of the calibration that held them
 * (calib_sha256); it decodes only with that file, which must be a calibration of the model the
 * cache came from when the file records it (model_sha256). A file without fitted bases has no
 * such key. */
static int check_calibration(const SafeTensors *st, const KvSnapshot *shape, const KvLayered *k, const KvLayered *v,
                             const Calibration *calib, Error *err) {
    const char *sha = st_meta(st, "calib_sha256");
    int fitted = kv_layered_is_fitted(k) || kv_layered_is_fitted(v);
    char shown[72];
    if (sha && !compressed_hash_ok(sha))
        return error_set(err, "%s: metadata 'calib_sha256' = '%s' is invalid (64 lowercase hex digits)", st->path,
                         error_shown(sha, shown));
    if (!fitted) return sha ? error_set(err, "%s: metadata 'calib_sha256' without a fitted scheme", st->path) : 0;
    if (!sha)
        return error_set(err, "%s: fitted schemes (keys %.100s, values %.100s) without metadata 'calib_sha256'", st->path,
                         k->text, v->text);
    if (!calib)
        return error_set(err, "%s: packed with the tables of the calibration of sha256 %s: give that file with --calib "
                         "FILE", st->path, sha);
    if (strcmp(calib->file_sha256, sha))
        return error_set(err, "%s: packed with the calibration of sha256 %s, but --calib %s has sha256 %s: give the same "
                         "file", st->path, sha, calib->path, calib->file_sha256);
    Error why;
    if (compressed_calib_geometry_check(calib, shape->n_layers, shape->n_kv_heads, shape->head_dim, "the file", &why))
        return error_set(err, "%s: %s", st->path, why.msg);
    if (shape->model_sha256[0] && strcmp(shape->model_sha256, calib->model_sha256))
        return error_set(err, "%s: a cache of the model of sha256 %.12s..., but --calib %s is a calibration of %.12s...",
                         st->path, shape->model_sha256, calib->path, calib->model_sha256);
    return 0;
}

static void free_plans(TensorPlan *plans, int n) {
    for (int i = 0; plans && i < n; i++) free(plans[i].head_specs);
    free(plans);
}

/* The bits of tensor i from its units and full rows, and in format 4 its stored section bytes. */
static int tensor_bits(const TensorPlan *p, const unsigned char *packed, size_t stored_packed_bytes, KvTensorBits *b,
                       Error *err) {
    EntropyStats es = {0};
    EntropyShape shape = plan_entropy_shape(p);
    unsigned char *blob = NULL;
    size_t len = 0;
    if (entropy_pack(plan_specs(p), p->head_specs != NULL, &shape, packed, &blob, &len, &es, err)) return -1;
    free(blob);
    double values = (double)p->heads * p->positions * p->row, full = 16.0 * p->heads * plan_full_rows(p) * p->row;
    b->stored = (8.0 * (double)stored_packed_bytes + full) / values;
    b->coded = (es.coded_bits + es.rest_bits + full) / values;
    b->entropy = (es.code_entropy_bits + es.param_bits + full) / values;
    return 0;
}

static int decompress(const SafeTensors *st, const Calibration *calib, KvSnapshot *out, KvTensorBits **bits, Error *err);

int kv_decompress_safetensors(const SafeTensors *st, const Calibration *calib, KvSnapshot *out, Error *err) {
    return decompress(st, calib, out, NULL, err);
}

static int decompress(const SafeTensors *st, const Calibration *calib, KvSnapshot *out, KvTensorBits **bits, Error *err) {
    memset(out, 0, sizeof *out);
    const char *format = st_meta(st, "format");
    int v4 = format && !strcmp(format, COMPRESSED_FORMAT_ENTROPY);
    int v3 = v4 || (format && !strcmp(format, COMPRESSED_FORMAT)), v2 = format && !strcmp(format, COMPRESSED_FORMAT_V2);
    if (!v3 && !v2)
        return error_set(err, "%s: not a kvq compressed file (metadata format is not %s, %s or %s)", st->path,
                         COMPRESSED_FORMAT_ENTROPY, COMPRESSED_FORMAT, COMPRESSED_FORMAT_V2);
    /* the header first, so that damage anywhere in it is named as such, not as what it broke */
    if (v3 ? check_header_crc(st, err) : check_no_crc(st, err)) return -1;
    const char *entropy_key = st_meta(st, "entropy");
    if ((entropy_key != NULL) != v4 || (entropy_key && strcmp(entropy_key, "1")))
        return error_set(err, "%s: metadata 'entropy' %s format %s", st->path, v4 ? "must be \"1\" in" : "does not belong in",
                         format);
    long lz4 = 0;
    KvLayered k, v;
    if (read_shape(st, out, &lz4, err) || kv_snapshot_read_identity(st, out, err) ||
        meta_scheme(st, "k_scheme", out->n_layers, out->head_dim, KV_SIDE_KEYS, &k, err) ||
        meta_scheme(st, "v_scheme", out->n_layers, out->head_dim, KV_SIDE_VALUES, &v, err) ||
        check_calibration(st, out, &k, &v, calib, err))
        return -1;
    /* Every stored byte must be in the file (LZ4 expands at most 255x): this bounds allocations. */
    size_t n = kv_snapshot_layer_size(out);
    int n_src = 2 * out->n_layers;
    TensorPlan *plans = calloc((size_t)n_src, sizeof *plans);
    if (!plans) return error_set(err, "%s: out of memory", st->path);
    char why[256];
    Error bind_err;
    double stored = 0;
    size_t largest_packed = 0, largest_full = 0;
    for (int i = 0; i < n_src; i++) {
        if (tensor_plan_make(kv_layered_at(i % 2 ? &v : &k, i / 2), out->n_kv_heads, out->seq_len, out->head_dim,
                             &plans[i], why, sizeof why)) {
            free_plans(plans, n_src);
            return error_set(err, "%s: %s", st->path, why);
        }
        /* the calibration's geometry is the file's (check_calibration): these are bounded by it */
        if (tensor_plan_bind_tables(&plans[i], calib, i / 2, &bind_err)) {
            free_plans(plans, n_src);
            return error_set(err, "%s: %s", st->path, bind_err.msg);
        }
        size_t packed = plan_packed_bytes(&plans[i]), full = (size_t)plans[i].heads * plan_full_rows(&plans[i]) * plans[i].row;
        stored += (double)packed / (lz4 ? 255.0 : v4 ? ENTROPY_MAX_EXPANSION : 1.0) + 2.0 * (double)full;
        if (packed > largest_packed) largest_packed = packed;
        if (full > largest_full) largest_full = full;
    }
    if (v4 && lz4) {
        free_plans(plans, n_src);
        return error_set(err, "%s: metadata lz4 = 1 in an entropy-coded file", st->path);
    }
    if (stored > (double)st->size) {
        free_plans(plans, n_src);
        return error_set(err, "%s: metadata geometry does not match the file's contents", st->path);
    }
    out->k = malloc(n * out->n_layers * sizeof(float));
    out->v = malloc(n * out->n_layers * sizeof(float));
    unsigned char *packed = malloc(largest_packed ? largest_packed : 1);
    uint16_t *full = malloc((largest_full ? largest_full : 1) * sizeof(uint16_t));
    int rc = 0;
    if (bits && !(*bits = calloc((size_t)n_src, sizeof **bits))) rc = error_set(err, "%s: out of memory", st->path);
    if (!out->k || !out->v || !packed || !full) rc = error_set(err, "%s: out of memory", st->path);
    const StoredForm form = {.lz4 = (int)lz4, .entropy = v4, .checksummed = v3};
    for (int i = 0; rc == 0 && i < n_src; i++) {
        char base[32];
        snprintf(base, sizeof base, "layer_%d_%s", i / 2, i % 2 ? "value" : "key");
        rc = read_tensor(st, base, &plans[i], &form, packed, full, err);
        if (rc) break;
        char name[48];
        snprintf(name, sizeof name, "%s.packed", base);
        if (bits && (rc = tensor_bits(&plans[i], packed, st_find(st, name)->nbytes, &(*bits)[i], err))) break;
        float *x = (i % 2 ? out->v : out->k) + (size_t)(i / 2) * n;
        tensor_plan_unpack(&plans[i], packed, full, x);
        /* a NaN or infinite scale, minimum or stored value: refused, as a cache holding one is */
        size_t bad = first_non_finite(x, n);
        if (bad < n)
            rc = error_set(err, "%s: tensor '%s' decodes to a non-finite value at element %zu (a NaN or infinite "
                           "scale, minimum or stored value)", st->path, base, bad);
    }
    free(packed);
    free(full);
    free_plans(plans, n_src);
    if (rc) kv_snapshot_free(out);
    if (rc && bits) free(*bits), *bits = NULL;
    return rc;
}

int kv_load_any(const char *path, const Calibration *calib, KvSnapshot *out, char *k_scheme, char *v_scheme, size_t len,
                Error *err) {
    return kv_load_any_bits(path, calib, out, k_scheme, v_scheme, len, NULL, err);
}

int kv_load_any_bits(const char *path, const Calibration *calib, KvSnapshot *out, char *k_scheme, char *v_scheme,
                     size_t len, KvTensorBits **bits, Error *err) {
    SafeTensors st;
    if (bits) *bits = NULL;
    if (st_open(&st, path, err)) return -1;
    const char *format = st_meta(&st, "format"), *k = st_meta(&st, "k_scheme"), *v = st_meta(&st, "v_scheme");
    int compressed = format && (!strcmp(format, COMPRESSED_FORMAT) || !strcmp(format, COMPRESSED_FORMAT_V2) || !strcmp(format, COMPRESSED_FORMAT_ENTROPY));
    snprintf(k_scheme, len, "%s", compressed && k ? k : "");
    snprintf(v_scheme, len, "%s", compressed && v ? v : "");
    int rc = compressed ? decompress(&st, calib, out, bits, err) : kv_snapshot_from_safetensors(&st, out, err);
    st_close(&st);
    return rc;
}

int kv_decompress_file(const char *path, const Calibration *calib, KvSnapshot *out, Error *err) {
    SafeTensors st;
    if (st_open(&st, path, err)) return -1;
    int rc = kv_decompress_safetensors(&st, calib, out, err);
    st_close(&st);
    return rc;
}

