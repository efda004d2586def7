/* model/formats/calib_bind.h: a fitted base's tables from a calibration, bound per KV head
 * (shared by a layer's KV heads or one per head, as the codec's KvFit declares). What the
 * KV cache (model/kvcache.c) and compressed KV files (compress_plan.c) both use, so that a file
 * packs with the very tables a cache of the same model would.
 *
 * The calibration must already have the geometry of the rows it is bound to (its loader
 * checks it against the model; compress checks it against the cache file): the layer, KV head
 * count and head_dim given here index into it. */
#ifndef KVQ_CALIB_BIND_H
#define KVQ_CALIB_BIND_H

#include "model/formats/calibration.h"
#include "quant/scheme.h"

/* head_specs[h] = *spec for every KV head h of n_kv_heads, each with its base.table bound to
 * the calibration's codebook of (spec's fit key, layer, spec's side) — head h's for a per-head
 * table. A spec whose base is not fitted is copied as it is (calib may be NULL). Refused with
 * one line: a fitted base without a calibration, or with one that lacks the fit (both name the
 * `./run calibrate MODEL_DIR --fit KEY --out FILE` that makes it), or a fit of the wrong size. */
int calib_bind_heads(const KvSpec *spec, const Calibration *calib, int layer, int n_kv_heads, int head_dim,
                     KvSpec *head_specs, Error *err);

#endif
