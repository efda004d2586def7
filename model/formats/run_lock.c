/* model/formats/run_lock.c: the advisory lock of one output (see run_lock.h). */
#include "model/formats/run_lock.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static struct flock whole_file(short type) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;   /* start 0, length 0: the whole file, however long */
    return fl;
}

/* 1 when fd is still the file path names (not unlinked or replaced by a holder letting go). */
static int still_the_file(int fd, const char *path) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int run_lock_take(RunLock *lock, const char *path, const char *advice, Error *err) {
    lock->fd = -1;
    if (strlen(path) >= sizeof lock->path) return error_set(err, "%s: path too long", path);
    snprintf(lock->path, sizeof lock->path, "%s", path);
    /* a few turns at most: each one means another run let go between our open and our lock */
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT, 0666);
        if (fd < 0) return error_set(err, "%s: cannot create the lock file (%s)", path, strerror(errno));
        struct flock fl = whole_file(F_WRLCK);
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int busy = errno == EACCES || errno == EAGAIN;
            struct flock who = whole_file(F_WRLCK);
            long pid = busy && fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : 0;
            close(fd);
            if (busy && pid == 0) continue;   /* let go just now: try again */
            if (!busy) return error_set(err, "%s: cannot lock (%s)", path, strerror(errno));
            return error_set(err, "%s: in use by another ./run (pid %ld): %s", path, pid, advice);
        }
        if (still_the_file(fd, path)) {
            lock->fd = fd;
            return 0;
        }
        close(fd);   /* locked a file its holder had just unlinked: take the one there now */
    }
    return error_set(err, "%s: cannot lock (it keeps changing hands)", path);
}

void run_lock_release(RunLock *lock) {
    if (lock->fd < 0) return;
    unlink(lock->path);   /* while still held: whoever waits on this inode sees it unlinked */
    close(lock->fd);      /* closing drops the fcntl lock */
    lock->fd = -1;
}
