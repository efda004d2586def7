/* eval/sensitivity_report.c: a sensitivity's report (see eval/sensitivity.h): the KL table by
 * side, layer and candidate, every cell's figures (eval/stats.h), CSV, the JSON that ./run
 * allocate reads, and the heatmap (eval/sensitivity_chart.c); the sweep's own results.* too. */
#include "eval/sensitivity_report.h"
#include "eval/sensitivity_chart.h"
#include "eval/json_out.h"
#include "eval/report.h"
#include "model/config.h"
#include "model/formats/checked_json.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char SIDE_NAMES[2][2] = {"K", "V"};

typedef struct {
    const SweepSettings *s;
    const SweepTotals *t;
    const SensGrid *g;
    int head_dim, n_cells;
    char model_sha256[65];
    PplSummary *y;                       /* [sens_config_index] */
    double *kl;                          /* [sens_config_index]: y's kl_mean, for the heatmap */
    double stored[2][SENS_MAX_CANDIDATES], bits[2][SENS_MAX_CANDIDATES];   /* [side]: stored, effective at ctx */
} Report;

static void report_free(Report *r) {
    free(r->y);
    free(r->kl);
}

/* The model's geometry and identity, every cell's summary and every candidate's bits. */
static int report_init(Report *r, const SweepSettings *s, const SweepTotals *t, const SensGrid *g, Error *err) {
    memset(r, 0, sizeof *r);
    r->s = s, r->t = t, r->g = g;
    r->n_cells = sens_cell_count(g);
    char path[4200];
    Config c;
    snprintf(path, sizeof path, "%s/config.json", s->model);
    if (config_load(&c, path, err)) return -1;
    if (c.n_layers != g->n_layers)
        return error_set(err, "%s: %d layers, but the sensitivity's configurations are of %d", path, c.n_layers, g->n_layers);
    if (modeldir_sha256(s->model, r->model_sha256, err)) return -1;
    r->head_dim = c.head_dim;
    r->y = calloc((size_t)r->n_cells, sizeof *r->y);
    r->kl = calloc((size_t)r->n_cells, sizeof *r->kl);
    if (!r->y || !r->kl) { report_free(r); return error_set(err, "out of memory"); }
    for (int i = 0; i < r->n_cells; i++) {
        r->y[i] = token_sums_summarize(&t->sums[i]);
        r->kl[i] = r->y[i].kl_mean;
    }
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < g->n_candidates[side]; k++) {
            KvSpec spec;
            char why[160];
            if (kv_spec_parse(g->candidates[side][k], side ? KV_SIDE_VALUES : KV_SIDE_KEYS, &spec, why, sizeof why)) {
                report_free(r);
                return error_set(err, "candidate '%s': %s", g->candidates[side][k], why);
            }
            r->stored[side][k] = kv_spec_stored_bits(&spec, c.head_dim);
            r->bits[side][k] = kv_spec_effective_bits(&spec, c.head_dim, s->ppl.ctx);
        }
    return 0;
}

/* The entropy bits per value (SCHEMES.md §9) of a cell's own layer and side: the side's sums less
 * its other layers, which are plain fp32 (32 bits a value, as many values each); 0 when the
 * cell's sums have none (a sweep made before the figure). */
static double cell_entropy_bits(const Report *r, int side, int cell) {
    const TokenSums *t = &r->t->sums[cell];
    double values = t->code_values[side] / r->g->n_layers;
    if (!(values > 0)) return 0;
    return (t->code_bits[side] - (t->code_values[side] - values) * 32.0) / values;
}

/* 1 when the cells carry the entropy figure. */
static int has_entropy(const Report *r) { return r->n_cells > 0 && r->t->sums[0].code_values[0] > 0; }

/* ---- Markdown ---- */

static void print_header(FILE *f, const Report *r) {
    const SweepSettings *s = r->s;
    long n = r->n_cells > 0 ? r->y[0].n : 0;
    fprintf(f, "Model `%s` (model.safetensors sha256 %.12s...), text `%s` (%d tokens), ", s->model, r->model_sha256,
            s->text_file, s->n_tokens);
    if (s->ppl.protocol == PPL_LLAMACPP) fprintf(f, "llama.cpp chunks of %d", s->ppl.ctx);
    else fprintf(f, "HF sliding window ctx %d stride %d", s->ppl.ctx, s->ppl.stride);
    fprintf(f, ", ");
    sweep_print_windows(f, s, r->t->windows);
    fprintf(f, ", %ld scored tokens per cell, %s matmuls. ", n, s->precision);
    if (s->calib_sha256[0])
        fprintf(f, "Calibration %s%s(sha256 %.12s...)%s. ", s->calib, s->calib[0] ? " " : "", s->calib_sha256,
                calib_held_out_words(s->calib_held_out));
    if (r->n_cells > 0) fprintf(f, "Baseline (fp32 cache) perplexity %.4f. ", r->y[0].base_ppl);
    fprintf(f, "A cell: only that layer's keys (K) or values (V) use the candidate, everything else stays fp32; "
               "bits are effective bits per value at ctx %d.\n\n", s->ppl.ctx);
}

/* Mean KL +/- SE of sides first..last: rows side and layer, columns first's candidates (last's
 * are the same). */
static void print_sides_table(FILE *f, const Report *r, int first, int last) {
    const SensGrid *g = r->g;
    fprintf(f, "| side | layer |");
    for (int c = 0; c < g->n_candidates[first]; c++) fprintf(f, " %s (%.4g b) |", g->candidates[first][c], r->bits[first][c]);
    fprintf(f, "\n|---|---:|");
    for (int c = 0; c < g->n_candidates[first]; c++) fprintf(f, "---:|");
    fprintf(f, "\n");
    for (int side = first; side <= last; side++)
        for (int layer = 0; layer < g->n_layers; layer++) {
            fprintf(f, "| %s | %d |", SIDE_NAMES[side], layer);
            for (int c = 0; c < g->n_candidates[side]; c++) {
                const PplSummary *y = &r->y[sens_config_index(g, side, layer, c)];
                fprintf(f, " %.3g +/- %.2g |", y->kl_mean, y->kl_se);
            }
            fprintf(f, "\n");
        }
}

/* One table of both sides when they share the candidates, else the keys' table and the values'. */
static void print_kl_table(FILE *f, const Report *r) {
    if (sens_same_candidates(r->g)) {
        print_sides_table(f, r, SENS_KEYS, SENS_VALUES);
        return;
    }
    print_sides_table(f, r, SENS_KEYS, SENS_KEYS);
    fprintf(f, "\n");
    print_sides_table(f, r, SENS_VALUES, SENS_VALUES);
}

static void print_cells_table(FILE *f, const Report *r) {
    const SensGrid *g = r->g;
    int entropy = has_entropy(r);
    fprintf(f, "| side | layer | candidate | bits |%s KL mean | KL p99 | KL max | delta ppl %% | top-1 %% |\n"
               "|---|---:|---|---:|%s---:|---:|---:|---:|---:|\n", entropy ? " bits entropy |" : "", entropy ? "---:|" : "");
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < g->n_layers; layer++)
            for (int c = 0; c < g->n_candidates[side]; c++) {
                int i = sens_config_index(g, side, layer, c);
                const PplSummary *y = &r->y[i];
                char bits[32] = "";
                if (entropy) snprintf(bits, sizeof bits, " %.4g |", cell_entropy_bits(r, side, i));
                fprintf(f, "| %s | %d | %s | %.4g |%s %.3g +/- %.2g | %.3g | %.3g | %+.3f +/- %.3f | %.2f +/- %.2f |\n",
                        SIDE_NAMES[side], layer, g->candidates[side][c], r->bits[side][c], bits, y->kl_mean, y->kl_se, y->kl_p99, y->kl_max,
                        y->delta_pct, y->delta_pct_se, 100 * y->top1, 100 * y->top1_se);
            }
}

static void write_markdown(FILE *f, const Report *r) {
    print_header(f, r);
    fprintf(f, "Mean KL (nats/token) +/- SE when only this layer's keys (K) or values (V) use the candidate:\n\n");
    print_kl_table(f, r);
    fprintf(f, "\nEvery cell:\n\n");
    print_cells_table(f, r);
}

/* ---- CSV and JSON ---- */

static void write_csv(FILE *f, const Report *r) {
    const SensGrid *g = r->g;
    fprintf(f, "side,layer,candidate,stored_bits,effective_bits,scored_tokens,kl_mean,kl_stderr,kl_median,kl_p99,kl_max,"
               "ppl,baseline_ppl,delta_percent,delta_percent_stderr,ln_ppl_ratio,ln_ppl_ratio_stderr,top1,top1_stderr,"
               "kl_sum,nll_sum,base_nll_sum,entropy_bits\n");
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < g->n_layers; layer++)
            for (int c = 0; c < g->n_candidates[side]; c++) {
                int i = sens_config_index(g, side, layer, c);
                const PplSummary *y = &r->y[i];
                const TokenSums *t = &r->t->sums[i];
                fprintf(f, "%s,%d,\"%s\",%.9g,%.9g,%ld", SIDE_NAMES[side], layer, g->candidates[side][c],
                        r->stored[side][c], r->bits[side][c], y->n);
                double v[] = {y->kl_mean, y->kl_se, y->kl_median, y->kl_p99, y->kl_max, y->ppl, y->base_ppl,
                              y->delta_pct, y->delta_pct_se, y->ln_ratio, y->ln_ratio_se, y->top1, y->top1_se};
                for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) fprintf(f, ",%.9g", v[k]);
                fprintf(f, ",%.17g,%.17g,%.17g,%.9g\n", t->kl_sum, t->nll_sum, t->base_nll_sum, cell_entropy_bits(r, side, i));
            }
}

static void write_cell_json(FILE *f, const Report *r, int side, int layer, int c, int last) {
    int i = sens_config_index(r->g, side, layer, c);
    const PplSummary *y = &r->y[i];
    const TokenSums *t = &r->t->sums[i];
    const SweepConfig *sc = &r->s->configs[i];
    fprintf(f, "  {\"side\": \"%s\", \"layer\": %d, \"candidate\": ", SIDE_NAMES[side], layer);
    json_out_quoted(f, r->g->candidates[side][c], strlen(r->g->candidates[side][c]));
    fprintf(f, ",\n");
    json_out_string(f, "k_scheme", sc->k_text, 0);
    json_out_string(f, "v_scheme", sc->v_text, 0);
    fprintf(f, "  \"scored_tokens\": %ld,\n", y->n);
    json_out_number(f, "kl_mean", y->kl_mean, 0);
    json_out_number(f, "ppl", y->ppl, 0);
    json_out_number(f, "delta_percent", y->delta_pct, 0);
    json_out_number(f, "top1_agreement", y->top1, 0);
    json_out_number(f, "entropy_bits", cell_entropy_bits(r, side, i), 0);   /* of the cell's layer and side */
    report_summary_json(f, *y);
    json_out_number(f, "kl_sum", t->kl_sum, 0);
    json_out_number(f, "nll_sum", t->nll_sum, 0);
    json_out_number(f, "base_nll_sum", t->base_nll_sum, 1);
    fprintf(f, "  }%s\n", last ? "" : ",");
}

static void write_json(FILE *f, const Report *r) {
    const SweepSettings *s = r->s;
    const SensGrid *g = r->g;
    fprintf(f, "{\n  \"kvq_sensitivity\": %d,\n", SENS_JSON_VERSION);
    json_out_string(f, "model", s->model, 0);
    json_out_string(f, "model_sha256", r->model_sha256, 0);
    json_out_string(f, "text_file", s->text_file, 0);
    json_out_string(f, "calib_sha256", s->calib_sha256, 0);
    if (s->calib_sha256[0]) calib_held_out_json(f, "", s->calib_text_sha256, s->calib_held_out);   /* allocate says it */
    json_out_string(f, "protocol", s->ppl.protocol == PPL_LLAMACPP ? "llamacpp" : "hf", 0);
    json_out_string(f, "precision", s->precision, 0);
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"n_tokens\": %d,\n", s->ppl.ctx, s->ppl.stride, s->n_tokens);
    fprintf(f, "  \"windows\": %d,\n  \"windows_total\": %d,\n", r->t->windows, s->windows_total);
    fprintf(f, "  \"scored_tokens\": %ld,\n", r->n_cells > 0 ? r->y[0].n : 0L);
    json_out_number(f, "baseline_ppl", r->n_cells > 0 ? r->y[0].base_ppl : NAN, 0);
    fprintf(f, "  \"n_layers\": %d,\n  \"head_dim\": %d,\n", g->n_layers, r->head_dim);
    json_out_string(f, "bits", "effective bits per value at ctx (SCHEMES.md 6)", 0);
    for (int side = 0; side < 2; side++) {
        fprintf(f, "  \"%s_candidates\": [\n", side ? "v" : "k");
        for (int c = 0; c < g->n_candidates[side]; c++) {
            fprintf(f, "    {\"spec\": ");
            json_out_quoted(f, g->candidates[side][c], strlen(g->candidates[side][c]));
            fprintf(f, ", \"stored_bits\": %.17g, \"effective_bits\": %.17g}%s\n", r->stored[side][c], r->bits[side][c],
                    c + 1 < g->n_candidates[side] ? "," : "");
        }
        fprintf(f, "  ],\n");
    }
    fprintf(f, "  \"cells\": [\n");
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < g->n_layers; layer++)
            for (int c = 0; c < g->n_candidates[side]; c++)
                write_cell_json(f, r, side, layer, c,
                                side == 1 && layer == g->n_layers - 1 && c == g->n_candidates[side] - 1);
    fprintf(f, "  ]\n}\n");
}

/* sensitivity.json as written and printed: write_json's text ending in its CRC-32C
 * (model/formats/checked_json.h), which ./run allocate checks before trusting a number of it. */
static void write_json_sealed(FILE *f, const Report *r) {
    char *text = NULL, *sealed = NULL;
    size_t len = 0, sealed_len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m) write_json(m, r);
    if (m && fclose(m) == 0) sealed = checked_json_seal(text, len, &sealed_len);
    if (sealed) fwrite(sealed, 1, sealed_len, f);   /* out of memory: nothing, a file allocate refuses */
    free(text);
    free(sealed);
}

static void write_svg(FILE *f, const Report *r) {
    char title[2400];
    snprintf(title, sizeof title, "%s, %s, ctx %d, %ld scored tokens%s", r->s->model, r->s->text_file, r->s->ppl.ctx,
             r->n_cells > 0 ? r->y[0].n : 0L,
             r->s->calib_sha256[0] && r->s->calib_held_out == CALIB_NOT_HELD_OUT ? ", calibration NOT held out" : "");
    sens_write_heatmap_svg(f, title, r->g, r->kl, r->bits[SENS_KEYS], r->bits[SENS_VALUES]);
}

/* ---- the files ---- */

static int write_file(const char *dir, const char *name, void (*writer)(FILE *, const Report *), const Report *r,
                      Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    writer(af.f, r);
    return atomic_commit(&af, err);
}

int sens_finish_report(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, const SensGrid *g,
                       int json, Error *err) {
    Report r;
    if (report_init(&r, s, t, g, err)) return -1;
    int rc = sweep_write_outputs(out_dir, s, t, err) || write_file(out_dir, "sensitivity.md", write_markdown, &r, err) ||
             write_file(out_dir, "sensitivity.csv", write_csv, &r, err) ||
             write_file(out_dir, "sensitivity.json", write_json_sealed, &r, err) ||
             write_file(out_dir, "sensitivity.svg", write_svg, &r, err) ? -1 : 0;
    if (!rc && json) write_json_sealed(out, &r);
    else if (!rc) {
        print_header(out, &r);
        print_kl_table(out, &r);
        fprintf(out, "\nwrote %s/sensitivity.md, sensitivity.csv, sensitivity.json, sensitivity.svg (and the sweep's "
                     "results.*)\n", out_dir);
    }
    report_free(&r);
    return rc;
}
