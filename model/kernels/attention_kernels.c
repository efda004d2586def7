/* model/kernels/attention_kernels.c: the inner loops of attention (model/attention.c) over blocks of
 * 64 cache rows: scores of queries against keys stored transposed, weighted sums of value
 * rows, in f32 or in bf16 pairs. Plain C for every loop, with AVX-512 versions (and AVX2 ones
 * of the f32 loops) that tests/test_kernels.c checks against it. (Quantized rows come decoded
 * by their codec: quant/codec.h, decode and decode_t64.) */
#include "model/kernels/attention_kernels.h"
#include "model/kernels/vector.h"
#include "quant/half.h"
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#include "model/kernels/simd_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include "model/kernels/simd_avx2.h"
#define ATTENTION_AVX2 1
#endif

#if defined(__AVX512F__)
/* acc[u] += s * v_u for the four vectors of one 64-float row. */
static inline void fma_row64(__m512 acc[4], __m512 s, __m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    acc[0] = _mm512_fmadd_ps(s, v0, acc[0]);
    acc[1] = _mm512_fmadd_ps(s, v1, acc[1]);
    acc[2] = _mm512_fmadd_ps(s, v2, acc[2]);
    acc[3] = _mm512_fmadd_ps(s, v3, acc[3]);
}

/* acc[0..4) += s * row[0..64). */
static inline void fma_load_row64(__m512 acc[4], float s, const float *row) {
    fma_row64(acc, _mm512_set1_ps(s), _mm512_loadu_ps(row), _mm512_loadu_ps(row + 16), _mm512_loadu_ps(row + 32),
              _mm512_loadu_ps(row + 48));
}

/* out[0..64) = a + b, the two partial sums of the single-query loops below. */
static inline void store_sum64(float *out, const __m512 a[4], const __m512 b[4]) {
    for (int u = 0; u < 4; u++) _mm512_storeu_ps(out + 16 * u, _mm512_add_ps(a[u], b[u]));
}
#endif

#if defined(ATTENTION_AVX2)
/* AVX2 has 16 registers of 8 floats, a quarter of AVX-512's. Four queries go through a row of
 * 64 positions or dims in passes of 24, 24 and 16 columns: a pass of 24 keeps 12 sums in
 * registers, with the 3 vectors of keys or values they share and a broadcast (16 registers),
 * so per step 3 loads and 4 broadcasts feed 12 fmas. Passes of 16 alone (8 sums, 4 fmas per
 * ymm load, as GCC folded each key or value load into every fma that used it) waited on loads
 * and on the fma latency (model/kernels/README.md). One query goes in passes of 16. Every pass adds in the
 * same order as the plain loops (one fma per term, in order of d or p), so its results are the
 * plain loops' bit for bit. Rows of 16 are simd_avx2.h's Row16; Row24 is the same for 24. */
typedef struct {
    __m256 lo, mid, hi;
} Row24;

/* As row16_load: kept in registers. */
static inline Row24 row24_load(const float *x) {
    Row24 r = {_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16)};
    __asm__("" : "+x"(r.lo), "+x"(r.mid), "+x"(r.hi));
    return r;
}

static inline void row24_store(float *x, Row24 r) {
    _mm256_storeu_ps(x, r.lo);
    _mm256_storeu_ps(x + 8, r.mid);
    _mm256_storeu_ps(x + 16, r.hi);
}

/* r += *s * x */
static inline Row24 row24_fma(Row24 r, const float *s, Row24 x) {
    __m256 b = _mm256_broadcast_ss(s);
    return (Row24){_mm256_fmadd_ps(b, x.lo, r.lo), _mm256_fmadd_ps(b, x.mid, r.mid), _mm256_fmadd_ps(b, x.hi, r.hi)};
}

/* Scores: acc[j][p0 + 0..width) = sum_d q[j][d] * kt[d * DOT_T_WIDTH + p0 + .], for four
 * queries (width 24 or 16) or one (width 16). */
static void dot_transposed24_x4_avx2(const float *const *q, const float *kt, int hd, int p0, float *const *acc) {
    Row24 r0 = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}, r1 = r0, r2 = r0, r3 = r0;
    for (int d = 0; d < hd; d++) {
        Row24 k = row24_load(kt + (size_t)d * DOT_T_WIDTH + p0);
        r0 = row24_fma(r0, q[0] + d, k);
        r1 = row24_fma(r1, q[1] + d, k);
        r2 = row24_fma(r2, q[2] + d, k);
        r3 = row24_fma(r3, q[3] + d, k);
    }
    row24_store(acc[0] + p0, r0);
    row24_store(acc[1] + p0, r1);
    row24_store(acc[2] + p0, r2);
    row24_store(acc[3] + p0, r3);
}

static void dot_transposed16_x4_avx2(const float *const *q, const float *kt, int hd, int p0, float *const *acc) {
    Row16 r0 = {_mm256_setzero_ps(), _mm256_setzero_ps()}, r1 = r0, r2 = r0, r3 = r0;
    for (int d = 0; d < hd; d++) {
        Row16 k = row16_load(kt + (size_t)d * DOT_T_WIDTH + p0);
        r0 = row16_fma(r0, q[0] + d, k);
        r1 = row16_fma(r1, q[1] + d, k);
        r2 = row16_fma(r2, q[2] + d, k);
        r3 = row16_fma(r3, q[3] + d, k);
    }
    row16_store(acc[0] + p0, r0);
    row16_store(acc[1] + p0, r1);
    row16_store(acc[2] + p0, r2);
    row16_store(acc[3] + p0, r3);
}

static void dot_transposed16_avx2(const float *q, const float *kt, int hd, int p0, float *acc) {
    Row16 r = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int d = 0; d < hd; d++) r = row16_fma(r, q + d, row16_load(kt + (size_t)d * DOT_T_WIDTH + p0));
    row16_store(acc + p0, r);
}

/* Weighted values: out[j][d0 + 0..width) += sum_p w[j][p] * v[p * hd + d0 + .], likewise. */
static void add_weighted24_x4_avx2(float *const *out, const float *const *w, const float *v, int n, int hd, int d0) {
    Row24 r0 = row24_load(out[0] + d0), r1 = row24_load(out[1] + d0);
    Row24 r2 = row24_load(out[2] + d0), r3 = row24_load(out[3] + d0);
    for (int p = 0; p < n; p++) {
        Row24 x = row24_load(v + (size_t)p * hd + d0);
        r0 = row24_fma(r0, w[0] + p, x);
        r1 = row24_fma(r1, w[1] + p, x);
        r2 = row24_fma(r2, w[2] + p, x);
        r3 = row24_fma(r3, w[3] + p, x);
    }
    row24_store(out[0] + d0, r0);
    row24_store(out[1] + d0, r1);
    row24_store(out[2] + d0, r2);
    row24_store(out[3] + d0, r3);
}

static void add_weighted16_x4_avx2(float *const *out, const float *const *w, const float *v, int n, int hd, int d0) {
    Row16 r0 = row16_load(out[0] + d0), r1 = row16_load(out[1] + d0);
    Row16 r2 = row16_load(out[2] + d0), r3 = row16_load(out[3] + d0);
    for (int p = 0; p < n; p++) {
        Row16 x = row16_load(v + (size_t)p * hd + d0);
        r0 = row16_fma(r0, w[0] + p, x);
        r1 = row16_fma(r1, w[1] + p, x);
        r2 = row16_fma(r2, w[2] + p, x);
        r3 = row16_fma(r3, w[3] + p, x);
    }
    row16_store(out[0] + d0, r0);
    row16_store(out[1] + d0, r1);
    row16_store(out[2] + d0, r2);
    row16_store(out[3] + d0, r3);
}

static void add_weighted16_avx2(float *out, const float *w, const float *v, int n, int hd, int d0) {
    Row16 r = row16_load(out + d0);
    for (int p = 0; p < n; p++) r = row16_fma(r, w + p, row16_load(v + (size_t)p * hd + d0));
    row16_store(out + d0, r);
}
#endif

void dot_transposed64(const float *q, const float *kt, int hd, float *acc) {
#if defined(__AVX512F__)
    /* even and odd d in separate sums (a, b): eight independent chains of fmas keep both
     * FMA units busy, where four would wait on the fma latency */
    __m512 a[4], b[4];
    for (int u = 0; u < 4; u++) a[u] = b[u] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 2 <= hd; d += 2) {
        fma_load_row64(a, q[d], kt + (size_t)d * DOT_T_WIDTH);
        fma_load_row64(b, q[d + 1], kt + (size_t)(d + 1) * DOT_T_WIDTH);
    }
    if (d < hd) fma_load_row64(a, q[d], kt + (size_t)d * DOT_T_WIDTH);
    store_sum64(acc, a, b);
#elif defined(ATTENTION_AVX2)
    for (int p0 = 0; p0 < DOT_T_WIDTH; p0 += 16) dot_transposed16_avx2(q, kt, hd, p0, acc);
#else
    /* four components per pass over acc, which lives in memory: a quarter of its traffic */
    for (int p = 0; p < DOT_T_WIDTH; p++) acc[p] = 0.0f;
    int d = 0;
    for (; d + 4 <= hd; d += 4) {
        const float *r0 = kt + (size_t)d * DOT_T_WIDTH, *r1 = r0 + DOT_T_WIDTH;
        const float *r2 = r1 + DOT_T_WIDTH, *r3 = r2 + DOT_T_WIDTH;
        for (int p = 0; p < DOT_T_WIDTH; p++)
            acc[p] = mul_add(q[d + 3], r3[p], mul_add(q[d + 2], r2[p], mul_add(q[d + 1], r1[p], mul_add(q[d], r0[p], acc[p]))));
    }
    for (; d < hd; d++)
        for (int p = 0; p < DOT_T_WIDTH; p++) acc[p] = mul_add(q[d], kt[(size_t)d * DOT_T_WIDTH + p], acc[p]);
#endif
}

void add_weighted_rows(float *out, const float *w, const float *v, int n, int hd) {
    int d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 64 <= hd; d0 += 64) {
        /* 64 outputs in registers across all n rows; even and odd rows in separate sums
         * (a, b) so that eight independent fma chains keep both FMA units busy */
        __m512 a[4], b[4];
        for (int u = 0; u < 4; u++) {
            a[u] = _mm512_loadu_ps(out + d0 + 16 * u);
            b[u] = _mm512_setzero_ps();
        }
        int p = 0;
        for (; p + 2 <= n; p += 2) {
            fma_load_row64(a, w[p], v + (size_t)p * hd + d0);
            fma_load_row64(b, w[p + 1], v + (size_t)(p + 1) * hd + d0);
        }
        if (p < n) fma_load_row64(a, w[p], v + (size_t)p * hd + d0);
        store_sum64(out + d0, a, b);
    }
#elif defined(ATTENTION_AVX2)
    for (; d0 + 16 <= hd; d0 += 16) add_weighted16_avx2(out, w, v, n, hd, d0);
#endif
    /* four rows per pass over out: the same sums with a quarter of its loads and stores */
    int p = 0;
    for (; p + 4 <= n; p += 4) {
        const float *v0 = v + (size_t)p * hd, *v1 = v0 + hd, *v2 = v1 + hd, *v3 = v2 + hd;
        for (int d = d0; d < hd; d++)
            out[d] = mul_add(w[p + 3], v3[d], mul_add(w[p + 2], v2[d], mul_add(w[p + 1], v1[d], mul_add(w[p], v0[d], out[d]))));
    }
    for (; p < n; p++)
        for (int d = d0; d < hd; d++) out[d] = mul_add(w[p], v[(size_t)p * hd + d], out[d]);
}

void dot_transposed64_x4(const float *const q[4], const float *kt, int hd, float *const acc[4]) {
#if defined(__AVX512F__)
    /* 16 sums: four queries x the 64 positions (four vectors). Per d, four loads of keys and
     * four broadcasts feed sixteen fmas in independent chains. */
    __m512 a[4][4];
    for (int j = 0; j < 4; j++)
        for (int u = 0; u < 4; u++) a[j][u] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const float *row = kt + (size_t)d * DOT_T_WIDTH;
        __m512 k0 = _mm512_loadu_ps(row), k1 = _mm512_loadu_ps(row + 16);
        __m512 k2 = _mm512_loadu_ps(row + 32), k3 = _mm512_loadu_ps(row + 48);
        keep_in_registers(&k0, &k1, &k2, &k3);
        for (int j = 0; j < 4; j++) fma_row64(a[j], _mm512_set1_ps(q[j][d]), k0, k1, k2, k3);
    }
    for (int j = 0; j < 4; j++)
        for (int u = 0; u < 4; u++) _mm512_storeu_ps(acc[j] + 16 * u, a[j][u]);
#elif defined(ATTENTION_AVX2)
    dot_transposed24_x4_avx2(q, kt, hd, 0, acc);
    dot_transposed24_x4_avx2(q, kt, hd, 24, acc);
    dot_transposed16_x4_avx2(q, kt, hd, 48, acc);
#else
    for (int j = 0; j < 4; j++) dot_transposed64(q[j], kt, hd, acc[j]);
#endif
}

void add_weighted_rows_x4(float *const out[4], const float *const w[4], const float *v, int n, int hd) {
    int d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 64 <= hd; d0 += 64) {
        /* 16 sums: four outputs x 64 dims, in order of p as add_weighted_rows' plain loop */
        __m512 a[4][4];
        for (int j = 0; j < 4; j++)
            for (int u = 0; u < 4; u++) a[j][u] = _mm512_loadu_ps(out[j] + d0 + 16 * u);
        for (int p = 0; p < n; p++) {
            const float *vp = v + (size_t)p * hd + d0;
            __m512 v0 = _mm512_loadu_ps(vp), v1 = _mm512_loadu_ps(vp + 16);
            __m512 v2 = _mm512_loadu_ps(vp + 32), v3 = _mm512_loadu_ps(vp + 48);
            keep_in_registers(&v0, &v1, &v2, &v3);
            for (int j = 0; j < 4; j++) fma_row64(a[j], _mm512_set1_ps(w[j][p]), v0, v1, v2, v3);
        }
        for (int j = 0; j < 4; j++)
            for (int u = 0; u < 4; u++) _mm512_storeu_ps(out[j] + d0 + 16 * u, a[j][u]);
    }
#elif defined(ATTENTION_AVX2)
    for (; d0 + 24 <= hd; d0 += 24) add_weighted24_x4_avx2(out, w, v, n, hd, d0);
    for (; d0 + 16 <= hd; d0 += 16) add_weighted16_x4_avx2(out, w, v, n, hd, d0);
#endif
    if (d0 < hd)   /* dims the vector loop did not cover, one query at a time */
        for (int j = 0; j < 4; j++)
            for (int p = 0; p < n; p++)
                for (int d = d0; d < hd; d++) out[j][d] = mul_add(w[j][p], v[(size_t)p * hd + d], out[j][d]);
}

/* ---- attention in bf16 pairs (vdpbf16ps) ---- */
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
void bf16_pair_rows(const float *x, int n, int width, uint32_t *out) {
    for (int k = 0; 2 * k < n; k++) {
        const float *a = x + (size_t)2 * k * width, *b = a + width;
        for (int i = 0; i < width; i += 16)
            _mm512_storeu_si512((void *)(out + (size_t)k * width + i),
                                bf16_pairs_of(_mm512_loadu_ps(a + i), 2 * k + 1 < n ? _mm512_loadu_ps(b + i) : _mm512_setzero_ps()));
    }
}

void bf16_pairs_along(const float *x, int n, uint32_t *out) {
    for (int i = 0; i < n; i += 32) {
        int left = n - i < 32 ? n - i : 32;
        _mm512_mask_storeu_epi32(out + i / 2, (__mmask16)((1u << (left + 1) / 2) - 1), load_bf16_pairs(x + i, left));
    }
}

/* The four vectors of pairs in row[0..64), kept in registers (see keep_in_registers). */
static inline void load_pairs64(const uint32_t *row, __m512 v[4]) {
    for (int u = 0; u < 4; u++) v[u] = _mm512_castsi512_ps(_mm512_loadu_si512((const void *)(row + 16 * u)));
    keep_in_registers(&v[0], &v[1], &v[2], &v[3]);
}

/* acc[u] += v[u] . (pair p in every lane): vdpbf16ps on one row of four vectors. */
static inline void dot_pair_row64(__m512 acc[4], uint32_t p, const __m512 v[4]) {
    __m512bh b = (__m512bh)_mm512_set1_epi32((int)p);
    for (int u = 0; u < 4; u++) acc[u] = _mm512_dpbf16_ps(acc[u], (__m512bh)v[u], b);
}

/* dot_pairs64 for a constant nq, so that the sums stay in registers. */
static inline void dot_pairs64_of(int nq, const uint32_t *const q[4], const uint32_t *kt, int units, float *const acc[4]) {
    __m512 a[4][4], k[4];
    for (int j = 0; j < nq; j++)
        for (int u = 0; u < 4; u++) a[j][u] = _mm512_setzero_ps();
    for (int i = 0; i < units; i++) {
        load_pairs64(kt + (size_t)i * DOT_T_WIDTH, k);
        for (int j = 0; j < nq; j++) dot_pair_row64(a[j], q[j][i], k);
    }
    for (int j = 0; j < nq; j++)
        for (int u = 0; u < 4; u++) _mm512_storeu_ps(acc[j] + 16 * u, a[j][u]);
}

void dot_pairs64(int nq, const uint32_t *const q[4], const uint32_t *kt, int units, float *const acc[4]) {
    if (nq == 4) dot_pairs64_of(4, q, kt, units, acc);
    else for (int j = 0; j < nq; j++) dot_pairs64_of(1, q + j, kt, units, acc + j);
}

/* add_weighted_pairs for a constant nq. */
static inline void add_weighted_pairs_of(int nq, float *const out[4], const uint32_t *const w[4], const uint32_t *v,
                                         int n_pairs, int hd) {
    for (int d0 = 0; d0 + 64 <= hd; d0 += 64) {
        __m512 a[4][4], vk[4];
        for (int j = 0; j < nq; j++)
            for (int u = 0; u < 4; u++) a[j][u] = _mm512_loadu_ps(out[j] + d0 + 16 * u);
        for (int k = 0; k < n_pairs; k++) {
            load_pairs64(v + (size_t)k * hd + d0, vk);
            for (int j = 0; j < nq; j++) dot_pair_row64(a[j], w[j][k], vk);
        }
        for (int j = 0; j < nq; j++)
            for (int u = 0; u < 4; u++) _mm512_storeu_ps(out[j] + d0 + 16 * u, a[j][u]);
    }
}

void add_weighted_pairs(int nq, float *const out[4], const uint32_t *const w[4], const uint32_t *v, int n_pairs, int hd) {
    if (nq == 4) add_weighted_pairs_of(4, out, w, v, n_pairs, hd);
    else for (int j = 0; j < nq; j++) add_weighted_pairs_of(1, out + j, w + j, v, n_pairs, hd);
}
#else
/* Plain C: the same products (exact in f32: bf16 x bf16), summed in f32. */
void bf16_pair_rows(const float *x, int n, int width, uint32_t *out) {
    for (int k = 0; 2 * k < n; k++)
        for (int c = 0; c < width; c++) {
            uint32_t hi = 2 * k + 1 < n ? f32_to_bf16(x[(size_t)(2 * k + 1) * width + c]) : 0u;
            out[(size_t)k * width + c] = f32_to_bf16(x[(size_t)2 * k * width + c]) | hi << 16;
        }
}

void bf16_pairs_along(const float *x, int n, uint32_t *out) {
    for (int i = 0; 2 * i < n; i++) {
        uint32_t lo = f32_to_bf16(x[2 * i]), hi = 2 * i + 1 < n ? f32_to_bf16(x[2 * i + 1]) : 0u;
        out[i] = lo | hi << 16;   /* x[2i], x[2i+1] are read before out[i] (which may be them) is written */
    }
}

void dot_pairs64(int nq, const uint32_t *const q[4], const uint32_t *kt, int units, float *const acc[4]) {
    for (int j = 0; j < nq; j++)
        for (int p = 0; p < DOT_T_WIDTH; p++) {
            float sum = 0.0f;
            for (int i = 0; i < units; i++) sum += bf16_pair_dot(q[j][i], kt[(size_t)i * DOT_T_WIDTH + p]);
            acc[j][p] = sum;
        }
}

void add_weighted_pairs(int nq, float *const out[4], const uint32_t *const w[4], const uint32_t *v, int n_pairs, int hd) {
    for (int j = 0; j < nq; j++)
        for (int k = 0; k < n_pairs; k++)
            for (int d = 0; d < hd; d++) out[j][d] += bf16_pair_dot(w[j][k], v[(size_t)k * hd + d]);
}
#endif

/* ---- attention on cache rows ---- */

void transpose_keys64(const float *k, int n, int hd, float *kt) {
    int d0 = 0;
#if defined(__AVX512F__)
    /* 16 positions x 16 dims at a time through a register transpose: a decode step spends
     * more on this than on its scores when the copy goes one float at a time */
    for (; d0 + 16 <= hd; d0 += 16)
        for (int p0 = 0; p0 < DOT_T_WIDTH; p0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = p0 + i < n ? _mm512_loadu_si512((const void *)(k + (size_t)(p0 + i) * hd + d0)) : _mm512_setzero_si512();
            transpose16_epi32(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512((void *)(kt + (size_t)(d0 + j) * DOT_T_WIDTH + p0), r[j]);
        }
#elif defined(ATTENTION_AVX2)
    /* the same with 8 x 8 blocks */
    for (; d0 + 8 <= hd; d0 += 8)
        for (int p0 = 0; p0 < DOT_T_WIDTH; p0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = p0 + i < n ? _mm256_loadu_ps(k + (size_t)(p0 + i) * hd + d0) : _mm256_setzero_ps();
            transpose8_ps(r);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(kt + (size_t)(d0 + j) * DOT_T_WIDTH + p0, r[j]);
        }
#endif
    for (int d = d0; d < hd; d++)
        for (int p = 0; p < DOT_T_WIDTH; p++) kt[(size_t)d * DOT_T_WIDTH + p] = p < n ? k[(size_t)p * hd + d] : 0.0f;
}

void key_pairs64(const float *k, int n, int hd, uint32_t *kt) {
    int i0 = 0;
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
    /* a key row's 32 dims are 16 pairs in one conversion; 16 rows of them, transposed */
    for (; 2 * i0 + 32 <= hd; i0 += 16)
        for (int p0 = 0; p0 < DOT_T_WIDTH; p0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                const float *row = k + (size_t)(p0 + i) * hd + 2 * i0;
                r[i] = p0 + i < n ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 16), _mm512_loadu_ps(row))
                                  : _mm512_setzero_si512();
            }
            transpose16_epi32(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512((void *)(kt + (size_t)(i0 + j) * DOT_T_WIDTH + p0), r[j]);
        }
#endif
    for (int i = i0; 2 * i < hd; i++)
        for (int p = 0; p < DOT_T_WIDTH; p++) {
            const float *row = k + (size_t)p * hd;
            uint32_t hi = 2 * i + 1 < hd ? f32_to_bf16(row[2 * i + 1]) : 0u;
            kt[(size_t)i * DOT_T_WIDTH + p] = p < n ? f32_to_bf16(row[2 * i]) | hi << 16 : 0u;
        }
}
