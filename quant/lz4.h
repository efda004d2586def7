/* quant/lz4.h: the LZ4 *block* format (lz4_Block_format.md), compressor and
 * decompressor, written from the format description.
 * A block is a series of sequences: token (4 bits literal length, 4 bits match
 * length - 4), extra length bytes (255 = continue), literals, 2-byte
 * little-endian offset, extra match length bytes. The last sequence holds only
 * literals. The compressor keeps the format's end rules (last 5 bytes are
 * literals, no match starts in the last 12 bytes) so any LZ4 decoder reads its
 * output. The decompressor trusts nothing: every length, offset and copy is
 * bounds-checked, and malformed input yields an error code, never a crash. */
#ifndef KVQ_LZ4_H
#define KVQ_LZ4_H

#include <stddef.h>
#include <stdint.h>

/* Largest input the compressor takes (as the reference implementation). */
#define LZ4_MAX_INPUT_SIZE 0x7E000000u

enum {
    LZ4_OK = 0,
    LZ4_ERR_TRUNCATED = -1,   /* input ends inside a sequence */
    LZ4_ERR_OFFSET = -2,      /* offset 0 or reaching before the start of output */
    LZ4_ERR_OUTPUT = -3,      /* decompressed data would exceed dst_cap */
    LZ4_ERR_LENGTH = -4,      /* a length field overflows size_t */
};

/* Worst-case compressed size of n bytes (incompressible data grows slightly). */
size_t lz4_compress_bound(size_t n);

/* Compresses src[0..n) into dst; returns the compressed size, or 0 when it
 * does not fit dst_cap (never when dst_cap >= lz4_compress_bound(n)) or n is
 * above LZ4_MAX_INPUT_SIZE. An empty input compresses to 1 byte. */
size_t lz4_compress(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap);

/* Decompresses one block. On success returns LZ4_OK and sets *out_len; on
 * malformed input returns a negative LZ4_ERR_* (dst contents then undefined). */
int lz4_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap, size_t *out_len);

/* "truncated input", "bad offset", ... for an LZ4_ERR_* code. */
const char *lz4_error_name(int code);

#endif
