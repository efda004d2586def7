/* tests/fuzz/fuzz_json.c: json_parse on arbitrary bytes. Accepted documents are
 * walked completely (every string and key read to its stated length) and must be
 * valid UTF-8 as json_utf8_valid says; rejected ones must give a one-line
 * "byte N: ..." message. */
#include <string.h>
#include "model/formats/json.h"
#include "tests/fuzz/fuzz.h"

/* Visits every node, reading every byte the tree claims to own; returns the node count. */
static size_t walk(const JsonValue *v, int depth) {
    fuzz_assert(depth <= JSON_MAX_DEPTH + 1, "tree deeper than JSON_MAX_DEPTH");
    size_t nodes = 1;
    volatile unsigned char sink = 0;
    switch (v->type) {
    case JSON_STRING:
        fuzz_assert(v->string[v->string_len] == '\0', "string not NUL-terminated");
        for (size_t i = 0; i < v->string_len; i++) sink ^= (unsigned char)v->string[i];
        fuzz_assert(json_utf8_valid(v->string, v->string_len), "decoded string is not UTF-8");
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        for (size_t i = 0; i < v->count; i++) {
            if (v->type == JSON_OBJECT) {
                for (size_t k = 0; k < v->key_lens[i]; k++) sink ^= (unsigned char)v->keys[i][k];
                fuzz_assert(v->keys[i][v->key_lens[i]] == '\0', "key not NUL-terminated");
                /* json_get must find this key or an earlier duplicate (first match wins). */
                if (strlen(v->keys[i]) == v->key_lens[i]) {
                    const JsonValue *got = json_get(v, v->keys[i]);
                    fuzz_assert(got && got <= &v->items[i], "json_get misses a present key");
                }
            }
            nodes += walk(&v->items[i], depth + 1);
        }
        break;
    case JSON_NUMBER:
        fuzz_assert(v->number == v->number, "number is NaN");
        break;
    default:
        break;
    }
    (void)sink;
    return nodes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Error err = {{0}};
    JsonValue *root = json_parse((const char *)data, size, &err);
    if (!root) {
        fuzz_assert(strncmp(err.msg, "byte ", 5) == 0 && fuzz_one_line(err.msg), "bad error message");
        return 0;
    }
    /* A document that parsed is valid UTF-8 as a whole. */
    fuzz_assert(json_utf8_valid((const char *)data, size), "accepted input is not UTF-8");
    walk(root, 0);
    json_free(root);
    return 0;
}
