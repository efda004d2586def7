/* model/kernels/attention_kernels.h: attention's inner loops (model/kernels/attention_kernels.c), used by
 * model/attention.c: a block of up to DOT_T_WIDTH cache rows at a time. */
#ifndef KVQ_ATTENTION_KERNELS_H
#define KVQ_ATTENTION_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "quant/half.h"

/* The two loops in f32, with AVX-512 versions that keep their sums in registers, split in
 * two partial sums (even and odd terms) added at the end: within f32 rounding of the plain
 * loops, which add in order (tests/test_kernels.c). The AVX2 versions add in order too, so
 * with FMA they give the plain loops' results bit for bit. */
#define DOT_T_WIDTH 64
/* acc[p] = sum_d q[d] * kt[d * DOT_T_WIDTH + p] for p < DOT_T_WIDTH: one query against 64
 * keys stored transposed. */
void dot_transposed64(const float *q, const float *kt, int hd, float *acc);
/* out[0..hd) += sum_p w[p] * v[p * hd + .] for p < n, in order of p. */
void add_weighted_rows(float *out, const float *w, const float *v, int n, int hd);
/* The same for four queries at once (acc[j], q[j]; out[j], w[j]): each key or value vector
 * loaded serves four queries, so the loops run at the FMA units' rate, not the loads'. */
void dot_transposed64_x4(const float *const q[4], const float *kt, int hd, float *const acc[4]);
void add_weighted_rows_x4(float *const out[4], const float *const w[4], const float *v, int n, int hd);

/* The dot product of two pairs, a product of bf16 values exact in f32: the plain-C loops' term. */
static inline float bf16_pair_dot(uint32_t a, uint32_t b) {
    return bf16_to_f32((uint16_t)a) * bf16_to_f32((uint16_t)b) + bf16_to_f32((uint16_t)(a >> 16)) * bf16_to_f32((uint16_t)(b >> 16));
}

/* The same two loops on bf16 pairs, for nq <= 4 queries: the MATMUL_BF16_ACT precision's
 * attention, twice the multiply-adds per instruction with vdpbf16ps (AVX-512 BF16; plain C
 * elsewhere, the tests' reference). A pair is 32 bits: element 2i rounded to bf16 (nearest
 * even) in the low half, element 2i + 1 in the high half.
 *   bf16_pair_rows: out[k][c] = (x[2k][c], x[2k+1][c]) for rows of width floats (a multiple of
 *     16), ceil(n/2) pair rows; an odd n's last row pairs with 0.
 *   bf16_pairs_along: out[i] = (x[2i], x[2i+1]) for 2i < n, an odd n's last with 0; out may
 *     be x itself (each pair is written after its two floats are read).
 *   dot_pairs64: acc[j][p] = sum over units i of q[j][i] . kt[i * DOT_T_WIDTH + p] (keys as
 *     pair rows of a transposed block).
 *   add_weighted_pairs: out[j][0..hd) += sum_k w[j][k] . v[k * hd + .] for pair rows of
 *     values (hd a multiple of 64). */
void bf16_pair_rows(const float *x, int n, int width, uint32_t *out);
void bf16_pairs_along(const float *x, int n, uint32_t *out);
void dot_pairs64(int nq, const uint32_t *const q[4], const uint32_t *kt, int units, float *const acc[4]);
void add_weighted_pairs(int nq, float *const out[4], const uint32_t *const w[4], const uint32_t *v, int n_pairs, int hd);

/* The two products of the pairs path on Intel's AMX tiles (model/kernels/attention_amx.c),
 * 32 query rows at a time; plain C where the build has no AMX (kernels.h's KVQ_AMX). A thread
 * calls attention_tiles_begin before it uses them and attention_tiles_end after (the tile
 * shapes are thread state); on the amx-bf16 path the OS has granted the tiles already.
 *   tile_scores32: out[i * stride + p] = sum over pairs u < hd/2 of q[i * hd/2 + u] .
 *     kt[u * DOT_T_WIDTH + p] for rows i < 32, positions p below n rounded up to 32 (n <= 64;
 *     hd a multiple of 32): unscaled, as dot_pairs64's.
 *   tile_weighted_values32: out[i * hd + d] = sum over positions p below n rounded up to 32 of
 *     weight p of row i (pair p/2 of w + i * w_stride) x value p (pair row (p mod 64) / 2 of
 *     blocks[(p / 64) * step], hd wide), for i < 32, d < hd (a multiple of 32). Weights and
 *     value rows up to that rounded n must be finite: zeros where nothing is to be added. */
void attention_tiles_begin(void);
void attention_tiles_end(void);
void tile_scores32(const uint32_t *q, int hd, const uint32_t *kt, int n, float *out, size_t stride);
void tile_weighted_values32(const uint32_t *w, size_t w_stride, const void *const *blocks, int step, int n, int hd,
                            float *out);

/* Keys [n][hd] (f32 rows) -> kt[d * DOT_T_WIDTH + p], 0 for n <= p < DOT_T_WIDTH. */
void transpose_keys64(const float *k, int n, int hd, float *kt);
/* The same as bf16 pairs in one pass: kt[i * DOT_T_WIDTH + p] = (k[p][2i], k[p][2i+1]) for
 * 2i < hd (an odd hd's last with 0), 0 for n <= p < DOT_T_WIDTH: what bf16_pair_rows makes of
 * transpose_keys64's block, bit for bit. */
void key_pairs64(const float *k, int n, int hd, uint32_t *kt);

#endif
