/* eval/wikitext.c: build the evaluation text exactly as the HF recipe does, then tokenize. */
#include "eval/wikitext.h"
#include "model/formats/fileio.h"
#include <stdlib.h>
#include <string.h>

char *wikitext_hf_text(const char *raw, size_t len, size_t *out_len) {
    /* Each row grows by at most the two "\n" of the separator, so 3x is always enough. */
    char *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    size_t n = 0, start = 0;
    int first = 1;
    while (start < len) {
        const char *nl = memchr(raw + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - raw) + 1 : len;   /* the row keeps its "\n" */
        if (!first) { out[n++] = '\n'; out[n++] = '\n'; }
        first = 0;
        int blank = (end - start == 2 && raw[start] == ' ' && raw[start + 1] == '\n');
        if (!blank) {
            memcpy(out + n, raw + start, end - start);
            n += end - start;
        }
        start = end;
    }
    out[n] = 0;
    *out_len = n;
    return out;
}

int *load_eval_tokens(const char *path, const Tokenizer *tok, int hf_recipe, int *n_tokens, Error *err) {
    size_t len;
    char *raw = read_whole_file(path, (size_t)1 << 30, &len, err);
    if (!raw) return NULL;
    if (len == 0) {
        free(raw);
        error_set(err, "%s: the text file is empty", path);
        return NULL;
    }
    char *text = raw;
    if (hf_recipe) {
        text = wikitext_hf_text(raw, len, &len);
        free(raw);
        if (!text) { error_set(err, "%s: out of memory", path); return NULL; }
    }
    int *ids = tokenizer_encode(tok, text, len, 1, n_tokens);
    free(text);
    if (!ids) error_set(err, "%s: out of memory while tokenizing", path);
    return ids;
}
