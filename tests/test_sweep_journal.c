/* tests/test_sweep_journal.c: a sweep's journal read back (eval/sweep_journal.c, via sweep_merge), with
 * no model, in well under a second. The test writes the shard directories itself — sweep.json and
 * journal.jsonl lines as ./run sweep writes them, from seeded random sums — and adds up what it
 * wrote on its own: for each configuration, windows in increasing order (the order sweep.h
 * promises), from zero. The merged totals must equal that bit for bit: the counts (scored tokens,
 * top-1 agreements, every KL histogram bin, including bin 0 — KL below 1e-12, which lossless
 * configurations fill — and the last one), the sums of squares, the KL maximum, the forward-pass
 * tokens and seconds, and the number of windows. The journals are written in scrambled order and
 * split into two shards, so totals that follow the file order, or lose a bin, or count a window
 * before its last configuration is in, differ. A one-configuration sweep is read too (a window is
 * done with its first record). Refusals: a (window, configuration) twice, a record's sums that
 * do not read (naming the journal and the line), a torn last line. */
#include "tests/test.h"
#include "tests/test_random.h"
#include "eval/sweep.h"
#include "model/formats/checked_line.h"
#include "model/formats/crc32c.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_W 6
#define MAX_C 3

/* One record as the test writes it. */
typedef struct {
    long scored, agree, tokens;
    double nll_sum, nll_sumsq, base_nll_sum, base_nll_sumsq, diff_sum, diff_sumsq;
    double kl_sum, kl_sumsq, kl_max, dp_sum, dp_sumsq, seconds;
    long long hist[KL_BINS];
} Rec;

typedef struct {
    int windows, configs;
    Rec rec[MAX_W][MAX_C];
} Sweep;

static void fill(Sweep *sw, int windows, int configs, uint64_t seed) {
    memset(sw, 0, sizeof *sw);
    sw->windows = windows;
    sw->configs = configs;
    for (int w = 0; w < windows; w++)
        for (int c = 0; c < configs; c++) {
            Rec *r = &sw->rec[w][c];
            r->scored = 50 + (long)(next_u64(&seed) % 200);
            r->agree = (long)(next_u64(&seed) % (unsigned long)(r->scored + 1));
            r->tokens = 2 * r->scored + 1;
            double *sums[] = {&r->nll_sum, &r->nll_sumsq, &r->base_nll_sum, &r->base_nll_sumsq, &r->diff_sum,
                              &r->diff_sumsq, &r->kl_sum, &r->kl_sumsq, &r->dp_sum, &r->dp_sumsq, &r->seconds};
            for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) *sums[i] = 1000.0 * uniform(&seed) - 100.0;
            r->kl_max = uniform(&seed);
            /* a few bins with tokens: always bin 0 and the last one, the rest anywhere */
            r->hist[0] = 1 + (long long)(next_u64(&seed) % 40);
            r->hist[KL_BINS - 1] = 1 + (long long)(next_u64(&seed) % 3);
            for (int k = 0; k < 30; k++) r->hist[1 + next_u64(&seed) % (KL_BINS - 2)] += 1 + (long long)(next_u64(&seed) % 9);
        }
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* A model identity (a sha256 in hex): the shards of one sweep share it. */
#define MODEL_ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* sweep.json of shard `shard` of `shards`, as eval/sweep.c writes it. */
static int write_settings(const char *dir, const Sweep *sw, int shard, int shards) {
    char path[512], text[4096];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    int n = snprintf(text, sizeof text,
                     "{\n  \"kvq_sweep\": 1,\n  \"model\": \"m\",\n  \"model_id\": \"" MODEL_ID "\",\n  \"text_file\": \"t.txt\",\n  \"precision\": \"bf16\",\n"
                     "  \"calib_sha256\": \"\",\n  \"protocol\": \"hf\",\n  \"ctx\": 64,\n  \"stride\": 32,\n"
                     "  \"max_windows\": 0,\n  \"batch\": 64,\n  \"n_tokens\": 1000,\n  \"tokens_hash\": \"0123456789abcdef\",\n"
                     "  \"windows_total\": %d,\n  \"shard_index\": %d,\n  \"shard_count\": %d,\n  \"configs\": [\n",
                     sw->windows, shard, shards);
    for (int c = 0; c < sw->configs; c++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "    {\"k\": \"int%d-g64\", \"v\": \"int%d-g64\", \"k_bits\": [4.5, 4.5], \"v_bits\": [4.5, 4.5]}%s\n",
                      8 >> c, 8 >> c, c + 1 < sw->configs ? "," : "");
    n += snprintf(text + n, sizeof text - (size_t)n, "  ],\n");
    char hex[CRC32C_HEX_CHARS + 1];   /* the last member: the CRC-32C of the text before it */
    crc32c_to_hex(crc32c(0, text, (size_t)n), hex);
    snprintf(text + n, sizeof text - (size_t)n, "  \"crc32c\": \"%s\"\n}\n", hex);
    return write_text(path, text);
}

/* One record's line as eval/sweep_journal.c writes it: the object, then its CRC-32C (checked_line_seal). */
static void print_record(FILE *out, const Sweep *sw, int w, int c) {
    const Rec *r = &sw->rec[w][c];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fprintf(f, "{\"window\": %d, \"config\": %d, \"k\": \"int%d-g64\", \"v\": \"int%d-g64\"", w, c, 8 >> c, 8 >> c);
    fprintf(f, ", \"scored_tokens\": %ld, \"top1_agree\": %ld, \"tokens\": %ld", r->scored, r->agree, r->tokens);
    fprintf(f, ", \"nll_sum\": %.17g, \"nll_sumsq\": %.17g, \"base_nll_sum\": %.17g, \"base_nll_sumsq\": %.17g", r->nll_sum,
            r->nll_sumsq, r->base_nll_sum, r->base_nll_sumsq);
    fprintf(f, ", \"diff_sum\": %.17g, \"diff_sumsq\": %.17g, \"kl_sum\": %.17g, \"kl_sumsq\": %.17g", r->diff_sum,
            r->diff_sumsq, r->kl_sum, r->kl_sumsq);
    fprintf(f, ", \"kl_max_value\": %.17g, \"dp_sum\": %.17g, \"dp_sumsq\": %.17g, \"seconds\": %.17g", r->kl_max,
            r->dp_sum, r->dp_sumsq, r->seconds);
    fprintf(f, ", \"kl_histogram\": [");
    int first = 1;
    for (int b = 0; b < KL_BINS; b++)
        if (r->hist[b]) {
            fprintf(f, "%s[%d, %lld]", first ? "" : ", ", b, r->hist[b]);
            first = 0;
        }
    fprintf(f, "]}");
    fclose(f);
    size_t line_len;
    char *line = text ? checked_line_seal(text, len, &line_len) : NULL;
    if (line) fwrite(line, 1, line_len, out);
    free(text);
    free(line);
}

/* journal.jsonl of one shard: its windows' records, the last window first and each window's
 * configurations last first (so file order is not window order). */
static int write_journal(const char *dir, const Sweep *sw, int shard, int shards) {
    char path[512];
    snprintf(path, sizeof path, "%s/journal.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int w = sw->windows - 1; w >= 0; w--)
        if (w % shards == shard)
            for (int c = sw->configs - 1; c >= 0; c--) print_record(f, sw, w, c);
    return fclose(f);
}

static int make_shards(const char *root, const char *name, const Sweep *sw, int shards, char dirs[][512]) {
    for (int i = 0; i < shards; i++) {
        snprintf(dirs[i], 512, "%s/%s-%d", root, name, i);
        if (mkdir(dirs[i], 0700) || write_settings(dirs[i], sw, i, shards) || write_journal(dirs[i], sw, i, shards)) return -1;
    }
    return 0;
}

/* The totals of configuration c, added up here: windows in increasing order, from zero. */
static void expected_sums(const Sweep *sw, int c, TokenSums *e) {
    memset(e, 0, sizeof *e);
    for (int w = 0; w < sw->windows; w++) {
        const Rec *r = &sw->rec[w][c];
        e->scored += r->scored;
        e->top1_agree += r->agree;
        e->nll_sum += r->nll_sum, e->nll_sumsq += r->nll_sumsq;
        e->base_nll_sum += r->base_nll_sum, e->base_nll_sumsq += r->base_nll_sumsq;
        e->diff_sum += r->diff_sum, e->diff_sumsq += r->diff_sumsq;
        e->kl_sum += r->kl_sum, e->kl_sumsq += r->kl_sumsq;
        e->dp_sum += r->dp_sum, e->dp_sumsq += r->dp_sumsq;
        if (r->kl_max > e->kl_max) e->kl_max = r->kl_max;
        for (int b = 0; b < KL_BINS; b++) e->kl_hist.count[b] += r->hist[b];
    }
}

/* The first field of got that differs from want (bit for bit), or NULL. */
static const char *differing_field(const TokenSums *got, const TokenSums *want, int *bin) {
    *bin = -1;
    if (got->scored != want->scored) return "scored";
    if (got->top1_agree != want->top1_agree) return "top1_agree";
    const double *g[] = {&got->nll_sum, &got->nll_sumsq, &got->base_nll_sum, &got->base_nll_sumsq, &got->diff_sum,
                         &got->diff_sumsq, &got->kl_sum, &got->kl_sumsq, &got->kl_max, &got->dp_sum, &got->dp_sumsq};
    const double *w[] = {&want->nll_sum, &want->nll_sumsq, &want->base_nll_sum, &want->base_nll_sumsq, &want->diff_sum,
                         &want->diff_sumsq, &want->kl_sum, &want->kl_sumsq, &want->kl_max, &want->dp_sum, &want->dp_sumsq};
    const char *names[] = {"nll_sum", "nll_sumsq", "base_nll_sum", "base_nll_sumsq", "diff_sum", "diff_sumsq",
                           "kl_sum", "kl_sumsq", "kl_max", "dp_sum", "dp_sumsq"};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (memcmp(g[i], w[i], sizeof(double))) return names[i];
    for (int b = 0; b < KL_BINS; b++)
        if (got->kl_hist.count[b] != want->kl_hist.count[b]) {
            *bin = b;
            return "kl_histogram";
        }
    return NULL;
}

/* Merges the shards of sw and checks the totals against the test's own. */
static void check_merge(const char *root, const char *name, const Sweep *sw, int shards) {
    char dirs[2][512], check_name[256];
    char *dir_ptrs[2] = {dirs[0], dirs[1]};
    int made = make_shards(root, name, sw, shards, dirs) == 0;
    SweepSettings s;
    SweepTotals t;
    Error err = {{0}};
    int rc = made ? sweep_merge(dir_ptrs, shards, &s, &t, &err) : -1;
    snprintf(check_name, sizeof check_name, "sweep journal: %s (%d windows x %d configuration%s, %d shard%s) merges", name,
             sw->windows, sw->configs, sw->configs > 1 ? "s" : "", shards, shards > 1 ? "s" : "");
    if (!check(rc == 0, check_name, "%s", made ? err.msg : "could not write the shards")) return;

    TokenSums *want = malloc(sizeof *want);
    char why[300] = "";
    for (int c = 0; c < sw->configs && want && !why[0]; c++) {
        expected_sums(sw, c, want);
        int bin;
        const char *field = differing_field(&t.sums[c], want, &bin);
        if (field) snprintf(why, sizeof why, "configuration %d: %s differs%s%.0d", c, field, bin >= 0 ? " at bin " : "", bin);
    }
    snprintf(check_name, sizeof check_name,
             "sweep journal: %s: every configuration's sums, KL maximum and histogram bins (0 and the last too) = the "
             "records added in window order, bit for bit", name);
    check(want && !why[0], check_name, "%s", want ? why : "out of memory");
    free(want);

    long tokens = 0;
    double seconds = 0;
    for (int w = 0; w < sw->windows; w++)   /* all records in (window, configuration) order */
        for (int c = 0; c < sw->configs; c++) tokens += sw->rec[w][c].tokens, seconds += sw->rec[w][c].seconds;
    snprintf(check_name, sizeof check_name, "sweep journal: %s: %d windows done, the records' tokens and seconds added",
             name, sw->windows);
    check(t.windows == sw->windows && t.tokens_processed == tokens && !memcmp(&t.seconds, &seconds, sizeof seconds),
          check_name, "windows %d (want %d), tokens %ld (want %ld), seconds %.17g (want %.17g)", t.windows, sw->windows,
          t.tokens_processed, tokens, t.seconds, seconds);
    free(s.configs);
    sweep_totals_free(&t);
}

/* Replaces the journal of dir with records (w, c) of sw, then extra text (a line or a torn one). */
static int rewrite_journal(const char *dir, const Sweep *sw, const int (*wc)[2], int n, const char *extra) {
    char path[600];
    snprintf(path, sizeof path, "%s/journal.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < n; i++) print_record(f, sw, wc[i][0], wc[i][1]);
    fputs(extra, f);
    return fclose(f);
}

/* sweep_merge of one shard directory must refuse, with a message holding want. */
static void check_refused(const char *dir, const char *want, const char *name) {
    char *dirs[1] = {(char *)dir};
    SweepSettings s;
    SweepTotals t;
    Error err = {{0}};
    int rc = sweep_merge(dirs, 1, &s, &t, &err);
    check(rc != 0 && strstr(err.msg, want) && !strchr(err.msg, '\n'), name, "rc %d, message '%s' (want '%s')", rc,
          err.msg, want);
    if (rc == 0) {
        free(s.configs);
        sweep_totals_free(&t);
    }
}

/* A journal of 2 windows x 2 configurations with one thing wrong. */
static void check_refusals(const char *root, Sweep *sw) {
    static const int twice[5][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 0}};
    static const int all[3][2] = {{0, 0}, {1, 0}, {1, 1}};   /* around the bad line 2 */
    /* line 2: (0, 1) with a histogram entry that is no [bin, count] */
    static const char bad_line[] =
        "{\"window\": 0, \"config\": 1, \"k\": \"int4-g64\", \"v\": \"int4-g64\", \"scored_tokens\": 5, \"top1_agree\": 5, "
        "\"tokens\": 9, \"nll_sum\": 1, \"kl_sumsq\": 0, \"kl_max_value\": 0, \"dp_sum\": 0, \"dp_sumsq\": 0, "
        "\"kl_histogram\": [[3, 2.5]]}";
    char dirs[1][512], want[700], path[600], *text = NULL;
    size_t len = 0;
    fill(sw, 2, 2, 99);

    if (make_shards(root, "twice", sw, 1, dirs) || rewrite_journal(dirs[0], sw, twice, 5, "")) return;
    snprintf(want, sizeof want, "%s/journal.jsonl: window 1, configuration 0 is there twice", dirs[0]);
    check_refused(dirs[0], want, "sweep journal: a (window, configuration) twice is refused, naming it");

    FILE *mem = open_memstream(&text, &len);   /* lines 1, 2 (bad), 3, 4 */
    if (!mem || make_shards(root, "badsums", sw, 1, dirs)) return;
    size_t bad_len;   /* with its CRC: the line's bytes are whole, its histogram does not read */
    char *bad_sealed = checked_line_seal(bad_line, sizeof bad_line - 1, &bad_len);
    if (bad_sealed) fputs(bad_sealed, mem);
    free(bad_sealed);
    for (int i = 1; i < 3; i++) print_record(mem, sw, all[i][0], all[i][1]);
    fclose(mem);
    if (rewrite_journal(dirs[0], sw, all, 1, text)) return;
    free(text);
    snprintf(want, sizeof want, "%s/journal.jsonl: line 2: kl_histogram entry 0 out of range", dirs[0]);
    check_refused(dirs[0], want, "sweep journal: a record whose histogram does not read is refused, naming the journal and line");

    if (make_shards(root, "torn", sw, 1, dirs)) return;
    snprintf(path, sizeof path, "%s/journal.jsonl", dirs[0]);
    FILE *f = fopen(path, "a");
    if (!f) return;
    fputs("{\"window\": 1, \"config\"", f);
    fclose(f);
    snprintf(want, sizeof want, "%s/journal.jsonl: its last record is torn", dirs[0]);
    check_refused(dirs[0], want, "sweep journal: a torn last line is refused by a merge");
}

int main(void) {
    char root[] = "/tmp/kvq-test-sweep-journal-XXXXXX";
    if (!check(mkdtemp(root) != NULL, "sweep journal: a scratch directory", "mkdtemp failed")) return test_exit_code();
    Sweep *sw = malloc(sizeof *sw);
    if (!check(sw != NULL, "sweep journal: memory", "malloc failed")) return test_exit_code();
    fill(sw, 5, 3, 1);
    check_merge(root, "one shard", sw, 1);
    fill(sw, 6, 3, 2);
    check_merge(root, "two shards", sw, 2);
    fill(sw, 4, 1, 3);
    check_merge(root, "one configuration", sw, 1);
    check_refusals(root, sw);
    free(sw);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);   /* the scratch directories the test made */
    if (system(cmd) != 0) printf("     could not remove %s\n", root);
    return test_exit_code();
}
