/* model/formats/model_identity.h: which model a result belongs to, by content, not by path.
 *
 * A model directory's identity is the sha256 of this text (one line each, '\n' after each):
 *
 *     kvq model identity 1
 *     model.safetensors sha256 <64 hex digits>
 *     config.json sha256 <64 hex digits>
 *
 * so that the same weights under another config.json (rope_theta, norm eps, context) are
 * another model, and a copy of a directory anywhere is the same one. Sweeps (sweep.json), ppl
 * shards (--json), KV cache files and compressed files record it as "model_id" and resume,
 * merge and decompress compare it. A calibration (SCHEMES.md §8) records the weights' sha256
 * alone ("model_sha256", as the reference calibrations do); --calib compares that one, which
 * the identity also carries.
 *
 * Hashing model.safetensors reads all of it (TinyLlama's 2.2 GB: about 12 s at the 177 MB/s
 * measured on a loaded 2-core machine), so its sha256 is kept in DIR/kvq-identity.cache for a
 * file of at least MODEL_IDENTITY_CACHE_MIN_BYTES, keyed by the file's device, inode, size,
 * mtime and ctime (ctime, which no tool can set back, catches a file replaced by one of the
 * same size and mtime, as `cp -p` or rsync make). A cache that does not match, does not parse
 * or fails its own CRC-32C is ignored and rewritten (temp file + rename); a directory that
 * cannot be written to just gets no cache. config.json is small and hashed every time. */
#ifndef KVQ_MODEL_IDENTITY_H
#define KVQ_MODEL_IDENTITY_H

#include <stddef.h>
#include "model/formats/error.h"

#define MODEL_IDENTITY_CACHE "kvq-identity.cache"
#define MODEL_IDENTITY_CACHE_MIN_BYTES ((size_t)64 << 20)   /* about 0.3 s of hashing */

typedef struct {
    char weights_sha256[65];     /* sha256 of model.safetensors: what a calibration's model_sha256 is */
    char config_sha256[65];      /* sha256 of config.json */
    char id[65];                 /* the identity above: what sweeps, shards and KV files record */
    int weights_from_cache;      /* 1: weights_sha256 was read from DIR/kvq-identity.cache */
} ModelIdentity;

/* dir's identity; the weights' sha256 from the cache when the file is at least cache_min_bytes
 * (MODEL_IDENTITY_CACHE_MIN_BYTES for ./run; 0 caches any size) and the cache matches the file,
 * else hashed (and the cache rewritten). Errors name the file: a missing or unreadable
 * model.safetensors or config.json, or a model.safetensors that changed while it was hashed. */
int model_identity_of(const char *dir, size_t cache_min_bytes, ModelIdentity *id, Error *err);

/* The identity of the two files' sha256 digests (the text above, hashed). */
void model_identity_combine(const char *weights_sha256, const char *config_sha256, char id[65]);

#endif
