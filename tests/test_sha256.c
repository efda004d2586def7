/* tests/test_sha256.c: model/formats/sha256.c against published digests.
 * The FIPS 180-2 / NIST example vectors ("", "abc", the 448- and 896-bit messages, one million
 * 'a'); messages of 55..128 'a' around the padding boundaries (digests from Python's hashlib);
 * every two-way split of a 130-byte message, and byte-at-a-time updates, equal one update; and
 * the two files whose sha256 the READMEs publish (data/README.md: wiki.valid.raw and
 * mini-llama-brown-outliers' model.safetensors). Run from the repo root. Prints the rate of
 * hashing the 22 MB model as an information line (not a check). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/formats/sha256.h"
#include "tests/test.h"

static void check_hex(const char *got, const char *want, const char *name) {
    check(strcmp(got, want) == 0, name, "got %s, want %s", got, want);
}

static void test_nist_vectors(void) {
    char hex[SHA256_HEX_CHARS + 1];
    sha256_hex("", 0, hex);
    check_hex(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256 of the empty message");
    sha256_hex("abc", 3, hex);
    check_hex(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256 of abc");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(m448, strlen(m448), hex);
    check_hex(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "sha256 of the 448-bit message");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu";
    sha256_hex(m896, strlen(m896), hex);
    check_hex(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1", "sha256 of the 896-bit message");

    /* One million 'a', fed in uneven pieces (1000 updates of 1000 bytes would hide a bug that
     * only shows when a piece ends inside a block). */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    Sha256 s;
    unsigned char digest[SHA256_DIGEST_BYTES];
    sha256_init(&s);
    for (size_t at = 0, piece = 1; at < 1000000; at += piece, piece = piece * 3 % 1021 + 1)
        sha256_update(&s, a + at, piece < 1000000 - at ? piece : 1000000 - at);
    sha256_final(&s, digest);
    sha256_to_hex(digest, hex);
    check_hex(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
              "sha256 of one million 'a' in uneven pieces");
    sha256_hex(a, 1000000, hex);
    check_hex(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
              "sha256 of one million 'a' in one update");
    free(a);
}

/* Lengths where the padding takes one block or two (55 | 56), and whole blocks. */
static void test_padding_boundaries(void) {
    static const struct {
        int n;
        const char *hex;
    } cases[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"},
    };
    char a[128], hex[SHA256_HEX_CHARS + 1], name[64];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sha256_hex(a, (size_t)cases[i].n, hex);
        snprintf(name, sizeof name, "sha256 of %d 'a' (padding boundary)", cases[i].n);
        check_hex(hex, cases[i].hex, name);
    }
}

/* Any split of a message into updates gives the digest of one update. */
static void test_split_updates(void) {
    unsigned char msg[130];
    for (int i = 0; i < 130; i++) msg[i] = (unsigned char)(i * 37 + 11);
    char whole[SHA256_HEX_CHARS + 1], hex[SHA256_HEX_CHARS + 1];
    unsigned char digest[SHA256_DIGEST_BYTES];
    sha256_hex(msg, sizeof msg, whole);
    int bad_two = -1, bad_three = -1;
    for (int cut = 0; cut <= 130; cut++) {
        Sha256 s;
        sha256_init(&s);
        sha256_update(&s, msg, (size_t)cut);
        sha256_update(&s, msg + cut, (size_t)(130 - cut));
        sha256_final(&s, digest);
        sha256_to_hex(digest, hex);
        if (strcmp(hex, whole) && bad_two < 0) bad_two = cut;
        for (int cut2 = cut; cut2 <= 130; cut2++) {   /* three pieces, one possibly empty */
            sha256_init(&s);
            sha256_update(&s, msg, (size_t)cut);
            sha256_update(&s, msg + cut, (size_t)(cut2 - cut));
            sha256_update(&s, msg + cut2, (size_t)(130 - cut2));
            sha256_final(&s, digest);
            sha256_to_hex(digest, hex);
            if (strcmp(hex, whole) && bad_three < 0) bad_three = cut * 1000 + cut2;
        }
    }
    check(bad_two < 0, "sha256 two updates split at every byte of 130 = one update", "differs at cut %d", bad_two);
    check(bad_three < 0, "sha256 three updates split at every pair of cuts = one update", "differs at cuts %d,%d",
          bad_three / 1000, bad_three % 1000);
    Sha256 s;
    sha256_init(&s);
    for (int i = 0; i < 130; i++) sha256_update(&s, msg + i, 1);
    sha256_final(&s, digest);
    sha256_to_hex(digest, hex);
    check_hex(hex, whole, "sha256 byte-at-a-time updates = one update");
}

static void test_files(void) {
    char hex[SHA256_HEX_CHARS + 1];
    Error err = {{0}};
    int rc = sha256_file_hex("data/wikitext-2-raw/wiki.valid.raw", hex, &err);
    check(rc == 0 && !strcmp(hex, "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7"),
          "sha256 of wiki.valid.raw = data/README.md's", "rc %d, %s", rc, rc ? err.msg : hex);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = sha256_file_hex("data/models/mini-llama-brown-outliers/model.safetensors", hex, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    check(rc == 0 && !strcmp(hex, "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c60034"),
          "sha256 of mini-llama-brown-outliers model.safetensors = data/README.md's", "rc %d, %s", rc,
          rc ? err.msg : hex);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("info: sha256 of a 22.3 MB file in %.3f s (%.0f MB/s)\n", seconds, 22.291016 / seconds);

    err.msg[0] = '\0';
    rc = sha256_file_hex("no/such/file.raw", hex, &err);
    check(rc == -1 && strstr(err.msg, "no/such/file.raw: cannot open"), "sha256 of a missing file names it", "rc %d, '%s'",
          rc, err.msg);
    err.msg[0] = '\0';
    rc = sha256_file_hex("data", hex, &err);
    check(rc == -1 && strstr(err.msg, "data: read error"), "sha256 of a directory is a read error naming it",
          "rc %d, '%s'", rc, err.msg);
}

int main(void) {
    test_nist_vectors();
    test_padding_boundaries();
    test_split_updates();
    test_files();
    return test_exit_code();
}
