/* model/formats/sha256.h: SHA-256 (FIPS 180-4), to name the exact bytes a result came from.
 * A calibration file records the sha256 of the model.safetensors and of the text it was made
 * from, so that a calibration is never used with another model. Incremental (init, update any
 * number of times with any lengths, final), plus whole-buffer and whole-file helpers that give
 * the 64-character lowercase hex form that the files and READMEs use. Plain portable C. */
#ifndef KVQ_SHA256_H
#define KVQ_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include "model/formats/error.h"

#define SHA256_DIGEST_BYTES 32
#define SHA256_HEX_CHARS 64      /* a hex digest is 64 characters plus the terminating NUL */

typedef struct {
    uint32_t state[8];           /* H0..H7 */
    uint64_t total_bytes;        /* message length so far */
    unsigned char block[64];     /* a partial block waiting for more bytes */
    size_t block_len;            /* bytes in block, 0..63 */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
/* Pads, writes the digest and leaves s finished (init again to reuse it). */
void sha256_final(Sha256 *s, unsigned char digest[SHA256_DIGEST_BYTES]);

/* The digest as 64 lowercase hex characters and a NUL. */
void sha256_to_hex(const unsigned char digest[SHA256_DIGEST_BYTES], char hex[SHA256_HEX_CHARS + 1]);

/* One-shot: the hex digest of len bytes. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_CHARS + 1]);

/* The hex digest of a whole file, read in chunks (a 2.2 GB model is never held in memory).
 * Errors name the file: "path: cannot open: No such file or directory", "path: read error: ...". */
int sha256_file_hex(const char *path, char hex[SHA256_HEX_CHARS + 1], Error *err);

/* 1 when s is a hex digest as kvq writes one: exactly 64 lowercase hex digits. */
int sha256_hex_valid(const char *s);

#endif
