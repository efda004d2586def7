/* model/formats/safetensors.h: read and write the safetensors format.
 * File = 8-byte little-endian header length N, N bytes of JSON header, data area.
 * The header maps tensor names to {dtype, shape, data_offsets [begin, end)} relative
 * to the data area, plus an optional "__metadata__" object of string -> string.
 * Reading mmaps the file and validates every header field before trusting it;
 * writing goes to a temporary file renamed into place only when complete. */
#ifndef KVQ_SAFETENSORS_H
#define KVQ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "model/formats/error.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u * 1024u * 1024u)

typedef enum {
    DT_BOOL, DT_U8, DT_I8, DT_F8_E5M2, DT_F8_E4M3, DT_I16, DT_U16, DT_F16, DT_BF16,
    DT_I32, DT_U32, DT_F32, DT_F64, DT_I64, DT_U64, DT_COUNT
} DType;

size_t dtype_size(DType t);            /* bytes per element */
const char *dtype_name(DType t);       /* "F32", "BF16", ... */
int dtype_from_name(const char *s, DType *out); /* 0 ok, -1 unknown */

typedef struct {
    char *name;
    DType dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    uint64_t offset;       /* data_offsets' begin: where in the data area the tensor lies */
    const void *data;      /* points into the mapping (or the memory buffer); NOT aligned in
                              general (the format does not align the data area): load with memcpy */
} Tensor;

typedef struct {
    char *path;            /* for error messages */
    void *map;             /* mmap base, or NULL when opened from memory */
    size_t size;           /* file size */
    Tensor *tensors;       /* in header order */
    int n_tensors;
    char **meta_keys;      /* __metadata__ entries, in header order */
    char **meta_values;
    int n_meta;
} SafeTensors;

/* Opens and validates. Errors name the path: "path: header length 123456789 past end of file". */
int st_open(SafeTensors *st, const char *path, Error *err);
/* Same validation on a caller-owned buffer (kept alive until st_close); used by fuzzing. */
int st_open_memory(SafeTensors *st, const void *buf, size_t len, const char *name, Error *err);
void st_close(SafeTensors *st);

const Tensor *st_find(const SafeTensors *st, const char *name);
const char *st_meta(const SafeTensors *st, const char *key);   /* NULL when absent */

/* One tensor to write. data holds nbytes = numel * dtype_size bytes. */
typedef struct {
    const char *name;
    DType dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
} StTensorOut;

/* Writes tensors (in the given order, packed back to back) and metadata pairs
 * (in the given order) to path via path.tmp.<pid> + rename. Deterministic bytes:
 * the header is compact JSON padded with spaces to a multiple of 8. */
int st_write(const char *path, const StTensorOut *tensors, int n_tensors,
             const char *const *meta_keys, const char *const *meta_values, int n_meta,
             Error *err);

#endif
