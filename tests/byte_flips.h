/* tests/byte_flips.h: the checksum tests' sweep over a safetensors file's bytes: every bit of
 * every byte flipped in turn, then every byte inverted, each copy read back by the caller's
 * reader and counted as refused (and whether the message is one line naming the file), harmless
 * (read as the intact file, the byte in the header's padding: the spaces after its closing brace,
 * which JSON reads as nothing) or harmful. Shared by tests/test_kvfile_checksums.c,
 * tests/test_entropy_file.c and tests/test_calibration_flips.c. */
#ifndef KVQ_BYTE_FLIPS_H
#define KVQ_BYTE_FLIPS_H
#include <stdint.h>
#include <string.h>
#include "model/formats/error.h"

typedef struct {
    long flips, refused, harmless, harmful;
    long first_harmful;      /* byte offset of the first harmful flip, -1 none */
    int bad_message;         /* a refusal that is not one line naming the file */
} FlipCount;

/* Reads a flipped copy of the file: -1 when it is refused (err says why), else 1 when it reads
 * as the intact file, 0 when it reads as another. */
typedef int (*FlipRead)(const unsigned char *buf, size_t len, const void *intact, Error *err);

/* buf (len bytes, named file_name in the reader's messages) is left as it came. */
static inline void flip_every_byte(unsigned char *buf, size_t len, const char *file_name, FlipRead read,
                                   const void *intact, FlipCount *c) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | buf[i];
    size_t padding_from = 8 + (size_t)header, name_len = strlen(file_name);
    while (padding_from > 8 && buf[padding_from - 1] == ' ') padding_from--;
    for (size_t i = 0; i < len; i++)
        for (int m = 0; m < 9; m++) {
            unsigned char mask = m < 8 ? (unsigned char)(1u << m) : 0xff;
            buf[i] ^= mask;
            Error err;
            c->flips++;
            int same = read(buf, len, intact, &err);
            if (same < 0) {
                c->refused++;
                if (strncmp(err.msg, file_name, name_len) || strncmp(err.msg + name_len, ": ", 2) || strchr(err.msg, '\n'))
                    c->bad_message = 1;
            } else {
                int harmless = same && i >= padding_from && i < 8 + (size_t)header;
                c->harmless += harmless;
                c->harmful += !harmless;
                if (!harmless && c->first_harmful < 0) c->first_harmful = (long)i;
            }
            buf[i] ^= mask;
        }
}

#endif
