/* model/hugepages.h: large buffers on 2 MiB boundaries, on transparent huge pages where the
 * kernel offers them (model/hugepages.c). free() releases them. */
#ifndef KVQ_HUGEPAGES_H
#define KVQ_HUGEPAGES_H

#include <stddef.h>

/* bytes (rounded up to 2 MiB) of untouched memory; NULL when out of memory. */
void *huge_alloc(size_t bytes);
/* n * size bytes of zeros; NULL when out of memory or when n * size overflows. */
void *huge_calloc(size_t n, size_t size);
/* A working buffer of bytes, 64-byte aligned: on huge pages from 2 MiB up, from malloc below
 * (a small buffer would otherwise hold a whole 2 MiB page). NULL when out of memory. */
void *buffer_alloc(size_t bytes);

#endif
