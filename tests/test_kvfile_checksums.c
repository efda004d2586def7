/* tests/test_kvfile_checksums.c: the checksums of compressed KV files (kvq-compressed-3,
 * model/formats/compress.h) over files written by kv_compress: every bit of every byte flipped in
 * turn (and every byte inverted), each flip refused with one line naming the file or provably
 * harmless (the decoded cache equal to the intact file's, and the byte in the header's padding),
 * counted; edits of the header and of a tensor named; a format-3 file renamed to format 2 refused.
 * Hand-built files that lie in other ways: tests/test_kvfile_hostile.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/compress.h"
#include "model/formats/kvfile.h"
#include "tests/byte_flips.h"
#include "tests/kv_file_bytes.h"
#include "tests/test.h"
#include <unistd.h>

#define FILE_NAME "hostile-kv.safetensors"

/* ---- format 3 (kvq-compressed-3): checksums, written by kv_compress ---- */

/* A seeded cache of the given shape, recording a model (model_id, model_sha256). */
static void synthetic_cache(KvSnapshot *s, int layers, int heads, int seq, int dim, uint64_t seed) {
    size_t n = kv_cache_of_shape(s, layers, heads, seq, dim);
    memset(s->model_id, 'a', 64);
    memset(s->model_sha256, 'b', 64);
    for (size_t i = 0; i < n; i++) s->k[i] = 2 * rnd(&seed), s->v[i] = rnd(&seed);
}

static int same_cache(const KvSnapshot *a, const KvSnapshot *b) {
    size_t n = kv_snapshot_layer_size(a) * (size_t)a->n_layers;
    return a->n_layers == b->n_layers && a->n_kv_heads == b->n_kv_heads && a->seq_len == b->seq_len &&
           a->head_dim == b->head_dim && !strcmp(a->model_name, b->model_name) && !strcmp(a->dtype, b->dtype) &&
           !strcmp(a->model_id, b->model_id) && !strcmp(a->model_sha256, b->model_sha256) &&
           !memcmp(a->k, b->k, n * sizeof(float)) && !memcmp(a->v, b->v, n * sizeof(float));
}

/* A flipped copy read back: refused (-1), or whether it decodes to the intact cache. */
static int read_flipped(const unsigned char *buf, size_t len, const void *intact, Error *err) {
    KvSnapshot out;
    if (kv_file_decode(buf, len, FILE_NAME, &out, err) != 0) return -1;
    int same = same_cache(&out, intact);
    kv_snapshot_free(&out);
    return same;
}

/* The bytes of `what` in buf, or NULL. */
static unsigned char *find_bytes(unsigned char *buf, size_t len, const char *what) {
    size_t n = strlen(what);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(buf + i, what, n)) return buf + i;
    return NULL;
}

static void expect_bytes_refused(const char *name, const unsigned char *buf, size_t len, const char *want) {
    KvSnapshot out;
    Error err;
    int rc = kv_file_decode(buf, len, FILE_NAME, &out, &err);
    if (rc == 0) kv_snapshot_free(&out);
    check(rc == -1 && !strncmp(err.msg, FILE_NAME ": ", strlen(FILE_NAME) + 2) && !strchr(err.msg, '\n') &&
              strstr(err.msg, want), name, "rc %d, message '%s' (want '%s')", rc, err.msg, want);
}

static void test_format3(void) {
    KvSnapshot cache;
    synthetic_cache(&cache, 2, 2, 10, 32, 7);
    struct { const char *k, *v; int lz4; } files[] = {
        {"int4-g32", "int4-g32", 0},                 /* .packed only */
        {"int4-g32+res2", "int2-g32-asym", 1},       /* LZ4, and .full rows for the keys' residual window */
        {"int4-t8", "fp16", 0},                      /* a token-axis unit and its incomplete group's .full rows */
    };
    FlipCount total = {0, 0, 0, 0, -1, 0};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t len;
        unsigned char *buf = kv_file_bytes(&cache, files[f].k, files[f].v, files[f].lz4, 0, &len, NULL);
        KvSnapshot intact;
        Error err;
        char name[160];
        snprintf(name, sizeof name, "format 3: keys %s, values %s%s decodes, recording its model", files[f].k,
                 files[f].v, files[f].lz4 ? ", LZ4," : "");
        if (!check(buf && kv_file_decode(buf, len, FILE_NAME, &intact, &err) == 0 &&
                       !strcmp(intact.model_id, cache.model_id) && !strcmp(intact.model_sha256, cache.model_sha256) &&
                       find_bytes(buf, len, "\"format\":\"kvq-compressed-3\""),
                   name, "%s", buf ? err.msg : "not written")) {
            free(buf);
            continue;
        }
        FlipCount c = {0, 0, 0, 0, -1, 0};
        flip_every_byte(buf, len, FILE_NAME, read_flipped, &intact, &c);
        printf("     %s : %s%s, %zu bytes: %ld flips, %ld refused, %ld harmless (header padding), %ld harmful\n",
               files[f].k, files[f].v, files[f].lz4 ? " (LZ4)" : "", len, c.flips, c.refused, c.harmless, c.harmful);
        total.flips += c.flips, total.refused += c.refused, total.harmless += c.harmless, total.harmful += c.harmful;
        if (c.harmful && total.first_harmful < 0) total.first_harmful = c.first_harmful;
        total.bad_message |= c.bad_message;
        kv_snapshot_free(&intact);
        free(buf);
    }
    printf("     format 3 byte flips in all: %ld, refused %ld, harmless %ld, harmful %ld\n", total.flips, total.refused,
           total.harmless, total.harmful);
    check(total.flips > 0 && total.harmful == 0,
          "format 3: each bit of each byte of 3 files flipped, and each byte inverted: refused or harmless (padding)",
          "%ld of %ld flips harmful (first at byte %ld)", total.harmful, total.flips, total.first_harmful);
    check(!total.bad_message, "format 3: every refused flip is one line naming the file", "");

    /* edits, each named */
    size_t len;
    unsigned char *buf = kv_file_bytes(&cache, "int4-g32", "int4-g32", 0, 0, &len, NULL);
    if (!buf) return;
    unsigned char *p;
    KvSnapshot intact, out;
    Error err;
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | buf[i];
    p = buf + 8 + header - 1;   /* the header's last byte: padding when the header was padded */
    if (*p == ' ' && kv_file_decode(buf, len, FILE_NAME, &intact, &err) == 0) {
        *p = '\t';   /* an edit, not a flip: the one content-free byte class, whitespace in the padding */
        int rc = kv_file_decode(buf, len, FILE_NAME, &out, &err);
        check(rc == 0 && same_cache(&out, &intact), "format 3: a padding space made a tab (whitespace) decodes the same",
              "%s", rc ? err.msg : "another cache");
        if (rc == 0) kv_snapshot_free(&out);
        kv_snapshot_free(&intact);
        *p = ' ';
    } else {
        check(0, "format 3: a padding space made a tab (whitespace) decodes the same", "the int4-g32 file has no padding");
    }
    buf[len - 1] ^= 0x10;   /* the last tensor's last byte */
    expect_bytes_refused("format 3: a data byte changed is refused naming its tensor", buf, len,
                         "tensor 'layer_1_value.packed' fails its CRC-32C");
    buf[len - 1] ^= 0x10;
    p = find_bytes(buf, len, "synthetic");
    p[0] = 'S';
    expect_bytes_refused("format 3: model_name edited is refused as a header that fails its CRC-32C", buf, len,
                         "the header fails its CRC-32C");
    p[0] = 's';
    p = find_bytes(buf, len, "kvq-compressed-3");
    p[15] = '2';
    expect_bytes_refused("format 3 renamed to format 2 (one bit) is refused, not read unchecked", buf, len,
                         "format kvq-compressed-2 with the checksums of kvq-compressed-3");
    p[15] = '3';
    p = find_bytes(buf, len, "\"header_crc32c\"");
    p[13] = 'x';
    expect_bytes_refused("format 3: header_crc32c missing", buf, len, "metadata 'header_crc32c' missing");
    p[13] = 'c';
    p += strlen("\"header_crc32c\":\"");
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(p[i] >= 'a' ? p[i] - 32 : p[i]);
    expect_bytes_refused("format 3: header_crc32c in upper case is refused", buf, len,
                         "'header_crc32c' = '");
    free(buf);
    kv_snapshot_free(&cache);
}

int main(void) {
    test_format3();
    return test_exit_code();
}
