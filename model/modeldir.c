/* model/modeldir.c: load a model directory; run a prompt through the cache. */
#include "model/modeldir.h"
#include "model/fileio.h"
#include <string.h>

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
