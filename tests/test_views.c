/* tests/test_views.c: damage by position and the per-layer error (eval/position.h,
 * eval/layer_replay.h) against computations made here on their own, on mini-llama-brown.
 *
 * Position: the bucket edges against the list (0-63, 64-127, 128-255, ...); an
 * evaluation's buckets (HF ctx 128 stride 48 in batches of 40, so windows, scored halves and
 * batches all cut across the buckets) against the same windows run here by forward() and scored
 * row by row (ppl_score_row), bucketed by their own position: counts equal, sums to 1e-9; and the
 * buckets add up to the evaluation's totals (counts exactly).
 * Per-layer error: 0 in every layer for an fp32 cache and for int2-g32+res128 at ctx 128 (the
 * residual window keeps every position at full precision: a lossless scheme on another code
 * path); for int4-g64, layer 0 (whose input the fp32 and the quantized run share) against the two
 * runs' own attention outputs, tapped here; rows = scored tokens. The position sums and the layer
 * error round-trip through their JSON. */
#include "tests/test.h"
#include "eval/perplexity.h"
#include "eval/wikitext.h"
#include "eval/views.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CTX 128
#define STRIDE 48
#define BATCH 40
#define WINDOWS 4

typedef struct {
    Model model;
    Tokenizer *tok;
    int *tokens;
    int n_tokens;
} Setup;

static int setup(Setup *s) {
    Error err;
    char msg[256];
    memset(s, 0, sizeof *s);
    if (model_load(&s->model, "data/models/mini-llama-brown", &err)) return -1;
    s->tok = tokenizer_load("data/models/mini-llama-brown/tokenizer.bin", msg, sizeof msg);
    if (!s->tok) return -1;
    s->tokens = load_eval_tokens("data/wikitext-2-raw/wiki.test.raw", s->tok, 1, &s->n_tokens, &err);
    return s->tokens ? 0 : -1;
}

static const KvLayered *scheme_named(const char *text, KvSide side, KvLayered *buf) {
    char why[160];
    return kv_layered_parse(text, side, buf, why, sizeof why) == 0 ? buf : NULL;
}

static PplOptions options(const KvCacheScheme *scheme) {
    PplOptions o = {0};
    o.protocol = PPL_HF;
    o.ctx = CTX;
    o.stride = STRIDE;
    o.max_windows = WINDOWS;
    o.shard_count = 1;
    o.batch = BATCH;
    o.scheme = scheme;
    o.compare = 1;
    o.layer_error = 1;
    return o;
}

/* The buckets written out: [0, 64), [64, 128), [128, 256), ... */
static int bucket_by_list(int p) {
    static const int edges[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144,
                                524288, 1048576};
    int b = 0;
    while (b < (int)(sizeof edges / sizeof edges[0]) && p >= edges[b]) b++;
    return b;
}

static void check_bucket_edges(void) {
    int bad = -1;
    for (int p = 0; p < (1 << 20) && bad < 0; p++)
        if (position_bucket(p) != bucket_by_list(p)) bad = p;
    int bounds_ok = 1;
    for (int b = 0; b < 15; b++)
        bounds_ok &= position_bucket(position_bucket_low(b)) == b && position_bucket(position_bucket_high(b) - 1) == b;
    check(bad < 0 && bounds_ok && position_buckets_for(1024) == 5 && position_buckets_for(64) == 1,
          "position buckets: 0-63, 64-127, 128-255, ... for every position below 2^20; low/high bound each",
          "position %d in bucket %d, expected %d; bounds %d", bad, bad >= 0 ? position_bucket(bad) : 0,
          bad >= 0 ? bucket_by_list(bad) : 0, bounds_ok);
}

/* Window w of the HF protocol, written out here: tokens [w*stride, min(w*stride + ctx, n)), scored
 * from the first position no earlier window scored. */
static void window_of(int w, int n_tokens, int *begin, int *len, int *first_target) {
    *begin = w * STRIDE;
    int end = *begin + CTX < n_tokens ? *begin + CTX : n_tokens;
    *len = end - *begin;
    int prev_end = w == 0 ? 0 : *begin - STRIDE + CTX;
    *first_target = w == 0 ? 1 : prev_end - *begin;
}

/* Runs tokens[0..n) through cache kv in the evaluation's forward calls (batches of BATCH, logits
 * from the first scored row `first` on: the same calls give the same bits), the logits of row p
 * into logits[p][V]; tap sees every batch at rows pos.. (layer_rows = n). */
static void run_all(const Setup *s, RunState *st, KvCache *kv, const int *tokens, int n, int first, float *logits,
                    ForwardTap *tap, float *tap_att) {
    size_t V = (size_t)s->model.config.vocab_size, dim = (size_t)s->model.config.dim;
    kv->len = 0;
    for (int pos = 0; pos < n; pos += BATCH) {
        int T = n - pos < BATCH ? n - pos : BATCH;
        int from = first - pos < 0 ? 0 : first - pos > T ? T : first - pos;
        if (tap) {
            tap->att = tap_att + (size_t)pos * dim;
            tap->layer_rows = n;
            st->tap = tap;
        }
        forward(&s->model, st, kv, tokens + pos, T, pos, from);
        st->tap = NULL;
        memcpy(logits + (size_t)(pos + from) * V, st->logits, (size_t)(T - from) * V * sizeof(float));
    }
}

typedef struct {
    PositionSums pos;
    double layer0_sum;   /* relative error of layer 0's attention output, tapped from the two runs */
    long rows;
} Independent;

/* The evaluation redone here: each window's fp32 and scheme runs, every scored row scored and
 * bucketed by its own position. */
static int independent(const Setup *s, const KvCacheScheme *scheme, Independent *out) {
    const Config *c = &s->model.config;
    size_t V = (size_t)c->vocab_size, dim = (size_t)c->dim;
    Error err;
    RunState st;
    KvCache base_kv, q_kv;
    memset(out, 0, sizeof *out);
    float *base = malloc(CTX * V * sizeof(float)), *q = malloc(CTX * V * sizeof(float));
    float *base_att = malloc((size_t)c->n_layers * CTX * dim * sizeof(float));
    float *q_att = malloc((size_t)c->n_layers * CTX * dim * sizeof(float));
    double *p = malloc(V * sizeof(double));
    if (!base || !q || !base_att || !q_att || !p || runstate_init(&st, c, BATCH, &err) ||
        kv_cache_init(&base_kv, c, CTX, BATCH, NULL, NULL, &err) ||
        kv_cache_init(&q_kv, c, CTX, BATCH, scheme, s->model.rope_inv_freq, &err))
        return -1;
    ForwardTap tap = {0};
    for (int w = 0; w < WINDOWS; w++) {
        int begin, n, first;
        window_of(w, s->n_tokens, &begin, &n, &first);
        run_all(s, &st, &base_kv, s->tokens + begin, n, first - 1, base, &tap, base_att);
        run_all(s, &st, &q_kv, s->tokens + begin, n, first - 1, q, &tap, q_att);
        for (int j = first; j < n; j++) {
            int row = j - 1;
            PplTargetScore x = ppl_score_row(base + (size_t)row * V, q + (size_t)row * V, (int)V, s->tokens[begin + j], p);
            int b = bucket_by_list(row);
            out->pos.n[b]++;
            out->pos.agree[b] += x.agree;
            out->pos.kl_sum[b] += x.kl;
            out->pos.diff_sum[b] += x.nll - x.base_nll;
            out->pos.base_nll_sum[b] += x.base_nll;
            double d2 = 0, r2 = 0;
            for (size_t i = 0; i < dim; i++) {   /* layer 0: row `row` of the tapped outputs */
                double d = (double)q_att[(size_t)row * dim + i] - base_att[(size_t)row * dim + i];
                d2 += d * d;
                r2 += (double)base_att[(size_t)row * dim + i] * base_att[(size_t)row * dim + i];
            }
            out->layer0_sum += sqrt(d2 / r2);
            out->rows++;
        }
    }
    free(base);
    free(q);
    free(base_att);
    free(q_att);
    free(p);
    runstate_free(&st);
    kv_cache_free(&base_kv);
    kv_cache_free(&q_kv);
    return 0;
}

static double rel(double a, double b) { return a == b ? 0 : fabs(a - b) / fmax(fabs(b), 1e-300); }

static void check_positions(const Setup *s, const PplResult *r, const Independent *ind) {
    const PositionSums *got = &r->sums.pos, *want = &ind->pos;
    int counts_ok = 1;
    double worst = 0;
    for (int b = 0; b < POS_BUCKETS; b++) {
        counts_ok &= got->n[b] == want->n[b] && got->agree[b] == want->agree[b];
        worst = max_or_inf(worst, rel(got->kl_sum[b], want->kl_sum[b]));
        worst = max_or_inf(worst, fabs(got->diff_sum[b] - want->diff_sum[b]) / fmax(1e-6, fabs(want->diff_sum[b])));
        worst = max_or_inf(worst, rel(got->base_nll_sum[b], want->base_nll_sum[b]));
    }
    check(counts_ok && worst <= 1e-9 && want->n[0] > 0 && want->n[1] > 0,
          "int4-g64 by position = the windows scored here row by row, bucketed by their own position (counts equal, "
          "sums 1e-9)", "counts equal %d, worst relative difference %.3g", counts_ok, worst);
    long n = 0, agree = 0;
    double kl = 0, diff = 0;
    for (int b = 0; b < POS_BUCKETS; b++) {
        n += got->n[b];
        agree += got->agree[b];
        kl += got->kl_sum[b];
        diff += got->diff_sum[b];
    }
    check(n == r->sums.scored && agree == r->sums.top1_agree && rel(kl, r->sums.kl_sum) <= 1e-12 &&
              fabs(diff - r->sums.diff_sum) <= 1e-12 * fmax(1, fabs(r->sums.diff_sum)),
          "the position buckets add up to the evaluation's totals: tokens and top-1 exactly, KL and delta NLL sums to 1e-12",
          "tokens %ld vs %ld, top-1 %ld vs %ld, KL %.17g vs %.17g, diff %.17g vs %.17g", n, r->sums.scored, agree,
          r->sums.top1_agree, kl, r->sums.kl_sum, diff, r->sums.diff_sum);
    (void)s;
}

static void check_layer0(const PplResult *r, const Independent *ind) {
    const LayerErrorSums *e = &r->sums.layer;
    double got = layer_error_mean(e, 0), want = ind->layer0_sum / (double)ind->rows;
    check(e->rows == r->sums.scored && e->rows == ind->rows && rel(got, want) <= 1e-12 && want > 0,
          "int4-g64 layer 0's error = the two runs' own layer-0 attention outputs, tapped here (1e-12)",
          "rows %ld (scored %ld, here %ld), %.17g vs %.17g", e->rows, r->sums.scored, ind->rows, got, want);
    int all_positive = e->n_layers == r->sums.layer.n_layers && e->n_layers == 4;
    for (int l = 0; l < e->n_layers; l++) all_positive &= layer_error_mean(e, l) > 1e-3 && layer_error_mean(e, l) < 1;
    check(all_positive, "int4-g64 error in every layer between 1e-3 and 1", "layers %d, layer 1 %.3g", e->n_layers,
          layer_error_mean(e, 1));
}

/* Every layer's sum of relative errors exactly 0 over every scored row. */
static void check_lossless(const Setup *s, const char *scheme, const char *name) {
    KvCacheScheme cs = {0};
    Error err = {{0}};
    PplResult r;
    int fp32 = !strcmp(scheme, "fp32");
    int parsed = fp32 || (scheme_named(scheme, KV_SIDE_KEYS, &cs.k) && scheme_named(scheme, KV_SIDE_VALUES, &cs.v));
    PplOptions o = options(fp32 ? NULL : &cs);
    int rc = parsed ? ppl_evaluate(&s->model, s->tokens, s->n_tokens, &o, &r, &err) : -1;
    int zero = rc == 0 && r.sums.layer.n_layers == 4 && r.sums.layer.rows == r.sums.scored && r.sums.scored > 0;
    int first_bad = -1;
    for (int l = 0; zero && l < 4; l++)
        if (r.sums.layer.rel_sum[l] != 0 || r.sums.layer.rel_sumsq[l] != 0) zero = 0, first_bad = l;
    check(zero && r.sums.kl_sum == 0, name, "rc %d (%s), layers %d, rows %ld of %ld, layer %d sum %.3g, KL sum %.3g", rc,
          err.msg, rc ? 0 : r.sums.layer.n_layers, rc ? 0 : r.sums.layer.rows, rc ? 0 : r.sums.scored, first_bad,
          first_bad >= 0 ? r.sums.layer.rel_sum[first_bad] : 0.0, rc ? 0 : r.sums.kl_sum);
}

/* The sums written as JSON and read back are the same bits. */
static void check_round_trip(const TokenSums *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fprintf(f, "{\"a\": ");
    position_sums_write(f, &s->pos);
    fprintf(f, ", \"b\": ");
    layer_error_write(f, &s->layer);
    fprintf(f, "}");
    fclose(f);
    Error err;
    JsonValue *j = json_parse(text, len, &err);
    PositionSums p = {0};
    LayerErrorSums l = {0};
    int rc = !j || position_sums_read(json_get(j, "a"), &p, "a", &err) || layer_error_read(json_get(j, "b"), &l, "b", &err);
    check(!rc && !memcmp(&p, &s->pos, sizeof p) && l.n_layers == s->layer.n_layers && l.rows == s->layer.rows &&
              !memcmp(l.rel_sum, s->layer.rel_sum, sizeof l.rel_sum) && !memcmp(l.rel_sumsq, s->layer.rel_sumsq, sizeof l.rel_sumsq),
          "position sums and layer error: JSON and back, the same bits", "rc %d: %s", rc, rc ? err.msg : "values differ");
    json_free(j);
    free(text);
    /* a bucket given twice is refused */
    const char *twice = "[[1, 2, 1, 0.1, 0.1, 0, 0, 1], [1, 2, 1, 0.1, 0.1, 0, 0, 1]]";
    JsonValue *t = json_parse(twice, strlen(twice), &err);
    PositionSums q = {0};
    check(t && position_sums_read(t, &q, "x", &err) != 0, "position sums with a bucket twice are refused", "accepted");
    json_free(t);
}

int main(void) {
    check_bucket_edges();
    Setup s;
    if (!check(setup(&s) == 0, "mini-llama-brown and wiki.test load", "failed")) return test_exit_code();
    KvCacheScheme int4 = {0};
    scheme_named("int4-g64", KV_SIDE_KEYS, &int4.k);
    scheme_named("int4-g64", KV_SIDE_VALUES, &int4.v);
    PplOptions o = options(&int4);
    PplResult r;
    Error err = {{0}};
    Independent ind;
    int rc = ppl_evaluate(&s.model, s.tokens, s.n_tokens, &o, &r, &err);
    if (check(rc == 0 && independent(&s, &int4, &ind) == 0, "int4-g64 evaluated (HF ctx 128 stride 48, batches of 40)",
              "%s", err.msg)) {
        check_positions(&s, &r, &ind);
        check_layer0(&r, &ind);
        check_round_trip(&r.sums);
    }
    check_lossless(&s, "fp32", "per-layer error of an fp32 cache: exactly 0 in every layer (the replay = the fp32 run)");
    check_lossless(&s, "int2-g32+res128",
                   "per-layer error of int2-g32+res128 at ctx 128 (every position in the full-precision window): exactly 0");
    free(s.tokens);
    tokenizer_free(s.tok);
    model_free(&s.model);
    return test_exit_code();
}
