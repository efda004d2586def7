/* tests/test_entropy.c: entropy bits per value (SCHEMES.md §9, tests/fixtures/reference/SCHEMES.md).
 *
 * - kv_stream_entropy_bits on counts whose entropy is worked out by hand (one repeated symbol: 0).
 * - Every codec of the table that stores codes says so (code_layout and codes; only the float
 *   bases may have none), and its layout adds up: rows x slots codes of log2(symbols) bits plus
 *   the parameters' bits are the unit's bits, for each of its examples at head_dim 64 and 128.
 * - codes() on units built here from each codec's documented byte layout gives back the codes
 *   put in; for the bases whose decode is an affine map of the code with a scale of 1 (int,
 *   q4_0, q5_1, q8_0) decode agrees with the codes too, so the codes are the ones decode reads.
 * - The figure of a small cache (one layer, one KV head, head_dim 64) written with rows whose
 *   codes are known, against sums worked out by hand: alternating rows (1 bit a code), a 3:1
 *   split, per-channel symbols that differ across channels (0 bits: each slot is its own
 *   stream), token-axis units (channel-major codes), +res, +sink and +out, fp16 and fp32. */
#include "tests/test.h"
#include "model/kvcache.h"
#include "quant/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIM 64

static void expect_near(double got, double want, double tol, const char *name) {
    check(fabs(got - want) <= tol, name, "got %.12g, want %.12g", got, want);
}

/* ---- one stream ---- */

static void test_stream_entropy(void) {
    unsigned one[4] = {0, 9, 0, 0}, pair[2] = {1, 1}, three[3] = {1, 1, 2}, skew[2] = {3, 1}, none[3] = {0, 0, 0};
    expect_near(kv_stream_entropy_bits(one, 4), 0.0, 0, "entropy: a stream of one repeated symbol holds 0 bits");
    expect_near(kv_stream_entropy_bits(pair, 2), 2.0, 1e-12, "entropy: {1,1} holds 2 bits");
    /* -1 log2(1/4) - 1 log2(1/4) - 2 log2(1/2) = 2 + 2 + 2 */
    expect_near(kv_stream_entropy_bits(three, 3), 6.0, 1e-12, "entropy: {1,1,2} holds 6 bits");
    /* -3 log2(3/4) - 1 log2(1/4) */
    expect_near(kv_stream_entropy_bits(skew, 2), 3 * log2(4.0 / 3.0) + 2, 1e-12, "entropy: {3,1} holds 3 log2(4/3) + 2 bits");
    expect_near(kv_stream_entropy_bits(none, 3), 0.0, 0, "entropy: an empty stream holds 0 bits");
}

/* ---- the codecs' layouts ---- */

static int log2_exact(int symbols) {
    int b = 0;
    while ((1 << b) < symbols) b++;
    return (1 << b) == symbols ? b : -1;
}

static void test_layouts(void) {
    int missing = 0, bad = 0, tried = 0;
    char first[160] = "";
    for (int i = 0; i < kv_codec_count(); i++) {
        const KvCodec *codec = kv_codec_at(i);
        char names[512];
        snprintf(names, sizeof names, "%s", codec->examples);
        for (char *name = strtok(names, " "); name; name = strtok(NULL, " ")) {
            KvBase b;
            char why[160];
            if (kv_base_parse(name, &b, why, sizeof why)) continue;
            if (!codec->code_layout || !codec->codes) {
                if (b.bits != 16 && b.bits != 32) missing++;   /* only the float bases may store no codes */
                continue;
            }
            if (codec->code_widths_from_table) continue;   /* widths from a fitted table: tests/test_pca.c */
            for (int n = DIM; n <= 2 * DIM; n += DIM) {
                if (!kv_base_check(&b, n, why, sizeof why)) continue;
                int slots, symbols, params;
                codec->code_layout(&b, n, &slots, &symbols, &params);
                int code_bits = log2_exact(symbols);
                double bits = (double)b.rows * slots * code_bits + params, want = 8.0 * (double)codec->unit_bytes(&b, n);
                tried++;
                if (code_bits < 0 || bits != want) {
                    if (!bad++) snprintf(first, sizeof first, "%s at n %d: %g bits of codes and parameters, unit %g", name, n, bits, want);
                }
            }
        }
    }
    check(missing == 0, "entropy: every codec that is not a float base has code_layout and codes", "%d lack them", missing);
    check(tried > 20 && bad == 0, "entropy: every example's codes and parameters fill its unit exactly (n 64, 128)",
          "%d of %d: %s", bad, tried, first);
}

/* put_codes is codes' inverse on every example, at head_dim 64: for seeded random units u and
 * codes c, codes(put_codes(c, u)) = c, and putting u's own codes back over other ones gives u
 * again, byte for byte (put_codes touches the code bits and nothing else). */
static void test_put_codes(void) {
    static unsigned char unit[65536], other[65536];
    static unsigned short mine[65536], random_codes[65536], got[65536];
    uint64_t seed = 11;
    int bad = 0, tried = 0;
    char first[160] = "";
    for (int i = 0; i < kv_codec_count(); i++) {
        const KvCodec *codec = kv_codec_at(i);
        char names[512];
        snprintf(names, sizeof names, "%s", codec->examples);
        for (char *name = strtok(names, " "); name; name = strtok(NULL, " ")) {
            KvBase b;
            char why[160];
            if (kv_base_parse(name, &b, why, sizeof why) || !codec->codes || !kv_base_check(&b, DIM, why, sizeof why)) continue;
            if (codec->code_widths_from_table) continue;   /* tests/test_pca.c, with a fitted table */
            int slots, symbols, params;
            codec->code_layout(&b, DIM, &slots, &symbols, &params);
            size_t bytes = codec->unit_bytes(&b, DIM), count = (size_t)b.rows * slots;
            for (int trial = 0; trial < 4; trial++) {
                for (size_t k = 0; k < bytes; k++) unit[k] = (unsigned char)(rnd(&seed) * 128 + 128);
                for (size_t k = 0; k < count; k++) random_codes[k] = (unsigned short)((rnd(&seed) + 1) / 2 * symbols) % symbols;
                codec->codes(&b, unit, DIM, mine);
                memcpy(other, unit, bytes);
                codec->put_codes(&b, random_codes, DIM, other);
                codec->codes(&b, other, DIM, got);
                int ok = !memcmp(got, random_codes, count * sizeof *got);
                codec->put_codes(&b, mine, DIM, other);
                ok &= !memcmp(other, unit, bytes);
                tried++;
                if (!ok && !bad++) snprintf(first, sizeof first, "%s", name);
            }
        }
    }
    check(tried > 80 && !bad, "entropy: put_codes is the inverse of codes and touches nothing else (every example)",
          "%d of %d, first %s", bad, tried, first);
}

/* ---- codes() against units built from each documented layout ---- */

/* code i at bits [i*bits, i*bits+bits), stream bit k = bit k%8 of byte k/8 */
static void pack(unsigned char *out, const unsigned *codes, int count, int bits) {
    for (int i = 0; i < count; i++)
        for (int k = 0; k < bits; k++) {
            size_t bit = (size_t)i * bits + k;
            if (codes[i] >> k & 1) out[bit / 8] |= (unsigned char)(1u << (bit % 8));
        }
}

static void put_f16(unsigned char *p, float x) { kv_put_u16(p, f32_to_f16(x)); }

typedef struct {
    const char *name;
    int n;
    unsigned char unit[4096];
    unsigned want[4096];   /* [rows][slots] */
    int count;
} Built;

static int parse_or_fail(const char *name, KvBase *b) {
    char why[160];
    if (kv_base_parse(name, b, why, sizeof why) == 0) return 1;
    check(0, "entropy: a base of the layout checks parses", "%s: %s", name, why);
    return 0;
}

/* codes() of u gives back u->want; with affine (decode = (code - zero) * 1), decode too. */
static void check_codes(const Built *u, int affine, int zero, const char *check_name) {
    KvBase b;
    if (!parse_or_fail(u->name, &b)) return;
    unsigned short got[4096];
    b.codec->codes(&b, u->unit, u->n, got);
    int bad = -1;
    for (int i = 0; i < u->count && bad < 0; i++)
        if (got[i] != u->want[i]) bad = i;
    float dec[4096];
    int bad_dec = -1;
    if (affine) {
        b.codec->decode(&b, u->unit, u->n, 0, b.rows, dec);
        for (int i = 0; i < u->count && bad_dec < 0; i++)
            if (dec[i] != (float)((int)u->want[i] - zero)) bad_dec = i;
    }
    check(bad < 0 && bad_dec < 0, check_name, "%s: code %d is %u, want %u; decoded value %d", u->name, bad,
          bad >= 0 ? got[bad] : 0, bad >= 0 ? u->want[bad] : 0, bad_dec);
}

static void test_codes_layouts(void) {
    static Built u;
    /* int4-g64: codes, then the fp16 scale 1; decode = code - 8 */
    memset(&u, 0, sizeof u), u.name = "int4-g64", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 7) % 16;
    pack(u.unit, u.want, DIM, 4);
    put_f16(u.unit + 32, 1.0f);
    check_codes(&u, 1, 8, "entropy: int4-g64 codes as stored and as decode reads them");
    /* int3-t8-asym: 8 rows, channel-major codes (channel c's 8 codes together), then per channel
     * fp16 scale 1 and lo 0; decode = code; want is [row][channel] */
    memset(&u, 0, sizeof u), u.name = "int3-t8-asym", u.n = DIM, u.count = 8 * DIM;
    unsigned stream[8 * DIM];
    for (int c = 0; c < DIM; c++)
        for (int r = 0; r < 8; r++) stream[c * 8 + r] = u.want[r * DIM + c] = (unsigned)(r + 3 * c) % 8;
    pack(u.unit, stream, 8 * DIM, 3);
    for (int c = 0; c < DIM; c++) put_f16(u.unit + 8 * DIM * 3 / 8 + 4 * c, 1.0f), put_f16(u.unit + 8 * DIM * 3 / 8 + 4 * c + 2, 0.0f);
    check_codes(&u, 1, 0, "entropy: int3-t8-asym codes by row and channel from channel-major units");
    /* q4_0: per block of 32, fp16 d = 1, byte j = code j | code j+16 << 4; decode = code - 8 */
    memset(&u, 0, sizeof u), u.name = "q4_0", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 5 + 3) % 16;
    for (int k = 0; k < 2; k++) {
        unsigned char *blk = u.unit + 18 * k;
        put_f16(blk, 1.0f);
        for (int j = 0; j < 16; j++) blk[2 + j] = (unsigned char)(u.want[32 * k + j] | u.want[32 * k + j + 16] << 4);
    }
    check_codes(&u, 1, 8, "entropy: q4_0 codes as stored and as decode reads them");
    /* q5_1: d = 1, m = 0, qh bit j = bit 4 of code j, then nibbles as q4_0; decode = code */
    memset(&u, 0, sizeof u), u.name = "q5_1", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 11 + 1) % 32;
    for (int k = 0; k < 2; k++) {
        unsigned char *blk = u.unit + 24 * k;
        put_f16(blk, 1.0f), put_f16(blk + 2, 0.0f);
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) qh |= (uint32_t)(u.want[32 * k + j] >> 4) << j;
        for (int j = 0; j < 4; j++) blk[4 + j] = (unsigned char)(qh >> (8 * j));
        for (int j = 0; j < 16; j++)
            blk[8 + j] = (unsigned char)((u.want[32 * k + j] & 15) | (u.want[32 * k + j + 16] & 15) << 4);
    }
    check_codes(&u, 1, 0, "entropy: q5_1 codes (qh's fifth bits) as stored and as decode reads them");
    /* q8_0: d = 1, the code is the int8's byte; decode = the signed value */
    memset(&u, 0, sizeof u), u.name = "q8_0", u.n = DIM, u.count = DIM;
    for (int k = 0; k < 2; k++) {
        put_f16(u.unit + 34 * k, 1.0f);
        for (int j = 0; j < 32; j++) u.unit[34 * k + 2 + j] = (unsigned char)(u.want[32 * k + j] = (unsigned)(j * 37 + k) % 256);
    }
    KvBase b;
    if (parse_or_fail("q8_0", &b)) {
        unsigned short got[DIM];
        float dec[DIM];
        b.codec->codes(&b, u.unit, DIM, got);
        b.codec->decode(&b, u.unit, DIM, 0, 1, dec);
        int bad = 0;
        for (int i = 0; i < DIM; i++) bad += got[i] != u.want[i] || dec[i] != (float)(signed char)got[i];
        check(!bad, "entropy: q8_0 codes are the int8 bytes decode reads", "%d differ", bad);
    }
    /* iq4_nl: d then nibbles as q4_0 */
    memset(&u, 0, sizeof u), u.name = "iq4_nl", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 9 + 2) % 16;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 16; j++) u.unit[18 * k + 2 + j] = (unsigned char)(u.want[32 * k + j] | u.want[32 * k + j + 16] << 4);
    check_codes(&u, 0, 0, "entropy: iq4_nl codes from ggml's block layout");
    /* nf4-g32: code i the low nibble of byte i/2 when even, the high one when odd */
    memset(&u, 0, sizeof u), u.name = "nf4-g32", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 3 + 5) % 16, u.unit[i / 2] |= (unsigned char)(u.want[i] << (i % 2 ? 4 : 0));
    check_codes(&u, 0, 0, "entropy: nf4-g32 codes from its nibbles");
    /* tq3: the 3-bit stream, then the fp16 norm */
    memset(&u, 0, sizeof u), u.name = "tq3", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.want[i] = (unsigned)(i * 5 + 1) % 8;
    pack(u.unit, u.want, DIM, 3);
    check_codes(&u, 0, 0, "entropy: tq3 codes from its 3-bit stream");
    /* vq6-d4: 16 sub-vectors' 6-bit codes (crossing bytes), then the fp16 norm */
    memset(&u, 0, sizeof u), u.name = "vq6-d4", u.n = DIM, u.count = DIM / 4;
    for (int i = 0; i < DIM / 4; i++) u.want[i] = (unsigned)(i * 13 + 7) % 64;
    pack(u.unit, u.want, DIM / 4, 6);
    check_codes(&u, 0, 0, "entropy: vq6-d4 sub-vector codes from its 6-bit stream");
    /* fp8: the code is the byte */
    memset(&u, 0, sizeof u), u.name = "fp8-e4m3", u.n = DIM, u.count = DIM;
    for (int i = 0; i < DIM; i++) u.unit[i] = (unsigned char)(u.want[i] = (unsigned)(i * 29) % 256);
    check_codes(&u, 0, 0, "entropy: fp8-e4m3 codes are its bytes");
}

/* ---- the figure of a cache ---- */

/* A cache of one layer and one KV head with spec for keys and values, rows[p] written at
 * position p (keys as given, already rotated), n positions; the figure of each side. */
static int cache_figure2(const char *k_spec, const char *v_spec, float rows[][DIM], int n, double *k_bits, double *v_bits);

static int cache_figure(const char *spec, float rows[][DIM], int n, double *k_bits, double *v_bits) {
    return cache_figure2(spec, spec, rows, n, k_bits, v_bits);
}

static int cache_figure2(const char *k_spec, const char *v_spec, float rows[][DIM], int n, double *k_bits, double *v_bits) {
    const char *spec = k_spec;
    Config cfg = {0};
    cfg.n_layers = 1, cfg.n_heads = 1, cfg.n_kv_heads = 1, cfg.head_dim = DIM, cfg.dim = DIM, cfg.max_seq_len = n;
    KvLayered k, v;
    char why[200];
    Error err = {0};
    if (kv_layered_parse(k_spec, KV_SIDE_KEYS, &k, why, sizeof why) || kv_layered_parse(v_spec, KV_SIDE_VALUES, &v, why, sizeof why)) {
        check(0, spec, "%s", why);
        return -1;
    }
    KvCache c;
    KvCacheScheme scheme = {k, v, NULL};
    if (kv_cache_init(&c, &cfg, n, n, &scheme, NULL, &err)) {
        check(0, spec, "%s", err.msg);
        return -1;
    }
    for (int p = 0; p < n; p++) kv_cache_write(&c, 0, p, rows[p], rows[p], NULL);
    kv_cache_commit(&c, 0, 0, n);
    c.len = n;
    KvCodeCounts e;
    int rc = kv_code_counts_init(&e, &c, &err);
    if (rc == 0) {
        kv_code_counts_add(&e, &c);
        *k_bits = kv_code_counts_bits(&e, 0);
        *v_bits = kv_code_counts_bits(&e, 1);
        kv_code_counts_free(&e);
    }
    kv_cache_free(&c);
    return rc;
}

static void expect_figure(const char *spec, float rows[][DIM], int n, double want, const char *name) {
    double kb = -1, vb = -1;
    if (cache_figure(spec, rows, n, &kb, &vb)) return;
    check(fabs(kb - want) <= 1e-12 && fabs(vb - want) <= 1e-12, name, "keys %.12g, values %.12g, want %.12g", kb, vb, want);
}

static void fill(float *row, float even, float odd) {
    for (int i = 0; i < DIM; i++) row[i] = i % 2 ? odd : even;
}

static void test_cache_figures(void) {
    static float rows[16][DIM];
    /* int4-g64: a row of +7 has scale 1 and codes 15, a row of -7 codes 1: in A B A B each
     * channel's stream is {15, 1, 15, 1}: 4 bits; 64 streams + 4 fp16 scales over 256 values */
    for (int p = 0; p < 4; p++) fill(rows[p], p % 2 ? -7.0f : 7.0f, p % 2 ? -7.0f : 7.0f);
    expect_figure("int4-g64", rows, 4, (64 * 4.0 + 4 * 16) / 256, "entropy: int4-g64 rows A B A B: 1 bit a code + 16/64");
    /* A A A B: each stream -3 log2(3/4) - log2(1/4) */
    fill(rows[1], 7.0f, 7.0f);
    expect_figure("int4-g64", rows, 4, (64 * (3 * log2(4.0 / 3.0) + 2) + 4 * 16) / 256,
                  "entropy: int4-g64 rows A A A B: 3 log2(4/3) + 2 bits a stream");
    /* the same row four times, +7 on even channels and -7 on odd: every stream one symbol, but
     * two symbols among the channels: only streams per slot give 0 bits of codes */
    for (int p = 0; p < 4; p++) fill(rows[p], 7.0f, -7.0f);
    expect_figure("int4-g64", rows, 4, 16.0 / 64, "entropy: a channel's repeated code is 0 bits though channels differ");
    /* +res2: of 4 positions 2 quantized (codes 0 bits, 2 scales), 2 full precision at 16 bits */
    expect_figure("int4-g64+res2", rows, 4, (2 * 16.0 + 2 * 64 * 16.0) / 256, "entropy: +res2 positions count 16 bits");
    /* +sink1: 1 full, 3 quantized */
    expect_figure("int4-g64+sink1", rows, 4, (3 * 16.0 + 64 * 16.0) / 256, "entropy: +sink1 positions count 16 bits");
    /* +out1: one fp16 value + u8 index a row beside the scale; the rows are the same, so are the codes */
    expect_figure("int4-g64+out1", rows, 4, (16.0 + 24.0) / 64, "entropy: +out1 counts 24 bits a row");
    expect_figure("fp16", rows, 4, 16.0, "entropy: fp16 counts its 16 stored bits");
    double kb = -1, vb = -1;
    if (cache_figure2("int4-g64", "int4-g64+res2", rows, 4, &kb, &vb) == 0)
        check(fabs(kb - 0.25) <= 1e-12 && fabs(vb - (2 * 16.0 + 2 * 64 * 16.0) / 256) <= 1e-12,
              "entropy: keys int4-g64 and values int4-g64+res2 each count their own side", "keys %g, values %g", kb, vb);
    expect_figure("fp32", rows, 4, 32.0, "entropy: plain fp32 counts 32 bits");
    /* int4-t8-asym over 8 positions: even channels alternate 0, 1 along the positions (codes 0,
     * 15: 8 bits a stream), channels 1 mod 4 are 1 at position 0 only (codes 15 once, 0 seven
     * times: 3 + 7 log2(8/7) bits), channels 3 mod 4 stay 5 (scale 0, code 0: 0 bits); 64 channels
     * x (fp16 scale + lo) per unit. Codes gathered by any other slot than the channel mix them. */
    for (int p = 0; p < 8; p++)
        for (int i = 0; i < DIM; i++) rows[p][i] = i % 2 == 0 ? (float)(p % 2) : i % 4 == 1 ? (float)(p == 0) : 5.0f;
    double unit_bits = 32 * 8.0 + 16 * (3 + 7 * log2(8.0 / 7.0)) + 64 * 32.0;
    expect_figure("int4-t8-asym", rows, 8, unit_bits / (8 * 64), "entropy: int4-t8-asym streams per channel along positions");
    /* 10 positions: the incomplete group's 2 positions are full precision */
    for (int p = 8; p < 10; p++) memcpy(rows[p], rows[p - 8], sizeof rows[p]);
    expect_figure("int4-t8-asym", rows, 10, (unit_bits + 2 * 64 * 16.0) / (10 * 64),
                  "entropy: a token-axis group not yet complete counts 16 bits");
}

int main(void) {
    test_stream_entropy();
    test_layouts();
    test_codes_layouts();
    test_put_codes();
    test_cache_figures();
    return test_failures ? 1 : 0;
}
