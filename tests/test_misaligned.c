/* tests/test_misaligned.c: weights a valid safetensors file leaves misaligned for their dtype.
 * The format does not align tensors: a header one byte longer moves every tensor to an odd
 * address, where reading them through float or uint16_t pointers is undefined behaviour
 * (UBSan: "load of misaligned address"). model_load must copy them and give the same logits,
 * bit for bit, as the aligned file: checked for F32 (stories260K, tied embeddings), BF16
 * (random-gqa8, untied lm_head) and F16 (stories260K converted here). */
#include "tests/test.h"
#include "model/formats/fileio.h"
#include "model/kernels/kernels.h"
#include "model/model.h"
#include "quant/half.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_TOKENS 7
#define MAX_FILE (64u << 20)

/* Writes src to dst with one more space at the end of the JSON header (and the header length
 * one larger), so the data area and every tensor in it start one byte later. */
static int write_padded(const char *src, const char *dst) {
    size_t len;
    Error err;
    unsigned char *b = (unsigned char *)read_whole_file(src, MAX_FILE, &len, &err);
    uint64_t n = 0;
    for (int i = 0; b && len >= 8 && i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    FILE *f = b && len >= 8 && n <= len - 8 ? fopen(dst, "wb") : NULL;
    int ok = f != NULL;
    if (ok) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((n + 1) >> (8 * i));
        ok = fwrite(len8, 1, 8, f) == 8 && fwrite(b + 8, 1, n, f) == n && fputc(' ', f) == ' ' &&
             fwrite(b + 8 + n, 1, len - 8 - n, f) == len - 8 - n;
        ok = fclose(f) == 0 && ok;
    }
    free(b);
    return ok ? 0 : -1;
}

/* src's tensors (all F32) converted to F16, written aligned by st_write. */
static int write_f16_copy(const char *src, const char *dst) {
    SafeTensors st;
    Error err;
    if (st_open(&st, src, &err)) return -1;
    StTensorOut *out = calloc((size_t)st.n_tensors, sizeof *out);
    uint16_t **halves = calloc((size_t)st.n_tensors, sizeof *halves);
    int rc = out && halves ? 0 : -1;
    for (int i = 0; rc == 0 && i < st.n_tensors; i++) {
        const Tensor *t = &st.tensors[i];
        halves[i] = malloc(t->numel * sizeof(uint16_t) + 1);
        if (t->dtype != DT_F32 || !halves[i]) { rc = -1; break; }
        for (size_t j = 0; j < t->numel; j++) {
            float v;
            memcpy(&v, (const unsigned char *)t->data + 4 * j, sizeof v);
            halves[i][j] = f32_to_f16(v);
        }
        out[i] = (StTensorOut){t->name, DT_F16, t->ndim, {0}, halves[i]};
        memcpy(out[i].shape, t->shape, sizeof t->shape);
    }
    if (rc == 0) rc = st_write(dst, out, st.n_tensors, NULL, NULL, 0, &err);
    for (int i = 0; halves && i < st.n_tensors; i++) free(halves[i]);
    free(halves);
    free(out);
    st_close(&st);
    return rc;
}

/* Logits of a batch of N_TOKENS, then of one more token decoded after it. */
static float *logits_of(const Model *m) {
    const Config *c = &m->config;
    int tokens[N_TOKENS + 1];
    for (int i = 0; i <= N_TOKENS; i++) tokens[i] = (1 + 37 * i) % c->vocab_size;
    RunState s;
    KvCache kv;
    Error err;
    if (runstate_init(&s, c, N_TOKENS, &err)) return NULL;
    float *out = NULL;
    if (kv_cache_init(&kv, c, N_TOKENS + 1, N_TOKENS, NULL, NULL, &err) == 0) {   /* fp32 */
        size_t V = (size_t)c->vocab_size;
        out = malloc((N_TOKENS + 1) * V * sizeof(float));
        if (out) {
            forward(m, &s, &kv, tokens, N_TOKENS, 0, 0);
            memcpy(out, s.logits, N_TOKENS * V * sizeof(float));
            forward(m, &s, &kv, tokens + N_TOKENS, 1, N_TOKENS, 0);
            memcpy(out + N_TOKENS * V, s.logits, V * sizeof(float));
        }
        kv_cache_free(&kv);
    }
    runstate_free(&s);
    return out;
}

/* Every weight matrix's data aligned for its dtype; how many of them were checked. */
static int count_aligned(const Model *m, int *n_checked) {
    const Weights *w = &m->weights;
    const Matrix *all[3] = {&w->embed, &w->final_norm, &w->lm_head};
    int aligned = 0, n = 0;
    for (int i = 0; i < 3; i++, n++) aligned += (uintptr_t)all[i]->data % dtype_size(all[i]->dtype) == 0;
    for (int l = 0; l < m->config.n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        const Matrix *in_layer[9] = {&lw->attn_norm, &lw->wq, &lw->wk, &lw->wv, &lw->wo,
                                     &lw->mlp_norm, &lw->w_gate, &lw->w_up, &lw->w_down};
        for (int i = 0; i < 9; i++, n++) aligned += (uintptr_t)in_layer[i]->data % dtype_size(in_layer[i]->dtype) == 0;
    }
    *n_checked = n;
    return aligned;
}

static void check_model(const char *label, const char *config, const char *aligned_path, const char *padded_path) {
    char name[160];
    Model a, p;
    Error err;
    snprintf(name, sizeof name, "misaligned %s: padded copy written", label);
    if (!check(write_padded(aligned_path, padded_path) == 0, name, "cannot write %s", padded_path)) return;
    snprintf(name, sizeof name, "misaligned %s: aligned file loads", label);
    int ok = check(model_load_files(&a, config, aligned_path, &err) == 0, name, "%s", err.msg);
    snprintf(name, sizeof name, "misaligned %s: padded file loads", label);
    if (ok && !check(model_load_files(&p, config, padded_path, &err) == 0, name, "%s", err.msg)) {
        model_free(&a);
        ok = 0;
    }
    unlink(padded_path);
    if (!ok) return;
    const Tensor *t = st_find(&p.file, "model.norm.weight");
    snprintf(name, sizeof name, "misaligned %s: the padded file's tensors are misaligned in the mapping", label);
    check(t && (uintptr_t)t->data % dtype_size(t->dtype) != 0, name, "model.norm.weight at %p", t ? t->data : NULL);
    snprintf(name, sizeof name, "misaligned %s: aligned file copies nothing, padded one copies", label);
    check(a.owned_weights == NULL && p.owned_weights != NULL, name, "owned %p / %p", a.owned_weights, p.owned_weights);
    int n, aligned = count_aligned(&p, &n);
    snprintf(name, sizeof name, "misaligned %s: every weight aligned after loading", label);
    check(aligned == n, name, "%d of %d aligned", aligned, n);
    snprintf(name, sizeof name, "misaligned %s: tied lm_head stays the embedding", label);
    if (p.config.tied_embeddings) check(p.weights.lm_head.data == p.weights.embed.data, name, "lm_head was copied apart");
    float *la = logits_of(&a), *lp = logits_of(&p);
    size_t bytes = (N_TOKENS + 1) * (size_t)a.config.vocab_size * sizeof(float);
    snprintf(name, sizeof name, "misaligned %s: logits identical to the aligned file", label);
    check(la && lp && memcmp(la, lp, bytes) == 0, name, "logits differ (or no memory)");
    free(la);
    free(lp);
    model_free(&a);
    model_free(&p);
}

int main(void) {
    char padded[96], f16[96];
    snprintf(padded, sizeof padded, "build/test-misaligned-%ld.safetensors", (long)getpid());
    snprintf(f16, sizeof f16, "build/test-misaligned-f16-%ld.safetensors", (long)getpid());
    check_model("F32", "data/models/stories260K/config.json", "data/models/stories260K/model.safetensors", padded);
    check_model("BF16", "data/models/random-gqa8/config.json", "data/models/random-gqa8/model.safetensors", padded);
    if (check(write_f16_copy("data/models/stories260K/model.safetensors", f16) == 0, "misaligned F16: F16 copy written",
              "cannot write %s", f16))
        check_model("F16", "data/models/stories260K/config.json", f16, padded);
    unlink(f16);
    return test_exit_code();
}
