/* model/formats/json.c: a strict RFC 8259 JSON parser.
 *
 * How it works: a recursive-descent parser whose recursion is bounded by
 * JSON_MAX_DEPTH. While a container is open, its finished children wait on a
 * growable "pending" stack; when the container closes they are copied into one
 * exactly-sized array in the arena and popped. Every byte is therefore visited
 * a constant number of times: no quadratic behaviour on any input.
 *
 * Memory: all nodes, strings and arrays of one document live in a chain of
 * arena chunks. The root node is the first allocation of the first chunk, so
 * json_free(root) can find the chain from the root pointer alone.
 *
 * Numbers are converted with strtod, which reads the C locale's decimal point:
 * the library never calls setlocale, so that is '.'. */
#include "model/formats/json.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---------- arena ---------- */

typedef struct Chunk Chunk;
struct Chunk {
    Chunk *next;
    size_t used, cap;
};

#define ARENA_ALIGN (_Alignof(max_align_t))
/* Chunk data starts after the header, rounded up so every node is aligned. */
#define CHUNK_HDR ((sizeof(Chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)
#define CHUNK_MIN 4096
#define CHUNK_GROW_MAX (1u << 20)

typedef struct {
    Chunk *first, *cur;
} Arena;

static void *arena_alloc(Arena *a, size_t n) {
    if (n > SIZE_MAX - ARENA_ALIGN - CHUNK_HDR) return NULL;
    n = (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (!a->cur || a->cur->cap - a->cur->used < n) {
        size_t cap = a->cur ? a->cur->cap * 2 : CHUNK_MIN;
        if (cap > CHUNK_GROW_MAX) cap = CHUNK_GROW_MAX;
        if (cap < n) cap = n;   /* a big string gets a chunk of its own */
        Chunk *c = malloc(CHUNK_HDR + cap);
        if (!c) return NULL;
        c->next = NULL;
        c->used = 0;
        c->cap = cap;
        if (a->cur) a->cur->next = c; else a->first = c;
        a->cur = c;
    }
    void *p = (char *)a->cur + CHUNK_HDR + a->cur->used;
    a->cur->used += n;
    return p;
}

static void arena_free(Chunk *c) {
    while (c) {
        Chunk *next = c->next;
        free(c);
        c = next;
    }
}

/* ---------- UTF-8 ---------- */

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0 when it is
 * invalid: stray continuation bytes, overlong forms, UTF-16 surrogates encoded
 * in UTF-8, code points above U+10FFFF, truncated sequences. */
static size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;        /* overlong */
        if (c == 0xED) hi = 0x9F;        /* surrogates D800..DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;        /* overlong */
        if (c == 0xF4) hi = 0x8F;        /* above U+10FFFF */
    } else {
        return 0;
    }
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

int json_utf8_valid(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq_len(u + i, len - i);
        if (!n) return 0;
        i += n;
    }
    return 1;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------- parser state ---------- */

typedef struct {
    char *key;
    size_t len;
} Key;

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    Arena arena;
    JsonValue *vals;         /* children of the open containers, innermost last */
    size_t n_vals, cap_vals;
    Key *keys;               /* keys of the open objects' children */
    size_t n_keys, cap_keys;
    Error *err;
    int ran_out;             /* the failure was the end of the input (json_truncated) */
} Parser;

static int fail(Parser *p, size_t at, const char *fmt, ...) {
    if (at >= p->len) p->ran_out = 1;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return error_set(p->err, "byte %zu: %s", at, what);
}

/* Grows a pending stack (elements of size elem) so it can take one more. */
static int grow(Parser *p, void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t new_cap = *cap ? *cap * 2 : 64;
    if (new_cap > SIZE_MAX / elem) return fail(p, p->pos, "out of memory");
    void *q = realloc(*arr, new_cap * elem);
    if (!q) return fail(p, p->pos, "out of memory");
    *arr = q;
    *cap = new_cap;
    return 0;
}

static int push_value(Parser *p, const JsonValue *v) {
    if (grow(p, (void **)&p->vals, &p->cap_vals, p->n_vals, sizeof *p->vals)) return -1;
    p->vals[p->n_vals++] = *v;
    return 0;
}

static int push_key(Parser *p, char *key, size_t len) {
    if (grow(p, (void **)&p->keys, &p->cap_keys, p->n_keys, sizeof *p->keys)) return -1;
    p->keys[p->n_keys].key = key;
    p->keys[p->n_keys].len = len;
    p->n_keys++;
    return 0;
}

static void *palloc(Parser *p, size_t n) {
    void *q = arena_alloc(&p->arena, n);
    if (!q) fail(p, p->pos, "out of memory");
    return q;
}

static void skip_ws(Parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int unexpected(Parser *p) {
    if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of input");
    unsigned char c = p->s[p->pos];
    if (c >= 0x21 && c < 0x7F) return fail(p, p->pos, "unexpected character '%c'", c);
    return fail(p, p->pos, "unexpected byte 0x%02X", c);
}

/* ---------- strings ---------- */

static int hex4(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i];
        int d;
        if (c >= '0' && c <= '9') d = (int)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (int)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (int)(c - 'A' + 10);
        else return -1;
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* Decodes the \u escape at s[i] (pointing at the backslash) up to end, including
 * a following low surrogate. Returns the bytes consumed, or 0 after an error. */
static size_t unicode_escape(Parser *p, size_t i, size_t end, uint32_t *cp) {
    if (end - i < 6 || hex4(p->s + i + 2, cp)) {
        fail(p, i, "bad \\u escape (need 4 hex digits)");
        return 0;
    }
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) {
        fail(p, i, "lone low surrogate \\u%04X", (unsigned)*cp);
        return 0;
    }
    if (*cp < 0xD800 || *cp > 0xDBFF) return 6;
    uint32_t low;
    if (end - i < 12 || p->s[i + 6] != '\\' || p->s[i + 7] != 'u' ||
        hex4(p->s + i + 8, &low) || low < 0xDC00 || low > 0xDFFF) {
        fail(p, i, "lone high surrogate \\u%04X", (unsigned)*cp);
        return 0;
    }
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    return 12;
}

/* Parses the string starting at the opening quote into a fresh arena copy. */
static int parse_string(Parser *p, char **out, size_t *out_len) {
    size_t open = p->pos, end = open + 1;
    /* Find the closing quote first so the decoded copy can be sized exactly once
     * (escapes only ever shrink the text). */
    while (end < p->len && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->len) {
        p->ran_out = 1;
        return fail(p, open, "unterminated string");
    }
    char *dst = palloc(p, end - open);
    if (!dst) return -1;
    size_t n = 0;
    for (size_t i = open + 1; i < end;) {
        unsigned char c = p->s[i];
        if (c < 0x20) return fail(p, i, "control character 0x%02X in string", c);
        if (c >= 0x80) {
            size_t k = utf8_seq_len(p->s + i, end - i);
            if (!k) return fail(p, i, "invalid UTF-8 byte 0x%02X in string", c);
            memcpy(dst + n, p->s + i, k);
            n += k;
            i += k;
            continue;
        }
        if (c != '\\') {
            dst[n++] = (char)c;
            i++;
            continue;
        }
        unsigned char e = p->s[i + 1];   /* i + 1 < end: the pre-scan skipped it */
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            dst[n++] = decoded[simple - "\"\\/bfnrt"];
            i += 2;
        } else if (e == 'u') {
            uint32_t cp;
            size_t used = unicode_escape(p, i, end, &cp);
            if (!used) return -1;
            n += utf8_encode(cp, dst + n);
            i += used;
        } else {
            return fail(p, i, "bad escape '\\%c'", e >= 0x21 && e < 0x7F ? e : '?');
        }
    }
    dst[n] = '\0';
    *out = dst;
    *out_len = n;
    p->pos = end + 1;
    return 0;
}

/* ---------- numbers ---------- */

static int is_digit(Parser *p, size_t i) {
    return i < p->len && p->s[i] >= '0' && p->s[i] <= '9';
}

static int parse_number(Parser *p, JsonValue *v) {
    size_t start = p->pos, i = start;
    int plain = 1;   /* no sign, fraction or exponent: a candidate for is_uint */
    if (p->s[i] == '-') { plain = 0; i++; }
    if (!is_digit(p, i)) return fail(p, i, "expected a digit");
    if (p->s[i] == '0' && is_digit(p, i + 1)) return fail(p, i, "leading zero in number");
    while (is_digit(p, i)) i++;
    if (i < p->len && p->s[i] == '.') {
        plain = 0;
        if (!is_digit(p, ++i)) return fail(p, i, "expected a digit after '.'");
        while (is_digit(p, i)) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        plain = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!is_digit(p, i)) return fail(p, i, "expected a digit in exponent");
        while (is_digit(p, i)) i++;
    }
    memset(v, 0, sizeof *v);
    v->type = JSON_NUMBER;
    if (plain) {
        uint64_t u = 0;
        int fits = 1;
        for (size_t k = start; k < i && fits; k++) {
            uint64_t d = (uint64_t)(p->s[k] - '0');
            if (u > (UINT64_MAX - d) / 10) fits = 0;
            else u = u * 10 + d;
        }
        v->is_uint = fits;
        v->uint_value = fits ? u : 0;
    }
    /* strtod needs a NUL-terminated copy: the input need not be terminated. */
    char small[64], *buf = small;
    size_t n = i - start;
    if (n >= sizeof small && !(buf = malloc(n + 1))) return fail(p, start, "out of memory");
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    v->number = strtod(buf, NULL);
    if (buf != small) free(buf);
    if (!isfinite(v->number)) return fail(p, start, "number out of range");
    p->pos = i;
    return 0;
}

/* ---------- values ---------- */

static int parse_value(Parser *p, int depth, JsonValue *v);

static int parse_literal(Parser *p, const char *word, JsonValue *v) {
    size_t n = strlen(word), left = p->len - p->pos;
    if (left < n && memcmp(p->s + p->pos, word, left) == 0) p->ran_out = 1;   /* "tr" at the end: cut short */
    if (left < n || memcmp(p->s + p->pos, word, n) != 0) return unexpected(p);
    memset(v, 0, sizeof *v);
    p->pos += n;
    return 0;
}

/* Moves the children pending since index `from` into an arena array. */
static int collect_items(Parser *p, size_t from, JsonValue *v) {
    v->count = p->n_vals - from;
    if (v->count) {
        if (v->count > SIZE_MAX / sizeof(JsonValue)) return fail(p, p->pos, "out of memory");
        v->items = palloc(p, v->count * sizeof(JsonValue));
        if (!v->items) return -1;
        memcpy(v->items, p->vals + from, v->count * sizeof(JsonValue));
    }
    p->n_vals = from;
    return 0;
}

static int parse_array(Parser *p, int depth, JsonValue *v) {
    size_t from = p->n_vals;
    p->pos++;   /* '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            JsonValue item;
            if (parse_value(p, depth, &item) || push_value(p, &item)) return -1;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->pos < p->len && p->s[p->pos] == ']') { p->pos++; break; }
            if (p->pos >= p->len) return unexpected(p);
            return fail(p, p->pos, "expected ',' or ']'");
        }
    }
    memset(v, 0, sizeof *v);
    v->type = JSON_ARRAY;
    return collect_items(p, from, v);
}

static int parse_member(Parser *p, int depth) {
    char *key;
    size_t key_len;
    JsonValue item;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        if (p->pos >= p->len) return unexpected(p);
        return fail(p, p->pos, "expected a string key");
    }
    if (parse_string(p, &key, &key_len)) return -1;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') {
        if (p->pos >= p->len) return unexpected(p);
        return fail(p, p->pos, "expected ':'");
    }
    p->pos++;
    if (parse_value(p, depth, &item)) return -1;
    if (push_key(p, key, key_len) || push_value(p, &item)) return -1;
    return 0;
}

static int parse_object(Parser *p, int depth, JsonValue *v) {
    size_t from = p->n_vals, kfrom = p->n_keys;
    p->pos++;   /* '{' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            if (parse_member(p, depth)) return -1;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->pos < p->len && p->s[p->pos] == '}') { p->pos++; break; }
            if (p->pos >= p->len) return unexpected(p);
            return fail(p, p->pos, "expected ',' or '}'");
        }
    }
    memset(v, 0, sizeof *v);
    v->type = JSON_OBJECT;
    size_t n = p->n_keys - kfrom;
    if (n) {
        v->keys = palloc(p, n * sizeof *v->keys);
        v->key_lens = palloc(p, n * sizeof *v->key_lens);
        if (!v->keys || !v->key_lens) return -1;
        for (size_t i = 0; i < n; i++) {
            v->keys[i] = p->keys[kfrom + i].key;
            v->key_lens[i] = p->keys[kfrom + i].len;
        }
    }
    p->n_keys = kfrom;
    return collect_items(p, from, v);
}

static int parse_value(Parser *p, int depth, JsonValue *v) {
    skip_ws(p);
    if (p->pos >= p->len) return unexpected(p);
    unsigned char c = p->s[p->pos];
    if (c == '[' || c == '{') {
        if (depth >= JSON_MAX_DEPTH)
            return fail(p, p->pos, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        return c == '[' ? parse_array(p, depth + 1, v) : parse_object(p, depth + 1, v);
    }
    if (c == '"') {
        memset(v, 0, sizeof *v);
        v->type = JSON_STRING;
        return parse_string(p, &v->string, &v->string_len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    if (c == 't') {
        if (parse_literal(p, "true", v)) return -1;
        v->type = JSON_BOOL;
        v->boolean = 1;
        return 0;
    }
    if (c == 'f') {
        if (parse_literal(p, "false", v)) return -1;
        v->type = JSON_BOOL;
        return 0;
    }
    if (c == 'n') {
        if (parse_literal(p, "null", v)) return -1;
        v->type = JSON_NULL;
        return 0;
    }
    return unexpected(p);
}

/* The parse itself; *ran_out (may be NULL): it failed because the input ended. */
static JsonValue *parse_document(const char *text, size_t len, int *ran_out, Error *err) {
    Parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.len = text ? len : 0;
    p.err = err;
    /* The root is the arena's first allocation: json_free finds the chain through it. */
    JsonValue *root = palloc(&p, sizeof *root);
    int rc = root ? parse_value(&p, 0, root) : -1;
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos != p.len) rc = fail(&p, p.pos, "unexpected data after the JSON value");
    }
    free(p.vals);
    free(p.keys);
    if (ran_out) *ran_out = rc != 0 && p.ran_out;
    if (rc != 0) {
        arena_free(p.arena.first);
        return NULL;
    }
    return root;
}

JsonValue *json_parse(const char *text, size_t len, Error *err) { return parse_document(text, len, NULL, err); }

int json_truncated(const char *text, size_t len) {
    int ran_out;
    json_free(parse_document(text, len, &ran_out, NULL));
    return ran_out;
}

void json_free(JsonValue *root) {
    if (root) arena_free((Chunk *)((char *)root - CHUNK_HDR));
}

const JsonValue *json_get(const JsonValue *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->count; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

double json_number(const JsonValue *obj, const char *key) {
    const JsonValue *v = json_get(obj, key);
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

const char *json_string(const JsonValue *obj, const char *key) {
    const JsonValue *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->string : NULL;
}

int json_integer(const JsonValue *obj, const char *key, long long lo, long long hi, long long *out) {
    double x = json_number(obj, key);
    if (!(x >= (double)lo && x <= (double)hi && x == floor(x))) return -1;   /* NaN fails every comparison */
    *out = (long long)x;
    return 0;
}
