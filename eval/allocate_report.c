/* eval/allocate_report.c: what ./run allocate prints and writes (see eval/allocate.h): the
 * chosen LAYERED values with their bits and predicted KL, and after --verify the held-out table —
 * each allocation against the best uniform candidate within its budget, predicted against
 * measured KL — as Markdown and JSON. */
#include "eval/allocate_report.h"
#include "eval/json_out.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 when keys and values choose from the same candidates in the same order. */
static int same_names(const Alloc *a) {
    if (a->n_cand[0] != a->n_cand[1]) return 0;
    for (int c = 0; c < a->n_cand[0]; c++)
        if (strcmp(a->names[0][c], a->names[1][c])) return 0;
    return 1;
}

static double allocation_bits(const Alloc *a, int b) { return (double)a->result[b].weight / ((double)a->G * a->D); }

/* Uniform configuration c: key candidate c in every layer's keys, value candidate c in the values. */
static double uniform_bits(const Alloc *a, int c) {
    return (double)(a->weight[c] + a->weight[(size_t)a->d.g.n_layers * a->C + c]) / (2.0 * a->D);
}

/* Uniform configuration c in words: `SPEC`, or K `SPEC`, V `SPEC` when the sides' differ. */
static void uniform_label(const Alloc *a, int c, const char *before, char *out, size_t n) {
    const char *k = a->names[SENS_KEYS][c], *v = a->names[SENS_VALUES][c];
    if (!strcmp(k, v)) snprintf(out, n, "%s`%s`", before, k);
    else snprintf(out, n, "%sK `%s`, V `%s`", before, k, v);
}

/* The sum of uniform configuration c's single-layer KLs over every layer and side, added as the knapsack adds. */
static double uniform_predicted(const Alloc *a, int c) {
    int *choice = malloc((size_t)a->G * sizeof *choice);
    if (!choice) return NAN;
    for (int g = 0; g < a->G; g++) choice[g] = c;
    double sum = knapsack_damage(&a->k, choice);
    free(choice);
    return sum;
}

/* Budget b's best uniform candidate: least measured KL of those that fit; -1 if none does. */
static int best_uniform(const Verify *v, int b) {
    int best = -1;
    double best_kl = INFINITY;
    for (int i = 0; i < v->n_uniform; i++) {
        double kl = token_sums_summarize(&v->t->sums[v->cfg_uniform[i]]).kl_mean;
        if (v->fits[b][i] && kl < best_kl) best = i, best_kl = kl;
    }
    return best;
}

/* ---- text ---- */

static void print_header(FILE *f, const Alloc *a) {
    const SensData *d = &a->d;
    fprintf(f, "Allocation for `%s` from the sensitivity in `%s` (`%s`, %d windows, %ld scored tokens, ctx %d). Bits: "
               "effective bits per value at ctx %d, keys and values alike; predicted KL: the sum of the %d single-layer "
               "mean KLs. ", a->o->model_dir, a->o->from, d->text_file, d->windows, d->scored, d->ctx, d->ctx, a->G);
    if (same_names(a)) {
        fprintf(f, "Candidates:");
        for (int c = 0; c < a->n_cand[0]; c++) fprintf(f, "%s %s (%.4g)", c ? "," : "", a->names[0][c], uniform_bits(a, c));
    }
    for (int side = 0; side < 2 && !same_names(a); side++) {
        fprintf(f, "%s:", side ? "; value candidates" : "Key candidates");
        for (int c = 0; c < a->n_cand[side]; c++)
            fprintf(f, "%s %s (%.4g)", c ? "," : "", a->names[side][c],
                    (double)a->bits[side][c].num / a->bits[side][c].den);
    }
    fprintf(f, ".");
    if (d->calib_sha256[0] && d->calib_held_out != CALIB_HELD_OUT)   /* as sensitivity.json recorded it */
        fprintf(f, " The sensitivity's calibration (sha256 %.12s...)%s.", d->calib_sha256,
                calib_held_out_words(d->calib_held_out));
    fprintf(f, "\n\n");
}

static void print_choices(FILE *f, const Alloc *a) {
    fprintf(f, "| budget | bits | predicted KL | --k-scheme | --v-scheme |\n|---:|---:|---:|---|---|\n");
    for (int b = 0; b < a->o->n_budgets; b++)
        fprintf(f, "| %s | %.4g | %.4g | `%s` | `%s` |\n", a->o->budget_texts[b], allocation_bits(a, b),
                a->result[b].damage, a->k_scheme[b], a->v_scheme[b]);
}

static void print_row(FILE *f, const char *budget, const char *label, double bits, double predicted, const PplSummary *y) {
    fprintf(f, "|%s%s%s %s | %.4g | %.4g | %.4g +/- %.2g | %.3f +/- %.3f | %+.3f +/- %.3f | %.2f +/- %.2f |\n",
            budget[0] ? " " : "", budget, budget[0] ? " |" : "", label, bits, predicted, y->kl_mean, y->kl_se, y->kl_mean / predicted,
            y->kl_se / predicted, y->delta_pct, y->delta_pct_se, 100 * y->top1, 100 * y->top1_se);
}

static void print_verify(FILE *f, const Alloc *a, const Verify *v) {
    const SweepSettings *s = v->s;
    PplSummary first = token_sums_summarize(&v->t->sums[0]);
    fprintf(f, "Held-out check on `%s` (%d tokens), ", s->text_file, s->n_tokens);
    if (s->ppl.protocol == PPL_LLAMACPP) fprintf(f, "llama.cpp chunks of %d", s->ppl.ctx);
    else fprintf(f, "HF sliding window ctx %d stride %d", s->ppl.ctx, s->ppl.stride);
    fprintf(f, ", ");
    sweep_print_windows(f, s, v->t->windows);
    fprintf(f, ", %ld scored tokens per configuration, %s matmuls; baseline (fp32 cache) perplexity "
               "%.4f. Measured / predicted: the measured KL over the sum of single-layer KLs (its SE from the measured "
               "KL's). Best uniform: of the candidates used alone in every layer's keys and values within the budget, "
               "the one of least measured KL.%s", first.n, s->precision,
            first.base_ppl,
            strcmp(s->text_file, a->d.text_file) ? "" : " The sensitivity's own text: NOT held out.");
    if (s->calib_sha256[0] && s->calib_held_out != CALIB_HELD_OUT)
        fprintf(f, " Calibration %s%s(sha256 %.12s...)%s.", s->calib, s->calib[0] ? " " : "", s->calib_sha256,
                calib_held_out_words(s->calib_held_out));
    fprintf(f, "\n\n");
    fprintf(f, "| budget | configuration | bits | KL predicted | KL measured | measured / predicted | delta ppl %% | "
               "top-1 %% |\n|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (int b = 0; b < a->o->n_budgets; b++) {
        char label[1200];
        PplSummary y = token_sums_summarize(&v->t->sums[v->cfg_alloc[b]]);
        snprintf(label, sizeof label, "allocation: K `%s`, V `%s`", a->k_scheme[b], a->v_scheme[b]);
        print_row(f, a->o->budget_texts[b], label, allocation_bits(a, b), a->result[b].damage, &y);
        int u = best_uniform(v, b);
        if (u < 0) { fprintf(f, "| %s | no uniform candidate within the budget | | | | | | |\n", a->o->budget_texts[b]); continue; }
        int c = v->uniform[u];
        y = token_sums_summarize(&v->t->sums[v->cfg_uniform[u]]);
        uniform_label(a, c, "best uniform: ", label, sizeof label);
        print_row(f, a->o->budget_texts[b], label, uniform_bits(a, c), uniform_predicted(a, c), &y);
    }
    fprintf(f, "\nEvery candidate used alone that fits the largest budget:\n\n| candidate | bits | KL predicted | KL measured "
               "| measured / predicted | delta ppl %% | top-1 %% |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < v->n_uniform; i++) {
        char label[2 * SENS_SPEC_LEN + 16];
        int c = v->uniform[i];
        PplSummary y = token_sums_summarize(&v->t->sums[v->cfg_uniform[i]]);
        uniform_label(a, c, "", label, sizeof label);
        print_row(f, "", label, uniform_bits(a, c), uniform_predicted(a, c), &y);
    }
}

static void write_markdown(FILE *f, const Alloc *a, const Verify *v) {
    print_header(f, a);
    print_choices(f, a);
    if (v) {
        fprintf(f, "\n");
        print_verify(f, a, v);
    }
}

/* ---- JSON ---- */

/* One row of the verify's JSON: a configuration, its bits and predicted KL, what was measured. */
typedef struct {
    const char *kind, *k, *v;   /* "allocation" or "uniform"; the schemes of keys and values */
    double bits, predicted;
} MeasuredRow;

static void json_measured(FILE *f, const MeasuredRow *row, const PplSummary *y, int best, int last) {
    const char *kind = row->kind, *k = row->k, *v = row->v;
    double bits = row->bits, predicted = row->predicted;
    fprintf(f, "    {\"kind\": \"%s\", \"k_scheme\": ", kind);
    json_out_quoted(f, k, strlen(k));
    fprintf(f, ", \"v_scheme\": ");
    json_out_quoted(f, v, strlen(v));
    fprintf(f, ", \"bits\": %.17g, \"predicted_kl\": %.17g, \"kl_mean\": %.17g, \"kl_stderr\": %.17g, "
               "\"measured_over_predicted\": %.17g, \"delta_percent\": %.17g, \"delta_percent_stderr\": %.17g, "
               "\"top1_agreement\": %.17g, \"top1_stderr\": %.17g, \"scored_tokens\": %ld%s}%s\n",
            bits, predicted, y->kl_mean, y->kl_se, y->kl_mean / predicted, y->delta_pct, y->delta_pct_se, y->top1,
            y->top1_se, y->n, best ? ", \"best_uniform\": true" : "", last ? "" : ",");
}

static void write_json_verify(FILE *f, const Alloc *a, const Verify *v) {
    const SweepSettings *s = v->s;
    PplSummary first = token_sums_summarize(&v->t->sums[0]);
    fprintf(f, "  \"verify\": {\n");
    json_out_string(f, "text_file", s->text_file, 0);
    fprintf(f, "  \"held_out\": %s,\n", strcmp(s->text_file, a->d.text_file) ? "true" : "false");
    if (s->calib_sha256[0]) {   /* the verification's own calibration against its text */
        json_out_string(f, "calib_sha256", s->calib_sha256, 0);
        calib_held_out_json(f, "", s->calib_text_sha256, s->calib_held_out);
    }
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"windows\": %d,\n  \"scored_tokens\": %ld,\n", s->ppl.ctx,
            s->ppl.stride, v->t->windows, first.n);
    json_out_number(f, "baseline_ppl", first.base_ppl, 0);
    fprintf(f, "  \"budgets\": [\n");
    for (int b = 0; b < a->o->n_budgets; b++) {
        PplSummary y = token_sums_summarize(&v->t->sums[v->cfg_alloc[b]]);
        int u = best_uniform(v, b);
        fprintf(f, "   {\"budget\": %.17g, \"rows\": [\n", (double)a->o->budgets[b].num / a->o->budgets[b].den);
        MeasuredRow alloc = {"allocation", a->k_scheme[b], a->v_scheme[b], allocation_bits(a, b), a->result[b].damage};
        json_measured(f, &alloc, &y, 0, u < 0);
        if (u >= 0) {
            int c = v->uniform[u];
            y = token_sums_summarize(&v->t->sums[v->cfg_uniform[u]]);
            MeasuredRow uniform = {"uniform", a->names[0][c], a->names[1][c], uniform_bits(a, c), uniform_predicted(a, c)};
            json_measured(f, &uniform, &y, 1, 1);
        }
        fprintf(f, "   ]}%s\n", b + 1 < a->o->n_budgets ? "," : "");
    }
    fprintf(f, "  ],\n  \"uniform\": [\n");
    for (int i = 0; i < v->n_uniform; i++) {
        int c = v->uniform[i];
        PplSummary y = token_sums_summarize(&v->t->sums[v->cfg_uniform[i]]);
        MeasuredRow uniform = {"uniform", a->names[0][c], a->names[1][c], uniform_bits(a, c), uniform_predicted(a, c)};
        json_measured(f, &uniform, &y, 0, i + 1 == v->n_uniform);
    }
    fprintf(f, "  ]\n  }\n");
}

/* One list for both sides: each candidate with its bits as keys and as values. */
static void write_json_candidates(FILE *f, const Alloc *a) {
    fprintf(f, "  \"candidates\": [\n");
    for (int c = 0; c < a->n_cand[0]; c++) {
        fprintf(f, "    {\"spec\": ");
        json_out_quoted(f, a->names[0][c], strlen(a->names[0][c]));
        fprintf(f, ", \"k_bits\": %.17g, \"v_bits\": %.17g, \"k_bits_fraction\": [%lld, %lld], "
                   "\"v_bits_fraction\": [%lld, %lld]}%s\n", (double)a->bits[0][c].num / a->bits[0][c].den,
                (double)a->bits[1][c].num / a->bits[1][c].den, a->bits[0][c].num, a->bits[0][c].den, a->bits[1][c].num,
                a->bits[1][c].den, c + 1 < a->n_cand[0] ? "," : "");
    }
    fprintf(f, "  ],\n");
}

/* Keys' and values' own lists: "k_candidates", "v_candidates", each candidate with its bits. */
static void write_json_side_candidates(FILE *f, const Alloc *a) {
    for (int side = 0; side < 2; side++) {
        fprintf(f, "  \"%s_candidates\": [\n", side ? "v" : "k");
        for (int c = 0; c < a->n_cand[side]; c++) {
            BitsFraction b = a->bits[side][c];
            fprintf(f, "    {\"spec\": ");
            json_out_quoted(f, a->names[side][c], strlen(a->names[side][c]));
            fprintf(f, ", \"bits\": %.17g, \"bits_fraction\": [%lld, %lld]}%s\n", (double)b.num / b.den, b.num, b.den,
                    c + 1 < a->n_cand[side] ? "," : "");
        }
        fprintf(f, "  ],\n");
    }
}

static void write_json(FILE *f, const Alloc *a, const Verify *v) {
    const SensData *d = &a->d;
    int L = d->g.n_layers;
    fprintf(f, "{\n");
    json_out_string(f, "model", a->o->model_dir, 0);
    json_out_string(f, "model_sha256", d->model_sha256, 0);
    json_out_string(f, "from", a->o->from, 0);
    json_out_string(f, "sensitivity_text_file", d->text_file, 0);
    if (d->calib_sha256[0]) {   /* the sensitivity's calibration, held out or not as it recorded */
        json_out_string(f, "sensitivity_calib_sha256", d->calib_sha256, 0);
        calib_held_out_json(f, "sensitivity_", d->calib_text_sha256, d->calib_held_out);
    }
    fprintf(f, "  \"ctx\": %d,\n  \"n_layers\": %d,\n", d->ctx, L);
    json_out_string(f, "bits", "effective bits per value at ctx; keys and values alike", 0);
    json_out_string(f, "predicted_kl", "the sum of the single-layer mean KLs of the choice", 0);
    if (same_names(a)) write_json_candidates(f, a);
    else write_json_side_candidates(f, a);
    fprintf(f, "  \"allocations\": [\n");
    for (int b = 0; b < a->o->n_budgets; b++) {
        fprintf(f, "    {\"budget\": %.17g, \"budget_fraction\": [%lld, %lld], \"bits\": %.17g, \"predicted_kl\": %.17g, "
                   "\"k_scheme\": ", (double)a->o->budgets[b].num / a->o->budgets[b].den, a->o->budgets[b].num,
                a->o->budgets[b].den, allocation_bits(a, b), a->result[b].damage);
        json_out_quoted(f, a->k_scheme[b], strlen(a->k_scheme[b]));
        fprintf(f, ", \"v_scheme\": ");
        json_out_quoted(f, a->v_scheme[b], strlen(a->v_scheme[b]));
        for (int side = 0; side < 2; side++) {
            fprintf(f, ", \"%s_choice\": [", side ? "v" : "k");
            for (int l = 0; l < L; l++) {
                const char *name = a->names[side][a->choice[b][side * L + l]];
                if (l) fprintf(f, ", ");
                json_out_quoted(f, name, strlen(name));
            }
            fprintf(f, "]");
        }
        fprintf(f, "}%s\n", b + 1 < a->o->n_budgets ? "," : "");
    }
    fprintf(f, "  ]%s\n", v ? "," : "");
    if (v) write_json_verify(f, a, v);
    fprintf(f, "}\n");
}

void alloc_print(FILE *f, const Alloc *a, const Verify *v, int json) {
    if (json) write_json(f, a, v);
    else write_markdown(f, a, v);
}

static int write_one(const char *dir, const char *name, const Alloc *a, const Verify *v, int json, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    alloc_print(af.f, a, v, json);
    return atomic_commit(&af, err);
}

int alloc_write_report(const char *dir, const Alloc *a, const Verify *v, Error *err) {
    return write_one(dir, "allocation.md", a, v, 0, err) || write_one(dir, "allocation.json", a, v, 1, err) ? -1 : 0;
}
