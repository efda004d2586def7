/* eval/calibrate.c: ./run calibrate, from the options to the file (see eval/calibrate.h): the
 * model and its identity, the text's first tokens in windows, the rows collected, the fits, the
 * calibration written with its heatmap, the outlier table printed. */
#include "eval/calibrate.h"
#include "eval/bench_model.h"
#include "eval/calib_report.h"
#include "eval/progress.h"
#include "eval/wikitext.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include <stdlib.h>
#include <string.h>

/* TinyLlama's vocabulary, which random weights of its shape are tokenized with. */
#define TINYLLAMA_TOKENIZER "data/models/mini-llama-brown/tokenizer.bin"

/* Everything one run holds, with one free path. */
typedef struct {
    Model m;
    Tokenizer *tok;
    int *tokens;
    CalibRows rows;
    CalibFitSpec specs[CALIB_MAX_FITS];
    int n_specs;
    Calibration c;
} CalibrateRun;

static void run_free(CalibrateRun *r) {
    calibration_free(&r->c);
    calib_rows_free(&r->rows);
    free(r->tokens);
    if (r->tok) tokenizer_free(r->tok);
    model_free(&r->m);
}

/* The model (exact f32 matmuls: §8), its identity, its tokenizer. */
static int load_model(CalibrateRun *r, const CalibrateOptions *o, char model_sha256[65], Error *err) {
    char name[256], path[4096], msg[512];
    if (bench_model_load(&r->m, o->model_dir, o->random, DT_BF16, name, sizeof name, model_sha256, err)) return -1;
    r->m.precision = MATMUL_EXACT;
    if (o->random) snprintf(path, sizeof path, "%s", TINYLLAMA_TOKENIZER);
    else snprintf(path, sizeof path, "%s/tokenizer.bin", o->model_dir);
    r->tok = tokenizer_load(path, msg, sizeof msg);
    if (!r->tok) return error_set(err, "%s", msg);
    if (tokenizer_vocab_size(r->tok) != r->m.config.vocab_size)
        return error_set(err, "%s: %d pieces but the model's vocab_size is %d", path, tokenizer_vocab_size(r->tok),
                         r->m.config.vocab_size);
    return 0;
}

/* The fits asked for, parsed against the model; duplicates (the same fit key) once. */
static int parse_fits(CalibrateRun *r, const CalibrateOptions *o, Error *err) {
    for (int i = 0; i < o->n_fits; i++) {
        CalibFitSpec f;
        char why[256];
        if (calib_fit_spec_parse(o->fits[i], r->m.config.n_layers, r->m.config.head_dim, &f, why, sizeof why))
            return error_set(err, "--fit '%.60s': %s", o->fits[i], why);
        int seen = 0;
        for (int j = 0; j < r->n_specs; j++) seen |= !strcmp(r->specs[j].key, f.key);
        if (!seen) r->specs[r->n_specs++] = f;
    }
    return 0;
}

/* The text's first windows x ctx tokens (§8: a last partial window is dropped). */
static int load_tokens(CalibrateRun *r, const CalibrateOptions *o, int *windows, Error *err) {
    int n = 0;
    r->tokens = load_eval_tokens(o->text_file, r->tok, 1, &n, err);
    if (!r->tokens) return -1;
    int used = n < o->tokens ? n : o->tokens;
    *windows = used / o->ctx;
    if (*windows < 1 && n >= o->ctx)
        return error_set(err, "--tokens %d is fewer than one window of --ctx %d", o->tokens, o->ctx);
    if (*windows < 1)
        return error_set(err, "%s: %d tokens, fewer than one window of --ctx %d", o->text_file, n, o->ctx);
    return 0;
}

static int make_calibration(CalibrateRun *r, const char *model_sha256, const char *text_sha256, Error *err) {
    const Config *cfg = &r->m.config;
    if (calibration_init(&r->c, cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, err)) return -1;
    snprintf(r->c.model_sha256, sizeof r->c.model_sha256, "%s", model_sha256);
    snprintf(r->c.text_sha256, sizeof r->c.text_sha256, "%s", text_sha256);
    r->c.tokens = r->rows.rows;
    r->c.ctx = r->rows.ctx;
    for (int i = 0; i < r->n_specs; i++)
        if (!calibration_add_fit(&r->c, r->specs[i].key, err)) return -1;
    calib_store_stats(&r->rows, &r->c);
    return 0;
}

/* The heatmap beside the calibration: FILE.svg. */
static int write_heatmap(const CalibrateRun *r, const CalibrateOptions *o, Error *err) {
    char path[4096], title[512];
    snprintf(path, sizeof path, "%s.svg", o->out);
    snprintf(title, sizeof title, "%s: %ld calibration tokens of %s", o->random ? o->random : o->model_dir,
             r->rows.rows, o->text_file);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (calib_write_heatmap_svg(af.f, &r->c, title)) {
        atomic_abort(&af);
        return error_set(err, "%s: write failed", path);
    }
    return atomic_commit(&af, err);
}

/* --out's directory must exist: checked before the work, which takes minutes, not after it. */
static int check_out_dir(const char *out, Error *err) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    slash[slash == dir] = 0;   /* "/x" -> "/" */
    if (!path_exists(dir)) return error_set(err, "%s: cannot write: directory %s does not exist", out, dir);
    return 0;
}

static int steps(CalibrateRun *r, const CalibrateOptions *o, FILE *out, Error *err) {
    char model_sha256[65], text_sha256[65];
    int windows;
    if (check_out_dir(o->out, err) || load_model(r, o, model_sha256, err) || parse_fits(r, o, err) || sha256_file_hex(o->text_file, text_sha256, err) ||
        load_tokens(r, o, &windows, err))
        return -1;
    if (o->ctx > r->m.config.max_seq_len)
        return error_set(err, "--ctx %d is longer than the model's context (%d)", o->ctx, r->m.config.max_seq_len);
    int keep_kpre = 0;
    for (int i = 0; i < r->n_specs; i++) keep_kpre |= r->specs[i].keys.prerope;
    Progress progress;
    progress_init(&progress, "calibrate: rows", o->quiet);
    int batch = o->batch > 0 ? o->batch : o->ctx < 512 ? o->ctx : 512;
    CalibWindows cw = {r->tokens, windows, o->ctx, batch, keep_kpre};
    if (calib_collect(&r->m, &cw, progress_update, &progress, &r->rows, err))
        return -1;
    progress_finish(&progress);
    if (make_calibration(r, model_sha256, text_sha256, err)) return -1;
    progress_init(&progress, "calibrate: fits", o->quiet);
    progress.unit = "tables";
    if (r->n_specs && calib_fit_all(&r->rows, r->specs, r->n_specs, &r->c, progress_update, &progress, err)) return -1;
    progress_finish(&progress);
    if (calibration_save(o->out, &r->c, err) || write_heatmap(r, o, err)) return -1;
    fprintf(out, "calibration: %s (%ld tokens of %s in %d windows of %d; %d fits)\nheatmap:     %s.svg\n\n", o->out,
            r->rows.rows, o->text_file, windows, o->ctx, r->n_specs, o->out);
    calib_print_outliers(out, &r->c);
    return 0;
}

int calibrate_run(const CalibrateOptions *o, FILE *out, Error *err) {
    CalibrateRun *r = calloc(1, sizeof *r);
    if (!r) return error_set(err, "out of memory");
    int rc = steps(r, o, out, err);
    run_free(r);
    free(r);
    return rc;
}
