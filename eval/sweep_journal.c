/* eval/sweep_journal.c: a sweep's journal, DIR/journal.jsonl: writes one (window, configuration)
 * result a line, reads the lines back checked, and adds them up (see sweep_journal.h). */
#include "eval/sweep_journal.h"
#include "eval/json_out.h"
#include "eval/report.h"
#include "model/formats/checked_line.h"
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOURNAL_BYTES ((size_t)1 << 34)
/* A record's token counts: one window's, so far below this; the bound keeps the sums of many
 * records from overflowing a long. */
#define MAX_RECORD_TOKENS (1LL << 40)

static void path_in(char *out, size_t n, const char *dir, const char *file) { snprintf(out, n, "%s/%s", dir, file); }

int journal_append(const char *dir, int w, int c, const SweepConfig *cfg, const TokenSums *t, long tokens,
                   double seconds, Error *err) {
    char *text = NULL, path[4200];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return error_set(err, "out of memory");
    fprintf(f, "{\"window\": %d, \"config\": %d, \"k\": ", w, c);
    json_out_quoted(f, cfg->k_text, strlen(cfg->k_text));
    fprintf(f, ", \"v\": ");
    json_out_quoted(f, cfg->v_text, strlen(cfg->v_text));
    fprintf(f, ", \"scored_tokens\": %ld, \"top1_agree\": %ld, \"tokens\": %ld", t->scored, t->top1_agree, tokens);
    const char *names[] = {"nll_sum", "nll_sumsq", "base_nll_sum", "base_nll_sumsq", "diff_sum", "diff_sumsq",
                           "kl_sum", "kl_sumsq", "kl_max_value", "dp_sum", "dp_sumsq", "seconds"};
    double values[] = {t->nll_sum, t->nll_sumsq, t->base_nll_sum, t->base_nll_sumsq, t->diff_sum, t->diff_sumsq,
                       t->kl_sum, t->kl_sumsq, t->kl_max, t->dp_sum, t->dp_sumsq, seconds};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        if (isfinite(values[i])) fprintf(f, ", \"%s\": %.17g", names[i], values[i]);
        else fprintf(f, ", \"%s\": null", names[i]);
    }
    fprintf(f, ", \"kl_histogram\": [");
    int first = 1;
    for (int b = 0; b < KL_BINS; b++)
        if (t->kl_hist.count[b]) {
            fprintf(f, "%s[%d, %lld]", first ? "" : ", ", b, t->kl_hist.count[b]);
            first = 0;
        }
    fprintf(f, "], \"code_bits\": [%.17g, %.17g], \"code_values\": [%.17g, %.17g]", t->code_bits[0], t->code_bits[1],
            t->code_values[0], t->code_values[1]);   /* SCHEMES.md §9 */
    views_record_write(f, t);   /* by position, per layer */
    fprintf(f, "}");
    if (fclose(f)) { free(text); return error_set(err, "out of memory"); }
    size_t line_len;
    char *line = checked_line_seal(text, len, &line_len);   /* + its CRC-32C and the newline */
    free(text);
    if (!line) return error_set(err, "out of memory");
    path_in(path, sizeof path, dir, JOURNAL_FILE);
    int rc = append_record(path, line, line_len, err);
    free(line);
    return rc;
}

void journal_free(Journal *j) {
    free(j->records);
    free(j->bins);
    free(j->view_values);
    memset(j, 0, sizeof *j);
}

static const char *nl(const char *p, const char *end) { return memchr(p, '\n', (size_t)(end - p)); }

/* The sums of record r (line n of the journal at path) into rec and bins (room for every
 * non-empty bin); x is scratch, left zeroed. */
static int record_sums(const JsonValue *r, const char *path, int n, Record *rec, BinCount *bins, TokenSums *x,
                       Error *err) {
    char where[4300];
    snprintf(where, sizeof where, "%s: line %d", path, n);
    long long scored, agree, tokens;
    if (json_integer(r, "scored_tokens", 0, MAX_RECORD_TOKENS, &scored) ||
        json_integer(r, "top1_agree", 0, MAX_RECORD_TOKENS, &agree) ||
        json_integer(r, "tokens", 0, MAX_RECORD_TOKENS, &tokens))
        return error_set(err, "%s: a record's token counts are missing or out of range", where);
    int rc = report_sums_read(r, x, where, err);   /* kl_sumsq, kl_max, dp sums, histogram */
    if (!rc) rc = report_entropy_read(r, x, where, err);
    for (int side = 0; side < 2; side++) {
        rec->code_bits[side] = x->code_bits[side], rec->code_values[side] = x->code_values[side];
        x->code_bits[side] = x->code_values[side] = 0;
    }
    rec->scored = (long)scored;
    rec->top1_agree = (long)agree;
    rec->tokens = (long)tokens;
    rec->nll_sum = json_number(r, "nll_sum"), rec->nll_sumsq = json_number(r, "nll_sumsq");
    rec->base_nll_sum = json_number(r, "base_nll_sum"), rec->base_nll_sumsq = json_number(r, "base_nll_sumsq");
    rec->diff_sum = json_number(r, "diff_sum"), rec->diff_sumsq = json_number(r, "diff_sumsq");
    rec->kl_sum = json_number(r, "kl_sum");
    rec->kl_sumsq = x->kl_sumsq, rec->kl_max = x->kl_max, rec->dp_sum = x->dp_sum, rec->dp_sumsq = x->dp_sumsq;
    rec->seconds = json_number(r, "seconds");
    rec->bins = bins;
    rec->n_bins = 0;
    for (int b = 0; b < KL_BINS; b++)
        if (x->kl_hist.count[b]) {
            bins[rec->n_bins++] = (BinCount){b, x->kl_hist.count[b]};
            x->kl_hist.count[b] = 0;
        }
    return rc;
}

int journal_read(const char *dir, const SweepSettings *s, Journal *j, Error *err) {
    memset(j, 0, sizeof *j);
    char path[4200];
    path_in(path, sizeof path, dir, JOURNAL_FILE);
    if (!path_exists(path)) return 0;
    char *text = read_whole_file(path, MAX_JOURNAL_BYTES, &j->len, err);
    if (!text) return -1;
    /* each [bin, count] pair of a histogram holds a comma: at most that many bins */
    size_t lines = 0, commas = 0;
    for (size_t i = 0; i < j->len; i++) {
        lines += text[i] == '\n';
        commas += text[i] == ',';
    }
    j->records = calloc(lines + 1, sizeof *j->records);
    j->bins = malloc((commas + 1) * sizeof *j->bins);
    /* a record's views are arrays of numbers: at most its commas + 3 of them */
    j->view_values = malloc((commas + 3 * lines + 1) * sizeof *j->view_values);
    TokenSums *scratch = calloc(1, sizeof *scratch);
    int rc = j->records && j->bins && j->view_values && scratch ? 0 : error_set(err, "out of memory");
    const char *p = text, *end = text + j->len;
    size_t bins_used = 0, values_used = 0, took = 0;
    for (int n = 1; p < end && !rc; n++) {
        const char *e = nl(p, end);
        if (!e) break;   /* torn tail */
        CheckedLine crc = checked_line_verify(p, (size_t)(e - p));
        if (crc != CHECKED_LINE_OK) {
            rc = error_set(err, "%s: line %d %s: refused; delete that line and run the sweep again to compute it anew",
                           path, n, crc == CHECKED_LINE_NO_CRC ? "has no CRC-32C (a journal of an older kvq, or edited)"
                                                               : "fails its CRC-32C (edited or damaged)");
            break;
        }
        Error jerr;
        JsonValue *r = json_parse(p, (size_t)(e - p), &jerr);
        Record rec = {.window = -1, .config = -1, .dir = dir};
        long long w, c;
        int ok = r && r->type == JSON_OBJECT;
        if (ok && !json_integer(r, "window", 0, s->windows_total - 1, &w) &&
            !json_integer(r, "config", 0, s->n_configs - 1, &c)) {
            rec.window = (int)w;
            rec.config = (int)c;
            const char *k = json_string(r, "k"), *v = json_string(r, "v");
            ok = (rec.window % s->ppl.shard_count == s->ppl.shard_index) && k && v &&
                 !strcmp(k, s->configs[rec.config].k_text) && !strcmp(v, s->configs[rec.config].v_text);
        } else {
            ok = 0;
        }
        if (!ok) rc = error_set(err, "%s: line %d is not a record of this sweep", path, n);
        else rc = record_sums(r, path, n, &rec, j->bins + bins_used, scratch, err);
        char where[4300];
        snprintf(where, sizeof where, "%s: line %d", path, n);
        if (!rc) rc = views_record_read(r, j->view_values + values_used, &took, &rec.views, where, err);
        json_free(r);
        if (!rc) {
            bins_used += (size_t)rec.n_bins;
            values_used += took;
            j->records[j->n_records++] = rec;
            p = e + 1;
        }
    }
    j->good_len = (size_t)(p - text);
    free(text);
    free(scratch);
    return rc;
}

static int by_window_then_config(const void *a, const void *b) {
    const Record *x = a, *y = b;
    if (x->window != y->window) return (x->window > y->window) - (x->window < y->window);
    return (x->config > y->config) - (x->config < y->config);
}

/* Adds one record into totals through x (scratch with an empty histogram, left so), so that
 * token_sums_merge stays the one rule for adding sums. */
static void record_add(const Record *rec, SweepTotals *t, TokenSums *x) {
    x->scored = rec->scored;
    x->top1_agree = rec->top1_agree;
    x->nll_sum = rec->nll_sum, x->nll_sumsq = rec->nll_sumsq;
    x->base_nll_sum = rec->base_nll_sum, x->base_nll_sumsq = rec->base_nll_sumsq;
    x->diff_sum = rec->diff_sum, x->diff_sumsq = rec->diff_sumsq;
    x->kl_sum = rec->kl_sum, x->kl_sumsq = rec->kl_sumsq, x->kl_max = rec->kl_max;
    x->dp_sum = rec->dp_sum, x->dp_sumsq = rec->dp_sumsq;
    for (int side = 0; side < 2; side++) x->code_bits[side] = rec->code_bits[side], x->code_values[side] = rec->code_values[side];
    for (int i = 0; i < rec->n_bins; i++) x->kl_hist.count[rec->bins[i].bin] = rec->bins[i].count;
    token_sums_merge(&t->sums[rec->config], x);
    views_record_add(&rec->views, &t->sums[rec->config]);
    for (int i = 0; i < rec->n_bins; i++) x->kl_hist.count[rec->bins[i].bin] = 0;
    t->tokens_processed += rec->tokens;
    t->seconds += rec->seconds;
}

int journal_totals(const Journal *j, int n, const SweepSettings *s, SweepTotals *t, Error *err) {
    memset(t, 0, sizeof *t);
    int count = 0;
    for (int i = 0; i < n; i++) count += j[i].n_records;
    Record *all = malloc(((size_t)count + 1) * sizeof *all);
    TokenSums *scratch = calloc(1, sizeof *scratch);
    t->sums = calloc((size_t)s->n_configs, sizeof *t->sums);
    if (!all || !scratch || !t->sums) {
        free(all);
        free(scratch);
        sweep_totals_free(t);
        return error_set(err, "out of memory");
    }
    for (int i = 0, k = 0; i < n; i++)
        for (int r = 0; r < j[i].n_records; r++) all[k++] = j[i].records[r];
    qsort(all, (size_t)count, sizeof *all, by_window_then_config);
    int rc = 0, in_window = 0;
    for (int k = 0; k < count && !rc; k++) {
        if (k > 0 && !by_window_then_config(&all[k - 1], &all[k]))
            rc = error_set(err, "%s/%s: window %d, configuration %d is there twice", all[k].dir, JOURNAL_FILE,
                           all[k].window, all[k].config);
        else record_add(&all[k], t, scratch);
        in_window = (k > 0 && all[k - 1].window == all[k].window) ? in_window + 1 : 1;
        if (in_window == s->n_configs) t->windows++;
    }
    free(all);
    free(scratch);
    if (rc) sweep_totals_free(t);   /* a refused journal leaves no totals behind */
    return rc;
}

void sweep_totals_free(SweepTotals *t) {
    free(t->sums);
    memset(t, 0, sizeof *t);
}
