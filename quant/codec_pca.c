/* quant/codec_pca.c: pcaB, PCA transform coding (KVTC's transform and bit allocation, fixed-rate;
 * SCHEMES.md §9; the arithmetic is quant/pca.c). Per layer, side and KV head, a fitted mean mu,
 * orthonormal basis U, bits b_i per component (summing to at most B*d) and per-component tables.
 *
 *   y = U (x - mu)                   (x through sqrt(w) (.) x with +aw)
 *   code_i = the nearest entry of T_i to y_i (ties -> the lower index; b_i = 0 stores nothing)
 *   x^ = mu + sum_i T_i[code_i] U_i  (divided by sqrt(w) with +aw)
 *
 * B is a decimal of at most 4 places in (0, 8] ("pca2", "pca1.25", "pca0.5"); B*d must be a whole
 * number of bits (check). No per-row scale: a row is B*d bits, packed as the components' codes in
 * component order (code i in the b_i bits after those of components < i, bit k of the stream bit
 * k%8 of byte k/8, the last byte padded with zeros). KvBase.table is the KV head's fit as one
 * block (pca_head_view: mean, basis, bits, tables); KvBase.weights the head's +aw weights. Rows
 * decode to the natural domain: attention reads them as decoded rows (the cache's query rotation
 * is one per layer, and U is per head). Edge cases: no table bound -> codes 0 and rows of 0; a
 * NaN component takes code 0 (lloyd_nearest's rule); a bits entry outside 0..8 (a hostile table)
 * is read as 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/pca.h"

#define PCA_SCALE 10000   /* B is kept as B * 10^4 in KvBase.variant: up to 4 decimal places */

static int scaled_b(const KvBase *b) { return b->variant; }

/* ---- parsing ---- */

/* "2" -> 20000, "1.25" -> 12500; -1 when the text is not such a decimal. */
static int parse_decimal(const char *p) {
    int whole = 0, frac = 0, places = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((whole = whole * 10 + (*p - '0')) > 8) return -1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9') return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++places > 4) return -1;
            frac = frac * 10 + (*p - '0');
        }
    }
    if (*p) return -1;
    for (; places < 4; places++) frac *= 10;
    return whole * PCA_SCALE + frac;
}

/* The canonical decimal: no trailing zeros, no point for a whole number. */
static void format_b(int scaled, char *out, size_t len) {
    int frac = scaled % PCA_SCALE, places = 4;
    if (!frac) {
        snprintf(out, len, "%d", scaled / PCA_SCALE);
        return;
    }
    while (frac % 10 == 0) frac /= 10, places--;
    snprintf(out, len, "%d.%0*d", scaled / PCA_SCALE, places, frac);
}

static int pca_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    const char *p;
    if (!kv_parse_prefix(name, "pca", &p) || *p < '0' || *p > '9') return 0;
    int scaled = parse_decimal(p);
    if (scaled <= 0 || scaled > PCA_MAX_BITS * PCA_SCALE) {
        snprintf(why, why_len, "%.40s: expected pcaB with B in (0, 8] bits a value, at most 4 decimal places", name);
        return -1;
    }
    char text[16];
    format_b(scaled, text, sizeof text);
    b->variant = scaled;
    b->bits = PCA_MAX_BITS;   /* the widest code a component may take */
    snprintf(b->name, sizeof b->name, "pca%s", text);
    return 1;
}

static int pca_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n > KV_MAX_HEAD_DIM || n > PCA_TABLE_STRIDE) {
        snprintf(why, why_len, "%s: rows of %d values: pca takes at most %d", b->name, n, PCA_TABLE_STRIDE);
        return 0;
    }
    if ((long)scaled_b(b) * n % PCA_SCALE != 0) {
        snprintf(why, why_len, "%s: B x d = %g bits a row at d = %d is not a whole number", b->name,
                 (double)scaled_b(b) * n / PCA_SCALE, n);
        return 0;
    }
    return 1;
}

/* The row's bit budget B*d. */
static int row_bits(const KvBase *b, int n) { return (int)((long)scaled_b(b) * n / PCA_SCALE); }

static size_t pca_unit_bytes(const KvBase *b, int n) { return ((size_t)row_bits(b, n) + 7) / 8; }

/* ---- the code stream ---- */

static int component_bits(const PcaHead *h, int i) {
    float v = h->bits[i];
    return v >= 1 && v <= PCA_MAX_BITS ? (int)v : 0;
}

static void put_bits(unsigned char *row, size_t at, int bits, unsigned code) {
    for (int k = 0; k < bits; k++, at++)
        if (code >> k & 1u) row[at / 8] |= (unsigned char)(1u << (at % 8));
}

static unsigned get_bits(const unsigned char *row, size_t at, int bits) {
    unsigned code = 0;
    for (int k = 0; k < bits; k++, at++) code |= (unsigned)(row[at / 8] >> (at % 8) & 1u) << k;
    return code;
}

/* sqrt(w) of the +aw weights (float32), or NULL without them. */
static const float *root_weights(const KvBase *b, int n, float *out) {
    if (!b->weights) return NULL;
    for (int c = 0; c < n; c++) out[c] = sqrtf(b->weights[c]);
    return out;
}

/* ---- encode and decode ---- */

static void pca_encode(const KvBase *b, const float *x, int n, void *unit) {
    unsigned char *row = unit;
    size_t bytes = pca_unit_bytes(b, n);
    memset(row, 0, bytes);
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE];
    uint8_t codes[PCA_TABLE_STRIDE];
    pca_encode_row(&h, root_weights(b, n, roots), x, codes);
    size_t at = 0, limit = 8 * bytes;
    for (int i = 0; i < n; i++) {
        int bits = component_bits(&h, i);
        if (at + (size_t)bits > limit) break;   /* a table over budget (hostile): the rest stay 0 */
        put_bits(row, at, bits, codes[i]);
        at += (size_t)bits;
    }
}

static void pca_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = pca_unit_bytes(b, n), limit = 8 * ub;
    if (!b->table) {
        memset(out, 0, sizeof(float) * (size_t)n * (size_t)count);
        return;
    }
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE];
    const float *sqrt_w = root_weights(b, n, roots);
    for (int r = 0; r < count; r++) {
        const unsigned char *row = (const unsigned char *)units + (size_t)(r0 + r) * ub;
        uint8_t codes[PCA_TABLE_STRIDE];
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            int bits = component_bits(&h, i);
            codes[i] = at + (size_t)bits <= limit ? (uint8_t)get_bits(row, at, bits) : 0;
            at += (size_t)bits;
        }
        pca_decode_row(&h, sqrt_w, codes, out + (size_t)r * n);
    }
}

/* ---- fitting (SCHEMES.md §9) ---- */

/* One block of pca_head_floats(d) per KV head. */
static void pca_table_shape(const KvBase *b, int n, KvTableShape *shape) {
    (void)b;
    *shape = (KvTableShape){.books = 1, .entries = 1, .dim = (int)pca_head_floats(n), .per_head = 1};
}

static size_t pca_fit_scratch(const KvBase *b, size_t count, int n) {
    return pca_fit_scratch_bytes(count, n, row_bits(b, n)) + (size_t)n * sizeof(float);
}

static void pca_fit_table(const KvBase *b, const float *rows, size_t count, int n, const float *weights, float *table,
                          void *scratch) {
    void *fit_scratch = scratch;   /* the fit's (8-byte aligned) first, then sqrt(w) */
    float *roots = (float *)((char *)scratch + pca_fit_scratch_bytes(count, n, row_bits(b, n)));
    PcaHead h;
    pca_head_view(table, n, &h);
    if (weights)
        for (int c = 0; c < n; c++) roots[c] = sqrtf(weights[c]);
    pca_fit_head(rows, count, n, weights ? roots : NULL, row_bits(b, n), (float *)h.mean, (float *)h.basis,
                 (float *)h.bits, (float *)h.tables, NULL, fit_scratch);
}

static const KvFit PCA_FIT = {
    .shape = pca_table_shape,
    .fit_scratch_bytes = pca_fit_scratch,
    .fit_table = pca_fit_table,
};

const KvCodec kv_codec_pca = {
    .syntax = "pcaB",
    .summary = "PCA transform coding fitted to the model (KVTC): per KV head a mean, an eigenbasis and per-component "
        "Lloyd tables, B*d bits a row allocated by a DP (./run calibrate); B may be fractional",
    .examples = "pca2 pca1.25 pca1 pca0.5",
    .parse = pca_parse,
    .check = pca_check,
    .unit_bytes = pca_unit_bytes,
    .encode = pca_encode,
    .decode = pca_decode,
    .own_transform = 1,
    .fit = &PCA_FIT,
};
