/* quant/codec_pca_internal.h: what quant/codec_pca.c (pcaB's row codec: parsing, encode, the row
 * reads, code streams, fitting) and quant/codec_pca_blocks.c (its reads of 64 rows at a time:
 * transposed key blocks and the component-by-component block copy) share, outside KvCodec's
 * interface. Included by those two files only. */
#ifndef KVQ_CODEC_PCA_INTERNAL_H
#define KVQ_CODEC_PCA_INTERNAL_H

#include <stddef.h>
#include "quant/codec.h"
#include "quant/pca.h"

#define PCA_SCALE 10000   /* B is kept as B * 10^4 in KvBase.variant: up to 4 decimal places */

/* Where each component's code lies in a row, worked out once per call from the head's bits
 * (pca_decode's rule: a component past the row's bytes reads code 0), so that reading a row is
 * one two-byte load, a shift and a mask a stored component: the bit loop of get_bits took
 * several times longer than the attention the row then serves. */
typedef struct {
    int count;                           /* components with bits > 0, ascending */
    short comp[PCA_TABLE_STRIDE];
    short byte[PCA_TABLE_STRIDE];        /* the code's first byte in the row */
    unsigned char shift[PCA_TABLE_STRIDE];
    unsigned short mask[PCA_TABLE_STRIDE];   /* 0 for a component past the row's bytes */
    /* the same code as a four-byte load inside the row (rows of at least 4 bytes): its first
     * byte word[k] (the code's, or the row's last four) and the shift from there */
    short word[PCA_TABLE_STRIDE];
    unsigned char word_shift[PCA_TABLE_STRIDE];
    /* in a block of 64 rows (block_codes): the code's width (0 past the row's bytes) and where
     * its 64 rows' codes start, in bytes */
    unsigned char bits[PCA_TABLE_STRIDE];
    short segment[PCA_TABLE_STRIDE];
    size_t unit_bytes;
} CodeReader;

/* quant/codec_pca.c */
size_t pca_unit_bytes(const KvBase *b, int n);                      /* a row's bytes: B*d bits, rounded up */
int pca_component_bits(const PcaHead *h, int i);                    /* b_i, 0 when outside 1..8 */
unsigned pca_get_bits(const unsigned char *row, size_t at, int bits);
const float *pca_root_weights(const KvBase *b, int n, float *out);  /* sqrt(w), or NULL without +aw */
void pca_code_reader(const PcaHead *h, size_t unit_bytes, CodeReader *cr);
void pca_read_block(const PcaHead *h, const CodeReader *cr, const unsigned char *rows, int count, float *yt);

/* quant/codec_pca_blocks.c: KvCodec's decode_t64, block_codes and block_read for pcaB */
void pca_decode_t64(const KvBase *b, const void *units, int n, int r0, int count, float *kt);
void pca_block_codes(const KvBase *b, const void *units, int n, int r0, int count, void *block);
void pca_block_read(const KvBase *b, const void *block, int n, int count, KvBlockForm form, float *out);

#endif
