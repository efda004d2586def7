/* model/formats/sha256.c: SHA-256 as FIPS 180-4 §6.2 states it (the API is in sha256.h). */
#include "model/formats/sha256.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first 32 bits of the fractional parts of the cube roots of the first 64 primes (§4.2.2). */
static const uint32_t ROUND_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline uint32_t load_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(unsigned char *p, uint32_t x) {
    p[0] = (unsigned char)(x >> 24);
    p[1] = (unsigned char)(x >> 16);
    p[2] = (unsigned char)(x >> 8);
    p[3] = (unsigned char)x;
}

/* One 64-byte block into the state (§6.2.2 steps 1-4). */
static void compress_block(uint32_t state[8], const unsigned char *block) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++) w[t] = load_be32(block + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t++) {
        uint32_t sum1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t choose = (e & f) ^ (~e & g);
        uint32_t t1 = h + sum1 + choose + ROUND_K[t] + w[t];
        uint32_t sum0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = sum0 + majority;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

void sha256_init(Sha256 *s) {
    /* §5.3.3: the first 32 bits of the fractional parts of the square roots of the first 8 primes. */
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->state, initial, sizeof initial);
    s->total_bytes = 0;
    s->block_len = 0;
}

void sha256_update(Sha256 *s, const void *data, size_t len) {
    const unsigned char *p = data;
    s->total_bytes += len;
    if (s->block_len > 0) {            /* top up the partial block first */
        size_t take = 64 - s->block_len < len ? 64 - s->block_len : len;
        memcpy(s->block + s->block_len, p, take);
        s->block_len += take;
        p += take;
        len -= take;
        if (s->block_len < 64) return;
        compress_block(s->state, s->block);
        s->block_len = 0;
    }
    for (; len >= 64; p += 64, len -= 64) compress_block(s->state, p);   /* whole blocks in place */
    memcpy(s->block, p, len);
    s->block_len = len;
}

void sha256_final(Sha256 *s, unsigned char digest[SHA256_DIGEST_BYTES]) {
    /* §5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the length in bits, big-endian. */
    uint64_t bits = s->total_bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t pad_len = (s->block_len < 56 ? 56 : 120) - s->block_len;
    for (int i = 0; i < 8; i++) pad[pad_len + i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, pad, pad_len + 8);
    for (int i = 0; i < 8; i++) store_be32(digest + 4 * i, s->state[i]);
}

void sha256_to_hex(const unsigned char digest[SHA256_DIGEST_BYTES], char hex[SHA256_HEX_CHARS + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_BYTES; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[SHA256_HEX_CHARS] = '\0';
}

void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_CHARS + 1]) {
    Sha256 s;
    unsigned char digest[SHA256_DIGEST_BYTES];
    sha256_init(&s);
    sha256_update(&s, data, len);
    sha256_final(&s, digest);
    sha256_to_hex(digest, hex);
}

int sha256_file_hex(const char *path, char hex[SHA256_HEX_CHARS + 1], Error *err) {
    enum { CHUNK = 1 << 20 };     /* 1 MiB: large reads, small memory */
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return error_set(err, "%s: out of memory for a read buffer", path);
    }
    Sha256 s;
    sha256_init(&s);
    size_t got;
    while ((got = fread(buf, 1, CHUNK, f)) > 0) sha256_update(&s, buf, got);
    int failed = ferror(f), saved_errno = errno;
    free(buf);
    fclose(f);
    /* A directory opens on Linux and fails on the first read (EISDIR). */
    if (failed) return error_set(err, "%s: read error: %s", path, strerror(saved_errno));
    unsigned char digest[SHA256_DIGEST_BYTES];
    sha256_final(&s, digest);
    sha256_to_hex(digest, hex);
    return 0;
}

int sha256_hex_valid(const char *s) {
    size_t n = strspn(s, "0123456789abcdef");
    return n == SHA256_HEX_CHARS && s[n] == '\0';
}
