/* eval/generate.c: generation, the logits of a token list and tokenization (see eval/generate.h). */
#include "eval/calibration.h"
#include "eval/generate.h"
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include "model/sampler.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* TinyLlama-Chat's template: <|user|>\n{prompt}</s>\n<|assistant|>\n */
static char *chat_prompt(const char *prompt) {
    const char *pre = "<|user|>\n", *post = "</s>\n<|assistant|>\n";
    size_t n = strlen(pre) + strlen(prompt) + strlen(post) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", pre, prompt, post);
    return s;
}

/* The prompt's ids (BOS first) in an array of steps entries, room for what is generated. */
static int *prompt_tokens(const Tokenizer *tok, const GenerateOptions *o, int steps, int *n_prompt, Error *err) {
    char *text = o->chat ? chat_prompt(o->prompt) : strdup(o->prompt);
    int *tokens = text ? tokenizer_encode(tok, text, strlen(text), 1, n_prompt) : NULL;
    free(text);
    int *seq = tokens ? realloc(tokens, (size_t)steps * sizeof *seq) : NULL;
    if (!seq) {
        free(tokens);
        error_set(err, "out of memory");
        return NULL;
    }
    if (*n_prompt >= steps) {
        /* worded for ./run generate, whose -n sets steps */
        error_set(err, "the prompt is %d tokens; -n %d leaves no room to generate", *n_prompt, steps);
        free(seq);
        return NULL;
    }
    return seq;
}

/* What sampling runs: the model and its tokenizer, the prefilled state and cache, the sampler. */
typedef struct {
    const Model *m;
    const Tokenizer *tok;
    RunState *s;
    KvCache *kv;
    Sampler *sampler;
} Sampling;

/* Samples from the prefilled state at pos onwards, writing each token's text as it comes. */
static int sample_tokens(const Sampling *g, int *tokens, int pos, int steps, FILE *out) {
    char piece[64];
    for (; pos < steps; pos++) {
        int next = sampler_next(g->sampler, g->s->logits);
        if (next == g->m->config.eos_id) break;
        tokens[pos] = next;
        int len = tokenizer_piece_bytes(g->tok, tokens[pos - 1], next, piece);
        fwrite(piece, 1, (size_t)len, out);
        fflush(out);
        if (pos + 1 < steps) forward(g->m, g->s, g->kv, &tokens[pos], 1, pos, 0);
    }
    return pos;
}

/* The prompt's and the generation's speeds, for the line generate_from_dir ends with. */
typedef struct {
    int prompt_tokens, generated;
    double prompt_seconds, generate_seconds;
} GenerateStats;

static int generate_text(const Model *m, const Tokenizer *tok, const GenerateOptions *o, const KvCacheScheme *scheme,
                         FILE *out, GenerateStats *st, Error *err) {
    const Config *c = &m->config;
    int steps = o->steps < c->max_seq_len ? o->steps : c->max_seq_len;
    int n_prompt = 0, rc = -1;
    int *tokens = prompt_tokens(tok, o, steps, &n_prompt, err);
    RunState s = {0};
    KvCache kv = {0};
    Sampler sampler = {0};
    if (!tokens) goto done;
    if (runstate_init(&s, c, n_prompt < 512 ? n_prompt : 512, err) ||
        kv_cache_init(&kv, c, steps, s.max_batch, scheme, m->rope_inv_freq, err) ||
        sampler_init(&sampler, c->vocab_size, o->temperature, o->top_p, o->seed, err))
        goto done;
    char piece[64];
    for (int i = 0; i < n_prompt; i++) {
        int len = tokenizer_piece_bytes(tok, i ? tokens[i - 1] : -1, tokens[i], piece);
        fwrite(piece, 1, (size_t)len, out);
    }
    fflush(out);
    double t0 = now_seconds();
    prefill(m, &s, &kv, tokens, n_prompt);
    double t1 = now_seconds();
    Sampling g = {m, tok, &s, &kv, &sampler};
    int pos = sample_tokens(&g, tokens, n_prompt, steps, out);
    st->prompt_tokens = n_prompt;
    st->generated = pos - n_prompt;
    st->prompt_seconds = t1 - t0;
    st->generate_seconds = now_seconds() - t1;
    rc = 0;
done:
    sampler_free(&sampler);
    kv_cache_free(&kv);
    runstate_free(&s);
    free(tokens);
    return rc;
}

int generate_from_dir(const char *model_dir, const GenerateOptions *o, FILE *out, FILE *stats, Error *err) {
    ModelDir L;
    GenerateStats st;
    KvCacheRecipe recipe;
    if (modeldir_load(&L, model_dir, 1, err)) return -1;
    int rc = kv_cache_recipe_resolve(&recipe, &o->kv, 0, model_dir, NULL, &L.model, err);
    if (rc == 0) rc = generate_text(&L.model, L.tok, o, &recipe.scheme, out, &st, err);
    kv_cache_recipe_free(&recipe);
    modeldir_free(&L);
    if (rc) return -1;
    fprintf(out, "\n");
    fflush(out);   /* the text ends before the statistics, on a pipe too */
    fprintf(stats, "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s\n", st.prompt_tokens,
            st.prompt_tokens / st.prompt_seconds, st.generated, st.generated > 0 ? st.generated / st.generate_seconds : 0.0);
    return 0;
}

/* Every position's logits of ids[0..n), [n][vocab], left in s->logits; the caller frees s. */
static int logits_of_tokens(const Model *m, const int *ids, int n, const KvCacheScheme *scheme, RunState *s, Error *err) {
    const Config *c = &m->config;
    memset(s, 0, sizeof *s);
    if (n > c->max_seq_len) return error_set(err, "%d tokens exceed the context of %d", n, c->max_seq_len);
    KvCache kv = {0};
    if (runstate_init(s, c, n, err) || kv_cache_init(&kv, c, n, n, scheme, m->rope_inv_freq, err)) {
        kv_cache_free(&kv);
        return -1;
    }
    forward(m, s, &kv, ids, n, 0, 0);
    kv_cache_free(&kv);
    return 0;
}

static void print_top5(FILE *f, const float *logits, int n, int vocab) {
    for (int t = 0; t < n; t++) {
        const float *row = logits + (size_t)t * vocab;
        int best[5];
        top_k_indices(row, vocab, 5, best);
        fprintf(f, "pos %d:", t);
        for (int k = 0; k < 5; k++) fprintf(f, " %d (%.4f)", best[k], row[best[k]]);
        fprintf(f, "\n");
    }
}

/* A --tokens error cut at 255 bytes, where ./run has always cut it. */
static void bounded_error(Error *err, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    error_set(err, "%s", msg);
}

int *token_ids_parse(const char *text, int vocab, int *n, Error *err) {
    int cap = 16, count = 0;
    int *ids = malloc((size_t)cap * sizeof *ids);
    const char *p = text;
    while (ids) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= vocab) {
            free(ids);
            bounded_error(err, "--tokens: '%s' is not a list of ids in [0, %d)", text, vocab);
            return NULL;
        }
        if (count == cap) {
            int *grown = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!grown) free(ids);
            ids = grown;
            if (!ids) break;
        }
        ids[count++] = (int)v;
        if (*end == 0) {
            *n = count;
            return ids;
        }
        if (*end != ',') {
            free(ids);
            bounded_error(err, "--tokens: unexpected '%c' in '%s'", *end, text);
            return NULL;
        }
        p = end + 1;
    }
    error_set(err, "out of memory");
    return NULL;
}

int logits_from_dir(const char *model_dir, const char *ids_text, const KvCacheFlags *kv, const char *out_path, FILE *out,
                    int *bad_ids, Error *err) {
    ModelDir L;
    KvCacheRecipe recipe = {0};
    *bad_ids = 0;
    if (modeldir_load(&L, model_dir, 0, err)) return -1;   /* the weights alone */
    int vocab = L.model.config.vocab_size, n = 0, rc = -1;
    int *ids = token_ids_parse(ids_text, vocab, &n, err);
    RunState s = {0};
    *bad_ids = !ids;
    if (ids && kv_cache_recipe_resolve(&recipe, kv, 0, model_dir, NULL, &L.model, err)) {
        free(ids);
        ids = NULL;
    }
    if (ids && logits_of_tokens(&L.model, ids, n, &recipe.scheme, &s, err) == 0) {
        if (out_path) rc = write_floats_file(out_path, s.logits, (size_t)n * vocab, err);
        else {
            print_top5(out, s.logits, n, vocab);
            rc = 0;
        }
    }
    runstate_free(&s);
    free(ids);
    kv_cache_recipe_free(&recipe);
    modeldir_free(&L);
    return rc;
}

int tokenize_print(FILE *f, const char *model_dir, const char *text, const char *text_file, int bos, Error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.bin", model_dir);
    Tokenizer *tok = tokenizer_load(path, err->msg, sizeof err->msg);
    if (!tok) return -1;
    size_t len = 0;
    char *owned = NULL;
    if (text_file && !(owned = read_whole_file(text_file, (size_t)1 << 30, &len, err))) {
        tokenizer_free(tok);
        return -1;
    }
    if (owned) text = owned;
    else len = strlen(text);
    int n = 0;
    int *ids = tokenizer_encode(tok, text, len, bos, &n);
    /* NULL only when out of memory: an empty text gives an empty list, not NULL */
    if (!ids) error_set(err, "out of memory for %zu bytes of text", len);
    for (int i = 0; ids && i < n; i++) fprintf(f, i ? " %d" : "%d", ids[i]);
    if (ids) fprintf(f, "\n");
    int rc = ids ? 0 : -1;
    free(ids);
    free(owned);
    tokenizer_free(tok);
    return rc;
}
