/* tests/test_tokenizer.c: the tokenizer against sentencepiece's own ids.
 * - tests/fixtures/reference/tokenizer-{tinyllama,stories260K}.jsonl: every case's ids
 *   equal sentencepiece 0.1.97's, and decode(encode(text)) == text;
 * - WikiText-2 test set (HF recipe text, with BOS) against wikitext2-test-tokens.json,
 *   with the encode time;
 * - a hand-made vocabulary exercising unk, UNUSED resegmentation, USER_DEFINED pieces,
 *   remove_extra_whitespaces and decode details (expected ids worked out by hand);
 * - hostile files: every truncation, bad counts, lengths, magic, types, UTF-8, and
 *   random corruption of a real file: NULL with a message naming the file, no crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/formats/json.h"
#include "tests/test.h"
#include "tokenizer/tokenizer.h"

#define TINYLLAMA_TOK "data/models/mini-llama-brown/tokenizer.bin"
#define STORIES_TOK "data/models/stories260K/tokenizer.bin"
#define REF_DIR "tests/fixtures/reference/"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) { free(buf); buf = NULL; }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_ids(const char *label, const int *ids, int n) {
    printf("    %s:", label);
    for (int i = 0; i < n && i < 40; i++) printf(" %d", ids[i]);
    printf(n > 40 ? " ...\n" : "\n");
}

/* Compares one case; returns 1 when the ids match. Prints the first few mismatches. */
static int check_case(const Tokenizer *t, const JsonValue *c, int line, int *n_shown, int *roundtrip_ok) {
    const JsonValue *text = json_get(c, "text"), *ids = json_get(c, "ids");
    if (!text || text->type != JSON_STRING || !ids || ids->type != JSON_ARRAY) return 0;
    int n = 0;
    int *got = tokenizer_encode(t, text->string, text->string_len, 0, &n);
    if (!got) return 0;
    int same = (size_t)n == ids->count;
    for (int i = 0; same && i < n; i++) same = ids->items[i].number == got[i];
    if (!same && (*n_shown)++ < 3) {
        printf("  mismatch on line %d: text \"%.60s\"\n", line, text->string);
        int *want = malloc((ids->count + 1) * sizeof *want);
        for (size_t i = 0; want && i < ids->count; i++) want[i] = (int)ids->items[i].number;
        if (want) print_ids("expected", want, (int)ids->count);
        print_ids("got     ", got, n);
        free(want);
    }
    size_t dlen = 0;
    char *back = tokenizer_decode(t, got, n, &dlen);
    if (!back || dlen != text->string_len || memcmp(back, text->string, dlen) != 0) {
        if (*roundtrip_ok) printf("  round trip fails on line %d: \"%.60s\"\n", line, text->string);
        *roundtrip_ok = 0;
    }
    free(back);
    free(got);
    return same;
}

static void test_reference_cases(const char *tok_path, const char *jsonl, const char *label) {
    char err[512] = "", name[128];
    Tokenizer *t = tokenizer_load(tok_path, err, sizeof err);
    snprintf(name, sizeof name, "%s load", label);
    if (!check(t != NULL, name, "%s", err)) return;
    size_t len;
    char *data = read_all(jsonl, &len);
    snprintf(name, sizeof name, "%s read cases", label);
    if (!check(data != NULL, name, "cannot read %s", jsonl)) { tokenizer_free(t); return; }
    int total = 0, equal = 0, shown = 0, roundtrip_ok = 1, bad_lines = 0;
    char *line = data;
    for (int line_no = 1; line < data + len; line_no++) {
        char *end = memchr(line, '\n', (size_t)(data + len - line));
        if (!end) end = data + len;
        if (end > line) {
            Error jerr = {{0}};
            JsonValue *c = json_parse(line, (size_t)(end - line), &jerr);
            if (!c) bad_lines++;
            total++;
            equal += c && check_case(t, c, line_no, &shown, &roundtrip_ok);
            json_free(c);
        }
        line = end + 1;
    }
    snprintf(name, sizeof name, "%s ids equal sentencepiece (%d/%d)", label, equal, total);
    check(total > 0 && equal == total && bad_lines == 0, name, "%d of %d cases differ, %d unreadable lines",
          total - equal, total, bad_lines);
    snprintf(name, sizeof name, "%s decode(encode(text)) == text", label);
    check(roundtrip_ok && total > 0, name, "round trip differs (first case printed above)");
    free(data);
    tokenizer_free(t);
}

/* The HF recipe's text: rows are lines, " \n" becomes "", rows joined by "\n\n". */
static char *wikitext_recipe(const char *raw, size_t raw_len, size_t *out_len) {
    char *out = malloc(3 * raw_len + 1);
    if (!out) return NULL;
    size_t n = 0;
    int first = 1;
    for (size_t i = 0; i < raw_len;) {
        const char *nl = memchr(raw + i, '\n', raw_len - i);
        size_t row_end = nl ? (size_t)(nl - raw) + 1 : raw_len;
        if (!first) { memcpy(out + n, "\n\n", 2); n += 2; }
        first = 0;
        if (!(row_end - i == 2 && raw[i] == ' ' && raw[i + 1] == '\n')) {
            memcpy(out + n, raw + i, row_end - i);
            n += row_end - i;
        }
        i = row_end;
    }
    *out_len = n;
    return out;
}

static int ids_match(const JsonValue *want, const int *got, size_t n) {
    if (!want || want->type != JSON_ARRAY || want->count != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (want->items[i].number != got[i]) return 0;
    return 1;
}

static void test_wikitext(void) {
    size_t raw_len = 0, ref_len = 0, text_len = 0;
    char *raw = read_all("data/wikitext-2-raw/wiki.test.raw", &raw_len);
    char *ref = read_all(REF_DIR "wikitext2-test-tokens.json", &ref_len);
    Error jerr = {{0}};
    JsonValue *want = ref ? json_parse(ref, ref_len, &jerr) : NULL;
    char err[512] = "";
    Tokenizer *t = tokenizer_load(TINYLLAMA_TOK, err, sizeof err);
    char *text = raw ? wikitext_recipe(raw, raw_len, &text_len) : NULL;
    if (check(raw && want && t && text, "wikitext2 inputs", "missing input: %s %s", err, jerr.msg)) {
        int n = 0;
        double t0 = now_seconds();
        int *ids = tokenizer_encode(t, text, text_len, 1, &n);
        double seconds = now_seconds() - t0;
        printf("  wikitext2 test: %zu bytes -> %d tokens in %.3f s\n", text_len, n, seconds);
        const JsonValue *n_tokens = json_get(want, "n_tokens");
        check(ids && n_tokens && n_tokens->number == n, "wikitext2 n_tokens",
              "got %d, expected %.0f", n, n_tokens ? n_tokens->number : -1.0);
        check(ids && n >= 64 && ids_match(json_get(want, "first_64"), ids, 64), "wikitext2 first_64", "differ");
        check(ids && n >= 16 && ids_match(json_get(want, "last_16"), ids + n - 16, 16), "wikitext2 last_16", "differ");
        size_t dlen = 0;
        char *back = ids ? tokenizer_decode(t, ids, n, &dlen) : NULL;
        check(back && dlen == text_len && memcmp(back, text, dlen) == 0, "wikitext2 decode(encode(text)) == text",
              "decoded %zu bytes of %zu", dlen, text_len);
        free(back);
        free(ids);
    }
    free(text);
    tokenizer_free(t);
    json_free(want);
    free(ref);
    free(raw);
}

/* ------------------------------------------------------------ hand-made files */

typedef struct {
    unsigned char data[4096];
    size_t len;
} Buf;

static void put_i32(Buf *b, int32_t v) {
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++) b->data[b->len++] = (unsigned char)(u >> (8 * i));
}

static void put_f32(Buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_i32(b, (int32_t)u);
}

static void put_header(Buf *b, int n, int bos, int eos, int unk, int pad, int flags) {
    memcpy(b->data, "KVQTOK01", 8);
    b->len = 8;
    put_i32(b, n); put_i32(b, bos); put_i32(b, eos); put_i32(b, unk); put_i32(b, pad); put_i32(b, flags);
}

static void put_piece(Buf *b, const char *text, float score, int type) {
    put_f32(b, score);
    put_i32(b, type);
    put_i32(b, (int32_t)strlen(text));
    memcpy(b->data + b->len, text, strlen(text));
    b->len += strlen(text);
}

#define SP "\xE2\x96\x81"
enum { N = 1, UNK = 2, CTRL = 3, USER = 4, UNUSED = 5 };

/* 0 <unk>, 1 <s>, 2 </s>, 3 ▁, 4 a, 5 b, 6 ab (UNUSED), 7 ▁ab, 8 <x> (USER_DEFINED), 9 ▁a */
static Buf small_vocab(int flags) {
    Buf b;
    put_header(&b, 10, 1, 2, 0, -1, flags);
    put_piece(&b, "<unk>", 0, UNK);
    put_piece(&b, "<s>", 0, CTRL);
    put_piece(&b, "</s>", 0, CTRL);
    put_piece(&b, SP, 0, N);
    put_piece(&b, "a", 0, N);
    put_piece(&b, "b", 0, N);
    put_piece(&b, "ab", -1, UNUSED);
    put_piece(&b, SP "ab", -2, N);
    put_piece(&b, "<x>", 0, USER);
    put_piece(&b, SP "a", -3, N);
    return b;
}

static int encodes_to(const Tokenizer *t, const char *text, const int *want, int n_want) {
    int n = 0;
    int *got = tokenizer_encode(t, text, strlen(text), 0, &n);
    int same = got && n == n_want && (n == 0 || memcmp(got, want, (size_t)n * sizeof *got) == 0);
    if (!same && got) print_ids(text, got, n);
    free(got);
    return same;
}

static int decodes_to(const Tokenizer *t, const int *ids, int n, const char *want) {
    size_t len = 0;
    char *got = tokenizer_decode(t, ids, n, &len);
    int same = got && len == strlen(want) && memcmp(got, want, len) == 0;
    if (!same && got) printf("    decoded \"%s\"\n", got);
    free(got);
    return same;
}

static void test_small_vocab(void) {
    char err[256] = "";
    Buf b = small_vocab(1);
    Tokenizer *t = tokenizer_load_memory(b.data, b.len, "small", err, sizeof err);
    if (!check(t != NULL, "small vocab loads", "%s", err)) return;
    check(tokenizer_vocab_size(t) == 10 && tokenizer_bos_id(t) == 1 && tokenizer_eos_id(t) == 2,
          "small vocab accessors", "wrong sizes/ids");
    /* "▁ab": ab (-1) beats ▁a (-3), then ▁ + ab -> ▁ab. */
    check(encodes_to(t, "ab", (int[]){7}, 1), "merge by score", "expected [7]");
    /* "▁abab": ab twice (leftmost first), ▁ab; the second ab is UNUSED -> a b. */
    check(encodes_to(t, "abab", (int[]){7, 4, 5}, 3), "UNUSED piece resegmented", "expected [7 4 5]");
    /* <x> is matched whole and never merged; c is unknown without byte fallback. */
    check(encodes_to(t, "a<x>b", (int[]){9, 8, 5}, 3), "USER_DEFINED piece kept whole", "expected [9 8 5]");
    check(encodes_to(t, "ac", (int[]){9, 0}, 2), "unknown character gives unk", "expected [9 0]");
    check(encodes_to(t, "", NULL, 0), "empty text gives no ids", "expected []");
    int n = 0;
    int *with_bos = tokenizer_encode(t, "", 0, 1, &n);
    check(with_bos && n == 1 && with_bos[0] == 1, "empty text with BOS", "expected [1]");
    free(with_bos);
    check(decodes_to(t, (int[]){1, 7, 4, 5, 2}, 5, "abab"), "decode drops controls and the dummy space", "");
    check(decodes_to(t, (int[]){3, 7}, 2, " ab"), "decode strips only the first space", "");
    check(decodes_to(t, (int[]){9, 0, -5, 99}, 4, "a \xE2\x81\x87 "), "decode: unk is \" \xE2\x81\x87 \", bad ids nothing", "");
    char piece[64];
    int k = tokenizer_piece_bytes(t, -1, 7, piece);
    check(k == 2 && memcmp(piece, "ab", 2) == 0, "piece_bytes at start drops the space", "got %d bytes", k);
    k = tokenizer_piece_bytes(t, 1, 7, piece);
    check(k == 2 && memcmp(piece, "ab", 2) == 0, "piece_bytes after BOS drops the space", "got %d bytes", k);
    k = tokenizer_piece_bytes(t, 4, 7, piece);
    check(k == 3 && memcmp(piece, " ab", 3) == 0, "piece_bytes mid-text keeps the space", "got %d bytes", k);
    check(strcmp(tokenizer_piece(t, 7), SP "ab") == 0 && strcmp(tokenizer_piece(t, 10), "") == 0,
          "tokenizer_piece", "wrong text");
    tokenizer_free(t);

    b = small_vocab(1 | 4);   /* remove_extra_whitespaces: "  a  b  " -> "▁a▁b" */
    t = tokenizer_load_memory(b.data, b.len, "small", err, sizeof err);
    check(t && encodes_to(t, "  a   b  ", (int[]){9, 3, 5}, 3), "remove_extra_whitespaces", "expected [9 3 5]");
    check(t && encodes_to(t, "   ", NULL, 0), "only spaces with remove_extra_whitespaces", "expected []");
    tokenizer_free(t);
}

/* A text that is both a reserved piece and a mergeable one (the file may hold it once in each, as
 * sentencepiece's two maps may): the merges find the mergeable piece, the final symbol's id is the
 * reserved one, as sentencepiece's PieceToId looks there first. */
static void test_reserved_before_mergeable(void) {
    char err[256] = "";
    Buf b;
    put_header(&b, 5, -1, -1, 0, -1, 1);
    put_piece(&b, "<unk>", 0, UNK);
    put_piece(&b, SP, 0, N);
    put_piece(&b, "a", 0, N);
    put_piece(&b, SP "a", -1, N);
    put_piece(&b, SP "a", 0, CTRL);
    Tokenizer *t = tokenizer_load_memory(b.data, b.len, "twice", err, sizeof err);
    check(t && encodes_to(t, "a", (int[]){4}, 1), "a text both reserved and mergeable encodes to the reserved id",
          "%s", t ? "expected [4]" : err);
    tokenizer_free(t);
}

/* Loading must fail with a message that names the file. */
static int rejects(const void *data, size_t len, const char *why) {
    char err[256] = "";
    Tokenizer *t = tokenizer_load_memory(data, len, "hostile.bin", err, sizeof err);
    int ok = t == NULL && strncmp(err, "hostile.bin: ", 13) == 0 && strchr(err, '\n') == NULL;
    if (!ok) printf("    %s: loaded=%d message \"%s\"\n", why, t != NULL, err);
    tokenizer_free(t);
    return ok;
}

static void test_hostile(void) {
    Buf good = small_vocab(1);
    int all = 1;
    for (size_t cut = 0; cut < good.len; cut++) all &= rejects(good.data, cut, "truncated");
    check(all, "truncated at every byte: rejected", "a truncation was accepted or badly reported");
    Buf b = good;
    b.data[b.len++] = 0;
    check(rejects(b.data, b.len, "trailing"), "trailing byte rejected", "");
    b = good; b.data[0] = 'X';
    check(rejects(b.data, b.len, "magic"), "bad magic rejected", "");
    Buf h;
    put_header(&h, 0, -1, -1, 0, -1, 0);
    check(rejects(h.data, h.len, "zero pieces"), "zero pieces rejected", "");
    put_header(&h, -3, 1, 2, 0, -1, 0);
    check(rejects(h.data, h.len, "negative pieces"), "negative piece count rejected", "");
    b = good; memcpy(b.data + 8, "\xff\xff\xff\x7f", 4);
    check(rejects(b.data, b.len, "huge"), "huge piece count rejected", "");
    b = good; b.data[8 + 4] = 10;   /* bos_id 10 of 10 pieces */
    check(rejects(b.data, b.len, "bos"), "bos_id out of range rejected", "");
    b = good; b.data[8 + 12] = 1;   /* unk_id -> a CONTROL piece */
    check(rejects(b.data, b.len, "unk type"), "unk_id not UNKNOWN rejected", "");
    b = good; b.data[8 + 20] = 0x10;
    check(rejects(b.data, b.len, "flags"), "unknown flag rejected", "");
    b = good; b.data[8 + 20] = 2;   /* byte_fallback without 256 byte pieces */
    check(rejects(b.data, b.len, "byte fallback"), "byte_fallback without byte pieces rejected", "");
    size_t first = 32;              /* first record: score, type, len, "<unk>" */
    b = good; memcpy(b.data + first + 8, "\xfb\xff\xff\xff", 4);
    check(rejects(b.data, b.len, "negative length"), "negative piece length rejected", "");
    b = good; memset(b.data + first + 8, 0, 4);
    check(rejects(b.data, b.len, "zero length"), "zero piece length rejected", "");
    b = good; memcpy(b.data + first + 8, "\x00\x00\x00\x40", 4);
    check(rejects(b.data, b.len, "huge length"), "huge piece length rejected", "");
    b = good; b.data[first + 4] = 7;
    check(rejects(b.data, b.len, "type"), "invalid piece type rejected", "");
    b = good; memcpy(b.data + first, "\x00\x00\xc0\x7f", 4);
    check(rejects(b.data, b.len, "nan"), "NaN score rejected", "");
    b = good; b.data[first + 12] = 0xC3;   /* "<unk>" -> "\xC3unk>" */
    check(rejects(b.data, b.len, "utf8"), "invalid UTF-8 piece rejected", "");
    put_header(&h, 3, -1, -1, 0, -1, 0);
    put_piece(&h, "<unk>", 0, UNK);
    put_piece(&h, "a", 0, N);
    put_piece(&h, "a", -1, N);
    check(rejects(h.data, h.len, "duplicate"), "repeated piece rejected", "");
    put_header(&h, 2, -1, -1, 0, -1, 0);
    put_piece(&h, "<unk>", 0, UNK);
    put_piece(&h, "<0x4G>", 0, 6);
    check(rejects(h.data, h.len, "byte piece"), "malformed byte piece rejected", "");
    check(rejects(NULL, 0, "null"), "empty buffer rejected", "");
    char err[256] = "";
    Tokenizer *t = tokenizer_load("tests/fixtures/no-such-tokenizer.bin", err, sizeof err);
    check(!t && strstr(err, "tests/fixtures/no-such-tokenizer.bin: ") == err, "missing file names the file",
          "got \"%s\"", err);
}

/* Random corruption of a real file: must load cleanly or fail cleanly (run with SANITIZE=1). */
static void test_corrupted_real_file(void) {
    size_t len;
    char *orig = read_all(STORIES_TOK, &len);
    if (!check(orig != NULL, "stories260K tokenizer readable", "cannot read %s", STORIES_TOK)) return;
    int all = 1;
    for (size_t cut = 0; cut < len; cut += 7) all &= rejects(orig, cut, "truncated real file");
    check(all, "real file truncated: rejected", "a truncation was accepted");
    char *copy = malloc(len);
    uint32_t rng = 12345;
    int loaded = 0, bad_messages = 0;
    for (int iter = 0; copy && iter < 2000; iter++) {
        memcpy(copy, orig, len);
        for (int k = 0; k < 1 + iter % 4; k++) {
            rng = rng * 1664525u + 1013904223u;
            copy[(rng >> 8) % len] ^= (char)(1u << (rng % 8));
        }
        char err[256] = "";
        Tokenizer *t = tokenizer_load_memory(copy, len, "fuzz", err, sizeof err);
        if (!t && (strncmp(err, "fuzz: ", 6) != 0 || strchr(err, '\n'))) bad_messages++;
        if (t) {
            loaded++;
            int n = 0;
            static const char input[] = "Once upon a time \xff\xfe there";
            int *ids = tokenizer_encode(t, input, sizeof input - 1, 1, &n);
            char *text = tokenizer_decode(t, ids, n, NULL);
            free(text);
            free(ids);
            tokenizer_free(t);
        }
    }
    free(copy);
    free(orig);
    printf("  %d of 2000 corrupted copies still loaded\n", loaded);
    check(bad_messages == 0, "corrupted copies: loaded or rejected with a message",
          "%d rejections without a proper message", bad_messages);
}

static void test_invalid_utf8_input(void) {
    char err[512] = "";
    Tokenizer *t = tokenizer_load(STORIES_TOK, err, sizeof err);
    if (!check(t != NULL, "stories260K loads for the invalid UTF-8 input", "%s", err)) return;
    const char text[] = "a\xff" "b\xC3(\xED\xA0\x80";   /* stray byte, bad continuation, surrogate */
    int n = 0;
    int *ids = tokenizer_encode(t, text, sizeof text - 1, 0, &n);
    size_t len = 0;
    char *back = tokenizer_decode(t, ids, n, &len);
    check(back && len == sizeof text - 1 && memcmp(back, text, len) == 0,
          "invalid UTF-8 input round-trips through byte pieces", "decoded %zu bytes", len);
    free(back);
    free(ids);
    tokenizer_free(t);
}

int main(void) {
    test_reference_cases(TINYLLAMA_TOK, REF_DIR "tokenizer-tinyllama.jsonl", "tinyllama");
    test_reference_cases(STORIES_TOK, REF_DIR "tokenizer-stories260K.jsonl", "stories260K");
    test_wikitext();
    test_small_vocab();
    test_reserved_before_mergeable();
    test_hostile();
    test_corrupted_real_file();
    test_invalid_utf8_input();
    return test_exit_code();
}
