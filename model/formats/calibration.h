/* model/formats/calibration.h: calibration files (SCHEMES.md §8, "The file"), what `./run calibrate`
 * writes and the fitted bases (nuqB-gG / nuqB-tG tables, vqC-dD codebooks) read.
 *
 * File: safetensors, every tensor F32; __metadata__ holds
 *   format = "kvq-calibration", model_sha256 and text_sha256 (64 lowercase hex digits: the sha256
 *   of the model.safetensors and of the text it was made from), tokens and ctx (positive integers);
 *   other metadata keys are allowed and ignored.
 * Tensors, for every layer L = 0 .. n_layers-1 (decimal, no leading zeros):
 *   stats.k.L, stats.kpre.L, stats.v.L   [n_kv_heads, head_dim, 3]   keys after / before RoPE, values
 *   stats.q.L                            [n_heads, head_dim, 3]      queries after RoPE
 *     the three: mean, mean square and max |x| of the channel over all calibration rows;
 *   aw.k.L, aw.kpre.L, aw.v.L           [n_kv_heads, head_dim]      +aw's channel weights (§9, quant/aw.h):
 *     finite, non-negative; every layer's three or none (files made before §9 have none);
 *   fit.KEY.k.L, fit.KEY.v.L             one fitted codebook per fit KEY, layer and side
 *     nuqB-gG, nuqB-tG: [2^B], non-decreasing (§8 stores T ascending; equal neighbours, which only
 *                       degenerate data gives, are accepted)
 *     vqC-dD:           [n_kv_heads, head_dim/D, 2^C, D]
 *     rvqCxS-dD:        [n_kv_heads, head_dim/D, S, 2^C, D]   (§9)
 *     pcaB:             four tensors fit.KEY.{k,v}.L.{mean,basis,bits,tables}: [n_kv_heads, head_dim],
 *                       [n_kv_heads, head_dim, head_dim], [n_kv_heads, head_dim] (whole numbers 0..8
 *                       summing to at most B x head_dim), [n_kv_heads, head_dim, 256] (§9); held in
 *                       memory per KV head as one block (quant/pca.h's pca_head_view)
 * A fit KEY is a base with the modifiers that change what it sees, in this order:
 *   BASE ( "+had" )? ( "+prerope" )? ( "+out" K )? ( "+aw" )?
 *   BASE := nuqB-gG | nuqB-tG | vqC-dD | rvqCxS-dD | pcaB      (pca: no +had, no +out; +aw: no +had)
 * with B in 2..4, G a positive integer, C in 1..12, D in 1, 2, 4, 8, 16 dividing head_dim,
 * 1 <= K < head_dim, numbers in canonical decimal. +prerope concerns keys only, so a +prerope fit
 * has keys' tensors only (its .v tensors would be refused); every other fit has both sides.
 * Every tensor must be one of the above: anything else is refused, as is a fit missing a layer
 * or a side.
 *
 * Reading validates the whole file before anything is trusted (metadata, the model's sha256,
 * geometry, every name, dtype and shape, every value finite, statistics non-negative where they
 * must be, tables ordered) and refuses with one line naming the file and the problem.
 * Writing is deterministic (tensors per layer: stats q, kpre, k, v, then each fit's k and v in the
 * order the fits were added) through st_write's temporary file + rename, after the same checks. */
#ifndef KVQ_CALIBRATION_H
#define KVQ_CALIBRATION_H

#include <stddef.h>
#include "model/formats/safetensors.h"

#define CALIB_FORMAT "kvq-calibration"
#define CALIB_KEY_MAX 48          /* longest fit key, NUL excluded */
#define CALIB_HASH_HEX 64

typedef enum { CALIB_NUQ, CALIB_VQ, CALIB_RVQ, CALIB_PCA } CalibBaseKind;

/* A parsed fit key. */
typedef struct {
    CalibBaseKind kind;
    int bits;          /* nuq: B (a table of 2^B); vq, rvq: C (2^C centroids) */
    int stages;        /* rvq: S */
    int pca_scaled;    /* pca: B x 10^4 (B may be fractional) */
    int group;         /* nuq: G */
    int token_axis;    /* nuq: 1 for nuqB-tG */
    int sub_dim;       /* vq: D; nuq: 1 */
    int had, prerope;  /* the modifiers present */
    int outliers;      /* K of +outK, 0 without */
    int aw;            /* +aw */
} CalibFitKey;

/* Parses a fit key for a model of head_dim; 0, or -1 with the reason in why ("bits must be 2, 3
 * or 4"). A key must be in canonical form (it names tensors, so "nuq3-g064" is not "nuq3-g64"). */
int calib_fit_key_parse(const char *key, int head_dim, CalibFitKey *out, char *why, size_t why_size);

/* One fitted base's codebooks for every layer and side. */
typedef struct {
    char key[CALIB_KEY_MAX + 1];
    CalibFitKey parsed;
    int sides;                /* 2: keys and values; 1: keys only (+prerope) */
    size_t codebook_floats;   /* floats per (layer, side): nuq 2^B; vq n_kv_heads * (head_dim/D) * 2^C * D;
                                 rvq S times vq's; pca n_kv_heads * pca_head_floats(head_dim) */
    float *codebooks;         /* [n_layers][sides][codebook_floats], keys first */
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
} Calibration;

/* The model a calibration is loaded for. model_sha256 may be NULL to skip the hash check (tests,
 * inspection); the geometry is always checked. */
typedef struct {
    int n_layers, n_heads, n_kv_heads, head_dim;
    const char *model_sha256;
} CalibModel;

/* An empty calibration of this geometry: zeroed statistics, no fits, metadata to fill in. */
int calibration_init(Calibration *c, int n_layers, int n_heads, int n_kv_heads, int head_dim, Error *err);
/* Adds a fit (key parsed against c->head_dim; not present yet) with zeroed codebooks; NULL after
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
/* The codebook of (fit, layer, side): codebook_floats floats (a table of 2^B, or vq's
 * [n_kv_heads][head_dim/D][2^C][D]). */
const float *calibration_codebook(const Calibration *c, const char *key, char side, int layer);
/* +aw's weights of (side, layer): n_kv_heads x head_dim floats; side 'k' (prerope: before RoPE)
 * or 'v'. NULL when the calibration has none. */
const float *calibration_aw(const Calibration *c, char side, int prerope, int layer);
/* vq only: the 2^C x D floats of KV head `head`'s sub-vector j. */
const float *calibration_vq_codebook(const Calibration *c, const char *key, char side, int layer, int head, int j);

#endif
