/* model/formats/compress.c: a KV cache snapshot stored under a scheme into a compressed file
 * (kv_compress): each tensor packed (compress_plan.h), the damage measured against the
 * thresholds, the file written with its checksums. Reading it back is decompress.c. See
 * model/formats/compress.h for the file. */
#include "model/formats/compress.h"
#include "model/formats/compress_plan.h"
#include "model/formats/crc32c.h"
#include "model/formats/st_checksum.h"
#include "model/formats/entropy_pack.h"
#include "quant/lz4.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
    char names[2][40];         /* NAME.packed, NAME.full */
    TensorPlan plan;
    unsigned char *packed;
    uint16_t *full;
    unsigned char *lz4;        /* LZ4 block of the packed units (when on) */
    size_t lz4_len;
    unsigned char *coded;      /* the entropy-coded sections of the packed units (--entropy) */
    size_t coded_len;
} PackedTensor;

/* The metadata of a written file: the fixed keys, the optional ones, a checksum per tensor and
 * the header's last. */
#define MAX_FIXED_META 14

static int write_compressed(const char *path, const KvSnapshot *s, const CompressOptions *o, const KvLayered *k,
                            const KvLayered *v, PackedTensor *pts, Error *err) {
    int n_src = 2 * s->n_layers, n_out = 0;
    StTensorOut *t = calloc((size_t)n_src * 2, sizeof *t);
    StHeaderTensor *ht = calloc((size_t)n_src * 2, sizeof *ht);
    const char **keys = calloc((size_t)n_src * 2 + MAX_FIXED_META + 1, sizeof *keys);
    const char **vals = calloc((size_t)n_src * 2 + MAX_FIXED_META + 1, sizeof *vals);
    char (*crc_keys)[48] = calloc((size_t)n_src * 2, sizeof *crc_keys);
    char (*crc_hex)[CRC32C_HEX_CHARS + 1] = calloc((size_t)n_src * 2, sizeof *crc_hex);
    int rc = -1;
    if (!t || !ht || !keys || !vals || !crc_keys || !crc_hex) {
        error_set(err, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < n_src; i++) {
        const PackedTensor *pt = &pts[i];
        StTensorOut *packed = &t[n_out++];
        packed->name = pt->names[0];
        packed->dtype = DT_U8;
        packed->ndim = 1;
        packed->shape[0] = (int64_t)(o->lz4 ? pt->lz4_len : o->entropy ? pt->coded_len : plan_packed_bytes(&pt->plan));
        packed->data = o->lz4 ? pt->lz4 : o->entropy ? pt->coded : pt->packed;
        if (plan_full_rows(&pt->plan) == 0) continue;
        StTensorOut *full = &t[n_out++];
        full->name = pt->names[1];
        full->dtype = DT_F16;
        full->ndim = 3;
        full->shape[0] = pt->plan.heads;
        full->shape[1] = plan_full_rows(&pt->plan);
        full->shape[2] = pt->plan.row;
        full->data = pt->full;
    }
    char num[4][16], sparsity[32], header_hex[CRC32C_HEX_CHARS + 1];
    snprintf(num[0], 16, "%d", s->n_layers);
    snprintf(num[1], 16, "%d", s->n_kv_heads);
    snprintf(num[2], 16, "%d", s->seq_len);
    snprintf(num[3], 16, "%d", s->head_dim);
    snprintf(sparsity, sizeof sparsity, "%.17g", o->sparsity);
    const char *fixed_keys[] = {"format", "k_scheme", "v_scheme", "lz4", "sparsity", "num_layers", "num_kv_heads",
                                "seq_len", "head_dim", "dtype", "model_name"};
    const char *fixed_vals[] = {o->entropy ? COMPRESSED_FORMAT_ENTROPY : COMPRESSED_FORMAT, k->text, v->text, o->lz4 ? "1" : "0", sparsity, num[0], num[1], num[2],
                                num[3], s->dtype, s->model_name};
    int n_meta = 0;
    for (size_t i = 0; i < sizeof fixed_keys / sizeof fixed_keys[0]; i++) keys[n_meta] = fixed_keys[i], vals[n_meta++] = fixed_vals[i];
    /* calib_sha256 only when a table was used; the model's identity when the cache records it */
    if (kv_layered_is_fitted(k) || kv_layered_is_fitted(v)) keys[n_meta] = "calib_sha256", vals[n_meta++] = o->calib->file_sha256;
    if (s->model_id[0]) keys[n_meta] = "model_id", vals[n_meta++] = s->model_id;
    if (o->entropy) keys[n_meta] = "entropy", vals[n_meta++] = "1";
    if (s->model_sha256[0]) keys[n_meta] = "model_sha256", vals[n_meta++] = s->model_sha256;
    uint64_t offset = 0;   /* st_write lays the tensors out back to back, in this order */
    for (int i = 0; i < n_out; i++) {
        size_t nbytes = dtype_size(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) nbytes *= (size_t)t[i].shape[d];
        ht[i] = (StHeaderTensor){t[i].name, t[i].dtype, t[i].ndim, t[i].shape, offset, nbytes};
        offset += nbytes;
        snprintf(crc_keys[i], sizeof crc_keys[i], COMPRESSED_TENSOR_CRC_PREFIX "%s", t[i].name);
        crc32c_to_hex(crc32c(0, t[i].data, nbytes), crc_hex[i]);
        keys[n_meta] = crc_keys[i], vals[n_meta++] = crc_hex[i];
    }
    crc32c_to_hex(st_header_crc(keys, vals, n_meta, ht, n_out), header_hex);
    keys[n_meta] = ST_HEADER_CRC_KEY, vals[n_meta++] = header_hex;
    rc = st_write(path, t, n_out, keys, vals, n_meta, err);
done:
    free(t);
    free(ht);
    free(keys);
    free(vals);
    free(crc_keys);
    free(crc_hex);
    return rc;
}

/* compress_tensor's buffers, of one layer's keys or values each: a working copy (sparsified),
 * scratch, and the reconstruction x_hat. */
typedef struct {
    float *work, *scratch, *x_hat;
} TensorBuffers;

/* Packs tensor i (after sparsification) into pt; adds its errors to the accumulators. */
static int compress_tensor(const KvSnapshot *s, const CompressOptions *o, int i, PackedTensor *pt,
                           const TensorBuffers *b, KvMetrics *metrics[3], TensorQuality *tq, EntropyStats *es) {
    float *work = b->work, *scratch = b->scratch, *x_hat = b->x_hat;
    size_t n = kv_snapshot_layer_size(s);
    int layer = i / 2, is_value = i % 2;
    const float *x = (is_value ? s->v : s->k) + (size_t)layer * n;
    snprintf(tq->name, sizeof tq->name, "layer_%d_%s", layer, is_value ? "value" : "key");
    snprintf(pt->names[0], sizeof pt->names[0], "%s.packed", tq->name);
    snprintf(pt->names[1], sizeof pt->names[1], "%s.full", tq->name);
    size_t packed_bytes = plan_packed_bytes(&pt->plan), full_values = (size_t)pt->plan.heads * plan_full_rows(&pt->plan) * pt->plan.row;
    pt->packed = malloc(packed_bytes ? packed_bytes : 1);
    pt->full = malloc((full_values ? full_values : 1) * sizeof(uint16_t));
    if (!pt->packed || !pt->full) return -1;
    memcpy(work, x, n * sizeof(float));
    if (o->sparsity > 0) kv_sparsify(work, n, o->sparsity, scratch);
    tensor_plan_pack(&pt->plan, work, pt->packed, pt->full, scratch);
    tensor_plan_unpack(&pt->plan, pt->packed, pt->full, x_hat);
    KvMetrics one;
    kv_metrics_init(&one);
    kv_metrics_add(&one, x, x_hat, n);
    for (int m = 0; m < 2; m++) kv_metrics_add(metrics[m], x, x_hat, n);
    tq->elements = n;
    tq->quality = kv_metrics_finish(&one);
    EntropyShape shape = plan_entropy_shape(&pt->plan);
    Error ignored;   /* only memory can fail */
    if (entropy_pack(plan_specs(&pt->plan), pt->plan.head_specs != NULL, &shape, pt->packed, &pt->coded, &pt->coded_len, es, &ignored)) return -1;
    if (!o->entropy) free(pt->coded), pt->coded = NULL;   /* measured only: the figure of every compress */
    if (!o->lz4) return 0;
    pt->lz4 = malloc(lz4_compress_bound(packed_bytes));
    if (!pt->lz4) return -1;
    pt->lz4_len = lz4_compress(pt->packed, packed_bytes, pt->lz4, lz4_compress_bound(packed_bytes));
    return pt->lz4_len || packed_bytes == 0 ? 0 : -1;
}

/* A refusal of the cache's contents against a scheme: named by the cache's file when given
 * (the codec's reason knows no file; an output's write errors name the output themselves). */
static int cache_error(const CompressOptions *o, Error *err, const char *what, const char *why) {
    if (o->source) return error_set(err, "%s: %s%s", o->source, what, why);
    return error_set(err, "%s%s", what, why);
}

static int bind_options(const KvSnapshot *s, const CompressOptions *o, const char *out_path, KvLayered *k, KvLayered *v,
                        Error *err) {
    char why[256];
    if (o->entropy && o->lz4) return error_set(err, "--entropy and --lz4 are either or neither, not both");
    if (!(o->sparsity >= 0.0 && o->sparsity < 1.0)) return error_set(err, "sparsity %g must be in [0, 1)", o->sparsity);
    if (kv_layered_parse("fp32", KV_SIDE_KEYS, k, why, sizeof why) || kv_layered_parse("fp32", KV_SIDE_VALUES, v, why, sizeof why))
        return error_set(err, "%s", why);
    if (o->k_scheme) *k = *o->k_scheme;
    if (o->v_scheme) *v = *o->v_scheme;
    if (compressed_scheme_bind(k, s->n_layers, s->head_dim, KV_SIDE_KEYS, why, sizeof why))
        return cache_error(o, err, "key scheme ", why);
    if (compressed_scheme_bind(v, s->n_layers, s->head_dim, KV_SIDE_VALUES, why, sizeof why))
        return cache_error(o, err, "value scheme ", why);
    if (o->calib && compressed_calib_geometry_check(o->calib, s->n_layers, s->n_kv_heads, s->head_dim, "the cache", err))
        return -1;
    if (o->calib && s->model_sha256[0] && strcmp(s->model_sha256, o->calib->model_sha256))
        return error_set(err, "calibration %s is of the model of sha256 %.12s..., but the cache was made by %.12s...",
                         o->calib->path, o->calib->model_sha256, s->model_sha256);
    if (out_path && o->calib && (kv_layered_is_fitted(k) || kv_layered_is_fitted(v)) && !compressed_hash_ok(o->calib->file_sha256))
        return error_set(err, "calibration %s has no file sha256 for the compressed file to record", o->calib->path);
    return 0;
}

/* The entropy figure and the coded streams' bits per value (SCHEMES.md §9). */
static void finish_entropy(CompressReport *r, const PackedTensor *pts, int n_src, const EntropyStats *es) {
    double full = 0;
    for (int i = 0; i < n_src; i++) full += (double)pts[i].plan.heads * plan_full_rows(&pts[i].plan) * pts[i].plan.row;
    r->values = (double)r->n_elements;
    r->entropy_bits_per_value = (es->code_entropy_bits + es->param_bits + 16.0 * full) / r->values;
    r->coded_bits_per_value = (es->coded_bits + es->rest_bits + 16.0 * full) / r->values;
    r->table_bytes = es->table_bytes;
}

static void finish_report(CompressReport *r, const PackedTensor *pts, int n_src, size_t n) {
    size_t quantized_values = 0, packed = 0;
    for (int i = 0; i < n_src; i++) {
        const TensorPlan *p = &pts[i].plan;
        size_t bytes = plan_packed_bytes(p) + (size_t)p->heads * plan_full_rows(p) * p->row * 2;
        *(i % 2 ? &r->v_compressed_bytes : &r->k_compressed_bytes) += bytes;
        packed += plan_packed_bytes(p);
        quantized_values += (size_t)p->heads * (size_t)(p->quantized_end - p->sinks) * p->row;
    }
    r->n_tensors = n_src;
    r->n_elements = n * (size_t)n_src;
    r->original_bytes = r->n_elements * 2;
    r->compressed_bytes = r->k_compressed_bytes + r->v_compressed_bytes;
    r->compression_ratio = (double)r->original_bytes / (double)r->compressed_bytes;
    r->stored_bits = quantized_values ? 8.0 * (double)packed / (double)quantized_values : 0.0;
    r->effective_bits = 8.0 * (double)r->compressed_bytes / (double)r->n_elements;
}

int kv_compress(const KvSnapshot *s, const CompressOptions *o, const char *out_path,
                CompressReport *r, KvSnapshot *recon, Error *err) {
    memset(r, 0, sizeof *r);
    KvLayered k, v;
    if (bind_options(s, o, out_path, &k, &v, err)) return -1;
    double t0 = ms_now();
    size_t n = kv_snapshot_layer_size(s);
    int n_src = 2 * s->n_layers, rc = -1;
    PackedTensor *pts = calloc((size_t)n_src, sizeof *pts);
    float *work = malloc(n * sizeof(float)), *scratch = malloc(n * sizeof(float)), *x_hat = malloc(n * sizeof(float));
    r->tensors = calloc((size_t)n_src, sizeof *r->tensors);
    if (recon) {
        *recon = *s;
        recon->k = malloc(n * s->n_layers * sizeof(float));
        recon->v = malloc(n * s->n_layers * sizeof(float));
    }
    char why[256];
    if (!pts || !work || !scratch || !x_hat || !r->tensors || (recon && (!recon->k || !recon->v))) {
        error_set(err, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_src; i++) {
        if (tensor_plan_make(kv_layered_at(i % 2 ? &v : &k, i / 2), s->n_kv_heads, s->seq_len, s->head_dim,
                             &pts[i].plan, why, sizeof why)) {
            cache_error(o, err, "", why);
            goto done;
        }
        if (tensor_plan_bind_tables(&pts[i].plan, o->calib, i / 2, err)) goto done;
    }
    KvMetrics all, sides[2];
    EntropyStats es = {0};
    kv_metrics_init(&all);
    kv_metrics_init(&sides[0]);
    kv_metrics_init(&sides[1]);
    for (int i = 0; i < n_src; i++) {
        KvMetrics *metrics[3] = {&all, &sides[i % 2], NULL};
        if (compress_tensor(s, o, i, &pts[i], &(TensorBuffers){work, scratch, x_hat}, metrics, &r->tensors[i], &es)) {
            error_set(err, "out of memory");
            goto done;
        }
        if (recon) memcpy((i % 2 ? recon->v : recon->k) + (size_t)(i / 2) * n, x_hat, n * sizeof(float));
        r->lz4_codes_in += o->lz4 ? plan_packed_bytes(&pts[i].plan) : 0;
        r->lz4_codes_out += pts[i].lz4_len;
    }
    finish_report(r, pts, n_src, n);
    finish_entropy(r, pts, n_src, &es);
    r->quality = kv_metrics_finish(&all);
    r->k_quality = kv_metrics_finish(&sides[0]);
    r->v_quality = kv_metrics_finish(&sides[1]);
    judge(r, o);
    if (out_path) {
        if (write_compressed(out_path, s, o, &k, &v, pts, err)) goto done;
        struct stat sb;
        r->file_bytes = stat(out_path, &sb) == 0 ? (size_t)sb.st_size : 0;
    }
    r->processing_ms = ms_now() - t0;
    rc = 0;
done:
    for (int i = 0; pts && i < n_src; i++) {
        free(pts[i].packed); free(pts[i].full); free(pts[i].lz4); free(pts[i].coded); free(pts[i].plan.head_specs);
    }
    free(pts); free(work); free(scratch); free(x_hat);
    if (rc && recon) kv_snapshot_free(recon);
    if (rc) compress_report_free(r);
    return rc;
}

void compress_report_free(CompressReport *r) {
    free(r->tensors);
    r->tensors = NULL;
}

