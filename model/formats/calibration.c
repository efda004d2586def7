/* model/formats/calibration.c: calibration files, written and validated (layout in calibration.h). */
#include "model/formats/calibration.h"
#include "model/formats/sha256.h"
#include "quant/pca.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sizes beyond any real model, so that products of them stay far from overflow. */
#define CALIB_MAX_LAYERS 4096
#define CALIB_MAX_HEADS 4096
#define CALIB_MAX_HEAD_DIM 65536

static const char *const STAT_NAMES[4] = {"q", "kpre", "k", "v"};   /* the file's order within a layer */
static const char SIDE_NAMES[2] = {'k', 'v'};
static const char *const AW_NAMES[3] = {"k", "kpre", "v"};   /* the file's order within a layer */
/* A pca fit's four tensors per layer and side, in the file's order. */
enum { PCA_PARTS = 4 };
static const char *const PCA_PART_NAMES[PCA_PARTS] = {"mean", "basis", "bits", "tables"};
/* Roles of a file's tensors: stats 0..3, then +aw's weights, then 2 per fit (keys, values). */
enum { AW_SLOT0 = 4, FIT_SLOT0 = 7 };

/* ---- fit keys ---- */

/* Reads a canonical decimal number (no sign, no leading zero) at *s, advancing *s; -1 if none or
 * above limit. */
static long read_number(const char **s, long limit) {
    const char *p = *s;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        int digit = *p - '0';
        if (v > (limit - digit) / 10) return -1;   /* checked before it could overflow */
        v = v * 10 + digit;
    }
    *s = p;
    return v;
}

/* Consumes prefix at *s when present. */
static int take(const char **s, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(*s, prefix, n)) return 0;
    *s += n;
    return 1;
}

static int key_error(char *why, size_t why_size, const char *msg) {
    snprintf(why, why_size, "%s", msg);
    return -1;
}

/* pcaB's B at *s as B x 10^4: canonical ("2", "1.25"; no trailing zero, no leading zero but
 * "0.x"), in (0, 8]. */
static int read_pca_bits(const char **s, int *scaled) {
    const char *p = *s;
    long whole = read_number(&p, 8);
    if (whole < 0) return -1;
    int frac = 0, places = 0;
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9' && places < 4; p++, places++) frac = frac * 10 + (*p - '0');
        if (places == 0 || p[-1] == '0' || (*p >= '0' && *p <= '9')) return -1;
    }
    for (; places < 4; places++) frac *= 10;
    *scaled = (int)whole * 10000 + frac;
    if (*scaled <= 0 || *scaled > 80000) return -1;
    *s = p;
    return 0;
}

int calib_fit_key_parse(const char *key, int head_dim, CalibFitKey *out, char *why, size_t why_size) {
    memset(out, 0, sizeof *out);
    if (strlen(key) > CALIB_KEY_MAX) return key_error(why, why_size, "longer than 48 characters");
    const char *s = key;
    if (take(&s, "nuq")) {
        out->kind = CALIB_NUQ;
        out->sub_dim = 1;
        out->bits = (int)read_number(&s, 99);
        if (out->bits < 2 || out->bits > 4) return key_error(why, why_size, "nuq bits must be 2, 3 or 4");
        if (take(&s, "-t")) out->token_axis = 1;
        else if (!take(&s, "-g")) return key_error(why, why_size, "nuq needs a group: nuqB-gG or nuqB-tG");
        out->group = (int)read_number(&s, 1L << 20);
        if (out->group < 1) return key_error(why, why_size, "the group must be a positive integer");
    } else if (take(&s, "vq")) {
        out->kind = CALIB_VQ;
        out->bits = (int)read_number(&s, 99);
        if (out->bits < 1 || out->bits > 12) return key_error(why, why_size, "vq code bits must be 1 to 12");
        if (!take(&s, "-d")) return key_error(why, why_size, "vq needs a sub-vector size: vqC-dD");
        out->sub_dim = (int)read_number(&s, 99);
        int d = out->sub_dim;
        if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16)
            return key_error(why, why_size, "vq sub-vector size must be 1, 2, 4, 8 or 16");
        if (head_dim % d) return key_error(why, why_size, "vq sub-vector size does not divide head_dim");
    } else if (take(&s, "rvq")) {
        out->kind = CALIB_RVQ;
        out->bits = (int)read_number(&s, 99);
        if (out->bits < 1 || out->bits > 12) return key_error(why, why_size, "rvq code bits must be 1 to 12");
        if (!take(&s, "x")) return key_error(why, why_size, "rvq needs stages: rvqCxS-dD");
        out->stages = (int)read_number(&s, 99);
        if (out->stages < 2 || out->stages > 4) return key_error(why, why_size, "rvq stages must be 2, 3 or 4");
        if (!take(&s, "-d")) return key_error(why, why_size, "rvq needs a sub-vector size: rvqCxS-dD");
        out->sub_dim = (int)read_number(&s, 99);
        int d = out->sub_dim;
        if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16)
            return key_error(why, why_size, "rvq sub-vector size must be 1, 2, 4, 8 or 16");
        if (head_dim % d) return key_error(why, why_size, "rvq sub-vector size does not divide head_dim");
    } else if (take(&s, "pca")) {
        out->kind = CALIB_PCA;
        out->sub_dim = 1;
        if (read_pca_bits(&s, &out->pca_scaled))
            return key_error(why, why_size, "pca needs B in (0, 8], a canonical decimal of at most 4 places");
        if ((long)out->pca_scaled * head_dim % 10000 || head_dim > PCA_TABLE_STRIDE)
            return key_error(why, why_size, "pca: B x head_dim is not a whole number of bits");
    } else {
        return key_error(why, why_size, "not a fitted base (nuqB-gG, nuqB-tG, vqC-dD, rvqCxS-dD or pcaB)");
    }
    /* The modifiers that change what a fit sees, each at most once, in §8's order. */
    out->had = take(&s, "+had");
    out->prerope = take(&s, "+prerope");
    if (take(&s, "+out")) {
        out->outliers = (int)read_number(&s, 1L << 20);
        if (out->outliers < 1 || out->outliers >= head_dim)
            return key_error(why, why_size, "+outK needs 1 <= K < head_dim");
    }
    out->aw = take(&s, "+aw");
    if (*s) return key_error(why, why_size, "modifiers must be +had, +prerope, +outK, +aw, each once, in that order");
    if (out->kind == CALIB_PCA && (out->had || out->outliers))
        return key_error(why, why_size, "pca takes neither +had nor +outK");
    if (out->aw && out->had) return key_error(why, why_size, "+aw does not go with +had");
    return 0;
}

/* 2 sides, or 1 (keys) for a +prerope fit: values never see RoPE. */
static int fit_sides(const CalibFitKey *k) { return k->prerope ? 1 : 2; }

static size_t codebook_floats(const CalibFitKey *k, int n_kv_heads, int head_dim) {
    if (k->kind == CALIB_PCA) return (size_t)n_kv_heads * pca_head_floats(head_dim);
    size_t entries = (size_t)1 << k->bits;
    if (k->kind == CALIB_NUQ) return entries;
    size_t stages = k->kind == CALIB_RVQ ? (size_t)k->stages : 1;
    return (size_t)n_kv_heads * (size_t)(head_dim / k->sub_dim) * stages * entries * (size_t)k->sub_dim;
}

/* ---- the in-memory calibration ---- */

static size_t stats_floats(const Calibration *c, int heads) {
    return (size_t)c->n_layers * (size_t)heads * (size_t)c->head_dim * 3;
}

void calibration_free(Calibration *c) {
    free(c->stats_k);
    free(c->stats_kpre);
    free(c->stats_v);
    free(c->stats_q);
    free(c->aw_k);
    free(c->aw_kpre);
    free(c->aw_v);
    for (int i = 0; i < c->n_fits; i++) free(c->fits[i].codebooks);
    free(c->fits);
    memset(c, 0, sizeof *c);
}

static int geometry_ok(int n_layers, int n_heads, int n_kv_heads, int head_dim) {
    return n_layers >= 1 && n_layers <= CALIB_MAX_LAYERS && n_heads >= 1 && n_heads <= CALIB_MAX_HEADS &&
           n_kv_heads >= 1 && n_kv_heads <= CALIB_MAX_HEADS && head_dim >= 1 && head_dim <= CALIB_MAX_HEAD_DIM;
}

int calibration_init(Calibration *c, int n_layers, int n_heads, int n_kv_heads, int head_dim, Error *err) {
    memset(c, 0, sizeof *c);
    if (!geometry_ok(n_layers, n_heads, n_kv_heads, head_dim))
        return error_set(err, "calibration geometry %d layers, %d heads, %d KV heads, head_dim %d is out of range",
                         n_layers, n_heads, n_kv_heads, head_dim);
    c->n_layers = n_layers;
    c->n_heads = n_heads;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->stats_k = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_kpre = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_v = calloc(stats_floats(c, n_kv_heads), sizeof(float));
    c->stats_q = calloc(stats_floats(c, n_heads), sizeof(float));
    size_t aw_floats = (size_t)n_layers * (size_t)n_kv_heads * (size_t)head_dim;
    c->aw_k = calloc(aw_floats, sizeof(float));
    c->aw_kpre = calloc(aw_floats, sizeof(float));
    c->aw_v = calloc(aw_floats, sizeof(float));
    if (!c->stats_k || !c->stats_kpre || !c->stats_v || !c->stats_q || !c->aw_k || !c->aw_kpre || !c->aw_v) {
        calibration_free(c);
        return error_set(err, "out of memory for the calibration statistics");
    }
    return 0;
}

const CalibFit *calibration_find_fit(const Calibration *c, const char *key) {
    for (int i = 0; i < c->n_fits; i++)
        if (!strcmp(c->fits[i].key, key)) return &c->fits[i];
    return NULL;
}

CalibFit *calibration_add_fit(Calibration *c, const char *key, Error *err) {
    char why[96], shown[72];
    CalibFitKey parsed;
    if (calib_fit_key_parse(key, c->head_dim, &parsed, why, sizeof why)) {
        error_set(err, "fit key '%s': %s", error_shown(key, shown), why);
        return NULL;
    }
    if (calibration_find_fit(c, key)) {
        error_set(err, "fit key '%s' is already in the calibration", key);
        return NULL;
    }
    CalibFit *grown = realloc(c->fits, (size_t)(c->n_fits + 1) * sizeof *grown);
    if (!grown) {
        error_set(err, "out of memory for fit '%s'", key);
        return NULL;
    }
    c->fits = grown;
    CalibFit *f = &c->fits[c->n_fits];
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    f->parsed = parsed;
    f->sides = fit_sides(&parsed);
    f->codebook_floats = codebook_floats(&parsed, c->n_kv_heads, c->head_dim);
    f->codebooks = calloc((size_t)c->n_layers * (size_t)f->sides * f->codebook_floats, sizeof(float));
    if (!f->codebooks) {
        error_set(err, "out of memory for fit '%s'", key);
        return NULL;
    }
    c->n_fits++;
    return f;
}

const float *calibration_codebook(const Calibration *c, const char *key, char side, int layer) {
    const CalibFit *f = calibration_find_fit(c, key);
    int s = side == 'k' ? 0 : side == 'v' ? 1 : -1;
    if (!f || s < 0 || s >= f->sides || layer < 0 || layer >= c->n_layers) return NULL;
    return f->codebooks + ((size_t)layer * (size_t)f->sides + (size_t)s) * f->codebook_floats;
}

static float *aw_array(const Calibration *c, int which) {
    float *arrays[3] = {c->aw_k, c->aw_kpre, c->aw_v};
    return arrays[which];
}

static size_t aw_layer_floats(const Calibration *c) { return (size_t)c->n_kv_heads * (size_t)c->head_dim; }

const float *calibration_aw(const Calibration *c, char side, int prerope, int layer) {
    if (!c->has_aw || layer < 0 || layer >= c->n_layers || (side != 'k' && side != 'v')) return NULL;
    int which = side == 'v' ? 2 : prerope ? 1 : 0;
    return aw_array(c, which) + (size_t)layer * aw_layer_floats(c);
}

const float *calibration_vq_codebook(const Calibration *c, const char *key, char side, int layer, int head, int j) {
    const float *book = calibration_codebook(c, key, side, layer);
    const CalibFit *f = calibration_find_fit(c, key);
    if (!book || f->parsed.kind != CALIB_VQ) return NULL;
    int subs = c->head_dim / f->parsed.sub_dim;
    if (head < 0 || head >= c->n_kv_heads || j < 0 || j >= subs) return NULL;
    size_t entries = (size_t)1 << f->parsed.bits;
    return book + ((size_t)head * (size_t)subs + (size_t)j) * entries * (size_t)f->parsed.sub_dim;
}

/* ---- checks shared by the reader and the writer ---- */

static int hash_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
    return n == CALIB_HASH_HEX;
}

/* "36068468...c60034": enough of a valid hash to tell two apart in a message. */
static const char *short_hash(const char *h, char out[24]) {
    snprintf(out, 24, "%.8s...%.6s", h, h + CALIB_HASH_HEX - 6);
    return out;
}

static void stat_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "stats.%s.%d", STAT_NAMES[which], layer);
}

static void aw_name(char *buf, size_t cap, int which, int layer) {
    snprintf(buf, cap, "aw.%s.%d", AW_NAMES[which], layer);
}

static void fit_name(char *buf, size_t cap, const char *key, int side, int layer) {
    snprintf(buf, cap, "fit.%s.%c.%d", key, SIDE_NAMES[side], layer);
}

/* A pca fit's tensor of one part: fit.KEY.k.L.basis. */
static void pca_part_name(char *buf, size_t cap, const char *key, int side, int layer, int part) {
    snprintf(buf, cap, "fit.%s.%c.%d.%s", key, SIDE_NAMES[side], layer, PCA_PART_NAMES[part]);
}

/* Where part `part` of head h lies in a pca head block, and its floats per head. */
static size_t pca_part_offset(int d, int part) {
    size_t dd = (size_t)d * d;
    size_t offsets[PCA_PARTS] = {0, (size_t)d, (size_t)d + dd, 2 * (size_t)d + dd};
    return offsets[part];
}

static size_t pca_part_floats(int d, int part) {
    size_t floats[PCA_PARTS] = {(size_t)d, (size_t)d * d, (size_t)d, (size_t)d * PCA_TABLE_STRIDE};
    return floats[part];
}

/* Between a layer side's per-head blocks and one part's tensor [n_kv_heads, part floats]. */
static void pca_gather(const float *blocks, int n_kv_heads, int d, int part, float *tensor) {
    size_t pf = pca_part_floats(d, part), hf = pca_head_floats(d), off = pca_part_offset(d, part);
    for (int h = 0; h < n_kv_heads; h++) memcpy(tensor + (size_t)h * pf, blocks + (size_t)h * hf + off, pf * sizeof(float));
}

static void pca_scatter(const float *tensor, int n_kv_heads, int d, int part, float *blocks) {
    size_t pf = pca_part_floats(d, part), hf = pca_head_floats(d), off = pca_part_offset(d, part);
    for (int h = 0; h < n_kv_heads; h++) memcpy(blocks + (size_t)h * hf + off, tensor + (size_t)h * pf, pf * sizeof(float));
}

/* pca's bits: whole numbers 0..8 per component, at most B x d a head; -1 with the message. */
static int check_pca_bits(const Calibration *c, const CalibFit *f, const float *blocks, const char *path,
                          const char *name, Error *err) {
    int d = c->head_dim;
    long budget = (long)f->parsed.pca_scaled * d / 10000;
    for (int h = 0; h < c->n_kv_heads; h++) {
        PcaHead head;
        pca_head_view(blocks + (size_t)h * pca_head_floats(d), d, &head);
        long sum = 0;
        for (int i = 0; i < d; i++) {
            float b = head.bits[i];
            if (!(b >= 0 && b <= PCA_MAX_BITS) || b != (float)(int)b)
                return error_set(err, "%s: tensor '%s.bits' holds %g for head %d, component %d (whole numbers 0..8)",
                                 path, name, (double)b, h, i);
            sum += (long)b;
        }
        if (sum > budget)
            return error_set(err, "%s: tensor '%s.bits' gives head %d %ld bits, more than B x head_dim = %ld", path,
                             name, h, sum, budget);
    }
    return 0;
}

static float *stats_array(const Calibration *c, int which) {
    float *arrays[4] = {c->stats_q, c->stats_kpre, c->stats_k, c->stats_v};
    return arrays[which];
}

static int stats_heads(const Calibration *c, int which) { return which == 0 ? c->n_heads : c->n_kv_heads; }

/* Every value finite; in statistics, the mean square and max |x| (2nd and 3rd of each triple)
 * are never negative. */
static int check_floats(const float *x, size_t n, int is_stats, const char *path, const char *name, Error *err) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return error_set(err, "%s: tensor '%s' holds a non-finite value at element %zu", path, name, i);
        if (is_stats && i % 3 != 0 && x[i] < 0)
            return error_set(err, "%s: tensor '%s' holds a negative %s (%g) at element %zu", path, name,
                             i % 3 == 1 ? "mean square" : "max |x|", (double)x[i], i);
    }
    return 0;
}

int calibration_check(const Calibration *c, const char *path, Error *err) {
    if (!hash_ok(c->model_sha256) || !hash_ok(c->text_sha256))
        return error_set(err, "%s: model_sha256 and text_sha256 must be 64 lowercase hex digits", path);
    if (c->tokens < 1 || c->ctx < 1 || c->tokens > INT32_MAX || c->ctx > INT32_MAX)
        return error_set(err, "%s: tokens (%ld) and ctx (%ld) must be positive integers below 2^31", path, c->tokens,
                         c->ctx);
    if (!geometry_ok(c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim))
        return error_set(err, "%s: calibration geometry out of range", path);
    char name[128];
    for (int which = 0; which < 4; which++) {
        size_t per_layer = (size_t)stats_heads(c, which) * (size_t)c->head_dim * 3;
        for (int l = 0; l < c->n_layers; l++) {
            stat_name(name, sizeof name, which, l);
            if (check_floats(stats_array(c, which) + (size_t)l * per_layer, per_layer, 1, path, name, err)) return -1;
        }
    }
    for (int which = 0; which < 3 && c->has_aw; which++)
        for (int l = 0; l < c->n_layers; l++) {
            const float *w = aw_array(c, which) + (size_t)l * aw_layer_floats(c);
            aw_name(name, sizeof name, which, l);
            if (check_floats(w, aw_layer_floats(c), 0, path, name, err)) return -1;
            for (size_t i = 0; i < aw_layer_floats(c); i++)
                if (w[i] < 0)
                    return error_set(err, "%s: tensor '%s' holds a negative weight (%g) at element %zu", path, name,
                                     (double)w[i], i);
        }
    for (int i = 0; i < c->n_fits; i++) {
        const CalibFit *f = &c->fits[i];
        for (int l = 0; l < c->n_layers; l++)
            for (int s = 0; s < f->sides; s++) {
                const float *book = calibration_codebook(c, f->key, SIDE_NAMES[s], l);
                fit_name(name, sizeof name, f->key, s, l);
                if (check_floats(book, f->codebook_floats, 0, path, name, err)) return -1;
                if (f->parsed.kind == CALIB_PCA && check_pca_bits(c, f, book, path, name, err)) return -1;
                if (f->parsed.kind != CALIB_NUQ) continue;
                for (size_t e = 1; e < f->codebook_floats; e++)
                    if (book[e] < book[e - 1])
                        return error_set(err, "%s: tensor '%s' is not ascending (entry %zu = %g after %g)", path, name,
                                         e, (double)book[e], (double)book[e - 1]);
            }
    }
    return 0;
}

/* ---- writing ---- */

int calibration_save(const char *path, const Calibration *c, Error *err) {
    if (calibration_check(c, path, err)) return -1;
    int per_layer = 4 + (c->has_aw ? 3 : 0), pca_tensors = 0;
    for (int i = 0; i < c->n_fits; i++) {
        int parts = c->fits[i].parsed.kind == CALIB_PCA ? PCA_PARTS : 1;
        per_layer += c->fits[i].sides * parts;
        if (parts > 1) pca_tensors += c->fits[i].sides * parts;
    }
    size_t n_tensors = (size_t)c->n_layers * (size_t)per_layer;
    StTensorOut *t = calloc(n_tensors, sizeof *t);
    char (*names)[128] = calloc(n_tensors, sizeof *names);
    /* pca's tensors are gathered from the per-head blocks: one buffer of a layer side's floats each */
    size_t pca_floats = (size_t)c->n_layers * (size_t)pca_tensors * (size_t)c->n_kv_heads * pca_part_floats(c->head_dim, 3);
    float *gathered = pca_floats ? malloc(pca_floats * sizeof *gathered) : NULL, *next = gathered;
    int rc = -1;
    if (!t || !names || (pca_floats && !gathered)) {
        error_set(err, "%s: out of memory", path);
        goto done;
    }
    size_t at = 0;
    for (int l = 0; l < c->n_layers; l++) {
        for (int which = 0; which < 4; which++, at++) {
            int heads = stats_heads(c, which);
            stat_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 3,
                                  .shape = {heads, c->head_dim, 3},
                                  .data = stats_array(c, which) + (size_t)l * (size_t)heads * (size_t)c->head_dim * 3};
        }
        for (int which = 0; which < 3 && c->has_aw; which++, at++) {
            aw_name(names[at], sizeof names[at], which, l);
            t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = 2, .shape = {c->n_kv_heads, c->head_dim},
                                  .data = aw_array(c, which) + (size_t)l * aw_layer_floats(c)};
        }
        for (int i = 0; i < c->n_fits; i++) {
            const CalibFit *f = &c->fits[i];
            for (int s = 0; s < f->sides && f->parsed.kind == CALIB_PCA; s++)
                for (int part = 0; part < PCA_PARTS; part++, at++) {
                    pca_part_name(names[at], sizeof names[at], f->key, s, l, part);
                    pca_gather(calibration_codebook(c, f->key, SIDE_NAMES[s], l), c->n_kv_heads, c->head_dim, part, next);
                    t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32, .ndim = part == 1 || part == 3 ? 3 : 2,
                                          .shape = {c->n_kv_heads, c->head_dim, part == 1 ? c->head_dim : PCA_TABLE_STRIDE},
                                          .data = next};
                    next += (size_t)c->n_kv_heads * pca_part_floats(c->head_dim, part);
                }
            for (int s = 0; s < f->sides && f->parsed.kind != CALIB_PCA; s++, at++) {
                fit_name(names[at], sizeof names[at], f->key, s, l);
                t[at] = (StTensorOut){.name = names[at], .dtype = DT_F32,
                                      .data = calibration_codebook(c, f->key, SIDE_NAMES[s], l)};
                if (f->parsed.kind == CALIB_NUQ) {
                    t[at].ndim = 1;
                    t[at].shape[0] = (int64_t)f->codebook_floats;
                } else if (f->parsed.kind == CALIB_RVQ) {
                    t[at].ndim = 5;
                    t[at].shape[0] = c->n_kv_heads;
                    t[at].shape[1] = c->head_dim / f->parsed.sub_dim;
                    t[at].shape[2] = f->parsed.stages;
                    t[at].shape[3] = (int64_t)1 << f->parsed.bits;
                    t[at].shape[4] = f->parsed.sub_dim;
                } else {
                    t[at].ndim = 4;
                    t[at].shape[0] = c->n_kv_heads;
                    t[at].shape[1] = c->head_dim / f->parsed.sub_dim;
                    t[at].shape[2] = (int64_t)1 << f->parsed.bits;
                    t[at].shape[3] = f->parsed.sub_dim;
                }
            }
        }
    }
    char tokens[24], ctx[24];
    snprintf(tokens, sizeof tokens, "%ld", c->tokens);
    snprintf(ctx, sizeof ctx, "%ld", c->ctx);
    const char *keys[5] = {"format", "model_sha256", "text_sha256", "tokens", "ctx"};
    const char *values[5] = {CALIB_FORMAT, c->model_sha256, c->text_sha256, tokens, ctx};
    rc = st_write(path, t, (int)n_tensors, keys, values, 5, err);
done:
    free(t);
    free(names);
    free(gathered);
    return rc;
}

/* ---- reading ---- */

#define CALIB_MAX_FITS 64

/* What one tensor of the file is: slot 0..3 = stats q, kpre, k, v; AW_SLOT0 + 0..2 = aw k, kpre, v;
 * FIT_SLOT0 + 2 * fit + side = a fit's codebook. */
typedef struct {
    int slot, layer;
    int part;   /* a pca fit's tensor: 0..3 = mean, basis, bits, tables; else 0 */
} TensorRole;

typedef struct {
    char key[CALIB_KEY_MAX + 1];
    CalibFitKey parsed;
} FileFit;

/* The reader's working state: the file, the geometry it is checked against, the fits found. */
typedef struct {
    const SafeTensors *st;
    const char *path;
    int n_layers, n_heads, n_kv_heads, head_dim;
    FileFit fits[CALIB_MAX_FITS];
    int n_fits;
    int has_aw;   /* some aw.* tensor was seen: then every layer needs all three */
} Reader;

/* A canonical non-negative decimal within limit, the whole string; -1 otherwise. */
static long whole_number(const char *s, long limit) {
    const char *p = s;
    long v = read_number(&p, limit);
    return *p ? -1 : v;
}

static int read_metadata(const SafeTensors *st, Calibration *out, Error *err) {
    const char *path = st->path, *format = st_meta(st, "format");
    char shown[72];
    if (!format) return error_set(err, "%s: not a kvq calibration (no 'format' in __metadata__)", path);
    if (strcmp(format, CALIB_FORMAT))
        return error_set(err, "%s: not a kvq calibration (format '%s')", path, error_shown(format, shown));
    static const char *const hash_keys[2] = {"model_sha256", "text_sha256"};
    char *hash_out[2] = {out->model_sha256, out->text_sha256};
    for (int i = 0; i < 2; i++) {
        const char *h = st_meta(st, hash_keys[i]);
        if (!h) return error_set(err, "%s: metadata '%s' missing", path, hash_keys[i]);
        if (!hash_ok(h))
            return error_set(err, "%s: metadata '%s' = '%s' is not 64 lowercase hex digits", path, hash_keys[i],
                             error_shown(h, shown));
        memcpy(hash_out[i], h, CALIB_HASH_HEX + 1);
    }
    static const char *const count_keys[2] = {"tokens", "ctx"};
    long *count_out[2] = {&out->tokens, &out->ctx};
    for (int i = 0; i < 2; i++) {
        const char *v = st_meta(st, count_keys[i]);
        if (!v) return error_set(err, "%s: metadata '%s' missing", path, count_keys[i]);
        long x = whole_number(v, INT32_MAX);
        if (x < 1)
            return error_set(err, "%s: metadata '%s' = '%s' is not a positive integer", path, count_keys[i],
                             error_shown(v, shown));
        *count_out[i] = x;
    }
    return 0;
}

/* A statistics tensor's [heads, head_dim, 3], F32; heads and head_dim out. */
static int stats_shape(const Tensor *t, int *heads, int *head_dim) {
    if (t->dtype != DT_F32 || t->ndim != 3 || t->shape[2] != 3 || t->shape[0] < 1 || t->shape[0] > CALIB_MAX_HEADS ||
        t->shape[1] < 1 || t->shape[1] > CALIB_MAX_HEAD_DIM)
        return -1;
    *heads = (int)t->shape[0];
    *head_dim = (int)t->shape[1];
    return 0;
}

/* Splits a tensor name into its role; -1 with the reason when it is not a calibration tensor. */
static int parse_name(Reader *r, const char *full_name, TensorRole *role, int *layer_raw, Error *err) {
    char shown[72], why[96], name[256];
    /* a pca fit's tensors end in a part: fit.KEY.k.L.basis; the rest is read as any fit's name */
    int part = -1;
    snprintf(name, sizeof name, "%s", full_name);
    const char *last = strrchr(name, '.');
    for (int i = 0; i < PCA_PARTS && last && strncmp(name, "fit.", 4) == 0; i++)
        if (!strcmp(last + 1, PCA_PART_NAMES[i])) {
            part = i;
            name[last - name] = '\0';
        }
    role->part = part < 0 ? 0 : part;
    const char *path = r->path, *dot = strrchr(name, '.');
    long layer = dot ? whole_number(dot + 1, CALIB_MAX_LAYERS - 1) : -1;
    if (strncmp(name, "stats.", 6) == 0 && layer >= 0) {
        for (int which = 0; which < 4; which++) {
            size_t n = strlen(STAT_NAMES[which]);
            if ((size_t)(dot - (name + 6)) == n && !strncmp(name + 6, STAT_NAMES[which], n)) {
                role->slot = which;
                role->layer = *layer_raw = (int)layer;
                return 0;
            }
        }
    } else if (strncmp(name, "aw.", 3) == 0 && layer >= 0) {
        for (int which = 0; which < 3; which++) {
            size_t n = strlen(AW_NAMES[which]);
            if ((size_t)(dot - (name + 3)) == n && !strncmp(name + 3, AW_NAMES[which], n)) {
                role->slot = AW_SLOT0 + which;
                role->layer = *layer_raw = (int)layer;
                r->has_aw = 1;
                return 0;
            }
        }
    } else if (strncmp(name, "fit.", 4) == 0 && layer >= 0 && dot - name >= 7 && dot[-2] == '.' &&
               (dot[-1] == 'k' || dot[-1] == 'v')) {
        size_t key_len = (size_t)(dot - 2 - (name + 4));
        char key[CALIB_KEY_MAX + 1];
        if (key_len > CALIB_KEY_MAX)
            return error_set(err, "%s: tensor '%s': fit key longer than %d characters", path,
                             error_shown(name, shown), CALIB_KEY_MAX);
        memcpy(key, name + 4, key_len);
        key[key_len] = '\0';
        int side = dot[-1] == 'v', fit = 0;
        while (fit < r->n_fits && strcmp(r->fits[fit].key, key)) fit++;
        if (fit == r->n_fits) {   /* a key not seen before */
            CalibFitKey parsed;
            if (calib_fit_key_parse(key, r->head_dim, &parsed, why, sizeof why))
                return error_set(err, "%s: tensor '%s': fit key: %s", path, error_shown(name, shown), why);
            if (r->n_fits == CALIB_MAX_FITS)
                return error_set(err, "%s: more than %d fit keys", path, CALIB_MAX_FITS);
            memcpy(r->fits[fit].key, key, key_len + 1);
            r->fits[fit].parsed = parsed;
            r->n_fits++;
        }
        if (side >= fit_sides(&r->fits[fit].parsed))
            return error_set(err, "%s: tensor '%s': a +prerope fit has keys' codebooks only", path,
                             error_shown(full_name, shown));
        if ((r->fits[fit].parsed.kind == CALIB_PCA) != (part >= 0))
            return error_set(err, "%s: tensor '%s': a pca fit's tensors (and only they) end in .mean, .basis, .bits "
                             "or .tables", path, error_shown(full_name, shown));
        role->slot = FIT_SLOT0 + 2 * fit + side;
        role->layer = *layer_raw = (int)layer;
        return 0;
    }
    return error_set(err, "%s: unexpected tensor '%s' (not stats.{q,kpre,k,v}.L, aw.{k,kpre,v}.L or fit.KEY.{k,v}.L)", path,
                     error_shown(full_name, shown));
}

/* The shape a tensor of this role must have. */
static int expected_shape(const Reader *r, const TensorRole *role, int64_t shape[5]) {
    if (role->slot < 4) {
        shape[0] = role->slot == 0 ? r->n_heads : r->n_kv_heads;
        shape[1] = r->head_dim;
        shape[2] = 3;
        return 3;
    }
    if (role->slot < FIT_SLOT0) {
        shape[0] = r->n_kv_heads;
        shape[1] = r->head_dim;
        return 2;
    }
    const CalibFitKey *k = &r->fits[(role->slot - FIT_SLOT0) / 2].parsed;
    if (k->kind == CALIB_NUQ) {
        shape[0] = (int64_t)1 << k->bits;
        return 1;
    }
    if (k->kind == CALIB_PCA) {   /* mean, bits: [heads, d]; basis: [heads, d, d]; tables: [heads, d, 256] */
        shape[0] = r->n_kv_heads;
        shape[1] = r->head_dim;
        shape[2] = role->part == 1 ? r->head_dim : PCA_TABLE_STRIDE;
        return role->part == 1 || role->part == 3 ? 3 : 2;
    }
    if (k->kind == CALIB_RVQ) {
        shape[0] = r->n_kv_heads;
        shape[1] = r->head_dim / k->sub_dim;
        shape[2] = k->stages;
        shape[3] = (int64_t)1 << k->bits;
        shape[4] = k->sub_dim;
        return 5;
    }
    shape[0] = r->n_kv_heads;
    shape[1] = r->head_dim / k->sub_dim;
    shape[2] = (int64_t)1 << k->bits;
    shape[3] = k->sub_dim;
    return 4;
}

static void shape_text(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static int check_tensor(const Reader *r, const Tensor *t, const TensorRole *role, Error *err) {
    char shown[72], want[96], got[96];
    if (t->dtype != DT_F32)
        return error_set(err, "%s: tensor '%s' has dtype %s (F32 expected)", r->path, error_shown(t->name, shown),
                         dtype_name(t->dtype));
    int64_t shape[5];
    int ndim = expected_shape(r, role, shape);
    if (t->ndim != ndim || memcmp(t->shape, shape, (size_t)ndim * sizeof *shape)) {
        shape_text(want, sizeof want, shape, ndim);
        shape_text(got, sizeof got, t->shape, t->ndim);
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s", r->path, error_shown(t->name, shown), got,
                         want);
    }
    return 0;
}

/* The geometry: the model's when given (the file must agree), else the file's own (heads and
 * head_dim from layer 0's statistics, layers from the largest layer any tensor names). */
static int read_geometry(Reader *r, const CalibModel *model, Error *err) {
    const char *path = r->path;
    const Tensor *q0 = st_find(r->st, "stats.q.0"), *k0 = st_find(r->st, "stats.k.0");
    if (!q0) return error_set(err, "%s: missing tensor 'stats.q.0'", path);
    if (!k0) return error_set(err, "%s: missing tensor 'stats.k.0'", path);
    int head_dim_k;
    if (stats_shape(q0, &r->n_heads, &r->head_dim) || stats_shape(k0, &r->n_kv_heads, &head_dim_k) ||
        head_dim_k != r->head_dim)
        return error_set(err, "%s: tensors 'stats.q.0' and 'stats.k.0' must be F32 [heads, head_dim, 3] of one head_dim",
                         path);
    if (model) {
        /* Layers: the model's; a file with fewer misses a tensor, one with more names a layer past them. */
        r->n_layers = model->n_layers;
        if (r->n_heads != model->n_heads || r->n_kv_heads != model->n_kv_heads || r->head_dim != model->head_dim)
            return error_set(err, "%s: made for %d heads, %d KV heads, head_dim %d; the model has %d, %d, %d", path,
                             r->n_heads, r->n_kv_heads, r->head_dim, model->n_heads, model->n_kv_heads,
                             model->head_dim);
        if (!geometry_ok(r->n_layers, r->n_heads, r->n_kv_heads, r->head_dim))
            return error_set(err, "%s: the model's geometry is out of range", path);
        return 0;
    }
    r->n_layers = 0;
    for (int i = 0; i < r->st->n_tensors; i++) {
        const char *name = r->st->tensors[i].name, *dot = strrchr(name, '.');
        long layer = dot ? whole_number(dot + 1, CALIB_MAX_LAYERS - 1) : -1;
        if (layer >= r->n_layers) r->n_layers = (int)layer + 1;
    }
    return 0;
}

/* The name of the tensor of (slot, layer), for a message about it. */
static void role_name(const Reader *r, int slot, int layer, int part, char *buf, size_t cap) {
    const FileFit *f = slot >= FIT_SLOT0 ? &r->fits[(slot - FIT_SLOT0) / 2] : NULL;
    if (slot < 4) stat_name(buf, cap, slot, layer);
    else if (slot < FIT_SLOT0) aw_name(buf, cap, slot - AW_SLOT0, layer);
    else if (f->parsed.kind == CALIB_PCA) pca_part_name(buf, cap, f->key, (slot - FIT_SLOT0) % 2, layer, part);
    else fit_name(buf, cap, f->key, (slot - FIT_SLOT0) % 2, layer);
}

/* Classifies and checks every tensor (roles[i] for tensor i), then checks that each layer has
 * its statistics and every fit its codebooks. */
static int check_tensors(Reader *r, TensorRole *roles, Error *err) {
    const int slots = FIT_SLOT0 + 2 * CALIB_MAX_FITS;
    unsigned char *seen = calloc((size_t)r->n_layers * slots * PCA_PARTS, 1);
    if (!seen) return error_set(err, "%s: out of memory", r->path);
    int rc = 0;
    char shown[72], name[128];
    for (int i = 0; i < r->st->n_tensors && rc == 0; i++) {
        const Tensor *t = &r->st->tensors[i];
        int layer = -1;
        rc = parse_name(r, t->name, &roles[i], &layer, err);
        if (rc == 0 && layer >= r->n_layers)
            rc = error_set(err, "%s: tensor '%s' is for layer %d; the model has %d layers", r->path,
                           error_shown(t->name, shown), layer, r->n_layers);
        if (rc == 0) rc = check_tensor(r, t, &roles[i], err);
        if (rc == 0) seen[((size_t)roles[i].layer * slots + (size_t)roles[i].slot) * PCA_PARTS + (size_t)roles[i].part] = 1;
    }
    for (int l = 0; l < r->n_layers && rc == 0; l++)
        for (int slot = 0; slot < FIT_SLOT0 + 2 * r->n_fits && rc == 0; slot++) {
            if (slot >= AW_SLOT0 && slot < FIT_SLOT0 && !r->has_aw) continue;
            if (slot >= FIT_SLOT0 && (slot - FIT_SLOT0) % 2 >= fit_sides(&r->fits[(slot - FIT_SLOT0) / 2].parsed))
                continue;
            int parts = slot >= FIT_SLOT0 && r->fits[(slot - FIT_SLOT0) / 2].parsed.kind == CALIB_PCA ? PCA_PARTS : 1;
            for (int part = 0; part < parts && rc == 0; part++)
                if (!seen[((size_t)l * slots + (size_t)slot) * PCA_PARTS + (size_t)part]) {
                    role_name(r, slot, l, part, name, sizeof name);
                    rc = error_set(err, "%s: missing tensor '%s'", r->path, name);
                }
        }
    free(seen);
    return rc;
}

/* Copies every tensor into c (sizes all checked). */
static void copy_tensors(const Reader *r, const TensorRole *roles, Calibration *c) {
    for (int i = 0; i < r->st->n_tensors; i++) {
        const Tensor *t = &r->st->tensors[i];
        float *to;
        if (roles[i].slot < 4) {
            to = stats_array(c, roles[i].slot) + (size_t)roles[i].layer * t->numel;
        } else if (roles[i].slot < FIT_SLOT0) {
            to = aw_array(c, roles[i].slot - AW_SLOT0) + (size_t)roles[i].layer * t->numel;
        } else {
            const CalibFit *f = &c->fits[(roles[i].slot - FIT_SLOT0) / 2];
            to = (float *)calibration_codebook(c, f->key, SIDE_NAMES[(roles[i].slot - FIT_SLOT0) % 2], roles[i].layer);
            if (f->parsed.kind == CALIB_PCA) {
                pca_scatter(t->data, c->n_kv_heads, c->head_dim, roles[i].part, to);
                continue;
            }
        }
        memcpy(to, t->data, t->nbytes);
    }
}

int calibration_from_safetensors(const SafeTensors *st, const CalibModel *model, Calibration *c, Error *err) {
    memset(c, 0, sizeof *c);
    Calibration meta;
    memset(&meta, 0, sizeof meta);
    if (read_metadata(st, &meta, err)) return -1;
    if (model && model->model_sha256 && strcmp(model->model_sha256, meta.model_sha256)) {
        char mine[24], theirs[24], shown[72];
        if (!hash_ok(model->model_sha256))
            return error_set(err, "%s: the model's sha256 '%s' is not 64 lowercase hex digits", st->path,
                             error_shown(model->model_sha256, shown));
        return error_set(err, "%s: calibration of another model (model_sha256 %s; this model's is %s)", st->path,
                         short_hash(meta.model_sha256, theirs), short_hash(model->model_sha256, mine));
    }
    Reader *r = calloc(1, sizeof *r);
    TensorRole *roles = calloc((size_t)st->n_tensors + 1, sizeof *roles);
    int rc = -1;
    if (!r || !roles) {
        error_set(err, "%s: out of memory", st->path);
        goto done;
    }
    r->st = st;
    r->path = st->path;
    if (read_geometry(r, model, err) || check_tensors(r, roles, err)) goto done;
    if (calibration_init(c, r->n_layers, r->n_heads, r->n_kv_heads, r->head_dim, err)) {
        error_set(err, "%s: out of memory for the calibration", st->path);
        goto done;
    }
    for (int i = 0; i < r->n_fits; i++)
        if (!calibration_add_fit(c, r->fits[i].key, err)) {
            error_set(err, "%s: out of memory for the calibration", st->path);
            goto done;
        }
    memcpy(c->model_sha256, meta.model_sha256, sizeof c->model_sha256);
    memcpy(c->text_sha256, meta.text_sha256, sizeof c->text_sha256);
    c->tokens = meta.tokens;
    c->ctx = meta.ctx;
    c->has_aw = r->has_aw;
    copy_tensors(r, roles, c);
    rc = calibration_check(c, st->path, err);
done:
    if (rc) calibration_free(c);
    free(r);
    free(roles);
    return rc;
}

int calibration_load(const char *path, const CalibModel *model, Calibration *c, Error *err) {
    SafeTensors st;
    memset(c, 0, sizeof *c);
    if (st_open(&st, path, err)) return -1;
    int rc = calibration_from_safetensors(&st, model, c, err);
    st_close(&st);
    if (rc == 0) snprintf(c->path, sizeof c->path, "%s", path);
    if (rc == 0 && sha256_file_hex(path, c->file_sha256, err)) {
        calibration_free(c);
        return -1;
    }
    return rc;
}
