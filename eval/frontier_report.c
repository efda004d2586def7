/* eval/frontier_report.c: ./run frontier's report (eval/frontier_report.h): one row per budget
 * with the chosen candidate's test-split figures and the ./run ppl line that measures it again. */
#include "eval/frontier_report.h"
#include "eval/chart.h"
#include "eval/json_out.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TEST_TEXT "data/wikitext-2-raw/wiki.test.raw"

static void row_label(const FrontierRow *r, char *out, size_t n) {
    if (!strcmp(r->k_text, r->v_text)) snprintf(out, n, "%s", r->k_text);
    else snprintf(out, n, "K %s / V %s", r->k_text, r->v_text);
}

/* s as one shell word: as it is when it holds only characters no shell treats specially. */
static void shell_word(FILE *f, const char *s) {
    if (s[0] && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-/=,") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* The ./run ppl line that measures candidate i on the test split as the test sweep did. */
static void ppl_command(FILE *f, const FrontierReport *r, int i) {
    const FrontierOptions *o = r->o;
    const FrontierRow *row = &r->test->rows[i];
    fputs("./run ppl ", f);
    shell_word(f, o->model_dir);
    fputs(" --k-scheme ", f);
    shell_word(f, row->k_text);
    fputs(" --v-scheme ", f);
    shell_word(f, row->v_text);
    if (strcmp(o->test_text, DEFAULT_TEST_TEXT)) fputs(" --text-file ", f), shell_word(f, o->test_text);
    if (o->calib_path) fputs(" --calib ", f), shell_word(f, o->calib_path);
    if (r->test->protocol == PPL_LLAMACPP) fputs(" --protocol llamacpp", f);
    fprintf(f, " --ctx %d --stride %d", r->test->ctx, r->test->stride);
    if (o->ppl.max_windows > 0) fprintf(f, " --windows %d", o->ppl.max_windows);
    if (o->max_tokens > 0) fprintf(f, " --max-tokens %d", o->max_tokens);
    if (strcmp(o->precision, "exact")) fprintf(f, " --precision %s", o->precision);
}

/* Candidates within the budget (how many the choice was made among). */
static int within(const FrontierSplit *valid, BitsFraction b) {
    int n = 0;
    for (int i = 0; i < valid->n; i++) n += valid->rows[i].effective_bits <= (double)b.num / b.den + 1e-9;
    return n;
}

static void split_line(FILE *f, const char *what, const FrontierSplit *s) {
    fprintf(f, "%s on `%s` (%d windows, %ld scored tokens, baseline ppl %.4f; the sweep in `%s`)", what, s->text_file,
            s->windows, s->scored, s->baseline_ppl, s->dir);
}

static void print_markdown(FILE *f, const FrontierReport *r) {
    const FrontierSplit *v = r->valid, *t = r->test;
    fprintf(f, "Frontier of `%s`, %s ctx %d stride %d, %d candidates (%d from `%s`, %d from allocations). ",
            r->o->model_dir, t->protocol == PPL_LLAMACPP ? "llama.cpp chunks" : "HF sliding window", t->ctx, t->stride,
            r->c->n, r->c->from_configs, r->o->configs_file, r->c->n - r->c->from_configs);
    if (t->calib_sha256[0]) fprintf(f, "Calibration sha256 %.12s... ", t->calib_sha256);
    split_line(f, "Chosen", v);
    fprintf(f, ": the candidate of lowest mean KL within the budget (effective bits per value, keys and values "
               "averaged). ");
    split_line(f, "Reported", t);
    fprintf(f, ".\n\n| budget | configuration | from | bits stored | bits effective | bits entropy | codebooks KiB | "
               "delta ppl %% | KL mean | top-1 %% | KL on valid | command |\n"
               "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int b = 0; b < r->o->n_budgets; b++) {
        int i = r->chosen[b];
        if (i < 0) {
            fprintf(f, "| %s | no candidate within %s bits | | | | | | | | | | |\n", r->o->budget_texts[b],
                    r->o->budget_texts[b]);
            continue;
        }
        const FrontierRow *row = &t->rows[i];
        char label[1100];
        row_label(row, label, sizeof label);
        fprintf(f, "| %s | %s | %s | %.3g | %.3g | %.3g | %.1f | %+.3f +/- %.3f | %.3g +/- %.2g | %.2f +/- %.2f | %.3g | `",
                r->o->budget_texts[b], label, r->c->origins[i].source, row->stored_bits, row->effective_bits,
                row->entropy_bits, row->codebook_bytes / 1024, row->y.delta_pct, row->y.delta_pct_se, row->y.kl_mean,
                row->y.kl_se, 100 * row->y.top1, 100 * row->y.top1_se, v->rows[i].y.kl_mean);
        ppl_command(f, r, i);
        fprintf(f, "` |\n");
    }
}

static void json_split(FILE *f, const char *key, const FrontierSplit *s) {
    fprintf(f, "  \"%s\": {\"text_file\": ", key);
    json_out_quoted(f, s->text_file, strlen(s->text_file));
    fprintf(f, ", \"sweep\": ");
    json_out_quoted(f, s->dir, strlen(s->dir));
    fprintf(f, ", \"windows\": %d, \"n_tokens\": %d, \"scored_tokens\": %ld, \"baseline_ppl\": %.17g},\n", s->windows,
            s->n_tokens, s->scored, s->baseline_ppl);
}

/* "null" for a figure that is not finite (JSON has no NaN). */
static void json_num(FILE *f, const char *key, double v, const char *sep) {
    if (isfinite(v)) fprintf(f, "\"%s\": %.17g%s", key, v, sep);
    else fprintf(f, "\"%s\": null%s", key, sep);
}

static void json_figures(FILE *f, const FrontierRow *row) {
    fprintf(f, "{");
    json_num(f, "ppl", row->y.ppl, ", ");
    json_num(f, "delta_percent", row->y.delta_pct, ", ");
    json_num(f, "delta_percent_stderr", row->y.delta_pct_se, ", ");
    json_num(f, "kl_mean", row->y.kl_mean, ", ");
    json_num(f, "kl_stderr", row->y.kl_se, ", ");
    json_num(f, "top1_agreement", row->y.top1, ", ");
    json_num(f, "top1_stderr", row->y.top1_se, ", ");
    fprintf(f, "\"scored_tokens\": %ld}", row->y.n);
}

static void json_candidate(FILE *f, const FrontierReport *r, int i) {
    const FrontierRow *row = &r->test->rows[i];
    fprintf(f, "{\"index\": %d, \"k_scheme\": ", i);
    json_out_quoted(f, row->k_text, strlen(row->k_text));
    fprintf(f, ", \"v_scheme\": ");
    json_out_quoted(f, row->v_text, strlen(row->v_text));
    fprintf(f, ", \"from\": ");
    json_out_quoted(f, r->c->origins[i].source, strlen(r->c->origins[i].source));
    fprintf(f, ", ");
    json_num(f, "stored_bits", row->stored_bits, ", ");
    json_num(f, "effective_bits", row->effective_bits, ", ");
    json_num(f, "entropy_bits", row->entropy_bits, ", ");
    json_num(f, "codebook_bytes", row->codebook_bytes, ", ");
    fprintf(f, "\"valid\": ");
    json_figures(f, &r->valid->rows[i]);
    fprintf(f, ", \"test\": ");
    json_figures(f, row);
    fprintf(f, "}");
}

static void write_json(FILE *f, const FrontierReport *r) {
    fprintf(f, "{\n");
    json_out_string(f, "model", r->o->model_dir, 0);
    json_out_string(f, "model_id", r->test->model_id, 0);
    json_out_string(f, "calib_sha256", r->test->calib_sha256, 0);
    json_out_string(f, "configs", r->o->configs_file, 0);
    json_out_string(f, "choice", "lowest mean KL on the valid split among the candidates within the budget", 0);
    json_out_string(f, "reported", "the chosen candidate's figures on the test split", 0);
    json_out_string(f, "bits", "per cached value, keys and values averaged, at ctx", 0);
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n", r->test->ctx, r->test->stride);
    json_split(f, "valid", r->valid);
    json_split(f, "test", r->test);
    fprintf(f, "  \"budgets\": [\n");
    for (int b = 0; b < r->o->n_budgets; b++) {
        int i = r->chosen[b];
        fprintf(f, "    {\"budget\": %.17g, \"budget_text\": ", (double)r->o->budgets[b].num / r->o->budgets[b].den);
        json_out_quoted(f, r->o->budget_texts[b], strlen(r->o->budget_texts[b]));
        fprintf(f, ", \"candidates_within\": %d, \"chosen\": ", within(r->valid, r->o->budgets[b]));
        if (i < 0) fprintf(f, "null");
        else json_candidate(f, r, i);
        if (i >= 0) {
            char *cmd = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&cmd, &len);
            if (m) ppl_command(m, r, i), fclose(m);
            fprintf(f, ", \"command\": ");
            json_out_quoted(f, cmd ? cmd : "", cmd ? len : 0);
            free(cmd);
        }
        fprintf(f, "}%s\n", b + 1 < r->o->n_budgets ? "," : "");
    }
    fprintf(f, "  ],\n  \"candidates\": [\n");
    for (int i = 0; i < r->test->n; i++) {
        fprintf(f, "    ");
        json_candidate(f, r, i);
        fprintf(f, "%s\n", i + 1 < r->test->n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

/* The test sweep's points, the chosen ones ringed and their budgets in the key. */
static int write_chart(FILE *f, const FrontierReport *r) {
    int n = r->test->n;
    ChartPoint *p = calloc((size_t)n + 1, sizeof *p);
    unsigned char *chosen = calloc((size_t)n + 1, 1);
    char (*labels)[1200] = calloc((size_t)n + 1, sizeof *labels);
    int rc = -1;
    if (p && chosen && labels) {
        for (int i = 0; i < n; i++) {
            const FrontierRow *row = &r->test->rows[i];
            row_label(row, labels[i], sizeof labels[i]);
            for (int b = 0; b < r->o->n_budgets; b++) {
                if (r->chosen[b] != i) continue;
                size_t at = strlen(labels[i]);
                snprintf(labels[i] + at, sizeof labels[i] - at, chosen[i] ? ", %s" : " (chosen within %s",
                         r->o->budget_texts[b]);
                chosen[i] = 1;
            }
            if (chosen[i]) strncat(labels[i], " bits)", sizeof labels[i] - strlen(labels[i]) - 1);
            p[i] = (ChartPoint){labels[i], row->effective_bits, row->y.kl_mean, row->y.delta_pct, row->y.delta_pct_se};
        }
        char title[1200];
        snprintf(title, sizeof title, "Frontier of %.300s on %.300s (chosen on %.300s)", r->o->model_dir, r->test->text_file,
                 r->valid->text_file);
        ChartStyle style = {title, NULL, chosen, "chosen (lowest KL on the valid split within a budget)"};
        rc = chart_write_svg_styled(f, &style, p, n);
    }
    free(p);
    free(chosen);
    free(labels);
    return rc;
}

void frontier_print(FILE *f, const FrontierReport *r, int json) {
    if (json) write_json(f, r);
    else print_markdown(f, r);
}

int frontier_write_report(const FrontierReport *r, Error *err) {
    static const char *const names[] = {"frontier.md", "frontier.json", "frontier.svg"};
    AtomicFile af[3];
    int opened = 0, rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {   /* every file finished before any is published */
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", r->o->out_dir, names[k]);
        if (atomic_open(&af[k], path, err)) { rc = -1; break; }
        opened++;
        if (k == 0) print_markdown(af[k].f, r);
        else if (k == 1) write_json(af[k].f, r);
        else if (write_chart(af[k].f, r)) rc = error_set(err, "%s: out of memory for the chart", path);
        if (!rc && atomic_finish(&af[k], err)) rc = -1, opened--;
    }
    if (rc) {
        for (int k = 0; k < opened; k++) atomic_abort(&af[k]);
        return -1;
    }
    for (int k = 0; k < 3 && !rc; k++) rc = atomic_publish(&af[k], err);
    return rc;
}
