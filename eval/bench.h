/* eval/bench.h: how fast the forward pass runs, and how close that is to the machine.
 * Measures prefill (one batched forward of a prompt), decode (one token at a time after it),
 * and decode deep into a long context with an f32 cache and with a quantized one; probes the
 * machine's f32 FMA (and bf16 dot) peak and memory read bandwidth the same way, so every
 * figure comes with its fraction of what this machine can do. */
#ifndef KVQ_BENCH_H
#define KVQ_BENCH_H

#include <stdio.h>
#include "model/model.h"
#include "eval/perplexity.h"
#include "eval/calibration.h"

typedef struct {
    int prompt;                  /* tokens in the prefill batch (-p, 512) */
    int gen;                     /* decode steps measured (-n, 64) */
    int long_ctx;                /* decode measured ending at this context (0: skip) */
    KvCacheFlags kv;             /* cache of the prefill/decode runs: one scheme, for keys and values (fp32),
                                    and --calib, whose tables the long runs' fitted bases take too */
    KvLayered long_k, long_v;    /* keys' and values' schemes compared with fp32 at long_ctx
                                    (int4-g64 for both by default) */
    int repeats;                 /* each figure is the median of this many runs */
    int threads;                 /* 0: OpenMP's default */
    int probe_machine;           /* measure the FMA / bf16 / memory peaks */
    int ppl_windows;             /* > 0: also time the ppl path (HF, ctx long_ctx, stride 512) over this many windows */
    int ppl_batch;               /* its tokens per forward call (ppl's default, 512) */
    int quiet;                   /* no progress lines on stderr */
} BenchOptions;

/* The ppl path's speed: forward-pass positions per second (both runs counted when compared),
 * over the windows after the first (which alone scores every position, as no later one does).
 * Between windows a prefill of -p tokens is timed (and left out of the ppl rate): the ratios
 * compare the two under the same machine conditions, which on a shared machine drift by
 * several percent over the minutes a bench takes. */
typedef struct {
    int ctx, stride, windows, batch;
    double alone, compared;      /* positions/s without and with the fp32 comparison run */
    double prefill_alongside;    /* tokens/s: median of the prefills timed between the windows of
                                    the run without the comparison; its ratio is to this */
    double prefill_alongside_compared;   /* the same during the run with it */
    double scheme_compared;      /* positions/s compared, with the long scheme's cache: what one
                                    configuration of a sweep costs (0: the scheme does not fit) */
    double prefill_alongside_scheme;     /* the prefills during that run */
    double full_positions;       /* of one pass over the WikiText-2 test at this ctx and stride */
} BenchPpl;

/* One timed phase: tokens per second (median over repeats) and what that achieves. */
typedef struct {
    double tok_s, tok_s_min, tok_s_max;
    double gflops;               /* arithmetic per second at the median */
    double gbytes;               /* weight + KV-cache bytes read per second at the median */
    double read_frac;            /* decode: that rate over a read pass of the same weights run right
                                    after each repeat (same memory phase), median; 0 if not probed */
} BenchPhase;

typedef struct {
    char model[256];
    char dtype[8];
    char precision[32];
    int threads;
    int prompt, gen, long_ctx;
    int long_skipped;            /* long_scheme cannot pack this model's head size */
    char scheme[512], long_scheme[1040];   /* long_scheme: "K" or "K / V" */
    double weight_bytes;         /* bytes of weights a decode step reads */
    BenchPhase prefill, decode, long_f32, long_quant;
    BenchPhase prefill_quant;    /* the prefill again with long_scheme's cache (when long_ctx > 0) */
    double cache_bytes_f32, cache_bytes_quant;   /* the two caches of the long runs at long_ctx */
    double peak_f32_gflops;      /* probes; 0 when not measured */
    double peak_bf16_gflops;     /* 0 also when the CPU has no bf16 dot product */
    double peak_amx_gflops;      /* 0 also without AMX tiles */
    double peak_read_gbytes;
    double peak_rss_mib;
    const char *kernel;          /* the matmul path in use */
    BenchPpl ppl;                /* when ppl_windows > 0 */
} BenchResult;

void bench_default_options(BenchOptions *o);

/* Runs every phase on m (its precision decides the matmul path); scheme: o->kv resolved
 * (eval/calibration.h), whose calibration the long runs use too. */
int bench_run(Model *m, const char *model_name, const BenchOptions *o, const KvCacheScheme *scheme, BenchResult *r,
              Error *err);

/* Machine probes, also useful alone. Each uses every OpenMP thread. */
double bench_probe_fma_gflops(void);
double bench_probe_bf16_gflops(void);   /* 0 without AVX-512 BF16 */
double bench_probe_amx_gflops(void);    /* 0 without AMX tiles (or the OS's leave to use them) */
double bench_probe_read_gbytes(void);   /* -1 when out of memory for its 512 MiB buffer */
double bench_peak_rss_mib(void);
int bench_threads(void);              /* the threads every parallel phase uses */

void bench_print_text(FILE *f, const BenchResult *r);
void bench_print_json(FILE *f, const BenchResult *r);

#endif
