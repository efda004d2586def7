/* tests/fuzz/fuzz_quant.c: every KV scheme on hostile floats and hostile packed bytes.
 * Input: byte 0 = mode, the rest = payload.
 *   mode & 1 == 0: the payload becomes floats (4 raw bytes each: NaN, inf,
 *     subnormals, huge values) or, when mode & 2, small values (int8 / 16, the
 *     range real keys and values live in). Every scheme quantizes and dequantizes
 *     them; dot and axpy read the packed codes. With finite inputs of moderate
 *     size, dot and axpy must agree with the dequantized values.
 *   mode & 1 == 1: the payload is used as packed bytes (any codes, NaN or inf
 *     fp16 scales): dequantize, dot and axpy must not crash or trip UBSan.
 * Buffers are exactly packed_bytes long so ASan sees any overrun. */
#include <math.h>
#include <string.h>
#include "quant/quant.h"
#include "tests/fuzz/fuzz.h"

#define MAX_N 512
#define LANE 128          /* a multiple of every group size in the table */

/* Largest |value| where the agreement checks apply (values far inside fp16 and float range). */
#define MODERATE 1e4f

static void *alloc_exact(size_t n) {
    void *p = malloc(n ? n : 1);
    fuzz_assert(p != NULL, "out of memory");
    return p;
}

/* n values from the payload, cycling over it to fill a whole number of lanes. */
static size_t make_floats(const uint8_t *p, size_t len, int small, float *x) {
    size_t have = small ? len : len / 4;
    if (have == 0) return 0;
    size_t n = (have + LANE - 1) / LANE * LANE;
    if (n > MAX_N) n = MAX_N;
    for (size_t i = 0; i < n; i++) {
        size_t j = i % have;
        if (small) x[i] = (float)(int8_t)p[j] / 16.0f;
        else memcpy(&x[i], p + 4 * j, 4);
    }
    return n;
}

static int moderate(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) <= MODERATE)) return 0;
    return 1;
}

/* dot and axpy read the codes directly; they must match the dequantized values
 * up to float rounding (in a different order of summation). */
static void check_agreement(const KvScheme *s, const void *packed, const float *xhat, const float *q, size_t n) {
    double ref = 0.0, mag = 0.0, amax = 0.0, qsum = 0.0;
    for (size_t i = 0; i < n; i++) {
        ref += (double)q[i] * xhat[i];
        qsum += fabs(q[i]);
        if (fabs(xhat[i]) > amax) amax = fabs(xhat[i]);
    }
    /* asym dot factors out the minimum: rounding scales with |min| + |x| <= 2 max|x|. */
    mag = qsum * amax * 3.0;
    float dot = s->dot(s, packed, q, n);
    fuzz_assert(fabs(dot - ref) <= 1e-4 * mag + 1e-30, "dot differs from the dequantized values");

    float out[MAX_N];
    const float w = 0.75f;
    for (size_t i = 0; i < n; i++) out[i] = q[i];
    s->axpy(s, packed, w, out, n);
    for (size_t i = 0; i < n; i++) {
        float want = q[i] + w * xhat[i];
        float tol = 1e-5f * (fabsf(q[i]) + fabsf(w) * (float)amax * 3.0f) + 1e-30f;
        fuzz_assert(fabsf(out[i] - want) <= tol, "axpy differs from the dequantized values");
    }
}

static void fuzz_values(const float *x, size_t n) {
    float xhat[MAX_N], q[MAX_N], out[MAX_N];
    for (size_t i = 0; i < n; i++) q[i] = x[(i * 7 + 3) % n];   /* a query from the same values */
    int check = moderate(x, n);
    for (int k = 0; k < kv_scheme_count(); k++) {
        const KvScheme *s = kv_scheme_at(k);
        fuzz_assert(kv_scheme_accepts(s, n), "scheme refuses a multiple of its group size");
        size_t bytes = s->packed_bytes(s, n);
        void *packed = alloc_exact(bytes);
        s->quantize(s, x, n, packed);
        s->dequantize(s, packed, n, xhat);
        if (check) {
            for (size_t i = 0; i < n; i++) fuzz_assert(isfinite(xhat[i]), "finite input gave a non-finite value");
            check_agreement(s, packed, xhat, q, n);
        } else {
            volatile float d = s->dot(s, packed, q, n);
            (void)d;
            for (size_t i = 0; i < n; i++) out[i] = 0.0f;
            s->axpy(s, packed, -1.5f, out, n);
        }
        free(packed);
    }
}

static void fuzz_packed(const uint8_t *p, size_t len, uint8_t mode) {
    size_t n = (size_t)((mode >> 1) % (MAX_N / LANE) + 1) * LANE;
    float x[MAX_N], q[MAX_N];
    for (size_t i = 0; i < n; i++) q[i] = (float)((int)(i % 13) - 6) * 0.25f;
    for (int k = 0; k < kv_scheme_count(); k++) {
        const KvScheme *s = kv_scheme_at(k);
        size_t bytes = s->packed_bytes(s, n);
        uint8_t *packed = alloc_exact(bytes);
        for (size_t i = 0; i < bytes; i++) packed[i] = p[i % len];
        s->dequantize(s, packed, n, x);
        volatile float d = s->dot(s, packed, q, n);
        (void)d;
        s->axpy(s, packed, 0.5f, x, n);
        free(packed);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t mode = data[0];
    if (mode & 1) {
        fuzz_packed(data + 1, size - 1, mode);
        return 0;
    }
    float x[MAX_N];
    size_t n = make_floats(data + 1, size - 1, (mode & 2) != 0, x);
    if (n) fuzz_values(x, n);
    return 0;
}
