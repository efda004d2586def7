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

#endif
