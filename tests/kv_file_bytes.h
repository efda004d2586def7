/* tests/kv_file_bytes.h: a compressed KV file as the tests of its bytes hold it: a synthetic
 * cache written by kv_compress (through a temp file) and read back into memory, then decoded from
 * memory under a file name of the test's, which every refusal must name. Shared by tests/test_kvfile_checksums.c
 * and tests/test_entropy_file.c. */
#ifndef KVQ_KV_FILE_BYTES_H
#define KVQ_KV_FILE_BYTES_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/formats/compress.h"
#include "model/formats/kvfile.h"

/* s made a synthetic cache of that shape (model_name "synthetic", float32), its values
 * allocated for the caller to fill; how many values each side holds. */
static inline size_t kv_cache_of_shape(KvSnapshot *s, int layers, int heads, int seq, int dim) {
    memset(s, 0, sizeof *s);
    s->n_layers = layers, s->n_kv_heads = heads, s->seq_len = seq, s->head_dim = dim;
    snprintf(s->model_name, sizeof s->model_name, "synthetic");
    snprintf(s->dtype, sizeof s->dtype, "float32");
    Error err;
    kv_snapshot_alloc(s, &err);
    return kv_snapshot_layer_size(s) * (size_t)layers;
}

/* The file kv_compress writes for s under the schemes (LZ4 or entropy-coded as asked), in a
 * malloc'd buffer; its report into r unless NULL (freed: its numbers only). NULL, said on a
 * line, when it cannot be written. */
static inline unsigned char *kv_file_bytes(const KvSnapshot *s, const char *k_text, const char *v_text, int lz4,
                                           int entropy, size_t *len, CompressReport *r) {
    char why[160], path[64];
    KvLayered k, v;
    *len = 0;
    if (kv_layered_parse(k_text, KV_SIDE_KEYS, &k, why, sizeof why) ||
        kv_layered_parse(v_text, KV_SIDE_VALUES, &v, why, sizeof why)) {
        printf("  (%s)\n", why);
        return NULL;
    }
    CompressOptions o = {&k, &v, 0.0, lz4, 1, 0, 0, NULL, entropy, NULL};
    CompressReport own;
    Error err;
    if (!r) r = &own;
    snprintf(path, sizeof path, "/tmp/kvq-file-bytes-%ld.st", (long)getpid());
    if (kv_compress(s, &o, path, r, NULL, &err)) {
        printf("  (kv_compress: %s)\n", err.msg);
        return NULL;
    }
    compress_report_free(r);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len);
    *len = fread(buf, 1, *len, f);
    fclose(f);
    unlink(path);
    return buf;
}

/* buf decoded as the compressed file `name` (no calibration). */
static inline int kv_file_decode(const unsigned char *buf, size_t len, const char *name, KvSnapshot *out, Error *err) {
    SafeTensors st;
    err->msg[0] = '\0';
    if (st_open_memory(&st, buf, len, name, err)) return -1;
    int rc = kv_decompress_safetensors(&st, NULL, out, err);
    st_close(&st);
    return rc;
}

#endif
