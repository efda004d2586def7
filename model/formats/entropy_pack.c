/* model/formats/entropy_pack.c: a tensor's codec units as entropy-coded sections and back. See
 * model/formats/entropy_pack.h for the layout. */
#include "model/formats/entropy_pack.h"
#include "model/formats/crc32c.h"
#include "quant/rans.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "KVQE"
#define VERSION 1
#define HEADER_WORDS 7   /* version, heads, units, unit_bytes, rows, slots, symbols */

/* The code layout of a spec's units: slots 0 for a base without code streams. mask: unit_bytes
 * bytes, the code bits set. */
typedef struct {
    const KvBase *b;
    int rows, slots, symbols, params;
    size_t unit_bytes, codes_per_unit, rest_bits;   /* rest_bits: a unit's bits outside mask */
    unsigned char *mask;
} Layout;

static int layout_init(Layout *l, const KvSpec *spec, const EntropyShape *s) {
    memset(l, 0, sizeof *l);
    l->b = &spec->base;
    l->rows = l->b->rows;
    l->unit_bytes = s->unit_bytes;
    l->mask = calloc(s->unit_bytes ? s->unit_bytes : 1, 1);
    if (!l->mask) return -1;
    if (l->b->codec->code_layout) {
        l->b->codec->code_layout(l->b, s->n, &l->slots, &l->symbols, &l->params);
        l->codes_per_unit = (size_t)l->rows * l->slots;
        unsigned short *ones = malloc(l->codes_per_unit * sizeof *ones);
        if (!ones) return -1;
        for (size_t i = 0; i < l->codes_per_unit; i++) ones[i] = (unsigned short)(l->symbols - 1);
        l->b->codec->put_codes(l->b, ones, s->n, l->mask);
        free(ones);
    }
    for (size_t k = 0; k < 8 * s->unit_bytes; k++) l->rest_bits += !(l->mask[k / 8] >> (k % 8) & 1);
    return 0;
}

/* One layout a KV head (heads: s->heads; a head's spec is specs[h] when per_head, else specs[0]):
 * the bases whose code widths come from the head's fitted table (pca) differ from head to head,
 * the others are all the same. NULL when out of memory (what was made is freed). */
static Layout *layouts_init(const KvSpec *specs, int per_head, const EntropyShape *s) {
    int n = s->heads > 0 ? s->heads : 1;
    Layout *l = calloc((size_t)n, sizeof *l);
    for (int h = 0; l && h < n; h++)
        if (layout_init(&l[h], per_head ? &specs[h] : specs, s)) {
            for (int k = 0; k <= h; k++) free(l[k].mask);
            free(l);
            l = NULL;
        }
    return l;
}

static void layouts_free(Layout *l, const EntropyShape *s) {
    for (int h = 0; l && h < (s->heads > 0 ? s->heads : 1); h++) free(l[h].mask);
    free(l);
}

/* ---- a growing byte buffer ---- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
    int failed;
} Buf;

static unsigned char *buf_room(Buf *b, size_t n) {
    if (b->failed) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return NULL; }
        b->p = p, b->cap = cap;
    }
    unsigned char *at = b->p + b->len;
    b->len += n;
    return at;
}

static void put_u32(Buf *b, uint32_t v) {
    unsigned char *p = buf_room(b, 4);
    if (p) for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The CRC-32C of b's bytes from `from` to its end, appended. */
static void put_crc(Buf *b, size_t from) {
    if (!b->failed) put_u32(b, crc32c(0, b->p + from, b->len - from));
}

/* ---- packing ---- */

/* The bits of every unit outside its head's code mask, head by head, in order, LSB first. */
static size_t rest_bits_of(const Layout *l, const EntropyShape *s) {
    size_t bits = 0;
    for (int h = 0; h < s->heads; h++) bits += s->units * l[h].rest_bits;
    return bits;
}

static void pack_rest(const Layout *l, const EntropyShape *s, const unsigned char *units, Buf *out) {
    size_t from = out->len, bits = rest_bits_of(l, s);
    put_u32(out, (uint32_t)((bits + 7) / 8));
    unsigned char *p = buf_room(out, (bits + 7) / 8);
    if (!p) return;
    memset(p, 0, (bits + 7) / 8);
    size_t at = 0;
    for (int h = 0; h < s->heads; h++) {
        const Layout *lh = &l[h];
        const unsigned char *head_units = units + (size_t)h * s->units * lh->unit_bytes;
        for (size_t u = 0; u < s->units; u++)
            for (size_t k = 0; k < 8 * lh->unit_bytes; k++)
                if (!(lh->mask[k / 8] >> (k % 8) & 1)) {
                    if (head_units[u * lh->unit_bytes + k / 8] >> (k % 8) & 1) p[at / 8] |= (unsigned char)(1u << (at % 8));
                    at++;
                }
    }
    put_crc(out, from);
}

/* The table: every symbol's count + 1 in Elias gamma code (n >= 1: floor(log2 n) zeros, then n's
 * bits from the top), LSB first, padded to a byte. Counts, not frequencies: the decoder derives
 * the same frequencies (rans_normalize), and the counts must add up to the stream's length. */
static void put_table(Buf *out, const unsigned *counts, int symbols) {
    size_t bits = 0;
    for (int s = 0; s < symbols; s++) {
        int width = 0;
        while ((counts[s] + 1u) >> (width + 1)) width++;
        bits += 2 * (size_t)width + 1;
    }
    unsigned char *p = buf_room(out, (bits + 7) / 8);
    if (!p) return;
    memset(p, 0, (bits + 7) / 8);
    size_t at = 0;
    for (int s = 0; s < symbols; s++) {
        unsigned v = counts[s] + 1u;
        int width = 0;
        while (v >> (width + 1)) width++;
        at += (size_t)width;   /* the zeros */
        for (int k = width; k >= 0; k--, at++)
            if (v >> k & 1u) p[at / 8] |= (unsigned char)(1u << (at % 8));
    }
}

/* A length as 7 bits a byte, the high bit set on all but the last. */
static void put_varint(Buf *out, size_t v) {
    do {
        unsigned char *p = buf_room(out, 1);
        if (!p) return;
        *p = (unsigned char)((v & 0x7fu) | (v > 0x7f ? 0x80u : 0));
        v >>= 7;
    } while (v);
}

/* One (head, slot) stream of count codes: its table, its rANS bytes' length and bytes, its CRC. */
static int pack_stream(const Layout *l, const unsigned short *codes, size_t count, Buf *out, EntropyStats *st) {
    unsigned counts[RANS_MAX_SYMBOLS] = {0}, freqs[RANS_MAX_SYMBOLS];
    for (size_t i = 0; i < count; i++) counts[codes[i]]++;
    st->code_entropy_bits += rans_stream_entropy_bits(counts, l->symbols);
    if (rans_normalize(counts, l->symbols, freqs)) return -1;
    size_t from = out->len, cap = 3 * count + 16;
    put_table(out, counts, l->symbols);
    unsigned char *scratch = malloc(cap);
    size_t len = scratch ? rans_encode(codes, count, freqs, l->symbols, scratch, cap) : 0;
    if (len) put_varint(out, len);
    unsigned char *p = len ? buf_room(out, len) : NULL;
    if (p) memcpy(p, scratch, len);
    free(scratch);
    if (!p) return -1;
    put_crc(out, from);
    st->coded_bits += 8.0 * (double)len;
    st->table_bytes += (double)(out->len - from) - (double)len;
    return 0;
}

/* Every stream of one head: codes of its units gathered slot by slot. */
static int pack_head(const Layout *l, const EntropyShape *s, const unsigned char *units, unsigned short *all,
                     unsigned short *stream, Buf *out, EntropyStats *st) {
    size_t count = s->units * l->rows;
    for (size_t u = 0; u < s->units; u++) l->b->codec->codes(l->b, units + u * l->unit_bytes, s->n, all + u * l->codes_per_unit);
    for (int slot = 0; slot < l->slots; slot++) {
        for (size_t i = 0; i < count; i++) stream[i] = all[i * l->slots + slot];
        if (pack_stream(l, stream, count, out, st)) return -1;
    }
    return 0;
}

int entropy_pack(const KvSpec *specs, int per_head, const EntropyShape *s, const unsigned char *units,
                 unsigned char **blob, size_t *len, EntropyStats *st, Error *err) {
    Buf out = {0};
    size_t count = s->units * (size_t)specs->base.rows;
    Layout *l = layouts_init(specs, per_head, s);
    int rc = l ? 0 : -1;
    unsigned short *all = rc ? NULL : malloc((s->units * l->codes_per_unit + 1) * sizeof *all);
    unsigned short *stream = rc ? NULL : malloc((count + 1) * sizeof *stream);
    if (rc || !all || !stream) rc = -1;
    if (!rc) {
        unsigned char *magic = buf_room(&out, 4);
        if (magic) memcpy(magic, MAGIC, 4);
        uint32_t head[HEADER_WORDS] = {VERSION, (uint32_t)s->heads, (uint32_t)s->units, (uint32_t)l->unit_bytes,
                                       (uint32_t)l->rows, (uint32_t)l->slots, (uint32_t)l->symbols};
        for (int i = 0; i < HEADER_WORDS; i++) put_u32(&out, head[i]);
        pack_rest(l, s, units, &out);
        st->table_bytes += 4.0 * (HEADER_WORDS + 1) + 8.0;   /* the header, the rest section's length and CRC */
        for (int h = 0; h < s->heads && !rc && count > 0 && l->slots > 0; h++)
            rc = pack_head(&l[h], s, units + (size_t)h * s->units * l->unit_bytes, all, stream, &out, st);
        if (out.failed) rc = -1;
    }
    if (l) {
        st->rest_bits += (double)rest_bits_of(l, s);
        /* a base without code streams counts at its stored bits, as the KV cache's figure does */
        st->param_bits += (double)s->heads * s->units *
                          (l->slots ? l->params + 24.0 * specs->base.rows * specs->outliers : 8.0 * (double)l->unit_bytes);
        st->coded_values += l->slots ? (double)s->heads * count * s->n : 0;
    }
    layouts_free(l, s);
    free(all);
    free(stream);
    if (rc) {
        free(out.p);
        return error_set(err, "out of memory for the entropy-coded streams");
    }
    *blob = out.p;
    *len = out.len;
    return 0;
}

/* ---- unpacking ---- */

typedef struct {
    const unsigned char *p;
    size_t len, at;
    const char *what;
    Error *err;
} Reader;

static int need(Reader *r, size_t n, const char *part) {
    if (r->len - r->at >= n) return 0;
    return error_set(r->err, "%s: entropy-coded section ends inside its %s", r->what, part);
}

/* A section from `from` to r->at, against the CRC-32C that follows it. */
static int check_crc(Reader *r, size_t from, const char *part) {
    if (need(r, 4, part)) return -1;
    uint32_t want = get_u32(r->p + r->at), got = crc32c(0, r->p + from, r->at - from);
    r->at += 4;
    if (want != got)
        return error_set(r->err, "%s: entropy-coded %s fails its CRC-32C (stored %08x, computed %08x)", r->what, part,
                         (unsigned)want, (unsigned)got);
    return 0;
}

static int unpack_rest(Reader *r, const Layout *l, const EntropyShape *s, unsigned char *units) {
    size_t from = r->at, bytes = (rest_bits_of(l, s) + 7) / 8;
    if (need(r, 4, "rest section")) return -1;
    if (get_u32(r->p + r->at) != bytes)
        return error_set(r->err, "%s: entropy-coded rest section holds %u bytes, expected %zu", r->what,
                         (unsigned)get_u32(r->p + r->at), bytes);
    r->at += 4;
    if (need(r, bytes, "rest section")) return -1;
    r->at += bytes;
    if (check_crc(r, from, "rest section")) return -1;
    const unsigned char *p = r->p + from + 4;
    size_t at = 0;
    for (int h = 0; h < s->heads; h++) {
        const Layout *lh = &l[h];
        unsigned char *head_units = units + (size_t)h * s->units * lh->unit_bytes;
        for (size_t u = 0; u < s->units; u++)
            for (size_t k = 0; k < 8 * lh->unit_bytes; k++)
                if (!(lh->mask[k / 8] >> (k % 8) & 1)) {
                    if (p[at / 8] >> (at % 8) & 1) head_units[u * lh->unit_bytes + k / 8] |= (unsigned char)(1u << (k % 8));
                    at++;
                }
    }
    return 0;
}

/* The gamma-coded counts of a table (put_table), which must add up to count. */
static int read_table(Reader *r, const Layout *l, size_t count, unsigned *counts, const char *part) {
    size_t at = 8 * r->at, end = 8 * r->len, total = 0;
    for (int s = 0; s < l->symbols; s++) {
        int zeros = 0;
        while (at < end && !(r->p[at / 8] >> (at % 8) & 1)) at++, zeros++;
        if (zeros > 31 || at + (size_t)zeros >= end)
            return error_set(r->err, "%s: %s: its table ends early or holds a count of more than 31 bits", r->what, part);
        uint64_t v = 0;
        for (int k = 0; k <= zeros; k++, at++) v = v << 1 | (r->p[at / 8] >> (at % 8) & 1);
        counts[s] = (unsigned)(v - 1);
        total += counts[s];
        if (total > count) break;
    }
    if (total != count)
        return error_set(r->err, "%s: %s: its table's counts add up to %s%zu, the stream holds %zu codes", r->what, part,
                         total > count ? "more than " : "", total, count);
    r->at = (at + 7) / 8;
    return 0;
}

static int read_varint(Reader *r, size_t *v, const char *part) {
    *v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (need(r, 1, part)) return -1;
        unsigned char b = r->p[r->at++];
        *v |= (size_t)(b & 0x7fu) << shift;
        if (!(b & 0x80u)) return 0;
    }
    return error_set(r->err, "%s: %s: its length runs past 5 bytes", r->what, part);
}

static int unpack_stream(Reader *r, const Layout *l, size_t count, unsigned short *codes, unsigned short *slot_table,
                         int head, int slot) {
    char part[64];
    snprintf(part, sizeof part, "stream of KV head %d, slot %d", head, slot);
    size_t from = r->at, len;
    unsigned counts[RANS_MAX_SYMBOLS], freqs[RANS_MAX_SYMBOLS];
    if (read_table(r, l, count, counts, part) || read_varint(r, &len, part) || need(r, len, part)) return -1;
    if (rans_normalize(counts, l->symbols, freqs))
        return error_set(r->err, "%s: %s: its table has no symbol", r->what, part);
    const unsigned char *bytes = r->p + r->at;
    r->at += len;
    if (check_crc(r, from, part)) return -1;
    if (!rans_freqs_valid(freqs, l->symbols))
        return error_set(r->err, "%s: %s: its frequency table does not sum to %u", r->what, part, RANS_TOTAL);
    if (rans_decode(bytes, len, freqs, l->symbols, count, codes, slot_table))
        return error_set(r->err, "%s: %s does not decode to exactly %zu codes", r->what, part, count);
    return 0;
}

static int unpack_head(Reader *r, const Layout *l, const EntropyShape *s, int h, unsigned short *all,
                       unsigned short *stream, unsigned short *slot_table, unsigned char *units) {
    size_t count = s->units * l->rows;
    for (int slot = 0; slot < l->slots; slot++) {
        if (unpack_stream(r, l, count, stream, slot_table, h, slot)) return -1;
        for (size_t i = 0; i < count; i++) all[i * l->slots + slot] = stream[i];
    }
    for (size_t u = 0; u < s->units; u++) l->b->codec->put_codes(l->b, all + u * l->codes_per_unit, s->n, units + u * l->unit_bytes);
    return 0;
}

static int check_header(Reader *r, const Layout *l, const EntropyShape *s) {
    if (need(r, 4 + 4 * HEADER_WORDS, "header")) return -1;
    if (memcmp(r->p, MAGIC, 4)) return error_set(r->err, "%s: not an entropy-coded section (no " MAGIC ")", r->what);
    uint32_t want[HEADER_WORDS] = {VERSION, (uint32_t)s->heads, (uint32_t)s->units, (uint32_t)l->unit_bytes,
                                   (uint32_t)l->rows, (uint32_t)l->slots, (uint32_t)l->symbols};
    const char *names[HEADER_WORDS] = {"version", "heads", "units", "unit bytes", "rows", "slots", "symbols"};
    for (int i = 0; i < HEADER_WORDS; i++)
        if (get_u32(r->p + 4 + 4 * i) != want[i])
            return error_set(r->err, "%s: entropy-coded header: %s %u, the scheme and shape make %u", r->what, names[i],
                             (unsigned)get_u32(r->p + 4 + 4 * i), (unsigned)want[i]);
    r->at = 4 + 4 * HEADER_WORDS;
    return 0;
}

int entropy_unpack(const KvSpec *specs, int per_head, const EntropyShape *s, const unsigned char *blob, size_t len,
                   unsigned char *units, const char *what, Error *err) {
    Reader r = {blob, len, 0, what, err};
    size_t count = s->units * (size_t)specs->base.rows;
    Layout *l = layouts_init(specs, per_head, s);
    if (!l) return error_set(err, "%s: out of memory", what);
    unsigned short *all = malloc((s->units * l->codes_per_unit + 1) * sizeof *all);
    unsigned short *stream = malloc((count + 1) * sizeof *stream);
    unsigned short *slot_table = malloc(RANS_TOTAL * sizeof *slot_table);
    int rc = all && stream && slot_table ? 0 : error_set(err, "%s: out of memory", what);
    memset(units, 0, (size_t)s->heads * s->units * l->unit_bytes);
    if (!rc) rc = check_header(&r, l, s);
    if (!rc) rc = unpack_rest(&r, l, s, units);
    for (int h = 0; h < s->heads && !rc && count > 0 && l->slots > 0; h++)
        rc = unpack_head(&r, &l[h], s, h, all, stream, slot_table, units + (size_t)h * s->units * l->unit_bytes);
    if (!rc && r.at != len)
        rc = error_set(err, "%s: %zu bytes after the last entropy-coded section", what, len - r.at);
    layouts_free(l, s);
    free(all);
    free(stream);
    free(slot_table);
    return rc;
}
