/* tests/test_rows.h: the seeded rows the llama.cpp block codecs' tests share (test_codec_ggml.c,
 * test_codec_iq4nl.c): an xorshift64 generator whose state the caller owns, uniform values in
 * [-1, 1), a sum of four of them (a bell with no tails), and eight kinds of rows that reach each
 * block type's edge cases. The sequence is the one those tests were written against. */
#ifndef KVQ_TEST_ROWS_H
#define KVQ_TEST_ROWS_H
#include <math.h>
#include <stdint.h>

static inline uint64_t xorshift_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline float xorshift_uniform(uint64_t *s) {
    return (float)((double)(xorshift_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline float xorshift_gaussianish(uint64_t *s) {
    float a = xorshift_uniform(s), b = xorshift_uniform(s), c = xorshift_uniform(s);
    return a + b + c + xorshift_uniform(s);
}

/* Kinds of rows: plain, scaled over many decades, tie-heavy grids, one outlier, constant with a
 * nudge, one-signed, tiny (a block scale an fp16 subnormal), beyond fp16's range. */
static inline void random_row(int kind, float *x, int n, uint64_t *s) {
    float scale = (float)pow(10.0, 6.0 * xorshift_uniform(s));
    int grid = 1 << (xorshift_next(s) % 6);
    for (int i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = xorshift_gaussianish(s); break;
        case 1: x[i] = xorshift_gaussianish(s) * scale; break;
        case 2: {
            float step = (float)((int)(xorshift_next(s) % 33) - 16) / (float)grid;
            x[i] = step * (1.0f + (float)(xorshift_next(s) % 7));
            break;
        }
        case 3: x[i] = xorshift_uniform(s) * (i % 29 == 7 ? 300.0f : 1.0f); break;
        case 4: x[i] = 1.75f + (i % 11 == 3 ? xorshift_uniform(s) * 1e-3f : 0.0f); break;
        case 5: x[i] = fabsf(xorshift_gaussianish(s)) - 9.0f; break;
        case 6: x[i] = xorshift_gaussianish(s) * 1e-6f; break;
        default: x[i] = xorshift_gaussianish(s) * 3e7f; break;
        }
    }
}

#endif
