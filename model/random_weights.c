/* model/random_weights.c: a model with seeded random weights, for benchmarks.
 * The shape comes from a config.json (TinyLlama's ships in data/), the weights live in
 * one owned buffer in the requested dtype, and the Matrix views are bound exactly as
 * model_load binds a file's tensors, so the forward pass cannot tell the difference. */
#include "model/model.h"
#include "model/kernels/hugepages.h"
#include "quant/half.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values are cut into chunks with their own seed so OpenMP threads fill them in any
 * order and the result is still a function of the seed alone. */
#define FILL_CHUNK (1 << 20)
/* Far above any real model, far below size_t overflow even when multiplied by 8. */
#define MAX_ELEMENTS ((size_t)1 << 40)

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-amp, amp) from the top 24 bits of a random word. */
static float uniform_from(uint64_t r, float amp) {
    return ((float)(r >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * amp;
}

/* Nearest-even bf16 of a finite float, inline: the billion calls of a 1B model add up. */
static uint16_t bf16_of_finite(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void store_value(void *base, DType dtype, size_t i, float v) {
    if (dtype == DT_F32) ((float *)base)[i] = v;
    else if (dtype == DT_F16) ((uint16_t *)base)[i] = f32_to_f16(v);
    else ((uint16_t *)base)[i] = bf16_of_finite(v);
}

/* Fills n values at element offset `first` of buf; constant != 0 gives that value everywhere (norms). */
static void fill(void *buf, DType dtype, size_t first, size_t n, uint64_t seed, float amp, float constant) {
    long n_chunks = (long)((n + FILL_CHUNK - 1) / FILL_CHUNK);
    #pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (long c = 0; c < n_chunks; c++) {
        uint64_t state = seed ^ ((uint64_t)first + (uint64_t)c * FILL_CHUNK) * 0x2545f4914f6cdd1dull;
        size_t lo = (size_t)c * FILL_CHUNK, hi = lo + FILL_CHUNK < n ? lo + FILL_CHUNK : n;
        for (size_t i = lo; i < hi; i++) {
            float v = constant != 0.0f ? constant : uniform_from(splitmix64(&state), amp);
            store_value(buf, dtype, first + i, v);
        }
    }
}

typedef struct {
    unsigned char *base;  /* NULL while counting */
    DType dtype;
    size_t used;          /* elements so far */
    uint64_t seed;
    int too_big;          /* the count passed MAX_ELEMENTS */
} Arena;

/* Binds mat to the next rows x cols elements of the arena (or only counts them). */
static void take(Arena *a, Matrix *mat, int rows, int cols, float constant) {
    size_t n = (size_t)rows * (size_t)cols;   /* ints: cannot overflow 64 bits */
    if (a->too_big || n > MAX_ELEMENTS - a->used) {
        a->too_big = 1;
        return;
    }
    if (a->base) {
        mat->data = a->base + a->used * dtype_size(a->dtype);
        mat->dtype = a->dtype;
        mat->rows = rows;
        mat->cols = cols;
        fill(a->base, a->dtype, a->used, n, a->seed, 0.05f, constant);
    }
    /* Keep every tensor 64-byte aligned, as a well-made file would be. */
    size_t align = 64 / dtype_size(a->dtype);
    a->used += (n + align - 1) / align * align;
}

static void lay_out(Arena *a, Weights *w, const Config *c) {
    int kv_dim = c->n_kv_heads * c->head_dim;
    Matrix scratch;
    take(a, a->base ? &w->embed : &scratch, c->vocab_size, c->dim, 0.0f);
    for (int i = 0; i < c->n_layers; i++) {
        LayerWeights *l = a->base ? &w->layers[i] : NULL;
        take(a, l ? &l->attn_norm : &scratch, 1, c->dim, 1.0f);
        take(a, l ? &l->wq : &scratch, c->dim, c->dim, 0.0f);
        take(a, l ? &l->wk : &scratch, kv_dim, c->dim, 0.0f);
        take(a, l ? &l->wv : &scratch, kv_dim, c->dim, 0.0f);
        take(a, l ? &l->wo : &scratch, c->dim, c->dim, 0.0f);
        take(a, l ? &l->mlp_norm : &scratch, 1, c->dim, 1.0f);
        take(a, l ? &l->w_gate : &scratch, c->hidden_dim, c->dim, 0.0f);
        take(a, l ? &l->w_up : &scratch, c->hidden_dim, c->dim, 0.0f);
        take(a, l ? &l->w_down : &scratch, c->dim, c->hidden_dim, 0.0f);
    }
    take(a, a->base ? &w->final_norm : &scratch, 1, c->dim, 1.0f);
    if (c->tied_embeddings) {
        if (a->base) w->lm_head = w->embed;
    } else {
        take(a, a->base ? &w->lm_head : &scratch, c->vocab_size, c->dim, 0.0f);
    }
}


int model_init_random(Model *m, const char *config_path, DType dtype, uint64_t seed, Error *err) {
    memset(m, 0, sizeof *m);
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return error_set(err, "random weights: dtype %s (F32, F16 or BF16 expected)", dtype_name(dtype));
    if (config_load(&m->config, config_path, err)) return -1;
    Arena a = {NULL, dtype, 0, seed, 0};
    lay_out(&a, &m->weights, &m->config);   /* counting pass */
    if (a.too_big)
        return error_set(err, "%s: model too large for random weights", config_path);
    size_t bytes = a.used * dtype_size(dtype);
    m->owned_weights = huge_alloc(bytes);
    m->weights.layers = calloc((size_t)m->config.n_layers, sizeof *m->weights.layers);
    if (!m->owned_weights || !m->weights.layers) {
        model_free(m);
        return error_set(err, "%s: out of memory for %zu bytes of random weights", config_path, bytes);
    }
    a.base = m->owned_weights;
    a.used = 0;
    lay_out(&a, &m->weights, &m->config);
    if (model_init_rope(m, err)) {
        model_free(m);
        return -1;
    }
    return 0;
}
