/* tests/test_compress.c: KV cache files and the compress tool against the reference
 * metrics (tests/fixtures/reference/kv-*.metrics.json): sizes, element counts and
 * compression_ratio exact (and equal to 16 / the stored bits of one unit), rmse / snr_db /
 * cosine_similarity / max_error to 1e-4 relative (the tolerance the reference README states),
 * and a variant that divides by the unrounded scale must land measurably further off: that
 * shows the fp16-rounded divisor is the reference's. Also file round trips, the sparsity
 * stage (kv_sparsify against a sort), kv-extract against the reference cache of
 * mini-llama-brown, and fitted bases packed with a calibration's tables (each layer, side and
 * KV head its own, restated here from the calibration's lookups) and read back with it. */
#include "tests/test.h"
#include "tests/test_random.h"
#include "model/formats/compress.h"
#include "model/modeldir.h"
#include "model/formats/json.h"
#include "model/formats/fileio.h"
#include "model/formats/safetensors.h"
#include "quant/half.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define METRIC_REL_TOL 1e-4
#define EXTRACT_TOL 1e-4

static double rel_diff(double a, double b) { return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1.0); }

static int same_values(const KvSnapshot *a, const KvSnapshot *b) {
    size_t n = kv_snapshot_layer_size(a) * a->n_layers;
    return a->n_layers == b->n_layers && kv_snapshot_layer_size(a) == kv_snapshot_layer_size(b) &&
           !memcmp(a->k, b->k, n * sizeof(float)) && !memcmp(a->v, b->v, n * sizeof(float));
}

static char *slurp(const char *path, size_t *len) {
    Error err;
    return read_whole_file(path, 1 << 26, len, &err);
}

/* The variant: an integer base's groups of G along the flat tensor (as the definitions say;
 * the same groups as along head_dim when G divides it), but x/scale divides by the scale
 * before fp16 rounding (asym: (x - fp16(min)) / unrounded scale). x^ still uses the stored
 * fp16 scale. */
static void variant_quantize(const KvBase *b, const float *x, size_t n, float *x_hat) {
    int gs = b->group;
    for (size_t g = 0; g < n / (size_t)gs; g++) {
        const float *xg = x + g * gs;
        float mn = xg[0], mx = xg[0], amax = 0;
        for (int i = 0; i < gs; i++) {
            mn = fminf(mn, xg[i]);
            mx = fmaxf(mx, xg[i]);
            amax = fmaxf(amax, fabsf(xg[i]));
        }
        int qmax = b->variant ? (1 << b->bits) - 1 : (1 << (b->bits - 1)) - 1;
        int qmin = b->variant ? 0 : -(1 << (b->bits - 1));
        float raw = b->variant ? (mx - mn) / (float)qmax : amax / (float)qmax;
        float scale = round_to_f16(raw), lo = b->variant ? round_to_f16(mn) : 0.0f;
        for (int i = 0; i < gs; i++) {
            float q = scale == 0 ? 0 : fminf(fmaxf(rintf((xg[i] - lo) / raw), (float)qmin), (float)qmax);
            float v = q * scale;
            x_hat[g * gs + i] = v + lo;
        }
    }
}

/* The variant's worst relative difference from a reference row over rmse, snr_db and cosine. */
static double variant_diff(const KvSnapshot *s, const KvBase *b, const JsonValue *row) {
    size_t n = kv_snapshot_layer_size(s);
    float *x_hat = malloc(n * sizeof(float));
    KvMetrics m;
    kv_metrics_init(&m);
    for (int l = 0; l < s->n_layers; l++)
        for (int side = 0; side < 2; side++) {
            const float *x = (side ? s->v : s->k) + (size_t)l * n;
            variant_quantize(b, x, n, x_hat);
            kv_metrics_add(&m, x, x_hat, n);
        }
    free(x_hat);
    KvQuality v = kv_metrics_finish(&m);
    return max_or_inf(max_or_inf(rel_diff(v.rmse, json_get(row, "rmse")->number),
                                 rel_diff(v.snr_db, json_get(row, "snr_db")->number)),
                      rel_diff(v.cosine_similarity, json_get(row, "cosine_similarity")->number));
}

/* Every scheme of one .metrics.json: sizes and ratio exact, quality to METRIC_REL_TOL, the
 * compressed file decompresses to exactly the in-memory reconstruction, and the
 * unrounded-divisor variant is outside the tolerance for at least one scheme. */
static void check_metrics(const char *cache, const char *metrics) {
    Error err;
    KvSnapshot s;
    char name[160];
    snprintf(name, sizeof name, "load %s", cache);
    if (!check(kv_snapshot_load(cache, &s, &err) == 0, name, "%s", err.msg)) return;
    size_t len;
    char *text = slurp(metrics, &len);
    JsonValue *root = text ? json_parse(text, len, &err) : NULL;
    const JsonValue *results = json_get(root, "results");
    int variant_rejected = 0;
    double worst = 0;
    for (size_t i = 0; results && i < results->count; i++) {
        const JsonValue *row = &results->items[i];
        const char *scheme = json_get(row, "scheme")->string;
        KvLayered k, v;
        char why[160];
        int parsed = kv_layered_parse(scheme, KV_SIDE_KEYS, &k, why, sizeof why) == 0 &&
                     kv_layered_parse(scheme, KV_SIDE_VALUES, &v, why, sizeof why) == 0;
        CompressOptions o = {&k, &v, 0.0, 0, 0.10, 18.0, 0.99, NULL, 0, NULL};
        CompressReport r;
        KvSnapshot recon, back;
        snprintf(name, sizeof name, "%s %s compress", cache, scheme);
        if (!check(parsed && kv_compress(&s, &o, "build/test-compressed.safetensors", &r, &recon, &err) == 0,
                   name, "%s", parsed ? err.msg : why))
            continue;
        double want_ratio = json_get(row, "compression_ratio")->number;
        snprintf(name, sizeof name, "%s %s sizes, element count and ratio exact", cache, scheme);
        check(r.compressed_bytes == (size_t)json_get(row, "compressed_size_bytes")->number &&
              r.original_bytes == (size_t)json_get(row, "original_size_bytes")->number &&
              r.n_elements == (size_t)json_get(row, "n_elements")->number &&
              r.compression_ratio == want_ratio, name, "ratio %.17g vs %.17g, %zu bytes, %zu elements",
              r.compression_ratio, want_ratio, r.compressed_bytes, r.n_elements);
        /* the whole file's ratio is one unit's: 16 bits over the stored bits of a row of
         * head_dim values (of G values for a group longer than the row, stored as a flat run) */
        const KvSpec *spec = &k.all;
        int row_len = spec->base.group > s.head_dim ? spec->base.group : s.head_dim;
        double unit_ratio = 16.0 / kv_spec_stored_bits(spec, row_len);
        snprintf(name, sizeof name, "%s %s ratio = 16 / stored bits of one unit (%.4g)", cache, scheme,
                 kv_spec_stored_bits(spec, row_len));
        check(unit_ratio == want_ratio, name, "%.17g vs %.17g", unit_ratio, want_ratio);
        const char *keys[4] = {"rmse", "snr_db", "cosine_similarity", "max_error"};
        double got[4] = {r.quality.rmse, r.quality.snr_db, r.quality.cosine_similarity, r.quality.max_error};
        for (int k = 0; k < 4; k++) {
            double want = json_get(row, keys[k])->number, d = rel_diff(got[k], want);
            worst = max_or_inf(worst, d);
            snprintf(name, sizeof name, "%s %s %s", cache, scheme, keys[k]);
            check(d <= METRIC_REL_TOL, name, "%.10g vs reference %.10g (rel %.2g > %.0e)", got[k], want, d, METRIC_REL_TOL);
        }
        snprintf(name, sizeof name, "%s %s decompress reads the file", cache, scheme);
        if (check(kv_decompress_file("build/test-compressed.safetensors", NULL, &back, &err) == 0, name, "%s", err.msg)) {
            snprintf(name, sizeof name, "%s %s decompress == in-memory reconstruction", cache, scheme);
            check(same_values(&back, &recon), name, "values differ");
            kv_snapshot_free(&back);
        }
        if (spec->base.bits < 32 && spec->base.axis == KV_AXIS_CHANNELS) {
            double vd = variant_diff(&s, &spec->base, row);
            variant_rejected += vd > METRIC_REL_TOL;
            printf("     %s %s: dividing by the unrounded scale would be off by %.1e%s\n", cache, scheme, vd,
                   vd > METRIC_REL_TOL ? " (outside tolerance)" : "");
        }
        kv_snapshot_free(&recon);
        compress_report_free(&r);
    }
    check(results != NULL, metrics, "no results");
    printf("     %s: worst relative difference from the reference %.2e\n", cache, worst);
    snprintf(name, sizeof name, "%s: the unrounded-divisor variant fails the tolerance for >= 1 scheme", cache);
    check(variant_rejected >= 1, name, "the reference does not pin the divisor");
    json_free(root);
    free(text);
    kv_snapshot_free(&s);
    unlink("build/test-compressed.safetensors");
}

/* Every tensor of file a is in file b under its name, with the same dtype, shape and data
 * bytes (the headers may differ: key order, spacing and metadata are the writer's choice).
 * Returns the number of tensors that differ, or -1 when a file does not open. */
static int tensors_differ(const char *a, const char *b, Error *err) {
    SafeTensors sa, sb;
    if (st_open(&sa, a, err)) return -1;
    if (st_open(&sb, b, err)) { st_close(&sa); return -1; }
    int differ = sa.n_tensors != sb.n_tensors || sa.n_tensors == 0;
    for (int i = 0; i < sa.n_tensors; i++) {
        const Tensor *x = &sa.tensors[i], *y = st_find(&sb, x->name);
        differ += !y || x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes ||
                  memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]) || memcmp(x->data, y->data, x->nbytes);
    }
    st_close(&sa);
    st_close(&sb);
    return differ;
}

/* save -> load -> save gives the same bytes; LZ4 changes nothing but the size. */
static void check_round_trips(void) {
    Error err;
    KvSnapshot s, again, plain, packed;
    const char *src = "tests/fixtures/reference/kv-mini-llama.safetensors";
    if (!check(kv_snapshot_load(src, &s, &err) == 0, "round trip load", "%s", err.msg)) return;
    int ok = kv_snapshot_save("build/rt1.safetensors", &s, DT_F32, &err) == 0 &&
             kv_snapshot_load("build/rt1.safetensors", &again, &err) == 0 &&
             kv_snapshot_save("build/rt2.safetensors", &again, DT_F32, &err) == 0;
    size_t n1 = 0, n2 = 0;
    char *b1 = slurp("build/rt1.safetensors", &n1), *b2 = slurp("build/rt2.safetensors", &n2);
    check(ok && b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1), "save -> load -> save byte-identical", "%s", ok ? "bytes differ" : err.msg);
    check(ok && same_values(&s, &again), "save -> load keeps every value", "values differ");
    /* The reference file was written by another implementation; the tensor bytes must agree. */
    int differ = ok ? tensors_differ(src, "build/rt1.safetensors", &err) : -1;
    check(differ == 0, "saved cache's tensors byte-identical to the reference file's (names, dtypes, shapes, data)",
          "%s", differ < 0 ? err.msg : "tensors differ");
    free(b1); free(b2);
    if (ok) kv_snapshot_free(&again);

    KvLayered int4_k, int4_v;
    char why[160];
    kv_layered_parse("int4-g64", KV_SIDE_KEYS, &int4_k, why, sizeof why);
    kv_layered_parse("int4-g64", KV_SIDE_VALUES, &int4_v, why, sizeof why);
    CompressOptions o = {&int4_k, &int4_v, 0.0, 0, 0.10, 18.0, 0.99, NULL, 0, NULL};
    CompressReport r1, r2;
    ok = kv_compress(&s, &o, "build/plain.safetensors", &r1, NULL, &err) == 0;
    o.lz4 = 1;
    ok = ok && kv_compress(&s, &o, "build/lz4.safetensors", &r2, NULL, &err) == 0;
    ok = ok && kv_decompress_file("build/plain.safetensors", NULL, &plain, &err) == 0 &&
         kv_decompress_file("build/lz4.safetensors", NULL, &packed, &err) == 0;
    if (check(ok, "--lz4 and plain files written and read back", "%s", err.msg)) {
        check(same_values(&plain, &packed), "--lz4 round trip is lossless", "values differ");
        printf("     lz4 over int4 codes: %zu -> %zu bytes\n", r2.lz4_codes_in, r2.lz4_codes_out);
        kv_snapshot_free(&plain);
        kv_snapshot_free(&packed);
        compress_report_free(&r1);
        compress_report_free(&r2);
    }
    check(s.seq_len == 38 && !strcmp(s.model_name, "mini-llama-brown"), "metadata read", "%d %s", s.seq_len, s.model_name);
    kv_snapshot_free(&s);
    unlink("build/rt1.safetensors"); unlink("build/rt2.safetensors");
    unlink("build/rt1.safetensors.metadata.json"); unlink("build/rt2.safetensors.metadata.json");
    unlink("build/plain.safetensors"); unlink("build/lz4.safetensors");
}

/* kv-extract's path: the cache of an fp32 forward pass over ids[0..n) as a snapshot. */
static int extract_cache(const Model *m, const int *ids, int n, KvSnapshot *out, Error *err) {
    RunState s;
    KvCache kv;
    if (runstate_init(&s, &m->config, n, err)) return -1;
    int rc = kv_cache_init(&kv, &m->config, n, n, NULL, NULL, err);
    if (rc == 0) {
        forward(m, &s, &kv, ids, n, 0, n);
        rc = kv_snapshot_from_cache(out, &kv, n, "mini-llama-brown", err);
        kv_cache_free(&kv);
    }
    runstate_free(&s);
    return rc;
}

/* mini-llama-brown on the reference tokens reproduces the reference cache. */
static void check_extract(void) {
    Error err;
    KvSnapshot ref, got;
    Model m;
    if (!check(kv_snapshot_load("tests/fixtures/reference/kv-mini-llama.safetensors", &ref, &err) == 0 &&
               model_load(&m, "data/models/mini-llama-brown", &err) == 0, "extract setup", "%s", err.msg))
        return;
    int ids[64], n = 0;
    for (char *p = ref.tokens, *end; *p && n < 64; p = end) ids[n++] = (int)strtol(p, &end, 10);
    if (check(extract_cache(&m, ids, n, &got, &err) == 0, "kv-extract forward pass and snapshot", "%s", err.msg)) {
        size_t total = kv_snapshot_layer_size(&ref) * ref.n_layers;
        double d = n == ref.seq_len ? max_or_inf(max_abs_diff(got.k, ref.k, total), max_abs_diff(got.v, ref.v, total))
                                    : INFINITY;
        check(d <= EXTRACT_TOL, "kv-extract reproduces kv-mini-llama", "max|d| %.3g > %.0e (%d tokens)", d, EXTRACT_TOL, n);
        printf("     max|d| = %.3g over %zu values (tolerance %.0e)\n", d, 2 * total, EXTRACT_TOL);
        kv_snapshot_free(&got);
    }
    kv_snapshot_free(&ref);
    model_free(&m);
}

/* kv_sparsify (compress's -sparsity stage) against a full sort by (magnitude, index). */
static int cmp_rank(const void *a, const void *b) {
    const double *x = a, *y = b;   /* pairs (magnitude, index) */
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void check_sparsify(void) {
    enum { N = 5000 };
    static float x[N], want[N], scratch[N];
    static double pairs[2 * N];
    uint64_t rng = 12345;
    int all_ok = 1;
    double fracs[] = {0.0, 0.1, 0.5, 0.9, 0.999};
    for (int t = 0; t < 10; t++) {
        for (int i = 0; i < N; i++)   /* coarse values: many ties, both signs */
            x[i] = t % 2 ? (float)((int)(normal(&rng) * 4)) / 4 : normal(&rng);
        double f = fracs[t % 5];
        size_t k = (size_t)(f * N);
        for (int i = 0; i < N; i++) {
            pairs[2 * i] = fabsf(x[i]);
            pairs[2 * i + 1] = i;
            want[i] = x[i];
        }
        qsort(pairs, N, 2 * sizeof(double), cmp_rank);
        for (size_t j = 0; j < k; j++) want[(int)pairs[2 * j + 1]] = 0.0f;
        size_t got_k = kv_sparsify(x, N, f, scratch);
        all_ok &= got_k == k && memcmp(x, want, sizeof x) == 0;
    }
    check(all_ok, "kv_sparsify zeroes floor(S*n) smallest |x|, ties earliest first (vs sort)", "mismatch");
}

/* ---- fitted bases: the tables of a calibration ---- */

#define FIT_SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A calibration of kv-mini-llama's geometry (4 layers, 2 KV heads, head_dim 64) with seeded
 * tables for nuq3-g64 (ascending) and vq4-d8 (every layer, side, head and
 * sub-vector its own). */
static int fitted_calibration(Calibration *c, int n_kv_heads, Error *err) {
    if (calibration_init(c, 4, 4, n_kv_heads, 64, err)) return -1;
    uint64_t rng = 77;
    const char *keys[2] = {"nuq3-g64", "vq4-d8"};   /* a fit key is one its codec takes at this head_dim */
    for (int k = 0; k < 2; k++) {
        CalibFit *f = calibration_add_fit(c, keys[k], err);
        if (!f) return -1;
        for (size_t i = 0; i < (size_t)c->n_layers * 2 * f->layer_floats; i++) f->codebooks[i] = normal(&rng);
        for (size_t b = 0; k != 1 && b < (size_t)c->n_layers * 2; b++) {   /* nuq: each table ascending */
            float *t = f->codebooks + b * 8;
            for (int i = 1; i < 8; i++)
                for (int j = i; j > 0 && t[j - 1] > t[j]; j--) { float x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
        }
    }
    snprintf(c->path, sizeof c->path, "fitted-test-calibration");
    snprintf(c->file_sha256, sizeof c->file_sha256, "%s", FIT_SHA);
    return 0;
}

/* x^ of every row of s under `text` with head h's table looked up directly in the calibration
 * (not through the binding compress uses), compared bit for bit with recon. */
static int rows_match(const KvSnapshot *s, const KvSnapshot *recon, const Calibration *c, const KvLayered *l, KvSide side) {
    int n = s->head_dim;
    unsigned char unit[256];
    float scratch[64], row[64];
    for (int layer = 0; layer < s->n_layers; layer++)
        for (int h = 0; h < s->n_kv_heads; h++) {
            KvSpec spec = *kv_layered_at(l, layer);
            char key[96];
            kv_spec_fit_key(&spec, key, sizeof key);
            char sd = side == KV_SIDE_KEYS ? 'k' : 'v';
            const CalibFit *fit = calibration_find_fit(c, key);   /* the layout calibration.h documents */
            spec.base.table = calibration_codebook(c, key, sd, layer) + (fit->layout.per_head ? (size_t)h * fit->table_floats : 0);
            size_t at = kv_snapshot_layer_size(s) * layer + (size_t)h * s->seq_len * n;
            const float *x = (side == KV_SIDE_KEYS ? s->k : s->v) + at, *got = (side == KV_SIDE_KEYS ? recon->k : recon->v) + at;
            for (int p = 0; p < s->seq_len; p++) {
                kv_spec_encode(&spec, x + (size_t)p * n, n, unit, scratch);
                kv_spec_decode(&spec, unit, n, 0, 1, row);
                kv_spec_from_domain(&spec, row, n);
                if (memcmp(row, got + (size_t)p * n, sizeof row)) return 0;
            }
        }
    return 1;
}

static void check_fitted(void) {
    Error err;
    KvSnapshot s, recon, back;
    Calibration c, one_head;
    if (!check(kv_snapshot_load("tests/fixtures/reference/kv-mini-llama.safetensors", &s, &err) == 0 &&
               fitted_calibration(&c, 2, &err) == 0 && fitted_calibration(&one_head, 1, &err) == 0,
               "fitted: cache and calibrations", "%s", err.msg))
        return;
    KvLayered k, v, plain_k, plain_v;
    char why[160];
    kv_layered_parse("vq4-d8;2:nuq3-g64", KV_SIDE_KEYS, &k, why, sizeof why);
    kv_layered_parse("nuq3-g64;1:vq4-d8", KV_SIDE_VALUES, &v, why, sizeof why);
    kv_layered_parse("int4-g64", KV_SIDE_KEYS, &plain_k, why, sizeof why);
    kv_layered_parse("int4-g64", KV_SIDE_VALUES, &plain_v, why, sizeof why);
    CompressOptions o = {&k, &v, 0.0, 0, 0.10, 18.0, 0.99, &c, 0, NULL};
    CompressReport r;
    const char *path = "build/fitted.safetensors";
    int ok = kv_compress(&s, &o, path, &r, &recon, &err) == 0;
    if (check(ok, "fitted: keys vq4-d8;2:nuq3-g64, values nuq3-g64;1:vq4-d8 compressed with the calibration", "%s", err.msg)) {
        compress_report_free(&r);
        check(rows_match(&s, &recon, &c, &k, KV_SIDE_KEYS) && rows_match(&s, &recon, &c, &v, KV_SIDE_VALUES),
              "fitted: every row coded with its layer's, side's and KV head's table (restated per row)", "rows differ");
        SafeTensors st;
        const char *sha = NULL;
        if (st_open(&st, path, &err) == 0) {
            sha = st_meta(&st, "calib_sha256");
            check(sha && !strcmp(sha, FIT_SHA), "fitted: the file records the calibration's sha256", "calib_sha256 %s", sha ? sha : "(none)");
            st_close(&st);
        }
        ok = kv_decompress_file(path, &c, &back, &err) == 0;
        if (check(ok, "fitted: read back with the same calibration", "%s", err.msg)) {
            check(same_values(&back, &recon), "fitted: read back equals compress's reconstruction", "values differ");
            kv_snapshot_free(&back);
        }
        kv_snapshot_free(&recon);
    }
    o.calib = NULL;
    ok = kv_compress(&s, &o, path, &r, NULL, &err) == 0;
    check(!ok && strstr(err.msg, "key scheme vq4-d8: its base is fitted to the model and needs a calibration"),
          "fitted: refused without a calibration", "%s", ok ? "accepted" : err.msg);
    /* groups longer than a row: a plain integer base packs them as one flat run, a fitted one
     * (bound per KV head) is refused as the KV cache refuses it */
    KvLayered wide_k, wide_v;
    kv_layered_parse("nuq3-g128", KV_SIDE_KEYS, &wide_k, why, sizeof why);
    kv_layered_parse("nuq3-g128", KV_SIDE_VALUES, &wide_v, why, sizeof why);
    CompressOptions wide = {&wide_k, &wide_v, 0.0, 0, 0.10, 18.0, 0.99, &c, 0, NULL};
    ok = kv_compress(&s, &wide, NULL, &r, NULL, &err) == 0;
    check(!ok && strstr(err.msg, "group 128 does not divide rows of 64"), "fitted: nuq3-g128 at head_dim 64 is not a flat run",
          "%s", ok ? "accepted" : err.msg);
    if (ok) compress_report_free(&r);
    o.calib = &one_head;
    ok = kv_compress(&s, &o, path, &r, NULL, &err) == 0;
    check(!ok && strstr(err.msg, "calibration fitted-test-calibration is for 4 layers, 1 KV heads, head_dim 64; the cache has 4, 2, 64"),
          "fitted: a calibration of another geometry refused", "%s", ok ? "accepted" : err.msg);
    o.calib = &c;
    c.file_sha256[0] = 0;
    ok = kv_compress(&s, &o, "build/fitted-nosha.safetensors", &r, NULL, &err) == 0;
    check(!ok && strstr(err.msg, "has no file sha256 for the compressed file to record") && !path_exists("build/fitted-nosha.safetensors"),
          "fitted: a calibration without a file sha256 writes nothing", "%s", ok ? "accepted" : err.msg);
    snprintf(c.file_sha256, sizeof c.file_sha256, "%s", FIT_SHA);
    /* a scheme without fitted bases: the calibration changes nothing, not even a byte */
    CompressOptions plain = {&plain_k, &plain_v, 0.0, 0, 0.10, 18.0, 0.99, NULL, 0, NULL};
    CompressReport r1, r2;
    ok = kv_compress(&s, &plain, "build/plain-nocalib.safetensors", &r1, NULL, &err) == 0;
    plain.calib = &c;
    ok = ok && kv_compress(&s, &plain, "build/plain-calib.safetensors", &r2, NULL, &err) == 0;
    size_t n1 = 0, n2 = 0;
    char *b1 = ok ? slurp("build/plain-nocalib.safetensors", &n1) : NULL, *b2 = ok ? slurp("build/plain-calib.safetensors", &n2) : NULL;
    check(ok && b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1) && !strstr(b1 + 8, "calib_sha256"),
          "fitted: int4-g64 with a calibration given is byte-identical to without (no calib_sha256)", "%s", ok ? "bytes differ" : err.msg);
    if (ok) { compress_report_free(&r1); compress_report_free(&r2); }
    free(b1); free(b2);
    unlink(path); unlink("build/plain-nocalib.safetensors"); unlink("build/plain-calib.safetensors");
    calibration_free(&c);
    calibration_free(&one_head);
    kv_snapshot_free(&s);
}

int main(void) {
    check_metrics("tests/fixtures/reference/kv-synthetic.safetensors", "tests/fixtures/reference/kv-synthetic.metrics.json");
    check_metrics("tests/fixtures/reference/kv-mini-llama.safetensors", "tests/fixtures/reference/kv-mini-llama.metrics.json");
    check_round_trips();
    check_fitted();
    check_sparsify();
    check_extract();
    return test_exit_code();
}
