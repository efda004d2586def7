/* run.c: kvq's command line: flags, dispatch, printing and exit codes (0 ok, 1 a quality check
 * failed, 2 bad input or usage). The work is done below, in eval/ and model/.
 *
 * COMMANDS, at the bottom, is the list of commands: their names, the function that runs each,
 * the shared flags it takes, its lines of ./run --help and its own ./run COMMAND --help. The shared flags (MODEL_DIR, --json,
 * --quiet, the scheme flags, the evaluation window) are parsed in one place, shared_flag();
 * each cmd_* function reads its own flags, calls into eval/ and prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

#include "eval/report.h"
#include "eval/sweep.h"
#include "eval/sensitivity.h"
#include "eval/allocate.h"
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

/* --- Flags: "-name value", "--name value" and "--name=value" are all accepted --------------- */

/* The shared flags, each command taking some (Command.takes). */
enum {
    TAKES_DIR = 1 << 0,         /* one argument without a dash: MODEL_DIR (kv-info: FILE) */
    TAKES_JSON = 1 << 1,        /* --json */
    TAKES_QUIET = 1 << 2,       /* --quiet */
    TAKES_KV_SCHEME = 1 << 3,   /* --kv-scheme S: keys and values */
    TAKES_KV_SIDES = 1 << 4,    /* --k-scheme S, --v-scheme S: one side each, over --kv-scheme */
    TAKES_WINDOW = 1 << 5,      /* --text-file F, --ctx N, --stride N */
    TAKES_EVAL = 1 << 6,        /* --windows, --max-tokens, --protocol, --shard, --batch, --precision */
    TAKES_CALIB = 1 << 7,       /* --calib FILE: the tables of fitted bases (./run calibrate) */
    TAKES_EVAL_RUN = TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_WINDOW | TAKES_EVAL,   /* ppl's and sweep's */
};

/* The evaluation flags' values (TAKES_WINDOW, TAKES_EVAL). */
typedef struct {
    const char *text_file, *protocol, *precision;
    int ctx, stride, windows, max_tokens, batch, shard_i, shard_n;
} EvalFlags;

typedef struct {
    int argc;
    char **argv;
    int i;                      /* next argument to read */
    const char *value;          /* value of the last matched flag */
    const char *typed;          /* that flag as typed ("-t", "--temperature"), for messages */
    int typed_len;              /* its length, without any "=value" */
    char bad[256];              /* the usage error */
    const char *cmd;            /* the command's name in messages ("validate" for --validate) */
    unsigned takes;             /* TAKES_* */
    const char *dir;            /* the shared flags' values */
    int json, quiet;
    const char *kv_scheme, *k_scheme, *v_scheme;   /* as given; NULL when not */
    const char *calib;          /* --calib FILE; NULL: MODEL_DIR's kv-calib.safetensors, if any */
    EvalFlags e;
} Args;

/* 1 if argv[i] is the flag `name` (a long name without dashes); takes its value if needed. */
static int flag(Args *a, const char *name, int takes_value) {
    const char *s = a->argv[a->i];
    if (s[0] != '-') return 0;
    s += (s[1] == '-') ? 2 : 1;
    size_t n = strlen(name);
    if (strncmp(s, name, n) != 0 || (s[n] != 0 && s[n] != '=')) return 0;
    a->typed = a->argv[a->i];
    a->typed_len = (int)(s + n - a->typed);
    a->i++;
    if (!takes_value) {
        if (s[n] == '=') snprintf(a->bad, sizeof a->bad, "flag %.*s takes no value", a->typed_len, a->typed);
    } else if (s[n] == '=') {
        a->value = s + n + 1;
    } else if (a->i < a->argc) {
        a->value = a->argv[a->i++];
    } else {
        snprintf(a->bad, sizeof a->bad, "flag %.*s needs a value", a->typed_len, a->typed);
        a->value = "";
    }
    return 1;
}

/* The value parsers read the last matched flag's value; they replace flag()'s "needs a value"
 * with their own error about "". Messages name the flag as it was typed. */
static void parse_int(Args *a, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(a->value, &end, 10);
    if (errno || end == a->value || *end || v < lo || v > hi)
        snprintf(a->bad, sizeof a->bad, "%.*s: expected an integer in [%d, %d], got '%s'", a->typed_len, a->typed, lo, hi,
                 a->value);
    else *out = (int)v;
}

static void parse_float(Args *a, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(a->value, &end);
    if (errno || end == a->value || *end || !(v >= lo && v <= hi))
        snprintf(a->bad, sizeof a->bad, "%.*s: expected a number in [%g, %g], got '%s'", a->typed_len, a->typed, lo, hi,
                 a->value);
    else *out = v;
}

static void parse_shard(Args *a, int *index, int *count) {
    char extra;
    if (sscanf(a->value, "%d/%d%c", index, count, &extra) != 2 || *count < 1 || *index < 0 || *index >= *count)
        snprintf(a->bad, sizeof a->bad, "--shard: expected I/N with 0 <= I < N, got '%s'", a->value);
}

/* A LAYERED scheme (quant/scheme.h); a syntax error is a usage error. Checks against the model
 * (head_dim, layers) come when the cache is made, as a bad-input error naming the part. */
static int parse_scheme(Args *a, const char *text, KvSide side, KvLayered *out) {
    char why[160];
    if (kv_layered_parse(text, side, out, why, sizeof why) == 0) return 0;
    snprintf(a->bad, sizeof a->bad, "KV scheme '%.60s': %.160s", text, why);
    return -1;
}

/* A library call's failure on a flag's value, as the usage error. */
static void take_error(Args *a, int rc, const Error *err) {
    if (rc) snprintf(a->bad, sizeof a->bad, "%.255s", err->msg);   /* bad holds 256 */
}

static void unknown_arg(Args *a) {
    if (!a->bad[0]) snprintf(a->bad, sizeof a->bad, "unknown argument '%s'", a->argv[a->i]);
    a->i++;
}

/* The checks after the flags: the first error found is the one reported. */
static void require(Args *a, int ok, const char *msg) {
    if (!ok && !a->bad[0]) snprintf(a->bad, sizeof a->bad, "%s", msg);
}

/* "--precision must be exact or bf16" unless value is one of the two. */
static void one_of(Args *a, const char *flag_name, const char *value, const char *first, const char *second) {
    if (!a->bad[0] && strcmp(value, first) && strcmp(value, second))
        snprintf(a->bad, sizeof a->bad, "--%s must be %s or %s", flag_name, first, second);
}

/* Takes argv[a->i] if it is a shared flag the command takes, or its MODEL_DIR; 0 leaves it. */
static int shared_flag(Args *a) {
    unsigned t = a->takes;
    EvalFlags *e = &a->e;
    if ((t & TAKES_DIR) && a->argv[a->i][0] != '-' && !a->dir) a->dir = a->argv[a->i++];
    else if ((t & TAKES_JSON) && flag(a, "json", 0)) a->json = 1;
    else if ((t & TAKES_QUIET) && flag(a, "quiet", 0)) a->quiet = 1;
    else if ((t & TAKES_KV_SCHEME) && flag(a, "kv-scheme", 1)) a->kv_scheme = a->value;
    else if ((t & TAKES_KV_SIDES) && flag(a, "k-scheme", 1)) a->k_scheme = a->value;
    else if ((t & TAKES_KV_SIDES) && flag(a, "v-scheme", 1)) a->v_scheme = a->value;
    else if ((t & TAKES_CALIB) && flag(a, "calib", 1)) a->calib = a->value;
    else if ((t & TAKES_WINDOW) && flag(a, "text-file", 1)) e->text_file = a->value;
    else if ((t & TAKES_WINDOW) && flag(a, "ctx", 1)) parse_int(a, 2, 1 << 20, &e->ctx);
    else if ((t & TAKES_WINDOW) && flag(a, "stride", 1)) parse_int(a, 1, 1 << 20, &e->stride);
    else if ((t & TAKES_EVAL) && flag(a, "windows", 1)) parse_int(a, 1, 1 << 30, &e->windows);
    else if ((t & TAKES_EVAL) && flag(a, "max-tokens", 1)) parse_int(a, 2, 1 << 30, &e->max_tokens);
    else if ((t & TAKES_EVAL) && flag(a, "protocol", 1)) e->protocol = a->value;
    else if ((t & TAKES_EVAL) && flag(a, "shard", 1)) parse_shard(a, &e->shard_i, &e->shard_n);
    else if ((t & TAKES_EVAL) && flag(a, "batch", 1)) parse_int(a, 1, 4096, &e->batch);
    else if ((t & TAKES_EVAL) && flag(a, "precision", 1)) e->precision = a->value;
    else return 0;
    return 1;
}

/* Reads past the shared flags: 1 while an argument is left for the command's own flags, 0 at
 * the end or at the first error. */
static int next_arg(Args *a) {
    while (a->i < a->argc && !a->bad[0])
        if (!shared_flag(a)) return 1;
    return 0;
}

/* The shared flags' checks, after the command's own: --protocol and --precision, then the
 * schemes of keys (k) and values (v; NULL for one scheme), default_scheme for a side no flag
 * names. 1 when there is a usage error. */
static int check_args(Args *a, const char *default_scheme, KvLayered *k, KvLayered *v) {
    if (a->takes & TAKES_EVAL) {
        one_of(a, "protocol", a->e.protocol, "hf", "llamacpp");
        one_of(a, "precision", a->e.precision, "exact", "bf16");
    }
    const char *both = a->kv_scheme ? a->kv_scheme : default_scheme;
    if (!a->bad[0] && k) parse_scheme(a, a->k_scheme ? a->k_scheme : both, KV_SIDE_KEYS, k);
    if (!a->bad[0] && v) parse_scheme(a, a->v_scheme ? a->v_scheme : both, KV_SIDE_VALUES, v);
    return a->bad[0] != 0;
}

/* check_args for a command with one cache, and its --calib: what eval/calibration.h resolves. */
static int check_kv_args(Args *a, const char *default_scheme, KvCacheFlags *kv) {
    kv->calib_path = a->calib;
    return check_args(a, default_scheme, &kv->k, &kv->v);
}

/* The length of the UTF-8 sequence at s (n bytes left) that a terminal shows as a character: 2 to
 * 4 for a valid sequence (no overlong form, surrogate or C1 control U+0080..U+009F, which some
 * terminals obey as commands), else 0. */
static int shown_sequence(const unsigned char *s, size_t n) {
    int len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    unsigned cp = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    int overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp < 0xA0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
    return len;
}

/* An error message on one line, whatever the strings in it hold (a path or a --config with a
 * newline or an ESC, a file's text): control bytes, DEL, C1 controls and bytes that are not
 * UTF-8 are written as \n, \t, \r or \xHH, the rest as it is. */
static void put_escaped(FILE *f, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        int len = s[i] >= 0x80 ? shown_sequence(s + i, n - i) : 1;
        if (len > 1) {
            fwrite(s + i, 1, (size_t)len, f);
            i += (size_t)len;
            continue;
        }
        unsigned char c = s[i++];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c >= 0x7F) fprintf(f, "\\x%02X", c);
        else fputc(c, f);
    }
}

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

/* "64,128,256" into out[0..max): each in [lo, hi]; *n set. */
static void parse_int_list(Args *a, int lo, int hi, int *out, int max, int *n) {
    const char *p = a->value;
    *n = 0;
    while (!a->bad[0]) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < lo || v > hi || *n == max || (*end && *end != ',')) {
            snprintf(a->bad, sizeof a->bad, "%.*s: expected up to %d integers in [%d, %d], comma-separated, got '%.100s'",
                     a->typed_len, a->typed, max, lo, hi, a->value);
            return;
        }
        out[(*n)++] = (int)v;
        if (!*end) return;
        p = end + 1;
    }
}

/* ./run probe --help (its row of COMMANDS points here: the text is long). */
static const char PROBE_HELP[] =
    "usage: ./run probe MODEL_DIR --task copy|passkey|diverge [flags]\n"
    "\n"
    "What a quantized KV cache breaks that perplexity hides, on seeded inputs, the fp32 cache first:\n"
    "  copy      BOS, S random word pieces, the same S again: top-1 accuracy and mean NLL on the\n"
    "            second copy from its second token on (only reading the first copy back predicts\n"
    "            it), per S, with binomial standard errors, and agreement with the fp32 cache\n"
    "  passkey   a 5-digit number buried at a depth of 0..100% of filler from wiki.valid (the\n"
    "            calibration split), the question at the end, the digits decoded greedily: exact\n"
    "            matches per length and depth (meaningful only where fp32 passes: said first)\n"
    "  diverge   prompts from wiki.test, M tokens generated greedily: tokens until the first that\n"
    "            differs from the fp32 cache's continuation, and the share identical\n"
    "\n"
    "flags (default):\n"
    "  --task T                  copy, passkey or diverge (required)\n"
    "  --kv-scheme S             the cache's scheme, keys and values (fp32; ./run schemes)\n"
    "  --k-scheme S              keys only, over --kv-scheme (--kv-scheme)\n"
    "  --v-scheme S              values only, over --kv-scheme (--kv-scheme)\n"
    "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
    "  --ctx N                   the longest input (the model's context)\n"
    "  --sequences N             copy: sequences per S (8); passkey: trials per cell (4);\n"
    "                            diverge: prompts (16)\n"
    "  --seed N                  the inputs' seed (42)\n"
    "  --lengths L,L,...         copy: S (64, 128, ... up to ctx/2); passkey: prompt tokens in all\n"
    "                            (256, 512, ... and ctx - 8)\n"
    "  --depths D,D,...          passkey: depths in percent (0,25,50,75,100)\n"
    "  --prompt-tokens P         diverge: prompt tokens after BOS (64, or (ctx - 1)/2 when less)\n"
    "  --new-tokens M            diverge: tokens generated (64, or what ctx leaves)\n"
    "  --text-file F             passkey's filler (data/wikitext-2-raw/wiki.valid.raw), diverge's\n"
    "                            prompts (data/wikitext-2-raw/wiki.test.raw)\n"
    "  --batch N                 positions a forward pass (512)\n"
    "  --json                    the counts and figures as JSON\n"
    "  --quiet                   accepted for symmetry with ppl (the probe prints no progress)\n"
    "\n"
    "examples:\n"
    "  ./run probe data/models/mini-llama-brown --task copy --kv-scheme int2-g64\n"
    "  ./run probe data/models/mini-llama-brown --task passkey --kv-scheme q4_0 --sequences 2\n"
    "  ./run probe data/models/mini-llama-brown-outliers --task diverge --kv-scheme int3-g64+had --json\n"
    "\n"
    "On every configuration of a sweep: ./run sweep ... --probe TASK (./run sweep --help).\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n";

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
    const char *out_dir = NULL, *candidates = NULL;
    SensGrid g = {0};
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return bad_input(a, "out of memory");
    Error err;
    a->e.text_file = SENS_DEFAULT_TEXT;   /* the calibration split: a choice made from it is judged on test */
    while (next_arg(a)) {
        if (flag(a, "candidates", 1)) take_error(a, sens_parse_candidates(candidates = a->value, &g, &err), &err);
        else if (flag(a, "out-dir", 1)) out_dir = a->value;
        else unknown_arg(a);
    }
    require(a, a->dir != NULL, "missing MODEL_DIR");
    require(a, candidates != NULL, "missing --candidates SPEC,SPEC,... (the schemes to try in each layer)");
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
    SweepSettings s;
    SweepTotals t = {0};
    Error err;
    if (a->bad[0]) usage_error(a);
    else if (sweep_merge(dirs, n, &s, &t, &err)) bad_input(a, err.msg);
    else {
        rc = sens_or_sweep_finish(stdout, out_dir, &s, &t, a->json, &err) ? bad_input(a, err.msg) : EXIT_OK;
        free(s.configs);
    }
    sweep_totals_free(&t);
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
    KvCacheFlags kv;
    KvCacheRecipe recipe;
    int n_mismatches;
    kv_cache_flags_default(&kv, a->calib);
    if (kv_cache_recipe_resolve(&recipe, &kv, 0, NULL, NULL, NULL, &err)) return bad_input(a, err.msg);
    int rc = kv_info(stdout, a->dir, model, recipe.scheme.calib, a->json, &n_mismatches, &err);
    kv_cache_recipe_free(&recipe);
    if (rc) return bad_input(a, err.msg);
    return n_mismatches > 0 ? EXIT_QUALITY : EXIT_OK;
}

/* "--scheme int4 -group-size 64" -> "int4-g64" (the seed's flags); any other spelling is kept. */
static void compose_scheme(const char *scheme, int group, char *name, size_t n) {
    const char *asym = strstr(scheme, "-asym");
    size_t stem = asym ? (size_t)(asym - scheme) : strlen(scheme);
    int plain_int = !strncmp(scheme, "int", 3) && strspn(scheme + 3, "0123456789") == stem - 3 && stem > 3;
    if (plain_int) snprintf(name, n, "%.*s-g%d%s", (int)stem, scheme, group, asym ? "-asym" : "");
    else snprintf(name, n, "%.63s", scheme);
}

static int cmd_compress(Args *a) {
    const char *input = NULL, *output = NULL, *scheme = "int4";
    int group = 64, lz4 = 0, metrics_only = 0, verbose = 0;
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
    KvCacheFlags kv;
    compose_scheme(scheme, group, composed, sizeof composed);
    if (!a->bad[0]) parse_scheme(a, a->kv_scheme ? a->kv_scheme : composed, KV_SIDE_KEYS, &kv.k);
    if (check_kv_args(a, composed, &kv)) return usage_error(a);
    Error err;
    KvCacheRecipe recipe;
    KvSnapshot snap;
    int passed;
    if (kv_cache_recipe_resolve(&recipe, &kv, 0, NULL, NULL, NULL, &err)) return bad_input(a, err.msg);
    const KvCacheScheme *cs = &recipe.scheme;
    CompressOptions o = {&cs->k, &cs->v, sparsity, lz4, rmse, snr, cosine, cs->calib};
    if (kv_snapshot_load(input, &snap, &err)) {
        kv_cache_recipe_free(&recipe);
        return bad_input(a, err.msg);
    }
    int rc = kv_compress_print(&snap, &o, metrics_only ? NULL : output, stdout, verbose ? stderr : NULL, &passed, &err);
    kv_snapshot_free(&snap);
    kv_cache_recipe_free(&recipe);
    if (rc) {
        char where[4200];
        snprintf(where, sizeof where, "compress: %s", input);
        print_error(where, err.msg, "");
    }
    return rc ? EXIT_BAD_INPUT : passed ? EXIT_OK : EXIT_QUALITY;
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
    KvCacheFlags kv;
    KvCacheRecipe recipe;
    kv_cache_flags_default(&kv, a->calib);
    if (kv_cache_recipe_resolve(&recipe, &kv, 0, NULL, NULL, NULL, &err)) return bad_input(a, err.msg);
    int rc = kv_decompress_to(in, recipe.scheme.calib, out, &err);
    kv_cache_recipe_free(&recipe);
    return rc ? bad_input(a, err.msg) : EXIT_OK;
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
    FILE *out = o.quiet ? NULL : a->json ? stderr : stdout;
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
            if (o.n_fits == CALIB_MAX_FITS) require(a, 0, "more --fit than calibrate takes (32)");
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

typedef struct {
    const char *names[3];       /* its name, then other spellings */
    int (*run)(Args *a);
    unsigned takes;             /* the shared flags it takes (TAKES_*) */
    const char *usage;          /* its lines of ./run --help */
    const char *help;           /* ./run COMMAND --help: synopsis, every flag it takes with its default,
                                   examples, exit codes (tests/test_cli_help.sh: every flag its parser
                                   takes, its own and the shared ones, is named here) */
} Command;

/* In the order of ./run --help. */
static const Command COMMANDS[] = {
    {{"generate"}, cmd_generate, TAKES_DIR | TAKES_KV_SCHEME | TAKES_CALIB,
     "  generate MODEL_DIR [-i prompt] [-n steps] [-t temp] [-p top_p] [-s seed] [--chat]\n"
     "           [--kv-scheme S] [--calib FILE]  stream text; -n counts all positions incl. the prompt\n",
     "usage: ./run generate MODEL_DIR [flags]\n"
     "\n"
     "Streams text from the model to stdout, the KV cache quantized as it is written.\n"
     "\n"
     "flags (default):\n"
     "  -i, --prompt TEXT         the prompt (empty: starts from BOS)\n"
     "  -n, --steps N             positions in all, the prompt's included (256)\n"
     "  -t, --temperature T       0: greedy, always the most likely token (1.0)\n"
     "  -p, --top-p P             nucleus sampling: the fewest tokens with probability P (0.9)\n"
     "  -s, --seed N              the sampler's seed (the current time)\n"
     "  --chat                    wrap the prompt in TinyLlama-Chat's template (off)\n"
     "  --kv-scheme S             the KV cache's scheme, keys and values (fp32; ./run schemes)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "\n"
     "examples:\n"
     "  ./run generate data/models/mini-llama-brown -i \"The jury said\" -n 64 -t 0.8\n"
     "  ./run generate models/tinyllama --chat -i \"What is a KV cache?\" -n 256\n"
     "  ./run generate data/models/mini-llama-brown -i \"The jury\" -t 0 --kv-scheme int2-g64+had\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"logits"}, cmd_logits, TAKES_DIR | TAKES_KV_SCHEME | TAKES_CALIB,
     "  logits MODEL_DIR --tokens 1,450,4996 [--out FILE] [--kv-scheme S] [--calib FILE]\n"
     "                                  logits of every position (float32 [T, vocab] to FILE)\n",
     "usage: ./run logits MODEL_DIR --tokens IDS [flags]\n"
     "\n"
     "Runs token ids through the model and prints each position's top 5 ids, or writes every\n"
     "position's logits as raw little-endian float32 [T, vocab] to a file.\n"
     "\n"
     "flags (default):\n"
     "  --tokens IDS              comma-separated token ids, e.g. 1,450,4996 (required)\n"
     "  -o, --out FILE            write the logits there instead of printing the top 5 (none)\n"
     "  --kv-scheme S             the KV cache's scheme, keys and values (fp32; ./run schemes)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "\n"
     "examples:\n"
     "  ./run logits data/models/stories260K --tokens 1,450,4996\n"
     "  ./run logits data/models/mini-llama-brown --tokens 1,450,4996 --out logits.f32\n"
     "  ./run logits data/models/mini-llama-brown --tokens 1,450,4996 --kv-scheme int4-g64\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage (an id outside the vocabulary too)\n"},
    {{"tokenize"}, cmd_tokenize, TAKES_DIR,
     "  tokenize MODEL_DIR (--text STR | --text-file FILE) [--bos]\n"
     "                                  print token ids\n",
     "usage: ./run tokenize MODEL_DIR (--text STR | --text-file FILE) [--bos]\n"
     "\n"
     "Prints the token ids of a text, as the model's tokenizer.bin encodes it.\n"
     "\n"
     "flags (default):\n"
     "  --text STR                the text (one of --text, --text-file is required)\n"
     "  --text-file FILE          the text, from a file\n"
     "  --bos                     begin with the BOS id (off)\n"
     "\n"
     "examples:\n"
     "  ./run tokenize data/models/mini-llama-brown --text \"The jury said\"\n"
     "  ./run tokenize data/models/mini-llama-brown --text \"The jury said\" --bos\n"
     "  ./run tokenize data/models/stories260K --text-file notes.txt\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"ppl"}, cmd_ppl, TAKES_EVAL_RUN | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB,
     "  ppl MODEL_DIR [--text-file F] [--ctx N] [--stride N] [--windows N] [--max-tokens N]\n"
     "           [--kv-scheme S | --k-scheme S --v-scheme S] [--protocol hf|llamacpp]\n"
     "           [--shard I/N] [--batch N] [--no-compare] [--no-layer-error] [--precision exact|bf16]\n"
     "           [--calib FILE] [--quiet] [--json]\n"
     "                                  perplexity with the KV cache quantized as it is written\n"
     "                                  (default text: WikiText-2 test; compared with an fp32 cache:\n"
     "                                  KL, top-1, by position, each layer's attention error;\n"
     "                                  --ctx: the model's context, --stride: min(512, ctx))\n",
     "usage: ./run ppl MODEL_DIR [flags]\n"
     "\n"
     "Perplexity on a text with the KV cache quantized as it is written, and, for a quantized cache,\n"
     "the same windows with an fp32 cache beside it: delta ppl with its paired standard error, KL\n"
     "divergence and top-1 agreement per token, by position in the window, and each layer's\n"
     "attention-output error on the fp32 run's inputs.\n"
     "\n"
     "flags (default):\n"
     "  --kv-scheme S             the cache's scheme, keys and values (fp32; ./run schemes)\n"
     "  --k-scheme S              keys only, over --kv-scheme (--kv-scheme)\n"
     "  --v-scheme S              values only, over --kv-scheme (--kv-scheme)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
     "  --ctx N                   tokens a window (the model's context)\n"
     "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
     "  --windows N               the first N windows (all)\n"
     "  --max-tokens N            the text's first N tokens (all)\n"
     "  --protocol P              hf: sliding windows; llamacpp: llama-perplexity's chunks (hf)\n"
     "  --shard I/N               windows I, I+N, ...; add the --json files with ppl-merge (0/1)\n"
     "  --batch N                 positions a forward pass (512)\n"
     "  --precision P             exact: f32 matmuls; bf16: bf16 products, faster (exact)\n"
     "  --no-compare              no fp32 run beside a quantized one (compared)\n"
     "  --no-layer-error          no per-layer attention error (on: about 18% of a compared run)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "  --json                    the report as JSON, its sums included (text)\n"
     "\n"
     "examples:\n"
     "  ./run ppl data/models/mini-llama-brown --windows 4 --kv-scheme int4-g64\n"
     "  ./run ppl data/models/mini-llama-brown --k-scheme int8-g64 --v-scheme int4-g64\n"
     "  ./run ppl data/models/stories260K --protocol llamacpp --ctx 128\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"ppl-merge"}, cmd_ppl_merge, 0,
     "  ppl-merge SHARD.json...         add up the --json outputs of --shard runs\n",
     "usage: ./run ppl-merge SHARD.json... [--json]\n"
     "\n"
     "Adds up the --json outputs of ./run ppl --shard I/N runs (every shard of one evaluation, once)\n"
     "into the report of the whole run.\n"
     "\n"
     "flags (default):\n"
     "  --json                    the report as JSON (text)\n"
     "\n"
     "examples:\n"
     "  ./run ppl-merge shard0.json shard1.json\n"
     "  ./run ppl-merge shards/*.json --json > whole.json\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage (a missing, repeated or foreign shard too)\n"},
    {{"sweep"}, cmd_sweep, TAKES_EVAL_RUN | TAKES_CALIB,
     "  sweep MODEL_DIR (--config K[:V] ... | --configs FILE) --out-dir DIR [ppl's window flags]\n"
     "           [--no-layer-error] [--probe copy|passkey|diverge ...] [--probe-sequences N]\n"
     "                                  many KV-cache configurations over the same windows, each\n"
     "                                  window's fp32 baseline once; resumable; table, CSV, JSON, SVG\n"
     "                                  (KL by position, per-layer error); --probe: ./run probe's\n"
     "                                  task on every configuration at the sweep's ctx (probe-TASK.*)\n",
     "usage: ./run sweep MODEL_DIR (--config K[:V] ... | --configs FILE) --out-dir DIR [flags]\n"
     "\n"
     "Many KV-cache configurations over the same windows, each window's fp32 baseline run once.\n"
     "Every result goes to DIR/journal.jsonl as it is made: run the same line again to resume.\n"
     "Writes DIR/results.md, results.csv, results.json, chart.svg, position.svg and layers.svg.\n"
     "\n"
     "flags (default):\n"
     "  --config K[:V]            a configuration: scheme K for keys, V for values (V = K); repeatable\n"
     "  --configs FILE            one configuration a line, # comments\n"
     "  --out-dir DIR             the journal and the results (required)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
     "  --ctx N                   tokens a window (the model's context)\n"
     "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
     "  --windows N               the first N windows (all)\n"
     "  --max-tokens N            the text's first N tokens (all)\n"
     "  --protocol P              hf: sliding windows; llamacpp: llama-perplexity's chunks (hf)\n"
     "  --shard I/N               windows I, I+N, ... into this DIR; sweep-merge puts them together (0/1)\n"
     "  --batch N                 positions a forward pass (512)\n"
     "  --precision P             exact: f32 matmuls; bf16: bf16 products, faster (exact)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "  --json                    print results.json instead of the table (table)\n"
     "  --no-layer-error          no per-layer attention error (on: about 18% of a sweep)\n"
     "  --probe TASK              also ./run probe's copy, passkey or diverge on every configuration\n"
     "                            at the sweep's ctx, into probe-TASK.md/.csv/.json; repeatable\n"
     "  --probe-sequences N       the probes' --sequences (each task's own default)\n"
     "\n"
     "examples:\n"
     "  ./run sweep data/models/mini-llama-brown --config int4-g64 --config tq3 --windows 4 --out-dir sw\n"
     "  ./run sweep data/models/mini-llama-brown-outliers --configs data/sweeps/configs.txt --out-dir sw\n"
     "  ./run sweep data/models/mini-llama-brown --configs data/sweeps/configs.txt --shard 0/2 --out-dir s0\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage (other arguments than a journal's, on resume, too)\n"},
    {{"probe"}, cmd_probe, TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB,
     "  probe MODEL_DIR --task copy|passkey|diverge [--kv-scheme S | --k-scheme S --v-scheme S]\n"
     "           [--ctx N] [--sequences N] [--seed N] [--lengths L,...] [--depths D,...]\n"
     "           [--prompt-tokens P] [--new-tokens M] [--text-file F] [--calib FILE] [--json]\n"
     "                                  retrieval and generation beside perplexity: copy (induction\n"
     "                                  over S tokens), passkey, greedy divergence; fp32 cache first\n",
     PROBE_HELP},
    {{"sweep-merge"}, cmd_sweep_merge, TAKES_JSON,
     "  sweep-merge DIR... --out-dir OUT [--json]  put together the shards of a sweep (--shard I/N)\n"
     "                                  (of a sensitivity too: its report with them)\n",
     "usage: ./run sweep-merge DIR... --out-dir OUT [--json]\n"
     "\n"
     "Puts together the --out-dir directories of a sweep's (or a sensitivity's) --shard I/N runs:\n"
     "their journals, every shard once, into OUT's results (and a sensitivity's report).\n"
     "\n"
     "flags (default):\n"
     "  --out-dir OUT             where the merged results go (required)\n"
     "  --json                    print results.json instead of the table (table)\n"
     "\n"
     "examples:\n"
     "  ./run sweep-merge s0 s1 --out-dir sw\n"
     "  ./run sweep-merge shards/* --out-dir sw --json\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage (a missing, repeated or foreign shard too)\n"},
    {{"sensitivity"}, cmd_sensitivity, TAKES_EVAL_RUN | TAKES_CALIB,
     "  sensitivity MODEL_DIR --candidates SPEC,SPEC,... --out-dir DIR [ppl's window flags] [--calib FILE]\n"
     "                                  per layer and side, the damage of each candidate there alone\n"
     "                                  (the rest fp32): a sweep of 2 x layers x candidates configurations\n"
     "                                  (resumable, --shard); default text: wiki.valid (calibration split);\n"
     "                                  table, CSV, JSON, SVG heatmap\n",
     "usage: ./run sensitivity MODEL_DIR --candidates SPEC,SPEC,... --out-dir DIR [flags]\n"
     "\n"
     "Per layer and side (keys, values), the damage of each candidate scheme there alone, the rest\n"
     "fp32: a sweep of 2 x layers x candidates configurations (journal, resumable, --shard). Writes\n"
     "DIR/sensitivity.md, .csv, .json and a heatmap, sensitivity.svg; ./run allocate reads them.\n"
     "\n"
     "flags (default):\n"
     "  --candidates SPEC,...     the schemes to try in each layer (required)\n"
     "  --out-dir DIR             the journal and the report (required)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --text-file F             the text (data/wikitext-2-raw/wiki.valid.raw, the calibration split)\n"
     "  --ctx N                   tokens a window (the model's context)\n"
     "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
     "  --windows N               the first N windows (all)\n"
     "  --max-tokens N            the text's first N tokens (all)\n"
     "  --protocol P              hf: sliding windows; llamacpp: llama-perplexity's chunks (hf)\n"
     "  --shard I/N               windows I, I+N, ... into this DIR; sweep-merge puts them together (0/1)\n"
     "  --batch N                 positions a forward pass (512)\n"
     "  --precision P             exact: f32 matmuls; bf16: bf16 products, faster (exact)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "  --json                    print sensitivity.json instead of the table (table)\n"
     "\n"
     "examples:\n"
     "  ./run sensitivity data/models/mini-llama-brown --candidates tq2,nuq3-g64,q8_0 --windows 4 \\\n"
     "        --ctx 1024 --out-dir sens\n"
     "  ./run sensitivity data/models/mini-llama-brown --candidates int2-g64+had,int4-g64 --out-dir s \\\n"
     "        --shard 1/4\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"allocate"}, cmd_allocate, TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_CALIB,
     "  allocate MODEL_DIR --from SENSITIVITY_DIR --budget BITS[,BITS...] [--candidates SPEC,...]\n"
     "           [--verify --out-dir DIR [--text-file F] [--windows N] [--max-tokens N] [--batch N]\n"
     "           [--calib FILE]] [--quiet] [--json]\n"
     "                                  one candidate per layer and side, least summed single-layer KL\n"
     "                                  within a mean of BITS effective bits per value (exact knapsack);\n"
     "                                  prints --k-scheme / --v-scheme; --verify: measured on held-out\n"
     "                                  windows (default wiki.test) against the best uniform candidate\n",
     "usage: ./run allocate MODEL_DIR --from SENSITIVITY_DIR --budget BITS[,BITS...] [flags]\n"
     "\n"
     "One candidate per layer and side, chosen from a ./run sensitivity: the least summed\n"
     "single-layer KL within a mean of BITS effective bits per cached value (an exact knapsack).\n"
     "Prints the --k-scheme / --v-scheme strings; --verify measures them, and every uniform\n"
     "candidate that fits, as a sweep on held-out windows.\n"
     "\n"
     "flags (default):\n"
     "  --from DIR                the --out-dir of ./run sensitivity (required)\n"
     "  --budget BITS[,BITS...]   mean effective bits per value, e.g. 2.5,3 or 13/4 (required)\n"
     "  --candidates SPEC,...     a subset of the sensitivity's candidates (all of them)\n"
     "  --verify                  measure the allocations on held-out windows (off)\n"
     "  --out-dir DIR             --verify's journal and results (required with --verify)\n"
     "  --text-file F             --verify's text (data/wikitext-2-raw/wiki.test.raw)\n"
     "  --windows N               --verify's first N windows (all)\n"
     "  --max-tokens N            --verify's first N tokens of the text (all)\n"
     "  --batch N                 --verify's positions a forward pass (512)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "  --json                    the allocations as JSON (table)\n"
     "\n"
     "examples:\n"
     "  ./run allocate data/models/mini-llama-brown --from sens --budget 2.5,3,3.5\n"
     "  ./run allocate data/models/mini-llama-brown --from sens --budget 3 --verify --windows 16 \\\n"
     "        --out-dir verify\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"kv-extract"}, cmd_kv_extract, TAKES_DIR,
     "  kv-extract MODEL_DIR (-i PROMPT | --tokens IDS) -o kv.safetensors [--dtype f32|f16]\n"
     "                                  run a prompt and save its KV cache (+ .metadata.json)\n",
     "usage: ./run kv-extract MODEL_DIR (-i PROMPT | --tokens IDS) -o FILE [--dtype f32|f16]\n"
     "\n"
     "Runs a prompt and saves its KV cache as safetensors (and FILE.metadata.json), the input of\n"
     "compress and kv-info.\n"
     "\n"
     "flags (default):\n"
     "  -i, --prompt TEXT         the prompt (one of -i, --tokens is required)\n"
     "  --tokens IDS              comma-separated token ids instead\n"
     "  -o, --output FILE         the KV cache file (required)\n"
     "  --dtype D                 f32 or f16 (f32)\n"
     "\n"
     "examples:\n"
     "  ./run kv-extract data/models/mini-llama-brown -i \"Some text\" -o kv.safetensors\n"
     "  ./run kv-extract data/models/mini-llama-brown --tokens 1,450,4996 -o kv.safetensors --dtype f16\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"kv-info"}, cmd_kv_info, TAKES_DIR | TAKES_JSON | TAKES_CALIB,
     "  kv-info FILE [--model MODEL_DIR] [--calib FILE] [--json]\n"
     "                                  shape, size and statistics of a KV cache file\n",
     "usage: ./run kv-info FILE [--model MODEL_DIR] [--calib FILE] [--json]\n"
     "\n"
     "Shape, size and statistics of a KV cache file (kv-extract's or compress's); with --model,\n"
     "checked against that model's shape.\n"
     "\n"
     "flags (default):\n"
     "  --model MODEL_DIR         check the file's shape against this model (no check)\n"
     "  --calib FILE              the calibration a fitted file was packed with (none)\n"
     "  --json                    the report as JSON (text)\n"
     "\n"
     "examples:\n"
     "  ./run kv-info kv.safetensors\n"
     "  ./run kv-info kv.safetensors --model data/models/mini-llama-brown --json\n"
     "\n"
     "exit codes: 0 ok, 1 the file does not fit --model's shape, 2 bad input or usage\n"},
    {{"compress"}, cmd_compress, TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_CALIB,
     "  compress -input IN -output OUT [--scheme int4] [-group-size 64] [-sparsity 0]\n"
     "           [--kv-scheme S | --k-scheme S --v-scheme S] [--calib FILE] [--lz4] [--metrics-only]\n"
     "           [-verbose] [--max-rmse 0.10] [--min-snr 18] [--min-cosine 0.99]\n"
     "                                  quantize a KV cache file; JSON metrics on stdout;\n"
     "                                  exit 1 when a quality threshold fails; a fitted scheme\n"
     "                                  needs --calib (the file records its sha256)\n",
     "usage: ./run compress -input IN -output OUT [flags]\n"
     "\n"
     "Quantizes a KV cache file (kv-extract's) into a compressed one; prints JSON metrics\n"
     "(sizes, RMSE, SNR, cosine, keys and values apart) on stdout.\n"
     "\n"
     "flags (default):\n"
     "  -i, --input IN            the KV cache file (required)\n"
     "  -o, --output OUT          the compressed file (required unless --metrics-only)\n"
     "  --scheme NAME             intN is intN-g<group-size>; any scheme name as is (int4)\n"
     "  --group-size N            the group of --scheme intN (64)\n"
     "  --kv-scheme S             the scheme, keys and values, over --scheme (int4-g64)\n"
     "  --k-scheme S              keys only, over --kv-scheme (--kv-scheme)\n"
     "  --v-scheme S              values only, over --kv-scheme (--kv-scheme)\n"
     "  --calib FILE              the tables of a fitted scheme; the file records its sha256 (none)\n"
     "  --sparsity F              the fraction of smallest-magnitude values zeroed first, [0, 1) (0)\n"
     "  --lz4                     LZ4 over the packed bytes (off)\n"
     "  --metrics-only            the metrics, no file written (off)\n"
     "  -v, --verbose             a few human lines on stderr (off)\n"
     "  --max-rmse X              fail (exit 1) when the RMSE is above X (0.10)\n"
     "  --min-snr DB              fail when the SNR is below DB decibels (18)\n"
     "  --min-cosine C            fail when the cosine similarity is below C (0.99)\n"
     "\n"
     "examples:\n"
     "  ./run compress -input kv.safetensors -output kv.int4 --scheme int4 -group-size 64 --lz4\n"
     "  ./run compress -input kv.safetensors -output kv.q --k-scheme int8-g64 --v-scheme int4-g64\n"
     "  ./run compress -input kv.safetensors --kv-scheme tq3 --metrics-only\n"
     "\n"
     "exit codes: 0 ok, 1 a quality threshold failed, 2 bad input or usage\n"},
    {{"decompress"}, cmd_decompress, TAKES_CALIB,
     "  decompress -input IN -output OUT [--calib FILE]  a compressed file back to F32 tensors\n"
     "                                  (--calib: the calibration a fitted file was packed with)\n",
     "usage: ./run decompress -input IN -output OUT [--calib FILE]\n"
     "\n"
     "A compressed file (compress's) back to a KV cache file of F32 tensors.\n"
     "\n"
     "flags (default):\n"
     "  -i, --input IN            the compressed file (required)\n"
     "  -o, --output OUT          the KV cache file written (required)\n"
     "  --calib FILE              the calibration a fitted file was packed with (none)\n"
     "\n"
     "examples:\n"
     "  ./run decompress -input kv.int4 -output kv.recon.safetensors\n"
     "  ./run decompress -input kv.nuq3 -output kv.recon.safetensors --calib kv-calib.safetensors\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"--quick-test", "-quick-test"}, cmd_quick_test, 0,
     "  --quick-test                    compress a synthetic cache with int4-g64, check thresholds\n",
     "usage: ./run --quick-test\n"
     "\n"
     "Compresses a seeded synthetic KV cache with int4-g64 and checks the RMSE, SNR and cosine\n"
     "thresholds (no model, no file). Takes no flags.\n"
     "\n"
     "examples:\n"
     "  ./run --quick-test\n"
     "  ./run --quick-test && echo ok\n"
     "\n"
     "exit codes: 0 ok, 1 a threshold failed\n"},
    {{"calibrate"}, cmd_calibrate, TAKES_DIR | TAKES_QUIET,
     "  calibrate (MODEL_DIR | --random tinyllama) --out FILE [--fit SPEC ...] [--text-file F]\n"
     "           [--tokens 16384] [--ctx 1024] [--batch N] [--quiet]\n"
     "                                  fit the cache to the model (SCHEMES.md 8): statistics of keys,\n"
     "                                  values, queries and the tables of fitted bases (nuqB-gG,\n"
     "                                  nuqB-tG, vqC-dD) from wiki.valid (the calibration split);\n"
     "                                  an outlier table, and a heatmap in FILE.svg\n",
     "usage: ./run calibrate (MODEL_DIR | --random tinyllama) --out FILE [flags]\n"
     "\n"
     "Fits the cache to the model (SCHEMES.md 8): per-channel statistics of its keys, values and\n"
     "queries and the tables of the fitted bases asked for (nuqB-gG, nuqB-tG, vqC-dD), from the\n"
     "calibration split; prints an outlier table; a heatmap goes to FILE.svg. Save it as\n"
     "MODEL_DIR/kv-calib.safetensors and every command uses it.\n"
     "\n"
     "flags (default):\n"
     "  --out, -o FILE            the calibration (required)\n"
     "  --fit SPEC                a fitted base's tables, e.g. nuq3-g64, vq8-d4+had; repeatable\n"
     "                            (none: the statistics only)\n"
     "  --random NAME             seeded random weights of TinyLlama's shape (tinyllama) or of a\n"
     "                            config.json, instead of MODEL_DIR: for timing\n"
     "  --text-file F             the text (data/wikitext-2-raw/wiki.valid.raw)\n"
     "  --tokens N                the text's first N tokens (16384)\n"
     "  --ctx N                   tokens a window (1024)\n"
     "  --batch N                 positions a forward pass (the smaller of --ctx and 512)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "\n"
     "examples:\n"
     "  ./run calibrate data/models/mini-llama-brown --fit nuq3-g64 --out calib.safetensors\n"
     "  ./run calibrate data/models/mini-llama-brown --fit nuq2-g64 --fit vq8-d4 --tokens 4096 \\\n"
     "        --out data/models/mini-llama-brown/kv-calib.safetensors\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    {{"schemes"}, cmd_schemes, 0,
     "  schemes                         list the KV-cache quantization schemes\n",
     "usage: ./run schemes\n"
     "\n"
     "Lists the KV-cache quantization schemes: every base with its bits, the modifiers, and how\n"
     "to write per-layer and per-side choices. Takes no flags.\n"
     "\n"
     "examples:\n"
     "  ./run schemes\n"
     "  ./run schemes | grep nuq\n"
     "\n"
     "exit codes: 0 ok\n"},
    {{"bench"}, cmd_bench, TAKES_DIR | TAKES_JSON | TAKES_QUIET,
     "  bench (MODEL_DIR | --random tinyllama|CONFIG) [-p 512] [-n 64] [--ctx 2048] [--kv-scheme S]\n"
     "           [--long-scheme S | --long-k-scheme S --long-v-scheme S] [--threads N] [--repeat R]\n"
     "           [--precision bf16|exact] [--dtype bf16|f16|f32] [--calib FILE] [--no-probe] [--quiet] [--json]\n"
     "           [--ppl [--ppl-windows 4] [--ppl-batch 512]]\n"
     "                                  prefill / decode tok/s, GFLOP/s, GB/s vs this machine;\n"
     "                                  --random: seeded random weights of TinyLlama's shape, or of\n"
     "                                  a config.json (the file or its directory); no download\n"
     "                                  --ppl: the ppl path's positions/s at --ctx, a full pass's time;\n"
     "                                  each step and the time left on stderr (not with --quiet)\n",
     "usage: ./run bench (MODEL_DIR | --random tinyllama|CONFIG) [flags]\n"
     "\n"
     "Prefill and decode speed (median of --repeat runs: tok/s, GFLOP/s, GB/s, and their share of\n"
     "this machine's measured peaks), decode at --ctx with an fp32 and a quantized cache, and with\n"
     "--ppl the perplexity path's positions/s and a full WikiText-2 pass's time.\n"
     "\n"
     "flags (default):\n"
     "  --random NAME             seeded random weights of TinyLlama's shape (tinyllama) or of a\n"
     "                            config.json (the file or its directory), instead of MODEL_DIR\n"
     "  --dtype D                 --random's weights: bf16, f16 or f32 (bf16)\n"
     "  -p N                      prompt tokens of the prefill (512)\n"
     "  -n N                      tokens decoded after it (64)\n"
     "  --ctx N                   the long decode's context, and --ppl's window; 0: no long runs (2048)\n"
     "  --kv-scheme S             the cache of the prefill and decode runs (fp32)\n"
     "  --long-scheme S           the long runs' quantized cache, keys and values (int4-g64)\n"
     "  --long-k-scheme S         its keys only (--long-scheme)\n"
     "  --long-v-scheme S         its values only (--long-scheme)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --threads N               threads (OpenMP's default: every core)\n"
     "  --repeat R                runs of each phase, the median reported (3)\n"
     "  --precision P             bf16: bf16 products; exact: f32 matmuls (bf16)\n"
     "  --no-probe                skip the machine's peak FMA and memory-read probes (probed)\n"
     "  --ppl                     time the perplexity path too, 4 windows of --ctx (off)\n"
     "  --ppl-windows N           --ppl's windows, 2 or more (4)\n"
     "  --ppl-batch N             --ppl's positions a forward pass (512)\n"
     "  --quiet                   no progress on stderr (progress)\n"
     "  --json                    the figures as JSON (text)\n"
     "\n"
     "examples:\n"
     "  ./run bench --random tinyllama --repeat 3 --no-probe\n"
     "  ./run bench models/tinyllama --kv-scheme int4-g64 --ppl\n"
     "  ./run bench data/models/mini-llama-brown -p 32 -n 4 --ctx 128 --json\n"
     "\n"
     "exit codes: 0 ok, 2 bad input or usage\n"},
    /* main() answers --help anywhere on the line before it looks for a command */
    {{"--help", "-help", "help"}, cmd_help, 0,
     "  --help                          this text; ./run COMMAND --help: a command's flags and examples\n",
     "usage: ./run --help | ./run COMMAND --help | ./run help COMMAND\n"
     "\n"
     "The list of commands, or one command's synopsis, flags with their defaults, examples and\n"
     "exit codes.\n"
     "\n"
     "examples:\n"
     "  ./run --help\n"
     "  ./run sweep --help\n"
     "  ./run help ppl\n"
     "\n"
     "exit codes: 0\n"},
    {{"--validate", "-validate", "validate"}, cmd_validate,
     TAKES_JSON | TAKES_QUIET | TAKES_KV_SCHEME | TAKES_KV_SIDES | TAKES_WINDOW | TAKES_CALIB,
     "\n"
     "  --validate [--model DIR] [--threshold 0.5 | --threshold 0.5%] [--kv-scheme int4-g64]\n"
     "           [--windows 8] [--ctx N] [--text-file F] [--calib FILE] [--quiet] [--json]\n"
     "                                  six-step check that the quantized KV cache keeps perplexity\n"
     "                                  within the threshold (exit 1 when it does not); default:\n"
     "                                  delta < the larger of 0.5 and 1% of the baseline perplexity\n",
     "usage: ./run --validate [flags]\n"
     "\n"
     "A six-step check that a quantized KV cache keeps perplexity within a threshold: a prompt's\n"
     "cache compressed to a file and read back, then perplexity with the cache quantized as it is\n"
     "written against an fp32 cache. Uses models/tinyllama when it is exported, else the bundled\n"
     "data/models/mini-llama-brown.\n"
     "\n"
     "flags (default):\n"
     "  --model DIR               the model (models/tinyllama, else data/models/mini-llama-brown)\n"
     "  --threshold X | X%        delta ppl below X points, or below X% of the baseline\n"
     "                            (the larger of 0.5 and 1% of the baseline)\n"
     "  --kv-scheme S             the cache's scheme, keys and values (int4-g64; ./run schemes)\n"
     "  --k-scheme S              keys only, over --kv-scheme (--kv-scheme)\n"
     "  --v-scheme S              values only, over --kv-scheme (--kv-scheme)\n"
     "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"
     "  --windows N               windows scored (8)\n"
     "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
     "  --ctx N                   tokens a window (the model's context)\n"
     "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
     "  --quiet                   no report: the exit code (and --json's output) only (report)\n"
     "  --json                    the results as JSON on stdout, the report on stderr (text)\n"
     "\n"
     "examples:\n"
     "  ./run --validate\n"
     "  ./run --validate --kv-scheme int3-g64+had --threshold 2%\n"
     "  ./run --validate --model models/tinyllama --windows 4 --json\n"
     "\n"
     "exit codes: 0 passed, 1 the threshold failed, 2 bad input or usage\n"},
};
#define N_COMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void print_usage(FILE *f) {
    fputs("kvq: run Llama models in C and measure what KV-cache quantization costs.\n"
          "\n"
          "usage: ./run COMMAND [options]     (flags take one or two dashes: -n 64 = --n 64)\n"
          "       ./run COMMAND --help        a command's flags with their defaults, examples, exit codes\n"
          "\n", f);
    for (int i = 0; i < N_COMMANDS; i++) fputs(COMMANDS[i].usage, f);
    fputs("\n"
          "A MODEL_DIR holds config.json, model.safetensors and tokenizer.bin\n"
          "(python3 export/export.py writes one). Bundled: data/models/mini-llama-brown.\n"
          "Exit codes: 0 ok, 1 quality check failed, 2 bad input or usage.\n", f);
}

static const Command *find_command(const char *name) {
    for (int i = 0; i < N_COMMANDS; i++)
        for (int k = 0; k < 3 && COMMANDS[i].names[k]; k++)
            if (!strcmp(name, COMMANDS[i].names[k])) return &COMMANDS[i];
    return NULL;
}

/* A command's --help: its own text, then what every command shares. */
static void print_command_help(const Command *c, FILE *f) {
    fputs(c->help ? c->help : c->usage, f);
    fputs("\nFlags take one or two dashes (-n 64 = --n 64), and --flag=value. ./run --help lists the commands.\n", f);
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
    if (c) print_command_help(c, stdout);
    else print_usage(stdout);
    return EXIT_OK;
}

/* OpenMP's idle threads spin before they sleep (libgomp: 300,000 rounds after every parallel region).
 * On cores that other processes share, a spinning thread takes a core from the thread everyone waits
 * for: under a load of two busy processes on 2 cores, --validate took up to twice as long. Sleeping at
 * once (OMP_WAIT_POLICY=passive) cured that but cost 0.7-3.7% of prefill on free cores
 * (wake-ups after each of decode's many short regions); a brief spin of 10,000 rounds, then sleep,
 * was as fast as either where each is best (model/kernels/README.md, "A shared machine"). libgomp
 * reads the variable once, before main, so it is set and the program started again: same pid, same
 * binary (/proc/self/exe, even if ./run was replaced meanwhile). Where that exec fails (no /proc),
 * the run goes on with libgomp's default. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept. */
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
    if (!c) {
        char msg[300];
        snprintf(msg, sizeof msg, "unknown command '%.256s'", argv[1]);
        print_error("run", msg, "");
        print_usage(stderr);
        return EXIT_BAD_INPUT;
    }
    Args a = {.argc = argc, .argv = argv, .i = 2, .takes = c->takes};
    a.e = (EvalFlags){.text_file = "data/wikitext-2-raw/wiki.test.raw", .protocol = "hf", .precision = "exact",
                      .stride = 0, .batch = 512, .shard_n = 1};   /* stride 0: min(512, ctx) */
    a.cmd = c->names[0] + strspn(c->names[0], "-");   /* "validate" for --validate, in messages */
    return c->run(&a);
}
