/* tests/test_probe.c: the probes (eval/probe.h) against computations made here on their own, on
 * mini-llama-brown at short lengths.
 *
 * copy: the sequences' structure (BOS, S pieces, the same S again, cut at ctx; every piece a
 * "▁" + a-z word by this file's own reading of the pieces); the probe's counts (scored tokens,
 * top-1 right, top-1 the same as fp32's) and NLL sums against each sequence run here in one
 * forward call with every row's logits, scored by this file's own argmax and log-softmax, for
 * the fp32 cache and int4-g64, the probe in batches of 16 so that batches cut the scored span.
 * passkey: the answer matching (digits after spaces, nothing more), the numbers; fp32 as the
 * scheme gives fp32's answers in every trial.
 * diverge: on a text whose tokens make exactly one prompt, the tokens to the first difference
 * against greedy decoding done here for int2-g64; fp32 against fp32 is M in every prompt.
 * Options the model cannot take are refused, naming the value. */
#include "tests/test.h"
#include "eval/probe.h"
#include "eval/wikitext.h"
#include "model/modeldir.h"
#include <stdlib.h>
#include <string.h>

#define MODEL "data/models/mini-llama-brown"
#define CTX 64

static const KvLayered *scheme(const char *text, KvSide side, KvLayered *buf) {
    char why[160];
    return kv_layered_parse(text, side, buf, why, sizeof why) == 0 ? buf : NULL;
}

/* This file's reading of an ordinary word piece: U+2581 then 2..12 lower-case letters. */
static int is_word(const char *p) {
    if ((unsigned char)p[0] != 0xe2 || (unsigned char)p[1] != 0x96 || (unsigned char)p[2] != 0x81) return 0;
    size_t n = strlen(p + 3);
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyz", p[3 + i])) return 0;
    return n >= 2 && n <= 12;
}

static void check_sequences(const ModelDir *L) {
    Error err;
    int *pieces = NULL, n_pieces = probe_word_pieces(L->tok, &pieces, &err);
    int bad_piece = -1, words = 0;
    for (int id = 0; id < L->model.config.vocab_size; id++) words += is_word(tokenizer_piece(L->tok, id));
    for (int i = 0; i < n_pieces; i++)
        if (!is_word(tokenizer_piece(L->tok, pieces[i]))) bad_piece = pieces[i];
    check(n_pieces == words && bad_piece < 0, "probe copy: the pool is every ordinary word piece and nothing else",
          "%d pieces, %d words by the test's reading, a non-word %d", n_pieces, words, bad_piece);
    int a[65], b[65], S = 16, bos = L->model.config.bos_id;
    int n = probe_copy_sequence(pieces, n_pieces, bos, 7, S, 0, CTX, a);
    int m = probe_copy_sequence(pieces, n_pieces, bos, 7, S, 1, CTX, b);
    int repeats = n == 2 * S + 1 && a[0] == bos, differ = 0;
    for (int i = 0; i < S && repeats; i++) repeats = a[1 + S + i] == a[1 + i];
    for (int i = 1; i <= S; i++) differ += a[i] != b[i];
    check(repeats && m == n && differ > S / 2, "probe copy: BOS, S pieces, the same S again; another index, another draw",
          "n %d, repeats %d, %d of %d positions differ", n, repeats, differ, S);
    n = probe_copy_sequence(pieces, n_pieces, bos, 7, CTX / 2, 0, CTX, a);
    check(n == CTX && a[CTX - 1] == a[CTX - 1 - CTX / 2], "probe copy: S = ctx/2 is cut at ctx (the last token left out)",
          "n %d", n);
    free(pieces);
}

/* The figures of one cache, computed here. */
typedef struct {
    long n, hits, agree;
    double nll;
} Own;

static int own_argmax(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

static double own_nll(const float *row, int n, int target) {
    long double max = row[0], sum = 0;
    for (int i = 1; i < n; i++) max = row[i] > max ? row[i] : max;
    for (int i = 0; i < n; i++) sum += expl((long double)row[i] - max);
    return (double)(max + logl(sum) - row[target]);
}

static void check_copy(const ModelDir *L) {
    const Model *m = &L->model;
    int vocab = m->config.vocab_size;
    KvCacheScheme int4 = {0};
    scheme("int4-g64", KV_SIDE_KEYS, &int4.k);
    scheme("int4-g64", KV_SIDE_VALUES, &int4.v);
    const KvCacheScheme *schemes[1] = {&int4};
    ProbeOptions o = {.task = PROBE_COPY, .ctx = CTX, .sequences = 2, .seed = 7, .lengths = {8, 32}, .n_lengths = 2,
                      .batch = 16};
    ProbeResult r;
    Error err;
    if (!check(probe_run(m, L->tok, &o, schemes, 1, &r, &err) == 0, "probe copy: runs", "%s", err.msg)) return;
    int *pieces = NULL, n_pieces = probe_word_pieces(L->tok, &pieces, &err);
    RunState s;
    KvCache kv[2] = {{0}};
    runstate_init(&s, &m->config, CTX, &err);
    kv_cache_init(&kv[0], &m->config, CTX, CTX, NULL, m->rope_inv_freq, &err);
    kv_cache_init(&kv[1], &m->config, CTX, CTX, &int4, m->rope_inv_freq, &err);
    float *base = malloc((size_t)CTX * vocab * sizeof *base);
    char why[300] = "";
    for (int li = 0; li < 2 && !why[0]; li++) {
        Own own[2] = {{0}};
        int S = o.lengths[li], seq[CTX];
        for (int q = 0; q < o.sequences; q++) {
            int n = probe_copy_sequence(pieces, n_pieces, m->config.bos_id, o.seed, S, q, CTX, seq);
            for (int c = 0; c < 2; c++) {
                kv[c].len = 0;
                forward(m, &s, &kv[c], seq, n, 0, 0);
                if (c == 0) memcpy(base, s.logits, (size_t)n * vocab * sizeof *base);
                for (int j = S + 2; j < n; j++) {   /* the second copy from its second token */
                    const float *row = s.logits + (size_t)(j - 1) * vocab;
                    int top = own_argmax(row, vocab);
                    own[c].n++;
                    own[c].hits += top == seq[j];
                    own[c].agree += top == own_argmax(base + (size_t)(j - 1) * vocab, vocab);
                    own[c].nll += own_nll(row, vocab, seq[j]);
                }
            }
        }
        for (int c = 0; c < 2 && !why[0]; c++) {
            const ProbeCell *x = probe_cell(&r, c, li);
            if (x->n != own[c].n || x->hits != own[c].hits || x->agree != own[c].agree ||
                !(fabs(x->sum - own[c].nll) <= 1e-5 * own[c].nll))
                snprintf(why, sizeof why, "S=%d cache %d: n %ld/%ld, hits %ld/%ld, agree %ld/%ld, NLL %.9g/%.9g", S, c,
                         x->n, own[c].n, x->hits, own[c].hits, x->agree, own[c].agree, x->sum, own[c].nll);
        }
        printf("     S=%d: fp32 top-1 %ld of %ld, int4-g64 %ld, agreement %ld\n", S, own[0].hits, own[0].n, own[1].hits,
               own[1].agree);
    }
    check(!why[0], "probe copy: tokens, top-1 right, agreement with fp32 and NLL sums (1e-5) = one forward call scored here",
          "%s", why);
    check(probe_rate_se(probe_cell(&r, 1, 0)) ==
              sqrt(probe_rate(probe_cell(&r, 1, 0)) * (1 - probe_rate(probe_cell(&r, 1, 0))) / probe_cell(&r, 1, 0)->n),
          "probe copy: the standard error is the binomial one", "%g", probe_rate_se(probe_cell(&r, 1, 0)));
    free(base);
    free(pieces);
    kv_cache_free(&kv[0]);
    kv_cache_free(&kv[1]);
    runstate_free(&s);
    probe_result_free(&r);
}

static void check_passkey(const ModelDir *L) {
    check(probe_passkey_match("12345", "12345") && probe_passkey_match("  12345. Remember", "12345") &&
              !probe_passkey_match("123456", "12345") && !probe_passkey_match("1234", "12345") &&
              !probe_passkey_match("12 345", "12345") && !probe_passkey_match("x12345", "12345"),
          "probe passkey: an answer matches when its digits after spaces are the number, no more", "");
    char a[PROBE_PASSKEY_DIGITS + 1], b[PROBE_PASSKEY_DIGITS + 1];
    probe_passkey_number(1, 0, a);
    probe_passkey_number(1, 1, b);
    check(strlen(a) == 5 && a[0] != '0' && strspn(a, "0123456789") == 5 && strcmp(a, b),
          "probe passkey: five digits, the first not 0, one a trial", "'%s' '%s'", a, b);
    KvCacheScheme fp32 = {0};
    scheme("fp32", KV_SIDE_KEYS, &fp32.k);
    scheme("fp32", KV_SIDE_VALUES, &fp32.v);
    const KvCacheScheme *schemes[1] = {&fp32};
    ProbeOptions o = {.task = PROBE_PASSKEY, .ctx = 256, .sequences = 1, .seed = 3, .lengths = {128, 200},
                      .n_lengths = 2, .depths = {0, 100}, .n_depths = 2};
    ProbeResult r;
    Error err;
    if (!check(probe_run(&L->model, L->tok, &o, schemes, 1, &r, &err) == 0, "probe passkey: runs", "%s", err.msg))
        return;
    int same = r.n_cells == 4;
    for (int c = 0; c < r.n_cells && same; c++) {
        const ProbeCell *f = probe_cell(&r, 0, c), *x = probe_cell(&r, 1, c);
        same = f->n == 1 && x->n == 1 && x->hits == f->hits && x->agree == 1 && f->agree == 1;
    }
    check(same, "probe passkey: fp32 as the scheme answers as fp32 in every trial (2 lengths x 2 depths)", "");
    probe_result_free(&r);
}

/* Greedy decoding done here: prompt[0..n) in one call, then M tokens by this file's argmax. */
static void own_greedy(const Model *m, RunState *s, KvCache *kv, const int *prompt, int n, int M, int *out) {
    int vocab = m->config.vocab_size;
    kv->len = 0;
    forward(m, s, kv, prompt, n, 0, n - 1);
    for (int i = 0; i < M; i++) {
        out[i] = own_argmax(s->logits, vocab);
        forward(m, s, kv, &out[i], 1, n + i, 0);
    }
}

static void check_diverge(const ModelDir *L) {
    const Model *m = &L->model;
    const char *path = "/tmp/kvq-test-probe-diverge.txt";
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs("The jury said it did find that many of the voters had been given the wrong ballots in the election .\n", f);
    fclose(f);
    Error err;
    int n_text = 0, *text = load_eval_tokens(path, L->tok, 1, &n_text, &err), M = 24;
    if (!check(text && n_text > 10, "probe diverge: the prompt's text", "%s", err.msg)) return;
    int P = n_text - 2;   /* BOS + P = the whole text but its last token: one prompt, at offset 1 */
    static const char *const texts[3] = {"fp32", "int2-g64", "int4-g64"};
    KvCacheScheme kv_schemes[3] = {0};
    const KvCacheScheme *schemes[3];
    for (int c = 0; c < 3; c++) {
        scheme(texts[c], KV_SIDE_KEYS, &kv_schemes[c].k);
        scheme(texts[c], KV_SIDE_VALUES, &kv_schemes[c].v);
        schemes[c] = &kv_schemes[c];
    }
    ProbeOptions o = {.task = PROBE_DIVERGE, .ctx = CTX, .sequences = 2, .seed = 5, .prompt_tokens = P,
                      .new_tokens = M, .text_file = path};
    ProbeResult r;
    if (!check(probe_run(m, L->tok, &o, schemes, 3, &r, &err) == 0, "probe diverge: runs", "%s", err.msg)) return;
    RunState s;
    KvCache kv = {0};
    runstate_init(&s, &m->config, CTX, &err);
    int prompt[CTX], base[64], q[64], d[3] = {0};
    prompt[0] = m->config.bos_id;
    memcpy(prompt + 1, text + 1, (size_t)P * sizeof *prompt);
    for (int c = 0; c < 3; c++) {   /* the fp32 cache, then int2-g64 and int4-g64 */
        kv_cache_init(&kv, &m->config, CTX, CTX, c ? schemes[c] : NULL, m->rope_inv_freq, &err);
        own_greedy(m, &s, &kv, prompt, 1 + P, M, c ? q : base);
        kv_cache_free(&kv);
        while (c && d[c] < M && q[d[c]] == base[d[c]]) d[c]++;
    }
    const ProbeCell *same = probe_cell(&r, 1, 0);
    check(same->n == 2 && same->sum == 2.0 * M && same->hits == 2,
          "probe diverge: fp32 against fp32: M tokens to the first difference, every continuation identical",
          "n %ld, sum %g (want %d), identical %ld", same->n, same->sum, 2 * M, same->hits);
    const ProbeCell *x2 = probe_cell(&r, 2, 0), *x4 = probe_cell(&r, 3, 0);
    check(x2->n == 2 && x2->sum == 2.0 * d[1] && x2->hits == 2 * (d[1] == M) && x4->sum == 2.0 * d[2] &&
              x4->hits == 2 * (d[2] == M),
          "probe diverge: int2-g64's and int4-g64's tokens to the first difference = greedy decoding done here",
          "int2 sum %g, int4 sum %g, want 2 x %d, 2 x %d", x2->sum, x4->sum, d[1], d[2]);
    printf("     first difference from fp32 after %d (int2-g64) and %d (int4-g64) of %d tokens\n", d[1], d[2], M);
    int a[4] = {1, 2, 3, 4}, b[4] = {9, 2, 3, 4}, c[4] = {1, 2, 9, 4};
    check(probe_first_difference(a, b, 4) == 0 && probe_first_difference(a, c, 4) == 2 &&
              probe_first_difference(a, a, 4) == 4 && probe_first_difference(a, b, 0) == 0,
          "probe diverge: the first difference at 0, in the middle, none (M), M = 0", "");
    int last[4] = {1, 2, 3, 9};
    ProbeCell cell = {0};
    probe_diverge_count(&cell, a, a, 4);
    probe_diverge_count(&cell, last, a, 4);
    check(probe_first_difference(a, last, 4) == 3 && cell.n == 2 && cell.hits == 1 && cell.agree == 2 &&
              cell.sum == 7 && cell.sumsq == 25,
          "probe diverge: a difference at the last token is a difference (3 the same, not a hit)",
          "first difference %d, hits %ld, sum %g", probe_first_difference(a, last, 4), (long)cell.hits, cell.sum);
    runstate_free(&s);
    probe_result_free(&r);
    free(text);
    remove(path);
}

static void check_refusals(const ModelDir *L) {
    struct {
        ProbeOptions o;
        const char *want, *name;
    } cases[] = {
        {{.task = PROBE_COPY, .ctx = CTX, .lengths = {33}, .n_lengths = 1}, "copy length 33",
         "probe: a copy length over ctx/2 is refused, naming it"},
        {{.task = PROBE_PASSKEY, .ctx = 256, .depths = {101}, .n_depths = 1}, "passkey depth 101",
         "probe: a passkey depth over 100% is refused, naming it"},
        {{.task = PROBE_DIVERGE, .ctx = CTX, .prompt_tokens = 40, .new_tokens = 24}, "exceed --ctx 64",
         "probe: diverge's prompt and continuation past ctx are refused"},
        {{.task = PROBE_COPY, .ctx = 4096}, "exceeds the model's context",
         "probe: a ctx past the model's context is refused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Error err = {{0}};
        int rc = probe_options_resolve(&cases[i].o, &L->model, &err);
        check(rc != 0 && strstr(err.msg, cases[i].want) != NULL, cases[i].name, "rc %d, '%s'", rc, err.msg);
    }
}

/* The seeded draws every probe input comes from (and the committed probe tables with them), against
 * splitmix64 written out in Python from probe_common.h's description: the seed, then each index
 * times 0xd1342543de82ef95 added before a round, four rounds. */
static void check_draws(void) {
    static const struct { unsigned long long seed, a, b, c, want; } cases[] = {
        {42, 0, 0, 0, 0xc16129ecd0dc5b93ULL},
        {42, 16, 3, 7, 0xc69666e6893f73e9ULL},
        {7, 0x9a55, 5, 0, 0xed298be87992f470ULL},
        {0xffffffffffffffffULL, 1, 2, 3, 0x4daf074528794c1bULL},
    };
    int wrong = -1;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        if (probe_draw(cases[i].seed, cases[i].a, cases[i].b, cases[i].c) != cases[i].want) wrong = i;
    check(wrong < 0, "probe: seeded draws are splitmix64 of the seed and the indices", "case %d differs", wrong);
}

int main(void) {
    ModelDir L;
    Error err;
    if (!check(modeldir_load(&L, MODEL, 1, &err) == 0, "probe: the model loads", "%s", err.msg)) return test_exit_code();
    check_draws();
    check_sequences(&L);
    check_copy(&L);
    check_passkey(&L);
    check_diverge(&L);
    check_refusals(&L);
    modeldir_free(&L);
    return test_exit_code();
}
