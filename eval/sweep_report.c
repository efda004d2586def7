/* eval/sweep_report.c: a sweep's results as a Markdown table, CSV, JSON and an SVG chart
 * (eval/chart.c): one row per configuration, with the statistics of eval/stats.h. */
#include "eval/calibration.h"
#include "eval/sweep.h"
#include "eval/chart.h"
#include "eval/json_out.h"
#include "eval/report.h"
#include "eval/sweep_views.h"
#include "eval/views.h"
#include "model/formats/fileio.h"
#include "model/formats/run_lock.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bits per cached value, keys and values together: their mean (both have head_dim values per
 * head and position). which: 0 stored, 1 effective. */
static double config_bits(const SweepConfig *c, int which) { return 0.5 * (c->k_bits[which] + c->v_bits[which]); }

/* "int4-g64" when keys and values share the scheme, else "K int2-t32 / V int2-g32". */
static void config_label(const SweepConfig *c, char *out, size_t n) {
    if (!strcmp(c->k_text, c->v_text)) snprintf(out, n, "%s", c->k_text);
    else snprintf(out, n, "K %s / V %s", c->k_text, c->v_text);
}

/* Every configuration's summary and the Pareto front of (effective bits, mean KL). */
static void summaries(const SweepSettings *s, const SweepTotals *t, PplSummary *y, unsigned char *front,
                      ChartPoint *points, char (*labels)[1100]) {
    for (int i = 0; i < s->n_configs; i++) {
        y[i] = token_sums_summarize(&t->sums[i]);
        config_label(&s->configs[i], labels[i], sizeof labels[i]);
        points[i] = (ChartPoint){labels[i], config_bits(&s->configs[i], 1), y[i].kl_mean, y[i].delta_pct,
                                 y[i].delta_pct_se};
    }
    chart_pareto_front(points, s->n_configs, front);
}

const char *calib_held_out_words(CalibHeldOut h) {
    if (h == CALIB_NOT_HELD_OUT) return ", fitted on this very text: NOT held out";
    if (h == CALIB_HELD_OUT_UNKNOWN) return ", whether fitted on this very text not recorded (files of an older kvq)";
    return "";
}

void calib_held_out_json(FILE *f, const char *prefix, const char *text_sha256, CalibHeldOut h) {
    char key[64];
    snprintf(key, sizeof key, "%scalib_text_sha256", prefix);
    json_out_string(f, key, text_sha256, 0);
    fprintf(f, "  \"%scalib_held_out\": %s,\n", prefix,
            h == CALIB_HELD_OUT ? "true" : h == CALIB_NOT_HELD_OUT ? "false" : "null");
}

static void print_header(FILE *f, const SweepSettings *s, const SweepTotals *t, const PplSummary *first) {
    fprintf(f, "Model `%s`, text `%s` (%d tokens), ", s->model, s->text_file, s->n_tokens);
    if (s->ppl.protocol == PPL_LLAMACPP) fprintf(f, "llama.cpp chunks of %d", s->ppl.ctx);
    else fprintf(f, "HF sliding window ctx %d stride %d", s->ppl.ctx, s->ppl.stride);
    fprintf(f, ", ");
    sweep_print_windows(f, s, t->windows);
    fprintf(f, ", %ld scored tokens per configuration, %s matmuls. ", first ? first->n : 0L, s->precision);
    if (s->calib_sha256[0])
        fprintf(f, "Calibration %s%s(sha256 %.12s...)%s. ", s->calib, s->calib[0] ? " " : "", s->calib_sha256,
                calib_held_out_words(s->calib_held_out));
    if (first) fprintf(f, "Baseline (fp32 cache) perplexity %.4f.\n\n", first->base_ppl);
    else fprintf(f, "\n\n");
}

void sweep_print_table(FILE *f, const SweepSettings *s, const SweepTotals *t) {
    int n = s->n_configs;
    PplSummary *y = calloc((size_t)n, sizeof *y);
    unsigned char *front = calloc((size_t)n, 1);
    ChartPoint *points = calloc((size_t)n, sizeof *points);
    char (*labels)[1100] = calloc((size_t)n, sizeof *labels);
    if (!y || !front || !points || !labels) {
        fprintf(f, "(out of memory for the table)\n");
        goto done;
    }
    summaries(s, t, y, front, points, labels);
    print_header(f, s, t, n > 0 ? &y[0] : NULL);
    int tables = 0, entropy = 0;   /* results made before the entropy figure have none: no column */
    for (int i = 0; i < n; i++) tables |= s->configs[i].codebook_bytes > 0, entropy |= t->sums[i].code_values[0] > 0;
    fprintf(f, "| configuration | bits stored | bits effective |%s x fp16 |%s ppl | delta ppl | delta %% | KL mean | "
               "KL median | KL p99 | KL max | top-1 %% | front |\n", entropy ? " bits entropy |" : "", tables ? " codebooks KiB |" : "");
    fprintf(f, "|---|---:|---:|%s---:|%s---:|---:|---:|---:|---:|---:|---:|---:|:-:|\n", entropy ? "---:|" : "",
            tables ? "---:|" : "");
    for (int i = 0; i < n; i++) {
        double eff = config_bits(&s->configs[i], 1);
        char codebooks[32] = "";
        if (tables) snprintf(codebooks, sizeof codebooks, " %.1f |", s->configs[i].codebook_bytes / 1024);
        char entropy_bits[32] = "";
        if (entropy) snprintf(entropy_bits, sizeof entropy_bits, " %.3g |", token_sums_entropy_bits(&t->sums[i], -1));
        char se[4][32];   /* "undefined" under 2 scored tokens */
        fprintf(f, "| %s | %.3g | %.3g |%s %.2f |%s %.4f | %+.4f +/- %s | %+.3f +/- %s | %.3g +/- %s | %.3g | %.3g | "
                   "%.3g | %.2f +/- %s | %s |\n",
                labels[i], config_bits(&s->configs[i], 0), eff, entropy_bits, 16.0 / eff, codebooks, y[i].ppl, y[i].delta,
                se_text(y[i].delta_se, "%.4f", se[0], 32), y[i].delta_pct, se_text(y[i].delta_pct_se, "%.3f", se[1], 32),
                y[i].kl_mean, se_text(y[i].kl_se, "%.2g", se[2], 32), y[i].kl_median, y[i].kl_p99, y[i].kl_max,
                100 * y[i].top1, se_text(100 * y[i].top1_se, "%.2f", se[3], 32), front[i] ? "*" : "");
    }
    sweep_views_markdown(f, s, t);   /* by position, per layer */
done:
    free(y);
    free(front);
    free(points);
    free(labels);
}

static void csv_field(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void write_csv(FILE *f, const SweepSettings *s, const SweepTotals *t, const PplSummary *y,
                      const unsigned char *front) {
    fprintf(f, "k_scheme,v_scheme,k_stored_bits,k_effective_bits,v_stored_bits,v_effective_bits,effective_bits,"
               "ratio_to_fp16,scored_tokens,ppl,ppl_stderr,baseline_ppl,delta,delta_stderr,delta_percent,"
               "delta_percent_stderr,ln_ppl_ratio,ln_ppl_ratio_stderr,kl_mean,kl_stderr,kl_median,kl_p90,kl_p99,"
               "kl_p999,kl_max,top1,top1_stderr,dp_mean,dp_rms,pareto,codebook_bytes,k_entropy_bits,v_entropy_bits,"
               "entropy_bits");
    sweep_views_csv_header(f, s, t);
    if (s->calib_sha256[0]) fprintf(f, ",calib_held_out");   /* true, false, or empty: not recorded */
    fputc('\n', f);
    for (int i = 0; i < s->n_configs; i++) {
        const SweepConfig *c = &s->configs[i];
        double eff = config_bits(c, 1);
        csv_field(f, c->k_text);
        fputc(',', f);
        csv_field(f, c->v_text);
        fprintf(f, ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%ld", c->k_bits[0], c->k_bits[1], c->v_bits[0], c->v_bits[1], eff,
                16.0 / eff, y[i].n);
        double v[] = {y[i].ppl, y[i].ppl_se, y[i].base_ppl, y[i].delta, y[i].delta_se, y[i].delta_pct,
                      y[i].delta_pct_se, y[i].ln_ratio, y[i].ln_ratio_se, y[i].kl_mean, y[i].kl_se, y[i].kl_median,
                      y[i].kl_p90, y[i].kl_p99, y[i].kl_p999, y[i].kl_max, y[i].top1, y[i].top1_se, y[i].dp_mean,
                      y[i].dp_rms};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {   /* an undefined figure is an empty field */
            if (isfinite(v[k])) fprintf(f, ",%.9g", v[k]);
            else fputc(',', f);
        }
        fprintf(f, ",%d,%.17g", front[i], c->codebook_bytes);
        const int sides[] = {0, 1, -1};   /* keys, values, both */
        for (int k = 0; k < 3; k++) fprintf(f, ",%.9g", token_sums_entropy_bits(&t->sums[i], sides[k]));
        sweep_views_csv_row(f, s, t, i);
        if (s->calib_sha256[0])
            fprintf(f, ",%s", s->calib_held_out == CALIB_HELD_OUT ? "true" : s->calib_held_out == CALIB_NOT_HELD_OUT ? "false" : "");
        fputc('\n', f);
    }
}

static void write_json(FILE *f, const SweepSettings *s, const SweepTotals *t, const PplSummary *y,
                       const unsigned char *front) {
    fprintf(f, "{\n");
    json_out_string(f, "model", s->model, 0);
    json_out_string(f, "model_id", s->model_id, 0);
    json_out_string(f, "text_file", s->text_file, 0);
    json_out_string(f, "protocol", s->ppl.protocol == PPL_LLAMACPP ? "llamacpp" : "hf", 0);
    json_out_string(f, "precision", s->precision, 0);
    json_out_string(f, "calib_sha256", s->calib_sha256, 0);
    if (s->calib_sha256[0]) calib_held_out_json(f, "", s->calib_text_sha256, s->calib_held_out);
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"n_tokens\": %d,\n", s->ppl.ctx, s->ppl.stride, s->n_tokens);
    fprintf(f, "  \"windows\": %d,\n  \"windows_total\": %d,\n", t->windows, s->windows_total);
    json_out_number(f, "tokens_processed", (double)t->tokens_processed, 0);
    json_out_number(f, "seconds", t->seconds, 0);
    fprintf(f, "  \"configs\": [\n");
    for (int i = 0; i < s->n_configs; i++) {
        const SweepConfig *c = &s->configs[i];
        fprintf(f, "  {\n");
        report_schemes_json(f, c->k_text, c->v_text, c->k_bits, c->v_bits);
        json_out_number(f, "effective_bits", config_bits(c, 1), 0);
        json_out_number(f, "ratio_to_fp16", 16.0 / config_bits(c, 1), 0);
        json_out_number(f, "codebook_bytes", c->codebook_bytes, 0);
        report_entropy_json(f, &t->sums[i]);
        json_out_number(f, "entropy_bits", token_sums_entropy_bits(&t->sums[i], -1), 0);
        fprintf(f, "  \"scored_tokens\": %ld,\n  \"pareto\": %s,\n", y[i].n, front[i] ? "true" : "false");
        json_out_number(f, "ppl", y[i].ppl, 0);
        json_out_number(f, "baseline_ppl", y[i].base_ppl, 0);
        json_out_number(f, "delta", y[i].delta, 0);
        json_out_number(f, "delta_percent", y[i].delta_pct, 0);
        json_out_number(f, "kl_mean", y[i].kl_mean, 0);
        json_out_number(f, "top1_agreement", y[i].top1, 0);
        report_summary_json(f, y[i]);
        views_json(f, &t->sums[i]);   /* by position, per layer */
        /* the sums, so that the figures can be checked or combined */
        json_out_number(f, "nll_sum", t->sums[i].nll_sum, 0);
        json_out_number(f, "base_nll_sum", t->sums[i].base_nll_sum, 0);
        json_out_number(f, "kl_sum", t->sums[i].kl_sum, 1);
        fprintf(f, "  }%s\n", i + 1 < s->n_configs ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

/* What the output files show of every configuration: its summary, whether it is on the Pareto
 * front, its point on the chart. */
typedef struct {
    const PplSummary *y;
    const unsigned char *front;
    const ChartPoint *points;
} ConfigFigures;

/* Writes one output file atomically with the writer chosen by kind. */
static int write_output(const char *dir, const char *name, int kind, const SweepSettings *s, const SweepTotals *t,
                        const ConfigFigures *fig, Error *err) {
    const PplSummary *y = fig->y;
    const unsigned char *front = fig->front;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (kind == 0) sweep_print_table(af.f, s, t);
    else if (kind == 1) write_csv(af.f, s, t, y, front);
    else if (kind == 2) write_json(af.f, s, t, y, front);
    else {
        char title[1200];
        snprintf(title, sizeof title, "KV-cache schemes on %s (ctx %d, %ld tokens%s)", s->model, s->ppl.ctx,
                 s->n_configs > 0 ? y[0].n : 0L,
                 s->calib_sha256[0] && s->calib_held_out == CALIB_NOT_HELD_OUT ? "; calibration NOT held out" : "");
        chart_write_svg(af.f, title, fig->points, s->n_configs);
    }
    return atomic_commit(&af, err);
}

/* chart.svg again with x = entropy-coded bits per value (SCHEMES.md §9), when the sweep measured
 * them: chart-entropy.svg. A configuration without the figure is left off the chart (x not finite). */
static int write_entropy_chart(const char *dir, const SweepSettings *s, const SweepTotals *t, const ChartPoint *points,
                               Error *err) {
    int measured = 0;
    for (int i = 0; i < s->n_configs; i++) measured |= t->sums[i].code_values[0] > 0;
    ChartPoint *p = measured ? calloc((size_t)s->n_configs, sizeof *p) : NULL;
    if (!measured) return 0;
    if (!p) return error_set(err, "out of memory");
    for (int i = 0; i < s->n_configs; i++) {
        double bits = token_sums_entropy_bits(&t->sums[i], -1);
        p[i] = points[i], p[i].bits = bits > 0 ? bits : NAN;
    }
    char path[4200], title[1200];
    snprintf(path, sizeof path, "%s/chart-entropy.svg", dir);
    snprintf(title, sizeof title, "KV-cache schemes on %s (ctx %d), entropy-coded bits", s->model, s->ppl.ctx);
    ChartStyle style = {title, "entropy-coded bits per value (zeroth-order entropy of the codes)", NULL, NULL};
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (!rc) chart_write_svg_styled(af.f, &style, p, s->n_configs), rc = atomic_commit(&af, err);
    free(p);
    return rc;
}

int sweep_write_outputs(const char *out_dir, const SweepSettings *s, const SweepTotals *t, Error *err) {
    int n = s->n_configs, rc = 0;
    PplSummary *y = calloc((size_t)n, sizeof *y);
    unsigned char *front = calloc((size_t)n, 1);
    ChartPoint *points = calloc((size_t)n, sizeof *points);
    char (*labels)[1100] = calloc((size_t)n, sizeof *labels);
    if (!y || !front || !points || !labels) rc = error_set(err, "out of memory");
    if (!rc) rc = make_directory(out_dir, err);
    if (!rc) summaries(s, t, y, front, points, labels);
    static const char *const names[] = {"results.md", "results.csv", "results.json", "chart.svg"};
    ConfigFigures fig = {y, front, points};
    for (int k = 0; k < 4 && !rc; k++) rc = write_output(out_dir, names[k], k, s, t, &fig, err);
    if (!rc) rc = write_entropy_chart(out_dir, s, t, points, err);
    if (!rc) rc = sweep_views_charts(out_dir, s, t, err);   /* position.svg, layers.svg */
    free(y);
    free(front);
    free(points);
    free(labels);
    return rc;
}

int sweep_finish(FILE *f, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json, Error *err) {
    if (sweep_write_outputs(out_dir, s, t, err)) return -1;
    if (!json) {
        sweep_print_table(f, s, t);
        fprintf(f, "\nwrote %s/results.md, results.csv, results.json, chart.svg, position.svg%s\n", out_dir,
                s->ppl.layer_error ? ", layers.svg" : "");
        return 0;
    }
    /* the file just written, so that stdout and results.json cannot differ */
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", out_dir);
    size_t len;
    Error ignored;   /* it was written a moment ago; a failure to read it back prints nothing, as before */
    char *text = read_whole_file(path, 1 << 26, &len, &ignored);
    if (text) fputs(text, f);
    free(text);
    return 0;
}

static int plain_finish(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                        void *user, Error *err) {
    (void)user;
    return sweep_finish(out, out_dir, s, t, json, err);
}

int sweep_run_and_report(SweepSettings *s, const SweepRun *run, Error *err) {
    SweepDriver d = {"sweep", NULL, plain_finish, NULL};
    return sweep_run_and_report_as(&d, s, run, err);
}

/* out_dir made and locked for this run (run_lock.h): a second ./run on it is refused before any
 * forward pass. The options are checked first, so that bad ones leave no directory behind. */
static int lock_out_dir(const Model *m, const int *tokens, const SweepSettings *s, const char *out_dir, RunLock *lock,
                        Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" SWEEP_LOCK_FILE, out_dir);
    if (ppl_check(m, tokens, s->n_tokens, &s->ppl, err) || make_directory(out_dir, err)) return -1;
    if (run_lock_take(lock, path, "wait for it to finish, or give another --out-dir", err)) return -1;
    remove_stale_temps_in(out_dir);   /* what a killed run left: this directory is ours now */
    return 0;
}

/* The calibration the sweep uses into s: its path and sha256, and whether it was fitted on the
 * text measured, which sweep.json records now (a resume compares it; the reports say it). */
static int note_calibration(SweepSettings *s, const Calibration *calib, Error *err) {
    snprintf(s->calib, sizeof s->calib, "%s", calib->path);
    snprintf(s->calib_sha256, sizeof s->calib_sha256, "%s", calib->file_sha256);
    snprintf(s->calib_text_sha256, sizeof s->calib_text_sha256, "%s", calib->text_sha256);
    int fitted = calibration_fitted_on(calib, s->text_file, err);
    if (fitted < 0) return -1;   /* the text was read a moment ago: gone or unreadable now */
    s->calib_held_out = fitted ? CALIB_NOT_HELD_OUT : CALIB_HELD_OUT;
    return 0;
}

int sweep_run_and_report_as(const SweepDriver *d, SweepSettings *s, const SweepRun *run, Error *err) {
    const char *out_dir = run->out_dir;
    int quiet = run->quiet;
    FILE *out = run->out, *log = run->log;
    ModelDir L;
    KvCacheRecipe recipe = {0};   /* the configurations carry their own schemes; this holds the calibration */
    KvCacheFlags flags;
    kv_cache_flags_default(&flags, s->calib_path[0] ? s->calib_path : NULL);
    if (ppl_load_model(&L, s->model, s->precision, &s->ppl, err)) return -1;
    SweepTotals t = {0};
    Progress progress;
    progress_init(&progress, d->label, quiet);
    ModelIdentity identity;   /* once per run: for sweep.json and for the calibration's check */
    int *tokens = NULL, rc = sweep_prepare(s, &L.model, L.tok, run->max_tokens, &tokens, err);
    if (rc == 0) rc = modeldir_identity(s->model, &identity, err);
    if (rc == 0) snprintf(s->model_id, sizeof s->model_id, "%s", identity.id);
    if (rc == 0)
        rc = kv_cache_recipe_resolve(&recipe, &flags, sweep_needs_calibration(s), s->model, identity.weights_sha256,
                                     &L.model, err);
    const Calibration *calib = recipe.scheme.calib;
    if (rc == 0 && calib && !calib->absent) rc = note_calibration(s, calib, err);
    if (rc == 0) rc = sweep_use_calibration(s, &L.model.config, calib, err);   /* before any file */
    if (rc == 0 && d->plan && !quiet) fprintf(log, "%s\n", d->plan);
    RunLock lock = {.fd = -1};
    if (rc == 0) rc = lock_out_dir(&L.model, tokens, s, out_dir, &lock, err);
    if (rc == 0) {
        rc = sweep_run(&L.model, tokens, s, out_dir, &progress, &t, err);
        progress_finish(&progress);
    }
    if (rc == 0 && !quiet)
        fprintf(log, "%s: this run: %.1f s, %ld forward-pass tokens (%.0f tok/s), baselines included\n", d->label,
                t.run_seconds, t.run_tokens, t.run_seconds > 0 ? t.run_tokens / t.run_seconds : 0);
    long all_layers = t.run_tokens * L.model.config.n_layers;
    if (rc == 0 && !quiet && t.run_layer_tokens < all_layers)   /* eval/layer_resume.h */
        fprintf(log, "%s: layers x tokens run: %ld of %ld (%.1f%%): configurations fp32 below a layer started there "
                "from the fp32 baseline's pass\n", d->label, t.run_layer_tokens, all_layers,
                100.0 * (double)t.run_layer_tokens / (double)all_layers);
    if (rc == 0 && s->ppl.shard_count == 1) rc = d->finish(out, out_dir, s, &t, run->json, d->user, err);
    else if (rc == 0)
        fprintf(out, "shard %d/%d: %d windows done in %s; put the shards together with ./run sweep-merge DIR...\n",
                s->ppl.shard_index, s->ppl.shard_count, t.windows, out_dir);
    run_lock_release(&lock);
    sweep_totals_free(&t);
    free(tokens);
    for (int i = 0; i < s->n_configs; i++) s->configs[i].scheme.calib = NULL;   /* freed next */
    kv_cache_recipe_free(&recipe);
    modeldir_free(&L);
    return rc;
}
