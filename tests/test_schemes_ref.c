/* tests/test_schemes_ref.c: every row of the scheme reference files — perplexity, KL divergence
 * and top-1 agreement with the KV cache quantized as it is written, keys and values with their
 * own LAYERED schemes — against the independent implementation of SCHEMES.md, on mini-llama-brown
 * and on mini-llama-brown-outliers (tests/fixtures/reference/kv-schemes-*.json: HF sliding
 * window, ctx 1024, stride 512, first 4 windows, exact f32 matmuls), and the rows of the fitted
 * bases (SCHEMES.md §8) computed with the reference's own calibration of the outliers model,
 * given here as --calib gives it (kv-schemes-calibrated-*.json: its codebooks used exactly), and
 * SCHEMES.md §9's rows (+aw, rvq, pca) with the reference's §9 calibration (kv-calib9-*: its
 * tables and aw.* weights used exactly; kv-schemes-section9-*.json). While a §9 base is missing
 * from this build, its fits are left out of the calibration and its rows reported as not run
 * (a line that is neither PASS nor FAIL, naming the base).
 * Tolerances (the issue's): ppl 0.01% relative; KL 2% relative or 2e-6 absolute; top-1 0.2 points.
 * Under sanitizers (10x slower) one row in four is run (memory errors on those code paths; the
 * other bases' codecs run under the sanitizers in their own tests/test_codec_*.c): the plain build,
 * which `make test` and CI also run, checks every row. `make check` (KVQ_QUICK=1) checks one row in
 * QUICK_ROW_STEP, from a different first row in each file, and says so. */
#include "tests/test.h"
#include "tests/calib_known.h"
#include "eval/perplexity.h"
#include "eval/wikitext.h"
#include "model/formats/json.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PPL_REL_TOL 1e-4
#define KL_REL_TOL 0.02
#define KL_ABS_TOL 2e-6
#define TOP1_TOL 0.002

#if defined(__SANITIZE_ADDRESS__)
#define ROW_STEP 4
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROW_STEP 4
#endif
#endif
#ifndef ROW_STEP
#define ROW_STEP 1
#endif
#define QUICK_ROW_STEP 13

static JsonValue *load_json(const char *path) {
    Error err;
    size_t len;
    char *text = read_whole_file(path, 1 << 20, &len, &err);
    JsonValue *v = text ? json_parse(text, len, &err) : NULL;
    free(text);
    return v;
}

static double number(const JsonValue *row, const char *key) {
    const JsonValue *v = json_get(row, key);
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

static const char *text_of(const JsonValue *row, const char *key) {
    const JsonValue *v = json_get(row, key);
    return v && v->type == JSON_STRING ? v->string : "";
}

/* 1 when every base the row names is in this build's codec table (else the row is reported, not run). */
static int row_bases_known(const JsonValue *row, const char *model_name) {
    const char *texts[2] = {text_of(row, "k_scheme"), text_of(row, "v_scheme")};
    for (int i = 0; i < 2; i++) {
        char base[64], why[160];
        KvBase b;
        snprintf(base, sizeof base, "%s", texts[i]);
        base[strcspn(base, "+;")] = '\0';
        if (kv_base_parse(base, &b, why, sizeof why)) {
            printf("schemes ref %s: K %s, V %s not run: %s\n", model_name, texts[0], texts[1], why);
            return 0;
        }
    }
    return 1;
}

/* One reference row: evaluate and compare ppl, KL and top-1. calib: the tables of fitted bases. */
static void check_row(const Model *m, const int *tokens, int n_tokens, const char *model_name, const Calibration *calib,
                      const JsonValue *row) {
    const char *ks = text_of(row, "k_scheme"), *vs = text_of(row, "v_scheme");
    char name[256], why[160];
    snprintf(name, sizeof name, "schemes ref %s: K %s, V %s", model_name, ks, vs);
    KvCacheScheme scheme = {.calib = calib};
    if (kv_layered_parse(ks, KV_SIDE_KEYS, &scheme.k, why, sizeof why) ||
        kv_layered_parse(vs, KV_SIDE_VALUES, &scheme.v, why, sizeof why)) {
        check(0, name, "does not parse: %s", why);
        return;
    }
    PplOptions o = {0};
    o.protocol = PPL_HF;
    o.ctx = 1024;
    o.stride = 512;
    o.max_windows = 4;
    o.shard_count = 1;
    o.batch = 256;
    o.scheme = &scheme;
    o.compare = 1;
    PplResult r;
    Error err;
    if (ppl_evaluate(m, tokens, n_tokens, &o, &r, &err)) {
        check(0, name, "%s", err.msg);
        return;
    }
    double ppl = ppl_value(r.sums.nll_sum, r.sums.scored), kl = r.sums.kl_sum / r.sums.scored, top1 = (double)r.sums.top1_agree / r.sums.scored;
    double want_ppl = number(row, "ppl"), want_kl = number(row, "kl"), want_top1 = number(row, "top1");
    double ppl_rel = fabs(ppl - want_ppl) / want_ppl, kl_diff = fabs(kl - want_kl), top1_diff = fabs(top1 - want_top1);
    int ok = ppl_rel <= PPL_REL_TOL && (kl_diff <= KL_ABS_TOL || kl_diff <= KL_REL_TOL * want_kl) &&
             top1_diff <= TOP1_TOL && r.sums.scored == (long)number(row, "scored_tokens");
    check(ok, name, "ppl %.5f vs %.5f (rel %.2g, tol %.0e), KL %.5g vs %.5g (tol 2%% or 2e-6), top-1 %.4f vs %.4f "
          "(tol 0.002), %ld tokens", ppl, want_ppl, ppl_rel, PPL_REL_TOL, kl, want_kl, top1, want_top1, r.sums.scored);
    printf("     ppl %.5f (ref %.5f, rel %.1e)  KL %.4e (ref %.4e, rel %.1e)  top-1 %.4f (ref %.4f)\n", ppl, want_ppl,
           ppl_rel, kl, want_kl, want_kl > 0 ? kl_diff / want_kl : kl_diff, top1, want_top1);
}

/* first: the first row checked in quick mode (files start apart, so their samples differ). */
static void check_file(const char *model_dir, const char *model_name, const char *ref_path, const char *calib_path,
                       size_t first) {
    Model m;
    Error err;
    char path[256], msg[256], name[160];
    snprintf(name, sizeof name, "schemes ref %s: model, tokenizer, text and reference load", model_name);
    Tokenizer *tok = NULL;
    int n_tokens = 0, *tokens = NULL;
    JsonValue *ref = load_json(ref_path);
    int loaded = model_load(&m, model_dir, &err) == 0;
    snprintf(path, sizeof path, "%s/tokenizer.bin", model_dir);
    if (loaded) tok = tokenizer_load(path, msg, sizeof msg);
    if (tok) tokens = load_eval_tokens("data/wikitext-2-raw/wiki.test.raw", tok, 1, &n_tokens, &err);
    const JsonValue *rows = ref ? json_get(ref, "rows") : NULL;
    Calibration calib = {0};
    /* the model's own hash is checked where --calib is (eval/calibration.c); here the geometry */
    CalibModel geometry = {m.config.n_layers, m.config.n_heads, m.config.n_kv_heads, m.config.head_dim, NULL};
    int calib_ok = !calib_path || (loaded && load_known_fits(calib_path, &geometry, &calib, &err) == 0);
    if (check(loaded && tok && tokens && rows && rows->type == JSON_ARRAY && rows->count > 0 && calib_ok, name, "%s",
              loaded && calib_ok ? ref_path : err.msg)) {
        size_t step = test_quick() ? QUICK_ROW_STEP : ROW_STEP, i = test_quick() ? first % rows->count : 0;
        if (step > 1)
            printf("schemes ref %s: one row in %zu checked, from row %zu (%zu rows)\n", model_name, step, i, rows->count);
        for (; i < rows->count; i += step)
            if (row_bases_known(&rows->items[i], model_name))
                check_row(&m, tokens, n_tokens, model_name, calib_path ? &calib : NULL, &rows->items[i]);
    }
    calibration_free(&calib);
    free(tokens);
    if (tok) tokenizer_free(tok);
    if (loaded) model_free(&m);
    json_free(ref);
}

int main(void) {
    check_file("data/models/mini-llama-brown", "mini-llama-brown", "tests/fixtures/reference/kv-schemes-mini-llama-brown.json",
               NULL, 0);
    check_file("data/models/mini-llama-brown-outliers", "mini-llama-brown-outliers",
               "tests/fixtures/reference/kv-schemes-mini-llama-brown-outliers.json", NULL, 3);
    check_file("data/models/mini-llama-brown-outliers", "mini-llama-brown-outliers calibrated",
               "tests/fixtures/reference/kv-schemes-calibrated-mini-llama-brown-outliers.json",
               "tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors", 5);
    check_file("data/models/mini-llama-brown-outliers", "mini-llama-brown-outliers section 9",
               "tests/fixtures/reference/kv-schemes-section9-mini-llama-brown-outliers.json",
               "tests/fixtures/reference/kv-calib9-mini-llama-brown-outliers.safetensors", 7);
    return test_exit_code();
}
