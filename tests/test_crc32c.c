/* tests/test_crc32c.c: model/formats/crc32c.c against published values, and the checked lines of
 * model/formats/checked_line.c (a sweep journal's records). The check value of "123456789" and
 * the four 32-byte vectors of RFC 3720 (iSCSI) appendix B.4; the table rebuilt bit by bit from
 * the polynomial; every two-way split of a message equals one call; the hex form both ways, its
 * one spelling (upper case, 7 or 9 digits refused). A sealed line verifies; each of its bytes
 * with each of 8 bits flipped is refused (CRC mismatch or no CRC), as is a line with its crc32c
 * member removed, moved or spelled otherwise. */
#include <stdlib.h>
#include <string.h>
#include "model/formats/checked_line.h"
#include "model/formats/crc32c.h"
#include "tests/test.h"

static void test_vectors(void) {
    check(crc32c(0, "123456789", 9) == 0xe3069283u, "crc32c check value of 123456789 is e3069283", "got %08x",
          (unsigned)crc32c(0, "123456789", 9));
    unsigned char zeros[32] = {0}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; i++) ones[i] = 0xff, up[i] = (unsigned char)i, down[i] = (unsigned char)(31 - i);
    struct { const unsigned char *data; uint32_t want; const char *name; } v[] = {
        {zeros, 0x8a9136aau, "crc32c RFC 3720 B.4: 32 bytes of zeros"},
        {ones, 0x62a8ab43u, "crc32c RFC 3720 B.4: 32 bytes of 0xff"},
        {up, 0x46dd794eu, "crc32c RFC 3720 B.4: 32 incrementing bytes"},
        {down, 0x113fdb5cu, "crc32c RFC 3720 B.4: 32 decrementing bytes"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint32_t got = crc32c(0, v[i].data, 32);
        check(got == v[i].want, v[i].name, "got %08x, want %08x", (unsigned)got, (unsigned)v[i].want);
    }
    check(crc32c(0, "", 0) == 0, "crc32c of nothing is 0", "got %08x", (unsigned)crc32c(0, "", 0));
}

static void test_table_and_splits(void) {
    int bad = -1;
    for (unsigned b = 0; b < 256 && bad < 0; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        if (c != crc32c_table_entry(b)) bad = (int)b;
    }
    check(bad < 0, "crc32c table = the reflected polynomial 0x82f63b78 shifted through each byte", "entry %d differs", bad);
    const char *msg = "The quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps over the lazy dog.";
    size_t n = strlen(msg);
    uint32_t whole = crc32c(0, msg, n);
    int split_bad = -1;
    for (size_t k = 0; k <= n && split_bad < 0; k++)
        if (crc32c(crc32c(0, msg, k), msg + k, n - k) != whole) split_bad = (int)k;
    check(split_bad < 0, "crc32c continued over every two-way split of a message = one call", "split at %d", split_bad);
}

static void test_hex(void) {
    char hex[CRC32C_HEX_CHARS + 1];
    crc32c_to_hex(0x0a1b2c3du, hex);
    check(!strcmp(hex, "0a1b2c3d"), "crc32c hex: 8 lowercase digits with leading zeros", "got %s", hex);
    uint32_t v = 0;
    check(crc32c_from_hex("0a1b2c3d", &v) == 0 && v == 0x0a1b2c3du, "crc32c hex reads back", "got %08x", (unsigned)v);
    const char *bad[] = {"0A1B2C3D", "0a1b2c3", "0a1b2c3d0", "0a1b2c3g", "", " a1b2c3d"};
    int accepted = -1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (crc32c_from_hex(bad[i], &v) == 0) accepted = (int)i;
    check(accepted < 0, "crc32c hex: upper case, 7 or 9 digits, a non-digit, empty, a space refused", "'%s' accepted",
          accepted >= 0 ? bad[accepted] : "");
}

static void test_checked_lines(void) {
    const char *obj = "{\"window\": 3, \"config\": 1, \"k\": \"int4-g64\", \"nll_sum\": 200.71723375789927}";
    size_t len;
    char *line = checked_line_seal(obj, strlen(obj), &len);
    if (!check(line != NULL && len == strlen(line) && line[len - 1] == '\n', "checked line: sealed with a newline", "")) {
        free(line);
        return;
    }
    check(!strncmp(line, obj, strlen(obj) - 1) && strstr(line, ", \"crc32c\": \"") == line + strlen(obj) - 1,
          "checked line: the object's members, then crc32c last", "%s", line);
    check(checked_line_verify(line, len - 1) == CHECKED_LINE_OK, "checked line: a sealed line verifies", "%s", line);
    /* every single-bit flip of every byte (the newline is not part of the line) */
    int missed = 0, flips = 0;
    for (size_t i = 0; i + 1 < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            line[i] ^= (char)(1 << bit);
            missed += checked_line_verify(line, len - 1) == CHECKED_LINE_OK;
            flips++;
            line[i] ^= (char)(1 << bit);
        }
    check(missed == 0, "checked line: each of its bytes with each bit flipped is refused", "%d of %d flips pass", missed,
          flips);
    char edited[512];
    snprintf(edited, sizeof edited, "%.*s", (int)len - 1, line);
    char *digits = strstr(edited, "\"crc32c\": \"") + 11;
    for (char *c = digits; c < digits + 8; c++) *c = (char)(*c >= 'a' ? *c - 32 : *c);   /* upper case */
    check(checked_line_verify(edited, strlen(edited)) == CHECKED_LINE_NO_CRC, "checked line: upper-case digits are no CRC",
          "%s", edited);
    check(checked_line_verify(obj, strlen(obj)) == CHECKED_LINE_NO_CRC, "checked line: a line without crc32c has no CRC", "");
    const char *moved = "{\"crc32c\": \"00000000\", \"window\": 3}";
    check(checked_line_verify(moved, strlen(moved)) == CHECKED_LINE_NO_CRC, "checked line: crc32c not last is no CRC", "");
    const char *spaced = "{\"window\": 3, \"crc32c\" : \"00000000\"}";
    check(checked_line_verify(spaced, strlen(spaced)) == CHECKED_LINE_NO_CRC, "checked line: crc32c spelled otherwise is no CRC", "");
    check(checked_line_seal("{\"a\": 1", 7, &len) == NULL, "checked line: an object without its closing brace is not sealed", "");
    free(line);
}

int main(void) {
    test_vectors();
    test_table_and_splits();
    test_hex();
    test_checked_lines();
    return test_exit_code();
}
