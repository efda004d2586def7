/* model/formats/checked_line.h: a line of JSON that carries the CRC-32C of its own content, as
 * each record of a sweep's journal does (eval/sweep_journal.c):
 *
 *     {"window": 0, "config": 1, ..., "crc32c": "1a2b3c4d"}
 *
 * The CRC is over the line's bytes before `, "crc32c": "` (from the opening brace up to the
 * last member's end), and the member is always the last, spelled exactly so: a reader checks
 * it before parsing the line, and a record whose bytes were edited or damaged is refused
 * instead of being added into the results. */
#ifndef KVQ_CHECKED_LINE_H
#define KVQ_CHECKED_LINE_H

#include <stddef.h>

typedef enum {
    CHECKED_LINE_OK,
    CHECKED_LINE_NO_CRC,      /* the line does not end in a `"crc32c": "8 hex digits"}` member */
    CHECKED_LINE_MISMATCH     /* it does, but its content's CRC-32C is another */
} CheckedLine;

/* object[0..len): a JSON object's text, one line, ending in '}'. Returns a malloc'd copy with
 * the crc32c member added before the closing brace and a newline after it (*out_len bytes,
 * NUL-terminated), or NULL when out of memory or when object does not end in '}'. */
char *checked_line_seal(const char *object, size_t len, size_t *out_len);

/* line[0..len), without its newline. */
CheckedLine checked_line_verify(const char *line, size_t len);

#endif
