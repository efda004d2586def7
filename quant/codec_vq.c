/* quant/codec_vq.c: vqC-dD, coupled / vector quantization (CQ, CommVQ) with codebooks fitted to
 * the model (SCHEMES.md §8): a row is cut into d/D sub-vectors of D values, and each is stored as
 * the C-bit index of its nearest entry in its own codebook, with one fp16 norm per row.
 * C = 1..12 code bits, D = 1, 2, 4, 8 or 16 dividing the row.
 *
 * Per row of d values, in float32 (the norm summed in double, as tq's):
 *   r = fp16(||x||_2)
 *   z = x * sqrt(d) / r            so that z's values are about N(0, 1) in size
 *   code_j = the nearest entry of codebook C[h][j] to sub-vector j of z (squared distance in
 *            float32, ties -> the lower index: lloyd_nearest, the rule the fit assumed)
 *   x^ = (r / sqrt(d)) * entry     the sub-vector back, one multiply a value
 * KvBase.table is the KV head's codebooks [d/D][2^C][D] (per layer, side and head: bound by the
 * cache from the calibration). Edge cases (defined, never a crash): r = 0, NaN or not a finite
 * half -> codes 0, r stored 0, the row decodes to 0; with no table bound the row decodes to 0.
 *
 * Layout of a row: [the d/D codes, C bits each: code i in bits [i*C, i*C+C) of the stream, bit k
 * of the stream bit k%8 of byte k/8, the last byte padded with zeros][fp16 r, little-endian]. So
 * vq8-d4 at d = 64 takes (16 + 2) bytes = 2.25 bits a value, vq12-d8 1.75, vq8-d8 1.25 (C/D +
 * 16/d; a stream that does not fill its last byte costs the padding too), plus the codebooks:
 * 2^C x d floats per layer, side and KV head (a codebook is per model: reported apart). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"

#define MAX_CODE_BITS 12

/* ---- parsing ---- */

static int sub_dim(const KvBase *b) { return b->variant; }   /* D, this codec's own parameter */

static int vq_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "vq", &p) || *p < '0' || *p > '9') return 0;
    int bits, dim;
    if (kv_parse_number(&p, 1, MAX_CODE_BITS, &bits) || !kv_parse_prefix(p, "-d", &p) || kv_parse_number(&p, 1, 16, &dim) ||
        *p || (dim & (dim - 1)) != 0) {
        snprintf(why, why_len, "%.40s: expected vqC-dD with C = 1..%d code bits and D = 1, 2, 4, 8 or 16", name,
                 MAX_CODE_BITS);
        return -1;
    }
    b->bits = bits;
    b->variant = dim;
    snprintf(b->name, sizeof b->name, "vq%d-d%d", bits, dim);
    return 1;
}

static int vq_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n > KV_MAX_HEAD_DIM) {   /* encode's z is a buffer of that many floats */
        snprintf(why, why_len, "%s: rows of %d values: vq takes at most %d", b->name, n, KV_MAX_HEAD_DIM);
        return 0;
    }
    if (n % sub_dim(b) != 0) {
        snprintf(why, why_len, "%s: sub-vectors of %d do not divide rows of %d", b->name, sub_dim(b), n);
        return 0;
    }
    return 1;
}

static size_t code_bytes(const KvBase *b, int n) { return ((size_t)(n / sub_dim(b)) * (size_t)b->bits + 7) / 8; }

static size_t vq_unit_bytes(const KvBase *b, int n) { return code_bytes(b, n) + 2; }

/* The floats of one KV head's codebooks: d/D books of 2^C entries of D values. */
static size_t book_floats(const KvBase *b) { return ((size_t)1 << b->bits) * (size_t)sub_dim(b); }

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

/* fp16 bits of ||x||_2, or 0 when it is not a finite half (NaN, inf, overflow). */
static uint16_t norm_f16(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    double norm = sqrt(sum);
    if (!(norm < 1e30)) return 0;   /* NaN or huge: also keeps the double -> float conversion in range */
    uint16_t h = f32_to_f16((float)norm);
    return (h & 0x7c00u) == 0x7c00u ? 0 : h;
}

static void vq_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *codes = unit;
    memset(unit, 0, vq_unit_bytes(b, n));   /* r = 0 or no table: codes 0, r 0 */
    uint16_t r16 = norm_f16(x, n);
    if (r16 == 0 || !b->table) return;
    kv_put_u16(codes + code_bytes(b, n), r16);
    float r = f16_to_f32(r16), sqrt_d = sqrtf((float)n), z[KV_MAX_HEAD_DIM];
    for (int i = 0; i < n; i++) z[i] = x[i] * sqrt_d / r;
    int D = sub_dim(b), k = 1 << b->bits;
    for (int j = 0; j < n / D; j++)
        put_code(codes, j, b->bits, (unsigned)lloyd_nearest(z + (size_t)j * D, D, b->table + (size_t)j * book_floats(b), k));
}

static void vq_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = vq_unit_bytes(b, n);
    int D = sub_dim(b);
    float sqrt_d = sqrtf((float)n);
    for (int r = 0; r < count; r++) {
        const unsigned char *row = (const unsigned char *)units + (size_t)(r0 + r) * ub;
        float *o = out + (size_t)r * n;
        float scale = f16_to_f32((uint16_t)kv_get_u16(row + code_bytes(b, n))) / sqrt_d;
        if (!b->table) scale = 0.0f;
        for (int j = 0; j < n / D; j++) {
            const float *entry = b->table ? b->table + (size_t)j * book_floats(b) + (size_t)get_code(row, j, b->bits) * D : NULL;
            for (int i = 0; i < D; i++) o[j * D + i] = entry ? scale * entry[i] : 0.0f;
        }
    }
}

/* ---- fitting (SCHEMES.md §8) ---- */

/* Per KV head, d/D books of 2^C entries of D values. */
static void vq_table_shape(const KvBase *b, int n, KvTableShape *shape) {
    *shape = (KvTableShape){.books = n / sub_dim(b), .entries = 1 << b->bits, .dim = sub_dim(b), .per_head = 1};
}

/* Sub-vector `book` of the z of every row (one head's, in calibration order); rows with r = 0
 * (no direction to fit) left out. */
static size_t vq_fit_points(const KvBase *b, const float *units, size_t count, int n, int book, float *points) {
    int D = sub_dim(b);
    float sqrt_d = sqrtf((float)n);
    size_t made = 0;
    for (size_t u = 0; u < count; u++) {
        const float *x = units + u * (size_t)n;
        uint16_t r16 = norm_f16(x, n);
        if (r16 == 0) continue;
        float r = f16_to_f32(r16);
        for (int i = 0; i < D; i++) points[made * D + i] = x[book * D + i] * sqrt_d / r;
        made++;
    }
    return made;
}

static void vq_fit_start(const KvBase *b, const float *points, size_t n_points, float *entries, float *scratch) {
    (void)scratch;
    lloyd_init_spread(points, n_points, sub_dim(b), 1 << b->bits, entries);
}

static const KvFit VQ_FIT = {vq_table_shape, vq_fit_points, vq_fit_start};

const KvCodec kv_codec_vq = {
    "vqC-dD",
    "C-bit codes of D-value sub-vectors into codebooks fitted to the model (CQ, CommVQ; ./run calibrate), an fp16 "
    "norm per row",
    "vq8-d4 vq8-d8 vq12-d8",
    vq_parse, vq_check, vq_unit_bytes, vq_encode, vq_decode, NULL, NULL, 0, &VQ_FIT,
};
