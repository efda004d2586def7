/* eval/calibrate.c: ./run calibrate, from the options to the file (see eval/calibrate.h): the
 * model and its identity, the text's first tokens in windows, the rows collected, the fits, the
 * calibration written with its heatmap, the outlier table printed. */
#include "eval/calibrate.h"
#include "eval/bench_model.h"
#include "eval/calib_report.h"
#include "eval/progress.h"
#include "eval/wikitext.h"
#include "model/formats/fileio.h"
#include "model/formats/model_identity.h"
#include "model/formats/run_lock.h"
#include "model/formats/sha256.h"
#include "quant/aw.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* TinyLlama's vocabulary, which random weights of its shape are tokenized with. */
#define TINYLLAMA_TOKENIZER "data/models/mini-llama-brown/tokenizer.bin"
#define TINYLLAMA_CONFIG "data/tinyllama-1.1b-chat-v1.0/config.json"

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

int calib_store_aw(const Model *m, Calibration *c, Error *err) {
    const Config *cfg = &m->config;
    int d = cfg->head_dim, heads = cfg->n_heads, kv = cfg->n_kv_heads;
    size_t layer_w = (size_t)kv * d;
    const Matrix *wo0 = &m->weights.layers[0].wo;
    float *wo = malloc((size_t)wo0->rows * (size_t)wo0->cols * sizeof *wo);
    if (!wo) return error_set(err, "out of memory for o_proj's weights");
    for (int l = 0; l < cfg->n_layers; l++) {
        const float *stats_q = c->stats_q + (size_t)l * heads * d * 3;
        aw_key_weights(stats_q, heads, kv, d, 0, c->aw_k + l * layer_w);
        aw_key_weights(stats_q, heads, kv, d, 1, c->aw_kpre + l * layer_w);
        const Matrix *wl = &m->weights.layers[l].wo;
        for (int i = 0; i < wl->rows; i++) matrix_row_f32(wl, i, wo + (size_t)i * wl->cols);
        aw_value_weights(wo, wl->rows, heads, kv, d, c->aw_v + l * layer_w);
    }
    free(wo);
    c->has_aw = 1;
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
    return calib_store_aw(&r->m, &r->c, err);
}

/* The heatmap beside the calibration (FILE.svg), written to its temp and left there: published
 * with the calibration (write_outputs). */
static int write_heatmap(const CalibrateRun *r, const CalibrateOptions *o, AtomicFile *af, Error *err) {
    char path[4096], title[512];
    snprintf(path, sizeof path, "%s.svg", o->out);
    if (o->random)   /* seeded random weights, not the model of that name */
        snprintf(title, sizeof title, "random weights of %s's shape: %ld calibration tokens of %s", o->random,
                 r->rows.rows, o->text_file);
    else
        snprintf(title, sizeof title, "%s: %ld calibration tokens of %s", o->model_dir, r->rows.rows, o->text_file);
    if (atomic_open(af, path, err)) return -1;
    if (calib_write_heatmap_svg(af->f, &r->c, title)) {
        atomic_abort(af);
        return error_set(err, "%s: write failed", path);
    }
    return atomic_finish(af, err);
}

/* The calibration and its heatmap land together or not at all: both written to temps first, the
 * heatmap renamed into place, the calibration last. A failure before the last rename leaves the
 * previous calibration as it was. */
static int write_outputs(const CalibrateRun *r, const CalibrateOptions *o, Error *err) {
    AtomicFile svg;
    char staged[4200];
    snprintf(staged, sizeof staged, "%s.tmp.%ld.calibration", o->out, (long)getpid());
    if (write_heatmap(r, o, &svg, err)) return -1;
    if (calibration_save(staged, &r->c, err)) {   /* its message names the temp: where the disk failed */
        unlink(svg.tmp_path);
        return -1;
    }
    if (atomic_publish(&svg, err)) {
        unlink(staged);
        return -1;
    }
    if (rename(staged, o->out) != 0) {
        unlink(staged);
        return error_set(err, "%s: cannot rename the new calibration into place (%s.svg is already the new heatmap)",
                         o->out, o->out);
    }
    return 0;
}

/* The files this run reads: --out (or its heatmap) naming one of them would replace it. */
static int input_paths(const CalibrateOptions *o, char paths[][4200]) {
    int n = 0;
    snprintf(paths[n++], 4200, "%s", o->text_file);
    if (o->random) {
        size_t len = strlen(o->random);
        snprintf(paths[n++], 4200, "%s", TINYLLAMA_TOKENIZER);
        if (!strcmp(o->random, "tinyllama")) snprintf(paths[n++], 4200, "%s", TINYLLAMA_CONFIG);
        else if (len > 5 && !strcmp(o->random + len - 5, ".json")) snprintf(paths[n++], 4200, "%s", o->random);
        else snprintf(paths[n++], 4200, "%s/config.json", o->random);
        return n;
    }
    static const char *const files[] = {"model.safetensors", "config.json", "tokenizer.bin", MODEL_IDENTITY_CACHE};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        snprintf(paths[n++], 4200, "%s/%s", o->model_dir, files[i]);
    return n;
}

/* --out and --out.svg: neither an input of this run (by device and inode, as compress checks its
 * input: "x", "./x", a link), nor a directory, nor too long for their temps; checked before the
 * work, which takes minutes. */
static int check_outputs(const CalibrateOptions *o, Error *err) {
    char paths[8][4200], svg[4200];
    int n = input_paths(o, paths);
    if (strlen(o->out) + sizeof ".svg.tmp.18446744073709551615" > 4096)
        return error_set(err, "--out %.60s...: path too long (%zu characters)", o->out, strlen(o->out));
    snprintf(svg, sizeof svg, "%s.svg", o->out);
    const char *outs[2] = {o->out, svg};
    for (int k = 0; k < 2; k++) {
        struct stat sb;
        if (stat(outs[k], &sb) == 0 && S_ISDIR(sb.st_mode))
            return error_set(err, "%s: is a directory (--out names the calibration file; its heatmap is FILE.svg)",
                             outs[k]);
        for (int i = 0; i < n; i++)
            if (same_file(outs[k], paths[i]))
                return error_set(err, "--out %s: %s is %s, which this run reads: give another --out", o->out, outs[k],
                                 paths[i]);
    }
    return 0;
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

/* Where the time went (stderr, with the progress lines): the forward passes over the windows,
 * then the fits, with each fit's CPU seconds (its tables run in parallel). */
static void print_times(const CalibrateRun *r, double rows_seconds, double fits_seconds, const double *cpu) {
    fprintf(stderr, "calibrate: time: rows %.1f s (%d windows), fits %.1f s", rows_seconds, r->rows.windows,
            fits_seconds);
    for (int i = 0; i < r->n_specs; i++)
        fprintf(stderr, "%s%s %.1f", i ? ", " : " (CPU seconds: ", r->specs[i].key, cpu[i]);
    fprintf(stderr, "%s\n", r->n_specs ? ")" : "");
}

static int steps(CalibrateRun *r, const CalibrateOptions *o, FILE *out, RunLock *lock, Error *err) {
    char model_sha256[65], text_sha256[65], lock_path[4200];
    int windows;
    snprintf(lock_path, sizeof lock_path, "%s.lock", o->out);
    if (check_out_dir(o->out, err) || check_outputs(o, err) ||
        run_lock_take(lock, lock_path, "wait for it to finish, or give another --out", err))
        return -1;
    remove_stale_temps(o->out);
    snprintf(lock_path, sizeof lock_path, "%s.svg", o->out);
    remove_stale_temps(lock_path);
    if (load_model(r, o, model_sha256, err) || parse_fits(r, o, err) || sha256_file_hex(o->text_file, text_sha256, err) ||
        load_tokens(r, o, &windows, err))
        return -1;
    if (o->ctx > r->m.config.max_seq_len)
        return error_set(err, "--ctx %d is longer than the model's context (%d)", o->ctx, r->m.config.max_seq_len);
    int keep_kpre = 0;
    for (int i = 0; i < r->n_specs; i++) keep_kpre |= r->specs[i].keys.prerope;
    Progress progress;
    double started = seconds_now();
    progress_init(&progress, "calibrate: rows", o->quiet);
    int batch = o->batch > 0 ? o->batch : o->ctx < 512 ? o->ctx : 512;
    CalibWindows cw = {r->tokens, windows, o->ctx, batch, keep_kpre};
    if (calib_collect(&r->m, &cw, progress_update, &progress, &r->rows, err))
        return -1;
    progress_finish(&progress);
    double rows_seconds = seconds_now() - started, cpu[CALIB_MAX_FITS];
    if (make_calibration(r, model_sha256, text_sha256, err)) return -1;
    progress_init(&progress, "calibrate: fits", o->quiet);
    progress.unit = "tables";
    started = seconds_now();
    if (r->n_specs &&
        calib_fit_all_timed(&r->rows, r->specs, r->n_specs, &r->c, progress_update, &progress, cpu, err))
        return -1;
    progress_finish(&progress);
    if (!o->quiet) print_times(r, rows_seconds, seconds_now() - started, cpu);
    if (write_outputs(r, o, err)) return -1;
    fprintf(out, "calibration: %s (%ld token%s of %s in %d window%s of %d; %d fit%s)\nheatmap:     %s.svg\n\n", o->out,
            r->rows.rows, r->rows.rows == 1 ? "" : "s", o->text_file, windows, windows == 1 ? "" : "s", o->ctx,
            r->n_specs, r->n_specs == 1 ? "" : "s", o->out);
    calib_print_outliers(out, &r->c);
    return 0;
}

int calibrate_run(const CalibrateOptions *o, FILE *out, Error *err) {
    CalibrateRun *r = calloc(1, sizeof *r);
    if (!r) return error_set(err, "out of memory");
    RunLock lock = {.fd = -1};
    int rc = steps(r, o, out, &lock, err);
    run_lock_release(&lock);
    run_free(r);
    free(r);
    return rc;
}
