/* quant/scheme.c: parsing the scheme language, and the row-level modifiers (+had, +out, the
 * llama.cpp key order) around a base codec. See quant/scheme.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "quant/scheme.h"
#include "quant/hadamard.h"
#include "quant/half.h"

#define MAX_LAYER 1000000

/* ------------------------------------------------------------------------- */
/* Parsing one SPEC */

static const KvModifierInfo MODIFIERS[] = {
    {"+had", "rotate each row by the orthonormal Hadamard H first (QuaRot; llama.cpp's default); head_dim 2^k"},
    {"+prerope", "keys only: quantize keys before RoPE, rotate them when read (KVQuant)"},
    {"+resR", "the R most recent positions stay full precision (KIVI's residual)"},
    {"+sinkS", "the first S positions stay full precision (attention sinks)"},
    {"+outK", "per row, the K largest |x| kept as fp16 + index (KVQuant dense-and-sparse); row bases only"},
    {"+aw", "fitted bases: distances weighted per channel by query energy (keys) or o_proj (values); not with +had"},
};

int kv_modifier_count(void) { return (int)(sizeof MODIFIERS / sizeof MODIFIERS[0]); }

const KvModifierInfo *kv_modifier_at(int i) { return i >= 0 && i < kv_modifier_count() ? &MODIFIERS[i] : NULL; }

/* A modifier with a number: "res128" -> 128. 1 when name starts with prefix. */
static int numbered_modifier(const char *mod, const char *prefix, int hi, int *value, int *bad) {
    const char *p;
    if (!kv_parse_prefix(mod, prefix, &p)) return 0;
    *bad = kv_parse_number(&p, 1, hi, value) != 0 || *p != '\0';
    return 1;
}

/* Applies one modifier (the text between '+' signs) to spec. */
static int parse_modifier(const char *mod, KvSpec *spec, char *why, size_t why_len) {
    int value = 0, bad = 0, *field = NULL, hi = 0;
    if (!strcmp(mod, "had")) field = &spec->hadamard, value = 1;
    else if (!strcmp(mod, "prerope")) field = &spec->prerope, value = 1;
    else if (!strcmp(mod, "aw")) field = &spec->aw, value = 1;
    else if (numbered_modifier(mod, "res", KV_MAX_WINDOW, &value, &bad)) field = &spec->residual, hi = KV_MAX_WINDOW;
    else if (numbered_modifier(mod, "sink", KV_MAX_WINDOW, &value, &bad)) field = &spec->sinks, hi = KV_MAX_WINDOW;
    else if (numbered_modifier(mod, "out", KV_MAX_OUTLIERS, &value, &bad)) field = &spec->outliers, hi = KV_MAX_OUTLIERS;
    if (!field) {
        snprintf(why, why_len, "unknown modifier '+%.32s' (known: +had +prerope +resR +sinkS +outK +aw)", mod);
        return -1;
    }
    if (bad) {
        snprintf(why, why_len, "modifier '+%.32s': the number must be 1 to %d", mod, hi);
        return -1;
    }
    if (*field) {
        snprintf(why, why_len, "modifier '+%.32s' given twice", mod);
        return -1;
    }
    *field = value;
    return 0;
}

/* The canonical spelling: base, then had, prerope, out, aw, res, sink. */
static void canonical_spec(KvSpec *spec) {
    char *t = spec->text;
    size_t n = sizeof spec->text;
    int len = snprintf(t, n, "%s", spec->base.name);
    if (spec->hadamard) len += snprintf(t + len, n - (size_t)len, "+had");
    if (spec->prerope) len += snprintf(t + len, n - (size_t)len, "+prerope");
    if (spec->outliers) len += snprintf(t + len, n - (size_t)len, "+out%d", spec->outliers);
    if (spec->aw) len += snprintf(t + len, n - (size_t)len, "+aw");
    if (spec->residual) len += snprintf(t + len, n - (size_t)len, "+res%d", spec->residual);
    if (spec->sinks) snprintf(t + len, n - (size_t)len, "+sink%d", spec->sinks);
}

int kv_spec_parse(const char *text, KvSide side, KvSpec *spec, char *why, size_t why_len) {
    char buf[96];
    memset(spec, 0, sizeof *spec);
    if (side != KV_SIDE_KEYS && side != KV_SIDE_VALUES) {
        snprintf(why, why_len, "a scheme is parsed for keys or for values");
        return -1;
    }
    size_t len = strlen(text);
    if (len == 0) {
        snprintf(why, why_len, "empty scheme");
        return -1;
    }
    if (len >= sizeof buf) {
        snprintf(why, why_len, "scheme '%.40s...' is too long", text);
        return -1;
    }
    memcpy(buf, text, len + 1);
    char *plus = strchr(buf, '+');
    if (plus) *plus = '\0';
    if (kv_base_parse(buf, &spec->base, why, why_len)) return -1;
    while (plus) {
        char *mod = plus + 1;
        plus = strchr(mod, '+');
        if (plus) *plus = '\0';
        if (*mod == '\0') {
            snprintf(why, why_len, "'%.60s': empty modifier (two '+' in a row, or one at the end)", text);
            return -1;
        }
        if (parse_modifier(mod, spec, why, why_len)) return -1;
    }
    canonical_spec(spec);
    if (spec->prerope && side != KV_SIDE_KEYS) {
        snprintf(why, why_len, "%s: +prerope is for keys only", spec->text);
        return -1;
    }
    if (spec->base.codec->own_transform && (spec->hadamard || spec->outliers)) {
        snprintf(why, why_len, "%s: %s transforms its rows itself; +had and +out do not go with it", spec->text,
                 spec->base.name);
        return -1;
    }
    if (spec->aw && spec->hadamard) {
        snprintf(why, why_len, "%s: +aw does not go with +had (the rotation makes per-channel weights uniform)", spec->text);
        return -1;
    }
    if (spec->aw && !kv_spec_is_fitted(spec)) {
        snprintf(why, why_len, "%s: +aw is for the fitted bases (nuq, vq, rvq, pca)", spec->text);
        return -1;
    }
    spec->side = side;
    return 0;
}

int kv_spec_is_fitted(const KvSpec *spec) { return spec->base.codec && spec->base.codec->fit; }

void kv_spec_fit_key(const KvSpec *spec, char *key, size_t key_len) {
    if (!kv_spec_is_fitted(spec)) {
        snprintf(key, key_len, "%s", "");
        return;
    }
    int len = snprintf(key, key_len, "%s%s%s", spec->base.name, spec->hadamard ? "+had" : "", spec->prerope ? "+prerope" : "");
    if (spec->outliers && len >= 0 && (size_t)len < key_len)
        len += snprintf(key + len, key_len - (size_t)len, "+out%d", spec->outliers);
    if (spec->aw && len >= 0 && (size_t)len < key_len) snprintf(key + len, key_len - (size_t)len, "+aw");
}

/* ------------------------------------------------------------------------- */
/* Parsing a LAYERED value */

/* "L" or "L-L" before the ':' of an item. */
static int parse_layers(const char *item, const char *colon, KvLayerItem *it, char *why, size_t why_len) {
    const char *p = item;
    int ok = kv_parse_number(&p, 0, MAX_LAYER, &it->first) == 0;
    it->last = it->first;
    if (ok && *p == '-') {
        p++;
        ok = kv_parse_number(&p, 0, MAX_LAYER, &it->last) == 0;
    }
    if (!ok || p != colon) {
        snprintf(why, why_len, "'%.*s': layers must be L or L1-L2 (0-based)", (int)(colon - item < 40 ? colon - item : 40), item);
        return -1;
    }
    if (it->last < it->first) {
        snprintf(why, why_len, "layers %d-%d: the range is empty", it->first, it->last);
        return -1;
    }
    return 0;
}

static int overlaps(const KvLayerItem *a, const KvLayerItem *b) { return a->first <= b->last && b->first <= a->last; }

/* One ";L:SPEC" item, appended to l. */
static int parse_item(const char *item, KvSide side, KvLayered *l, char *why, size_t why_len) {
    const char *colon = strchr(item, ':');
    if (!colon) {
        snprintf(why, why_len, "'%.40s': a later item needs layers, as in ';0:int8-g64' or ';2-5:int4-g64'", item);
        return -1;
    }
    if (l->n_items == KV_MAX_LAYER_ITEMS) {
        snprintf(why, why_len, "more than %d layer items", KV_MAX_LAYER_ITEMS);
        return -1;
    }
    KvLayerItem *it = &l->items[l->n_items];
    if (parse_layers(item, colon, it, why, why_len) || kv_spec_parse(colon + 1, side, &it->spec, why, why_len)) return -1;
    for (int i = 0; i < l->n_items; i++)
        if (overlaps(&l->items[i], it)) {
            snprintf(why, why_len, "layers %d-%d are named twice (items %d-%d and %d-%d overlap)", it->first, it->last,
                     l->items[i].first, l->items[i].last, it->first, it->last);
            return -1;
        }
    l->n_items++;
    return 0;
}

static void canonical_layered(KvLayered *l) {
    size_t n = sizeof l->text;
    int len = snprintf(l->text, n, "%s", l->all.text);
    for (int i = 0; i < l->n_items && (size_t)len < n; i++) {
        const KvLayerItem *it = &l->items[i];
        if (it->first == it->last) len += snprintf(l->text + len, n - (size_t)len, ";%d:%s", it->first, it->spec.text);
        else len += snprintf(l->text + len, n - (size_t)len, ";%d-%d:%s", it->first, it->last, it->spec.text);
    }
}

int kv_layered_parse(const char *text, KvSide side, KvLayered *l, char *why, size_t why_len) {
    char buf[1024];
    memset(l, 0, sizeof *l);
    size_t len = strlen(text);
    if (len >= sizeof buf) {
        snprintf(why, why_len, "scheme '%.40s...' is too long", text);
        return -1;
    }
    memcpy(buf, text, len + 1);
    char *semi = strchr(buf, ';');
    if (semi) *semi = '\0';
    if (strchr(buf, ':')) {
        snprintf(why, why_len, "'%.40s': the first item applies to every layer and takes no 'L:'", buf);
        return -1;
    }
    if (kv_spec_parse(buf, side, &l->all, why, why_len)) return -1;
    while (semi) {
        char *item = semi + 1;
        semi = strchr(item, ';');
        if (semi) *semi = '\0';
        if (*item == '\0') {
            snprintf(why, why_len, "'%.60s': empty layer item (two ';' in a row, or one at the end)", text);
            return -1;
        }
        if (parse_item(item, side, l, why, why_len)) return -1;
    }
    canonical_layered(l);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Checking against a model */

static const char *side_name(KvSide side) {
    return side == KV_SIDE_KEYS ? "keys" : side == KV_SIDE_VALUES ? "values" : "no side";
}

static int spec_check(const KvSpec *spec, int head_dim, KvSide side, char *why, size_t why_len) {
    char base_why[160];
    if (spec->side != side || (side != KV_SIDE_KEYS && side != KV_SIDE_VALUES)) {
        snprintf(why, why_len, "%s: parsed for %s, used for %s", spec->text, side_name(spec->side), side_name(side));
        return -1;
    }
    if (head_dim > KV_MAX_HEAD_DIM) {
        snprintf(why, why_len, "%s: head_dim %d is above %d", spec->text, head_dim, KV_MAX_HEAD_DIM);
        return -1;
    }
    if (!kv_base_check(&spec->base, head_dim, base_why, sizeof base_why)) {
        /* the codec names its base; the spec adds its modifiers only when it has some */
        if (strcmp(spec->text, spec->base.name)) snprintf(why, why_len, "%s: %s", spec->text, base_why);
        else snprintf(why, why_len, "%s", base_why);
        return -1;
    }
    if (spec->hadamard && !hadamard_size_ok(head_dim)) {
        snprintf(why, why_len, "%s: +had needs head_dim a power of two (it is %d)", spec->text, head_dim);
        return -1;
    }
    if (spec->outliers && spec->base.axis != KV_AXIS_CHANNELS) {
        snprintf(why, why_len, "%s: +out needs a base that quantizes along the row, not a token-axis one", spec->text);
        return -1;
    }
    if (spec->outliers && (head_dim > 256 || spec->outliers >= head_dim)) {
        snprintf(why, why_len, "%s: +out%d needs fewer outliers than head_dim %d, and head_dim <= 256", spec->text,
                 spec->outliers, head_dim);
        return -1;
    }
    return 0;
}

int kv_layered_bind(KvLayered *l, int n_layers, int head_dim, KvSide side, char *why, size_t why_len) {
    if (spec_check(&l->all, head_dim, side, why, why_len)) return -1;
    for (int i = 0; i < l->n_items; i++) {
        KvLayerItem *it = &l->items[i];
        if (it->last >= n_layers) {
            snprintf(why, why_len, "layer %d is out of range: the model has layers 0-%d", it->last, n_layers - 1);
            return -1;
        }
        if (spec_check(&it->spec, head_dim, side, why, why_len)) return -1;
    }
    return 0;
}

int kv_fit_key_parse(const char *key, int head_dim, KvSpec *spec, char *why, size_t why_len) {
    char canonical[96], fitted[128];
    if (kv_spec_parse(key, KV_SIDE_KEYS, spec, why, why_len) || spec_check(spec, head_dim, KV_SIDE_KEYS, why, why_len))
        return -1;
    if (!kv_spec_is_fitted(spec)) {
        kv_fitted_syntaxes(fitted, sizeof fitted);
        snprintf(why, why_len, "%s is not a fitted base (%s)", spec->base.name, fitted);
        return -1;
    }
    kv_spec_fit_key(spec, canonical, sizeof canonical);
    if (strcmp(canonical, key)) {   /* a key names tensors: one spelling, and only what changes a fit */
        snprintf(why, why_len, "'%.48s' is not a fit key: its fit key is '%s' (+had, +prerope, +outK, in that order)", key,
                 canonical);
        return -1;
    }
    return 0;
}

const KvSpec *kv_layered_at(const KvLayered *l, int layer) {
    for (int i = l->n_items - 1; i >= 0; i--)
        if (layer >= l->items[i].first && layer <= l->items[i].last) return &l->items[i].spec;
    return &l->all;
}

int kv_spec_is_fp32(const KvSpec *spec) {
    return spec->base.bits == 32 && !spec->hadamard && !spec->prerope && !spec->outliers;
}

int kv_layered_is_fitted(const KvLayered *l) {
    for (int i = 0; i < l->n_items; i++)
        if (kv_spec_is_fitted(&l->items[i].spec)) return 1;
    return kv_spec_is_fitted(&l->all);
}

int kv_layered_is_fp32(const KvLayered *l) {
    for (int i = 0; i < l->n_items; i++)
        if (!kv_spec_is_fp32(&l->items[i].spec)) return 0;
    return kv_spec_is_fp32(&l->all);
}

/* ------------------------------------------------------------------------- */
/* Sizes and bits */

#define OUTLIER_BYTES 3   /* fp16 value + u8 index */

size_t kv_spec_unit_bytes(const KvSpec *spec, int n) {
    return spec->base.codec->unit_bytes(&spec->base, n) + (size_t)spec->outliers * OUTLIER_BYTES;
}

double kv_spec_stored_bits(const KvSpec *spec, int n) {
    return 8.0 * (double)kv_spec_unit_bytes(spec, n) / ((double)spec->base.rows * n);
}

int kv_spec_quantized_end(const KvSpec *spec, int n) {
    int s = spec->sinks, r = spec->residual;
    if (spec->base.axis == KV_AXIS_TOKENS) {
        int g = spec->base.rows, free_positions = n - s - r;
        return s + (free_positions > 0 ? g * (free_positions / g) : 0);
    }
    return n - r > s ? n - r : s;
}

void kv_layered_bits(const KvLayered *l, int n_layers, int head_dim, int ctx, double *stored, double *effective) {
    double s = 0, e = 0;
    for (int layer = 0; layer < n_layers; layer++) {
        const KvSpec *spec = kv_layered_at(l, layer);
        s += kv_spec_stored_bits(spec, head_dim);
        e += kv_spec_effective_bits(spec, head_dim, ctx);
    }
    *stored = n_layers > 0 ? s / n_layers : 0;
    *effective = n_layers > 0 ? e / n_layers : 0;
}

double kv_layered_table_bytes(const KvLayered *l, int n_layers, int n_kv_heads, int head_dim) {
    double bytes = 0;
    for (int layer = 0; layer < n_layers; layer++) {
        const KvSpec *spec = kv_layered_at(l, layer);
        if (!kv_spec_is_fitted(spec)) continue;
        KvFitLayout layout;
        spec->base.codec->fit->layout(&spec->base, head_dim, &layout);
        bytes += 4.0 * (double)kv_fit_table_floats(&layout) * (layout.per_head ? n_kv_heads : 1);
    }
    return bytes;
}

double kv_spec_effective_bits(const KvSpec *spec, int n, int ctx) {
    if (ctx <= 0) return kv_spec_stored_bits(spec, n);
    int end = kv_spec_quantized_end(spec, ctx), quantized = end - spec->sinks;
    if (quantized < 0) quantized = 0;
    if (kv_spec_is_fp32(spec)) return 32.0;
    return (quantized * kv_spec_stored_bits(spec, n) + (ctx - quantized) * 16.0) / ctx;
}

/* ------------------------------------------------------------------------- */
/* One row */

/* llama.cpp's converter interleaves the halves of q_proj and k_proj so each RoPE pair (i, i + d/2)
 * is adjacent: key rows are quantized in the order (0, d/2, 1, d/2+1, ...). */
static int llama_key_order(const KvSpec *spec) {
    return spec->base.codec->llama_key_order && spec->side == KV_SIDE_KEYS;
}

static void to_llama_order(float *x, int n, float *tmp) {
    for (int i = 0; i < n / 2; i++) {
        tmp[2 * i] = x[i];
        tmp[2 * i + 1] = x[i + n / 2];
    }
    memcpy(x, tmp, (size_t)n * sizeof(float));
}

static void from_llama_order(float *x, int n, float *tmp) {
    for (int i = 0; i < n / 2; i++) {
        tmp[i] = x[2 * i];
        tmp[i + n / 2] = x[2 * i + 1];
    }
    memcpy(x, tmp, (size_t)n * sizeof(float));
}

/* The codec's inner rotation is part of the domain only when no outliers are written back
 * between the codec and the caller (they live in the domain before it). */
static int inner_rotation(const KvSpec *spec) { return spec->base.codec->rotate && !spec->outliers; }

/* Natural order -> the domain the codec is given: llama.cpp key order, then H. */
static void to_codec_input(const KvSpec *spec, float *x, int n) {
    float tmp[KV_MAX_HEAD_DIM];
    if (llama_key_order(spec)) to_llama_order(x, n, tmp);
    if (spec->hadamard) hadamard(x, n);
}

void kv_spec_to_domain(const KvSpec *spec, float *x, int n) {
    to_codec_input(spec, x, n);
    if (inner_rotation(spec)) spec->base.codec->rotate(&spec->base, x, n, KV_TO_INNER);
}

void kv_spec_from_domain(const KvSpec *spec, float *x, int n) {
    float tmp[KV_MAX_HEAD_DIM];
    if (inner_rotation(spec)) spec->base.codec->rotate(&spec->base, x, n, KV_FROM_INNER);
    if (spec->hadamard) hadamard(x, n);
    if (llama_key_order(spec)) from_llama_order(x, n, tmp);
}

/* Sort key of |x| for +out: NaN above everything, then |x|. */
static int larger_magnitude(float a, float b) {
    if (isnan(b)) return 0;
    if (isnan(a)) return 1;
    return fabsf(a) > fabsf(b);
}

/* +outK: the K values of largest |x| (ties: lower index) go to out (fp16 value, u8 index, in
 * the order chosen) and are zeroed in x, so they do not set the base's scales. */
static void take_outliers(float *x, int n, int k, unsigned char *out) {
    uint64_t taken[4] = {0, 0, 0, 0};   /* n <= 256 */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!(taken[i / 64] >> (i % 64) & 1) && (best < 0 || larger_magnitude(x[i], x[best]))) best = i;
        taken[best / 64] |= 1ull << (best % 64);
        kv_put_u16(out + OUTLIER_BYTES * j, f32_to_f16(x[best]));
        out[OUTLIER_BYTES * j + 2] = (unsigned char)best;
        x[best] = 0.0f;
    }
}

/* An index past the row (only in bytes that encode did not write: a hostile file) is
 * skipped, so decoding any bytes writes inside the row. */
static void put_outliers_back(const unsigned char *in, int k, float *x, int n) {
    for (int j = 0; j < k; j++) {
        int at = in[OUTLIER_BYTES * j + 2];
        if (at < n) x[at] = f16_to_f32((uint16_t)kv_get_u16(in + OUTLIER_BYTES * j));
    }
}

void kv_spec_codec_input(const KvSpec *spec, float *x, int n) {
    unsigned char taken[KV_MAX_OUTLIERS * OUTLIER_BYTES];
    to_codec_input(spec, x, n);
    if (spec->outliers) take_outliers(x, n, spec->outliers, taken);
}

void kv_spec_encode(const KvSpec *spec, const float *x, int n, void *unit, float *scratch) {
    const KvBase *b = &spec->base;
    memcpy(scratch, x, (size_t)b->rows * n * sizeof(float));
    for (int r = 0; r < b->rows; r++) to_codec_input(spec, scratch + (size_t)r * n, n);
    if (spec->outliers)   /* channel-axis only: one row per unit */
        take_outliers(scratch, n, spec->outliers, (unsigned char *)unit + b->codec->unit_bytes(b, n));
    b->codec->encode(b, scratch, n, unit);
}

void kv_spec_decode(const KvSpec *spec, const void *units, int n, int r0, int count, float *out) {
    const KvBase *b = &spec->base;
    if (!spec->outliers) {
        b->codec->decode(b, units, n, r0, count, out);
        return;
    }
    size_t unit_bytes = kv_spec_unit_bytes(spec, n), codec_bytes = b->codec->unit_bytes(b, n);
    for (int i = 0; i < count; i++) {
        const unsigned char *unit = (const unsigned char *)units + (size_t)(r0 + i) * unit_bytes;
        float *row = out + (size_t)i * n;
        b->codec->decode(b, unit, n, 0, 1, row);
        if (b->codec->rotate) b->codec->rotate(b, row, n, KV_FROM_INNER);
        put_outliers_back(unit + codec_bytes, spec->outliers, row, n);
    }
}

int kv_spec_has_decode_t64(const KvSpec *spec) { return spec->base.codec->decode_t64 && !spec->outliers; }

void kv_spec_decode_t64(const KvSpec *spec, const void *units, int n, int r0, int count, float *kt) {
    spec->base.codec->decode_t64(&spec->base, units, n, r0, count, kt);
}
