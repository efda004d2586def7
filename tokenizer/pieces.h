/* tokenizer/pieces.h: the Tokenizer struct and its lookup tables (tokenizer/pieces.c), below
 * both tokenizer_load.c, which fills them from the file, and tokenizer.c, which encodes and
 * decodes with them. Not part of the public API. */
#ifndef KVQ_TOKENIZER_PIECES_H
#define KVQ_TOKENIZER_PIECES_H

#include <stddef.h>
#include <stdint.h>

/* The same typedef as tokenizer.h's (C11 allows it twice): the tables need not see the API. */
typedef struct Tokenizer Tokenizer;

/* sentencepiece's ModelProto.SentencePiece.Type */
enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3,
       PIECE_USER_DEFINED = 4, PIECE_UNUSED = 5, PIECE_BYTE = 6 };

/* Bits of the file's flags field. */
enum { TOK_ADD_DUMMY_PREFIX = 1, TOK_BYTE_FALLBACK = 2, TOK_REMOVE_EXTRA_WHITESPACES = 4 };

/* Longest piece text accepted: tokenizer_piece_bytes writes into 64 bytes. */
#define TOKENIZER_MAX_PIECE_BYTES 64

typedef struct {
    const char *text;   /* NUL-terminated, inside Tokenizer.text_arena */
    int len;            /* bytes, 1..TOKENIZER_MAX_PIECE_BYTES */
    int type;           /* PIECE_* */
    float score;        /* higher merges first */
} Piece;

struct Tokenizer {
    int n_pieces, bos_id, eos_id, unk_id, pad_id, flags;
    Piece *pieces;
    char *text_arena;
    /* Two open-addressing hash tables of piece ids (-1 = empty), as sentencepiece keeps two
     * maps: pieces that BPE may produce (NORMAL, USER_DEFINED, UNUSED) and reserved ones
     * (CONTROL, UNKNOWN, BYTE). Looking an id up by text checks reserved first, like
     * sentencepiece's PieceToId. */
    int *mergeable;
    int *reserved;
    size_t hash_mask;
    /* Every pair of adjacent characters inside a mergeable piece (keys from
     * tok_bigram_key, 0 = empty slot). No merge can span a pair of characters missing
     * here, so encode cuts the text there and merges each stretch on its own. */
    uint64_t *bigrams;
    size_t bigram_mask;
    int byte_id[256];           /* id of piece <0xXX>, or -1 */
    int max_user_defined_len;   /* 0 when there are no USER_DEFINED pieces */
    int has_unused;             /* any UNUSED piece: encode must resegment those */
};

/* Inserts piece id into its hash table (t->mergeable or t->reserved, each -1 filled, hash_mask
 * set); -1 when that table holds its text already (sentencepiece refuses those too). */
int tok_insert_piece(Tokenizer *t, int id);
/* Fills t->bigrams with the character pairs found inside mergeable pieces (texts valid UTF-8);
 * -1 when out of memory. */
int tok_build_bigrams(Tokenizer *t);
/* Id of a mergeable piece with this text, or -1. */
int tok_find_mergeable(const Tokenizer *t, const char *text, size_t len);
/* Id like sentencepiece's PieceToId: reserved first, then mergeable, else -1. */
int tok_find_any(const Tokenizer *t, const char *text, size_t len);
/* Set key of the character pair (a, b), code points. */
static inline uint64_t tok_bigram_key(uint32_t a, uint32_t b) { return ((uint64_t)a << 21 | b) + 1; }
/* Whether the pair (a, b) occurs inside some mergeable piece. */
int tok_has_bigram(const Tokenizer *t, uint32_t a, uint32_t b);
/* Decodes the valid UTF-8 character of length n (from tok_utf8_char_len) at s. */
uint32_t tok_utf8_decode(const unsigned char *s, int n);
/* Length (1..4) of the valid UTF-8 character at s[0..avail), or 0 if invalid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
int tok_utf8_char_len(const unsigned char *s, size_t avail);

#endif
