/* tests/test_codec_contract.c: the contract of quant/codec.h, once, for every codec of the table
 * and every example it lists (what ./run schemes shows): a new codec is checked by being in the
 * table. Per example, at rows of 64 (after its own definition's tests in test_codec_*.c):
 *   - its name parses to itself, and that name with trailing text does not parse;
 *   - stored bits = unit_bytes x 8 / values, and encode writes exactly its unit: every byte
 *     (the same unit over a buffer of 0x00 or 0xff) and none past it;
 *   - a round trip of seeded gaussian rows within the bound its stored bits state: relative rms
 *     error <= min(2 x 2^(-bits/2), 0.8) (rate-distortion-shaped: twice the error 2^-R of an ideal
 *     code of R bits a value, and below 1, what decoding zeros gives; int2-g64's symmetric 3
 *     levels are the closest at 0.71),
 *     rows taken from the inner domain back with the codec's rotate;
 *   - rows with NaN, +inf and -inf encode (deterministically, every byte) and decode without a
 *     crash, and the other rows of a token-axis unit still decode finite;
 *   - decode_t64, when the codec has one, = decode then transpose, bit for bit (NaN as NaN), for
 *     every count 1..64 and an offset start;
 *   - a fitted codec: its table fitted on seeded rows (through its KvFit: layout, scratch, fit),
 *     twice with the same bits, passing its own check, with a finite objective no worse than a
 *     table fitted on other rows; examples whose fit needs more than MAX_FIT_ROWS rows take a
 *     seeded table instead when the codec's check accepts one (said in the output). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include "tests/test.h"
#include "tests/test_random.h"

#define N 64
#define MAX_FIT_ROWS 4096
#define GUARD 16

static void *alloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static void gaussian_rows(float *x, size_t values, uint64_t *rng) {
    for (size_t i = 0; i < values; i++) x[i] = normal(rng);
}

/* ---- fitted codecs: a table from seeded rows ---- */

typedef struct {
    float *table;         /* one table (one KV head's, or the shared one) */
    size_t floats;
    int fitted;           /* 1: by the codec's fit; 0: a seeded table (the fit needs too many rows) */
} Table;

static int fit_on(const KvBase *b, const float *units, size_t count, float *table, KvFitShortfall *sf) {
    KvFitRows rows = {.units = units, .count = count, .n = N};
    void *scratch = alloc(b->codec->fit->scratch_bytes(b, &rows));
    int rc = b->codec->fit->fit(b, &rows, table, scratch, sf);
    free(scratch);
    return rc;
}

static double objective_on(const KvBase *b, const float *units, size_t count, const float *table) {
    KvFitRows rows = {.units = units, .count = count, .n = N};
    void *scratch = alloc(b->codec->fit->scratch_bytes(b, &rows));
    double o = b->codec->fit->objective(b, &rows, table, scratch);
    free(scratch);
    return o;
}

/* Units enough for the fit (grown from the shortfall it reports), or 0 past MAX_FIT_ROWS. */
static size_t units_needed(const KvBase *b, float *probe_table, uint64_t seed) {
    size_t count = 16;
    for (;;) {
        float *x = alloc(count * (size_t)b->rows * N * sizeof(float));
        uint64_t rng = seed;
        gaussian_rows(x, count * (size_t)b->rows * N, &rng);
        KvFitShortfall sf = {0, 0};
        int rc = fit_on(b, x, count, probe_table, &sf);
        free(x);
        if (rc == 0) return count;
        size_t need = 4 * (size_t)sf.entries, grown = sf.points ? count * need / sf.points + 1 : count * 2;
        if (grown <= count) grown = count * 2;
        if (grown * (size_t)b->rows > MAX_FIT_ROWS) return 0;
        count = grown;
    }
}

static void fit_contract(const KvBase *b, Table *t, uint64_t *rng) {
    char name[240], why[200] = "";
    KvFitLayout layout;
    b->codec->fit->layout(b, N, &layout);
    t->floats = kv_fit_table_floats(&layout);
    t->table = alloc(t->floats * sizeof(float));
    snprintf(name, sizeof name, "contract %s: fit layout of 1..%d tensors of 1..%d dims, %zu floats a table", b->name,
             KV_FIT_MAX_TENSORS, KV_FIT_MAX_DIMS, t->floats);
    int layout_ok = layout.n_tensors >= 1 && layout.n_tensors <= KV_FIT_MAX_TENSORS && t->floats > 0;
    for (int i = 0; i < layout.n_tensors && layout_ok; i++)
        layout_ok = layout.tensors[i].ndim >= 1 && layout.tensors[i].ndim <= KV_FIT_MAX_DIMS && layout.tensors[i].name &&
                    (layout.n_tensors == 1 || layout.tensors[i].name[0]);
    check(layout_ok, name, "bad layout");
    size_t count = units_needed(b, t->table, 0xf17ull);
    if (!count) {   /* a seeded table, when the codec accepts one */
        for (size_t i = 0; i < t->floats; i++) t->table[i] = normal(rng);
        t->fitted = 0;
        int ok = !b->codec->fit->check || b->codec->fit->check(b, N, t->table, why, sizeof why);
        printf("     %s: its fit needs more than %d rows: a seeded table instead%s\n", b->name, MAX_FIT_ROWS,
               ok ? "" : " (refused by its check: round trips skipped)");
        if (!ok) t->floats = 0;
        return;
    }
    t->fitted = 1;
    size_t values = count * (size_t)b->rows * N;
    float *x = alloc(values * sizeof(float)), *other = alloc(values * sizeof(float));
    float *again = alloc(t->floats * sizeof(float)), *elsewhere = alloc(t->floats * sizeof(float));
    uint64_t seed = 0xf17ull, seed2 = 0xabcdull;
    gaussian_rows(x, values, &seed);
    gaussian_rows(other, values, &seed2);
    KvFitShortfall sf;
    int rc = fit_on(b, x, count, t->table, &sf) | fit_on(b, x, count, again, &sf) | fit_on(b, other, count, elsewhere, &sf);
    int checked = !b->codec->fit->check || b->codec->fit->check(b, N, t->table, why, sizeof why);
    double mine = objective_on(b, x, count, t->table), theirs = objective_on(b, x, count, elsewhere);
    snprintf(name, sizeof name, "contract %s: fit on %zu seeded units deterministic, passes its check, objective %.4g "
             "finite and <= a table fitted on other rows (%.4g)", b->name, count, mine, theirs);
    check(rc == 0 && !memcmp(t->table, again, t->floats * sizeof(float)) && checked && isfinite(mine) && mine <= theirs,
          name, "rc %d, %s", rc, why);
    free(x); free(other); free(again); free(elsewhere);
}

/* ---- the row contract ---- */

static void names_contract(const char *example, const KvBase *b) {
    char longer[64], why[200], name[200];
    KvBase other;
    snprintf(longer, sizeof longer, "%sz", example);
    snprintf(name, sizeof name, "contract %s: parses to itself (%s), '%s' does not parse", example, b->name, longer);
    check(!strcmp(b->name, example) && kv_base_parse(longer, &other, why, sizeof why) != 0, name, "name '%s'", b->name);
}

/* encode writes its whole unit and nothing past it; bits = bytes x 8 / values. */
static void bytes_contract(const KvBase *b, const float *x) {
    size_t ub = b->codec->unit_bytes(b, N), values = (size_t)b->rows * N;
    unsigned char *u0 = alloc(ub + GUARD), *u1 = alloc(ub + GUARD);
    memset(u0, 0x00, ub + GUARD);
    memset(u1, 0xff, ub + GUARD);
    b->codec->encode(b, x, N, u0);
    b->codec->encode(b, x, N, u1);
    int guard_ok = 1;
    for (int i = 0; i < GUARD; i++) guard_ok &= u0[ub + i] == 0x00 && u1[ub + i] == 0xff;
    char name[200];
    double bits = 8.0 * (double)ub / (double)values;
    snprintf(name, sizeof name, "contract %s: %zu bytes a unit of %zu values (%.4g bits): encode writes each of them, "
             "nothing past", b->name, ub, values, bits);
    check(ub > 0 && !memcmp(u0, u1, ub) && guard_ok, name, "bytes depend on the buffer, or a guard byte changed");
    free(u0);
    free(u1);
}

/* x -> unit -> decoded rows back in the natural domain. */
static void round_trip(const KvBase *b, const float *x, float *out) {
    size_t ub = b->codec->unit_bytes(b, N);
    unsigned char *u = alloc(ub);
    b->codec->encode(b, x, N, u);
    b->codec->decode(b, u, N, 0, b->rows, out);
    for (int r = 0; b->codec->rotate && r < b->rows; r++) b->codec->rotate(b, out + (size_t)r * N, N, KV_FROM_INNER);
    free(u);
}

static void error_contract(const KvBase *b, uint64_t *rng) {
    enum { UNITS = 32 };
    size_t values = (size_t)b->rows * N;
    float *x = alloc(values * sizeof(float)), *y = alloc(values * sizeof(float));
    double err = 0, energy = 0;
    for (int u = 0; u < UNITS; u++) {
        gaussian_rows(x, values, rng);
        round_trip(b, x, y);
        for (size_t i = 0; i < values; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), energy += (double)x[i] * x[i];
    }
    double bits = 8.0 * (double)b->codec->unit_bytes(b, N) / (double)values, rel = sqrt(err / energy);
    double bound = fmin(2.0 * pow(2.0, -bits / 2.0), 0.8);   /* below 1: decoding zeros fails */
    char name[200];
    snprintf(name, sizeof name, "contract %s: round trip of %d seeded gaussian units: relative rms error %.3g <= "
             "min(2 x 2^(-%.4g/2), 0.8) = %.3g", b->name, UNITS, rel, bits, bound);
    check(rel <= bound, name, "%.4g", rel);
    free(x);
    free(y);
}

static int same_or_nan(float a, float b) { return to_bits(a) == to_bits(b) || (isnan(a) && isnan(b)); }

static void nonfinite_contract(const KvBase *b, uint64_t *rng) {
    size_t values = (size_t)b->rows * N, ub = b->codec->unit_bytes(b, N);
    float *x = alloc(values * sizeof(float)), *y = alloc(values * sizeof(float));
    unsigned char *u0 = alloc(ub), *u1 = alloc(ub);
    int ok = 1;
    const float specials[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        gaussian_rows(x, values, rng);
        x[5] = specials[k];   /* row 0 (of a token-axis unit: its first position) */
        memset(u0, 0x00, ub);
        memset(u1, 0xff, ub);
        b->codec->encode(b, x, N, u0);
        b->codec->encode(b, x, N, u1);
        ok &= !memcmp(u0, u1, ub);
        b->codec->decode(b, u0, N, 0, b->rows, y);
        /* rows a NaN does not share a unit's channel-group with stay finite: check the last row
         * of a token-axis unit's last channel group, which x[5] does not touch */
        if (b->rows > 1)
            for (int i = N - 8; i < N; i++) ok &= isfinite(y[(size_t)(b->rows - 1) * N + i]) != 0;
    }
    char name[200];
    snprintf(name, sizeof name, "contract %s: a row with NaN, +inf or -inf encodes deterministically and decodes "
             "without a crash", b->name);
    check(ok, name, "bytes depend on the buffer, or an untouched value came back non-finite");
    free(x); free(y); free(u0); free(u1);
}

static void t64_contract(const KvBase *b, uint64_t *rng) {
    if (!b->codec->decode_t64) return;
    int starts[2] = {0, b->rows > 1 ? b->rows : 16};
    size_t ub = b->codec->unit_bytes(b, N), values = (size_t)b->rows * N;
    size_t units = (size_t)(starts[1] + 64 + b->rows - 1) / (size_t)b->rows;
    enum { ROWS = 64 + 64 };
    unsigned char *u = alloc(units * ub);
    float *x = alloc(values * sizeof(float)), *rows = alloc((size_t)ROWS * N * sizeof(float));
    float *kt = alloc(64 * (size_t)N * sizeof(float));
    for (size_t k = 0; k < units; k++) {
        gaussian_rows(x, values, rng);
        if (k == 3) x[7] = NAN;
        b->codec->encode(b, x, N, u + k * ub);
    }
    b->codec->decode(b, u, N, 0, (int)(units * b->rows), rows);
    int bad = 0;
    for (int s = 0; s < 2; s++)
        for (int count = 1; count <= 64; count++) {
            if (count % b->rows) continue;   /* token-axis blocks are whole units */
            memset(kt, 0xa5, 64 * (size_t)N * sizeof(float));
            b->codec->decode_t64(b, u, N, starts[s], count, kt);
            for (int i = 0; i < N; i++)
                for (int p = 0; p < 64; p++) {
                    float want = p < count ? rows[(size_t)(starts[s] + p) * N + i] : 0.0f;
                    bad += !same_or_nan(kt[(size_t)i * 64 + p], want);
                }
        }
    char name[200];
    snprintf(name, sizeof name, "contract %s: decode_t64 = decode then transpose (zeros past count), counts 1..64, two "
             "starts", b->name);
    check(bad == 0, name, "%d values differ", bad);
    free(u); free(x); free(rows); free(kt);
}

int main(void) {
    uint64_t rng = 0xc0dec0de5eedull;
    int examples = 0;
    for (int c = 0; c < kv_codec_count(); c++) {
        const KvCodec *codec = kv_codec_at(c);
        char list[512];
        snprintf(list, sizeof list, "%s", codec->examples);
        for (char *e = strtok(list, " "); e; e = strtok(NULL, " ")) {
            KvBase b;
            char why[200] = "", name[120];
            snprintf(name, sizeof name, "contract %s: an example parses to its codec", e);
            if (!check(kv_base_parse(e, &b, why, sizeof why) == 0 && b.codec == codec, name, "%s", why)) continue;
            if (!kv_base_check(&b, N, why, sizeof why)) {   /* nf4-g128: groups wider than these rows */
                printf("     %s: not for rows of %d (%s): skipped\n", e, N, why);
                continue;
            }
            examples++;
            names_contract(e, &b);
            Table t = {NULL, 0, 0};
            if (codec->fit) {
                fit_contract(&b, &t, &rng);
                if (!t.floats) {
                    free(t.table);
                    continue;
                }
                b.table = t.table;
            }
            float *x = alloc((size_t)b.rows * N * sizeof(float));
            gaussian_rows(x, (size_t)b.rows * N, &rng);
            bytes_contract(&b, x);
            free(x);
            error_contract(&b, &rng);
            nonfinite_contract(&b, &rng);
            t64_contract(&b, &rng);
            free(t.table);
        }
    }
    printf("     %d examples of %d codecs\n", examples, kv_codec_count());
    return test_exit_code();
}
