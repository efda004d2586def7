/* model/formats/checked_json.c: JSON files ending in the CRC-32C of their text (see checked_json.h). */
#include "model/formats/checked_json.h"
#include "model/formats/crc32c.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRC_OPEN "  \"crc32c\": \""
#define CRC_CLOSE "\"\n}\n"
#define CRC_LEN (sizeof CRC_OPEN - 1 + CRC32C_HEX_CHARS + sizeof CRC_CLOSE - 1)
#define OBJECT_END "\n}\n"

char *checked_json_seal(const char *text, size_t len, size_t *out_len) {
    size_t end = sizeof OBJECT_END - 1;
    if (len < end + 1 || memcmp(text + len - end, OBJECT_END, end)) return NULL;
    size_t body = len - end;   /* up to the last member's end, then ",\n" and the member */
    char *out = malloc(body + 2 + CRC_LEN + 1);
    if (!out) return NULL;
    memcpy(out, text, body);
    memcpy(out + body, ",\n", 2);
    char hex[CRC32C_HEX_CHARS + 1];
    crc32c_to_hex(crc32c(0, out, body + 2), hex);
    snprintf(out + body + 2, CRC_LEN + 1, CRC_OPEN "%s" CRC_CLOSE, hex);
    *out_len = body + 2 + CRC_LEN;
    return out;
}

CheckedLine checked_json_verify(const char *text, size_t len) {
    if (len < CRC_LEN) return CHECKED_LINE_NO_CRC;
    size_t body = len - CRC_LEN;
    const char *digits = text + body + sizeof CRC_OPEN - 1;
    char hex[CRC32C_HEX_CHARS + 1];
    uint32_t stored;
    memcpy(hex, digits, CRC32C_HEX_CHARS);
    hex[CRC32C_HEX_CHARS] = '\0';
    if (memcmp(text + body, CRC_OPEN, sizeof CRC_OPEN - 1) ||
        memcmp(digits + CRC32C_HEX_CHARS, CRC_CLOSE, sizeof CRC_CLOSE - 1) || crc32c_from_hex(hex, &stored))
        return CHECKED_LINE_NO_CRC;
    return crc32c(0, text, body) == stored ? CHECKED_LINE_OK : CHECKED_LINE_MISMATCH;
}
