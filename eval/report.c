/* eval/report.c: run ./run ppl, print perplexity results and merge sharded runs. */
#include "eval/report.h"
#include "eval/calibration.h"
#include "eval/json_out.h"
#include "eval/wikitext.h"
#include "eval/progress.h"
#include "eval/views.h"
#include "model/formats/json.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A scheme's stored and effective bits; copied, because binding writes into the scheme. */
static void scheme_bits(const KvLayered *scheme, KvSide side, const Config *c, int ctx, double bits[2]) {
    KvLayered bound = *scheme;
    char why[160];
    /* bound to this model already when its caches were made, so this cannot fail */
    if (kv_layered_bind(&bound, c->n_layers, c->head_dim, side, why, sizeof why) == 0)
        kv_layered_bits(&bound, c->n_layers, c->head_dim, ctx, &bits[0], &bits[1]);
}

/* 1 when c was fitted on text_file (the same sha256), whose numbers are then not held out. */
static int calib_fitted_on(const Calibration *c, const char *text_file) {
    Error ignored;   /* a text that cannot be hashed now was read a moment ago: no claim is made */
    return calibration_fitted_on(c, text_file, &ignored) == 1;
}

void ppl_report_describe(PplReport *r, const char *model, const char *model_id, const char *text_file,
                         const char *precision, const Config *c, const PplOptions *o, int n_tokens) {
    snprintf(r->model, sizeof r->model, "%s", model);
    snprintf(r->model_id, sizeof r->model_id, "%s", model_id);
    snprintf(r->text_file, sizeof r->text_file, "%s", text_file);
    const KvCacheScheme *scheme = o->scheme;
    snprintf(r->k_scheme, sizeof r->k_scheme, "%s", scheme->k.text);
    snprintf(r->v_scheme, sizeof r->v_scheme, "%s", scheme->v.text);
    snprintf(r->calib, sizeof r->calib, "%s", scheme->calib ? scheme->calib->path : "");
    snprintf(r->calib_sha256, sizeof r->calib_sha256, "%s", scheme->calib ? scheme->calib->file_sha256 : "");
    r->calib_on_text = scheme->calib && calib_fitted_on(scheme->calib, text_file);
    scheme_bits(&scheme->k, KV_SIDE_KEYS, c, o->ctx, r->k_bits);
    scheme_bits(&scheme->v, KV_SIDE_VALUES, c, o->ctx, r->v_bits);
    snprintf(r->precision, sizeof r->precision, "%s", precision);
    r->protocol_llamacpp = o->protocol == PPL_LLAMACPP;
    r->ctx = o->ctx;
    r->stride = o->stride;
    r->n_tokens = n_tokens;
    r->shard_index = o->shard_index;
    r->shard_count = o->shard_count;
}

int ppl_run(const PplRun *run, PplReport *r, Error *err) {
    ModelDir L;
    PplOptions o = run->o;
    KvCacheRecipe recipe;
    ModelIdentity identity;
    if (ppl_load_model(&L, run->model_dir, run->precision, &o, err)) return -1;
    if (modeldir_identity(run->model_dir, &identity, err) ||
        kv_cache_recipe_resolve(&recipe, &run->kv, 0, run->model_dir, identity.weights_sha256, &L.model, err)) {
        modeldir_free(&L);
        return -1;
    }
    o.scheme = &recipe.scheme;
    Progress progress;
    progress_init(&progress, "ppl", run->quiet);
    progress.passes = o.compare ? 2 : 1;   /* fp32 and the scheme, each over every window token */
    o.progress = progress_update;
    o.progress_user = &progress;
    int n_tokens = 0;
    int *tokens = load_eval_tokens(run->text_file, L.tok, o.protocol == PPL_HF, &n_tokens, err);
    if (tokens && run->max_tokens && run->max_tokens < n_tokens) n_tokens = run->max_tokens;
    memset(r, 0, sizeof *r);
    int rc = tokens ? ppl_evaluate(&L.model, tokens, n_tokens, &o, &r->result, err) : -1;
    if (rc == 0) {
        progress_finish(&progress);
        ppl_report_describe(r, run->model_dir, identity.id, run->text_file, run->precision, &L.model.config, &o, n_tokens);
    }
    free(tokens);
    kv_cache_recipe_free(&recipe);
    modeldir_free(&L);
    return rc;
}

void report_ppl_text(FILE *f, const PplReport *r) {
    const PplResult *x = &r->result;
    fprintf(f, "model:     %s (model_id %.12s...)\n", r->model, r->model_id);
    fprintf(f, "text:      %s (%d tokens)\n", r->text_file, r->n_tokens);
    if (r->protocol_llamacpp)
        fprintf(f, "protocol:  llama.cpp chunks of %d, second half scored\n", r->ctx);
    else
        fprintf(f, "protocol:  HF sliding window, ctx %d, stride %d\n", r->ctx, r->stride);
    fprintf(f, "windows:   %d of %d", x->windows, x->windows_total);
    PplOptions all = {.protocol = r->protocol_llamacpp ? PPL_LLAMACPP : PPL_HF, .ctx = r->ctx, .stride = r->stride};
    int in_text = ppl_window_count(&all, r->n_tokens);
    if (in_text > x->windows_total) fprintf(f, " asked (--windows; the text has %d)", in_text);
    if (r->shard_count > 1) fprintf(f, " (shard %d/%d)", r->shard_index, r->shard_count);
    if (r->merged_shards > 1) fprintf(f, " (merged from %d shards)", r->merged_shards);
    fprintf(f, ", %ld scored tokens\n", x->sums.scored);
    fprintf(f, "kv cache:  keys %s, values %s\n", r->k_scheme, r->v_scheme);
    if (r->calib[0]) fprintf(f, "calib:     %s (sha256 %.12s...)%s\n", r->calib, r->calib_sha256,
                             r->calib_on_text ? ", fitted on this very text: NOT held out" : "");
    if (r->k_bits[0] > 0)
        fprintf(f, "bits:      keys %.4g stored, %.4g effective at ctx %d; values %.4g stored, %.4g effective\n",
                r->k_bits[0], r->k_bits[1], r->ctx, r->v_bits[0], r->v_bits[1]);
    if (x->sums.code_values[0] > 0)
        fprintf(f, "entropy:   keys %.4g, values %.4g bits per value (SCHEMES.md 9, each window's cache coded apart)\n",
                token_sums_entropy_bits(&x->sums, 0), token_sums_entropy_bits(&x->sums, 1));
    if (!strcmp(r->precision, "bf16")) fprintf(f, "matmuls:   bf16 activations (not the exact f32 path)\n");
    double se = ppl_stderr_mean(x->sums.nll_sum, x->sums.nll_sumsq, x->sums.scored);
    double ppl = ppl_value(x->sums.nll_sum, x->sums.scored);
    char a[32], b[32], c[32];   /* standard errors as text: "undefined" under 2 scored tokens */
    if (x->compared) {
        double base = ppl_value(x->sums.base_nll_sum, x->sums.scored);
        double base_se = ppl_stderr_mean(x->sums.base_nll_sum, x->sums.base_nll_sumsq, x->sums.scored);
        double dse = ppl_stderr_mean(x->sums.diff_sum, x->sums.diff_sumsq, x->sums.scored);
        fprintf(f, "baseline:  ppl %.4f (mean NLL %.5f +/- %s, NLL sum %.4f, fp32 cache)\n", base,
                x->sums.base_nll_sum / x->sums.scored, se_text(base_se, "%.5f", a, sizeof a), x->sums.base_nll_sum);
        fprintf(f, "quantized: ppl %.4f (mean NLL %.5f +/- %s, NLL sum %.4f)\n", ppl, x->sums.nll_sum / x->sums.scored,
                se_text(se, "%.5f", a, sizeof a), x->sums.nll_sum);
        fprintf(f, "delta:     %+.4f ppl (%+.3f%%), mean NLL %+.6f +/- %s (paired)\n", ppl - base,
                100.0 * (ppl - base) / base, x->sums.diff_sum / x->sums.scored, se_text(dse, "%.6f", a, sizeof a));
        fprintf(f, "agreement: KL(baseline||quantized) %.6f nats/token, top-1 %.2f%%\n",
                x->sums.kl_sum / x->sums.scored, 100.0 * x->sums.top1_agree / x->sums.scored);
        PplSummary y = token_sums_summarize(&x->sums);
        fprintf(f, "errors:    delta %+.4f +/- %s ppl (%+.3f%% +/- %s), ln(PPL_q/PPL_base) %+.6f +/- %s\n", y.delta,
                se_text(y.delta_se, "%.4f", a, sizeof a), y.delta_pct, se_text(y.delta_pct_se, "%.3f%%", b, sizeof b),
                y.ln_ratio, se_text(y.ln_ratio_se, "%.6f", c, sizeof c));
        fprintf(f, "KL:        mean %.6f +/- %s, median %.3g, p90 %.3g, p99 %.3g, p99.9 %.3g, max %.3g\n", y.kl_mean,
                se_text(y.kl_se, "%.6f", a, sizeof a), y.kl_median, y.kl_p90, y.kl_p99, y.kl_p999, y.kl_max);
        fprintf(f, "top-1:     %.3f%% +/- %s the same; p(correct token) %+.3f%% mean, %.3f%% RMS\n",
                100 * y.top1, se_text(100 * y.top1_se, "%.3f%%", a, sizeof a), 100 * y.dp_mean, 100 * y.dp_rms);
        views_ppl_text(f, &x->sums);
    } else {
        fprintf(f, "ppl:       %.4f (mean NLL %.5f +/- %s, NLL sum %.4f)\n", ppl, x->sums.nll_sum / x->sums.scored,
                se_text(se, "%.5f", a, sizeof a), x->sums.nll_sum);
    }
    if (x->sums.scored < 2)
        fprintf(f, "note:      standard errors are undefined with fewer than 2 scored tokens (null in --json)\n");
    double rate = x->seconds > 0 ? x->tokens_processed * (x->compared ? 2 : 1) / x->seconds : 0;
    if (x->compared)
        fprintf(f, "time:      %.1f s, %.0f tok/s of forward passes (%ld window tokens, each run with the fp32 cache "
                "and with the scheme's)\n", x->seconds, rate, x->tokens_processed);
    else
        fprintf(f, "time:      %.1f s, %.0f tok/s of forward passes (%ld window tokens)\n", x->seconds, rate,
                x->tokens_processed);
}

void report_schemes_json(FILE *f, const char *k_scheme, const char *v_scheme, const double k_bits[2],
                         const double v_bits[2]) {
    json_out_string(f, "k_scheme", k_scheme, 0);
    json_out_string(f, "v_scheme", v_scheme, 0);
    json_out_number(f, "k_stored_bits", k_bits[0], 0);
    json_out_number(f, "k_effective_bits", k_bits[1], 0);
    json_out_number(f, "v_stored_bits", v_bits[0], 0);
    json_out_number(f, "v_effective_bits", v_bits[1], 0);
}

void report_entropy_json(FILE *f, const TokenSums *s) {
    json_out_number(f, "k_entropy_bits", token_sums_entropy_bits(s, 0), 0);
    json_out_number(f, "v_entropy_bits", token_sums_entropy_bits(s, 1), 0);
    fprintf(f, "  \"code_bits\": [%.17g, %.17g],\n  \"code_values\": [%.17g, %.17g],\n", s->code_bits[0], s->code_bits[1],
            s->code_values[0], s->code_values[1]);
}

int report_entropy_read(const JsonValue *j, TokenSums *s, const char *where, Error *err) {
    const char *keys[] = {"code_bits", "code_values"};
    for (int k = 0; k < 2; k++) {
        const JsonValue *a = json_get(j, keys[k]);
        if (!a) continue;   /* made before the entropy figure: none counted */
        if (a->type != JSON_ARRAY || a->count != 2 || a->items[0].type != JSON_NUMBER || a->items[1].type != JSON_NUMBER ||
            !(a->items[0].number >= 0 && a->items[0].number < 1e300) || !(a->items[1].number >= 0 && a->items[1].number < 1e300))
            return error_set(err, "%s: \"%s\" is not two non-negative numbers", where, keys[k]);
        double *into = k ? s->code_values : s->code_bits;
        into[0] += a->items[0].number, into[1] += a->items[1].number;
    }
    return 0;
}

void report_summary_json(FILE *f, PplSummary y) {
    const char *names[] = {"ppl_stderr", "baseline_ppl_stderr", "delta_stderr", "delta_percent_stderr",
                           "ln_ppl_ratio", "ln_ppl_ratio_stderr", "kl_stderr", "kl_median", "kl_p90",
                           "kl_p99", "kl_p999", "kl_max", "top1_stderr", "dp_mean", "dp_rms"};
    double values[] = {y.ppl_se, y.base_ppl_se, y.delta_se, y.delta_pct_se, y.ln_ratio, y.ln_ratio_se, y.kl_se,
                       y.kl_median, y.kl_p90, y.kl_p99, y.kl_p999, y.kl_max, y.top1_se, y.dp_mean, y.dp_rms};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) json_out_number(f, names[i], values[i], 0);
}

/* The sums past the ppl ones, for merging: KL's square sum and maximum, the p(correct) sums and
 * the KL histogram as [bin, count] pairs of its non-empty bins. */
void report_sums_json(FILE *f, const TokenSums *s) {
    json_out_number(f, "kl_sumsq", s->kl_sumsq, 0);
    json_out_number(f, "kl_max_value", s->kl_max, 0);
    json_out_number(f, "dp_sum", s->dp_sum, 0);
    json_out_number(f, "dp_sumsq", s->dp_sumsq, 0);
    fprintf(f, "  \"kl_histogram\": [");
    int first = 1;
    for (int i = 0; i < KL_BINS; i++) {
        if (!s->kl_hist.count[i]) continue;
        fprintf(f, "%s[%d, %lld]", first ? "" : ", ", i, s->kl_hist.count[i]);
        first = 0;
    }
    fprintf(f, "],\n");
}

int report_sums_read(const JsonValue *j, TokenSums *s, const char *path, Error *err) {
    const JsonValue *h = json_get(j, "kl_histogram");
    if (!h || h->type != JSON_ARRAY) return error_set(err, "%s: no kl_histogram", path);
    s->kl_sumsq = json_number(j, "kl_sumsq");
    s->kl_max = json_number(j, "kl_max_value");
    s->dp_sum = json_number(j, "dp_sum");
    s->dp_sumsq = json_number(j, "dp_sumsq");
    if (!isfinite(s->kl_sumsq) || !isfinite(s->kl_max) || !isfinite(s->dp_sum) || !isfinite(s->dp_sumsq))
        return error_set(err, "%s: missing or invalid KL / p(correct) sums", path);
    for (size_t i = 0; i < h->count; i++) {
        const JsonValue *pair = &h->items[i];
        if (pair->type != JSON_ARRAY || pair->count != 2 || pair->items[0].type != JSON_NUMBER ||
            pair->items[1].type != JSON_NUMBER)
            return error_set(err, "%s: kl_histogram entry %zu is not [bin, count]", path, i);
        double bin = pair->items[0].number, count = pair->items[1].number;
        if (!(bin >= 0 && bin < KL_BINS && bin == floor(bin)) || !(count >= 0 && count <= 9e15 && count == floor(count)))
            return error_set(err, "%s: kl_histogram entry %zu out of range", path, i);
        s->kl_hist.count[(int)bin] += (long long)count;
    }
    return 0;
}

void report_ppl_json(FILE *f, const PplReport *r) {
    const PplResult *x = &r->result;
    fprintf(f, "{\n");
    json_out_string(f, "model", r->model, 0);
    json_out_string(f, "model_id", r->model_id, 0);
    json_out_string(f, "text_file", r->text_file, 0);
    json_out_string(f, "protocol", r->protocol_llamacpp ? "llamacpp" : "hf", 0);
    report_schemes_json(f, r->k_scheme, r->v_scheme, r->k_bits, r->v_bits);
    report_entropy_json(f, &x->sums);
    json_out_string(f, "calib", r->calib, 0);
    json_out_string(f, "calib_sha256", r->calib_sha256, 0);
    if (r->calib_on_text) fprintf(f, "  \"calib_held_out\": false,\n");   /* only then: other outputs as before */
    json_out_string(f, "precision", r->precision, 0);
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"n_tokens\": %d,\n", r->ctx, r->stride, r->n_tokens);
    fprintf(f, "  \"shard_index\": %d,\n  \"shard_count\": %d,\n", r->shard_index, r->shard_count);
    if (r->merged_shards) fprintf(f, "  \"merged_shards\": %d,\n", r->merged_shards);
    fprintf(f, "  \"windows\": %d,\n  \"windows_total\": %d,\n", x->windows, x->windows_total);
    fprintf(f, "  \"scored_tokens\": %ld,\n  \"compared\": %s,\n", x->sums.scored, x->compared ? "true" : "false");
    json_out_number(f, "nll_sum", x->sums.nll_sum, 0);
    json_out_number(f, "nll_sumsq", x->sums.nll_sumsq, 0);
    json_out_number(f, "ppl", ppl_value(x->sums.nll_sum, x->sums.scored), 0);
    json_out_number(f, "nll_stderr", ppl_stderr_mean(x->sums.nll_sum, x->sums.nll_sumsq, x->sums.scored), 0);
    if (x->compared) {
        double base = ppl_value(x->sums.base_nll_sum, x->sums.scored), ppl = ppl_value(x->sums.nll_sum, x->sums.scored);
        json_out_number(f, "base_nll_sum", x->sums.base_nll_sum, 0);
        json_out_number(f, "base_nll_sumsq", x->sums.base_nll_sumsq, 0);
        json_out_number(f, "baseline_ppl", base, 0);
        json_out_number(f, "delta", ppl - base, 0);
        json_out_number(f, "delta_percent", 100.0 * (ppl - base) / base, 0);
        json_out_number(f, "diff_sum", x->sums.diff_sum, 0);
        json_out_number(f, "diff_sumsq", x->sums.diff_sumsq, 0);
        json_out_number(f, "delta_nll_stderr", ppl_stderr_mean(x->sums.diff_sum, x->sums.diff_sumsq, x->sums.scored), 0);
        json_out_number(f, "kl_sum", x->sums.kl_sum, 0);
        json_out_number(f, "kl_mean", x->sums.kl_sum / x->sums.scored, 0);
        fprintf(f, "  \"top1_agree\": %ld,\n", x->sums.top1_agree);
        json_out_number(f, "top1_agreement", (double)x->sums.top1_agree / x->sums.scored, 0);
        report_sums_json(f, &x->sums);
        report_summary_json(f, token_sums_summarize(&x->sums));
        views_json(f, &x->sums);
    }
    json_out_number(f, "tokens_processed", (double)x->tokens_processed, 0);
    json_out_number(f, "seconds", x->seconds, 1);
    fprintf(f, "}\n");
}

/* ---- merging shards ---- */

static const char *str(const JsonValue *root, const char *key) {
    const char *s = json_string(root, key);
    return s ? s : "";
}

/* A shard's whole numbers, each checked against a range before it is converted (a hostile
 * 1e300 or a missing key must be an error, not an undefined conversion). */
typedef struct {
    long long ctx, stride, n_tokens, shard_count, windows_total, windows, scored, processed, agree;
} ShardCounts;

#define MAX_SHARD_TOKENS (1LL << 40)

static int shard_counts(const JsonValue *j, int compared, ShardCounts *c, const char *path, Error *err) {
    const struct { const char *key; long long lo, hi; long long *out; } fields[] = {
        {"ctx", 1, 1 << 24, &c->ctx},
        {"stride", 0, 1 << 24, &c->stride},
        {"n_tokens", 0, 1 << 30, &c->n_tokens},
        {"shard_count", 1, 1 << 20, &c->shard_count},
        {"windows_total", 0, 1 << 30, &c->windows_total},
        {"windows", 0, 1 << 30, &c->windows},
        {"scored_tokens", 0, MAX_SHARD_TOKENS, &c->scored},
        {"tokens_processed", 0, MAX_SHARD_TOKENS, &c->processed},
        {"top1_agree", 0, MAX_SHARD_TOKENS, &c->agree},   /* last: only compared runs have it */
    };
    size_t n = sizeof fields / sizeof fields[0] - !compared;
    c->agree = 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer(j, fields[i].key, fields[i].lo, fields[i].hi, fields[i].out))
            return error_set(err, "%s: \"%s\" missing or out of range", path, fields[i].key);
    if (c->windows > c->windows_total) return error_set(err, "%s: more windows than windows_total", path);
    return 0;
}

/* Adds one shard's sums into out; the first shard also sets the evaluation's settings. */
static int merge_one(PplReport *out, const JsonValue *j, const char *path, int first, Error *err) {
    PplResult *x = &out->result;
    int compared = json_get(j, "compared") && json_get(j, "compared")->boolean;
    ShardCounts c;
    if (shard_counts(j, compared, &c, path, err)) return -1;
    if (!sha256_hex_valid(str(j, "model_id")))
        return error_set(err, "%s: no model_id (the model's identity by content; a shard of an older kvq or edited): "
                         "not merged", path);
    if (first) {
        snprintf(out->model, sizeof out->model, "%s", str(j, "model"));
        snprintf(out->model_id, sizeof out->model_id, "%s", str(j, "model_id"));
        snprintf(out->text_file, sizeof out->text_file, "%s", str(j, "text_file"));
        snprintf(out->k_scheme, sizeof out->k_scheme, "%s", str(j, "k_scheme"));
        snprintf(out->v_scheme, sizeof out->v_scheme, "%s", str(j, "v_scheme"));
        snprintf(out->calib, sizeof out->calib, "%s", str(j, "calib"));
        snprintf(out->calib_sha256, sizeof out->calib_sha256, "%s", str(j, "calib_sha256"));
        const JsonValue *held = json_get(j, "calib_held_out");
        out->calib_on_text = held && held->type == JSON_BOOL && !held->boolean;
        out->k_bits[0] = json_number(j, "k_stored_bits"), out->k_bits[1] = json_number(j, "k_effective_bits");
        out->v_bits[0] = json_number(j, "v_stored_bits"), out->v_bits[1] = json_number(j, "v_effective_bits");
        snprintf(out->precision, sizeof out->precision, "%s", str(j, "precision"));
        out->protocol_llamacpp = !strcmp(str(j, "protocol"), "llamacpp");
        out->ctx = (int)c.ctx;
        out->stride = (int)c.stride;
        out->n_tokens = (int)c.n_tokens;
        out->shard_count = (int)c.shard_count;
        x->windows_total = (int)c.windows_total;
        x->compared = compared;
    } else if (strcmp(out->model_id, str(j, "model_id"))) {
        return error_set(err, "%s: a shard of another model (model_id %.12s...; the first shard's is %.12s...)", path,
                         str(j, "model_id"), out->model_id);
    } else if (strcmp(out->k_scheme, str(j, "k_scheme")) ||
               strcmp(out->v_scheme, str(j, "v_scheme")) || strcmp(out->precision, str(j, "precision")) ||
               strcmp(out->calib_sha256, str(j, "calib_sha256")) ||
               out->ctx != c.ctx || out->stride != c.stride || out->n_tokens != c.n_tokens ||
               out->shard_count != c.shard_count || x->windows_total != c.windows_total || x->compared != compared) {
        return error_set(err, "%s: a shard of a different evaluation (schemes, calibration, ctx, stride, text or shards differ)", path);
    }
    if (x->windows + c.windows > x->windows_total)
        return error_set(err, "%s: the shards hold more windows than the evaluation has", path);
    if (report_entropy_read(j, &x->sums, path, err)) return -1;
    x->windows += (int)c.windows;
    x->sums.scored += (long)c.scored;
    x->sums.nll_sum += json_number(j, "nll_sum");
    x->sums.nll_sumsq += json_number(j, "nll_sumsq");
    x->tokens_processed += (long)c.processed;
    x->seconds += json_number(j, "seconds");
    if (compared) {
        x->sums.base_nll_sum += json_number(j, "base_nll_sum");
        x->sums.base_nll_sumsq += json_number(j, "base_nll_sumsq");
        x->sums.diff_sum += json_number(j, "diff_sum");
        x->sums.diff_sumsq += json_number(j, "diff_sumsq");
        x->sums.kl_sum += json_number(j, "kl_sum");
        x->sums.top1_agree += (long)c.agree;
        TokenSums more = {0};
        if (report_sums_read(j, &more, path, err)) return -1;
        x->sums.kl_sumsq += more.kl_sumsq;
        if (more.kl_max > x->sums.kl_max) x->sums.kl_max = more.kl_max;
        x->sums.dp_sum += more.dp_sum;
        x->sums.dp_sumsq += more.dp_sumsq;
        kl_histogram_merge(&x->sums.kl_hist, &more.kl_hist);
        if (views_ppl_read(j, &x->sums, path, err)) return -1;
    }
    if (!isfinite(x->sums.nll_sum) || x->sums.scored <= 0) return error_set(err, "%s: missing or invalid sums", path);
    return 0;
}

int ppl_merge_files(char *const *paths, int n, PplReport *out, Error *err) {
    memset(out, 0, sizeof *out);
    if (n < 1) return error_set(err, "no shard files given");   /* an empty sum is no run */
    char *seen = calloc((size_t)n + 1, 1);
    if (!seen) return error_set(err, "out of memory for %d shards", n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        size_t len;
        char *text = read_whole_file(paths[i], 1 << 20, &len, err);
        if (!text) { rc = -1; break; }
        Error jerr;
        JsonValue *j = json_parse(text, len, &jerr);
        free(text);
        if (!j || j->type != JSON_OBJECT) {
            rc = error_set(err, "%s: not a ppl --json output%s%s", paths[i], j ? "" : ": ", j ? "" : jerr.msg);
        } else {
            long long shard = -1;
            rc = merge_one(out, j, paths[i], i == 0, err);
            if (rc == 0 && out->shard_count != n)
                rc = error_set(err, "%s: made for %d shards but %d files were given", paths[i], out->shard_count, n);
            else if (rc == 0 && (json_integer(j, "shard_index", 0, n - 1, &shard) || seen[shard]++))
                rc = error_set(err, "%s: shard_index repeated or out of range", paths[i]);
        }
        json_free(j);
    }
    free(seen);
    /* The sum covers every window: it is a whole run, assembled from n shards. */
    out->shard_index = 0;
    out->shard_count = 1;
    out->merged_shards = n;
    return rc;
}
