/* eval/bench.c: throughput of the forward pass and the machine's own peaks.
 *
 * Phases (each repeated, the median reported):
 *   prefill  one forward call over `prompt` tokens from an empty cache; logits of the
 *            last token only (what llama-bench's pp test does).
 *   decode   `gen` single-token calls right after that prompt.
 *   long     `gen` single-token calls ending at long_ctx, once with an fp32 cache and once
 *            with the long schemes (keys and values may differ). The cache positions before them are filled with random keys
 *            and values through kv_cache_write (the speed of attention does not depend on
 *            the values, and a 2048-token prefill per run would dominate the bench).
 * Achieved GFLOP/s counts 2 per multiply-add of the matmuls and attention; GB/s counts the
 * weight and KV-cache bytes one decode step must read. The peaks they are compared with
 * come from eval/bench_probe.c. */
#include "eval/bench.h"
#include "eval/json_out.h"
#include "eval/progress.h"
#include "model/kernels/kernels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_REPEATS 64

void bench_default_options(BenchOptions *o) {
    memset(o, 0, sizeof *o);
    o->prompt = 512;
    o->gen = 64;
    o->long_ctx = 2048;
    char why[128];
    kv_cache_flags_default(&o->kv, NULL);
    kv_layered_parse("int4-g64", KV_SIDE_KEYS, &o->long_k, why, sizeof why);
    kv_layered_parse("int4-g64", KV_SIDE_VALUES, &o->long_v, why, sizeof why);
    o->repeats = 3;
    o->probe_machine = 1;
    o->ppl_batch = 512;
}

/* ---- model arithmetic ---- */

static double matrix_bytes(const Matrix *w) { return (double)w->rows * w->cols * (double)dtype_size(w->dtype); }

/* Multiply-adds of all layers' matmuls for one token. */
static double layer_macs_per_token(const Config *c) {
    double kv_dim = (double)c->n_kv_heads * c->head_dim;
    double per_layer = 2.0 * c->dim * c->dim + 2.0 * kv_dim * c->dim + 3.0 * c->dim * (double)c->hidden_dim;
    return per_layer * c->n_layers;
}

/* Multiply-adds of attention for one query at context n (scores and the weighted sum). */
static double attention_macs(const Config *c, double n) {
    return 2.0 * c->n_heads * c->head_dim * n * c->n_layers;
}

/* Multiply-adds of a prefill of P tokens with logits for the last only: every layer for
 * every token, attention over the causal triangle, except that the last layer computes
 * only keys and values for the first P - 1 (model/forward.c), and lm_head once. */
static double prefill_macs(const Config *c, double P) {
    double L = c->n_layers, per_layer = layer_macs_per_token(c) / L;
    double kv_macs = 2.0 * c->n_kv_heads * c->head_dim * (double)c->dim;
    double attention_one_layer = attention_macs(c, (P + 1) / 2) / L * P;
    return per_layer * (L - 1) * P + kv_macs * P + (per_layer - kv_macs) + attention_one_layer * (L - 1) +
           attention_macs(c, P) / L + (double)c->vocab_size * c->dim;
}

/* The matrices a decode step reads, i < 7 * n_layers + 1: every layer's seven, then lm_head
 * (the embedding's one row is nothing). */
static int decode_matrix_count(const Model *m) { return 7 * m->config.n_layers + 1; }

static const Matrix *decode_matrix(const Model *m, int i) {
    if (i == 7 * m->config.n_layers) return &m->weights.lm_head;
    const LayerWeights *w = &m->weights.layers[i / 7];
    const Matrix *mats[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
    return mats[i % 7];
}

static double weight_bytes(const Model *m) {
    double b = 0;
    for (int i = 0; i < decode_matrix_count(m); i++) b += matrix_bytes(decode_matrix(m, i));
    return b;
}

/* Bytes a decode step at context ctx reads: the weights and ctx cached positions (position_bytes
 * each: every layer's keys and values of every KV head, in their stored form). */
static double decode_bytes(const Model *m, double position_bytes, double ctx) {
    return weight_bytes(m) + ctx * position_bytes;
}

/* One plain read pass over w's bytes (8 at a time, unaligned loads): a checksum, so that the
 * reads cannot be optimized away. */
static uint64_t read_matrix(const Matrix *w) {
    const unsigned char *p = w->data;
    long long n = (long long)(matrix_bytes(w) / 8);
    uint64_t sum = 0;
    #pragma omp parallel for schedule(static) reduction(^ : sum)
    for (long long i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, p + 8 * i, sizeof v);
        sum ^= v;
    }
    return sum;
}

/* GB/s of one read pass over the weights a decode step reads, matrix by matrix as decode reads
 * them: the machine's read rate over the same pages. Measured right after each decode run, so
 * that both see the same memory phase (this VM's bandwidth changes within a minute). */
static double read_weights_gbytes(const Model *m) {
    uint64_t sum = 0;
    double t0 = seconds_now();
    for (int i = 0; i < decode_matrix_count(m); i++) sum ^= read_matrix(decode_matrix(m, i));
    double dt = seconds_now() - t0;
    return sum == 12345u ? 0 : weight_bytes(m) / dt * 1e-9;
}

/* A decode run's bytes per second (tok_s steps at context ctx of a cache shaped like shape) as
 * a fraction of a read pass over the same weights made now, right after it. */
static double read_fraction(const Model *m, double position_bytes, double ctx, double tok_s) {
    return decode_bytes(m, position_bytes, ctx) * tok_s * 1e-9 / read_weights_gbytes(m);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median, min and max of n rates. */
static void summarize(double *rates, int n, BenchPhase *p) {
    p->tok_s = median(rates, n);
    p->tok_s_min = rates[0];
    p->tok_s_max = rates[n - 1];
}

/* ---- where the bench is, on stderr ---- */

/* At TinyLlama's shape a bench runs for many minutes, most of them in --ppl's runs, so unless
 * quiet it prints a line after each repetition and each ppl window: where it is and the time
 * left. Work is counted in forward-pass positions; until the first ppl window is done, the ppl
 * runs' positions are costed at 0.9 of the median prefill rate of the repetitions (about what
 * they run at: the ratio this bench reports), then at the ppl runs' own pace so far. */
typedef struct {
    int quiet;
    double start;
    int reps, reps_done;
    double prefills[MAX_REPEATS];   /* the repetitions' prefill rates so far */
    double ppl_positions;           /* of all the ppl runs: compared runs count twice, and the
                                       prefills timed between windows are included */
    double ppl_done, ppl_start;     /* positions done; when the first ppl run began (0: not yet) */
} BenchStatus;

static double status_seconds_left(const BenchStatus *st, double t) {
    double reps_left = 0, rate = 0;
    if (st->reps_done > 0) {
        double reps_end = st->ppl_start > 0 ? st->ppl_start : t;
        reps_left = (st->reps - st->reps_done) * (reps_end - st->start) / st->reps_done;
        double copy[MAX_REPEATS];
        memcpy(copy, st->prefills, sizeof(double) * (size_t)st->reps_done);
        rate = 0.9 * median(copy, st->reps_done);
    }
    if (st->ppl_done > 0) rate = st->ppl_done / (t - st->ppl_start);
    if (rate <= 0) return -1;
    return reps_left + (st->ppl_positions - st->ppl_done) / rate;
}

static void status_print(const BenchStatus *st, const char *what) {
    if (st->quiet) return;
    double t = seconds_now();
    char in[32], left[32];
    progress_format_seconds(t - st->start, in, sizeof in);
    progress_format_seconds(status_seconds_left(st, t), left, sizeof left);
    fprintf(stderr, "bench: %s (%s in), about %s left\n", what, in, left);
    fflush(stderr);
}

/* Random keys and values (RoPE'd keys look no different to attention's speed) for positions [from, to). */
static void fill_cache(KvCache *kv, const Config *c, int from, int to, float *k, float *v) {
    size_t n = (size_t)c->n_kv_heads * c->head_dim;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int p = from; p < to; p++) {
        for (size_t i = 0; i < n; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            k[i] = (float)((int)(state >> 40) - (1 << 23)) / (float)(1 << 23);
            v[i] = -0.5f * k[i];
        }
        for (int l = 0; l < c->n_layers; l++) {
            kv_cache_write(kv, l, p, k, v, NULL);
            kv_cache_commit(kv, l, p, p + 1);
        }
    }
    if (to > kv->len) kv->len = to;
}

/* Decode steps `gen` tokens at positions start..start+gen-1; returns tokens/s. */
static double time_decode(const Model *m, RunState *s, KvCache *kv, const int *tokens, int start, int gen) {
    double t0 = seconds_now();
    for (int i = 0; i < gen; i++) forward(m, s, kv, &tokens[i], 1, start + i, 0);
    return gen / (seconds_now() - t0);
}

/* One long-context decode measurement with the cache's scheme (NULL: fp32): cache filled to ctx - gen, then
 * gen steps. bytes: the cache's bytes per position, then its bytes in all. */
static double time_long(const Model *m, RunState *s, const KvCacheScheme *scheme, int ctx, int gen, const int *tokens,
                        double bytes[2], Error *err) {
    const Config *c = &m->config;
    KvCache kv;
    if (kv_cache_init(&kv, c, ctx, 1, scheme, m->rope_inv_freq, err)) return -1;
    bytes[0] = kv_cache_position_bytes(&kv);
    bytes[1] = (double)kv_cache_bytes(&kv);
    float *k = malloc((size_t)c->n_kv_heads * c->head_dim * sizeof(float));
    float *v = malloc((size_t)c->n_kv_heads * c->head_dim * sizeof(float));
    double rate = -1;
    if (k && v) {
        fill_cache(&kv, c, 0, ctx - gen, k, v);
        rate = time_decode(m, s, &kv, tokens, ctx - gen, gen);
    } else {
        error_set(err, "bench: out of memory");
    }
    free(k);
    free(v);
    kv_cache_free(&kv);
    return rate;
}

/* A prefill of `prompt` tokens into a fresh cache with these schemes; returns tokens/s. */
static double time_prefill(const Model *m, RunState *s, const KvCacheScheme *scheme, int prompt, const int *tokens,
                           Error *err) {
    KvCache kv;
    if (kv_cache_init(&kv, &m->config, prompt, prompt, scheme, m->rope_inv_freq, err)) return -1;
    double t0 = seconds_now();
    forward(m, s, &kv, tokens, prompt, 0, prompt - 1);
    double rate = prompt / (seconds_now() - t0);
    kv_cache_free(&kv);
    return rate;
}

static int repeat_count(const BenchOptions *o) {
    return o->repeats < 1 ? 1 : o->repeats > MAX_REPEATS ? MAX_REPEATS : o->repeats;
}

/* scheme: the prefill and decode runs' cache; long_scheme: the long runs' quantized one. */
static int run_phases(const Model *m, const BenchOptions *o, const KvCacheScheme *scheme, const KvCacheScheme *long_scheme,
                      BenchResult *r, const int *tokens, BenchStatus *st, Error *err) {
    const Config *c = &m->config;
    double pre[MAX_REPEATS], dec[MAX_REPEATS], lf[MAX_REPEATS], lq[MAX_REPEATS], pq[MAX_REPEATS];
    double dec_read[MAX_REPEATS], lf_read[MAX_REPEATS], lq_read[MAX_REPEATS];   /* see BenchPhase.read_frac */
    int reps = repeat_count(o);
    RunState s;
    KvCache kv;
    if (runstate_init(&s, c, o->prompt, err)) return -1;
    if (kv_cache_init(&kv, c, o->prompt + o->gen, o->prompt, scheme, m->rope_inv_freq, err)) {
        runstate_free(&s);
        return -1;
    }
    forward(m, &s, &kv, tokens, o->prompt < 16 ? o->prompt : 16, 0, 0);   /* warm-up: page in, wake threads */
    /* Decode: average context of the measured steps; the long runs' caches differ from kv
     * only in their row sizes. */
    double dec_ctx = o->prompt + o->gen / 2.0, long_ctx = r->long_ctx - o->gen / 2.0;
    double kv_bytes = kv_cache_position_bytes(&kv), f32_bytes[2] = {0}, quant_bytes[2] = {0};
    int rc = 0;
    for (int i = 0; i < reps && !rc; i++) {
        kv.len = 0;
        double t0 = seconds_now();
        forward(m, &s, &kv, tokens, o->prompt, 0, o->prompt - 1);
        pre[i] = o->prompt / (seconds_now() - t0);
        dec[i] = time_decode(m, &s, &kv, tokens + o->prompt, o->prompt, o->gen);
        if (o->probe_machine) dec_read[i] = read_fraction(m, kv_bytes, dec_ctx, dec[i]);
        if (r->long_ctx > 0) {
            lf[i] = time_long(m, &s, NULL, r->long_ctx, o->gen, tokens, f32_bytes, err);
            r->cache_bytes_f32 = f32_bytes[1];
            if (o->probe_machine) lf_read[i] = read_fraction(m, f32_bytes[0], long_ctx, lf[i]);
            lq[i] = time_long(m, &s, long_scheme, r->long_ctx, o->gen, tokens, quant_bytes, err);
            r->cache_bytes_quant = quant_bytes[1];
            pq[i] = time_prefill(m, &s, long_scheme, o->prompt, tokens, err);
            if (o->probe_machine) lq_read[i] = read_fraction(m, quant_bytes[0], long_ctx, lq[i]);
            if (lf[i] < 0 || lq[i] < 0 || pq[i] < 0) rc = -1;
        }
        st->prefills[st->reps_done++] = pre[i];
        char what[64];
        snprintf(what, sizeof what, "repetition %d/%d done", i + 1, reps);
        status_print(st, what);
    }
    if (!rc) {
        summarize(pre, reps, &r->prefill);
        summarize(dec, reps, &r->decode);
        if (o->probe_machine) r->decode.read_frac = median(dec_read, reps);
        if (r->long_ctx > 0) {
            summarize(lf, reps, &r->long_f32);
            summarize(lq, reps, &r->long_quant);
            summarize(pq, reps, &r->prefill_quant);
            if (o->probe_machine) {
                r->long_f32.read_frac = median(lf_read, reps);
                r->long_quant.read_frac = median(lq_read, reps);
            }
        }
        /* Achieved rates: the arithmetic actually done. */
        double P = o->prompt;
        double pre_flops = 2.0 * prefill_macs(c, P);
        r->prefill.gflops = pre_flops / (P / r->prefill.tok_s) * 1e-9;
        r->prefill_quant.gflops = r->long_ctx > 0 ? pre_flops / (P / r->prefill_quant.tok_s) * 1e-9 : 0;
        double tok_flops = 2.0 * (layer_macs_per_token(c) + (double)c->vocab_size * c->dim);
        r->decode.gflops = (tok_flops + 2.0 * attention_macs(c, dec_ctx)) * r->decode.tok_s * 1e-9;
        r->decode.gbytes = decode_bytes(m, kv_bytes, dec_ctx) * r->decode.tok_s * 1e-9;
        if (r->long_ctx > 0) {
            r->long_f32.gflops = (tok_flops + 2.0 * attention_macs(c, long_ctx)) * r->long_f32.tok_s * 1e-9;
            r->long_f32.gbytes = decode_bytes(m, f32_bytes[0], long_ctx) * r->long_f32.tok_s * 1e-9;
            r->long_quant.gflops = (tok_flops + 2.0 * attention_macs(c, long_ctx)) * r->long_quant.tok_s * 1e-9;
            r->long_quant.gbytes = decode_bytes(m, quant_bytes[0], long_ctx) * r->long_quant.tok_s * 1e-9;
        }
        r->weight_bytes = weight_bytes(m);
    }
    kv_cache_free(&kv);
    runstate_free(&s);
    return rc;
}

/* ---- the ppl path ---- */

#define WIKITEXT2_TEST_TOKENS 341469   /* TinyLlama's tokenizer, BOS first (data/wikitext-2-raw) */

/* The ppl run's clock: where the first window ended (the rate is taken over the later ones),
 * and the prefills timed after each window but the last, whose time is taken out again. */
#define MAX_PPL_PREFILLS 64
typedef struct {
    const Model *m;
    RunState *s;
    const BenchOptions *o;
    const int *prompt_tokens;
    long first_tokens;
    double first_seconds, side_seconds;
    double prefills[MAX_PPL_PREFILLS];
    int n_prefills;
    BenchStatus *status;
    const char *run_name;      /* e.g. "ppl 2/3, fp32 cache compared" */
    double weight;             /* 2 when compared: each position runs twice */
    double done_before;        /* status->ppl_done when this run began */
} PplClock;

static void after_window(void *user, int done, int total, long tokens, double seconds) {
    PplClock *k = user;
    if (done == 1) k->first_tokens = tokens, k->first_seconds = seconds;
    if (done < total && k->n_prefills < MAX_PPL_PREFILLS) {
        Error err;
        double t0 = seconds_now(), rate = time_prefill(k->m, k->s, NULL, k->o->prompt, k->prompt_tokens, &err);
        k->side_seconds += seconds_now() - t0;   /* after first_seconds was taken: inside the measured time */
        if (rate > 0) k->prefills[k->n_prefills++] = rate;
    }
    k->status->ppl_done = k->done_before + k->weight * (double)tokens + (double)k->n_prefills * k->o->prompt;
    char what[96];
    snprintf(what, sizeof what, "%s, window %d/%d", k->run_name, done, total);
    status_print(k->status, what);
}

/* Positions per second of ppl_evaluate over the windows after the first, with the cache's scheme
 * (NULL: fp32), and in *prefill the median rate of the prefills timed between its windows: each
 * run's ratio is to the prefills of the same minutes. k->run_name names the run. */
static double ppl_rate(PplClock *k, const int *tokens, int n_tokens, const BenchPpl *b, const KvCacheScheme *scheme,
                       int compare, double *prefill, Error *err) {
    PplOptions o = {0};
    o.scheme = scheme;
    o.protocol = PPL_HF;
    o.ctx = b->ctx;
    o.stride = b->stride;
    o.max_windows = b->windows;
    o.shard_count = 1;
    o.batch = b->batch < b->ctx ? b->batch : b->ctx;
    o.compare = compare;
    o.progress = after_window;
    o.progress_user = k;
    k->first_tokens = 0;
    k->first_seconds = k->side_seconds = 0;
    k->n_prefills = 0;
    k->weight = compare ? 2.0 : 1.0;
    if (k->status->ppl_start <= 0) k->status->ppl_start = seconds_now();
    k->done_before = k->status->ppl_done;
    PplResult r;
    if (ppl_evaluate(k->m, tokens, n_tokens, &o, &r, err)) return -1;
    *prefill = k->n_prefills > 0 ? median(k->prefills, k->n_prefills) : 0;
    double seconds = r.seconds - k->first_seconds - k->side_seconds;
    return (compare ? 2.0 : 1.0) * (double)(r.tokens_processed - k->first_tokens) / seconds;
}

/* The ppl runs' sizes; returns how many runs there will be (the long scheme's only if it fits). */
static int plan_ppl(const Model *m, const BenchOptions *o, BenchResult *r) {
    BenchPpl *b = &r->ppl;
    b->ctx = o->long_ctx > m->config.max_seq_len ? m->config.max_seq_len : o->long_ctx;
    b->stride = 512 < b->ctx ? 512 : b->ctx;
    b->windows = o->ppl_windows < 2 ? 2 : o->ppl_windows;
    b->batch = o->ppl_batch;
    double windows_full = ceil((double)(WIKITEXT2_TEST_TOKENS - b->ctx) / b->stride) + 1;
    b->full_positions = b->ctx + (windows_full - 1) * b->ctx;
    return r->long_skipped ? 2 : 3;
}

/* Positions the ppl runs will compute, the prefills between their windows included. */
static double ppl_positions(const BenchResult *r, int runs, int prompt) {
    const BenchPpl *b = &r->ppl;
    return (double)(runs * 2 - 1) * b->windows * b->ctx + (double)runs * (b->windows - 1) * prompt;
}

static int run_ppl(const Model *m, const BenchOptions *o, const KvCacheScheme *long_scheme, BenchResult *r, int runs,
                   BenchStatus *st, Error *err) {
    BenchPpl *b = &r->ppl;
    int n = b->ctx + (b->windows - 1) * b->stride;
    int n_alloc = n > o->prompt ? n : o->prompt;   /* the prefills between windows read -p of them */
    int *tokens = malloc((size_t)n_alloc * sizeof *tokens);
    if (!tokens) return error_set(err, "bench: out of memory");
    for (int i = 0; i < n_alloc; i++) tokens[i] = (int)((2654435761u * (unsigned)i + 7u) % (unsigned)m->config.vocab_size);
    RunState s;
    if (runstate_init(&s, &m->config, o->prompt, err)) {
        free(tokens);
        return -1;
    }
    PplClock clock = {.m = m, .s = &s, .o = o, .prompt_tokens = tokens, .status = st};
    char name_alone[32], name_compared[48], name_scheme[64];
    snprintf(name_alone, sizeof name_alone, "ppl 1/%d, fp32 cache", runs);
    snprintf(name_compared, sizeof name_compared, "ppl 2/%d, fp32 cache compared", runs);
    snprintf(name_scheme, sizeof name_scheme, "ppl 3/%d, long scheme compared", runs);
    clock.run_name = name_alone;
    b->alone = ppl_rate(&clock, tokens, n, b, NULL, 0, &b->prefill_alongside, err);
    clock.run_name = name_compared;
    b->compared = b->alone < 0 ? -1 : ppl_rate(&clock, tokens, n, b, NULL, 1, &b->prefill_alongside_compared, err);
    /* One configuration of a sweep: the long scheme's cache, compared with the fp32 baseline. */
    clock.run_name = name_scheme;
    if (b->compared >= 0 && !r->long_skipped)
        b->scheme_compared = ppl_rate(&clock, tokens, n, b, long_scheme, 1, &b->prefill_alongside_scheme, err);
    if (b->prefill_alongside <= 0) b->prefill_alongside = r->prefill.tok_s;
    if (b->prefill_alongside_compared <= 0) b->prefill_alongside_compared = r->prefill.tok_s;
    if (b->scheme_compared > 0 && b->prefill_alongside_scheme <= 0) b->prefill_alongside_scheme = r->prefill.tok_s;
    runstate_free(&s);
    free(tokens);
    return b->alone < 0 || b->compared < 0 || b->scheme_compared < 0 ? -1 : 0;
}

int bench_run(Model *m, const char *model_name, const BenchOptions *o, const KvCacheScheme *scheme, BenchResult *r,
              Error *err) {
    const Config *c = &m->config;
    memset(r, 0, sizeof *r);
#ifdef _OPENMP
    if (o->threads > 0) omp_set_num_threads(o->threads);
#endif
    if (o->prompt < 1 || o->gen < 1 || o->prompt + o->gen > c->max_seq_len)
        return error_set(err, "bench: -p %d -n %d does not fit the model's %d positions", o->prompt, o->gen,
                         c->max_seq_len);
    snprintf(r->model, sizeof r->model, "%s", model_name);
    snprintf(r->dtype, sizeof r->dtype, "%s", dtype_name(m->weights.layers[0].wq.dtype));
    KernelPath path = kernel_choose(m->precision, m->weights.layers[0].wq.dtype);
    r->kernel = kernel_name(path);
    snprintf(r->precision, sizeof r->precision, "%s",
             path == KERNEL_AVX512_BF16 || path == KERNEL_AMX_BF16 ? "bf16 activations" : "f32 activations");
    r->threads = bench_threads();
    r->prompt = o->prompt;
    r->gen = o->gen;
    r->long_ctx = o->long_ctx > c->max_seq_len ? c->max_seq_len : o->long_ctx;
    if (r->long_ctx > 0 && r->long_ctx < o->gen + 1) r->long_ctx = 0;
    KvLayered fits_k = o->long_k, fits_v = o->long_v;
    char why[256];
    if (r->long_ctx > 0 && (kv_layered_bind(&fits_k, c->n_layers, c->head_dim, KV_SIDE_KEYS, why, sizeof why) ||
                            kv_layered_bind(&fits_v, c->n_layers, c->head_dim, KV_SIDE_VALUES, why, sizeof why))) {
        r->long_ctx = 0;   /* e.g. int4-g64 on a model with 8-wide heads: nothing to compare */
        r->long_skipped = 1;
    }
    snprintf(r->scheme, sizeof r->scheme, "%s", scheme->k.text);
    if (strcmp(o->long_k.text, o->long_v.text))
        snprintf(r->long_scheme, sizeof r->long_scheme, "%s / %s", o->long_k.text, o->long_v.text);
    else
        snprintf(r->long_scheme, sizeof r->long_scheme, "%s", o->long_k.text);

    int n_tok = o->prompt + o->gen > r->long_ctx ? o->prompt + o->gen : r->long_ctx;
    int *tokens = malloc((size_t)n_tok * sizeof *tokens);
    if (!tokens) return error_set(err, "bench: out of memory");
    for (int i = 0; i < n_tok; i++) tokens[i] = (int)((1000003u * (unsigned)i + 17u) % (unsigned)c->vocab_size);
    BenchStatus st = {.quiet = o->quiet, .start = seconds_now(), .reps = repeat_count(o)};
    int ppl_runs = o->ppl_windows > 0 && o->long_ctx > 1 ? plan_ppl(m, o, r) : 0;
    if (ppl_runs) st.ppl_positions = ppl_positions(r, ppl_runs, o->prompt);
    KvCacheScheme long_scheme = {o->long_k, o->long_v, scheme->calib};
    int rc = run_phases(m, o, scheme, &long_scheme, r, tokens, &st, err);
    free(tokens);
    if (!rc && ppl_runs) rc = run_ppl(m, o, &long_scheme, r, ppl_runs, &st, err);
    if (rc) return -1;
    r->peak_rss_mib = bench_peak_rss_mib();   /* before the memory probe's own buffer */
    if (o->probe_machine) {
        r->peak_f32_gflops = bench_probe_fma_gflops();
        r->peak_bf16_gflops = bench_probe_bf16_gflops();
        r->peak_amx_gflops = bench_probe_amx_gflops();
        r->peak_read_gbytes = bench_probe_read_gbytes();
        if (r->peak_read_gbytes < 0) return error_set(err, "bench: out of memory for the memory probe's 512 MiB");
    }
    return 0;
}

/* ---- reporting ---- */

/* The compute peak that bounds prefill on this path. */
static double compute_peak(const BenchResult *r) {
    if (strcmp(r->kernel, "amx-bf16") == 0 && r->peak_amx_gflops > 0) return r->peak_amx_gflops;
    return strcmp(r->kernel, "avx512-bf16") == 0 && r->peak_bf16_gflops > 0 ? r->peak_bf16_gflops
                                                                            : r->peak_f32_gflops;
}

static double fraction(double x, double peak) { return peak > 0 ? x / peak : 0; }

/* The ppl runs' positions/s over their prefills, both summed over the runs: the ppl path runs at
 * the same rate alone, compared and with the long scheme's cache (within 1-3% over four runs of
 * each on a 2-core Xeon), while on a shared machine the prefills timed between windows move by
 * 10-20% from minute to minute, which each run's own ratio carries in full. */
static double pooled_ratio(const BenchPpl *b) {
    double ppl = b->alone + b->compared, prefill = b->prefill_alongside + b->prefill_alongside_compared;
    if (b->scheme_compared > 0) {
        ppl += b->scheme_compared;
        prefill += b->prefill_alongside_scheme;
    }
    return prefill > 0 ? ppl / prefill : 0;
}

/* " (NN%)" of a measured peak, or nothing when the peaks were not probed (--no-probe). */
static void print_share(FILE *f, double x, double peak) {
    if (peak > 0) fprintf(f, " (%3.0f%%)", 100 * fraction(x, peak));
}

static void print_phase(FILE *f, const char *name, const BenchPhase *p, const BenchResult *r) {
    fprintf(f, "%-26s %8.2f tok/s  (min %.2f, max %.2f)  %7.1f GFLOP/s", name, p->tok_s, p->tok_s_min,
            p->tok_s_max, p->gflops);
    print_share(f, p->gflops, compute_peak(r));
    if (p->gbytes > 0) {
        fprintf(f, "  %5.1f GB/s", p->gbytes);
        print_share(f, p->gbytes, r->peak_read_gbytes);
        if (p->read_frac > 0) fprintf(f, " [%3.0f%% alongside]", 100 * p->read_frac);
    }
    fprintf(f, "\n");
}

void bench_print_text(FILE *f, const BenchResult *r) {
    char label[1100];
    fprintf(f, "model:     %s (%s weights, %.2f GB read per decode step)\n", r->model, r->dtype, r->weight_bytes * 1e-9);
    fprintf(f, "kernel:    %s, %s, %d threads\n", r->kernel, r->precision, r->threads);
    snprintf(label, sizeof label, "prefill %d", r->prompt);
    print_phase(f, label, &r->prefill, r);
    snprintf(label, sizeof label, "decode %d @ctx %d (%.40s)", r->gen, r->prompt, r->scheme);
    print_phase(f, label, &r->decode, r);
    if (r->long_ctx > 0) {
        snprintf(label, sizeof label, "decode @ctx %d (fp32)", r->long_ctx);
        print_phase(f, label, &r->long_f32, r);
        snprintf(label, sizeof label, "decode @ctx %d (%s)", r->long_ctx, r->long_scheme);
        print_phase(f, label, &r->long_quant, r);
        snprintf(label, sizeof label, "prefill %d (%s)", r->prompt, r->long_scheme);
        print_phase(f, label, &r->prefill_quant, r);
        fprintf(f, "kv cache:  %.1f MiB fp32, %.1f MiB %s at ctx %d (%.2fx smaller)\n", r->cache_bytes_f32 / 1048576.0,
                r->cache_bytes_quant / 1048576.0, r->long_scheme, r->long_ctx, r->cache_bytes_f32 / r->cache_bytes_quant);
    } else if (r->long_skipped) {
        fprintf(f, "(long-context decode skipped: %s does not fit head size)\n", r->long_scheme);
    }
    if (r->peak_f32_gflops > 0) {
        fprintf(f, "machine:   f32 FMA %.0f GFLOP/s", r->peak_f32_gflops);
        if (r->peak_bf16_gflops > 0) fprintf(f, ", bf16 dot %.0f GFLOP/s", r->peak_bf16_gflops);
        if (r->peak_amx_gflops > 0) fprintf(f, ", AMX bf16 %.0f GFLOP/s", r->peak_amx_gflops);
        fprintf(f, ", memory read %.1f GB/s (percentages are of these)\n", r->peak_read_gbytes);
        fprintf(f, "           [alongside]: of a read pass over the same weights right after each decode run\n");
    }
    if (r->ppl.windows > 0) {
        const BenchPpl *b = &r->ppl;
        fprintf(f, "ppl path:  HF ctx %d stride %d, batch %d, fp32 cache, windows 2..%d: %.1f positions/s alone "
                   "(%.2fx prefill), %.1f with the fp32 comparison (%.2fx)\n", b->ctx, b->stride, b->batch, b->windows,
                b->alone, b->alone / b->prefill_alongside, b->compared, b->compared / b->prefill_alongside_compared);
        if (b->scheme_compared > 0)
            fprintf(f, "           with the %s cache, compared (one sweep configuration): %.1f positions/s (%.2fx)\n",
                    r->long_scheme, b->scheme_compared, b->scheme_compared / b->prefill_alongside_scheme);
        fprintf(f, "           [prefill]: %d tokens timed between each run's windows, median %.1f, %.1f", r->prompt,
                b->prefill_alongside, b->prefill_alongside_compared);
        if (b->scheme_compared > 0) fprintf(f, ", %.1f", b->prefill_alongside_scheme);
        fprintf(f, " tok/s\n");
        fprintf(f, "           pooled: %.2fx (the runs' positions/s over their prefills, each summed: steadier than one run's)\n",
                pooled_ratio(b));
        fprintf(f, "           a full WikiText-2 test pass (%.2fM positions): %.1f h alone, %.1f h compared",
                b->full_positions * 1e-6, b->full_positions / b->alone / 3600, 2 * b->full_positions / b->compared / 3600);
        if (b->scheme_compared > 0)
            fprintf(f, ", %.1f h with the %s cache compared", 2 * b->full_positions / b->scheme_compared / 3600,
                    r->long_scheme);
        fprintf(f, "\n");
    }
    /* getrusage's high-water mark, read before the memory probe allocates its own buffer: the
     * runs' memory (weights, cache, activations); /usr/bin/time -v sees the probe's buffer too */
    fprintf(f, "peak RSS:  %.0f MiB of the runs (the process's high-water mark before the memory probe%s)\n",
            r->peak_rss_mib, r->peak_read_gbytes > 0 ? "'s 512 MiB buffer, which /usr/bin/time -v counts too" : "");
}

static void json_phase(FILE *f, const char *name, const BenchPhase *p, const BenchResult *r, int last) {
    fprintf(f, "  \"%s\": {\"tok_s\": %.3f, \"tok_s_min\": %.3f, \"tok_s_max\": %.3f, \"gflops\": %.2f, "
               "\"gflops_frac\": %.4f, \"gbytes\": %.2f, \"gbytes_frac\": %.4f, \"gbytes_alongside_frac\": %.4f}%s\n",
            name, p->tok_s, p->tok_s_min, p->tok_s_max, p->gflops, fraction(p->gflops, compute_peak(r)), p->gbytes,
            fraction(p->gbytes, r->peak_read_gbytes), p->read_frac, last ? "" : ",");
}

void bench_print_json(FILE *f, const BenchResult *r) {
    fprintf(f, "{\n");
    json_out_string(f, "model", r->model, 0);
    fprintf(f, "  \"dtype\": \"%s\",\n  \"kernel\": \"%s\",\n  \"precision\": \"%s\",\n", r->dtype, r->kernel,
            r->precision);
    fprintf(f, "  \"threads\": %d,\n  \"prompt\": %d,\n  \"gen\": %d,\n  \"long_ctx\": %d,\n", r->threads, r->prompt,
            r->gen, r->long_ctx);
    fprintf(f, "  \"kv_scheme\": \"%s\",\n  \"long_kv_scheme\": \"%s\",\n", r->scheme, r->long_scheme);
    fprintf(f, "  \"weight_bytes\": %.0f,\n", r->weight_bytes);
    fprintf(f, "  \"peak_f32_gflops\": %.1f,\n  \"peak_bf16_gflops\": %.1f,\n  \"peak_amx_gflops\": %.1f,\n",
            r->peak_f32_gflops, r->peak_bf16_gflops, r->peak_amx_gflops);
    fprintf(f, "  \"peak_read_gbytes\": %.2f,\n", r->peak_read_gbytes);
    fprintf(f, "  \"peak_rss_mib\": %.1f,\n", r->peak_rss_mib);
    if (r->ppl.windows > 0) {
        const BenchPpl *b = &r->ppl;
        fprintf(f, "  \"ppl\": {\"ctx\": %d, \"stride\": %d, \"windows\": %d, \"batch\": %d, \"positions_per_s\": %.3f, "
                   "\"compared_positions_per_s\": %.3f, \"ratio_to_prefill\": %.4f, \"compared_ratio_to_prefill\": %.4f, "
                   "\"prefill_alongside_tok_s\": %.3f, \"prefill_alongside_compared_tok_s\": %.3f, "
                   "\"scheme_compared_positions_per_s\": %.3f, \"scheme_compared_ratio_to_prefill\": %.4f, "
                   "\"prefill_alongside_scheme_tok_s\": %.3f, \"pooled_ratio_to_prefill\": %.4f, "
                   "\"full_pass_positions\": %.0f, \"full_pass_s\": %.1f, "
                   "\"full_pass_compared_s\": %.1f},\n",
                b->ctx, b->stride, b->windows, b->batch, b->alone, b->compared, b->alone / b->prefill_alongside,
                b->compared / b->prefill_alongside_compared, b->prefill_alongside, b->prefill_alongside_compared,
                b->scheme_compared, b->scheme_compared > 0 ? b->scheme_compared / b->prefill_alongside_scheme : 0,
                b->prefill_alongside_scheme, pooled_ratio(b), b->full_positions,
                b->full_positions / b->alone, 2 * b->full_positions / b->compared);
    }
    json_phase(f, "prefill", &r->prefill, r, 0);
    json_phase(f, "decode", &r->decode, r, r->long_ctx <= 0);
    if (r->long_ctx > 0) {
        json_phase(f, "decode_long_fp32", &r->long_f32, r, 0);
        json_phase(f, "decode_long_quant", &r->long_quant, r, 0);
        json_phase(f, "prefill_long_scheme", &r->prefill_quant, r, 0);
        fprintf(f, "  \"kv_cache_bytes_fp32\": %.0f,\n  \"kv_cache_bytes_long_scheme\": %.0f\n", r->cache_bytes_f32,
                r->cache_bytes_quant);
    }
    fprintf(f, "}\n");
}
