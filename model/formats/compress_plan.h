/* model/formats/compress_plan.h: what the writer (compress.c) and the reader (decompress.c) of
 * compressed KV files share: the format names, one cache tensor's layout in the file under its
 * layer's scheme (TensorPlan: the quantized positions' codec units, the full-precision rows),
 * packing a tensor into that layout and unpacking it, a scheme bound to the file's shape, and
 * the checks of a calibration against the cache. The file is described in compress.h. */
#ifndef KVQ_COMPRESS_PLAN_H
#define KVQ_COMPRESS_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "model/formats/calibration.h"
#include "model/formats/entropy_pack.h"
#include "model/formats/error.h"
#include "quant/scheme.h"

#define COMPRESSED_FORMAT "kvq-compressed-3"
#define COMPRESSED_FORMAT_V2 "kvq-compressed-2"        /* still read: without checksums */
#define COMPRESSED_FORMAT_ENTROPY "kvq-compressed-4"   /* format 3 with entropy-coded .packed tensors (--entropy) */
#define COMPRESSED_TENSOR_CRC_PREFIX "crc32c."         /* + a tensor's name: the CRC-32C of its bytes */

/* One tensor [heads][positions][row] under its layer's spec. A flat run (a plain integer base
 * with groups longer than a row) is one "head" of rows of G values. */
typedef struct {
    KvSpec spec;
    KvSpec *head_specs;          /* a fitted base: [heads], spec with each KV head's table (calib_bind.h); else NULL */
    int heads, positions, row;
    int sinks, quantized_end;    /* full precision: [0, sinks) and [quantized_end, positions) */
    size_t units, unit_bytes;    /* per head */
} TensorPlan;

/* The spec KV head h is coded with. */
static inline const KvSpec *plan_head(const TensorPlan *p, int h) { return p->head_specs ? &p->head_specs[h] : &p->spec; }
/* Every head's spec (entropy_pack's specs): head_specs of a fitted base, else the one spec. */
static inline const KvSpec *plan_specs(const TensorPlan *p) { return p->head_specs ? p->head_specs : &p->spec; }
static inline size_t plan_packed_bytes(const TensorPlan *p) { return (size_t)p->heads * p->units * p->unit_bytes; }
static inline int plan_full_rows(const TensorPlan *p) { return p->sinks + p->positions - p->quantized_end; }

/* The shape entropy_pack codes the plan's units in. */
static inline EntropyShape plan_entropy_shape(const TensorPlan *p) {
    return (EntropyShape){p->heads, p->units, p->unit_bytes, p->row};
}

/* The plan of one tensor; -1 with why when the spec cannot store it. */
int tensor_plan_make(const KvSpec *spec, int heads, int seq, int head_dim, TensorPlan *p, char *why, size_t len);
/* A fitted base's table per KV head of layer `layer`, from calib (calib_bind.h): the tables a
 * KV cache of the same model binds. Other bases: nothing to bind (head_specs stays NULL). */
int tensor_plan_bind_tables(TensorPlan *p, const Calibration *calib, int layer, Error *err);
/* x [heads][positions][row] (natural) -> packed units and fp16 full rows. scratch: rows_per_unit
 * rows. */
void tensor_plan_pack(const TensorPlan *p, const float *x, unsigned char *packed, uint16_t *full, float *scratch);
/* packed units and fp16 full rows -> x [heads][positions][row], natural order. */
void tensor_plan_unpack(const TensorPlan *p, const unsigned char *packed, const uint16_t *full, float *x);

/* Binds a LAYERED scheme to the file's shape; a flat group (G > head_dim) is checked on its
 * row of G values instead. */
int compressed_scheme_bind(KvLayered *l, int layers, int head_dim, KvSide side, char *why, size_t len);
/* 64 lowercase hex digits: how a calibration's file sha256 is written. */
int compressed_hash_ok(const char *s);
/* The calibration's geometry is the cache's (what: "the cache", "the file", for the message). */
int compressed_calib_geometry_check(const Calibration *c, int n_layers, int n_kv_heads, int head_dim, const char *what,
                                    Error *err);

#endif
