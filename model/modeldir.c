/* model/modeldir.c: load a model directory; run a prompt through the cache; the cache a
 * prompt leaves as a snapshot; snapshots (KV cache files) into and out of the engine's cache,
 * and checked against a config. */
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_BATCH 512   /* tokens per forward call when filling a cache */

int modeldir_load(ModelDir *md, const char *dir, int need_tokenizer, Error *err) {
    memset(md, 0, sizeof *md);
    if (!path_exists(dir)) return error_set(err, "%s: no such model directory", dir);
    if (model_load(&md->model, dir, err)) return -1;
    if (!need_tokenizer) return 0;
    char path[4096], msg[512];
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    md->tok = tokenizer_load(path, msg, sizeof msg);
    if (!md->tok) {
        model_free(&md->model);
        return error_set(err, "%s", msg);
    }
    if (tokenizer_vocab_size(md->tok) != md->model.config.vocab_size) {
        error_set(err, "%s: %d pieces but the model's vocab_size is %d", path,
                  tokenizer_vocab_size(md->tok), md->model.config.vocab_size);
        modeldir_free(md);
        return -1;
    }
    return 0;
}

int modeldir_identity(const char *dir, ModelIdentity *id, Error *err) {
    return model_identity_of(dir, MODEL_IDENTITY_CACHE_MIN_BYTES, id, err);
}

int modeldir_sha256(const char *dir, char hex[65], Error *err) {
    ModelIdentity id;
    if (modeldir_identity(dir, &id, err)) return -1;
    memcpy(hex, id.weights_sha256, sizeof id.weights_sha256);
    return 0;
}

void modeldir_free(ModelDir *md) {
    if (md->tok) tokenizer_free(md->tok);
    md->tok = NULL;
    model_free(&md->model);
}

void prefill(const Model *m, RunState *s, KvCache *kv, const int *tokens, int n) {
    for (int done = 0; done < n;) {
        int T = n - done < s->max_batch ? n - done : s->max_batch;
        int last_batch = done + T == n;
        forward(m, s, kv, tokens + done, T, done, last_batch ? T - 1 : T);
        done += T;
    }
}

/* Token ids as "1 450 4996" for the snapshot's metadata; empty when they do not fit. */
static void tokens_to_text(const int *ids, int n, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + used, cap - used, i ? " %d" : "%d", ids[i]);
        if (w < 0 || (size_t)w >= cap - used) { out[0] = 0; return; }
        used += (size_t)w;
    }
}

int kv_snapshot_of_prompt(const Model *m, const int *ids, int n, const char *model_name, KvSnapshot *snap,
                          Error *err) {
    const Config *c = &m->config;
    if (n < 1 || n > c->max_seq_len)
        return error_set(err, "%d tokens: a prompt needs 1 to %d (the model's context)", n, c->max_seq_len);
    RunState s;
    KvCache kv;
    int rc = -1;
    if (runstate_init(&s, c, n < SNAPSHOT_BATCH ? n : SNAPSHOT_BATCH, err) == 0) {
        if (kv_cache_init(&kv, c, n, s.max_batch, NULL, NULL, err) == 0) {
            prefill(m, &s, &kv, ids, n);
            rc = kv_snapshot_from_cache(snap, &kv, n, model_name, err);
            if (rc == 0) tokens_to_text(ids, n, snap->tokens, sizeof snap->tokens);
            kv_cache_free(&kv);
        }
        runstate_free(&s);
    }
    return rc;
}

/* ---- KV cache files and the engine's cache (model/formats/kvfile.h) ---- */

int kv_snapshot_from_cache(KvSnapshot *s, const KvCache *c, int seq_len, const char *model_name, Error *err) {
    memset(s, 0, sizeof *s);
    if (seq_len < 1 || seq_len > c->len) return error_set(err, "KV cache holds %d positions, not %d", c->len, seq_len);
    s->n_layers = c->n_layers;
    s->n_kv_heads = c->n_kv_heads;
    s->seq_len = seq_len;
    s->head_dim = c->head_dim;
    snprintf(s->model_name, sizeof s->model_name, "%s", model_name);
    snprintf(s->dtype, sizeof s->dtype, "float32");
    if (kv_snapshot_alloc(s, err)) return -1;
    size_t d = (size_t)c->head_dim;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_kv_heads; h++)
            for (int p = 0; p < seq_len; p++) {
                size_t at = (((size_t)l * c->n_kv_heads + h) * seq_len + p) * d;
                kv_cache_read_key(c, l, h, p, s->k + at);
                kv_cache_read_value(c, l, h, p, s->v + at);
            }
    return 0;
}

int kv_snapshot_to_cache(const KvSnapshot *s, KvCache *c, Error *err) {
    if (s->n_layers != c->n_layers || s->n_kv_heads != c->n_kv_heads || s->head_dim != c->head_dim)
        return error_set(err, "KV cache shape [%d layers, %d heads, %d dims] does not fit the model's [%d, %d, %d]",
                         s->n_layers, s->n_kv_heads, s->head_dim, c->n_layers, c->n_kv_heads, c->head_dim);
    if (s->seq_len > c->max_seq) return error_set(err, "KV cache of %d positions exceeds the context %d", s->seq_len, c->max_seq);
    size_t d = (size_t)s->head_dim, width = (size_t)s->n_kv_heads * d;
    float *k = malloc(width * sizeof(float)), *v = malloc(width * sizeof(float));
    if (!k || !v) { free(k); free(v); return error_set(err, "out of memory"); }
    for (int l = 0; l < s->n_layers; l++)
        for (int p = 0; p < s->seq_len; p++) {
            for (int h = 0; h < s->n_kv_heads; h++) {   /* the file is head-major, a write is position-major */
                size_t at = (((size_t)l * s->n_kv_heads + h) * s->seq_len + p) * d;
                memcpy(k + h * d, s->k + at, d * sizeof(float));
                memcpy(v + h * d, s->v + at, d * sizeof(float));
            }
            kv_cache_write(c, l, p, k, v, NULL);   /* a snapshot's keys are after RoPE */
            kv_cache_commit(c, l, p, p + 1);
        }
    c->len = s->seq_len;
    free(k);
    free(v);
    return 0;
}

int kv_snapshot_check_config(const KvSnapshot *s, const Config *c, char *report, size_t report_len) {
    int n = 0;
    size_t used = 0;
    report[0] = 0;
#define MISMATCH(...) do { n++; if (used < report_len) used += (size_t)snprintf(report + used, report_len - used, __VA_ARGS__); } while (0)
    if (s->n_layers != c->n_layers) MISMATCH("num_layers: cache has %d, model has %d\n", s->n_layers, c->n_layers);
    if (s->n_kv_heads != c->n_kv_heads) MISMATCH("num_kv_heads: cache has %d, model has %d\n", s->n_kv_heads, c->n_kv_heads);
    if (s->head_dim != c->head_dim) MISMATCH("head_dim: cache has %d, model has %d\n", s->head_dim, c->head_dim);
    if (s->seq_len > c->max_seq_len) MISMATCH("seq_len: cache has %d, model allows at most %d\n", s->seq_len, c->max_seq_len);
#undef MISMATCH
    return n;
}
