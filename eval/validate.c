/* eval/validate.c: the six-step validation, its report, and ./run --validate's defaults. */
#include "eval/validate.h"
#include "eval/calibration.h"
#include "eval/json_out.h"
#include "eval/perplexity.h"
#include "eval/progress.h"
#include "eval/wikitext.h"
#include "model/formats/compress.h"
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

/* Step 2's prompt: a WikiText-2 sentence (any text works; the cache's shape is what matters). */
#define VALIDATION_PROMPT "Robert Boulter is an English film , television and theatre actor . He had a guest " \
    "@-@ starring role on the television series The Bill in 2000 ."

#define RULE "======================================================================"

static void step(FILE *out, int i, const char *what) {
    if (out) { fprintf(out, "[%d/6] %s\n", i, what); fflush(out); }
}

/* Step 2: run the prompt with an fp32 cache and take the cache out as a snapshot. */
static int build_cache(const Model *m, const Tokenizer *tok, KvSnapshot *snap, int *n_tokens, Error *err) {
    int n = 0;
    int *ids = tokenizer_encode(tok, VALIDATION_PROMPT, strlen(VALIDATION_PROMPT), 1, &n);
    if (!ids) return error_set(err, "out of memory");
    if (n > m->config.max_seq_len) n = m->config.max_seq_len;
    int rc = kv_snapshot_of_prompt(m, ids, n, "validation prompt", snap, err);
    free(ids);
    *n_tokens = n;
    return rc;
}

static int same_snapshot(const KvSnapshot *a, const KvSnapshot *b) {
    size_t n = kv_snapshot_layer_size(a) * a->n_layers;
    return a->n_layers == b->n_layers && kv_snapshot_layer_size(a) == kv_snapshot_layer_size(b) &&
           !memcmp(a->k, b->k, n * sizeof(float)) && !memcmp(a->v, b->v, n * sizeof(float));
}

/* Steps 4 and 5: compress to a temporary file, read it back, compare, load into a cache. */
static int compress_and_reload(const Model *m, const KvSnapshot *snap, const KvCacheScheme *scheme, ValidateResult *r,
                               FILE *out, Error *err) {
    char path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/kvq-validate-%ld.safetensors", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    CompressOptions co = {&scheme->k, &scheme->v, 0.0, 0, 0.10, 18.0, 0.99, scheme->calib, 0, NULL};
    CompressReport cr;
    KvSnapshot recon, loaded;
    step(out, 4, "Compressing that KV cache...");
    if (kv_compress(snap, &co, path, &cr, &recon, err)) return -1;
    r->compression_ratio = cr.compression_ratio;
    r->rmse = cr.quality.rmse;
    r->snr_db = cr.quality.snr_db;
    r->cosine_similarity = cr.quality.cosine_similarity;
    r->max_error = cr.quality.max_error;
    r->key_rmse = cr.k_quality.rmse;
    r->value_rmse = cr.v_quality.rmse;
    if (out)
        fprintf(out, "      keys %s, values %s: %zu -> %zu bytes (%.2fx vs fp16), RMSE %.4f, SNR %.2f dB\n",
                co.k_scheme->text, co.v_scheme->text, cr.original_bytes, cr.compressed_bytes, cr.compression_ratio,
                cr.quality.rmse, cr.quality.snr_db);
    compress_report_free(&cr);
    step(out, 5, "Loading the compressed file back...");
    int rc = kv_decompress_file(path, scheme->calib, &loaded, err);
    unlink(path);
    if (rc) { kv_snapshot_free(&recon); return -1; }
    r->roundtrip_ok = same_snapshot(&loaded, &recon);
    KvCache kv;
    if (kv_cache_init(&kv, &m->config, loaded.seq_len, 1, NULL, NULL, err) == 0) {
        rc = kv_snapshot_to_cache(&loaded, &kv, err);
        kv_cache_free(&kv);
    } else {
        rc = -1;
    }
    if (out)
        fprintf(out, "      reconstruction %s the in-memory dequantization; loaded into a %d-position cache\n",
                r->roundtrip_ok ? "equals" : "DIFFERS FROM", loaded.seq_len);
    kv_snapshot_free(&loaded);
    kv_snapshot_free(&recon);
    return rc;
}

/* Steps 3 and 6: one pass over the windows with the quantized cache and an fp32 one. */
static int perplexities(const Model *m, const Tokenizer *tok, const ValidateOptions *o, const KvCacheScheme *scheme,
                        ValidateResult *r, FILE *out, Error *err) {
    int n_tokens = 0;
    int *tokens = load_eval_tokens(o->text_file, tok, 1, &n_tokens, err);
    if (!tokens) return -1;
    PplOptions po = {0};
    po.protocol = PPL_HF;
    po.ctx = o->ctx;
    po.stride = o->stride;
    po.max_windows = o->windows;
    po.shard_count = 1;
    po.batch = o->ctx < 256 ? o->ctx : 256;
    po.scheme = scheme;
    po.compare = 1;
    Progress progress;
    progress_init(&progress, "      ppl", o->quiet || !out);
    progress.passes = 2;   /* the fp32 and the quantized cache over every window token, as ppl counts */
    po.progress = progress_update;
    po.progress_user = &progress;
    PplResult pr;
    int rc = ppl_evaluate(m, tokens, n_tokens, &po, &pr, err);
    progress_finish(&progress);
    free(tokens);
    if (rc) return -1;
    r->baseline_ppl = ppl_value(pr.sums.base_nll_sum, pr.sums.scored);
    r->compressed_ppl = ppl_value(pr.sums.nll_sum, pr.sums.scored);
    r->delta = r->compressed_ppl - r->baseline_ppl;
    r->delta_percent = 100.0 * r->delta / r->baseline_ppl;
    r->delta_nll = pr.sums.diff_sum / pr.sums.scored;
    r->delta_nll_stderr = ppl_stderr_mean(pr.sums.diff_sum, pr.sums.diff_sumsq, pr.sums.scored);
    r->kl_mean = pr.sums.kl_sum / pr.sums.scored;
    r->top1_agreement = (double)pr.sums.top1_agree / pr.sums.scored;
    r->scored_tokens = pr.sums.scored;
    r->windows = pr.windows;
    r->windows_total = ppl_window_count(&po, n_tokens);
    return 0;
}

int validate_run(const Model *m, const Tokenizer *tok, const ValidateOptions *o, const KvCacheScheme *scheme, FILE *out,
                 ValidateResult *r, Error *err) {
    memset(r, 0, sizeof *r);
    double t0 = seconds_now();
    const Config *c = &m->config;
    if (out) fprintf(out, RULE "\nKV cache compression validation\n" RULE "\n");
    step(out, 1, "Loading model...");
    if (out)
        fprintf(out, "      %s (%s): dim %d, %d layers, %d heads / %d KV heads, head_dim %d, vocab %d\n",
                o->model_dir, o->model_note, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size);
    if (out && scheme->calib) fprintf(out, "      calibration %s (sha256 %s)\n", scheme->calib->path, scheme->calib->file_sha256);
    step(out, 2, "Building a KV cache from a prompt...");
    KvSnapshot snap;
    if (build_cache(m, tok, &snap, &r->cache_tokens, err)) return -1;
    if (out)
        fprintf(out, "      %d tokens -> %d layers x keys and values [1, %d, %d, %d]\n", r->cache_tokens,
                snap.n_layers, snap.n_kv_heads, snap.seq_len, snap.head_dim);
    step(out, 3, "Baseline perplexity (fp32 KV cache), side by side with step 6's quantized run...");
    if (out) fprintf(out, "      %s, %d windows of %d tokens, stride %d\n", o->text_file, o->windows, o->ctx, o->stride);
    if (perplexities(m, tok, o, scheme, r, out, err)) { kv_snapshot_free(&snap); return -1; }
    if (out) fprintf(out, "      baseline perplexity %.4f over %ld tokens\n", r->baseline_ppl, r->scored_tokens);
    int rc = compress_and_reload(m, &snap, scheme, r, out, err);
    kv_snapshot_free(&snap);
    if (rc) return -1;
    step(out, 6, "Perplexity with the KV cache quantized as it is written...");
    if (out)
        fprintf(out, "      keys %s, values %s: perplexity %.4f\n", scheme->k.text, scheme->v.text, r->compressed_ppl);
    r->threshold = fmax(o->threshold_ppl, o->threshold_percent / 100.0 * r->baseline_ppl);
    r->passed = r->roundtrip_ok && r->delta < r->threshold;
    r->seconds = seconds_now() - t0;
    return 0;
}

/* Where the delta sits against KVQuant's published perplexity bars (LLaMA-7B, Wikitext-2). */
static void print_kvquant_bars(FILE *out, const ValidateResult *r) {
    const double bars[3] = {0.02, 0.1, 0.5};
    const char *bits[3] = {"4-bit", "3-bit", "2-bit"};
    fprintf(out, "KVQuant bars (delta ppl): ");
    for (int i = 0; i < 3; i++) fprintf(out, "%s < %.2f %s%s", bits[i], bars[i], r->delta < bars[i] ? "yes" : "no", i < 2 ? ", " : "\n");
    fprintf(out, "  (published for LLaMA at ppl ~5-6; an absolute delta grows with the baseline ppl, so\n"
                 "   compare the relative delta %.3f%% when the model's ppl is far from that)\n", r->delta_percent);
}

/* The threshold as the user gave it, e.g. "the larger of 0.5 and 1% of the baseline". */
static void threshold_rule(const ValidateOptions *o, char *buf, size_t n) {
    if (o->threshold_ppl > 0 && o->threshold_percent > 0)
        snprintf(buf, n, "the larger of %g and %g%% of the baseline", o->threshold_ppl, o->threshold_percent);
    else if (o->threshold_percent > 0) snprintf(buf, n, "%g%% of the baseline", o->threshold_percent);
    else snprintf(buf, n, "%g perplexity points", o->threshold_ppl);
}

void validate_print_results(FILE *out, const ValidateOptions *o, const KvCacheScheme *scheme, const ValidateResult *r) {
    fprintf(out, RULE "\nRESULTS\n" RULE "\n");
    fprintf(out, "Baseline perplexity:     %.4f\n", r->baseline_ppl);
    fprintf(out, "Compressed perplexity:   %.4f\n", r->compressed_ppl);
    char se[32];
    fprintf(out, "Delta:                   %+.4f (%+.3f%%); mean NLL %+.6f +/- %s\n", r->delta, r->delta_percent,
            r->delta_nll, se_text(r->delta_nll_stderr, "%.6f", se, sizeof se));
    fprintf(out, "Compression ratio:       %.2fx (vs fp16)\n", r->compression_ratio);
    fprintf(out, "RMSE / SNR / cosine:     %.4f / %.2f dB / %.5f (RMSE keys %.4f, values %.4f)\n", r->rmse, r->snr_db,
            r->cosine_similarity, r->key_rmse, r->value_rmse);
    fprintf(out, "KL / top-1 agreement:    %.6f nats/token / %.2f%%\n", r->kl_mean, 100.0 * r->top1_agreement);
    fprintf(out, "Scored tokens:           %ld in %d windows (%.1f s)\n", r->scored_tokens, r->windows, r->seconds);
    if (scheme->calib)
        fprintf(out, "Calibration:             %s (sha256 %.12s...)\n", scheme->calib->path, scheme->calib->file_sha256);
    print_kvquant_bars(out, r);
    char rule[96];
    threshold_rule(o, rule, sizeof rule);
    if (!r->roundtrip_ok) fprintf(out, "[X] FAILED: the compressed file does not reproduce the dequantized cache\n");
    else if (r->passed) fprintf(out, "[OK] PASSED: Delta %.4f < %.4g threshold (%s)\n", r->delta, r->threshold, rule);
    else fprintf(out, "[X] FAILED: Delta %.4f >= %.4g threshold (%s)\n", r->delta, r->threshold, rule);
}

void validate_print_json(FILE *out, const ValidateOptions *o, const KvCacheScheme *scheme, const ValidateResult *r) {
    fprintf(out, "{\n");
    json_out_number(out, "baseline_perplexity", r->baseline_ppl, 0);
    json_out_number(out, "compressed_perplexity", r->compressed_ppl, 0);
    json_out_number(out, "delta", r->delta, 0);
    json_out_number(out, "delta_percent", r->delta_percent, 0);
    json_out_number(out, "compression_ratio", r->compression_ratio, 0);
    json_out_number(out, "rmse", r->rmse, 0);
    json_out_number(out, "key_rmse", r->key_rmse, 0);
    json_out_number(out, "value_rmse", r->value_rmse, 0);
    json_out_number(out, "snr_db", r->snr_db, 0);
    json_out_number(out, "cosine_similarity", r->cosine_similarity, 0);
    fprintf(out, "  \"passed\": %s,\n", r->passed ? "true" : "false");
    char rule[96];
    threshold_rule(o, rule, sizeof rule);
    json_out_number(out, "threshold", r->threshold, 0);
    json_out_string(out, "threshold_rule", rule, 0);
    json_out_string(out, "model", o->model_dir, 0);
    json_out_string(out, "k_scheme", scheme->k.text, 0);
    json_out_string(out, "v_scheme", scheme->v.text, 0);
    json_out_string(out, "calib", scheme->calib ? scheme->calib->path : "", 0);   /* "" without one, as ppl's report */
    json_out_string(out, "calib_sha256", scheme->calib ? scheme->calib->file_sha256 : "", 0);
    fprintf(out, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"windows\": %d,\n  \"scored_tokens\": %ld,\n", o->ctx, o->stride,
            r->windows, r->scored_tokens);
    json_out_number(out, "max_error", r->max_error, 0);
    json_out_number(out, "delta_nll", r->delta_nll, 0);
    json_out_number(out, "delta_nll_stderr", r->delta_nll_stderr, 0);
    json_out_number(out, "kl_divergence", r->kl_mean, 0);
    json_out_number(out, "top1_agreement", r->top1_agreement, 0);
    fprintf(out, "  \"cache_roundtrip_ok\": %s,\n", r->roundtrip_ok ? "true" : "false");
    json_out_number(out, "seconds", r->seconds, 1);
    fprintf(out, "}\n");
}

int validate_parse_threshold(const char *text, ValidateOptions *o) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    int percent = *end == '%';
    if (percent) end++;
    if (errno || end == text || *end || !(value > 0) || !isfinite(value)) return -1;
    o->threshold_ppl = percent ? 0 : value;
    o->threshold_percent = percent ? value : 0;
    return 0;
}

#define BUNDLED_MODEL "data/models/mini-llama-brown"
#define TINYLLAMA_DIR "models/tinyllama"

int validate_default_run(ValidateOptions *o, FILE *out, FILE *json, int *passed, Error *err) {
    if (o->model_dir) o->model_note = "--model";
    else if (path_exists(TINYLLAMA_DIR "/model.safetensors")) { o->model_dir = TINYLLAMA_DIR; o->model_note = "exported TinyLlama"; }
    else { o->model_dir = BUNDLED_MODEL; o->model_note = "bundled"; }
    if (out && !strcmp(o->model_note, "bundled"))
        fprintf(out, "Using the bundled model %s. For TinyLlama-1.1B run:\n"
                     "  python3 export/export.py TinyLlama/TinyLlama-1.1B-Chat-v1.0 " TINYLLAMA_DIR "\n\n", BUNDLED_MODEL);
    ModelDir L;
    ValidateResult r;
    KvCacheRecipe recipe;
    if (modeldir_load(&L, o->model_dir, 1, err)) return -1;
    if (!o->ctx) o->ctx = L.model.config.max_seq_len;
    if (!o->stride) o->stride = ppl_default_stride(o->ctx);
    int rc = kv_cache_recipe_resolve(&recipe, &o->kv, 0, o->model_dir, NULL, &L.model, err);
    if (rc == 0) rc = validate_run(&L.model, L.tok, o, &recipe.scheme, out, &r, err);
    modeldir_free(&L);
    if (rc == 0 && out) validate_print_results(out, o, &recipe.scheme, &r);
    if (rc == 0 && json) validate_print_json(json, o, &recipe.scheme, &r);
    kv_cache_recipe_free(&recipe);
    if (rc) return -1;
    *passed = r.passed;
    return 0;
}
