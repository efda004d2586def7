/* tests/fuzz/fuzz_safetensors.c: st_open_memory on arbitrary bytes. When a file
 * is accepted, every tensor must be findable by name, lie wholly inside the data
 * area, and have nbytes = numel * dtype size; its first and last bytes are read
 * (ASan flags any range past the buffer). Rejections must give one line that
 * starts with the file's name. */
#include <string.h>
#include "model/formats/safetensors.h"
#include "tests/fuzz/fuzz.h"

#define NAME "fuzz.safetensors"

static void check_tensor(const SafeTensors *st, const Tensor *t, const uint8_t *data, size_t size) {
    volatile uint8_t sink = 0;
    fuzz_assert(st_find(st, t->name) == t, "st_find does not return the tensor itself");
    fuzz_assert(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "ndim out of range");
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        fuzz_assert(t->shape[d] >= 0, "negative dimension");
        numel *= (size_t)t->shape[d];   /* cannot wrap: the reader refused overflowing shapes */
    }
    fuzz_assert(numel == t->numel, "numel is not the shape product");
    fuzz_assert(dtype_size(t->dtype) > 0 && t->nbytes == t->numel * dtype_size(t->dtype), "nbytes wrong");
    const uint8_t *p = t->data;
    fuzz_assert(p >= data + 8 && (size_t)(p - data) <= size && t->nbytes <= size - (size_t)(p - data),
                "tensor data outside the buffer");
    if (t->nbytes > 0) {
        sink ^= p[0];
        sink ^= p[t->nbytes - 1];
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st;
    Error err = {{0}};
    if (st_open_memory(&st, data, size, NAME, &err) != 0) {
        fuzz_assert(strncmp(err.msg, NAME ": ", strlen(NAME) + 2) == 0 && fuzz_one_line(err.msg),
                    "bad error message");
        return 0;
    }
    for (int i = 0; i < st.n_tensors; i++) check_tensor(&st, &st.tensors[i], data, size);
    for (int i = 0; i < st.n_meta; i++)
        fuzz_assert(st_meta(&st, st.meta_keys[i]) == st.meta_values[i], "st_meta misses a key");
    fuzz_assert(st_find(&st, "") == NULL, "empty name found");
    st_close(&st);
    return 0;
}
