/* model/compress.c: compress a KV cache snapshot with a scheme into a file, and back. */
#include "model/compress.h"
#include "quant/lz4.h"
#include "quant/half.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FORMAT_NAME "kvq-compressed-1"

const char *quality_level(double rmse, double snr_db) {
    if (rmse < 0.01 && snr_db > 40) return "EXCELLENT";
    if (rmse < 0.05 && snr_db > 30) return "GOOD";
    if (rmse < 0.10 && snr_db > 18) return "ACCEPTABLE";
    return "POOR";
}

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Bytes of the codes part of a packed buffer of n values (the rest are group parameters). */
static size_t code_bytes(const KvScheme *s, size_t n) { return n * (size_t)s->bits / 8; }

static void judge(CompressReport *r, const CompressOptions *o) {
    const KvQuality *q = &r->quality;
    r->quality_level = quality_level(q->rmse, q->snr_db);
    r->n_violations = 0;
    if (!(q->rmse < o->max_rmse))
        snprintf(r->violations[r->n_violations++], 96, "rmse %.6f is not below %.4f", q->rmse, o->max_rmse);
    if (!(q->snr_db > o->min_snr_db))
        snprintf(r->violations[r->n_violations++], 96, "snr_db %.3f is not above %.2f", q->snr_db, o->min_snr_db);
    if (!(q->cosine_similarity > o->min_cosine))
        snprintf(r->violations[r->n_violations++], 96, "cosine_similarity %.6f is not above %.4f",
                 q->cosine_similarity, o->min_cosine);
    r->passed = r->n_violations == 0;
}

/* Everything kv_compress builds per tensor before the file is written. */
typedef struct {
    char names[2][40];         /* NAME.codes, NAME.params */
    unsigned char *packed;     /* [codes][params] */
    unsigned char *lz4;        /* LZ4 block of the codes (when on) */
    size_t lz4_len;
} PackedTensor;

/* The scheme of one side: keys at even tensor indices, values at odd ones (file order). */
static const KvScheme *side_scheme(const CompressOptions *o, int is_value) {
    return is_value ? o->v_scheme : o->k_scheme;
}

static int check_scheme(const KvSnapshot *s, const KvScheme *sc, Error *err) {
    /* A group must cover whole rows or a whole number of groups must fill a row, so no group
     * mixes part of one token's row with another's (g128 on head_dim 64 spans two tokens). */
    int g = sc->group_size;
    if (g > 0 && s->head_dim % g != 0 && g % s->head_dim != 0)
        return error_set(err, "%s: group size %d does not divide head_dim %d", sc->name, g, s->head_dim);
    if (!kv_scheme_accepts(sc, kv_snapshot_layer_size(s)))
        return error_set(err, "scheme %s cannot pack %zu values", sc->name, kv_snapshot_layer_size(s));
    return 0;
}

static int check_options(const KvSnapshot *s, const CompressOptions *o, Error *err) {
    if (!(o->sparsity >= 0.0 && o->sparsity < 1.0))
        return error_set(err, "sparsity %g must be in [0, 1)", o->sparsity);
    return check_scheme(s, o->k_scheme, err) || check_scheme(s, o->v_scheme, err) ? -1 : 0;
}

/* Quantizes one tensor x[0..n) into pt (after optional sparsification), dequantizes into
 * x_hat and adds the errors to both accumulators. */
static int pack_tensor(const CompressOptions *o, const KvScheme *sc, const float *x, size_t n, PackedTensor *pt,
                       float *work, float *scratch, float *x_hat, KvMetrics *all, KvMetrics *side, KvMetrics *one) {
    pt->packed = malloc(sc->packed_bytes(sc, n));
    if (!pt->packed) return -1;
    memcpy(work, x, n * sizeof(float));
    if (o->sparsity > 0) kv_sparsify(work, n, o->sparsity, scratch);
    sc->quantize(sc, work, n, pt->packed);
    sc->dequantize(sc, pt->packed, n, x_hat);
    kv_metrics_add(all, x, x_hat, n);
    kv_metrics_add(side, x, x_hat, n);
    kv_metrics_add(one, x, x_hat, n);
    if (!o->lz4) return 0;
    size_t cb = code_bytes(sc, n);
    pt->lz4 = malloc(lz4_compress_bound(cb));
    if (!pt->lz4) return -1;
    pt->lz4_len = lz4_compress(pt->packed, cb, pt->lz4, lz4_compress_bound(cb));
    return pt->lz4_len ? 0 : -1;
}

static int write_compressed(const char *path, const KvSnapshot *s, const CompressOptions *o,
                            PackedTensor *pts, Error *err) {
    size_t n = kv_snapshot_layer_size(s);
    int n_src = 2 * s->n_layers, n_out = 0;
    StTensorOut *t = calloc((size_t)n_src * 2, sizeof *t);
    if (!t) return error_set(err, "%s: out of memory", path);
    for (int i = 0; i < n_src; i++) {
        const KvScheme *sc = side_scheme(o, i % 2);
        size_t cb = code_bytes(sc, n), groups = sc->group_size > 0 ? n / (size_t)sc->group_size : 0;
        PackedTensor *pt = &pts[i];
        StTensorOut *codes = &t[n_out++];
        codes->name = pt->names[0];
        codes->dtype = DT_U8;
        codes->ndim = 1;
        codes->shape[0] = (int64_t)(o->lz4 ? pt->lz4_len : cb);
        codes->data = o->lz4 ? pt->lz4 : pt->packed;
        if (sc->n_params == 0) continue;
        StTensorOut *params = &t[n_out++];
        params->name = pt->names[1];
        params->dtype = DT_F16;
        params->ndim = 2;
        params->shape[0] = (int64_t)groups;
        params->shape[1] = sc->n_params;
        params->data = pt->packed + cb;
    }
    char num[4][16], sparsity[32];
    snprintf(num[0], 16, "%d", s->n_layers);
    snprintf(num[1], 16, "%d", s->n_kv_heads);
    snprintf(num[2], 16, "%d", s->seq_len);
    snprintf(num[3], 16, "%d", s->head_dim);
    snprintf(sparsity, sizeof sparsity, "%.17g", o->sparsity);
    const char *keys[] = {"format", "k_scheme", "v_scheme", "lz4", "sparsity", "num_layers", "num_kv_heads",
                          "seq_len", "head_dim", "dtype", "model_name"};
    const char *vals[] = {FORMAT_NAME, o->k_scheme->name, o->v_scheme->name, o->lz4 ? "1" : "0", sparsity, num[0],
                          num[1], num[2], num[3], s->dtype, s->model_name};
    int rc = st_write(path, t, n_out, keys, vals, 11, err);
    free(t);
    return rc;
}

int kv_compress(const KvSnapshot *s, const CompressOptions *o, const char *out_path,
                CompressReport *r, KvSnapshot *recon, Error *err) {
    memset(r, 0, sizeof *r);
    if (check_options(s, o, err)) return -1;
    double t0 = ms_now();
    size_t n = kv_snapshot_layer_size(s);
    int n_src = 2 * s->n_layers, rc = -1;
    PackedTensor *pts = calloc((size_t)n_src, sizeof *pts);
    float *work = malloc(n * sizeof(float)), *scratch = malloc(n * sizeof(float)), *x_hat = malloc(n * sizeof(float));
    r->tensors = calloc((size_t)n_src, sizeof *r->tensors);
    if (recon) {
        *recon = *s;
        recon->k = recon->v = NULL;
        recon->k = malloc(n * s->n_layers * sizeof(float));
        recon->v = malloc(n * s->n_layers * sizeof(float));
    }
    if (!pts || !work || !scratch || !x_hat || !r->tensors || (recon && (!recon->k || !recon->v))) {
        error_set(err, "out of memory");
        goto done;
    }
    KvMetrics all, sides[2];
    kv_metrics_init(&all);
    kv_metrics_init(&sides[0]);
    kv_metrics_init(&sides[1]);
    for (int i = 0; i < n_src; i++) {
        int layer = i / 2, is_value = i % 2;
        const KvScheme *sc = side_scheme(o, is_value);
        const float *x = (is_value ? s->v : s->k) + (size_t)layer * n;
        TensorQuality *tq = &r->tensors[i];
        snprintf(tq->name, sizeof tq->name, "layer_%d_%s", layer, is_value ? "value" : "key");
        snprintf(pts[i].names[0], sizeof pts[i].names[0], "%s.codes", tq->name);
        snprintf(pts[i].names[1], sizeof pts[i].names[1], "%s.params", tq->name);
        KvMetrics one;
        kv_metrics_init(&one);
        if (pack_tensor(o, sc, x, n, &pts[i], work, scratch, x_hat, &all, &sides[is_value], &one)) {
            error_set(err, "out of memory");
            goto done;
        }
        tq->elements = n;
        tq->quality = kv_metrics_finish(&one);
        if (recon) memcpy((is_value ? recon->v : recon->k) + (size_t)layer * n, x_hat, n * sizeof(float));
        r->lz4_codes_in += o->lz4 ? code_bytes(sc, n) : 0;
        r->lz4_codes_out += pts[i].lz4_len;
        *(is_value ? &r->v_compressed_bytes : &r->k_compressed_bytes) += sc->packed_bytes(sc, n);
    }
    r->n_tensors = n_src;
    r->n_elements = n * (size_t)n_src;
    r->original_bytes = r->n_elements * 2;
    r->compressed_bytes = r->k_compressed_bytes + r->v_compressed_bytes;
    r->compression_ratio = (double)r->original_bytes / (double)r->compressed_bytes;
    r->quality = kv_metrics_finish(&all);
    r->k_quality = kv_metrics_finish(&sides[0]);
    r->v_quality = kv_metrics_finish(&sides[1]);
    judge(r, o);
    if (out_path) {
        if (write_compressed(out_path, s, o, pts, err)) goto done;
        struct stat sb;
        r->file_bytes = stat(out_path, &sb) == 0 ? (size_t)sb.st_size : 0;
    }
    r->processing_ms = ms_now() - t0;
    rc = 0;
done:
    for (int i = 0; pts && i < n_src; i++) { free(pts[i].packed); free(pts[i].lz4); }
    free(pts); free(work); free(scratch); free(x_hat);
    if (rc && recon) kv_snapshot_free(recon);
    if (rc) compress_report_free(r);
    return rc;
}

void compress_report_free(CompressReport *r) {
    free(r->tensors);
    r->tensors = NULL;
}

/* ---- reading a compressed file ---- */

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

/* Rebuilds the packed buffer [codes][params] of one tensor from the file and checks it. */
static int read_packed(const SafeTensors *st, const char *base, const KvScheme *sc, size_t n, int lz4,
                       unsigned char *packed, Error *err) {
    char name[64];
    size_t cb = code_bytes(sc, n), pb = sc->packed_bytes(sc, n) - cb;
    snprintf(name, sizeof name, "%s.codes", base);
    const Tensor *codes = st_find(st, name);
    if (!codes || codes->dtype != DT_U8 || codes->ndim != 1)
        return error_set(err, "%s: missing or malformed tensor '%s'", st->path, name);
    if (lz4) {
        size_t got = 0;
        int e = lz4_decompress(codes->data, codes->nbytes, packed, cb, &got);
        if (e != LZ4_OK) return error_set(err, "%s: tensor '%s': LZ4 block is corrupt (%s)", st->path, name, lz4_error_name(e));
        if (got != cb) return error_set(err, "%s: tensor '%s' holds %zu code bytes, expected %zu", st->path, name, got, cb);
    } else {
        if (codes->nbytes != cb)
            return error_set(err, "%s: tensor '%s' holds %zu code bytes, expected %zu", st->path, name, codes->nbytes, cb);
        memcpy(packed, codes->data, cb);
    }
    if (pb == 0) return 0;
    snprintf(name, sizeof name, "%s.params", base);
    const Tensor *params = st_find(st, name);
    if (!params || params->dtype != DT_F16 || params->nbytes != pb)
        return error_set(err, "%s: tensor '%s' missing or not F16 [%zu, %d]", st->path, name,
                         n / (size_t)sc->group_size, sc->n_params);
    memcpy(packed + cb, params->data, pb);
    for (size_t i = 0; i < pb / 2; i++) {
        uint16_t h;
        memcpy(&h, packed + cb + 2 * i, 2);
        if (!isfinite(f16_to_f32(h)))
            return error_set(err, "%s: tensor '%s' has a non-finite scale or minimum (group %zu)", st->path, name,
                             i / (size_t)sc->n_params);
    }
    return 0;
}

/* The scheme of one side from the metadata: "k_scheme" / "v_scheme", or the older "scheme"
 * that held one for both. */
static const KvScheme *meta_scheme(const SafeTensors *st, const char *key, Error *err) {
    const char *name = st_meta(st, key);
    if (!name) name = st_meta(st, "scheme");
    const KvScheme *sc = name ? kv_scheme_find(name) : NULL;
    char shown[72];
    if (!sc) error_set(err, "%s: unknown scheme '%s' (metadata %s)", st->path, name ? error_shown(name, shown) : "(none)", key);
    return sc;
}

/* Every code byte must be in the file (LZ4 expands at most 255x): this bounds allocations. */
static int geometry_ok(const SafeTensors *st, const KvScheme *sc, long layers, long dim, size_t n, long lz4) {
    return (double)n * layers * sc->bits / 8 <= (double)st->size * (lz4 ? 255.0 : 1.0) &&
           !(sc->group_size && dim % sc->group_size && sc->group_size % dim) && kv_scheme_accepts(sc, n);
}

int kv_decompress_safetensors(const SafeTensors *st, KvSnapshot *out, Error *err) {
    memset(out, 0, sizeof *out);
    const char *format = st_meta(st, "format");
    if (!format || strcmp(format, FORMAT_NAME) != 0)
        return error_set(err, "%s: not a kvq compressed file (metadata format is not %s)", st->path, FORMAT_NAME);
    const KvScheme *schemes[2] = {meta_scheme(st, "k_scheme", err), NULL};
    if (!schemes[0] || !(schemes[1] = meta_scheme(st, "v_scheme", err))) return -1;
    long layers = 0, heads = 0, seq = 0, dim = 0, lz4 = 0;
    if (meta_number(st, "num_layers", 1, 4096, &layers, err) || meta_number(st, "num_kv_heads", 1, 4096, &heads, err) ||
        meta_number(st, "seq_len", 1, 1 << 24, &seq, err) || meta_number(st, "head_dim", 1, 65536, &dim, err) ||
        meta_number(st, "lz4", 0, 1, &lz4, err))
        return -1;
    out->n_layers = (int)layers;
    out->n_kv_heads = (int)heads;
    out->seq_len = (int)seq;
    out->head_dim = (int)dim;
    size_t n = kv_snapshot_layer_size(out);
    if (!geometry_ok(st, schemes[0], layers, dim, n, lz4) || !geometry_ok(st, schemes[1], layers, dim, n, lz4) ||
        (double)n * layers * (schemes[0]->bits + schemes[1]->bits) / 8 > (double)st->size * (lz4 ? 255.0 : 1.0))
        return error_set(err, "%s: metadata geometry does not match the file's contents", st->path);
    const char *name = st_meta(st, "model_name"), *dtype = st_meta(st, "dtype");
    snprintf(out->model_name, sizeof out->model_name, "%s", name ? name : "");
    snprintf(out->dtype, sizeof out->dtype, "%s", dtype && !strcmp(dtype, "float16") ? "float16" : "float32");
    out->k = malloc(n * layers * sizeof(float));
    out->v = malloc(n * layers * sizeof(float));
    size_t k_bytes = schemes[0]->packed_bytes(schemes[0], n), v_bytes = schemes[1]->packed_bytes(schemes[1], n);
    unsigned char *packed = malloc(k_bytes > v_bytes ? k_bytes : v_bytes);
    int rc = 0;
    if (!out->k || !out->v || !packed) rc = error_set(err, "%s: out of memory", st->path);
    for (int i = 0; rc == 0 && i < 2 * out->n_layers; i++) {
        char base[32];
        int layer = i / 2, is_value = i % 2;
        const KvScheme *sc = schemes[is_value];
        snprintf(base, sizeof base, "layer_%d_%s", layer, is_value ? "value" : "key");
        rc = read_packed(st, base, sc, n, (int)lz4, packed, err);
        if (rc == 0) sc->dequantize(sc, packed, n, (is_value ? out->v : out->k) + (size_t)layer * n);
    }
    free(packed);
    if (rc) kv_snapshot_free(out);
    return rc;
}

int kv_decompress_file(const char *path, KvSnapshot *out, Error *err) {
    SafeTensors st;
    if (st_open(&st, path, err)) return -1;
    int rc = kv_decompress_safetensors(&st, out, err);
    st_close(&st);
    return rc;
}
