/* run.c: kvq's command line: each command's flags, the call into eval/ that does its work, what
 * it prints and its exit code (0 ok, 1 a quality check failed, 2 bad input or usage).
 *
 * COMMANDS, at the bottom, is the list of commands: their names, the function that runs each, the
 * shared flags it takes and its help (eval/cli_help.c). Each cmd_* function reads its own flags
 * with eval/cli.h (one or two dashes, --flag=value, the shared flags: MODEL_DIR, --json, --quiet,
 * the scheme flags, the evaluation window), calls into eval/ and prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eval/cli.h"
#include "eval/cli_help.h"
#include "eval/report.h"
#include "eval/sweep.h"
#include "eval/sensitivity.h"
#include "eval/allocate.h"
#include "eval/frontier.h"
#include "eval/bench_model.h"
#include "eval/kvreport.h"
#include "eval/validate.h"
#include "eval/generate.h"
#include "eval/scheme_list.h"
#include "eval/calibrate.h"
#include "eval/calibration.h"
#include "eval/probe.h"
#include "eval/probe_sweep.h"
#include "model/formats/fileio.h"

#define EXIT_OK 0
#define EXIT_QUALITY 1
#define EXIT_BAD_INPUT 2

/* --- Errors: a usage error points at the command's help ------------------------------------ */

/* "cmd: message" + suffix, one line on stderr. */
static void print_error(const char *cmd, const char *msg, const char *suffix) {
    put_escaped(stderr, cmd);
    fputs(": ", stderr);
    put_escaped(stderr, msg);
    fprintf(stderr, "%s\n", suffix);
}

static int usage_error(const Args *a) {
    char suffix[64];   /* a->cmd is one of COMMANDS' names, never the user's text */
    snprintf(suffix, sizeof suffix, " (see ./run %s --help)", a->cmd);
    print_error(a->cmd, a->bad, suffix);
    return EXIT_BAD_INPUT;
}

/* Bad input found past the flags (a file, the model): one line naming it. */
static int bad_input(const Args *a, const char *msg) {
    print_error(a->cmd, msg, "");
    return EXIT_BAD_INPUT;
}

/* --- generate, logits, tokenize ----------------------------------------------------------- */

/* check_args for a command with one cache, and its --calib: what eval/calibration.h resolves. */
static int check_kv_args(Args *a, const char *default_scheme, KvCacheFlags *kv) {
    kv->calib_path = a->calib;
    return check_args(a, default_scheme, &kv->k, &kv->v);
}

static int cmd_generate(Args *a) {
    GenerateOptions o = {.prompt = "", .steps = 256, .temperature = 1.0f, .top_p = 0.9f};
    int seed = -1;
    while (next_arg(a)) {
        if (flag(a, "i", 1) || flag(a, "prompt", 1)) o.prompt = a->value;
        else if (flag(a, "n", 1) || flag(a, "steps", 1)) parse_int(a, 1, 1 << 20, &o.steps);
        else if (flag(a, "t", 1) || flag(a, "temperature", 1)) parse_float(a, 0.0f, 100.0f, &o.temperature);
        else if (flag(a, "p", 1) || flag(a, "top-p", 1)) parse_float(a, 0.0f, 1.0f, &o.top_p);
        else if (flag(a, "s", 1) || flag(a, "seed", 1)) parse_int(a, 0, 2147483647, &seed);
        else if (flag(a, "chat", 0)) o.chat = 1;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    if (check_kv_args(a, KV_CACHE_DEFAULT_SCHEME, &o.kv)) return usage_error(a);
    o.seed = seed >= 0 ? (unsigned long long)seed : (unsigned long long)time(NULL);
    Error err;
    return generate_from_dir(a->dir, &o, stdout, stderr, &err) ? bad_input(a, err.msg) : EXIT_OK;
}

static int cmd_logits(Args *a) {
    const char *list = NULL, *out = NULL;
    while (next_arg(a)) {
        if (flag(a, "tokens", 1)) list = a->value;
        else if (flag(a, "out", 1) || flag(a, "o", 1)) out = a->value;
        else unknown_arg(a);
    }
    require(a, a->dir && list, "needs MODEL_DIR and --tokens");
    KvCacheFlags kv;
    if (check_kv_args(a, KV_CACHE_DEFAULT_SCHEME, &kv)) return usage_error(a);
    Error err;
    int bad_ids;
    if (logits_from_dir(a->dir, list, &kv, out, stdout, &bad_ids, &err) == 0) return EXIT_OK;
    if (!bad_ids) return bad_input(a, err.msg);
    take_error(a, -1, &err);   /* the --tokens list is checked against the model's vocabulary */
    return usage_error(a);
}

static int cmd_tokenize(Args *a) {
    const char *text = NULL, *text_file = NULL;
    int bos = 0;
    while (next_arg(a)) {
        if (flag(a, "text", 1)) text = a->value;
        else if (flag(a, "text-file", 1)) text_file = a->value;
        else if (flag(a, "bos", 0)) bos = 1;
        else unknown_arg(a);
    }
    require(a, a->dir && !text != !text_file, "needs MODEL_DIR and one of --text, --text-file");
    if (a->bad[0]) return usage_error(a);
    Error err;
    if (tokenize_print(stdout, a->dir, text, text_file, bos, &err)) return bad_input(a, err.msg);
    return EXIT_OK;
}

/* --- ppl, ppl-merge, sweep, sweep-merge --------------------------------------------------- */

/* The window options from the flags; ctx 0 is the model's context (eval/ reads it there). */
static PplOptions eval_options(const EvalFlags *e) {
    return (PplOptions){.protocol = strcmp(e->protocol, "llamacpp") ? PPL_HF : PPL_LLAMACPP, .ctx = e->ctx,
                        .stride = e->stride, .max_windows = e->windows, .shard_index = e->shard_i,
                        .shard_count = e->shard_n, .batch = e->batch};
}

static void print_ppl_report(const Args *a, const PplReport *r) {
    if (a->json) report_ppl_json(stdout, r);
    else report_ppl_text(stdout, r);
}

static int cmd_ppl(Args *a) {
    int no_compare = 0, no_layer_error = 0;
    while (next_arg(a)) {
        if (flag(a, "no-compare", 0)) no_compare = 1;
        else if (flag(a, "no-layer-error", 0)) no_layer_error = 1;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    PplRun run = {.model_dir = a->dir, .text_file = a->e.text_file, .precision = a->e.precision,
                  .max_tokens = a->e.max_tokens, .quiet = a->quiet, .o = eval_options(&a->e)};
    if (check_kv_args(a, KV_CACHE_DEFAULT_SCHEME, &run.kv)) return usage_error(a);
    run.o.compare = !no_compare && !(kv_layered_is_fp32(&run.kv.k) && kv_layered_is_fp32(&run.kv.v));
    run.o.layer_error = run.o.compare && !no_layer_error;
    PplReport report;
    Error err;
    if (ppl_run(&run, &report, &err)) return bad_input(a, err.msg);
    print_ppl_report(a, &report);
    return EXIT_OK;
}

/* Its own parsing: --json or -json; the other arguments are files. */
static int cmd_ppl_merge(Args *a) {
    int n = 0;
    char **files = calloc((size_t)a->argc, sizeof *files);
    if (!files) return bad_input(a, "out of memory");
    for (; a->i < a->argc; a->i++) {
        if (!strcmp(a->argv[a->i], "--json") || !strcmp(a->argv[a->i], "-json")) a->json = 1;
        else if (a->argv[a->i][0] == '-') require(a, 0, "unknown flag");
        else files[n++] = a->argv[a->i];
    }
    require(a, n > 0, "give the shards' JSON files");
    PplReport report;
    Error err;
    int failed = !a->bad[0] && ppl_merge_files(files, n, &report, &err);
    free(files);
    if (a->bad[0]) return usage_error(a);
    if (failed) return bad_input(a, err.msg);
    print_ppl_report(a, &report);
    return EXIT_OK;
}

static int cmd_sweep(Args *a) {
    const char *out_dir = NULL;
    int no_layer_error = 0;
    ProbeSweep probes = {.o = {.seed = 42}};
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return bad_input(a, "out of memory");
    Error err;
    while (next_arg(a)) {
        if (flag(a, "config", 1)) take_error(a, sweep_add_config(&s, a->value, &err), &err);
        else if (flag(a, "configs", 1)) take_error(a, sweep_add_config_file(&s, a->value, &err), &err);
        else if (flag(a, "out-dir", 1)) out_dir = a->value;
        else if (flag(a, "no-layer-error", 0)) no_layer_error = 1;
        else if (flag(a, "probe", 1)) take_error(a, probe_sweep_add(&probes, a->value, &err), &err);
        else if (flag(a, "probe-sequences", 1)) parse_int(a, 1, 1 << 16, &probes.o.sequences);
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    require(a, out_dir != NULL, "missing --out-dir DIR (the journal and results go there)");
    require(a, s.n_configs > 0, "no configurations: give --config K[:V] or --configs FILE");
    require(a, probes.n_tasks == 0 || a->e.shard_n == 1,
            "--probe runs after a whole sweep, not a shard's (--shard I/N): run it without --shard");
    int rc = check_args(a, NULL, NULL, NULL) ? usage_error(a) : EXIT_OK;
    if (rc == EXIT_OK) {
        s.ppl = eval_options(&a->e);
        s.ppl.layer_error = !no_layer_error;
        snprintf(s.model, sizeof s.model, "%s", a->dir);
        snprintf(s.text_file, sizeof s.text_file, "%s", a->e.text_file);
        snprintf(s.precision, sizeof s.precision, "%s", a->e.precision);
        snprintf(s.calib_path, sizeof s.calib_path, "%s", a->calib ? a->calib : "");
        SweepRun run = {out_dir, a->e.max_tokens, a->quiet, a->json, stdout, stderr};
        if (probes.n_tasks ? probe_sweep_run_and_report(&s, &probes, &run, &err) : sweep_run_and_report(&s, &run, &err))
            rc = bad_input(a, err.msg);
    }
    free(s.configs);
    return rc;
}

/* --- probe (eval/probe.h) ------------------------------------------------------------------ */

static int cmd_probe(Args *a) {
    ProbeOptions o = {.seed = 42};
    const char *task = NULL;
    int seed = 42;
    while (next_arg(a)) {
        if (flag(a, "task", 1)) task = a->value;
        else if (flag(a, "ctx", 1)) parse_int(a, 4, 1 << 20, &o.ctx);
        else if (flag(a, "sequences", 1)) parse_int(a, 1, 1 << 16, &o.sequences);
        else if (flag(a, "seed", 1)) parse_int(a, 0, 2147483647, &seed);
        else if (flag(a, "lengths", 1)) parse_int_list(a, 2, 1 << 20, o.lengths, PROBE_MAX_LENGTHS, &o.n_lengths);
        else if (flag(a, "depths", 1)) parse_int_list(a, 0, 100, o.depths, PROBE_MAX_DEPTHS, &o.n_depths);
        else if (flag(a, "prompt-tokens", 1)) parse_int(a, 1, 1 << 20, &o.prompt_tokens);
        else if (flag(a, "new-tokens", 1)) parse_int(a, 1, 1 << 20, &o.new_tokens);
        else if (flag(a, "text-file", 1)) o.text_file = a->value;
        else if (flag(a, "batch", 1)) parse_int(a, 1, 4096, &o.batch);
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    require(a, task != NULL, "missing --task copy|passkey|diverge");
    require(a, !task || probe_task_parse(task) >= 0, "--task must be copy, passkey or diverge");
    KvCacheFlags kv;
    if (check_kv_args(a, KV_CACHE_DEFAULT_SCHEME, &kv)) return usage_error(a);
    o.task = (ProbeTask)probe_task_parse(task);
    o.seed = (unsigned long long)seed;
    ProbeResult r;
    Error err;
    if (probe_run_from_dir(a->dir, &kv, &o, &r, &err)) return bad_input(a, err.msg);
    char label[1100];
    const char *both = a->kv_scheme ? a->kv_scheme : KV_CACHE_DEFAULT_SCHEME;   /* as the user spelled them */
    const char *k_text = a->k_scheme ? a->k_scheme : both, *v_text = a->v_scheme ? a->v_scheme : both;
    if (!strcmp(k_text, v_text)) snprintf(label, sizeof label, "%s", k_text);
    else snprintf(label, sizeof label, "K %s / V %s", k_text, v_text);
    const char *labels[2] = {KV_CACHE_DEFAULT_SCHEME, label};
    if (a->json) probe_report_json(stdout, &r, a->dir, labels);
    else probe_report_text(stdout, &r, a->dir, labels);
    probe_result_free(&r);
    return EXIT_OK;
}

/* --- sensitivity, allocate (eval/sensitivity.h, eval/allocate.h) ------------------------------ */

static int cmd_sensitivity(Args *a) {
    const char *out_dir = NULL, *candidates = NULL, *side_lists[2] = {NULL, NULL};
    SensGrid g = {0};
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return bad_input(a, "out of memory");
    Error err;
    a->e.text_file = SENS_DEFAULT_TEXT;   /* the calibration split: a choice made from it is judged on test */
    while (next_arg(a)) {
        if (flag(a, "candidates", 1)) candidates = a->value;
        else if (flag(a, "k-candidates", 1)) side_lists[SENS_KEYS] = a->value;
        else if (flag(a, "v-candidates", 1)) side_lists[SENS_VALUES] = a->value;
        else if (flag(a, "out-dir", 1)) out_dir = a->value;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    if (candidates && !a->bad[0]) take_error(a, sens_parse_candidates(candidates, &g, &err), &err);   /* then a side's own */
    for (int side = 0; side < 2; side++)
        if (side_lists[side] && !a->bad[0]) take_error(a, sens_parse_side_candidates(side_lists[side], (SensSide)side, &g, &err), &err);
    require(a, candidates || (side_lists[0] && side_lists[1]),
            "missing --candidates SPEC,SPEC,... (the schemes to try in each layer), or --k-candidates and --v-candidates");
    require(a, out_dir != NULL, "missing --out-dir DIR (the journal and the report go there)");
    int rc = check_args(a, NULL, NULL, NULL) ? usage_error(a) : EXIT_OK;
    if (rc == EXIT_OK) {
        s.ppl = eval_options(&a->e);
        snprintf(s.model, sizeof s.model, "%s", a->dir);
        snprintf(s.text_file, sizeof s.text_file, "%s", a->e.text_file);
        snprintf(s.precision, sizeof s.precision, "%s", a->e.precision);
        snprintf(s.calib_path, sizeof s.calib_path, "%s", a->calib ? a->calib : "");
        SweepRun run = {out_dir, a->e.max_tokens, a->quiet, a->json, stdout, stderr};
        if (sensitivity_run_and_report(&s, &g, &run, &err))
            rc = bad_input(a, err.msg);
    }
    free(s.configs);
    return rc;
}

static int cmd_allocate(Args *a) {
    AllocateOptions o = {.text_file = "data/wikitext-2-raw/wiki.test.raw", .batch = 512};
    const char *budgets = NULL;
    char why[200];
    while (next_arg(a)) {
        if (flag(a, "budget", 1)) {
            budgets = a->value;
            if (alloc_parse_budgets(a->value, o.budgets, o.budget_texts, &o.n_budgets, why, sizeof why))
                snprintf(a->bad, sizeof a->bad, "--budget: %s", why);
        }
        else if (flag(a, "candidates", 1)) o.candidates = a->value;
        else if (flag(a, "k-candidates", 1)) o.side_candidates[SENS_KEYS] = a->value;
        else if (flag(a, "v-candidates", 1)) o.side_candidates[SENS_VALUES] = a->value;
        else if (flag(a, "from", 1)) o.from = a->value;
        else if (flag(a, "verify", 0)) o.verify = 1;
        else if (flag(a, "out-dir", 1)) o.out_dir = a->value;
        else if (flag(a, "text-file", 1)) o.text_file = a->value;
        else if (flag(a, "windows", 1)) parse_int(a, 1, 1 << 30, &o.windows);
        else if (flag(a, "max-tokens", 1)) parse_int(a, 2, 1 << 30, &o.max_tokens);
        else if (flag(a, "batch", 1)) parse_int(a, 1, 4096, &o.batch);
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    require(a, budgets != NULL, "missing --budget BITS[,BITS...] (the mean bits per cached value)");
    require(a, o.from != NULL, "missing --from DIR, the out dir of ./run sensitivity MODEL_DIR --candidates ... "
                               "--out-dir DIR: run that first (one sensitivity serves every budget)");
    require(a, !o.verify || o.out_dir, "--verify needs --out-dir DIR (its sweep's journal and results go there)");
    require(a, o.verify || !o.out_dir, "--out-dir is where --verify's sweep goes: give --verify too");
    if (a->bad[0]) return usage_error(a);
    o.model_dir = a->dir;
    o.json = a->json;
    o.quiet = a->quiet;
    o.calib_path = a->calib;
    Error err;
    return allocate_run(&o, stdout, stderr, &err) ? bad_input(a, err.msg) : EXIT_OK;
}

/* ./run frontier (eval/frontier.h): ctx 1024, stride 512 and 16 windows unless given. */
static int cmd_frontier(Args *a) {
    FrontierOptions o = {.valid_text = FRONTIER_VALID_TEXT};
    const char *budgets = NULL;
    char why[200];
    int no_layer_error = 0;
    a->e.ctx = 1024, a->e.windows = 16;
    while (next_arg(a)) {
        if (flag(a, "configs", 1)) o.configs_file = a->value;
        else if (flag(a, "allocations", 1)) {
            require(a, o.n_allocations < FRONTIER_MAX_ALLOCATIONS, "--allocations: at most 8 files");
            if (o.n_allocations < FRONTIER_MAX_ALLOCATIONS) o.allocations[o.n_allocations++] = a->value;
        } else if (flag(a, "budget", 1)) {
            budgets = a->value;
            if (alloc_parse_budgets(a->value, o.budgets, o.budget_texts, &o.n_budgets, why, sizeof why))
                snprintf(a->bad, sizeof a->bad, "--budget: %s", why);
        } else if (flag(a, "valid-text", 1)) o.valid_text = a->value;
        else if (flag(a, "out-dir", 1)) o.out_dir = a->value;
        else if (flag(a, "no-layer-error", 0)) no_layer_error = 1;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    require(a, o.configs_file != NULL, "missing --configs FILE (the candidates, one K[:V] a line)");
    require(a, budgets != NULL, "missing --budget BITS[,BITS...] (effective bits per value)");
    require(a, o.out_dir != NULL, "missing --out-dir DIR (the two sweeps and the report go there)");
    require(a, a->e.shard_n == 1, "--shard: a frontier runs whole sweeps (shard them with ./run sweep)");
    if (check_args(a, NULL, NULL, NULL)) return usage_error(a);
    o.model_dir = a->dir, o.test_text = a->e.text_file, o.calib_path = a->calib, o.precision = a->e.precision;
    o.ppl = eval_options(&a->e);
    o.ppl.layer_error = !no_layer_error;
    o.max_tokens = a->e.max_tokens, o.quiet = a->quiet, o.json = a->json;
    Error err;
    return frontier_run(&o, stdout, stderr, &err) ? bad_input(a, err.msg) : EXIT_OK;
}

static int cmd_sweep_merge(Args *a) {
    const char *out_dir = NULL;
    int n = 0, rc = EXIT_BAD_INPUT;
    char **dirs = calloc((size_t)a->argc, sizeof *dirs);
    if (!dirs) return bad_input(a, "out of memory");
    while (next_arg(a)) {
        if (flag(a, "out-dir", 1)) out_dir = a->value;
        else if (a->argv[a->i][0] != '-') dirs[n++] = a->argv[a->i++];
        else unknown_arg(a);
    }
    require(a, n > 0, "give the shards' --out-dir directories");
    require(a, out_dir != NULL, "missing --out-dir DIR for the merged results");
    Error err;
    if (a->bad[0]) usage_error(a);
    else rc = sweep_merge_run(dirs, n, out_dir, stdout, a->json, &err) ? bad_input(a, err.msg) : EXIT_OK;
    free(dirs);
    return rc;
}

/* --- kv-extract, kv-info, compress, decompress, --quick-test ------------------------------ */

static int cmd_kv_extract(Args *a) {
    const char *prompt = NULL, *list = NULL, *out = NULL, *dtype = "f32";
    while (next_arg(a)) {
        if (flag(a, "i", 1) || flag(a, "prompt", 1)) prompt = a->value;
        else if (flag(a, "tokens", 1)) list = a->value;
        else if (flag(a, "o", 1) || flag(a, "output", 1)) out = a->value;
        else if (flag(a, "dtype", 1)) dtype = a->value;
        else unknown_arg(a);
    }
    require(a, a->dir && out && !prompt != !list, "needs MODEL_DIR, -o FILE and one of -i PROMPT, --tokens IDS");
    one_of(a, "dtype", dtype, "f32", "f16");
    if (a->bad[0]) return usage_error(a);
    Error err;
    int n, layers;
    DType dt = strcmp(dtype, "f16") ? DT_F32 : DT_F16;
    if (kv_extract_from_dir(a->dir, prompt, list, out, dt, &n, &layers, &err)) return bad_input(a, err.msg);
    fprintf(stderr, "kv-extract: %d tokens x %d layers -> %s\n", n, layers, out);
    return EXIT_OK;
}

static int cmd_kv_info(Args *a) {
    const char *model = NULL;
    while (next_arg(a)) {
        if (flag(a, "model", 1)) model = a->value;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing FILE");
    if (a->bad[0]) return usage_error(a);
    Error err;
    int n_mismatches;
    if (kv_info(stdout, a->dir, model, a->calib, a->json, &n_mismatches, &err)) return bad_input(a, err.msg);
    return n_mismatches > 0 ? EXIT_QUALITY : EXIT_OK;
}

static int cmd_compress(Args *a) {
    const char *input = NULL, *output = NULL, *scheme = "int4";
    int group = 64, lz4 = 0, metrics_only = 0, verbose = 0, entropy = 0;
    float sparsity = 0.0f, rmse = 0.10f, snr = 18.0f, cosine = 0.99f;
    while (next_arg(a)) {
        if (flag(a, "input", 1) || flag(a, "i", 1)) input = a->value;
        else if (flag(a, "output", 1) || flag(a, "o", 1)) output = a->value;
        else if (flag(a, "scheme", 1)) scheme = a->value;
        else if (flag(a, "group-size", 1)) parse_int(a, 1, 1 << 20, &group);
        else if (flag(a, "sparsity", 1)) parse_float(a, -1e9f, 1e9f, &sparsity);
        else if (flag(a, "max-rmse", 1)) parse_float(a, 0, 1e9f, &rmse);
        else if (flag(a, "min-snr", 1)) parse_float(a, -1e9f, 1e9f, &snr);
        else if (flag(a, "min-cosine", 1)) parse_float(a, -1, 1, &cosine);
        else if (flag(a, "lz4", 0)) lz4 = 1;
        else if (flag(a, "entropy", 0)) entropy = 1;
        else if (flag(a, "metrics-only", 0)) metrics_only = 1;
        else if (flag(a, "verbose", 0) || flag(a, "v", 0)) verbose = 1;
        else unknown_arg(a);
    }
    require(a, input && (output || metrics_only), "needs -input IN and -output OUT (or --metrics-only)");
    if (!a->bad[0] && !(sparsity >= 0.0f && sparsity < 1.0f))
        snprintf(a->bad, sizeof a->bad, "-sparsity %g must be in [0, 1)", sparsity);
    /* the files compared, not their names: "x.st" and "./x.st" are one file */
    if (input && output && !metrics_only)
        require(a, strcmp(input, output) != 0 && !same_file(input, output), "-output must differ from -input (the same file)");
    /* --kv-scheme (or --scheme, -group-size) is checked even when --k-scheme and --v-scheme replace it */
    char composed[64];
    KvCompressRun run = {.input = input, .output = metrics_only ? NULL : output, .json = stdout,
                         .verbose = verbose ? stderr : NULL,
                         .o = {.sparsity = sparsity, .lz4 = lz4, .max_rmse = rmse, .min_snr_db = snr,
                               .min_cosine = cosine, .entropy = entropy}};
    cli_compose_scheme(scheme, group, composed, sizeof composed);
    if (!a->bad[0]) parse_scheme(a, a->kv_scheme ? a->kv_scheme : composed, KV_SIDE_KEYS, &run.kv.k);
    if (check_kv_args(a, composed, &run.kv)) return usage_error(a);
    Error err;
    int passed;
    /* the loader's and the writer's errors name their file */
    if (kv_compress_print(&run, &passed, &err) == 0) return passed ? EXIT_OK : EXIT_QUALITY;
    return bad_input(a, err.msg);
}

static int cmd_decompress(Args *a) {
    const char *in = NULL, *out = NULL;
    while (next_arg(a)) {
        if (flag(a, "input", 1) || flag(a, "i", 1)) in = a->value;
        else if (flag(a, "output", 1) || flag(a, "o", 1)) out = a->value;
        else unknown_arg(a);
    }
    require(a, in && out, "needs -input IN and -output OUT");
    if (in && out) require(a, strcmp(in, out) != 0 && !same_file(in, out), "-output must differ from -input (the same file)");
    if (a->bad[0]) return usage_error(a);
    Error err;
    return kv_decompress_to(in, a->calib, out, &err) ? bad_input(a, err.msg) : EXIT_OK;
}

/* No flags: what follows is ignored, as it always was (schemes too). */
static int cmd_quick_test(Args *a) {
    Error err;
    int passed;
    if (quick_test_run(stdout, &passed, &err)) return bad_input(a, err.msg);
    return passed ? EXIT_OK : EXIT_QUALITY;
}

/* --- --validate --------------------------------------------------------------------------- */

/* --threshold (eval/validate.h); as the value parsers, replaces "needs a value". */
static void parse_threshold(Args *a, ValidateOptions *o) {
    if (validate_parse_threshold(a->value, o))
        snprintf(a->bad, sizeof a->bad, "--threshold: expected a positive number or percentage, got '%s'", a->value);
}

static int cmd_validate(Args *a) {
    /* 8 windows: about 5 s on the bundled model with 2 cores */
    ValidateOptions o = {.threshold_ppl = 0.5, .threshold_percent = 1.0, .windows = 8};
    while (next_arg(a)) {
        if (flag(a, "model", 1)) o.model_dir = a->value;
        else if (flag(a, "windows", 1)) parse_int(a, 1, 1 << 20, &o.windows);   /* not ppl's bound */
        else if (flag(a, "threshold", 1)) parse_threshold(a, &o);
        else unknown_arg(a);
    }
    if (check_kv_args(a, "int4-g64", &o.kv)) return usage_error(a);
    o.text_file = a->e.text_file;
    o.ctx = a->e.ctx;
    o.stride = a->e.stride;
    o.quiet = a->quiet;
    Error err;
    int passed;
    FILE *out = a->json ? stderr : stdout;   /* --quiet: no progress, as on every command; the report stays */
    if (validate_default_run(&o, out, a->json ? stdout : NULL, &passed, &err)) return bad_input(a, err.msg);
    return passed ? EXIT_OK : EXIT_QUALITY;
}

/* --- calibrate ----------------------------------------------------------------------------- */

static int cmd_calibrate(Args *a) {
    CalibrateOptions o = {.text_file = CALIB_DEFAULT_TEXT, .tokens = CALIB_DEFAULT_TOKENS, .ctx = CALIB_DEFAULT_CTX};
    while (next_arg(a)) {
        if (flag(a, "random", 1)) o.random = a->value;
        else if (flag(a, "text-file", 1)) o.text_file = a->value;
        else if (flag(a, "tokens", 1)) parse_int(a, 1, 1 << 28, &o.tokens);
        else if (flag(a, "ctx", 1)) parse_int(a, 8, 1 << 20, &o.ctx);
        else if (flag(a, "batch", 1)) parse_int(a, 1, 4096, &o.batch);
        else if (flag(a, "out", 1) || flag(a, "o", 1)) o.out = a->value;
        else if (flag(a, "fit", 1)) {
            if (o.n_fits == CALIB_MAX_FITS) require(a, 0, "more --fit than calibrate takes (48)");
            else o.fits[o.n_fits++] = a->value;
        }
        else unknown_arg(a);
    }
    require(a, !a->dir != !o.random, "give MODEL_DIR or --random NAME");
    require(a, o.out != NULL, "missing --out FILE (the calibration; its heatmap goes to FILE.svg)");
    if (a->bad[0]) return usage_error(a);
    o.model_dir = a->dir;
    o.quiet = a->quiet;
    Error err;
    if (calibrate_run(&o, stdout, &err)) return bad_input(a, err.msg);
    return EXIT_OK;
}

/* --- bench, schemes, --help --------------------------------------------------------------- */

/* Its scheme flags are its own, checked as they come: --kv-scheme is the cache of the prefill
 * and decode runs, the long ones are compared with fp32 at --ctx. */
static int cmd_bench(Args *a) {
    BenchOptions o;
    bench_default_options(&o);
    const char *random = NULL, *dtype = "bf16", *precision = "bf16";
    while (next_arg(a)) {
        if (flag(a, "random", 1)) random = a->value;
        else if (flag(a, "p", 1)) parse_int(a, 1, 1 << 16, &o.prompt);
        else if (flag(a, "n", 1)) parse_int(a, 1, 1 << 16, &o.gen);
        else if (flag(a, "ctx", 1)) parse_int(a, 0, 1 << 20, &o.long_ctx);
        else if (flag(a, "kv-scheme", 1)) {
            if (!parse_scheme(a, a->value, KV_SIDE_KEYS, &o.kv.k)) parse_scheme(a, a->value, KV_SIDE_VALUES, &o.kv.v);
        }
        else if (flag(a, "long-scheme", 1)) {
            if (!parse_scheme(a, a->value, KV_SIDE_KEYS, &o.long_k)) parse_scheme(a, a->value, KV_SIDE_VALUES, &o.long_v);
        }
        else if (flag(a, "long-k-scheme", 1)) parse_scheme(a, a->value, KV_SIDE_KEYS, &o.long_k);
        else if (flag(a, "long-v-scheme", 1)) parse_scheme(a, a->value, KV_SIDE_VALUES, &o.long_v);
        else if (flag(a, "threads", 1)) parse_int(a, 1, 1024, &o.threads);
        else if (flag(a, "repeat", 1)) parse_int(a, 1, 64, &o.repeats);
        else if (flag(a, "dtype", 1)) dtype = a->value;
        else if (flag(a, "precision", 1)) precision = a->value;
        else if (flag(a, "no-probe", 0)) o.probe_machine = 0;
        else if (flag(a, "calib", 1)) o.kv.calib_path = a->value;
        else if (flag(a, "ppl", 0)) o.ppl_windows = 4;
        else if (flag(a, "ppl-windows", 1)) parse_int(a, 2, 1 << 16, &o.ppl_windows);
        else if (flag(a, "ppl-batch", 1)) parse_int(a, 1, 4096, &o.ppl_batch);
        else unknown_arg(a);
    }
    require(a, !a->dir != !random, "give MODEL_DIR or --random NAME");
    one_of(a, "precision", precision, "bf16", "exact");
    DType dt = DT_BF16;
    if (!a->bad[0] && bench_parse_dtype(dtype, &dt)) require(a, 0, "--dtype must be bf16, f16 or f32");
    if (a->bad[0]) return usage_error(a);
    o.quiet = a->quiet;
    Error err;
    if (bench_report(a->dir, random, dt, precision, &o, a->json, stdout, &err)) return bad_input(a, err.msg);
    return EXIT_OK;
}

static int cmd_schemes(Args *a) {
    (void)a;
    print_scheme_list(stdout);
    return EXIT_OK;
}

static void print_usage(FILE *f);

static int cmd_help(Args *a) {
    (void)a;
    print_usage(stdout);
    return EXIT_OK;
}

/* --- The commands ----------------------------------------------------------------------- */

/* In the order of ./run --help. */
static const Command COMMANDS[] = {
    {{"generate"}, cmd_generate, TAKES_DIR | TAKES_KV_SCHEME | TAKES_CALIB, &HELP_GENERATE},
    {{"logits"}, cmd_logits, TAKES_DIR | TAKES_KV_SCHEME | TAKES_CALIB, &HELP_LOGITS},
    {{"tokenize"}, cmd_tokenize, TAKES_DIR, &HELP_TOKENIZE},
    {{"ppl"}, cmd_ppl, TAKES_EVAL_RUN | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB, &HELP_PPL},
    {{"ppl-merge"}, cmd_ppl_merge, 0, &HELP_PPL_MERGE},
    {{"sweep"}, cmd_sweep, TAKES_EVAL_RUN | TAKES_CALIB, &HELP_SWEEP},
    {{"probe"}, cmd_probe,
     TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB, &HELP_PROBE},
    {{"sweep-merge"}, cmd_sweep_merge, TAKES_JSON, &HELP_SWEEP_MERGE},
    {{"sensitivity"}, cmd_sensitivity, TAKES_EVAL_RUN | TAKES_CALIB, &HELP_SENSITIVITY},
    {{"allocate"}, cmd_allocate, TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_CALIB, &HELP_ALLOCATE},
    {{"frontier"}, cmd_frontier, TAKES_EVAL_RUN | TAKES_CALIB, &HELP_FRONTIER},
    {{"kv-extract"}, cmd_kv_extract, TAKES_DIR, &HELP_KV_EXTRACT},
    {{"kv-info"}, cmd_kv_info, TAKES_DIR | TAKES_JSON | TAKES_CALIB, &HELP_KV_INFO},
    {{"compress"}, cmd_compress, TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB, &HELP_COMPRESS},
    {{"decompress"}, cmd_decompress, TAKES_CALIB, &HELP_DECOMPRESS},
    {{"--quick-test", "-quick-test"}, cmd_quick_test, 0, &HELP_QUICK_TEST},
    {{"calibrate"}, cmd_calibrate, TAKES_DIR | TAKES_QUIET, &HELP_CALIBRATE},
    {{"schemes"}, cmd_schemes, 0, &HELP_SCHEMES},
    {{"bench"}, cmd_bench, TAKES_DIR | TAKES_JSON | TAKES_QUIET, &HELP_BENCH},
    /* main() answers --help anywhere on the line before it looks for a command */
    {{"--help", "-help", "help"}, cmd_help, 0, &HELP_HELP},
    {{"--validate", "-validate", "validate"}, cmd_validate,
     TAKES_JSON | TAKES_QUIET | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_WINDOW | TAKES_CALIB, &HELP_VALIDATE},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void print_usage(FILE *f) {
    fputs(HELP_OVERVIEW_TOP, f);
    for (int i = 0; i < N_COMMANDS; i++) fputs(COMMANDS[i].help->usage, f);
    fputs(HELP_OVERVIEW_END, f);
}

static const Command *find_command(const char *name) { return command_find(COMMANDS, N_COMMANDS, name); }

/* One line, with a guess when the name is near one: "unknown command 'pll'; did you mean 'ppl'?" */
static int unknown_command(const char *typed) {
    const char *guess = command_nearest(COMMANDS, N_COMMANDS, typed);
    char msg[400];
    snprintf(msg, sizeof msg, "unknown command '%.256s'%s%s%s (./run --help lists the commands)", typed,
             guess ? "; did you mean '" : "", guess ? guess : "", guess ? "'?" : "");
    print_error("run", msg, "");
    return EXIT_BAD_INPUT;
}

/* "--help", "-help" or "-h" anywhere on the line, or "help" first. (A prompt or path spelled
 * "--help" cannot be given.) */
static int asks_for_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help") || !strcmp(argv[i], "-h")) return 1;
    return !strcmp(argv[1], "help");
}

/* The help asked for: "./run ppl --help" and "./run help ppl" give ppl's, the rest the overview. */
static int print_help(int argc, char **argv) {
    const Command *c = find_command(argv[1]);
    if (c && c->run == cmd_help) c = argc > 2 ? find_command(argv[2]) : NULL;
    if (c) fprintf(stdout, "%s%s", c->help->help, HELP_PAGE_END);
    else print_usage(stdout);
    return EXIT_OK;
}

/* OpenMP's idle threads spin before they sleep; on cores that other processes share, a spinning
 * thread takes a core from the thread everyone waits for. A brief spin, then sleep, is as fast as
 * either extreme where each is best (measured in model/kernels/README.md, "A shared machine").
 * libgomp reads the variable once, before main, so it is set and the program started again: same
 * pid, same binary (/proc/self/exe, even if ./run was replaced meanwhile). Where that exec fails
 * (no /proc), the run goes on with libgomp's default. A user's own OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT is kept. */
#define SPIN_ROUNDS_BEFORE_SLEEP "10000"
static void wait_briefly(char **argv) {
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", SPIN_ROUNDS_BEFORE_SLEEP, 1) != 0) return;
    execv("/proc/self/exe", argv);    /* returns only when it failed: go on as started */
#else
    (void)argv;
#endif
}

int main(int argc, char **argv) {
    wait_briefly(argv);
    if (argc < 2) { print_usage(stderr); return EXIT_BAD_INPUT; }
    if (asks_for_help(argc, argv)) return print_help(argc, argv);
    const Command *c = find_command(argv[1]);
    if (!c) return unknown_command(argv[1]);
    Args a = {.argc = argc, .argv = argv, .i = 2, .takes = c->takes};
    a.e = (EvalFlags){.text_file = "data/wikitext-2-raw/wiki.test.raw", .protocol = "hf", .precision = "exact",
                      .stride = 0, .batch = 512, .shard_n = 1};   /* stride 0: min(512, ctx) */
    a.cmd = c->names[0] + strspn(c->names[0], "-");   /* "validate" for --validate, in messages */
    return c->run(&a);
}
