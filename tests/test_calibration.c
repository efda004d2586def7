/* tests/test_calibration.c: model/formats/calibration.c and calibration_read.c on calibrations
 * made here, of a small geometry (2 layers, 4 heads, 2 KV heads, head_dim 8).
 * - write -> read is exact and the bytes are deterministic (write, read, write again: equal); a
 *   fit of several named tensors per KV head is written as fit.KEY.S.L.NAME, each head's part.
 * - The writer refuses what the reader would, and writes nothing.
 * - Hand-made bad files, written with st_write into a temp dir from a small valid calibration
 *   with one thing broken each: every one refused with one line naming the file and the
 *   problem, and nothing left allocated (the SANITIZE=1 build's LeakSanitizer checks that).
 * The reference calibration is tests/test_calibration_reference.c. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/formats/calibration.h"
#include "model/formats/st_checksum.h"
#include "tests/calib_expect.h"
#include "tests/test.h"

static char tmpdir[64];

/* ---- a small calibration built in memory ---- */

enum { LAYERS = 2, HEADS = 4, KV_HEADS = 2, DIM = 8 };

/* Statistics that obey their rules (mean square, max |x| >= 0); fits from seeded numbers, nuq
 * tables sorted. */
static void fill(Calibration *c, uint64_t seed) {
    float *arrays[4] = {c->stats_q, c->stats_kpre, c->stats_k, c->stats_v};
    for (int s = 0; s < 4; s++) {
        size_t n = (size_t)c->n_layers * (s == 0 ? c->n_heads : c->n_kv_heads) * c->head_dim * 3;
        for (size_t i = 0; i < n; i++) arrays[s][i] = i % 3 == 0 ? rnd(&seed) : fabsf(rnd(&seed)) * 4;
    }
    for (int f = 0; f < c->n_fits; f++) {
        CalibFit *fit = &c->fits[f];
        size_t books = (size_t)c->n_layers * fit->sides;
        for (size_t b = 0; b < books; b++) {
            float *x = fit->codebooks + b * fit->layer_floats;
            for (size_t i = 0; i < fit->layer_floats; i++)
                x[i] = strncmp(fit->key, "nuq", 3) == 0 ? -1.0f + (float)i * 0.25f + 0.1f * rnd(&seed) : rnd(&seed);
        }
    }
}

static const char *SMALL_KEYS[4] = {"nuq2-g8", "vq4-d2", "nuq3-g8+had+prerope+out1", "vq2-d8+had"};

static int build_small(Calibration *c, Error *err) {
    if (calibration_init(c, LAYERS, HEADS, KV_HEADS, DIM, err)) return -1;
    for (int i = 0; i < 4; i++)
        if (!calibration_add_fit(c, SMALL_KEYS[i], err)) return -1;
    memcpy(c->model_sha256, OUTLIERS_SHA, 65);
    memcpy(c->text_sha256, TEXT_SHA, 65);
    c->tokens = 2048;
    c->ctx = 256;
    fill(c, 77);
    return 0;
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        same = x == y;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static int calibrations_equal(const Calibration *a, const Calibration *b) {
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

static void test_round_trip(void) {
    Calibration c, back;
    Error err = {{0}};
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/a.safetensors", tmpdir);
    snprintf(b, sizeof b, "%s/b.safetensors", tmpdir);
    int rc = build_small(&c, &err);
    check(rc == 0 && c.fits[2].sides == 1 && c.fits[1].layer_floats == 2 * 4 * 16 * 2 &&
              c.fits[3].layer_floats == 2 * 1 * 4 * 8,
          "calib build in memory (a +prerope fit has keys only; vq sizes)", "%s", err.msg);
    rc = rc || calibration_save(a, &c, &err);
    CalibModel model = {LAYERS, HEADS, KV_HEADS, DIM, OUTLIERS_SHA};
    rc = rc || calibration_load(a, &model, &back, &err);
    check(rc == 0 && calibrations_equal(&c, &back), "calib write -> read is exact (metadata, stats, fits, order)", "%s",
          rc ? err.msg : "differs");
    rc = rc || calibration_save(b, &back, &err);
    check(rc == 0 && files_equal(a, b), "calib write -> read -> write gives the same bytes", "%s", err.msg);
    calibration_free(&back);
    calibration_free(&c);

    /* The same calibration built again writes the same bytes. */
    rc = build_small(&c, &err) || calibration_save(b, &c, &err);
    check(rc == 0 && files_equal(a, b), "calib two writes of one calibration give the same bytes", "%s", err.msg);
    calibration_free(&c);

    /* Equal neighbours in an nuq table are accepted (non-decreasing). */
    rc = build_small(&c, &err);
    float *t = c.fits[0].codebooks;
    t[1] = t[2];
    rc = rc || calibration_save(a, &c, &err) || calibration_load(a, &model, &back, &err);
    check(rc == 0, "calib nuq table with two equal entries is accepted", "%s", err.msg);
    calibration_free(&back);
    calibration_free(&c);
    unlink(a);
    unlink(b);
}

/* A fit of several named tensors per KV head (as a transform coder's mean and basis, SCHEMES.md
 * §9): the writer takes each head's part of each tensor out of the heads' tables, which hold
 * their tensors back to back. No codec of the table declares one yet, so a stand-in declares it
 * here and the fit is added by hand (its key names no base: the reader would refuse it). */
static void two_tensor_layout(const KvBase *b, int n, KvFitLayout *layout) {
    (void)b;
    *layout = (KvFitLayout){.per_head = 1, .n_tensors = 2,
                            .tensors = {{.name = "mean", .ndim = 1, .dims = {n}}, {.name = "basis", .ndim = 2, .dims = {2, n}}}};
}

static void test_named_tensors(void) {
    static const KvFit fit = {.layout = two_tensor_layout};
    static const KvCodec stand_in = {.syntax = "stand-in", .fit = &fit};
    Calibration c;
    Error err = {{0}};
    char path[128];
    snprintf(path, sizeof path, "%s/named.safetensors", tmpdir);
    int rc = build_small(&c, &err);
    CalibFit *grown = rc ? NULL : realloc(c.fits, (size_t)(c.n_fits + 1) * sizeof *grown);
    if (grown) {
        c.fits = grown;
        CalibFit *f = &c.fits[c.n_fits++];
        memset(f, 0, sizeof *f);
        snprintf(f->key, sizeof f->key, "twotensor");
        f->spec.base.codec = &stand_in;
        two_tensor_layout(&f->spec.base, DIM, &f->layout);
        f->sides = 2;
        f->table_floats = 3 * DIM;
        f->layer_floats = f->table_floats * KV_HEADS;
        f->codebooks = calloc((size_t)LAYERS * 2 * f->layer_floats, sizeof(float));
        for (size_t i = 0; f->codebooks && i < (size_t)LAYERS * 2 * f->layer_floats; i++) f->codebooks[i] = (float)i;
    }
    rc = !grown || !c.fits[c.n_fits - 1].codebooks || calibration_save(path, &c, &err);
    SafeTensors st;
    int ok = !rc && st_open(&st, path, &err) == 0;
    const Tensor *mean = ok ? st_find(&st, "fit.twotensor.v.1.mean") : NULL, *basis = ok ? st_find(&st, "fit.twotensor.v.1.basis") : NULL;
    int good = mean && basis && mean->ndim == 2 && mean->shape[0] == KV_HEADS && mean->shape[1] == DIM && basis->ndim == 3 &&
               basis->shape[0] == KV_HEADS && basis->shape[1] == 2 && basis->shape[2] == DIM;
    const float *block = good ? calibration_codebook(&c, "twotensor", 'v', 1) : NULL;
    for (int h = 0; good && h < KV_HEADS; h++) {
        float m[DIM], bs[2 * DIM];
        memcpy(m, (const char *)mean->data + (size_t)h * DIM * sizeof(float), sizeof m);
        memcpy(bs, (const char *)basis->data + (size_t)h * 2 * DIM * sizeof(float), sizeof bs);
        good = !memcmp(m, block + (size_t)h * 3 * DIM, sizeof m) && !memcmp(bs, block + (size_t)h * 3 * DIM + DIM, sizeof bs);
    }
    check(good, "calib writes a fit's named tensors as fit.KEY.S.L.NAME [n_kv_heads, dims...], each head's part of each",
          "%s", rc ? err.msg : "wrong names, shapes or data");
    if (ok) st_close(&st);
    calibration_free(&c);
    unlink(path);
}

/* The writer refuses what the reader would, and then writes nothing. */
static void test_writer_refusals(void) {
    Calibration c;
    Error err = {{0}};
    char path[128];
    snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
    struct {
        const char *name, *want;
        int what;
    } cases[] = {
        {"calib save refuses NaN statistics, writes nothing", "tensor 'stats.kpre.1' holds a non-finite value at element 5", 0},
        {"calib save refuses an unsorted nuq table, writes nothing", "tensor 'fit.nuq2-g8.v.1' is not ascending (entry 3", 1},
        {"calib save refuses an upper-case hash, writes nothing", "model_sha256 and text_sha256 must be 64 lowercase hex", 2},
        {"calib save refuses tokens 0, writes nothing", "tokens (0) and ctx (256) must be positive", 3},
    };
    for (int i = 0; i < 4; i++) {
        if (build_small(&c, &err)) break;
        size_t kv_layer = (size_t)KV_HEADS * DIM * 3;
        if (cases[i].what == 0) c.stats_kpre[kv_layer + 5] = NAN;
        if (cases[i].what == 1) {
            float *v1 = c.fits[0].codebooks + 3 * 4;   /* layer 1, values: book 1 * 2 + 1 */
            v1[3] = v1[2] - 0.5f;
        }
        if (cases[i].what == 2) c.model_sha256[0] = 'A';
        if (cases[i].what == 3) c.tokens = 0;
        err.msg[0] = '\0';
        int rc = calibration_save(path, &c, &err);
        check(rc == -1 && strstr(err.msg, path) && strstr(err.msg, cases[i].want) && access(path, F_OK) != 0,
              cases[i].name, "rc %d, '%s'", rc, err.msg);
        calibration_free(&c);
    }
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir/c.safetensors", tmpdir);
    int rc = build_small(&c, &err) || calibration_save(missing, &c, &err);
    check(rc != 0 && strstr(err.msg, missing), "calib save into a missing directory fails naming the file", "%s",
          err.msg);
    calibration_free(&c);

    /* Building: bad and repeated fit keys. */
    calibration_init(&c, LAYERS, HEADS, KV_HEADS, DIM, &err);
    int refused = !calibration_add_fit(&c, "nuq5-g8", &err) && strstr(err.msg, "nuq5-g8: expected nuqB-gG or nuqB-tG with B = 2, 3 or 4");
    refused = refused && calibration_add_fit(&c, "nuq2-g8", &err) && !calibration_add_fit(&c, "nuq2-g8", &err) &&
              strstr(err.msg, "already");
    check(refused && c.n_fits == 1, "calib add_fit refuses a bad key and a repeated key", "%s", err.msg);
    calibration_free(&c);
    check(calibration_init(&c, 0, HEADS, KV_HEADS, DIM, &err) == -1 && is_empty(&c),
          "calib init refuses 0 layers", "%s", err.msg);
}

/* ---- hand-made bad files ---- */

/* A small valid calibration as a list of tensors and metadata, each case breaking one thing. */
#define MAX_TENSORS 64
typedef struct {
    StTensorOut t[MAX_TENSORS];
    char names[MAX_TENSORS][96];
    int n;
    const char *mk[8], *mv[8];
    int n_meta;
} FileSpec;

static float data_pool[1 << 16];

static void add_tensor(FileSpec *s, const char *name, int ndim, const int64_t *shape, const float *data) {
    StTensorOut *t = &s->t[s->n];
    snprintf(s->names[s->n], sizeof s->names[s->n], "%s", name);
    *t = (StTensorOut){.name = s->names[s->n], .dtype = DT_F32, .ndim = ndim, .data = data};
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    s->n++;
}

static StTensorOut *find_tensor(FileSpec *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) return &s->t[i];
    return NULL;
}

static void drop_tensor(FileSpec *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            for (int j = i; j + 1 < s->n; j++) {
                s->t[j] = s->t[j + 1];
                memcpy(s->names[j], s->names[j + 1], sizeof s->names[j]);
                s->t[j].name = s->names[j];
            }
            s->n--;
            return;
        }
}

static void rename_tensor(FileSpec *s, const char *from, const char *to) {
    StTensorOut *t = find_tensor(s, from);
    if (t) snprintf(s->names[t - s->t], sizeof s->names[0], "%s", to);
}

static void set_meta(FileSpec *s, const char *k, const char *v) {
    for (int i = 0; i < s->n_meta; i++)
        if (!strcmp(s->mk[i], k)) {
            s->mv[i] = v;
            return;
        }
    s->mk[s->n_meta] = k;
    s->mv[s->n_meta++] = v;
}

static void drop_meta(FileSpec *s, const char *k) {
    for (int i = 0; i < s->n_meta; i++)
        if (!strcmp(s->mk[i], k)) {
            s->mk[i] = s->mk[s->n_meta - 1];
            s->mv[i] = s->mv[--s->n_meta];
            return;
        }
}

/* The valid base: 2 layers, 4 heads, 2 KV heads, head_dim 8; fits nuq2-g8 and vq4-d2 (both sides)
 * and nuq3-g8+prerope (keys). The data all comes from data_pool: sorted for the tables. */
static void base_spec(FileSpec *s) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < (1 << 16); i++) data_pool[i] = (float)(i % 97) / 97.0f;   /* >= 0, ascending runs */
    static const char *stats[4] = {"q", "kpre", "k", "v"};
    char name[96];
    for (int l = 0; l < LAYERS; l++) {
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "stats.%s.%d", stats[i], l);
            add_tensor(s, name, 3, (int64_t[]){i == 0 ? HEADS : KV_HEADS, DIM, 3}, data_pool);
        }
        for (int side = 0; side < 2; side++) {
            snprintf(name, sizeof name, "fit.nuq2-g8.%c.%d", "kv"[side], l);
            add_tensor(s, name, 1, (int64_t[]){4}, data_pool);
            snprintf(name, sizeof name, "fit.vq4-d2.%c.%d", "kv"[side], l);
            add_tensor(s, name, 4, (int64_t[]){KV_HEADS, DIM / 2, 16, 2}, data_pool);
        }
        snprintf(name, sizeof name, "fit.nuq3-g8+prerope.k.%d", l);
        add_tensor(s, name, 1, (int64_t[]){8}, data_pool);
    }
    set_meta(s, "format", CALIB_FORMAT);
    set_meta(s, "model_sha256", OUTLIERS_SHA);
    set_meta(s, "text_sha256", TEXT_SHA);
    set_meta(s, "tokens", "2048");
    set_meta(s, "ctx", "256");
}

static const CalibModel SMALL_MODEL = {LAYERS, HEADS, KV_HEADS, DIM, OUTLIERS_SHA};

static void expect_spec_refused(FileSpec *s, const char *want, const char *name) {
    char path[128];
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/hostile.safetensors", tmpdir);
    if (st_write_checksummed(path, s->t, s->n, s->mk, s->mv, s->n_meta, &err)) {
        check(0, name, "st_write: %s", err.msg);
        return;
    }
    expect_refused(path, &SMALL_MODEL, want, name);
    unlink(path);
}

static void test_base_is_valid(void) {
    FileSpec s;
    base_spec(&s);
    char path[128];
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/base.safetensors", tmpdir);
    Calibration c;
    int rc = st_write_checksummed(path, s.t, s.n, s.mk, s.mv, s.n_meta, &err) || calibration_load(path, &SMALL_MODEL, &c, &err);
    check(rc == 0 && c.n_fits == 3 && c.fits[2].sides == 1 && !strcmp(c.fits[2].key, "nuq3-g8+prerope"),
          "calib hand-made base file loads (the one each bad file breaks)", "%s", err.msg);
    if (rc == 0) calibration_free(&c);
    /* An extra metadata key (the reference has made_by) is ignored. */
    set_meta(&s, "made_by", "a test");
    rc = st_write_checksummed(path, s.t, s.n, s.mk, s.mv, s.n_meta, &err) || calibration_load(path, &SMALL_MODEL, &c, &err);
    check(rc == 0, "calib extra metadata keys are ignored", "%s", err.msg);
    if (rc == 0) calibration_free(&c);
    unlink(path);
}

static void test_bad_metadata(void) {
    FileSpec s;
    base_spec(&s);
    drop_meta(&s, "format");
    expect_spec_refused(&s, "not a kvq calibration (no 'format' in __metadata__)", "calib refuses a file without format");
    base_spec(&s);
    set_meta(&s, "format", "kvq-compressed-2");
    expect_spec_refused(&s, "not a kvq calibration (format 'kvq-compressed-2')", "calib refuses another format");
    base_spec(&s);
    set_meta(&s, "format", "kvq-calibration\nx");
    expect_spec_refused(&s, "(format 'kvq-calibration?x')", "calib refuses a format with a newline, in one line");

    static const struct {
        const char *key, *value, *want, *name;
    } metas[] = {
        {"model_sha256", NULL, "metadata 'model_sha256' missing", "calib refuses a missing model_sha256"},
        {"text_sha256", NULL, "metadata 'text_sha256' missing", "calib refuses a missing text_sha256"},
        {"model_sha256", "36068468F272B799B51158BDCD14DAB686B173603129268C69AC30D522C60034",
         "metadata 'model_sha256' = '36068468F272", "calib refuses an upper-case model_sha256"},
        {"model_sha256", "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c6003",
         "is not 64 lowercase hex digits", "calib refuses a 63-digit model_sha256"},
        {"text_sha256", "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9cg",
         "metadata 'text_sha256' = '4cd0", "calib refuses a text_sha256 with a non-hex digit"},
        {"tokens", NULL, "metadata 'tokens' missing", "calib refuses missing tokens"},
        {"ctx", NULL, "metadata 'ctx' missing", "calib refuses missing ctx"},
        {"tokens", "0", "metadata 'tokens' = '0' is not a positive integer", "calib refuses tokens 0"},
        {"tokens", "-5", "metadata 'tokens' = '-5' is not a positive integer", "calib refuses tokens -5"},
        {"ctx", "12a", "metadata 'ctx' = '12a' is not a positive integer", "calib refuses ctx 12a"},
        {"ctx", "", "metadata 'ctx' = '' is not a positive integer", "calib refuses an empty ctx"},
        {"ctx", "0256", "metadata 'ctx' = '0256' is not a positive integer", "calib refuses ctx with a leading zero"},
        {"tokens", "99999999999999999999", "is not a positive integer", "calib refuses tokens past 2^31"},
    };
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        base_spec(&s);
        if (metas[i].value) set_meta(&s, metas[i].key, metas[i].value);
        else drop_meta(&s, metas[i].key);
        expect_spec_refused(&s, metas[i].want, metas[i].name);
    }

    /* Another model's file (the hash) and another geometry (the shapes). */
    base_spec(&s);
    set_meta(&s, "model_sha256", BROWN_SHA);
    expect_spec_refused(&s, "calibration of another model (model_sha256 78808436...bcdfbc; this model's is 36068468...c60034)",
                        "calib refuses a small file of another model, naming both hashes");
}

static void test_bad_tensors(void) {
    FileSpec s;
    base_spec(&s);
    drop_tensor(&s, "stats.kpre.1");
    expect_spec_refused(&s, "missing tensor 'stats.kpre.1'", "calib refuses a missing statistics tensor");
    base_spec(&s);
    drop_tensor(&s, "stats.q.0");
    expect_spec_refused(&s, "missing tensor 'stats.q.0'", "calib refuses a file without stats.q.0");
    base_spec(&s);
    find_tensor(&s, "stats.v.1")->dtype = DT_F16;
    find_tensor(&s, "stats.v.1")->shape[2] = 6;   /* the same bytes */
    expect_spec_refused(&s, "tensor 'stats.v.1' has dtype F16 (F32 expected)", "calib refuses F16 statistics");
    base_spec(&s);
    find_tensor(&s, "stats.v.0")->shape[2] = 2;
    expect_spec_refused(&s, "tensor 'stats.v.0' has shape [2, 8, 2], expected [2, 8, 3]",
                        "calib refuses statistics of the wrong shape");
    base_spec(&s);
    find_tensor(&s, "stats.k.0")->shape[1] = 16;
    expect_spec_refused(&s, "must be F32 [heads, head_dim, 3] of one head_dim",
                        "calib refuses stats.k.0 of another head_dim than stats.q.0");
    base_spec(&s);
    find_tensor(&s, "stats.q.0")->shape[1] = 16;
    find_tensor(&s, "stats.k.0")->shape[1] = 16;
    expect_spec_refused(&s, "made for 4 heads, 2 KV heads, head_dim 16; the model has 4, 2, 8",
                        "calib refuses a file of another head_dim");
    base_spec(&s);
    find_tensor(&s, "stats.q.1")->shape[0] = 2;
    expect_spec_refused(&s, "tensor 'stats.q.1' has shape [2, 8, 3], expected [4, 8, 3]",
                        "calib refuses a later layer of another head count");
    base_spec(&s);
    find_tensor(&s, "fit.nuq2-g8.k.1")->shape[0] = 8;
    expect_spec_refused(&s, "tensor 'fit.nuq2-g8.k.1' has shape [8], expected [4]", "calib refuses an nuq2 table of 8");
    base_spec(&s);
    find_tensor(&s, "fit.vq4-d2.v.0")->shape[2] = 8;
    expect_spec_refused(&s, "tensor 'fit.vq4-d2.v.0' has shape [2, 4, 8, 2], expected [2, 4, 16, 2]",
                        "calib refuses a vq codebook whose size disagrees with C");
    base_spec(&s);
    StTensorOut *t = find_tensor(&s, "fit.vq4-d2.v.0");
    t->shape[1] = 2;
    t->shape[3] = 4;
    expect_spec_refused(&s, "has shape [2, 2, 16, 4], expected [2, 4, 16, 2]",
                        "calib refuses a vq codebook whose sub-vectors disagree with D");
    base_spec(&s);
    t = find_tensor(&s, "fit.vq4-d2.k.1");
    t->ndim = 3;
    t->shape[2] = 32;
    expect_spec_refused(&s, "has shape [2, 4, 32], expected [2, 4, 16, 2]", "calib refuses a vq codebook of rank 3");

    /* Values. */
    static float bad_values[256];
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[17] = NAN;
    find_tensor(&s, "stats.k.1")->data = bad_values;
    expect_spec_refused(&s, "tensor 'stats.k.1' holds a non-finite value at element 17", "calib refuses NaN in statistics");
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[100] = INFINITY;
    find_tensor(&s, "fit.vq4-d2.k.0")->data = bad_values;
    expect_spec_refused(&s, "tensor 'fit.vq4-d2.k.0' holds a non-finite value at element 100",
                        "calib refuses inf in a vq codebook");
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[2] = -INFINITY;
    find_tensor(&s, "fit.nuq2-g8.v.0")->data = bad_values;
    expect_spec_refused(&s, "tensor 'fit.nuq2-g8.v.0' holds a non-finite value at element 2",
                        "calib refuses -inf in an nuq table");
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[4] = -0.5f;   /* element 4: channel 1's mean square */
    find_tensor(&s, "stats.q.0")->data = bad_values;
    expect_spec_refused(&s, "tensor 'stats.q.0' holds a negative mean square (-0.5) at element 4",
                        "calib refuses a negative mean square");
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[5] = -1;
    find_tensor(&s, "stats.v.1")->data = bad_values;
    expect_spec_refused(&s, "tensor 'stats.v.1' holds a negative max |x| (-1) at element 5", "calib refuses a negative max |x|");
    base_spec(&s);
    memcpy(bad_values, data_pool, sizeof bad_values);
    bad_values[0] = -5;   /* a mean may be negative */
    bad_values[5] = bad_values[4];
    bad_values[6] = 0.01f;   /* the nuq3 table: ..., 0.041, 0.041, 0.01, ... */
    find_tensor(&s, "stats.k.0")->data = bad_values;
    find_tensor(&s, "fit.nuq3-g8+prerope.k.1")->data = bad_values;
    expect_spec_refused(&s, "tensor 'fit.nuq3-g8+prerope.k.1' is not ascending (entry 6 = 0.01 after 0.0412371)",
                        "calib refuses an nuq table out of order (equal neighbours pass, a decrease does not)");
}

static void test_bad_names(void) {
    static const struct {
        const char *from, *to, *want, *name;
    } renames[] = {
        {"fit.nuq2-g8.k.0", "fit.nuq5-g8.k.0", "tensor 'fit.nuq5-g8.k.0': fit key: nuq5-g8: expected nuqB-gG or nuqB-tG with B = 2, 3 or 4",
         "calib refuses fit key nuq5-g8"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-x8.k.0", "fit key: nuq2-x8: expected nuqB-gG or nuqB-tG", "calib refuses fit key nuq2-x8"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g08.k.0", "fit key: 'nuq2-g08' is not a fit key: its fit key is 'nuq2-g8'",
         "calib refuses a non-canonical fit key nuq2-g08"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g0.k.0", "fit key: nuq2-g0: the group must be a multiple of 8", "calib refuses fit key nuq2-g0"},
        {"fit.vq4-d2.k.0", "fit.vq13-d2.k.0", "fit key: vq13-d2: expected vqC-dD with C = 1..12", "calib refuses fit key vq13-d2"},
        {"fit.vq4-d2.k.0", "fit.vq0-d2.k.0", "fit key: vq0-d2: expected vqC-dD with C = 1..12", "calib refuses fit key vq0-d2"},
        {"fit.vq4-d2.k.0", "fit.vq4-d3.k.0", "fit key: vq4-d3: expected vqC-dD with C = 1..12 code bits and D = 1, 2, 4, 8 or 16",
         "calib refuses fit key vq4-d3"},
        {"fit.vq4-d2.k.0", "fit.vq4-d16.k.0", "fit key: vq4-d16: sub-vectors of 16 do not divide rows of 8",
         "calib refuses fit key vq4-d16 for head_dim 8"},
        {"fit.vq4-d2.k.0", "fit.vq4.k.0", "fit key: vq4: expected vqC-dD", "calib refuses fit key vq4"},
        {"fit.nuq2-g8.k.0", "fit.int4-g8.k.0", "fit key: int4-g8 is not a fitted base (nuqB-gG, nuqB-tG, vqC-dD", "calib refuses fit key int4-g8"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+out1+had.k.0", "fit key: 'nuq2-g8+out1+had' is not a fit key: its fit key is 'nuq2-g8+had+out1' (+had, +prerope, +outK, in that order)",
         "calib refuses modifiers out of order"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+had+had.k.0", "fit key: modifier '+had' given twice", "calib refuses a repeated modifier"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+res4.k.0", "fit key: 'nuq2-g8+res4' is not a fit key: its fit key is 'nuq2-g8'", "calib refuses +res in a fit key"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+out8.k.0", "fit key: nuq2-g8+out8: +out8 needs fewer outliers than head_dim 8", "calib refuses +out8 for head_dim 8"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+out0.k.0", "fit key: modifier '+out0': the number must be 1 to 64", "calib refuses +out0"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8+had+prerope+out1+x.k.0", "fit key: unknown modifier '+x'", "calib refuses trailing text in a fit key"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8-and-a-very-long-tail-of-characters-to-pass-48.k.0",
         "fit key longer than 48 characters", "calib refuses a fit key over 48 characters"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8.x.0", "unexpected tensor 'fit.nuq2-g8.x.0'", "calib refuses side x"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8.k.00", "unexpected tensor 'fit.nuq2-g8.k.00'", "calib refuses layer 00"},
        {"fit.nuq2-g8.k.0", "fit.nuq2-g8.k", "unexpected tensor 'fit.nuq2-g8.k'", "calib refuses a fit without a layer"},
        {"stats.k.1", "stats.keys.1", "unexpected tensor 'stats.keys.1'", "calib refuses stats.keys"},
        {"stats.k.1", "stats.k.-1", "unexpected tensor 'stats.k.-1'", "calib refuses layer -1"},
        {"stats.k.1", "stats.k.1\nforged", "unexpected tensor 'stats.k.1?forged'", "calib refuses a name with a newline, in one line"},
        {"stats.k.1", "weights", "unexpected tensor 'weights'", "calib refuses a tensor of another kind"},
        {"fit.nuq3-g8+prerope.k.1", "fit.nuq3-g8+prerope.v.1", "a +prerope fit has keys' codebooks only",
         "calib refuses values' codebooks for a +prerope fit"},
    };
    FileSpec s;
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        base_spec(&s);
        rename_tensor(&s, renames[i].from, renames[i].to);
        expect_spec_refused(&s, renames[i].want, renames[i].name);
    }

    /* Layers past the model, and fits missing a layer or a side. */
    base_spec(&s);
    add_tensor(&s, "stats.k.2", 3, (int64_t[]){KV_HEADS, DIM, 3}, data_pool);
    expect_spec_refused(&s, "tensor 'stats.k.2' is for layer 2; the model has 2 layers",
                        "calib refuses a tensor for a layer past the model's");
    base_spec(&s);
    drop_tensor(&s, "fit.vq4-d2.k.1");
    expect_spec_refused(&s, "missing tensor 'fit.vq4-d2.k.1'", "calib refuses a fit missing a layer");
    base_spec(&s);
    drop_tensor(&s, "fit.nuq2-g8.v.0");
    drop_tensor(&s, "fit.nuq2-g8.v.1");
    expect_spec_refused(&s, "missing tensor 'fit.nuq2-g8.v.0'", "calib refuses a fit missing a side");
    base_spec(&s);
    drop_tensor(&s, "fit.nuq3-g8+prerope.k.0");
    expect_spec_refused(&s, "missing tensor 'fit.nuq3-g8+prerope.k.0'", "calib refuses a +prerope fit missing a layer");

    /* Without a model, the layers come from the largest one named: a gap is a missing tensor. */
    base_spec(&s);
    add_tensor(&s, "fit.nuq2-g8.k.3", 1, (int64_t[]){4}, data_pool);
    char path[128];
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/gap.safetensors", tmpdir);
    if (st_write_checksummed(path, s.t, s.n, s.mk, s.mv, s.n_meta, &err) == 0)
        expect_refused(path, NULL, "missing tensor 'stats.q.2'", "calib without a model: a layer gap is a missing tensor");
    unlink(path);
}

static void test_bad_files(void) {
    char path[160];
    snprintf(path, sizeof path, "%s/none.safetensors", tmpdir);
    expect_refused(path, &SMALL_MODEL, "cannot open", "calib refuses a missing file, naming it");
    /* A truncated copy of a valid file: safetensors' own checks refuse it. */
    FileSpec s;
    base_spec(&s);
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/cut.safetensors", tmpdir);
    if (st_write_checksummed(path, s.t, s.n, s.mk, s.mv, s.n_meta, &err) == 0) {
        FILE *f = fopen(path, "rb");
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        if (truncate(path, size - 5) == 0) expect_refused(path, &SMALL_MODEL, "end past the data area", "calib refuses a truncated file");
    }
    unlink(path);
    /* A model weights file: safetensors, but not a calibration. */
    expect_refused("data/models/mini-llama-brown-outliers/model.safetensors", &SMALL_MODEL, "not a kvq calibration",
                   "calib refuses a model's weights file");
}

static int dir_is_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n == 0;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvq_test_calib_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        check(0, "calib temp directory", "mkdtemp failed");
        return test_exit_code();
    }
    test_round_trip();
    test_named_tensors();
    test_writer_refusals();
    test_base_is_valid();
    test_bad_metadata();
    test_bad_tensors();
    test_bad_names();
    test_bad_files();
    check(dir_is_empty(tmpdir) && rmdir(tmpdir) == 0, "calib tests leave no files", "%s not empty", tmpdir);
    return test_exit_code();
}
