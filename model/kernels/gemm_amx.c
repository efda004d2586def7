/* model/kernels/gemm_amx.c: the bf16 GEMM on Intel's AMX tiles, compiled only when the build
 * targets them (__AMX_TILE__ and __AMX_BF16__, or clang's __AMXTILE__ / __AMXBF16__, with
 * AVX-512 BF16 for the packing: kernels.h's KVQ_AMX).
 *   A tile is 16 rows of 64 bytes in a register file of eight. One TDPBF16PS multiplies a
 *   16 x 32 tile of bf16 activations (16 tokens, 32 k) by a 32 x 16 tile of bf16 weights (16
 *   pairs of k, each pair for 16 output rows side by side) into 16 x 16 f32 sums: 8192
 *   multiply-adds, 256 times a vdpbf16ps's 32 (bench's probes on a 2-core Xeon, Emerald
 *   Rapids: ~11 times the rate). Here four tiles hold a 32 x 32 block of sums, two the
 *   activations of 32 tokens, two the weights of 32 rows.
 *   Activations are rounded to bf16 once per call, rows padded with zero tokens to a multiple
 *   of 32 and with zero k to a multiple of 32: a tile loads 16 rows of them as they lie.
 *   Weights are copied a block of 32 rows x AMX_KC k at a time into the pair layout (a
 *   transpose of 16 x 16 32-bit pairs), and that block serves every token before the next.
 * The sums come out of the tiles in f32; the products and their order differ from the
 * vdpbf16ps path's, as that path's differ from the exact one's (within bf16's noise, which
 * tests/test_kernels.c bounds against the scalar definition).
 * Linux hands out AMX's 8 KiB of tile state only to a process that asks (arch_prctl, kernel
 * 5.16 or later); gemm_amx_ready asks, and a refusal leaves the vdpbf16ps path in charge. */
#define _DEFAULT_SOURCE   /* syscall */
#include "model/kernels/gemm.h"
#include <string.h>
#if defined(KVQ_AMX)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "model/kernels/simd_avx512.h"
#include "model/kernels/worksplit.h"

#define ARCH_REQ_XCOMP_PERM 0x1023   /* from the kernel's asm/prctl.h */
#define XFEATURE_XTILEDATA 18
#define AMX_TOK 32      /* tokens per block of sums: two activation tiles */
#define AMX_ROWS 32     /* weight rows per work item: two weight tiles */
#define AMX_KC 1024     /* k per packed weight block: 2 tiles' columns x 512 pairs x 64 B = 64 KiB, in L2
                           (the fastest block tried: model/kernels/README.md) */
#define AMX_UNITS (AMX_KC / 2)

int gemm_amx_ready(void) { return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0; }

static int min_int(int a, int b) { return a < b ? a : b; }
static int round_up32(int n) { return (n + 31) / 32 * 32; }

/* The tile shapes: palette 1, all eight tiles 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} TileConfig;

void amx_configure_tiles(void) {
    TileConfig c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = 16;
        c.bytes_per_row[i] = 64;
    }
    /* GCC 12's _tile_loadconfig tells the compiler it reads only the first 8 bytes, so the
     * stores above may be dropped as dead (a #GP on ldtilecfg where this is not inlined): the
     * instruction is written out with the whole struct as its operand. */
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

/* x [T, K] -> xb [T_pad, K_pad] bf16, rounded to nearest even; padding is zero. */
static void activations_to_bf16_padded(const float *x, int T, int K, int T_pad, int K_pad, uint16_t *xb) {
    double work = (double)T * K;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < T_pad; t++) {
        uint16_t *d = xb + (size_t)t * K_pad;
        for (int k = 0; k < K_pad; k += 32) {
            __m512i v = t < T ? load_bf16_pairs(x + (size_t)t * K + k, min_int(K - k, 32)) : _mm512_setzero_si512();
            _mm512_storeu_si512((void *)(d + k), v);
        }
    }
}

/* Weight rows n0..n0+31, k k0..k0+kc-1 (kc a multiple of 32) -> panel[2][AMX_UNITS][16]:
 * tile half h, pair u, row j = (w[n0 + 16h + j][k0 + 2u], w[...][k0 + 2u + 1]). Rows past N
 * and k past K are zeros (masked loads, and none at all past the matrix: nothing past it is
 * read). */
static void pack_weights(const Matrix *w, int n0, int k0, int kc, uint32_t *panel) {
    int N = w->rows, K = w->cols;
    const uint16_t *weights = w->data;
    for (int h = 0; h < 2; h++)
        for (int u0 = 0; u0 < kc / 2; u0 += 16) {
            int k = k0 + 2 * u0, valid = K - k < 32 ? K - k : 32;   /* <= 0 in k's zero padding */
            __mmask32 mask = valid >= 32 ? 0xffffffffu : valid > 0 ? (1u << valid) - 1 : 0;
            __m512i r[16];
            for (int j = 0; j < 16; j++) {
                int n = n0 + 16 * h + j;
                r[j] = _mm512_setzero_si512();
                if (n < N && valid > 0) r[j] = _mm512_maskz_loadu_epi16(mask, weights + (size_t)n * K + k);
            }
            transpose16_epi32(r);   /* r[i]: pair u0 + i of the 16 rows */
            for (int i = 0; i < 16; i++)
                _mm512_storeu_si512((void *)(panel + ((size_t)h * AMX_UNITS + u0 + i) * 16), r[i]);
        }
}

/* The 32 x 32 block of sums at tokens t0.., rows n0.. (tiles 0-3), plus kc k of products from
 * xb's rows (stride K_pad) and the packed panel. */
static void multiply_block(const uint16_t *xb, int K_pad, const uint32_t *panel, int kc) {
    for (int k = 0; k < kc; k += 32) {
        _tile_loadd(4, xb + k, K_pad * 2);
        _tile_loadd(5, xb + (size_t)16 * K_pad + k, K_pad * 2);
        _tile_loadd(6, panel + (size_t)k / 2 * 16, 64);
        _tile_loadd(7, panel + ((size_t)AMX_UNITS + k / 2) * 16, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

/* Where the block of sums at (t0, n0) lives between k blocks: in out itself when the block
 * lies inside it, else in edge (32 x 32 floats) with the part inside out copied in and out. */
typedef struct {
    float *c;
    size_t stride;   /* bytes between token rows */
    int tokens, rows;   /* the part inside out */
} SumBlock;

static SumBlock sum_block(float *out, int T, int N, int t0, int n0, float *edge) {
    SumBlock b = {out + (size_t)t0 * N + n0, (size_t)N * 4, min_int(T - t0, AMX_TOK), min_int(N - n0, AMX_ROWS)};
    if (b.tokens < AMX_TOK || b.rows < AMX_ROWS) {
        b.c = edge;
        b.stride = AMX_ROWS * 4;
    }
    return b;
}

static void copy_rows(float *dst, size_t dst_ld, const float *src, size_t src_ld, int tokens, int rows) {
    for (int t = 0; t < tokens; t++) memcpy(dst + (size_t)t * dst_ld, src + (size_t)t * src_ld, (size_t)rows * 4);
}

static void load_sums(const SumBlock *b, const float *out_block, int N, int first) {
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        return;
    }
    if (b->c != out_block) copy_rows(b->c, AMX_ROWS, out_block, (size_t)N, b->tokens, b->rows);
    size_t half = b->stride / 4 * 16;   /* floats to the second 16 tokens */
    _tile_loadd(0, b->c, b->stride);
    _tile_loadd(1, b->c + 16, b->stride);
    _tile_loadd(2, b->c + half, b->stride);
    _tile_loadd(3, b->c + half + 16, b->stride);
}

static void store_sums(const SumBlock *b, float *out_block, int N) {
    size_t half = b->stride / 4 * 16;
    _tile_stored(0, b->c, b->stride);
    _tile_stored(1, b->c + 16, b->stride);
    _tile_stored(2, b->c + half, b->stride);
    _tile_stored(3, b->c + half + 16, b->stride);
    if (b->c != out_block) copy_rows(out_block, (size_t)N, b->c, AMX_ROWS, b->tokens, b->rows);
}

/* Rows n0..n0+31 of out, every token: k block by k block, each packed once for all tokens. */
static void row_block(float *out, const uint16_t *xb, const Matrix *w, int T, int T_pad, int K_pad, int n0) {
    _Alignas(64) uint32_t panel[2 * AMX_UNITS * 16];
    _Alignas(64) float edge[AMX_TOK * AMX_ROWS];
    int N = w->rows;
    for (int k0 = 0; k0 < K_pad; k0 += AMX_KC) {
        int kc = min_int(K_pad - k0, AMX_KC);
        pack_weights(w, n0, k0, kc, panel);
        for (int t0 = 0; t0 < T_pad; t0 += AMX_TOK) {
            float *out_block = out + (size_t)t0 * N + n0;
            SumBlock b = sum_block(out, T, N, t0, n0, edge);
            load_sums(&b, out_block, N, k0 == 0);
            multiply_block(xb + (size_t)t0 * K_pad + k0, K_pad, panel, kc);
            store_sums(&b, out_block, N);
        }
    }
}

/* out[T, N] = x . w^T with BF16 weights, activations rounded to bf16 (T >= 1). scratch:
 * matmul_scratch_bytes(T, K), 64-byte aligned. Call only after gemm_amx_ready said yes. */
void matmul_amx(float *out, const float *x, const Matrix *w, int T, void *scratch) {
    int K = w->cols, T_pad = round_up32(T), K_pad = round_up32(K), blocks = (w->rows + AMX_ROWS - 1) / AMX_ROWS;
    uint16_t *xb = scratch;
    activations_to_bf16_padded(x, T, K, T_pad, K_pad, xb);
    double work = (double)T * K * w->rows;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel if (work >= PARALLEL_MIN_WORK)
    {
        amx_configure_tiles();   /* per thread: the tile shapes are thread state */
        #pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < blocks; b++) row_block(out, xb, w, T, T_pad, K_pad, b * AMX_ROWS);
        _tile_release();
    }
}
#endif
