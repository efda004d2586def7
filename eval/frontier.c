/* eval/frontier.c: ./run frontier (eval/frontier.h): the candidates (a configs file and
 * allocation.json files), the two sweeps (valid, test) run through eval/sweep.h, and the choice
 * per budget. The report's files are written by eval/frontier_report.c. */
#include "eval/frontier.h"
#include "eval/frontier_report.h"
#include "eval/sweep.h"
#include "model/config.h"
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include "model/formats/sha256.h"
#include "model/modeldir.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Effective bits are sums of fractions computed in doubles: a candidate at exactly the budget
 * (2.25 within 2.25) must count as within it. */
#define BITS_SLACK 1e-9

static double fraction_value(BitsFraction b) { return (double)b.num / (double)b.den; }

/* The budget of o equal to the fraction num/den, or -1. */
static int budget_index(const FrontierOptions *o, long long num, long long den) {
    for (int b = 0; b < o->n_budgets; b++)
        if (o->budgets[b].num * den == num * o->budgets[b].den) return b;
    return -1;
}

/* One allocation of an allocation.json: its members checked (a tampered file is refused, not
 * half read), and when its budget is one asked for, its k_scheme:v_scheme added to s. */
static int add_allocation(const FrontierOptions *o, const char *path, const JsonValue *item, int number,
                          SweepSettings *s, FrontierCandidates *c, Error *err) {
    const JsonValue *frac = json_get(item, "budget_fraction");
    double budget = json_number(item, "budget"), bits = json_number(item, "bits");
    const char *k = json_string(item, "k_scheme"), *v = json_string(item, "v_scheme");
    int fraction_ok = frac && frac->type == JSON_ARRAY && frac->count == 2 && frac->items[0].is_uint &&
                      frac->items[1].is_uint && frac->items[1].uint_value > 0 && frac->items[0].uint_value < 1000000000 &&
                      frac->items[1].uint_value < 1000000000;
    long long num = fraction_ok ? (long long)frac->items[0].uint_value : 0;
    long long den = fraction_ok ? (long long)frac->items[1].uint_value : 1;
    if (item->type != JSON_OBJECT || !fraction_ok || !isfinite(budget) || budget <= 0 ||
        fabs(budget - (double)num / (double)den) > 1e-12 * budget)
        return error_set(err, "%s: allocation %d: \"budget\" and \"budget_fraction\" missing or disagreeing", path, number);
    if (!isfinite(bits) || bits <= 0 || bits > budget + BITS_SLACK)
        return error_set(err, "%s: allocation %d: \"bits\" missing or above its budget %g", path, number, budget);
    if (!k || !v || !k[0] || !v[0] || strlen(k) > 500 || strlen(v) > 500)
        return error_set(err, "%s: allocation %d: \"k_scheme\" or \"v_scheme\" missing", path, number);
    int b = budget_index(o, num, den);
    if (b < 0) return 0;   /* a budget not asked for: not a candidate */
    char text[1100];
    snprintf(text, sizeof text, "%s:%s", k, v);
    if (sweep_add_config(s, text, err)) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return error_set(err, "%s: allocation at %s bits: %s", path, o->budget_texts[b], why);
    }
    FrontierOrigin *origin = &c->origins[s->n_configs - 1];
    snprintf(origin->source, sizeof origin->source, "allocation %s bits", o->budget_texts[b]);
    snprintf(origin->file, sizeof origin->file, "%s", path);
    origin->claimed_bits = bits;
    return 0;
}

/* An allocation.json: this model's (model_sha256), its allocations added (add_allocation). */
static int add_allocation_file(const FrontierOptions *o, const char *path, const char *weights_sha256,
                               SweepSettings *s, FrontierCandidates *c, Error *err) {
    size_t len;
    char *text = read_whole_file(path, 1 << 24, &len, err);
    if (!text) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return error_set(err, "--allocations %.300s", why);
    }
    Error parse;
    JsonValue *root = json_parse(text, len, &parse);
    free(text);
    if (!root) return error_set(err, "%s: not an allocation.json (%.200s)", path, parse.msg);
    int rc = 0;
    const char *sha = json_string(root, "model_sha256");
    const JsonValue *list = json_get(root, "allocations");
    if (root->type != JSON_OBJECT || !sha || !sha256_hex_valid(sha))
        rc = error_set(err, "%s: \"model_sha256\" is not 64 lowercase hex digits", path);
    else if (strcmp(sha, weights_sha256))
        rc = error_set(err, "%s is another model's allocation (model_sha256 %s; %s/model.safetensors is %s)", path, sha,
                       o->model_dir, weights_sha256);
    else if (!list || list->type != JSON_ARRAY)
        rc = error_set(err, "%s: no \"allocations\" array", path);
    for (size_t i = 0; !rc && i < list->count; i++)
        rc = add_allocation(o, path, &list->items[i], (int)i + 1, s, c, err);
    json_free(root);
    return rc;
}

int frontier_candidates(const FrontierOptions *o, const char *weights_sha256, SweepSettings *s, FrontierCandidates *c,
                        Error *err) {
    s->n_configs = 0;
    if (sweep_add_config_file(s, o->configs_file, err)) return -1;
    for (int i = 0; i < s->n_configs; i++) snprintf(c->origins[i].source, sizeof c->origins[i].source, "configs");
    c->from_configs = s->n_configs;
    for (int f = 0; f < o->n_allocations; f++)
        if (add_allocation_file(o, o->allocations[f], weights_sha256, s, c, err)) return -1;
    c->n = s->n_configs;
    return 0;
}

/* Each allocation's configuration, bound to the model at the run's ctx, has the bits its file
 * says (an allocation made at the same ctx): a scheme edited in the file is refused here. */
static int check_allocation_bits(const FrontierOptions *o, SweepSettings *s, const FrontierCandidates *c, Error *err) {
    char path[4200];
    Config cfg;
    snprintf(path, sizeof path, "%s/config.json", o->model_dir);
    if (config_load(&cfg, path, err)) return -1;
    int ctx = o->ppl.ctx > 0 ? o->ppl.ctx : cfg.max_seq_len;
    if (sweep_bind_configs(s, &cfg, ctx, err)) return -1;
    for (int i = c->from_configs; i < c->n; i++) {
        double eff = 0.5 * (s->configs[i].k_bits[1] + s->configs[i].v_bits[1]);
        if (fabs(eff - c->origins[i].claimed_bits) > 1e-6)
            return error_set(err, "%s: the %s's schemes make %.6g bits at ctx %d, the file says %.6g (made at another "
                                  "ctx, or edited)", c->origins[i].file, c->origins[i].source, eff, ctx,
                             c->origins[i].claimed_bits);
    }
    return 0;
}

/* --- the two sweeps ----------------------------------------------------------------------------- */

/* The sweep's own finish: its files in its directory, and its figures kept for the report. */
static int keep_split(FILE *out, const char *dir, const SweepSettings *s, const SweepTotals *t, int json, void *user,
                      Error *err) {
    (void)out, (void)json;
    FrontierSplit *sp = user;
    if (sweep_write_outputs(dir, s, t, err)) return -1;
    sp->n = s->n_configs;
    sp->rows = calloc((size_t)sp->n + 1, sizeof *sp->rows);
    if (!sp->rows) return error_set(err, "out of memory");
    for (int i = 0; i < s->n_configs; i++) {
        const SweepConfig *c = &s->configs[i];
        FrontierRow *r = &sp->rows[i];
        snprintf(r->k_text, sizeof r->k_text, "%s", c->k_text);
        snprintf(r->v_text, sizeof r->v_text, "%s", c->v_text);
        r->y = token_sums_summarize(&t->sums[i]);
        r->stored_bits = 0.5 * (c->k_bits[0] + c->v_bits[0]);
        r->effective_bits = 0.5 * (c->k_bits[1] + c->v_bits[1]);
        r->entropy_bits = token_sums_entropy_bits(&t->sums[i], -1);
        r->codebook_bytes = c->codebook_bytes;
    }
    snprintf(sp->dir, sizeof sp->dir, "%s", dir);
    snprintf(sp->text_file, sizeof sp->text_file, "%s", s->text_file);
    snprintf(sp->model_id, sizeof sp->model_id, "%s", s->model_id);
    snprintf(sp->calib_sha256, sizeof sp->calib_sha256, "%s", s->calib_sha256);
    sp->ctx = s->ppl.ctx, sp->stride = s->ppl.stride, sp->protocol = s->ppl.protocol;
    sp->windows = t->windows, sp->n_tokens = s->n_tokens;
    sp->scored = sp->n > 0 ? sp->rows[0].y.n : 0;
    sp->baseline_ppl = sp->n > 0 ? sp->rows[0].y.base_ppl : NAN;
    return 0;
}

static int run_split(const FrontierOptions *o, const char *weights_sha256, const char *text, const char *name,
                     FrontierCandidates *c, FrontierSplit *sp, FILE *log, Error *err) {
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    if (!s.configs) return error_set(err, "out of memory");
    char dir[4200], label[64];
    snprintf(dir, sizeof dir, "%s/%s", o->out_dir, name);
    snprintf(label, sizeof label, "frontier %s", name);
    int rc = frontier_candidates(o, weights_sha256, &s, c, err);
    if (!rc) {
        s.ppl = o->ppl;
        snprintf(s.model, sizeof s.model, "%s", o->model_dir);
        snprintf(s.text_file, sizeof s.text_file, "%s", text);
        snprintf(s.precision, sizeof s.precision, "%s", o->precision);
        snprintf(s.calib_path, sizeof s.calib_path, "%s", o->calib_path ? o->calib_path : "");
        SweepDriver d = {label, NULL, keep_split, sp};
        SweepRun run = {dir, o->max_tokens, o->quiet, 0, log, log};
        rc = sweep_run_and_report_as(&d, &s, &run, err);
    }
    free(s.configs);
    return rc;
}

/* --- the choice ---------------------------------------------------------------------------------- */

int frontier_choose(const FrontierSplit *valid, BitsFraction budget) {
    double limit = fraction_value(budget) + BITS_SLACK;
    int best = -1;
    for (int i = 0; i < valid->n; i++) {
        double kl = valid->rows[i].y.kl_mean;
        if (valid->rows[i].effective_bits <= limit && isfinite(kl) && (best < 0 || kl < valid->rows[best].y.kl_mean))
            best = i;
    }
    return best;
}

/* The two sweeps measured the same candidates of the same model with the same tables. */
static int check_splits(const FrontierSplit *v, const FrontierSplit *t, Error *err) {
    if (v->n != t->n || strcmp(v->model_id, t->model_id) || strcmp(v->calib_sha256, t->calib_sha256))
        return error_set(err, "%s and %s do not hold the same candidates of one model and calibration", v->dir, t->dir);
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->rows[i].k_text, t->rows[i].k_text) || strcmp(v->rows[i].v_text, t->rows[i].v_text))
            return error_set(err, "%s and %s differ at configuration %d", v->dir, t->dir, i + 1);
    return 0;
}

static int check_inputs(const FrontierOptions *o, char weights_sha256[65], Error *err) {
    if (!strcmp(o->valid_text, o->test_text))
        return error_set(err, "--valid-text and --text-file are both %s: the choice would not be held out", o->test_text);
    if (modeldir_sha256(o->model_dir, weights_sha256, err)) return -1;
    SweepSettings s = {.configs = calloc(SWEEP_MAX_CONFIGS, sizeof(SweepConfig))};
    FrontierCandidates c = {.origins = calloc(SWEEP_MAX_CONFIGS, sizeof(FrontierOrigin))};
    int rc = !s.configs || !c.origins ? error_set(err, "out of memory") : 0;
    if (!rc) rc = frontier_candidates(o, weights_sha256, &s, &c, err) || check_allocation_bits(o, &s, &c, err);
    free(s.configs);
    free(c.origins);
    return rc;
}

int frontier_run(const FrontierOptions *o, FILE *out, FILE *log, Error *err) {
    char weights_sha256[65];
    if (check_inputs(o, weights_sha256, err) || make_directory(o->out_dir, err)) return -1;
    FrontierSplit valid = {0}, test = {0};
    FrontierCandidates c = {.origins = calloc(SWEEP_MAX_CONFIGS, sizeof(FrontierOrigin))};
    int rc = c.origins ? 0 : error_set(err, "out of memory");
    if (!rc) rc = run_split(o, weights_sha256, o->valid_text, "valid", &c, &valid, log, err);
    if (!rc) rc = run_split(o, weights_sha256, o->test_text, "test", &c, &test, log, err);
    if (!rc) rc = check_splits(&valid, &test, err);
    FrontierReport r = {o, &c, &valid, &test, {0}};
    for (int b = 0; !rc && b < o->n_budgets; b++) r.chosen[b] = frontier_choose(&valid, o->budgets[b]);
    if (!rc) rc = frontier_write_report(&r, err);
    if (!rc) frontier_print(out, &r, o->json);
    free(valid.rows);
    free(test.rows);
    free(c.origins);
    return rc;
}
