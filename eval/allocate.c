/* eval/allocate.c: ./run allocate (see eval/allocate.h): exact bits, the budget, the knapsack
 * set up from a sensitivity, the LAYERED values of the choice, and its check on held-out windows
 * (a sweep). The report is written by eval/allocate_report.c. */
#include "eval/allocate.h"
#include "eval/allocate_report.h"
#include "eval/calibration.h"
#include "model/config.h"
#include "model/formats/fileio.h"
#include "model/formats/sha256.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- exact bits ---- */

static long long gcd(long long a, long long b) {
    if (a < 0) a = -a;
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static BitsFraction reduced(long long num, long long den) {
    long long g = gcd(num, den);
    return g > 1 ? (BitsFraction){num / g, den / g} : (BitsFraction){num, den};
}

BitsFraction alloc_spec_bits(const KvSpec *spec, int n, int ctx) {
    if (kv_spec_is_fp32(spec)) return (BitsFraction){32, 1};
    long long unit_bits = 8LL * (long long)kv_spec_unit_bytes(spec, n), values = (long long)spec->base.rows * n;
    if (ctx <= 0) return reduced(unit_bits, values);   /* stored bits: a unit's bits over its values */
    long long quantized = kv_spec_quantized_end(spec, ctx) - spec->sinks;
    if (quantized < 0) quantized = 0;
    /* (quantized x stored + the full-precision positions x 16) / ctx, over values x ctx */
    return reduced(quantized * unit_bits + (ctx - quantized) * 16 * values, (long long)ctx * values);
}

/* A refused --budget value: why says what it should be. */
static int refuse(char *why, size_t why_len, const char *what, const char *text) {
    snprintf(why, why_len, "%s, got '%s'", what, text);
    return -1;
}

int alloc_parse_budget(const char *text, BitsFraction *out, char *why, size_t why_len) {
    const char *p = text;
    long long num = 0, den = 1;
    int int_digits = 0, decimals = 0;
    if (*p == '-') return refuse(why, why_len, "a budget is a positive number of bits", text);
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++int_digits > 3) return refuse(why, why_len, "a budget is below 1000 bits", text);
        num = num * 10 + (*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (++decimals > 6) return refuse(why, why_len, "at most 6 decimals", text);
            num = num * 10 + (*p - '0');
            den *= 10;
        }
    }
    if (*p || int_digits + decimals == 0) return refuse(why, why_len, "expected a number of bits such as 3 or 2.75", text);
    *out = reduced(num, den);
    return 0;
}

int alloc_parse_budgets(const char *list, BitsFraction *out, char (*texts)[32], int *n, char *why, size_t why_len) {
    *n = 0;
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        if (*n == ALLOC_MAX_BUDGETS) return refuse(why, why_len, "at most 8 budgets", list);
        if (len >= 32) return refuse(why, why_len, "a budget is a number of bits such as 3 or 2.75", list);
        snprintf(texts[*n], 32, "%.*s", (int)len, p);
        if (alloc_parse_budget(texts[*n], &out[*n], why, why_len)) return -1;
        ++*n;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

/* ---- one side's LAYERED value ---- */

int alloc_layered_text(const int *choice, int n_layers, const char (*names)[SENS_SPEC_LEN], char *out, size_t n,
                       Error *err) {
    int count[SENS_MAX_CANDIDATES] = {0}, base = choice[0];
    for (int l = 0; l < n_layers; l++) count[choice[l]]++;
    for (int c = 0; c < SENS_MAX_CANDIDATES; c++)
        if (count[c] > count[base] || (count[c] == count[base] && c < base)) base = c;
    size_t used = (size_t)snprintf(out, n, "%s", names[base]);
    int items = 0;
    for (int l = 0; l < n_layers && used < n;) {
        if (choice[l] == base) { l++; continue; }
        int last = l;
        while (last + 1 < n_layers && choice[last + 1] == choice[l]) last++;
        if (++items > KV_MAX_LAYER_ITEMS)
            return error_set(err, "the allocation needs more than %d per-layer items in one LAYERED value",
                             KV_MAX_LAYER_ITEMS);
        if (last > l) used += (size_t)snprintf(out + used, n - used, ";%d-%d:%s", l, last, names[choice[l]]);
        else used += (size_t)snprintf(out + used, n - used, ";%d:%s", l, names[choice[l]]);
        l = last + 1;
    }
    if (used >= n) return error_set(err, "the allocation's LAYERED value is longer than %zu characters", n - 1);
    return 0;
}

/* ---- the knapsack of a sensitivity ---- */

static const char SIDE_WORDS[2][6] = {"key", "value"};

/* The flag that gave side's candidates: its own, --candidates, or none (NULL: all of them). */
static const char *side_list(const AllocateOptions *o, int side, const char **flag) {
    static const char *const flags[2] = {"--k-candidates", "--v-candidates"};
    *flag = o->side_candidates[side] ? flags[side] : "--candidates";
    return o->side_candidates[side] ? o->side_candidates[side] : o->candidates;
}

/* 1 when side's list is --candidates' (valid for both sides, as the sensitivity's --candidates). */
static int o_both(const Alloc *a, int side) { return !a->o->side_candidates[side] && a->o->candidates; }

/* Side's candidates to choose from: its list (each one of the sensitivity's of that side), or all of them. */
static int select_side(Alloc *a, int side, Error *err) {
    const SensGrid *g = &a->d.g;
    const char *flag, *list = side_list(a->o, side, &flag);
    SensGrid want = *g;
    if (list && (o_both(a, side) ? sens_parse_candidates(list, &want, err)
                                 : sens_parse_side_candidates(list, (SensSide)side, &want, err)))
        return -1;
    a->n_cand[side] = want.n_candidates[side];
    for (int c = 0; c < want.n_candidates[side]; c++) {
        const char *name = want.candidates[side][c];
        a->idx[side][c] = -1;
        for (int k = 0; k < g->n_candidates[side]; k++)
            if (!strcmp(name, g->candidates[side][k])) a->idx[side][c] = k;
        if (a->idx[side][c] < 0 && sens_same_candidates(g))
            return error_set(err, "%s: '%s' is not one of the %d %s/sensitivity.json measured (%s, ...)", flag, name,
                             g->n_candidates[side], a->o->from, g->candidates[side][0]);
        if (a->idx[side][c] < 0)
            return error_set(err, "%s: '%s' is not one of the %d %s candidates %s/sensitivity.json measured (%s, ...)",
                             flag, name, g->n_candidates[side], SIDE_WORDS[side], a->o->from, g->candidates[side][0]);
        snprintf(a->names[side][c], SENS_SPEC_LEN, "%s", name);
    }
    return 0;
}

static int select_candidates(Alloc *a, Error *err) {
    return select_side(a, SENS_KEYS, err) || select_side(a, SENS_VALUES, err) ? -1 : 0;
}

/* Each candidate's exact bits on its side, checked against kv_spec_effective_bits. */
static int candidate_bits(Alloc *a, Error *err) {
    for (int side = 0; side < 2; side++)
        for (int c = 0; c < a->n_cand[side]; c++) {
            KvSpec spec;
            char why[160];
            const char *name = a->names[side][c];
            if (kv_spec_parse(name, side ? KV_SIDE_VALUES : KV_SIDE_KEYS, &spec, why, sizeof why))
                return error_set(err, "candidate '%s': %s", name, why);
            BitsFraction b = alloc_spec_bits(&spec, a->d.head_dim, a->d.ctx);
            double want = kv_spec_effective_bits(&spec, a->d.head_dim, a->d.ctx);
            if (!(b.den > 0 && fabs((double)b.num / b.den - want) <= 1e-9 * want))
                return error_set(err, "candidate '%s': exact bits %lld/%lld differ from %.17g", name, b.num, b.den, want);
            a->bits[side][c] = b;
        }
    return 0;
}

/* x * y, or -1 when it would overflow (both >= 0). */
static long long times(long long x, long long y) { return x && y > LLONG_MAX / x ? -1 : x * y; }

/* The knapsack: groups K layer 0..L-1 (the key candidates) then V layer 0..L-1 (the value
 * candidates); weights the bits over a common denominator D, damages the cells' mean KL. */
static int build_knapsack(Alloc *a, Error *err) {
    int L = a->d.g.n_layers, C = a->n_cand[0] > a->n_cand[1] ? a->n_cand[0] : a->n_cand[1];
    a->G = 2 * L;
    a->C = C;
    a->D = 1;
    for (int side = 0; side < 2; side++)
        for (int c = 0; c < a->n_cand[side]; c++) {
            long long den = a->bits[side][c].den, m = times(a->D / gcd(a->D, den), den);
            if (m < 0) return error_set(err, "the candidates' bits have no common denominator below 2^63");
            a->D = m;
        }
    a->weight = calloc((size_t)a->G * C, sizeof *a->weight);   /* a shorter side's row ends in unused 0s */
    a->damage = calloc((size_t)a->G * C, sizeof *a->damage);
    a->group_choices = malloc((size_t)a->G * sizeof *a->group_choices);
    if (!a->weight || !a->damage || !a->group_choices) return error_set(err, "out of memory");
    for (int g = 0; g < a->G; g++) {
        int side = g / L, layer = g % L;
        a->group_choices[g] = a->n_cand[side];
        for (int c = 0; c < a->n_cand[side]; c++) {
            BitsFraction b = a->bits[side][c];
            long long w = times(b.num, a->D / b.den);
            if (w < 0) return error_set(err, "the candidates' bits overflow over their common denominator");
            a->weight[(size_t)g * C + c] = w;
            a->damage[(size_t)g * C + c] = a->d.kl[sens_config_index(&a->d.g, side, layer, a->idx[side][c])];
        }
    }
    a->k = (Knapsack){a->G, C, a->weight, a->damage, 0, a->group_choices};
    return 0;
}

/* floor(G x D x budget): the most the summed weights may be. */
static int capacity_of(const Alloc *a, BitsFraction budget, long long *cap, Error *err) {
    long long x = times(a->G, a->D), hi = x < 0 ? -1 : times(x / budget.den, budget.num);
    long long lo = x < 0 ? -1 : times(x % budget.den, budget.num);
    if (hi < 0 || lo < 0 || hi > LLONG_MAX - lo / budget.den)
        return error_set(err, "--budget: the bits' common denominator %lld is too fine for this budget", a->D);
    *cap = hi + lo / budget.den;
    return 0;
}

/* The lightest candidate of side (the lower index on ties): every layer weighs it alike. */
static int lightest(const Alloc *a, int side) {
    const long long *w = a->weight + (size_t)side * a->d.g.n_layers * a->C;
    int best = 0;
    for (int c = 1; c < a->n_cand[side]; c++)
        if (w[c] < w[best]) best = c;
    return best;
}

/* The cheapest allocation, the lightest candidate in every layer of each side, in words and its
 * mean bits, for the refusal of a budget below it. */
static void cheapest(const Alloc *a, double *bits, char *what, size_t n) {
    int k = lightest(a, SENS_KEYS), v = lightest(a, SENS_VALUES), L = a->d.g.n_layers;
    const char *kn = a->names[SENS_KEYS][k], *vn = a->names[SENS_VALUES][v];
    if (!strcmp(kn, vn)) snprintf(what, n, "%s in every layer's keys and values", kn);
    else snprintf(what, n, "%s in every layer's keys, %s in its values", kn, vn);
    *bits = (double)(L * (a->weight[k] + a->weight[(size_t)L * a->C + v])) / ((double)a->G * a->D);
}

static int solve_budgets(Alloc *a, Error *err) {
    int L = a->d.g.n_layers;
    for (int b = 0; b < a->o->n_budgets; b++) {
        Knapsack k = a->k;
        if (capacity_of(a, a->o->budgets[b], &k.capacity, err)) return -1;
        if (!(a->choice[b] = malloc((size_t)a->G * sizeof *a->choice[b]))) return error_set(err, "out of memory");
        if (knapsack_solve(&k, a->choice[b], &a->result[b], err)) return -1;
        if (!a->result[b].feasible) {
            double bits;
            char what[2 * SENS_SPEC_LEN + 64];
            cheapest(a, &bits, what, sizeof what);
            return error_set(err, "--budget %s: below the cheapest allocation, %.6g bits a value (%s)",
                             a->o->budget_texts[b], bits, what);
        }
        if (alloc_layered_text(a->choice[b], L, (const char (*)[SENS_SPEC_LEN])a->names[SENS_KEYS], a->k_scheme[b],
                               sizeof a->k_scheme[b], err) ||
            alloc_layered_text(a->choice[b] + L, L, (const char (*)[SENS_SPEC_LEN])a->names[SENS_VALUES], a->v_scheme[b],
                               sizeof a->v_scheme[b], err))
            return -1;
    }
    return 0;
}

/* The model given is the one the sensitivity measured: the same geometry and model.safetensors. */
static int check_model(const Alloc *a, Error *err) {
    char path[4200], sha[65];
    Config c;
    if (!path_exists(a->o->model_dir)) return error_set(err, "%s: no such model directory", a->o->model_dir);
    snprintf(path, sizeof path, "%s/config.json", a->o->model_dir);
    if (config_load(&c, path, err)) return -1;
    if (c.n_layers != a->d.g.n_layers || c.head_dim != a->d.head_dim)
        return error_set(err, "%s: %d layers of head_dim %d, but %s/sensitivity.json measured %d of %d", path,
                         c.n_layers, c.head_dim, a->o->from, a->d.g.n_layers, a->d.head_dim);
    if (modeldir_sha256(a->o->model_dir, sha, err)) return -1;
    if (strcmp(sha, a->d.model_sha256))
        return error_set(err, "%s/model.safetensors (sha256 %s) is not the model %s/sensitivity.json measured (%s, %s)",
                         a->o->model_dir, sha, a->o->from, a->d.model_sha256, a->d.model);
    return 0;
}

static void alloc_free(Alloc *a) {
    sens_data_free(&a->d);
    free(a->weight);
    free(a->damage);
    free(a->group_choices);
    for (int b = 0; b < ALLOC_MAX_BUDGETS; b++) free(a->choice[b]);
    memset(a, 0, sizeof *a);
}

/* ---- --verify: a sweep on held-out windows ---- */

/* The uniform configurations: key and value candidates paired by their place in the lists. */
static int uniform_count(const Alloc *a) { return a->n_cand[0] < a->n_cand[1] ? a->n_cand[0] : a->n_cand[1]; }

/* 1 when uniform configuration c (key candidate c in every layer, value candidate c) fits budget. */
static int uniform_fits(const Alloc *a, int c, BitsFraction budget) {
    /* the mean of the two sides' bits, (k + v) / 2D <= num / den, in whole numbers */
    long long sum = a->weight[c] + a->weight[(size_t)a->d.g.n_layers * a->C + c];
    long long lhs = times(sum, budget.den), rhs = times(2 * budget.num, a->D);
    if (lhs < 0 || rhs < 0) return (double)sum * budget.den <= 2.0 * (double)budget.num * a->D;   /* beyond 2^63 */
    return lhs <= rhs;
}

static int find_config(const SweepSettings *s, const char *k, const char *v) {
    for (int i = 0; i < s->n_configs; i++)
        if (!strcmp(s->configs[i].k_text, k) && !strcmp(s->configs[i].v_text, v)) return i;
    return -1;
}

/* The index of configuration K:V in s, added when it is not there yet. */
static int config_of(SweepSettings *s, const char *k, const char *v, int *at, Error *err) {
    char text[1100];
    if ((*at = find_config(s, k, v)) >= 0) return 0;
    snprintf(text, sizeof text, "%s:%s", k, v);
    if (sweep_add_config(s, text, err)) return -1;
    *at = s->n_configs - 1;
    return 0;
}

/* The verification's configurations: every budget's allocation, then every uniform configuration
 * whose bits fit the largest budget. */
static int verify_configs(Alloc *a, Verify *v, SweepSettings *s, Error *err) {
    BitsFraction most = a->o->budgets[0];
    for (int b = 0; b < a->o->n_budgets; b++) {
        BitsFraction x = a->o->budgets[b];
        if ((double)x.num / x.den > (double)most.num / most.den) most = x;
        if (config_of(s, a->k_scheme[b], a->v_scheme[b], &v->cfg_alloc[b], err)) return -1;
    }
    for (int c = 0; c < uniform_count(a); c++) {
        if (!uniform_fits(a, c, most)) continue;
        v->uniform[v->n_uniform] = c;
        for (int b = 0; b < a->o->n_budgets; b++) v->fits[b][v->n_uniform] = uniform_fits(a, c, a->o->budgets[b]);
        if (config_of(s, a->names[SENS_KEYS][c], a->names[SENS_VALUES][c], &v->cfg_uniform[v->n_uniform], err)) return -1;
        v->n_uniform++;
    }
    return 0;
}

/* The sensitivity's calibration is the one the check uses (a fitted candidate's tables). */
static int check_calibration(const Alloc *a, const SweepSettings *s, Error *err) {
    if (!sweep_needs_calibration(s)) return 0;
    char path[4200], sha[65];
    if (a->o->calib_path) snprintf(path, sizeof path, "%s", a->o->calib_path);
    else snprintf(path, sizeof path, "%s/%s", a->o->model_dir, DEFAULT_CALIBRATION);
    if (!path_exists(path)) return 0;   /* the sweep refuses a fitted base without one, naming the fix */
    if (sha256_file_hex(path, sha, err)) return -1;
    if (strcmp(sha, a->d.calib_sha256))
        return error_set(err, "%s (sha256 %s) is not the calibration %s/sensitivity.json used (%s): "
                              "give that one with --calib", path, sha, a->o->from,
                         a->d.calib_sha256[0] ? a->d.calib_sha256 : "none");
    return 0;
}

static int verify_finish(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                         void *user, Error *err) {
    Verify *v = user;
    v->s = s;
    v->t = t;
    if (sweep_write_outputs(out_dir, s, t, err) || alloc_write_report(out_dir, v->a, v, err)) return -1;
    alloc_print(out, v->a, v, json);
    return 0;
}

static int run_verify(Alloc *a, FILE *out, FILE *log, Error *err) {
    const AllocateOptions *o = a->o;
    Verify v = {.a = a};
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return error_set(err, "out of memory");
    s.ppl = (PplOptions){.protocol = strcmp(a->d.protocol, "llamacpp") ? PPL_HF : PPL_LLAMACPP, .ctx = a->d.ctx,
                         .stride = a->d.stride, .max_windows = o->windows, .shard_index = 0, .shard_count = 1,
                         .batch = o->batch};
    snprintf(s.model, sizeof s.model, "%s", o->model_dir);
    snprintf(s.text_file, sizeof s.text_file, "%s", o->text_file);
    snprintf(s.precision, sizeof s.precision, "%s", a->d.precision);
    snprintf(s.calib_path, sizeof s.calib_path, "%s", o->calib_path ? o->calib_path : "");
    int rc = verify_configs(a, &v, &s, err) || check_calibration(a, &s, err) ? -1 : 0;
    char plan[300];
    snprintf(plan, sizeof plan, "allocate: checking %d allocation(s) and %d uniform candidate(s) on %s: %d forward passes "
             "a window", o->n_budgets, v.n_uniform, o->text_file, s.n_configs + 1);
    SweepDriver d = {"allocate", plan, verify_finish, &v};
    SweepRun run = {o->out_dir, o->max_tokens, o->quiet, o->json, out, log};
    if (!rc) rc = sweep_run_and_report_as(&d, &s, &run, err);
    free(s.configs);
    return rc;
}

int allocate_run(const AllocateOptions *o, FILE *out, FILE *log, Error *err) {
    Alloc a;
    memset(&a, 0, sizeof a);
    a.o = o;
    if (sens_read(o->from, &a.d, err)) return -1;
    int rc = check_model(&a, err) || select_candidates(&a, err) || candidate_bits(&a, err) || build_knapsack(&a, err) ||
             solve_budgets(&a, err) ? -1 : 0;
    if (!rc && o->verify) rc = run_verify(&a, out, log, err);
    else if (!rc) alloc_print(out, &a, NULL, o->json);
    alloc_free(&a);
    return rc;
}
