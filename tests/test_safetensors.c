/* tests/test_safetensors.c: model/formats/safetensors.c on the real fixture files
 * (shapes, dtypes, bytes and metadata checked against config.json, the
 * .metadata.json sidecar and values read once with Python), a write -> read ->
 * write byte-identical round trip, hostile files (each must fail with a message
 * naming the file, via both st_open_memory and st_open) and st_write failures
 * (which must leave no file behind). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/formats/json.h"
#include "model/formats/safetensors.h"
#include "tests/test.h"

#define KV_SYNTH "tests/fixtures/reference/kv-synthetic.safetensors"
#define EXPORT_DIR "tests/fixtures/export/single/"

static char tmpdir[64];

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* 0 when all len bytes reached the file. */
static int write_bytes(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(buf, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static JsonValue *load_json(const char *path) {
    size_t n = 0;
    unsigned char *text = read_file(path, &n);
    Error err;
    JsonValue *v = text ? json_parse((const char *)text, n, &err) : NULL;
    free(text);
    return v;
}

static int int_of(const JsonValue *obj, const char *key) {
    const JsonValue *v = json_get(obj, key);
    return v && v->is_uint ? (int)v->uint_value : -1;
}

static int has_shape(const Tensor *t, DType dt, int ndim, const int64_t *shape) {
    if (!t || t->dtype != dt || t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

static void test_kv_synthetic(void) {
    SafeTensors st;
    Error err;
    JsonValue *meta = load_json(KV_SYNTH ".metadata.json");
    if (!check(st_open(&st, KV_SYNTH, &err) == 0 && meta, "st kv-synthetic opens", "%s", err.msg)) return;
    int layers = int_of(meta, "num_layers"), heads = int_of(meta, "num_kv_heads");
    int64_t shape[4] = {1, heads, int_of(meta, "seq_len"), int_of(meta, "head_dim")};
    int ok = layers > 0 && st.n_tensors == 2 * layers;
    for (int l = 0; l < layers && ok; l++) {
        char name[64];
        snprintf(name, sizeof name, "layer_%d_key", l);
        ok = has_shape(st_find(&st, name), DT_F32, 4, shape);
        snprintf(name, sizeof name, "layer_%d_value", l);
        ok = ok && has_shape(st_find(&st, name), DT_F32, 4, shape);
    }
    check(ok, "st kv-synthetic names, shapes, dtypes match .metadata.json", "n_tensors %d", st.n_tensors);
    /* Every __metadata__ entry equals the sidecar's value (numbers there, strings here). */
    int same = meta->count == (size_t)st.n_meta;
    for (size_t i = 0; i < meta->count && same; i++) {
        const JsonValue *v = &meta->items[i];
        char want[64];
        if (v->is_uint) snprintf(want, sizeof want, "%llu", (unsigned long long)v->uint_value);
        else snprintf(want, sizeof want, "%s", v->type == JSON_STRING ? v->string : "?");
        const char *got = st_meta(&st, meta->keys[i]);
        same = got && strcmp(got, want) == 0;
    }
    check(same, "st kv-synthetic __metadata__ matches .metadata.json", "n_meta %d", st.n_meta);
    const Tensor *k0 = st_find(&st, "layer_0_key"), *v21 = st_find(&st, "layer_21_value");
    /* Bytes read once with Python: first float of layer_0_key, last of layer_21_value. */
    check(k0 && v21 && memcmp(k0->data, "\x29\xa5\xf6\x3f", 4) == 0 && v21->nbytes == 32768 &&
          memcmp((const char *)v21->data + 32764, "\xb0\x8e\x91\xbe", 4) == 0 &&
          (const char *)v21->data + v21->nbytes == (const char *)st.map + st.size,
          "st kv-synthetic data pointers into the mapping", "wrong bytes");
    check(st_find(&st, "layer_22_key") == NULL && st_meta(&st, "nope") == NULL, "st_find/st_meta miss", "hit");
    st_close(&st);
    json_free(meta);
}

static void test_export_single(void) {
    SafeTensors st;
    Error err;
    JsonValue *cfg = load_json(EXPORT_DIR "config.json");
    if (!check(st_open(&st, EXPORT_DIR "model.safetensors", &err) == 0 && cfg, "st export model opens", "%s",
               err.msg))
        return;
    int64_t hidden = int_of(cfg, "hidden_size"), vocab = int_of(cfg, "vocab_size");
    int64_t inter = int_of(cfg, "intermediate_size"), heads = int_of(cfg, "num_attention_heads");
    int64_t kv = int_of(cfg, "num_key_value_heads") * (hidden / heads);
    int64_t emb[2] = {vocab, hidden}, q[2] = {hidden, hidden}, k[2] = {kv, hidden}, g[2] = {inter, hidden};
    int64_t down[2] = {hidden, inter};
    check(st.n_tensors == 3 + 9 * int_of(cfg, "num_hidden_layers") &&
          has_shape(st_find(&st, "model.embed_tokens.weight"), DT_BF16, 2, emb) &&
          has_shape(st_find(&st, "model.norm.weight"), DT_BF16, 1, &hidden) &&
          has_shape(st_find(&st, "model.layers.0.self_attn.q_proj.weight"), DT_BF16, 2, q) &&
          has_shape(st_find(&st, "model.layers.0.self_attn.k_proj.weight"), DT_BF16, 2, k) &&
          has_shape(st_find(&st, "model.layers.0.mlp.gate_proj.weight"), DT_BF16, 2, g) &&
          has_shape(st_find(&st, "model.layers.1.mlp.down_proj.weight"), DT_BF16, 2, down),
          "st export model shapes and dtypes match config.json", "n_tensors %d", st.n_tensors);
    const Tensor *e = st_find(&st, "model.embed_tokens.weight"), *qp = st_find(&st, "model.layers.0.self_attn.q_proj.weight");
    check(e && qp && memcmp(e->data, "\x7b\xbb\x93\x3c", 4) == 0 && memcmp(qp->data, "\xfa\x3c\xdc\xbc", 4) == 0 &&
          e->numel == 512 * 64 && e->nbytes == 2 * e->numel, "st export model data bytes", "wrong bytes");
    check(st_meta(&st, "format") && strcmp(st_meta(&st, "format"), "pt") == 0, "st export model metadata",
          "format missing");
    st_close(&st);
    json_free(cfg);
}

static int files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = read_file(a, &na), *y = read_file(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Copies every tensor and metadata pair of st into st_write's input form. */
static int rewrite(const SafeTensors *st, const char *path, Error *err) {
    StTensorOut *out = calloc((size_t)st->n_tensors + 1, sizeof *out);
    for (int i = 0; i < st->n_tensors; i++) {
        const Tensor *t = &st->tensors[i];
        out[i].name = t->name;
        out[i].dtype = t->dtype;
        out[i].ndim = t->ndim;
        memcpy(out[i].shape, t->shape, sizeof t->shape);
        out[i].data = t->data;
    }
    int rc = st_write(path, out, st->n_tensors, (const char *const *)st->meta_keys,
                      (const char *const *)st->meta_values, st->n_meta, err);
    free(out);
    return rc;
}

static int same_contents(const SafeTensors *a, const SafeTensors *b) {
    if (a->n_tensors != b->n_tensors || a->n_meta != b->n_meta) return 0;
    for (int i = 0; i < a->n_meta; i++)
        if (strcmp(a->meta_keys[i], b->meta_keys[i]) || strcmp(a->meta_values[i], b->meta_values[i])) return 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const Tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) || !has_shape(y, x->dtype, x->ndim, x->shape) || x->nbytes != y->nbytes ||
            memcmp(x->data, y->data, x->nbytes))
            return 0;
    }
    return 1;
}

static void test_round_trip(const char *src) {
    char a[128], b[128], name[160];
    snprintf(a, sizeof a, "%s/a.safetensors", tmpdir);
    snprintf(b, sizeof b, "%s/b.safetensors", tmpdir);
    SafeTensors s0, s1;
    Error err;
    snprintf(name, sizeof name, "st round trip %s", src);
    if (!check(st_open(&s0, src, &err) == 0 && rewrite(&s0, a, &err) == 0 && st_open(&s1, a, &err) == 0, name,
               "%s", err.msg))
        return;
    snprintf(name, sizeof name, "st round trip keeps every tensor and metadata pair: %s", src);
    check(same_contents(&s0, &s1), name, "contents differ");
    size_t hdr = 0;
    for (int i = 0; i < 8; i++) hdr |= (size_t)((const unsigned char *)s1.map)[i] << (8 * i);
    snprintf(name, sizeof name, "st written header is compact, metadata first, padded to 8: %s", src);
    check(hdr % 8 == 0 && memcmp((const char *)s1.map + 8, "{\"__metadata__\":{", 17) == 0 &&
          s1.size == 8 + hdr + (size_t)((const char *)s1.tensors[s1.n_tensors - 1].data -
                                        ((const char *)s1.map + 8 + hdr)) + s1.tensors[s1.n_tensors - 1].nbytes,
          name, "header length %zu", hdr);
    snprintf(name, sizeof name, "st write-read-write is byte-identical: %s", src);
    check(rewrite(&s1, b, &err) == 0 && files_equal(a, b), name, "%s", err.msg);
    st_close(&s0);
    st_close(&s1);
    unlink(a);
    unlink(b);
}

static void test_write_escapes(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/esc.safetensors", tmpdir);
    const char *keys[] = {"quote\"back\\slash", "ctl\n\t\x01", "caf\xC3\xA9 \xF0\x9F\x98\x80"};
    const char *vals[] = {"v\"1\\", "", "line1\nline2"};
    float x[3] = {1, 2, 3};
    StTensorOut t[2] = {{.name = "w\"eird/\\name", .dtype = DT_F32, .ndim = 1, .shape = {3}, .data = x},
                        {.name = "empty", .dtype = DT_BF16, .ndim = 2, .shape = {0, 5}, .data = NULL}};
    SafeTensors st;
    Error err;
    int ok = st_write(path, t, 2, keys, vals, 3, &err) == 0 && st_open(&st, path, &err) == 0;
    if (!check(ok, "st write with characters that need escaping", "%s", err.msg)) return;
    int same = st.n_meta == 3 && st.n_tensors == 2;
    for (int i = 0; i < 3 && same; i++) same = strcmp(st_meta(&st, keys[i]), vals[i]) == 0;
    const Tensor *w = st_find(&st, t[0].name), *e = st_find(&st, "empty");
    check(same && w && memcmp(w->data, x, sizeof x) == 0 && e && e->numel == 0 && e->nbytes == 0,
          "st escaped names and metadata read back equal", "mismatch");
    st_close(&st);
    unlink(path);
}

/* ---------- hostile files ---------- */

static unsigned char *make_file(const char *header, const void *data, size_t data_len, size_t *len) {
    size_t n = strlen(header);
    unsigned char *buf = malloc(8 + n + data_len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    if (data_len) memcpy(buf + 8 + n, data, data_len);
    *len = 8 + n + data_len;
    return buf;
}

/* Both readers must reject buf[0..len) with one line naming the file; `want`
 * (if not NULL) must appear in the message. */
static void expect_bad(const char *what, const unsigned char *buf, size_t len, const char *want) {
    char name[200], path[128];
    SafeTensors st;
    Error err = {{0}};
    unsigned char *exact = malloc(len ? len : 1);   /* exact size: ASan sees any overread */
    if (len) memcpy(exact, buf, len);
    int rc = st_open_memory(&st, exact, len, "hostile.safetensors", &err);
    snprintf(name, sizeof name, "st rejects %s (memory)", what);
    check(rc == -1 && strstr(err.msg, "hostile.safetensors: ") == err.msg && !strchr(err.msg, '\n') &&
          (!want || strstr(err.msg, want)), name, "rc %d, message '%s'", rc, err.msg);
    free(exact);
    snprintf(path, sizeof path, "%s/hostile.safetensors", tmpdir);
    /* a file that was never written is rejected too, as missing: that proves nothing */
    int written = write_bytes(path, buf, len) == 0;
    err.msg[0] = '\0';
    rc = st_open(&st, path, &err);
    snprintf(name, sizeof name, "st rejects %s (file)", what);
    check(written && rc == -1 && strncmp(err.msg, path, strlen(path)) == 0 && (!want || strstr(err.msg, want)), name,
          "rc %d, message '%s'", rc, err.msg);
    unlink(path);
}

static void expect_bad_header(const char *what, const char *header, size_t data_len, const char *want) {
    static const unsigned char zeros[64];
    size_t len;
    unsigned char *buf = make_file(header, zeros, data_len, &len);
    expect_bad(what, buf, len, want);
    free(buf);
}

static void test_hostile_lengths(void) {
    unsigned char buf[600] = {0};
    for (size_t n = 0; n < 8; n++) {
        char what[64];
        snprintf(what, sizeof what, "a %zu-byte file", n);
        expect_bad(what, buf, n, "too short");
    }
    expect_bad("header length 0", buf, 16, "too small");
    buf[0] = 1;
    expect_bad("header length 1", buf, 16, "too small");
    uint64_t huge = 100u * 1024 * 1024 + 1;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(huge >> (8 * i));
    expect_bad("header length over 100 MB", buf, 600, "exceeds the limit");
    memset(buf, 0xFF, 8);
    expect_bad("header length 2^64-1", buf, 600, "exceeds the limit");
    memset(buf, 0, 8);
    buf[0] = 0xE8, buf[1] = 0x03;   /* 1000 */
    memcpy(buf + 8, "{}", 2);
    expect_bad("header length past EOF", buf, 500, "header length 1000 is past the end of the file (500 bytes)");
}

static void test_hostile_headers(void) {
    expect_bad_header("header not JSON", "{abc}", 0, "not valid JSON");
    expect_bad_header("header not an object", "[]", 0, "not a JSON object");
    expect_bad_header("header a number", "42", 0, "not a JSON object");
    expect_bad_header("header with trailing garbage", "{}x", 0, "not valid JSON");
    expect_bad_header("non-UTF-8 byte in header", "{\"x\xff\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1,
                      "UTF-8");
    expect_bad_header("overlong UTF-8 in header", "{\"\xC0\xAF\":{}}", 0, "UTF-8");
    expect_bad_header("deeply nested header", "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, "nesting");
    expect_bad_header("__metadata__ with a non-string value", "{\"__metadata__\":{\"a\":\"b\",\"n\":3}}", 0,
                      "metadata 'n' is not a string");
    expect_bad_header("__metadata__ not an object", "{\"__metadata__\":[\"a\"]}", 0, "not an object");
    expect_bad_header("duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate");
    expect_bad_header("duplicate metadata key", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, "duplicate");
    expect_bad_header("tensor entry not an object", "{\"x\":5}", 0, "not an object");
    expect_bad_header("empty tensor name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                      "empty tensor name");
    expect_bad_header("NUL in tensor name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                      1, "NUL");
    expect_bad_header("unknown dtype", "{\"x\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                      "hostile.safetensors: tensor 'x': unknown dtype 'Q4'");
    expect_bad_header("lower-case dtype", "{\"x\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "unknown dtype");
    expect_bad_header("dtype not a string", "{\"x\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
    expect_bad_header("missing dtype", "{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
    expect_bad_header("missing shape", "{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "shape");
    expect_bad_header("shape not an array", "{\"x\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4,
                      "shape");
    expect_bad_header("negative dimension", "{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                      "shape[0]");
    expect_bad_header("fractional dimension", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                      "shape[0]");
    expect_bad_header("exponent dimension", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1e0],\"data_offsets\":[0,4]}}", 4,
                      "shape[1]");
    expect_bad_header("string dimension", "{\"x\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                      "shape[0]");
    expect_bad_header("dimension above INT64_MAX",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,0]}}", 0, "shape[0]");
    expect_bad_header("nine dimensions",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
                      "9 dimensions");
    expect_bad_header("shape product overflowing size_t",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]}}", 0,
                      "overflows");
    expect_bad_header("byte count overflowing size_t",
                      "{\"x\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
                      "overflows");
    expect_bad_header("dtype size mismatch", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}",
                      12, "hostile.safetensors: tensor 'x': data_offsets [0, 12] do not match shape [2, 2] x F32 (16 bytes)");
    expect_bad_header("missing data_offsets", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "data_offsets");
    expect_bad_header("three data_offsets", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2,
                      "data_offsets");
    expect_bad_header("negative data_offsets", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1,
                      "data_offsets");
    expect_bad_header("reversed data_offsets", "{\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
                      "reversed");
    expect_bad_header("data_offsets past the data area",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 4, "past the data area");
    expect_bad_header("huge data_offsets",
                      "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[18446744073709551614,18446744073709551615]}}",
                      4, "past the data area");
    expect_bad_header("overlapping tensors",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[3,7]}}", 8, "overlap");
    expect_bad_header("identical ranges",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"I8\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4, "overlap");
    expect_bad_header("duplicate tensor names",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, "duplicate tensor name 'a'");
    expect_bad_header("newline in a name shown on one line",
                      "{\"a\\nb\":{\"dtype\":\"Q4\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "'a?b'");
}

/* A valid file cut at every length must fail without reading past the cut. */
static void test_truncations(void) {
    static const unsigned char data[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    size_t len;
    unsigned char *buf = make_file("{\"__metadata__\":{\"k\":\"v\"},"
                                   "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                                   "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]}}  ",
                                   data, sizeof data, &len);
    SafeTensors st;
    Error err;
    if (!check(st_open_memory(&st, buf, len, "full", &err) == 0 && st.n_tensors == 2 && st.n_meta == 1,
               "st valid in-memory file opens", "%s", err.msg)) {
        free(buf);
        return;
    }
    st_close(&st);
    int all_fail = 1;
    size_t first_success = 0;
    for (size_t cut = 0; cut < len && all_fail; cut++) {
        unsigned char *part = malloc(cut ? cut : 1);
        memcpy(part, buf, cut);
        err.msg[0] = '\0';
        if (st_open_memory(&st, part, cut, "cut", &err) == 0 || strncmp(err.msg, "cut: ", 5) != 0) {
            all_fail = 0;
            first_success = cut;
        }
        free(part);
    }
    check(all_fail, "st every truncation of a valid file is rejected", "cut at %zu: '%s'", first_success, err.msg);
    size_t hdr = len - 8 - sizeof data;
    size_t cuts[] = {0, 4, 7, 8, 8 + hdr / 2, 8 + hdr - 1, 8 + hdr, 8 + hdr + 10, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "a file cut at byte %zu of %zu", cuts[i], len);
        expect_bad(what, buf, cuts[i], NULL);
    }
    free(buf);
}

static void test_valid_edges(void) {
    static const unsigned char data[8] = {0, 0, 0x80, 0x3F, 7, 7, 7, 7};
    size_t len;
    SafeTensors st;
    Error err;
    unsigned char *buf = make_file("{}", NULL, 0, &len);
    check(st_open_memory(&st, buf, len, "m", &err) == 0 && st.n_tensors == 0 && st.n_meta == 0,
          "st smallest valid file {}", "%s", err.msg);
    st_close(&st);
    free(buf);
    /* Odd header length: the data area is misaligned, which the format allows. */
    buf = make_file(" {\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},\"z\":{\"dtype\":\"I32\","
                    "\"shape\":[3,0],\"data_offsets\":[2,2],\"extra\":1},\"u\":{\"dtype\":\"U8\",\"shape\":[4],"
                    "\"data_offsets\":[4,8]}} ", data, sizeof data, &len);
    int ok = st_open_memory(&st, buf, len, "m", &err) == 0;
    const Tensor *s = st_find(&st, "s"), *z = st_find(&st, "z");
    float f = 0;
    if (s) memcpy(&f, s->data, 4);
    check(ok && s && s->ndim == 0 && s->numel == 1 && f == 1.0f && z && z->numel == 0 && z->ndim == 2 &&
          strcmp(st.tensors[2].name, "u") == 0, "st scalar, empty and misaligned tensors", "%s", err.msg);
    st_close(&st);
    free(buf);
    check(dtype_size(DT_BF16) == 2 && dtype_size(DT_F64) == 8 && dtype_size(DT_F8_E4M3) == 1 &&
          strcmp(dtype_name(DT_F8_E5M2), "F8_E5M2") == 0 && dtype_size(DT_COUNT) == 0, "st dtype helpers", "bad");
    int names_ok = 1;
    for (int t = 0; t < DT_COUNT; t++) {
        DType back;
        names_ok &= dtype_from_name(dtype_name((DType)t), &back) == 0 && back == (DType)t;
    }
    DType d;
    check(names_ok && dtype_from_name("Q4", &d) == -1, "st dtype names round trip", "bad");
}

static void test_open_errors(void) {
    SafeTensors st;
    Error err;
    check(st_open(&st, "tests/fixtures/no-such.safetensors", &err) == -1 &&
          strstr(err.msg, "tests/fixtures/no-such.safetensors: "), "st missing file error names it", "%s", err.msg);
    check(st_open(&st, tmpdir, &err) == -1 && strstr(err.msg, tmpdir), "st directory rejected", "%s", err.msg);
}

static int dir_is_empty(const char *dir) {
    DIR *d = opendir(dir);
    int empty = 1;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    if (d) closedir(d);
    return empty;
}

static void expect_write_fails(const char *what, const char *path, const StTensorOut *t, int n) {
    Error err = {{0}};
    const char *k[] = {"k"}, *v[] = {"v"};
    char name[128];
    struct stat sb;
    snprintf(name, sizeof name, "st_write fails and leaves nothing: %s", what);
    check(st_write(path, t, n, k, v, 1, &err) == -1 && strstr(err.msg, path) && stat(path, &sb) != 0 &&
          dir_is_empty(tmpdir), name, "message '%s'", err.msg);
}

static void test_write_failures(void) {
    char path[128], missing[128];
    snprintf(path, sizeof path, "%s/out.safetensors", tmpdir);
    snprintf(missing, sizeof missing, "%s/no/such/dir/out.safetensors", tmpdir);
    float x[4] = {0};
    StTensorOut ok = {.name = "x", .dtype = DT_F32, .ndim = 1, .shape = {4}, .data = x};
    StTensorOut bad = ok;
    expect_write_fails("missing directory", missing, &ok, 1);
    bad.shape[0] = -4;
    expect_write_fails("negative dimension", path, &bad, 1);
    bad.ndim = 3, bad.shape[0] = bad.shape[1] = (int64_t)1 << 31, bad.shape[2] = (int64_t)1 << 31;
    expect_write_fails("byte count overflowing size_t", path, &bad, 1);
    bad = ok, bad.ndim = ST_MAX_DIMS + 1;
    expect_write_fails("too many dimensions", path, &bad, 1);
    bad = ok, bad.dtype = DT_COUNT;
    expect_write_fails("invalid dtype", path, &bad, 1);
    bad = ok, bad.data = NULL;
    expect_write_fails("missing data", path, &bad, 1);
    bad = ok, bad.name = "";
    expect_write_fails("empty name", path, &bad, 1);
    bad = ok, bad.name = "__metadata__";
    expect_write_fails("reserved name", path, &bad, 1);
    bad = ok, bad.name = "bad\xFF";
    expect_write_fails("non-UTF-8 name", path, &bad, 1);
    StTensorOut two[2] = {ok, ok};
    expect_write_fails("duplicate names", path, two, 2);

    /* A failed write over an existing file leaves the old file untouched. */
    Error err;
    char copy[160];
    snprintf(copy, sizeof copy, "%s.before", path);
    int wrote = st_write(path, &ok, 1, NULL, NULL, 0, &err) == 0 && st_write(copy, &ok, 1, NULL, NULL, 0, &err) == 0;
    bad = ok, bad.shape[0] = -1;
    check(wrote && st_write(path, &bad, 1, NULL, NULL, 0, &err) == -1 && files_equal(path, copy),
          "st_write failure keeps the previous file", "%s", err.msg);
    unlink(path);
    unlink(copy);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvq_test_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        check(0, "st temp directory", "mkdtemp failed");
        return test_exit_code();
    }
    test_kv_synthetic();
    test_export_single();
    test_round_trip(KV_SYNTH);
    test_round_trip(EXPORT_DIR "model.safetensors");
    test_write_escapes();
    test_hostile_lengths();
    test_hostile_headers();
    test_truncations();
    test_valid_edges();
    test_open_errors();
    test_write_failures();
    check(dir_is_empty(tmpdir) && rmdir(tmpdir) == 0, "st tests leave no files", "%s not empty", tmpdir);
    return test_exit_code();
}
