/* model/formats/st_checksum.c: writing and checking the checksums of a safetensors file (see
 * st_checksum.h). */
#include "model/formats/st_checksum.h"
#include "model/formats/crc32c.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_LEN (sizeof ST_TENSOR_CRC_PREFIX - 1)


static uint32_t crc_text(uint32_t crc, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return crc32c(crc, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static uint32_t crc_string(uint32_t crc, const char *s) {
    size_t n = strlen(s);
    return crc32c(crc_text(crc, "%zu:", n), s, n);   /* length first: no two lists read alike */
}

uint32_t st_header_crc(const char *const *keys, const char *const *values, int n_meta, const StHeaderTensor *t,
                       int n_tensors) {
    uint32_t crc = 0;
    for (int i = 0; i < n_meta; i++) {
        if (!strcmp(keys[i], ST_HEADER_CRC_KEY)) continue;
        crc = crc_string(crc_text(crc, "m "), keys[i]);
        crc = crc_string(crc_text(crc, " "), values[i]);
        crc = crc_text(crc, "\n");
    }
    for (int i = 0; i < n_tensors; i++) {
        crc = crc_string(crc_text(crc, "t "), t[i].name);
        crc = crc_text(crc, " %s %d", dtype_name(t[i].dtype), t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++) crc = crc_text(crc, " %lld", (long long)t[i].shape[d]);
        crc = crc_text(crc, " @%llu+%zu\n", (unsigned long long)t[i].offset, t[i].nbytes);
    }
    return crc;
}

int st_write_checksummed(const char *path, const StTensorOut *tensors, int n_tensors, const char *const *meta_keys,
                         const char *const *meta_values, int n_meta, Error *err) {
    int total = n_meta + n_tensors + 1, rc = -1;
    StHeaderTensor *ht = calloc((size_t)n_tensors + 1, sizeof *ht);
    const char **keys = calloc((size_t)total, sizeof *keys), **vals = calloc((size_t)total, sizeof *vals);
    char (*crc_keys)[160] = calloc((size_t)n_tensors + 1, sizeof *crc_keys);
    char (*crc_hex)[CRC32C_HEX_CHARS + 1] = calloc((size_t)n_tensors + 1, sizeof *crc_hex);
    char header_hex[CRC32C_HEX_CHARS + 1];
    if (!ht || !keys || !vals || !crc_keys || !crc_hex) {
        error_set(err, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < n_meta; i++) keys[i] = meta_keys[i], vals[i] = meta_values[i];
    uint64_t offset = 0;   /* st_write lays the tensors out back to back, in this order */
    for (int i = 0; i < n_tensors; i++) {
        const StTensorOut *t = &tensors[i];
        size_t nbytes = dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) nbytes *= (size_t)t->shape[d];
        if (strlen(t->name) + PREFIX_LEN >= sizeof crc_keys[i]) {
            error_set(err, "%s: tensor name '%.40s...' too long for its checksum key", path, t->name);
            goto done;
        }
        ht[i] = (StHeaderTensor){t->name, t->dtype, t->ndim, t->shape, offset, nbytes};
        offset += nbytes;
        snprintf(crc_keys[i], sizeof crc_keys[i], ST_TENSOR_CRC_PREFIX "%s", t->name);
        crc32c_to_hex(crc32c(0, t->data, nbytes), crc_hex[i]);
        keys[n_meta + i] = crc_keys[i], vals[n_meta + i] = crc_hex[i];
    }
    crc32c_to_hex(st_header_crc(keys, vals, total - 1, ht, n_tensors), header_hex);
    keys[total - 1] = ST_HEADER_CRC_KEY, vals[total - 1] = header_hex;
    rc = st_write(path, tensors, n_tensors, keys, vals, total, err);
done:
    free(ht);
    free(keys);
    free(vals);
    free(crc_keys);
    free(crc_hex);
    return rc;
}

int st_has_checksums(const SafeTensors *st) {
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], ST_HEADER_CRC_KEY) || !strncmp(st->meta_keys[i], ST_TENSOR_CRC_PREFIX, PREFIX_LEN))
            return 1;
    return 0;
}

/* A stored checksum: 0 with *crc, else -1 with the message. */
static int stored_crc(const SafeTensors *st, const char *key, const char *what, uint32_t *crc, Error *err) {
    const char *s = st_meta(st, key);
    char shown[72];
    if (!s) return error_set(err, "%s: %s has no checksum (metadata '%s' missing)", st->path, what, key);
    if (crc32c_from_hex(s, crc))
        return error_set(err, "%s: metadata '%s' = '%s' is invalid (8 lowercase hex digits)", st->path, key,
                         error_shown(s, shown));
    return 0;
}

int st_check_header(const SafeTensors *st, Error *err) {
    uint32_t want;
    if (stored_crc(st, ST_HEADER_CRC_KEY, "the header", &want, err)) return -1;
    StHeaderTensor *t = calloc((size_t)st->n_tensors + 1, sizeof *t);
    if (!t) return error_set(err, "%s: out of memory", st->path);
    for (int i = 0; i < st->n_tensors; i++) {
        const Tensor *x = &st->tensors[i];
        t[i] = (StHeaderTensor){x->name, x->dtype, x->ndim, x->shape, x->offset, x->nbytes};
    }
    uint32_t got = st_header_crc((const char *const *)st->meta_keys, (const char *const *)st->meta_values, st->n_meta, t,
                              st->n_tensors);
    free(t);
    if (got != want)
        return error_set(err, "%s: the header fails its CRC-32C (stored %08x, computed %08x): the file is damaged or "
                         "was edited", st->path, (unsigned)want, (unsigned)got);
    return 0;
}

int st_check_tensor(const SafeTensors *st, const Tensor *t, Error *err) {
    char key[300], what[300];
    snprintf(key, sizeof key, ST_TENSOR_CRC_PREFIX "%s", t->name);
    snprintf(what, sizeof what, "tensor '%s'", t->name);
    uint32_t want;
    if (stored_crc(st, key, what, &want, err)) return -1;
    uint32_t got = crc32c(0, t->data, t->nbytes);
    if (got != want)
        return error_set(err, "%s: tensor '%s' fails its CRC-32C (stored %08x, computed %08x): the file is damaged or "
                         "was edited", st->path, t->name, (unsigned)want, (unsigned)got);
    return 0;
}

int st_verify_checksums(const SafeTensors *st, Error *err) {
    if (st_check_header(st, err)) return -1;   /* first: then every name, shape and offset below is the writer's */
    for (int i = 0; i < st->n_tensors; i++)
        if (st_check_tensor(st, &st->tensors[i], err)) return -1;
    for (int i = 0; i < st->n_meta; i++) {
        const char *k = st->meta_keys[i];
        if (!strncmp(k, ST_TENSOR_CRC_PREFIX, PREFIX_LEN) && !st_find(st, k + PREFIX_LEN))
            return error_set(err, "%s: metadata '%s' is the checksum of a tensor the file does not have", st->path, k);
    }
    return 0;
}
