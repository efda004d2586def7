/* model/formats/st_checksum.h: safetensors files that carry their own checksums, so that a damaged
 * or edited file is refused instead of read (a calibration file; the scheme is the one compressed
 * KV files use, model/formats/compress.h, and tests/compressed_seal.py restates it):
 *   __metadata__ "crc32c.NAME"    the CRC-32C of tensor NAME's bytes, for every tensor;
 *   __metadata__ "header_crc32c"  the CRC-32C of the header's content: every metadata pair but
 *                                 this one, then every tensor's name, dtype, shape and byte range,
 *                                 in header order (whitespace and padding carry nothing).
 * Each value is 8 lowercase hex digits. With one over the header, a flipped bit anywhere in the
 * file is noticed: in a tensor's bytes, a shape, an offset, a name, a metadata value. */
#ifndef KVQ_ST_CHECKSUM_H
#define KVQ_ST_CHECKSUM_H

#include "model/formats/safetensors.h"

#define ST_TENSOR_CRC_PREFIX "crc32c."
#define ST_HEADER_CRC_KEY "header_crc32c"

/* One tensor as the header describes it, for the header's CRC. */
typedef struct {
    const char *name;
    DType dtype;
    int ndim;
    const int64_t *shape;
    uint64_t offset;
    size_t nbytes;
} StHeaderTensor;

/* The CRC-32C of a header's content (ST_HEADER_CRC_KEY above): the metadata pairs but that one,
 * then the tensors, in this order. Compressed KV files (model/formats/compress.c) use it too. */
uint32_t st_header_crc(const char *const *keys, const char *const *values, int n_meta, const StHeaderTensor *t,
                       int n_tensors);

/* st_write with the checksums added after meta_keys (a tensor's, then the header's last). */
int st_write_checksummed(const char *path, const StTensorOut *tensors, int n_tensors, const char *const *meta_keys,
                         const char *const *meta_values, int n_meta, Error *err);

/* The header against header_crc32c, one tensor against its crc32c.NAME: 0, or -1 with a message
 * naming the file and what failed (missing, malformed, not matching). */
int st_check_header(const SafeTensors *st, Error *err);
int st_check_tensor(const SafeTensors *st, const Tensor *t, Error *err);

/* 1 when st carries any checksum key (a file written with them), else 0. */
int st_has_checksums(const SafeTensors *st);

/* Every tensor against its crc32c.NAME and the header against header_crc32c: 0, or -1 with a
 * message naming the file and what failed (a checksum missing, malformed, or not matching; a
 * crc32c.NAME for a tensor the file does not have). */
int st_verify_checksums(const SafeTensors *st, Error *err);

#endif
