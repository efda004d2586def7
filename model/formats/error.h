/* model/formats/error.h: how library code reports failure.
 * Functions that can fail take an Error* and return 0 on success, -1 on failure
 * after writing a one-line message that names the file and the problem.
 * run.c prints the message and chooses the exit code; library code never exits.
 * It lives in model/formats/, the lowest folder whose code fails (on files), so that every
 * folder above (model/, eval/) includes it downwards. */
#ifndef KVQ_ERROR_H
#define KVQ_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* A printable, bounded copy of a file-supplied string, for messages: control bytes become
 * '?' and anything past 64 bytes "...", so a message stays one short line whatever the
 * file contains. Returns out. */
static inline const char *error_shown(const char *s, char out[72]) {
    size_t n = 0;
    for (; s[n] && n < 64; n++) {
        unsigned char c = (unsigned char)s[n];
        out[n] = (c < 0x20 || c == 0x7F) ? '?' : (char)c;
    }
    strcpy(out + n, s[n] ? "..." : "");
    return out;
}

#endif
