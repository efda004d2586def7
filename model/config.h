/* model/config.h: the model's shape, read from a Hugging Face config.json. */
#ifndef KVQ_CONFIG_H
#define KVQ_CONFIG_H

#include <stddef.h>
#include "model/formats/error.h"

typedef struct {
    int dim;              /* hidden_size */
    int hidden_dim;       /* intermediate_size (SwiGLU width) */
    int n_layers;         /* num_hidden_layers */
    int n_heads;          /* num_attention_heads */
    int n_kv_heads;       /* num_key_value_heads (GQA: n_heads / n_kv_heads queries share a KV head) */
    int head_dim;         /* dim / n_heads */
    int vocab_size;
    int max_seq_len;      /* max_position_embeddings */
    float norm_eps;       /* rms_norm_eps */
    float rope_theta;
    int tied_embeddings;  /* tie_word_embeddings: lm_head reuses embed_tokens */
    int bos_id, eos_id;
} Config;

/* Reads and checks path (a config.json). Errors name the file and the field. */
int config_load(Config *c, const char *path, Error *err);
/* Same checks on text[0..len) already in memory; name is used in messages. */
int config_parse(Config *c, const char *text, size_t len, const char *name, Error *err);

#endif
