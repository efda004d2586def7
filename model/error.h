/* model/error.h: how library code reports failure.
 * Functions that can fail take an Error* and return 0 on success, -1 on failure
 * after writing a one-line message that names the file and the problem.
 * run.c prints the message and chooses the exit code; library code never exits. */
#ifndef KVQ_ERROR_H
#define KVQ_ERROR_H

#include <stdarg.h>
#include <stdio.h>

typedef struct {
    char msg[512];
} Error;

/* Writes a printf-style message into err (if err is not NULL) and returns -1. */
static inline int error_set(Error *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
