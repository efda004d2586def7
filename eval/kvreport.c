/* eval/kvreport.c: the KV cache file commands below ./run's flags (kv-extract, compress,
 * decompress, kv-info: their --calib resolved, their work and output) and the quick test on its
 * synthetic cache. */
#include "eval/kvreport.h"
#include "eval/json_out.h"
#include "model/config.h"
#include "model/modeldir.h"
#include "eval/generate.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void report_compress_json(FILE *f, const CompressReport *r, const CompressOptions *o, int per_tensor) {
    fprintf(f, "{\n");
    json_out_string(f, "k_scheme", o->k_scheme->text, 0);
    json_out_string(f, "v_scheme", o->v_scheme->text, 0);
    fprintf(f, "  \"compression_ratio\": %.17g,\n", r->compression_ratio);
    fprintf(f, "  \"original_size_bytes\": %zu,\n  \"compressed_size_bytes\": %zu,\n", r->original_bytes, r->compressed_bytes);
    json_out_number(f, "stored_bits_per_value", r->stored_bits, 0);
    json_out_number(f, "effective_bits_per_value", r->effective_bits, 0);
    json_out_number(f, "rmse", r->quality.rmse, 0);
    json_out_number(f, "snr_db", r->quality.snr_db, 0);
    json_out_number(f, "cosine_similarity", r->quality.cosine_similarity, 0);
    json_out_number(f, "max_error", r->quality.max_error, 0);
    json_out_number(f, "key_rmse", r->k_quality.rmse, 0);
    json_out_number(f, "value_rmse", r->v_quality.rmse, 0);
    fprintf(f, "  \"quality_level\": \"%s\",\n", r->quality_level);
    fprintf(f, "  \"processing_time_ms\": %.3f,\n", r->processing_ms);
    fprintf(f, "  \"passed\": %s,\n  \"violations\": [", r->passed ? "true" : "false");
    for (int i = 0; i < r->n_violations; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", r->violations[i]);
    fprintf(f, "],\n  \"n_elements\": %zu,\n  \"sparsity\": %g,\n", r->n_elements, o->sparsity);
    if (o->lz4)
        fprintf(f, "  \"lz4\": {\"code_bytes\": %zu, \"compressed_code_bytes\": %zu, \"ratio\": %.6f},\n",
                r->lz4_codes_in, r->lz4_codes_out, (double)r->lz4_codes_in / (double)r->lz4_codes_out);
    if (r->file_bytes) fprintf(f, "  \"file_size_bytes\": %zu,\n", r->file_bytes);
    fprintf(f, "  \"entropy\": %s,\n  \"values\": %.17g,\n", o->entropy ? "true" : "false", r->values);   /* SCHEMES.md 9 */
    json_out_number(f, "entropy_bits_per_value", r->entropy_bits_per_value, 0);
    json_out_number(f, "coded_bits_per_value", r->coded_bits_per_value, 0);
    json_out_number(f, "table_bytes", r->table_bytes, 0);
    fprintf(f, "  \"tensors\": [");
    for (int i = 0; per_tensor && i < r->n_tensors; i++) {
        const TensorQuality *t = &r->tensors[i];
        fprintf(f, "%s\n    {\"name\": \"%s\", \"elements\": %zu, \"rmse\": %.10g, \"snr_db\": %.10g, "
                   "\"cosine_similarity\": %.10g, \"max_error\": %.10g}", i ? "," : "", t->name, t->elements,
                t->quality.rmse, isfinite(t->quality.snr_db) ? t->quality.snr_db : 999.0,
                t->quality.cosine_similarity, t->quality.max_error);
    }
    fprintf(f, "%s]\n}\n", per_tensor && r->n_tensors ? "\n  " : "");
}

void report_compress_text(FILE *f, const CompressReport *r, const CompressOptions *o) {
    fprintf(f, "keys %s, values %s: %zu values, %zu -> %zu bytes (%.3fx vs fp16)\n", o->k_scheme->text,
            o->v_scheme->text, r->n_elements, r->original_bytes, r->compressed_bytes, r->compression_ratio);
    fprintf(f, "bits per value: %.4g stored (quantized part), %.4g effective (everything)\n", r->stored_bits,
            r->effective_bits);
    fprintf(f, "rmse keys %.6f, values %.6f\n", r->k_quality.rmse, r->v_quality.rmse);
    fprintf(f, "rmse %.6f, snr %.2f dB, cosine %.6f, max error %.6f: %s, %s\n", r->quality.rmse, r->quality.snr_db,
            r->quality.cosine_similarity, r->quality.max_error, r->quality_level, r->passed ? "passed" : "FAILED");
    for (int i = 0; i < r->n_violations; i++) fprintf(f, "  violation: %s\n", r->violations[i]);
    if (o->lz4)
        fprintf(f, "lz4 over the codes: %zu -> %zu bytes (%.3fx)\n", r->lz4_codes_in, r->lz4_codes_out,
                (double)r->lz4_codes_in / (double)r->lz4_codes_out);
    fprintf(f, "entropy: %.4g bits per value (SCHEMES.md 9); entropy-coded %.4g, tables and framing %.0f bytes apart%s\n",
            r->entropy_bits_per_value, r->coded_bits_per_value, r->table_bytes, o->entropy ? "" : " (not written: --entropy)");
    if (r->file_bytes) fprintf(f, "file on disk: %zu bytes\n", r->file_bytes);
}

/* A compressed file's bits per value, per layer and side (SCHEMES.md §9). */
static void kv_info_bits(FILE *f, const KvSnapshot *s, const KvTensorBits *bits, int json) {
    if (json) {
        fprintf(f, ",\n  \"bits\": [");
        for (int l = 0; l < s->n_layers; l++) {
            const KvTensorBits *k = &bits[2 * l], *v = &bits[2 * l + 1];
            fprintf(f, "%s\n    {\"layer\": %d, \"k_stored\": %.17g, \"k_coded\": %.17g, \"k_entropy\": %.17g, "
                       "\"v_stored\": %.17g, \"v_coded\": %.17g, \"v_entropy\": %.17g}", l ? "," : "", l, k->stored,
                    k->coded, k->entropy, v->stored, v->coded, v->entropy);
        }
        fprintf(f, "\n  ]");
        return;
    }
    fprintf(f, "bits:      per value, stored / entropy-coded (tables apart) / entropy figure (SCHEMES.md 9):\n");
    for (int l = 0; l < s->n_layers; l++) {
        const KvTensorBits *k = &bits[2 * l], *v = &bits[2 * l + 1];
        fprintf(f, "  layer %d: keys %.4g / %.4g / %.4g, values %.4g / %.4g / %.4g\n", l, k->stored, k->coded, k->entropy,
                v->stored, v->coded, v->entropy);
    }
}

void report_kv_info(FILE *f, const KvInfo *info, int json) {
    const char *path = info->path, *k_scheme = info->k_scheme, *v_scheme = info->v_scheme;
    const char *mismatches = info->mismatches;
    int n_mismatches = info->n_mismatches;
    const KvSnapshot *s = info->snap;
    const KvStats *st = &info->stats;
    const KvTensorBits *bits = info->bits;
    if (json) {
        fprintf(f, "{\n");
        json_out_string(f, "file", path, 0);
        if (*k_scheme) json_out_string(f, "k_scheme", k_scheme, 0);
        if (*v_scheme) json_out_string(f, "v_scheme", v_scheme, 0);
        json_out_string(f, "model_name", s->model_name, 0);
        if (s->model_id[0]) json_out_string(f, "model_id", s->model_id, 0);
        json_out_string(f, "dtype", s->dtype, 0);
        fprintf(f, "  \"num_layers\": %d,\n  \"num_kv_heads\": %d,\n  \"seq_len\": %d,\n  \"head_dim\": %d,\n",
                s->n_layers, s->n_kv_heads, s->seq_len, s->head_dim);
        fprintf(f, "  \"elements\": %zu,\n  \"bytes\": %zu,\n  \"megabytes\": %.6f,\n", st->elements, st->bytes, st->megabytes);
        fprintf(f, "  \"mean\": %.8g,\n  \"std\": %.8g,\n  \"min\": %.8g,\n  \"max\": %.8g", st->mean, st->std, st->min, st->max);
        if (bits) kv_info_bits(f, s, bits, 1);
        if (n_mismatches >= 0) {
            fprintf(f, ",\n  \"compatible\": %s,\n  \"mismatches\": [", n_mismatches ? "false" : "true");
            const char *p = mismatches;
            for (int i = 0; i < n_mismatches && *p; i++) {
                const char *nl = strchr(p, '\n');
                int len = nl ? (int)(nl - p) : (int)strlen(p);
                fprintf(f, "%s", i ? ", " : "");
                json_out_quoted(f, p, (size_t)len);
                p = nl ? nl + 1 : p + len;
            }
            fprintf(f, "]");
        }
        fprintf(f, "\n}\n");
        return;
    }
    fprintf(f, "file:      %s\nmodel:     %s", path, s->model_name[0] ? s->model_name : "?");
    if (s->model_id[0]) fprintf(f, " (model_id %.12s...)", s->model_id);
    fprintf(f, "\ndtype:     %s\n", s->dtype);
    if (*k_scheme) fprintf(f, "stored:    compressed, keys %s, values %s (statistics of the decompressed values)\n", k_scheme, v_scheme);
    fprintf(f, "shape:     %d layers x [1, %d heads, %d tokens, %d dims] keys and values\n",
            s->n_layers, s->n_kv_heads, s->seq_len, s->head_dim);
    fprintf(f, "elements:  %zu (%zu bytes, %.3f MB)\n", st->elements, st->bytes, st->megabytes);
    fprintf(f, "values:    mean %.5f, std %.5f, min %.5f, max %.5f\n", st->mean, st->std, st->min, st->max);
    if (bits) kv_info_bits(f, s, bits, 0);
    if (n_mismatches == 0) fprintf(f, "model:     compatible\n");
    else if (n_mismatches > 0) fprintf(f, "model:     %d mismatch(es)\n%s", n_mismatches, mismatches);
}

/* Per-layer (mean, std) of keys and values in a real cache: mini-llama-brown (trained,
 * head_dim 64 like TinyLlama) on a WikiText-2 sentence, tests/fixtures/reference/
 * kv-mini-llama.safetensors, layers 0..3. The synthetic cache's 22 layers take these in
 * order, layer l using real layer l * 4 / 22. */
static const float REAL_KEY_STATS[4][2] = {{-0.0158f, 0.7875f}, {-0.0147f, 1.1780f}, {-0.0426f, 1.0642f}, {0.1545f, 1.3793f}};
static const float REAL_VALUE_STATS[4][2] = {{-0.0028f, 0.1878f}, {-0.0076f, 0.6668f}, {-0.0217f, 0.6797f}, {-0.0186f, 0.9049f}};

/* splitmix64 + Box-Muller: a seeded normal generator with no global state. */
static double uniform01(unsigned long long *state) {
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((z >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(unsigned long long *state) {
    double u = uniform01(state), v = uniform01(state);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

int quick_test_cache(KvSnapshot *s, unsigned long long seed, Error *err) {
    memset(s, 0, sizeof *s);
    s->n_layers = 22;
    s->n_kv_heads = 4;
    s->seq_len = 128;
    s->head_dim = 64;
    snprintf(s->model_name, sizeof s->model_name, "synthetic (mini-llama-brown layer statistics)");
    snprintf(s->dtype, sizeof s->dtype, "float32");
    size_t n = kv_snapshot_layer_size(s);
    s->k = malloc(n * s->n_layers * sizeof(float));
    s->v = malloc(n * s->n_layers * sizeof(float));
    if (!s->k || !s->v) { kv_snapshot_free(s); return error_set(err, "out of memory"); }
    unsigned long long state = seed;
    for (int l = 0; l < s->n_layers; l++) {
        int real = l * 4 / s->n_layers;
        for (size_t i = 0; i < n; i++) {
            s->k[(size_t)l * n + i] = (float)(REAL_KEY_STATS[real][0] + REAL_KEY_STATS[real][1] * normal(&state));
            s->v[(size_t)l * n + i] = (float)(REAL_VALUE_STATS[real][0] + REAL_VALUE_STATS[real][1] * normal(&state));
        }
    }
    return 0;
}

double kv_snapshot_rms(const KvSnapshot *s) {
    size_t n = kv_snapshot_layer_size(s) * s->n_layers;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)s->k[i] * s->k[i] + (double)s->v[i] * s->v[i];
    return n ? sqrt(sum / (2.0 * n)) : 0;
}

/* --calib of a command on KV cache files, as the recipe of flags that name no scheme. */
static int calib_of_flag(KvCacheRecipe *recipe, const char *calib_path, Error *err) {
    KvCacheFlags kv;
    kv_cache_flags_default(&kv, calib_path);
    return kv_cache_recipe_resolve(recipe, &kv, 0, NULL, NULL, NULL, err);
}

static int kv_info_with(FILE *f, const char *path, const char *model_dir, const Calibration *calib, int json,
                        int *n_mismatches, Error *err) {
    KvSnapshot snap;
    char k_scheme[512], v_scheme[512];
    KvTensorBits *bits = NULL;
    if (kv_load_any_bits(path, calib, &snap, k_scheme, v_scheme, sizeof k_scheme, &bits, err)) return -1;
    KvStats stats;
    kv_snapshot_stats(&snap, &stats);
    char mismatches[1024] = "";
    *n_mismatches = -1;
    if (model_dir) {
        Config c;
        char config[4096];
        snprintf(config, sizeof config, "%s/config.json", model_dir);
        if (config_load(&c, config, err)) {
            kv_snapshot_free(&snap);
            free(bits);
            return -1;
        }
        *n_mismatches = kv_snapshot_check_config(&snap, &c, mismatches, sizeof mismatches);
        ModelIdentity id;   /* a file that records its model is checked against this one's identity */
        if (snap.model_id[0] && modeldir_identity(model_dir, &id, err)) {
            kv_snapshot_free(&snap);
            free(bits);
            return -1;
        }
        if (snap.model_id[0] && strcmp(snap.model_id, id.id)) {
            size_t used = strlen(mismatches);
            snprintf(mismatches + used, sizeof mismatches - used, "model_id: cache made by %.12s..., model has %.12s...\n",
                     snap.model_id, id.id);
            (*n_mismatches)++;
        }
    }
    KvInfo info = {path, k_scheme, v_scheme, &snap, stats, bits, mismatches, *n_mismatches};
    report_kv_info(f, &info, json);
    kv_snapshot_free(&snap);
    free(bits);
    return 0;
}

int kv_info(FILE *f, const char *path, const char *model_dir, const char *calib_path, int json, int *n_mismatches,
            Error *err) {
    KvCacheRecipe recipe;
    if (calib_of_flag(&recipe, calib_path, err)) return -1;
    int rc = kv_info_with(f, path, model_dir, recipe.scheme.calib, json, n_mismatches, err);
    kv_cache_recipe_free(&recipe);
    return rc;
}

int quick_test_run(FILE *f, int *passed, Error *err) {
    KvSnapshot snap;
    CompressReport r;
    KvLayered int4_k, int4_v;
    char why[160];
    kv_layered_parse("int4-g64", KV_SIDE_KEYS, &int4_k, why, sizeof why);
    kv_layered_parse("int4-g64", KV_SIDE_VALUES, &int4_v, why, sizeof why);
    CompressOptions o = {&int4_k, &int4_v, 0.0, 0, 0.10, 18.0, 0.99, NULL, 0, NULL};   /* the seed's thresholds */
    if (quick_test_cache(&snap, 42, err)) return -1;
    if (kv_compress(&snap, &o, NULL, &r, NULL, err)) {
        kv_snapshot_free(&snap);
        return -1;
    }
    double rms = kv_snapshot_rms(&snap);
    fprintf(f, "quick test: synthetic KV cache, %d layers x %d KV heads x %d tokens x %d dims, seed 42\n",
            snap.n_layers, snap.n_kv_heads, snap.seq_len, snap.head_dim);
    fprintf(f, "  values drawn with mini-llama-brown's per-layer key/value mean and std; signal RMS %.4f\n", rms);
    fprintf(f, "  int4-g64: ratio %.3fx, rmse %.5f (%.2f%% of RMS), snr %.2f dB, cosine %.5f, max error %.4f\n",
            r.compression_ratio, r.quality.rmse, 100.0 * r.quality.rmse / rms, r.quality.snr_db,
            r.quality.cosine_similarity, r.quality.max_error);
    fprintf(f, "  thresholds: rmse < %.2f, snr > %.0f dB, cosine > %.2f\n", o.max_rmse, o.min_snr_db, o.min_cosine);
    for (int i = 0; i < r.n_violations; i++) fprintf(f, "  violation: %s\n", r.violations[i]);
    fprintf(f, "%s (%s)\n", r.passed ? "PASSED" : "FAILED", r.quality_level);
    *passed = r.passed;
    compress_report_free(&r);
    kv_snapshot_free(&snap);
    return 0;
}

/* The last path component of a model directory. */
static void base_name(const char *dir, char *name, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(name, cap, "%.*s", (int)(n - start), dir + start);
}

static int kv_extract_save(const Model *m, const char *model_dir, const int *ids, int n, const char *path,
                           DType dtype, Error *err) {
    KvSnapshot snap = {0};
    ModelIdentity id;
    char model_name[128];
    base_name(model_dir, model_name, sizeof model_name);
    if (modeldir_identity(model_dir, &id, err)) return -1;
    int rc = kv_snapshot_of_prompt(m, ids, n, model_name, &snap, err);
    if (rc == 0) {   /* the cache records its model by content: compress and decompress carry it */
        memcpy(snap.model_id, id.id, sizeof snap.model_id);
        memcpy(snap.model_sha256, id.weights_sha256, sizeof snap.model_sha256);
        rc = kv_snapshot_save(path, &snap, dtype, err);
    }
    kv_snapshot_free(&snap);
    return rc ? -1 : 0;
}

static int kv_compress_snapshot(const KvSnapshot *snap, const CompressOptions *o, const char *output, FILE *json,
                                FILE *verbose, int *passed, Error *err) {
    CompressReport r;
    if (kv_compress(snap, o, output, &r, NULL, err)) return -1;
    report_compress_json(json, &r, o, 1);
    if (verbose) report_compress_text(verbose, &r, o);
    *passed = r.passed;
    compress_report_free(&r);
    return 0;
}

int kv_compress_print(const KvCompressRun *run, int *passed, Error *err) {
    KvCacheRecipe recipe;
    KvSnapshot snap;
    if (kv_cache_recipe_resolve(&recipe, &run->kv, 0, NULL, NULL, NULL, err)) return -1;
    CompressOptions o = run->o;
    o.k_scheme = &recipe.scheme.k, o.v_scheme = &recipe.scheme.v, o.calib = recipe.scheme.calib;
    o.source = run->input;
    int rc = kv_snapshot_load(run->input, &snap, err);   /* its errors name the file */
    if (rc == 0) {
        rc = kv_compress_snapshot(&snap, &o, run->output, run->json, run->verbose, passed, err);
        kv_snapshot_free(&snap);
    }
    kv_cache_recipe_free(&recipe);
    return rc;
}

int kv_extract_from_dir(const char *model_dir, const char *prompt, const char *ids_text, const char *path,
                        DType dtype, int *n_tokens, int *n_layers, Error *err) {
    ModelDir L;
    if (modeldir_load(&L, model_dir, 1, err)) return -1;
    int n = 0;
    int *ids = ids_text ? token_ids_parse(ids_text, L.model.config.vocab_size, &n, err)
                        : tokenizer_encode(L.tok, prompt, strlen(prompt), 1, &n);
    if (!ids && !ids_text) error_set(err, "out of memory");
    int rc = ids ? kv_extract_save(&L.model, model_dir, ids, n, path, dtype, err) : -1;
    *n_tokens = n;
    *n_layers = L.model.config.n_layers;
    free(ids);
    modeldir_free(&L);
    return rc;
}

int kv_decompress_to(const char *in, const char *calib_path, const char *out, Error *err) {
    KvCacheRecipe recipe;
    KvSnapshot snap;
    if (calib_of_flag(&recipe, calib_path, err)) return -1;
    int rc = kv_decompress_file(in, recipe.scheme.calib, &snap, err);
    if (rc == 0) {
        rc = kv_snapshot_save(out, &snap, DT_F32, err);
        kv_snapshot_free(&snap);
    }
    kv_cache_recipe_free(&recipe);
    return rc;
}
