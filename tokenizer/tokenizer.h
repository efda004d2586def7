/* tokenizer/tokenizer.h: SentencePiece-BPE tokenizer as Llama uses it.
 * Reads the tokenizer file that export/ writes (format: tokenizer/README.md).
 * Stands alone: depends on nothing else in the project. */
#ifndef KVQ_TOKENIZER_H
#define KVQ_TOKENIZER_H

#include <stddef.h>

typedef struct Tokenizer Tokenizer;

/* Loads path. On failure returns NULL and writes "path: problem" into err. */
Tokenizer *tokenizer_load(const char *path, char *err, size_t errlen);
/* Same from a memory buffer (for fuzzing); name is used in messages. */
Tokenizer *tokenizer_load_memory(const void *buf, size_t len, const char *name, char *err, size_t errlen);
void tokenizer_free(Tokenizer *t);

int tokenizer_vocab_size(const Tokenizer *t);
int tokenizer_bos_id(const Tokenizer *t);
int tokenizer_eos_id(const Tokenizer *t);

/* Encodes text[0..len) (UTF-8; invalid bytes go through byte fallback).
 * Returns a malloc'd array of *n_ids ids (BOS first when add_bos), or NULL on allocation failure. */
int *tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int *n_ids);

/* Text of ids[0..n): control tokens give nothing, byte pieces give their byte,
 * the dummy-prefix space of the first piece is removed (as sentencepiece does).
 * Returns a malloc'd NUL-terminated string, its length in *len. */
char *tokenizer_decode(const Tokenizer *t, const int *ids, int n, size_t *len);

/* For streaming: the bytes token `id` adds after token `prev` (prev = -1 or BOS at the
 * start, where the leading space is dropped). Writes into buf (at least 64 bytes)
 * and returns the byte count. */
int tokenizer_piece_bytes(const Tokenizer *t, int prev, int id, char *buf);

/* Piece text as stored (U+2581 for spaces, "<0x0A>" for bytes), for debugging. */
const char *tokenizer_piece(const Tokenizer *t, int id);

#endif
