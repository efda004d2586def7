/* quant/rans.h: a static range asymmetric numeral system coder (rANS, J. Duda 2013; the byte-wise
 * form of F. Giesen's ryg_rans), written from its definition, for the code streams of SCHEMES.md
 * §9 (issue 53: entropy-coded compressed caches).
 *
 * A stream of n symbols in [0, symbols) is coded with a fixed table of frequencies f_s that sum
 * to RANS_TOTAL = 2^16 (every symbol that occurs has f_s >= 1; c_s = f_0 + ... + f_{s-1}):
 *   state x, 32 bits, starts at RANS_LOW = 2^23; symbols are coded last to first;
 *   to code s: while x >= (RANS_LOW >> 16 << 8) * f_s, emit x's low byte and x >>= 8;
 *              then x = (x / f_s) * 2^16 + (x mod f_s) + c_s;
 *   at the end the 4 bytes of x, little-endian; the bytes are stored in reverse of their emission,
 *   so the decoder reads them forwards:
 *   x = the first 4 bytes; per symbol: slot = x mod 2^16, s = the symbol with c_s <= slot < c_s + f_s,
 *   x = f_s * (x >> 16) + slot - c_s, then while x < RANS_LOW, x = (x << 8) | the next byte.
 * A valid stream ends with x back at RANS_LOW and every byte read. Each symbol costs about
 * log2(2^16 / f_s) bits, so with f_s proportional to the symbol's count the stream approaches its
 * zeroth-order entropy; the 4 bytes of the final state are the overhead of a stream.
 * Pure arithmetic: no allocation, no I/O; the decoder checks everything it reads. */
#ifndef KVQ_RANS_H
#define KVQ_RANS_H

#include <stddef.h>

#define RANS_PROB_BITS 16
#define RANS_TOTAL (1u << RANS_PROB_BITS)
#define RANS_LOW (1u << 23)
#define RANS_MAX_SYMBOLS 4096   /* vq12's alphabet */

/* The zeroth-order entropy of a stream with these counts, in bits: sum_s -n_s log2(n_s / N)
 * (SCHEMES.md §9); 0 for an empty stream. */
double rans_stream_entropy_bits(const unsigned *counts, int symbols);
/* Frequencies for counts[0..symbols): each symbol that occurs gets at least 1, the sum is
 * RANS_TOTAL, close to proportional (largest remainders). 0, or -1 when nothing occurs, more
 * symbols occur than RANS_TOTAL, or symbols is out of [1, RANS_MAX_SYMBOLS]. */
int rans_normalize(const unsigned *counts, int symbols, unsigned *freqs);
/* 1 when freqs[0..symbols) is a coder's table: symbols in [1, RANS_MAX_SYMBOLS], the sum exactly
 * RANS_TOTAL. */
int rans_freqs_valid(const unsigned *freqs, int symbols);
/* Codes codes[0..n) (each with a nonzero frequency) into out[0..cap); returns the bytes written,
 * 0 when cap is too small or a code has frequency 0 or lies outside the table. */
size_t rans_encode(const unsigned short *codes, size_t n, const unsigned *freqs, int symbols, unsigned char *out,
                   size_t cap);
/* Decodes exactly n symbols from in[0..len) into codes. slot_symbol: room for RANS_TOTAL
 * entries (the table from slot to symbol). 0, or -1 when the table is not valid, the stream
 * needs bytes past its end, or ends with bytes left over or a state other than RANS_LOW. */
int rans_decode(const unsigned char *in, size_t len, const unsigned *freqs, int symbols, size_t n,
                unsigned short *codes, unsigned short *slot_symbol);

#endif
