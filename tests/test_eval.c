/* tests/test_eval.c: perplexity against the independent reference — the HF sliding-window
 * rows of mini-llama-brown (no quantization and the KV cache quantized as written), the
 * llama.cpp protocol on stories260K against llama-perplexity itself — plus the WikiText-2
 * token stream and exact shard merging. */
#include "tests/test.h"
#include "eval/perplexity.h"
#include "eval/wikitext.h"
#include "model/json.h"
#include "model/fileio.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PPL_REL_TOL 1e-4        /* 0.01%, the bound for the HF rows */
#define LLAMACPP_REL_TOL 5e-4   /* 0.05% of llama.cpp's own final value */

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

static PplOptions hf_options(const KvScheme *scheme, int windows) {
    PplOptions o = {0};
    o.protocol = PPL_HF;
    o.ctx = 1024;
    o.stride = 512;
    o.max_windows = windows;
    o.shard_count = 1;
    o.batch = 256;
    o.k_scheme = o.v_scheme = scheme;
    return o;
}

static void check_hf_rows(const Setup *s) {
    JsonValue *ref = load_json("tests/fixtures/reference/mini-llama-brown-ppl.json");
    const JsonValue *rows = json_get(ref, "results");
    for (size_t i = 0; rows && i < rows->count; i++) {
        const char *kv = json_get(&rows->items[i], "kv")->string;
        double want = json_get(&rows->items[i], "ppl")->number;
        long want_scored = (long)json_get(&rows->items[i], "scored_tokens")->number;
        char name[128];
        snprintf(name, sizeof name, "mini-llama-brown ppl, KV %s, 4 windows of 1024", kv);
        const KvScheme *scheme = kv_scheme_find(kv);
        if (!scheme) { check(0, name, "no such scheme"); continue; }
        PplOptions o = hf_options(scheme, 4);
        PplResult r;
        Error err;
        if (ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &r, &err)) { check(0, name, "%s", err.msg); continue; }
        double got = ppl_value(r.nll_sum, r.scored), rel = fabs(got - want) / want;
        check(rel <= PPL_REL_TOL && r.scored == want_scored, name, "ppl %.5f vs %.5f (rel %.2g > %.0e), %ld vs %ld tokens",
              got, want, rel, PPL_REL_TOL, r.scored, want_scored);
        printf("     ppl %.5f, reference %.5f, relative difference %.2g (tolerance %.0e)\n", got, want, rel, PPL_REL_TOL);
    }
    check(rows != NULL, "mini-llama-brown-ppl.json readable", "");
    json_free(ref);
}

/* A sum over shards equals the single run's to 1e-9 relative (only the order of additions differs). */
static int sums_agree(double shards, double whole) { return fabs(shards - whole) <= 1e-9 * fabs(whole) + 1e-12; }

/* Shards 0/3, 1/3, 2/3 add up to the single run's sums. */
static void check_shards(const Setup *s) {
    const KvScheme *scheme = kv_scheme_find("int4-g64");
    PplOptions o = hf_options(scheme, 3);
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
        nll += part.nll_sum; base += part.base_nll_sum; kl += part.kl_sum;
        scored += part.scored; agree += part.top1_agree;
    }
    if (!check(failed < 0, "shards: each of 3 shards runs", "shard %d: %s", failed, err.msg)) return;
    /* int4 moves some predictions: a run that scored nothing would add up too, trivially */
    check(whole.scored > 0 && whole.kl_sum > 0 && scored == whole.scored && agree == whole.top1_agree &&
          sums_agree(nll, whole.nll_sum) && sums_agree(base, whole.base_nll_sum) && sums_agree(kl, whole.kl_sum),
          "3 shards add up to the single run", "nll %.12g vs %.12g, %ld vs %ld tokens", nll, whole.nll_sum, scored, whole.scored);
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
    o.k_scheme = o.v_scheme = kv_scheme_find("fp32");
    PplResult r;
    Error err;
    if (check(ppl_evaluate(&s.model, s.tokens, s.n_tokens, &o, &r, &err) == 0, "llama.cpp protocol runs", "%s", err.msg)) {
        double got = ppl_value(r.nll_sum, r.scored), rel = fabs(got - llamacpp) / llamacpp;
        check(rel <= LLAMACPP_REL_TOL, "llama.cpp protocol within 0.05% of llama-perplexity", "%.5f vs %.4f (rel %.2g)", got, llamacpp, rel);
        printf("     ppl %.5f, llama.cpp %.4f (rel %.2g, tolerance %.0e), independent reference %.5f\n", got, llamacpp, rel,
               LLAMACPP_REL_TOL, want);
        check(r.scored == 16 * 63, "llama.cpp protocol scores 63 tokens per chunk", "%ld", r.scored);
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
    teardown(&s);
    check_llamacpp();
    return test_exit_code();
}
