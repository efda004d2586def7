/* model/modeldir.h: a model directory as the commands use it — config.json,
 * model.safetensors and tokenizer.bin loaded together — running a prompt, the KV cache a prompt
 * leaves, and KV cache files (model/formats/kvfile.h) meeting the engine's cache and config. */
#ifndef KVQ_MODELDIR_H
#define KVQ_MODELDIR_H

#include "model/formats/kvfile.h"
#include "model/formats/model_identity.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    Model model;
    Tokenizer *tok;       /* NULL when loaded without a tokenizer */
} ModelDir;

/* Loads dir; the tokenizer too when need_tokenizer (its size must match the vocabulary). */
int modeldir_load(ModelDir *md, const char *dir, int need_tokenizer, Error *err);
void modeldir_free(ModelDir *md);

/* dir's identity by content (model/formats/model_identity.h): the sha256 of model.safetensors and
 * config.json together, and of model.safetensors alone. A large file's hash is cached beside it
 * (DIR/kvq-identity.cache), so only the first run on a model pays for reading it all. */
int modeldir_identity(const char *dir, ModelIdentity *id, Error *err);
/* The sha256 of dir/model.safetensors alone: what a calibration records (SCHEMES.md §8). */
int modeldir_sha256(const char *dir, char hex[65], Error *err);

/* Runs tokens[0..n) from position 0 in batches of at most s->max_batch; leaves the last
 * token's logits in s->logits. */
void prefill(const Model *m, RunState *s, KvCache *kv, const int *tokens, int n);

/* The fp32 KV cache of a prompt, taken out as a snapshot (kv-extract, --validate's step 2):
 * ids[0..n) run from position 0 (n <= the model's context), the ids kept in its metadata. */
int kv_snapshot_of_prompt(const Model *m, const int *ids, int n, const char *model_name, KvSnapshot *snap,
                          Error *err);

/* A KV cache file (model/formats/kvfile.h) and the engine's cache (model/kvcache.h). */
/* Copies the first seq_len positions out of an engine cache (as attention sees them). */
int kv_snapshot_from_cache(KvSnapshot *s, const KvCache *c, int seq_len, const char *model_name, Error *err);
/* Writes a snapshot into an engine cache (through its schemes) so generation can continue. */
int kv_snapshot_to_cache(const KvSnapshot *s, KvCache *c, Error *err);
/* The seed's validate_kv_cache_shape: writes every mismatch with the model's config
 * (one per line) into report and returns how many there were (0: compatible). */
int kv_snapshot_check_config(const KvSnapshot *s, const Config *c, char *report, size_t report_len);

#endif
