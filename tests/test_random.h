/* tests/test_random.h: seeded random numbers and float bit patterns for the tests, with no
 * global state (the caller owns the seed): splitmix64, uniform doubles in [0, 1), normal floats
 * by Box-Muller, and a float's 32 bits in and out. */
#ifndef KVQ_TEST_RANDOM_H
#define KVQ_TEST_RANDOM_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static inline float normal(uint64_t *s) {
    double u = uniform(s) + 1e-300, v = uniform(s);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static inline float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#endif
