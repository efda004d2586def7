/* model/kernels/gemm_c.c: the portable matmul paths, and the blocked GEMM and streaming GEMV drivers
 * they share with the AVX2 and NEON paths (model/kernels/gemm_avx2.c, gemm_neon.c). See model/kernels/gemm.h
 * for the loop structure.
 *   matmul_scalar:  the definition — one in-order f32 dot product per output.
 *   matmul_plain_c: the same blocking as the fast paths, in loops the compiler vectorizes. */
#include "model/kernels/gemm.h"
#include "model/kernels/vector.h"
#include "model/kernels/worksplit.h"
#include "quant/half.h"
#include <stdlib.h>
#include <string.h>

/* Plain-C microkernel tile: 4 tokens x 8 weight rows = 32 accumulators, 8 registers of the 16
 * that x86-64's baseline SSE2 has (the KVQ_PORTABLE build). A 6 x 16 tile's 96 did not fit
 * there, and GCC 12 kept them on the stack (model/kernels/README.md). */
#define C_MR 4
#define C_NR 8
/* Weight rows widened together in the plain-C GEMV. */
#define GEMV_ROWS 8

static int min_int(int a, int b) { return a < b ? a : b; }


void pack_panel_f32(const Matrix *w, int r0, int nr_valid, int nr, int k0, int kc, void *panel) {
    float *dst = panel;
    float row[GEMM_KC];
    for (int r = 0; r < nr; r++) {
        if (r < nr_valid) matrix_segment_f32(w, r0 + r, k0, kc, row);
        else memset(row, 0, (size_t)kc * sizeof(float));
        for (int k = 0; k < kc; k++) dst[(size_t)k * nr + r] = row[k];
    }
}

/* One tile's operands: its first token's inputs at the k block's first unit (a, lda units a
 * token), its outputs (c, ldc floats a token), the k block's length kc, and whether the tile adds
 * to c (every k block after the first) or stores into it. */
typedef struct {
    const uint32_t *a;
    size_t lda;
    float *c;
    size_t ldc;
    int kc, accumulate;
} TileOperands;

/* A tile on the edge of out (fewer than mr tokens or nr rows): the full microkernel into a
 * private tile, whose valid part is then added to (or stored in) c. Its inputs are the mr tokens
 * that end at the tile's last one, read in place (the rows it computes again cost less than
 * copies: a 512-token batch leaves 2 in a last tile of 6), or, in a call of fewer than mr
 * tokens, a copy padded with zeros. Rows of the panel past nr_valid were packed as zeros. */
static void edge_tile(const GemmSpec *g, const TileOperands *op, int tokens_before, int mr_valid, int nr_valid,
                      const void *panel) {
    const uint32_t *a = op->a;
    size_t lda = op->lda;
    int kc = op->kc;
    _Alignas(64) uint32_t at[GEMM_MAX_MR * GEMM_KC];
    _Alignas(64) float ct[GEMM_MAX_MR * GEMM_MAX_NR];
    int back = g->mr - mr_valid;   /* rows of the private tile before c's first */
    if (tokens_before >= back) {
        g->kernel(kc, a - (size_t)back * lda, lda, panel, ct, (size_t)g->nr, 0);
    } else {
        back = 0;
        for (int m = 0; m < g->mr; m++) {
            if (m < mr_valid) memcpy(at + (size_t)m * kc, a + (size_t)m * lda, (size_t)kc * 4);
            else memset(at + (size_t)m * kc, 0, (size_t)kc * 4);
        }
        g->kernel(kc, at, (size_t)kc, panel, ct, (size_t)g->nr, 0);
    }
    for (int m = 0; m < mr_valid; m++)
        for (int n = 0; n < nr_valid; n++)
            op->c[(size_t)m * op->ldc + n] = (op->accumulate ? op->c[(size_t)m * op->ldc + n] : 0.0f) +
                                             ct[(back + m) * g->nr + n];
}

/* Weight rows multiplied together: their panels are packed for one k block (64 KiB of f32 at most,
 * in L2), then each tile of tokens goes through all of them while its inputs are in L1. With one
 * panel at a time, the inputs of every token (512 KiB for a 512-token k block) came through the
 * cache again for each panel. The AVX-512 paths use work items of 64 weight rows for the same
 * reason. */
#define GEMM_GROUP_ROWS 64
_Static_assert(GEMM_GROUP_ROWS >= GEMM_MAX_NR, "a group holds at least one panel");

/* One gemm_drive call: out[T, w->rows] = a[T, units] . w^T on the path g. */
typedef struct {
    const GemmSpec *g;
    float *out;
    const void *a;
    int units;
    const Matrix *w;
    int T;
} GemmCall;

/* One tile: mr tokens from m0 against the panel of weight rows r0.. (nr_valid of them), over
 * the k block of kc units from k0. */
static void gemm_tile(const GemmCall *call, int k0, int kc, int m0, int r0, int nr_valid, const void *panel) {
    const GemmSpec *g = call->g;
    int N = call->w->rows, mr = g->mr, mr_valid = min_int(mr, call->T - m0);
    const TileOperands op = {(const uint32_t *)call->a + (size_t)m0 * call->units + k0, (size_t)call->units,
                             call->out + (size_t)m0 * N + r0, (size_t)N, kc, k0 > 0};
    if (mr_valid == mr && nr_valid == g->nr) g->kernel(kc, op.a, op.lda, panel, op.c, op.ldc, op.accumulate);
    else edge_tile(g, &op, m0, mr_valid, nr_valid, panel);
}

/* Panels p .. p+np-1 (weight rows p*NR .. (p+np)*NR-1, np*NR <= GEMM_GROUP_ROWS) against all T
 * tokens: packed one k block at a time, then multiplied tile by tile, each tile by every panel. */
static void gemm_panels(const GemmCall *call, int p, int np) {
    const GemmSpec *g = call->g;
    const Matrix *w = call->w;
    int N = w->rows, nr = g->nr, units = call->units;
    _Alignas(64) uint32_t panels[GEMM_KC * GEMM_GROUP_ROWS];
    for (int k0 = 0; k0 < units; k0 += GEMM_KC) {
        int kc = min_int(GEMM_KC, units - k0);
        for (int j = 0; j < np; j++) {
            int r0 = (p + j) * nr;
            g->pack(w, r0, min_int(nr, N - r0), nr, k0, kc, panels + (size_t)j * kc * nr);
        }
        for (int m0 = 0; m0 < call->T; m0 += g->mr)
            for (int j = 0; j < np; j++) {
                int r0 = (p + j) * nr;
                gemm_tile(call, k0, kc, m0, r0, min_int(nr, N - r0), panels + (size_t)j * kc * nr);
            }
    }
}

void gemm_drive(const GemmSpec *g, float *out, const void *a, int units, const Matrix *w, int T) {
    const GemmCall call = {g, out, a, units, w, T};
    int n_panels = (w->rows + g->nr - 1) / g->nr, group = GEMM_GROUP_ROWS / g->nr;
    double work = (double)w->rows * w->cols * T;
    /* Each thread owns a contiguous run of panels and reads their weights once, a group of them
     * at a time; one done early helps the other (model/kernels/worksplit.h). */
    WorkSplit split;
    work_split_init(&split, n_panels, work_split_threads(work, PARALLEL_MIN_WORK), group);
    #pragma omp parallel num_threads(split.n_runs)
    {
        long long p0, p1;
        while (work_split_next(&split, work_split_thread_index(), &p0, &p1))
            for (long long p = p0; p < p1; p += group)
                gemm_panels(&call, (int)p, (int)(p1 - p < group ? p1 - p : group));
    }
}

void gemv_drive(GemvRowsFn rows, float *out, const float *x, const Matrix *w, int T) {
    int n_blocks = (w->rows + GEMV_BLOCK_ROWS - 1) / GEMV_BLOCK_ROWS;
    double work = (double)w->rows * w->cols * T;
    WorkSplit split;   /* as gemm_drive: one sequential stream of weight rows per thread */
    work_split_init(&split, n_blocks, work_split_threads(work, PARALLEL_MIN_WORK), 8);
    #pragma omp parallel num_threads(split.n_runs)
    {
        long long b0, b1;
        while (work_split_next(&split, work_split_thread_index(), &b0, &b1))
            for (long long b = b0; b < b1; b++) {
                int r0 = (int)b * GEMV_BLOCK_ROWS;
                rows(out, x, w, T, r0, min_int(GEMV_BLOCK_ROWS, w->rows - r0));
            }
    }
}

/* ---- scalar: the reference every other path is tested against ---- */

/* Each row is widened GEMM_KC units at a time into a stack buffer, so this path needs no
 * allocation (it is also gemv_c's fallback when out of memory): the running sums wait in out
 * between segments, float for float the same in-order sums as one pass over the whole row. */
void matmul_scalar(float *out, const float *x, const Matrix *w, int T) {
    int N = w->rows, K = w->cols;
    float seg[GEMM_KC];
    for (int r = 0; r < N; r++) {
        for (int t = 0; t < T; t++) out[(size_t)t * N + r] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
            int kc = min_int(GEMM_KC, K - k0);
            matrix_segment_f32(w, r, k0, kc, seg);
            for (int t = 0; t < T; t++) {
                const float *xt = x + (size_t)t * K + k0;
                float sum = out[(size_t)t * N + r];
                for (int k = 0; k < kc; k++) sum += xt[k] * seg[k];
                out[(size_t)t * N + r] = sum;
            }
        }
    }
}

/* ---- plain C ---- */

static void kernel_c(int kc, const void *a_, size_t lda, const void *panel, float *c, size_t ldc, int accumulate) {
    const float *a = a_, *b = panel;
    float acc[C_MR][C_NR] = {{0}};
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * C_NR;
        for (int m = 0; m < C_MR; m++) {
            float am = a[(size_t)m * lda + k];
            for (int n = 0; n < C_NR; n++) acc[m][n] += am * bk[n];
        }
    }
    for (int m = 0; m < C_MR; m++)
        for (int n = 0; n < C_NR; n++)
            c[(size_t)m * ldc + n] = (accumulate ? c[(size_t)m * ldc + n] : 0.0f) + acc[m][n];
}

/* Weight rows r0..r0+GEMV_ROWS-1 (clipped) widened into wbuf, then dotted with each of the
 * T inputs. */
static void gemv_c_block(float *out, const float *x, const Matrix *w, int T, int r0, float *wbuf) {
    int rows = w->rows, cols = w->cols, nr = min_int(GEMV_ROWS, rows - r0);
    for (int r = 0; r < nr; r++) matrix_segment_f32(w, r0 + r, 0, cols, wbuf + (size_t)r * cols);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * cols;
        for (int r = 0; r < nr; r++) out[(size_t)t * rows + r0 + r] = dot_f32(xt, wbuf + (size_t)r * cols, cols);
    }
}

static void gemv_c(float *out, const float *x, const Matrix *w, int T) {
    double work = (double)w->rows * w->cols * T;
    WorkSplit split;   /* blocks of GEMV_ROWS rows, each thread its own run (see gemm_drive) */
    work_split_init(&split, (w->rows + GEMV_ROWS - 1) / GEMV_ROWS, work_split_threads(work, PARALLEL_MIN_WORK), 8);
    int no_buffer = 0;
    #pragma omp parallel num_threads(split.n_runs)
    {
        float *wbuf = malloc((size_t)GEMV_ROWS * w->cols * sizeof(float));
        long long b0, b1;
        if (!wbuf) {
            #pragma omp atomic write
            no_buffer = 1;
        }
        /* a thread without its buffer claims nothing: the others do its share */
        while (wbuf && work_split_next(&split, work_split_thread_index(), &b0, &b1))
            for (long long b = b0; b < b1; b++) gemv_c_block(out, x, w, T, (int)b * GEMV_ROWS, wbuf);
        free(wbuf);
    }
    /* out of memory for a few rows' buffer: rather than leave rows unwritten when no thread
     * had one, the scalar path (no buffer) computes them all */
    if (no_buffer) matmul_scalar(out, x, w, T);
}

void matmul_plain_c(float *out, const float *x, const Matrix *w, int T) {
    if (T < GEMV_MAX_T) {
        gemv_c(out, x, w, T);
        return;
    }
    static const GemmSpec spec = {C_MR, C_NR, pack_panel_f32, kernel_c};
    gemm_drive(&spec, out, x, w->cols, w, T);
}
