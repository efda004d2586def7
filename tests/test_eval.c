/* tests/test_eval.c: perplexity against the independent reference — the HF sliding-window
 * rows of mini-llama-brown (no quantization and the KV cache quantized as written; with KL
 * divergence and top-1 agreement for the scheme pairs of kv-schemes-mini-llama-brown.json),
 * the llama.cpp protocol on stories260K against llama-perplexity itself — plus the WikiText-2
 * token stream, exact shard merging and the paired standard error of the NLL delta. `make check`
 * (KVQ_QUICK=1) runs one HF row in QUICK_ROW_STEP (fp32 among them), and says so. */
#include "tests/test.h"
#include "eval/perplexity.h"
#include "eval/wikitext.h"
#include "model/formats/json.h"
#include "model/formats/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PPL_REL_TOL 1e-4        /* 0.01%, the bound for the HF rows */
#define LLAMACPP_REL_TOL 5e-4   /* 0.05% of llama.cpp's own final value */
#define QUICK_ROW_STEP 2

static JsonValue *load_json(const char *path) {
    Error err;
    size_t len;
    char *text = read_whole_file(path, 1 << 20, &len, &err);
    JsonValue *v = text ? json_parse(text, len, &err) : NULL;
    free(text);
    return v;
}

typedef struct {
    Model model;
    Tokenizer *tok;
    int *tokens;
    int n_tokens;
} Setup;

static int setup(Setup *s, const char *dir, int hf_recipe) {
    Error err;
    char path[256], msg[256];
    memset(s, 0, sizeof *s);
    if (model_load(&s->model, dir, &err)) { printf("%s\n", err.msg); return -1; }
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    s->tok = tokenizer_load(path, msg, sizeof msg);
    if (!s->tok) return -1;
    s->tokens = load_eval_tokens("data/wikitext-2-raw/wiki.test.raw", s->tok, hf_recipe, &s->n_tokens, &err);
    return s->tokens ? 0 : -1;
}

static void teardown(Setup *s) {
    free(s->tokens);
    tokenizer_free(s->tok);
    model_free(&s->model);
}

static void check_wikitext_tokens(const Setup *s) {
    JsonValue *ref = load_json("tests/fixtures/reference/wikitext2-test-tokens.json");
    const JsonValue *first = json_get(ref, "first_64"), *last = json_get(ref, "last_16"), *count = json_get(ref, "n_tokens");
    if (!check(first && last && count, "wikitext2-test-tokens.json readable", "missing or broken")) { json_free(ref); return; }
    int n = (int)count->number, ok = s->n_tokens == n;
    for (size_t i = 0; ok && i < first->count; i++) ok = s->tokens[i] == (int)first->items[i].number;
    for (size_t i = 0; ok && i < last->count; i++) ok = s->tokens[n - 16 + (int)i] == (int)last->items[i].number;
    check(ok, "WikiText-2 HF recipe tokens (count, first 64, last 16)", "%d tokens, reference %d", s->n_tokens, n);
    json_free(ref);
}

/* A scheme by its text, in buf; NULL when it does not parse. */
static const KvLayered *scheme_named(const char *text, KvSide side, KvLayered *buf) {
    char why[160];
    return kv_layered_parse(text, side, buf, why, sizeof why) == 0 ? buf : NULL;
}

static PplOptions hf_options(const KvCacheScheme *scheme, int windows) {
    PplOptions o = {0};
    o.protocol = PPL_HF;
    o.ctx = 1024;
    o.stride = 512;
    o.max_windows = windows;
    o.shard_count = 1;
    o.batch = 256;
    o.scheme = scheme;
    return o;
}

/* One evaluation per (keys, values) pair over the reference protocol (HF, ctx 1024, stride
 * 512, first 4 windows): each costs a few seconds (ten times that under the sanitizers), and
 * the two reference files share pairs, so a run with the fp32 baseline (compare) is kept and
 * serves every check of its pair. */
typedef struct {
    char k[512], v[512];   /* the schemes' text */
    int rc;
    char msg[256];
    PplResult r;
} Evaluation;

#define MAX_EVALUATIONS 64
static Evaluation evaluations[MAX_EVALUATIONS];
static int n_evaluations;

static const Evaluation *evaluate(const Setup *s, const char *k_text, const char *v_text) {
    for (int i = 0; i < n_evaluations; i++)
        if (!strcmp(evaluations[i].k, k_text) && !strcmp(evaluations[i].v, v_text)) return &evaluations[i];
    if (n_evaluations == MAX_EVALUATIONS) return NULL;
    Evaluation *e = &evaluations[n_evaluations++];
    KvCacheScheme scheme = {0};
    Error err = {{0}};
    snprintf(e->k, sizeof e->k, "%s", k_text);
    snprintf(e->v, sizeof e->v, "%s", v_text);
    if (!scheme_named(k_text, KV_SIDE_KEYS, &scheme.k) || !scheme_named(v_text, KV_SIDE_VALUES, &scheme.v)) {
        e->rc = -1;
        snprintf(e->msg, sizeof e->msg, "scheme K %s V %s does not parse", k_text, v_text);
        return e;
    }
    PplOptions o = hf_options(&scheme, 4);
    o.compare = 1;
    e->rc = ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &e->r, &err);
    snprintf(e->msg, sizeof e->msg, "%s", err.msg);
    return e;
}

/* The evaluation of a pair, or NULL after a FAIL line under name. */
static const PplResult *evaluation_or_fail(const Setup *s, const char *k, const char *v, const char *name) {
    const Evaluation *e = evaluate(s, k, v);
    if (!e) { check(0, name, "more than %d scheme pairs", MAX_EVALUATIONS); return NULL; }
    if (e->rc) { check(0, name, "%s", e->msg); return NULL; }
    return &e->r;
}

/* Perplexity (and scored tokens) against a reference row. */
static void check_ppl(const PplResult *r, double want, long want_scored, const char *name) {
    double got = ppl_value(r->sums.nll_sum, r->sums.scored), rel = fabs(got - want) / want;
    check(rel <= PPL_REL_TOL && r->sums.scored == want_scored, name, "ppl %.5f vs %.5f (rel %.2g > %.0e), %ld vs %ld tokens",
          got, want, rel, PPL_REL_TOL, r->sums.scored, want_scored);
    printf("     ppl %.5f, reference %.5f, relative difference %.2g (tolerance %.0e)\n", got, want, rel, PPL_REL_TOL);
}

static void check_hf_rows(const Setup *s) {
    JsonValue *ref = load_json("tests/fixtures/reference/mini-llama-brown-ppl.json");
    const JsonValue *rows = json_get(ref, "results");
    size_t step = test_quick() ? QUICK_ROW_STEP : 1;
    if (step > 1 && rows) printf("mini-llama-brown ppl: one row in %zu of %zu run (KVQ_QUICK)\n", step, rows->count);
    for (size_t i = 0; rows && i < rows->count; i += step) {
        const char *kv = json_get(&rows->items[i], "kv")->string;
        double want = json_get(&rows->items[i], "ppl")->number;
        long want_scored = (long)json_get(&rows->items[i], "scored_tokens")->number;
        char name[128];
        snprintf(name, sizeof name, "mini-llama-brown ppl, KV %s, 4 windows of 1024", kv);
        const PplResult *r = evaluation_or_fail(s, kv, kv, name);
        if (r) check_ppl(r, want, want_scored, name);
    }
    check(rows != NULL, "mini-llama-brown-ppl.json readable", "");
    json_free(ref);
}

/* KL divergence and top-1 agreement of every row of the scheme reference files, on both bundled
 * models: tests/test_schemes_ref.c. */

/* A sum over shards equals the single run's to 1e-9 relative (only the order of additions differs). */
static int sums_agree(double shards, double whole) { return fabs(shards - whole) <= 1e-9 * fabs(whole) + 1e-12; }

/* Shards 0/3, 1/3, 2/3 add up to the single run's sums. */
static void check_shards(const Setup *s) {
    KvCacheScheme int4 = {0};
    scheme_named("int4-g64", KV_SIDE_KEYS, &int4.k);
    scheme_named("int4-g64", KV_SIDE_VALUES, &int4.v);
    PplOptions o = hf_options(&int4, 3);
    o.ctx = 256;
    o.stride = 128;
    o.compare = 1;
    PplResult whole, part;
    Error err;
    if (!check(ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &whole, &err) == 0, "shards: the single run runs", "%s", err.msg))
        return;
    double nll = 0, base = 0, kl = 0;
    long scored = 0, agree = 0;
    o.shard_count = 3;
    int failed = -1;
    for (int i = 0; i < 3 && failed < 0; i++) {
        o.shard_index = i;
        if (ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &part, &err)) failed = i;
        nll += part.sums.nll_sum; base += part.sums.base_nll_sum; kl += part.sums.kl_sum;
        scored += part.sums.scored; agree += part.sums.top1_agree;
    }
    if (!check(failed < 0, "shards: each of 3 shards runs", "shard %d: %s", failed, err.msg)) return;
    /* int4 moves some predictions: a run that scored nothing would add up too, trivially */
    check(whole.sums.scored > 0 && whole.sums.kl_sum > 0 && scored == whole.sums.scored && agree == whole.sums.top1_agree &&
          sums_agree(nll, whole.sums.nll_sum) && sums_agree(base, whole.sums.base_nll_sum) && sums_agree(kl, whole.sums.kl_sum),
          "3 shards add up to the single run", "nll %.12g vs %.12g, %ld vs %ld tokens", nll, whole.sums.nll_sum, scored, whole.sums.scored);
}

/* -log softmax(row)[target], in double. */
static double token_nll(const float *row, int vocab, int target) {
    double max = row[0], sum = 0;
    for (int i = 1; i < vocab; i++) max = row[i] > max ? row[i] : max;
    for (int i = 0; i < vocab; i++) sum += exp((double)row[i] - max);
    return -((double)row[target] - max - log(sum));
}

/* The NLL of every target the HF recipe scores in o's windows, the cache storing keys as k
 * and values as v, written straight from the recipe (tests/fixtures/reference/README.md):
 * each window from an empty cache, only targets no earlier window scored. Writes at most cap
 * values; returns how many targets were scored (-1: the buffers could not be set up). */
static long per_token_nll(const Setup *s, const PplOptions *o, const KvCacheScheme *scheme, double *nll, long cap,
                          Error *err) {
    const Config *c = &s->model.config;
    RunState rs;
    KvCache kv;
    if (runstate_init(&rs, c, o->ctx, err)) return -1;
    if (kv_cache_init(&kv, c, o->ctx, o->ctx, scheme, s->model.rope_inv_freq, err)) { runstate_free(&rs); return -1; }
    long n = 0;
    int scored_end = 1;   /* targets before this were scored earlier (token 0 has no context) */
    for (int w = 0; w < o->max_windows; w++) {
        int begin = w * o->stride, end = begin + o->ctx < s->n_tokens ? begin + o->ctx : s->n_tokens;
        int from = scored_end - 1 - begin;   /* the logits row that predicts the first new target */
        kv.len = 0;
        forward(&s->model, &rs, &kv, s->tokens + begin, end - begin, 0, from);
        for (int t = scored_end; t < end; t++, n++)
            if (n < cap) nll[n] = token_nll(rs.logits + (size_t)(t - 1 - begin - from) * c->vocab_size, c->vocab_size, s->tokens[t]);
        scored_end = end;
    }
    kv_cache_free(&kv);
    runstate_free(&rs);
    return n;
}

/* Mean and standard error of the mean of a[i] - b[i], two passes (no sum-of-squares cancellation). */
static void paired_mean_stderr(const double *a, const double *b, long n, double *mean, double *se) {
    double sum = 0, ss = 0;
    for (long i = 0; i < n; i++) sum += a[i] - b[i];
    *mean = sum / n;
    for (long i = 0; i < n; i++) ss += (a[i] - b[i] - *mean) * (a[i] - b[i] - *mean);
    *se = sqrt(ss / (n - 1) / n);
}

#define STDERR_REL_TOL 1e-6   /* same logits, other summation order; n vs n - 1 would be 1e-3 off */

/* The paired standard error of the NLL delta (quantized - fp32 cache, token by token), as
 * ppl reports it, against the same figure computed here from per-token NLLs. */
static void check_paired_stderr(const Setup *s) {
    KvCacheScheme int4 = {0};
    const KvCacheScheme *fp32 = NULL;
    const Evaluation *self = evaluate(s, "fp32", "fp32");
    check(self && self->rc == 0 && self->r.compared && self->r.sums.diff_sum == 0 && self->r.sums.diff_sumsq == 0 &&
          ppl_stderr_mean(self->r.sums.diff_sum, self->r.sums.diff_sumsq, self->r.sums.scored) == 0,
          "paired standard error of fp32 against itself is 0", "differences summed to %g", self ? self->r.sums.diff_sum : NAN);
    scheme_named("int4-g64", KV_SIDE_KEYS, &int4.k);
    scheme_named("int4-g64", KV_SIDE_VALUES, &int4.v);
    PplOptions o = hf_options(&int4, 3);
    o.ctx = 256;
    o.stride = 128;
    o.compare = 1;
    PplResult r;
    Error err;
    if (!check(ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &r, &err) == 0, "int4-g64 NLL delta: evaluation runs",
               "%s", err.msg))
        return;
    double se = ppl_stderr_mean(r.sums.diff_sum, r.sums.diff_sumsq, r.sums.scored), mean_direct, se_direct;
    check(isfinite(se) && se > 0, "int4-g64 NLL delta: paired standard error finite and positive", "%g", se);
    double *quant = calloc((size_t)r.sums.scored + 1, sizeof(double)), *base = calloc((size_t)r.sums.scored + 1, sizeof(double));
    long n_quant = per_token_nll(s, &o, &int4, quant, r.sums.scored, &err);
    long n_base = n_quant == r.sums.scored ? per_token_nll(s, &o, fp32, base, r.sums.scored, &err) : -1;
    const char *name = "int4-g64 NLL delta: mean and paired standard error equal a two-pass computation over per-token NLLs";
    if (check(n_quant == r.sums.scored && n_base == r.sums.scored, "int4-g64 NLL delta: one per-token value per scored token",
              "%ld and %ld per-token values for %ld scored tokens %s", n_quant, n_base, r.sums.scored, err.msg)) {
        paired_mean_stderr(quant, base, r.sums.scored, &mean_direct, &se_direct);
        double mean = r.sums.diff_sum / r.sums.scored, dmean = fabs(mean - mean_direct), dse = fabs(se - se_direct) / se_direct;
        check(dmean <= STDERR_REL_TOL * fabs(mean_direct) && dse <= STDERR_REL_TOL, name,
              "mean %.9g vs %.9g, stderr %.9g vs %.9g (rel %.2g > %.0e)", mean, mean_direct, se, se_direct, dse, STDERR_REL_TOL);
        printf("     mean delta %.6g +/- %.6g, per-token computation %.6g +/- %.6g (rel %.2g, %.2g; tolerance %.0e)\n", mean,
               se, mean_direct, se_direct, dmean / fabs(mean_direct), dse, STDERR_REL_TOL);
    }
    free(quant);
    free(base);
}

static void check_llamacpp(void) {
    Setup s;
    if (!check(setup(&s, "data/models/stories260K", 0) == 0, "stories260K setup", "cannot load")) return;
    JsonValue *ref = load_json("tests/fixtures/reference/stories260K-llamacpp-ppl.json");
    const JsonValue *independent = json_get(ref, "independent_reference_final"), *n_whole = json_get(ref, "n_tokens_whole_file");
    const JsonValue *final = json_get(ref, "llama_cpp_final");   /* "PPL = 103.1860 +/- 10.89350" */
    if (!check(independent && n_whole && final && final->type == JSON_STRING && strchr(final->string, '='),
               "stories260K-llamacpp-ppl.json readable", "missing or broken")) {
        json_free(ref);
        teardown(&s);
        return;
    }
    double want = independent->number, llamacpp = atof(strchr(final->string, '=') + 1);
    int n_ref = (int)n_whole->number;
    check(s.n_tokens == n_ref, "stories260K whole-file tokens", "%d vs %d", s.n_tokens, n_ref);
    PplOptions o = {0};
    o.protocol = PPL_LLAMACPP;
    o.ctx = 128;
    o.max_windows = 16;
    o.shard_count = 1;
    o.batch = 128;
    o.scheme = NULL;   /* fp32 */
    PplResult r;
    Error err;
    if (check(ppl_evaluate(&s.model, s.tokens, s.n_tokens, &o, &r, &err) == 0, "llama.cpp protocol runs", "%s", err.msg)) {
        double got = ppl_value(r.sums.nll_sum, r.sums.scored), rel = fabs(got - llamacpp) / llamacpp;
        check(rel <= LLAMACPP_REL_TOL, "llama.cpp protocol within 0.05% of llama-perplexity", "%.5f vs %.4f (rel %.2g)", got, llamacpp, rel);
        printf("     ppl %.5f, llama.cpp %.4f (rel %.2g, tolerance %.0e), independent reference %.5f\n", got, llamacpp, rel,
               LLAMACPP_REL_TOL, want);
        check(r.sums.scored == 16 * 63, "llama.cpp protocol scores 63 tokens per chunk", "%ld", r.sums.scored);
    }
    json_free(ref);
    teardown(&s);
}

int main(void) {
    Setup s;
    if (!check(setup(&s, "data/models/mini-llama-brown", 1) == 0, "mini-llama-brown setup", "cannot load")) return 1;
    check_wikitext_tokens(&s);
    check_hf_rows(&s);
    check_shards(&s);
    check_paired_stderr(&s);
    teardown(&s);
    check_llamacpp();
    return test_exit_code();
}
