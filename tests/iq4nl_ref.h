/* tests/iq4nl_ref.h: the iq4_nl codec of SCHEMES.md section 8 restated for
 * tests/test_codec_iq4nl.c, written without the codec's code: ggml's table and its bisection for
 * best_index_int8, the scale refit with every float product and sum rounded through a volatile
 * (so no compiler can fuse them), and the block layout (fp16 d, then value j in the low nibble of
 * byte j and value j + 16 in its high nibble). fp16 and QK come from tests/ggml_ref.h. A file of
 * its own so that the test file stays under 700 lines and the reference reads apart from the
 * checks. */
#ifndef KVQ_IQ4NL_REF_H
#define KVQ_IQ4NL_REF_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "tests/ggml_ref.h"

#define BB 18         /* block bytes */

/* ggml's kvalues_iq4nl, as SCHEMES.md section 8 lists them. */
static const int KV[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- the definition, restated ---- */

/* One rounded float operation each: a volatile store cannot be fused with what follows. */
static inline float fmul(float a, float b) {
    volatile float r = a * b;
    return r;
}
static inline float fadd(float a, float b) {
    volatile float r = a + b;
    return r;
}

/* best_index_int8 as ggml writes it: ends, then bisection, then the nearer neighbour (ties up). */
static inline int ref_best_index(float x) {
    if (x <= (float)KV[0]) return 0;
    if (x >= (float)KV[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < (float)KV[mid]) hi = mid;
        else lo = mid;
    }
    return x - (float)KV[hi - 1] < (float)KV[hi] - x ? hi - 1 : hi;
}

typedef struct {
    int zero;       /* max|x| < 1e-15: d = 0, codes undefined in ggml (the codec's choice: 8) */
    float d0, d;    /* d0 = max / -127 picks the codes; d is the refit, before fp16 */
    int q[QK];
} IqRef;

static inline IqRef iq_ref_codes(const float *x) {
    IqRef r;
    memset(&r, 0, sizeof r);
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    if (amax < 1e-15f) {
        r.zero = 1;
        for (int j = 0; j < QK; j++) r.q[j] = 8;
        return r;
    }
    r.d0 = max / (float)KV[0];
    float id = 1.0f / r.d0, sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < QK; j++) {
        r.q[j] = ref_best_index(fmul(id, x[j]));
        float k = (float)KV[r.q[j]], w = fmul(x[j], x[j]);
        sumqx = fadd(sumqx, fmul(fmul(w, k), x[j]));
        sumq2 = fadd(sumq2, fmul(fmul(w, k), k));
    }
    r.d = sumqx / sumq2;
    return r;
}

static inline void iq_ref_pack(uint16_t d, const int q[QK], unsigned char *blk) {
    blk[0] = (unsigned char)(d & 255);
    blk[1] = (unsigned char)(d >> 8);
    for (int j = 0; j < QK / 2; j++) blk[2 + j] = (unsigned char)(q[j] | q[j + QK / 2] << 4);
}

static inline void iq_ref_encode_block(const float *x, unsigned char *blk) {
    IqRef r = iq_ref_codes(x);
    iq_ref_pack(t_fp16(r.d), r.q, blk);
}

/* Low nibble of byte j holds value j, the high nibble value j + 16. */
static inline int code_at(const unsigned char *blk, int j) { return j < QK / 2 ? blk[2 + j] & 15 : blk[2 + j - QK / 2] >> 4; }

static inline void iq_ref_decode_block(const unsigned char *blk, float *out) {
    float d = t_half_value((uint16_t)(blk[0] | blk[1] << 8));
    for (int j = 0; j < QK; j++) out[j] = d * (float)KV[code_at(blk, j)];
}

/* fp16 d fields equal, any NaN matching any NaN; the codes equal. */
static inline int same_iq_block(const unsigned char *got, const unsigned char *want) {
    uint16_t g = (uint16_t)(got[0] | got[1] << 8), w = (uint16_t)(want[0] | want[1] << 8);
    if (fp16_is_nan(w) ? !fp16_is_nan(g) : g != w) return 0;
    return memcmp(got + 2, want + 2, BB - 2) == 0;
}

#endif
