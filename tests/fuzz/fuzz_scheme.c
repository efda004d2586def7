/* tests/fuzz/fuzz_scheme.c: the scheme language (quant/scheme.h) and every codec of the table
 * (quant/codec.h) on hostile input. Byte 0 picks the mode (mode % 3), the rest is payload:
 *   0  text: kv_layered_parse on it for keys and for values, then kv_layered_bind on a few
 *      model shapes. A refusal says why; an accepted value's canonical text parses back to
 *      itself; bound for the side it was not parsed for, it is refused; every bound
 *      layer's spec has a unit size, stored bits and a positions rule that make sense, and
 *      one unit of it encodes and decodes.
 *   1  floats: byte 1 picks a spec (every codec's examples, alone and with +had, +out2,
 *      +had+out1; the fitted bases' (SCHEMES.md §8) once more each, given a synthetic table),
 *      byte 2 the row width, byte 3 raw float bits (NaN, inf, subnormals, huge) or small
 *      values (int8 / 16, where real keys and values live); the rest fills one unit's rows.
 *      kv_spec_encode, kv_spec_decode, kv_spec_decode_t64 and the domain moves. With finite
 *      moderate inputs: decoded values are finite, decode_t64 (when it has a fast path)
 *      equals decode transposed, and one row at a time equals the whole run. A fitted base
 *      without a table (and without +out, whose outliers come back) decodes to zeros.
 *   2  bytes: the same specs decode arbitrary units (any codes, NaN/inf fp16 parameters,
 *      outlier indices past the row): two units, any run of rows, no crash.
 * A fitted base's synthetic table has the shape its KvFit gives for the row width (nuq: 2^B
 * values, ascending, in [-1, 1]; vq: d/D codebooks of 2^C entries of D values in [-2, 2]; a
 * table its fit's check still refuses after sorting -- pca's, whose bits must be whole -- is all
 * zeros: every component at 0 bits), seeded by the base and width, in an exact-size allocation, so ASan sees a read past it.
 * Every buffer is malloc'd at exactly the size the API promises (units, scratch, output
 * rows, the 64-row transposed block), so ASan sees any overrun. */
#include <math.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/scheme.h"
#include "tests/fuzz/fuzz.h"

#define MAX_SPECS 256
#define MODERATE 1000.0f

static char specs[MAX_SPECS][64];
static int spec_table[MAX_SPECS];   /* 1: a fitted base, given a synthetic table */
static int n_specs;

static void add_spec(const char *base, const char *mods, int table) {
    fuzz_assert(n_specs < MAX_SPECS, "more specs than MAX_SPECS");
    spec_table[n_specs] = table;
    snprintf(specs[n_specs++], sizeof specs[0], "%s%s", base, mods);
}

/* A base alone and with the row modifiers (+out only where the base quantizes along the row). */
static void add_variants(const char *e, const KvBase *b, int table) {
    add_spec(e, "", table);
    add_spec(e, "+had", table);
    if (b->axis == KV_AXIS_CHANNELS) {
        add_spec(e, "+out2", table);
        add_spec(e, "+had+out1", table);
    }
}

/* Every codec's listed examples with their variants, then the fitted bases' again, each given a
 * table (appended, so the seeds' selectors keep their specs). Built once. */
static void build_specs(void) {
    if (n_specs) return;
    for (int table = 0; table <= 1; table++)
        for (int i = 0; i < kv_codec_count(); i++) {
            if (table && !kv_codec_at(i)->fit) continue;
            char list[512];
            snprintf(list, sizeof list, "%s", kv_codec_at(i)->examples);
            for (char *e = strtok(list, " "); e; e = strtok(NULL, " ")) {
                KvBase b;
                char why[160];
                fuzz_assert(kv_base_parse(e, &b, why, sizeof why) == 0, "a listed example does not parse");
                add_variants(e, &b, table);
            }
        }
}

static void *alloc_exact(size_t n) {
    void *p = malloc(n ? n : 1);
    fuzz_assert(p != NULL, "out of memory");
    return p;
}

static int ascending(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* A fitted base's synthetic table for rows of hd values (see the header), or NULL for a base
 * without a fit. Freed by the caller. */
static float *synthetic_table(const KvBase *b, int hd) {
    if (!b->codec->fit) return NULL;
    KvFitLayout layout;
    b->codec->fit->layout(b, hd, &layout);
    size_t count = kv_fit_table_floats(&layout);
    fuzz_assert(layout.n_tensors >= 1 && layout.n_tensors <= KV_FIT_MAX_TENSORS && count >= 2, "a table layout that makes no sense");
    float *t = alloc_exact(count * sizeof(float));
    uint64_t state = 0x9e3779b97f4a7c15ull ^ (uint64_t)hd ^ (uint64_t)b->bits << 16 ^ (uint64_t)b->variant << 24;
    float range = layout.per_head ? 2.0f : 1.0f;
    for (size_t i = 0; i < count; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = range * (float)((int64_t)(state >> 40) - (1 << 23)) / (float)(1 << 23);
    }
    char why[160];
    const KvFit *fit = b->codec->fit;
    if (fit->check && !fit->check(b, hd, t, why, sizeof why))   /* nuq's table is ascending */
        qsort(t, count, sizeof *t, ascending);   /* not an insertion sort: pca's table at d 256 is 131k floats */
    if (fit->check && !fit->check(b, hd, t, why, sizeof why))   /* pca's bits: whole numbers; all 0 is valid */
        memset(t, 0, count * sizeof *t);
    fuzz_assert(!fit->check || fit->check(b, hd, t, why, sizeof why), "a synthetic table its fit refuses");
    return t;
}

/* A bound spec for rows of hd values, or -1 when the spec cannot take that width. */
static int bind_one(const char *text, int hd, KvLayered *l) {
    char why[256];
    if (kv_layered_parse(text, KV_SIDE_KEYS, l, why, sizeof why)) return -1;
    return kv_layered_bind(l, 1, hd, KV_SIDE_KEYS, why, sizeof why);
}

/* ---- mode 0: the parser ---- */

static void check_spec(const KvSpec *s, int hd) {
    size_t ub = kv_spec_unit_bytes(s, hd);
    fuzz_assert(ub > 0 && s->base.rows >= 1, "empty unit");
    double bits = kv_spec_stored_bits(s, hd);
    fuzz_assert(bits > 0 && isfinite(bits), "stored bits");
    for (int n = 0; n <= 300; n += 37) {
        int end = kv_spec_quantized_end(s, n), lo = s->sinks < n ? s->sinks : n;
        fuzz_assert(end >= lo && (end <= n || end == s->sinks), "quantized end outside the written positions");
        double eff = kv_spec_effective_bits(s, hd, n);
        fuzz_assert(eff > 0 && isfinite(eff), "effective bits");
    }
}

/* One unit of a bound spec: encode deterministic values, decode, move back from the domain. */
static void round_trip(const KvSpec *s, int hd) {
    int rows = s->base.rows;
    size_t values = (size_t)rows * hd, ub = kv_spec_unit_bytes(s, hd);
    float *x = alloc_exact(values * sizeof(float)), *scratch = alloc_exact(values * sizeof(float));
    float *out = alloc_exact(values * sizeof(float));
    unsigned char *unit = alloc_exact(ub);
    for (size_t i = 0; i < values; i++) x[i] = (float)((int)(i * 7 % 23) - 11) * 0.125f;
    kv_spec_encode(s, x, hd, unit, scratch);
    kv_spec_decode(s, unit, hd, 0, rows, out);
    for (int r = 0; r < rows; r++) kv_spec_from_domain(s, out + (size_t)r * hd, hd);
    for (size_t i = 0; i < values; i++) fuzz_assert(isfinite(out[i]), "small values decoded to a non-finite value");
    free(x); free(scratch); free(out); free(unit);
}

static void fuzz_text(const uint8_t *p, size_t len) {
    char text[1100];
    if (len >= sizeof text) len = sizeof text - 1;
    memcpy(text, p, len);
    text[len] = '\0';
    static const int shapes[][2] = {{1, 64}, {22, 64}, {4, 128}, {32, 96}, {2, 48}, {1, 8}, {3, 256}};
    int tried = 0;
    for (int side = KV_SIDE_KEYS; side <= KV_SIDE_VALUES; side++) {
        KvLayered l;
        char why[256];
        why[0] = '\0';
        if (kv_layered_parse(text, (KvSide)side, &l, why, sizeof why)) {
            fuzz_assert(why[0] && strlen(why) < sizeof why, "a refusal without a reason");
            continue;
        }
        KvLayered again;
        fuzz_assert(kv_layered_parse(l.text, (KvSide)side, &again, why, sizeof why) == 0, "canonical text does not parse");
        fuzz_assert(strcmp(again.text, l.text) == 0, "canonical text is not a fixed point");
        KvLayered other = l;   /* bound for the other side: refused */
        fuzz_assert(kv_layered_bind(&other, 64, 64, side == KV_SIDE_KEYS ? KV_SIDE_VALUES : KV_SIDE_KEYS, why, sizeof why) != 0,
                    "a scheme bound for the side it was not parsed for");
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            KvLayered b = l;
            why[0] = '\0';
            if (kv_layered_bind(&b, shapes[k][0], shapes[k][1], (KvSide)side, why, sizeof why)) {
                fuzz_assert(why[0] && strlen(why) < sizeof why, "a bind refusal without a reason");
                continue;
            }
            for (int layer = 0; layer < shapes[k][0]; layer++) check_spec(kv_layered_at(&b, layer), shapes[k][1]);
            if (!tried++) round_trip(kv_layered_at(&b, shapes[k][0] - 1), shapes[k][1]);
        }
    }
}

/* ---- modes 1 and 2: the codecs ---- */

static const int WIDTHS[] = {8, 16, 24, 32, 64, 128, 256};

/* The spec picked by sel, bound at the width picked by w (or the first width it takes); *table
 * receives its synthetic table when the spec has one, else NULL (the caller frees it). */
static int pick(uint8_t sel, uint8_t w, KvLayered *l, int *hd, float **table) {
    const char *text = specs[sel % n_specs];
    *table = NULL;
    int nw = (int)(sizeof WIDTHS / sizeof WIDTHS[0]);
    for (int k = 0; k < nw; k++) {
        *hd = WIDTHS[(w + k) % nw];
        if (bind_one(text, *hd, l) == 0) {
            if (spec_table[sel % n_specs]) *table = synthetic_table(&l->all.base, *hd);
            l->all.base.table = *table;
            return 0;
        }
    }
    return -1;
}

static int moderate(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) <= MODERATE)) return 0;
    return 1;
}

static void fuzz_values(const uint8_t *p, size_t len) {
    if (len < 3) return;
    KvLayered l;
    int hd;
    float *table;
    if (pick(p[0], p[1], &l, &hd, &table)) return;
    int small = p[2] & 1;
    p += 3, len -= 3;
    size_t have = small ? len : len / 4;
    if (have == 0) {
        free(table);
        return;
    }
    const KvSpec *s = &l.all;
    int rows = s->base.rows;
    size_t values = (size_t)rows * hd, ub = kv_spec_unit_bytes(s, hd);
    float *x = alloc_exact(values * sizeof(float)), *scratch = alloc_exact(values * sizeof(float));
    float *out = alloc_exact(values * sizeof(float)), *one = alloc_exact((size_t)hd * sizeof(float));
    float *kt = alloc_exact((size_t)64 * hd * sizeof(float)), *row = alloc_exact((size_t)hd * sizeof(float));
    unsigned char *unit = alloc_exact(ub);
    for (size_t i = 0; i < values; i++) {
        size_t j = i % have;
        if (small) x[i] = (float)(int8_t)p[j] / 16.0f;
        else memcpy(&x[i], p + 4 * j, 4);
    }
    int check = moderate(x, values);
    kv_spec_encode(s, x, hd, unit, scratch);
    kv_spec_decode(s, unit, hd, 0, rows, out);
    int count = rows < 64 ? rows : 64;
    int fast = kv_spec_has_decode_t64(s);
    if (fast) kv_spec_decode_t64(s, unit, hd, 0, count, kt);
    if (check) {
        for (size_t i = 0; i < values; i++) fuzz_assert(isfinite(out[i]), "finite input decoded to a non-finite value");
        if (fast)
            for (int i = 0; i < hd; i++)
                for (int q = 0; q < 64; q++)
                    fuzz_assert(kt[(size_t)i * 64 + q] == (q < count ? out[(size_t)q * hd + i] : 0.0f),
                                "decode_t64 differs from decode");
        for (int r = 0; r < rows; r++) {
            kv_spec_decode(s, unit, hd, r, 1, one);
            fuzz_assert(memcmp(one, out + (size_t)r * hd, (size_t)hd * sizeof(float)) == 0,
                        "a single row differs from the whole unit's decode");
        }
    }
    if (kv_spec_is_fitted(s) && !s->base.table && !s->outliers)
        for (size_t i = 0; i < values; i++) fuzz_assert(out[i] == 0.0f, "a fitted base with no table decoded to nonzero");
    for (int r = 0; r < rows; r++) {   /* the domain moves on whatever came out */
        memcpy(row, out + (size_t)r * hd, (size_t)hd * sizeof(float));
        kv_spec_from_domain(s, row, hd);
        kv_spec_to_domain(s, row, hd);
    }
    free(x); free(scratch); free(out); free(one); free(kt); free(row); free(unit); free(table);
}

static void fuzz_units(const uint8_t *p, size_t len) {
    if (len < 4) return;
    KvLayered l;
    int hd;
    float *table;
    if (pick(p[0], p[1], &l, &hd, &table)) return;
    uint8_t start = p[2], span = p[3];
    p += 4, len -= 4;
    if (len == 0) {
        free(table);
        return;
    }
    const KvSpec *s = &l.all;
    int rows = 2 * s->base.rows;   /* two units back to back */
    size_t ub = kv_spec_unit_bytes(s, hd);
    unsigned char *units = alloc_exact(2 * ub);
    for (size_t i = 0; i < 2 * ub; i++) units[i] = p[i % len];
    int r0 = start % rows, count = 1 + span % (rows - r0);
    float *out = alloc_exact((size_t)count * hd * sizeof(float));
    float *kt = alloc_exact((size_t)64 * hd * sizeof(float));
    kv_spec_decode(s, units, hd, r0, count, out);
    for (int r = 0; r < count; r++) kv_spec_from_domain(s, out + (size_t)r * hd, hd);
    if (kv_spec_has_decode_t64(s)) kv_spec_decode_t64(s, units, hd, r0, count < 64 ? count : 64, kt);
    free(units); free(out); free(kt); free(table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    build_specs();
    switch (data[0] % 3) {
    case 0: fuzz_text(data + 1, size - 1); break;
    case 1: fuzz_values(data + 1, size - 1); break;
    default: fuzz_units(data + 1, size - 1); break;
    }
    return 0;
}
