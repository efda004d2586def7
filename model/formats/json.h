/* model/formats/json.h: a small strict JSON parser (RFC 8259), enough for config.json,
 * safetensors headers and metadata sidecars.
 * The whole document lives in one arena: json_free() on the root frees it all.
 * Input must be valid UTF-8; nesting is limited (JSON_MAX_DEPTH) so hostile
 * input cannot exhaust the stack. */
#ifndef KVQ_JSON_H
#define KVQ_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "model/formats/error.h"

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue JsonValue;
struct JsonValue {
    JsonType type;
    int boolean;            /* JSON_BOOL */
    double number;          /* JSON_NUMBER */
    int is_uint;            /* JSON_NUMBER written as a plain non-negative integer that fits uint64 */
    uint64_t uint_value;    /* exact value when is_uint (offsets beyond 2^53 stay exact) */
    char *string;           /* JSON_STRING: decoded UTF-8, NUL-terminated */
    size_t string_len;      /*   its length in bytes (may contain NUL from \u0000) */
    size_t count;           /* JSON_ARRAY / JSON_OBJECT: number of items */
    JsonValue *items;       /*   the items (object values in file order) */
    char **keys;            /* JSON_OBJECT: keys[i] names items[i] */
    size_t *key_lens;       /*   byte length of keys[i] (a key may contain NUL from \u0000) */
};

/* Parses text[0..len). On failure returns NULL and sets err ("byte N: problem"). */
JsonValue *json_parse(const char *text, size_t len, Error *err);
void json_free(JsonValue *root);
/* 1 when text[0..len) is not a JSON document because it ends too soon (every prefix of a
 * document, the empty text included, where the value is not yet complete), so that a reader can
 * say "truncated" instead of quoting a parse error; 0 for a document and for other faults. */
int json_truncated(const char *text, size_t len);

/* Object member by key (first match; duplicate keys are kept), or NULL. NULL-safe on obj. */
const JsonValue *json_get(const JsonValue *obj, const char *key);

/* Typed members, NULL-safe on obj: the number, or NaN when the key is missing or holds another
 * type; the string, or NULL. */
double json_number(const JsonValue *obj, const char *key);
const char *json_string(const JsonValue *obj, const char *key);
/* The member as a whole number in [lo, hi] (|lo|, |hi| <= 2^53): 0 with *out set, or -1 when it
 * is missing, not a number, fractional or out of range. Checking before converting matters: a
 * double outside long long's range (or NaN) converted to it is undefined behaviour in C. */
int json_integer(const JsonValue *obj, const char *key, long long lo, long long hi, long long *out);

/* 1 when s[0..len) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF), else 0. */
int json_utf8_valid(const char *s, size_t len);

#endif
