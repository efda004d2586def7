/* eval/probe.h: probes of what a quantized KV cache breaks that perplexity hides — each run with
 * an fp32 cache and with every scheme given, on the same seeded inputs:
 *
 *   copy      seeded sequences of S random word pieces, then the same S again: from the second
 *             copy's second token on, only reading the first copy through the cache (induction)
 *             predicts the next token. Top-1 accuracy and mean NLL on those tokens, per S.
 *   passkey   a five-digit number in a sentence buried at a depth of 0..100% of filler text from
 *             the calibration split, the question at the end, the digits decoded greedily:
 *             exact matches per (length, depth).
 *   diverge   seeded prompts from the test split, M tokens generated greedily: tokens until the
 *             scheme's continuation first differs from the fp32 cache's, and the share identical.
 *
 * Every figure is a count or a sum (ProbeCell), so the reports derive means and standard errors
 * from them alone. eval/probe_report.c prints and writes them; eval/probe_sweep.c runs them on a
 * sweep's configurations. The types, and what the tasks' files share, are in eval/probe_common.h. */
#ifndef KVQ_PROBE_H
#define KVQ_PROBE_H

#include <stdio.h>
#include "eval/probe_common.h"
#include "eval/calibration.h"

/* Fills o's defaults for model m (ctx, lengths, depths, sequences, ...) and checks them: a length
 * that does not fit ctx is refused, naming it. */
int probe_options_resolve(ProbeOptions *o, const Model *m, Error *err);

/* Runs o's task on m: an fp32 cache, then each scheme i (schemes[i]: its keys, values and the
 * fitted bases' calibration), one cache held at a time. r->cells allocated (probe_result_free). */
int probe_run(const Model *m, const Tokenizer *tok, const ProbeOptions *o, const KvCacheScheme *const *schemes,
              int n_schemes, ProbeResult *r, Error *err);
void probe_result_free(ProbeResult *r);

/* ./run probe: MODEL_DIR loaded, kv's recipe resolved for it (eval/calibration.h), o run with
 * the fp32 cache and that one scheme. */
int probe_run_from_dir(const char *model_dir, const KvCacheFlags *kv, const ProbeOptions *o, ProbeResult *r,
                       Error *err);

/* Names of a task ("copy", "passkey", "diverge") and back (-1: none). */
const char *probe_task_name(ProbeTask t);
int probe_task_parse(const char *name);

/* The report: a table per task, fp32 first ("not meaningful" when fp32 fails it), the schemes'
 * labels labels[0..n_caches-1] (labels[0]: "fp32"). Text (markdown tables) and JSON. */
void probe_report_text(FILE *f, const ProbeResult *r, const char *model, const char *const *labels);
void probe_report_json(FILE *f, const ProbeResult *r, const char *model, const char *const *labels);
/* CSV: one row per cache and cell. */
void probe_report_csv(FILE *f, const ProbeResult *r, const char *const *labels);

/* The figures of a cell: a rate hits/n with its binomial standard error sqrt(p(1-p)/n), and the
 * mean of sum with its standard error (NAN where undefined). */
double probe_rate(const ProbeCell *c);
double probe_rate_se(const ProbeCell *c);
double probe_mean(const ProbeCell *c);
double probe_mean_se(const ProbeCell *c);

#endif
