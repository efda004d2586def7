/* model/kernels/gemm_avx512.c: the AVX-512 matmul paths, compiled only when the build targets them
 * (__AVX512F__; the bf16 path also needs __AVX512BF16__ and __AVX512BW__).
 *   GEMV (T < 4): one weight row at a time, front to back, four independent sums: a single
 *     sequential stream per thread is what the hardware prefetcher serves fastest.
 *   GEMM: the activations, which every weight row meets, are packed once per call into
 *     strips of BW_TOK tokens laid out [k][token]; the weights are used in place, each one
 *     broadcast against 48 tokens (3 vectors) for 8 rows at a time (24 accumulators). No
 *     weight panel is ever copied, and the packing is amortized over all N rows.
 *   f32 path: BF16 / F16 weights widened to f32 8 rows x 256 k at a time, then broadcast, f32 FMA.
 *   bf16 path: activations rounded to bf16 (one 32-bit pair of k, k+1 per unit), weights
 *     broadcast as pairs, vdpbf16ps: twice the multiply-adds per instruction. */
#include "model/kernels/gemm.h"
#include "model/kernels/vector.h"
#include "quant/half.h"
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#include "model/kernels/simd_avx512.h"
#include "model/kernels/worksplit.h"

#define BW_ROWS 8        /* weight rows per microkernel */
#define BW_TOK 48        /* tokens per strip: three vectors of 16 */
#define BW_KC 1024       /* k units per block: a 192 KiB activation block, in L2; 4096's 768 KiB
                            blocks crowd a 1 MiB L2 (model/kernels/README.md) */
#define BW_GROUP 64      /* weight rows per work item; their 48-token tile lives in ct. Each packed
                            activation block serves all of them (model/kernels/README.md) */

/* ct[r][t] (+)= sum over kc units of w_r[k0 + k] * a[k][t] for r < 8, t < 16 * nv. wrow: byte
 * addresses of the 8 rows. nv = 3 vectors of tokens, or 2 or 1 for a last strip that is
 * only partly filled (512 tokens = 10 strips of 48 + one of 32): padding is not computed. */
typedef void (*BroadcastKernel)(int nv, int kc, const void *a, const unsigned char *const *wrow, size_t k0, float *ct,
                                int accumulate);

/* Activations packed for the broadcast kernels: T tokens in strips of BW_TOK, `units` 4-byte
 * units a token (floats, or bf16 pairs), and the kernel that reads them with the weights' dtype. */
typedef struct {
    BroadcastKernel kern;
    const void *data;
    int units, T;
} PackedActivations;

static int min_int(int a, int b) { return a < b ? a : b; }

static inline __m512 load16(DType dt, const void *row, int i) {
    if (dt == DT_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (dt == DT_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
    return _mm512_loadu_ps((const float *)row + i);
}

/* One row at a time, front to back, four independent sums (see gemv_bf16_block). */
static inline void gemv16_block(DType dt, float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows;
    size_t esize = dt == DT_F32 ? 4 : 2;
    for (int j = 0; j < nr; j++) {
        const unsigned char *row = (const unsigned char *)w->data + (size_t)(r0 + j) * K * esize;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            int k = 0;
            for (; k + 64 <= K; k += 64)
                for (int u = 0; u < 4; u++)
                    acc[u] = _mm512_fmadd_ps(load16(dt, row, k + 16 * u), _mm512_loadu_ps(xt + k + 16 * u), acc[u]);
            for (; k + 16 <= K; k += 16) acc[0] = _mm512_fmadd_ps(load16(dt, row, k), _mm512_loadu_ps(xt + k), acc[0]);
            float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
            for (; k < K; k++) s += xt[k] * weight_at(dt, row, k);
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

/* Rows r0..r0+nr-1 of w against T inputs on the exact path (dtype constant per call). */
static void gemv_exact_block(float *out, const float *x, const Matrix *w, int T, int r0, int nr) {
    if (w->dtype == DT_BF16) gemv16_block(DT_BF16, out, x, w, T, r0, nr);
    else if (w->dtype == DT_F16) gemv16_block(DT_F16, out, x, w, T, r0, nr);
    else gemv16_block(DT_F32, out, x, w, T, r0, nr);
}

/* ---- f32 activations ---- */

/* Rows of BF16 or F16 weights widened to f32 in WIDEN_KC-wide slices before the kernel uses
 * them: a broadcast of a 16-bit weight is a shuffle on the port that also runs half the FMAs
 * on Intel cores (vpbroadcastw, then a shift or an f16 conversion), while a 32-bit one from
 * memory is a plain load.
 * Widening a slice with vector loads costs ~1/16 of that per weight. 8 rows x 256 = 8 KiB, in
 * any L1. Results are bit for bit those of broadcasting the 16-bit weights (the same products,
 * added in the same order). Each 48-token strip widens the slice again: the widening loop is
 * where the weights' first reads from memory land, so widening once for several strips does not
 * save those reads (model/kernels/README.md). */
#define WIDEN_KC 256

static void widen_rows(DType dt, const unsigned char *const *wrow, size_t k0, int n, float wide[BW_ROWS][WIDEN_KC]) {
    for (int r = 0; r < BW_ROWS; r++) {
        int k = 0;
        for (; k + 16 <= n; k += 16) _mm512_store_ps(wide[r] + k, load16(dt, wrow[r], (int)(k0 + k)));
        for (; k < n; k++) wide[r][k] = weight_at(dt, wrow[r], (int)(k0 + k));
    }
}

static inline void kernel_f32_of(DType dt, int nv, int kc, const void *a_, const unsigned char *const *wrow,
                                 size_t k0, float *ct, int accumulate) {
    const float *a = a_;
    _Alignas(64) float wide[BW_ROWS][WIDEN_KC];
    __m512 acc[BW_ROWS][3], av[3];
    for (int r = 0; r < BW_ROWS; r++)
        for (int j = 0; j < nv; j++) acc[r][j] = accumulate ? _mm512_loadu_ps(ct + r * BW_TOK + 16 * j) : _mm512_setzero_ps();
    for (int kb = 0; kb < kc; kb += WIDEN_KC) {
        int n = min_int(kc - kb, WIDEN_KC);
        if (dt != DT_F32) widen_rows(dt, wrow, k0 + kb, n, wide);
        for (int k = 0; k < n; k++) {
            for (int j = 0; j < nv; j++) av[j] = _mm512_loadu_ps(a + (size_t)(kb + k) * BW_TOK + 16 * j);
            for (int r = 0; r < BW_ROWS; r++) {
                float w;   /* f32 weights are used in place (a 32-bit broadcast from memory is a load) */
                if (dt == DT_F32) memcpy(&w, wrow[r] + 4 * (k0 + kb + k), sizeof w);
                else w = wide[r][k];
                __m512 wv = _mm512_set1_ps(w);
                for (int j = 0; j < nv; j++) acc[r][j] = _mm512_fmadd_ps(wv, av[j], acc[r][j]);
            }
        }
    }
    for (int r = 0; r < BW_ROWS; r++)
        for (int j = 0; j < nv; j++) _mm512_storeu_ps(ct + r * BW_TOK + 16 * j, acc[r][j]);
}

/* The exact path always computes whole strips (padding tokens are zeros, their sums never
 * stored): with three dtypes, width variants as well would be more copies than GCC inlines,
 * and a kernel whose width is a variable spills its sums to memory. */
static void kernel_f32_bf16w(int nv, int kc, const void *a, const unsigned char *const *w, size_t k0, float *ct, int acc) {
    (void)nv;
    kernel_f32_of(DT_BF16, 3, kc, a, w, k0, ct, acc);
}
static void kernel_f32_f16w(int nv, int kc, const void *a, const unsigned char *const *w, size_t k0, float *ct, int acc) {
    (void)nv;
    kernel_f32_of(DT_F16, 3, kc, a, w, k0, ct, acc);
}
static void kernel_f32_f32w(int nv, int kc, const void *a, const unsigned char *const *w, size_t k0, float *ct, int acc) {
    (void)nv;
    kernel_f32_of(DT_F32, 3, kc, a, w, k0, ct, acc);
}

/* x [T, K] -> strips [ceil(T/48)][K][48]; padding tokens are zero. */
static void pack_activations_f32(const float *x, int T, int K, float *apack) {
    int n_strips = (T + BW_TOK - 1) / BW_TOK;
    double work = (double)T * K;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int s = 0; s < n_strips; s++) {
        float *dst = apack + (size_t)s * K * BW_TOK;
        for (int t = 0; t < BW_TOK; t++) {
            int tok = s * BW_TOK + t;
            for (int k = 0; k < K; k++) dst[(size_t)k * BW_TOK + t] = tok < T ? x[(size_t)tok * K + k] : 0.0f;
        }
    }
}

/* ---- the shared GEMM loop ---- */

/* Byte addresses of weight rows g0..g0+BW_GROUP-1 of w; rows past N repeat the last one (their
 * results are computed but never stored). Returns how many rows are real. */
static int group_rows(const Matrix *w, int g0, const unsigned char *wrow[BW_GROUP]) {
    int rows = min_int(w->rows - g0, BW_GROUP);
    size_t row_bytes = (size_t)w->cols * (w->dtype == DT_F32 ? 4 : 2);
    for (int r = 0; r < BW_GROUP; r++)
        wrow[r] = (const unsigned char *)w->data + (size_t)(g0 + min_int(r, rows - 1)) * row_bytes;
    return rows;
}

/* ct[r][t] = row r . token t of one packed strip (as), for r < rows and t < 16 * nv.
 * units: k units per row (floats, or bf16 pairs), each 4 bytes in the packed strips. */
static void strip_tile(BroadcastKernel kern, const unsigned char *as, int units, const unsigned char *const *wrow,
                       int rows, int nv, float *ct) {
    if (units == 0) memset(ct, 0, BW_GROUP * BW_TOK * sizeof(float));
    for (int k0 = 0; k0 < units; k0 += BW_KC) {
        int kc = min_int(units - k0, BW_KC);
        for (int r0 = 0; r0 < rows; r0 += BW_ROWS)
            kern(nv, kc, as + (size_t)k0 * BW_TOK * 4, wrow + r0, (size_t)k0, ct + r0 * BW_TOK, k0 > 0);
    }
}

/* GEMM work items are (group, strip) pairs: item i = strip i % n_strips of row group
 * i / n_strips. Of the claimed items [i, i_end), the ones in item i's group: group *g, strips
 * [*s0, *s1). Returns how many items that is. */
static int group_strips(long long i, long long i_end, int n_strips, int *g, int *s0, int *s1) {
    *g = (int)(i / n_strips);
    *s0 = (int)(i % n_strips);
    *s1 = i_end - i < n_strips - *s0 ? *s0 + (int)(i_end - i) : n_strips;
    return *s1 - *s0;
}

/* Weight rows g0..g0+BW_GROUP-1 (clipped to N) times strips s0..s1-1 of the packed activations,
 * stored into out, or added to it (add: a residual connection, one pass over out fewer). */
static void gemm_group(const PackedActivations *a, const Matrix *w, int g0, int s0, int s1, float *out, int add) {
    int N = w->rows, T = a->T, units = a->units;
    _Alignas(64) float ct[BW_GROUP * BW_TOK];
    const unsigned char *wrow[BW_GROUP];
    int rows = group_rows(w, g0, wrow);
    for (int s = s0; s < s1; s++) {
        int t_end = min_int(T - s * BW_TOK, BW_TOK);
        /* the strip's output lines, asked for now so that they are in cache when the tile is
         * stored: the stores otherwise wait on a miss per line */
        for (int t = 0; t < t_end; t++)
            for (int r = 0; r < rows; r += 16) _mm_prefetch((const char *)(out + (size_t)(s * BW_TOK + t) * N + g0 + r), _MM_HINT_T1);
        strip_tile(a->kern, (const unsigned char *)a->data + (size_t)s * units * BW_TOK * 4, units, wrow, rows,
                   (t_end + 15) / 16, ct);
        for (int t = 0; t < t_end; t++) {
            float *o = out + (size_t)(s * BW_TOK + t) * N + g0;
            if (add)
                for (int r = 0; r < rows; r++) o[r] += ct[r * BW_TOK + t];
            else
                for (int r = 0; r < rows; r++) o[r] = ct[r * BW_TOK + t];
        }
    }
}

/* ---- bf16 activations (vdpbf16ps) ---- */
#if defined(__AVX512BF16__) && defined(__AVX512BW__)

/* x[T, K] -> bf16 pairs [T, units], units = ceil(K/2), rounding to nearest even; an odd K
 * gets a zero partner. */
static void activations_to_bf16(const float *x, int T, int K, uint32_t *dst) {
    int units = (K + 1) / 2;
    double work = (double)T * K;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * K;
        uint32_t *d = dst + (size_t)t * units;
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xt + k + 16), _mm512_loadu_ps(xt + k));
            _mm512_storeu_si512((void *)(d + k / 2), (__m512i)v);
        }
        for (; k < K; k += 2) {
            uint32_t lo = f32_to_bf16(xt[k]), hi = k + 1 < K ? f32_to_bf16(xt[k + 1]) : 0u;
            d[k / 2] = lo | hi << 16;
        }
    }
}

/* Rows r0..r0+nr-1 against T bf16 inputs: 32 products per vdpbf16ps. One row at a time,
 * read front to back with four independent sums: a single sequential stream per thread is
 * what the hardware prefetcher serves fastest. */
static void gemv_bf16_block(float *out, const uint32_t *xb, const Matrix *w, int T, int r0, int nr) {
    int K = w->cols, N = w->rows, units = (K + 1) / 2;
    for (int j = 0; j < nr; j++) {
        const uint16_t *row = (const uint16_t *)w->data + (size_t)(r0 + j) * K;
        for (int t = 0; t < T; t++) {
            const uint32_t *xt = xb + (size_t)t * units;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            int k = 0;
            for (; k + 128 <= K; k += 128)
                for (int u = 0; u < 4; u++) {
                    __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xt + (k + 32 * u) / 2));
                    __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)(row + k + 32 * u));
                    acc[u] = _mm512_dpbf16_ps(acc[u], wv, xv);
                }
            for (; k + 32 <= K; k += 32) {
                __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xt + k / 2));
                acc[0] = _mm512_dpbf16_ps(acc[0], (__m512bh)_mm512_loadu_si512((const void *)(row + k)), xv);
            }
            float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
            for (int kk = k; kk < K; kk++) {
                uint16_t xbits = (uint16_t)(xt[kk / 2] >> (kk % 2 ? 16 : 0));
                s += bf16_to_f32(xbits) * bf16_to_f32(row[kk]);
            }
            out[(size_t)t * N + r0 + j] = s;
        }
    }
}

/* x [T, K] -> strips [ceil(T/48)][K/2][48] of bf16 pairs (k, k+1), in one pass: sixteen
 * tokens' rows of sixteen pairs are read as sixteen vectors, and a transpose turns them into
 * the strip's sixteen pair rows. Padding tokens are zero; an odd K's last column is left to
 * add_last_column. */
static void pack_activations_bf16(const float *x, int T, int K, uint32_t *apack) {
    int units = K / 2, n_strips = (T + BW_TOK - 1) / BW_TOK, blocks = (units + 15) / 16;
    double work = (double)T * units;
    (void)work;   /* unused without OpenMP */
    #pragma omp parallel for schedule(static) if (work >= PARALLEL_MIN_WORK / 4)
    for (int item = 0; item < n_strips * blocks; item++) {
        int s = item / blocks, u0 = item % blocks * 16, nu = min_int(units - u0, 16);
        uint32_t *dst = apack + (size_t)s * units * BW_TOK;
        for (int t0 = 0; t0 < BW_TOK; t0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                int tok = s * BW_TOK + t0 + i;
                r[i] = tok < T ? load_bf16_pairs(x + (size_t)tok * K + 2 * (size_t)u0, 2 * nu) : _mm512_setzero_si512();
            }
            transpose16_epi32(r);
            for (int u = 0; u < nu; u++) _mm512_storeu_si512((void *)(dst + (size_t)(u0 + u) * BW_TOK + t0), r[u]);
        }
    }
}

static inline void kernel_bf16_of(int nv, int kc, const void *a_, const unsigned char *const *wrow, size_t k0,
                                  float *ct, int accumulate) {
    const uint32_t *a = a_;
    __m512 acc[BW_ROWS][3];
    __m512bh av[3];
    for (int r = 0; r < BW_ROWS; r++)
        for (int j = 0; j < nv; j++) acc[r][j] = accumulate ? _mm512_loadu_ps(ct + r * BW_TOK + 16 * j) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        for (int j = 0; j < nv; j++) av[j] = (__m512bh)_mm512_loadu_si512((const void *)(a + (size_t)k * BW_TOK + 16 * j));
        for (int r = 0; r < BW_ROWS; r++) {
            uint32_t pair;
            memcpy(&pair, wrow[r] + 4 * (k0 + (size_t)k), sizeof pair);   /* weights need not be aligned */
            __m512bh wv = (__m512bh)_mm512_set1_epi32((int)pair);
            for (int j = 0; j < nv; j++) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], wv, av[j]);
        }
    }
    for (int r = 0; r < BW_ROWS; r++)
        for (int j = 0; j < nv; j++) _mm512_storeu_ps(ct + r * BW_TOK + 16 * j, acc[r][j]);
}

static void kernel_bf16(int nv, int kc, const void *a, const unsigned char *const *w, size_t k0, float *ct, int acc) {
    if (nv == 3) kernel_bf16_of(3, kc, a, w, k0, ct, acc);
    else if (nv == 2) kernel_bf16_of(2, kc, a, w, k0, ct, acc);
    else kernel_bf16_of(1, kc, a, w, k0, ct, acc);
}

/* An odd K leaves one column outside the pairs: its products, in the same bf16 terms. */
static void add_last_column(float *out, const float *x, const Matrix *w, int T) {
    int K = w->cols, N = w->rows;
    for (int t = 0; t < T; t++) {
        float xl = bf16_to_f32(f32_to_bf16(x[(size_t)t * K + K - 1]));
        for (int r = 0; r < N; r++) {
            uint16_t h;
            memcpy(&h, (const uint16_t *)w->data + (size_t)r * K + K - 1, sizeof h);
            out[(size_t)t * N + r] += xl * bf16_to_f32(h);
        }
    }
}

#endif

/* ---- several matrices on one input ---- */

/* x packed into apack for the GEMM kernels: bf16 pairs (bf16_act) or floats, with the kernel
 * for w's dtype. */
static PackedActivations pack_for(const Matrix *w, const float *x, int T, int bf16_act, void *apack) {
    int K = w->cols;
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    if (bf16_act) {
        pack_activations_bf16(x, T, K, apack);
        return (PackedActivations){kernel_bf16, apack, K / 2, T};
    }
#else
    (void)bf16_act;
#endif
    pack_activations_f32(x, T, K, apack);
    BroadcastKernel kern = w->dtype == DT_BF16  ? kernel_f32_bf16w
                           : w->dtype == DT_F16 ? kernel_f32_f16w
                                                : kernel_f32_f32w;
    return (PackedActivations){kern, apack, K, T};
}

/* The weight-row groups of all n matrices against packed activations, in one parallel loop
 * (one fork/join instead of n). */
static void run_groups(const PackedActivations *a, int n, float *const *outs, const Matrix *const *ws, int add) {
    int T = a->T;
    int first[GEMV_MANY_MAX + 1];   /* matrix m owns groups first[m] .. first[m+1]-1 */
    double work = 0;
    first[0] = 0;
    for (int m = 0; m < n; m++) {
        first[m + 1] = first[m] + (ws[m]->rows + BW_GROUP - 1) / BW_GROUP;
        work += (double)ws[m]->rows * a->units * T;
    }
    /* Work items are (group, strip) pairs (see group_strips). Each thread takes a contiguous
     * run of them, a group's worth at a time, and helps at the other's front when done
     * (model/kernels/worksplit.h). A static split of whole groups left one core idle whenever the
     * other ran slower, and for up to a group at the end of each call. */
    WorkSplit split;
    int n_strips = (T + BW_TOK - 1) / BW_TOK;
    work_split_init(&split, (long long)first[n] * n_strips, work_split_threads(work, PARALLEL_MIN_WORK), n_strips);
    #pragma omp parallel num_threads(split.n_runs)
    {
        long long i0, i1;
        while (work_split_next(&split, work_split_thread_index(), &i0, &i1))
            for (long long i = i0; i < i1;) {
                int g, s0, s1, m = 0;
                i += group_strips(i, i1, n_strips, &g, &s0, &s1);
                while (g >= first[m + 1]) m++;
                gemm_group(a, ws[m], (g - first[m]) * BW_GROUP, s0, s1, outs[m], add);
            }
    }
}

/* GEMM: the activations packed once for all n matrices. */
void gemm_many_avx512(int n, float *const *outs, const Matrix *const *ws, const float *x, int T, int bf16_act,
                      int add, void *scratch) {
    PackedActivations a = pack_for(ws[0], x, T, bf16_act, scratch);
    run_groups(&a, n, outs, ws, add);
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    if (bf16_act && ws[0]->cols % 2)
        for (int m = 0; m < n; m++) add_last_column(outs[m], x, ws[m], T);
#endif
}

/* ---- the SwiGLU MLP: gate and up straight into down's packed input ---- */

/* Hidden units h0..h0+BW_GROUP-1 of every strip: gate and up tiles, h = silu(gate) * up, stored
 * where down's packed input keeps them (hpack: strips of hidden floats, or hidden / 2 bf16
 * pairs (h, h + 1), by 48 tokens). A tile's rows are hidden units and its columns tokens,
 * which is already the packed layout, so nothing is transposed. */
static void mlp_group(const PackedActivations *a, const Matrix *gate, const Matrix *up, int h0, int s0, int s1,
                      int bf16_act, void *hpack) {
    int hidden = gate->rows, T = a->T, units = a->units;
    _Alignas(64) float g[BW_GROUP * BW_TOK], u[BW_GROUP * BW_TOK];
    const unsigned char *grow[BW_GROUP], *urow[BW_GROUP];
    int rows = group_rows(gate, h0, grow);
    group_rows(up, h0, urow);
    memset(g, 0, sizeof g);   /* token columns a short last strip leaves alone stay defined */
    memset(u, 0, sizeof u);
    for (int s = s0; s < s1; s++) {
        const unsigned char *as = (const unsigned char *)a->data + (size_t)s * units * BW_TOK * 4;
        int nv = (min_int(T - s * BW_TOK, BW_TOK) + 15) / 16;
        strip_tile(a->kern, as, units, grow, rows, nv, g);
        strip_tile(a->kern, as, units, urow, rows, nv, u);
        swiglu(g, u, (size_t)rows * BW_TOK);
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
        if (bf16_act) {   /* rows r, r + 1 -> one row of pairs, rounded as pack_activations_bf16 does */
            uint32_t *dst = (uint32_t *)hpack + ((size_t)s * (hidden / 2) + h0 / 2) * BW_TOK;
            for (int r = 0; r < rows; r += 2)
                for (int j = 0; j < nv; j++)
                    _mm512_storeu_si512((void *)(dst + (size_t)r / 2 * BW_TOK + 16 * j),
                                        bf16_pairs_of(_mm512_load_ps(g + r * BW_TOK + 16 * j),
                                                      _mm512_load_ps(g + (r + 1) * BW_TOK + 16 * j)));
            continue;
        }
#else
        (void)bf16_act;
#endif
        memcpy((float *)hpack + ((size_t)s * hidden + h0) * BW_TOK, g, (size_t)rows * BW_TOK * sizeof(float));
    }
}

void mlp_avx512(float *out, const SwigluWeights *w, const float *x, int T, int bf16_act, int add, void *scratch) {
    const Matrix *gate = w->gate, *up = w->up;
    int hidden = gate->rows, n_strips = (T + BW_TOK - 1) / BW_TOK, groups = (hidden + BW_GROUP - 1) / BW_GROUP;
    void *hpack = scratch;   /* down's packed input first, then x packed */
    void *apack = (unsigned char *)scratch + ((size_t)n_strips * BW_TOK * hidden * 4 + 63) / 64 * 64;
    PackedActivations a = pack_for(gate, x, T, bf16_act, apack);
    double work = 2.0 * hidden * a.units * T;
    WorkSplit split;   /* (group, strip) items, as in run_groups */
    work_split_init(&split, (long long)groups * n_strips, work_split_threads(work, PARALLEL_MIN_WORK), n_strips);
    #pragma omp parallel num_threads(split.n_runs)
    {
        long long i0, i1;
        while (work_split_next(&split, work_split_thread_index(), &i0, &i1))
            for (long long i = i0; i < i1;) {
                int g, s0, s1;
                i += group_strips(i, i1, n_strips, &g, &s0, &s1);
                mlp_group(&a, gate, up, g * BW_GROUP, s0, s1, bf16_act, hpack);
            }
    }
    const PackedActivations h = {a.kern, hpack, bf16_act ? hidden / 2 : hidden, T};
    run_groups(&h, 1, &out, &w->down, add);
}

/* GEMV (decode): */

/* Row block b of the n matrices (matrix m owns blocks first[m] .. first[m+1]-1). */
static void gemv_one_block(float *const *outs, const Matrix *const *ws, const float *x, int T, int bf16_act,
                           void *scratch, const int *first, int b) {
    int m = 0;
    while (b >= first[m + 1]) m++;
    int r0 = (b - first[m]) * GEMV_BLOCK_ROWS, nr = min_int(ws[m]->rows - r0, GEMV_BLOCK_ROWS);
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    if (bf16_act) {
        gemv_bf16_block(outs[m], scratch, ws[m], T, r0, nr);
        return;
    }
#endif
    (void)bf16_act;
    (void)scratch;
    gemv_exact_block(outs[m], x, ws[m], T, r0, nr);
}

void gemv_many_avx512(int n, float *const *outs, const Matrix *const *ws, const float *x, int T, int bf16_act,
                      void *scratch) {
    int first[GEMV_MANY_MAX + 1];   /* matrix m owns row blocks first[m] .. first[m+1]-1 */
    double work = 0;
    first[0] = 0;
    for (int m = 0; m < n; m++) {
        first[m + 1] = first[m] + (ws[m]->rows + GEMV_BLOCK_ROWS - 1) / GEMV_BLOCK_ROWS;
        work += (double)ws[m]->rows * ws[m]->cols * T;
    }
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    if (bf16_act) activations_to_bf16(x, T, ws[0]->cols, scratch);   /* once for all n */
#endif
    /* each thread streams its own contiguous run of row blocks (one sequential stream for the
     * prefetcher), 8 blocks a claim, fewer near the end, and helps the other when done
     * (model/kernels/worksplit.h): static halves left a thread waiting at the end of each call. */
    WorkSplit split;
    work_split_init(&split, first[n], work_split_threads(work, PARALLEL_MIN_WORK), 8);
    #pragma omp parallel num_threads(split.n_runs)
    {
        long long b0, b1;
        while (work_split_next(&split, work_split_thread_index(), &b0, &b1))
            for (long long b = b0; b < b1; b++) gemv_one_block(outs, ws, x, T, bf16_act, scratch, first, (int)b);
    }
}
/* ---- one matrix: the n = 1 case of the above ---- */

void matmul_avx512(float *out, const float *x, const Matrix *w, int T, void *scratch) {
    if (T < GEMV_MAX_T) gemv_many_avx512(1, &out, &w, x, T, 0, scratch);
    else gemm_many_avx512(1, &out, &w, x, T, 0, 0, scratch);
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
void matmul_avx512_bf16(float *out, const float *x, const Matrix *w, int T, void *scratch) {
    if (T < GEMV_MAX_T) gemv_many_avx512(1, &out, &w, x, T, 1, scratch);
    else gemm_many_avx512(1, &out, &w, x, T, 1, 0, scratch);
}
#endif
#endif
