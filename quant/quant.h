/* quant/quant.h: the KV-cache quantization interface and the scheme table.
 *
 * A scheme turns n floats into a packed byte buffer and back. One row of the
 * table (quant/schemes.c) describes one named scheme, like ggml's type traits:
 * its parameters plus the functions that quantize and dequantize, and two that read
 * packed data directly (dot with a query, accumulate into an output). Attention uses
 * dequantize on blocks of rows; dot and axpy are reference read-outs, checked by the
 * tests against dequantize, that no product code calls yet.
 *
 * Packed layout for the integer schemes (everything the compress file stores):
 *   [codes: n*bits/8 bytes, bit-packed little-end first]
 *   [group parameters: n/group_size entries of n_params fp16 values each]
 * Groups run along the flat array, so quantizing a [heads, tokens, head_dim]
 * tensor in one call equals quantizing each head_dim row when group_size
 * divides head_dim.
 * Codes are stored unsigned: symmetric q + 2^(bits-1), asymmetric q as is.
 * Code i occupies bits [i*bits, i*bits+bits) of the stream, where stream bit k
 * is bit k%8 of byte k/8 (for 4 bits: low nibble = even index; 3 bits: 8
 * codes in 3 bytes). Parameters are little-endian fp16: scale, then (asym)
 * the minimum. The fp32 baseline stores the raw floats (native byte order).
 * Precondition everywhere: n is a multiple of group_size (kv_scheme_accepts
 * tells); group sizes are multiples of 8, so groups start on byte boundaries.
 *
 * quant/ is pure arithmetic: no file I/O, no allocation in the hot functions. */
#ifndef KVQ_QUANT_H
#define KVQ_QUANT_H

#include <stddef.h>

/* Which values share a group. Every scheme so far groups along channels
 * (head_dim) within one token and head; KIVI-style key quantization groups one
 * channel across tokens, which the KV cache must then buffer (see README). */
#include "quant/codec.h"   /* KvAxis */

typedef struct KvScheme KvScheme;
struct KvScheme {
    const char *name;          /* "int4-g64", the --kv-scheme value */
    const char *summary;       /* one line for --help and listings */
    int bits;                  /* bits per stored code (32 for the f32 baseline) */
    int group_size;            /* values sharing one set of parameters (0: none) */
    int n_params;              /* fp16 parameters per group: 1 = scale, 2 = scale and minimum */
    int symmetric;             /* 1: x = q*scale; 0: x = q*scale + min */
    KvAxis axis;               /* grouping direction; KV_AXIS_CHANNELS for all current rows */
    int pre_rope;              /* 1: keys are meant to be quantized before RoPE (KVQuant);
                                  0 for all current rows: keys are quantized after RoPE */

    /* Bytes needed for n values (n a multiple of group_size). */
    size_t (*packed_bytes)(const KvScheme *s, size_t n);
    /* x[0..n) -> packed. */
    void (*quantize)(const KvScheme *s, const float *x, size_t n, void *packed);
    /* packed -> x[0..n), the values attention sees. */
    void (*dequantize)(const KvScheme *s, const void *packed, size_t n, float *x);
    /* sum_i q[i] * dequant(packed)[i], without expanding to a buffer (tests only, so far). */
    float (*dot)(const KvScheme *s, const void *packed, const float *q, size_t n);
    /* out[i] += w * dequant(packed)[i]. */
    void (*axpy)(const KvScheme *s, const void *packed, float w, float *out, size_t n);
};

/* Looks a scheme up by name; NULL if unknown. "fp32" is the unquantized baseline. */
const KvScheme *kv_scheme_find(const char *name);
/* Iteration over the table, for --help and tests. */
int kv_scheme_count(void);
const KvScheme *kv_scheme_at(int i);
/* 1 when n values can be packed in one call (integer rows: n a multiple of group_size). */
int kv_scheme_accepts(const KvScheme *s, size_t n);
/* Stored bytes per value as a fraction of fp16's 2 bytes: 2n / packed_bytes(n)
 * for n = one group (fp32: 0.5). The figure the metrics files call the ratio. */
double kv_scheme_ratio_vs_f16(const KvScheme *s);

#endif
