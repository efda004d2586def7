/* eval/probe_report.c: the probes' results as text (markdown tables), JSON and CSV (see probe.h).
 * Every figure is derived from a cell's counts and sums, which the JSON also carries. fp32 comes
 * first, and a probe fp32 fails is called not meaningful before any scheme's figure. */
#include "eval/probe.h"
#include "eval/json_out.h"
#include <math.h>
#include <string.h>

/* Below this fp32 rate a probe does not measure the schemes: the model cannot do the task. */
#define MEANINGFUL_RATE 0.5

static void pct(FILE *f, double v, double se) {
    if (!isfinite(v)) fprintf(f, " - |");
    else if (!isfinite(se)) fprintf(f, " %.1f%% |", 100 * v);
    else fprintf(f, " %.1f +/- %.1f%% |", 100 * v, 100 * se);
}

static void copy_text(FILE *f, const ProbeResult *r, const char *const *labels) {
    const ProbeOptions *o = &r->o;
    fprintf(f, "Copy probe: %d sequences per copy length S (seed %llu, ctx %d): BOS, S word pieces, the same S again; "
               "scored: the second copy from its second token on. Top-1 accuracy +/- binomial standard error, mean "
               "NLL in nats in brackets; agreement: top-1 the same as the fp32 cache's.\n\n| cache |",
            o->sequences, o->seed, o->ctx);
    for (int i = 0; i < o->n_lengths; i++) fprintf(f, " S=%d |", o->lengths[i]);
    fprintf(f, " agreement |\n|---|");
    for (int i = 0; i <= o->n_lengths; i++) fprintf(f, "---:|");
    fprintf(f, "\n| tokens |");
    for (int i = 0; i < o->n_lengths; i++) fprintf(f, " %ld |", probe_cell(r, 0, i)->n);
    fprintf(f, " |\n");
    for (int c = 0; c < r->n_caches; c++) {
        fprintf(f, "| %s |", labels[c]);
        ProbeCell all = {0};
        for (int i = 0; i < o->n_lengths; i++) {
            const ProbeCell *x = probe_cell(r, c, i);
            double v = probe_rate(x), se = probe_rate_se(x);
            if (isfinite(se)) fprintf(f, " %.1f +/- %.1f%% (%.3f) |", 100 * v, 100 * se, probe_mean(x));
            else fprintf(f, " %.1f%% (%.3f) |", 100 * v, probe_mean(x));
            all.n += x->n, all.hits += x->agree;
        }
        pct(f, probe_rate(&all), probe_rate_se(&all));
        fprintf(f, "\n");
    }
    int failed = 0;   /* the lengths fp32 does not copy at */
    for (int i = 0; i < o->n_lengths; i++) failed += probe_rate(probe_cell(r, 0, i)) < MEANINGFUL_RATE;
    if (failed == 0) return;
    fprintf(f, "\nfp32 copies under %.0f%% of the tokens at S =", 100 * MEANINGFUL_RATE);
    for (int i = 0, first = 1; i < o->n_lengths; i++)
        if (probe_rate(probe_cell(r, 0, i)) < MEANINGFUL_RATE) fprintf(f, "%s %d", first ? "" : ",", o->lengths[i]), first = 0;
    fprintf(f, ": this model does not copy %s; the probe is not meaningful there (the agreement and NLL still "
               "compare the caches, but not on retrieval).\n", failed == o->n_lengths ? "at all" : "at those lengths");
}

static void passkey_text(FILE *f, const ProbeResult *r, const char *const *labels) {
    const ProbeOptions *o = &r->o;
    ProbeCell fp = {0};
    for (int k = 0; k < r->n_cells; k++) fp.n += probe_cell(r, 0, k)->n, fp.hits += probe_cell(r, 0, k)->hits;
    fprintf(f, "Passkey probe: %d trials per (length, depth) (seed %llu), filler from %s, %d-digit numbers decoded "
               "greedily; exact matches.\n\nfp32 passes %ld of %ld (%.1f%%).",
            o->sequences, o->seed, o->text_file, PROBE_PASSKEY_DIGITS, fp.hits, fp.n, 100 * probe_rate(&fp));
    if (probe_rate(&fp) < MEANINGFUL_RATE)
        fprintf(f, " fp32 fails the passkey on this model: the probe is not meaningful here, and the schemes' "
                   "rates below say nothing about retrieval.");
    fprintf(f, "\n");
    for (int c = 0; c < r->n_caches; c++) {
        ProbeCell all = {0};
        for (int k = 0; k < r->n_cells; k++) {
            const ProbeCell *x = probe_cell(r, c, k);
            all.n += x->n, all.hits += x->hits, all.agree += x->agree;
        }
        fprintf(f, "\n%s: %ld of %ld exact (%.1f%%), the fp32 cache's answer in %ld\n\n| tokens |", labels[c], all.hits,
                all.n, 100 * probe_rate(&all), all.agree);
        for (int d = 0; d < o->n_depths; d++) fprintf(f, " depth %d%% |", o->depths[d]);
        fprintf(f, "\n|---:|");
        for (int d = 0; d < o->n_depths; d++) fprintf(f, "---:|");
        fprintf(f, "\n");
        for (int li = 0; li < o->n_lengths; li++) {
            fprintf(f, "| %d |", o->lengths[li]);
            for (int d = 0; d < o->n_depths; d++) {
                const ProbeCell *x = probe_cell(r, c, li * o->n_depths + d);
                fprintf(f, " %ld/%ld |", x->hits, x->n);
            }
            fprintf(f, "\n");
        }
    }
}

static void diverge_text(FILE *f, const ProbeResult *r, const char *const *labels) {
    const ProbeOptions *o = &r->o;
    fprintf(f, "Greedy divergence: %d prompts of %d tokens from %s (seed %llu), %d tokens generated greedily with "
               "each cache; tokens before the first that differs from the fp32 cache's continuation (%d: none "
               "differs), mean +/- standard error.\n\n| cache | tokens to first difference | identical | first "
               "token the same |\n|---|---:|---:|---:|\n",
            o->sequences, o->prompt_tokens, o->text_file, o->seed, o->new_tokens, o->new_tokens);
    for (int c = 0; c < r->n_caches; c++) {
        const ProbeCell *x = probe_cell(r, c, 0);
        double se = probe_mean_se(x);
        fprintf(f, "| %s | %.2f +/- %.2f |", labels[c], probe_mean(x), isfinite(se) ? se : 0);
        pct(f, probe_rate(x), probe_rate_se(x));
        ProbeCell first = {.n = x->n, .hits = x->agree};
        pct(f, probe_rate(&first), probe_rate_se(&first));
        fprintf(f, "\n");
    }
}

void probe_report_text(FILE *f, const ProbeResult *r, const char *model, const char *const *labels) {
    fprintf(f, "Model `%s`.\n\n", model);
    if (r->o.task == PROBE_COPY) copy_text(f, r, labels);
    else if (r->o.task == PROBE_PASSKEY) passkey_text(f, r, labels);
    else diverge_text(f, r, labels);
}

/* The length and depth of cell k (depth -1: the task has none; length -1: neither). */
static void cell_place(const ProbeResult *r, int k, int *length, int *depth) {
    *length = -1, *depth = -1;
    if (r->o.task == PROBE_COPY) *length = r->o.lengths[k];
    if (r->o.task == PROBE_PASSKEY) *length = r->o.lengths[k / r->o.n_depths], *depth = r->o.depths[k % r->o.n_depths];
}

static void number_or_null(FILE *f, const char *name, double v) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.17g", name, v);
    else fprintf(f, ", \"%s\": null", name);
}

void probe_report_json(FILE *f, const ProbeResult *r, const char *model, const char *const *labels) {
    const ProbeOptions *o = &r->o;
    fprintf(f, "{\n");
    json_out_string(f, "task", probe_task_name(o->task), 0);
    json_out_string(f, "model", model, 0);
    if (o->text_file) json_out_string(f, "text_file", o->text_file, 0);
    fprintf(f, "  \"ctx\": %d,\n  \"seed\": %llu,\n  \"sequences\": %d,\n", o->ctx, o->seed, o->sequences);
    if (o->task == PROBE_DIVERGE)
        fprintf(f, "  \"prompt_tokens\": %d,\n  \"new_tokens\": %d,\n", o->prompt_tokens, o->new_tokens);
    fprintf(f, "  \"caches\": [");
    for (int c = 0; c < r->n_caches; c++) {
        fprintf(f, "%s\n    {\"label\": ", c ? "," : "");
        json_out_quoted(f, labels[c], strlen(labels[c]));
        fprintf(f, ", \"cells\": [");
        for (int k = 0; k < r->n_cells; k++) {
            const ProbeCell *x = probe_cell(r, c, k);
            int length, depth;
            cell_place(r, k, &length, &depth);
            fprintf(f, "%s\n      {", k ? "," : "");
            if (length >= 0) fprintf(f, "\"length\": %d, ", length);
            if (depth >= 0) fprintf(f, "\"depth\": %d, ", depth);
            fprintf(f, "\"n\": %ld, \"hits\": %ld, \"agree\": %ld, \"sum\": %.17g, \"sumsq\": %.17g", x->n, x->hits,
                    x->agree, x->sum, x->sumsq);
            number_or_null(f, "rate", probe_rate(x));
            number_or_null(f, "rate_stderr", probe_rate_se(x));
            number_or_null(f, "mean", probe_mean(x));
            number_or_null(f, "mean_stderr", probe_mean_se(x));
            fprintf(f, "}");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
}

static void csv_number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.9g", v);
    else fputc(',', f);
}

void probe_report_csv(FILE *f, const ProbeResult *r, const char *const *labels) {
    fprintf(f, "task,cache,length,depth,n,hits,agree,rate,rate_stderr,mean,mean_stderr\n");
    for (int c = 0; c < r->n_caches; c++)
        for (int k = 0; k < r->n_cells; k++) {
            const ProbeCell *x = probe_cell(r, c, k);
            int length, depth;
            cell_place(r, k, &length, &depth);
            fprintf(f, "%s,\"%s\",", probe_task_name(r->o.task), labels[c]);
            if (length >= 0) fprintf(f, "%d", length);
            fputc(',', f);
            if (depth >= 0) fprintf(f, "%d", depth);
            fprintf(f, ",%ld,%ld,%ld", x->n, x->hits, x->agree);
            csv_number(f, probe_rate(x));
            csv_number(f, probe_rate_se(x));
            csv_number(f, probe_mean(x));
            csv_number(f, probe_mean_se(x));
            fputc('\n', f);
        }
}
