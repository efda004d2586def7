/* model/formats/fileio.h: small whole-file helpers shared by the readers and writers in model/. */
#ifndef KVQ_FILEIO_H
#define KVQ_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include "model/formats/error.h"

/* Reads all of path into a malloc'd, NUL-terminated buffer (at most max_bytes). */
char *read_whole_file(const char *path, size_t max_bytes, size_t *len, Error *err);

/* Atomic output: open a temp file next to `path`, write, then commit (rename) or abort (unlink).
 * An interrupted or failed command therefore never leaves a partial file under `path`. */
typedef struct {
    FILE *f;
    char final_path[4096];
    char tmp_path[4200];
} AtomicFile;

int atomic_open(AtomicFile *af, const char *path, Error *err);
int atomic_commit(AtomicFile *af, Error *err);   /* closes; renames on success, unlinks on failure */
void atomic_abort(AtomicFile *af);               /* closes and unlinks */
/* The two halves of atomic_commit, for a command whose outputs land together: every output
 * finished (closed, checked; the temp kept) before any is published (renamed into place). */
int atomic_finish(AtomicFile *af, Error *err);   /* closes; unlinks the temp on failure */
int atomic_publish(AtomicFile *af, Error *err);  /* renames a finished temp into place */

/* Removes the temps (PATH.tmp.PID...) that a process killed mid-write left of path: those of a
 * pid no longer running. Called by a command holding path's lock (run_lock.h) before it writes. */
void remove_stale_temps(const char *path);
/* The same for every file of dir (a sweep's directory, locked). */
void remove_stale_temps_in(const char *dir);

/* Writes a string to path atomically. */
int write_text_file(const char *path, const char *text, Error *err);

/* Writes count floats to path atomically, raw in the host's byte order (little-endian on
 * x86 and ARM): `./run logits --out`. */
int write_floats_file(const char *path, const float *x, size_t count, Error *err);

/* Creates the directory unless it exists (a file in its place is an error). */
int make_directory(const char *path, Error *err);

/* Appends len bytes to path (created if missing) with one write() on an O_APPEND descriptor,
 * then fsync: a journal's records go in whole or, after a crash mid-write, as a torn tail
 * that the reader recognizes and cuts off (truncate_to). */
int append_record(const char *path, const char *text, size_t len, Error *err);
int truncate_to(const char *path, size_t len, Error *err);

/* 1 if path exists (any type). */
int path_exists(const char *path);

/* 1 when a and b name one file (the same device and inode: "x", "./x", a symlink or a hard link
 * to it), 0 when either does not exist or they are two files. Names are never compared. */
int same_file(const char *a, const char *b);

#endif
