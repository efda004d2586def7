/* tokenizer/tokenizer.c: encode and decode with sentencepiece's BPE algorithm
 * (bpe_model.cc, as of sentencepiece 0.1.97), for models with identity normalization
 * such as Llama's.
 *
 * Encode: normalize (dummy-prefix U+2581, ' ' -> U+2581), split into UTF-8 characters
 * (USER_DEFINED pieces are matched first and never merged), then repeatedly merge the
 * adjacent pair whose concatenation is a piece with the highest score, leftmost first on
 * ties. A max-heap of candidate pairs keeps this O(n log n); entries made stale by
 * earlier merges are recognised and skipped when popped, as in sentencepiece.
 * sentencepiece runs this over the whole text at once (it does not split on whitespace).
 * We get the same result faster by cutting the text only between two characters that
 * occur next to each other in no mergeable piece: no merge can ever span such a cut, so
 * the stretches between cuts evolve independently, each in the same order as globally,
 * and the heap stays small (cache-friendly). Leftover symbols not in the vocabulary become byte pieces (byte
 * fallback) or unk. Unlike sentencepiece, which turns each invalid UTF-8 byte into U+FFFD
 * while normalizing, an invalid byte here stays one symbol and so becomes its byte piece:
 * decode(encode(x)) == x holds for any bytes. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer.h"
#include "tokenizer/pieces.h"

static const char SPACE_SYMBOL[] = "\xE2\x96\x81";          /* U+2581, 3 bytes */
static const char UNKNOWN_SURFACE[] = " \xE2\x81\x87 ";     /* " ⁇ ", as sentencepiece decodes unk */

typedef struct {
    int start, len;     /* bytes of the normalized text; len 0 once merged into its left */
    int prev, next;     /* neighbours among live symbols, -1 at the ends */
    int frozen;         /* a USER_DEFINED piece: never merged */
    int cut;            /* no merge can join this symbol to the one before */
    int node;           /* merge-tree node (only when the vocabulary has UNUSED pieces) */
} Symbol;

typedef struct {
    float score;
    int left, right, size;   /* size: byte length of the pair when it was pushed */
} Pair;

typedef struct {
    Pair *items;
    size_t count, cap;
} PairHeap;

/* Merge tree, to split UNUSED pieces back into the pieces they were merged from. */
typedef struct {
    int start, len;
    int left, right;    /* child nodes, -1 for a single character */
} Node;

typedef struct {
    const Tokenizer *t;
    const char *text;   /* normalized */
    Symbol *sym;
    PairHeap heap;
    Node *nodes;        /* NULL unless t->has_unused */
    int n_nodes;
} Bpe;

/* ------------------------------------------------------------ priority queue */

/* Pair a is merged before b: higher score, then leftmost (sentencepiece's order). */
static int pair_before(const Pair *a, const Pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(PairHeap *h, Pair p) {
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        Pair *bigger = cap <= SIZE_MAX / sizeof *bigger ? realloc(h->items, cap * sizeof *bigger) : NULL;
        if (!bigger) return -1;
        h->items = bigger;
        h->cap = cap;
    }
    size_t i = h->count++;
    while (i > 0 && pair_before(&p, &h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = p;
    return 0;
}

static Pair heap_pop(PairHeap *h) {
    Pair top = h->items[0];
    Pair last = h->items[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count) break;
        if (child + 1 < h->count && pair_before(&h->items[child + 1], &h->items[child])) child++;
        if (!pair_before(&h->items[child], &last)) break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->count > 0) h->items[i] = last;
    return top;
}

/* ------------------------------------------------------------ normalization */

/* Normalized text as sentencepiece's identity normalizer makes it; malloc'd, NUL-free
 * length in *out_len. Empty input (after whitespace removal, when enabled) stays empty. */
static char *normalize(const Tokenizer *t, const char *text, size_t len, size_t *out_len) {
    int remove_extra = (t->flags & TOK_REMOVE_EXTRA_WHITESPACES) != 0;
    size_t i = 0;
    if (remove_extra)
        while (i < len && text[i] == ' ') i++;
    if (len > ((size_t)INT_MAX - 3) / 3) return NULL;     /* offsets are ints */
    char *out = malloc(3 * (len - i) + 4);
    if (!out) return NULL;
    size_t n = 0;
    if (i < len && (t->flags & TOK_ADD_DUMMY_PREFIX)) {
        memcpy(out, SPACE_SYMBOL, 3);
        n = 3;
    }
    int prev_space = remove_extra;
    for (; i < len; i++) {
        if (text[i] != ' ') {
            out[n++] = text[i];
            prev_space = 0;
        } else if (!prev_space) {
            memcpy(out + n, SPACE_SYMBOL, 3);
            n += 3;
            prev_space = remove_extra;
        }
    }
    if (remove_extra)
        while (n >= 3 && memcmp(out + n - 3, SPACE_SYMBOL, 3) == 0) n -= 3;
    *out_len = n;
    return out;
}

/* ------------------------------------------------------------ BPE */

/* Length of the longest USER_DEFINED piece starting at s, or 0. */
static int user_defined_prefix(const Tokenizer *t, const char *s, size_t avail) {
    size_t longest = (size_t)t->max_user_defined_len;
    if (longest > avail) longest = avail;
    for (int n = (int)longest; n > 0; n--) {
        int id = tok_find_mergeable(t, s, (size_t)n);
        if (id >= 0 && t->pieces[id].type == PIECE_USER_DEFINED) return n;
    }
    return 0;
}

/* Splits text[0..len) into characters; returns the symbol count. */
static int split_symbols(Bpe *b, size_t len) {
    int n = 0;
    size_t i = 0;
    uint32_t prev_cp = 0;
    int prev_plain = 0;     /* previous symbol is one valid character, not frozen */
    while (i < len) {
        Symbol *s = &b->sym[n];
        int ulen = b->t->max_user_defined_len ? user_defined_prefix(b->t, b->text + i, len - i) : 0;
        int clen = tok_utf8_char_len((const unsigned char *)b->text + i, len - i);
        s->frozen = ulen > 0;
        s->len = ulen > 0 ? ulen : clen > 0 ? clen : 1;   /* an invalid byte is a symbol */
        int plain = ulen == 0 && clen > 0;
        uint32_t cp = plain ? tok_utf8_decode((const unsigned char *)b->text + i, clen) : 0;
        s->cut = !(prev_plain && plain && tok_has_bigram(b->t, prev_cp, cp));
        prev_cp = cp;
        prev_plain = plain;
        s->start = (int)i;
        s->prev = n - 1;
        s->node = n;
        i += (size_t)s->len;
        s->next = i < len ? n + 1 : -1;
        if (b->nodes) b->nodes[n] = (Node){s->start, s->len, -1, -1};
        n++;
    }
    return n;
}

/* Pushes the pair (left, right) if their concatenation is a mergeable piece. */
static int maybe_push_pair(Bpe *b, int left, int right) {
    if (left < 0 || right < 0 || b->sym[right].cut || b->sym[left].frozen || b->sym[right].frozen) return 0;
    int size = b->sym[left].len + b->sym[right].len;
    int id = tok_find_mergeable(b->t, b->text + b->sym[left].start, (size_t)size);
    if (id < 0) return 0;
    return heap_push(&b->heap, (Pair){b->t->pieces[id].score, left, right, size});
}

/* Merges symbols [start, end) until no adjacent pair forms a piece.
 * Returns 0, or -1 on allocation failure. */
static int merge_stretch(Bpe *b, int start, int end) {
    for (int i = start + 1; i < end; i++)
        if (maybe_push_pair(b, i - 1, i) != 0) return -1;
    while (b->heap.count > 0) {
        Pair top = heap_pop(&b->heap);
        Symbol *l = &b->sym[top.left], *r = &b->sym[top.right];
        /* Stale: one side was merged away, or grew, since this pair was pushed. */
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;
        if (b->nodes) {
            b->nodes[b->n_nodes] = (Node){l->start, top.size, l->node, r->node};
            l->node = b->n_nodes++;
        }
        l->len = top.size;
        l->next = r->next;
        if (r->next >= 0) b->sym[r->next].prev = top.left;
        r->len = 0;
        if (maybe_push_pair(b, l->prev, top.left) != 0) return -1;
        if (maybe_push_pair(b, top.left, l->next) != 0) return -1;
    }
    return 0;
}

/* Merges each stretch between cuts on its own (see the top of this file). */
static int merge_all(Bpe *b, int n_symbols) {
    for (int start = 0; start < n_symbols;) {
        int end = start + 1;
        while (end < n_symbols && !b->sym[end].cut) end++;
        if (merge_stretch(b, start, end) != 0) return -1;
        start = end;
    }
    return 0;
}

/* Appends the ids of the text s[0..len): its piece, else byte pieces or unk. */
static void emit_text(const Tokenizer *t, const char *s, int len, int *ids, int *n) {
    int id = tok_find_any(t, s, (size_t)len);
    if (id >= 0 && t->pieces[id].type != PIECE_UNKNOWN) {
        ids[(*n)++] = id;
    } else if (t->flags & TOK_BYTE_FALLBACK) {
        for (int i = 0; i < len; i++) ids[(*n)++] = t->byte_id[(unsigned char)s[i]];
    } else {
        ids[(*n)++] = t->unk_id;
    }
}

/* Appends the ids of one final symbol, splitting UNUSED pieces along the merge tree
 * (sentencepiece's resegmentation). An explicit stack: the tree may be deep. */
static void emit_symbol(const Bpe *b, const Symbol *s, int *stack, int *ids, int *n) {
    if (!b->nodes) {
        emit_text(b->t, b->text + s->start, s->len, ids, n);
        return;
    }
    int depth = 0;
    stack[depth++] = s->node;
    while (depth > 0) {
        const Node *node = &b->nodes[stack[--depth]];
        int id = tok_find_any(b->t, b->text + node->start, (size_t)node->len);
        if (node->left >= 0 && id >= 0 && b->t->pieces[id].type == PIECE_UNUSED) {
            stack[depth++] = node->right;    /* left is emitted first */
            stack[depth++] = node->left;
        } else {
            emit_text(b->t, b->text + node->start, node->len, ids, n);
        }
    }
}

int *tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int *n_ids) {
    *n_ids = 0;
    if (!text && len > 0) return NULL;
    size_t norm_len = 0;
    char *norm = normalize(t, text ? text : "", len, &norm_len);
    Bpe b = {.t = t, .text = norm};
    /* Every id covers at least one byte of the normalized text. */
    int *ids = norm ? malloc((norm_len + 1) * sizeof *ids) : NULL;
    b.sym = ids ? malloc((norm_len + 1) * sizeof *b.sym) : NULL;
    int *stack = NULL;
    if (b.sym && t->has_unused) {
        b.nodes = malloc(2 * (norm_len + 1) * sizeof *b.nodes);
        stack = malloc(2 * (norm_len + 1) * sizeof *stack);
    }
    int ok = b.sym && (!t->has_unused || (b.nodes && stack));
    int n = 0;
    if (ok && add_bos && t->bos_id >= 0) ids[n++] = t->bos_id;
    if (ok && norm_len > 0) {
        int n_symbols = split_symbols(&b, norm_len);
        b.n_nodes = n_symbols;
        ok = merge_all(&b, n_symbols) == 0;
        for (int i = 0; ok && i >= 0; i = b.sym[i].next) emit_symbol(&b, &b.sym[i], stack, ids, &n);
    }
    free(b.heap.items);
    free(b.nodes);
    free(stack);
    free(b.sym);
    free(norm);
    if (!ok) {
        free(ids);
        return NULL;
    }
    *n_ids = n;
    return ids;
}

/* ------------------------------------------------------------ decode */

/* Writes the text of piece id into out (room for TOKENIZER_MAX_PIECE_BYTES bytes);
 * at_start drops the dummy-prefix space. Returns the byte count. */
static int piece_surface(const Tokenizer *t, int id, int at_start, char *out) {
    if (id < 0 || id >= t->n_pieces) return 0;
    const Piece *p = &t->pieces[id];
    switch (p->type) {
    case PIECE_CONTROL:
        return 0;
    case PIECE_UNKNOWN:
        memcpy(out, UNKNOWN_SURFACE, sizeof UNKNOWN_SURFACE - 1);
        return (int)sizeof UNKNOWN_SURFACE - 1;
    case PIECE_BYTE:
        out[0] = (char)strtol(p->text + 3, NULL, 16);   /* "<0xAB>": validated at load */
        return 1;
    default:
        break;
    }
    int i = 0, n = 0;
    if (at_start && (t->flags & TOK_ADD_DUMMY_PREFIX) && p->len >= 3 && memcmp(p->text, SPACE_SYMBOL, 3) == 0)
        i = 3;
    while (i < p->len) {
        if (p->len - i >= 3 && memcmp(p->text + i, SPACE_SYMBOL, 3) == 0) {
            out[n++] = ' ';
            i += 3;
        } else {
            out[n++] = p->text[i++];
        }
    }
    return n;
}

static int is_control(const Tokenizer *t, int id) {
    return id >= 0 && id < t->n_pieces && t->pieces[id].type == PIECE_CONTROL;
}

char *tokenizer_decode(const Tokenizer *t, const int *ids, int n, size_t *len) {
    if (len) *len = 0;
    if (n < 0 || (!ids && n > 0)) n = 0;
    if ((size_t)n > (SIZE_MAX - 1) / TOKENIZER_MAX_PIECE_BYTES) return NULL;
    char *out = malloc((size_t)n * TOKENIZER_MAX_PIECE_BYTES + 1);
    if (!out) return NULL;
    size_t used = 0;
    int at_start = 1;   /* until the first piece that is not a control token */
    for (int i = 0; i < n; i++) {
        used += (size_t)piece_surface(t, ids[i], at_start, out + used);
        if (!is_control(t, ids[i])) at_start = 0;
    }
    out[used] = '\0';
    if (len) *len = used;
    return out;
}

int tokenizer_piece_bytes(const Tokenizer *t, int prev, int id, char *buf) {
    int at_start = prev < 0 || prev >= t->n_pieces || is_control(t, prev);
    return piece_surface(t, id, at_start, buf);
}
