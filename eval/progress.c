/* eval/progress.c: the progress bar / progress lines for perplexity runs. */
#include "eval/progress.h"
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define LINE_EVERY_SECONDS 5.0

double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(Progress *p, const char *label, int quiet) {
    p->label = label;
    p->unit = "windows";
    p->passes = 1;
    p->is_tty = isatty(2);
    p->quiet = quiet;
    p->last_print = -1e9;
    p->first_done = 0;
    p->first_seconds = 0;
}

double progress_eta(const Progress *p, int done, int total, double seconds) {
    if (done <= 0) return -1;
    if (p->first_done > 0 && done > p->first_done)
        return (seconds - p->first_seconds) / (done - p->first_done) * (total - done);
    return seconds / done * (total - done);
}

void progress_format_seconds(double s, char *buf, size_t n) {
    if (s < 0 || s > 1e7) { snprintf(buf, n, "?"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%dh%02dm", t / 3600, t / 60 % 60);
    else snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}

void progress_update(void *progress, int done, int total, long tokens, double seconds) {
    Progress *p = progress;
    if (p->first_done == 0) p->first_done = done, p->first_seconds = seconds;
    if (p->quiet) return;
    int last = done == total;
    if (!p->is_tty && !last && seconds - p->last_print < LINE_EVERY_SECONDS) return;
    p->last_print = seconds;
    char eta[32], rate[48] = "";
    if (tokens > 0 && seconds > 0) snprintf(rate, sizeof rate, ", %.0f tok/s", (double)tokens * p->passes / seconds);
    progress_format_seconds(progress_eta(p, done, total, seconds), eta, sizeof eta);
    if (p->is_tty) {
        int width = 30, fill = total > 0 ? done * width / total : 0;
        char bar[64];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %d/%d %s%s, ETA %s ", p->label, bar, done, total, p->unit, rate, eta);
    } else {
        fprintf(stderr, "%s: %d/%d %s%s, ETA %s\n", p->label, done, total, p->unit, rate, eta);
    }
    fflush(stderr);
}

void progress_finish(Progress *p) {
    if (p->is_tty && !p->quiet) fprintf(stderr, "\n");
}
