/* tests/bench_rans.c: the entropy coder's throughput (issue 53), one core. Not a test (no
 * PASS/FAIL; `make test` does not run it):
 *   make build/rel/tests/bench_rans && build/rel/tests/bench_rans
 * quant/rans.c alone on 2^20 codes of a skewed stream (alphabets 8, 16, 256), and the whole
 * section packer (model/formats/entropy_pack.c: codes gathered per stream, tables, rANS, CRCs) on
 * one int4-g64 and one vq8-d4-shaped tensor of 4 KV heads x 4,096 positions x 64 (tq3 stands in
 * for a 3-bit channel code). MB/s of codes: the codes' fixed-rate bytes over CPU seconds of this
 * thread (the machine is shared). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "model/formats/entropy_pack.h"
#include "quant/rans.h"
#include "tests/test.h"

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void bench_coder(int symbols) {
    size_t n = 1u << 20;
    unsigned short *codes = malloc(n * sizeof *codes), *back = malloc(n * sizeof *back);
    unsigned char *out = malloc(3 * n + 16);
    static unsigned short slots[RANS_TOTAL];
    unsigned counts[RANS_MAX_SYMBOLS] = {0}, freqs[RANS_MAX_SYMBOLS];
    uint64_t seed = 1;
    for (size_t i = 0; i < n; i++) {
        double u = (rnd(&seed) + 1) / 2;
        int s = (int)(u * u * symbols);
        codes[i] = (unsigned short)(s < symbols ? s : symbols - 1);
        counts[codes[i]]++;
    }
    rans_normalize(counts, symbols, freqs);
    size_t len = 0;
    int reps = 5, ok = 1;
    double t0 = cpu_seconds();
    for (int r = 0; r < reps; r++) len = rans_encode(codes, n, freqs, symbols, out, 3 * n + 16);
    double t1 = cpu_seconds();
    for (int r = 0; r < reps; r++) ok &= rans_decode(out, len, freqs, symbols, n, back, slots) == 0;
    double t2 = cpu_seconds(), bits = log2(symbols), mb = (double)n * bits / 8 / 1e6 * reps;
    printf("rans, %4d symbols: %zu codes -> %zu bytes (%.3f bits a code); encode %.0f MB/s of codes (%.0f Mcodes/s), "
           "decode %.0f MB/s (%.0f Mcodes/s)%s\n", symbols, n, len, 8.0 * len / n, mb / (t1 - t0),
           n * reps / 1e6 / (t1 - t0), mb / (t2 - t1), n * reps / 1e6 / (t2 - t1), ok ? "" : " DECODE FAILED");
    free(codes), free(back), free(out);
}

static void bench_sections(const char *name) {
    KvSpec spec;
    char why[160];
    if (kv_spec_parse(name, KV_SIDE_VALUES, &spec, why, sizeof why)) return;
    int n = 64, heads = 4, positions = 4096;
    EntropyShape shape = {heads, (size_t)positions, kv_spec_unit_bytes(&spec, n), n};
    size_t bytes = (size_t)heads * positions * shape.unit_bytes;
    unsigned char *units = malloc(bytes), *back = malloc(bytes), *blob = NULL;
    float row[64], scratch[64];
    uint64_t seed = 3;
    for (size_t u = 0; u < (size_t)heads * positions; u++) {
        for (int i = 0; i < n; i++) row[i] = rnd(&seed) * (1 + (i % 8));
        kv_spec_encode(&spec, row, n, units + u * shape.unit_bytes, scratch);
    }
    EntropyStats st = {0};
    size_t len = 0;
    Error err;
    double t0 = cpu_seconds();
    int ok = entropy_pack(&spec, 0, &shape, units, &blob, &len, &st, &err) == 0;
    double t1 = cpu_seconds();
    ok = ok && entropy_unpack(&spec, 0, &shape, blob, len, back, "bench", &err) == 0 && !memcmp(units, back, bytes);
    double t2 = cpu_seconds(), mb = st.coded_values * spec.base.bits / 8 / 1e6;
    printf("sections, %s: %zu unit bytes -> %zu; pack %.0f MB/s of codes, unpack %.0f MB/s%s\n", name, bytes, len,
           mb / (t1 - t0), mb / (t2 - t1), ok ? "" : " ROUND TRIP FAILED");
    free(units), free(back), free(blob);
}

int main(void) {
    bench_coder(8);
    bench_coder(16);
    bench_coder(256);
    bench_sections("int4-g64");
    bench_sections("tq3");
    return 0;
}
