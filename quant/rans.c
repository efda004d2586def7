/* quant/rans.c: the static rANS coder of quant/rans.h, from its definition there. */
#include "quant/rans.h"
#include <math.h>
#include <string.h>

double rans_stream_entropy_bits(const unsigned *counts, int symbols) {
    double total = 0, bits = 0;
    for (int s = 0; s < symbols; s++) total += counts[s];
    for (int s = 0; s < symbols; s++)
        if (counts[s]) bits -= counts[s] * log2(counts[s] / total);
    return bits;
}

static int argmax(const unsigned *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

int rans_normalize(const unsigned *counts, int symbols, unsigned *freqs) {
    if (symbols < 1 || symbols > RANS_MAX_SYMBOLS) return -1;
    unsigned long long total = 0;
    int present = 0;
    for (int s = 0; s < symbols; s++) total += counts[s], present += counts[s] > 0;
    if (present == 0 || present > (int)RANS_TOTAL) return -1;
    long sum = 0;
    for (int s = 0; s < symbols; s++) {   /* in integers: the decoder derives the same table from the counts */
        unsigned f = (unsigned)((unsigned long long)counts[s] * RANS_TOTAL / total);
        freqs[s] = counts[s] && f == 0 ? 1 : f;
        sum += freqs[s];
    }
    /* the rounding's remainder to (or from) the most frequent symbol, which it changes least in
     * relative terms; the bumps to 1 of rare symbols can leave the sum above the total */
    long extra = (long)RANS_TOTAL - sum;
    while (extra != 0) {
        int top = argmax(freqs, symbols);
        long take = extra > 0 ? extra : -((long)freqs[top] - 1 < -extra ? (long)freqs[top] - 1 : -extra);
        if (take == 0) return -1;   /* cannot happen with present <= RANS_TOTAL */
        freqs[top] = (unsigned)((long)freqs[top] + take);
        extra -= take;
    }
    return 0;
}

int rans_freqs_valid(const unsigned *freqs, int symbols) {
    if (symbols < 1 || symbols > RANS_MAX_SYMBOLS) return 0;
    unsigned long long sum = 0;
    for (int s = 0; s < symbols; s++) sum += freqs[s];
    return sum == RANS_TOTAL;
}

size_t rans_encode(const unsigned short *codes, size_t n, const unsigned *freqs, int symbols, unsigned char *out,
                   size_t cap) {
    unsigned cum[RANS_MAX_SYMBOLS + 1];
    if (!rans_freqs_valid(freqs, symbols) || cap < 4) return 0;
    cum[0] = 0;
    for (int s = 0; s < symbols; s++) cum[s + 1] = cum[s] + freqs[s];
    unsigned char *p = out + cap;   /* written backwards: the decoder reads forwards */
    unsigned x = RANS_LOW;
    for (size_t i = n; i-- > 0;) {
        unsigned s = codes[i];
        if (s >= (unsigned)symbols || freqs[s] == 0) return 0;
        unsigned f = freqs[s], x_max = ((RANS_LOW >> RANS_PROB_BITS) << 8) * f;
        while (x >= x_max) {
            if (p == out + 4) return 0;   /* keep room for the state */
            *--p = (unsigned char)(x & 0xffu);
            x >>= 8;
        }
        x = ((x / f) << RANS_PROB_BITS) + (x % f) + cum[s];
    }
    p -= 4;
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(x >> (8 * k));
    size_t len = (size_t)(out + cap - p);
    memmove(out, p, len);
    return len;
}

int rans_decode(const unsigned char *in, size_t len, const unsigned *freqs, int symbols, size_t n,
                unsigned short *codes, unsigned short *slot_symbol) {
    unsigned cum[RANS_MAX_SYMBOLS + 1];
    if (!rans_freqs_valid(freqs, symbols) || len < 4) return -1;
    cum[0] = 0;
    for (int s = 0; s < symbols; s++) {
        cum[s + 1] = cum[s] + freqs[s];
        for (unsigned k = cum[s]; k < cum[s + 1]; k++) slot_symbol[k] = (unsigned short)s;
    }
    unsigned x = (unsigned)in[0] | (unsigned)in[1] << 8 | (unsigned)in[2] << 16 | (unsigned)in[3] << 24;
    size_t pos = 4;
    for (size_t i = 0; i < n; i++) {
        unsigned slot = x & (RANS_TOTAL - 1), s = slot_symbol[slot];
        codes[i] = (unsigned short)s;
        x = freqs[s] * (x >> RANS_PROB_BITS) + slot - cum[s];
        while (x < RANS_LOW) {
            if (pos == len) return -1;   /* past the stream's end */
            x = (x << 8) | in[pos++];
        }
    }
    return x == RANS_LOW && pos == len ? 0 : -1;
}
