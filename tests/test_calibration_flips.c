/* tests/test_calibration_flips.c: a damaged calibration file is refused, not read (issue 51 item 6).
 * - A small calibration (2 layers, an nuq and a vq fit) written by calibration_save: each bit of
 *   each byte flipped in turn, then each byte inverted, and read back (st_open_memory +
 *   calibration_from_safetensors): every flip refused with one line naming the file, or harmless
 *   (the same calibration, the byte in the header's padding, which JSON reads as nothing). The
 *   counts are printed: the note of issue 51 quotes them.
 * - The sealed reference calibration and the bundled ones load (they carry checksums); a file
 *   without checksums (written by plain st_write, as before they were added) is refused naming the
 *   file and what to do; a checksum of a tensor the file lacks is refused. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/formats/calibration.h"
#include "model/formats/fileio.h"
#include "model/formats/st_checksum.h"
#include "tests/byte_flips.h"
#include "tests/test.h"

#define FILE_NAME "flipped.safetensors"
#define MODEL_SHA "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c60034"
#define TEXT_SHA "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7"

/* Seeded valid values: statistics (mean, mean square >= 0, max |x| >= 0) and ascending tables. */
static void fill(Calibration *c, uint64_t seed) {
    float *stats[4] = {c->stats_q, c->stats_kpre, c->stats_k, c->stats_v};
    for (int w = 0; w < 4; w++) {
        size_t n = (size_t)c->n_layers * (w == 0 ? c->n_heads : c->n_kv_heads) * c->head_dim;
        for (size_t i = 0; i < n; i++) {
            float m = rnd(&seed);
            stats[w][3 * i] = m, stats[w][3 * i + 1] = m * m + 0.25f, stats[w][3 * i + 2] = 1.5f + rnd(&seed);
        }
    }
    for (int f = 0; f < c->n_fits; f++) {
        CalibFit *fit = &c->fits[f];
        size_t books = (size_t)c->n_layers * fit->sides;
        for (size_t b = 0; b < books; b++) {
            float *x = fit->codebooks + b * fit->layer_floats, at = -1;
            for (size_t e = 0; e < fit->layer_floats; e++) x[e] = at += 0.125f + 0.0625f * (rnd(&seed) + 1);
        }
    }
}

static int build(Calibration *c, Error *err) {
    if (calibration_init(c, 2, 2, 1, 8, err) || !calibration_add_fit(c, "nuq2-g8", err) ||
        !calibration_add_fit(c, "vq2-d2", err))
        return -1;
    memcpy(c->model_sha256, MODEL_SHA, 65);
    memcpy(c->text_sha256, TEXT_SHA, 65);
    c->tokens = 512, c->ctx = 64;
    fill(c, 51);
    return 0;
}

static int same_calibration(const Calibration *a, const Calibration *b) {
    if (strcmp(a->model_sha256, b->model_sha256) || strcmp(a->text_sha256, b->text_sha256) || a->tokens != b->tokens ||
        a->ctx != b->ctx || a->n_layers != b->n_layers || a->n_heads != b->n_heads || a->n_kv_heads != b->n_kv_heads ||
        a->head_dim != b->head_dim || a->n_fits != b->n_fits)
        return 0;
    size_t kv = (size_t)a->n_layers * a->n_kv_heads * a->head_dim * 3, q = (size_t)a->n_layers * a->n_heads * a->head_dim * 3;
    if (memcmp(a->stats_k, b->stats_k, kv * 4) || memcmp(a->stats_kpre, b->stats_kpre, kv * 4) ||
        memcmp(a->stats_v, b->stats_v, kv * 4) || memcmp(a->stats_q, b->stats_q, q * 4))
        return 0;
    for (int i = 0; i < a->n_fits; i++) {
        const CalibFit *x = &a->fits[i], *y = &b->fits[i];
        if (strcmp(x->key, y->key) || x->sides != y->sides || x->layer_floats != y->layer_floats ||
            memcmp(x->codebooks, y->codebooks, (size_t)a->n_layers * x->sides * x->layer_floats * 4))
            return 0;
    }
    return 1;
}

static int decode(const unsigned char *buf, size_t len, Calibration *c, Error *err) {
    SafeTensors st;
    memset(c, 0, sizeof *c);
    if (st_open_memory(&st, buf, len, FILE_NAME, err)) return -1;
    int rc = calibration_from_safetensors(&st, NULL, c, err);
    st_close(&st);
    return rc;
}

/* A flipped copy read back: refused (-1), or whether it reads as the intact calibration. */
static int read_flipped(const unsigned char *buf, size_t len, const void *intact, Error *err) {
    Calibration out;
    if (decode(buf, len, &out, err) != 0) return -1;
    int same = same_calibration(&out, intact);
    calibration_free(&out);
    return same;
}

static void test_flips(const char *dir) {
    Calibration c, intact;
    Error err = {{0}};
    char path[256];
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    size_t len = 0;
    unsigned char *buf = NULL;
    int rc = build(&c, &err) || calibration_save(path, &c, &err);
    if (rc == 0) buf = (unsigned char *)read_whole_file(path, 1 << 24, &len, &err);
    if (!check(buf && decode(buf, len, &intact, &err) == 0 && same_calibration(&intact, &c),
               "calib flips: the small calibration written reads back whole", "%s", err.msg)) {
        calibration_free(&c);
        free(buf);
        return;
    }
    FlipCount n = {0, 0, 0, 0, -1, 0};
    flip_every_byte(buf, len, FILE_NAME, read_flipped, &intact, &n);
    printf("     calibration of %zu bytes: %ld flips, %ld refused, %ld harmless (header padding), %ld harmful\n", len,
           n.flips, n.refused, n.harmless, n.harmful);
    check(n.flips == 9 * (long)len && n.harmful == 0,
          "calib flips: each bit of each byte flipped, and each byte inverted: refused or harmless (padding)",
          "%ld of %ld flips read as another calibration (first at byte %ld)", n.harmful, n.flips, n.first_harmful);
    check(!n.bad_message, "calib flips: every refused flip is one line naming the file", "");
    calibration_free(&intact);
    calibration_free(&c);
    free(buf);
    unlink(path);
}

/* The small calibration's tensors and metadata written again by plain st_write (no checksums),
 * or with one checksum too many. */
static void test_unchecked_files(const char *dir) {
    Calibration c, back;
    Error err = {{0}};
    char path[256], plain[256];
    snprintf(path, sizeof path, "%s/sealed.safetensors", dir);
    snprintf(plain, sizeof plain, "%s/plain.safetensors", dir);
    SafeTensors st;
    if (build(&c, &err) || calibration_save(path, &c, &err) || st_open(&st, path, &err)) {
        check(0, "calib without checksums is refused", "setup: %s", err.msg);
        return;
    }
    StTensorOut *t = calloc((size_t)st.n_tensors, sizeof *t);
    const char *keys[8], *vals[8];
    int n_meta = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const Tensor *x = &st.tensors[i];
        t[i] = (StTensorOut){.name = x->name, .dtype = x->dtype, .ndim = x->ndim, .data = x->data};
        memcpy(t[i].shape, x->shape, sizeof t[i].shape);
    }
    for (int i = 0; i < st.n_meta && n_meta < 7; i++)
        if (!strchr(st.meta_keys[i], '.') && strcmp(st.meta_keys[i], ST_HEADER_CRC_KEY))
            keys[n_meta] = st.meta_keys[i], vals[n_meta++] = st.meta_values[i];
    int rc = st_write(plain, t, st.n_tensors, keys, vals, n_meta, &err) || calibration_load(plain, NULL, &back, &err) == 0;
    check(rc == 0 && !strncmp(err.msg, plain, strlen(plain)) && strstr(err.msg, "without checksums") &&
              strstr(err.msg, "./run calibrate"),
          "calib without checksums (as written before they were added) is refused, naming the file and the fix", "%s",
          err.msg);
    keys[n_meta] = ST_TENSOR_CRC_PREFIX "stats.q.7", vals[n_meta] = "00000000";
    rc = st_write_checksummed(plain, t, st.n_tensors, keys, vals, n_meta + 1, &err) ||
         calibration_load(plain, NULL, &back, &err) == 0;
    check(rc == 0 && strstr(err.msg, "'crc32c.stats.q.7' is the checksum of a tensor the file does not have"),
          "calib with the checksum of a tensor it does not have is refused", "%s", err.msg);
    free(t);
    st_close(&st);
    calibration_free(&c);
    unlink(path);
    unlink(plain);
}

static void test_shipped_files_load(void) {
    static const char *const files[] = {"tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors",
                                        "data/models/mini-llama-brown/kv-calib.safetensors",
                                        "data/models/mini-llama-brown-outliers/kv-calib.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        Calibration c;
        Error err = {{0}};
        char name[200];
        snprintf(name, sizeof name, "calib flips: %s carries checksums and loads", files[i]);
        int rc = calibration_load(files[i], NULL, &c, &err);
        check(rc == 0, name, "%s", err.msg);
        if (rc == 0) calibration_free(&c);
    }
}

int main(void) {
    char dir[] = "/tmp/kvq_calib_flips_XXXXXX";
    if (!mkdtemp(dir)) {
        check(0, "calib flips: temp dir", "mkdtemp failed");
        return 1;
    }
    test_flips(dir);
    test_unchecked_files(dir);
    test_shipped_files_load();
    rmdir(dir);
    return test_failures ? 1 : 0;
}
