/* quant/scheme_impl.h: the functions behind the rows of the scheme table.
 * Internal to quant/: schemes.c wires these into KvScheme rows; everyone else
 * calls through the row (s->quantize(s, ...)). A new scheme adds its functions
 * here, its .c file, and one row in schemes.c. */
#ifndef KVQ_SCHEME_IMPL_H
#define KVQ_SCHEME_IMPL_H

#include "quant/quant.h"

/* quant/scheme_f32.c: the unquantized baseline, packed = the raw floats. */
size_t f32_packed_bytes(const KvScheme *s, size_t n);
void f32_quantize(const KvScheme *s, const float *x, size_t n, void *packed);
void f32_dequantize(const KvScheme *s, const void *packed, size_t n, float *x);
float f32_dot(const KvScheme *s, const void *packed, const float *q, size_t n);
void f32_axpy(const KvScheme *s, const void *packed, float w, float *out, size_t n);

/* quant/scheme_int.c: symmetric and asymmetric integer groups, bits 2, 3, 4, 8. */
size_t int_packed_bytes(const KvScheme *s, size_t n);
void int_quantize(const KvScheme *s, const float *x, size_t n, void *packed);
void int_dequantize(const KvScheme *s, const void *packed, size_t n, float *x);
float int_dot(const KvScheme *s, const void *packed, const float *q, size_t n);
void int_axpy(const KvScheme *s, const void *packed, float w, float *out, size_t n);

#endif
