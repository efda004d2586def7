/* model/kernels/hugepages.c: large buffers on transparent huge pages.
 * Decode streams every weight and every cached key and value once per token. With 4 KiB
 * pages the hardware prefetcher stops at every page boundary and the TLB misses on every
 * few rows; on 2 MiB pages it does neither, for the weights and for attention's reads of the
 * KV cache (model/kernels/README.md). A prefill's activations gain too: the GEMM's output
 * tiles touch 48 token rows 8 KiB apart, each on its own 4 KiB page.
 * The advice is asked before the first touch, the only time it takes effect; elsewhere, or
 * when the kernel says no, plain pages serve. */
#define _DEFAULT_SOURCE   /* MADV_HUGEPAGE */
#include "model/kernels/hugepages.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *huge_alloc(size_t bytes) {
    if (bytes < HUGE_PAGE) {   /* a small buffer would otherwise hold a whole 2 MiB page */
        size_t lines = bytes == 0 ? 1 : (bytes + 63) / 64;   /* aligned_alloc wants a multiple */
        return aligned_alloc(64, lines * 64);
    }
    if (bytes > SIZE_MAX - HUGE_PAGE) return NULL;
    size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, rounded, MADV_HUGEPAGE);   /* advice only: failure changes nothing */
#endif
    return p;
}

void *huge_calloc(size_t n, size_t size) {
    if (size != 0 && n > SIZE_MAX / size) return NULL;
    void *p = huge_alloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}
