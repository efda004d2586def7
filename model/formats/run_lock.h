/* model/formats/run_lock.h: one writer at a time for an output (a sweep's directory, a
 * calibration file): an advisory fcntl lock on a lock file beside it, held for the whole run.
 * A second ./run on the same output is refused at once with the holder's pid, instead of both
 * running to the end and writing every record twice.
 *
 * The lock file (PATH) exists only while it is held: the holder unlinks it before letting go, and
 * a taker that finds it has locked a file already unlinked (or replaced) takes the new one instead,
 * so the lock stays exclusive without leaving files behind. A process killed with the lock held
 * loses it (the kernel drops fcntl locks with the process) and leaves PATH, which the next run
 * takes over. Advisory: it keeps kvq from racing itself, not other programs. */
#ifndef KVQ_RUN_LOCK_H
#define KVQ_RUN_LOCK_H

#include "model/formats/error.h"

typedef struct {
    int fd;                  /* -1 when not held */
    char path[4200];
} RunLock;

/* Takes the lock on path (created when missing); held, it refuses with
 * "PATH: in use by another ./run (pid 1234): ADVICE". */
int run_lock_take(RunLock *lock, const char *path, const char *advice, Error *err);
/* Lets go (unlinks the lock file first); safe on a lock never taken or already let go. */
void run_lock_release(RunLock *lock);

#endif
