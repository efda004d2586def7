/* eval/scheme_list.h: ./run schemes — the KV-cache schemes that --kv-scheme, --k-scheme and
 * --v-scheme take, listed from quant/'s tables of codecs and modifiers. */
#ifndef KVQ_SCHEME_LIST_H
#define KVQ_SCHEME_LIST_H

#include <stdio.h>

/* The bases (one codec each) with the stored bits per value of their examples at head_dim 64,
 * then the modifiers. */
void print_scheme_list(FILE *f);

#endif
