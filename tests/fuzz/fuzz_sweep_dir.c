/* tests/fuzz/fuzz_sweep_dir.c: a sweep directory's readers (the settings in sweep.json, the
 * journal.jsonl of (window, configuration) records, the totals added up from it) on hostile
 * files, through sweep_merge with one shard. The input up to its first NUL byte becomes
 * sweep.json, the rest journal.jsonl (no NUL: no journal). Both carry CRC-32Cs (sweep.json's
 * last member, each record's last), which a mutation almost always breaks; so that the fuzzer
 * reaches the parsing behind them, the checksums are computed again before the files are
 * written, unless the input starts with 'R' (raw: then the checksums are what is fuzzed). A
 * directory that is accepted must hold every window and print its table and write its outputs
 * (results.*, chart.svg) without trouble; a refusal must be one line naming the directory. The
 * scratch directories' names are the only state kept between inputs. */
#include <string.h>
#include <unistd.h>
#include "eval/sweep.h"
#include "model/formats/checked_line.h"
#include "model/formats/crc32c.h"
#include "tests/fuzz/fuzz.h"

static char dir[64], sweep_json[96], journal[96], out_dir[96];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof dir, "sweep");
    snprintf(sweep_json, sizeof sweep_json, "%s/sweep.json", dir);
    snprintf(journal, sizeof journal, "%s/journal.jsonl", dir);
    snprintf(out_dir, sizeof out_dir, "%s-out", dir);
    return 0;
}

/* The last occurrence of what (n bytes) in s[0..len), or NULL. */
static const uint8_t *last(const uint8_t *s, size_t len, const char *what) {
    size_t n = strlen(what);
    for (size_t i = len >= n ? len - n + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, what, n)) return s + i;
    return NULL;
}

/* sweep.json with its crc32c member computed again over the text before it (as eval/sweep.c
 * writes it: `  "crc32c": "1a2b3c4d"\n}\n` last); without one, as it is. */
static void write_settings(const uint8_t *s, size_t len) {
    const uint8_t *member = last(s, len, "  \"crc32c\": \"");
    if (!member) { fuzz_write_file(sweep_json, s, len); return; }
    size_t body = (size_t)(member - s);
    char tail[32];
    int n = snprintf(tail, sizeof tail, "  \"crc32c\": \"%08x\"\n}\n", (unsigned)crc32c(0, s, body));
    FILE *f = fopen(sweep_json, "wb");
    fuzz_assert(f && fwrite(s, 1, body, f) == body && fwrite(tail, 1, (size_t)n, f) == (size_t)n && fclose(f) == 0,
                "writing sweep.json");
}

/* The journal with each whole line that ends in a crc32c member sealed again (checked_line.h); a
 * last line without its newline stays torn. */
static void write_journal(const uint8_t *s, size_t len) {
    FILE *f = fopen(journal, "wb");
    fuzz_assert(f != NULL, "opening journal.jsonl");
    for (const uint8_t *p = s, *end = s + len; p < end;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const uint8_t *member = nl ? last(p, n, ", \"crc32c\": \"") : NULL;
        char *object = member ? malloc((size_t)(member - p) + 2) : NULL;
        size_t sealed_len = 0;
        char *sealed = NULL;
        if (object) {   /* the object without its crc32c member, its brace put back */
            memcpy(object, p, (size_t)(member - p));
            object[member - p] = '}';
            sealed = checked_line_seal(object, (size_t)(member - p) + 1, &sealed_len);
        }
        if (sealed) fwrite(sealed, 1, sealed_len, f);
        else fwrite(p, 1, n + (nl != NULL), f);
        free(object);
        free(sealed);
        p += n + (nl != NULL);
    }
    fuzz_assert(fclose(f) == 0, "writing journal.jsonl");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int raw = size > 0 && data[0] == 'R';
    if (raw) data++, size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t settings_len = nul ? (size_t)(nul - data) : size;
    if (raw) fuzz_write_file(sweep_json, data, settings_len);
    else write_settings(data, settings_len);
    if (nul && raw) fuzz_write_file(journal, nul + 1, size - settings_len - 1);
    else if (nul) write_journal(nul + 1, size - settings_len - 1);
    else unlink(journal);
    char *dirs[1] = {dir};
    SweepSettings s;
    SweepTotals t;
    Error err = {{0}};
    if (sweep_merge(dirs, 1, &s, &t, &err) == 0) {
        fuzz_assert(t.windows == s.windows_total && s.n_configs >= 1, "an accepted sweep holds every window");
        FILE *null = fopen("/dev/null", "w");
        fuzz_assert(null != NULL, "/dev/null");
        sweep_print_table(null, &s, &t);
        fclose(null);
        err.msg[0] = '\0';
        if (sweep_write_outputs(out_dir, &s, &t, &err) != 0)
            fuzz_assert(fuzz_one_line(err.msg), "an output refusal is one line");
        free(s.configs);
        sweep_totals_free(&t);
    } else {
        fuzz_assert(fuzz_one_line(err.msg) && strstr(err.msg, dir), "a refusal is one line naming the directory");
    }
    return 0;
}
