/* tests/test_rans.c: the static rANS coder (quant/rans.h) against its definition.
 *
 * - A two-symbol stream coded by hand from the definition: its exact bytes.
 * - rans_normalize: sums to RANS_TOTAL, every present symbol >= 1, absent ones 0, proportional
 *   within one unit plus the remainder given to the most frequent symbol.
 * - Round trips of seeded skewed streams over alphabets of 2, 16, 256 and 4096 symbols, lengths
 *   1 to 20,000: decoded equal, and the coded bits within 1% + 40 bits of the stream's
 *   zeroth-order entropy (kv_stream_entropy_bits' sum, restated here).
 * - Refusals: a table not summing to RANS_TOTAL, a stream cut short, a byte too many, a stream
 *   decoded for more symbols than it holds, a code outside the table or of frequency 0 (encode). */
#include "tests/test.h"
#include "quant/rans.h"

static unsigned short syms[20000], back[20000];
static unsigned char buf[80000];
static unsigned short slot_table[RANS_TOTAL];

static void test_by_hand(void) {
    /* f = {2^15, 2^15}, codes (0, 1): x = 2^23; code 1: x = (2^23 / 2^15) * 2^16 + 0 + 2^15 =
     * 16809984; code 0: x = (16809984 / 2^15) * 2^16 + 16809984 mod 2^15 = 513 * 2^16 = 0x02010000;
     * no byte emitted (x stays below 2^15 * f = 2^30); the state little-endian */
    unsigned freqs[2] = {32768, 32768};
    unsigned short codes[2] = {0, 1};
    size_t len = rans_encode(codes, 2, freqs, 2, buf, sizeof buf);
    unsigned char want[4] = {0x00, 0x00, 0x01, 0x02};
    check(len == 4 && !memcmp(buf, want, 4), "rans: (0, 1) with f = {2^15, 2^15} is 00 00 01 02",
          "len %zu, %02x %02x %02x %02x", len, buf[0], buf[1], buf[2], buf[3]);
    unsigned short got[2] = {9, 9};
    check(rans_decode(buf, len, freqs, 2, 2, got, slot_table) == 0 && got[0] == 0 && got[1] == 1,
          "rans: 00 00 01 02 decodes to (0, 1)", "%u %u", got[0], got[1]);
}

static void test_normalize(void) {
    unsigned counts[5] = {1000, 0, 1, 3, 7}, freqs[5];
    int ok = rans_normalize(counts, 5, freqs) == 0;
    unsigned long sum = 0;
    for (int s = 0; s < 5; s++) sum += freqs[s];
    double total = 1011;
    int prop = 1;
    for (int s = 2; s < 5; s++) prop &= fabs(freqs[s] - counts[s] * RANS_TOTAL / total) < 1.0;
    check(ok && sum == RANS_TOTAL && freqs[1] == 0 && freqs[2] >= 1 && prop && freqs[0] == RANS_TOTAL - freqs[2] - freqs[3] - freqs[4],
          "rans: normalize sums to 2^16, keeps absent symbols at 0, others proportional, the rest on the most frequent",
          "sum %lu, %u %u %u %u %u", sum, freqs[0], freqs[1], freqs[2], freqs[3], freqs[4]);
    /* a million of one symbol and one of each of 4095 others: the rare ones get 1 each */
    static unsigned many[RANS_MAX_SYMBOLS], mf[RANS_MAX_SYMBOLS];
    for (int s = 0; s < RANS_MAX_SYMBOLS; s++) many[s] = s ? 1 : 1000000;
    ok = rans_normalize(many, RANS_MAX_SYMBOLS, mf) == 0 && rans_freqs_valid(mf, RANS_MAX_SYMBOLS);
    int ones = 1;
    for (int s = 1; s < RANS_MAX_SYMBOLS; s++) ones &= mf[s] == 1;
    check(ok && ones && mf[0] == RANS_TOTAL - (RANS_MAX_SYMBOLS - 1), "rans: rare symbols bumped to 1, taken from the most frequent",
          "f0 %u", mf[0]);
    unsigned zero[3] = {0, 0, 0};
    check(rans_normalize(zero, 3, freqs) == -1, "rans: normalize refuses an empty stream", "accepted");
}

static double entropy(const unsigned *counts, int symbols) {
    double n = 0, h = 0;
    for (int s = 0; s < symbols; s++) n += counts[s];
    for (int s = 0; s < symbols; s++)
        if (counts[s]) h -= counts[s] * log2(counts[s] / n);
    return h;
}

static void test_round_trips(void) {
    static unsigned counts[RANS_MAX_SYMBOLS], freqs[RANS_MAX_SYMBOLS];
    const int alphabets[] = {2, 16, 256, 4096};
    const size_t lengths[] = {1, 7, 1000, 20000};
    uint64_t seed = 5;
    int bad_trip = 0, bad_size = 0, tried = 0;
    char why[200] = "";
    for (int a = 0; a < 4; a++)
        for (int l = 0; l < 4; l++) {
            int symbols = alphabets[a];
            size_t n = lengths[l];
            memset(counts, 0, sizeof counts);
            for (size_t i = 0; i < n; i++) {
                double u = (rnd(&seed) + 1) / 2;   /* skewed: small codes far more often */
                int s = (int)(u * u * u * symbols);
                syms[i] = (unsigned short)(s < symbols ? s : symbols - 1);
                counts[syms[i]]++;
            }
            rans_normalize(counts, symbols, freqs);
            size_t len = rans_encode(syms, n, freqs, symbols, buf, sizeof buf);
            int ok = len > 0 && rans_decode(buf, len, freqs, symbols, n, back, slot_table) == 0 &&
                     !memcmp(syms, back, n * sizeof *syms);
            double h = entropy(counts, symbols), bits = 8.0 * len;
            tried++;
            if (!ok && !bad_trip++) snprintf(why, sizeof why, "alphabet %d, %zu codes: no round trip", symbols, n);
            if (n >= 1000 && bits > h * 1.01 + 40 && !bad_size++)
                snprintf(why, sizeof why, "alphabet %d, %zu codes: %g bits, entropy %g", symbols, n, bits, h);
        }
    check(!bad_trip, "rans: 16 seeded streams (alphabets 2..4096, 1..20000 codes) decode to themselves", "%s", why);
    check(!bad_size, "rans: streams of 1000+ codes within 1% + 40 bits of their zeroth-order entropy", "%s", why);
}

static void test_refusals(void) {
    unsigned freqs[4] = {40000, 20000, 5536, 0};
    for (int i = 0; i < 500; i++) syms[i] = (unsigned short)(i % 7 == 0 ? 2 : i % 3 == 0);
    size_t len = rans_encode(syms, 500, freqs, 4, buf, sizeof buf);
    check(len > 4 && rans_decode(buf, len, freqs, 4, 500, back, slot_table) == 0, "rans: the refusals' stream decodes",
          "len %zu", len);
    check(rans_decode(buf, len - 1, freqs, 4, 500, back, slot_table) == -1, "rans: a stream cut short is refused", "accepted");
    buf[len] = 0x5a;
    check(rans_decode(buf, len + 1, freqs, 4, 500, back, slot_table) == -1, "rans: a byte too many is refused", "accepted");
    check(rans_decode(buf, len, freqs, 4, 501, back, slot_table) == -1, "rans: decoding past the stream's symbols is refused",
          "accepted");
    check(rans_decode(buf, len, freqs, 4, 499, back, slot_table) == -1, "rans: a stream that holds more symbols is refused",
          "accepted");
    unsigned off[4] = {40000, 20000, 5535, 0};
    check(rans_decode(buf, len, off, 4, 500, back, slot_table) == -1, "rans: a table summing to 2^16 - 1 is refused", "accepted");
    unsigned short outside[1] = {4}, absent[1] = {3};
    check(rans_encode(outside, 1, freqs, 4, buf, sizeof buf) == 0 && rans_encode(absent, 1, freqs, 4, buf, sizeof buf) == 0,
          "rans: encode refuses a code outside the table or of frequency 0", "accepted");
    check(rans_encode(syms, 500, freqs, 4, buf, 8) == 0, "rans: encode refuses a buffer too small", "accepted");
}

int main(void) {
    test_by_hand();
    test_normalize();
    test_round_trips();
    test_refusals();
    return test_failures ? 1 : 0;
}
