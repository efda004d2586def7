/* tests/test_entropy_file.c: entropy-coded compressed files (compress --entropy, format
 * kvq-compressed-4, model/formats/entropy_pack.h).
 *
 * - Round trip: for several schemes (int, tq, q4_0+had, a token-axis base with its .full rows,
 *   +out, fp16 without code streams) the entropy-coded file decodes to exactly the values of the
 *   fixed-rate file, and its coded bits lie within 2% of the entropy figure (+ the rANS states).
 * - Every bit of every byte of two files flipped, and every byte inverted: refused with one line
 *   naming the file, or harmless (the header's padding); counted.
 * - Below the CRCs (each section re-sealed here, so only the deeper check stands): a table whose
 *   counts do not add up to the stream's length, a stream cut short, a stream with a byte left
 *   over, bytes after the last section, a header of another shape: refused, naming the part. */
#include "tests/byte_flips.h"
#include "tests/kv_file_bytes.h"
#include "tests/test.h"
#include "model/formats/compress.h"
#include "model/formats/crc32c.h"
#include "model/formats/entropy_pack.h"
#include "quant/rans.h"
#include "quant/pca.h"
#include "quant/scheme.h"
#include <math.h>
#include <unistd.h>

#define FILE_NAME "entropy.st"

static void synthetic_cache(KvSnapshot *s, int layers, int heads, int seq, int dim, uint64_t seed) {
    size_t n = kv_cache_of_shape(s, layers, heads, seq, dim);
    for (size_t i = 0; i < n; i++) {   /* skewed values: a channel's codes are not uniform */
        float u = rnd(&seed);
        s->k[i] = 2 * u * u * u + 0.1f * (float)(i % 7), s->v[i] = u * fabsf(u);
    }
}

static int same_values(const KvSnapshot *a, const KvSnapshot *b) {
    size_t n = kv_snapshot_layer_size(a) * (size_t)a->n_layers;
    return a->seq_len == b->seq_len && a->n_layers == b->n_layers && !memcmp(a->k, b->k, n * sizeof(float)) &&
           !memcmp(a->v, b->v, n * sizeof(float));
}

static const struct { const char *k, *v; } SCHEMES[] = {
    {"int4-g32", "int2-g32-asym"}, {"tq3", "q4_0+had"}, {"int4-t8+res2", "nf4-g32+sink1"}, {"int3-g32+out1", "fp16"},
};

/* The metadata format and entropy keys of a file in memory ("" when absent or unreadable). */
static void file_format(const unsigned char *buf, size_t len, char *format, char *entropy, size_t size) {
    SafeTensors st;
    Error err;
    format[0] = entropy[0] = '\0';
    if (!buf || st_open_memory(&st, buf, len, FILE_NAME, &err)) return;
    const char *f = st_meta(&st, "format"), *e = st_meta(&st, "entropy");
    snprintf(format, size, "%s", f ? f : "");
    snprintf(entropy, size, "%s", e ? e : "");
    st_close(&st);
}

static void test_round_trips(const KvSnapshot *cache) {
    int formats_bad = 0;
    char formats_why[400] = "";
    for (size_t i = 0; i < sizeof SCHEMES / sizeof SCHEMES[0]; i++) {
        size_t la, lb;
        CompressReport ra, rb;
        unsigned char *a = kv_file_bytes(cache, SCHEMES[i].k, SCHEMES[i].v, 0, 0, &la, &ra);
        unsigned char *b = kv_file_bytes(cache, SCHEMES[i].k, SCHEMES[i].v, 0, 1, &lb, &rb);
        KvSnapshot xa, xb;
        Error err;
        char name[200], format_a[64], entropy_a[64], format_b[64], entropy_b[64];
        file_format(a, la, format_a, entropy_a, sizeof format_a);
        file_format(b, lb, format_b, entropy_b, sizeof format_b);
        if (strcmp(format_a, "kvq-compressed-3") || entropy_a[0] || strcmp(format_b, "kvq-compressed-4") ||
            strcmp(entropy_b, "1")) {
            formats_bad++;
            snprintf(formats_why, sizeof formats_why, "keys %s: fixed-rate '%s' '%s', entropy-coded '%s' '%s'",
                     SCHEMES[i].k, format_a, entropy_a, format_b, entropy_b);
        }
        snprintf(name, sizeof name, "entropy file: keys %s, values %s decode to the fixed-rate file's values", SCHEMES[i].k,
                 SCHEMES[i].v);
        int ok = a && b && kv_file_decode(a, la, FILE_NAME, &xa, &err) == 0;
        if (ok) {
            if (kv_file_decode(b, lb, FILE_NAME, &xb, &err) == 0) {
                ok = same_values(&xa, &xb);
                kv_snapshot_free(&xb);
            } else {
                ok = 0;
            }
            kv_snapshot_free(&xa);
        }
        check(ok, name, "%s", err.msg);
        /* the rANS states (32 bits a stream: 2 sides x 2 layers x 2 heads x 32 channels, one side
         * fp16 in the last) are the coder's overhead on a short cache */
        double streams = (i == 3 ? 1 : 2) * 2 * 2 * 32;
        snprintf(name, sizeof name, "entropy file: keys %s, values %s: coded bits within 2%% of the entropy figure",
                 SCHEMES[i].k, SCHEMES[i].v);
        check(rb.entropy_bits_per_value > 0 && rb.coded_bits_per_value >= rb.entropy_bits_per_value &&
                  rb.coded_bits_per_value <= 1.02 * rb.entropy_bits_per_value + 40 * streams / rb.values,
              name, "entropy %g, coded %g", rb.entropy_bits_per_value, rb.coded_bits_per_value);
        free(a);
        free(b);
    }
    /* what the checks above read is the coded file only if the flag reached kv_compress */
    check(formats_bad == 0,
          "entropy file: the files compared are format kvq-compressed-4 (metadata entropy 1) with the flag, "
          "kvq-compressed-3 without (compress.h)",
          "%d of %zu schemes wrong, last %s", formats_bad, sizeof SCHEMES / sizeof SCHEMES[0], formats_why);
}

/* A flipped copy read back: refused (-1), or whether it decodes to the intact values. */
static int read_flipped(const unsigned char *buf, size_t len, const void *intact, Error *err) {
    KvSnapshot out;
    if (kv_file_decode(buf, len, FILE_NAME, &out, err) != 0) return -1;
    int same = same_values(&out, intact);
    kv_snapshot_free(&out);
    return same;
}

/* The entropy-coded file of cache under k and v, its bytes flipped into n (a file that is not
 * written or does not read back counts as harmful). */
static void flip_file(const KvSnapshot *cache, const char *k, const char *v, FlipCount *n) {
    size_t len;
    CompressReport r;
    unsigned char *buf = kv_file_bytes(cache, k, v, 0, 1, &len, &r);
    KvSnapshot intact;
    Error err;
    if (!buf || kv_file_decode(buf, len, FILE_NAME, &intact, &err)) {
        n->harmful++;
        free(buf);
        return;
    }
    flip_every_byte(buf, len, FILE_NAME, read_flipped, &intact, n);
    kv_snapshot_free(&intact);
    free(buf);
}

static void test_byte_flips(void) {
    KvSnapshot small;
    synthetic_cache(&small, 1, 2, 9, 32, 3);
    FlipCount n = {0, 0, 0, 0, -1, 0};
    flip_file(&small, "int4-g32", "tq2", &n);
    flip_file(&small, "int2-t8-asym", "int3-g32+out1", &n);
    printf("     entropy-coded byte flips: %ld refused, %ld harmless (header padding), %ld harmful\n", n.refused, n.harmless,
           n.harmful);
    check(n.refused > 1000 && n.harmful == 0, "entropy file: every bit of every byte flipped, every byte inverted: refused or harmless",
          "%ld harmful of %ld (first at byte %ld)", n.harmful, n.refused + n.harmless + n.harmful, n.first_harmful);
    check(!n.bad_message, "entropy file: every refused flip is one line naming the file", "");
    kv_snapshot_free(&small);
}

/* ---- below the CRCs: blobs taken apart and put together again ---- */

typedef struct {
    unsigned char bytes[1 << 16];
    size_t len;
} Blob;

static void put(Blob *b, const void *p, size_t n) {
    memcpy(b->bytes + b->len, p, n);
    b->len += n;
}

static void put_crc_of(Blob *b, size_t from) {
    uint32_t c = crc32c(0, b->bytes + from, b->len - from);
    unsigned char le[4] = {(unsigned char)c, (unsigned char)(c >> 8), (unsigned char)(c >> 16), (unsigned char)(c >> 24)};
    put(b, le, 4);
}

/* Gamma-coded counts + 1 (entropy_pack.h's table), LSB first, padded to a byte. */
static void put_table(Blob *b, const unsigned *counts, int symbols) {
    size_t at = 8 * b->len;
    for (int s = 0; s < symbols; s++) {
        unsigned v = counts[s] + 1;
        int w = 0;
        while (v >> (w + 1)) w++;
        at += (size_t)w;
        for (int k = w; k >= 0; k--, at++)
            if (v >> k & 1) b->bytes[at / 8] |= (unsigned char)(1u << (at % 8));
    }
    b->len = (at + 7) / 8;
}

/* A one-unit tensor of int2-g32 (one head, rows of 32): 32 streams of one code each. The blob
 * made here: the header, the rest section (the fp16 scale), stream sections given a code each
 * (count = that symbol's count 1), optionally mangled. */
static void build(Blob *b, const unsigned char *head32, int table_extra, int cut, int extra_byte, int trailing) {
    memset(b, 0, sizeof *b);
    put(b, head32, 32);
    unsigned char rest_len[4] = {2, 0, 0, 0}, scale[2] = {0x00, 0x3c};
    size_t from = b->len;
    put(b, rest_len, 4), put(b, scale, 2), put_crc_of(b, from);
    for (int slot = 0; slot < 32; slot++) {
        unsigned counts[4] = {0, 0, 0, 0}, freqs[4];
        counts[slot % 4] = 1;
        from = b->len;
        unsigned written[4] = {counts[0], counts[1], counts[2], counts[3]};
        if (slot == 0) written[3] += (unsigned)table_extra;
        put_table(b, written, 4);
        unsigned char stream[16];
        unsigned short code = (unsigned short)(slot % 4);
        rans_normalize(counts, 4, freqs);
        size_t n = rans_encode(&code, 1, freqs, 4, stream, sizeof stream);
        size_t stored = slot == 0 ? n - (size_t)cut + (size_t)extra_byte : n;
        unsigned char varint = (unsigned char)stored;
        put(b, &varint, 1);
        put(b, stream, n - (slot == 0 ? (size_t)cut : 0));
        if (slot == 0 && extra_byte) put(b, "\x5a", 1);
        put_crc_of(b, from);
    }
    if (trailing) put(b, "\0", 1);
}

static void expect_unpack(const char *name, const Blob *b, int want_ok, const char *want) {
    KvSpec spec;
    char why[160];
    Error err = {{0}};
    kv_spec_parse("int2-g32", KV_SIDE_VALUES, &spec, why, sizeof why);
    EntropyShape shape = {1, 1, kv_spec_unit_bytes(&spec, 32), 32};
    unsigned char units[64];
    int rc = entropy_unpack(&spec, 0, &shape, b->bytes, b->len, units, "t", &err);
    int ok = want_ok ? rc == 0 && units[8] == 0x00 && units[9] == 0x3c && (units[0] & 3) == 0 && (units[0] >> 2 & 3) == 1
                     : rc == -1 && strstr(err.msg, want) != NULL && !strchr(err.msg, '\n');
    check(ok, name, "rc %d, '%s'", rc, err.msg);
}

static void test_below_crc(void) {
    unsigned char head[32] = "KVQE";
    uint32_t words[7] = {1, 1, 1, 10, 1, 32, 4};   /* version, heads, units, unit bytes, rows, slots, symbols */
    for (int i = 0; i < 7; i++)
        for (int k = 0; k < 4; k++) head[4 + 4 * i + k] = (unsigned char)(words[i] >> (8 * k));
    Blob b;
    build(&b, head, 0, 0, 0, 0);
    expect_unpack("entropy sections: a blob built here from the layout decodes (codes 0, 1, 2, 3, ... and the scale)", &b, 1, "");
    build(&b, head, 1, 0, 0, 0);
    expect_unpack("entropy sections: a table whose counts add up to more than the stream is refused", &b, 0, "add up to more than");
    build(&b, head, 0, 1, 0, 0);
    expect_unpack("entropy sections: a stream cut short (length and CRC consistent) is refused", &b, 0, "does not decode");
    build(&b, head, 0, 0, 1, 0);
    expect_unpack("entropy sections: a stream with a byte left over is refused", &b, 0, "does not decode");
    build(&b, head, 0, 0, 0, 1);
    expect_unpack("entropy sections: a byte after the last section is refused", &b, 0, "after the last");
    head[4 + 4 * 5] = 31;   /* slots */
    build(&b, head, 0, 0, 0, 0);
    expect_unpack("entropy sections: a header of another shape is refused", &b, 0, "slots 31");
}


/* pca's code widths are each KV head's fitted bits: two heads of pca2 at d = 8 with other bit
 * allocations (head 0: 2 bits for each component; head 1: 8 + 8 for the first two, 0 for the rest),
 * identity bases and ascending tables. entropy_pack with each head's spec measures the entropy of
 * the codes each head's own spec reads (restated here from codes() and counts), and unpacks to the
 * same units; read with head 0's widths for both heads, the figure would differ. */
static void test_per_head_widths(void) {
    enum { D = 8, HEADS = 2, ROWS = 64 };
    static float blocks[HEADS][D + D * D + D + D * 256];
    KvSpec specs[HEADS];
    char why[160];
    int ok = 1;
    for (int h = 0; h < HEADS; h++) {
        ok &= kv_spec_parse("pca2", KV_SIDE_VALUES, &specs[h], why, sizeof why) == 0;
        float *mean = blocks[h], *basis = mean + D, *bits = basis + D * D, *tables = bits + D;
        for (int i = 0; i < D; i++) {
            basis[i * D + i] = 1;
            bits[i] = h == 0 ? 2 : i < 2 ? 8 : 0;
            for (int k = 0; k < (1 << (int)bits[i]); k++) tables[i * 256 + k] = (float)k - (float)(1 << (int)bits[i]) / 2;
        }
        specs[h].base.table = blocks[h];
    }
    size_t ub = specs[0].base.codec->unit_bytes(&specs[0].base, D);
    static unsigned char units[HEADS * ROWS * 16], back[HEADS * ROWS * 16];
    uint64_t seed = 5;
    double want = 0;
    for (int h = 0; h < HEADS; h++) {
        static unsigned short codes[ROWS][D];
        for (int r = 0; r < ROWS; r++) {
            float x[D];
            for (int i = 0; i < D; i++) x[i] = 40 * rnd(&seed) * (i < 3 ? 1 : 0.1f);
            specs[h].base.codec->encode(&specs[h].base, x, D, units + ((size_t)h * ROWS + r) * ub);
            specs[h].base.codec->codes(&specs[h].base, units + ((size_t)h * ROWS + r) * ub, D, codes[r]);
        }
        for (int i = 0; i < D; i++) {
            unsigned counts[256] = {0};
            for (int r = 0; r < ROWS; r++) counts[codes[r][i]]++;
            want += rans_stream_entropy_bits(counts, 256);
        }
    }
    EntropyShape shape = {HEADS, ROWS, ub, D};
    EntropyStats st = {0};
    unsigned char *blob = NULL;
    size_t len = 0;
    Error err = {{0}};
    ok &= entropy_pack(specs, 1, &shape, units, &blob, &len, &st, &err) == 0;
    ok &= ok && entropy_unpack(specs, 1, &shape, blob, len, back, "pca", &err) == 0 && !memcmp(back, units, HEADS * ROWS * ub);
    free(blob);
    check(ok && want > 0 && fabs(st.code_entropy_bits - want) <= 1e-9 * want,
          "entropy sections: pca's streams are read at each KV head's own code widths (two heads, other bits)",
          "rc %d, entropy %.6f bits, want %.6f: %s%s", ok, st.code_entropy_bits, want, why, err.msg);
}

int main(void) {
    KvSnapshot cache;
    synthetic_cache(&cache, 2, 2, 40, 32, 7);
    test_round_trips(&cache);
    kv_snapshot_free(&cache);
    test_byte_flips();
    test_below_crc();
    test_per_head_widths();
    return test_failures ? 1 : 0;
}
