/* tests/test_codec_ggml.c: the q8_0, q4_0, q4_1, q5_0, q5_1 codec (quant/codec_ggml.c) against
 *   - tests/fixtures/reference/ggml-kv-blocks.json (8 blocks computed by llama.cpp's gguf-py
 *     restatement of ggml's reference quantizers): bytes and dequantized floats bit for bit;
 *   - the restatement of the definition in tests/ggml_ref.h, written without the codec's code,
 *     on hand-made and seeded random rows (ties, zero, constant, huge, subnormal, NaN, inf);
 *   - the interface: parse/check/unit_bytes/bits, and decoding a run of units.
 * Float comparisons are bit-exact (an expected NaN asks for any NaN); every tolerance check
 * fails on NaN. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include "quant/codec.h"
#include "quant/scheme.h"
#include "tests/ggml_ref.h"
#include "tests/test.h"
#include "tests/test_rows.h"

#define FIXTURE "tests/fixtures/reference/ggml-kv-blocks.json"
#define MAX_N 256

/* n bytes as hex, for failure messages. */
static void hex(const unsigned char *p, int n, char *out) {
    for (int i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
    out[2 * n] = 0;
}

/* ---- the codec ---- */

static KvBase base_of(const TypeInfo *t) {
    KvBase b;
    char why[128];
    if (kv_base_parse(t->name, &b, why, sizeof why) != 0) {
        printf("FAIL ggml %s: does not parse: %s\n", t->name, why);
        exit(1);
    }
    return b;
}

/* Encodes a row with the codec and with the restatement, decodes both ways; 1 when all agree.
 * On a mismatch, says where in msg. */
static int row_agrees(const TypeInfo *t, const float *x, int n, char *msg, size_t msg_len) {
    KvBase b = base_of(t);
    unsigned char got[MAX_N / QK * 34], want[34];
    float out[MAX_N], ref[QK];
    b.codec->encode(&b, x, n, got);
    b.codec->decode(&b, got, n, 0, 1, out);
    for (int i = 0; i < n / QK; i++) {
        const unsigned char *blk = got + (size_t)i * t->block_bytes;
        ref_encode_block(t, x + i * QK, want);
        if (!same_block(t, blk, want)) {
            char g[80], w[80];
            hex(blk, t->block_bytes, g);
            hex(want, t->block_bytes, w);
            snprintf(msg, msg_len, "block %d bytes %s, definition %s", i, g, w);
            return 0;
        }
        ref_decode_block(t, blk, ref);
        for (int j = 0; j < QK; j++)
            if (!same_float(out[i * QK + j], ref[j])) {
                snprintf(msg, msg_len, "value %d decodes to %.9g, definition %.9g", i * QK + j, out[i * QK + j], ref[j]);
                return 0;
            }
    }
    return 1;
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

static void test_fixture(void) {
    Error err = {{0}};
    size_t len;
    char *text = read_whole_file(FIXTURE, 1 << 20, &len, &err);
    JsonValue *doc = text ? json_parse(text, len, &err) : NULL;
    const JsonValue *cases = json_get(doc, "cases");
    if (!check(cases && cases->type == JSON_ARRAY && cases->count == 8, "ggml fixture loads with 8 cases", "%s",
               err.msg[0] ? err.msg : "no 'cases' array of 8"))
        goto done;
    for (size_t c = 0; c < cases->count; c++) {
        const JsonValue *xs = json_get(&cases->items[c], "x");
        float x[QK];
        int ok = xs && xs->type == JSON_ARRAY && xs->count == QK;
        for (int j = 0; ok && j < QK; j++) x[j] = (float)xs->items[j].number;
        for (int k = 0; k < 5; k++) {
            const TypeInfo *t = &TYPES[k];
            char name[128];
            const JsonValue *tc = json_get(&cases->items[c], t->name), *bytes = json_get(tc, "bytes"),
                            *deq = json_get(tc, "dequant");
            unsigned char want[64], got[64];
            int nb = bytes && bytes->type == JSON_STRING ? unhex(bytes->string, want, 64) : -1;
            snprintf(name, sizeof name, "ggml fixture case %zu %s: present, %d bytes", c, t->name, t->block_bytes);
            if (!check(ok && nb == t->block_bytes && deq && deq->type == JSON_ARRAY && deq->count == QK, name,
                       "missing or %d bytes", nb))
                continue;
            KvBase b = base_of(t);
            b.codec->encode(&b, x, QK, got);
            char g[80], w[80];
            hex(got, t->block_bytes, g);
            hex(want, t->block_bytes, w);
            snprintf(name, sizeof name, "ggml fixture case %zu %s: encode gives the reference bytes", c, t->name);
            check(memcmp(got, want, (size_t)t->block_bytes) == 0, name, "got %s want %s", g, w);

            float out[QK];
            int bad = -1;
            b.codec->decode(&b, want, QK, 0, 1, out);
            for (int j = 0; j < QK && bad < 0; j++)
                if (!same_float(out[j], (float)deq->items[j].number)) bad = j;
            snprintf(name, sizeof name, "ggml fixture case %zu %s: decode gives the reference floats bit for bit", c,
                     t->name);
            check(bad < 0, name, "value %d: %.9g, reference %.9g", bad, bad < 0 ? 0 : out[bad],
                  bad < 0 ? 0 : deq->items[bad].number);

            /* the restatement must agree with the reference too, or it proves nothing elsewhere */
            unsigned char ref[64];
            float rdec[QK];
            ref_encode_block(t, x, ref);
            ref_decode_block(t, want, rdec);
            bad = -1;
            for (int j = 0; j < QK && bad < 0; j++)
                if (!same_float(rdec[j], (float)deq->items[j].number)) bad = j;
            hex(ref, t->block_bytes, g);
            snprintf(name, sizeof name, "ggml fixture case %zu %s: the test's restatement agrees", c, t->name);
            check(memcmp(ref, want, (size_t)t->block_bytes) == 0 && bad < 0, name, "bytes %s want %s, value %d", g, w,
                  bad);
        }
    }
done:
    json_free(doc);
    free(text);
}

/* ---- seeded random rows (tests/test_rows.h) ---- */

static void test_random_rows(void) {
    enum { ROWS = 1600, N = 128 };
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        uint64_t rng = 0x9E3779B97F4A7C15ull + (uint64_t)k;
        char msg[256] = "", name[128];
        int bad_row = -1;
        for (int r = 0; r < ROWS && bad_row < 0; r++) {
            float x[N];
            random_row(r % 8, x, N, &rng);
            if (!row_agrees(t, x, N, msg, sizeof msg)) bad_row = r;
        }
        snprintf(name, sizeof name, "ggml %s: %d seeded random rows of %d (8 kinds) equal the definition", t->name, ROWS, N);
        check(bad_row < 0, name, "row %d (kind %d): %s", bad_row, bad_row % 8, msg);
    }
}

/* The quantization error of plain rows stays within the step the definition promises: half a
 * step (a whole one where q4_0/q5_0 clamp -max), plus fp16's rounding of d (and of m). */
static void test_error_bound(void) {
    enum { N = 256 };
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        KvBase b = base_of(t);
        uint64_t rng = 12345u + (uint64_t)k;
        double worst = 0;
        int fails = 0;
        for (int r = 0; r < 200; r++) {
            float x[N], out[N];
            unsigned char unit[N / QK * 34];
            static const float scales[4] = {1.0f, 0.01f, 100.0f, 3000.0f};   /* d stays an fp16 normal */
            random_row(0, x, N, &rng);
            for (int i = 0; i < N; i++) x[i] *= scales[r % 4];
            b.codec->encode(&b, x, N, unit);
            b.codec->decode(&b, unit, N, 0, 1, out);
            for (int i = 0; i < N / QK; i++) {
                RefBlock rb = ref_codes(t, x + i * QK);
                double d = fabs(rb.d), levels = 1 << t->bits;
                double tol = 1.001 * d + levels * d / 1024.0 + fabs(rb.m) / 1024.0;
                for (int j = 0; j < QK; j++) {
                    double e = fabs((double)x[i * QK + j] - out[i * QK + j]);
                    if (!(e <= tol)) fails++;
                    if (e / d > worst) worst = e / d;
                }
            }
        }
        char name[160];
        snprintf(name, sizeof name,
                 "ggml %s: |x - decoded| <= 1.001 d + 2^B d/1024 + |m|/1024 on 200 gaussian rows (worst %.3f d)", t->name,
                 worst);
        check(fails == 0, name, "%d values outside", fails);
    }
}

/* ---- hand-made rows ---- */

static void expect_row(const TypeInfo *t, const char *what, const float *x, int n) {
    char msg[256] = "", name[256];
    snprintf(name, sizeof name, "ggml %s: %.100s equals the definition", t->name, what);
    check(row_agrees(t, x, n, msg, sizeof msg), name, "%s", msg);
}

static void decode_row(const TypeInfo *t, const float *x, int n, unsigned char *unit, float *out) {
    KvBase b = base_of(t);
    b.codec->encode(&b, x, n, unit);
    b.codec->decode(&b, unit, n, 0, 1, out);
}

/* All zero: q8_0, q4_1, q5_1 store zeros; q4_0 and q5_0 store d = 0/-8 = -0 (0x8000) and the
 * middle code, and decode (q - zero) * -0 = -0. */
static void test_zero(void) {
    float x[64] = {0}, out[64];
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        unsigned char unit[2 * 34], want[34];
        int q[QK];
        int sym4or5 = t->bits != 8 && !t->has_min;
        for (int j = 0; j < QK; j++) q[j] = sym4or5 ? 1 << (t->bits - 1) : 0;
        ref_pack(t, sym4or5 ? 0x8000 : 0, 0, q, want);
        decode_row(t, x, 64, unit, out);
        int ok = same_block(t, unit, want) && same_block(t, unit + t->block_bytes, want);
        for (int i = 0; i < 64; i++) ok = ok && same_float(out[i], sym4or5 ? -0.0f : 0.0f);
        char name[96], g[80];
        hex(unit, t->block_bytes, g);
        snprintf(name, sizeof name, "ggml %s: all-zero row stores d = %s0 and decodes to %s0", t->name,
                 sym4or5 ? "-" : "+", sym4or5 ? "-" : "+");
        check(ok, name, "block %s, first value %g", g, out[0]);
    }
}

/* Constant rows. -2.5 / -8, / -16 and -2.5 itself are exact in fp16, so q4_0, q5_0 (max = -2.5
 * takes code 0) and the _1 types (d = 0, m = -2.5) give -2.5 back exactly. */
static void test_constant(void) {
    float x[64], out[64];
    unsigned char unit[2 * 34];
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        for (int i = 0; i < 64; i++) x[i] = 3.0f;
        expect_row(t, "constant row 3.0", x, 64);
        for (int i = 0; i < 64; i++) x[i] = -2.5f;
        expect_row(t, "constant row -2.5", x, 64);
        if (t->bits == 8) continue;
        decode_row(t, x, 64, unit, out);
        int ok = 1;
        for (int i = 0; i < 64; i++) ok = ok && out[i] == -2.5f;
        char name[96];
        snprintf(name, sizeof name, "ggml %s: constant row -2.5 decodes to exactly -2.5", t->name);
        check(ok, name, "got %.9g", out[0]);
    }
}

/* Exactly halfway values, on blocks whose id is exact. */
static void test_ties(void) {
    char name[128];
    /* q8_0: amax 127 -> d = 1, id = 1; roundf sends halves away from zero */
    {
        const TypeInfo *t = &TYPES[0];
        float x[QK] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 126.5f, -126.5f, 3.5f};
        int want[10] = {127, 3, -3, 1, -1, 2, -2, 127, -127, 4};
        unsigned char unit[34];
        float out[QK];
        decode_row(t, x, QK, unit, out);
        int ok = (unit[0] | unit[1] << 8) == 0x3c00;
        for (int j = 0; j < 10; j++) ok = ok && ref_code_at(t, unit, j) == want[j] && out[j] == (float)want[j];
        check(ok, "ggml q8_0: halfway values round away from zero (2.5 -> 3, -2.5 -> -3, 126.5 -> 127)",
              "codes %d %d %d %d", ref_code_at(t, unit, 1), ref_code_at(t, unit, 2), ref_code_at(t, unit, 3),
              ref_code_at(t, unit, 4));
        expect_row(t, "tie block", x, QK);
    }
    /* q4_0, q5_0: max = 2^(B-1) -> d = -1, id = -1: code = trunc(-x + 2^(B-1) + 0.5), so a halfway
     * -x goes up: x = 0.5 -> code of 0, x = -0.5 -> code of +1 */
    for (int k = 1; k <= 3; k += 2) {
        const TypeInfo *t = &TYPES[k];
        int h = 1 << (t->bits - 1);
        float x[QK] = {(float)h, 0.5f, -0.5f, 1.5f, -1.5f, (float)-h, (float)-h + 0.5f, (float)h - 0.5f};
        int want[8] = {0, h, h + 1, h - 1, h + 2, 2 * h - 1, 2 * h - 1, 1};
        unsigned char unit[34];
        float out[QK];
        decode_row(t, x, QK, unit, out);
        int ok = (unit[0] | unit[1] << 8) == 0xbc00;   /* d = -1 */
        for (int j = 0; j < 8; j++) ok = ok && ref_code_at(t, unit, j) == want[j];
        snprintf(name, sizeof name, "ggml %s: d = -1 block: halfway values go up in code space, -max clamps to %d",
                 t->name, 2 * h - 1);
        check(ok, name, "codes %d %d %d %d %d %d %d %d", ref_code_at(t, unit, 0), ref_code_at(t, unit, 1),
              ref_code_at(t, unit, 2), ref_code_at(t, unit, 3), ref_code_at(t, unit, 4), ref_code_at(t, unit, 5),
              ref_code_at(t, unit, 6), ref_code_at(t, unit, 7));
        expect_row(t, "tie block", x, QK);
    }
    /* q4_1, q5_1: min 0, max 2^B - 1 -> d = 1, m = 0: code = trunc(x + 0.5), halves go up */
    for (int k = 2; k <= 4; k += 2) {
        const TypeInfo *t = &TYPES[k];
        int top = (1 << t->bits) - 1;
        float x[QK] = {0, (float)top, 2.5f, 3.5f, 0.5f, (float)top - 0.5f, 7.0f};
        int want[7] = {0, top, 3, 4, 1, top, 7};
        unsigned char unit[34];
        float out[QK];
        decode_row(t, x, QK, unit, out);
        int ok = (unit[0] | unit[1] << 8) == 0x3c00 && (unit[2] | unit[3] << 8) == 0;
        for (int j = 0; j < 7; j++) ok = ok && ref_code_at(t, unit, j) == want[j] && out[j] == (float)want[j];
        snprintf(name, sizeof name, "ggml %s: d = 1 block: halfway values go up (2.5 -> 3, 3.5 -> 4)", t->name);
        check(ok, name, "codes %d %d %d %d %d %d", ref_code_at(t, unit, 0), ref_code_at(t, unit, 1),
              ref_code_at(t, unit, 2), ref_code_at(t, unit, 3), ref_code_at(t, unit, 4), ref_code_at(t, unit, 5));
        expect_row(t, "tie block", x, QK);
    }
}

/* Magnitudes: FLT_MAX, fp16 overflow of d, float subnormals, fp16-subnormal scales. */
static void test_magnitudes(void) {
    float x[64], out[64];
    unsigned char unit[2 * 34];
    char name[128];
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        for (int i = 0; i < 64; i++) x[i] = (i % 3 - 1) * FLT_MAX * (i < 32 ? 1.0f : 0.5f);
        expect_row(t, "rows of +-FLT_MAX", x, 64);
        for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 4e5f;   /* d beyond fp16 for every type */
        expect_row(t, "a row whose d overflows fp16", x, 64);
        decode_row(t, x, 64, unit, out);
        const unsigned char *second = unit + t->block_bytes;   /* values 12..43 x 4e5 */
        snprintf(name, sizeof name, "ggml %s: a d beyond fp16 is stored as +-inf", t->name);
        check(((second[0] | second[1] << 8) & 0x7fff) == 0x7c00, name, "d bytes %02x %02x", second[0], second[1]);

        for (int i = 0; i < 64; i++) x[i] = (float)(i % 7 - 3) * 1e-40f;   /* float subnormals */
        expect_row(t, "a row of float subnormals", x, 64);
        decode_row(t, x, 64, unit, out);
        int zero = 1;
        for (int i = 0; i < 64; i++) zero = zero && out[i] == 0.0f;
        snprintf(name, sizeof name, "ggml %s: float subnormal inputs decode to 0 (fp16 d and m are 0)", t->name);
        check(zero, name, "value 0 %g", out[0]);

        for (int i = 0; i < 64; i++) x[i] = (float)(i % 13 - 6) * 3e-6f;   /* d is an fp16 subnormal */
        expect_row(t, "a row whose d is an fp16 subnormal", x, 64);
        for (int i = 0; i < 64; i++) x[i] = 1e-43f * (float)(i % 5);   /* 1/d overflows */
        expect_row(t, "a row whose 1/d overflows", x, 64);
    }
}

/* NaN and infinities: defined results (quant/codec_ggml.c's header), never a crash. */
static void test_nan_inf(void) {
    float x[QK], out[QK];
    unsigned char unit[34];
    char name[160];
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        int positions[3] = {0, 5, 31};
        for (int p = 0; p < 3; p++) {
            for (int j = 0; j < QK; j++) x[j] = 0.25f * (float)(j % 9) - 1.0f;
            x[positions[p]] = NAN;
            char what[64];
            snprintf(what, sizeof what, "a NaN at value %d", positions[p]);
            expect_row(t, what, x, QK);
            decode_row(t, x, QK, unit, out);
            int code_zero = ref_code_at(t, unit, positions[p]) == 0;
            if (t->bits != 8) {
                /* skipped by the max/min; stored as code 0: decodes to -8d, -16d or m, finite */
                snprintf(name, sizeof name, "ggml %s: a NaN at value %d is stored as code 0 and decodes finite", t->name,
                         positions[p]);
                check(code_zero && isfinite(out[positions[p]]), name, "code %d, value %g",
                      ref_code_at(t, unit, positions[p]), out[positions[p]]);
            } else if (positions[p] == 31) {
                int all_nan = 1;
                for (int j = 0; j < QK; j++) all_nan = all_nan && isnan(out[j]);
                check(all_nan, "ggml q8_0: a NaN as the last value makes d NaN: the block decodes to NaN", "value 0 %g",
                      out[0]);
            } else {
                snprintf(name, sizeof name, "ggml q8_0: a NaN at value %d is stored as code 0 and decodes to 0",
                         positions[p]);
                check(code_zero && out[positions[p]] == 0.0f, name, "code %d value %g", ref_code_at(t, unit, positions[p]),
                      out[positions[p]]);
            }
        }
        for (int j = 0; j < QK; j++) x[j] = NAN;
        expect_row(t, "an all-NaN block", x, QK);

        for (int s = 0; s < 2; s++) {
            float inf = s ? -INFINITY : INFINITY;
            for (int j = 0; j < QK; j++) x[j] = 0.5f * (float)(j % 5) - 1.0f;
            x[3] = inf;
            char what[32];
            snprintf(what, sizeof what, "a %cinf at value 3", s ? '-' : '+');
            expect_row(t, what, x, QK);
            decode_row(t, x, QK, unit, out);
            int ok = 1;
            for (int j = 0; j < QK; j++) {
                int keeps_inf = t->bits != 8 && !t->has_min && j == 3;
                ok = ok && (keeps_inf ? out[j] == inf : isnan(out[j]));
            }
            snprintf(name, sizeof name, "ggml %s: a %cinf block decodes to %s", t->name, s ? '-' : '+',
                     t->bits != 8 && !t->has_min ? "that inf at its place and NaN elsewhere" : "NaN");
            check(ok, name, "values %g %g", out[0], out[3]);
        }
        x[7] = INFINITY;
        x[3] = -INFINITY;
        expect_row(t, "a block with +inf and -inf", x, QK);
    }
    /* q8_0's running max restarts after a NaN: 100 before it saturates at 127 */
    for (int j = 0; j < QK; j++) x[j] = 0.5f;
    x[0] = 100.0f;
    x[1] = NAN;
    x[2] = 1.0f;
    decode_row(&TYPES[0], x, QK, unit, out);
    expect_row(&TYPES[0], "a NaN restarting the running max", x, QK);
    check(ref_code_at(&TYPES[0], unit, 0) == 127 && ref_code_at(&TYPES[0], unit, 2) == 127,
          "ggml q8_0: after a NaN resets amax to 1, the earlier 100 saturates at code 127", "codes %d %d",
          ref_code_at(&TYPES[0], unit, 0), ref_code_at(&TYPES[0], unit, 2));
}

/* A block built by hand from the layout decodes to (q - zero) * d (+ m): d = 0.5, m = -1. */
static void test_layout(void) {
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        KvBase b = base_of(t);
        int q[QK], top = (1 << t->bits) - 1, zero = t->bits == 8 || t->has_min ? 0 : 1 << (t->bits - 1);
        for (int j = 0; j < QK; j++) q[j] = (j * 7 + 3) % (top + 1) - (t->bits == 8 ? 128 : 0);
        q[0] = t->bits == 8 ? -128 : top;
        unsigned char blk[34];
        ref_pack(t, 0x3800, 0xbc00, q, blk);
        float out[QK];
        b.codec->decode(&b, blk, QK, 0, 1, out);
        int bad = -1;
        for (int j = 0; j < QK && bad < 0; j++) {
            float want = (float)(q[j] - zero) * 0.5f + (t->has_min ? -1.0f : 0.0f);
            if (!same_float(out[j], want)) bad = j;
        }
        char name[128];
        snprintf(name, sizeof name, "ggml %s: a hand-packed block (d 0.5%s) decodes by the layout", t->name,
                 t->has_min ? ", m -1" : "");
        check(bad < 0, name, "value %d: %g", bad, bad < 0 ? 0 : out[bad]);
    }
}

/* ---- the interface ---- */

/* The table row a base came from (the codec pointer, read through a function so that the check
 * reads as what it asks). */
static const KvCodec *codec_of(const KvBase *b) { return b->codec; }

static void test_interface(void) {
    char name[160], why[160];
    const KvCodec *codec = NULL;
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        KvBase b;
        int parsed = kv_base_parse(t->name, &b, why, sizeof why) == 0;
        if (k == 0) codec = parsed ? b.codec : NULL;
        snprintf(name, sizeof name, "ggml parse %s: canonical name, bits %d, group 32, asym %d, llama order, one row",
                 t->name, t->bits, t->has_min);
        check(parsed && !strcmp(b.name, t->name) && b.bits == t->bits && b.group == 32 && b.variant == t->has_min &&
                  codec_of(&b)->llama_key_order == 1 && b.rows == 1 && b.axis == KV_AXIS_CHANNELS && b.codec == codec,
              name, "%s", parsed ? b.name : why);
        if (!parsed) continue;
        int sizes_ok = 1, refused = 1, accepted = 1;
        int good_n[4] = {32, 64, 96, 4096}, bad_n[5] = {16, 33, 48, 100, 4095};
        for (int i = 0; i < 4; i++) {
            sizes_ok = sizes_ok && b.codec->unit_bytes(&b, good_n[i]) == (size_t)(good_n[i] / 32 * t->block_bytes);
            accepted = accepted && kv_base_check(&b, good_n[i], why, sizeof why);
        }
        for (int i = 0; i < 5; i++) {
            why[0] = 0;
            refused = refused && !kv_base_check(&b, bad_n[i], why, sizeof why) && strstr(why, t->name);
        }
        refused = refused && !kv_base_check(&b, 0, why, sizeof why);
        snprintf(name, sizeof name, "ggml %s: unit_bytes(n) = n/32 blocks of %d bytes", t->name, t->block_bytes);
        check(sizes_ok, name, "unit_bytes(64) = %zu", b.codec->unit_bytes(&b, 64));
        snprintf(name, sizeof name, "ggml %s: check accepts n = 32, 64, 96, 4096", t->name);
        check(accepted, name, "%s", why);
        snprintf(name, sizeof name, "ggml %s: check refuses n = 0, 16, 33, 48, 100, 4095 naming the base", t->name);
        check(refused, name, "last why: '%s'", why);
        double bits64 = kv_spec_stored_bits(&(KvSpec){.base = b}, 64), bits128 = kv_spec_stored_bits(&(KvSpec){.base = b}, 128);
        snprintf(name, sizeof name, "ggml %s: %.1f stored bits per value (SCHEMES.md section 6)", t->name,
                 t->bits_per_value);
        check(bits64 == t->bits_per_value && bits128 == t->bits_per_value, name, "%g, %g", bits64, bits128);
    }
    const char *bad[] = {"q4_2", "q6_0", "q8_1", "q4_0-g64", "q4", "q4_", "q5_00x", "q3_0", "q16_0", "q4_0 ", "q999999_0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        KvBase b;
        why[0] = 0;
        int rc = kv_base_parse(bad[i], &b, why, sizeof why);
        snprintf(name, sizeof name, "ggml parse rejects '%s' saying why", bad[i]);
        check(rc == -1 && strlen(why) > 0 && strstr(why, bad[i]) == why, name, "rc %d why '%s'", rc, why);
    }
    const char *others[] = {"fp16", "int4-g64", "tq3", "nf4-g64", "Q4_0", "q", "qq4_0", ""};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        KvBase b;
        memset(&b, 0, sizeof b);
        int rc = codec ? codec->parse(others[i], &b, why, sizeof why) : -2;
        snprintf(name, sizeof name, "ggml parse leaves '%s' to other codecs (returns 0)", others[i]);
        check(rc == 0, name, "rc %d", rc);
    }
    int listed = 0;
    for (int i = 0; i < kv_codec_count(); i++) listed += kv_codec_at(i) == codec;
    check(codec && listed == 1 && codec->decode_t64 == NULL && codec->rotate == NULL &&
              !strcmp(codec->examples, "q8_0 q4_0 q4_1 q5_0 q5_1"),
          "ggml codec: one row of the table, no rotation, lists the five names", "listed %d times", listed);
}

/* Rows r0 .. r0+count-1 of a run of units decode as each row alone does. */
static void test_run_decode(void) {
    enum { ROWS = 5, N = 96 };
    for (int k = 0; k < 5; k++) {
        const TypeInfo *t = &TYPES[k];
        KvBase b = base_of(t);
        size_t ub = b.codec->unit_bytes(&b, N);
        unsigned char units[ROWS * N / QK * 34];
        float x[ROWS * N], run[ROWS * N], one[N];
        uint64_t rng = 777u + (uint64_t)k;
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
        char name[128];
        snprintf(name, sizeof name, "ggml %s: rows r0..r0+count-1 of a run of %d units decode as one row at a time",
                 t->name, ROWS);
        check(ok, name, "mismatch");
    }
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
    return test_exit_code();
}
