/* tests/test_kvfile_hostile.c: KV cache files and compressed KV files (kvq-compressed-2 and -3,
 * model/formats/compress.h) that lie. Small files are built in memory (a tiny safetensors writer
 * below, independent of st_write; packed units written byte by byte from the layout of
 * quant/codec_int.c), opened with st_open_memory, and read with kv_snapshot_from_safetensors
 * or kv_decompress_safetensors. Each broken file must be refused (rc -1) with one line that
 * names the file and the problem; the intact ones must load with the right values. Files of
 * fitted bases (nuq) are read with a calibration made in memory: the sha256 they record
 * (calib_sha256) must be well formed, present exactly when a scheme is fitted, and that of the
 * calibration given. Format 3's checksums over files kv_compress writes: tests/test_kvfile_checksums.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/compress.h"
#include "model/formats/kvfile.h"
#include "quant/lz4.h"
#include "tests/test.h"
#include <unistd.h>

#define FILE_NAME "hostile-kv.safetensors"
#define MAX_T 8
#define MAX_M 12

typedef struct {
    const char *name, *dtype, *shape;   /* shape as JSON text, e.g. "[1,1,2,32]" */
    const void *data;
    size_t len;
} T;

typedef struct {
    T t[MAX_T];
    int n_t;
    const char *mk[MAX_M], *mv[MAX_M];
    int n_m;
} Spec;

static void add_t(Spec *s, const char *name, const char *dtype, const char *shape, const void *data, size_t len) {
    s->t[s->n_t++] = (T){name, dtype, shape, data, len};
}

/* Sets (or adds) one metadata entry. */
static void set_m(Spec *s, const char *k, const char *v) {
    for (int i = 0; i < s->n_m; i++)
        if (!strcmp(s->mk[i], k)) { s->mv[i] = v; return; }
    s->mk[s->n_m] = k;
    s->mv[s->n_m++] = v;
}

/* Drops a tensor by name. */
static void drop_t(Spec *s, const char *name) {
    for (int i = 0; i < s->n_t; i++)
        if (!strcmp(s->t[i].name, name)) { s->t[i] = s->t[--s->n_t]; return; }
}

static T *find_t(Spec *s, const char *name) {
    for (int i = 0; i < s->n_t; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

/* Serializes spec as safetensors into an exactly sized malloc'd buffer. */
static unsigned char *build(const Spec *s, size_t *len) {
    char hdr[4096];
    size_t h = 0, off = 0;
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "{\"__metadata__\":{");
    for (int i = 0; i < s->n_m; i++)
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, "%s\"%s\":\"%s\"", i ? "," : "", s->mk[i], s->mv[i]);
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    for (int i = 0; i < s->n_t; i++) {
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                              s->t[i].name, s->t[i].dtype, s->t[i].shape, off, off + s->t[i].len);
        off += s->t[i].len;
    }
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "}");
    *len = 8 + h + off;
    unsigned char *buf = malloc(*len);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, hdr, h);
    size_t at = 8 + h;
    for (int i = 0; i < s->n_t; i++) {
        memcpy(buf + at, s->t[i].data, s->t[i].len);
        at += s->t[i].len;
    }
    return buf;
}

/* Opens spec and reads it as a compressed file (compressed = 1, with calib: NULL for none) or a
 * plain cache. */
static int load_calib(const Spec *spec, int compressed, const Calibration *calib, KvSnapshot *out, Error *err) {
    size_t len;
    unsigned char *buf = build(spec, &len);
    SafeTensors st;
    err->msg[0] = '\0';
    int rc = st_open_memory(&st, buf, len, FILE_NAME, err);
    if (rc == 0) {
        rc = compressed ? kv_decompress_safetensors(&st, calib, out, err) : kv_snapshot_from_safetensors(&st, out, err);
        st_close(&st);
    }
    free(buf);
    return rc;
}

static int load(const Spec *spec, int compressed, KvSnapshot *out, Error *err) {
    return load_calib(spec, compressed, NULL, out, err);
}

static void expect_refused_calib(const char *name, const Spec *spec, int compressed, const Calibration *calib,
                                 const char *want) {
    KvSnapshot s;
    Error err;
    int rc = load_calib(spec, compressed, calib, &s, &err);
    if (rc == 0) kv_snapshot_free(&s);
    check(rc == -1 && strncmp(err.msg, FILE_NAME ": ", strlen(FILE_NAME) + 2) == 0 && !strchr(err.msg, '\n') &&
          strstr(err.msg, want), name, "rc %d, message '%s' (want '%s')", rc, err.msg, want);
}

static void expect_refused(const char *name, const Spec *spec, int compressed, const char *want) {
    expect_refused_calib(name, spec, compressed, NULL, want);
}

/* ---- compressed files (kvq-compressed-2): 1 layer, 1 head, head_dim 32 ----
 * Three intact shapes, each broken in turn:
 *   plain     int4-g32, 2 positions: NAME.packed = 2 rows of 16 code bytes + an fp16 scale
 *   residual  keys int4-g32+res1 (position 0 packed, position 1 in NAME.full F16 [1, 1, 32]),
 *             values int4-g32 (no NAME.full)
 *   tokens    int4-t8, 10 positions: one unit of 8 positions packed (8 codes per channel,
 *             then 32 fp16 scales), positions 8 and 9 in NAME.full F16 [1, 2, 32] */

enum { HD = 32, ROW_BYTES = HD / 2 + 2, PACKED = 2 * ROW_BYTES, TOKEN_UNIT = 8 * HD / 2 + 2 * HD };

static unsigned char rows2[PACKED], nan_rows[PACKED], inf_rows[PACKED], garbage[PACKED], token_unit[TOKEN_UNIT];
static uint16_t full1[HD], full2[2 * HD], nan_full[HD];
static unsigned char lz4_block[128], lz4_short[128], outlier_rows[2 * (ROW_BYTES + 3)];
static size_t lz4_len, lz4_short_len;
static char lz4_shape[16], lz4_short_shape[16];

static void compressed_meta(Spec *s, const char *k_scheme, const char *v_scheme, const char *seq) {
    memset(s, 0, sizeof *s);
    set_m(s, "format", "kvq-compressed-2");
    set_m(s, "k_scheme", k_scheme);
    set_m(s, "v_scheme", v_scheme);
    set_m(s, "lz4", "0");
    set_m(s, "num_layers", "1");
    set_m(s, "num_kv_heads", "1");
    set_m(s, "seq_len", seq);
    set_m(s, "head_dim", "32");
}

static void compressed_spec(Spec *s) {
    compressed_meta(s, "int4-g32", "int4-g32", "2");
    add_t(s, "layer_0_key.packed", "U8", "[36]", rows2, PACKED);
    add_t(s, "layer_0_value.packed", "U8", "[36]", rows2, PACKED);
}

static void residual_spec(Spec *s) {
    compressed_meta(s, "int4-g32+res1", "int4-g32", "2");
    add_t(s, "layer_0_key.packed", "U8", "[18]", rows2, ROW_BYTES);
    add_t(s, "layer_0_key.full", "F16", "[1,1,32]", full1, sizeof full1);
    add_t(s, "layer_0_value.packed", "U8", "[36]", rows2, PACKED);
}

static void token_spec(Spec *s) {
    compressed_meta(s, "int4-t8", "int4-t8", "10");
    add_t(s, "layer_0_key.packed", "U8", "[192]", token_unit, TOKEN_UNIT);
    add_t(s, "layer_0_key.full", "F16", "[1,2,32]", full2, sizeof full2);
    add_t(s, "layer_0_value.packed", "U8", "[192]", token_unit, TOKEN_UNIT);
    add_t(s, "layer_0_value.full", "F16", "[1,2,32]", full2, sizeof full2);
}

static void init_data(void) {
    /* codes 10 then 9 (low nibble first) with scale 1.0: values 2, 1 (zero point 8) */
    for (int r = 0; r < 2; r++) {
        memset(rows2 + r * ROW_BYTES, 0x9A, HD / 2);
        rows2[r * ROW_BYTES + HD / 2] = 0x00, rows2[r * ROW_BYTES + HD / 2 + 1] = 0x3C;
    }
    memcpy(nan_rows, rows2, PACKED);
    nan_rows[ROW_BYTES + HD / 2] = 0x00, nan_rows[ROW_BYTES + HD / 2 + 1] = 0x7E;   /* row 1's scale: NaN */
    memcpy(inf_rows, rows2, PACKED);
    inf_rows[HD / 2] = 0x00, inf_rows[HD / 2 + 1] = 0xFC;                            /* row 0's scale: -inf */
    memset(garbage, 0xFF, sizeof garbage);
    /* int4-g32+out1 rows: the int4-g32 row, then the outlier: 4.0 at index 3; 4.0 at index 200 */
    for (int r = 0; r < 2; r++) {
        unsigned char *o = outlier_rows + r * (ROW_BYTES + 3);
        memcpy(o, rows2, ROW_BYTES);
        o[ROW_BYTES] = 0x00, o[ROW_BYTES + 1] = 0x44, o[ROW_BYTES + 2] = r ? 200 : 3;
    }
    /* token unit: channel c's 8 codes at bytes 4c..4c+3 (positions 0..7: 10, 9, 10, 9, ...), then 32 scales 1.0 */
    memset(token_unit, 0x9A, 8 * HD / 2);
    for (int c = 0; c < HD; c++) token_unit[8 * HD / 2 + 2 * c] = 0x00, token_unit[8 * HD / 2 + 2 * c + 1] = 0x3C;
    for (int i = 0; i < HD; i++) full1[i] = 0x3800;       /* 0.5 */
    for (int i = 0; i < 2 * HD; i++) full2[i] = 0x3800;
    memcpy(nan_full, full1, sizeof full1);
    nan_full[5] = 0x7E00;
    lz4_len = lz4_compress(rows2, PACKED, lz4_block, sizeof lz4_block);
    lz4_short_len = lz4_compress(rows2, PACKED - 1, lz4_short, sizeof lz4_short);
    snprintf(lz4_shape, sizeof lz4_shape, "[%zu]", lz4_len);
    snprintf(lz4_short_shape, sizeof lz4_short_shape, "[%zu]", lz4_short_len);
}

/* Position p, value i of an intact file: 2 and 1 alternating from the codes, 0.5 from .full. */
static int values_right(const KvSnapshot *out, int seq, int key_full_from, int value_full_from) {
    if (out->n_layers != 1 || out->n_kv_heads != 1 || out->seq_len != seq || out->head_dim != HD) return 0;
    for (int p = 0; p < seq; p++)
        for (int i = 0; i < HD; i++) {
            /* channel axis: value i alternates; token axis: position p alternates */
            int tokens = seq == 10;
            float coded = (tokens ? p : i) % 2 ? 1.0f : 2.0f;
            float k = p >= key_full_from ? 0.5f : coded, v = p >= value_full_from ? 0.5f : coded;
            if (out->k[p * HD + i] != k || out->v[p * HD + i] != v) return 0;
        }
    return 1;
}

static void expect_loads(const char *name, const Spec *spec, int seq, int key_full_from, int value_full_from) {
    KvSnapshot out;
    Error err;
    int ok = load(spec, 1, &out, &err) == 0;
    if (check(ok, name, "%s", err.msg)) {
        char values[160];
        snprintf(values, sizeof values, "%s: values from the codes x scale and the fp16 rows", name);
        check(values_right(&out, seq, key_full_from, value_full_from), values, "wrong values");
        kv_snapshot_free(&out);
    }
}

static void set_packed(Spec *s, const char *name, const void *data, size_t len, const char *shape) {
    T *t = find_t(s, name);
    t->data = data, t->len = len, t->shape = shape;
}

static void test_compressed(void) {
    Spec s;
    compressed_spec(&s);
    expect_loads("compressed: intact file loads", &s, 2, 2, 2);
    set_m(&s, "lz4", "1");
    set_packed(&s, "layer_0_key.packed", lz4_block, lz4_len, lz4_shape);
    set_packed(&s, "layer_0_value.packed", lz4_block, lz4_len, lz4_shape);
    expect_loads("compressed: intact LZ4 file loads", &s, 2, 2, 2);
    residual_spec(&s);
    expect_loads("compressed: intact file with a full-precision tail (keys +res1) loads", &s, 2, 1, 2);
    token_spec(&s);
    expect_loads("compressed: intact token-axis file (int4-t8: 8 positions packed, 2 full) loads", &s, 10, 8, 8);

    /* non-finite parameters or stored values: refused, as a cache holding NaN is */
    compressed_spec(&s);
    find_t(&s, "layer_0_key.packed")->data = nan_rows;
    expect_refused("compressed: NaN scale", &s, 1, "tensor 'layer_0_key' decodes to a non-finite value at element 32");
    compressed_spec(&s);
    find_t(&s, "layer_0_value.packed")->data = inf_rows;
    expect_refused("compressed: -inf scale", &s, 1, "tensor 'layer_0_value' decodes to a non-finite value at element 0");
    residual_spec(&s);
    find_t(&s, "layer_0_key.full")->data = nan_full;
    expect_refused("compressed: NaN in the full-precision rows", &s, 1, "non-finite value at element 37");

    /* +out1: after each row's 18 bytes an fp16 value and its u8 index; an index past the row
     * (only a hostile file has one) is skipped, never written outside the row */
    compressed_meta(&s, "int4-g32+out1", "int4-g32", "2");
    add_t(&s, "layer_0_key.packed", "U8", "[42]", outlier_rows, sizeof outlier_rows);
    add_t(&s, "layer_0_value.packed", "U8", "[36]", rows2, PACKED);
    KvSnapshot out;
    Error err;
    int ok = load(&s, 1, &out, &err) == 0;
    if (check(ok, "compressed: +out1 index past head_dim loads", "%s", err.msg)) {
        int right = out.seq_len == 2 && out.head_dim == HD;
        for (int p = 0; right && p < 2; p++)
            for (int i = 0; i < HD; i++) right = right && out.k[p * HD + i] == (p == 0 && i == 3 ? 4.0f : i % 2 ? 1.0f : 2.0f);
        check(right, "compressed: +out1 kept at index 3, index 200 skipped", "wrong values");
        kv_snapshot_free(&out);
    }

    /* the packed tensor */
    compressed_spec(&s);
    set_packed(&s, "layer_0_value.packed", rows2, PACKED - 1, "[35]");
    expect_refused("compressed: packed one byte short", &s, 1, "tensor 'layer_0_value.packed' holds 35 bytes, expected 36");
    compressed_spec(&s);
    find_t(&s, "layer_0_key.packed")->shape = "[2,18]";
    expect_refused("compressed: packed not 1-D", &s, 1, "missing or malformed tensor 'layer_0_key.packed'");
    compressed_spec(&s);
    find_t(&s, "layer_0_key.packed")->dtype = "I8";
    expect_refused("compressed: packed not U8", &s, 1, "missing or malformed tensor 'layer_0_key.packed'");
    compressed_spec(&s);
    drop_t(&s, "layer_0_value.packed");
    expect_refused("compressed: packed missing", &s, 1, "missing or malformed tensor 'layer_0_value.packed'");

    /* the full-precision rows */
    residual_spec(&s);
    drop_t(&s, "layer_0_key.full");
    expect_refused("compressed: .full missing under +res1", &s, 1, "tensor 'layer_0_key.full' missing or not F16 [1, 1, 32]");
    token_spec(&s);
    drop_t(&s, "layer_0_value.full");
    expect_refused("compressed: .full missing under a token-axis scheme's tail", &s, 1,
                   "tensor 'layer_0_value.full' missing or not F16 [1, 2, 32]");
    residual_spec(&s);
    set_packed(&s, "layer_0_key.full", full2, sizeof full2, "[1,2,32]");
    expect_refused("compressed: .full with one row too many", &s, 1, "tensor 'layer_0_key.full' missing or not F16 [1, 1, 32]");
    residual_spec(&s);
    find_t(&s, "layer_0_key.full")->shape = "[32]";
    expect_refused("compressed: .full not 3-D", &s, 1, "tensor 'layer_0_key.full' missing or not F16 [1, 1, 32]");
    residual_spec(&s);
    find_t(&s, "layer_0_key.full")->dtype = "BF16";
    expect_refused("compressed: .full not F16", &s, 1, "tensor 'layer_0_key.full' missing or not F16 [1, 1, 32]");
    residual_spec(&s);
    add_t(&s, "layer_0_value.full", "F16", "[1,1,32]", full1, sizeof full1);
    expect_refused("compressed: unexpected .full", &s, 1, "tensor 'layer_0_value.full' is not expected under this scheme");

    /* the lz4 flag and blocks */
    compressed_spec(&s);
    set_m(&s, "lz4", "2");
    expect_refused("compressed: lz4 flag 2", &s, 1, "metadata 'lz4' = '2' is invalid");
    set_m(&s, "lz4", "yes");
    expect_refused("compressed: lz4 flag not a number", &s, 1, "'lz4'");
    set_m(&s, "lz4", "1\\n");
    expect_refused("compressed: lz4 flag with a newline, in one line", &s, 1, "'lz4' = '1?'");
    set_m(&s, "lz4", "1");
    find_t(&s, "layer_0_key.packed")->data = garbage;
    expect_refused("compressed: corrupt LZ4 block", &s, 1, "tensor 'layer_0_key.packed': LZ4 block is corrupt");
    compressed_spec(&s);
    set_m(&s, "lz4", "1");
    set_packed(&s, "layer_0_key.packed", lz4_short, lz4_short_len, lz4_short_shape);
    set_packed(&s, "layer_0_value.packed", lz4_block, lz4_len, lz4_shape);
    expect_refused("compressed: LZ4 block decodes short", &s, 1, "tensor 'layer_0_key.packed' holds 35 bytes, expected 36");

    /* the schemes */
    compressed_spec(&s);
    set_m(&s, "k_scheme", "int5-g32");
    expect_refused("compressed: unknown scheme (int5-g32)", &s, 1,
                   "metadata k_scheme 'int5-g32': int5-g32: bits must be 2, 3, 4 or 8");
    compressed_spec(&s);
    set_m(&s, "v_scheme", "foo-g32");
    expect_refused("compressed: unknown base (foo-g32)", &s, 1, "metadata v_scheme 'foo-g32': unknown base 'foo-g32'");
    compressed_spec(&s);
    set_m(&s, "k_scheme", "int5\\nx");   /* a JSON escape: a newline in the file's string */
    expect_refused("compressed: unknown scheme with a newline, in one line", &s, 1,
                   "metadata k_scheme 'int5?x': int5?x: bits must be");
    compressed_spec(&s);
    set_m(&s, "k_scheme", "int4-g32+prerope");
    expect_refused("compressed: +prerope keys refused (no positions or RoPE in a file)", &s, 1,
                   "int4-g32+prerope: +prerope needs positions and RoPE");
    compressed_spec(&s);
    set_m(&s, "v_scheme", "int4-g32+prerope");
    expect_refused("compressed: +prerope values refused", &s, 1, "+prerope is for keys only");
    compressed_spec(&s);
    set_m(&s, "k_scheme", "int4-g32;3:int8-g32");
    expect_refused("compressed: a layer item beyond num_layers", &s, 1, "layer 3 is out of range: the model has layers 0-0");
    compressed_spec(&s);
    set_m(&s, "v_scheme", "int4-g32;0:");
    expect_refused("compressed: an empty layer item scheme", &s, 1, "metadata v_scheme 'int4-g32;0:': empty scheme");
    compressed_spec(&s);
    set_m(&s, "k_scheme", "");
    drop_t(&s, "layer_0_key.packed");
    expect_refused("compressed: empty k_scheme", &s, 1, "metadata k_scheme '': empty scheme");
    compressed_spec(&s);
    s.n_m = 0;
    set_m(&s, "format", "kvq-compressed-2");
    set_m(&s, "lz4", "0"), set_m(&s, "num_layers", "1"), set_m(&s, "num_kv_heads", "1");
    set_m(&s, "seq_len", "2"), set_m(&s, "head_dim", "32"), set_m(&s, "v_scheme", "int4-g32");
    expect_refused("compressed: k_scheme missing", &s, 1, "metadata 'k_scheme' missing");

    /* the format and the geometry */
    compressed_spec(&s);
    set_m(&s, "format", "something-else");
    expect_refused("compressed: wrong format", &s, 1, "not a kvq compressed file");
    compressed_spec(&s);
    set_m(&s, "format", "kvq-compressed-1");   /* a v1 file: .codes and .params, one "scheme" */
    set_m(&s, "scheme", "int4-g32");
    find_t(&s, "layer_0_key.packed")->name = "layer_0_key.codes";
    find_t(&s, "layer_0_value.packed")->name = "layer_0_value.codes";
    expect_refused("compressed: a v1 file (kvq-compressed-1) is refused by name", &s, 1,
                   "not a kvq compressed file (metadata format is not kvq-compressed-4, kvq-compressed-3 or kvq-compressed-2)");
    compressed_spec(&s);
    set_m(&s, "num_layers", "2");
    expect_refused("compressed: num_layers larger than the tensors", &s, 1, "missing or malformed tensor 'layer_1_key.packed'");
    set_m(&s, "num_layers", "0");
    expect_refused("compressed: num_layers 0", &s, 1, "metadata 'num_layers' = '0' is invalid");
    set_m(&s, "num_layers", "-1");
    expect_refused("compressed: num_layers negative", &s, 1, "metadata 'num_layers' = '-1' is invalid");
    compressed_spec(&s);
    set_m(&s, "head_dim", "24");
    expect_refused("compressed: head_dim not a multiple of the group", &s, 1,
                   "group 32 does not divide rows of 24");
    compressed_spec(&s);
    set_m(&s, "seq_len", "16777216");
    expect_refused("compressed: seq_len far beyond the file", &s, 1, "metadata geometry does not match the file's contents");
}

/* ---- compressed files of a fitted base: nuq2-g32, 1 layer, 1 head, head_dim 32, 2 positions ----
 * A row is 8 bytes of 2-bit codes (all 0 here: entry T[0]) and an fp16 scale 2.0, so every
 * value decodes to T[0] * 2 with the calibration's table T = {-1, -0.25, 0.25, 1}: -2. */

enum { NUQ_ROW = HD * 2 / 8 + 2 };
static unsigned char nuq_rows[2 * NUQ_ROW];
#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void fitted_spec(Spec *s, const char *k_scheme, const char *v_scheme) {
    compressed_meta(s, k_scheme, v_scheme, "2");
    set_m(s, "calib_sha256", SHA_A);
    add_t(s, "layer_0_key.packed", "U8", "[20]", nuq_rows, sizeof nuq_rows);
    add_t(s, "layer_0_value.packed", "U8", "[20]", nuq_rows, sizeof nuq_rows);
}

/* A calibration of head_dim `dim` whose file sha256 is `sha`, with the fit `key` (nuq2-g32's
 * table {-1, -0.25, 0.25, 1} on both sides); 0 or -1. */
static int make_calibration(Calibration *c, int dim, const char *sha, const char *key) {
    Error err;
    if (calibration_init(c, 1, 1, 1, dim, &err)) return -1;
    CalibFit *f = calibration_add_fit(c, key, &err);
    if (!f) return -1;
    static const float table[4] = {-1.0f, -0.25f, 0.25f, 1.0f};
    for (size_t i = 0; i < 2 * f->layer_floats; i++) f->codebooks[i] = table[i % 4];
    snprintf(c->path, sizeof c->path, "calib-%s.safetensors", key);
    snprintf(c->file_sha256, sizeof c->file_sha256, "%s", sha);
    return 0;
}

static void test_fitted(void) {
    for (int r = 0; r < 2; r++) {
        memset(nuq_rows + r * NUQ_ROW, 0, NUQ_ROW - 2);
        nuq_rows[r * NUQ_ROW + NUQ_ROW - 2] = 0x00, nuq_rows[r * NUQ_ROW + NUQ_ROW - 1] = 0x40;   /* fp16 2.0 */
    }
    Calibration calib, other, wide, lacking;
    int made = make_calibration(&calib, HD, SHA_A, "nuq2-g32") == 0 && make_calibration(&other, HD, SHA_B, "nuq2-g32") == 0 &&
               make_calibration(&wide, 64, SHA_A, "nuq2-g32") == 0 && make_calibration(&lacking, HD, SHA_A, "nuq3-g32") == 0;
    if (!check(made, "fitted: in-memory calibrations made", "calibration_init / add_fit failed")) return;
    Spec s;
    KvSnapshot out;
    Error err;
    fitted_spec(&s, "nuq2-g32", "int4-g32;0:nuq2-g32");
    int ok = load_calib(&s, 1, &calib, &out, &err) == 0;
    if (check(ok, "fitted: intact nuq2-g32 file loads with the calibration it records", "%s", err.msg)) {
        int right = out.seq_len == 2 && out.head_dim == HD;
        for (int i = 0; right && i < 2 * HD; i++) right = out.k[i] == -2.0f && out.v[i] == -2.0f;
        check(right, "fitted: every value is the table's entry x the scale (-1 x 2)", "k[0] %g, v[0] %g", out.k[0], out.v[0]);
        kv_snapshot_free(&out);
    }
    expect_refused_calib("fitted: no calibration given", &s, 1, NULL,
                         "packed with the tables of the calibration of sha256 " SHA_A ": give that file with --calib");
    expect_refused_calib("fitted: another calibration (sha256 differs)", &s, 1, &other,
                         "packed with the calibration of sha256 " SHA_A ", but --calib calib-nuq2-g32.safetensors has sha256 " SHA_B);
    expect_refused_calib("fitted: the recorded calibration of another geometry", &s, 1, &wide,
                         "is for 1 layers, 1 KV heads, head_dim 64; the file has 1, 1, 32");
    expect_refused_calib("fitted: the recorded calibration lacks the fit", &s, 1, &lacking,
                         "has no fit nuq2-g32 (./run calibrate MODEL_DIR --fit nuq2-g32 --out FILE makes it)");
    set_m(&s, "calib_sha256", "xyz");
    expect_refused_calib("fitted: calib_sha256 not hex", &s, 1, &calib, "metadata 'calib_sha256' = 'xyz' is invalid");
    set_m(&s, "calib_sha256", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    expect_refused_calib("fitted: calib_sha256 in upper case", &s, 1, &calib, "metadata 'calib_sha256' = 'AAAA");
    set_m(&s, "calib_sha256", SHA_A "a");
    expect_refused_calib("fitted: calib_sha256 of 65 digits", &s, 1, &calib, "is invalid (64 lowercase hex digits)");
    set_m(&s, "calib_sha256", "aaaa\\naaaa");   /* a JSON escape: a newline in the file's string */
    expect_refused_calib("fitted: calib_sha256 with a newline, in one line", &s, 1, &calib, "= 'aaaa?aaaa' is invalid");
    set_m(&s, "calib_sha256", "");
    expect_refused_calib("fitted: calib_sha256 empty", &s, 1, &calib, "metadata 'calib_sha256' = '' is invalid");
    fitted_spec(&s, "int4-g32", "int4-g32;0:nuq2-g32");
    s.n_m--;   /* calib_sha256 was set last */
    expect_refused_calib("fitted: a fitted layer item without calib_sha256", &s, 1, &calib,
                         "fitted schemes (keys int4-g32, values int4-g32;0:nuq2-g32) without metadata 'calib_sha256'");
    compressed_spec(&s);
    set_m(&s, "calib_sha256", SHA_A);
    expect_refused_calib("fitted: calib_sha256 in a file without fitted schemes", &s, 1, &calib,
                         "metadata 'calib_sha256' without a fitted scheme");
    compressed_spec(&s);
    ok = load_calib(&s, 1, &calib, &out, &err) == 0;
    if (check(ok, "fitted: a file without fitted schemes loads with an unused calibration", "%s", err.msg)) kv_snapshot_free(&out);
    calibration_free(&calib);
    calibration_free(&other);
    calibration_free(&wide);
    calibration_free(&lacking);
}

/* ---- plain caches: 1 layer, [1, 1, 2, 4] F32 ---- */

static float kv_values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static int32_t ints[8];

static void plain_spec(Spec *s) {
    memset(s, 0, sizeof *s);
    set_m(s, "num_layers", "1");
    set_m(s, "seq_len", "2");
    add_t(s, "layer_0_key", "F32", "[1,1,2,4]", kv_values, sizeof kv_values);
    add_t(s, "layer_0_value", "F32", "[1,1,2,4]", kv_values, sizeof kv_values);
}

static void test_plain(void) {
    Spec s;
    KvSnapshot out;
    Error err;
    plain_spec(&s);
    int ok = load(&s, 0, &out, &err) == 0;
    if (check(ok, "cache: intact file loads", "%s", err.msg)) {
        check(out.seq_len == 2 && out.head_dim == 4 && out.k[7] == 8.0f && out.v[0] == 1.0f, "cache: values read",
              "wrong");
        kv_snapshot_free(&out);
    }
    drop_t(&s, "layer_0_value");
    expect_refused("cache: value tensor missing", &s, 0, "num_layers");
    plain_spec(&s);
    find_t(&s, "layer_0_value")->shape = "[1,2,1,4]";
    expect_refused("cache: value shape differs from key", &s, 0, "layer_0_value");
    plain_spec(&s);
    find_t(&s, "layer_0_key")->shape = "[2,4]";
    expect_refused("cache: key not 4-D", &s, 0, "layer_0_key");
    plain_spec(&s);
    find_t(&s, "layer_0_value")->dtype = "I32", find_t(&s, "layer_0_value")->data = ints;
    expect_refused("cache: integer dtype", &s, 0, "I32");
    plain_spec(&s);
    set_m(&s, "seq_len", "3");
    expect_refused("cache: metadata disagrees with tensors", &s, 0, "seq_len");
    set_m(&s, "seq_len", "two");
    expect_refused("cache: metadata not a number", &s, 0, "seq_len");
    plain_spec(&s);
    find_t(&s, "layer_0_key")->name = "layer_0_keys";
    expect_refused("cache: no layer_0_key", &s, 0, "layer_0_key");
    plain_spec(&s);
    set_m(&s, "num_layers", "2");
    expect_refused("cache: num_layers beyond the tensors", &s, 0, "num_layers");
}


int main(void) {
    init_data();
    test_compressed();
    test_fitted();
    test_plain();
    return test_exit_code();
}
