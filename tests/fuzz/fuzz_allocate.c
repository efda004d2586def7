/* tests/fuzz/fuzz_allocate.c: what ./run allocate reads (a sensitivity's sensitivity.json) on
 * hostile bytes, through allocate_run into the knapsack, for stories260K (the seeds are its
 * sensitivities: 5 layers, candidates int4-g8 and int2-g8) at budgets 4.2, 5 and 6 bits. The input
 * becomes DIR/sensitivity.json; its crc32c member (the last, model/formats/checked_json.h), which
 * a mutation almost always breaks, is computed again so that the fuzzer reaches the parsing and
 * the ranges behind it, unless the input starts with 'R' (raw: then the checksum is what is
 * fuzzed). A refusal must be one line naming the file (every error of reading it: the flags are
 * fixed and valid); an accepted file must give allocations within each budget, printed as JSON. */
#include <string.h>
#include <unistd.h>
#include "eval/allocate.h"
#include "model/formats/crc32c.h"
#include "tests/fuzz/fuzz.h"

#define MODEL "data/models/stories260K"

static char dir[64], path[96];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof dir, "allocate");
    snprintf(path, sizeof path, "%s/sensitivity.json", dir);
    return 0;
}

/* The last occurrence of what in s[0..len), or NULL. */
static const uint8_t *last(const uint8_t *s, size_t len, const char *what) {
    size_t n = strlen(what);
    for (size_t i = len >= n ? len - n + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, what, n)) return s + i;
    return NULL;
}

static void write_sensitivity(const uint8_t *s, size_t len, int raw) {
    const uint8_t *member = raw ? NULL : last(s, len, "  \"crc32c\": \"");
    FILE *f = fopen(path, "wb");
    fuzz_assert(f != NULL, "opening sensitivity.json");
    if (!member) {
        fuzz_assert(fwrite(s, 1, len, f) == len, "writing sensitivity.json");
    } else {
        size_t body = (size_t)(member - s);
        char tail[32];
        int n = snprintf(tail, sizeof tail, "  \"crc32c\": \"%08x\"\n}\n", (unsigned)crc32c(0, s, body));
        fuzz_assert(fwrite(s, 1, body, f) == body && fwrite(tail, 1, (size_t)n, f) == (size_t)n, "writing sensitivity.json");
    }
    fuzz_assert(fclose(f) == 0, "closing sensitivity.json");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int raw = size > 0 && data[0] == 'R';
    write_sensitivity(data + raw, size - (size_t)raw, raw);
    AllocateOptions o = {.model_dir = MODEL, .from = dir, .json = 1, .quiet = 1};
    const char *budgets[3] = {"4.2", "5", "6"};
    for (int b = 0; b < 3; b++) {
        char why[160];
        fuzz_assert(alloc_parse_budget(budgets[b], &o.budgets[b], why, sizeof why) == 0, "the fixed budgets parse");
        snprintf(o.budget_texts[b], sizeof o.budget_texts[b], "%s", budgets[b]);
    }
    o.n_budgets = 3;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    fuzz_assert(out != NULL, "open_memstream");
    Error err = {{0}};
    int rc = allocate_run(&o, out, stderr, &err);
    fclose(out);
    if (rc != 0) {
        fuzz_assert(fuzz_one_line(err.msg), "a refusal is one line");
        fuzz_assert(strstr(err.msg, "sensitivity.json") != NULL || strstr(err.msg, "--budget") != NULL,
                    "a refusal names the file (or the budget it cannot meet)");
    } else {
        fuzz_assert(text && strstr(text, "\"allocations\""), "an accepted file prints its allocations");
    }
    free(text);
    return 0;
}
