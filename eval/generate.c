/* eval/generate.c: text generation and the logits of a token list (see eval/generate.h). */
#include "eval/generate.h"
#include "model/modeldir.h"
#include "model/sampler.h"
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

/* Samples from the prefilled state at pos onwards, writing each token's text as it comes. */
static int sample_tokens(const Model *m, const Tokenizer *tok, RunState *s, KvCache *kv, Sampler *sampler,
                         int *tokens, int pos, int steps, FILE *out) {
    char piece[64];
    for (; pos < steps; pos++) {
        int next = sampler_next(sampler, s->logits);
        if (next == m->config.eos_id) break;
        tokens[pos] = next;
        int len = tokenizer_piece_bytes(tok, tokens[pos - 1], next, piece);
        fwrite(piece, 1, (size_t)len, out);
        fflush(out);
        if (pos + 1 < steps) forward(m, s, kv, &tokens[pos], 1, pos, 0);
    }
    return pos;
}

int generate_text(const Model *m, const Tokenizer *tok, const GenerateOptions *o, FILE *out, GenerateStats *st,
                  Error *err) {
    const Config *c = &m->config;
    int steps = o->steps < c->max_seq_len ? o->steps : c->max_seq_len;
    int n_prompt = 0, rc = -1;
    int *tokens = prompt_tokens(tok, o, steps, &n_prompt, err);
    RunState s = {0};
    KvCache kv = {0};
    Sampler sampler = {0};
    if (!tokens) goto done;
    if (runstate_init(&s, c, n_prompt < 512 ? n_prompt : 512, err) ||
        kv_cache_init(&kv, c, steps, s.max_batch, o->scheme, o->scheme, m->rope_inv_freq, err) ||
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
    int pos = sample_tokens(m, tok, &s, &kv, &sampler, tokens, n_prompt, steps, out);
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

int logits_of_tokens(const Model *m, const int *ids, int n, const KvLayered *scheme, RunState *s, Error *err) {
    const Config *c = &m->config;
    memset(s, 0, sizeof *s);
    if (n > c->max_seq_len) return error_set(err, "%d tokens exceed the context of %d", n, c->max_seq_len);
    KvCache kv = {0};
    if (runstate_init(s, c, n, err) || kv_cache_init(&kv, c, n, n, scheme, scheme, m->rope_inv_freq, err)) {
        kv_cache_free(&kv);
        return -1;
    }
    forward(m, s, &kv, ids, n, 0, 0);
    kv_cache_free(&kv);
    return 0;
}
