/* quant/half.h: IEEE half (fp16) and bfloat16 <-> float32 conversions.
 * float -> half/bf16 rounds to nearest, ties to even; subnormals, infinities
 * and NaN are handled (NaN stays NaN). half/bf16 -> float is exact. */
#ifndef KVQ_HALF_H
#define KVQ_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* bf16 -> f32 is a shift; inline because the matmul kernels call it per weight. */
static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* n values to and from little-endian fp16 bytes (2 per value), as codecs and the KV cache
 * store them; the widening uses the CPU's F16C conversion where there is one (exact either way). */
void f32_to_f16_bytes(const float *x, size_t n, unsigned char *p);
void f16_bytes_to_f32(const unsigned char *p, size_t n, float *out);

/* fp16 bits of ||x||_2 (n values; the squares summed in double), or 0 when the norm is not a
 * finite half (NaN, inf, overflow): the per-row scale of tq, vq and rvq. */
uint16_t f16_norm(const float *x, int n);

/* Rounds f to the nearest representable half and back (what storing in fp16 does). */
static inline float round_to_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

#endif
