/* eval/views.h: the views past the whole-window averages — damage by position (eval/position.h)
 * and per-layer attention error (eval/layer_error.h) — as ./run ppl prints them (text, --json),
 * as ppl-merge reads them back, and as a sweep's journal records carry them
 * (eval/sweep_journal.c), so shards, resumed sweeps and merges add them up exactly. */
#ifndef KVQ_VIEWS_H
#define KVQ_VIEWS_H

#include <stdio.h>
#include "eval/stats.h"
#include "model/formats/json.h"

/* ppl's text report: a table of the position buckets with tokens, and the per-layer errors. */
void views_ppl_text(FILE *f, const TokenSums *s);
/* ppl --json's lines, and those of each configuration in a sweep's results.json (each ending
 * with a comma): "position_sums" and "layer_error_sums" (what ppl-merge adds up) and the figures
 * "by_position", "layer_rel_error", "layer_rel_error_stderr"; each view only when complete. */
void views_json(FILE *f, const TokenSums *s);
/* Adds a ppl --json object's "position_sums" and "layer_error_sums" into s (absent: nothing;
 * the output of a kvq without them). */
int views_ppl_read(const JsonValue *j, TokenSums *s, const char *where, Error *err);

/* 1 when s's position buckets hold every scored token (0: some part was added without them,
 * a journal record written before they existed), and when s holds a per-layer error of every
 * scored token. */
int views_position_complete(const TokenSums *s);
int views_layer_complete(const TokenSums *s);

/* A journal record's part: `, "pos": [...]` and, when measured, `, "layer_error": {...}`. */
void views_record_write(FILE *f, const TokenSums *s);
/* Those members of a parsed record, kept as numbers in a pool the journal owns (pool: room for
 * at least as many doubles as the line has numbers; *used: how many this record took). */
typedef struct {
    int n_buckets;            /* -1: the record has no position sums */
    int n_layers;             /* 0: no per-layer error */
    long layer_rows;
    const double *values;     /* n_buckets x [bucket, n, agree, 5 sums], then the layers' sums and sums of squares */
} ViewsRecord;
int views_record_read(const JsonValue *r, double *pool, size_t *used, ViewsRecord *v, const char *where, Error *err);
/* Adds a record's views into s (the order of adding is the caller's: window order). */
void views_record_add(const ViewsRecord *v, TokenSums *s);

#endif
