/* eval/json_out.h: the JSON writers the reports share (ppl, validate, compress, kv-info):
 * one `"key": value` line each. Numbers that are not finite are written as null (JSON has no
 * inf or NaN); strings are escaped, because paths and names can hold quotes, backslashes and
 * control bytes, and a KV file's model_name is whatever the file says. */
#ifndef KVQ_JSON_OUT_H
#define KVQ_JSON_OUT_H

#include <stddef.h>
#include <stdio.h>

/* "s" with JSON escapes: the first n bytes of s. */
void json_out_quoted(FILE *f, const char *s, size_t n);
/* `  "key": v,` (no comma when last), v with 17 significant digits or null. */
void json_out_number(FILE *f, const char *key, double v, int last);
/* `  "key": "s",` (no comma when last). */
void json_out_string(FILE *f, const char *key, const char *s, int last);

#endif
