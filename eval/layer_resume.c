/* eval/layer_resume.c: schemes' passes started from the fp32 baseline's residual stream at their
 * first non-fp32 layer (see layer_resume.h). */
#include "eval/layer_resume.h"
#include <stdlib.h>
#include <string.h>

int layer_resume_first_quantized(const KvCacheScheme *scheme, int n_layers) {
    if (!scheme) return n_layers;
    for (int l = 0; l < n_layers; l++)
        if (!kv_spec_is_fp32(kv_layered_at(&scheme->k, l)) || !kv_spec_is_fp32(kv_layered_at(&scheme->v, l)))
            return l;
    return n_layers;
}

/* The layers 1..n_layers some scheme's difference starts at, ascending, into a; their count. */
static int candidate_layers(const int *need, int n_layers, int *a) {
    int m = 0;
    for (int l = 1; l <= n_layers; l++)
        if (need[l] > 0) a[m++] = l;
    return m;
}

/* The dynamic programme of layer_resume_choose over the m candidate layers a[] (weights w[]):
 * best[i * k + j] is the most the schemes whose difference starts at a[i] or above can save when
 * a[i] is held and j more layers above it may be; next[i * k + j] the next held candidate (m:
 * none). Filled from the top candidate down. */
static void choose_table(const int *a, const long *w, int m, int k, long *best, int *next) {
    for (int i = m - 1; i >= 0; i--)
        for (int j = 0; j < k; j++) {
            long below = 0;   /* weights of candidates i .. nx - 1: they start at a[i] */
            long top = 0;
            int arg = m;
            for (int t = i; t < m; t++) top += w[t];
            long best_here = (long)a[i] * top;   /* nothing held above a[i] */
            for (int nx = i + 1; j > 0 && nx < m; nx++) {
                below += w[nx - 1];
                long v = (long)a[i] * below + best[nx * k + j - 1];
                if (v > best_here) best_here = v, arg = nx;
            }
            best[i * k + j] = best_here;
            next[i * k + j] = arg;
        }
}

void layer_resume_choose(const int *need, int n_layers, int k, unsigned char *held) {
    memset(held, 0, (size_t)n_layers + 1);
    int *a = malloc(((size_t)n_layers + 1) * sizeof *a);
    if (!a) return;
    int m = candidate_layers(need, n_layers, a);
    if (k >= m) {   /* every layer some scheme starts at */
        for (int i = 0; i < m; i++) held[a[i]] = 1;
    } else if (k > 0) {
        long *w = malloc((size_t)m * sizeof *w), *best = malloc((size_t)m * k * sizeof *best);
        int *next = malloc((size_t)m * k * sizeof *next);
        if (w && best && next) {
            for (int i = 0; i < m; i++) w[i] = need[a[i]];
            choose_table(a, w, m, k, best, next);
            int first = 0;   /* the lowest held layer; schemes below it run whole */
            for (int i = 1; i < m; i++)
                if (best[i * k + k - 1] > best[first * k + k - 1]) first = i;
            for (int i = first, j = k - 1; i < m; i = next[i * k + j], j--) {
                held[a[i]] = 1;
                if (j == 0) break;
            }
        }
        free(w);
        free(best);
        free(next);
    }
    free(a);
}

int layer_resume_init(LayerResume *r, const Config *c, int ctx, const KvCacheScheme *const *schemes, int n_schemes,
                      size_t max_bytes, Error *err) {
    memset(r, 0, sizeof *r);
    int L = c->n_layers;
    r->n_layers = L;
    r->ctx = ctx;
    r->dim = (size_t)c->dim;
    r->n_schemes = n_schemes;
    r->start = calloc((size_t)n_schemes, sizeof *r->start);
    r->x = calloc((size_t)L + 1, sizeof *r->x);
    int *need = calloc((size_t)L + 1, sizeof *need);
    unsigned char *held = malloc((size_t)L + 1);
    if (!r->start || !r->x || !need || !held) {
        free(need);
        free(held);
        layer_resume_free(r);
        return error_set(err, "out of memory");
    }
    int *first = r->start;   /* each scheme's first non-fp32 layer, then its start */
    for (int i = 0; i < n_schemes; i++) need[first[i] = layer_resume_first_quantized(schemes[i], L)]++;
    size_t layer_bytes = (size_t)ctx * r->dim * sizeof(float);
    size_t budget = max_bytes ? max_bytes : LAYER_RESUME_DEFAULT_MAX_BYTES;
    size_t k = budget / layer_bytes;
    layer_resume_choose(need, L, k > (size_t)L ? L : (int)k, held);
    for (int l = 1; l <= L; l++)
        if (held[l] && !(r->x[l] = malloc(layer_bytes))) {
            free(need);
            free(held);
            layer_resume_free(r);
            return error_set(err, "out of memory for the fp32 run's residual stream at layer %d (%zu MiB a layer)",
                             l, layer_bytes >> 20);
        } else if (held[l]) {
            r->bytes += layer_bytes;
        }
    for (int i = 0; i < n_schemes; i++) {
        int s = first[i];
        while (s > 0 && !r->x[s]) s--;
        r->start[i] = s;
    }
    free(need);
    free(held);
    return 0;
}

void layer_resume_free(LayerResume *r) {
    for (int l = 0; r->x && l <= r->n_layers; l++) free(r->x[l]);
    free(r->x);
    free(r->start);
    memset(r, 0, sizeof *r);
}

/* Rows pos..pos+T-1 of held layer l: where s->x's T rows go, or come from. */
static float *held_rows(const LayerResume *r, int l, int pos) { return r->x[l] + (size_t)pos * r->dim; }

void layer_resume_forward_baseline(const LayerResume *r, const Model *m, RunState *s, KvCache *kv, const int *tokens,
                                   int T, int pos, int logits_from) {
    size_t rows = (size_t)T * r->dim * sizeof(float);
    forward_begin(m, s, tokens, T, pos);
    for (int l = 0; l < r->n_layers; l++) {
        if (r->x[l]) memcpy(held_rows(r, l, pos), s->x, rows);
        forward_layer(m, s, kv, l, T, pos, logits_from);
    }
    if (r->x[r->n_layers]) memcpy(held_rows(r, r->n_layers, pos), s->x, rows);
    forward_end(m, s, kv, T, pos, logits_from);
}

int layer_resume_forward_scheme(const LayerResume *r, int i, const Model *m, RunState *s, KvCache *kv,
                                const int *tokens, int T, int pos, int logits_from) {
    int start = r->start[i];
    if (start == 0) {
        forward(m, s, kv, tokens, T, pos, logits_from);
        return r->n_layers;
    }
    forward_begin(m, s, NULL, T, pos);   /* the RoPE angles; x comes from the baseline */
    memcpy(s->x, held_rows(r, start, pos), (size_t)T * r->dim * sizeof(float));
    for (int l = start; l < r->n_layers; l++) forward_layer(m, s, kv, l, T, pos, logits_from);
    forward_end(m, s, kv, T, pos, logits_from);
    return r->n_layers - start;
}
