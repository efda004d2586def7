/* eval/progress.h: progress of long runs on stderr — a bar with ETA on a terminal,
 * a plain line every few seconds otherwise (logs, CI, Slurm). */
#ifndef KVQ_PROGRESS_H
#define KVQ_PROGRESS_H

typedef struct {
    const char *label;
    int is_tty;
    int quiet;
    double last_print;
} Progress;

void progress_init(Progress *p, const char *label, int quiet);
/* Matches PplOptions.progress, so it can be passed as the callback with a Progress* as user. */
void progress_update(void *progress, int done, int total, long tokens, double seconds);
/* Ends the bar's line. */
void progress_finish(Progress *p);

#endif
