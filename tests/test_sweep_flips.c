/* tests/test_sweep_flips.c: a sweep directory's checksums (eval/sweep.c: sweep.json's crc32c,
 * each journal record's, model/formats/checked_line.h) against damage, through sweep_merge. The
 * directory is the committed fuzz seed tests/fuzz/corpus/fuzz_sweep_dir/sweep-2x2 (a real sweep:
 * mini-llama-brown, 2 windows x 2 configurations; make_seeds.py writes it with ./run), split at
 * its NUL into sweep.json and journal.jsonl. Intact, it merges; then every bit of every byte of
 * each file is flipped in turn, and every byte inverted: each flip must be refused (one line
 * naming the directory) or give the intact merge's settings and sums exactly (harmless); the
 * counts are printed. `make check` (KVQ_QUICK=1) flips the bytes at one offset in QUICK_BYTE_STEP. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "eval/sweep.h"
#include "tests/test.h"

#define SEED "tests/fuzz/corpus/fuzz_sweep_dir/sweep-2x2"
#define QUICK_BYTE_STEP 8

static char dir[64], settings_path[96], journal_path[96];

static void put(const char *path, const unsigned char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, n, f);
    fclose(f);
}

/* Merges dir; 0 with the totals, or -1 (err set). */
static int merge(SweepSettings *s, SweepTotals *t, Error *err) {
    char *dirs[1] = {dir};
    err->msg[0] = '\0';
    return sweep_merge(dirs, 1, s, t, err);
}

static int same_merge(const SweepSettings *a, const SweepTotals *ta, const SweepSettings *b, const SweepTotals *tb) {
    if (a->n_configs != b->n_configs || ta->windows != tb->windows || ta->tokens_processed != tb->tokens_processed ||
        strcmp(a->model_id, b->model_id) || strcmp(a->model, b->model) || strcmp(a->text_file, b->text_file) ||
        a->ppl.ctx != b->ppl.ctx || a->ppl.stride != b->ppl.stride || a->n_tokens != b->n_tokens ||
        a->tokens_hash != b->tokens_hash || a->windows_total != b->windows_total)
        return 0;
    for (int i = 0; i < a->n_configs; i++)
        if (strcmp(a->configs[i].k_text, b->configs[i].k_text) || strcmp(a->configs[i].v_text, b->configs[i].v_text) ||
            memcmp(a->configs[i].k_bits, b->configs[i].k_bits, sizeof a->configs[i].k_bits) ||
            memcmp(a->configs[i].v_bits, b->configs[i].v_bits, sizeof a->configs[i].v_bits) ||
            memcmp(&ta->sums[i], &tb->sums[i], sizeof ta->sums[i]))
            return 0;
    return 1;
}

typedef struct {
    long flips, refused, harmless, harmful, first_harmful;
    int bad_message;
} Count;

/* Flips each bit of each byte of file[0..len) (written to path, the other file intact), then
 * inverts each byte. */
static void flip_file(const char *path, unsigned char *file, size_t len, const SweepSettings *want,
                      const SweepTotals *want_t, Count *c) {
    size_t step = test_quick() ? QUICK_BYTE_STEP : 1;
    for (size_t i = 0; i < len; i += step)
        for (int m = 0; m < 9; m++) {
            unsigned char mask = m < 8 ? (unsigned char)(1u << m) : 0xff;
            file[i] ^= mask;
            put(path, file, len);
            SweepSettings s;
            SweepTotals t;
            Error err;
            c->flips++;
            if (merge(&s, &t, &err) != 0) {
                c->refused++;
                if (!strstr(err.msg, dir) || strchr(err.msg, '\n')) c->bad_message = 1;
            } else {
                int same = same_merge(&s, &t, want, want_t);
                c->harmless += same;
                c->harmful += !same;
                if (!same && c->first_harmful < 0) c->first_harmful = (long)i;
                free(s.configs);
                sweep_totals_free(&t);
            }
            file[i] ^= mask;
        }
    put(path, file, len);
}

int main(void) {
    FILE *f = fopen(SEED, "rb");
    if (!check(f != NULL, "sweep flips: the seed sweep directory is there", "%s missing (run from the repo root)", SEED))
        return test_exit_code();
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned char *nul = memchr(buf, 0, n);
    snprintf(dir, sizeof dir, "/tmp/kvq-sweep-flips-%ld", (long)getpid());
    mkdir(dir, 0777);
    snprintf(settings_path, sizeof settings_path, "%s/sweep.json", dir);
    snprintf(journal_path, sizeof journal_path, "%s/journal.jsonl", dir);
    size_t settings_len = nul ? (size_t)(nul - buf) : n, journal_len = nul ? n - settings_len - 1 : 0;
    unsigned char *settings = buf, *journal = nul ? nul + 1 : buf + n;
    put(settings_path, settings, settings_len);
    put(journal_path, journal, journal_len);
    SweepSettings want;
    SweepTotals want_t;
    Error err;
    int rc = merge(&want, &want_t, &err);
    if (check(rc == 0 && want.n_configs == 2 && want_t.windows == 2, "sweep flips: the intact seed directory merges",
              "%s", err.msg)) {
        Count c[2] = {{0, 0, 0, 0, -1, 0}, {0, 0, 0, 0, -1, 0}};
        flip_file(settings_path, settings, settings_len, &want, &want_t, &c[0]);
        flip_file(journal_path, journal, journal_len, &want, &want_t, &c[1]);
        if (test_quick()) printf("sweep flips: the bytes at one offset in %d flipped (KVQ_QUICK)\n", QUICK_BYTE_STEP);
        const char *names[2] = {"sweep.json", "journal.jsonl"};
        size_t lens[2] = {settings_len, journal_len};
        for (int k = 0; k < 2; k++)
            printf("     %s, %zu bytes: %ld flips, %ld refused, %ld harmless, %ld harmful\n", names[k], lens[k],
                   c[k].flips, c[k].refused, c[k].harmless, c[k].harmful);
        check(c[0].harmful == 0, "sweep flips: each bit of each byte of sweep.json flipped (and each byte inverted) is "
              "refused or harmless", "%ld harmful (first at byte %ld)", c[0].harmful, c[0].first_harmful);
        check(c[1].harmful == 0, "sweep flips: each bit of each byte of journal.jsonl flipped (and each byte inverted) "
              "is refused or harmless", "%ld harmful (first at byte %ld)", c[1].harmful, c[1].first_harmful);
        check(!c[0].bad_message && !c[1].bad_message, "sweep flips: every refusal is one line naming the directory", "");
        free(want.configs);
        sweep_totals_free(&want_t);
    }
    unlink(settings_path);
    unlink(journal_path);
    rmdir(dir);
    return test_exit_code();
}
