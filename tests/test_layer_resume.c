/* tests/test_layer_resume.c: schemes fp32 below a layer started there from the fp32 baseline's
 * residual stream (eval/layer_resume.h), against the whole passes (PplOptions.layer_resume_off),
 * on mini-llama-brown-outliers (4 layers; ~25 s of CPU).
 *
 * - layer_resume_choose against brute force over every set of at most k layers (seeded needs, 1 to
 *   7 layers): the same saving, no more than k layers, only layers some scheme starts at.
 * - A session (eval/perplexity.h) of a sensitivity's 16 cells (2 candidates, K and V, layers 0-3)
 *   plus fp32, uniform q8_0 and a cell fp32 on keys below 2 and on values below 1, with the
 *   per-layer error on, 3 windows of 4 batches (stride below ctx, a short last window): every
 *   scheme's TokenSums equal to the bit (memcmp) with and without the shortcut, and also with room
 *   for 2 held layers only; the layers x tokens run are exactly the whole passes' without it and
 *   sum over schemes of (n_layers - start) with it (starts worked out here by hand).
 * - ./run sensitivity's path (sensitivity_run_and_report) both ways: sensitivity.json, .csv, .md
 *   and results.csv byte for byte. */
#include "eval/layer_resume.h"
#include "eval/perplexity.h"
#include "eval/sensitivity.h"
#include "model/modeldir.h"
#include "model/formats/fileio.h"
#include "tests/test.h"
#include "tests/test_random.h"
#include <unistd.h>

#define MODEL "data/models/mini-llama-brown-outliers"
#define MAX_SCHEMES 24

/* ---- layer_resume_choose against every subset ---- */

/* The saving of held (bit l of mask: layer l held): each scheme starts at the highest held layer <= its L. */
static long saving_of(const int *need, int n_layers, unsigned mask) {
    long sum = 0;
    for (int L = 1; L <= n_layers; L++) {
        int s = L;
        while (s > 0 && !(mask >> s & 1u)) s--;
        sum += (long)need[L] * s;
    }
    return sum;
}

static void check_choose(void) {
    uint64_t seed = 7;
    int bad = 0, cases = 0;
    char why[200] = "";
    for (int n = 1; n <= 7; n++)
        for (int trial = 0; trial < 40; trial++) {
            int need[8] = {0};
            for (int l = 0; l <= n; l++) need[l] = next_u64(&seed) % 3 ? (int)(next_u64(&seed) % 5) : 0;
            for (int k = 0; k <= n + 1; k++) {
                long best = 0;
                for (unsigned mask = 0; mask < 1u << (n + 1); mask += 2) {   /* layer 0 is never held */
                    if (__builtin_popcount(mask) <= k && saving_of(need, n, mask) > best) best = saving_of(need, n, mask);
                }
                unsigned char held[8];
                layer_resume_choose(need, n, k, held);
                unsigned mask = 0;
                int count = 0, useless = 0;
                for (int l = 0; l <= n; l++)
                    if (held[l]) mask |= 1u << l, count++, useless += l == 0 || need[l] == 0;
                cases++;
                if (saving_of(need, n, mask) != best || count > k || useless) {
                    if (!bad++)
                        snprintf(why, sizeof why, "n_layers %d, k %d: saving %ld of the best %ld, %d layers held, %d "
                                 "not needed", n, k, saving_of(need, n, mask), best, count, useless);
                }
            }
        }
    check(!bad, "layer_resume: layer_resume_choose saves what the best set of at most k layers saves (brute force)",
          "%d of %d cases: first %s", bad, cases, why);
}

/* ---- a session both ways ---- */

typedef struct {
    const char *k, *v;
    int start;   /* its first non-fp32 layer, by hand */
} Cell;

static int n_cells;
static Cell cells[MAX_SCHEMES];
static char texts[MAX_SCHEMES][2][64];

static void add_cell(const char *k, const char *v, int start) {
    snprintf(texts[n_cells][0], 64, "%s", k);
    snprintf(texts[n_cells][1], 64, "%s", v);
    cells[n_cells] = (Cell){texts[n_cells][0], texts[n_cells][1], start};
    n_cells++;
}

static void make_cells(int n_layers) {
    const char *cand[2] = {"int2-g64+had", "q8_0"};
    char one[64];
    for (int side = 0; side < 2; side++)
        for (int l = 0; l < n_layers; l++)
            for (int c = 0; c < 2; c++) {
                snprintf(one, sizeof one, "fp32;%d:%s", l, cand[c]);
                add_cell(side ? "fp32" : one, side ? one : "fp32", l);
            }
    add_cell("fp32", "fp32", n_layers);
    add_cell("q8_0", "q8_0", 0);
    add_cell("fp32;2:q8_0", "fp32;1:tq3", 1);
}

typedef struct {
    TokenSums sums[MAX_SCHEMES];
    long layer_tokens, window_tokens;
    size_t held_bytes;
} Run;

/* Every window of the session's options, every scheme, its sums added into r. */
static int run_session(const Model *m, const PplOptions *o, const KvCacheScheme *const *schemes, const int *tokens,
                       int n_tokens, Run *r, Error *err) {
    PplSession ps;
    memset(r, 0, sizeof *r);
    if (ppl_session_init(&ps, m, o, schemes, n_cells, 1, err)) {
        ppl_session_free(&ps);
        return -1;
    }
    r->held_bytes = ps.resume ? ps.resume->bytes : 0;
    int windows = ppl_window_count(o, n_tokens);
    if (o->max_windows && o->max_windows < windows) windows = o->max_windows;
    for (int w = 0; w < windows; w++) {
        ppl_session_begin_window(&ps, tokens, n_tokens, w);
        r->window_tokens += ps.win.n;
        for (int i = 0; i < n_cells; i++)
            if (ppl_session_run_scheme(&ps, i, &r->sums[i]) < 0) {
                ppl_session_free(&ps);
                return error_set(err, "out of memory");
            }
    }
    r->layer_tokens = ps.layer_tokens;
    ppl_session_free(&ps);
    return 0;
}

/* The first scheme whose sums differ between a and b, or -1. */
static int first_difference(const Run *a, const Run *b) {
    for (int i = 0; i < n_cells; i++)
        if (memcmp(&a->sums[i], &b->sums[i], sizeof a->sums[i])) return i;
    return -1;
}

static void check_session(const Model *m) {
    const Config *c = &m->config;
    int L = c->n_layers;
    make_cells(L);
    static KvCacheScheme schemes[MAX_SCHEMES];
    const KvCacheScheme *ptrs[MAX_SCHEMES];
    char why[200];
    for (int i = 0; i < n_cells; i++) {
        KvCacheScheme *s = &schemes[i];
        if (kv_layered_parse(cells[i].k, KV_SIDE_KEYS, &s->k, why, sizeof why) ||
            kv_layered_bind(&s->k, L, c->head_dim, KV_SIDE_KEYS, why, sizeof why) ||
            kv_layered_parse(cells[i].v, KV_SIDE_VALUES, &s->v, why, sizeof why) ||
            kv_layered_bind(&s->v, L, c->head_dim, KV_SIDE_VALUES, why, sizeof why)) {
            check(0, "layer_resume: the cells' schemes parse", "%s:%s: %s", cells[i].k, cells[i].v, why);
            return;
        }
        ptrs[i] = s;
    }
    int firsts_ok = 1;
    for (int i = 0; i < n_cells; i++) firsts_ok &= layer_resume_first_quantized(ptrs[i], L) == cells[i].start;
    check(firsts_ok && layer_resume_first_quantized(NULL, L) == L,
          "layer_resume: each cell's first non-fp32 layer (K or V) is the one worked out by hand", "differs");

    /* 420 seeded tokens: 3 windows of ctx 192 at stride 128 (the last one 164 long), batches of 48 */
    enum { N = 420 };
    static int tokens[N];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++) tokens[i] = 2 + (int)(next_u64(&seed) % (uint64_t)(c->vocab_size - 2));
    PplOptions o = {.protocol = PPL_HF, .ctx = 192, .stride = 128, .shard_count = 1, .batch = 48,
                    .compare = 1, .layer_error = 1};
    static Run whole, resumed, tight;
    Error err;
    PplOptions off = o, small = o;
    off.layer_resume_off = 1;
    small.layer_resume_max_bytes = 2 * (size_t)o.ctx * c->dim * sizeof(float) + 1;
    if (!check(!run_session(m, &off, ptrs, tokens, N, &whole, &err) && !run_session(m, &o, ptrs, tokens, N, &resumed, &err)
               && !run_session(m, &small, ptrs, tokens, N, &tight, &err), "layer_resume: the sessions run", "%s", err.msg))
        return;
    int d = first_difference(&whole, &resumed), dt = first_difference(&whole, &tight);
    check(d < 0, "layer_resume: every scheme's sums (nll, KL, top-1, histogram, positions, per-layer error, entropy "
          "bits) equal to the bit with and without the shortcut (3 windows, 19 schemes)", "scheme %d (%s : %s) differs",
          d, d >= 0 ? cells[d].k : "", d >= 0 ? cells[d].v : "");
    check(dt < 0, "layer_resume: the same with room for 2 held layers only", "scheme %d (%s : %s) differs", dt,
          dt >= 0 ? cells[dt].k : "", dt >= 0 ? cells[dt].v : "");
    check(whole.sums[0].scored > 0 && whole.sums[0].kl_sum > 0 && whole.sums[2 * L].kl_sum > 0,
          "layer_resume: the cells compared are damaged (KL > 0), not trivially equal", "scored %ld, KL %g",
          whole.sums[0].scored, whole.sums[0].kl_sum);

    long full = (long)(n_cells + 1) * L * whole.window_tokens, want = (long)L;   /* baseline: every layer */
    for (int i = 0; i < n_cells; i++) want += L - cells[i].start;
    want *= resumed.window_tokens;
    check(whole.layer_tokens == full && whole.held_bytes == 0,
          "layer_resume: switched off, every pass runs every layer ((schemes + 1) x layers x tokens)",
          "%ld layer-tokens, want %ld; %zu bytes held", whole.layer_tokens, full, whole.held_bytes);
    check(resumed.layer_tokens == want, "layer_resume: with the shortcut each scheme runs layers start..n-1 only "
          "(baseline + sum of (n_layers - start)) x tokens", "%ld layer-tokens, want %ld (whole: %ld)",
          resumed.layer_tokens, want, full);
    size_t layer_bytes = (size_t)o.ctx * c->dim * sizeof(float);
    check(resumed.held_bytes == (size_t)L * layer_bytes && tight.held_bytes == 2 * layer_bytes &&
          tight.layer_tokens > resumed.layer_tokens && tight.layer_tokens < full,
          "layer_resume: layers 1..n held (ctx x dim floats each), 2 within the small budget (between the two costs)",
          "held %zu and %zu bytes (a layer %zu), tight cost %ld", resumed.held_bytes, tight.held_bytes, layer_bytes,
          tight.layer_tokens);
}

/* ---- ./run sensitivity's path both ways ---- */

static int sensitivity_into(const char *dir, int off, Error *err) {
    SensGrid g = {0};
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return error_set(err, "out of memory");
    s.ppl = (PplOptions){.protocol = PPL_HF, .ctx = 160, .stride = 96, .max_windows = 3, .shard_count = 1,
                         .batch = 64, .layer_resume_off = off};
    snprintf(s.model, sizeof s.model, "%s", MODEL);
    snprintf(s.text_file, sizeof s.text_file, "%s", SENS_DEFAULT_TEXT);
    snprintf(s.precision, sizeof s.precision, "exact");
    FILE *null = fopen("/dev/null", "w");
    SweepRun run = {dir, 4000, 1, 1, null, null};
    int rc = sens_parse_candidates("int2-g64+had,q8_0", &g, err) || sensitivity_run_and_report(&s, &g, &run, err);
    if (null) fclose(null);
    free(s.configs);
    return rc ? -1 : 0;
}

static int same_output(const char *a_dir, const char *b_dir, const char *name) {
    char a[400], b[400];
    size_t na, nb;
    Error err;
    snprintf(a, sizeof a, "%s/%s", a_dir, name);
    snprintf(b, sizeof b, "%s/%s", b_dir, name);
    char *x = read_whole_file(a, 1 << 26, &na, &err), *y = read_whole_file(b, 1 << 26, &nb, &err);
    int same = x && y && na == nb && na > 0 && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void check_sensitivity(void) {
    char base[] = "/tmp/kvq_layer_resume_XXXXXX", whole[300], resumed[300];
    if (!mkdtemp(base)) {
        check(0, "layer_resume: a temporary directory", "mkdtemp failed");
        return;
    }
    snprintf(whole, sizeof whole, "%s/whole", base);
    snprintf(resumed, sizeof resumed, "%s/resumed", base);
    Error err;
    if (!check(!sensitivity_into(whole, 1, &err) && !sensitivity_into(resumed, 0, &err),
               "layer_resume: a sensitivity runs both ways", "%s", err.msg))
        return;
    const char *files[] = {"sensitivity.json", "sensitivity.csv", "sensitivity.md", "results.csv"};
    int same = 1;
    const char *differs = "";
    for (int i = 0; i < 4; i++)
        if (!same_output(whole, resumed, files[i])) same = 0, differs = files[i];
    check(same, "layer_resume: ./run sensitivity's path (2 candidates, 3 windows) writes the same sensitivity.json, "
          ".csv, .md and results.csv byte for byte with and without the shortcut", "%s differs", differs);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", base);
}

int main(void) {
    check_choose();
    ModelDir L;
    Error err;
    if (!check(modeldir_load(&L, MODEL, 1, &err) == 0, "layer_resume: the model loads", "%s", err.msg))
        return test_exit_code();
    check_session(&L.model);
    modeldir_free(&L);
    check_sensitivity();
    return test_exit_code();
}
