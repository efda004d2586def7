/* tests/test_calibration_reference.c: model/formats/calibration_read.c on the reference
 * calibration (tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors, made by
 * the reference tools): it loads for mini-llama-brown-outliers (4 layers, 4 heads, 2 KV heads,
 * head_dim 64, sha256 from data/README.md), every array equal to the file's bytes read through
 * st_open, the lookups pointing where the layout says; it is refused for mini-llama-brown's sha256
 * and for other geometries, in one line naming the file. Files kvq writes, and hand-made bad
 * ones, are tests/test_calibration.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/formats/calibration.h"
#include "tests/calib_expect.h"
#include "tests/test.h"

#define REF_CALIB "tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors"

/* ---- the reference file ---- */

static void test_reference(void) {
    CalibModel outliers = {4, 4, 2, 64, OUTLIERS_SHA};
    Calibration c;
    Error err = {{0}};
    int rc = calibration_load(REF_CALIB, &outliers, &c, &err);
    if (!check(rc == 0, "calib reference file loads for mini-llama-brown-outliers", "%s", err.msg)) return;
    check(c.n_layers == 4 && c.n_heads == 4 && c.n_kv_heads == 2 && c.head_dim == 64 && c.tokens == 16384 &&
              c.ctx == 1024 && !strcmp(c.model_sha256, OUTLIERS_SHA) && !strcmp(c.text_sha256, TEXT_SHA),
          "calib reference metadata and geometry", "%d %d %d %d %ld %ld", c.n_layers, c.n_heads, c.n_kv_heads,
          c.head_dim, c.tokens, c.ctx);
    static const char *keys[6] = {"nuq2-g64", "nuq3-g64", "nuq2-t64", "nuq3-g64+had", "vq8-d4", "vq8-d8+had"};
    int keys_ok = c.n_fits == 6;
    for (int i = 0; keys_ok && i < 6; i++) keys_ok = !strcmp(c.fits[i].key, keys[i]) && c.fits[i].sides == 2;
    check(keys_ok, "calib reference fits in file order", "%d fits", c.n_fits);

    /* Every array against the file's own bytes. */
    SafeTensors st;
    if (st_open(&st, REF_CALIB, &err)) {
        check(0, "calib reference arrays = the file's bytes", "%s", err.msg);
        calibration_free(&c);
        return;
    }
    int bad = 0;
    char name[96];
    static const char *stats[4] = {"q", "kpre", "k", "v"};
    float *arrays[4] = {c.stats_q, c.stats_kpre, c.stats_k, c.stats_v};
    for (int l = 0; l < 4; l++) {
        for (int s = 0; s < 4; s++) {
            snprintf(name, sizeof name, "stats.%s.%d", stats[s], l);
            const Tensor *t = st_find(&st, name);
            bad += !t || memcmp(arrays[s] + (size_t)l * t->numel, t->data, t->nbytes);
        }
        for (int i = 0; i < 6; i++)
            for (int side = 0; side < 2; side++) {
                snprintf(name, sizeof name, "fit.%s.%c.%d", keys[i], "kv"[side], l);
                const Tensor *t = st_find(&st, name);
                const float *book = calibration_codebook(&c, keys[i], "kv"[side], l);
                /* The layout calibration.h documents: codebooks[layer][side][layer_floats]. */
                bad += book != c.fits[i].codebooks + ((size_t)l * 2 + (size_t)side) * c.fits[i].layer_floats;
                bad += !t || !book || t->numel != c.fits[i].layer_floats || memcmp(book, t->data, t->nbytes);
            }
    }
    check(bad == 0, "calib reference arrays = the file's bytes (every stats and fit tensor)", "%d differ", bad);

    /* vq lookups: head 1, sub-vector 15 of layer 3's values starts at ((1 * 16 + 15) * 256) * 4 floats. */
    const Tensor *t = st_find(&st, "fit.vq8-d4.v.3");
    const float *head = calibration_table(&c, "vq8-d4", 'v', 3, 1), *sub = head ? head + 15 * 256 * 4 : NULL;
    check(t && sub && !memcmp(sub, (const char *)t->data + (size_t)((1 * 16 + 15) * 256) * 4 * sizeof(float),
                               256 * 4 * sizeof(float)),
          "calib vq lookup: head 1, sub-vector 15 of a [2, 16, 256, 4] codebook", "wrong place");
    t = st_find(&st, "fit.vq8-d8+had.k.0");
    head = calibration_table(&c, "vq8-d8+had", 'k', 0, 0);
    sub = head ? head + 7 * 256 * 8 : NULL;
    check(t && sub && !memcmp(sub, (const char *)t->data + (size_t)(7 * 256 * 8) * sizeof(float), 256 * 8 * sizeof(float)),
          "calib vq lookup: head 0, sub-vector 7 of a [2, 8, 256, 8] codebook", "wrong place");
    st_close(&st);

    /* Values read once with Python from the file (struct.unpack of fit.nuq3-g64.k.0). */
    const float *table = calibration_codebook(&c, "nuq3-g64", 'k', 0);
    check(table && table[0] == -0.9205598831176758f && table[7] == 0.8993353843688965f,
          "calib reference nuq3-g64 keys' layer-0 table", "got %g .. %g", table ? table[0] : 0, table ? table[7] : 0);

    /* Lookups outside the file give NULL. */
    check(!calibration_codebook(&c, "nuq4-g64", 'k', 0) && !calibration_codebook(&c, "nuq3-g64", 'x', 0) &&
              !calibration_codebook(&c, "nuq3-g64", 'k', 4) && !calibration_codebook(&c, "nuq3-g64", 'k', -1) &&
              !calibration_table(&c, "nuq3-g64", 'k', 0, 2) && !calibration_table(&c, "vq8-d4", 'k', 0, 2) &&
              !calibration_table(&c, "vq8-d4", 'k', 0, -1) && !calibration_table(&c, "vq8-d4", 'k', 4, 0),
          "calib lookups of absent keys, sides, layers and heads give NULL", "a lookup answered");
    /* A shared table is every head's; a per-head one is the head's slice of the layer. */
    check(calibration_table(&c, "nuq3-g64", 'k', 0, 1) == calibration_codebook(&c, "nuq3-g64", 'k', 0) &&
              calibration_table(&c, "vq8-d4", 'v', 3, 1) == calibration_codebook(&c, "vq8-d4", 'v', 3) + 16 * 256 * 4,
          "calib table of a head: nuq's shared, vq's own slice", "wrong table");
    calibration_free(&c);
    check(is_empty(&c), "calib free leaves a zeroed struct", "not zeroed");

    /* Without a model: the file's own geometry. */
    rc = calibration_load(REF_CALIB, NULL, &c, &err);
    check(rc == 0 && c.n_layers == 4 && c.n_heads == 4 && c.n_kv_heads == 2 && c.head_dim == 64 && c.n_fits == 6,
          "calib reference loads without a model (geometry from the file)", "%s", rc ? err.msg : "wrong geometry");
    calibration_free(&c);
}

static void test_reference_refusals(void) {
    CalibModel brown = {4, 4, 2, 64, BROWN_SHA};
    expect_refused(REF_CALIB, &brown, "calibration of another model (model_sha256 36068468...c60034; this model's is "
                                      "78808436...bcdfbc)",
                   "calib reference refused for mini-llama-brown's sha256, naming both hashes");
    CalibModel heads = {4, 8, 2, 64, OUTLIERS_SHA};
    expect_refused(REF_CALIB, &heads, "made for 4 heads, 2 KV heads, head_dim 64; the model has 8, 2, 64",
                   "calib reference refused for a model of 8 heads");
    CalibModel dim = {4, 4, 2, 128, OUTLIERS_SHA};
    expect_refused(REF_CALIB, &dim, "the model has 4, 2, 128", "calib reference refused for head_dim 128");
    CalibModel more = {5, 4, 2, 64, OUTLIERS_SHA};
    expect_refused(REF_CALIB, &more, "missing tensor 'stats.q.4'", "calib reference refused for a 5-layer model");
    CalibModel fewer = {3, 4, 2, 64, OUTLIERS_SHA};
    expect_refused(REF_CALIB, &fewer, "is for layer 3; the model has 3 layers",
                   "calib reference refused for a 3-layer model");
}

int main(void) {
    test_reference();
    test_reference_refusals();
    return test_exit_code();
}
