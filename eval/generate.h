/* eval/generate.h: the model and the tokenizer used directly, outside any evaluation: text
 * sampled and streamed from a prompt (./run generate), the logits of every position of a token
 * list (./run logits) and the ids of a text (./run tokenize). */
#ifndef KVQ_GENERATE_H
#define KVQ_GENERATE_H

#include <stdio.h>
#include "model/model.h"
#include "eval/calibration.h"

typedef struct {
    const char *prompt;
    int chat;                  /* wrap the prompt in TinyLlama-Chat's template */
    int steps;                 /* positions in all, the prompt's included (capped at the model's context) */
    float temperature, top_p;
    unsigned long long seed;
    KvCacheFlags kv;           /* how the cache stores keys and values, and --calib */
} GenerateOptions;

/* model_dir loaded, the prompt's text and then each sampled token's written to out as it comes
 * (flushed, so a reader sees the text grow) until o->steps positions or the end-of-sequence
 * token, then a newline; the prompt's and the generation's speeds on stats. */
int generate_from_dir(const char *model_dir, const GenerateOptions *o, FILE *out, FILE *stats, Error *err);

/* model_dir's weights run on the ids of ids_text (--tokens) from position 0, the cache in
 * schemes: the logits written to out_path as float32 [n][vocab], or without out_path the five
 * largest of each position printed on out ("pos 3: 450 (12.3456) ..."). *bad_ids: the failure
 * is ids_text's. */
int logits_from_dir(const char *model_dir, const char *ids_text, const KvCacheFlags *kv, const char *out_path, FILE *out,
                    int *bad_ids, Error *err);

/* "1,450,4996" (--tokens) -> n ids, each checked against the vocabulary; NULL with the reason. */
int *token_ids_parse(const char *text, int vocab, int *n, Error *err);

/* The ids of text, or of the file text_file's contents, with model_dir's tokenizer, printed
 * on one line; BOS first when bos. */
int tokenize_print(FILE *f, const char *model_dir, const char *text, const char *text_file, int bos, Error *err);

#endif
