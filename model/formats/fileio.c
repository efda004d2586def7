/* model/formats/fileio.c: whole-file reads, temp-file-then-rename writes, and appends to journals. */
#include "model/formats/fileio.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

char *read_whole_file(const char *path, size_t max_bytes, size_t *len, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { error_set(err, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) { error_set(err, "%s: larger than %zu bytes", path, max_bytes); goto fail; }
            cap = cap ? cap * 2 : 4096;
            if (cap > max_bytes) cap = max_bytes;
            char *nb = realloc(buf, cap + 1);
            if (!nb) { error_set(err, "%s: out of memory", path); goto fail; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) { error_set(err, "%s: read error: %s", path, strerror(errno)); goto fail; }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
fail:
    fclose(f);
    free(buf);
    return NULL;
}

int atomic_open(AtomicFile *af, const char *path, Error *err) {
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->final_path) return error_set(err, "%s: path too long", path);
    strcpy(af->final_path, path);
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f) return error_set(err, "%s: cannot create file", path);
    return 0;
}

int atomic_finish(AtomicFile *af, Error *err) {
    int bad = ferror(af->f);
    if (fclose(af->f) != 0) bad = 1;
    af->f = NULL;
    if (bad) {
        unlink(af->tmp_path);
        return error_set(err, "%s: write failed", af->final_path);
    }
    return 0;
}

int atomic_publish(AtomicFile *af, Error *err) {
    if (rename(af->tmp_path, af->final_path) != 0) {
        unlink(af->tmp_path);
        return error_set(err, "%s: cannot rename temporary file into place", af->final_path);
    }
    return 0;
}

int atomic_commit(AtomicFile *af, Error *err) {
    return atomic_finish(af, err) || atomic_publish(af, err) ? -1 : 0;
}

/* name is base + ".tmp." + a pid (+ anything): that pid, else 0. */
static long temp_pid(const char *name, const char *base) {
    size_t n = strlen(base);
    if (strncmp(name, base, n) || strncmp(name + n, ".tmp.", 5)) return 0;
    const char *p = name + n + 5;
    long pid = 0;
    while (*p >= '0' && *p <= '9' && pid < 100000000) pid = pid * 10 + (*p++ - '0');
    return pid;
}

/* Unlinks dir's temps of base (every file's when base is NULL) whose writer is gone. */
static void remove_temps_of(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char own[256];   /* the output this file is a temp of */
        const char *tmp = strstr(e->d_name, ".tmp.");
        if (!tmp || (size_t)(tmp - e->d_name) >= sizeof own) continue;
        snprintf(own, sizeof own, "%.*s", (int)(tmp - e->d_name), e->d_name);
        long pid = temp_pid(e->d_name, base ? base : own);
        if (pid <= 0 || pid == (long)getpid() || !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

void remove_stale_temps(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else slash[slash == dir] = 0;   /* "/x" -> "/" */
    remove_temps_of(dir, base);
}

void remove_stale_temps_in(const char *dir) { remove_temps_of(dir, NULL); }

void atomic_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp_path[0]) unlink(af->tmp_path);
}

int write_text_file(const char *path, const char *text, Error *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    fputs(text, af.f);
    return atomic_commit(&af, err);
}

int write_floats_file(const char *path, const float *x, size_t count, Error *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    fwrite(x, sizeof(float), count, af.f);   /* a short write shows as an error at close */
    return atomic_commit(&af, err);
}

int path_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* mkdir first, stat second: two runs started together may both find no directory, and the one whose mkdir
   loses the race (EEXIST) must go on to the lock, which tells the user who holds the directory. */
int make_directory(const char *path, Error *err) {
    if (mkdir(path, 0777) == 0) return 0;
    int made_errno = errno;
    struct stat sb;
    if (made_errno == EEXIST && stat(path, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? 0 : error_set(err, "%s: exists and is not a directory", path);
    return error_set(err, "%s: cannot create the directory (%s)", path, strerror(made_errno));
}

int append_record(const char *path, const char *text, size_t len, Error *err) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0666);
    if (fd < 0) return error_set(err, "%s: cannot open for appending (%s)", path, strerror(errno));
    ssize_t wrote = write(fd, text, len);
    int synced = wrote == (ssize_t)len && fsync(fd) == 0;
    int closed = close(fd) == 0;
    if (wrote != (ssize_t)len || !synced || !closed)
        return error_set(err, "%s: cannot append a record (%s)", path, wrote < 0 ? strerror(errno) : "short write");
    return 0;
}

int truncate_to(const char *path, size_t len, Error *err) {
    if (truncate(path, (off_t)len) != 0) return error_set(err, "%s: cannot truncate (%s)", path, strerror(errno));
    return 0;
}
