/* tests/fuzz/fuzz_ppl_merge.c: ppl-merge's reader (ppl_merge_files) on hostile shard files.
 * The input is cut at NUL bytes into up to 3 parts, each written to its own file in a
 * scratch directory made once; the files are merged as shards of one evaluation. A merge
 * that succeeds must be self-consistent and print (text and --json) without trouble; a
 * refusal must be one line naming one of the files. The scratch directory's name is the only
 * state kept between inputs. */
#include <string.h>
#include "eval/report.h"
#include "tests/fuzz/fuzz.h"

#define MAX_SHARDS 3

static char dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof dir, "ppl-merge");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char names[MAX_SHARDS][96], *paths[MAX_SHARDS];
    int n = 0;
    for (size_t at = 0; n < MAX_SHARDS && (at < size || n == 0); n++) {
        const uint8_t *nul = memchr(data + at, 0, size - at);
        size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
        snprintf(names[n], sizeof names[n], "%s/shard%d.json", dir, n);
        fuzz_write_file(names[n], data + at, len);
        paths[n] = names[n];
        at += len + 1;
    }
    PplReport r;
    Error err = {{0}};
    if (ppl_merge_files(paths, n, &r, &err) == 0) {
        fuzz_assert(r.merged_shards == n && r.shard_count == 1, "merged report's shards");
        fuzz_assert(r.result.windows >= 0 && r.result.windows <= r.result.windows_total, "windows");
        FILE *null = fopen("/dev/null", "w");
        fuzz_assert(null != NULL, "/dev/null");
        report_ppl_text(null, &r);
        report_ppl_json(null, &r);
        fclose(null);
    } else {
        fuzz_assert(fuzz_one_line(err.msg) && strstr(err.msg, dir), "a refusal is one line naming the file");
    }
    return 0;
}
