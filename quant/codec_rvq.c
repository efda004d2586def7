/* quant/codec_rvq.c: rvqCxS-dD, residual vector quantization (SCHEMES.md §9): vq's sub-vectors
 * (quant/codec_vq.c), each coded in S stages, stage s choosing from its own codebook the entry
 * nearest to what the stages before it left. C = 1..12 code bits, S = 2..4 stages, D = 1, 2, 4,
 * 8 or 16 dividing the row.
 *
 * Per row of d values, in float32 (the norm summed in double, as vq's):
 *   r = fp16(||x||_2), z = x * sqrt(d) / r           as vq
 *   for each sub-vector u of z (D values): e = u; for s = 1..S:
 *     a_s = the nearest entry of C[j][s] to e         squared distance in float32, ties -> lower
 *                                                     index (lloyd_nearest, the rule the fit assumed)
 *     e = e - C[j][s][a_s]                            float32
 *   x^ = (r / sqrt(d)) * (C[j][1][a_1] + ... + C[j][S][a_S])   summed in stage order
 * KvBase.table is the KV head's codebooks [d/D][S][2^C][D] (the calibration file's
 * fit.KEY.{k,v}.L is [n_kv_heads, d/D, S, 2^C, D]). Edge cases as vq's: r = 0, NaN or not a
 * finite half -> codes 0, r stored 0, the row decodes to 0; with no table bound, 0.
 *
 * Layout of a row: [the S * d/D codes, C bits each, code (j, s) at index j * S + s of the stream,
 * code i in bits [i*C, i*C+C), bit k of the stream bit k%8 of byte k/8, the last byte padded with
 * zeros][fp16 r, little-endian]: S*C/D + 16/d bits a value (rvq8x2-d8: 2.25; rvq8x2-d16: 1.25).
 *
 * Fit (§9), per layer, side, KV head and sub-vector: the points are vq's (sub-vector j of the z
 * of every row with r != 0, in calibration order); stage 1 is vq's fit of them (start at the
 * points floor(k n / K), Lloyd); stage s is the same on the residuals e the fitted stages before
 * it leave on those points (each stage's codes by lloyd_nearest, as the encoder picks them).
 *
 * +aw (SCHEMES.md §9) weighs each channel in the distance (KvBase.weights): the fit's and the
 * encoder's nearest entry both go through nearest_entry below; the +aw fit runs on sqrt(w)-scaled
 * points (quant/aw.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/aw.h"
#include "quant/lloyd.h"
#if defined(__AVX512F__)
#include "quant/nearest_avx512.h"
#endif

#define MAX_CODE_BITS 12
#define MAX_STAGES 4

/* ---- parsing ---- */

/* variant = S * 32 + D: the codec's own parameters. */
static int sub_dim(const KvBase *b) { return b->variant % 32; }
static int stages(const KvBase *b) { return b->variant / 32; }
static int entries(const KvBase *b) { return 1 << b->bits; }

static int rvq_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "rvq", &p) || *p < '0' || *p > '9') return 0;
    int bits, s, dim;
    if (kv_parse_number(&p, 1, MAX_CODE_BITS, &bits) || !kv_parse_prefix(p, "x", &p) ||
        kv_parse_number(&p, 2, MAX_STAGES, &s) || !kv_parse_prefix(p, "-d", &p) || kv_parse_number(&p, 1, 16, &dim) ||
        *p || (dim & (dim - 1)) != 0) {
        snprintf(why, why_len, "%.40s: expected rvqCxS-dD with C = 1..%d code bits, S = 2..%d stages and D = 1, 2, 4, 8 or 16",
                 name, MAX_CODE_BITS, MAX_STAGES);
        return -1;
    }
    b->bits = bits;
    b->variant = s * 32 + dim;
    snprintf(b->name, sizeof b->name, "rvq%dx%d-d%d", bits, s, dim);
    return 1;
}

static int rvq_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n > KV_MAX_HEAD_DIM) {   /* encode's z is a buffer of that many floats */
        snprintf(why, why_len, "%s: rows of %d values: rvq takes at most %d", b->name, n, KV_MAX_HEAD_DIM);
        return 0;
    }
    if (n % sub_dim(b) != 0) {
        snprintf(why, why_len, "%s: sub-vectors of %d do not divide rows of %d", b->name, sub_dim(b), n);
        return 0;
    }
    return 1;
}

static size_t code_bytes(const KvBase *b, int n) {
    return ((size_t)(n / sub_dim(b)) * (size_t)stages(b) * (size_t)b->bits + 7) / 8;
}

static size_t rvq_unit_bytes(const KvBase *b, int n) { return code_bytes(b, n) + 2; }

/* One stage's codebook: 2^C entries of D values. */
static size_t book_floats(const KvBase *b) { return (size_t)entries(b) * (size_t)sub_dim(b); }

/* Stage s's codebook of sub-vector j in a head's table [d/D][S][2^C][D]. */
static const float *stage_book(const KvBase *b, const float *table, int j, int s) {
    return table + ((size_t)j * (size_t)stages(b) + (size_t)s) * book_floats(b);
}

/* ---- the code stream ---- */

static void put_code(unsigned char *codes, int i, int bits, unsigned code) {
    size_t bit = (size_t)i * (size_t)bits;
    for (int k = 0; k < bits; k++, bit++)
        if (code >> k & 1u) codes[bit / 8] |= (unsigned char)(1u << (bit % 8));
}

static unsigned get_code(const unsigned char *codes, int i, int bits) {
    size_t bit = (size_t)i * (size_t)bits;
    uint32_t w = 0;   /* the (at most 3) bytes the code touches */
    for (size_t k = bit / 8; k <= (bit + (size_t)bits - 1) / 8; k++) w |= (uint32_t)codes[k] << (8 * (k - bit / 8));
    return (unsigned)(w >> (bit % 8)) & ((1u << bits) - 1u);
}

/* ---- encode and decode ---- */

/* The entry of a stage's book nearest to e: the encoder's and the fit's one rule; with +aw (w:
 * the sub-vector's channel weights, else NULL) §9's weighted distance. */
static int nearest_entry(const KvBase *b, const float *e, const float *book, const float *w) {
#if defined(__AVX512F__)
    if (sub_dim(b) == 8 && entries(b) % 16 == 0) return nearest8_avx512(e, book, entries(b), w);
#endif
    return w ? aw_nearest(e, sub_dim(b), book, entries(b), w) : lloyd_nearest(e, sub_dim(b), book, entries(b));
}

/* e -= entry, in float32: the residual the next stage sees. */
static void subtract(float *e, const float *entry, int D) {
    for (int i = 0; i < D; i++) e[i] -= entry[i];
}

static void rvq_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *codes = unit;
    memset(unit, 0, rvq_unit_bytes(b, n));   /* r = 0 or no table: codes 0, r 0 */
    uint16_t r16 = f16_norm(x, n);
    if (r16 == 0 || !b->table) return;
    kv_put_u16(codes + code_bytes(b, n), r16);
    float r = f16_to_f32(r16), sqrt_d = sqrtf((float)n), z[KV_MAX_HEAD_DIM];
    for (int i = 0; i < n; i++) z[i] = x[i] * sqrt_d / r;
    int D = sub_dim(b), S = stages(b);
    for (int j = 0; j < n / D; j++) {
        float *e = z + (size_t)j * D;   /* coded in place: z's sub-vector becomes its residual */
        for (int s = 0; s < S; s++) {
            const float *book = stage_book(b, b->table, j, s);
            int a = nearest_entry(b, e, book, b->weights ? b->weights + (size_t)j * D : NULL);
            put_code(codes, j * S + s, b->bits, (unsigned)a);
            subtract(e, book + (size_t)a * D, D);
        }
    }
}

/* One row with 8-bit codes (a byte each, code (j, s) at byte j * S + s): rvq_decode's sums and
 * multiply, value for value. D is a constant in each caller's copy, so each entry is a vector
 * load and the stage sums vector adds. */
static inline void row_decode_bytes(const KvBase *b, const unsigned char *row, int n, float scale, float *o, const int D) {
    int S = stages(b);
    size_t book = book_floats(b);
    for (int j = 0; j < n / D; j++) {
        const float *books = b->table + (size_t)j * (size_t)S * book;
        const unsigned char *code = row + (size_t)j * (size_t)S;
        float sum[16];
        for (int i = 0; i < D; i++) sum[i] = books[(size_t)code[0] * D + i];
        for (int s = 1; s < S; s++)
            for (int i = 0; i < D; i++) sum[i] = sum[i] + books[s * book + (size_t)code[s] * D + i];
        for (int i = 0; i < D; i++) o[j * D + i] = scale * sum[i];
    }
}

/* The row's codes as bytes, one copy per D with constant loop bounds; 0 when the shape has no
 * such copy (codes of other widths, D below 4). */
static int row_decode_fast(const KvBase *b, const unsigned char *row, int n, float scale, float *o) {
    if (b->bits != 8) return 0;
    switch (sub_dim(b)) {
    case 4: row_decode_bytes(b, row, n, scale, o, 4); return 1;
    case 8: row_decode_bytes(b, row, n, scale, o, 8); return 1;
    case 16: row_decode_bytes(b, row, n, scale, o, 16); return 1;
    default: return 0;
    }
}

/* Rows' r / sqrt(d), scale[i] for rows r0 .. r0+count-1 (count <= 64): their fp16 r gathered and
 * widened together (f16_bytes_to_f32: f16_to_f32's values, but for a signalling NaN, which comes
 * out quiet; the division quiets it anyway), then the one division rvq_decode's header gives
 * each. One call a block: f16_to_f32 a row was a tenth of the decode. */
static void row_scales(const KvBase *b, const unsigned char *units, int n, int r0, int count, float *scale) {
    size_t ub = rvq_unit_bytes(b, n), cb = code_bytes(b, n);
    unsigned char r16[2 * 64];
    for (int r = 0; r < count; r++) memcpy(r16 + 2 * r, units + (size_t)(r0 + r) * ub + cb, 2);
    f16_bytes_to_f32(r16, (size_t)count, scale);
    float sqrt_d = sqrtf((float)n);
    for (int r = 0; r < count; r++) scale[r] = scale[r] / sqrt_d;
}

static void rvq_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = rvq_unit_bytes(b, n);
    int D = sub_dim(b), S = stages(b);
    if (!b->table) {   /* no table bound: every row decodes to 0 */
        memset(out, 0, sizeof(float) * (size_t)n * (size_t)count);
        return;
    }
    float scales[64];
    for (int r = 0; r < count; r++) {
        const unsigned char *row = (const unsigned char *)units + (size_t)(r0 + r) * ub;
        float *o = out + (size_t)r * n;
        if (r % 64 == 0) row_scales(b, units, n, r0 + r, count - r < 64 ? count - r : 64, scales);
        float scale = scales[r % 64];
        if (row_decode_fast(b, row, n, scale, o)) continue;
        for (int j = 0; j < n / D; j++) {
            float sum[16];
            for (int s = 0; s < S; s++) {
                const float *entry = stage_book(b, b->table, j, s) + (size_t)get_code(row, j * S + s, b->bits) * D;
                for (int i = 0; i < D; i++) sum[i] = s == 0 ? entry[i] : sum[i] + entry[i];
            }
            for (int i = 0; i < D; i++) o[j * D + i] = scale * sum[i];
        }
    }
}

/* ---- fitting (SCHEMES.md §9) ---- */

/* Per KV head, d/D sub-vectors of S codebooks of 2^C entries of D values (file: [n_kv_heads,
 * d/D, S, 2^C, D]). */
static void rvq_fit_layout(const KvBase *b, int n, KvFitLayout *layout) {
    *layout = (KvFitLayout){.per_head = 1, .n_tensors = 1};
    layout->tensors[0] = (KvFitTensor){.name = "", .ndim = 4, .dims = {n / sub_dim(b), stages(b), entries(b), sub_dim(b)}};
}

/* Scratch: Lloyd's (sums, and the bounds of lloyd_fit_bounded), then one sub-vector's points (then
 * residuals) and Lloyd's codes. */
static size_t lloyd_bytes(const KvBase *b, size_t count) {
    return lloyd_bounded_scratch_bytes(count, sub_dim(b), entries(b));
}

static size_t rvq_fit_scratch_bytes(const KvBase *b, const KvFitRows *rows) {
    return lloyd_bytes(b, rows->count) + rows->count * (sub_dim(b) * sizeof(float) + sizeof(uint16_t));
}

static float *scratch_points(const KvBase *b, const KvFitRows *rows, void *scratch) {
    return (float *)((char *)scratch + lloyd_bytes(b, rows->count));
}

/* What stage `book` leaves of each point: the point minus its nearest entry (w: as nearest_entry;
 * without weights the entries are found by lloyd_assign, lloyd_nearest's codes vectorized, into
 * codes: n entries). */
static void leave_residuals(const KvBase *b, float *points, size_t n, const float *book, const float *w,
                            uint16_t *codes) {
    int D = sub_dim(b);
    if (!w) lloyd_assign(points, n, D, book, entries(b), codes);
    for (size_t p = 0; p < n; p++) {
        float *e = points + p * (size_t)D;
        subtract(e, book + (size_t)(w ? nearest_entry(b, e, book, w) : codes[p]) * D, D);
    }
}

static int rvq_fit(const KvBase *b, const KvFitRows *rows, float *table, void *scratch, KvFitShortfall *shortfall) {
    int D = sub_dim(b), K = entries(b);
    float *points = scratch_points(b, rows, scratch);
    uint16_t *codes = (uint16_t *)(points + rows->count * (size_t)D);
    for (int j = 0; j < rows->n / D; j++) {
        size_t n = kv_subvector_points(rows->units, rows->count, rows->n, sub_dim(b), j, points);
        if (n < 4 * (size_t)K) {
            *shortfall = (KvFitShortfall){.points = n, .entries = K};
            return -1;
        }
        /* +aw: every stage fitted on sqrt(w)-scaled points (the weighted fit, quant/aw.h), its
         * residuals left there too; the books scaled back at the end */
        float sqrt_w[16];
        if (rows->weights) {
            for (int e = 0; e < D; e++) sqrt_w[e] = sqrtf(rows->weights[j * D + e]);
            aw_scale_points(points, n, D, sqrt_w);
        }
        for (int s = 0; s < stages(b); s++) {
            float *book = (float *)stage_book(b, table, j, s);
            if (s > 0) leave_residuals(b, points, n, stage_book(b, table, j, s - 1), NULL, codes);
            lloyd_init_spread(points, n, D, K, book);
            lloyd_fit_bounded(points, n, D, book, K, LLOYD_MAX_ITERATIONS, codes, scratch);   /* = lloyd_fit */
        }
        for (int s = 0; s < stages(b) && rows->weights; s++)
            aw_unscale_centroids((float *)stage_book(b, table, j, s), K, D, sqrt_w);
    }
    return 0;
}

/* Σ over the points of |what the last stage leaves|^2, in float64. */
static double rvq_fit_objective(const KvBase *b, const KvFitRows *rows, const float *table, void *scratch) {
    int D = sub_dim(b);
    float *points = scratch_points(b, rows, scratch);
    uint16_t *codes = (uint16_t *)(points + rows->count * (size_t)D);
    double sum = 0;
    for (int j = 0; j < rows->n / D; j++) {
        size_t n = kv_subvector_points(rows->units, rows->count, rows->n, sub_dim(b), j, points);
        const float *w = rows->weights ? rows->weights + (size_t)j * D : NULL;   /* +aw: the encoder's rule, weighed */
        for (int s = 0; s < stages(b); s++) leave_residuals(b, points, n, stage_book(b, table, j, s), w, codes);
        for (size_t i = 0; i < n * (size_t)D; i++) sum += (w ? w[i % (size_t)D] : 1.0) * points[i] * (double)points[i];
    }
    return sum;
}

/* Code streams (SCHEMES.md §9): one a sub-vector and stage, in the order the row stores them. */
static void rvq_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    *slots = n / sub_dim(b) * stages(b);
    *symbols = entries(b);
    *param_bits = 16;   /* r, fp16 */
}

static void rvq_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    kv_unpack_codes(unit, b->bits, n / sub_dim(b) * stages(b), codes);
}

static void rvq_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    kv_pack_codes(codes, b->bits, n / sub_dim(b) * stages(b), unit);
}

static const KvFit RVQ_FIT = {
    .layout = rvq_fit_layout,
    .scratch_bytes = rvq_fit_scratch_bytes,
    .fit = rvq_fit,
    .objective = rvq_fit_objective,
};

const KvCodec kv_codec_rvq = {
    .syntax = "rvqCxS-dD",
    .summary = "residual vector quantization: S stages of C-bit codes of D-value sub-vectors, each stage's codebook fitted "
        "to what the stages before it leave (./run calibrate), an fp16 norm per row",
    .examples = "rvq8x2-d8 rvq8x2-d16 rvq4x3-d4",
    .parse = rvq_parse,
    .check = rvq_check,
    .unit_bytes = rvq_unit_bytes,
    .encode = rvq_encode,
    .decode = rvq_decode,
    .code_layout = rvq_code_layout,
    .codes = rvq_codes,
    .put_codes = rvq_put_codes,
    .fit = &RVQ_FIT,
};
