/* tests/test_pca_blocks.c: pca's block layout (KvCodec.block_codes / block_read, quant/codec_pca.c)
 * against the row-major units it copies, bit for bit: every form block_read gives equals what
 * decode_t64 and decode_coefficients give from the units, for full and partial blocks, after
 * rows are written in pieces that do not line up with the blocks and after some are written
 * again (a new window). The table is synthetic (d = 64): components of every width 0..8 in
 * turn, so the AVX-512 path's permute (<= 4 bits), two-table permute (5) and gather (6..8) and
 * the portable loop are all compared with the same units; +aw weights, one of them 0; and a
 * hostile table whose widths add up past the row's bits (those components read code 0). Also
 * the row transform's sums (pca_project, pca_query_to_coefficients), 16 components at a time,
 * against each component's sum in channel order, and the way back (pca_from_coefficients,
 * pca_sum_from_coefficients), 16 to 64 channels a step, against each channel's sum over the
 * stored components in order; and the encoder's nearest entries (pca_encode_row) against
 * lloyd_nearest's, on tables with repeated entries, a NaN and an infinity. And blocks read at
 * bf16 working precision (attention's bf16 path: KV_BLOCK_DECODED_T64_BF16) against that form's
 * definition, written out here from the rows' codes, and against the exact decode, also with an
 * odd count of stored components (its last pair half empty). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "quant/lloyd.h"
#include "quant/pca.h"
#include "tests/test.h"

#define D 64
#define ROWS 200   /* three blocks and 8 rows of a fourth */
/* KV_BLOCK_DECODED_T64_BF16 against its definition and the exact decode, relative to |m| + the
 * sum of the terms' magnitudes: 32 pairs' sums rounded to f32 (2^-24 each) once or twice a pair
 * (vdpbf16ps may round a pair once); each bf16 term within 2^-8 of the exact one, plus f32
 * roundings. Where the build has no AVX-512 BF16 the codec runs the definition's own loop, which
 * must give its bits: 0 there (a term added out of order is then seen). */
#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__)
#define BF16_FROM_DEFINITION 4e-6
#else
#define BF16_FROM_DEFINITION 0.0
#endif
#define BF16_FROM_EXACT (1.0 / 256 + 1e-5)

typedef struct {
    KvBase base;
    float *table, weights[D];
    size_t unit_bytes;
    unsigned char *units, *blocks;   /* [ROWS][unit_bytes], [4][64 * unit_bytes] */
} Case;

/* The head's table: mean, basis, bits (component i: i % 9 bits), ascending tables. */
static float *synthetic_table(uint64_t *seed) {
    float *t = calloc(pca_head_floats(D), sizeof(float));
    PcaHead h;
    pca_head_view(t, D, &h);
    float *mean = (float *)h.mean, *basis = (float *)h.basis, *bits = (float *)h.bits, *tables = (float *)h.tables;
    for (int i = 0; i < D; i++) mean[i] = rnd(seed);
    for (int i = 0; i < D * D; i++) basis[i] = rnd(seed);
    for (int i = 0; i < D; i++) {
        bits[i] = (float)(i % 9);
        int entries = i % 9 ? 1 << (i % 9) : 0;
        float v = -2.0f;
        for (int j = 0; j < entries; j++) tables[(size_t)i * PCA_TABLE_STRIDE + j] = v += 0.01f + 0.1f * (rnd(seed) + 1.0f);
    }
    return t;
}

static int case_init(Case *c, const char *name, float *table, int aw, uint64_t *seed) {
    char why[200];
    memset(c, 0, sizeof *c);
    if (kv_base_parse(name, &c->base, why, sizeof why)) return 0;
    c->table = table;
    c->base.table = table;
    for (int i = 0; i < D; i++) c->weights[i] = i == 5 ? 0.0f : 0.6f + 0.5f * rnd(seed);
    c->base.weights = aw ? c->weights : NULL;
    c->unit_bytes = c->base.codec->unit_bytes(&c->base, D);
    c->units = malloc(ROWS * c->unit_bytes);
    c->blocks = calloc(4, 64 * c->unit_bytes);
    for (size_t i = 0; i < ROWS * c->unit_bytes; i++) c->units[i] = (unsigned char)(rnd(seed) * 128 + 128);
    return c->units && c->blocks;
}

/* block_codes for rows [from, to), split at the blocks' edges. */
static void write_blocks(const Case *c, int from, int to) {
    for (int r = from; r < to;) {
        int n = 64 - r % 64 < to - r ? 64 - r % 64 : to - r;
        c->base.codec->block_codes(&c->base, c->units, D, r, n, c->blocks + (size_t)(r / 64) * 64 * c->unit_bytes);
        r += n;
    }
}

/* Every block's three forms against the units' reads; the largest difference (0: equal). */
static double compare_blocks(const Case *c) {
    const KvCodec *codec = c->base.codec;
    double worst = 0;
    static float got[D * 64], want[D * 64], rows[64 * D];
    for (int r0 = 0; r0 < ROWS; r0 += 64) {
        int count = ROWS - r0 < 64 ? ROWS - r0 : 64;
        const unsigned char *block = c->blocks + (size_t)(r0 / 64) * 64 * c->unit_bytes;
        codec->block_read(&c->base, block, D, count, KV_BLOCK_DECODED_T64, got);
        codec->decode_t64(&c->base, c->units, D, r0, count, want);
        worst = max_or_inf(worst, max_abs_diff(got, want, D * 64));
        codec->block_read(&c->base, block, D, count, KV_BLOCK_COEFFICIENTS, got);
        codec->decode_coefficients(&c->base, c->units, D, r0, count, rows);
        worst = max_or_inf(worst, max_abs_diff(got, rows, (size_t)count * D));
        codec->block_read(&c->base, block, D, count, KV_BLOCK_COEFFICIENTS_T64, got);
        for (int i = 0; i < D; i++)
            for (int p = 0; p < 64; p++) want[i * 64 + p] = p < count ? rows[p * D + i] : 0.0f;
        worst = max_or_inf(worst, max_abs_diff(got, want, D * 64));
    }
    return worst;
}

/* The first block's decoded transpose against the row decode (decode: pca_from_coefficients, whose
 * sums check_back_transforms checks), for counts that leave 3, 2, 1 and 0 vectors of 16 positions
 * past the rows read, and a few rows in the last. */
static double compare_with_rows(const Case *c) {
    static const int counts[] = {64, 49, 48, 33, 17, 16, 8, 1};
    static float got[D * 64], rows[64 * D];
    double worst = 0;
    c->base.codec->decode(&c->base, c->units, D, 0, 64, rows);
    for (int k = 0; k < (int)(sizeof counts / sizeof *counts); k++) {
        int count = counts[k];
        c->base.codec->block_read(&c->base, c->blocks, D, count, KV_BLOCK_DECODED_T64, got);
        for (int i = 0; i < D; i++)
            for (int p = 0; p < 64; p++) {
                float want = p < count ? rows[p * D + i] : 0.0f;
                worst = max_or_inf(worst, memcmp(&want, &got[i * 64 + p], sizeof want) ? fabs((double)want - got[i * 64 + p]) + 1e-30 : 0);
            }
    }
    return worst;
}

/* The codec's row decode (its sqrt(w), 16 at a time) against pca_decode_row of the row's codes
 * with sqrt(w) taken here by sqrtf, bit for bit, for the first 64 rows. */
static double compare_with_roots(const Case *c) {
    PcaHead h;
    pca_head_view(c->table, D, &h);
    float roots[D], got[D], want[D];
    for (int i = 0; i < D; i++) roots[i] = sqrtf(c->weights[i]);
    double worst = 0;
    for (int r = 0; r < 64; r++) {
        unsigned short codes[D];
        uint8_t bytes[D];
        c->base.codec->codes(&c->base, c->units + (size_t)r * c->unit_bytes, D, codes);
        for (int i = 0; i < D; i++) bytes[i] = (uint8_t)codes[i];
        c->base.codec->decode(&c->base, c->units, D, r, 1, got);
        pca_decode_row(&h, c->base.weights ? roots : NULL, bytes, want);
        for (int i = 0; i < D; i++)
            if (memcmp(&got[i], &want[i], sizeof want[i])) worst = max_or_inf(worst, fabs((double)got[i] - want[i]) + 1e-30);
    }
    return worst;
}

/* One channel of a block at bf16 working precision (KV_BLOCK_DECODED_T64_BF16), its definition
 * (quant/codec_pca_blocks.c) written out here: r = 1 / sqrt(w) (0 where sqrt(w) is not > 0; 1
 * without weights), m = mean r, v_i = U[i][c] r, then over the stored components i in pairs
 * (a, b), ascending (an odd count's last b absent), acc + bf(y_b) bf(v_b), then + bf(y_a) bf(v_a),
 * each rounded to f32. *scale: |m| + sum |y_i U[i][c] r|, the magnitude the differences are
 * relative to. */
static float bf16_definition(const PcaHead *h, const float *sqrt_w, const float *y, int c, double *scale) {
    float r = !sqrt_w ? 1.0f : sqrt_w[c] > 0 ? 1.0f / sqrt_w[c] : 0.0f, acc = h->mean[c] * r;
    int stored[D], count = 0;
    for (int i = 0; i < D; i++)
        if (h->bits[i] >= 1 && h->bits[i] <= 8) stored[count++] = i;   /* the stored components */
    *scale = fabs((double)acc);
    for (int k = 0; k < count; k += 2) {
        int a = stored[k], b = k + 1 < count ? stored[k + 1] : -1;
        if (b >= 0) acc = acc + bf16_to_f32(f32_to_bf16(y[b])) * bf16_to_f32(f32_to_bf16(h->basis[(size_t)b * D + c] * r));
        acc = acc + bf16_to_f32(f32_to_bf16(y[a])) * bf16_to_f32(f32_to_bf16(h->basis[(size_t)a * D + c] * r));
    }
    for (int k = 0; k < count; k++) *scale += fabs((double)y[stored[k]] * h->basis[(size_t)stored[k] * D + c] * r);
    return acc;
}

/* Every block read at bf16 working precision, for counts that leave 3, 2, 1 and 0 vectors of 16
 * positions past the rows read: the largest difference from the definition (y from the rows'
 * codes) and from the exact decoded block, each relative to its scale. */
static void compare_bf16(const Case *c, double *from_definition, double *from_exact) {
    static const int counts[] = {64, 49, 48, 33, 17, 16, 8, 1};
    static float got[D * 64], exact[D * 64];
    PcaHead h;
    pca_head_view(c->table, D, &h);
    float roots[D], y[64][D];
    for (int i = 0; i < D; i++) roots[i] = sqrtf(c->weights[i]);
    *from_definition = *from_exact = 0;
    for (int r0 = 0; r0 < ROWS; r0 += 64) {
        const unsigned char *block = c->blocks + (size_t)(r0 / 64) * 64 * c->unit_bytes;
        for (int p = 0; p < 64 && r0 + p < ROWS; p++) {
            unsigned short codes[D];
            c->base.codec->codes(&c->base, c->units + (size_t)(r0 + p) * c->unit_bytes, D, codes);
            for (int i = 0; i < D; i++) y[p][i] = h.tables[(size_t)i * PCA_TABLE_STRIDE + codes[i]];
        }
        for (int k = 0; k < (int)(sizeof counts / sizeof *counts); k++) {
            int count = counts[k];
            if (r0 + count > ROWS) continue;
            c->base.codec->block_read(&c->base, block, D, count, KV_BLOCK_DECODED_T64_BF16, got);
            c->base.codec->block_read(&c->base, block, D, count, KV_BLOCK_DECODED_T64, exact);
            for (int i = 0; i < D; i++)
                for (int p = 0; p < 64; p++) {
                    double scale = 0, want = p < count ? bf16_definition(&h, c->base.weights ? roots : NULL, y[p], i, &scale) : 0;
                    double g = got[i * 64 + p];
                    if (scale == 0) scale = 1;   /* a channel of weight 0, or past count: 0 wanted, compared as it is */
                    *from_definition = max_or_inf(*from_definition, fabs(g - want) / scale);
                    *from_exact = max_or_inf(*from_exact, fabs(g - exact[i * 64 + p]) / scale);
                }
        }
    }
}

static void check_case(const char *name, const char *label, float *table, int aw, uint64_t *seed) {
    Case c;
    char check_name[200];
    snprintf(check_name, sizeof check_name, "pca blocks: %s: the case builds", label);
    if (!check(case_init(&c, name, table, aw, seed), check_name, "%s does not parse or out of memory", name)) return;
    /* pieces that cross the blocks' edges: 1, 62, 3, 70, 64 (to 200) */
    static const int edges[] = {0, 1, 63, 66, 136, ROWS};
    for (int i = 0; i + 1 < (int)(sizeof edges / sizeof *edges); i++) write_blocks(&c, edges[i], edges[i + 1]);
    double d = compare_blocks(&c);
    snprintf(check_name, sizeof check_name, "pca blocks: %s: block_read = decode_t64 and decode_coefficients of the units, bit for bit", label);
    check(d == 0, check_name, "off by %.3g", d);
    d = compare_with_roots(&c);
    snprintf(check_name, sizeof check_name, "pca blocks: %s: the row decode = pca_decode_row of its codes with sqrtf's roots, bit for bit", label);
    check(d == 0, check_name, "off by %.3g", d);
    d = compare_with_rows(&c);
    snprintf(check_name, sizeof check_name, "pca blocks: %s: decoded transposed blocks of 64 down to 1 rows = the row decode, bit for bit", label);
    check(d == 0, check_name, "off by %.3g", d);
    double from_exact;
    compare_bf16(&c, &d, &from_exact);
    snprintf(check_name, sizeof check_name,
             "pca blocks: %s: bf16 blocks = their definition (%.0g of the terms' sum) and the exact decode (%.4f)",
             label, BF16_FROM_DEFINITION, BF16_FROM_EXACT);
    check(d <= BF16_FROM_DEFINITION && from_exact <= BF16_FROM_EXACT, check_name,
          "%.3g from the definition, %.3g from the exact decode", d, from_exact);
    printf("     %s: bf16 form %.3g from its definition, %.3g from the exact decode (of the terms' sum)\n", label, d, from_exact);
    /* rows 50..130 written again (a new window from position 50), their blocks updated */
    for (size_t i = 50 * c.unit_bytes; i < 130 * c.unit_bytes; i++) c.units[i] = (unsigned char)(rnd(seed) * 128 + 128);
    write_blocks(&c, 50, 130);
    d = compare_blocks(&c);
    snprintf(check_name, sizeof check_name, "pca blocks: %s: after rows 50..129 are written again, still bit for bit", label);
    check(d == 0, check_name, "off by %.3g", d);
    free(c.units);
    free(c.blocks);
}

/* pca_project and pca_query_to_coefficients (vectorized over components) against each
 * component's sum in channel order, written out here, bit for bit: at d = 64 (16 rows at a
 * time) and d = 24 (the rows one by one). */
static void check_projections(int d, uint64_t *seed) {
    float *t = calloc(pca_head_floats(d), sizeof(float)), x[64], w[64], y[64], want[64], v[64];
    PcaHead h;
    pca_head_view(t, d, &h);
    float *mean = (float *)h.mean, *basis = (float *)h.basis, *bits = (float *)h.bits;
    for (int i = 0; i < d; i++) mean[i] = rnd(seed), x[i] = 3 * rnd(seed), w[i] = 0.6f + 0.5f * rnd(seed);
    for (int i = 0; i < d * d; i++) basis[i] = rnd(seed);
    for (int i = 0; i < d; i++) bits[i] = (float)(i % 3);   /* every third component stores nothing */
    double worst = 0;
    pca_project(&h, w, x, y);
    for (int c = 0; c < d; c++) v[c] = w[c] * x[c] - mean[c];
    for (int i = 0; i < d; i++) {
        float s = basis[(size_t)i * d] * v[0];
        for (int c = 1; c < d; c++) s = s + basis[(size_t)i * d + c] * v[c];
        want[i] = s;
    }
    worst = max_or_inf(worst, max_abs_diff(y, want, (size_t)d));
    pca_query_to_coefficients(&h, w, x, 1, y);
    for (int c = 0; c < d; c++) v[c] = x[c] / w[c];
    for (int i = 0; i < d; i++) {
        float s = basis[(size_t)i * d] * v[0];
        for (int c = 1; c < d; c++) s = s + basis[(size_t)i * d + c] * v[c];
        want[i] = i % 3 ? s : 0.0f;
    }
    worst = max_or_inf(worst, max_abs_diff(y, want, (size_t)d));
    char name[160];
    snprintf(name, sizeof name, "pca blocks: d = %d: pca_project and pca_query_to_coefficients = the sums in channel order, bit for bit", d);
    check(worst == 0, name, "off by %.3g", worst);
    /* 70 rows moved together in place (the rows a call scales at a time end at 4096 / d: at d = 64,
     * past the 64th) = each row moved alone */
    enum { ROWS_TOGETHER = 70 };
    float *together = malloc(2 * ROWS_TOGETHER * (size_t)d * sizeof(float)), *queries = together + ROWS_TOGETHER * d;
    for (int i = 0; i < ROWS_TOGETHER * d; i++) together[i] = queries[i] = 3 * rnd(seed);
    pca_query_to_coefficients(&h, w, together, ROWS_TOGETHER, together);
    worst = 0;
    for (int r = 0; r < ROWS_TOGETHER; r++) {
        pca_query_to_coefficients(&h, w, queries + (size_t)r * d, 1, v);
        worst = max_or_inf(worst, max_abs_diff(together + (size_t)r * d, v, (size_t)d));
    }
    snprintf(name, sizeof name, "pca blocks: d = %d: pca_query_to_coefficients of 70 rows together, in place = each alone, bit for bit", d);
    check(worst == 0, name, "off by %.3g", worst);
    free(together);
    free(t);
}

/* The back transforms, (mu (x y[slot]) + sum of the stored y[i] U[i][c], i ascending) / sqrt(w),
 * against those sums written out here, bit for bit: d = 64 (four vectors), 80 (four, then one),
 * 48 (three) and 24 (one, then a plain tail); with +aw weights (one 0, whose channel reads 0)
 * and without. */
static void check_back_transforms(int d, uint64_t *seed) {
    float *t = calloc(pca_head_floats(d), sizeof(float)), y[80], w[80], got[80], want[80];
    PcaHead h;
    pca_head_view(t, d, &h);
    float *mean = (float *)h.mean, *basis = (float *)h.basis, *bits = (float *)h.bits;
    for (int i = 0; i < d; i++) mean[i] = rnd(seed), y[i] = 3 * rnd(seed), w[i] = i == 7 ? 0.0f : 0.6f + 0.5f * rnd(seed);
    for (int i = 0; i < d * d; i++) basis[i] = rnd(seed);
    for (int i = 0; i < d; i++) bits[i] = (float)(i % 3);   /* every third component stores nothing */
    double worst = 0;
    for (int form = 0; form < 4; form++) {   /* from / sum, each without and with weights */
        int sum = form & 1;
        const float *sqrt_w = form & 2 ? w : NULL;
        if (sum) pca_sum_from_coefficients(&h, sqrt_w, y, 0, got);
        else pca_from_coefficients(&h, sqrt_w, y, got);
        for (int c = 0; c < d; c++) {
            float s = sum ? mean[c] * y[0] : mean[c];
            for (int i = 0; i < d; i++)
                if (i % 3) s = s + y[i] * basis[(size_t)i * d + c];
            want[c] = !sqrt_w ? s : sqrt_w[c] > 0 ? s / sqrt_w[c] : 0.0f;
        }
        worst = max_or_inf(worst, max_abs_diff(got, want, (size_t)d));
    }
    char name[160];
    snprintf(name, sizeof name, "pca blocks: d = %d: pca_from_coefficients and pca_sum_from_coefficients = the sums in component order, bit for bit", d);
    check(worst == 0, name, "off by %.3g", worst);
    free(t);
}

/* pca_encode_row's codes against lloyd_nearest of each component's projection (pca_project),
 * for widths 1..8: tables with each entry twice in a row (ties: the first wins), a NaN entry, an
 * infinite one, and rows whose components land on entries, between them and past both ends. */
static void check_nearest(uint64_t *seed) {
    float *t = calloc(pca_head_floats(D), sizeof(float)), x[D], y[D];
    PcaHead h;
    pca_head_view(t, D, &h);
    float *basis = (float *)h.basis, *bits = (float *)h.bits, *tables = (float *)h.tables;
    for (int i = 0; i < D; i++) basis[i * D + i] = 1.0f;   /* y = x: components land where they are put */
    for (int i = 0; i < D; i++) {
        bits[i] = (float)(1 + i % 8);
        int entries = 1 << (1 + i % 8);
        for (int j = 0; j < entries; j++) tables[(size_t)i * PCA_TABLE_STRIDE + j] = (float)(j / 2) * 0.25f - 4.0f;
        if (i % 3 == 1) tables[(size_t)i * PCA_TABLE_STRIDE + entries / 3] = NAN;
        if (i % 5 == 2) tables[(size_t)i * PCA_TABLE_STRIDE + entries - 1] = INFINITY;
    }
    int wrong = 0;
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < D; i++) x[i] = r % 4 == 0 ? (float)((int)(rnd(seed) * 80)) * 0.125f : 40.0f * rnd(seed);
        if (r == 7) x[3] = NAN, x[9] = INFINITY, x[10] = -INFINITY;
        uint8_t codes[D];
        pca_encode_row(&h, NULL, x, codes);
        pca_project(&h, NULL, x, y);
        for (int i = 0; i < D; i++)
            wrong += codes[i] != lloyd_nearest(&y[i], 1, tables + (size_t)i * PCA_TABLE_STRIDE, 1 << (1 + i % 8));
    }
    check(wrong == 0, "pca blocks: pca_encode_row's codes = lloyd_nearest's (ties, NaN and infinite entries, widths 1..8)",
          "%d of %d codes differ", wrong, 200 * D);
    free(t);
}

int main(void) {
    uint64_t seed = 91;
    float *table = synthetic_table(&seed);
    if (!check(table != NULL, "pca blocks: the synthetic table", "out of memory")) return test_exit_code();
    check_case("pca4", "pca4+aw, widths 0..8 (252 of 256 bits)", table, 1, &seed);
    check_case("pca4", "pca4, no weights", table, 0, &seed);
    check_case("pca1", "pca1+aw, widths past the row's 64 bits (hostile)", table, 1, &seed);
    /* component 1 stores nothing: 55 stored components, an odd count (the bf16 form's last pair
     * takes 0 for its second) */
    PcaHead head;
    pca_head_view(table, D, &head);
    ((float *)head.bits)[1] = 0.0f;
    check_case("pca4", "pca4+aw, 55 stored components (an odd count)", table, 1, &seed);
    free(table);
    check_projections(64, &seed);
    check_projections(24, &seed);
    for (int i = 0; i < 4; i++) check_back_transforms((int[]){64, 80, 48, 24}[i], &seed);
    check_nearest(&seed);
    return test_exit_code();
}
