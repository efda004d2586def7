/* tests/fuzz/fuzz_sweep_dir.c: a sweep directory's readers (the settings in sweep.json, the
 * journal.jsonl of (window, configuration) records, the totals added up from it) on hostile
 * files, through sweep_merge with one shard. The input up to its first NUL byte becomes
 * sweep.json, the rest journal.jsonl (no NUL: no journal). A directory that is accepted must
 * hold every window and print its table and write its outputs (results.*, chart.svg) without
 * trouble; a refusal must be one line naming the directory. The scratch directories' names are
 * the only state kept between inputs. */
#include <string.h>
#include <unistd.h>
#include "eval/sweep.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t settings_len = nul ? (size_t)(nul - data) : size;
    fuzz_write_file(sweep_json, data, settings_len);
    if (nul) fuzz_write_file(journal, nul + 1, size - settings_len - 1);
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
