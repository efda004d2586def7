/* model/kernels/attention_amx.c: attention's two products on Intel's AMX tiles (model/attention.c's
 * amx-bf16 path), 32 query rows at a time, in the layouts the bf16 pairs path already has:
 *   scores: 32 queries (bf16 pairs of dims, contiguous rows) x a block of keys stored as pair rows
 *     of a transposed block, kt[hd/2][DOT_T_WIDTH]: that is a tile's B layout as it lies (16 pair
 *     rows of 16 positions, one row to the next DOT_T_WIDTH pairs apart), so nothing is copied;
 *   weighted values: 32 rows of exp'd weights (bf16 pairs of positions, rows a score row apart)
 *     x value pair rows [DOT_T_WIDTH/2][hd] (bf16_pair_rows), again B's layout as they lie. The
 *     sums stay in the tiles across every block of positions and come out once.
 * Four tiles hold 32 x 32 sums, two the queries or weights, two the keys or values (as
 * gemm_amx.c). Products of bf16 are exact in f32 and summed in f32, as the vdpbf16ps loops do,
 * in another order. Compiled where KVQ_AMX is (kernels.h); elsewhere the plain C below, the
 * same sums in order, which tests/test_attention_kernels.c also checks. */
#include "model/kernels/attention_kernels.h"
#include "model/kernels/gemm.h"
#if defined(KVQ_AMX)
#include <immintrin.h>

void attention_tiles_begin(void) { amx_configure_tiles(); }
void attention_tiles_end(void) { _tile_release(); }

static void zero_sums(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

/* The 32 x 32 sums (tiles 0-3) to c, rows stride floats apart. */
static void store_sums(float *c, size_t stride) {
    _tile_stored(0, c, stride * 4);
    _tile_stored(1, c + 16, stride * 4);
    _tile_stored(2, c + 16 * stride, stride * 4);
    _tile_stored(3, c + 16 * stride + 16, stride * 4);
}

/* sums += a (32 rows of 16 pairs at a, a_stride uint32 apart) x b (16 pair rows of 32 columns,
 * b_stride uint32 apart). */
static void multiply_add(const uint32_t *a, size_t a_stride, const uint32_t *b, size_t b_stride) {
    _tile_loadd(4, a, a_stride * 4);
    _tile_loadd(5, a + 16 * a_stride, a_stride * 4);
    _tile_loadd(6, b, b_stride * 4);
    _tile_loadd(7, b + 16, b_stride * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

void tile_scores32(const uint32_t *q, int hd, const uint32_t *kt, int n, float *out, size_t stride) {
    for (int p0 = 0; p0 < n; p0 += 32) {
        zero_sums();
        for (int u = 0; u < hd / 2; u += 16) multiply_add(q + u, (size_t)hd / 2, kt + (size_t)u * DOT_T_WIDTH + p0, DOT_T_WIDTH);
        store_sums(out + p0, stride);
    }
}

void tile_weighted_values32(const uint32_t *w, size_t w_stride, const void *const *blocks, int step, int n, int hd,
                            float *out) {
    for (int d0 = 0; d0 < hd; d0 += 32) {
        zero_sums();
        for (int p = 0; p < n; p += 32) {
            const uint32_t *v = (const uint32_t *)blocks[(size_t)(p / DOT_T_WIDTH) * step];
            multiply_add(w + p / 2, w_stride, v + (size_t)(p % DOT_T_WIDTH) / 2 * hd + d0, (size_t)hd);
        }
        store_sums(out + d0, (size_t)hd);
    }
}
#else
/* Plain C: the definition (nothing to configure). */
void attention_tiles_begin(void) {}
void attention_tiles_end(void) {}

void tile_scores32(const uint32_t *q, int hd, const uint32_t *kt, int n, float *out, size_t stride) {
    int n32 = (n + 31) / 32 * 32;
    for (int i = 0; i < 32; i++)
        for (int p = 0; p < n32; p++) {
            float sum = 0.0f;
            for (int u = 0; u < hd / 2; u++) sum += bf16_pair_dot(q[(size_t)i * (hd / 2) + u], kt[(size_t)u * DOT_T_WIDTH + p]);
            out[(size_t)i * stride + p] = sum;
        }
}

void tile_weighted_values32(const uint32_t *w, size_t w_stride, const void *const *blocks, int step, int n, int hd,
                            float *out) {
    int n32 = (n + 31) / 32 * 32;
    for (int i = 0; i < 32; i++)
        for (int d = 0; d < hd; d++) {
            float sum = 0.0f;
            for (int p = 0; p < n32; p += 2) {
                const uint32_t *v = (const uint32_t *)blocks[(size_t)(p / DOT_T_WIDTH) * step];
                sum += bf16_pair_dot(w[(size_t)i * w_stride + p / 2], v[(size_t)(p % DOT_T_WIDTH) / 2 * hd + d]);
            }
            out[(size_t)i * hd + d] = sum;
        }
}
#endif
