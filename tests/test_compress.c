/* tests/test_compress.c: KV cache files and the compress tool against the reference
 * metrics (tests/fixtures/reference/kv-*.metrics.json), file round trips, and kv-extract
 * against the reference cache of mini-llama-brown. */
#include "tests/test.h"
#include "model/compress.h"
#include "model/model.h"
#include "model/json.h"
#include "model/fileio.h"
#include "model/safetensors.h"
#include <math.h>
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

/* Every scheme of one .metrics.json: ratio exact, quality to METRIC_REL_TOL, and the
 * compressed file decompresses to exactly the in-memory reconstruction. */
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
    for (size_t i = 0; results && i < results->count; i++) {
        const JsonValue *row = &results->items[i];
        const char *scheme = json_get(row, "scheme")->string;
        KvLayered layered;
        char why[160];
        int parsed = kv_layered_parse(scheme, &layered, why, sizeof why) == 0;
        CompressOptions o = {&layered, &layered, 0.0, 0, 0.10, 18.0, 0.99};
        CompressReport r;
        KvSnapshot recon, back;
        snprintf(name, sizeof name, "%s %s compress", cache, scheme);
        if (!check(parsed && kv_compress(&s, &o, "build/test-compressed.safetensors", &r, &recon, &err) == 0,
                   name, "%s", parsed ? err.msg : why))
            continue;
        double want_ratio = json_get(row, "compression_ratio")->number;
        snprintf(name, sizeof name, "%s %s sizes and ratio exact", cache, scheme);
        check(r.compressed_bytes == (size_t)json_get(row, "compressed_size_bytes")->number &&
              r.original_bytes == (size_t)json_get(row, "original_size_bytes")->number &&
              r.compression_ratio == want_ratio, name, "ratio %.17g vs %.17g, %zu bytes", r.compression_ratio,
              want_ratio, r.compressed_bytes);
        const char *keys[4] = {"rmse", "snr_db", "cosine_similarity", "max_error"};
        double got[4] = {r.quality.rmse, r.quality.snr_db, r.quality.cosine_similarity, r.quality.max_error};
        for (int k = 0; k < 4; k++) {
            double want = json_get(row, keys[k])->number, d = rel_diff(got[k], want);
            snprintf(name, sizeof name, "%s %s %s", cache, scheme, keys[k]);
            check(d <= METRIC_REL_TOL, name, "%.10g vs reference %.10g (rel %.2g > %.0e)", got[k], want, d, METRIC_REL_TOL);
        }
        snprintf(name, sizeof name, "%s %s decompresses", cache, scheme);
        if (check(kv_decompress_file("build/test-compressed.safetensors", &back, &err) == 0, name, "%s", err.msg)) {
            snprintf(name, sizeof name, "%s %s decompress == in-memory reconstruction", cache, scheme);
            check(same_values(&back, &recon), name, "values differ");
            kv_snapshot_free(&back);
        }
        kv_snapshot_free(&recon);
        compress_report_free(&r);
    }
    check(results != NULL, metrics, "no results");
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

    KvLayered int4;
    char why[160];
    kv_layered_parse("int4-g64", &int4, why, sizeof why);
    CompressOptions o = {&int4, &int4, 0.0, 0, 0.10, 18.0, 0.99};
    CompressReport r1, r2;
    ok = kv_compress(&s, &o, "build/plain.safetensors", &r1, NULL, &err) == 0;
    o.lz4 = 1;
    ok = ok && kv_compress(&s, &o, "build/lz4.safetensors", &r2, NULL, &err) == 0;
    ok = ok && kv_decompress_file("build/plain.safetensors", &plain, &err) == 0 &&
         kv_decompress_file("build/lz4.safetensors", &packed, &err) == 0;
    if (check(ok, "int4-g64 compress and decompress, plain and --lz4", "%s", err.msg)) {
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
    int rc = kv_cache_init(&kv, &m->config, n, n, NULL, NULL, NULL, err);
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

int main(void) {
    check_metrics("tests/fixtures/reference/kv-synthetic.safetensors", "tests/fixtures/reference/kv-synthetic.metrics.json");
    check_metrics("tests/fixtures/reference/kv-mini-llama.safetensors", "tests/fixtures/reference/kv-mini-llama.metrics.json");
    check_round_trips();
    check_extract();
    return test_exit_code();
}
