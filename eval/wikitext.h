/* eval/wikitext.h: the token stream that perplexity is measured on. */
#ifndef KVQ_WIKITEXT_H
#define KVQ_WIKITEXT_H

#include <stddef.h>
#include "model/formats/error.h"
#include "tokenizer/tokenizer.h"

/* The HF perplexity recipe's text from a raw WikiText file: rows are the file's lines,
 * a line that is exactly " \n" is the empty row, every other row keeps its "\n", and
 * text = "\n\n".join(rows). Returns a malloc'd string of *out_len bytes. */
char *wikitext_hf_text(const char *raw, size_t len, size_t *out_len);

/* Reads path and tokenizes it with BOS first. hf_recipe = 1 applies the recipe above
 * (WikiText-2 and the HF protocol); 0 encodes the file as it is (llama.cpp's protocol). */
int *load_eval_tokens(const char *path, const Tokenizer *tok, int hf_recipe, int *n_tokens, Error *err);

#endif
