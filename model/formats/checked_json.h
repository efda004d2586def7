/* model/formats/checked_json.h: a JSON file (an object written one member a line) whose last member
 * is the CRC-32C of the text before it, as sweep.json's is (eval/sweep.c):
 *
 *     {
 *       ...,
 *       "last": 1,
 *       "crc32c": "1a2b3c4d"
 *     }
 *
 * The CRC covers every byte before `  "crc32c"`, so a damaged or edited file is refused instead of
 * read (./run allocate's sensitivity.json). */
#ifndef KVQ_CHECKED_JSON_H
#define KVQ_CHECKED_JSON_H

#include <stddef.h>
#include "model/formats/checked_line.h"

/* text[0..len): an object ending in "\n}\n". Returns a malloc'd copy with the crc32c member added
 * as its last (*out_len bytes, NUL-terminated), or NULL when out of memory or when text does not
 * end so. */
char *checked_json_seal(const char *text, size_t len, size_t *out_len);

/* Whether text[0..len) ends in its crc32c member and whether that matches (CHECKED_LINE_OK,
 * CHECKED_LINE_NO_CRC, CHECKED_LINE_MISMATCH). */
CheckedLine checked_json_verify(const char *text, size_t len);

#endif
