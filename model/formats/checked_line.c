/* model/formats/checked_line.c: JSON lines that carry their own CRC-32C (see checked_line.h). */
#include "model/formats/checked_line.h"
#include "model/formats/crc32c.h"
#include <stdlib.h>
#include <string.h>

#define MEMBER_OPEN ", \"crc32c\": \""
#define MEMBER_CLOSE "\"}"
/* the member and the closing brace: `, "crc32c": "` + 8 hex digits + `"}` */
#define SUFFIX_LEN (sizeof MEMBER_OPEN - 1 + CRC32C_HEX_CHARS + sizeof MEMBER_CLOSE - 1)

char *checked_line_seal(const char *object, size_t len, size_t *out_len) {
    if (len < 2 || object[len - 1] != '}') return NULL;
    size_t body = len - 1;   /* without the closing brace */
    char hex[CRC32C_HEX_CHARS + 1];
    crc32c_to_hex(crc32c(0, object, body), hex);
    size_t n = body + SUFFIX_LEN + 1;
    char *line = malloc(n + 1);
    if (!line) return NULL;
    memcpy(line, object, body);
    memcpy(line + body, MEMBER_OPEN, sizeof MEMBER_OPEN - 1);
    memcpy(line + body + sizeof MEMBER_OPEN - 1, hex, CRC32C_HEX_CHARS);
    memcpy(line + n - 1 - (sizeof MEMBER_CLOSE - 1), MEMBER_CLOSE, sizeof MEMBER_CLOSE - 1);
    line[n - 1] = '\n';
    line[n] = '\0';
    *out_len = n;
    return line;
}

CheckedLine checked_line_verify(const char *line, size_t len) {
    if (len < SUFFIX_LEN + 1) return CHECKED_LINE_NO_CRC;
    size_t body = len - SUFFIX_LEN;
    const char *member = line + body, *digits = member + sizeof MEMBER_OPEN - 1;
    if (memcmp(member, MEMBER_OPEN, sizeof MEMBER_OPEN - 1) ||
        memcmp(digits + CRC32C_HEX_CHARS, MEMBER_CLOSE, sizeof MEMBER_CLOSE - 1))
        return CHECKED_LINE_NO_CRC;
    char hex[CRC32C_HEX_CHARS + 1];
    memcpy(hex, digits, CRC32C_HEX_CHARS);
    hex[CRC32C_HEX_CHARS] = '\0';
    uint32_t stored;
    if (crc32c_from_hex(hex, &stored)) return CHECKED_LINE_NO_CRC;
    return crc32c(0, line, body) == stored ? CHECKED_LINE_OK : CHECKED_LINE_MISMATCH;
}
