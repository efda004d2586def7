/* model/formats/kvfile.h: KV caches as files — the seed's layout, loading back, checks, statistics.
 * A file knows nothing of the engine: copies to and from a KvCache, and a file's shape checked
 * against a model's config, are in model/modeldir.h.
 *
 * File: safetensors with tensors layer_{i}_key and layer_{i}_value, each
 * [1, n_kv_heads, seq_len, head_dim] (keys after RoPE), F32 or F16, and __metadata__
 * {num_layers, num_kv_heads, seq_len, head_dim, dtype, model_name}, plus tokens, and model_id and
 * model_sha256 (the model's identity by content and its weights' sha256,
 * model/formats/model_identity.h) when known: kv-extract records them, compress and decompress
 * carry them; the same metadata is written beside it as <file>.metadata.json. In memory a
 * KvSnapshot holds the values as f32 in the same order. */
#ifndef KVQ_KVFILE_H
#define KVQ_KVFILE_H

#include "model/formats/safetensors.h"

typedef struct {
    int n_layers, n_kv_heads, seq_len, head_dim;
    float *k, *v;             /* [n_layers][n_kv_heads][seq_len][head_dim] */
    char model_name[128];
    char dtype[16];           /* "float32" or "float16": how the file stores it */
    char tokens[4096];        /* optional: the token ids the cache was built from ("1 450 ...") */
    char model_id[65];        /* optional ("" unknown): the identity of the model that made it */
    char model_sha256[65];    /* optional: that model's model.safetensors sha256 (what a calibration records) */
} KvSnapshot;

/* Elements in one layer's key (or value) tensor. */
size_t kv_snapshot_layer_size(const KvSnapshot *s);

/* Allocates k and v for the shape s holds (n_layers, n_kv_heads, seq_len, head_dim). */
int kv_snapshot_alloc(KvSnapshot *s, Error *err);

/* Saves as safetensors (dtype DT_F32 or DT_F16) plus the .metadata.json sidecar. */
int kv_snapshot_save(const char *path, const KvSnapshot *s, DType dtype, Error *err);
/* Loads a cache file; checks names, ranks, shapes and metadata agree (a model_id or model_sha256
 * that is not 64 lowercase hex digits is refused). */
int kv_snapshot_load(const char *path, KvSnapshot *s, Error *err);
/* Same from an already opened file (fuzzing, tests). */
int kv_snapshot_from_safetensors(const SafeTensors *st, KvSnapshot *s, Error *err);
void kv_snapshot_free(KvSnapshot *s);
/* The optional model_id and model_sha256 of a file's metadata into s: each absent, or 64 lowercase
 * hex digits (else refused naming the key); shared with compressed files. */
int kv_snapshot_read_identity(const SafeTensors *st, KvSnapshot *s, Error *err);

/* The seed's compute_kv_cache_stats. */
typedef struct {
    size_t elements, bytes;   /* bytes as stored in the file's dtype */
    double megabytes;
    double mean, std, min, max;
} KvStats;
void kv_snapshot_stats(const KvSnapshot *s, KvStats *out);

#endif
