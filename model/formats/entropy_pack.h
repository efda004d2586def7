/* model/formats/entropy_pack.h: one tensor's packed codec units as entropy-coded sections
 * (`compress --entropy`, format kvq-compressed-4; SCHEMES.md §9, issue 53).
 *
 * The units of a tensor — heads x units, unit_bytes each, b->rows rows of n values a unit — are
 * split by the codec's code layout (quant/codec.h: code_layout, codes, put_codes) into
 *   - the code streams, one per (KV head, slot): the slot's codes of every unit and row in order,
 *     each coded with the static rANS coder (quant/rans.h) under its own frequency table;
 *   - everything else, bit for bit: the units' bits that are not code bits (fp16 scales, norms,
 *     minimums, +out's values and indices, padding), in unit order, LSB first.
 * A base without code streams (fp16, bf16, fp32) has only the second part: its units as they are.
 * Unpacking gives back the same unit bytes, so a decompress gives the fixed-rate file's values.
 *
 * Blob layout (little-endian u32 unless said):
 *   "KVQE", version 1, heads, units, unit_bytes, rows, slots, symbols
 *   the rest section:   byte length, bytes, CRC-32C of the length and the bytes
 *   per head, per slot: a stream section:
 *                       its table: each symbol's count + 1 in Elias gamma code, LSB first, padded
 *                       to a byte (the counts add up to the stream's length; coder and decoder
 *                       derive the same frequencies from them: rans_normalize); the rANS bytes'
 *                       length (7 bits a byte, high bit = more); the rANS bytes; the CRC-32C of
 *                       the section up to here
 * Every section is refused on a CRC mismatch, a table whose counts do not add up to the stream's
 * length (or that ends early), a stream decoding past its end or short of it; the header must
 * match what the scheme makes of the tensor's shape. */
#ifndef KVQ_ENTROPY_PACK_H
#define KVQ_ENTROPY_PACK_H

#include <stddef.h>
#include "model/formats/error.h"
#include "quant/scheme.h"

typedef struct {
    int heads;
    size_t units, unit_bytes;   /* per head */
    int n;                      /* values a row */
} EntropyShape;

/* What packing one tensor measured (added into by entropy_pack). */
typedef struct {
    double code_entropy_bits;   /* sum over streams of sum_s -n_s log2(n_s / N) */
    double coded_bits;          /* the rANS streams' bytes x 8 */
    double rest_bits;           /* the units' bits that are not codes (parameters, padding) */
    double param_bits;          /* the parameters at their stored bits (code_layout's + +out's) */
    double table_bytes;         /* frequency tables and section framing (lengths, CRCs, header) */
    double coded_values;        /* values the streams' units hold */
} EntropyStats;

/* The blob of one tensor's units into *blob (malloc'd), its length in *len; stats added into.
 * KV head h's units are coded by specs[h] when per_head (a fitted base's heads each have their
 * table: pca's code widths are the head's fitted bits), else by specs[0]. 0, or -1 (out of memory). */
int entropy_pack(const KvSpec *specs, int per_head, const EntropyShape *shape, const unsigned char *units,
                 unsigned char **blob, size_t *len, EntropyStats *stats, Error *err);
/* The units back from a blob, checked; what names the tensor in a refusal. 0, or -1. */
int entropy_unpack(const KvSpec *specs, int per_head, const EntropyShape *shape, const unsigned char *blob, size_t len,
                   unsigned char *units, const char *what, Error *err);

#endif
