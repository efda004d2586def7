/* eval/probe_sweep.h: ./run sweep --probe TASK: the probes (eval/probe.h) on the fp32 cache and
 * every configuration of a sweep, after its perplexity figures, at the sweep's ctx. */
#ifndef KVQ_PROBE_SWEEP_H
#define KVQ_PROBE_SWEEP_H

#include "eval/probe.h"
#include "eval/sweep.h"

typedef struct {
    int n_tasks;
    ProbeTask tasks[3];        /* each at most once */
    ProbeOptions o;            /* the probes' own options (seed, sequences, ...); task and ctx set per run */
} ProbeSweep;

/* Adds --probe's value (copy, passkey or diverge; again: refused). */
int probe_sweep_add(ProbeSweep *p, const char *task, Error *err);

/* sweep_run_and_report with the probes after it: once the sweep is whole (not a shard), each task
 * runs on s's model (its precision, its calibration) and configurations and writes
 * out_dir/probe-TASK.md, .csv and .json (each atomically), the table printed on out too unless
 * json. A probe is not journaled: a resumed sweep runs it again (its inputs are seeded: the same
 * figures). */
int probe_sweep_run_and_report(SweepSettings *s, const ProbeSweep *p, const SweepRun *run, Error *err);

#endif
