/* tests/fuzz/fuzz_tokenizer.c: the tokenizer on hostile files and hostile text.
 * The first input byte picks the mode, the rest is the payload:
 *   0: payload is a tokenizer file: tokenizer_load_memory, then (if accepted)
 *      encode/decode a fixed text with it and stream every piece;
 *   1: payload is text, encoded with the real Llama tokenizer
 *      (data/models/mini-llama-brown/tokenizer.bin, loaded once); ids must be in
 *      range and decode(encode(text)) == text with U+2581 read as a space (this
 *      tokenizer has byte fallback and no whitespace folding);
 *   2: payload is int32 ids (any value, out of range too): decode and stream them.
 * The real tokenizer is the only state kept between inputs, and is read-only. */
#include <string.h>
#include "tokenizer/tokenizer.h"
#include "tokenizer/pieces.h"   /* flags, to know when the round trip must hold */
#include "tests/fuzz/fuzz.h"

#define REAL_TOKENIZER "data/models/mini-llama-brown/tokenizer.bin"

static Tokenizer *real;   /* loaded once, never written after */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("KVQ_FUZZ_TOKENIZER");
    char err[512];
    real = tokenizer_load(path ? path : REAL_TOKENIZER, err, sizeof err);
    if (!real) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repo root)\n", err);
        exit(2);
    }
    return 0;
}

/* Streams ids[0..n) piece by piece, as generate does; every piece fits the 64-byte buffer. */
static void stream(const Tokenizer *t, const int *ids, int n) {
    char buf[64];
    for (int i = 0; i < n; i++) {
        int k = tokenizer_piece_bytes(t, i ? ids[i - 1] : -1, ids[i], buf);
        fuzz_assert(k >= 0 && k <= (int)sizeof buf, "piece_bytes length out of range");
    }
}

static void check_ids(const Tokenizer *t, const int *ids, int n) {
    for (int i = 0; i < n; i++)
        fuzz_assert(ids[i] >= 0 && ids[i] < tokenizer_vocab_size(t), "encode gave an id out of range");
}

static void fuzz_file(const uint8_t *buf, size_t len) {
    static const char text[] = "Hello  w\xC3\xB6rld\n\t\xFF\xE2\x96\x81 <0x41> <s></s>ab";
    char err[256] = "";
    Tokenizer *t = tokenizer_load_memory(buf, len, "fuzz.bin", err, sizeof err);
    if (!t) {
        fuzz_assert(strncmp(err, "fuzz.bin: ", 10) == 0 && fuzz_one_line(err), "bad error message");
        return;
    }
    int n = 0;
    int *ids = tokenizer_encode(t, text, sizeof text - 1, 1, &n);
    fuzz_assert(ids != NULL, "encode failed");
    check_ids(t, ids, n);
    size_t dlen;
    char *back = tokenizer_decode(t, ids, n, &dlen);
    fuzz_assert(back != NULL && strlen(back) <= dlen, "decode failed");
    stream(t, ids, n);
    for (int id = -1; id <= tokenizer_vocab_size(t); id++) (void)tokenizer_piece(t, id);
    free(back);
    free(ids);
    tokenizer_free(t);
}

static void fuzz_text(const uint8_t *buf, size_t len, int add_bos) {
    int n = 0;
    int *ids = tokenizer_encode(real, (const char *)buf, len, add_bos, &n);
    fuzz_assert(ids != NULL || n == 0, "encode failed");
    check_ids(real, ids, n);
    size_t dlen = 0;
    char *back = tokenizer_decode(real, ids, n, &dlen);
    fuzz_assert(back != NULL, "decode failed");
    if ((real->flags & TOK_BYTE_FALLBACK) && !(real->flags & TOK_REMOVE_EXTRA_WHITESPACES)) {
        /* Exact except that U+2581 in the text is the space symbol itself, so it comes back
         * as ' ' (sentencepiece does the same). */
        char *want = malloc(len + 1);
        size_t wlen = 0;
        fuzz_assert(want != NULL, "out of memory");
        for (size_t i = 0; i < len; i++) {
            if (len - i >= 3 && memcmp(buf + i, "\xE2\x96\x81", 3) == 0) {
                want[wlen++] = ' ';
                i += 2;
            } else {
                want[wlen++] = (char)buf[i];
            }
        }
        fuzz_assert(dlen == wlen && memcmp(back, want, wlen) == 0, "decode(encode(text)) != text");
        free(want);
    }
    stream(real, ids, n);
    free(back);
    free(ids);
}

static void fuzz_ids(const uint8_t *buf, size_t len) {
    int n = (int)(len / 4);
    int *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    fuzz_assert(ids != NULL, "out of memory");
    memcpy(ids, buf, (size_t)n * 4);
    size_t dlen = 0;
    char *back = tokenizer_decode(real, ids, n, &dlen);
    fuzz_assert(back != NULL && back[dlen] == '\0', "decode failed");
    stream(real, ids, n);
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: fuzz_file(p, n); break;
    case 1: fuzz_text(p, n, 0); break;
    case 2: fuzz_text(p, n, 1); break;
    default: fuzz_ids(p, n); break;
    }
    return 0;
}
