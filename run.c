/* run.c: kvq's command line. Parses flags, calls into eval/ and model/, prints
 * results and picks the exit code: 0 ok, 1 a quality check failed, 2 bad input
 * or usage. Read this file top to bottom for the tour; each command is one
 * function of the same name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <math.h>

#include "model/model.h"
#include "model/fileio.h"
#include "model/modeldir.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"
#include "eval/wikitext.h"
#include "eval/perplexity.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "eval/sweep.h"
#include "eval/bench.h"
#include "eval/kvreport.h"
#include "eval/validate.h"
#include "eval/generate.h"
#include "eval/scheme_list.h"
#include "model/kvfile.h"
#include "model/compress.h"

#define EXIT_OK 0
#define EXIT_QUALITY 1
#define EXIT_BAD_INPUT 2

/* ------------------------------------------------------------------------- */
/* Usage */

static void print_usage(FILE *f) {
    fprintf(f,
        "kvq: run Llama models in C and measure what KV-cache quantization costs.\n"
        "\n"
        "usage: ./run COMMAND [options]     (flags take one or two dashes: -n 64 = --n 64)\n"
        "\n"
        "  generate MODEL_DIR [-i prompt] [-n steps] [-t temp] [-p top_p] [-s seed] [--chat]\n"
        "           [--kv-scheme S]        stream text; -n counts all positions incl. the prompt\n"
        "  logits MODEL_DIR --tokens 1,450,4996 [--out FILE] [--kv-scheme S]\n"
        "                                  logits of every position (float32 [T, vocab] to FILE)\n"
        "  tokenize MODEL_DIR (--text STR | --text-file FILE) [--bos]\n"
        "                                  print token ids\n"
        "  ppl MODEL_DIR [--text-file F] [--ctx N] [--stride N] [--windows N] [--max-tokens N]\n"
        "           [--kv-scheme S | --k-scheme S --v-scheme S] [--protocol hf|llamacpp]\n"
        "           [--shard I/N] [--batch N] [--no-compare] [--precision exact|bf16] [--quiet] [--json]\n"
        "                                  perplexity with the KV cache quantized as it is written\n"
        "                                  (default text: WikiText-2 test; compared with an fp32 cache)\n"
        "  ppl-merge SHARD.json...         add up the --json outputs of --shard runs\n"
        "  sweep MODEL_DIR (--config K[:V] ... | --configs FILE) --out-dir DIR [ppl's window flags]\n"
        "                                  many KV-cache configurations over the same windows, each\n"
        "                                  window's fp32 baseline once; resumable; table, CSV, JSON, SVG\n"
        "  sweep-merge DIR... --out-dir OUT [--json]  put together the shards of a sweep (--shard I/N)\n"
        "  kv-extract MODEL_DIR (-i PROMPT | --tokens IDS) -o kv.safetensors [--dtype f32|f16]\n"
        "                                  run a prompt and save its KV cache (+ .metadata.json)\n"
        "  kv-info FILE [--model MODEL_DIR] [--json]\n"
        "                                  shape, size and statistics of a KV cache file\n"
        "  compress -input IN -output OUT [--scheme int4] [-group-size 64] [-sparsity 0]\n"
        "           [--kv-scheme S | --k-scheme S --v-scheme S] [--lz4] [--metrics-only] [-verbose]\n"
        "           [--max-rmse 0.10] [--min-snr 18] [--min-cosine 0.99]\n"
        "                                  quantize a KV cache file; JSON metrics on stdout;\n"
        "                                  exit 1 when a quality threshold fails\n"
        "  decompress -input IN -output OUT  a compressed file back to F32 tensors\n"
        "  --quick-test                    compress a synthetic cache with int4-g64, check thresholds\n"
        "  schemes                         list the KV-cache quantization schemes\n"
        "  bench (MODEL_DIR | --random tinyllama) [-p 512] [-n 64] [--ctx 2048] [--kv-scheme S]\n"
        "           [--long-scheme S | --long-k-scheme S --long-v-scheme S] [--threads N] [--repeat R]\n"
        "           [--precision bf16|exact] [--dtype bf16|f16|f32] [--no-probe] [--json]\n"
        "           [--ppl [--ppl-windows 4] [--ppl-batch 512]]\n"
        "                                  prefill / decode tok/s, GFLOP/s, GB/s vs this machine;\n"
        "                                  --ppl: the ppl path's positions/s at --ctx, a full pass's time\n"
        "  --help                          this text (also after any command: ./run ppl --help)\n"
        "\n"
        "  --validate [--model DIR] [--threshold 0.5 | --threshold 0.5%%] [--kv-scheme int4-g64]\n"
        "           [--windows 8] [--ctx N] [--text-file F] [--quiet] [--json]\n"
        "                                  six-step check that the quantized KV cache keeps perplexity\n"
        "                                  within the threshold (exit 1 when it does not); default:\n"
        "                                  delta < the larger of 0.5 and 1%% of the baseline perplexity\n"
        "\n"
        "A MODEL_DIR holds config.json, model.safetensors and tokenizer.bin\n"
        "(python3 export/export.py writes one). Bundled: data/models/mini-llama-brown.\n"
        "Exit codes: 0 ok, 1 quality check failed, 2 bad input or usage.\n");
}

/* ------------------------------------------------------------------------- */
/* Flags: "-name value", "--name value" and "--name=value" are all accepted. */

typedef struct {
    int argc;
    char **argv;
    int i;              /* next argument to read */
    const char *value;  /* value of the last matched flag */
    char bad[256];      /* first usage error */
} Args;

/* 1 if argv[i] is the flag `name` (a long name without dashes); takes its value if needed. */
static int flag(Args *a, const char *name, int takes_value) {
    const char *s = a->argv[a->i];
    if (s[0] != '-') return 0;
    s += (s[1] == '-') ? 2 : 1;
    size_t n = strlen(name);
    if (strncmp(s, name, n) != 0 || (s[n] != 0 && s[n] != '=')) return 0;
    if (!takes_value) {
        if (s[n] == '=') snprintf(a->bad, sizeof a->bad, "flag -%s takes no value", name);
        a->i++;
        return 1;
    }
    if (s[n] == '=') {
        a->value = s + n + 1;
        a->i++;
    } else if (a->i + 1 < a->argc) {
        a->value = a->argv[a->i + 1];
        a->i += 2;
    } else {
        snprintf(a->bad, sizeof a->bad, "flag -%s needs a value", name);
        a->value = "";
        a->i++;
    }
    return 1;
}

static int parse_int(Args *a, const char *name, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(a->value, &end, 10);
    if (errno || end == a->value || *end || v < lo || v > hi) {
        snprintf(a->bad, sizeof a->bad, "-%s: expected an integer in [%d, %d], got '%s'", name, lo, hi, a->value);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_float(Args *a, const char *name, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(a->value, &end);
    if (errno || end == a->value || *end || !(v >= lo && v <= hi)) {
        snprintf(a->bad, sizeof a->bad, "-%s: expected a number in [%g, %g], got '%s'", name, lo, hi, a->value);
        return -1;
    }
    *out = v;
    return 0;
}

static void unknown_arg(Args *a) {
    if (!a->bad[0]) snprintf(a->bad, sizeof a->bad, "unknown argument '%s'", a->argv[a->i]);
    a->i++;
}

/* A library call's failure while parsing a flag's value, as the usage error. Like the value
 * parsers, it replaces a "needs a value" error from flag() (the value is then ""). */
static void take_error(Args *a, int rc, const Error *err) {
    if (rc) snprintf(a->bad, sizeof a->bad, "%.255s", err->msg);   /* bad holds 256 */
}

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "%s: %s (see ./run --help)\n", cmd, msg);
    return EXIT_BAD_INPUT;
}

/* A LAYERED scheme value of a flag (quant/scheme.h); syntax errors go to bad. Checks against the
 * model (head_dim, layers) come when the cache is made, as a bad-input error naming the part. */
static int layered_or_error(const char *text, KvLayered *out, char *bad, size_t n) {
    char why[160];
    if (kv_layered_parse(text, out, why, sizeof why) == 0) return 0;
    snprintf(bad, n, "KV scheme '%.60s': %.160s", text, why);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* generate */

static int cmd_generate(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *dir = NULL, *prompt = "", *scheme_name = "fp32";
    int steps = 256, chat = 0, seed_set = 0;
    float temperature = 1.0f, top_p = 0.9f;
    unsigned long long seed = 0;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "i", 1) || flag(&a, "prompt", 1)) prompt = a.value;
        else if (flag(&a, "n", 1) || flag(&a, "steps", 1)) parse_int(&a, "n", 1, 1 << 20, &steps);
        else if (flag(&a, "t", 1) || flag(&a, "temperature", 1)) parse_float(&a, "t", 0.0f, 100.0f, &temperature);
        else if (flag(&a, "p", 1) || flag(&a, "top-p", 1)) parse_float(&a, "p", 0.0f, 1.0f, &top_p);
        else if (flag(&a, "s", 1) || flag(&a, "seed", 1)) { int v; if (!parse_int(&a, "s", 0, 2147483647, &v)) { seed = (unsigned long long)v; seed_set = 1; } }
        else if (flag(&a, "chat", 0)) chat = 1;
        else if (flag(&a, "kv-scheme", 1)) scheme_name = a.value;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && !dir) snprintf(a.bad, sizeof a.bad, "missing MODEL_DIR");
    KvLayered scheme;
    if (!a.bad[0]) layered_or_error(scheme_name, &scheme, a.bad, sizeof a.bad);
    if (a.bad[0]) return usage_error("generate", a.bad);
    if (!seed_set) seed = (unsigned long long)time(NULL);

    Error err;
    ModelDir L;
    if (modeldir_load(&L, dir, 1, &err)) { fprintf(stderr, "generate: %s\n", err.msg); return EXIT_BAD_INPUT; }
    GenerateOptions o = {prompt, chat, steps, temperature, top_p, seed, &scheme};
    GenerateStats st;
    int rc = generate_text(&L.model, L.tok, &o, stdout, &st, &err);
    modeldir_free(&L);
    if (rc) { fprintf(stderr, "generate: %s\n", err.msg); return EXIT_BAD_INPUT; }
    printf("\n");
    fflush(stdout);   /* the text ends before the statistics, on a pipe too */
    fprintf(stderr, "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s\n", st.prompt_tokens,
            st.prompt_tokens / st.prompt_seconds, st.generated, st.generated > 0 ? st.generated / st.generate_seconds : 0.0);
    return EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* logits */

/* "1,450,4996" -> ids, each checked against the vocabulary. */
static int *parse_token_list(const char *s, int vocab, int *n, char *bad, size_t badlen) {
    int cap = 16, count = 0;
    int *ids = malloc((size_t)cap * sizeof *ids);
    const char *p = s;
    while (ids) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= vocab) {
            snprintf(bad, badlen, "--tokens: '%s' is not a list of ids in [0, %d)", s, vocab);
            free(ids);
            return NULL;
        }
        if (count == cap) {
            int *grown = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!grown) { free(ids); return NULL; }
            ids = grown;
        }
        ids[count++] = (int)v;
        if (*end == 0) break;
        if (*end != ',') { snprintf(bad, badlen, "--tokens: unexpected '%c' in '%s'", *end, s); free(ids); return NULL; }
        p = end + 1;
    }
    *n = count;
    return ids;
}

/* The five largest logits of one position, as "pos 3: 450 (12.3456) ...". */
static void print_top5(const float *row, int vocab, int pos) {
    int best[5];
    top_k_indices(row, vocab, 5, best);
    printf("pos %d:", pos);
    for (int k = 0; k < 5; k++) printf(" %d (%.4f)", best[k], row[best[k]]);
    printf("\n");
}

static int cmd_logits(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *dir = NULL, *list = NULL, *out = NULL, *scheme_name = "fp32";
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "tokens", 1)) list = a.value;
        else if (flag(&a, "out", 1) || flag(&a, "o", 1)) out = a.value;
        else if (flag(&a, "kv-scheme", 1)) scheme_name = a.value;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && (!dir || !list)) snprintf(a.bad, sizeof a.bad, "needs MODEL_DIR and --tokens");
    KvLayered scheme;
    if (!a.bad[0]) layered_or_error(scheme_name, &scheme, a.bad, sizeof a.bad);
    if (a.bad[0]) return usage_error("logits", a.bad);

    Error err;
    ModelDir L;
    if (modeldir_load(&L, dir, 0, &err)) { fprintf(stderr, "logits: %s\n", err.msg); return EXIT_BAD_INPUT; }
    const Config *c = &L.model.config;
    int n = 0, rc = EXIT_BAD_INPUT;
    int *ids = parse_token_list(list, c->vocab_size, &n, a.bad, sizeof a.bad);
    RunState s = {0};
    if (!ids) usage_error("logits", a.bad[0] ? a.bad : "out of memory");
    else if (logits_of_tokens(&L.model, ids, n, &scheme, &s, &err)) fprintf(stderr, "logits: %s\n", err.msg);
    else if (out && write_floats_file(out, s.logits, (size_t)n * c->vocab_size, &err)) fprintf(stderr, "logits: %s\n", err.msg);
    else rc = EXIT_OK;
    for (int t = 0; !out && rc == EXIT_OK && t < n; t++) print_top5(s.logits + (size_t)t * c->vocab_size, c->vocab_size, t);
    runstate_free(&s);
    free(ids);
    modeldir_free(&L);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* tokenize */

static int cmd_tokenize(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *dir = NULL, *text = NULL, *text_file = NULL;
    int bos = 0;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "text", 1)) text = a.value;
        else if (flag(&a, "text-file", 1)) text_file = a.value;
        else if (flag(&a, "bos", 0)) bos = 1;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && (!dir || !text == !text_file))
        snprintf(a.bad, sizeof a.bad, "needs MODEL_DIR and one of --text, --text-file");
    if (a.bad[0]) return usage_error("tokenize", a.bad);

    char path[4096], msg[512];
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    Tokenizer *tok = tokenizer_load(path, msg, sizeof msg);
    if (!tok) { fprintf(stderr, "tokenize: %s\n", msg); return EXIT_BAD_INPUT; }
    Error err;
    size_t len = 0;
    char *owned = NULL;
    if (text_file) {
        owned = read_whole_file(text_file, (size_t)1 << 30, &len, &err);
        if (!owned) { fprintf(stderr, "tokenize: %s\n", err.msg); tokenizer_free(tok); return EXIT_BAD_INPUT; }
        text = owned;
    } else {
        len = strlen(text);
    }
    int n = 0;
    int *ids = tokenizer_encode(tok, text, len, bos, &n);
    /* NULL only when out of memory: an empty text gives an empty list, not NULL */
    if (!ids) fprintf(stderr, "tokenize: out of memory for %zu bytes of text\n", len);
    for (int i = 0; ids && i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    if (ids) printf("\n");
    int rc = ids ? EXIT_OK : EXIT_BAD_INPUT;
    free(ids);
    free(owned);
    tokenizer_free(tok);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* ppl and ppl-merge */

#define DEFAULT_TEXT "data/wikitext-2-raw/wiki.test.raw"

static int parse_shard(Args *a, int *index, int *count) {
    char extra;
    if (sscanf(a->value, "%d/%d%c", index, count, &extra) != 2 || *count < 1 || *index < 0 || *index >= *count) {
        snprintf(a->bad, sizeof a->bad, "--shard: expected I/N with 0 <= I < N, got '%s'", a->value);
        return -1;
    }
    return 0;
}

/* The evaluation flags ppl and sweep share. */
typedef struct {
    const char *text_file, *protocol, *precision;
    int ctx, stride, windows, max_tokens, batch, shard_i, shard_n, quiet, json;
} EvalFlags;

static EvalFlags eval_flags_default(void) {
    return (EvalFlags){.text_file = DEFAULT_TEXT, .protocol = "hf", .precision = "exact", .stride = 512, .batch = 512,
                       .shard_n = 1};
}

/* 1 if argv[a->i] is one of the shared evaluation flags (and consumes it). */
static int eval_flag(Args *a, EvalFlags *e) {
    if (flag(a, "text-file", 1)) e->text_file = a->value;
    else if (flag(a, "precision", 1)) e->precision = a->value;
    else if (flag(a, "ctx", 1)) parse_int(a, "ctx", 2, 1 << 20, &e->ctx);
    else if (flag(a, "stride", 1)) parse_int(a, "stride", 1, 1 << 20, &e->stride);
    else if (flag(a, "windows", 1)) parse_int(a, "windows", 1, 1 << 30, &e->windows);
    else if (flag(a, "max-tokens", 1)) parse_int(a, "max-tokens", 2, 1 << 30, &e->max_tokens);
    else if (flag(a, "protocol", 1)) e->protocol = a->value;
    else if (flag(a, "shard", 1)) parse_shard(a, &e->shard_i, &e->shard_n);
    else if (flag(a, "batch", 1)) parse_int(a, "batch", 1, 4096, &e->batch);
    else if (flag(a, "quiet", 0)) e->quiet = 1;
    else if (flag(a, "json", 0)) e->json = 1;
    else return 0;
    return 1;
}

static void eval_flags_check(const EvalFlags *e, char *bad, size_t n) {
    if (!bad[0] && strcmp(e->protocol, "hf") && strcmp(e->protocol, "llamacpp"))
        snprintf(bad, n, "--protocol must be hf or llamacpp");
    if (!bad[0] && strcmp(e->precision, "exact") && strcmp(e->precision, "bf16"))
        snprintf(bad, n, "--precision must be exact or bf16");
}

/* The model's precision and the window options from the flags (schemes and compare left). */
static PplOptions eval_options(const EvalFlags *e, ModelDir *L) {
    /* bf16 activations are about 2x faster on CPUs with AVX-512 BF16 but move logits by ~1e-2. */
    L->model.precision = strcmp(e->precision, "bf16") ? MATMUL_EXACT : MATMUL_BF16_ACT;
    PplOptions o = {0};
    o.protocol = strcmp(e->protocol, "llamacpp") ? PPL_HF : PPL_LLAMACPP;
    o.ctx = e->ctx ? e->ctx : L->model.config.max_seq_len;
    o.stride = e->stride;
    o.max_windows = e->windows;
    o.shard_index = e->shard_i;
    o.shard_count = e->shard_n;
    o.batch = e->batch < o.ctx ? e->batch : o.ctx;
    return o;
}

static int cmd_ppl(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    EvalFlags e = eval_flags_default();
    const char *dir = NULL, *kv = NULL, *ks = NULL, *vs = NULL;
    int no_compare = 0;
    while (a.i < argc && !a.bad[0]) {
        if (eval_flag(&a, &e)) continue;
        else if (flag(&a, "kv-scheme", 1)) kv = a.value;
        else if (flag(&a, "k-scheme", 1)) ks = a.value;
        else if (flag(&a, "v-scheme", 1)) vs = a.value;
        else if (flag(&a, "no-compare", 0)) no_compare = 1;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && !dir) snprintf(a.bad, sizeof a.bad, "missing MODEL_DIR");
    eval_flags_check(&e, a.bad, sizeof a.bad);
    KvLayered k_scheme, v_scheme;
    if (!a.bad[0]) layered_or_error(ks ? ks : kv ? kv : "fp32", &k_scheme, a.bad, sizeof a.bad);
    if (!a.bad[0]) layered_or_error(vs ? vs : kv ? kv : "fp32", &v_scheme, a.bad, sizeof a.bad);
    if (a.bad[0]) return usage_error("ppl", a.bad);
    const char *text_file = e.text_file, *precision = e.precision;
    int max_tokens = e.max_tokens, json = e.json, quiet = e.quiet;

    Error err;
    ModelDir L;
    if (modeldir_load(&L, dir, 1, &err)) { fprintf(stderr, "ppl: %s\n", err.msg); return EXIT_BAD_INPUT; }
    const Config *c = &L.model.config;
    PplOptions o = eval_options(&e, &L);
    o.k_scheme = &k_scheme;
    o.v_scheme = &v_scheme;
    o.compare = !no_compare && !(kv_layered_is_fp32(&k_scheme) && kv_layered_is_fp32(&v_scheme));
    Progress progress;
    progress_init(&progress, "ppl", quiet);
    o.progress = progress_update;
    o.progress_user = &progress;

    int rc = EXIT_BAD_INPUT, n_tokens = 0;
    int *tokens = load_eval_tokens(text_file, L.tok, o.protocol == PPL_HF, &n_tokens, &err);
    if (!tokens) { fprintf(stderr, "ppl: %s\n", err.msg); goto done; }
    if (max_tokens && max_tokens < n_tokens) n_tokens = max_tokens;
    PplReport report = {0};
    if (ppl_evaluate(&L.model, tokens, n_tokens, &o, &report.result, &err)) {
        fprintf(stderr, "ppl: %s\n", err.msg);
        goto done;
    }
    progress_finish(&progress);
    ppl_report_describe(&report, dir, text_file, precision, c, &o, n_tokens);
    if (json) report_ppl_json(stdout, &report);
    else report_ppl_text(stdout, &report);
    rc = EXIT_OK;
done:
    free(tokens);
    modeldir_free(&L);
    return rc;
}

static int cmd_ppl_merge(int argc, char **argv) {
    int json = 0, n = 0;
    char **files = calloc((size_t)argc, sizeof *files);
    if (!files) { fprintf(stderr, "ppl-merge: out of memory\n"); return EXIT_BAD_INPUT; }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-json")) json = 1;
        else if (argv[i][0] == '-') { free(files); return usage_error("ppl-merge", "unknown flag"); }
        else files[n++] = argv[i];
    }
    if (n == 0) { free(files); return usage_error("ppl-merge", "give the shards' JSON files"); }
    PplReport report;
    Error err;
    int rc = ppl_merge_files(files, n, &report, &err);
    free(files);
    if (rc) { fprintf(stderr, "ppl-merge: %s\n", err.msg); return EXIT_BAD_INPUT; }
    if (json) report_ppl_json(stdout, &report);
    else report_ppl_text(stdout, &report);
    return EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* sweep and sweep-merge */

/* Prints the table (or the JSON) and writes the out dir's files of a complete sweep. */
static int finish(const char *cmd, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json) {
    Error err;
    if (sweep_finish(stdout, out_dir, s, t, json, &err)) { fprintf(stderr, "%s: %s\n", cmd, err.msg); return EXIT_BAD_INPUT; }
    return EXIT_OK;
}

static int cmd_sweep(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    EvalFlags e = eval_flags_default();
    const char *dir = NULL, *out_dir = NULL;
    SweepSettings s = {0};
    s.configs = calloc(SWEEP_MAX_CONFIGS, sizeof *s.configs);
    if (!s.configs) { fprintf(stderr, "sweep: out of memory\n"); return EXIT_BAD_INPUT; }
    Error err;
    while (a.i < argc && !a.bad[0]) {
        if (eval_flag(&a, &e)) continue;
        else if (flag(&a, "config", 1)) take_error(&a, sweep_add_config(&s, a.value, &err), &err);
        else if (flag(&a, "configs", 1)) take_error(&a, sweep_add_config_file(&s, a.value, &err), &err);
        else if (flag(&a, "out-dir", 1)) out_dir = a.value;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && !dir) snprintf(a.bad, sizeof a.bad, "missing MODEL_DIR");
    if (!a.bad[0] && !out_dir) snprintf(a.bad, sizeof a.bad, "missing --out-dir DIR (the journal and results go there)");
    if (!a.bad[0] && s.n_configs == 0) snprintf(a.bad, sizeof a.bad, "no configurations: give --config K[:V] or --configs FILE");
    eval_flags_check(&e, a.bad, sizeof a.bad);
    ModelDir L;
    if (a.bad[0] || modeldir_load(&L, dir, 1, &err)) {
        free(s.configs);
        if (a.bad[0]) return usage_error("sweep", a.bad);
        fprintf(stderr, "sweep: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    s.ppl = eval_options(&e, &L);
    snprintf(s.model, sizeof s.model, "%s", dir);
    snprintf(s.text_file, sizeof s.text_file, "%s", e.text_file);
    snprintf(s.precision, sizeof s.precision, "%s", e.precision);
    int rc = EXIT_BAD_INPUT;
    SweepTotals totals = {0};
    int *tokens = load_eval_tokens(e.text_file, L.tok, s.ppl.protocol == PPL_HF, &s.n_tokens, &err);
    if (!tokens || sweep_bind_configs(&s, &L.model.config, s.ppl.ctx, &err)) { fprintf(stderr, "sweep: %s\n", err.msg); goto done; }
    if (e.max_tokens && e.max_tokens < s.n_tokens) s.n_tokens = e.max_tokens;
    s.tokens_hash = sweep_tokens_hash(tokens, s.n_tokens);
    s.windows_total = ppl_window_count(&s.ppl, s.n_tokens);
    if (s.ppl.max_windows > 0 && s.ppl.max_windows < s.windows_total) s.windows_total = s.ppl.max_windows;
    Progress progress;
    progress_init(&progress, "sweep", e.quiet);
    if (sweep_run(&L.model, tokens, &s, out_dir, &progress, &totals, &err)) {
        progress_finish(&progress);
        fprintf(stderr, "sweep: %s\n", err.msg);
        goto done;
    }
    progress_finish(&progress);
    if (!e.quiet)
        fprintf(stderr, "sweep: this run: %.1f s, %ld forward-pass tokens (%.0f tok/s), baselines included\n",
                totals.run_seconds, totals.run_tokens, totals.run_seconds > 0 ? totals.run_tokens / totals.run_seconds : 0);
    if (s.ppl.shard_count > 1) {
        printf("shard %d/%d: %d windows done in %s; put the shards together with ./run sweep-merge DIR...\n",
               s.ppl.shard_index, s.ppl.shard_count, totals.windows, out_dir);
        rc = EXIT_OK;
    } else {
        rc = finish("sweep", out_dir, &s, &totals, e.json);
    }
done:
    sweep_totals_free(&totals);
    free(tokens);
    free(s.configs);
    modeldir_free(&L);
    return rc;
}

static int cmd_sweep_merge(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *out_dir = NULL;
    int json = 0, n = 0;
    char **dirs = calloc((size_t)argc, sizeof *dirs);
    if (!dirs) { fprintf(stderr, "sweep-merge: out of memory\n"); return EXIT_BAD_INPUT; }
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "out-dir", 1)) out_dir = a.value;
        else if (flag(&a, "json", 0)) json = 1;
        else if (argv[a.i][0] != '-') dirs[n++] = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && n == 0) snprintf(a.bad, sizeof a.bad, "give the shards' --out-dir directories");
    if (!a.bad[0] && !out_dir) snprintf(a.bad, sizeof a.bad, "missing --out-dir DIR for the merged results");
    if (a.bad[0]) { free(dirs); return usage_error("sweep-merge", a.bad); }
    SweepSettings s;
    SweepTotals totals;
    Error err;
    int rc = EXIT_BAD_INPUT;
    if (sweep_merge(dirs, n, &s, &totals, &err)) fprintf(stderr, "sweep-merge: %s\n", err.msg);
    else rc = finish("sweep-merge", out_dir, &s, &totals, json), free(s.configs);
    sweep_totals_free(&totals);
    free(dirs);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* kv-extract, kv-info */

/* The last path component of a model directory, as the cache's model_name. */
static void base_name(const char *dir, char *name, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(name, cap, "%.*s", (int)(n - start), dir + start);
}

static int cmd_kv_extract(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *dir = NULL, *prompt = NULL, *list = NULL, *out = NULL, *dtype = "f32";
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "i", 1) || flag(&a, "prompt", 1)) prompt = a.value;
        else if (flag(&a, "tokens", 1)) list = a.value;
        else if (flag(&a, "o", 1) || flag(&a, "output", 1)) out = a.value;
        else if (flag(&a, "dtype", 1)) dtype = a.value;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && (!dir || !out || !prompt == !list))
        snprintf(a.bad, sizeof a.bad, "needs MODEL_DIR, -o FILE and one of -i PROMPT, --tokens IDS");
    if (!a.bad[0] && strcmp(dtype, "f32") && strcmp(dtype, "f16")) snprintf(a.bad, sizeof a.bad, "--dtype must be f32 or f16");
    if (a.bad[0]) return usage_error("kv-extract", a.bad);

    Error err;
    ModelDir L;
    if (modeldir_load(&L, dir, 1, &err)) { fprintf(stderr, "kv-extract: %s\n", err.msg); return EXIT_BAD_INPUT; }
    int n = 0, rc = EXIT_BAD_INPUT;
    int *ids = list ? parse_token_list(list, L.model.config.vocab_size, &n, a.bad, sizeof a.bad)
                    : tokenizer_encode(L.tok, prompt, strlen(prompt), 1, &n);
    KvSnapshot snap = {0};
    char model_name[128];
    base_name(dir, model_name, sizeof model_name);
    if (!ids) fprintf(stderr, "kv-extract: %s\n", a.bad[0] ? a.bad : "out of memory");
    else if (kv_snapshot_of_prompt(&L.model, ids, n, model_name, &snap, &err) ||
             kv_snapshot_save(out, &snap, strcmp(dtype, "f16") ? DT_F32 : DT_F16, &err))
        fprintf(stderr, "kv-extract: %s\n", err.msg);
    else {
        fprintf(stderr, "kv-extract: %d tokens x %d layers -> %s\n", n, L.model.config.n_layers, out);
        rc = EXIT_OK;
    }
    kv_snapshot_free(&snap);
    free(ids);
    modeldir_free(&L);
    return rc;
}

static int cmd_kv_info(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *file = NULL, *model = NULL;
    int json = 0;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "model", 1)) model = a.value;
        else if (flag(&a, "json", 0)) json = 1;
        else if (argv[a.i][0] != '-' && !file) file = argv[a.i++];
        else unknown_arg(&a);
    }
    if (!a.bad[0] && !file) snprintf(a.bad, sizeof a.bad, "missing FILE");
    if (a.bad[0]) return usage_error("kv-info", a.bad);
    Error err;
    int n_mismatches;
    if (kv_info(stdout, file, model, json, &n_mismatches, &err)) { fprintf(stderr, "kv-info: %s\n", err.msg); return EXIT_BAD_INPUT; }
    return n_mismatches > 0 ? EXIT_QUALITY : EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* compress, decompress, --quick-test */

/* "--scheme int4 -group-size 64" -> "int4-g64" (the seed's flags); any other spelling is kept. */
static int compose_scheme(const char *scheme, int group, KvLayered *out, char *bad, size_t badlen) {
    char name[64];
    const char *asym = strstr(scheme, "-asym");
    size_t stem = asym ? (size_t)(asym - scheme) : strlen(scheme);
    int plain_int = !strncmp(scheme, "int", 3) && strspn(scheme + 3, "0123456789") == stem - 3 && stem > 3;
    if (plain_int) snprintf(name, sizeof name, "%.*s-g%d%s", (int)stem, scheme, group, asym ? "-asym" : "");
    else snprintf(name, sizeof name, "%.63s", scheme);
    return layered_or_error(name, out, bad, badlen);
}

typedef struct {
    const char *input, *output;
    int metrics_only, verbose;
    KvLayered k_scheme, v_scheme;
    CompressOptions o;
} CompressArgs;

static int parse_compress(int argc, char **argv, CompressArgs *ca, char *bad, size_t badlen) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *scheme = "int4", *full = NULL, *k_full = NULL, *v_full = NULL;
    int group = 64;
    float sparsity = 0.0f, rmse = 0.10f, snr = 18.0f, cosine = 0.99f;
    memset(ca, 0, sizeof *ca);
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "input", 1) || flag(&a, "i", 1)) ca->input = a.value;
        else if (flag(&a, "output", 1) || flag(&a, "o", 1)) ca->output = a.value;
        else if (flag(&a, "scheme", 1)) scheme = a.value;
        else if (flag(&a, "kv-scheme", 1)) full = a.value;
        else if (flag(&a, "k-scheme", 1)) k_full = a.value;
        else if (flag(&a, "v-scheme", 1)) v_full = a.value;
        else if (flag(&a, "group-size", 1)) parse_int(&a, "group-size", 1, 1 << 20, &group);
        else if (flag(&a, "sparsity", 1)) parse_float(&a, "sparsity", -1e9f, 1e9f, &sparsity);
        else if (flag(&a, "max-rmse", 1)) parse_float(&a, "max-rmse", 0, 1e9f, &rmse);
        else if (flag(&a, "min-snr", 1)) parse_float(&a, "min-snr", -1e9f, 1e9f, &snr);
        else if (flag(&a, "min-cosine", 1)) parse_float(&a, "min-cosine", -1, 1, &cosine);
        else if (flag(&a, "lz4", 0)) ca->o.lz4 = 1;
        else if (flag(&a, "metrics-only", 0)) ca->metrics_only = 1;
        else if (flag(&a, "verbose", 0) || flag(&a, "v", 0)) ca->verbose = 1;
        else unknown_arg(&a);
    }
    if (!a.bad[0] && (!ca->input || (!ca->output && !ca->metrics_only)))
        snprintf(a.bad, sizeof a.bad, "needs -input IN and -output OUT (or --metrics-only)");
    if (!a.bad[0] && !(sparsity >= 0.0f && sparsity < 1.0f))
        snprintf(a.bad, sizeof a.bad, "-sparsity %g must be in [0, 1)", sparsity);
    if (!a.bad[0] && ca->output && !ca->metrics_only && !strcmp(ca->input, ca->output))
        snprintf(a.bad, sizeof a.bad, "-output must differ from -input");
    /* --kv-scheme (or --scheme and --group-size) names both sides; --k-scheme / --v-scheme one side */
    if (!a.bad[0] && full) layered_or_error(full, &ca->k_scheme, a.bad, sizeof a.bad);
    else if (!a.bad[0]) compose_scheme(scheme, group, &ca->k_scheme, a.bad, sizeof a.bad);
    ca->v_scheme = ca->k_scheme;
    if (!a.bad[0] && k_full) layered_or_error(k_full, &ca->k_scheme, a.bad, sizeof a.bad);
    if (!a.bad[0] && v_full) layered_or_error(v_full, &ca->v_scheme, a.bad, sizeof a.bad);
    ca->o.k_scheme = &ca->k_scheme;
    ca->o.v_scheme = &ca->v_scheme;
    ca->o.sparsity = sparsity;
    ca->o.max_rmse = rmse;
    ca->o.min_snr_db = snr;
    ca->o.min_cosine = cosine;
    if (ca->metrics_only) ca->output = NULL;
    snprintf(bad, badlen, "%s", a.bad);
    return a.bad[0] ? -1 : 0;
}

static int cmd_compress(int argc, char **argv) {
    CompressArgs ca;
    char bad[256];
    if (parse_compress(argc, argv, &ca, bad, sizeof bad)) return usage_error("compress", bad);
    Error err;
    KvSnapshot snap;
    CompressReport r;
    if (kv_snapshot_load(ca.input, &snap, &err)) { fprintf(stderr, "compress: %s\n", err.msg); return EXIT_BAD_INPUT; }
    if (kv_compress(&snap, &ca.o, ca.output, &r, NULL, &err)) {
        fprintf(stderr, "compress: %s: %s\n", ca.input, err.msg);
        kv_snapshot_free(&snap);
        return EXIT_BAD_INPUT;
    }
    report_compress_json(stdout, &r, &ca.o, 1);
    if (ca.verbose) report_compress_text(stderr, &r, &ca.o);
    int rc = r.passed ? EXIT_OK : EXIT_QUALITY;
    compress_report_free(&r);
    kv_snapshot_free(&snap);
    return rc;
}

static int cmd_decompress(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    const char *in = NULL, *out = NULL;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "input", 1) || flag(&a, "i", 1)) in = a.value;
        else if (flag(&a, "output", 1) || flag(&a, "o", 1)) out = a.value;
        else unknown_arg(&a);
    }
    if (!a.bad[0] && (!in || !out)) snprintf(a.bad, sizeof a.bad, "needs -input IN and -output OUT");
    if (!a.bad[0] && !strcmp(in, out)) snprintf(a.bad, sizeof a.bad, "-output must differ from -input");
    if (a.bad[0]) return usage_error("decompress", a.bad);
    Error err;
    KvSnapshot snap;
    if (kv_decompress_file(in, &snap, &err)) { fprintf(stderr, "decompress: %s\n", err.msg); return EXIT_BAD_INPUT; }
    int rc = kv_snapshot_save(out, &snap, DT_F32, &err) ? EXIT_BAD_INPUT : EXIT_OK;
    if (rc) fprintf(stderr, "decompress: %s\n", err.msg);
    kv_snapshot_free(&snap);
    return rc;
}

static int cmd_quick_test(void) {
    Error err;
    int passed;
    if (quick_test_run(stdout, &passed, &err)) { fprintf(stderr, "quick-test: %s\n", err.msg); return EXIT_BAD_INPUT; }
    return passed ? EXIT_OK : EXIT_QUALITY;
}

/* ------------------------------------------------------------------------- */
/* --validate */

#define BUNDLED_MODEL "data/models/mini-llama-brown"
#define TINYLLAMA_DIR "models/tinyllama"
#define VALIDATE_WINDOWS 8   /* about 5 s on the bundled model with 2 cores */

/* "0.5" is a perplexity delta; "0.5%" a relative one. Either replaces both default bars. */
static int parse_threshold(Args *a, ValidateOptions *o) {
    char *end;
    errno = 0;
    double value = strtod(a->value, &end);
    int percent = *end == '%';
    if (percent) end++;
    if (errno || end == a->value || *end || !(value > 0) || !isfinite(value)) {
        snprintf(a->bad, sizeof a->bad, "--threshold: expected a positive number or percentage, got '%s'", a->value);
        return -1;
    }
    o->threshold_ppl = percent ? 0 : value;
    o->threshold_percent = percent ? value : 0;
    return 0;
}

static int cmd_validate(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    ValidateOptions o = {0};
    const char *kv = "int4-g64", *ks = NULL, *vs = NULL;
    int json = 0;
    o.text_file = DEFAULT_TEXT;
    o.threshold_ppl = 0.5;
    o.threshold_percent = 1.0;
    o.windows = VALIDATE_WINDOWS;
    o.stride = 512;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "model", 1)) o.model_dir = a.value;
        else if (flag(&a, "threshold", 1)) parse_threshold(&a, &o);
        else if (flag(&a, "kv-scheme", 1)) kv = a.value;
        else if (flag(&a, "k-scheme", 1)) ks = a.value;
        else if (flag(&a, "v-scheme", 1)) vs = a.value;
        else if (flag(&a, "windows", 1)) parse_int(&a, "windows", 1, 1 << 20, &o.windows);
        else if (flag(&a, "ctx", 1)) parse_int(&a, "ctx", 2, 1 << 20, &o.ctx);
        else if (flag(&a, "stride", 1)) parse_int(&a, "stride", 1, 1 << 20, &o.stride);
        else if (flag(&a, "text-file", 1)) o.text_file = a.value;
        else if (flag(&a, "quiet", 0)) o.quiet = 1;
        else if (flag(&a, "json", 0)) json = 1;
        else unknown_arg(&a);
    }
    KvLayered k_scheme, v_scheme;
    if (!a.bad[0]) layered_or_error(ks ? ks : kv, &k_scheme, a.bad, sizeof a.bad);
    if (!a.bad[0]) layered_or_error(vs ? vs : kv, &v_scheme, a.bad, sizeof a.bad);
    if (a.bad[0]) return usage_error("validate", a.bad);
    o.k_scheme = &k_scheme;
    o.v_scheme = &v_scheme;
    if (o.model_dir) o.model_note = "--model";
    else if (path_exists(TINYLLAMA_DIR "/model.safetensors")) { o.model_dir = TINYLLAMA_DIR; o.model_note = "exported TinyLlama"; }
    else { o.model_dir = BUNDLED_MODEL; o.model_note = "bundled"; }
    FILE *out = o.quiet ? NULL : json ? stderr : stdout;
    if (out && !strcmp(o.model_note, "bundled"))
        fprintf(out, "Using the bundled model %s. For TinyLlama-1.1B run:\n"
                     "  python3 export/export.py TinyLlama/TinyLlama-1.1B-Chat-v1.0 " TINYLLAMA_DIR "\n\n", BUNDLED_MODEL);

    Error err;
    ModelDir L;
    if (modeldir_load(&L, o.model_dir, 1, &err)) { fprintf(stderr, "validate: %s\n", err.msg); return EXIT_BAD_INPUT; }
    if (!o.ctx) o.ctx = L.model.config.max_seq_len;
    ValidateResult r;
    int rc = validate_run(&L.model, L.tok, &o, out, &r, &err);
    modeldir_free(&L);
    if (rc) { fprintf(stderr, "validate: %s\n", err.msg); return EXIT_BAD_INPUT; }
    if (out) validate_print_results(out, &o, &r);
    if (json) validate_print_json(stdout, &o, &r);
    return r.passed ? EXIT_OK : EXIT_QUALITY;
}

/* ------------------------------------------------------------------------- */
/* bench */

#define TINYLLAMA_CONFIG "data/tinyllama-1.1b-chat-v1.0/config.json"

/* --random NAME: "tinyllama", a config.json, or a directory holding one. */
static void random_config_path(const char *name, char *out, size_t n) {
    if (!strcmp(name, "tinyllama")) snprintf(out, n, "%s", TINYLLAMA_CONFIG);
    else if (strlen(name) > 5 && !strcmp(name + strlen(name) - 5, ".json")) snprintf(out, n, "%s", name);
    else snprintf(out, n, "%s/config.json", name);
}

static int cmd_bench(int argc, char **argv) {
    Args a = {argc, argv, 2, NULL, {0}};
    BenchOptions o;
    bench_default_options(&o);
    const char *dir = NULL, *random = NULL, *dtype = "bf16", *precision = "bf16";
    int json = 0;
    while (a.i < argc && !a.bad[0]) {
        if (flag(&a, "random", 1)) random = a.value;
        else if (flag(&a, "p", 1)) parse_int(&a, "p", 1, 1 << 16, &o.prompt);
        else if (flag(&a, "n", 1)) parse_int(&a, "n", 1, 1 << 16, &o.gen);
        else if (flag(&a, "ctx", 1)) parse_int(&a, "ctx", 0, 1 << 20, &o.long_ctx);
        else if (flag(&a, "kv-scheme", 1)) layered_or_error(a.value, &o.scheme, a.bad, sizeof a.bad);
        else if (flag(&a, "long-scheme", 1)) {
            layered_or_error(a.value, &o.long_k, a.bad, sizeof a.bad);
            o.long_v = o.long_k;
        }
        else if (flag(&a, "long-k-scheme", 1)) layered_or_error(a.value, &o.long_k, a.bad, sizeof a.bad);
        else if (flag(&a, "long-v-scheme", 1)) layered_or_error(a.value, &o.long_v, a.bad, sizeof a.bad);
        else if (flag(&a, "threads", 1)) parse_int(&a, "threads", 1, 1024, &o.threads);
        else if (flag(&a, "repeat", 1)) parse_int(&a, "repeat", 1, 64, &o.repeats);
        else if (flag(&a, "dtype", 1)) dtype = a.value;
        else if (flag(&a, "precision", 1)) precision = a.value;
        else if (flag(&a, "no-probe", 0)) o.probe_machine = 0;
        else if (flag(&a, "ppl", 0)) o.ppl_windows = 4;
        else if (flag(&a, "ppl-windows", 1)) parse_int(&a, "ppl-windows", 2, 1 << 16, &o.ppl_windows);
        else if (flag(&a, "ppl-batch", 1)) parse_int(&a, "ppl-batch", 1, 4096, &o.ppl_batch);
        else if (flag(&a, "json", 0)) json = 1;
        else if (argv[a.i][0] != '-' && !dir) dir = argv[a.i++];
        else unknown_arg(&a);
    }
    DType dt = DT_BF16;
    if (!a.bad[0] && !dir == !random) snprintf(a.bad, sizeof a.bad, "give MODEL_DIR or --random NAME");
    if (!a.bad[0] && strcmp(precision, "bf16") && strcmp(precision, "exact"))
        snprintf(a.bad, sizeof a.bad, "--precision must be bf16 or exact");
    if (!a.bad[0] && (!strcmp(dtype, "f32") || !strcmp(dtype, "F32"))) dt = DT_F32;
    else if (!a.bad[0] && (!strcmp(dtype, "f16") || !strcmp(dtype, "F16"))) dt = DT_F16;
    else if (!a.bad[0] && strcmp(dtype, "bf16") && strcmp(dtype, "BF16"))
        snprintf(a.bad, sizeof a.bad, "--dtype must be bf16, f16 or f32");
    if (a.bad[0]) return usage_error("bench", a.bad);

    Error err;
    Model m;
    char config[4096], name[256];
    if (random) {
        random_config_path(random, config, sizeof config);
        snprintf(name, sizeof name, "random %s", random);
        if (model_init_random(&m, config, dt, 1234, &err)) { fprintf(stderr, "bench: %s\n", err.msg); return EXIT_BAD_INPUT; }
    } else {
        snprintf(name, sizeof name, "%s", dir);
        if (model_load(&m, dir, &err)) { fprintf(stderr, "bench: %s\n", err.msg); return EXIT_BAD_INPUT; }
    }
    m.precision = strcmp(precision, "exact") ? MATMUL_BF16_ACT : MATMUL_EXACT;
    BenchResult r;
    int rc = bench_run(&m, name, &o, &r, &err);
    model_free(&m);
    if (rc) { fprintf(stderr, "bench: %s\n", err.msg); return EXIT_BAD_INPUT; }
    if (json) bench_print_json(stdout, &r);
    else bench_print_text(stdout, &r);
    return EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* schemes */

static int cmd_schemes(void) {
    print_scheme_list(stdout);
    return EXIT_OK;
}

/* ------------------------------------------------------------------------- */

/* "./run COMMAND --help" prints the usage too. (A prompt or path spelled "--help" cannot be given.) */
static int asks_for_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help") || !strcmp(argv[i], "-h")) return 1;
    return !strcmp(argv[1], "help");
}

int main(int argc, char **argv) {
    if (argc < 2) { print_usage(stderr); return EXIT_BAD_INPUT; }
    const char *cmd = argv[1];
    if (asks_for_help(argc, argv)) { print_usage(stdout); return EXIT_OK; }
    if (!strcmp(cmd, "generate")) return cmd_generate(argc, argv);
    if (!strcmp(cmd, "logits")) return cmd_logits(argc, argv);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc, argv);
    if (!strcmp(cmd, "ppl")) return cmd_ppl(argc, argv);
    if (!strcmp(cmd, "ppl-merge")) return cmd_ppl_merge(argc, argv);
    if (!strcmp(cmd, "sweep")) return cmd_sweep(argc, argv);
    if (!strcmp(cmd, "sweep-merge")) return cmd_sweep_merge(argc, argv);
    if (!strcmp(cmd, "kv-extract")) return cmd_kv_extract(argc, argv);
    if (!strcmp(cmd, "kv-info")) return cmd_kv_info(argc, argv);
    if (!strcmp(cmd, "compress")) return cmd_compress(argc, argv);
    if (!strcmp(cmd, "decompress")) return cmd_decompress(argc, argv);
    if (!strcmp(cmd, "--quick-test") || !strcmp(cmd, "-quick-test")) return cmd_quick_test();
    if (!strcmp(cmd, "--validate") || !strcmp(cmd, "-validate") || !strcmp(cmd, "validate")) return cmd_validate(argc, argv);
    if (!strcmp(cmd, "schemes")) return cmd_schemes();
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    fprintf(stderr, "run: unknown command '%s'\n", cmd);
    print_usage(stderr);
    return EXIT_BAD_INPUT;
}
