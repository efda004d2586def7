/* tests/test_json.c: model/formats/json.c on valid documents (escapes, surrogate pairs,
 * numbers, nesting, duplicates) and on invalid ones (truncation, bad escapes,
 * bad UTF-8, lone surrogates, deep nesting), which must fail with "byte N: ...".
 * Inputs are copied into exactly-sized, unterminated buffers so a sanitizer
 * build catches any read past the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/formats/json.h"
#include "tests/test.h"

/* Parses text[0..len) from an exact-size heap copy (no NUL after it). */
static JsonValue *parse_n(const char *text, size_t len, Error *err) {
    char *copy = malloc(len ? len : 1);
    memcpy(copy, text, len);
    err->msg[0] = '\0';
    JsonValue *v = json_parse(copy, len, err);
    free(copy);   /* the tree must not point into the input */
    return v;
}

static JsonValue *parse(const char *text, Error *err) { return parse_n(text, strlen(text), err); }

static void expect_invalid_n(const char *name, const char *text, size_t len) {
    Error err;
    JsonValue *v = parse_n(text, len, &err);
    check(v == NULL && strncmp(err.msg, "byte ", 5) == 0, name, "expected a 'byte N: ...' error, got %s '%s'",
          v ? "success" : "error", err.msg);
    json_free(v);
}

static void expect_invalid(const char *name, const char *text) { expect_invalid_n(name, text, strlen(text)); }

static void test_basic_document(void) {
    Error err;
    JsonValue *v = parse(" {\"a\": 1, \"b\" : [true, false, null, {}, []], \"c\":\"x\"}\r\n\t", &err);
    if (!check(v != NULL, "json object parses", "%s", err.msg)) return;
    const JsonValue *a = json_get(v, "a"), *b = json_get(v, "b"), *c = json_get(v, "c");
    check(v->type == JSON_OBJECT && v->count == 3 && strcmp(v->keys[2], "c") == 0, "json object keys in order",
          "count %zu", v->count);
    check(a && a->type == JSON_NUMBER && a->is_uint && a->uint_value == 1, "json member number", "bad a");
    check(b && b->type == JSON_ARRAY && b->count == 5 && b->items[0].type == JSON_BOOL && b->items[0].boolean &&
          b->items[1].type == JSON_BOOL && !b->items[1].boolean && b->items[2].type == JSON_NULL &&
          b->items[3].type == JSON_OBJECT && b->items[3].count == 0 && b->items[4].type == JSON_ARRAY &&
          b->items[4].count == 0, "json array of literals and empty containers", "bad b");
    check(c && c->type == JSON_STRING && strcmp(c->string, "x") == 0 && c->string_len == 1, "json member string",
          "bad c");
    check(json_get(v, "missing") == NULL && json_get(NULL, "a") == NULL && json_get(b, "a") == NULL,
          "json_get misses and NULL-safety", "unexpected hit");
    json_free(v);

    v = parse("{\"k\":1,\"k\":2}", &err);
    check(v && v->count == 2 && json_get(v, "k")->uint_value == 1, "json duplicate keys kept, first wins",
          "%s", err.msg);
    json_free(v);
    v = parse("\"top\"", &err);
    check(v && v->type == JSON_STRING && strcmp(v->string, "top") == 0, "json top-level scalar", "%s", err.msg);
    json_free(v);
}

static void expect_string(const char *name, const char *json, const char *want, size_t want_len) {
    Error err;
    JsonValue *v = parse(json, &err);
    check(v && v->type == JSON_STRING && v->string_len == want_len && memcmp(v->string, want, want_len) == 0 &&
          v->string[want_len] == '\0', name, "%s", v ? "wrong decoded bytes" : err.msg);
    json_free(v);
}

static void test_strings(void) {
    expect_string("json simple escapes", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8);
    expect_string("json \\u ASCII and 2-byte", "\"\\u0041\\u00e9\"", "A\xC3\xA9", 3);
    expect_string("json \\u 3-byte upper hex", "\"\\u20AC\"", "\xE2\x82\xAC", 3);
    expect_string("json surrogate pair", "\"\\uD83D\\uDE00\"", "\xF0\x9F\x98\x80", 4);
    expect_string("json max code point pair", "\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF", 4);
    expect_string("json \\u0000 kept with length", "\"a\\u0000b\"", "a\0b", 3);
    expect_string("json raw UTF-8 passes through", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\"",
                  "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", 13);
    expect_string("json empty string", "\"\"", "", 0);

    Error err;
    JsonValue *v = parse("{\"a\\u0000b\":1,\"a\":2}", &err);
    check(v && v->key_lens[0] == 3 && json_get(v, "a") == &v->items[1], "json key with NUL does not match prefix",
          "%s", err.msg);
    json_free(v);
}

static void test_numbers(void) {
    static const struct {
        const char *text;
        double value;
        int is_uint;
        uint64_t u;
    } cases[] = {
        {"0", 0, 1, 0},
        {"-0", 0, 0, 0},
        {"123", 123, 1, 123},
        {"-123", -123, 0, 0},
        {"1.5", 1.5, 0, 0},
        {"1.0", 1, 0, 0},
        {"1e3", 1000, 0, 0},
        {"1E-2", 0.01, 0, 0},
        {"-2.5e+3", -2500, 0, 0},
        {"0.000001", 1e-6, 0, 0},
        {"1e-400", 0, 0, 0},
        {"9007199254740993", 9007199254740992.0, 1, 9007199254740993ull},
        {"18446744073709551615", 18446744073709551615.0, 1, UINT64_MAX},
        {"18446744073709551616", 18446744073709551616.0, 0, 0},
        {"123456789012345678901234567890", 1.2345678901234568e29, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Error err;
        char name[96];
        snprintf(name, sizeof name, "json number %s", cases[i].text);
        JsonValue *v = parse(cases[i].text, &err);
        check(v && v->type == JSON_NUMBER && v->number == cases[i].value && v->is_uint == cases[i].is_uint &&
              (!v->is_uint || v->uint_value == cases[i].u), name, "%s",
              v ? "wrong value or is_uint" : err.msg);
        json_free(v);
    }
    Error err;
    JsonValue *v = parse("-0", &err);
    check(v && signbit(v->number), "json -0 keeps its sign", "lost sign");
    json_free(v);
}

/* open x n, then mid, then close x n. */
static char *repeat(const char *open, size_t n, const char *mid, const char *close) {
    size_t a = strlen(open), m = strlen(mid), b = strlen(close);
    char *s = malloc(n * (a + b) + m + 1), *p = s;
    for (size_t i = 0; i < n; i++, p += a) memcpy(p, open, a);
    memcpy(p, mid, m);
    p += m;
    for (size_t i = 0; i < n; i++, p += b) memcpy(p, close, b);
    *p = '\0';
    return s;
}

static void test_nesting(void) {
    Error err;
    char *s = repeat("[", JSON_MAX_DEPTH, "", "]");
    JsonValue *v = parse(s, &err);
    const JsonValue *w = v;
    int depth = 0;
    while (w && w->type == JSON_ARRAY && ++depth && w->count == 1) w = &w->items[0];
    check(v && depth == JSON_MAX_DEPTH, "json 64 nested arrays accepted", "depth %d: %s", depth, err.msg);
    json_free(v);
    free(s);

    s = repeat("[", JSON_MAX_DEPTH + 1, "", "]");
    expect_invalid("json 65 nested arrays rejected", s);
    free(s);
    s = repeat("{\"a\":", JSON_MAX_DEPTH, "1", "}");
    v = parse(s, &err);
    check(v != NULL, "json 64 nested objects accepted", "%s", err.msg);
    json_free(v);
    free(s);
    s = repeat("{\"a\":", JSON_MAX_DEPTH + 1, "1", "}");
    expect_invalid("json 65 nested objects rejected", s);
    free(s);
    s = repeat("[", 100000, "", "");
    expect_invalid("json 100000 '[' rejected", s);
    free(s);
    s = repeat("[", 100000, "", "]");
    expect_invalid("json 100000 balanced brackets rejected", s);
    free(s);
}

static void test_large(void) {
    /* A million-element array and a 10 MB string parse in linear time. */
    size_t n = 1000000;
    char *s = malloc(2 * n + 2);
    s[0] = '[';
    for (size_t i = 0; i < n; i++) {
        s[1 + 2 * i] = (char)('0' + i % 10);
        s[2 + 2 * i] = ',';
    }
    s[2 * n] = ']';
    Error err;
    JsonValue *v = parse_n(s, 2 * n + 1, &err);
    check(v && v->count == n && v->items[n - 1].uint_value == (n - 1) % 10, "json million-element array",
          "%s", err.msg);
    json_free(v);
    free(s);
    size_t m = 10u << 20;
    s = malloc(m + 2);
    memset(s, 'x', m + 2);
    s[0] = s[m + 1] = '"';
    v = parse_n(s, m + 2, &err);
    check(v && v->string_len == m, "json 10 MB string", "%s", err.msg);
    json_free(v);
    free(s);
}

static void test_invalid(void) {
    static const char *const cases[][2] = {
        {"empty input", ""},          {"only whitespace", "  \n"},   {"truncated object", "{\"a\":1"},
        {"truncated key", "{\"a"},     {"truncated array", "[1,"},    {"truncated literal", "tru"},
        {"trailing comma in object", "{\"a\":1,}"},                  {"trailing comma in array", "[1,]"},
        {"leading comma", "[,1]"},     {"missing colon", "{\"a\" 1}"}, {"unquoted key", "{a:1}"},
        {"single quotes", "['a']"},   {"leading zero", "01"},        {"bare dot", "1."},
        {"leading dot", ".5"},         {"lone minus", "-"},           {"plus sign", "+1"},
        {"empty exponent", "1e"},     {"hex number", "0x10"},        {"NaN", "NaN"},
        {"Infinity", "-Infinity"},    {"overflowing number", "1e400"},
        {"unterminated string", "\"abc"}, {"escaped closing quote", "\"abc\\\""},
        {"bad escape", "\"\\x\""},    {"bad \\u digits", "\"\\u12G4\""}, {"short \\u", "\"\\u12\""},
        {"raw newline in string", "\"a\nb\""}, {"raw tab in string", "\"a\tb\""},
        {"lone high surrogate", "\"\\uD83D\""}, {"high surrogate then letter", "\"\\uD83Dx\""},
        {"high surrogate then non-low", "\"\\uD83D\\u0041\""}, {"two high surrogates", "\"\\uD83D\\uD83D\""},
        {"lone low surrogate", "\"\\uDE00\""},
        {"non-UTF-8 byte", "\"a\xFF\""}, {"stray continuation byte", "\"\x80\""},
        {"overlong 2-byte", "\"\xC0\xAF\""}, {"overlong 3-byte", "\"\xE0\x80\xAF\""},
        {"overlong 4-byte", "\"\xF0\x80\x80\xAF\""}, {"UTF-8 encoded surrogate", "\"\xED\xA0\x80\""},
        {"above U+10FFFF", "\"\xF4\x90\x80\x80\""}, {"truncated UTF-8 sequence", "\"\xE2\x82\""},
        {"5-byte UTF-8 lead", "\"\xF8\x88\x80\x80\x80\""}, {"non-ASCII outside string", "[\xC3\xA9]"},
        {"byte order mark", "\xEF\xBB\xBF{}"}, {"trailing garbage", "{} x"}, {"two values", "1 2"},
        {"extra bracket", "[1]]"},    {"comment", "[1 /* c */]"},    {"capitalised literal", "True"},
        {"missing value", "{\"a\":}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "json rejects %s", cases[i][0]);
        expect_invalid(name, cases[i][1]);
    }
    expect_invalid_n("json rejects NUL byte in string", "\"a\0b\"", 5);
    expect_invalid_n("json rejects NUL after value", "{}\0", 3);

    Error err;
    JsonValue *v = parse("[1,]", &err);
    check(!v && strncmp(err.msg, "byte 3: ", 8) == 0, "json error names the byte offset", "got '%s'", err.msg);
    v = parse("{\"a\":\"\xC0\xAF\"}", &err);
    check(!v && strncmp(err.msg, "byte 6: ", 8) == 0, "json UTF-8 error offset", "got '%s'", err.msg);
}

static void test_utf8_valid(void) {
    check(json_utf8_valid("", 0) && json_utf8_valid("abc\xC3\xA9\xF0\x9F\x98\x80", 9) && json_utf8_valid("a\0b", 3),
          "json_utf8_valid accepts valid text", "rejected");
    check(!json_utf8_valid("\xC0\xAF", 2) && !json_utf8_valid("\xED\xB0\x80", 3) && !json_utf8_valid("\xC3", 1) &&
          !json_utf8_valid("\xF4\x90\x80\x80", 4), "json_utf8_valid rejects bad text", "accepted");
}

/* The typed getters: json_integer must refuse before converting (1e300 to long long is UB). */
static void test_typed_getters(void) {
    const char *text = "{\"n\": 7, \"neg\": -3, \"big\": 1e300, \"frac\": 2.5, \"s\": \"x\", "
                       "\"edge\": 9007199254740992, \"z\": -0.0, \"null\": null}";
    Error err;
    JsonValue *v = json_parse(text, strlen(text), &err);
    if (!check(v != NULL, "json typed getters: document parses", "%s", err.msg)) return;
    long long x = 42;
    check(!json_integer(v, "n", 0, 10, &x) && x == 7, "json_integer reads 7 within [0, 10]", "got %lld", x);
    check(!json_integer(v, "neg", -3, 0, &x) && x == -3, "json_integer takes the bounds themselves", "got %lld", x);
    check(!json_integer(v, "edge", 0, 1LL << 53, &x) && x == 1LL << 53, "json_integer reads 2^53 exactly",
          "got %lld", x);
    check(!json_integer(v, "z", 0, 1, &x) && x == 0, "json_integer reads -0.0 as 0", "got %lld", x);
    x = 42;
    int refused = json_integer(v, "n", 8, 10, &x) && json_integer(v, "neg", 0, 10, &x) &&
                  json_integer(v, "big", 0, 1LL << 53, &x) && json_integer(v, "frac", 0, 10, &x) &&
                  json_integer(v, "s", 0, 10, &x) && json_integer(v, "null", 0, 10, &x) &&
                  json_integer(v, "missing", 0, 10, &x) && json_integer(NULL, "n", 0, 10, &x);
    check(refused && x == 42, "json_integer refuses out of range, 1e300, fractions, strings, null, missing, NULL; "
          "out untouched", "x = %lld", x);
    check(json_number(v, "frac") == 2.5 && isnan(json_number(v, "s")) && isnan(json_number(v, "missing")) &&
          isnan(json_number(NULL, "n")), "json_number: the number, else NaN", "wrong");
    check(json_string(v, "s") && !strcmp(json_string(v, "s"), "x") && !json_string(v, "n") &&
          !json_string(v, "missing"), "json_string: the string, else NULL", "wrong");
    json_free(v);
}

/* json_truncated: every proper prefix of a document ends too soon (a reader then says
 * "truncated"); the document itself, and texts broken elsewhere, do not. */
static void test_truncated(void) {
    const char *doc = "{\"a\": [1, 2.5e3, \"x\\\"y\", true, null], \"b\": {\"c\": \"caf\u00e9\"}}\n";
    size_t n = strlen(doc);
    int wrong = -1;
    for (size_t k = 0; k + 1 < n && wrong < 0; k++)   /* the last byte is a newline: the prefix without it is whole */
        if (!json_truncated(doc, k)) wrong = (int)k;
    check(wrong < 0, "json_truncated: every prefix of a document, the empty one included", "prefix of %d bytes not", wrong);
    check(!json_truncated(doc, n) && !json_truncated(doc, n - 1), "json_truncated: the whole document is not", "");
    const char *broken[] = {"{\"a\": 1,, \"b\": 2}", "[1, 2] x", "{\"a\": tru}", "{\"a\": 01}"};
    int flagged = -1;
    for (int i = 0; i < 4; i++)
        if (json_truncated(broken[i], strlen(broken[i]))) flagged = i;
    check(flagged < 0, "json_truncated: a text broken before its end is not truncated", "'%s'", flagged >= 0 ? broken[flagged] : "");
}

int main(void) {
    test_truncated();
    test_basic_document();
    test_typed_getters();
    test_strings();
    test_numbers();
    test_nesting();
    test_large();
    test_invalid();
    test_utf8_valid();
    return test_exit_code();
}
