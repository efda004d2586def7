/* tests/test_kvfile_hostile.c: KV cache files and compressed KV files that lie.
 * Small files are built in memory (a tiny safetensors writer below, independent of
 * st_write), opened with st_open_memory, and read with kv_snapshot_from_safetensors
 * or kv_decompress_safetensors. Each broken file must be refused with one line that
 * names the file and the problem; the intact ones must load with the right values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/compress.h"
#include "model/kvfile.h"
#include "quant/lz4.h"
#include "tests/test.h"

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

/* Opens spec and reads it as a compressed file (compressed = 1) or a plain cache. */
static int load(const Spec *spec, int compressed, KvSnapshot *out, Error *err) {
    size_t len;
    unsigned char *buf = build(spec, &len);
    SafeTensors st;
    err->msg[0] = '\0';
    int rc = st_open_memory(&st, buf, len, FILE_NAME, err);
    if (rc == 0) {
        rc = compressed ? kv_decompress_safetensors(&st, out, err) : kv_snapshot_from_safetensors(&st, out, err);
        st_close(&st);
    }
    free(buf);
    return rc;
}

static void expect_refused(const char *name, const Spec *spec, int compressed, const char *want) {
    KvSnapshot s;
    Error err;
    int rc = load(spec, compressed, &s, &err);
    if (rc == 0) kv_snapshot_free(&s);
    check(rc == -1 && strncmp(err.msg, FILE_NAME ": ", strlen(FILE_NAME) + 2) == 0 && !strchr(err.msg, '\n') &&
          strstr(err.msg, want), name, "rc %d, message '%s' (want '%s')", rc, err.msg, want);
}

/* ---- compressed files: 1 layer, 1 head, 2 positions, head_dim 32, int4-g32 ---- */

enum { N = 64, CODE_BYTES = N * 4 / 8, GROUPS = N / 32 };

static unsigned char codes[CODE_BYTES], garbage[CODE_BYTES];
static uint16_t scales[GROUPS], nan_scales[GROUPS], inf_scales[GROUPS];
static unsigned char lz4_block[64], lz4_short[64];
static size_t lz4_len, lz4_short_len;

static void compressed_spec(Spec *s) {
    memset(s, 0, sizeof *s);
    set_m(s, "format", "kvq-compressed-1");
    set_m(s, "scheme", "int4-g32");
    set_m(s, "lz4", "0");
    set_m(s, "num_layers", "1");
    set_m(s, "num_kv_heads", "1");
    set_m(s, "seq_len", "2");
    set_m(s, "head_dim", "32");
    add_t(s, "layer_0_key.codes", "U8", "[32]", codes, sizeof codes);
    add_t(s, "layer_0_key.params", "F16", "[2,1]", scales, sizeof scales);
    add_t(s, "layer_0_value.codes", "U8", "[32]", codes, sizeof codes);
    add_t(s, "layer_0_value.params", "F16", "[2,1]", scales, sizeof scales);
}

static void init_data(void) {
    for (int i = 0; i < CODE_BYTES; i++) codes[i] = 0x9A;   /* codes 10 then 9: values 2, 1 (zero point 8) */
    memset(garbage, 0xFF, sizeof garbage);
    for (int g = 0; g < GROUPS; g++) {
        scales[g] = 0x3C00;                                  /* 1.0 */
        nan_scales[g] = g ? 0x3C00 : 0x7E00;
        inf_scales[g] = g ? 0xFC00 : 0x3C00;
    }
    lz4_len = lz4_compress(codes, sizeof codes, lz4_block, sizeof lz4_block);
    lz4_short_len = lz4_compress(codes, sizeof codes - 1, lz4_short, sizeof lz4_short);
}

static void test_compressed(void) {
    Spec s;
    KvSnapshot out;
    Error err;
    compressed_spec(&s);
    int ok = load(&s, 1, &out, &err) == 0;
    if (check(ok, "compressed: intact file loads", "%s", err.msg)) {
        int right = out.n_layers == 1 && out.seq_len == 2 && out.head_dim == 32;
        for (int i = 0; right && i < N; i++) right = out.k[i] == (i % 2 ? 1.0f : 2.0f) && out.v[i] == out.k[i];
        check(right, "compressed: intact file decodes to its codes x scale", "wrong values");
        kv_snapshot_free(&out);
    }
    set_m(&s, "lz4", "1");
    find_t(&s, "layer_0_key.codes")->data = lz4_block, find_t(&s, "layer_0_key.codes")->len = lz4_len;
    find_t(&s, "layer_0_value.codes")->data = lz4_block, find_t(&s, "layer_0_value.codes")->len = lz4_len;
    char shape[16];
    snprintf(shape, sizeof shape, "[%zu]", lz4_len);
    find_t(&s, "layer_0_key.codes")->shape = find_t(&s, "layer_0_value.codes")->shape = shape;
    ok = load(&s, 1, &out, &err) == 0;
    check(ok, "compressed: intact LZ4 file loads", "%s", err.msg);
    if (ok) kv_snapshot_free(&out);

    compressed_spec(&s);
    find_t(&s, "layer_0_key.params")->data = nan_scales;
    expect_refused("compressed: NaN scale", &s, 1, "non-finite scale");
    find_t(&s, "layer_0_key.params")->data = inf_scales;
    expect_refused("compressed: -inf scale", &s, 1, "non-finite scale");
    compressed_spec(&s);
    find_t(&s, "layer_0_value.codes")->len = CODE_BYTES - 1, find_t(&s, "layer_0_value.codes")->shape = "[31]";
    expect_refused("compressed: codes one byte short", &s, 1, "layer_0_value.codes' holds 31 code bytes, expected 32");
    compressed_spec(&s);
    find_t(&s, "layer_0_key.codes")->shape = "[2,16]";
    expect_refused("compressed: codes not 1-D", &s, 1, "layer_0_key.codes");
    compressed_spec(&s);
    drop_t(&s, "layer_0_value.params");
    expect_refused("compressed: params missing", &s, 1, "layer_0_value.params");
    compressed_spec(&s);
    find_t(&s, "layer_0_key.params")->dtype = "BF16";
    expect_refused("compressed: params not F16", &s, 1, "layer_0_key.params");
    compressed_spec(&s);
    set_m(&s, "lz4", "2");
    expect_refused("compressed: lz4 flag 2", &s, 1, "'lz4'");
    set_m(&s, "lz4", "yes");
    expect_refused("compressed: lz4 flag not a number", &s, 1, "'lz4'");
    set_m(&s, "lz4", "1");
    find_t(&s, "layer_0_key.codes")->data = garbage;
    expect_refused("compressed: corrupt LZ4 block", &s, 1, "LZ4 block is corrupt");
    compressed_spec(&s);
    set_m(&s, "lz4", "1");
    snprintf(shape, sizeof shape, "[%zu]", lz4_short_len);
    find_t(&s, "layer_0_key.codes")->data = lz4_short, find_t(&s, "layer_0_key.codes")->len = lz4_short_len;
    find_t(&s, "layer_0_key.codes")->shape = shape;
    expect_refused("compressed: LZ4 block decodes short", &s, 1, "holds 31 code bytes, expected 32");
    compressed_spec(&s);
    set_m(&s, "scheme", "int5-g32");
    expect_refused("compressed: unknown scheme", &s, 1, "unknown scheme 'int5-g32'");
    set_m(&s, "scheme", "int5\\nx");   /* a JSON escape: a newline in the file's string */
    expect_refused("compressed: unknown scheme with a newline, in one line", &s, 1, "unknown scheme 'int5?x'");
    compressed_spec(&s);
    set_m(&s, "lz4", "1\\n");
    expect_refused("compressed: lz4 flag with a newline, in one line", &s, 1, "'lz4' = '1?'");
    compressed_spec(&s);
    set_m(&s, "format", "something-else");
    expect_refused("compressed: wrong format", &s, 1, "not a kvq compressed file");
    compressed_spec(&s);
    set_m(&s, "num_layers", "2");
    expect_refused("compressed: num_layers larger than the tensors", &s, 1, "layer_1_key.codes");
    set_m(&s, "num_layers", "0");
    expect_refused("compressed: num_layers 0", &s, 1, "num_layers");
    set_m(&s, "num_layers", "-1");
    expect_refused("compressed: num_layers negative", &s, 1, "num_layers");
    compressed_spec(&s);
    set_m(&s, "head_dim", "24");
    expect_refused("compressed: head_dim not a multiple of the group", &s, 1, "geometry");
    compressed_spec(&s);
    set_m(&s, "seq_len", "16777216");
    expect_refused("compressed: seq_len far beyond the file", &s, 1, "geometry");
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
    test_plain();
    return test_exit_code();
}
