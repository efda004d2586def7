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
 * the cache keeps beside the units so that 16 rows' codes load without a gather. Edge cases: no
 * table bound -> codes 0 and rows of 0; a
 * NaN component takes code 0 (lloyd_nearest's rule); a bits entry outside 0..8 (a hostile table)
 * is read as 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/lloyd.h"
#include "quant/pca.h"
#include "quant/transpose16.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

/* sqrt(w) of the +aw weights (float32), or NULL without them. sqrtf's results; AVX-512 takes 16
 * weights at a time where none is negative (sqrtf's errno keeps its own loop scalar, and it ran
 * once per block read and row move: a few % of each). */
static const float *root_weights(const KvBase *b, int n, float *out) {
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
    pca_encode_row(&h, root_weights(b, n, roots), x, codes);
    /* put_bits' stream, a byte at a time from a 64-bit accumulator (put_bits went bit by bit) */
    size_t at = 0, limit = 8 * bytes, byte = 0;
    uint64_t pending = 0;
    int pending_bits = 0;
    for (int i = 0; i < n; i++) {
        int bits = component_bits(&h, i);
        if (at + (size_t)bits > limit) break;   /* a table over budget (hostile): the rest stay 0 */
        pending |= (uint64_t)(codes[i] & ((1u << bits) - 1u)) << pending_bits;
        pending_bits += bits;
        at += (size_t)bits;
        for (; pending_bits >= 8; pending_bits -= 8, pending >>= 8) row[byte++] = (unsigned char)pending;
    }
    if (pending_bits > 0) row[byte] = (unsigned char)pending;
}

/* Where each component's code lies in a row, worked out once per call from the head's bits
 * (pca_decode's rule: a component past the row's bytes reads code 0), so that reading a row is
 * one two-byte load, a shift and a mask a stored component: the bit loop of get_bits took
 * several times longer than the attention the row then serves. */
typedef struct {
    int count;                           /* components with bits > 0, ascending */
    short comp[PCA_TABLE_STRIDE];
    short byte[PCA_TABLE_STRIDE];        /* the code's first byte in the row */
    unsigned char shift[PCA_TABLE_STRIDE];
    unsigned short mask[PCA_TABLE_STRIDE];   /* 0 for a component past the row's bytes */
    /* the same code as a four-byte load inside the row (rows of at least 4 bytes): its first
     * byte word[k] (the code's, or the row's last four) and the shift from there */
    short word[PCA_TABLE_STRIDE];
    unsigned char word_shift[PCA_TABLE_STRIDE];
    /* in a block of 64 rows (block_codes): the code's width (0 past the row's bytes) and where
     * its 64 rows' codes start, in bytes */
    unsigned char bits[PCA_TABLE_STRIDE];
    short segment[PCA_TABLE_STRIDE];
    size_t unit_bytes;
} CodeReader;

static void code_reader(const PcaHead *h, size_t unit_bytes, CodeReader *cr) {
    size_t at = 0, limit = 8 * unit_bytes;
    cr->count = 0;
    cr->unit_bytes = unit_bytes;
    for (int i = 0; i < h->d; i++) {
        int bits = component_bits(h, i), k = cr->count;
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

/* code_reader's count, comp, bits and segment alone: what reading a block needs (worked out
 * once per block of 64 rows, so the rest would cost a few % of the read). */
static void block_reader(const PcaHead *h, size_t unit_bytes, CodeReader *cr) {
    int at = 0, limit = 8 * (int)unit_bytes, segment = 0, k = 0;
    for (int i = 0; i < h->d; i++) {
        int bits = component_bits(h, i);
        if (!bits) continue;
        cr->comp[k] = (short)i;
        cr->bits[k] = (unsigned char)(at + bits <= limit ? bits : 0);   /* code_reader's rule */
        cr->segment[k] = (short)segment;
        segment += 8 * cr->bits[k];
        at += bits;
        k++;
    }
    cr->count = k;
    cr->unit_bytes = unit_bytes;
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
static void read_block(const PcaHead *h, const CodeReader *cr, const unsigned char *rows, int count, float *yt) {
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
    const float *sqrt_w = root_weights(b, n, roots);
    CodeReader cr;
    code_reader(&h, ub, &cr);
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
    code_reader(&h, ub, &cr);
    float yt[PCA_TABLE_STRIDE * 64];   /* [stored component][row]: at most 64 KiB of stack */
    int slot = pca_unit_slot(&h);
    for (int r = 0; slot >= 0 && r < count; r++) out[(size_t)r * n + slot] = 1.0f;
    for (int r = 0; r < count; r += 64) {
        int rows = count - r < 64 ? count - r : 64;
        read_block(&h, &cr, (const unsigned char *)units + (size_t)(r0 + r) * ub, rows, yt);
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
    const float *sqrt_w = root_weights(b, n, roots);
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

/* out[p] = mean + sum over the stored components k (in order) of y[k * 64 + p] * column[comp[k] * n]
 * for p < 64: one channel of a block, summed as pca_from_coefficients sums. Written for the
 * vectorizer: 16 positions per vector, 64 in registers over k (as 16 scalars GCC kept them
 * scalar, 10x slower). */
static void affine_sums64(float mean, const float *column, int n, const short *comp, int count, const float *y,
                          float *out) {
    for (int p = 0; p < 64; p++) out[p] = mean;
    for (int k = 0; k < count; k++) {
        float u = column[(size_t)comp[k] * n];
        const float *yk = y + (size_t)k * 64;
        #pragma omp simd
        for (int p = 0; p < 64; p++) out[p] = out[p] + yk[p] * u;
    }
}

/* A decoded transposed block's last step for channels c0..n-1: / sqrt(w) (0 where it is 0), and 0
 * for p >= count. */
static void finish_t64(const float *sqrt_w, int c0, int n, int count, float *kt) {
    for (int c = c0; c < n; c++) {
        float *out = kt + (size_t)c * 64;
        if (sqrt_w)
            for (int p = 0; p < count; p++) out[p] = sqrt_w[c] > 0 ? out[p] / sqrt_w[c] : 0.0f;
        for (int p = count; p < 64; p++) out[p] = 0.0f;
    }
}

#if defined(__AVX512F__)
/* Marks a vector as living in a register from here on: without it GCC folds the load of each y
 * vector back into the four multiplies that use it, and loads (one 512-bit load a cycle) then
 * set the pace instead of the multiplies and adds (model/kernels/simd_avx512.h does the same).
 * The empty asm emits nothing; it only hides where the value came from. */
static inline void keep_in_register(__m512 *v) {
#if defined(__GNUC__)
    __asm__("" : "+v"(*v));
#else
    (void)v;
#endif
}

/* affine_block's four channels c0..c0+3, finished (finish_t64) in registers: the sums for the
 * first LIVE vectors of 16 positions only (those that hold a position < count; LIVE a constant
 * where it is inlined, so that the sums stay in registers), the rest stored as 0. */
static inline __attribute__((always_inline)) void affine_channels4(const PcaHead *h, const CodeReader *cr,
                                                                   const float *yt, const float *sqrt_w, int count,
                                                                   int c0, int live, float *kt) {
    int n = h->d;
    __m512 acc[4][4];
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < live; q++) acc[j][q] = _mm512_set1_ps(h->mean[c0 + j]);
    for (int k = 0; k < cr->count; k++) {
        const float *y = yt + (size_t)k * 64, *u = h->basis + (size_t)cr->comp[k] * n + c0;
        __m512 yq[4];
        for (int q = 0; q < live; q++) {
            yq[q] = _mm512_loadu_ps(y + 16 * q);
            keep_in_register(&yq[q]);
        }
        for (int j = 0; j < 4; j++) {
            __m512 uj = _mm512_set1_ps(u[j]);
            for (int q = 0; q < live; q++) acc[j][q] = _mm512_add_ps(acc[j][q], _mm512_mul_ps(yq[q], uj));
        }
    }
    for (int j = 0; j < 4; j++) {
        __mmask16 divide = 0xffff;
        __m512 root = _mm512_set1_ps(1.0f);
        if (sqrt_w) {   /* finish_t64's rule: 0 where sqrt(w) is 0 */
            root = _mm512_set1_ps(sqrt_w[c0 + j]);
            divide = sqrt_w[c0 + j] > 0 ? 0xffff : 0;
        }
        float *out = kt + (size_t)(c0 + j) * 64;
        for (int q = 0; q < live; q++) {
            int left = count - 16 * q;
            __mmask16 lanes = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1u);
            _mm512_storeu_ps(out + 16 * q, sqrt_w ? _mm512_maskz_div_ps(lanes & divide, acc[j][q], root)
                                                  : _mm512_maskz_mov_ps(lanes, acc[j][q]));
        }
        for (int q = live; q < 4; q++) _mm512_storeu_ps(out + 16 * q, _mm512_setzero_ps());
    }
}
#endif

/* kt[c * 64 + p] = (mean[c] + sum over the stored components k (in order) of yt[k * 64 + p] *
 * U[comp[k]][c]) / sqrt_w[c] for p < count, 0 past it (finish_t64), for every channel c: a block's
 * rows, transposed. AVX-512: four channels x 64 positions in 16 registers, each component's four
 * vectors of y loaded once for the four; products and sums kept apart (no fused multiply-add), so
 * that the sums are pca_from_coefficients' to the bit; vectors of 16 positions all past count
 * skipped (a decode step's last block holds a few), and the division done before the store,
 * where it overlaps the next channels' products (a pass of its own cost ~8% of the block). */
static void affine_block(const PcaHead *h, const CodeReader *cr, const float *yt, const float *sqrt_w, int count,
                         float *kt) {
    int n = h->d, c0 = 0;
#if defined(__AVX512F__)
    int live = (count + 15) / 16;
    for (; c0 + 4 <= n; c0 += 4) {
        if (live >= 4) affine_channels4(h, cr, yt, sqrt_w, count, c0, 4, kt);
        else if (live == 3) affine_channels4(h, cr, yt, sqrt_w, count, c0, 3, kt);
        else if (live == 2) affine_channels4(h, cr, yt, sqrt_w, count, c0, 2, kt);
        else affine_channels4(h, cr, yt, sqrt_w, count, c0, 1, kt);
    }
#endif
    for (int c = c0; c < n; c++) affine_sums64(h->mean[c], h->basis + c, n, cr->comp, cr->count, yt, kt + (size_t)c * 64);
    finish_t64(sqrt_w, c0, n, count, kt);
}

#if defined(__AVX512F__)
/* dst[j * dst_stride + i] = src[i * src_stride + j] for i, j < 16. */
static void transpose16(const float *src, size_t src_stride, float *dst, size_t dst_stride) {
    __m512 col[16];
    transpose16_load(src, src_stride, col);
    for (int m = 0; m < 16; m++) _mm512_storeu_ps(dst + (size_t)m * dst_stride, col[m]);
}
#endif

/* Rows decoded straight into a transposed block, kt[c * 64 + p] (0 for p >= count): the same
 * sums as pca_decode (mu, then the stored components in order, then / sqrt(w)), but with the
 * 64 positions innermost, which the compiler turns into vector multiply-adds; +prerope keys,
 * whose RoPE depends on the position, cannot move the query into the coefficients instead. */
static void pca_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    enum { W = 64 };
    memset(kt, 0, sizeof(float) * (size_t)n * W);
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE];
    const float *sqrt_w = root_weights(b, n, roots);
    CodeReader cr;
    code_reader(&h, pca_unit_bytes(b, n), &cr);
    float yt[PCA_TABLE_STRIDE * W];   /* [stored component][position]: at most 64 KiB of stack */
    read_block(&h, &cr, (const unsigned char *)units + (size_t)r0 * cr.unit_bytes, count, yt);
    affine_block(&h, &cr, yt, sqrt_w, count, kt);
}

/* ---- blocks of 64 rows, component by component (KvCodec.block_codes) ----
 * In a block, the k-th stored component's codes of its 64 rows lie back to back from byte
 * cr->segment[k] (row p's code at bit p * bits of there): 16 rows' codes are then 2 x bits
 * contiguous bytes, which AVX-512 spreads over 16 lanes with one permute of 16-bit words, a
 * shift and a mask, where the row-major units need a gather of 16 rows (read_block), several
 * times slower. The block holds as many bits as its 64 rows' units. */

static void pca_block_codes(const KvBase *b, const void *units, int n, int r0, int count, void *block) {
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    CodeReader cr;
    code_reader(&h, pca_unit_bytes(b, n), &cr);
    unsigned char *out = block;
    for (int i = 0; i < count; i++) {
        const unsigned char *row = (const unsigned char *)units + (size_t)(r0 + i) * cr.unit_bytes;
        int p = (r0 + i) % 64;
        for (int k = 0; k < cr.count; k++) {
            /* a code of at most 8 bits spans at most two bytes: the second only touched when it does */
            int bits = cr.bits[k], from = cr.byte[k], shift = cr.shift[k];
            if (!bits) continue;   /* past the row's bits: its segment is empty, maybe at the block's end */
            unsigned two = row[from] | (shift + bits > 8 ? (unsigned)row[from + 1] << 8 : 0u);
            unsigned code = two >> shift & cr.mask[k];
            unsigned char *at = out + cr.segment[k] + p * bits / 8;
            int to = p * bits % 8;
            unsigned keep = ~(((1u << bits) - 1u) << to);
            at[0] = (unsigned char)((at[0] & keep) | code << to);
            if (to + bits > 8) at[1] = (unsigned char)((at[1] & keep >> 8) | code >> (8 - to));
        }
    }
}

/* dst[row_of[k] * 64 + p] = the k-th stored component's value in row p of the block, p < 64
 * (rows past those written hold some table entry). */
#if defined(__AVX512F__) && defined(__AVX512BW__)
/* For codes of `bits` bits back to back: lane i of pick[q] selects the two 16-bit words that
 * hold code 16q + i (as one 32-bit word), shift and mask then take it out. */
typedef struct {
    __m512i pick[4], shift, mask;
} CodeSpread;

static void code_spread(int bits, CodeSpread *s) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i lane_bit = _mm512_mullo_epi32(iota, _mm512_set1_epi32(bits));
    __m512i word = _mm512_srli_epi32(lane_bit, 4);
    s->shift = _mm512_and_si512(lane_bit, _mm512_set1_epi32(15));
    s->mask = _mm512_set1_epi32((1 << bits) - 1);
    for (int q = 0; q < 4; q++) {
        __m512i w = _mm512_add_epi32(word, _mm512_set1_epi32(q * bits));
        s->pick[q] = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_add_epi32(w, _mm512_set1_epi32(1)), 16));
    }
}
#endif

static void block_values(const PcaHead *h, const CodeReader *cr, const unsigned char *block, const short *row_of,
                         float *dst) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    CodeSpread spread[PCA_MAX_BITS + 1];   /* made for the widths the block has, as they come */
    unsigned made = 0;
#endif
    for (int k = 0; k < cr->count; k++) {
        const float *table = h->tables + (size_t)cr->comp[k] * PCA_TABLE_STRIDE;
        const unsigned char *segment = block + cr->segment[k];
        float *out = dst + (size_t)row_of[k] * 64;
        int bits = cr->bits[k];
#if defined(__AVX512F__) && defined(__AVX512BW__)
        if (!(made >> bits & 1u)) {
            code_spread(bits, &spread[bits]);
            made |= 1u << bits;
        }
        const CodeSpread *sp = &spread[bits];
        __m512i codes = _mm512_maskz_loadu_epi8(bits == 8 ? ~0ull : (1ull << (8 * bits)) - 1u, segment);
        for (int q = 0; q < 4; q++) {
            __m512i code = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi16(sp->pick[q], codes), sp->shift), sp->mask);
            __m512 v = bits <= 4   ? _mm512_permutexvar_ps(code, _mm512_loadu_ps(table))
                       : bits == 5 ? _mm512_permutex2var_ps(_mm512_loadu_ps(table), code, _mm512_loadu_ps(table + 16))
                                   : _mm512_i32gather_ps(code, table, 4);
            _mm512_storeu_ps(out + 16 * q, v);
        }
#else
        for (int p = 0; p < 64; p++) out[p] = table[get_bits(segment, (size_t)p * bits, bits)];
#endif
    }
}

/* out[p * n + c] = kt[c * 64 + p] for p < count: coefficient rows from their transpose. */
static void transpose_from_t64(const float *kt, int n, int count, float *out) {
    int c0 = 0;
#if defined(__AVX512F__)
    if (count == 64)
        for (; c0 + 16 <= n; c0 += 16)
            for (int p0 = 0; p0 < 64; p0 += 16) transpose16(kt + (size_t)c0 * 64 + p0, 64, out + (size_t)p0 * n + c0, n);
#endif
    for (int p = 0; p < count; p++)
        for (int c = c0; c < n; c++) out[(size_t)p * n + c] = kt[(size_t)c * 64 + p];
}

static void pca_block_read(const KvBase *b, const void *block, int n, int count, KvBlockForm form, float *out) {
    enum { W = 64 };
    float kt[PCA_TABLE_STRIDE * W];   /* a transposed block, or the decode's yt: at most 64 KiB of stack */
    float *t = form == KV_BLOCK_COEFFICIENTS ? kt : out;
    if (!b->table) {
        memset(t, 0, sizeof(float) * (size_t)n * W);
        if (form == KV_BLOCK_COEFFICIENTS) memset(out, 0, sizeof(float) * (size_t)n * (size_t)count);
        return;
    }
    PcaHead h;
    pca_head_view(b->table, n, &h);
    CodeReader cr;
    block_reader(&h, pca_unit_bytes(b, n), &cr);
    if (form == KV_BLOCK_DECODED_T64) {
        float roots[PCA_TABLE_STRIDE];
        short k_of[PCA_TABLE_STRIDE];
        for (int k = 0; k < cr.count; k++) k_of[k] = (short)k;
        block_values(&h, &cr, block, k_of, kt);
        affine_block(&h, &cr, kt, root_weights(b, n, roots), count, out);
        return;
    }
    /* the coefficients: each stored component's row at its own index (block_values), 0 for the
     * others (only those: a memset of the whole block was a few % of a value block's read), the
     * unit slot's 1 */
    for (int c = 0, k = 0; c < n; c++) {
        if (k < cr.count && cr.comp[k] == c) k++;
        else memset(t + (size_t)c * W, 0, W * sizeof(float));
    }
    block_values(&h, &cr, block, cr.comp, t);
    int slot = pca_unit_slot(&h);
    for (int p = 0; slot >= 0 && p < W; p++) t[(size_t)slot * W + p] = 1.0f;
    for (int c = 0; c < n; c++)
        for (int p = count; p < W; p++) t[(size_t)c * W + p] = 0.0f;
    if (form == KV_BLOCK_COEFFICIENTS) transpose_from_t64(t, n, count, out);
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
        int bits = component_bits(&h, i);
        if (at + (size_t)bits <= limit) codes[i] = (unsigned short)get_bits(unit, at, bits);
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
        int bits = component_bits(&h, i);
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
            int bits = component_bits(&h, i);
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
