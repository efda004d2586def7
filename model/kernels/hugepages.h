/* model/kernels/hugepages.h: large buffers on 2 MiB boundaries, on transparent huge pages where the
 * kernel offers them (model/kernels/hugepages.c); small ones from malloc. free() releases them. */
#ifndef KVQ_HUGEPAGES_H
#define KVQ_HUGEPAGES_H

#include <stddef.h>

/* bytes of untouched memory: from 2 MiB up rounded up to 2 MiB and on huge pages, below that
 * 64-byte aligned from malloc. NULL when out of memory. */
void *huge_alloc(size_t bytes);
/* n * size bytes of zeros; NULL when out of memory or when n * size overflows. */
void *huge_calloc(size_t n, size_t size);

#endif
