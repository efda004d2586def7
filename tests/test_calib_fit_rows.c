/* tests/test_calib_fit_rows.c: calib_fit_all (eval/calib_fit.c) on calibration rows made here, small
 * enough to know what each table must be:
 * - a +prerope fit reads the keys before RoPE, every other fit the keys after RoPE: the +prerope
 *   table fitted from rows whose pre-RoPE keys are Y equals the plain table fitted from rows whose
 *   (post-RoPE) keys are Y, and differs from the plain one fitted from the same rows' keys X;
 * - a plain fit on rows collected without pre-RoPE keys (kpre NULL) works, and a +prerope fit on
 *   them is refused naming what is missing, not a crash;
 * - degenerate rows (Lloyd starts from two equal entries, which end out of order) still give
 *   every 1-D table ascending, as calibration files require. */
#include <stdlib.h>
#include <string.h>
#include "eval/calibrate.h"
#include "tests/test.h"

#define LAYERS 1
#define KV_HEADS 1
#define DIM 64
#define WINDOWS 2
#define CTX 256

static void rows_init(CalibRows *r, int with_kpre) {
    memset(r, 0, sizeof *r);
    r->n_layers = LAYERS, r->n_heads = KV_HEADS, r->n_kv_heads = KV_HEADS, r->head_dim = DIM;
    r->windows = WINDOWS, r->ctx = CTX, r->rows = (long)WINDOWS * CTX;
    size_t n = (size_t)LAYERS * KV_HEADS * (size_t)r->rows * DIM;
    r->k = calloc(n, sizeof(float));
    r->v = calloc(n, sizeof(float));
    r->kpre = with_kpre ? calloc(n, sizeof(float)) : NULL;
}

static void rows_free(CalibRows *r) {
    free(r->k);
    free(r->v);
    free(r->kpre);
}

static size_t rows_floats(const CalibRows *r) { return (size_t)LAYERS * KV_HEADS * (size_t)r->rows * DIM; }

/* Seeded values: smooth (seed's sign pattern) or heavy-tailed, so that two sets fit apart. */
static void fill(float *x, size_t n, uint64_t seed, int heavy) {
    for (size_t i = 0; i < n; i++) {
        float u = rnd(&seed);
        x[i] = heavy ? u * u * u * 4 : u;
    }
}

/* Fits keys (one spec each) into a fresh calibration; the keys' layer-0 table of fit i in out. */
static int fit(const CalibRows *r, const char *const *texts, int n, float out[][16], char *why, size_t why_len) {
    CalibFitSpec specs[4];
    Calibration c;
    Error err = {{0}};
    for (int i = 0; i < n; i++)
        if (calib_fit_spec_parse(texts[i], LAYERS, DIM, &specs[i], why, why_len)) return -1;
    if (calibration_init(&c, LAYERS, KV_HEADS, KV_HEADS, DIM, &err)) return snprintf(why, why_len, "%.250s", err.msg), -1;
    for (int i = 0; i < n; i++)
        if (!calibration_add_fit(&c, specs[i].key, &err)) {
            calibration_free(&c);
            return snprintf(why, why_len, "%.250s", err.msg), -1;
        }
    int rc = calib_fit_all(r, specs, n, &c, NULL, NULL, &err);
    if (rc) snprintf(why, why_len, "%.250s", err.msg);
    for (int i = 0; i < n && !rc; i++) memcpy(out[i], c.fits[i].codebooks, c.fits[i].layer_floats * sizeof(float));
    calibration_free(&c);
    return rc;
}

static void test_prerope_source(void) {
    static const char *const both[] = {"nuq2-g64", "nuq2-g64+prerope"};
    CalibRows a, b;
    float ta[2][16], tb[2][16];
    char why[300] = "";
    rows_init(&a, 1);
    rows_init(&b, 1);
    fill(a.k, rows_floats(&a), 1, 0);       /* X */
    fill(a.kpre, rows_floats(&a), 2, 1);    /* Y */
    fill(b.k, rows_floats(&b), 2, 1);       /* Y */
    memcpy(b.kpre, b.k, rows_floats(&b) * sizeof(float));
    fill(a.v, rows_floats(&a), 3, 0);
    fill(b.v, rows_floats(&b), 3, 0);
    int rc = fit(&a, both, 2, ta, why, sizeof why) || fit(&b, both, 2, tb, why, sizeof why);
    check(rc == 0 && !memcmp(ta[1], tb[0], 4 * sizeof(float)),
          "calib fit: the +prerope table is fitted from the keys before RoPE (= the plain table of those keys)", "%s", why);
    check(rc == 0 && memcmp(ta[0], ta[1], 4 * sizeof(float)),
          "calib fit: the plain table is fitted from the keys after RoPE (another table than the +prerope one)", "%s",
          why);
    rows_free(&a);
    rows_free(&b);
}

static void test_without_kpre(void) {
    static const char *const plain[] = {"nuq2-g64"}, *const pre[] = {"nuq2-g64+prerope"};
    CalibRows r;
    float t[1][16];
    char why[300] = "";
    rows_init(&r, 0);
    fill(r.k, rows_floats(&r), 1, 0);
    fill(r.v, rows_floats(&r), 3, 0);
    check(fit(&r, plain, 1, t, why, sizeof why) == 0, "calib fit: a plain fit on rows without pre-RoPE keys", "%s", why);
    why[0] = 0;
    check(fit(&r, pre, 1, t, why, sizeof why) != 0 && strstr(why, "keys before RoPE"),
          "calib fit: a +prerope fit on rows without pre-RoPE keys is refused, naming them", "'%s'", why);
    rows_free(&r);
}

/* Every group of 64 (a row's channels, or a channel's 64 positions) holds 8 x -1, 40 x 0, 8 x 0.1
 * and 8 x 1: a 2-bit table starts at the ranks' values {-1, 0, 0, 1}; the 0.1s go to the first of
 * the two equal entries (ties go to the lower index), which moves up past the second: {-1, 0.1, 0, 1}
 * until sorted. */
static float degenerate(int k) { return k < 8 ? -1.0f : k < 48 ? 0.0f : k < 56 ? 0.1f : 1.0f; }

static void test_degenerate_tables_sorted(void) {
    static const char *const fits[] = {"nuq2-g64", "nuq2-t64"};
    CalibRows r;
    float t[2][16];
    char why[300] = "";
    rows_init(&r, 0);
    for (long row = 0; row < r.rows; row++)
        for (int c = 0; c < DIM; c++) r.k[row * DIM + c] = r.v[row * DIM + c] = degenerate((int)((row + c) % 64));
    int rc = fit(&r, fits, 2, t, why, sizeof why), sorted = 1;
    for (int f = 0; f < 2 && !rc; f++)
        for (int e = 1; e < 4; e++) sorted &= t[f][e - 1] <= t[f][e];
    check(rc == 0 && sorted, "calib fit: tables of degenerate rows (Lloyd from equal entries) are ascending",
          "%s; nuq2-g64 %g %g %g %g", why, t[0][0], t[0][1], t[0][2], t[0][3]);
    rows_free(&r);
}

int main(void) {
    test_prerope_source();
    test_without_kpre();
    test_degenerate_tables_sorted();
    return test_exit_code();
}
