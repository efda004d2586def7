/* tests/test_lz4.c: quant/lz4.c round trips on random, repetitive, text-like
 * and packed-code data (every size 0..300 plus large blocks), a hand-made
 * block decoded byte for byte, and malformed blocks (truncated, offset 0,
 * offset before the start, length overflow, output overflow) which must give
 * an error code, never a crash (run under ASan/UBSan to prove the latter). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/lz4.h"
#include "quant/codec.h"
#include "tests/test.h"

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Compresses, checks the bound, decompresses into a buffer of exactly n
 * bytes and compares. Returns the compressed size, or 0 on any failure. */
static size_t round_trip(const uint8_t *src, size_t n) {
    size_t cap = lz4_compress_bound(n);
    uint8_t *c = malloc(cap), *d = malloc(n ? n : 1);
    size_t csize = lz4_compress(src, n, c, cap), dsize = 0;
    int ok = csize > 0 && csize <= cap &&
             lz4_decompress(c, csize, d, n, &dsize) == LZ4_OK && dsize == n && memcmp(d, src, n) == 0;
    /* one byte less room must fail cleanly, not overrun */
    if (ok && n > 0) {
        size_t dummy;
        ok = lz4_decompress(c, csize, d, n - 1, &dummy) == LZ4_ERR_OUTPUT;
    }
    free(c);
    free(d);
    return ok ? csize : 0;
}

static void fill(uint8_t *p, size_t n, int kind, uint64_t *rng) {
    static const char *words[] = {"the ", "cache ", "key ", "value ", "quantized ", "attention "};
    size_t i = 0;
    while (i < n) {
        switch (kind) {
        case 0: p[i++] = (uint8_t)next_u64(rng); break;                   /* random */
        case 1: p[i] = (uint8_t)(i / 1000); i++; break;                     /* long runs */
        case 2: {                                                           /* text-like */
            const char *w = words[next_u64(rng) % 6];
            for (size_t k = 0; w[k] && i < n; k++) p[i++] = (uint8_t)w[k];
            break;
        }
        default: p[i] = (uint8_t)("abcab"[i % 5]); i++; break;            /* short period */
        }
    }
}

static void test_round_trips(void) {
    uint64_t rng = 99;
    uint8_t buf[400];
    int ok = 1;
    for (int kind = 0; kind < 4; kind++)
        for (size_t n = 0; n <= 300; n++) {
            fill(buf, n, kind, &rng);
            ok &= round_trip(buf, n) > 0;
        }
    check(ok, "lz4 round trip, every size 0..300, random/runs/text/periodic", "a size failed");

    size_t big = 1 << 20;
    uint8_t *p = malloc(big);
    const char *names[] = {"random", "long runs", "text-like", "period 5"};
    for (int kind = 0; kind < 4; kind++) {
        fill(p, big, kind, &rng);
        size_t c = round_trip(p, big);
        char name[96];
        snprintf(name, sizeof name, "lz4 round trip 1 MiB %s", names[kind]);
        /* sizes a greedy LZ4 must reach: runs/periodic collapse, words halve */
        size_t limit[] = {lz4_compress_bound(big), big / 100, big / 2, big / 100};
        check(c > 0 && c <= limit[kind], name, "compressed size %zu, limit %zu", c, limit[kind]);
        printf("     %s: %zu -> %zu bytes\n", names[kind], big, c);
    }
    /* int4-g64 units of a smooth signal (rows of 64): what the cache file compresses */
    KvBase b;
    char why[160];
    if (kv_base_parse("int4-g64", &b, why, sizeof why)) {
        check(0, "lz4 round trip int4-g64 packed codes", "%s", why);
        free(p);
        return;
    }
    size_t nv = 65536, rows = nv / 64, ub = b.codec->unit_bytes(&b, 64);
    float *x = malloc(nv * sizeof *x);
    for (size_t i = 0; i < nv; i++)
        x[i] = (float)((i % 64) < 32 ? 0.01 * (double)(i % 64) : -0.02 * (double)(i % 7));
    size_t pb = rows * ub;
    uint8_t *packed = malloc(pb);
    for (size_t r = 0; r < rows; r++) b.codec->encode(&b, x + r * 64, 64, packed + r * ub);
    size_t c = round_trip(packed, pb);
    check(c > 0, "lz4 round trip int4-g64 packed codes", "failed");
    printf("     int4-g64 packed: %zu -> %zu bytes\n", pb, c);
    free(packed);
    free(x);
    free(p);
}

static int decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap) {
    size_t out;
    return lz4_decompress(src, n, dst, cap, &out);
}

static void test_handmade(void) {
    /* "abc" then a match of 9 at offset 3 (overlapping copy), then "xyz!!" */
    const uint8_t block[] = {0x35, 'a', 'b', 'c', 3, 0, 0x50, 'x', 'y', 'z', '!', '!'};
    uint8_t out[64];
    size_t n = 0;
    int rc = lz4_decompress(block, sizeof block, out, sizeof out, &n);
    check(rc == LZ4_OK && n == 17 && memcmp(out, "abcabcabcabcxyz!!", 17) == 0,
          "lz4 hand-made block with overlapping match", "rc %d n %zu", rc, n);
    const uint8_t empty[] = {0x00};
    rc = lz4_decompress(empty, 1, out, 0, &n);
    check(rc == LZ4_OK && n == 0, "lz4 block of one zero token = empty output", "rc %d n %zu", rc, n);
}

static void test_malformed(void) {
    uint8_t out[1024];
    struct { const char *what; uint8_t bytes[16]; size_t len; int want; } cases[] = {
        {"empty input", {0}, 0, LZ4_ERR_TRUNCATED},
        {"literals past end", {0x50, 'a', 'b'}, 3, LZ4_ERR_TRUNCATED},
        {"length byte missing", {0xF0}, 1, LZ4_ERR_TRUNCATED},
        {"offset cut in half", {0x10, 'a', 1}, 3, LZ4_ERR_TRUNCATED},
        {"ends after a match", {0x10, 'a', 1, 0}, 4, LZ4_ERR_TRUNCATED},
        {"offset 0", {0x10, 'a', 0, 0, 0x10, 'b'}, 6, LZ4_ERR_OFFSET},
        {"offset before start", {0x20, 'a', 'b', 3, 0, 0x10, 'c'}, 7, LZ4_ERR_OFFSET},
        {"offset 65535 on 1 byte", {0x10, 'a', 0xff, 0xff, 0x10, 'b'}, 6, LZ4_ERR_OFFSET},
        {"match length bytes missing", {0x1F, 'a', 1, 0, 255, 255}, 6, LZ4_ERR_TRUNCATED},
        {"match longer than output", {0x1F, 'a', 1, 0, 255, 255, 255, 255, 10, 0x00}, 10, LZ4_ERR_OUTPUT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = decode(cases[i].bytes, cases[i].len, out, sizeof out);
        char name[96];
        snprintf(name, sizeof name, "lz4 malformed: %s -> %s", cases[i].what, lz4_error_name(cases[i].want));
        check(rc == cases[i].want, name, "got %d (%s)", rc, lz4_error_name(rc));
    }
    /* A literal length of ~2^64 built from 255 bytes would need 7e16 bytes of
     * input; instead check that a huge run of 255s is caught as truncated and
     * that the counter cannot wrap: 70,000 bytes of 255 = length 17.85M. */
    size_t n = 70001;
    uint8_t *b = malloc(n);
    b[0] = 0xF0;
    memset(b + 1, 255, n - 1);
    int rc = decode(b, n, out, sizeof out);
    check(rc == LZ4_ERR_TRUNCATED, "lz4 malformed: 70,000 continuation bytes -> truncated", "got %d", rc);
    free(b);

    /* Every truncation and every single-byte corruption of a valid block:
     * whatever the result, no crash and never more output than the buffer. */
    uint64_t rng = 5;
    uint8_t src[2000], comp[2100], dst[2000];
    fill(src, sizeof src, 2, &rng);
    size_t cn = lz4_compress(src, sizeof src, comp, sizeof comp);
    int trunc_errors = 0, prefix_ok = 1;
    for (size_t len = 0; len < cn; len++) {
        size_t out_n = 0;
        if (lz4_decompress(comp, len, dst, sizeof dst, &out_n) != LZ4_OK)
            trunc_errors++;
        else   /* cut right after a literal run: a valid block decoding to a prefix */
            prefix_ok &= out_n < sizeof src && memcmp(dst, src, out_n) == 0;
    }
    printf("     %d of %zu truncations rejected (the rest end on a literal run)\n", trunc_errors, cn);
    check(prefix_ok && trunc_errors > 0, "lz4 truncated blocks: error, or a strict prefix of the data", "");
    int survived = 1;
    for (size_t i = 0; i < cn; i++)
        for (int v = 0; v < 256; v += 17) {
            uint8_t saved = comp[i];
            comp[i] = (uint8_t)v;
            size_t out_n = 0;
            int r = lz4_decompress(comp, cn, dst, sizeof dst, &out_n);
            survived &= r != LZ4_OK || out_n <= sizeof dst;
            comp[i] = saved;
        }
    check(survived, "lz4 single-byte corruptions: error or bounded output, no crash", "output over cap");
}

int main(void) {
    test_round_trips();
    test_handmade();
    test_malformed();
    return test_exit_code();
}
