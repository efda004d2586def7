/* tests/test_codec_iq4nl.c: the iq4_nl codec (quant/codec_iq4nl.c) against
 *   - tests/fixtures/reference/ggml-kv-blocks.json (8 blocks quantized by llama.cpp's own C
 *     quantize_row_iq4_nl_ref): bytes and dequantized floats bit for bit (the all-zero block:
 *     d and the decoded zeros, its codes being undefined in llama.cpp);
 *   - a restatement of SCHEMES.md section 8 (tests/iq4nl_ref.h), without the codec's code: ggml's
 *     bisection for best_index_int8, every float product and sum rounded through a volatile
 *     (so no compiler can fuse them), fp16 and the layout from tests/ggml_ref.h; on the fixture,
 *     hand-made rows (ties, zero, constant, magnitudes, NaN, inf) and seeded random rows;
 *   - the interface (parse, check, unit_bytes, bits, a run of units, hostile bytes) and the
 *     scheme level: iq4_nl with +had, +out, +res, +sink parses and binds, and key rows (only
 *     keys) are quantized in llama.cpp's channel order.
 * Float comparisons are bit-exact (an expected NaN asks for any NaN). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include "quant/codec.h"
#include "quant/hadamard.h"
#include "quant/scheme.h"
#include "tests/ggml_ref.h"
#include "tests/iq4nl_ref.h"
#include "tests/test.h"
#include "tests/test_rows.h"

#define FIXTURE "tests/fixtures/reference/ggml-kv-blocks.json"
#define MAX_N 256

static void hex(const unsigned char *p, int n, char *out) {
    for (int i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
    out[2 * n] = 0;
}

/* ---- the codec ---- */

static KvBase iq_base(void) {
    KvBase b;
    char why[128];
    if (kv_base_parse("iq4_nl", &b, why, sizeof why) != 0) {
        printf("FAIL iq4_nl: does not parse: %s\n", why);
        exit(1);
    }
    return b;
}

static void encode_decode(const float *x, int n, unsigned char *unit, float *out) {
    KvBase b = iq_base();
    b.codec->encode(&b, x, n, unit);
    b.codec->decode(&b, unit, n, 0, 1, out);
}

/* Encodes a row with the codec and the restatement, decodes both ways; 1 when all agree. */
static int row_agrees(const float *x, int n, char *msg, size_t msg_len) {
    unsigned char got[MAX_N / QK * BB], want[BB];
    float out[MAX_N], ref[QK];
    encode_decode(x, n, got, out);
    for (int i = 0; i < n / QK; i++) {
        const unsigned char *blk = got + (size_t)i * BB;
        iq_ref_encode_block(x + i * QK, want);
        if (!same_iq_block(blk, want)) {
            char g[40], w[40];
            hex(blk, BB, g);
            hex(want, BB, w);
            snprintf(msg, msg_len, "block %d bytes %s, definition %s", i, g, w);
            return 0;
        }
        iq_ref_decode_block(blk, ref);
        for (int j = 0; j < QK; j++)
            if (!same_float(out[i * QK + j], ref[j])) {
                snprintf(msg, msg_len, "value %d decodes to %.9g, definition %.9g", i * QK + j, out[i * QK + j], ref[j]);
                return 0;
            }
    }
    return 1;
}

static void expect_row(const char *what, const float *x, int n) {
    char msg[256] = "", name[200];
    snprintf(name, sizeof name, "iq4_nl: %.150s equals the definition", what);
    check(row_agrees(x, n, msg, sizeof msg), name, "%s", msg);
}

/* ---- the reference fixture ---- */

static int unhex(const char *s, unsigned char *out, int max) {
    int n = 0;
    for (; s[0] && s[1] && n < max; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) return -1;
        out[n++] = (unsigned char)v;
    }
    return s[0] ? -1 : n;
}

/* One case: the all-zero block's reference has only d's 2 bytes (its codes are undefined). */
static void fixture_case(size_t c, const float *x, const unsigned char *want, int nb, const JsonValue *deq) {
    KvBase b = iq_base();
    unsigned char got[BB], ref[BB];
    float out[QK], rdec[QK];
    char name[160], g[40], w[40];
    int zero_case = nb == 2;
    b.codec->encode(&b, x, QK, got);
    hex(got, zero_case ? 2 : BB, g);
    hex(want, nb, w);
    snprintf(name, sizeof name, "iq4_nl fixture case %zu: encode gives llama.cpp's %s", c, zero_case ? "d" : "bytes");
    check(memcmp(got, want, (size_t)nb) == 0, name, "got %s want %s", g, w);

    /* decode the reference block (the zero case: the codec's own, whose d is the reference's) */
    b.codec->decode(&b, zero_case ? got : want, QK, 0, 1, out);
    int bad = -1;
    for (int j = 0; j < QK && bad < 0; j++) {
        float r = (float)deq->items[j].number;
        if (zero_case ? !(out[j] == 0.0f && r == 0.0f) : !same_float(out[j], r)) bad = j;
    }
    snprintf(name, sizeof name, "iq4_nl fixture case %zu: decode gives llama.cpp's floats %s", c,
             zero_case ? "(zeros)" : "bit for bit");
    check(bad < 0, name, "value %d: %.9g, reference %.9g", bad, bad < 0 ? 0 : out[bad], bad < 0 ? 0 : deq->items[bad].number);

    /* the restatement must agree with llama.cpp too, or it proves nothing elsewhere */
    iq_ref_encode_block(x, ref);
    bad = -1;
    if (!zero_case) {
        iq_ref_decode_block(want, rdec);
        for (int j = 0; j < QK && bad < 0; j++)
            if (!same_float(rdec[j], (float)deq->items[j].number)) bad = j;
    }
    hex(ref, zero_case ? 2 : BB, g);
    snprintf(name, sizeof name, "iq4_nl fixture case %zu: the test's restatement agrees", c);
    check(memcmp(ref, want, (size_t)nb) == 0 && bad < 0, name, "bytes %s want %s, value %d", g, w, bad);
}

static void test_fixture(void) {
    Error err = {{0}};
    size_t len;
    char *text = read_whole_file(FIXTURE, 1 << 20, &len, &err);
    JsonValue *doc = text ? json_parse(text, len, &err) : NULL;
    const JsonValue *cases = json_get(doc, "cases");
    int zero_cases = 0;
    if (!check(cases && cases->type == JSON_ARRAY && cases->count == 8, "iq4_nl fixture loads with 8 cases", "%s",
               err.msg[0] ? err.msg : "no 'cases' array of 8"))
        goto done;
    for (size_t c = 0; c < cases->count; c++) {
        const JsonValue *xs = json_get(&cases->items[c], "x"), *tc = json_get(&cases->items[c], "iq4_nl");
        const JsonValue *bytes = json_get(tc, "bytes"), *deq = json_get(tc, "dequant");
        float x[QK];
        unsigned char want[BB];
        int ok = xs && xs->type == JSON_ARRAY && xs->count == QK;
        for (int j = 0; ok && j < QK; j++) x[j] = (float)xs->items[j].number;
        int nb = bytes && bytes->type == JSON_STRING ? unhex(bytes->string, want, BB) : -1;
        char name[96];
        snprintf(name, sizeof name, "iq4_nl fixture case %zu: present, %d bytes (2 for the all-zero block)", c, BB);
        int all_zero = 1;
        for (int j = 0; ok && j < QK; j++) all_zero = all_zero && x[j] == 0.0f;
        if (!check(ok && (nb == BB || (nb == 2 && all_zero)) && deq && deq->type == JSON_ARRAY && deq->count == QK, name,
                   "missing or %d bytes", nb))
            continue;
        zero_cases += nb == 2;
        fixture_case(c, x, want, nb, deq);
    }
    check(zero_cases == 1, "iq4_nl fixture: exactly one case (the all-zero block) is checked on d alone", "%d",
          zero_cases);
done:
    json_free(doc);
    free(text);
}

/* ---- seeded random rows (tests/test_rows.h) ---- */

/* 6400 rows of 256 values: 51,200 blocks. Fusing the sums into fma changes d's fp16 in about 7
 * blocks in 100,000 gaussian ones, so this many blocks is what makes a contracting build fail
 * here (checked: quant/codec_iq4nl.c built with GCC -std=gnu11 and its pragma removed). */
static void test_random_rows(void) {
    enum { ROWS = 6400, N = 256 };
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    char msg[256] = "", name[128];
    int bad_row = -1;
    for (int r = 0; r < ROWS && bad_row < 0; r++) {
        float x[N];
        random_row(r % 8, x, N, &rng);
        if (!row_agrees(x, N, msg, sizeof msg)) bad_row = r;
    }
    snprintf(name, sizeof name, "iq4_nl: %d seeded random rows of %d (8 kinds) equal the definition", ROWS, N);
    check(bad_row < 0, name, "row %d (kind %d): %s", bad_row, bad_row % 8, msg);
}

/* Every code is within 14 steps of d0 of its value (half the widest gap, 24, or the clamp of
 * (113, 127] to 113), so |x - x^| <= 14 |d0| + 127 |fp16(d) - d0|, on plain rows whose d is an
 * fp16 normal. */
static void test_error_bound(void) {
    enum { N = 256 };
    uint64_t rng = 12345u;
    double worst = 0;
    int fails = 0;
    for (int r = 0; r < 200; r++) {
        float x[N], out[N];
        unsigned char unit[N / QK * BB];
        static const float scales[4] = {1.0f, 0.01f, 100.0f, 3000.0f};
        random_row(0, x, N, &rng);
        for (int i = 0; i < N; i++) x[i] *= scales[r % 4];
        encode_decode(x, N, unit, out);
        for (int i = 0; i < N / QK; i++) {
            IqRef rb = iq_ref_codes(x + i * QK);
            double d0 = fabs(rb.d0), stored = t_half_value(t_fp16(rb.d));
            double tol = 1.001 * (14 * d0 + 127 * fabs(stored - rb.d0));
            for (int j = 0; j < QK; j++) {
                double e = fabs((double)x[i * QK + j] - out[i * QK + j]);
                if (!(e <= tol)) fails++;
                worst = max_or_inf(worst, e / d0);
            }
        }
    }
    char name[160];
    snprintf(name, sizeof name, "iq4_nl: |x - decoded| <= 14 |d0| + 127 |fp16(d) - d0| on 200 gaussian rows (worst %.2f |d0|)",
             worst);
    check(fails == 0, name, "%d values outside", fails);
}

/* ---- hand-made rows ---- */

/* Exact ties. max = -127 gives d0 = 1 and id = 1, so id * x is x: the midpoint of two neighbouring
 * entries takes the upper one (best_index_int8's strict <), the float just below it the lower
 * one. max = +127 gives d0 = -1: the codes are those of -x (the max's sign matters). */
static void test_ties(void) {
    for (int sign = -1; sign <= 1; sign += 2) {
        float x[QK];
        int want[QK];
        x[0] = -127.0f * (float)-sign, want[0] = 0;   /* the max: -127 (sign -1) or +127 */
        for (int i = 0; i < 15; i++) {
            float mid = ((float)KV[i] + (float)KV[i + 1]) / 2;   /* exact: small integers and halves */
            x[1 + i] = mid * (float)-sign, want[1 + i] = i + 1;
            x[16 + i] = nextafterf(mid, -INFINITY) * (float)-sign, want[16 + i] = i;
        }
        x[31] = 120.0f * (float)-sign, want[31] = 15;   /* beyond 113: the top entry */
        unsigned char unit[BB];
        float out[QK];
        encode_decode(x, QK, unit, out);
        int bad = -1;
        for (int j = 0; j < QK && bad < 0; j++)
            if (code_at(unit, j) != want[j]) bad = j;
        char name[160];
        snprintf(name, sizeof name, "iq4_nl: max %s127 (d0 = %s1): a value halfway between two entries takes the upper, "
                 "one float below it the lower", sign < 0 ? "-" : "+", sign < 0 ? "" : "-");
        check(bad < 0, name, "value %d (%.9g): code %d, want %d", bad, bad < 0 ? 0 : x[bad], bad < 0 ? 0 : code_at(unit, bad),
              bad < 0 ? 0 : want[bad]);
        expect_row(sign < 0 ? "the tie block, max -127" : "the tie block, max +127", x, QK);
    }
}

/* All zero: d = +0 (0x0000, llama.cpp's), codes 8 (KVALUE 1: this codec's choice where
 * llama.cpp's are undefined), so every value decodes to +0. The threshold max|x| < 1e-15 is
 * strict: a block whose max is 1e-15f itself gets its codes (the max code 0), one just below
 * gets the zero block's 8s; both store d = 0 (fp16 has nothing that small). */
static void test_zero(void) {
    float x[64] = {0}, out[64];
    unsigned char unit[2 * BB];
    encode_decode(x, 64, unit, out);
    int ok = 1;
    for (int i = 0; i < 2 * BB; i++) ok = ok && unit[i] == (i % BB < 2 ? 0x00 : 0x88);
    for (int i = 0; i < 64; i++) ok = ok && same_float(out[i], 0.0f);
    char g[40];
    hex(unit, BB, g);
    check(ok, "iq4_nl: an all-zero row stores d = +0 and codes 8, and decodes to +0", "block %s, value 0 %g", g, out[0]);
    for (int i = 0; i < 64; i++) x[i] = -0.0f;
    expect_row("a row of -0", x, 64);

    for (int i = 0; i < QK; i++) x[i] = 0.25e-15f * (float)(i % 3);
    x[5] = -1e-15f;
    encode_decode(x, QK, unit, out);
    int at_eps = unit[0] == 0 && unit[1] == 0 && code_at(unit, 5) == 0;
    expect_row("a block whose max is -1e-15", x, QK);
    x[5] = -nextafterf(1e-15f, 0.0f);
    encode_decode(x, QK, unit, out);
    int below = unit[0] == 0 && unit[1] == 0 && code_at(unit, 5) == 8;
    expect_row("a block whose max is just below 1e-15", x, QK);
    check(at_eps && below, "iq4_nl: max|x| = 1e-15 is quantized (code 0 at the max), just below it is the zero block",
          "at 1e-15 %d, below %d", at_eps, below);
}

static void test_constant(void) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 3.0f;
    expect_row("constant row 3.0", x, 64);
    for (int i = 0; i < 64; i++) x[i] = -2.5f;
    expect_row("constant row -2.5", x, 64);
    for (int i = 0; i < 64; i++) x[i] = i == 40 ? 7.0f : 0.0f;
    expect_row("a row of zeros and one 7 in its second block", x, 64);
}

/* Magnitudes: FLT_MAX, d beyond fp16, float subnormals, d an fp16 subnormal, weights x^2 that
 * overflow float. */
static void test_magnitudes(void) {
    float x[64], out[64];
    unsigned char unit[2 * BB];
    for (int i = 0; i < 64; i++) x[i] = (float)(i % 3 - 1) * FLT_MAX * (i < 32 ? 1.0f : 0.5f);
    expect_row("rows of +-FLT_MAX", x, 64);

    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 4e5f;   /* d about max/127 >= 3e6 */
    expect_row("a row whose d overflows fp16", x, 64);
    encode_decode(x, 64, unit, out);
    check(((unit[BB] | unit[BB + 1] << 8) & 0x7fff) == 0x7c00, "iq4_nl: a d beyond fp16 is stored as +-inf",
          "d bytes %02x %02x", unit[BB], unit[BB + 1]);

    for (int i = 0; i < 64; i++) x[i] = (float)(i % 7 - 3) * 1e-40f;
    expect_row("a row of float subnormals", x, 64);
    encode_decode(x, 64, unit, out);
    int zero = 1;
    for (int i = 0; i < 64; i++) zero = zero && out[i] == 0.0f;
    check(zero, "iq4_nl: float subnormal inputs decode to 0", "value 0 %g", out[0]);

    for (int i = 0; i < 64; i++) x[i] = (float)(i % 13 - 6) * 3e-6f;
    expect_row("a row whose d is an fp16 subnormal", x, 64);

    for (int i = 0; i < 64; i++) x[i] = (float)(i % 7 - 3) * 1e20f;   /* x^2 = inf: sumqx / sumq2 = inf / inf */
    expect_row("a row whose weights x^2 overflow", x, 64);
    encode_decode(x, 64, unit, out);
    int nan = fp16_is_nan((uint16_t)(unit[0] | unit[1] << 8));
    for (int i = 0; i < 64; i++) nan = nan && isnan(out[i]);
    check(nan, "iq4_nl: a block whose weights overflow stores d = NaN and decodes to NaN", "value 0 %g", out[0]);
}

/* NaN and infinities: defined results (quant/codec_iq4nl.c's header), never a crash. */
static void test_nan_inf(void) {
    float x[QK], out[QK];
    unsigned char unit[BB];
    char name[160];
    int positions[3] = {0, 5, 31};
    for (int p = 0; p < 3; p++) {
        for (int j = 0; j < QK; j++) x[j] = 0.25f * (float)(j % 9) - 1.0f;
        x[positions[p]] = NAN;
        char what[64];
        snprintf(what, sizeof what, "a NaN at value %d", positions[p]);
        expect_row(what, x, QK);
        encode_decode(x, QK, unit, out);
        int all_nan = 1;
        for (int j = 0; j < QK; j++) all_nan = all_nan && isnan(out[j]);
        snprintf(name, sizeof name, "iq4_nl: a NaN at value %d gets code 15 and makes the block decode to NaN", positions[p]);
        check(all_nan && code_at(unit, positions[p]) == 15, name, "code %d, value 0 %g", code_at(unit, positions[p]), out[0]);
    }
    for (int j = 0; j < QK; j++) x[j] = NAN;
    expect_row("an all-NaN block", x, QK);
    encode_decode(x, QK, unit, out);
    int zeros = unit[0] == 0 && unit[1] == 0;
    for (int j = 0; j < QK; j++) zeros = zeros && out[j] == 0.0f;
    check(zeros, "iq4_nl: an all-NaN block has no max: the zero block, decoding to 0", "value 0 %g", out[0]);
    for (int j = 0; j < QK; j++) x[j] = 1e-20f;
    x[9] = NAN;
    expect_row("a NaN among values below 1e-15", x, QK);

    for (int s = 0; s < 2; s++) {
        float inf = s ? -INFINITY : INFINITY;
        for (int j = 0; j < QK; j++) x[j] = 0.5f * (float)(j % 5) - 1.0f;
        x[3] = inf;
        char what[32];
        snprintf(what, sizeof what, "a %cinf at value 3", s ? '-' : '+');
        expect_row(what, x, QK);
        encode_decode(x, QK, unit, out);
        int ok = code_at(unit, 3) == 15;
        for (int j = 0; j < QK; j++) ok = ok && isnan(out[j]) && (j == 3 || code_at(unit, j) == 8);
        snprintf(name, sizeof name, "iq4_nl: a %cinf block: id = 0, codes 8, the inf code 15, decodes to NaN", s ? '-' : '+');
        check(ok, name, "codes %d %d, values %g %g", code_at(unit, 0), code_at(unit, 3), out[0], out[3]);
    }
    x[7] = INFINITY;
    x[3] = -INFINITY;
    expect_row("a block with +inf and -inf", x, QK);
}

/* A block built by hand from the layout decodes to d * KVALUE[code]: d = 0.5 and d = -2. */
static void test_layout(void) {
    KvBase b = iq_base();
    static const uint16_t d_bits[2] = {0x3800, 0xc000};
    static const float d_value[2] = {0.5f, -2.0f};
    for (int t = 0; t < 2; t++) {
        int q[QK];
        for (int j = 0; j < QK; j++) q[j] = (j * 7 + 3 + t) % 16;
        unsigned char blk[BB];
        iq_ref_pack(d_bits[t], q, blk);
        float out[QK];
        b.codec->decode(&b, blk, QK, 0, 1, out);
        int bad = -1;
        for (int j = 0; j < QK && bad < 0; j++)
            if (!same_float(out[j], d_value[t] * (float)KV[q[j]])) bad = j;
        char name[96];
        snprintf(name, sizeof name, "iq4_nl: a hand-packed block (d %g) decodes by the layout", d_value[t]);
        check(bad < 0, name, "value %d: %g", bad, bad < 0 ? 0 : out[bad]);
    }
}

/* Decoding any bytes is safe and follows the arithmetic (NaN and inf d included). */
static void test_hostile_bytes(void) {
    enum { ROWS = 64, N = 64 };
    KvBase b = iq_base();
    unsigned char units[ROWS * N / QK * BB];
    uint64_t rng = 4242u;
    for (size_t i = 0; i < sizeof units; i++) units[i] = (unsigned char)xorshift_next(&rng);
    static const uint16_t special_d[4] = {0x7c00, 0xfc00, 0x7e00, 0x0001};   /* +inf, -inf, NaN, subnormal */
    for (int r = 0; r < 4; r++) units[r * BB] = (unsigned char)(special_d[r] & 255), units[r * BB + 1] = (unsigned char)(special_d[r] >> 8);
    static float out[ROWS * N];
    b.codec->decode(&b, units, N, 0, ROWS, out);
    int bad = -1;
    for (int i = 0; i < ROWS * N / QK && bad < 0; i++) {
        float ref[QK];
        iq_ref_decode_block(units + (size_t)i * BB, ref);
        for (int j = 0; j < QK; j++)
            if (!same_float(out[i * QK + j], ref[j])) bad = i;
    }
    check(bad < 0, "iq4_nl: decoding random bytes (NaN and inf d included) follows the layout", "block %d", bad);

    /* attention's transposed key blocks, where the build has them (AVX-512): kt[i * 64 + p] =
     * value i of row r0 + p, +0 past count, bit for bit with decode (NaN d included) */
    int bad_t64 = 0;
    if (b.codec->decode_t64) {
        static float kt[N * 64];
        const int runs[][2] = {{0, 64}, {0, 1}, {5, 37}, {48, 16}, {63, 1}, {1, 63}};
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            int r0 = runs[k][0], count = runs[k][1];
            memset(kt, 0xff, sizeof kt);
            b.codec->decode_t64(&b, units, N, r0, count, kt);
            for (int i = 0; i < N; i++)
                for (int p = 0; p < 64; p++)
                    bad_t64 += !same_float(kt[i * 64 + p], p < count ? out[(r0 + p) * N + i] : 0.0f);
        }
    }
    check(bad_t64 == 0, "iq4_nl: decode_t64 (where built) on random bytes = decode transposed, 0 past count",
          "%d values differ", bad_t64);
}

/* ---- the interface ---- */

static void test_interface(void) {
    char name[160], why[160];
    KvBase b;
    int parsed = kv_base_parse("iq4_nl", &b, why, sizeof why) == 0;
    check(parsed && !strcmp(b.name, "iq4_nl") && b.bits == 4 && b.group == 32 && b.variant == 0 && b.codec->llama_key_order == 1 &&
              b.rows == 1 && b.axis == KV_AXIS_CHANNELS,
          "iq4_nl parse: canonical name, bits 4, group 32, llama order, one row along the channels", "%s",
          parsed ? b.name : why);
    if (!parsed) return;
    const KvCodec *codec = b.codec;
    int sizes_ok = 1, refused = 1, accepted = 1;
    int good_n[4] = {32, 64, 96, 4096}, bad_n[5] = {16, 33, 48, 100, 4095};
    for (int i = 0; i < 4; i++) {
        sizes_ok = sizes_ok && codec->unit_bytes(&b, good_n[i]) == (size_t)(good_n[i] / 32 * BB);
        accepted = accepted && kv_base_check(&b, good_n[i], why, sizeof why);
    }
    for (int i = 0; i < 5; i++) {
        why[0] = 0;
        refused = refused && !kv_base_check(&b, bad_n[i], why, sizeof why) && strstr(why, "iq4_nl");
    }
    refused = refused && !kv_base_check(&b, 0, why, sizeof why);
    check(sizes_ok, "iq4_nl: unit_bytes(n) = n/32 blocks of 18 bytes", "unit_bytes(64) = %zu", codec->unit_bytes(&b, 64));
    check(accepted, "iq4_nl: check accepts n = 32, 64, 96, 4096", "%s", why);
    check(refused, "iq4_nl: check refuses n = 0, 16, 33, 48, 100, 4095 naming the base", "last why: '%s'", why);
    double bits64 = kv_spec_stored_bits(&(KvSpec){.base = b}, 64), bits128 = kv_spec_stored_bits(&(KvSpec){.base = b}, 128);
    check(bits64 == 4.5 && bits128 == 4.5, "iq4_nl: 4.5 stored bits per value (SCHEMES.md section 8)", "%g, %g", bits64,
          bits128);

    const char *unknown[] = {"iq4_xs", "IQ4_NL", "iq4_nl ", "iq4_nl-g64", "iq4", "iq4_nlx", "iq4_n"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        why[0] = 0;
        int rc = kv_base_parse(unknown[i], &b, why, sizeof why);
        snprintf(name, sizeof name, "iq4_nl parse: '%s' is an unknown base", unknown[i]);
        check(rc == -1 && strstr(why, "unknown base"), name, "rc %d why '%s'", rc, why);
    }
    const char *others[] = {"q4_0", "int4-g64", "nf4-g64", "fp16", ""};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        memset(&b, 0, sizeof b);
        int rc = codec->parse(others[i], &b, why, sizeof why);
        snprintf(name, sizeof name, "iq4_nl parse leaves '%s' to other codecs (returns 0)", others[i]);
        check(rc == 0, name, "rc %d", rc);
    }
    int listed = 0;
    for (int i = 0; i < kv_codec_count(); i++) listed += kv_codec_at(i) == codec;
    check(listed == 1 && codec->rotate == NULL && !strcmp(codec->examples, "iq4_nl"),
          "iq4_nl codec: one row of the table, no rotation, lists iq4_nl", "listed %d times", listed);
}

/* Rows r0 .. r0+count-1 of a run of units decode as each row alone does. */
static void test_run_decode(void) {
    enum { ROWS = 5, N = 96 };
    KvBase b = iq_base();
    size_t ub = b.codec->unit_bytes(&b, N);
    unsigned char units[ROWS * N / QK * BB];
    float x[ROWS * N], run[ROWS * N], one[N];
    uint64_t rng = 777u;
    for (int r = 0; r < ROWS; r++) {
        random_row(r % 4, x + r * N, N, &rng);
        b.codec->encode(&b, x + r * N, N, units + (size_t)r * ub);
    }
    int ok = 1;
    for (int r0 = 0; r0 < ROWS; r0++)
        for (int count = 1; r0 + count <= ROWS; count++) {
            b.codec->decode(&b, units, N, r0, count, run);
            for (int r = 0; r < count; r++) {
                b.codec->decode(&b, units + (size_t)(r0 + r) * ub, N, 0, 1, one);
                for (int i = 0; i < N; i++) ok = ok && same_float(run[r * N + i], one[i]);
            }
        }
    check(ok, "iq4_nl: rows r0..r0+count-1 of a run of 5 units decode as one row at a time", "mismatch");
}

/* ---- the scheme level ---- */

/* A LAYERED value parsed and bound to a side of a 22-layer model; 0 or -1 with why. */
static int bind_scheme(const char *text, int head_dim, KvSide side, KvLayered *l, char *why, size_t why_len) {
    why[0] = 0;
    if (kv_layered_parse(text, side, l, why, why_len)) return -1;
    return kv_layered_bind(l, 22, head_dim, side, why, why_len);
}

static void test_scheme_parse(void) {
    static const char *const cases[][2] = {
        {"iq4_nl", "iq4_nl"},
        {"iq4_nl+had", "iq4_nl+had"},
        {"iq4_nl+out2", "iq4_nl+out2"},
        {"iq4_nl+sink4+res64", "iq4_nl+res64+sink4"},
        {"iq4_nl+res16+out2+had+sink4", "iq4_nl+had+out2+res16+sink4"},
        {"q4_0;0:iq4_nl;20-21:iq4_nl+had", "q4_0;0:iq4_nl;20-21:iq4_nl+had"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int side = KV_SIDE_KEYS; side <= KV_SIDE_VALUES; side++) {
            KvLayered l;
            char why[200], name[160];
            int rc = bind_scheme(cases[i][0], 64, (KvSide)side, &l, why, sizeof why);
            snprintf(name, sizeof name, "iq4_nl scheme: '%s' parses as '%s' and binds to %s, head_dim 64", cases[i][0],
                     cases[i][1], side == KV_SIDE_KEYS ? "keys" : "values");
            check(rc == 0 && !strcmp(l.text, cases[i][1]) && (int)kv_layered_at(&l, 0)->side == side, name,
                  "rc %d text '%s' why '%s'", rc, rc ? "" : l.text, why);
        }
    static const struct {
        const char *text;
        int head_dim;
        const char *why;
    } refused[] = {
        {"iq4_nl", 48, "iq4_nl"},
        {"iq4_nl+had", 96, "power of two"},
        {"fp16;3:iq4_nl+res8", 80, "iq4_nl"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        KvLayered l;
        char why[200], name[160];
        int rc = bind_scheme(refused[i].text, refused[i].head_dim, KV_SIDE_KEYS, &l, why, sizeof why);
        snprintf(name, sizeof name, "iq4_nl scheme: '%s' at head_dim %d is refused naming '%s'", refused[i].text,
                 refused[i].head_dim, refused[i].why);
        check(rc == -1 && strstr(why, refused[i].why), name, "rc %d why '%s'", rc, why);
    }
    KvSpec s;
    char why[200];
    double stored = -1, out2 = -1, effective = -1;
    if (kv_spec_parse("iq4_nl+had", KV_SIDE_KEYS, &s, why, sizeof why) == 0) stored = kv_spec_stored_bits(&s, 64);
    if (kv_spec_parse("iq4_nl+out2", KV_SIDE_KEYS, &s, why, sizeof why) == 0) out2 = kv_spec_stored_bits(&s, 64);
    if (kv_spec_parse("iq4_nl+res64", KV_SIDE_KEYS, &s, why, sizeof why) == 0) effective = kv_spec_effective_bits(&s, 64, 1024);
    /* +out2 adds 2 x (16 + 8) bits per row of 64; +res64 at 1024: (960 x 4.5 + 64 x 16) / 1024 */
    check(stored == 4.5 && out2 == 4.5 + 48.0 / 64 && effective == (960 * 4.5 + 64 * 16.0) / 1024,
          "iq4_nl scheme: stored bits 4.5 (+had), 5.25 (+out2 at d = 64), effective 5.21875 (+res64 at 1024)", "%g %g %g",
          stored, out2, effective);
}

/* llama.cpp's key order, restated: (x0, x_{d/2}, x1, x_{d/2+1}, ...). */
static void llama_order(const float *x, int n, float *out) {
    for (int i = 0; i < n / 2; i++) out[2 * i] = x[i], out[2 * i + 1] = x[i + n / 2];
}

/* The bound spec of a one-SPEC LAYERED value on one side, head_dim 64. */
static KvSpec bound_spec(const char *text, KvSide side) {
    KvLayered l;
    char why[200];
    KvSpec s;
    memset(&s, 0, sizeof s);
    if (bind_scheme(text, 64, side, &l, why, sizeof why) == 0) s = l.all;
    return s;
}

/* A row whose two halves differ in scale, so its blocks in natural and in llama.cpp's order
 * hold different values; the largest |x| at 50 and 7 (for +out2), all distinct. */
static void order_row(float *x) {
    for (int i = 0; i < 64; i++) x[i] = (i < 32 ? 0.05f : 1.0f) * (float)((i * 37) % 23 - 11) + 0.001f * (float)i;
    x[50] = 40.0f;
    x[7] = -25.0f;
}

/* Keys are stored as the codec's blocks of the reordered row (after it, +had rotates), values as
 * those of the row itself; the test fails if the order goes to values or misses keys. */
static void test_key_order(void) {
    enum { N = 64 };
    const KvBase base = iq_base();
    float x[N], reordered[N], rotated[N], scratch[N];
    order_row(x);
    llama_order(x, N, reordered);
    unsigned char natural_bytes[N / QK * BB], key_bytes[N / QK * BB], got[N / QK * BB + 6];
    base.codec->encode(&base, x, N, natural_bytes);
    base.codec->encode(&base, reordered, N, key_bytes);
    check(memcmp(natural_bytes, key_bytes, sizeof key_bytes) != 0,
          "iq4_nl scheme: the order row's blocks differ in natural and in llama.cpp's order", "the same bytes");

    KvSpec keys = bound_spec("iq4_nl", KV_SIDE_KEYS), values = bound_spec("iq4_nl", KV_SIDE_VALUES);
    kv_spec_encode(&keys, x, N, got, scratch);
    check(memcmp(got, key_bytes, sizeof key_bytes) == 0, "iq4_nl scheme: a key row is quantized in llama.cpp's order",
          "bytes differ from the codec's on the reordered row");
    float dec[N], want[N], back[N];
    kv_spec_decode(&keys, got, N, 0, 1, dec);
    kv_spec_from_domain(&keys, dec, N);
    for (int i = 0; i < N / QK; i++) iq_ref_decode_block(key_bytes + i * BB, back + i * QK);
    for (int i = 0; i < N / 2; i++) want[i] = back[2 * i], want[i + N / 2] = back[2 * i + 1];
    check(max_abs_diff(dec, want, N) == 0, "iq4_nl scheme: a decoded key row moved back is in natural order", "");
    kv_spec_encode(&values, x, N, got, scratch);
    check(memcmp(got, natural_bytes, sizeof natural_bytes) == 0, "iq4_nl scheme: a value row keeps its order",
          "bytes differ from the codec's on the row itself");

    /* +had: reorder, then rotate, then the blocks */
    KvSpec had_keys = bound_spec("iq4_nl+had", KV_SIDE_KEYS);
    memcpy(rotated, reordered, sizeof rotated);
    hadamard(rotated, N);
    base.codec->encode(&base, rotated, N, key_bytes);
    kv_spec_encode(&had_keys, x, N, got, scratch);
    check(memcmp(got, key_bytes, sizeof key_bytes) == 0,
          "iq4_nl scheme: +had key rows are reordered, then rotated, then quantized", "bytes differ");

    /* +out2: the outliers are taken in the reordered row (indices 2*7+1... of x[50], x[7]) */
    KvSpec out_keys = bound_spec("iq4_nl+out2", KV_SIDE_KEYS);
    float zeroed[N];
    memcpy(zeroed, reordered, sizeof zeroed);
    int at50 = 2 * (50 - 32) + 1, at7 = 2 * 7;   /* x[50] -> 37, x[7] -> 14 */
    zeroed[at50] = zeroed[at7] = 0.0f;
    base.codec->encode(&base, zeroed, N, key_bytes);
    kv_spec_encode(&out_keys, x, N, got, scratch);
    int ok = memcmp(got, key_bytes, sizeof key_bytes) == 0 && got[sizeof key_bytes + 2] == at50 &&
             got[sizeof key_bytes + 5] == at7;
    kv_spec_decode(&out_keys, got, N, 0, 1, dec);
    kv_spec_from_domain(&out_keys, dec, N);
    ok = ok && dec[50] == 40.0f && dec[7] == -25.0f;
    check(ok, "iq4_nl scheme: +out2 on keys takes the outliers in llama.cpp's order and puts them back in place",
          "indices %d %d, decoded %g %g", got[sizeof key_bytes + 2], got[sizeof key_bytes + 5], dec[50], dec[7]);
}

int main(void) {
    test_fixture();
    test_interface();
    test_layout();
    test_zero();
    test_constant();
    test_ties();
    test_magnitudes();
    test_nan_inf();
    test_random_rows();
    test_error_bound();
    test_run_decode();
    test_hostile_bytes();
    test_scheme_parse();
    test_key_order();
    return test_exit_code();
}
