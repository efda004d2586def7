/* model/formats/model_identity.c: a model directory's identity by content, and the cache of its
 * weights' sha256 (see model_identity.h). */
#include "model/formats/model_identity.h"
#include "model/formats/crc32c.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A cache line is written only for a file whose last change is this much older than the hash:
 * a change within the same tick of a coarse file-system clock (FAT's is 2 s) right after the
 * hash began would leave the key unchanged while the bytes differ. */
#define SETTLED_SECONDS 2

/* What the cache is keyed by: a change of any of these is a change of the file. */
typedef struct {
    unsigned long long dev, ino;
    long long size;
    long long mtime_s, mtime_ns, ctime_s, ctime_ns;
} FileKey;

static int file_key(const char *path, FileKey *k, Error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return error_set(err, "%s: not a regular file", path);
    memset(k, 0, sizeof *k);
    k->dev = (unsigned long long)sb.st_dev;
    k->ino = (unsigned long long)sb.st_ino;
    k->size = (long long)sb.st_size;
    k->mtime_s = (long long)sb.st_mtime;
    k->ctime_s = (long long)sb.st_ctime;
#if !defined(__APPLE__)   /* POSIX.1-2008 st_mtim / st_ctim; macOS spells them otherwise: seconds only there */
    k->mtime_ns = (long long)sb.st_mtim.tv_nsec;
    k->ctime_ns = (long long)sb.st_ctim.tv_nsec;
#endif
    return 0;
}

static int same_key(const FileKey *a, const FileKey *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s &&
           a->mtime_ns == b->mtime_ns && a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

/* ---- the cache file: one line, its own CRC-32C at the end ---- */

#define CACHE_TAG "kvq-identity-cache 1"

/* The line for key and sha256 (without the newline), into out. */
static void cache_line(const FileKey *k, const char *sha256, char *out, size_t n) {
    int body = snprintf(out, n, CACHE_TAG " model.safetensors size %lld mtime %lld.%09lld ctime %lld.%09lld dev %llu "
                        "ino %llu sha256 %s", k->size, k->mtime_s, k->mtime_ns, k->ctime_s, k->ctime_ns, k->dev,
                        k->ino, sha256);
    char hex[CRC32C_HEX_CHARS + 1];
    crc32c_to_hex(crc32c(0, out, (size_t)body), hex);
    snprintf(out + body, n - (size_t)body, " crc32c %s", hex);
}

/* The sha256 the cache holds for a file of key `want`: 0 with sha256 set, or -1 when the cache
 * is missing, unreadable, malformed, fails its CRC or is for another file (all: hash again).
 * The line is parsed and written again from what was read: only the exact bytes kvq writes
 * are trusted. */
static int cache_read(const char *path, const FileKey *want, char sha256[65]) {
    size_t len;
    char *text = read_whole_file(path, 4096, &len, NULL);
    if (!text) return -1;
    FileKey k = {0};
    char hash[65] = "", crc[9] = "", again[1024];
    int ok = sscanf(text, CACHE_TAG " model.safetensors size %lld mtime %lld.%lld ctime %lld.%lld dev %llu ino %llu "
                    "sha256 %64s crc32c %8s", &k.size, &k.mtime_s, &k.mtime_ns, &k.ctime_s, &k.ctime_ns, &k.dev,
                    &k.ino, hash, crc) == 9;
    if (ok) {
        cache_line(&k, hash, again, sizeof again);
        ok = strlen(again) + 1 == len && !memcmp(text, again, len - 1) && text[len - 1] == '\n' &&
             sha256_hex_valid(hash) && same_key(&k, want);
    }
    free(text);
    if (ok) memcpy(sha256, hash, 65);
    return ok ? 0 : -1;
}

/* Best effort: a cache that cannot be written (a read-only directory) is no error. */
static void cache_write(const char *path, const FileKey *k, const char *sha256) {
    char line[1024];
    cache_line(k, sha256, line, sizeof line);
    AtomicFile af;
    if (atomic_open(&af, path, NULL)) return;
    fprintf(af.f, "%s\n", line);
    atomic_commit(&af, NULL);
}

/* ---- the identity ---- */

void model_identity_combine(const char *weights_sha256, const char *config_sha256, char id[65]) {
    char text[256];
    int n = snprintf(text, sizeof text, "kvq model identity 1\nmodel.safetensors sha256 %s\nconfig.json sha256 %s\n",
                     weights_sha256, config_sha256);
    sha256_hex(text, (size_t)n, id);
}

/* The weights' sha256, from the cache or hashed (then cached when large and settled). */
static int weights_sha256(const char *dir, size_t cache_min_bytes, ModelIdentity *id, Error *err) {
    char path[4200], cache[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(cache, sizeof cache, "%s/" MODEL_IDENTITY_CACHE, dir);
    FileKey before, after;
    if (file_key(path, &before, err)) return -1;
    int cached = before.size >= 0 && (unsigned long long)before.size >= cache_min_bytes;
    if (cached && cache_read(cache, &before, id->weights_sha256) == 0) {
        id->weights_from_cache = 1;
        return 0;
    }
    time_t started = time(NULL);
    if (sha256_file_hex(path, id->weights_sha256, err) || file_key(path, &after, err)) return -1;
    if (!same_key(&before, &after)) return error_set(err, "%s: changed while it was being hashed; run again", path);
    int settled = after.ctime_s + SETTLED_SECONDS < (long long)started && after.mtime_s + SETTLED_SECONDS < (long long)started;
    if (cached && settled) cache_write(cache, &after, id->weights_sha256);
    return 0;
}

int model_identity_of(const char *dir, size_t cache_min_bytes, ModelIdentity *id, Error *err) {
    memset(id, 0, sizeof *id);
    char config[4200];
    snprintf(config, sizeof config, "%s/config.json", dir);
    if (weights_sha256(dir, cache_min_bytes, id, err) || sha256_file_hex(config, id->config_sha256, err)) return -1;
    model_identity_combine(id->weights_sha256, id->config_sha256, id->id);
    return 0;
}
