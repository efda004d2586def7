/* model/formats/compress.c: a KV cache snapshot stored under a scheme into a file, and back. See
 * model/formats/compress.h for the file. */
#include "model/formats/compress.h"
#include "model/formats/calib_bind.h"
#include "model/formats/crc32c.h"
#include "model/formats/st_checksum.h"
#include "model/formats/entropy_pack.h"
#include "quant/lz4.h"
#include "quant/half.h"
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FORMAT_NAME "kvq-compressed-3"
#define FORMAT_V2 "kvq-compressed-2"        /* still read: without checksums */
#define FORMAT_ENTROPY "kvq-compressed-4"   /* format 3 with entropy-coded .packed tensors (--entropy) */
#define ENTROPY_MAX_EXPANSION 4096.0        /* an entropy-coded file holds at least 1/4096 of its units' bytes */
#define TENSOR_CRC_PREFIX "crc32c."         /* + a tensor's name: the CRC-32C of its bytes */
#define HEADER_CRC_KEY ST_HEADER_CRC_KEY    /* the CRC-32C of the header's content (st_header_crc) */

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

/* ---- how one tensor is laid out ---- */

/* One tensor [heads][positions][row] under its layer's spec. A flat run (a plain integer base
 * with groups longer than a row) is one "head" of rows of G values. */
typedef struct {
    KvSpec spec;
    KvSpec *head_specs;          /* a fitted base: [heads], spec with each KV head's table (calib_bind.h); else NULL */
    int heads, positions, row;
    int sinks, quantized_end;    /* full precision: [0, sinks) and [quantized_end, positions) */
    size_t units, unit_bytes;    /* per head */
} TensorPlan;

/* The spec KV head h is coded with. */
static const KvSpec *plan_head(const TensorPlan *p, int h) { return p->head_specs ? &p->head_specs[h] : &p->spec; }
/* Every head's spec (entropy_pack's specs): head_specs of a fitted base, else the one spec. */
static const KvSpec *plan_specs(const TensorPlan *p) { return p->head_specs ? p->head_specs : &p->spec; }
static size_t plan_packed_bytes(const TensorPlan *p) { return (size_t)p->heads * p->units * p->unit_bytes; }
static int plan_full_rows(const TensorPlan *p) { return p->sinks + p->positions - p->quantized_end; }

/* Not a fitted base: its tables are bound per KV head, so its groups lie within a row. */
static int is_flat_group(const KvSpec *spec, int head_dim) {
    const KvBase *b = &spec->base;
    return !kv_spec_is_fitted(spec) && b->axis == KV_AXIS_CHANNELS && b->group > head_dim && b->group % head_dim == 0 && !spec->hadamard && !spec->outliers && !spec->residual && !spec->sinks;
}

/* The plan of one tensor; -1 with why when the spec cannot store it. */
static int make_plan(const KvSpec *spec, int heads, int seq, int head_dim, TensorPlan *p, char *why, size_t len) {
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    p->heads = heads;
    p->positions = seq;
    p->row = head_dim;
    if (spec->prerope) {
        snprintf(why, len, "%s: +prerope needs positions and RoPE, which a stored tensor does not have", spec->text);
        return -1;
    }
    if (is_flat_group(spec, head_dim)) {
        size_t values = (size_t)heads * seq * head_dim;
        if (values % (size_t)spec->base.group != 0) {
            snprintf(why, len, "%s: %zu values are not whole groups of %d", spec->text, values, spec->base.group);
            return -1;
        }
        p->heads = 1;
        p->row = spec->base.group;
        p->positions = (int)(values / (size_t)spec->base.group);
    }
    p->sinks = spec->sinks < p->positions ? spec->sinks : p->positions;
    p->quantized_end = kv_spec_quantized_end(spec, p->positions);
    if (p->quantized_end > p->positions) p->quantized_end = p->positions;
    p->unit_bytes = kv_spec_unit_bytes(spec, p->row);
    p->units = (size_t)(p->quantized_end - p->sinks) / (size_t)spec->base.rows;
    return 0;
}

/* A fitted base's table per KV head of layer `layer`, from calib (calib_bind.h): the tables a
 * KV cache of the same model binds. Other bases: nothing to bind (head_specs stays NULL). */
static int plan_bind_tables(TensorPlan *p, const Calibration *calib, int layer, Error *err) {
    if (!kv_spec_is_fitted(&p->spec)) return 0;
    p->head_specs = malloc((size_t)p->heads * sizeof *p->head_specs);
    if (!p->head_specs) return error_set(err, "out of memory");
    return calib_bind_heads(&p->spec, calib, layer, p->heads, p->row, p->head_specs, err);
}

/* Binds a LAYERED scheme to the file's shape; a flat group (G > head_dim) is checked on its
 * row of G values instead. */
static int bind_for_file(KvLayered *l, int layers, int head_dim, KvSide side, char *why, size_t len) {
    KvLayered wide = *l;
    if (kv_layered_bind(l, layers, head_dim, side, why, len) == 0) return 0;
    if (is_flat_group(&wide.all, head_dim) && wide.n_items == 0 &&
        kv_layered_bind(&wide, layers, wide.all.base.group, side, why, len) == 0) {
        *l = wide;
        return 0;
    }
    return -1;
}

/* ---- one tensor's bytes ---- */

/* x [heads][positions][row] (natural) -> packed units and fp16 full rows. scratch: rows_per_unit
 * rows. */
static void pack_tensor(const TensorPlan *p, const float *x, unsigned char *packed, uint16_t *full, float *scratch) {
    int n = p->row, g = p->spec.base.rows;
    for (int h = 0; h < p->heads; h++) {
        const float *xh = x + (size_t)h * p->positions * n;
        unsigned char *units = packed + (size_t)h * p->units * p->unit_bytes;
        uint16_t *fh = full + (size_t)h * plan_full_rows(p) * n;
        for (size_t u = 0; u < p->units; u++)
            kv_spec_encode(plan_head(p, h), xh + ((size_t)p->sinks + u * g) * n, n, units + u * p->unit_bytes, scratch);
        int f = 0;
        for (int j = 0; j < p->positions; j++) {
            if (j >= p->sinks && j < p->quantized_end) continue;
            for (int i = 0; i < n; i++) fh[(size_t)f * n + i] = f32_to_f16(xh[(size_t)j * n + i]);
            f++;
        }
    }
}

/* packed units and fp16 full rows -> x [heads][positions][row], natural order. */
static void unpack_tensor(const TensorPlan *p, const unsigned char *packed, const uint16_t *full, float *x) {
    int n = p->row;
    for (int h = 0; h < p->heads; h++) {
        float *xh = x + (size_t)h * p->positions * n;
        const uint16_t *fh = full + (size_t)h * plan_full_rows(p) * n;
        int quantized = p->quantized_end - p->sinks;
        if (quantized > 0) {
            float *rows = xh + (size_t)p->sinks * n;
            kv_spec_decode(plan_head(p, h), packed + (size_t)h * p->units * p->unit_bytes, n, 0, quantized, rows);
            for (int r = 0; r < quantized; r++) kv_spec_from_domain(plan_head(p, h), rows + (size_t)r * n, n);
        }
        int f = 0;
        for (int j = 0; j < p->positions; j++) {
            if (j >= p->sinks && j < p->quantized_end) continue;
            for (int i = 0; i < n; i++) xh[(size_t)j * n + i] = f16_to_f32(fh[(size_t)f * n + i]);
            f++;
        }
    }
}

/* ---- checksums (format 3) ---- */

/* A format-3 file's header against its header_crc32c (st_checksum.h), which a format-3 file must have. */
static int check_header_crc(const SafeTensors *st, Error *err) {
    if (!st_meta(st, HEADER_CRC_KEY))
        return error_set(err, "%s: metadata '" HEADER_CRC_KEY "' missing: a " FORMAT_NAME " file has one", st->path);
    return st_check_header(st, err);
}

/* A format-2 file has no checksums: one that holds format 3's was a format-3 file whose format
 * name changed (one flipped bit turns -3 into -2), and is refused rather than read unchecked. */
static int check_no_crc(const SafeTensors *st, Error *err) {
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], HEADER_CRC_KEY) || !strncmp(st->meta_keys[i], TENSOR_CRC_PREFIX, 7))
            return error_set(err, "%s: format " FORMAT_V2 " with the checksums of " FORMAT_NAME " (metadata '%s'): its "
                             "format name is damaged or was edited", st->path, st->meta_keys[i]);
    return 0;
}

/* ---- compress ---- */

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
    const char *fixed_vals[] = {o->entropy ? FORMAT_ENTROPY : FORMAT_NAME, k->text, v->text, o->lz4 ? "1" : "0", sparsity, num[0], num[1], num[2],
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
        snprintf(crc_keys[i], sizeof crc_keys[i], TENSOR_CRC_PREFIX "%s", t[i].name);
        crc32c_to_hex(crc32c(0, t[i].data, nbytes), crc_hex[i]);
        keys[n_meta] = crc_keys[i], vals[n_meta++] = crc_hex[i];
    }
    crc32c_to_hex(st_header_crc(keys, vals, n_meta, ht, n_out), header_hex);
    keys[n_meta] = HEADER_CRC_KEY, vals[n_meta++] = header_hex;
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
static EntropyShape plan_entropy_shape(const TensorPlan *p) { return (EntropyShape){p->heads, p->units, p->unit_bytes, p->row}; }

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
    pack_tensor(&pt->plan, work, pt->packed, pt->full, scratch);
    unpack_tensor(&pt->plan, pt->packed, pt->full, x_hat);
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

/* 64 lowercase hex digits: how a calibration's file sha256 is written. */
static int is_sha256_hex(const char *s) {
    size_t n = strspn(s, "0123456789abcdef");
    return n == CALIB_HASH_HEX && s[n] == 0;
}

/* A compressed file holds a KV cache, not a model: there is no model.safetensors to hash, so a
 * calibration given to compress is checked against the cache's geometry, and against its model
 * only when the cache records that model's sha256 (kv-extract's files do). */
static int check_calib_geometry(const Calibration *c, int n_layers, int n_kv_heads, int head_dim, const char *what,
                                Error *err) {
    if (c->n_layers == n_layers && c->n_kv_heads == n_kv_heads && c->head_dim == head_dim) return 0;
    return error_set(err, "calibration %s is for %d layers, %d KV heads, head_dim %d; %s has %d, %d, %d", c->path,
                     c->n_layers, c->n_kv_heads, c->head_dim, what, n_layers, n_kv_heads, head_dim);
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
    if (bind_for_file(k, s->n_layers, s->head_dim, KV_SIDE_KEYS, why, sizeof why))
        return error_set(err, "key scheme %s", why);
    if (bind_for_file(v, s->n_layers, s->head_dim, KV_SIDE_VALUES, why, sizeof why))
        return error_set(err, "value scheme %s", why);
    if (o->calib && check_calib_geometry(o->calib, s->n_layers, s->n_kv_heads, s->head_dim, "the cache", err)) return -1;
    if (o->calib && s->model_sha256[0] && strcmp(s->model_sha256, o->calib->model_sha256))
        return error_set(err, "calibration %s is of the model of sha256 %.12s..., but the cache was made by %.12s...",
                         o->calib->path, o->calib->model_sha256, s->model_sha256);
    if (out_path && o->calib && (kv_layered_is_fitted(k) || kv_layered_is_fitted(v)) && !is_sha256_hex(o->calib->file_sha256))
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
        if (make_plan(kv_layered_at(i % 2 ? &v : &k, i / 2), s->n_kv_heads, s->seq_len, s->head_dim, &pts[i].plan, why,
                      sizeof why)) {
            error_set(err, "%s", why);
            goto done;
        }
        if (plan_bind_tables(&pts[i].plan, o->calib, i / 2, err)) goto done;
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

/* The scheme of one side from the metadata, bound to the file's shape. */
static int meta_scheme(const SafeTensors *st, const char *key, long layers, long head_dim, KvSide side, KvLayered *l,
                       Error *err) {
    const char *text = st_meta(st, key);
    char why[256], shown[72];
    if (!text) return error_set(err, "%s: metadata '%s' missing: not a kvq compressed file", st->path, key);
    if (kv_layered_parse(text, side, l, why, sizeof why) || bind_for_file(l, (int)layers, (int)head_dim, side, why, sizeof why)) {
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

/* Copies one tensor's packed units (inflating LZ4) and full rows out of the file, checked. */
static int read_tensor(const SafeTensors *st, const char *base, const TensorPlan *p, int lz4, int checked, int entropy,
                       unsigned char *packed, uint16_t *full, Error *err) {
    char name[64];
    size_t want = plan_packed_bytes(p);
    snprintf(name, sizeof name, "%s.packed", base);
    const Tensor *t = st_find(st, name);
    if (!t || t->dtype != DT_U8 || t->ndim != 1)
        return error_set(err, "%s: missing or malformed tensor '%s'", st->path, name);
    if (checked && st_check_tensor(st, t, err)) return -1;
    if (entropy) {
        char what[4200];
        EntropyShape shape = plan_entropy_shape(p);
        snprintf(what, sizeof what, "%s: tensor '%s'", st->path, name);
        if (entropy_unpack(plan_specs(p), p->head_specs != NULL, &shape, t->data, t->nbytes, packed, what, err)) return -1;
    } else if (lz4) {
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
    if (checked && st_check_tensor(st, t, err)) return -1;
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
    if (sha && !is_sha256_hex(sha))
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
    if (check_calib_geometry(calib, shape->n_layers, shape->n_kv_heads, shape->head_dim, "the file", &why))
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
    int v4 = format && !strcmp(format, FORMAT_ENTROPY);
    int v3 = v4 || (format && !strcmp(format, FORMAT_NAME)), v2 = format && !strcmp(format, FORMAT_V2);
    if (!v3 && !v2)
        return error_set(err, "%s: not a kvq compressed file (metadata format is not %s, %s or %s)", st->path,
                         FORMAT_ENTROPY, FORMAT_NAME, FORMAT_V2);
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
        if (make_plan(kv_layered_at(i % 2 ? &v : &k, i / 2), out->n_kv_heads, out->seq_len, out->head_dim, &plans[i],
                      why, sizeof why)) {
            free_plans(plans, n_src);
            return error_set(err, "%s: %s", st->path, why);
        }
        /* the calibration's geometry is the file's (check_calibration): these are bounded by it */
        if (plan_bind_tables(&plans[i], calib, i / 2, &bind_err)) {
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
    for (int i = 0; rc == 0 && i < n_src; i++) {
        char base[32];
        snprintf(base, sizeof base, "layer_%d_%s", i / 2, i % 2 ? "value" : "key");
        rc = read_tensor(st, base, &plans[i], (int)lz4, v3, v4, packed, full, err);
        if (rc) break;
        char name[48];
        snprintf(name, sizeof name, "%s.packed", base);
        if (bits && (rc = tensor_bits(&plans[i], packed, st_find(st, name)->nbytes, &(*bits)[i], err))) break;
        float *x = (i % 2 ? out->v : out->k) + (size_t)(i / 2) * n;
        unpack_tensor(&plans[i], packed, full, x);
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
    int compressed = format && (!strcmp(format, FORMAT_NAME) || !strcmp(format, FORMAT_V2) || !strcmp(format, FORMAT_ENTROPY));
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
