/* quant/lz4.c: LZ4 block compressor (greedy, one hash table of 4-byte
 * sequences) and a bounds-checked decompressor. Format: quant/lz4.h. */
#include <string.h>
#include "quant/lz4.h"

#define MIN_MATCH 4
#define LAST_LITERALS 5      /* the last 5 bytes of a block are always literals */
#define MATCH_FIND_LIMIT 12  /* no match may start within the last 12 bytes */
#define MAX_OFFSET 65535
#define HASH_LOG 12

size_t lz4_compress_bound(size_t n) { return n + n / 255 + 16; }

static uint32_t read32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Knuth's multiplicative hash of 4 bytes, top HASH_LOG bits. */
static uint32_t hash4(uint32_t v) { return (v * 2654435761u) >> (32 - HASH_LOG); }

/* Output cursor; `ok` drops to 0 once anything would overrun dst. */
typedef struct {
    uint8_t *dst;
    size_t cap, pos;
    int ok;
} Out;

static void put_byte(Out *o, uint8_t b) {
    if (o->pos >= o->cap) {
        o->ok = 0;
        return;
    }
    o->dst[o->pos++] = b;
}

/* The bytes after a nibble of 15: runs of 255, then the remainder. */
static void put_length_ext(Out *o, size_t len) {
    for (; len >= 255; len -= 255)
        put_byte(o, 255);
    put_byte(o, (uint8_t)len);
}

/* One sequence: literals src[0..lit), then (if match_len) a match. */
static void put_sequence(Out *o, const uint8_t *lits, size_t lit, size_t offset, size_t match_len) {
    size_t ml = match_len ? match_len - MIN_MATCH : 0;
    put_byte(o, (uint8_t)((lit >= 15 ? 15 : lit) << 4 | (ml >= 15 ? 15 : ml)));
    if (lit >= 15)
        put_length_ext(o, lit - 15);
    if (!o->ok || lit > o->cap - o->pos) {
        o->ok = 0;
        return;
    }
    memcpy(o->dst + o->pos, lits, lit);
    o->pos += lit;
    if (!match_len)
        return;
    put_byte(o, (uint8_t)(offset & 0xff));
    put_byte(o, (uint8_t)(offset >> 8));
    if (ml >= 15)
        put_length_ext(o, ml - 15);
}

size_t lz4_compress(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap) {
    if (n > LZ4_MAX_INPUT_SIZE)
        return 0;
    Out o = {dst, dst_cap, 0, 1};
    size_t anchor = 0;
    if (n > MATCH_FIND_LIMIT) {
        uint32_t table[1u << HASH_LOG];   /* position + 1 of the last occurrence; 0 = none */
        memset(table, 0, sizeof table);
        size_t match_end_limit = n - LAST_LITERALS;
        size_t ip = 0;
        while (ip + MATCH_FIND_LIMIT <= n) {
            uint32_t seq = read32(src + ip);
            uint32_t h = hash4(seq);
            size_t cand = table[h];
            table[h] = (uint32_t)(ip + 1);
            if (cand == 0 || ip - (cand - 1) > MAX_OFFSET || read32(src + cand - 1) != seq) {
                ip++;
                continue;
            }
            size_t ref = cand - 1, len = MIN_MATCH;
            while (ip + len < match_end_limit && src[ref + len] == src[ip + len])
                len++;
            /* the match stops before the last 5 bytes: they stay literals */
            put_sequence(&o, src + anchor, ip - anchor, ip - ref, len);
            ip += len;
            anchor = ip;
        }
    }
    put_sequence(&o, src + anchor, n - anchor, 0, 0);
    return o.ok ? o.pos : 0;
}

/* Reads the extra bytes of a length whose nibble was 15, adding to *len. */
static int read_length_ext(const uint8_t *src, size_t src_len, size_t *ip, size_t *len) {
    for (;;) {
        if (*ip >= src_len)
            return LZ4_ERR_TRUNCATED;
        uint8_t b = src[(*ip)++];
        if (*len > SIZE_MAX - b)
            return LZ4_ERR_LENGTH;
        *len += b;
        if (b != 255)
            return LZ4_OK;
    }
}

int lz4_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap, size_t *out_len) {
    size_t ip = 0, op = 0;
    for (;;) {
        if (ip >= src_len)
            return LZ4_ERR_TRUNCATED;   /* a block ends with a literal-only sequence */
        uint8_t token = src[ip++];
        size_t lit = token >> 4;
        int rc;
        if (lit == 15 && (rc = read_length_ext(src, src_len, &ip, &lit)) != LZ4_OK)
            return rc;
        if (lit > src_len - ip)
            return LZ4_ERR_TRUNCATED;
        if (lit > dst_cap - op)
            return LZ4_ERR_OUTPUT;
        memcpy(dst + op, src + ip, lit);
        ip += lit;
        op += lit;
        if (ip == src_len)
            break;                      /* the last sequence: literals only */
        if (src_len - ip < 2)
            return LZ4_ERR_TRUNCATED;
        size_t offset = (size_t)src[ip] | (size_t)src[ip + 1] << 8;
        ip += 2;
        if (offset == 0 || offset > op)
            return LZ4_ERR_OFFSET;
        size_t len = token & 15u;
        if (len == 15 && (rc = read_length_ext(src, src_len, &ip, &len)) != LZ4_OK)
            return rc;
        if (len > SIZE_MAX - MIN_MATCH)
            return LZ4_ERR_LENGTH;
        len += MIN_MATCH;
        if (len > dst_cap - op)
            return LZ4_ERR_OUTPUT;
        /* Byte by byte: an offset shorter than the length repeats the
         * pattern (offset 1 = run of one byte), so memcpy would be wrong. */
        const uint8_t *from = dst + op - offset;
        for (size_t i = 0; i < len; i++)
            dst[op + i] = from[i];
        op += len;
    }
    *out_len = op;
    return LZ4_OK;
}

const char *lz4_error_name(int code) {
    switch (code) {
    case LZ4_OK: return "ok";
    case LZ4_ERR_TRUNCATED: return "truncated input";
    case LZ4_ERR_OFFSET: return "bad match offset";
    case LZ4_ERR_OUTPUT: return "output larger than the buffer";
    case LZ4_ERR_LENGTH: return "length overflow";
    default: return "unknown error";
    }
}
