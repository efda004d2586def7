/* quant/codec_pca_blocks.c: pcaB's reads of 64 rows at a time (quant/codec_pca.c is the codec;
 * SCHEMES.md §9). decode_t64 decodes rows straight into attention's transposed key blocks
 * (kt[c * 64 + p]: the same sums as the row decode, bit for bit, with the positions innermost);
 * block_codes copies 64 rows' codes component by component, which block_read turns into
 * coefficients or decoded rows without a gather (or, for attention's bf16 path, decoded rows at
 * bf16 working precision). These are the hot reads of attention on a pca cache: AVX-512 paths
 * beside portable loops that give the same bits. */
#include <stdint.h>
#include <string.h>
#include "quant/codec_pca_internal.h"
#include "quant/half.h"
#include "quant/transpose16.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* pca_code_reader's count, comp, bits and segment alone: what reading a block needs (worked out
 * once per block of 64 rows, so the rest would cost a few % of the read). */
static void block_reader(const PcaHead *h, size_t unit_bytes, CodeReader *cr) {
    int at = 0, limit = 8 * (int)unit_bytes, segment = 0, k = 0;
    for (int i = 0; i < h->d; i++) {
        int bits = pca_component_bits(h, i);
        if (!bits) continue;
        cr->comp[k] = (short)i;
        cr->bits[k] = (unsigned char)(at + bits <= limit ? bits : 0);   /* pca_code_reader's rule */
        cr->segment[k] = (short)segment;
        segment += 8 * cr->bits[k];
        at += bits;
        k++;
    }
    cr->count = k;
    cr->unit_bytes = unit_bytes;
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

/* ---- the same rows at bf16 working precision (KV_BLOCK_DECODED_T64_BF16) ----
 * Attention's bf16 path rounds every key to bf16 after RoPE (bf16 pairs), so there the block's
 * sums may take their terms at that precision too: with r_c = 1 / sqrt(w_c), v_k[c] =
 * U[comp_k][c] r_c and m[c] = mean[c] r_c (both 0 where sqrt(w_c) is not > 0: finish_t64's rule,
 * the division moved into the basis), kt[c * 64 + p] = m[c] + the sum over pairs j of y_{2j+1}[p] v_{2j+1}[c]
 * + y_{2j}[p] v_{2j}[c], every y and v rounded to bf16 (nearest even; an odd count's last pair
 * takes 0 for its second), added to the f32 sum one product at a time, the odd one first: what
 * vdpbf16ps computes (its products of bf16 values are exact in f32), 32 multiply-adds an
 * instruction where the exact decode takes 16 multiplies and 16 adds. Each term is then within
 * 2^-8 of its own value, and the keys are rounded to bf16 (2^-9) after; 0 for p >= count.
 * bf16_round is the definition's rounding; the AVX-512 BF16 path below adds the same terms in the
 * same order (a CPU may round the pair's two steps once: within f32 rounding of this loop). */
static float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static void affine_block_bf16_plain(const PcaHead *h, const CodeReader *cr, const float *yt, const float *sqrt_w,
                                    int count, float *kt) {
    int n = h->d;
    float v[PCA_TABLE_STRIDE + 1];   /* channel c's v_k, and a 0 for an odd count's last pair */
    for (int c = 0; c < n; c++) {
        float root = sqrt_w ? sqrt_w[c] : 1.0f, *out = kt + (size_t)c * 64;
        float r = !sqrt_w || root > 0 ? 1.0f / root : 0.0f;
        for (int k = 0; k < cr->count; k++) v[k] = bf16_round(h->basis[(size_t)cr->comp[k] * n + c] * r);
        v[cr->count] = 0.0f;
        for (int p = 0; p < 64; p++) {
            float acc = h->mean[c] * r;
            for (int k = 0; k < cr->count; k += 2) {
                float y1 = k + 1 < cr->count ? bf16_round(yt[(size_t)(k + 1) * 64 + p]) : 0.0f;
                acc = acc + y1 * v[k + 1];
                acc = acc + bf16_round(yt[(size_t)k * 64 + p]) * v[k];
            }
            out[p] = p < count ? acc : 0.0f;
        }
    }
}

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
/* Lane i: (bf16(even[i]), bf16(odd[i])) as one pair, even in the low half: vdpbf16ps's operand. */
static inline __m512i bf16_pairs16(__m512 even, __m512 odd) {
    /* cvtne2ps puts even's 16 values in words 0..15 and odd's in 16..31: interleave them */
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(odd, even));
}

/* Four channels cq..cq+3 of a 16-channel chunk (m16: their m, basis: [pair][16] pairs of v) over
 * the first LIVE vectors of 16 positions: 16 sums in registers, one vdpbf16ps a pair and vector. */
static inline __attribute__((always_inline)) void bf16_channels4(const uint32_t *yp, int pairs, const uint32_t *basis,
                                                                 const float *m16, int cq, int count, int live,
                                                                 float *kt) {
    __m512 acc[4][4];
    for (int j = 0; j < 4; j++)
        for (int q = 0; q < live; q++) acc[j][q] = _mm512_set1_ps(m16[cq + j]);
    for (int k = 0; k < pairs; k++) {
        __m512i yq[4];
        for (int q = 0; q < live; q++) yq[q] = _mm512_loadu_si512(yp + (size_t)k * 64 + 16 * q);
        for (int j = 0; j < 4; j++) {
            __m512bh v = (__m512bh)_mm512_set1_epi32((int)basis[(size_t)k * 16 + cq + j]);
            for (int q = 0; q < live; q++) acc[j][q] = _mm512_dpbf16_ps(acc[j][q], (__m512bh)yq[q], v);
        }
    }
    for (int j = 0; j < 4; j++) {
        float *out = kt + (size_t)(cq + j) * 64;
        for (int q = 0; q < live; q++) {
            int left = count - 16 * q;
            _mm512_storeu_ps(out + 16 * q, _mm512_maskz_mov_ps(left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1u), acc[j][q]));
        }
        for (int q = live; q < 4; q++) _mm512_storeu_ps(out + 16 * q, _mm512_setzero_ps());
    }
}

/* The definition above with AVX-512 BF16, for d a multiple of 16: y as pairs of consecutive
 * stored components once per block, v as pairs 16 channels at a time (a few KiB), then
 * bf16_channels4 for each four channels. */
static void affine_block_bf16(const PcaHead *h, const CodeReader *cr, const float *yt, const float *sqrt_w, int count,
                              float *kt) {
    int n = h->d, pairs = (cr->count + 1) / 2, live = (count + 15) / 16;
    uint32_t yp[PCA_TABLE_STRIDE / 2 * 64], basis[PCA_TABLE_STRIDE / 2 * 16];
    float m16[16];
    for (int k = 0; k < pairs; k++)
        for (int q = 0; q < 4; q++) {
            const float *y = yt + (size_t)(2 * k) * 64 + 16 * q;
            __m512 odd = 2 * k + 1 < cr->count ? _mm512_loadu_ps(y + 64) : _mm512_setzero_ps();
            _mm512_storeu_si512(yp + (size_t)k * 64 + 16 * q, bf16_pairs16(_mm512_loadu_ps(y), odd));
        }
    for (int c16 = 0; c16 < n; c16 += 16) {
        __m512 root = sqrt_w ? _mm512_loadu_ps(sqrt_w + c16) : _mm512_set1_ps(1.0f);
        __mmask16 keep = _mm512_cmp_ps_mask(root, _mm512_setzero_ps(), _CMP_GT_OQ);
        __m512 r = _mm512_maskz_div_ps(keep, _mm512_set1_ps(1.0f), root);
        _mm512_storeu_ps(m16, _mm512_mul_ps(_mm512_loadu_ps(h->mean + c16), r));
        for (int k = 0; k < pairs; k++) {
            const float *u = h->basis + (size_t)cr->comp[2 * k] * n + c16;
            __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(u), r), v1 = _mm512_setzero_ps();
            if (2 * k + 1 < cr->count) v1 = _mm512_mul_ps(_mm512_loadu_ps(h->basis + (size_t)cr->comp[2 * k + 1] * n + c16), r);
            _mm512_storeu_si512(basis + (size_t)k * 16, bf16_pairs16(v0, v1));
        }
        for (int cq = 0; cq < 16; cq += 4) {
            float *out = kt + (size_t)c16 * 64;
            if (live >= 4) bf16_channels4(yp, pairs, basis, m16, cq, count, 4, out);
            else if (live == 3) bf16_channels4(yp, pairs, basis, m16, cq, count, 3, out);
            else if (live == 2) bf16_channels4(yp, pairs, basis, m16, cq, count, 2, out);
            else bf16_channels4(yp, pairs, basis, m16, cq, count, 1, out);
        }
    }
}
#endif

/* KV_BLOCK_DECODED_T64_BF16's sums: the AVX-512 BF16 loops where the build has them, else the
 * definition's loop. */
static void affine_block_at_bf16(const PcaHead *h, const CodeReader *cr, const float *yt, const float *sqrt_w,
                                 int count, float *kt) {
#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
    if (h->d % 16 == 0) {
        affine_block_bf16(h, cr, yt, sqrt_w, count, kt);
        return;
    }
#endif
    affine_block_bf16_plain(h, cr, yt, sqrt_w, count, kt);
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
void pca_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt) {
    enum { W = 64 };
    memset(kt, 0, sizeof(float) * (size_t)n * W);
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    float roots[PCA_TABLE_STRIDE];
    const float *sqrt_w = pca_root_weights(b, n, roots);
    CodeReader cr;
    pca_code_reader(&h, pca_unit_bytes(b, n), &cr);
    float yt[PCA_TABLE_STRIDE * W];   /* [stored component][position]: at most 64 KiB of stack */
    pca_read_block(&h, &cr, (const unsigned char *)units + (size_t)r0 * cr.unit_bytes, count, yt);
    affine_block(&h, &cr, yt, sqrt_w, count, kt);
}

/* ---- blocks of 64 rows, component by component (KvCodec.block_codes) ----
 * In a block, the k-th stored component's codes of its 64 rows lie back to back from byte
 * cr->segment[k] (row p's code at bit p * bits of there): 16 rows' codes are then 2 x bits
 * contiguous bytes, which AVX-512 spreads over 16 lanes with one permute of 16-bit words, a
 * shift and a mask, where the row-major units need a gather of 16 rows (pca_read_block), several
 * times slower. The block holds as many bits as its 64 rows' units. */

void pca_block_codes(const KvBase *b, const void *units, int n, int r0, int count, void *block) {
    if (!b->table) return;
    PcaHead h;
    pca_head_view(b->table, n, &h);
    CodeReader cr;
    pca_code_reader(&h, pca_unit_bytes(b, n), &cr);
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
        for (int p = 0; p < 64; p++) out[p] = table[pca_get_bits(segment, (size_t)p * bits, bits)];
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

void pca_block_read(const KvBase *b, const void *block, int n, int count, KvBlockForm form, float *out) {
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
    if (form == KV_BLOCK_DECODED_T64 || form == KV_BLOCK_DECODED_T64_BF16) {
        float roots[PCA_TABLE_STRIDE];
        short k_of[PCA_TABLE_STRIDE];
        for (int k = 0; k < cr.count; k++) k_of[k] = (short)k;
        block_values(&h, &cr, block, k_of, kt);
        if (form == KV_BLOCK_DECODED_T64) affine_block(&h, &cr, kt, pca_root_weights(b, n, roots), count, out);
        else affine_block_at_bf16(&h, &cr, kt, pca_root_weights(b, n, roots), count, out);
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
