/* tokenizer/tokenizer_load.c: reads and validates a tokenizer file (format in
 * tokenizer/README.md) and fills the tables that look pieces up by text (tokenizer/pieces.c).
 * Every field is checked before use: the reader is meant to survive any input. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer.h"
#include "tokenizer/pieces.h"

#define MAGIC "KVQTOK01"
#define MAGIC_LEN 8
#define HEADER_BYTES (MAGIC_LEN + 6 * 4)
#define RECORD_HEADER_BYTES 12             /* score, type, len */
#define MIN_RECORD_BYTES (RECORD_HEADER_BYTES + 1)
#define MAX_PIECES (1 << 24)               /* far above any real vocabulary */

static void set_error(char *err, size_t errlen, const char *name, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    int n = snprintf(err, errlen, "%s: ", name);
    if (n < 0 || (size_t)n >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static int32_t read_i32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, sizeof v);   /* two's complement reinterpretation without UB */
    return v;
}

static float read_f32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int valid_utf8(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        int n = tok_utf8_char_len(s + i, len - i);
        if (n == 0) return 0;
        i += (size_t)n;
    }
    return 1;
}

/* "<0x0A>" -> 10; -1 if text is not a byte piece in sentencepiece's spelling. */
static int byte_piece_value(const char *text, int len) {
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(text, "<0x", 3) != 0 || text[5] != '>') return -1;
    const char *hi = text[3] ? strchr(hex, text[3]) : NULL;
    const char *lo = text[4] ? strchr(hex, text[4]) : NULL;
    if (!hi || !lo) return -1;
    return (int)(hi - hex) * 16 + (int)(lo - hex);
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    free(t->pieces);
    free(t->text_arena);
    free(t->mergeable);
    free(t->reserved);
    free(t->bigrams);
    free(t);
}

/* Reads the fixed header; returns 0 or -1 with err set. */
static int parse_header(Tokenizer *t, const unsigned char *buf, size_t len, const char *name,
                        char *err, size_t errlen) {
    if (len < HEADER_BYTES) {
        set_error(err, errlen, name, "file is %zu bytes, shorter than the %d-byte header", len, HEADER_BYTES);
        return -1;
    }
    if (memcmp(buf, MAGIC, MAGIC_LEN) != 0) {
        set_error(err, errlen, name, "not a kvq tokenizer file (bad magic)");
        return -1;
    }
    const unsigned char *h = buf + MAGIC_LEN;
    t->n_pieces = read_i32(h);
    t->bos_id = read_i32(h + 4);
    t->eos_id = read_i32(h + 8);
    t->unk_id = read_i32(h + 12);
    t->pad_id = read_i32(h + 16);
    t->flags = read_i32(h + 20);
    size_t max_by_size = (len - HEADER_BYTES) / MIN_RECORD_BYTES;
    if (t->n_pieces <= 0 || t->n_pieces > MAX_PIECES || (size_t)t->n_pieces > max_by_size) {
        set_error(err, errlen, name, "bad piece count %d for a %zu-byte file", t->n_pieces, len);
        return -1;
    }
    if (t->flags & ~(TOK_ADD_DUMMY_PREFIX | TOK_BYTE_FALLBACK | TOK_REMOVE_EXTRA_WHITESPACES)) {
        set_error(err, errlen, name, "unknown flag bits 0x%x", (unsigned)t->flags);
        return -1;
    }
    const int ids[4] = {t->bos_id, t->eos_id, t->unk_id, t->pad_id};
    static const char *const id_names[4] = {"bos_id", "eos_id", "unk_id", "pad_id"};
    for (int i = 0; i < 4; i++) {
        if (ids[i] < -1 || ids[i] >= t->n_pieces || (i == 2 && ids[i] < 0)) {
            set_error(err, errlen, name, "%s %d out of range (%d pieces)", id_names[i], ids[i], t->n_pieces);
            return -1;
        }
    }
    return 0;
}

/* Where reading the piece records has got to: the next record at buf[pos], the next piece's
 * text (NUL-terminated) to go at arena_pos in the text arena. */
typedef struct {
    const unsigned char *buf;
    size_t len, pos;
    char *arena_pos;
} RecordCursor;

/* Reads piece id's record at the cursor and moves it past; returns 0 or -1 with err set. */
static int parse_record(Tokenizer *t, int id, RecordCursor *in, const char *name, char *err, size_t errlen) {
    const unsigned char *buf = in->buf;
    size_t len = in->len;
    if (len - in->pos < RECORD_HEADER_BYTES) {
        set_error(err, errlen, name, "truncated at piece %d", id);
        return -1;
    }
    Piece *p = &t->pieces[id];
    p->score = read_f32(buf + in->pos);
    p->type = read_i32(buf + in->pos + 4);
    int32_t n = read_i32(buf + in->pos + 8);
    in->pos += RECORD_HEADER_BYTES;
    if (!isfinite(p->score)) {
        set_error(err, errlen, name, "piece %d has a non-finite score", id);
        return -1;
    }
    if (p->type < PIECE_NORMAL || p->type > PIECE_BYTE) {
        set_error(err, errlen, name, "piece %d has invalid type %d", id, p->type);
        return -1;
    }
    if (n <= 0 || n > TOKENIZER_MAX_PIECE_BYTES) {
        set_error(err, errlen, name, "piece %d has length %d (1..%d allowed)", id, (int)n,
                  TOKENIZER_MAX_PIECE_BYTES);
        return -1;
    }
    if (len - in->pos < (size_t)n) {
        set_error(err, errlen, name, "truncated in the text of piece %d", id);
        return -1;
    }
    if (!valid_utf8(buf + in->pos, (size_t)n)) {
        set_error(err, errlen, name, "piece %d is not valid UTF-8", id);
        return -1;
    }
    memcpy(in->arena_pos, buf + in->pos, (size_t)n);
    in->arena_pos[n] = '\0';
    p->text = in->arena_pos;
    p->len = n;
    in->arena_pos += n + 1;
    in->pos += (size_t)n;
    return 0;
}

/* Checks what depends on all pieces: types of special ids, byte pieces, duplicates. */
static int check_pieces(Tokenizer *t, const char *name, char *err, size_t errlen) {
    if (t->pieces[t->unk_id].type != PIECE_UNKNOWN) {
        set_error(err, errlen, name, "unk_id %d is not an UNKNOWN piece", t->unk_id);
        return -1;
    }
    int n_bytes = 0;
    for (int id = 0; id < t->n_pieces; id++) {
        const Piece *p = &t->pieces[id];
        if (p->type == PIECE_USER_DEFINED && p->len > t->max_user_defined_len)
            t->max_user_defined_len = p->len;
        if (p->type == PIECE_UNUSED) t->has_unused = 1;
        if (p->type == PIECE_BYTE) {
            int b = byte_piece_value(p->text, p->len);
            if (b < 0 || t->byte_id[b] >= 0) {
                set_error(err, errlen, name, "byte piece %d is malformed or repeated", id);
                return -1;
            }
            t->byte_id[b] = id;
            n_bytes++;
        }
        if (tok_insert_piece(t, id) != 0) {
            set_error(err, errlen, name, "piece %d repeats the text of an earlier piece", id);
            return -1;
        }
    }
    if ((t->flags & TOK_BYTE_FALLBACK) && n_bytes != 256) {
        set_error(err, errlen, name, "byte_fallback needs 256 byte pieces, found %d", n_bytes);
        return -1;
    }
    return 0;
}

/* Allocates the piece array, text arena and hash tables for t->n_pieces pieces. */
static int allocate(Tokenizer *t, size_t text_bytes) {
    size_t n = (size_t)t->n_pieces;
    size_t slots = 1;
    while (slots < 2 * n) slots <<= 1;          /* n <= 2^24, so no overflow */
    t->hash_mask = slots - 1;
    t->pieces = calloc(n, sizeof *t->pieces);
    t->text_arena = malloc(text_bytes);
    t->mergeable = malloc(slots * sizeof *t->mergeable);
    t->reserved = malloc(slots * sizeof *t->reserved);
    if (!t->pieces || !t->text_arena || !t->mergeable || !t->reserved) return -1;
    for (size_t i = 0; i < slots; i++) t->mergeable[i] = t->reserved[i] = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    return 0;
}

Tokenizer *tokenizer_load_memory(const void *data, size_t len, const char *name, char *err, size_t errlen) {
    const unsigned char *buf = data;
    if (!name) name = "(memory)";
    if (!buf && len > 0) {
        set_error(err, errlen, name, "no data");
        return NULL;
    }
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        set_error(err, errlen, name, "out of memory");
        return NULL;
    }
    if (parse_header(t, buf, len, name, err, errlen) != 0) goto fail;
    /* Piece texts with their NULs fit in the rest of the file plus one byte per piece. */
    if (allocate(t, len - HEADER_BYTES + (size_t)t->n_pieces) != 0) {
        set_error(err, errlen, name, "out of memory for %d pieces", t->n_pieces);
        goto fail;
    }
    RecordCursor in = {.buf = buf, .len = len, .pos = HEADER_BYTES, .arena_pos = t->text_arena};
    for (int id = 0; id < t->n_pieces; id++)
        if (parse_record(t, id, &in, name, err, errlen) != 0) goto fail;
    if (in.pos != len) {
        set_error(err, errlen, name, "%zu unexpected bytes after the last piece", len - in.pos);
        goto fail;
    }
    if (check_pieces(t, name, err, errlen) != 0) goto fail;
    if (tok_build_bigrams(t) != 0) {
        set_error(err, errlen, name, "out of memory");
        goto fail;
    }
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

/* Reads the whole file into a malloc'd buffer; returns 0 or -1 with err set. */
static int read_file(const char *path, unsigned char **out, size_t *out_len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_error(err, errlen, path, "cannot open (%s)", strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            unsigned char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed) {
        set_error(err, errlen, path, buf ? "read error" : "out of memory");
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

Tokenizer *tokenizer_load(const char *path, char *err, size_t errlen) {
    unsigned char *buf;
    size_t len;
    if (read_file(path, &buf, &len, err, errlen) != 0) return NULL;
    Tokenizer *t = tokenizer_load_memory(buf, len, path, err, errlen);
    free(buf);
    return t;
}

int tokenizer_vocab_size(const Tokenizer *t) { return t->n_pieces; }
int tokenizer_bos_id(const Tokenizer *t) { return t->bos_id; }
int tokenizer_eos_id(const Tokenizer *t) { return t->eos_id; }

const char *tokenizer_piece(const Tokenizer *t, int id) {
    return id >= 0 && id < t->n_pieces ? t->pieces[id].text : "";
}
