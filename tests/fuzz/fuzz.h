/* tests/fuzz/fuzz.h: what every libFuzzer target here shares.
 * A target defines LLVMFuzzerTestOneInput; an invariant that fails calls
 * fuzz_fail, which prints why and aborts, so libFuzzer records the input as a
 * crash. Targets keep no state between inputs except read-only data loaded once. */
#ifndef KVQ_FUZZ_H
#define KVQ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the run on a broken invariant (the input is then saved as a crash). */
#define fuzz_assert(cond, what)                                                        \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, what); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* An error message must be one non-empty line. */
static inline int fuzz_one_line(const char *msg) {
    if (!msg[0]) return 0;
    for (const char *p = msg; *p; p++)
        if (*p == '\n') return 0;
    return 1;
}

/* For targets whose readers take paths: a scratch directory build/fuzz/scratch/NAME-XXXXXX
 * (run from the repo root, as `make fuzz` does; build/ is not committed, so nothing needs
 * cleaning up), made once in LLVMFuzzerInitialize into dir; exits when it cannot be made. */
static inline void fuzz_scratch_dir(char *dir, size_t n, const char *name) {
    mkdir("build/fuzz/scratch", 0755);   /* may exist already; mkdtemp reports any real problem */
    snprintf(dir, n, "build/fuzz/scratch/%s-XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp in build/fuzz/scratch (run from the repo root)");
        exit(2);
    }
}

/* Writes data[0..size) to path; a failure stops the run. */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    fuzz_assert(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "writing an input file");
}

#endif
