/* eval/bench_probe.c: the machine's own peaks, so that every bench figure can say what
 * fraction of this machine it uses: f32 FMA and bf16 dot-product throughput on every
 * thread, the memory read bandwidth, and the process's peak RSS.
 *
 * The compute probes keep their accumulators in registers: independent chains of
 * fused multiply-adds, enough of them to hide the FMA latency on every pipe, and few
 * enough to fit the register file. An accumulator array larger than the registers is
 * kept on the stack, and the loop then runs at the rate of its stores: on Zen 3 a loop over
 * 256 floats read 90 GFLOP/s, where this one reads 184-200 and the units do 200. */
#include "eval/bench.h"
#include "eval/progress.h"
#include "model/kernels/gemm.h"   /* amx_configure_tiles */
#include "model/kernels/kernels.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)) || defined(__SSE2__)
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

int bench_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Independent accumulators per thread: latency (4-5 cycles) times FMA pipes (2 on x86,
 * up to 4 on Arm) is at most 16, and 16 vectors leave room in every register file the
 * paths below use (32 zmm, 16 ymm minus the two operands: 12 there, 32 NEON q). */
#if defined(__AVX512F__)
#define FMA_CHAINS 16
#define FMA_LANES 16
typedef __m512 FmaVec;
static FmaVec vec_set(float x) { return _mm512_set1_ps(x); }
static FmaVec vec_fma(FmaVec a, FmaVec b, FmaVec c) { return _mm512_fmadd_ps(a, b, c); }
static float vec_sum(FmaVec a) { return _mm512_reduce_add_ps(a); }
#elif defined(__AVX2__) && defined(__FMA__)
#define FMA_CHAINS 12
#define FMA_LANES 8
typedef __m256 FmaVec;
static FmaVec vec_set(float x) { return _mm256_set1_ps(x); }
static FmaVec vec_fma(FmaVec a, FmaVec b, FmaVec c) { return _mm256_fmadd_ps(a, b, c); }
static float vec_sum(FmaVec a) {
    float v[8];
    _mm256_storeu_ps(v, a);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define FMA_CHAINS 16
#define FMA_LANES 4
typedef float32x4_t FmaVec;
static FmaVec vec_set(float x) { return vdupq_n_f32(x); }
static FmaVec vec_fma(FmaVec a, FmaVec b, FmaVec c) { return vfmaq_f32(c, a, b); }
static float vec_sum(FmaVec a) { return vaddvq_f32(a); }
#elif defined(__SSE2__)
/* x86-64 without AVX2 and FMA (a KVQ_PORTABLE build): the plain-C kernels compile to
 * SSE's 4 lanes, a multiply then an add, so the peak is measured the same way. */
#define FMA_CHAINS 12
#define FMA_LANES 4
typedef __m128 FmaVec;
static FmaVec vec_set(float x) { return _mm_set1_ps(x); }
static FmaVec vec_fma(FmaVec a, FmaVec b, FmaVec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
static float vec_sum(FmaVec a) {
    float v[4];
    _mm_storeu_ps(v, a);
    return v[0] + v[1] + v[2] + v[3];
}
#else
/* Anything else: scalar chains (fmaf would be a library call where the CPU has no FMA). */
#define FMA_CHAINS 12
#define FMA_LANES 1
typedef float FmaVec;
static FmaVec vec_set(float x) { return x; }
static FmaVec vec_fma(FmaVec a, FmaVec b, FmaVec c) { return a * b + c; }
static float vec_sum(FmaVec a) { return a; }
#endif

/* acc = acc * 0.999999 + 1e-7 on every chain: the values settle near 0.1 and never
 * reach denormals or infinities, which some cores handle slowly. */
static double fma_loop(long iters) {
    FmaVec acc[FMA_CHAINS], mul = vec_set(0.999999f), add = vec_set(1e-7f);
    for (int i = 0; i < FMA_CHAINS; i++) acc[i] = vec_set((float)i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < FMA_CHAINS; i++) acc[i] = vec_fma(acc[i], mul, add);
    double s = 0;
    for (int i = 0; i < FMA_CHAINS; i++) s += vec_sum(acc[i]);
    return s;
}

/* Best of three timed runs of loop on every thread: GFLOP/s at flops_per_iter each. */
static double best_gflops(double (*loop)(long), long iters, double flops_per_iter) {
    double best = 0, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = seconds_now();
        #pragma omp parallel reduction(+ : sink)
        sink += loop(iters);
        double dt = seconds_now() - t0;
        double gf = flops_per_iter * (double)iters * bench_threads() / dt * 1e-9;
        if (gf > best) best = gf;
    }
    return sink == 12345.0 ? 0 : best;   /* keeps the loop from being optimized away */
}

double bench_probe_fma_gflops(void) {
    /* An iteration is FMA_CHAINS / 2 cycles on two pipes: ~0.1 s per run at 3 GHz. */
    return best_gflops(fma_loop, 40000000, 2.0 * FMA_CHAINS * FMA_LANES);
}

#if defined(__AVX512BF16__)
/* 16 accumulators of vdpbf16ps, each 32 bf16 products summed into 16 floats. */
static double bf16_loop(long iters) {
    __m512 acc[16];
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33803380);
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 16; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}
#endif

double bench_probe_bf16_gflops(void) {
#if defined(__AVX512BF16__)
    return best_gflops(bf16_loop, 400000, 2.0 * 16 * 32);
#else
    return 0;
#endif
}

#if defined(KVQ_AMX)
/* Six tiles of sums, each gaining a 16 x 32 by 32 x 16 bf16 product (TDPBF16PS) per
 * iteration from the same two operand tiles: six chains hide the instruction's latency. The
 * tile shapes are thread state (gemm_amx.c's: 16 rows of 64 bytes), set on every thread. */
static double amx_loop(long iters) {
    amx_configure_tiles();
    uint16_t ones[16 * 32];   /* 2^-12 in bf16: sums stay far from overflow */
    for (int i = 0; i < 16 * 32; i++) ones[i] = 0x3980;
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 6, 7);
        _tile_dpbf16ps(1, 6, 7);
        _tile_dpbf16ps(2, 6, 7);
        _tile_dpbf16ps(3, 6, 7);
        _tile_dpbf16ps(4, 6, 7);
        _tile_dpbf16ps(5, 6, 7);
    }
    float sums[16 * 16];
    _tile_stored(0, sums, 64);
    _tile_release();
    return sums[0];
}
#endif

double bench_probe_amx_gflops(void) {
#if defined(KVQ_AMX)
    if (!kernel_available(KERNEL_AMX_BF16, DT_BF16)) return 0;   /* asks the OS for the tiles */
    return best_gflops(amx_loop, 200000, 6 * 2.0 * 16 * 16 * 32);
#else
    return 0;
#endif
}

/* A read pass over 512 MiB (16x a large L3) on every thread: what streaming the
 * weights from memory can reach. */
double bench_probe_read_gbytes(void) {
    size_t n = (size_t)512 << 20 >> 2;   /* 512 MiB of uint32 */
    uint32_t *buf = malloc(n * sizeof *buf);
    if (!buf) return -1;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (uint32_t)i;
    double best = 0;
    uint32_t sink = 0;
    for (int rep = 0; rep < 4; rep++) {
        uint32_t sum = 0;
        double t0 = seconds_now();
        #pragma omp parallel for schedule(static) reduction(+ : sum)
        for (size_t i = 0; i < n; i++) sum += buf[i];
        double dt = seconds_now() - t0;
        sink += sum;
        double gb = (double)n * sizeof *buf / dt * 1e-9;
        if (gb > best) best = gb;
    }
    free(buf);
    return sink == 12345u ? best + 1e-9 : best;
}

double bench_peak_rss_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (double)ru.ru_maxrss / 1024.0;   /* Linux reports KiB */
}
