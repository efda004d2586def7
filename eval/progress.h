/* eval/progress.h: progress of long runs on stderr — a bar with ETA on a terminal,
 * a plain line every few seconds otherwise (logs, CI, Slurm). */
#ifndef KVQ_PROGRESS_H
#define KVQ_PROGRESS_H

#include <stddef.h>

typedef struct {
    const char *label;
    const char *unit;        /* what a step is: "windows" (progress_init's), or set after it ("tables") */
    int passes;              /* forward passes a reported token takes (1; ppl compared: 2), so that
                                the tok/s printed counts what the report's time line counts */
    int is_tty;
    int quiet;
    double last_print;
    int first_done;          /* the first update: its time holds the start-up (pages of the */
    double first_seconds;    /* weights read in, buffers touched) and a first window that scores all */
} Progress;

void progress_init(Progress *p, const char *label, int quiet);
/* Matches PplOptions.progress, so it can be passed as the callback with a Progress* as user.
 * tokens 0: steps that are not runs over tokens (a fit's tables), so no tok/s is printed. */
void progress_update(void *progress, int done, int total, long tokens, double seconds);
/* Seconds left after `done` of `total` equal steps at `seconds`: at the pace of the steps
 * since the first update (all of them until a second update arrives). What the bar prints;
 * progress_update records the first update. */
double progress_eta(const Progress *p, int done, int total, double seconds);
/* Seconds on the monotonic clock: what long runs time themselves with. */
double seconds_now(void);
/* A duration as the bar prints it ("4m05s", "1h02m"; "?" when negative or absurd). */
void progress_format_seconds(double seconds, char *buf, size_t n);
/* Ends the bar's line. */
void progress_finish(Progress *p);

#endif
