/* tests/fuzz/fuzz_calibration.c: calibration files (model/formats/calibration.h) from hostile bytes.
 * The input is opened with st_open_memory and read twice: without a model (any geometry) and for
 * the seeds' model (2 layers, 2 heads, 1 KV head, head_dim 4, the seeds' sha256).
 * An accepted file must hold only finite values, non-negative mean squares and max |x|, tables
 * of the size their codec declares that pass its check, and every lookup (each fit, layer, side
 * and KV head) must point inside its arrays (first and last value read); it must pass calibration_check, and written to a
 * scratch file and read back it must give the same calibration. A refusal must be one line naming
 * the file and leave nothing allocated. */
#include <math.h>
#include <string.h>
#include "model/formats/calibration.h"
#include "tests/fuzz/fuzz.h"

#define NAME "fuzz-calib.safetensors"
#define SEED_SHA "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c60034"

static char scratch[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char dir[200];
    fuzz_scratch_dir(dir, sizeof dir, "calibration");
    snprintf(scratch, sizeof scratch, "%s/c.safetensors", dir);
    return 0;
}

static int is_empty(const Calibration *c) {
    return !c->stats_k && !c->stats_kpre && !c->stats_v && !c->stats_q && !c->fits && !c->n_fits;
}

/* Every value of n floats read; finite; in statistics the 2nd and 3rd of each triple >= 0. */
static void check_values(const float *x, size_t n, int is_stats) {
    for (size_t i = 0; i < n; i++) {
        fuzz_assert(isfinite(x[i]), "accepted a non-finite value");
        if (is_stats && i % 3) fuzz_assert(x[i] >= 0, "accepted a negative mean square or max |x|");
    }
}

/* A lookup's block lies inside the fit's array: its first and last value are read (ASan checks). */
static void check_inside(const CalibFit *f, const float *p, size_t n, size_t total) {
    fuzz_assert(p >= f->codebooks && p + n <= f->codebooks + total, "lookup outside the codebooks");
    volatile float first = p[0], last = p[n - 1];
    (void)first;
    (void)last;
}

static void use(const Calibration *c) {
    fuzz_assert(c->n_layers > 0 && c->n_heads > 0 && c->n_kv_heads > 0 && c->head_dim > 0, "empty geometry");
    fuzz_assert(c->tokens > 0 && c->ctx > 0 && strlen(c->model_sha256) == 64 && strlen(c->text_sha256) == 64,
                "metadata");
    size_t kv = (size_t)c->n_layers * c->n_kv_heads * c->head_dim * 3;
    check_values(c->stats_k, kv, 1);
    check_values(c->stats_kpre, kv, 1);
    check_values(c->stats_v, kv, 1);
    check_values(c->stats_q, (size_t)c->n_layers * c->n_heads * c->head_dim * 3, 1);
    for (int i = 0; i < c->n_fits; i++) {
        const CalibFit *f = &c->fits[i];
        fuzz_assert(calibration_find_fit(c, f->key) == f, "find_fit");
        size_t total = (size_t)c->n_layers * f->sides * f->layer_floats;
        check_values(f->codebooks, total, 0);
        for (int l = 0; l < c->n_layers; l++)
            for (int s = 0; s < 2; s++) {
                const float *book = calibration_codebook(c, f->key, "kv"[s], l);
                fuzz_assert((book != NULL) == (s < f->sides), "a side's presence");
                if (!book) continue;
                check_inside(f, book, f->layer_floats, total);
                /* whatever the codec: its declaration sizes the tables, each table is in its
                 * layer's block and passes the codec's own check */
                KvFitLayout layout;
                f->spec.base.codec->fit->layout(&f->spec.base, c->head_dim, &layout);
                int heads = layout.per_head ? c->n_kv_heads : 1;
                fuzz_assert(f->table_floats == kv_fit_table_floats(&layout) &&
                                f->layer_floats == f->table_floats * (size_t)heads,
                            "table size against the codec's layout");
                for (int h = 0; h < c->n_kv_heads; h++) {
                    const float *table = calibration_table(c, f->key, "kv"[s], l, h);
                    check_inside(f, table, f->table_floats, total);
                    char why[160];
                    fuzz_assert(!f->spec.base.codec->fit->check ||
                                    f->spec.base.codec->fit->check(&f->spec.base, c->head_dim, table, why, sizeof why),
                                "an accepted table fails its codec's check");
                }
                fuzz_assert(!calibration_table(c, f->key, "kv"[s], l, c->n_kv_heads) &&
                                !calibration_table(c, f->key, "kv"[s], l, -1),
                            "table lookup past the heads");
            }
        fuzz_assert(!calibration_codebook(c, f->key, 'k', c->n_layers), "lookup past the layers");
    }
    Error err = {{0}};
    fuzz_assert(calibration_check(c, NAME, &err) == 0, "an accepted calibration fails calibration_check");
}

/* Written and read back: the same calibration. */
static void round_trip(const Calibration *c) {
    Error err = {{0}};
    Calibration back;
    fuzz_assert(calibration_save(scratch, c, &err) == 0, "an accepted calibration cannot be written");
    fuzz_assert(calibration_load(scratch, NULL, &back, &err) == 0, "a written calibration is refused");
    size_t kv = (size_t)c->n_layers * c->n_kv_heads * c->head_dim * 3 * sizeof(float);
    int same = back.n_layers == c->n_layers && back.n_heads == c->n_heads && back.n_kv_heads == c->n_kv_heads &&
               back.head_dim == c->head_dim && back.n_fits == c->n_fits && back.tokens == c->tokens &&
               back.ctx == c->ctx && !memcmp(back.stats_k, c->stats_k, kv) && !memcmp(back.stats_v, c->stats_v, kv) &&
               !memcmp(back.stats_kpre, c->stats_kpre, kv) &&
               !memcmp(back.stats_q, c->stats_q, kv / c->n_kv_heads * c->n_heads);
    for (int i = 0; same && i < c->n_fits; i++)
        same = !strcmp(back.fits[i].key, c->fits[i].key) &&
               !memcmp(back.fits[i].codebooks, c->fits[i].codebooks,
                       (size_t)c->n_layers * c->fits[i].sides * c->fits[i].layer_floats * sizeof(float));
    fuzz_assert(same, "round trip changed the calibration");
    calibration_free(&back);
}

static void read_as(const SafeTensors *st, const CalibModel *model) {
    Calibration c;
    Error err = {{0}};
    if (calibration_from_safetensors(st, model, &c, &err) == 0) {
        use(&c);
        round_trip(&c);
        calibration_free(&c);
    } else {
        fuzz_assert(strstr(err.msg, NAME) && fuzz_one_line(err.msg), "bad error message");
        fuzz_assert(is_empty(&c), "a refused file left arrays allocated");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st;
    Error err = {{0}};
    if (st_open_memory(&st, data, size, NAME, &err) != 0) return 0;   /* fuzz_safetensors covers this */
    read_as(&st, NULL);
    CalibModel seeds_model = {2, 2, 1, 4, SEED_SHA};
    read_as(&st, &seeds_model);
    st_close(&st);
    return 0;
}
