/* tests/test_model_identity.c: a model directory's identity by content and the cache of its
 * weights' sha256 (model/formats/model_identity.c). The identity of mini-llama-brown against the
 * value Python's hashlib gives for the definition (model_identity.h); the same bytes under another
 * path are the same identity, another config.json another one. The cache (asked for at any size
 * here): not written for a file changed in the last 2 s, written for a settled one and then read
 * instead of hashing; a file replaced by one of the same size with its mtime put back (cp -p)
 * is hashed again; a cache with any one of its bytes flipped (every bit of every byte) never
 * gives a wrong identity, and is rewritten whole; a cache of another file, garbage, an empty
 * cache: ignored. No temp file is left. One sleep of 3 s (a file must settle to be cached). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model/formats/crc32c.h"
#include "model/formats/fileio.h"
#include "model/formats/model_identity.h"
#include "model/formats/sha256.h"
#include "tests/test.h"

static char dir[64], weights[128], config[128], cache[128];

static void put(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static int identity(ModelIdentity *id) {
    Error err;
    int rc = model_identity_of(dir, 0, id, &err);
    if (rc) printf("  (%s)\n", err.msg);
    return rc;
}

/* The definition restated: the sha256 of the text naming both files' digests. */
static void expected(char out[65]) {
    char w[65], c[65], text[256];
    Error err;
    sha256_file_hex(weights, w, &err);
    sha256_file_hex(config, c, &err);
    snprintf(text, sizeof text, "kvq model identity 1\nmodel.safetensors sha256 %s\nconfig.json sha256 %s\n", w, c);
    sha256_hex(text, strlen(text), out);
}

static void test_bundled_model(void) {
    ModelIdentity id, copy;
    Error err;
    int rc = model_identity_of("data/models/mini-llama-brown", MODEL_IDENTITY_CACHE_MIN_BYTES, &id, &err);
    /* hashlib.sha256(b"kvq model identity 1\nmodel.safetensors sha256 7880...bcdfbc\nconfig.json sha256 958a...b33b\n") */
    check(rc == 0 && !strcmp(id.id, "c6cacc6f0f3a8ed8cfc4b701219bdd048972c772a4a2465a6458c6a1f4cd4566") &&
              !strcmp(id.weights_sha256, "7880843642107fca38d60a47f3fdcba4a3b84e6c7d16c7f56de7009d86bcdfbc"),
          "identity of mini-llama-brown = hashlib's of the definition; weights_sha256 = data/README.md's", "%s / %s",
          rc ? err.msg : id.id, id.weights_sha256);
    check(!path_exists("data/models/mini-llama-brown/" MODEL_IDENTITY_CACHE),
          "identity: no cache beside a model under MODEL_IDENTITY_CACHE_MIN_BYTES", "");
    rc = model_identity_of("data/models/../models/mini-llama-brown/", MODEL_IDENTITY_CACHE_MIN_BYTES, &copy, &err);
    check(rc == 0 && !strcmp(copy.id, id.id), "identity: the same directory by another path is the same model", "");
    rc = model_identity_of("data/models/nope", 0, &copy, &err);
    check(rc != 0 && strstr(err.msg, "data/models/nope/model.safetensors"), "identity: a missing model.safetensors is named",
          "%s", err.msg);
}

static void test_cache(void) {
    char want[65], text[4096];
    ModelIdentity id;
    put(weights, "weights, version one", 20);
    put(config, "{\"hidden_size\": 8}", 18);
    expected(want);
    check(identity(&id) == 0 && !strcmp(id.id, want) && !id.weights_from_cache,
          "identity of a fresh directory = the definition, hashed", "%s vs %s", id.id, want);
    check(!path_exists(cache), "identity cache: not written for a file changed in the last 2 s", "");
    put(config, "{\"hidden_size\": 16}", 19);
    char other[65];
    expected(other);
    check(identity(&id) == 0 && !strcmp(id.id, other) && strcmp(other, want),
          "identity: another config.json with the same weights is another model", "");
    sleep(3);
    check(identity(&id) == 0 && !strcmp(id.id, other) && !id.weights_from_cache && path_exists(cache),
          "identity cache: written for a settled file", "");
    check(identity(&id) == 0 && !strcmp(id.id, other) && id.weights_from_cache,
          "identity cache: read instead of hashing when it matches the file", "");
    size_t n = slurp(cache, text, sizeof text - 1);
    text[n] = 0;
    char good[4096];
    memcpy(good, text, n + 1);
    check(n > 0 && text[n - 1] == '\n' && strchr(text, '\n') == text + n - 1 && strstr(text, " crc32c "),
          "identity cache: one line ending in its CRC-32C", "%s", text);

    /* every bit of every byte of the cache flipped: never a wrong identity, the cache rewritten */
    int wrong = 0, used = 0, not_restored = 0, flips = 0;
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(text, good, n);
            text[i] ^= (char)(1 << bit);
            put(cache, text, n);
            wrong += identity(&id) != 0 || strcmp(id.id, other) != 0;
            used += id.weights_from_cache;
            char again[4096];
            size_t m = slurp(cache, again, sizeof again);
            not_restored += m != n || memcmp(again, good, n);
            flips++;
        }
    check(wrong == 0, "identity cache: each bit of each byte flipped never gives a wrong identity", "%d of %d wrong",
          wrong, flips);
    check(used == 0, "identity cache: a flipped cache is never used", "%d of %d used", used, flips);
    check(not_restored == 0, "identity cache: a flipped cache is rewritten whole", "%d of %d not", not_restored, flips);
    const char *junk[] = {"", "garbage\n", "kvq-identity-cache 1 model.safetensors size 20\n"};
    int junk_bad = 0;
    for (int k = 0; k < 3; k++) {
        put(cache, junk[k], strlen(junk[k]));
        junk_bad += identity(&id) != 0 || strcmp(id.id, other) != 0 || id.weights_from_cache;
    }
    check(junk_bad == 0, "identity cache: an empty, garbage or cut cache is ignored", "%d bad", junk_bad);

    /* the weights replaced by others of the same size, their mtime put back (cp -p, rsync -t) */
    struct stat sb;
    stat(weights, &sb);
    put(weights, "weights, version two", 20);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    utimensat(AT_FDCWD, weights, times, 0);
    expected(want);
    check(identity(&id) == 0 && !strcmp(id.id, want) && strcmp(want, other) && !id.weights_from_cache,
          "identity cache: weights replaced at the same size and mtime are hashed again", "%s", id.id);
    char leftover[256];
    snprintf(leftover, sizeof leftover, "%s." "tmp.%ld", cache, (long)getpid());
    check(!path_exists(leftover), "identity cache: no temp file left", "");
}

/* A cache line as model_identity.c writes it (restated from its format), for the file's key with
 * one field changed by `delta` (0 size, 1 mtime, 2 ctime, 3 dev, 4 ino), holding a wrong sha256. */
static void put_cache_for(const struct stat *sb, int field, long long delta) {
    long long v[5] = {(long long)sb->st_size, (long long)sb->st_mtim.tv_sec, (long long)sb->st_ctim.tv_sec,
                      (long long)sb->st_dev, (long long)sb->st_ino};
    v[field] += delta;
    char line[1024], hex[CRC32C_HEX_CHARS + 1];
    int body = snprintf(line, sizeof line, "kvq-identity-cache 1 model.safetensors size %lld mtime %lld.%09lld ctime "
                        "%lld.%09lld dev %llu ino %llu sha256 %064d", v[0], v[1], (long long)sb->st_mtim.tv_nsec, v[2],
                        (long long)sb->st_ctim.tv_nsec, (unsigned long long)v[3], (unsigned long long)v[4], 0);
    crc32c_to_hex(crc32c(0, line, (size_t)body), hex);
    snprintf(line + body, sizeof line - (size_t)body, " crc32c %s\n", hex);
    put(cache, line, strlen(line));
}

/* Each field of the cache's key checked: a cache for the same path whose key differs in one field
 * only (the file replaced by another inode of the same size and times: a copy moved into place)
 * is another file's, and never used. */
static void test_cache_key_fields(void) {
    static const char *const names[5] = {"size", "mtime", "ctime", "device", "inode"};
    char want[65], name[160];
    ModelIdentity id;
    struct stat sb;
    expected(want);
    stat(weights, &sb);
    put_cache_for(&sb, 4, 0);
    check(identity(&id) == 0 && id.weights_from_cache && strcmp(id.id, want),
          "identity cache: a crafted line for the file's own key is used (the test's format is kvq's)", "");
    for (int field = 0; field < 5; field++) {
        put_cache_for(&sb, field, 1);
        snprintf(name, sizeof name, "identity cache: a cache whose key differs in the %s alone is not used", names[field]);
        check(identity(&id) == 0 && !id.weights_from_cache && !strcmp(id.id, want), name, "%s", id.id);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kvq-identity-%ld", (long)getpid());
    mkdir(dir, 0777);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    snprintf(cache, sizeof cache, "%s/" MODEL_IDENTITY_CACHE, dir);
    test_bundled_model();
    test_cache();
    test_cache_key_fields();
    unlink(weights);
    unlink(config);
    unlink(cache);
    rmdir(dir);
    return test_exit_code();
}
