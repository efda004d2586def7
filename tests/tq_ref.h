/* tests/tq_ref.h: an independent reference for the tqB codec, written from SCHEMES.md section 3
 * without the codec's code: the centroid tables, the signs from bit 63 of
 * (i+1)*0x9E3779B97F4A7C15 (and the same 64 signs from Python), the Hadamard transform from its
 * matrix definition in double, the nearest centroid with ties to the lower index, the
 * reconstruction x^ = s.H(c*r/sqrt(d)), and the unit read by its documented layout bit by bit.
 * Only r's fp16 rounding is the library's (quant/half.h, checked in tests/test_codec_float.c).
 * tests/test_codec_tq.c compares quant/codec_tq.c against it. A file of its own so the test
 * file stays under 700 lines and the reference reads apart from the checks. */
#ifndef KVQ_TQ_REF_H
#define KVQ_TQ_REF_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "quant/half.h"

/* The widest row (the codec's limit): the size of the reference's buffers. */
#define MAXD 4096

/* ---- the definition, restated ---- */

/* SCHEMES.md §3: the positive centroids of each B, ascending (the negative ones mirror them). */
static const float POSITIVE_CENTROIDS[5][8] = {
    {0},
    {0.7978845834732056f},
    {0.4527800381183624f, 1.5104175806045532f},
    {0.2450941801071167f, 0.7560052871704102f, 1.3439092636108398f, 2.1519455909729004f},
    {0.12839503586292267f, 0.38804829120635986f, 0.6567591428756714f, 0.9423404335975647f,
     1.2562311887741089f, 1.6180464029312134f, 2.069017171859741f, 2.7325894832611084f},
};

/* Centroid k of 2^B, ascending: -P[h-1] .. -P[0], P[0] .. P[h-1] with h = 2^(B-1). */
static inline double centroid(int B, int k) {
    int h = 1 << (B - 1);
    return k < h ? -(double)POSITIVE_CENTROIDS[B][h - 1 - k] : (double)POSITIVE_CENTROIDS[B][k - h];
}

/* sigma_i: -1 when bit 63 of ((i+1) * 0x9E3779B97F4A7C15) mod 2^64 is set. */
static inline int ref_sign(int i) {
    uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    return (h >> 63) ? -1 : 1;
}

/* The same 64 signs, computed separately with Python's integers. */
static const char SIGNS64[] = "-+-++-+--+-++-+--+-+--+-++-+--+-++-+-++-+--+-++-+--+-+--+-++-+--";

static inline int popcount(unsigned v) {
    int c = 0;
    for (; v; v &= v - 1) c++;
    return c;
}

/* out = H in, from the matrix: H[i][j] = (-1)^popcount(i & j) / sqrt(d). */
static inline void ref_hadamard(const double *in, double *out, int d) {
    for (int i = 0; i < d; i++) {
        double s = 0.0;
        for (int j = 0; j < d; j++) s += (popcount((unsigned)(i & j)) & 1) ? -in[j] : in[j];
        out[i] = s / sqrt((double)d);
    }
}

/* fp16 bits of r, or 0 for the codec's documented "not finite -> stored as a zero row". */
static inline uint16_t ref_r16(const float *x, int d) {
    double s = 0.0;
    for (int i = 0; i < d; i++) s += (double)x[i] * x[i];
    double norm = sqrt(s);
    if (!isfinite(norm) || norm > 1e30) return 0;
    uint16_t h = f32_to_f16((float)norm);
    return (h & 0x7c00) == 0x7c00 ? 0 : h;
}

typedef struct {
    uint16_t r16;
    int code[MAXD];   /* nearest centroid of the double z */
    int alt[MAXD];    /* the other neighbour when z is within 1e-4 of their midpoint, else -1 */
} RefRow;

static inline void ref_quantize(int B, const float *x, int d, RefRow *ref) {
    static double y[MAXD], u[MAXD];
    ref->r16 = ref_r16(x, d);
    double r = f16_to_f32(ref->r16);
    for (int i = 0; i < d; i++) {
        ref->code[i] = 0, ref->alt[i] = -1;
        y[i] = ref_sign(i) * (double)x[i];
    }
    if (r == 0.0) return;
    ref_hadamard(y, u, d);
    for (int i = 0; i < d; i++) {
        double z = u[i] * sqrt((double)d) / r;
        int best = 0;
        for (int k = 1; k < (1 << B); k++)
            if (fabs(z - centroid(B, k)) < fabs(z - centroid(B, best))) best = k;
        ref->code[i] = best;
        for (int nb = best - 1; nb <= best + 1; nb += 2)
            if (nb >= 0 && nb < (1 << B) && fabs(fabs(z - centroid(B, nb)) - fabs(z - centroid(B, best))) <= 2e-4)
                ref->alt[i] = nb;
    }
}

/* x^ = s . H(c[codes] * r / sqrt(d)), in double. */
static inline void ref_reconstruct(int B, const int *codes, uint16_t r16, int d, double *xhat) {
    static double inner[MAXD];
    double r = f16_to_f32(r16);
    for (int i = 0; i < d; i++) inner[i] = centroid(B, codes[i]) * r / sqrt((double)d);
    ref_hadamard(inner, xhat, d);
    for (int i = 0; i < d; i++) xhat[i] *= ref_sign(i);
}

/* ---- the unit, read by its documented layout ---- */

static inline int unit_bit(const unsigned char *unit, size_t k) { return (unit[k / 8] >> (k % 8)) & 1; }

static inline int unit_code(const unsigned char *unit, int B, int i) {
    int c = 0;
    for (int t = 0; t < B; t++) c |= unit_bit(unit, (size_t)i * B + t) << t;
    return c;
}

static inline uint16_t unit_r16(const unsigned char *unit, int B, int d) {
    const unsigned char *p = unit + (size_t)B * d / 8;
    return (uint16_t)(p[0] | p[1] << 8);
}

#endif
