/* tests/test_calibrate.c: kvq's own calibration (eval/calibrate.h, SCHEMES.md §8) against the
 * reference's calibration of mini-llama-brown-outliers (tests/fixtures/reference/kv-calib-*:
 * wiki.valid, first 16,384 tokens, windows of 1024, an independent implementation):
 *   - the same statistics: every channel's rms (sqrt of the mean square) within 1e-4 relative,
 *     and its mean and max |x| within 1e-4 of the rms;
 *   - tables as good: on the rows kvq collects for each table (§8), the codec's objective (the
 *     sum over its points, every book, of the squared distance to the nearest entry) of kvq's
 *     table is at most 1.01 x the reference's;
 *   - the file written and read back, the heatmap a well-formed SVG with a cell per channel;
 *   - --fit's parsing: keys derived from specs, unfitted bases and per-layer items refused, and a
 *     fit with too few points refused naming the tokens it needs.
 * Tolerances are the (1e-4 of the rms; 1.01 x the objective). `make check` (KVQ_QUICK=1)
 * fits one in QUICK_FIT_STEP of the six (an nuq and a vq one), and says so. */
#include "tests/test.h"
#include "eval/calibrate.h"
#include "eval/calib_report.h"
#include "eval/wikitext.h"
#include "quant/lloyd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL_DIR "data/models/mini-llama-brown-outliers"
#define REF_CALIB "tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors"
#define STATS_REL_TOL 1e-4
#define OBJECTIVE_RATIO 1.01

static const char *const FITS[] = {"nuq2-g64", "nuq3-g64", "nuq2-t64", "nuq3-g64+had", "vq8-d4", "vq8-d8+had"};
#define N_FITS ((int)(sizeof FITS / sizeof FITS[0]))
#define QUICK_FIT_STEP 4

/* ---- statistics ---- */

static const char *const KINDS[4] = {"k", "kpre", "v", "q"};

static void check_stats(const Calibration *mine, const Calibration *ref) {
    const float *a[4] = {mine->stats_k, mine->stats_kpre, mine->stats_v, mine->stats_q};
    const float *b[4] = {ref->stats_k, ref->stats_kpre, ref->stats_v, ref->stats_q};
    for (int kind = 0; kind < 4; kind++) {
        size_t channels = (size_t)mine->n_layers * (kind == 3 ? mine->n_heads : mine->n_kv_heads) * mine->head_dim;
        double worst_rms = 0, worst_other = 0;
        for (size_t i = 0; i < channels; i++) {
            double rms_a = sqrt(a[kind][3 * i + 1]), rms_b = sqrt(b[kind][3 * i + 1]);
            double rel = fabs(rms_a - rms_b) / rms_b;
            double mean = fabs(a[kind][3 * i] - b[kind][3 * i]) / rms_b, amax = fabs(a[kind][3 * i + 2] - b[kind][3 * i + 2]) / rms_b;
            if (!(rel <= worst_rms)) worst_rms = rel;
            if (!(mean <= worst_other)) worst_other = mean;
            if (!(amax <= worst_other)) worst_other = amax;
        }
        char name[160];
        snprintf(name, sizeof name, "calibrate: stats.%s of every layer and channel = the reference's (rms within 1e-4 "
                 "relative, mean and max |x| within 1e-4 of the rms)", KINDS[kind]);
        check(worst_rms <= STATS_REL_TOL && worst_other <= STATS_REL_TOL, name, "worst rms %.3g, mean/max %.3g",
              worst_rms, worst_other);
        printf("     stats.%-4s over %zu channels: worst rms deviation %.2e, mean / max %.2e (of the rms)\n", KINDS[kind],
               channels, worst_rms, worst_other);
    }
}

/* ---- codebooks ---- */

/* The worst objective ratio (kvq's over the reference's) over every table of one fit: the
 * codec's objective (quant/codec.h) of both tables on the same rows. */
static double fit_ratio(const CalibRows *rows, const CalibFitSpec *f, const Calibration *mine, const Calibration *ref) {
    double worst = 0;
    for (int side = 0; side < f->sides; side++) {
        const KvSpec *spec = side == 0 ? &f->keys : &f->values;
        const KvFit *fit = spec->base.codec->fit;
        KvFitLayout layout;
        fit->layout(&spec->base, rows->head_dim, &layout);
        for (int l = 0; l < rows->n_layers; l++)
            for (int h = layout.per_head ? 0 : -1; h < (layout.per_head ? rows->n_kv_heads : 0); h++) {
                float *units = malloc(calib_units_floats(rows, spec, h) * sizeof(float));
                KvFitRows fr = {.units = units, .n = rows->head_dim};
                if (units) fr.count = calib_units(rows, spec, l, h, units);
                void *scratch = units ? malloc(fit->scratch_bytes(&spec->base, &fr)) : NULL;
                const float *a = calibration_table(mine, f->key, side ? 'v' : 'k', l, h < 0 ? 0 : h);
                const float *b = calibration_table(ref, f->key, side ? 'v' : 'k', l, h < 0 ? 0 : h);
                if (!units || !scratch || !a || !b) {
                    free(units);
                    free(scratch);
                    return INFINITY;
                }
                double oa = fit->objective(&spec->base, &fr, a, scratch), ob = fit->objective(&spec->base, &fr, b, scratch);
                double ratio = ob > 0 ? oa / ob : oa > 0 ? INFINITY : 1;
                if (!(ratio <= worst)) worst = ratio;
                free(units);
                free(scratch);
            }
    }
    return worst;
}

/* ---- the run ---- */

typedef struct {
    Model m;
    Tokenizer *tok;
    int *tokens, n_tokens;
    CalibRows rows;
    const char *fits[N_FITS];       /* the fits made: FITS, or a sample of it in quick mode */
    int n_fits;
    CalibFitSpec specs[N_FITS];
    Calibration mine, ref;
} Setup;

static int setup(Setup *s) {
    Error err;
    char msg[256];
    memset(s, 0, sizeof *s);
    if (!check(model_load(&s->m, MODEL_DIR, &err) == 0, "calibrate: the outliers model loads", "%s", err.msg)) return -1;
    s->tok = tokenizer_load(MODEL_DIR "/tokenizer.bin", msg, sizeof msg);
    if (s->tok) s->tokens = load_eval_tokens(CALIB_DEFAULT_TEXT, s->tok, 1, &s->n_tokens, &err);
    const Config *c = &s->m.config;
    CalibModel geometry = {c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, NULL};
    int ok = s->tokens && s->n_tokens >= CALIB_DEFAULT_TOKENS && calibration_load(REF_CALIB, &geometry, &s->ref, &err) == 0;
    if (!check(ok, "calibrate: wiki.valid and the reference calibration load", "%s", err.msg)) return -1;
    int step = test_quick() ? QUICK_FIT_STEP : 1;
    for (int i = 0; i < N_FITS; i += step) s->fits[s->n_fits++] = FITS[i];
    if (step > 1) printf("calibrate: %d of the %d fits made (KVQ_QUICK)\n", s->n_fits, N_FITS);
    return 0;
}

static void teardown(Setup *s) {
    calibration_free(&s->mine);
    calibration_free(&s->ref);
    calib_rows_free(&s->rows);
    free(s->tokens);
    if (s->tok) tokenizer_free(s->tok);
    model_free(&s->m);
}

/* The reference's protocol: 16 windows of 1024 tokens, every fit it holds. */
static int calibrate(Setup *s) {
    Error err = {{0}};
    char why[256] = "";
    const Config *c = &s->m.config;
    int ok = 1;
    for (int i = 0; i < s->n_fits && ok; i++)
        ok = calib_fit_spec_parse(s->fits[i], c->n_layers, c->head_dim, &s->specs[i], why, sizeof why) == 0;
    CalibWindows cw = {s->tokens, CALIB_DEFAULT_TOKENS / CALIB_DEFAULT_CTX, CALIB_DEFAULT_CTX, 512, 0};
    ok = ok && calib_collect(&s->m, &cw, NULL, NULL, &s->rows, &err) == 0;
    ok = ok && calibration_init(&s->mine, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, &err) == 0;
    for (int i = 0; i < s->n_fits && ok; i++) ok = calibration_add_fit(&s->mine, s->specs[i].key, &err) != NULL;
    if (ok) calib_store_stats(&s->rows, &s->mine);
    ok = ok && calib_fit_all(&s->rows, s->specs, s->n_fits, &s->mine, NULL, NULL, &err) == 0;
    return check(ok, "calibrate: the reference's protocol runs (16 windows of 1024, the fits)", "%s%s", why, err.msg) ? 0 : -1;
}

static void check_fits(const Setup *s) {
    for (int i = 0; i < s->n_fits; i++) {
        double ratio = fit_ratio(&s->rows, &s->specs[i], &s->mine, &s->ref);
        char name[160];
        snprintf(name, sizeof name, "calibrate: fit %s: on kvq's points its objective is <= 1.01 x the reference "
                 "tables', every layer, side and head (its codec's objective)", s->fits[i]);
        check(ratio <= OBJECTIVE_RATIO, name, "worst ratio %.4f", ratio);
        printf("     fit %-13s worst objective ratio (kvq / reference) %.5f\n", s->fits[i], ratio);
    }
}

/* The calibration written, read back equal; the heatmap: one cell a channel per layer and panel. */
static void check_files(Setup *s) {
    char path[] = "/tmp/kvq-test-calibrate-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    Error err = {{0}};
    snprintf(s->mine.model_sha256, sizeof s->mine.model_sha256, "%s", s->ref.model_sha256);
    snprintf(s->mine.text_sha256, sizeof s->mine.text_sha256, "%s", s->ref.text_sha256);
    s->mine.tokens = s->rows.rows;
    s->mine.ctx = s->rows.ctx;
    Calibration back = {0};
    int ok = fd >= 0 && calibration_save(path, &s->mine, &err) == 0 && calibration_load(path, NULL, &back, &err) == 0 &&
             back.n_fits == s->n_fits && !memcmp(back.stats_q, s->mine.stats_q, (size_t)back.n_layers * back.n_heads * back.head_dim * 3 * sizeof(float));
    check(ok, "calibrate: the calibration is written and read back the same", "%s", err.msg);
    calibration_free(&back);
    unlink(path);
    char *svg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&svg, &len);
    int wrote = f && calib_write_heatmap_svg(f, &s->mine, "a <title> & more") == 0;
    if (f) fclose(f);
    long cells = 0;
    for (const char *p = svg; p && (p = strstr(p, "<rect x=")); p++) cells++;
    long want = 3L * s->mine.n_layers * s->mine.n_kv_heads * s->mine.head_dim;
    check(wrote && cells == want && strstr(svg, "&lt;title&gt; &amp; more") && strstr(svg, "</svg>"),
          "calibrate: the heatmap has a cell per layer and channel in each of its three panels, its title escaped",
          "%ld cells, want %ld", cells, want);
    free(svg);
}

static void check_parsing(const Setup *s) {
    static const struct {
        const char *text, *key, *why;
    } cases[] = {
        {"nuq3-g64+res128+sink4", "nuq3-g64", NULL},
        {"vq8-d4+out2+had", "vq8-d4+had+out2", NULL},
        {"nuq2-t64+prerope", "nuq2-t64+prerope", NULL},
        {"int4-g64", NULL, "not a fitted base"},
        {"nuq3-g64;0:nuq4-g64", NULL, "one spec"},
        {"nuq3-t64+out2", NULL, "+out"},
        {"vq8-d3", NULL, "vqC-dD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CalibFitSpec f;
        char why[256] = "", name[160];
        int rc = calib_fit_spec_parse(cases[i].text, s->m.config.n_layers, s->m.config.head_dim, &f, why, sizeof why);
        snprintf(name, sizeof name, "calibrate: --fit %s %s%s", cases[i].text, cases[i].key ? "fits " : "is refused naming ",
                 cases[i].key ? cases[i].key : cases[i].why);
        if (cases[i].key)
            check(rc == 0 && !strcmp(f.key, cases[i].key) && f.sides == (strstr(cases[i].key, "prerope") ? 1 : 2), name,
                  "rc %d key '%s' why '%s'", rc, rc ? "" : f.key, why);
        else check(rc == -1 && strstr(why, cases[i].why), name, "rc %d why '%s'", rc, why);
    }
    /* vq12-d8 needs 4 x 4096 points a table: the rows of one short window are too few */
    CalibFitSpec f;
    char why[256];
    Error err = {{0}};
    CalibRows few;
    Calibration c = {0};
    const Config *cfg = &s->m.config;
    int ok = calib_fit_spec_parse("vq12-d8", cfg->n_layers, cfg->head_dim, &f, why, sizeof why) == 0 &&
             calib_collect(&s->m, &(CalibWindows){s->tokens, 1, 256, 256, 0}, NULL, NULL, &few, &err) == 0 &&
             calibration_init(&c, cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, &err) == 0 &&
             calibration_add_fit(&c, f.key, &err) != NULL;
    int rc = ok ? calib_fit_all(&few, &f, 1, &c, NULL, NULL, &err) : 0;
    check(ok && rc == -1 && strstr(err.msg, "fewer than 4 x its 4096 entries") && strstr(err.msg, "--tokens 16384"),
          "calibrate: vq12-d8 on 256 tokens is refused, naming the 16384 tokens it needs", "%s", err.msg);
    if (ok) calib_rows_free(&few);
    calibration_free(&c);
}

int main(void) {
    Setup s;
    if (setup(&s) == 0) {
        check_parsing(&s);
        if (calibrate(&s) == 0) {
            check_stats(&s.mine, &s.ref);
            check_fits(&s);
            check_files(&s);
        }
    }
    teardown(&s);
    return test_exit_code();
}
