/* model/modeldir.c: load a model directory; run a prompt through the cache; the cache a
 * prompt leaves as a snapshot. */
#include "model/modeldir.h"
#include "model/formats/fileio.h"
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
        if (kv_cache_init(&kv, c, n, s.max_batch, NULL, NULL, NULL, err) == 0) {
            prefill(m, &s, &kv, ids, n);
            rc = kv_snapshot_from_cache(snap, &kv, n, model_name, err);
            if (rc == 0) tokens_to_text(ids, n, snap->tokens, sizeof snap->tokens);
            kv_cache_free(&kv);
        }
        runstate_free(&s);
    }
    return rc;
}
