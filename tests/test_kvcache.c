/* tests/test_kvcache.c: the KV cache (model/kvcache.h) against SCHEMES.md §1-§4
 * (tests/fixtures/reference/SCHEMES.md).
 *
 * Read-back, with no model, in a few seconds: every base of the codec table (each codec's
 * `examples`; one that does not fit head_dim 64 is skipped, said on a line) alone and with
 * every subset of +had, +prerope, +out2, +res5 and +sink3. kv_layered_bind must accept exactly
 * the specs SCHEMES.md §4 allows (+prerope keys only, +out channel-axis bases only). Each
 * accepted spec gets a cache of 2 layers x 2 KV heads x head_dim 64 holding it as the keys of
 * layer 0 and the values of layer 1, partner specs (q4_0+prerope+sink2 keys, nf4-g32+res3
 * values) in the other places, so a store bound to another side's or layer's scheme reads back
 * other numbers. Seeded random rows go in through kv_cache_write and kv_cache_commit in batches
 * of 1 to 8, twice: the second time from position 0 again (a new window over the same cache),
 * with other rows and the two ways of giving keys swapped between the layers (before RoPE with
 * the position's angles; already rotated, without). After every batch the cache's reads must
 * equal an independent computation of SCHEMES.md:
 *   quantized positions (S <= j < the quantized end, §4's rule written out here) read the
 *   spec's own kv_spec_encode -> kv_spec_decode of the row it quantizes: the key with the key
 *   scheme, the value with the value scheme, a token-axis base the unit of its group's G rows;
 *   +prerope keys quantized before RoPE and rotated at their own position after decoding;
 *   sinks, the residual window and an incomplete token-axis group read the written row;
 * through kv_cache_rows in the read domain at every length a query of the batch sees (bit for
 * bit), kv_cache_rows_t64 where the codec has it (bit for bit), kv_cache_read_key/_value in
 * the natural order (quantized rows bit for bit, full-precision ones to the rounding of the
 * domain's rotations), and kv_cache_quantized_end at every length. Attention's shortcut too: a
 * query moved into the key read domain scores the rows as read as it scores the natural keys
 * (pca's coefficients: less one constant a query), and value rows summed as read and moved back
 * once equal the natural values' sum; and the stores read coefficients or rotate +prerope keys
 * in transposed blocks exactly where model/kvcache.h says.
 *
 * The arrays' sizes: tests/test_kvcache_bytes.c. Through the forward pass, with a model:
 * tests/test_kvcache_forward.c. */
#include "tests/test.h"
#include "tests/test_random.h"
#include "tests/kvcache_shape.h"
#include "model/model.h"
#include "model/kernels/kernels.h"
#include "quant/scheme.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- read-back ---- */

#define RB_KV (RB_HEADS * RB_DIM)
#define RB_RESIDUAL 5
#define RB_SINKS 3
#define RB_OUTLIERS 2
/* rows per kv_cache_rows call, as attention reads blocks: 13 makes blocks start inside token groups */
#define RB_BLOCK 13
/* A full-precision row read in the natural order went into the read domain and back: +had's H
 * and tq's inner rotation, applied twice, round in the last bits (measured up to 6.0e-7 on
 * these N(0,1) rows). Reading its quantized row instead moves it by at least 2.5e-4 (fp16, the
 * finest base but fp32, whose quantized rows are the rows). */
#define RB_NATURAL_TOL 1e-5
#define RB_MAX_UNIT 8192    /* bytes of one unit, for the expected reads */

enum { MOD_HAD = 1, MOD_PREROPE = 2, MOD_OUT = 4, MOD_RES = 8, MOD_SINK = 16, MOD_SETS = 32 };
enum { SIDE_K = 0, SIDE_V = 1 };

/* What the test knows of one layer's spec on one side, from its own parse and bind. */
typedef struct {
    KvSpec spec;       /* for kv_spec_encode / decode / to_domain / from_domain */
    int prerope;       /* keys quantized before RoPE, read in the natural order with RoPE */
    int sinks, residual, group;
    int token_axis;    /* G > 1 rows per unit: quantized along positions */
    const float *tables[RB_HEADS];   /* a fitted base's table for each KV head (from the test's calibration) */
} RefSpec;

/* The rows written in one pass: per position, layer and KV head. */
typedef struct {
    float key[RB_POSITIONS][RB_LAYERS][RB_KV];      /* before RoPE */
    float roped[RB_POSITIONS][RB_LAYERS][RB_KV];    /* after RoPE: rope() of key */
    float value[RB_POSITIONS][RB_LAYERS][RB_KV];
} Rows;

/* What one layer, side and head must read back, per position: the full-precision row and the
 * quantized one, in the natural order and in the read domain. Positions never quantized
 * hold NaN in q_*, so reading them as quantized fails. */
typedef struct {
    float full_nat[RB_POSITIONS][RB_DIM], full_dom[RB_POSITIONS][RB_DIM];
    float q_nat[RB_POSITIONS][RB_DIM], q_dom[RB_POSITIONS][RB_DIM];
    float q_coef[RB_POSITIONS][RB_DIM];   /* a coefficient-read codec's coefficients (pca: quant/pca.h) */
} Expected;

/* A check's running result over many rows: the count, the failures, the first failure. */
typedef struct {
    long rows, bad;
    char first[320];
} Tally;

enum { T_BIND, T_QEND, T_ROWS, T_ROWS_T64, T_ROWS_T64_BF16, T_KEY_Q, T_KEY_FULL, T_VALUE_Q, T_VALUE_FULL, T_DOMAINS, T_PATHS, N_TALLIES };

typedef struct {
    Config cfg;
    float inv_freq[RB_DIM / 2];
    float cos_sin[RB_POSITIONS][RB_DIM];   /* rope_angles of each position */
    Rows rows[2];                          /* the two passes */
    Expected exp[RB_LAYERS][2][RB_HEADS];
    Tally t[N_TALLIES];
    long bf16_differs;                     /* kv_cache_rows_t64 blocks whose bf16 read is not the exact one */
    double bf16_worst;                     /* the largest such difference, relative to the block's largest |value| */
    const char *case_name;                 /* "K ..., V ..." of the cache being checked */
} ReadBack;

static void tally(Tally *t, int ok, const char *fmt, ...) {
    t->rows++;
    if (ok) return;
    if (t->bad++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->first, sizeof t->first, fmt, ap);
        va_end(ap);
    }
}

static void spec_text(const char *base, int mods, char *out, size_t len) {
    snprintf(out, len, "%s%s%s", base, mods & MOD_HAD ? "+had" : "", mods & MOD_PREROPE ? "+prerope" : "");
    size_t n = strlen(out);
    if (mods & MOD_OUT) n += (size_t)snprintf(out + n, len - n, "+out%d", RB_OUTLIERS);
    if (mods & MOD_RES) n += (size_t)snprintf(out + n, len - n, "+res%d", RB_RESIDUAL);
    if (mods & MOD_SINK) snprintf(out + n, len - n, "+sink%d", RB_SINKS);
}

/* SCHEMES.md §4: +prerope is for keys only, +outK for channel-axis bases only; +had needs a
 * power-of-two head_dim (64 is). */
static int schemes_allow(int mods, int side, int token_axis, int pca) {
    if ((mods & MOD_PREROPE) && side != SIDE_K) return 0;
    if ((mods & MOD_OUT) && token_axis) return 0;
    if ((mods & (MOD_HAD | MOD_OUT)) && pca) return 0;   /* §9: pcaB takes neither */
    return 1;
}

/* Parses and binds one SPEC for one side as the cache would; 0, or -1 with why. */
static int ref_bind(const char *text, int side, RefSpec *r, char *why, size_t why_len) {
    KvLayered l;
    memset(r, 0, sizeof *r);
    KvSide kv_side = side == SIDE_K ? KV_SIDE_KEYS : KV_SIDE_VALUES;
    if (kv_layered_parse(text, kv_side, &l, why, why_len) || kv_layered_bind(&l, RB_LAYERS, RB_DIM, kv_side, why, why_len))
        return -1;
    r->spec = *kv_layered_at(&l, 0);
    r->prerope = r->spec.prerope;
    r->sinks = r->spec.sinks;
    r->residual = r->spec.residual;
    r->group = r->spec.base.rows;
    r->token_axis = r->group > 1;
    return 0;
}

/* SCHEMES.md §4: with n positions written, [S, end) are quantized. */
static int ref_quantized_end(const RefSpec *r, int n) {
    int s = r->sinks;
    if (r->token_axis) {
        int free_positions = n - s - r->residual;
        return s + (free_positions > 0 ? r->group * (free_positions / r->group) : 0);
    }
    return n - r->residual > s ? n - r->residual : s;
}

/* RoPE backwards, for a +prerope key written already rotated: the row the scheme quantizes. */
static void unrope(float *x, const float *cos_sin) {
    int half = RB_DIM / 2;
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half], c = cos_sin[i], s = cos_sin[half + i];
        x[i] = a * c + b * s;
        x[i + half] = b * c - a * s;
    }
}

/* ---- the expected reads ---- */

/* The row the spec quantizes at position p: the value; the key after RoPE; or for +prerope the
 * key before RoPE (as given, or RoPE undone when the key was written rotated). */
static void quantized_input(const ReadBack *rb, const Rows *w, const RefSpec *r, int layer, int side, int head,
                            int p, int written_roped, float *x) {
    const float *src = side == SIDE_V                     ? w->value[p][layer]
                       : r->prerope && !written_roped ? w->key[p][layer]
                                                      : w->roped[p][layer];
    memcpy(x, src + head * RB_DIM, RB_DIM * sizeof(float));
    if (side == SIDE_K && r->prerope && written_roped) unrope(x, rb->cos_sin[p]);
}

/* One decoded row (in the spec's domain) at position p into the expected quantized reads. */
static void expect_decoded(const ReadBack *rb, const RefSpec *r, int p, const float *dom, Expected *e) {
    memcpy(e->q_nat[p], dom, RB_DIM * sizeof(float));
    kv_spec_from_domain(&r->spec, e->q_nat[p], RB_DIM);
    if (r->prerope) rope(e->q_nat[p], 1, RB_DIM, rb->cos_sin[p]);   /* at the key's own position */
    memcpy(e->q_dom[p], r->prerope ? e->q_nat[p] : dom, RB_DIM * sizeof(float));
}

static void expect(const ReadBack *rb, const Rows *w, const RefSpec *r, int layer, int side, int head, int written_roped,
                   Expected *e) {
    KvSpec spec = r->spec;   /* with the head's table, for a fitted base */
    spec.base.table = r->tables[head];
    float in[RB_POSITIONS][RB_DIM];
    unsigned char unit[RB_MAX_UNIT];
    float scratch[RB_POSITIONS * RB_DIM], dom[RB_DIM];
    int s = r->sinks, g = r->group;
    for (int p = 0; p < RB_POSITIONS; p++) {
        quantized_input(rb, w, r, layer, side, head, p, written_roped, in[p]);
        memcpy(e->full_nat[p], in[p], sizeof in[p]);
        if (r->prerope) rope(e->full_nat[p], 1, RB_DIM, rb->cos_sin[p]);
        memcpy(e->full_dom[p], r->prerope ? e->full_nat[p] : in[p], sizeof in[p]);
        if (!r->prerope) kv_spec_to_domain(&r->spec, e->full_dom[p], RB_DIM);
        for (int i = 0; i < RB_DIM; i++) e->q_nat[p][i] = e->q_dom[p][i] = NAN;
    }
    /* the units: one per position from S, or one per complete group of G positions from S */
    for (int p0 = s; p0 + g <= RB_POSITIONS; p0 += g) {
        kv_spec_encode(&spec, in[p0], RB_DIM, unit, scratch);
        for (int i = 0; i < g; i++) {
            kv_spec_decode(&spec, unit, RB_DIM, i, 1, dom);
            expect_decoded(rb, r, p0 + i, dom, e);
            if (spec.base.codec->decode_coefficients)
                spec.base.codec->decode_coefficients(&spec.base, unit, RB_DIM, i, 1, e->q_coef[p0 + i]);
        }
    }
}

/* ---- the reads ---- */

static const KvStore *store_of(const KvCache *c, int layer, int side) {
    return side == SIDE_K ? kv_cache_keys(c, layer) : kv_cache_values(c, layer);
}

static const char *side_name(int side) { return side == SIDE_K ? "key" : "value"; }

/* What a query at length n reads in the read domain, in blocks of RB_BLOCK rows, bit for bit:
 * every row (all), or those from a block below the quantized end (the queries inside a batch
 * read the same stored rows as its last, which reads all; they differ in which rows are
 * quantized). The cache is asked as attention asks it, with its own quantized end: a wrong
 * one shows as rows read in the wrong form (and in check_quantized_end), never as a read of
 * rows the store does not hold. */
static void check_rows(ReadBack *rb, const KvCache *c, const RefSpec *refs, int pass, int n, int all) {
    float buf[RB_BLOCK * RB_DIM];
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++) {
            const RefSpec *r = &refs[l * 2 + side];
            const KvStore *st = store_of(c, l, side);
            int q_end = ref_quantized_end(r, n), cache_q_end = kv_cache_quantized_end(st, n);
            for (int h = 0; h < RB_HEADS; h++) {
                const Expected *e = &rb->exp[l][side][h];
                int from = all || q_end < RB_BLOCK ? 0 : q_end - RB_BLOCK;
                for (int p0 = from; p0 < n; p0 += RB_BLOCK) {
                    int np = n - p0 < RB_BLOCK ? n - p0 : RB_BLOCK;
                    const float *got = kv_cache_rows(c, st, h, p0, np, cache_q_end, buf);
                    for (int j = p0; j < p0 + np; j++) {
                        int quantized = j >= r->sinks && j < q_end;
                        const float *want = !quantized ? e->full_dom[j] : st->coefficient_reads ? e->q_coef[j] : e->q_dom[j];
                        double d = max_abs_diff(got + (size_t)(j - p0) * RB_DIM, want, RB_DIM);
                        tally(&rb->t[T_ROWS], d == 0,
                              "%s: pass %d, length %d: layer %d %s %s head %d position %d (%s) off by %.3g", rb->case_name,
                              pass, n, l, r->spec.text, side_name(side), h, j, quantized ? "quantized" : "full precision", d);
                    }
                }
            }
        }
}

/* kv_cache_rows_t64 on the quantized blocks of 64 at length n, where the codec has it; and read
 * for attention's bf16 pairs: the same bits, or, for a +prerope block a codec decodes at bf16
 * working precision (pca: KV_BLOCK_DECODED_T64_BF16, whose sums test_pca_blocks checks), within
 * BF16_KEYS of the block's largest |value|. */
#define BF16_KEYS 0.01
static void check_rows_t64(ReadBack *rb, const KvCache *c, const RefSpec *refs, int pass, int n) {
    float kt[RB_DIM * 64], kt_bf16[RB_DIM * 64];
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++) {
            const RefSpec *r = &refs[l * 2 + side];
            const KvStore *st = store_of(c, l, side);
            int q_end = ref_quantized_end(r, n), cache_q_end = kv_cache_quantized_end(st, n);
            for (int h = 0; h < RB_HEADS; h++)
                for (int p0 = r->sinks; p0 < q_end; p0 += 64) {
                    int np = q_end - p0 < 64 ? q_end - p0 : 64;
                    if (!kv_cache_rows_t64(c, st, h, p0, np, cache_q_end, 0, kt)) continue;
                    double d = 0, largest = 0, d_bf16 = 0;
                    for (int i = 0; i < RB_DIM; i++)
                        for (int p = 0; p < 64; p++) {
                            const Expected *e = &rb->exp[l][side][h];
                            float want = p >= np ? 0.0f : st->coefficient_reads ? e->q_coef[p0 + p][i] : e->q_dom[p0 + p][i];
                            d = max_or_inf(d, fabs((double)kt[i * 64 + p] - want));
                            largest = fabs((double)want) > largest ? fabs((double)want) : largest;
                        }
                    tally(&rb->t[T_ROWS_T64], d == 0,
                          "%s: pass %d, length %d: layer %d %s %s head %d block %d+%d off by %.3g", rb->case_name, pass, n,
                          l, r->spec.text, side_name(side), h, p0, np, d);
                    int read = kv_cache_rows_t64(c, st, h, p0, np, cache_q_end, 1, kt_bf16);
                    for (int i = 0; read && i < RB_DIM * 64; i++) d_bf16 = max_or_inf(d_bf16, fabs((double)kt_bf16[i] - kt[i]));
                    int may_differ = st->transposed_rope && st->blocks;
                    rb->bf16_differs += read && d_bf16 > 0;
                    if (read && may_differ && largest > 0 && d_bf16 / largest > rb->bf16_worst) rb->bf16_worst = d_bf16 / largest;
                    tally(&rb->t[T_ROWS_T64_BF16], read && (d_bf16 == 0 || (may_differ && d_bf16 <= BF16_KEYS * largest)),
                          "%s: pass %d, length %d: layer %d %s %s head %d block %d+%d: %s, off by %.3g (largest |value| %.3g)",
                          rb->case_name, pass, n, l, r->spec.text, side_name(side), h, p0, np,
                          read ? "read for bf16" : "not read for bf16", d_bf16, largest);
                }
        }
}

/* Which way attention reads each store (kvcache.h, Coefficient reads): a codec with coefficients
 * (pca) reads them where every position is quantized and keys are not +prerope; +prerope keys of
 * a codec with a transposed decode and nothing between it and the natural order are rotated in
 * transposed blocks. Else a fast path could be off and every other check still pass. */
static void check_paths(ReadBack *rb, const KvCache *c, const RefSpec *refs) {
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++) {
            const RefSpec *r = &refs[l * 2 + side];
            const KvStore *st = store_of(c, l, side);
            const KvCodec *codec = r->spec.base.codec;
            int natural = !r->spec.hadamard && !r->spec.outliers && !codec->rotate && !codec->llama_key_order;
            int coef = codec->decode_coefficients && !r->prerope && !r->sinks && !r->residual && natural;
            int t_rope = r->prerope && codec->decode_t64 && natural && !kv_spec_is_fp32(&r->spec);
            tally(&rb->t[T_PATHS], st->coefficient_reads == coef && st->transposed_rope == t_rope,
                  "%s: layer %d %s %s: coefficient reads %d (want %d), transposed RoPE %d (want %d)", rb->case_name, l,
                  r->spec.text, side_name(side), st->coefficient_reads, coef, st->transposed_rope, t_rope);
        }
}

/* kv_cache_read_key / _value of every position at the cache's length, in the natural order. */
static void check_natural(ReadBack *rb, const KvCache *c, const RefSpec *refs, int pass) {
    float got[RB_DIM];
    int n = c->len;
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++) {
            const RefSpec *r = &refs[l * 2 + side];
            int q_end = ref_quantized_end(r, n);
            for (int h = 0; h < RB_HEADS; h++)
                for (int j = 0; j < n; j++) {
                    const Expected *e = &rb->exp[l][side][h];
                    int quantized = j >= r->sinks && j < q_end;
                    if (side == SIDE_K) kv_cache_read_key(c, l, h, j, got);
                    else kv_cache_read_value(c, l, h, j, got);
                    double d = max_abs_diff(got, quantized ? e->q_nat[j] : e->full_nat[j], RB_DIM);
                    Tally *t = &rb->t[(side == SIDE_K ? T_KEY_Q : T_VALUE_Q) + !quantized];
                    tally(t, quantized ? d == 0 : d <= RB_NATURAL_TOL,
                          "%s: pass %d, length %d: layer %d %s %s head %d position %d off by %.3g", rb->case_name, pass, n,
                          l, r->spec.text, side_name(side), h, j, d);
                }
        }
}

/* Attention's shortcut (kvcache.h): each query moved into the key read domain once
 * (kv_cache_query_to_domain) and dotted with the rows as kv_cache_rows reads them must score
 * what the query scores against the keys in the natural order (kv_cache_read_key); a weighted sum
 * of value rows as read, moved back once (kv_cache_output_from_domain), must be the same sum of
 * the values in the natural order. Orthogonal rotations on both sides: equal to rounding,
 * relative to |q| |k| and to sum |w| |v|. Coefficient reads (pca) score every row by one
 * constant less (the query's mean term, which softmax ignores): there the scores must differ
 * from the natural ones by the same amount at every row, and nowhere else at all. A seeded query
 * and positive weights summing to 1 (as softmax's) per layer and head. */
static void check_domains(ReadBack *rb, const KvCache *c, int pass) {
    int n = c->len;
    float buf[RB_POSITIONS * RB_DIM], q[RB_DIM], q_dom[RB_DIM], nat[RB_DIM], out[RB_DIM];
    double out_nat[RB_DIM];
    uint64_t seed = 1000003u * (uint64_t)pass + (uint64_t)n;
    for (int l = 0; l < RB_LAYERS; l++)
        for (int h = 0; h < RB_HEADS; h++) {
            for (int i = 0; i < RB_DIM; i++) q[i] = q_dom[i] = normal(&seed);
            kv_cache_query_to_domain(c, l, h, q_dom);
            const KvStore *keys = kv_cache_keys(c, l), *values = kv_cache_values(c, l);
            const float *rows = kv_cache_rows(c, keys, h, 0, n, kv_cache_quantized_end(keys, n), buf);
            double worst_score = 0, offset = 0;
            for (int j = 0; j < n; j++) {
                kv_cache_read_key(c, l, h, j, nat);
                double s_dom = 0, s_nat = 0, qq = 0, kk = 0;
                for (int i = 0; i < RB_DIM; i++) {
                    s_dom += (double)q_dom[i] * rows[(size_t)j * RB_DIM + i];
                    s_nat += (double)q[i] * nat[i];
                    qq += (double)q[i] * q[i];
                    kk += (double)nat[i] * nat[i];
                }
                if (j == 0 && keys->coefficient_reads) offset = s_dom - s_nat;
                worst_score = max_or_inf(worst_score, fabs(s_dom - s_nat - offset) / (sqrt(qq * kk) + 1e-30));
            }
            rows = kv_cache_rows(c, values, h, 0, n, kv_cache_quantized_end(values, n), buf);
            double scale = 0, w_sum = 0;
            float weights[RB_POSITIONS];
            for (int j = 0; j < n; j++) w_sum += weights[j] = expf(normal(&seed));
            for (int i = 0; i < RB_DIM; i++) out[i] = 0.0f, out_nat[i] = 0;
            for (int j = 0; j < n; j++) {
                float w = (float)(weights[j] / w_sum);
                kv_cache_read_value(c, l, h, j, nat);
                double vv = 0;
                for (int i = 0; i < RB_DIM; i++) {
                    out[i] += w * rows[(size_t)j * RB_DIM + i];
                    out_nat[i] += (double)w * nat[i];
                    vv += (double)nat[i] * nat[i];
                }
                scale += fabs(w) * sqrt(vv);
            }
            kv_cache_output_from_domain(c, l, h, out);
            double worst_out = 0;
            for (int i = 0; i < RB_DIM; i++) worst_out = max_or_inf(worst_out, fabs(out[i] - out_nat[i]) / (scale + 1e-30));
            tally(&rb->t[T_DOMAINS], worst_score <= RB_NATURAL_TOL && worst_out <= RB_NATURAL_TOL,
                  "%s: pass %d, length %d: layer %d head %d: scores off by %.3g, value sum off by %.3g (relative)",
                  rb->case_name, pass, n, l, h, worst_score, worst_out);
        }
}

static void check_quantized_end(ReadBack *rb, const KvCache *c, const RefSpec *refs) {
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++) {
            const RefSpec *r = &refs[l * 2 + side];
            if (kv_spec_is_fp32(&r->spec)) continue;   /* every position is its row: no boundary to keep */
            for (int n = 0; n <= RB_POSITIONS; n++) {
                int got = kv_cache_quantized_end(store_of(c, l, side), n), want = ref_quantized_end(r, n);
                tally(&rb->t[T_QEND], got == want, "%s: layer %d %s %s: length %d: %d, SCHEMES.md says %d", rb->case_name,
                      l, r->spec.text, side_name(side), n, got, want);
            }
        }
}

/* ---- one cache ---- */

/* Batch sizes of each pass, cycled. Pass 0: single positions and odd sizes. Pass 1: full
 * batches, two of them starting one position before the end of a t32 group (at 31, and at
 * 66 = 3 + 63 with +sink3): packing that group then needs the window to hold G + max_batch - 1
 * rows, the most it ever does without +res. */
static int batch_size(int pass, int i) {
    static const int sizes0[] = {5, 1, 8, 3, 8, 2, 7}, sizes1[] = {7, 8, 8, 8, 8, 3, 8, 8, 8, 8, 6};
    return pass == 0 ? sizes0[i % 7] : sizes1[i % 11];
}

/* One pass: the rows written from position 0, batch by batch, read after every batch. Layer
 * `roped_layer` gets its keys already rotated (no angles), the other before RoPE. */
static void run_pass(ReadBack *rb, KvCache *c, const RefSpec *refs, int pass) {
    const Rows *w = &rb->rows[pass];
    int roped_layer = pass == 0 ? 1 : 0;
    for (int l = 0; l < RB_LAYERS; l++)
        for (int side = 0; side < 2; side++)
            for (int h = 0; h < RB_HEADS; h++)
                expect(rb, w, &refs[l * 2 + side], l, side, h, l == roped_layer, &rb->exp[l][side][h]);
    c->len = 0;
    for (int first = 0, b = 0; first < RB_POSITIONS; b++) {
        int end = first + batch_size(pass, b);
        if (end > RB_POSITIONS) end = RB_POSITIONS;
        for (int l = 0; l < RB_LAYERS; l++) {
            for (int p = first; p < end; p++)
                kv_cache_write(c, l, p, l == roped_layer ? w->roped[p][l] : w->key[p][l], w->value[p][l],
                               l == roped_layer ? NULL : rb->cos_sin[p]);
            kv_cache_commit(c, l, first, end);
        }
        c->len = end;
        for (int n = first + 1; n <= end; n++) check_rows(rb, c, refs, pass, n, n == end);   /* each query of the batch */
        check_rows_t64(rb, c, refs, pass, end);
        check_natural(rb, c, refs, pass);
        check_domains(rb, c, pass);
        first = end;
    }
}

/* A calibration holding seeded tables for every fitted spec of refs (a table of single values
 * ascending, as §8 stores it), and each ref's tables per KV head pointed into it. */
static int synthetic_calibration(RefSpec *refs, Calibration *cal, Error *err) {
    if (calibration_init(cal, RB_LAYERS, RB_HEADS, RB_HEADS, RB_DIM, err)) return -1;
    uint64_t rng = 0x7ab1e5eedULL;
    for (int i = 0; i < RB_LAYERS * 2; i++) {
        RefSpec *r = &refs[i];
        char key[96];
        kv_spec_fit_key(&r->spec, key, sizeof key);
        if (!key[0]) continue;
        CalibFit *fit = (CalibFit *)calibration_find_fit(cal, key);
        if (!fit && !(fit = calibration_add_fit(cal, key, err))) return -1;
        KvFitLayout layout;
        r->spec.base.codec->fit->layout(&r->spec.base, RB_DIM, &layout);
        /* a shared table is nuq's one tensor of 2^B values, stored ascending */
        size_t n = (size_t)RB_LAYERS * fit->sides * fit->layer_floats, entries = kv_fit_table_floats(&layout);
        int shared = !layout.per_head;
        if (fit->codebooks[0] == 0.0f)   /* a fresh fit: fill it once */
            for (size_t j = 0; j < n; j++) fit->codebooks[j] = 0.7f * normal(&rng) + (shared ? 0.0f : 0.1f);
        for (size_t t0 = 0; shared && t0 < n; t0 += entries)   /* each table ascending */
            for (size_t a = 1; a < entries; a++)
                for (size_t b = a; b > 0 && fit->codebooks[t0 + b - 1] > fit->codebooks[t0 + b]; b--) {
                    float x = fit->codebooks[t0 + b];
                    fit->codebooks[t0 + b] = fit->codebooks[t0 + b - 1];
                    fit->codebooks[t0 + b - 1] = x;
                }
        const float *layer = calibration_codebook(cal, key, r->spec.side == KV_SIDE_KEYS ? 'k' : 'v', i / 2);
        for (int h = 0; h < RB_HEADS; h++) r->tables[h] = layer + (layout.per_head ? (size_t)h * fit->table_floats : 0);
    }
    return 0;
}

/* A cache whose layer 0 keys and layer 1 values are `text` where the side allows it. */
static void run_case(ReadBack *rb, const char *text, int keys_ok, int values_ok) {
    char k_text[160], v_text[160], name[400], why[200];
    if (keys_ok) snprintf(k_text, sizeof k_text, "%s;1:%s", text, RB_PARTNER_KEYS);
    else snprintf(k_text, sizeof k_text, "%s", RB_PARTNER_KEYS);
    if (values_ok) snprintf(v_text, sizeof v_text, "%s;1:%s", RB_PARTNER_VALUES, text);
    else snprintf(v_text, sizeof v_text, "%s", RB_PARTNER_VALUES);
    snprintf(name, sizeof name, "K %s, V %s", k_text, v_text);
    rb->case_name = name;
    RefSpec refs[RB_LAYERS * 2];   /* [layer * 2 + side] */
    int bad = 0;
    bad |= ref_bind(keys_ok ? text : RB_PARTNER_KEYS, SIDE_K, &refs[0], why, sizeof why);
    bad |= ref_bind(RB_PARTNER_VALUES, SIDE_V, &refs[1], why, sizeof why);
    bad |= ref_bind(RB_PARTNER_KEYS, SIDE_K, &refs[2], why, sizeof why);
    bad |= ref_bind(values_ok ? text : RB_PARTNER_VALUES, SIDE_V, &refs[3], why, sizeof why);
    KvLayered k = {0}, v = {0};
    KvCache c;
    Error err;
    Calibration cal = {0};
    if (!bad && synthetic_calibration(refs, &cal, &err)) {
        snprintf(why, sizeof why, "%.190s", err.msg);
        bad = 1;
    }
    for (int i = 0; i < RB_LAYERS * 2 && !bad; i++)
        if (kv_spec_unit_bytes(&refs[i].spec, RB_DIM) > RB_MAX_UNIT) {
            snprintf(why, sizeof why, "%s: units larger than the test's %d bytes", refs[i].spec.text, RB_MAX_UNIT);
            bad = 1;
        }
    if (!bad)
        bad = kv_layered_parse(k_text, KV_SIDE_KEYS, &k, why, sizeof why) || kv_layered_parse(v_text, KV_SIDE_VALUES, &v, why, sizeof why);
    KvCacheScheme scheme = {k, v, &cal};
    if (!bad && kv_cache_init(&c, &rb->cfg, RB_POSITIONS, RB_MAX_BATCH, &scheme, rb->inv_freq, &err)) {
        snprintf(why, sizeof why, "%.190s", err.msg);
        bad = 1;
    }
    tally(&rb->t[T_BIND], !bad, "%s: the cache refuses it: %s", name, why);
    if (!bad) {
        check_quantized_end(rb, &c, refs);
        check_paths(rb, &c, refs);
        run_pass(rb, &c, refs, 0);
        run_pass(rb, &c, refs, 1);   /* a new window over the same cache */
        kv_cache_free(&c);
    }
    calibration_free(&cal);
}

/* One base of the table, alone and with every subset of the modifiers. */
static void check_base(ReadBack *rb, const char *base) {
    RefSpec alone;
    char why[200], text[96];
    if (ref_bind(base, SIDE_K, &alone, why, sizeof why)) {
        printf("     read-back: %s skipped at head_dim %d: %s\n", base, RB_DIM, why);
        return;
    }
    memset(rb->t, 0, sizeof rb->t);
    rb->bf16_differs = 0;
    rb->bf16_worst = 0;
    long caches = 0;
    for (int mods = 0; mods < MOD_SETS; mods++) {
        spec_text(base, mods, text, sizeof text);
        int ok[2];
        for (int side = 0; side < 2; side++) {
            RefSpec r;
            int allowed = schemes_allow(mods, side, alone.token_axis, strncmp(base, "pca", 3) == 0);
            ok[side] = ref_bind(text, side, &r, why, sizeof why) == 0;
            tally(&rb->t[T_BIND], ok[side] == allowed, "%s as %ss: kv_layered_bind %s it, SCHEMES.md %s it%s%s", text,
                  side_name(side), ok[side] ? "accepts" : "refuses", allowed ? "allows" : "forbids", ok[side] ? "" : ": ",
                  ok[side] ? "" : why);
            ok[side] &= allowed;
        }
        if (ok[SIDE_K] || ok[SIDE_V]) {
            run_case(rb, text, ok[SIDE_K], ok[SIDE_V]);
            caches++;
        }
    }
    static const char *const what[N_TALLIES] = {
        "kv_layered_bind and kv_cache_init accept the modifier sets SCHEMES.md allows and refuse the others",
        "kv_cache_quantized_end follows SCHEMES.md 4 at every length",
        "kv_cache_rows at every length a query sees: quantized rows = encode->decode, the others the written row, bit for bit",
        "kv_cache_rows_t64, where the codec has it, = the quantized rows, bit for bit",
        "kv_cache_rows_t64 for bf16 pairs = its exact read, or +prerope blocks in the block layout within 0.01 of the block's largest |value|",
        "kv_cache_read_key of quantized positions = the key scheme's encode->decode (+prerope: RoPE at its own position)",
        "kv_cache_read_key of sinks, residual window and incomplete groups = the written key",
        "kv_cache_read_value of quantized positions = the value scheme's encode->decode",
        "kv_cache_read_value of sinks, residual window and incomplete groups = the written value",
        "a query moved into the key read domain scores the rows read as the natural keys (pca: less one constant a query); value rows summed and moved back = the natural sum (1e-5)",
        "attention reads coefficients (pca without +prerope, sinks or window) and rotates +prerope keys in transposed blocks exactly where kvcache.h says",
    };
    for (int i = 0; i < N_TALLIES; i++) {
        char name[320];
        snprintf(name, sizeof name, "kvcache read-back: %s and its modifiers: %s", base, what[i]);
        /* t64 passes on zero blocks for a codec without that path (the line below counts them) */
        check(rb->t[i].bad == 0, name, "%ld of %ld wrong; first: %s", rb->t[i].bad, rb->t[i].rows, rb->t[i].first);
    }
    if (strncmp(base, "pca", 3) == 0) {   /* its +prerope keys' bf16 reads take KV_BLOCK_DECODED_T64_BF16 */
        char name[200];
        snprintf(name, sizeof name, "kvcache read-back: %s: +prerope blocks read for bf16 pairs are decoded at bf16 precision", base);
        check(rb->bf16_differs > 0, name, "no block's bf16 read differs from its exact one");
        printf("     read-back: %s: %ld blocks' bf16 reads differ from the exact, by up to %.3g of the block's largest |value|\n",
               base, rb->bf16_differs, rb->bf16_worst);
    }
    printf("     read-back: %s in %ld caches: %ld kv_cache_rows rows, %ld kv_cache_rows_t64 blocks, %ld + %ld rows of keys "
           "and %ld + %ld of values read (quantized + full precision)\n",
           base, caches, rb->t[T_ROWS].rows, rb->t[T_ROWS_T64].rows, rb->t[T_KEY_Q].rows, rb->t[T_KEY_FULL].rows,
           rb->t[T_VALUE_Q].rows, rb->t[T_VALUE_FULL].rows);
}

static void fill_rows(ReadBack *rb, Rows *w, uint64_t seed) {
    for (int p = 0; p < RB_POSITIONS; p++)
        for (int l = 0; l < RB_LAYERS; l++) {
            for (int i = 0; i < RB_KV; i++) {
                w->key[p][l][i] = normal(&seed);
                w->value[p][l][i] = normal(&seed);
            }
            memcpy(w->roped[p][l], w->key[p][l], sizeof w->roped[p][l]);
            rope(w->roped[p][l], RB_HEADS, RB_DIM, rb->cos_sin[p]);
        }
}

static void test_read_back(void) {
    ReadBack *rb = calloc(1, sizeof *rb);
    if (!check(rb != NULL, "kvcache read-back: memory", "calloc failed")) return;
    rb->cfg.n_layers = RB_LAYERS;
    rb->cfg.n_heads = RB_HEADS;
    rb->cfg.n_kv_heads = RB_HEADS;
    rb->cfg.head_dim = RB_DIM;
    rb->cfg.dim = RB_HEADS * RB_DIM;
    rb->cfg.max_seq_len = RB_POSITIONS;
    for (int i = 0; i < RB_DIM / 2; i++) rb->inv_freq[i] = 1.0f / powf(10000.0f, 2.0f * i / RB_DIM);
    for (int p = 0; p < RB_POSITIONS; p++) rope_angles(p, RB_DIM, rb->inv_freq, rb->cos_sin[p]);
    fill_rows(rb, &rb->rows[0], 1);
    fill_rows(rb, &rb->rows[1], 2);
    int bases = 0;
    for (int i = 0; i < kv_codec_count(); i++) {
        char list[256];
        snprintf(list, sizeof list, "%s", kv_codec_at(i)->examples);
        for (char *save = NULL, *base = strtok_r(list, " ", &save); base; base = strtok_r(NULL, " ", &save)) {
            check_base(rb, base);
            bases++;
        }
    }
    check(bases > 0, "kvcache read-back: the codec table lists bases", "no examples");
    free(rb);
}

int main(void) {
    test_read_back();
    return test_exit_code();
}
