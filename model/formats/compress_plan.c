/* model/formats/compress_plan.c: one cache tensor's layout in a compressed file (TensorPlan,
 * compress_plan.h), packing into it and unpacking from it, a scheme bound to the file's shape,
 * and a calibration checked against the cache: what compress.c and decompress.c share. */
#include "model/formats/compress_plan.h"
#include "model/formats/calib_bind.h"
#include "quant/half.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not a fitted base: its tables are bound per KV head, so its groups lie within a row. */
static int is_flat_group(const KvSpec *spec, int head_dim) {
    const KvBase *b = &spec->base;
    return !kv_spec_is_fitted(spec) && b->axis == KV_AXIS_CHANNELS && b->group > head_dim && b->group % head_dim == 0 && !spec->hadamard && !spec->outliers && !spec->residual && !spec->sinks;
}

/* The plan of one tensor; -1 with why when the spec cannot store it. */
int tensor_plan_make(const KvSpec *spec, int heads, int seq, int head_dim, TensorPlan *p, char *why, size_t len) {
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    p->heads = heads;
    p->positions = seq;
    p->row = head_dim;
    if (spec->prerope) {
        snprintf(why, len, "%s: +prerope needs positions and RoPE, which a stored tensor does not have", spec->text);
        return -1;
    }
    if (is_flat_group(spec, head_dim)) {
        size_t values = (size_t)heads * seq * head_dim;
        if (values % (size_t)spec->base.group != 0) {
            snprintf(why, len, "%s: %zu values are not whole groups of %d", spec->text, values, spec->base.group);
            return -1;
        }
        p->heads = 1;
        p->row = spec->base.group;
        p->positions = (int)(values / (size_t)spec->base.group);
    }
    p->sinks = spec->sinks < p->positions ? spec->sinks : p->positions;
    p->quantized_end = kv_spec_quantized_end(spec, p->positions);
    if (p->quantized_end > p->positions) p->quantized_end = p->positions;
    p->unit_bytes = kv_spec_unit_bytes(spec, p->row);
    p->units = (size_t)(p->quantized_end - p->sinks) / (size_t)spec->base.rows;
    return 0;
}

/* A fitted base's table per KV head of layer `layer`, from calib (calib_bind.h): the tables a
 * KV cache of the same model binds. Other bases: nothing to bind (head_specs stays NULL). */
int tensor_plan_bind_tables(TensorPlan *p, const Calibration *calib, int layer, Error *err) {
    if (!kv_spec_is_fitted(&p->spec)) return 0;
    p->head_specs = malloc((size_t)p->heads * sizeof *p->head_specs);
    if (!p->head_specs) return error_set(err, "out of memory");
    return calib_bind_heads(&p->spec, calib, layer, p->heads, p->row, p->head_specs, err);
}

/* Binds a LAYERED scheme to the file's shape; a flat group (G > head_dim) is checked on its
 * row of G values instead. */
int compressed_scheme_bind(KvLayered *l, int layers, int head_dim, KvSide side, char *why, size_t len) {
    KvLayered wide = *l;
    if (kv_layered_bind(l, layers, head_dim, side, why, len) == 0) return 0;
    if (is_flat_group(&wide.all, head_dim) && wide.n_items == 0 &&
        kv_layered_bind(&wide, layers, wide.all.base.group, side, why, len) == 0) {
        *l = wide;
        return 0;
    }
    return -1;
}

/* x [heads][positions][row] (natural) -> packed units and fp16 full rows. scratch: rows_per_unit
 * rows. */
void tensor_plan_pack(const TensorPlan *p, const float *x, unsigned char *packed, uint16_t *full, float *scratch) {
    int n = p->row, g = p->spec.base.rows;
    for (int h = 0; h < p->heads; h++) {
        const float *xh = x + (size_t)h * p->positions * n;
        unsigned char *units = packed + (size_t)h * p->units * p->unit_bytes;
        uint16_t *fh = full + (size_t)h * plan_full_rows(p) * n;
        for (size_t u = 0; u < p->units; u++)
            kv_spec_encode(plan_head(p, h), xh + ((size_t)p->sinks + u * g) * n, n, units + u * p->unit_bytes, scratch);
        int f = 0;
        for (int j = 0; j < p->positions; j++) {
            if (j >= p->sinks && j < p->quantized_end) continue;
            for (int i = 0; i < n; i++) fh[(size_t)f * n + i] = f32_to_f16(xh[(size_t)j * n + i]);
            f++;
        }
    }
}

/* packed units and fp16 full rows -> x [heads][positions][row], natural order. */
void tensor_plan_unpack(const TensorPlan *p, const unsigned char *packed, const uint16_t *full, float *x) {
    int n = p->row;
    for (int h = 0; h < p->heads; h++) {
        float *xh = x + (size_t)h * p->positions * n;
        const uint16_t *fh = full + (size_t)h * plan_full_rows(p) * n;
        int quantized = p->quantized_end - p->sinks;
        if (quantized > 0) {
            float *rows = xh + (size_t)p->sinks * n;
            kv_spec_decode(plan_head(p, h), packed + (size_t)h * p->units * p->unit_bytes, n, 0, quantized, rows);
            for (int r = 0; r < quantized; r++) kv_spec_from_domain(plan_head(p, h), rows + (size_t)r * n, n);
        }
        int f = 0;
        for (int j = 0; j < p->positions; j++) {
            if (j >= p->sinks && j < p->quantized_end) continue;
            for (int i = 0; i < n; i++) xh[(size_t)j * n + i] = f16_to_f32(fh[(size_t)f * n + i]);
            f++;
        }
    }
}

/* 64 lowercase hex digits: how a calibration's file sha256 is written. */
int compressed_hash_ok(const char *s) {
    size_t n = strspn(s, "0123456789abcdef");
    return n == CALIB_HASH_HEX && s[n] == 0;
}

/* A compressed file holds a KV cache, not a model: there is no model.safetensors to hash, so a
 * calibration given to compress is checked against the cache's geometry, and against its model
 * only when the cache records that model's sha256 (kv-extract's files do). */
int compressed_calib_geometry_check(const Calibration *c, int n_layers, int n_kv_heads, int head_dim, const char *what,
                                    Error *err) {
    if (c->n_layers == n_layers && c->n_kv_heads == n_kv_heads && c->head_dim == head_dim) return 0;
    return error_set(err, "calibration %s is for %d layers, %d KV heads, head_dim %d; %s has %d, %d, %d", c->path,
                     c->n_layers, c->n_kv_heads, c->head_dim, what, n_layers, n_kv_heads, head_dim);
}

