/* tokenizer/pieces.c: the Tokenizer's lookup tables (tokenizer/pieces.h): pieces by text, in two
 * open-addressing hash tables as sentencepiece keeps two maps, the set of character pairs found
 * inside mergeable pieces, and the UTF-8 reading both need. tokenizer_load.c fills the tables,
 * tokenizer.c looks pieces up in them. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/pieces.h"

int tok_utf8_char_len(const unsigned char *s, size_t avail) {
    if (avail == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;                        /* continuation byte, overlong C0/C1, or F5..FF */
    if ((size_t)n > avail) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return 0;   /* overlong */
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

uint32_t tok_utf8_decode(const unsigned char *s, int n) {
    static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = s[0] & lead_mask[n];
    for (int i = 1; i < n; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

/* FNV-1a: simple, and good enough for a table kept at most half full. */
static size_t hash_text(const char *text, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 16777619u;
    return h;
}

static int find_in(const Tokenizer *t, const int *table, const char *text, size_t len) {
    for (size_t slot = hash_text(text, len) & t->hash_mask;; slot = (slot + 1) & t->hash_mask) {
        int id = table[slot];
        if (id < 0) return -1;
        const Piece *p = &t->pieces[id];
        if ((size_t)p->len == len && memcmp(p->text, text, len) == 0) return id;
    }
}

int tok_find_mergeable(const Tokenizer *t, const char *text, size_t len) {
    if (len == 0 || len > TOKENIZER_MAX_PIECE_BYTES) return -1;
    return find_in(t, t->mergeable, text, len);
}

int tok_find_any(const Tokenizer *t, const char *text, size_t len) {
    if (len == 0 || len > TOKENIZER_MAX_PIECE_BYTES) return -1;
    int id = find_in(t, t->reserved, text, len);
    return id >= 0 ? id : find_in(t, t->mergeable, text, len);
}

static int is_mergeable_type(int type) {
    return type == PIECE_NORMAL || type == PIECE_USER_DEFINED || type == PIECE_UNUSED;
}

static size_t bigram_slot(const Tokenizer *t, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15u) >> 32) & t->bigram_mask;
}

int tok_has_bigram(const Tokenizer *t, uint32_t a, uint32_t b) {
    uint64_t key = tok_bigram_key(a, b);
    for (size_t slot = bigram_slot(t, key);; slot = (slot + 1) & t->bigram_mask) {
        if (t->bigrams[slot] == key) return 1;
        if (t->bigrams[slot] == 0) return 0;
    }
}

int tok_build_bigrams(Tokenizer *t) {
    size_t total = 0;
    for (int id = 0; id < t->n_pieces; id++) total += (size_t)t->pieces[id].len;
    size_t slots = 16;
    while (slots < 2 * total) slots <<= 1;     /* total < file size, so no overflow */
    t->bigrams = calloc(slots, sizeof *t->bigrams);
    if (!t->bigrams) return -1;
    t->bigram_mask = slots - 1;
    for (int id = 0; id < t->n_pieces; id++) {
        const Piece *p = &t->pieces[id];
        if (!is_mergeable_type(p->type)) continue;
        const unsigned char *s = (const unsigned char *)p->text;
        uint32_t prev = 0;
        for (int i = 0; i < p->len;) {
            int n = tok_utf8_char_len(s + i, (size_t)(p->len - i));   /* >0: validated */
            uint32_t cp = tok_utf8_decode(s + i, n);
            if (i > 0) {
                uint64_t key = tok_bigram_key(prev, cp);
                size_t slot = bigram_slot(t, key);
                while (t->bigrams[slot] != 0 && t->bigrams[slot] != key) slot = (slot + 1) & t->bigram_mask;
                t->bigrams[slot] = key;
            }
            prev = cp;
            i += n;
        }
    }
    return 0;
}

int tok_insert_piece(Tokenizer *t, int id) {
    const Piece *p = &t->pieces[id];
    int *table = is_mergeable_type(p->type) ? t->mergeable : t->reserved;
    if (find_in(t, table, p->text, (size_t)p->len) >= 0) return -1;
    size_t slot = hash_text(p->text, (size_t)p->len) & t->hash_mask;
    while (table[slot] >= 0) slot = (slot + 1) & t->hash_mask;
    table[slot] = id;
    return 0;
}

