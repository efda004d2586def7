/* eval/sweep_journal.h: a sweep's journal, DIR/journal.jsonl (eval/sweep_journal.c), for
 * eval/sweep.c alone: one (window, configuration) result a line, each sealed with its CRC-32C,
 * appended, read back and added up in (window, configuration) order. */
#ifndef KVQ_SWEEP_JOURNAL_H
#define KVQ_SWEEP_JOURNAL_H

#include "eval/sweep_settings.h"
#include "eval/views.h"

#define JOURNAL_FILE "journal.jsonl"

/* One non-empty bin of a record's KL histogram. */
typedef struct {
    int bin;
    long long count;
} BinCount;

/* One record of a journal, parsed once (journal_read): which window and configuration, and
 * what it adds to that configuration's totals. Its KL histogram is kept as its non-empty bins
 * (one window's tokens fill a few hundred of the KL_BINS), so a journal of thousands of
 * records holds about its text's size, not a whole histogram each. */
typedef struct {
    int window, config;
    const char *dir;
    long scored, top1_agree, tokens;
    double nll_sum, nll_sumsq, base_nll_sum, base_nll_sumsq, diff_sum, diff_sumsq;
    double kl_sum, kl_sumsq, kl_max, dp_sum, dp_sumsq, seconds;
    double code_bits[2], code_values[2];   /* entropy-coded bits and values cached (absent in older journals: 0) */
    const BinCount *bins;   /* into its Journal's bins */
    int n_bins;
    ViewsRecord views;      /* its sums by position and per layer, in its Journal's view_values */
} Record;

/* One journal's records. */
typedef struct {
    size_t len, good_len;   /* the file's bytes; good_len: up to the end of the last whole line */
    Record *records;
    int n_records;
    BinCount *bins;         /* every record's non-empty bins, record after record */
    double *view_values;    /* every record's views (ViewsRecord), record after record */
} Journal;

/* Appends configuration c's result on window w (cfg, its sums t, its forward-pass tokens and
 * seconds) to DIR/journal.jsonl as one sealed line (model/formats/fileio.h's append_record). */
int journal_append(const char *dir, int w, int c, const SweepConfig *cfg, const TokenSums *t, long tokens,
                   double seconds, Error *err);

/* Reads DIR/journal.jsonl (missing: empty), each whole line checked and parsed once: its CRC-32C
 * (model/formats/checked_line.h), then it must be a record of s, its window one of s's shard,
 * its configuration one of s's with the same schemes, its sums readable. A last line without
 * its newline is a torn append: left out, good_len says where the whole lines end. */
int journal_read(const char *dir, const SweepSettings *s, Journal *j, Error *err);
void journal_free(Journal *j);

/* Totals from the records of journals j[0..n): each (window, configuration) once, added in
 * window order. */
int journal_totals(const Journal *j, int n, const SweepSettings *s, SweepTotals *t, Error *err);

#endif
