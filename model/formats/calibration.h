/* model/formats/calibration.h: calibration files (SCHEMES.md §8, "The file"), what `./run calibrate`
 * writes and the fitted bases read.
 *
 * File: safetensors, every tensor F32; __metadata__ holds
 *   format = "kvq-calibration", model_sha256 and text_sha256 (64 lowercase hex digits: the sha256
 *   of the model.safetensors and of the text it was made from), tokens and ctx (positive integers),
 *   and the checksums of model/formats/st_checksum.h (crc32c.NAME per tensor, header_crc32c),
 *   checked before anything else: a file without them (written before they were added) is refused
 *   with the command that makes it again; other metadata keys are allowed and ignored.
 * Tensors, for every layer L = 0 .. n_layers-1 (decimal, no leading zeros):
 *   stats.k.L, stats.kpre.L, stats.v.L   [n_kv_heads, head_dim, 3]   keys after / before RoPE, values
 *   stats.q.L                            [n_heads, head_dim, 3]      queries after RoPE
 *     the three: mean, mean square and max |x| of the channel over all calibration rows;
 *   aw.k.L, aw.kpre.L, aw.v.L           [n_kv_heads, head_dim]      +aw's channel weights (§9, quant/aw.h):
 *     finite, non-negative; every layer's three or none (files made before §9 have none);
 *   fit.KEY.S.L[.NAME]                   the tables of one fit KEY, side S (k or v) and layer L
 * A fit KEY is a fitted base with the modifiers that change what it sees (kv_fit_key_parse,
 * quant/scheme.h: BASE+had, canonical, at most 48 characters). What it stores is its
 * codec's declaration (KvFitLayout, quant/codec.h) for the file's geometry: each declared tensor
 * NAME ("" gives fit.KEY.S.L itself), of shape [n_kv_heads, dims...] for a per-head fit, else
 * [dims...], and whatever the codec's check asks of a table (an order, say). A +prerope fit has
 * keys' tensors only (its .v tensors would be refused); every other fit has both sides.
 * Every tensor must be one of the above: anything else is refused, as is a fit missing a layer,
 * a side or a tensor.
 *
 * Reading validates the whole file before anything is trusted (metadata, the model's sha256,
 * geometry, every name, dtype and shape, every value finite, statistics non-negative where they
 * must be, the codecs' checks) and refuses with one line naming the file and the problem.
 * Writing is deterministic (tensors per layer: stats q, kpre, k, v, then each fit's k and v, each
 * side's tensors in the declared order, fits in the order they were added) through st_write's
 * temporary file + rename, after the same checks. */
#ifndef KVQ_CALIBRATION_H
#define KVQ_CALIBRATION_H

#include <stddef.h>
#include <stdint.h>
#include "model/formats/safetensors.h"
#include "quant/scheme.h"

#define CALIB_FORMAT "kvq-calibration"
#define CALIB_KEY_MAX 48          /* longest fit key, NUL excluded */
#define CALIB_HASH_HEX 64

/* One fitted base's tables for every layer and side. */
typedef struct {
    char key[CALIB_KEY_MAX + 1];
    KvSpec spec;              /* the key parsed (for keys): its base's codec declares the tables */
    KvFitLayout layout;       /* that declaration for the calibration's head_dim */
    int sides;                /* 2: keys and values; 1: keys only (+prerope) */
    size_t table_floats;      /* one table: the layout's tensors back to back */
    size_t layer_floats;      /* per (layer, side): n_kv_heads tables (layout.per_head), or one */
    float *codebooks;         /* [n_layers][sides][layer_floats], keys first */
} CalibFit;

typedef struct {
    char path[256];           /* the file it was loaded from (for messages); "" when made in memory */
    char file_sha256[CALIB_HASH_HEX + 1];   /* that file's sha256: what results and compressed files record */
    char model_sha256[CALIB_HASH_HEX + 1];
    char text_sha256[CALIB_HASH_HEX + 1];
    long tokens, ctx;
    int n_layers, n_heads, n_kv_heads, head_dim;
    /* [n_layers][heads][head_dim][3]: mean, mean square, max |x| */
    float *stats_k, *stats_kpre, *stats_v;   /* heads = n_kv_heads */
    float *stats_q;                          /* heads = n_heads */
    /* [n_layers][n_kv_heads][head_dim]: +aw's weights of keys after / before RoPE and of values */
    float *aw_k, *aw_kpre, *aw_v;
    int has_aw;                              /* 0: the file had none (they are zeros then) */
    CalibFit *fits;
    int n_fits;
    char model_dir[256];      /* the model directory it was found for ("" when not known): named in the hint */
    int absent;               /* 1: path (the model directory's default) does not exist; a fitted scheme is
                                 refused, naming the ./run calibrate that makes it there */
} Calibration;

/* The model a calibration is loaded for. model_sha256 may be NULL to skip the hash check (tests,
 * inspection); the geometry is always checked. */
typedef struct {
    int n_layers, n_heads, n_kv_heads, head_dim;
    const char *model_sha256;
} CalibModel;

/* An empty calibration of this geometry: zeroed statistics, no fits, metadata to fill in. */
int calibration_init(Calibration *c, int n_layers, int n_heads, int n_kv_heads, int head_dim, Error *err);
/* Adds a fit (key parsed against c->head_dim; not present yet) with zeroed tables; NULL after
 * an error. The pointer stays valid until the next calibration_add_fit or calibration_free. */
CalibFit *calibration_add_fit(Calibration *c, const char *key, Error *err);
/* Frees everything and zeroes c (safe on a zeroed or half-built Calibration). */
void calibration_free(Calibration *c);

/* The same checks the reader applies to values and metadata: 0, or -1 with a message naming
 * path and the tensor the bad value would be written to. */
int calibration_check(const Calibration *c, const char *path, Error *err);

/* Writes c to path (calibration_check first: an invalid calibration writes nothing). */
int calibration_save(const char *path, const Calibration *c, Error *err);

/* Loads and validates path for model (NULL: any geometry, as the file's tensors give it, and no
 * hash check). On failure c is zeroed and nothing stays allocated. */
int calibration_load(const char *path, const CalibModel *model, Calibration *c, Error *err);
/* The same from an opened file (fuzzing, tests). */
int calibration_from_safetensors(const SafeTensors *st, const CalibModel *model, Calibration *c, Error *err);

/* Lookups; NULL when absent or out of range. side is 'k' or 'v'. */
const CalibFit *calibration_find_fit(const Calibration *c, const char *key);
/* The tables of (fit, layer, side): layer_floats floats (a per-head fit's n_kv_heads tables back
 * to back). */
const float *calibration_codebook(const Calibration *c, const char *key, char side, int layer);
/* +aw's weights of (side, layer): n_kv_heads x head_dim floats; side 'k' (prerope: before RoPE)
 * or 'v'. NULL when the calibration has none. */
const float *calibration_aw(const Calibration *c, char side, int prerope, int layer);
/* The table KV head `head` codes with: its own (per-head fit) or the layer's shared one. */
const float *calibration_table(const Calibration *c, const char *key, char side, int layer, int head);

/* ---- What the writer (calibration.c) and the reader (calibration_read.c) share: the size
 * limits, the tensor names, a fit's declaration, its tensors' shapes and place in memory, the
 * metadata checks. Not for other callers. ---- */

/* Sizes beyond any real model, so that products of them stay far from overflow. */
#define CALIB_MAX_LAYERS 4096
#define CALIB_MAX_HEADS 4096
#define CALIB_MAX_HEAD_DIM 65536

/* stats.NAME.L in the file's order within a layer (q, kpre, k, v), the sides of fit.KEY.S.L
 * ('k', 'v') and +aw's aw.NAME.L (k, kpre, v). */
extern const char *const CALIB_STAT_NAMES[4];
extern const char CALIB_SIDE_NAMES[2];
extern const char *const CALIB_AW_NAMES[3];

/* f = the fit of key (kv_fit_key_parse within CALIB_KEY_MAX characters) for rows of head_dim:
 * its codec's declaration of the tables and their sizes; no tables. -1 with why when refused. */
int calib_file_fit_declare(CalibFit *f, const char *key, int n_kv_heads, int head_dim, char *why, size_t why_size);

int calib_file_geometry_ok(int n_layers, int n_heads, int n_kv_heads, int head_dim);
/* 64 lowercase hex digits. */
int calib_file_hash_ok(const char *s);

/* Tensor names: stats.NAME.L, aw.NAME.L, fit.KEY.S.L[.NAME] (declared tensor `tensor` of f). */
void calib_file_stat_name(char *buf, size_t cap, int which, int layer);
void calib_file_aw_name(char *buf, size_t cap, int which, int layer);
void calib_file_fit_name(char *buf, size_t cap, const CalibFit *f, int side, int layer, int tensor);

/* Declared tensor `tensor` of f as the file holds it: [n_kv_heads, dims...] per head, else
 * [dims...]; returns ndim. */
int calib_file_tensor_shape(const CalibFit *f, int n_kv_heads, int tensor, int64_t shape[ST_MAX_DIMS]);
/* The file's bytes of declared tensor `tensor` (in: need not be aligned for float) into the
 * tables of one (layer, side), each head's part in its own table. */
void calib_file_tensor_scatter(const Calibration *c, const CalibFit *f, float *tables, int tensor, const unsigned char *in);

/* The arrays of CALIB_STAT_NAMES[which] and CALIB_AW_NAMES[which]. */
float *calib_file_stats_array(const Calibration *c, int which);
float *calib_file_aw_array(const Calibration *c, int which);

#endif
