/* quant/schemes.c: the table of named KV-cache schemes and lookup by name.
 * One row per scheme, like ggml's type traits: adding a scheme means writing
 * its functions (declared in quant/scheme_impl.h) and adding a row here. */
#include <stdio.h>
#include <string.h>
#include "quant/scheme_impl.h"

#define INT_FNS int_packed_bytes, int_quantize, int_dequantize, int_dot, int_axpy

static const KvScheme SCHEMES[] = {
    {"fp32", "no quantization: float32 as computed (the baseline)",
     32, 0, 0, 1, KV_AXIS_CHANNELS, 0,
     f32_packed_bytes, f32_quantize, f32_dequantize, f32_dot, f32_axpy},
    {"int8-g64", "8-bit symmetric, one fp16 scale per 64 values",
     8, 64, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g32", "4-bit symmetric, one fp16 scale per 32 values",
     4, 32, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g64", "4-bit symmetric, one fp16 scale per 64 values",
     4, 64, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g128", "4-bit symmetric, one fp16 scale per 128 values",
     4, 128, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int3-g64", "3-bit symmetric, one fp16 scale per 64 values",
     3, 64, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int2-g64", "2-bit symmetric, one fp16 scale per 64 values",
     2, 64, 1, 1, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int8-g64-asym", "8-bit asymmetric, fp16 scale and minimum per 64 values",
     8, 64, 2, 0, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g32-asym", "4-bit asymmetric, fp16 scale and minimum per 32 values",
     4, 32, 2, 0, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g64-asym", "4-bit asymmetric, fp16 scale and minimum per 64 values",
     4, 64, 2, 0, KV_AXIS_CHANNELS, 0, INT_FNS},
    {"int4-g128-asym", "4-bit asymmetric, fp16 scale and minimum per 128 values",
     4, 128, 2, 0, KV_AXIS_CHANNELS, 0, INT_FNS},
};

#define N_SCHEMES ((int)(sizeof SCHEMES / sizeof SCHEMES[0]))

int kv_scheme_count(void) { return N_SCHEMES; }

const KvScheme *kv_scheme_at(int i) { return i >= 0 && i < N_SCHEMES ? &SCHEMES[i] : NULL; }

static const KvScheme *find_exact(const char *name) {
    for (int i = 0; i < N_SCHEMES; i++)
        if (strcmp(SCHEMES[i].name, name) == 0)
            return &SCHEMES[i];
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Accepted spellings: the canonical name; "<name>-sym" for a symmetric row
 * (the reference metrics files say "int4-g64-sym"); and a name without
 * "-g<N>" (int4, int8-sym, int4-asym) meaning group size 64. */
const KvScheme *kv_scheme_find(const char *name) {
    if (!name)
        return NULL;
    const KvScheme *s = find_exact(name);
    if (s)
        return s;
    char buf[64];
    size_t len = strlen(name);
    if (len >= sizeof buf - 8)
        return NULL;
    memcpy(buf, name, len + 1);
    int want_sym = ends_with(buf, "-sym");
    if (want_sym)
        buf[len - 4] = '\0';
    if (!strstr(buf, "-g") && strncmp(buf, "int", 3) == 0) {
        /* insert "-g64" after "int<bits>" */
        char rest[64];
        size_t head = 3 + strspn(buf + 3, "0123456789");
        snprintf(rest, sizeof rest, "%s", buf + head);
        snprintf(buf + head, sizeof buf - head, "-g64%s", rest);
    }
    s = find_exact(buf);
    if (s && want_sym && (!s->symmetric || s->group_size == 0))
        return NULL;
    return s;
}

/* Integer rows have group sizes that are multiples of 8 (whole bytes per
 * group); the fp32 row takes any n. */
int kv_scheme_accepts(const KvScheme *s, size_t n) {
    if (s->group_size == 0)
        return 1;
    return n % (size_t)s->group_size == 0 && s->group_size % 8 == 0;
}

double kv_scheme_ratio_vs_f16(const KvScheme *s) {
    size_t n = s->group_size > 0 ? (size_t)s->group_size : 64;
    return (double)(2 * n) / (double)s->packed_bytes(s, n);
}
