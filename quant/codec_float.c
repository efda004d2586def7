/* quant/codec_float.c: the floating-point bases fp32, fp16 and bf16.
 *   fp32: the row as computed (the baseline; 4 bytes a value, native byte order).
 *   fp16: each value rounded to the nearest IEEE half, ties to even (little-endian).
 *   bf16: each value rounded to the nearest bfloat16, ties to even (little-endian).
 * No groups and no parameters. NaN stays NaN, infinities stay infinite, and values beyond
 * a format's range round to infinity (IEEE rounding, quant/half.c): a defined result. */
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"

static int parse_named(const char *name, const char *want, int bits, KvBase *b) {
    if (strcmp(name, want) != 0) return 0;
    b->bits = bits;
    snprintf(b->name, sizeof b->name, "%s", want);
    return 1;
}

static int any_width(const KvBase *b, int n, char *why, size_t why_len) {
    (void)b, (void)n, (void)why, (void)why_len;
    return 1;
}

static size_t row_bytes(const KvBase *b, int n) { return (size_t)n * (size_t)b->bits / 8; }

/* ---- fp32 ---- */

static int fp32_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    (void)why, (void)why_len;
    return parse_named(name, "fp32", 32, b);
}

static void fp32_encode(const KvBase *b, const float *x, int n, void *unit) {
    (void)b;
    memcpy(unit, x, (size_t)n * sizeof(float));
}

static void fp32_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    (void)b;
    memcpy(out, (const float *)units + (size_t)r0 * n, (size_t)count * n * sizeof(float));
}

const KvCodec kv_codec_fp32 = {
    .syntax = "fp32",
    .summary = "float32 as computed: no quantization (the baseline)",
    .examples = "fp32",
    .parse = fp32_parse,
    .check = any_width,
    .unit_bytes = row_bytes,
    .encode = fp32_encode,
    .decode = fp32_decode,
};

/* ---- fp16 ---- */

static int fp16_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    (void)why, (void)why_len;
    return parse_named(name, "fp16", 16, b);
}

static void fp16_encode(const KvBase *b, const float *x, int n, void *unit) {
    (void)b;
    f32_to_f16_bytes(x, (size_t)n, unit);
}

static void fp16_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    (void)b;
    f16_bytes_to_f32((const unsigned char *)units + (size_t)r0 * n * 2, (size_t)count * n, out);
}

const KvCodec kv_codec_fp16 = {
    .syntax = "fp16",
    .summary = "IEEE half, nearest-even",
    .examples = "fp16",
    .parse = fp16_parse,
    .check = any_width,
    .unit_bytes = row_bytes,
    .encode = fp16_encode,
    .decode = fp16_decode,
};

/* ---- bf16 ---- */

static int bf16_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    (void)why, (void)why_len;
    return parse_named(name, "bf16", 16, b);
}

static void bf16_encode(const KvBase *b, const float *x, int n, void *unit) {
    (void)b;
    unsigned char *p = unit;
    for (int i = 0; i < n; i++) kv_put_u16(p + 2 * i, f32_to_bf16(x[i]));
}

static void bf16_decode(const KvBase *b, const void *units, int n, int r0, int count, float *out) {
    (void)b;
    const unsigned char *p = (const unsigned char *)units + (size_t)r0 * n * 2;
    for (size_t i = 0; i < (size_t)count * n; i++) out[i] = bf16_to_f32((uint16_t)kv_get_u16(p + 2 * i));
}

const KvCodec kv_codec_bf16 = {
    .syntax = "bf16",
    .summary = "bfloat16, nearest-even",
    .examples = "bf16",
    .parse = bf16_parse,
    .check = any_width,
    .unit_bytes = row_bytes,
    .encode = bf16_encode,
    .decode = bf16_decode,
};
