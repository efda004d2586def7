/* tests/kvcache_shape.h: the small caches tests/test_kvcache.c reads back and
 * tests/test_kvcache_bytes.c sizes: their shape and the partner specs that fill the places the
 * spec under test is not in. */
#ifndef KVQ_TESTS_KVCACHE_SHAPE_H
#define KVQ_TESTS_KVCACHE_SHAPE_H

#define RB_LAYERS 2
#define RB_HEADS 2          /* KV heads */
#define RB_DIM 64           /* head_dim */
/* a t32 base with +sink3+res5 ends with two groups quantized and 13 positions in its window */
#define RB_POSITIONS 80
#define RB_MAX_BATCH 8
/* The partner specs, where the spec under test is not (keys of layer 1, values of layer 0): their
 * numbers differ from the specs under test, so a store that reads with the wrong spec is seen. */
#define RB_PARTNER_KEYS "q4_0+prerope+sink2"
#define RB_PARTNER_VALUES "nf4-g32+res3"

#endif
