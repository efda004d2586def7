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
 * decode to the natural domain (decode, and decode_t64 into attention's transposed key blocks);
 * attention may instead read a row's coefficients (decode_coefficients, coefficients: quant/pca.h,
 * model/kvcache.h's Coefficient reads), O(d) a row where decoding is O(d^2). Both reads also come
 * from a copy of 64 rows' codes laid out component by component (block_codes, block_read), which
 * the cache keeps beside the units so that 16 rows' codes load without a gather: those reads of 64
 * rows at a time are quant/codec_pca_blocks.c. Edge cases: no
 * table bound -> codes 0 and rows of 0; a
 * NaN component takes code 0 (lloyd_nearest's rule); a bits entry outside 0..8 (a hostile table)
 * is read as 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/lloyd.h"
#include "quant/codec_pca_internal.h"
#include "quant/pca.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif


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

size_t pca_unit_bytes(const KvBase *b, int n) { return ((size_t)row_bits(b, n) + 7) / 8; }

/* ---- the code stream ---- */

int pca_component_bits(const PcaHead *h, int i) {
    float v = h->bits[i];
    return v >= 1 && v <= PCA_MAX_BITS ? (int)v : 0;
}

static void put_bits(unsigned char *row, size_t at, int bits, unsigned code) {
    for (int k = 0; k < bits; k++, at++)
        if (code >> k & 1u) row[at / 8] |= (unsigned char)(1u << (at % 8));
}

unsigned pca_get_bits(const unsigned char *row, size_t at, int bits) {
    unsigned code = 0;
    for (int k = 0; k < bits; k++, at++) code |= (unsigned)(row[at / 8] >> (at % 8) & 1u) << k;
    return code;
}

/* sqrt(w) of the +aw weights (float32), or NULL without them. sqrtf's results; AVX-512 takes 16
 * weights at a time where none is negative (sqrtf's errno keeps its own loop scalar, and it ran
 * once per block read and row move: a few % of each). */
const float *pca_root_weights(const KvBase *b, int n, float *out) {
    if (!b->weights) return NULL;
    int c = 0;
#if defined(__AVX512F__)
    for (; c + 16 <= n; c += 16) {
        __m512 w = _mm512_loadu_ps(b->weights + c);
        if (_mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_NGE_UQ)) break;   /* a negative or NaN weight */
        _mm512_storeu_ps(out + c, _mm512_sqrt_ps(w));
    }
#endif
    for (; c < n; c++) out[c] = sqrtf(b->weights[c]);
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
    pca_encode_row(&h, pca_root_weights(b, n, roots), x, codes);
    /* put_bits' stream, a byte at a time from a 64-bit accumulator (put_bits went bit by bit) */
    size_t at = 0, limit = 8 * bytes, byte = 0;
    uint64_t pending = 0;
    int pending_bits = 0;
    for (int i = 0; i < n; i++) {
        int bits = pca_component_bits(&h, i);
        if (at + (size_t)bits > limit) break;   /* a table over budget (hostile): the rest stay 0 */
        pending |= (uint64_t)(codes[i] & ((1u << bits) - 1u)) << pending_bits;
        pending_bits += bits;
        at += (size_t)bits;
        for (; pending_bits >= 8; pending_bits -= 8, pending >>= 8) row[byte++] = (unsigned char)pending;
    }
    if (pending_bits > 0) row[byte] = (unsigned char)pending;
}

void pca_code_reader(const PcaHead *h, size_t unit_bytes, CodeReader *cr) {
    size_t at = 0, limit = 8 * unit_bytes;
    cr->count = 0;
    cr->unit_bytes = unit_bytes;
    for (int i = 0; i < h->d; i++) {
        int bits = pca_component_bits(h, i), k = cr->count;
        if (!bits) continue;
        int fits = at + (size_t)bits <= limit;
        cr->comp[k] = (short)i;
        cr->byte[k] = (short)(fits ? at / 8 : 0);
        cr->shift[k] = (unsigned char)(fits ? at % 8 : 0);
        cr->mask[k] = (unsigned short)(fits ? (1u << bits) - 1u : 0u);
        int last_word = unit_bytes >= 4 ? (int)unit_bytes - 4 : 0;
        cr->word[k] = cr->byte[k] < last_word ? cr->byte[k] : (short)last_word;
        cr->word_shift[k] = (unsigned char)(cr->shift[k] + 8 * (cr->byte[k] - cr->word[k]));
        cr->bits[k] = (unsigned char)(fits ? bits : 0);
        cr->segment[k] = (short)(k ? cr->segment[k - 1] + 8 * cr->bits[k - 1] : 0);
        cr->count++;
        at += (size_t)bits;
    }
}

/* The stored components' values of one row: y[k] for the reader's k-th component. */
static void read_coefficients(const PcaHead *h, const CodeReader *cr, const unsigned char *row, float *y) {
    unsigned char padded[PCA_TABLE_STRIDE + 2];   /* a row is at most 8 x 256 bits; a code may end in its last byte */
    memcpy(padded, row, cr->unit_bytes);
    padded[cr->unit_bytes] = padded[cr->unit_bytes + 1] = 0;
    for (int k = 0; k < cr->count; k++) {
        unsigned word = (unsigned)padded[cr->byte[k]] | (unsigned)padded[cr->byte[k] + 1] << 8;
        unsigned code = word >> cr->shift[k] & cr->mask[k];
        y[k] = h->tables[(size_t)cr->comp[k] * PCA_TABLE_STRIDE + code];
    }
}

/* yt[k * 64 + p]: the k-th stored component's value in row p of count <= 64 rows from `rows`
 * (lanes at p >= count hold some table entry). AVX-512: 16 rows a component at a time, the
 * codes by one gather of four bytes a row, their values by a permute of the table's first 16
 * entries (4 bits or fewer) or a gather: several times the scalar loop's rate, which set
 * the speed of attention on pca rows. */
void pca_read_block(const PcaHead *h, const CodeReader *cr, const unsigned char *rows, int count, float *yt) {
#if defined(__AVX512F__)
    if (cr->unit_bytes >= 4) {
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int p0 = 0; p0 < count; p0 += 16) {
            int live_rows = count - p0 < 16 ? count - p0 : 16;
            __mmask16 live = (__mmask16)((1u << live_rows) - 1u);
            __m512i starts = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(p0), iota),
                                                _mm512_set1_epi32((int)cr->unit_bytes));
            for (int k = 0; k < cr->count; k++) {
                __m512i at = _mm512_add_epi32(starts, _mm512_set1_epi32(cr->word[k]));
                __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at, rows, 1);
                __m512i code = _mm512_and_si512(_mm512_srlv_epi32(word, _mm512_set1_epi32(cr->word_shift[k])),
                                                _mm512_set1_epi32(cr->mask[k]));
                const float *table = h->tables + (size_t)cr->comp[k] * PCA_TABLE_STRIDE;
                __m512 v = cr->mask[k] < 16 ? _mm512_permutexvar_ps(code, _mm512_loadu_ps(table))
                                            : _mm512_i32gather_ps(code, table, 4);
                _mm512_storeu_ps(yt + (size_t)k * 64 + p0, v);
            }
        }
        return;
    }
#endif
    for (int p = 0; p < count; p++) {
        float stored[PCA_TABLE_STRIDE];
        read_coefficients(h, cr, rows + (size_t)p * cr->unit_bytes, stored);
        for (int k = 0; k < cr->count; k++) yt[k * 64 + p] = stored[k];
    }
}

static void pca_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = pca_unit_bytes(b, n);
    if (!b->table) {
        memset(out, 0, sizeof(float) * (size_t)n * (size_t)count);
        return;
    }
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE];
    const float *sqrt_w = pca_root_weights(b, n, roots);
    CodeReader cr;
    pca_code_reader(&h, ub, &cr);
    for (int r = 0; r < count; r++) {
        float stored[PCA_TABLE_STRIDE], y[PCA_TABLE_STRIDE];
        memset(y, 0, (size_t)n * sizeof *y);
        read_coefficients(&h, &cr, (const unsigned char *)units + (size_t)(r0 + r) * ub, stored);
        for (int k = 0; k < cr.count; k++) y[cr.comp[k]] = stored[k];
        pca_from_coefficients(&h, sqrt_w, y, out + (size_t)r * n);
    }
}

/* ---- attention on the coefficients (quant/pca.h) ---- */

/* Every weight positive and finite: q / sqrt(w) is then defined for every channel. */
static int pca_coefficients_ready(const KvBase *b, int n) {
    if (!b->table) return 0;
    for (int c = 0; b->weights && c < n; c++)
        if (!(b->weights[c] > 0 && b->weights[c] < INFINITY)) return 0;
    return 1;
}

static void pca_decode_coefficients(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    size_t ub = pca_unit_bytes(b, n);
    memset(out, 0, sizeof(float) * (size_t)n * (size_t)count);
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    CodeReader cr;
    pca_code_reader(&h, ub, &cr);
    float yt[PCA_TABLE_STRIDE * 64];   /* [stored component][row]: at most 64 KiB of stack */
    int slot = pca_unit_slot(&h);
    for (int r = 0; slot >= 0 && r < count; r++) out[(size_t)r * n + slot] = 1.0f;
    for (int r = 0; r < count; r += 64) {
        int rows = count - r < 64 ? count - r : 64;
        pca_read_block(&h, &cr, (const unsigned char *)units + (size_t)(r0 + r) * ub, rows, yt);
        for (int k = 0; k < cr.count; k++)
            for (int p = 0; p < rows; p++) out[(size_t)(r + p) * n + cr.comp[k]] = yt[k * 64 + p];
    }
}

/* Queries go together (their transposed basis tiles shared: pca_query_to_coefficients), outputs
 * one row at a time. */
static void pca_coefficients_move(const KvBase *b, float *x, int n, int rows, KvRotation direction) {
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE], moved[PCA_TABLE_STRIDE];
    const float *sqrt_w = pca_root_weights(b, n, roots);
    if (direction == KV_TO_INNER) {
        pca_query_to_coefficients(&h, sqrt_w, x, rows, x);
        return;
    }
    int slot = pca_unit_slot(&h);
    for (int r = 0; r < rows; r++) {
        float *row = x + (size_t)r * n;
        if (slot >= 0) pca_sum_from_coefficients(&h, sqrt_w, row, slot, moved);
        else pca_from_coefficients(&h, sqrt_w, row, moved);   /* every component stored: the weights' sum taken as 1 */
        memcpy(row, moved, (size_t)n * sizeof *row);
    }
}


/* ---- code streams (SCHEMES.md §9: one a component) ---- */

/* Slots are the d components, each of its own width b_i (0..8: the head's bits, from the bound
 * table), so the alphabet is the widest's; a component of 0 bits always reads code 0 (entropy 0).
 * No parameters: a row is its codes. */
static void pca_code_layout(const KvBase *b, int n, int *slots, int *symbols, int *param_bits) {
    (void)b;
    *slots = n;
    *symbols = 1 << PCA_MAX_BITS;
    *param_bits = 0;
}

static void pca_codes(const KvBase *b, const void *unit, int n, unsigned short *codes) {
    memset(codes, 0, sizeof *codes * (size_t)n);
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    size_t at = 0, limit = 8 * pca_unit_bytes(b, n);
    for (int i = 0; i < n; i++) {
        int bits = pca_component_bits(&h, i);
        if (at + (size_t)bits <= limit) codes[i] = (unsigned short)pca_get_bits(unit, at, bits);
        at += (size_t)bits;
    }
}

/* The codes written at their widths; every other bit of the row (its padding) left as it is. */
static void pca_put_codes(const KvBase *b, const unsigned short *codes, int n, void *unit) {
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    unsigned char *row = unit;
    size_t at = 0, limit = 8 * pca_unit_bytes(b, n);
    for (int i = 0; i < n; i++) {
        int bits = pca_component_bits(&h, i);
        if (at + (size_t)bits > limit) break;
        for (int k = 0; k < bits; k++) row[(at + k) / 8] &= (unsigned char)~(1u << ((at + k) % 8));
        put_bits(row, at, bits, codes[i] & ((1u << bits) - 1u));
        at += (size_t)bits;
    }
}

/* ---- fitting (SCHEMES.md §9) ---- */

/* Per KV head: mean [d], basis [d, d], bits [d], tables [d, 256] (pca_head_view's order). */
static void pca_fit_layout(const KvBase *b, int n, KvFitLayout *layout) {
    (void)b;
    *layout = (KvFitLayout){.per_head = 1, .n_tensors = 4,
                            .tensors = {{.name = "mean", .ndim = 1, .dims = {n}},
                                        {.name = "basis", .ndim = 2, .dims = {n, n}},
                                        {.name = "bits", .ndim = 1, .dims = {n}},
                                        {.name = "tables", .ndim = 2, .dims = {n, PCA_TABLE_STRIDE}}}};
}

/* bits: whole numbers 0..8 summing to at most B x d (what the row's bytes hold). */
static int pca_fit_check(const KvBase *b, int n, const float *table, char *why, size_t why_len) {
    PcaHead h;
    pca_head_view(table, n, &h);
    long sum = 0;
    for (int i = 0; i < n; i++) {
        float v = h.bits[i];
        if (!(v >= 0 && v <= PCA_MAX_BITS) || v != (float)(int)v) {
            snprintf(why, why_len, "bits of component %d = %g (whole numbers 0..8)", i, (double)v);
            return 0;
        }
        sum += (long)v;
    }
    if (sum > row_bits(b, n)) {
        snprintf(why, why_len, "bits sum to %ld, more than B x d = %d", sum, row_bits(b, n));
        return 0;
    }
    return 1;
}

/* The fit's scratch (8-byte aligned, first), then sqrt(w). */
static size_t pca_fit_scratch(const KvBase *b, const KvFitRows *rows) {
    return pca_fit_scratch_bytes(rows->count, rows->n, row_bits(b, rows->n)) + (size_t)rows->n * sizeof(float);
}

static const float *scratch_roots(const KvBase *b, const KvFitRows *rows, void *scratch) {
    if (!rows->weights) return NULL;
    float *roots = (float *)((char *)scratch + pca_fit_scratch_bytes(rows->count, rows->n, row_bits(b, rows->n)));
    for (int c = 0; c < rows->n; c++) roots[c] = sqrtf(rows->weights[c]);
    return roots;
}

/* Every component's 8-bit table is a Lloyd run: §8's rule of at least 4 points an entry asks for
 * 4 x 256 rows (fewer leave a basis of a few rows' span and tables of repeated points). */
static int pca_fit(const KvBase *b, const KvFitRows *rows, float *table, void *scratch, KvFitShortfall *shortfall) {
    if (rows->count < 4 * (size_t)PCA_TABLE_STRIDE) {
        *shortfall = (KvFitShortfall){.points = rows->count, .entries = PCA_TABLE_STRIDE};
        return -1;
    }
    int n = rows->n;
    pca_fit_head(rows->units, rows->count, n, scratch_roots(b, rows, scratch), row_bits(b, n), table, NULL, scratch);
    return 0;
}

/* sum over rows and components of (y_i - stored y_i)^2, y_i^2 where nothing is stored: the
 * allocation's objective (in the +aw-weighted domain). */
static double pca_fit_objective(const KvBase *b, const KvFitRows *rows, const float *table, void *scratch) {
    int n = rows->n;
    PcaHead h;
    pca_head_view(table, n, &h);
    const float *roots = scratch_roots(b, rows, scratch);
    double sum = 0;
    for (size_t r = 0; r < rows->count; r++) {
        float y[PCA_TABLE_STRIDE];
        pca_project(&h, roots, rows->units + r * (size_t)n, y);
        for (int i = 0; i < n; i++) {
            int bits = pca_component_bits(&h, i);
            const float *t = h.tables + (size_t)i * PCA_TABLE_STRIDE;
            double e = bits ? (double)y[i] - t[lloyd_nearest(&y[i], 1, t, 1 << bits)] : (double)y[i];
            sum += e * e;
        }
    }
    return sum;
}

static const KvFit PCA_FIT = {
    .layout = pca_fit_layout,
    .check = pca_fit_check,
    .scratch_bytes = pca_fit_scratch,
    .fit = pca_fit,
    .objective = pca_fit_objective,
};

const KvCodec kv_codec_pca = {
    .syntax = "pcaB",
    .summary = "PCA transform coding fitted to the model (KVTC): per KV head a mean, an eigenbasis and per-component "
        "Lloyd tables, B*d bits a row allocated by a DP (./run calibrate); B may be fractional",
    .examples = "pca2 pca1.25 pca1",
    .parse = pca_parse,
    .check = pca_check,
    .unit_bytes = pca_unit_bytes,
    .code_layout = pca_code_layout,
    .codes = pca_codes,
    .put_codes = pca_put_codes,
    .code_widths_from_table = 1,   /* tested with a fitted table in tests/test_pca.c */
    .encode = pca_encode,
    .decode = pca_decode,
    .decode_t64 = pca_decode_t64,
    .coefficients_ready = pca_coefficients_ready,
    .decode_coefficients = pca_decode_coefficients,
    .coefficients = pca_coefficients_move,
    .block_codes = pca_block_codes,
    .block_read = pca_block_read,
    .own_transform = 1,
    .fit = &PCA_FIT,
};
