/* model/model.c: load config + safetensors and bind weights by their HF names.
 * Weights are views into the read-only mapping, kept in the file's dtype; the rare tensor
 * the file leaves misaligned for its dtype is copied (realign_weights). */
#include "model/model.h"
#include "model/kernels/hugepages.h"
#include "model/formats/fileio.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* Finds name and checks its dtype and shape against what the config says. */
static int bind(Matrix *mat, const SafeTensors *st, const char *name, int rows, int cols, Error *err) {
    const Tensor *t = st_find(st, name);
    if (!t) return error_set(err, "%s: missing tensor %s", st->path, name);
    if (t->dtype != DT_F32 && t->dtype != DT_F16 && t->dtype != DT_BF16)
        return error_set(err, "%s: tensor %s has dtype %s (F32, F16 or BF16 expected)",
                         st->path, name, dtype_name(t->dtype));
    int ok = rows == 1 ? (t->ndim == 1 && t->shape[0] == cols)
                       : (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols);
    if (!ok) {
        if (rows == 1)
            return error_set(err, "%s: tensor %s should have shape [%d] for this config", st->path, name, cols);
        return error_set(err, "%s: tensor %s should have shape [%d, %d] for this config",
                         st->path, name, rows, cols);
    }
    mat->data = t->data;
    mat->dtype = t->dtype;
    mat->rows = rows;
    mat->cols = cols;
    return 0;
}

/* bind() for "model.layers.<layer>.<suffix>". */
static int bind_in_layer(Matrix *mat, const SafeTensors *st, int layer, const char *suffix,
                         int rows, int cols, Error *err) {
    char name[160];
    snprintf(name, sizeof name, "model.layers.%d.%s", layer, suffix);
    return bind(mat, st, name, rows, cols, err);
}

static int bind_layer(LayerWeights *lw, const SafeTensors *st, const Config *c, int i, Error *err) {
    int kv_dim = c->n_kv_heads * c->head_dim;
    if (bind_in_layer(&lw->attn_norm, st, i, "input_layernorm.weight", 1, c->dim, err) ||
        bind_in_layer(&lw->wq, st, i, "self_attn.q_proj.weight", c->dim, c->dim, err) ||
        bind_in_layer(&lw->wk, st, i, "self_attn.k_proj.weight", kv_dim, c->dim, err) ||
        bind_in_layer(&lw->wv, st, i, "self_attn.v_proj.weight", kv_dim, c->dim, err) ||
        bind_in_layer(&lw->wo, st, i, "self_attn.o_proj.weight", c->dim, c->dim, err) ||
        bind_in_layer(&lw->mlp_norm, st, i, "post_attention_layernorm.weight", 1, c->dim, err) ||
        bind_in_layer(&lw->w_gate, st, i, "mlp.gate_proj.weight", c->hidden_dim, c->dim, err) ||
        bind_in_layer(&lw->w_up, st, i, "mlp.up_proj.weight", c->hidden_dim, c->dim, err) ||
        bind_in_layer(&lw->w_down, st, i, "mlp.down_proj.weight", c->dim, c->hidden_dim, err))
        return -1;
    return 0;
}

static int bind_weights(Model *m, Error *err) {
    const Config *c = &m->config;
    Weights *w = &m->weights;
    w->layers = calloc((size_t)c->n_layers, sizeof *w->layers);
    if (!w->layers) return error_set(err, "%s: out of memory", m->file.path);
    if (bind(&w->embed, &m->file, "model.embed_tokens.weight", c->vocab_size, c->dim, err)) return -1;
    for (int i = 0; i < c->n_layers; i++)
        if (bind_layer(&w->layers[i], &m->file, c, i, err)) return -1;
    if (bind(&w->final_norm, &m->file, "model.norm.weight", 1, c->dim, err)) return -1;
    if (c->tied_embeddings && !st_find(&m->file, "lm_head.weight")) {
        w->lm_head = w->embed;
        return 0;
    }
    return bind(&w->lm_head, &m->file, "lm_head.weight", c->vocab_size, c->dim, err);
}

/* The i-th of the 3 + 9 * n_layers weight matrices (lm_head may be a copy of embed's view). */
static Matrix *matrix_at(Weights *w, int i) {
    if (i == 0) return &w->embed;
    if (i == 1) return &w->final_norm;
    if (i == 2) return &w->lm_head;
    LayerWeights *l = &w->layers[(i - 3) / 9];
    Matrix *const in_layer[9] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo,
                                 &l->mlp_norm, &l->w_gate, &l->w_up, &l->w_down};
    return in_layer[(i - 3) % 9];
}

/* Bytes of a copied matrix, rounded up so the next copy starts on a cache line too. */
static size_t copy_bytes(const Matrix *w) {
    size_t n = (size_t)w->rows * (size_t)w->cols * dtype_size(w->dtype);
    return (n + 63) / 64 * 64;
}

static int misaligned(const Matrix *w) { return (uintptr_t)w->data % dtype_size(w->dtype) != 0; }

/* The kernels read weights through float and uint16_t pointers, which C allows only at
 * addresses aligned for the type. The format does not align tensors (the data area starts
 * wherever the header ends, offsets are arbitrary), so a valid file can put one at an odd
 * address: each such tensor is copied into one owned buffer (m->owned_weights) here, once,
 * instead of every kernel paying for unaligned loads. Files from export.py, st_write and HF
 * are aligned: nothing is copied and the weights stay in the mapping. */
static int realign_weights(Model *m, Error *err) {
    Weights *w = &m->weights;
    int n = 3 + 9 * m->config.n_layers, tied = w->lm_head.data == w->embed.data;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (!(tied && i == 2) && misaligned(matrix_at(w, i))) total += copy_bytes(matrix_at(w, i));
    if (total == 0) return 0;
    unsigned char *dst = huge_alloc(total);
    if (!dst) return error_set(err, "%s: out of memory for %zu bytes of misaligned tensors", m->file.path, total);
    m->owned_weights = dst;
    for (int i = 0; i < n; i++) {
        Matrix *mat = matrix_at(w, i);
        if ((tied && i == 2) || !misaligned(mat)) continue;
        memcpy(dst, mat->data, (size_t)mat->rows * (size_t)mat->cols * dtype_size(mat->dtype));
        mat->data = dst;
        dst += copy_bytes(mat);
    }
    if (tied) w->lm_head = w->embed;
    return 0;
}

/* HF computes inv_freq = 1 / theta^(2i/d) in float32; we do the same for identical angles. */
int model_init_rope(Model *m, Error *err) {
    int half = m->config.head_dim / 2;
    m->rope_inv_freq = malloc((size_t)half * sizeof(float));
    if (!m->rope_inv_freq) return error_set(err, "out of memory");
    for (int i = 0; i < half; i++) {
        float exponent = (float)(2 * i) / (float)m->config.head_dim;
        m->rope_inv_freq[i] = 1.0f / powf(m->config.rope_theta, exponent);
    }
    return 0;
}

int model_load_files(Model *m, const char *config_path, const char *weights_path, Error *err) {
    memset(m, 0, sizeof *m);
    if (config_load(&m->config, config_path, err)) return -1;
    if (st_open(&m->file, weights_path, err)) return -1;
    if (bind_weights(m, err) || realign_weights(m, err) || model_init_rope(m, err)) {
        model_free(m);
        return -1;
    }
    return 0;
}

int model_load(Model *m, const char *dir, Error *err) {
    char config_path[4096], weights_path[4096];
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    snprintf(weights_path, sizeof weights_path, "%s/model.safetensors", dir);
    if (path_exists(dir) && !path_exists(config_path)) {   /* a directory, but not a model's */
        memset(m, 0, sizeof *m);
        return error_set(err, "%s: not a model directory (no config.json; a model directory holds config.json, "
                         "model.safetensors and tokenizer.bin)", dir);
    }
    return model_load_files(m, config_path, weights_path, err);
}

void model_free(Model *m) {
    free(m->weights.layers);
    free(m->owned_weights);
    free(m->rope_inv_freq);
    st_close(&m->file);
    memset(m, 0, sizeof *m);
}
