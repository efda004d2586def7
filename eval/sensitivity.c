/* eval/sensitivity.c: the sensitivity's grid of configurations, generated into a sweep and
 * recognised in one; the run; sensitivity.json read back for ./run allocate (see
 * eval/sensitivity.h). The report's files are written by eval/sensitivity_report.c. */
#include "eval/sensitivity.h"
#include "eval/sensitivity_report.h"
#include "model/config.h"
#include "model/formats/checked_json.h"
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include "model/formats/sha256.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the grid ---- */

static const char *const SIDE_FLAGS[3] = {"--k-candidates", "--v-candidates", "--candidates"};

/* One candidate of a list: trimmed, one SPEC valid for the side (both sides: side 2), in its
 * canonical spelling, appended to each of those sides' lists. Errors begin with the flag. */
static int add_candidate(SensGrid *g, int side, const char *text, size_t len, Error *err) {
    const char *flag = SIDE_FLAGS[side];
    while (len > 0 && (*text == ' ' || *text == '\t')) text++, len--;
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t')) len--;
    char spec_text[SENS_SPEC_LEN], why[160];
    if (len == 0) return error_set(err, "%s: an empty candidate (give SPEC,SPEC,...)", flag);
    if (len >= sizeof spec_text) return error_set(err, "%s: '%.40s...' is too long", flag, text);
    memcpy(spec_text, text, len);
    spec_text[len] = 0;
    if (strpbrk(spec_text, ";:"))
        return error_set(err, "%s: '%s' is a per-layer value; a candidate is one SPEC (the layers are the grid)", flag,
                         spec_text);
    KvSpec spec;
    for (int s = SENS_KEYS; s <= SENS_VALUES; s++) {
        if (side != 2 && side != s) continue;
        if (kv_spec_parse(spec_text, s == SENS_KEYS ? KV_SIDE_KEYS : KV_SIDE_VALUES, &spec, why, sizeof why))
            return error_set(err, "%s: '%s': %s", flag, spec_text, why);
        for (int c = 0; c < g->n_candidates[s]; c++)
            if (!strcmp(g->candidates[s][c], spec.text))
                return error_set(err, "%s: '%s' is given twice (as %s)", flag, spec_text, spec.text);
        if (g->n_candidates[s] == SENS_MAX_CANDIDATES) return error_set(err, "%s: more than %d", flag, SENS_MAX_CANDIDATES);
        snprintf(g->candidates[s][g->n_candidates[s]++], SENS_SPEC_LEN, "%s", spec.text);
    }
    return 0;
}

/* The list into side's candidates (side 2: both sides'), replacing what they held. */
static int parse_list(const char *list, int side, SensGrid *g, Error *err) {
    for (int s = SENS_KEYS; s <= SENS_VALUES; s++)
        if (side == 2 || side == s) g->n_candidates[s] = 0;
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        if (add_candidate(g, side, p, len, err)) return -1;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

int sens_parse_candidates(const char *list, SensGrid *g, Error *err) { return parse_list(list, 2, g, err); }

int sens_parse_side_candidates(const char *list, SensSide side, SensGrid *g, Error *err) {
    return parse_list(list, side, g, err);
}

/* The keys' and values' schemes of one cell: the side's candidate at one layer. */
static void cell_texts(const SensGrid *g, int side, int layer, int candidate, char *k, char *v, size_t n) {
    char one[SENS_SPEC_LEN + 32];
    snprintf(one, sizeof one, "fp32;%d:%s", layer, g->candidates[side][candidate]);
    snprintf(k, n, "%s", side == SENS_KEYS ? one : "fp32");
    snprintf(v, n, "%s", side == SENS_VALUES ? one : "fp32");
}

int sens_add_configs(SweepSettings *s, const SensGrid *g, Error *err) {
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < g->n_layers; layer++)
            for (int c = 0; c < g->n_candidates[side]; c++) {
                char k[256], v[256], text[520];
                cell_texts(g, side, layer, c, k, v, sizeof k);
                snprintf(text, sizeof text, "%s:%s", k, v);   /* K:V, split where V begins (sweep_add_config) */
                if (sweep_add_config(s, text, err)) return -1;
            }
    return 0;
}

/* The candidates of side's layer 0 from configuration `from` on: the run of configurations whose
 * scheme on that side is "fp32;0:SPEC" and on the other "fp32". Their count into g. */
static void layer0_candidates(const SweepSettings *s, int from, int side, SensGrid *g) {
    static const char first[] = "fp32;0:";
    int C = 0;
    for (int i = from; i < s->n_configs && C < SENS_MAX_CANDIDATES; i++, C++) {
        const char *mine = side == SENS_KEYS ? s->configs[i].k_text : s->configs[i].v_text;
        const char *other = side == SENS_KEYS ? s->configs[i].v_text : s->configs[i].k_text;
        if (strncmp(mine, first, strlen(first)) || strcmp(other, "fp32") || strlen(mine + strlen(first)) >= SENS_SPEC_LEN)
            break;
        snprintf(g->candidates[side][C], SENS_SPEC_LEN, "%s", mine + strlen(first));
    }
    g->n_candidates[side] = C;
}

int sens_grid_of(const SweepSettings *s, SensGrid *g) {
    memset(g, 0, sizeof *g);
    layer0_candidates(s, 0, SENS_KEYS, g);
    int CK = g->n_candidates[SENS_KEYS], at = CK;   /* the values' first cell: after every layer's keys */
    if (CK == 0) return 0;
    while (at < s->n_configs && strcmp(s->configs[at].k_text, "fp32")) at += CK;
    if (at >= s->n_configs || at % CK) return 0;
    g->n_layers = at / CK;
    layer0_candidates(s, at, SENS_VALUES, g);
    if (g->n_candidates[SENS_VALUES] == 0 || s->n_configs != sens_cell_count(g)) return 0;
    for (int side = 0; side < 2; side++)
        for (int layer = 0; layer < g->n_layers; layer++)
            for (int c = 0; c < g->n_candidates[side]; c++) {
                char k[256], v[256];
                const SweepConfig *sc = &s->configs[sens_config_index(g, side, layer, c)];
                cell_texts(g, side, layer, c, k, v, sizeof k);
                if (strcmp(sc->k_text, k) || strcmp(sc->v_text, v)) return 0;
            }
    return 1;
}

/* ---- the run ---- */

/* Each candidate against the model: a scheme its layers cannot hold is named here, as a
 * candidate, rather than as one of the generated configurations. */
static int check_candidates(const SensGrid *g, const Config *c, Error *err) {
    for (int side = SENS_KEYS; side <= SENS_VALUES; side++)
        for (int i = 0; i < g->n_candidates[side]; i++) {
            KvLayered l;
            char why[200];
            KvSide kv = side == SENS_KEYS ? KV_SIDE_KEYS : KV_SIDE_VALUES;
            if (kv_layered_parse(g->candidates[side][i], kv, &l, why, sizeof why) ||
                kv_layered_bind(&l, c->n_layers, c->head_dim, kv, why, sizeof why))
                return error_set(err, "%s: '%s' on this model (head_dim %d): %s",
                                 sens_same_candidates(g) ? SIDE_FLAGS[2] : SIDE_FLAGS[side], g->candidates[side][i],
                                 c->head_dim, why);
        }
    return 0;
}

static int finish(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json, void *user,
                  Error *err) {
    return sens_finish_report(out, out_dir, s, t, user, json, err);
}

int sensitivity_run_and_report(SweepSettings *s, SensGrid *g, const SweepRun *run, Error *err) {
    char path[4200];
    Config c;
    if (!path_exists(s->model)) return error_set(err, "%s: no such model directory", s->model);
    snprintf(path, sizeof path, "%s/config.json", s->model);
    if (config_load(&c, path, err) || check_candidates(g, &c, err)) return -1;
    g->n_layers = c.n_layers;
    int CK = g->n_candidates[SENS_KEYS], CV = g->n_candidates[SENS_VALUES];
    long n = (long)g->n_layers * (CK + CV);
    char shape[80];
    if (sens_same_candidates(g)) snprintf(shape, sizeof shape, "%d layers x 2 sides x %d candidates", g->n_layers, CK);
    else snprintf(shape, sizeof shape, "%d layers x (%d key + %d value candidates)", g->n_layers, CK, CV);
    if (n > SWEEP_MAX_CONFIGS)
        return error_set(err, "%s = %ld configurations, more than a sweep holds (%d): give fewer candidates", shape, n,
                         SWEEP_MAX_CONFIGS);
    if (sens_add_configs(s, g, err)) return -1;
    char plan[240];
    snprintf(plan, sizeof plan, "sensitivity: %s = %ld configurations: %ld forward passes a window (the fp32 baseline "
             "once)", shape, n, n + 1);
    SweepDriver d = {"sensitivity", plan, finish, g};
    return sweep_run_and_report_as(&d, s, run, err);
}

static int sens_or_sweep_finish(FILE *out, const char *out_dir, const SweepSettings *s, const SweepTotals *t, int json,
                                Error *err) {
    SensGrid g;
    if (sens_grid_of(s, &g)) return sens_finish_report(out, out_dir, s, t, &g, json, err);
    return sweep_finish(out, out_dir, s, t, json, err);
}

int sweep_merge_run(char *const *dirs, int n, const char *out_dir, FILE *out, int json, Error *err) {
    SweepSettings s;
    SweepTotals t = {0};
    int rc = sweep_merge(dirs, n, &s, &t, err);
    if (rc == 0) {
        RunLock lock = {.fd = -1};
        rc = sweep_merge_claim_out_dir(out_dir, &lock, err) || sens_or_sweep_finish(out, out_dir, &s, &t, json, err) ? -1 : 0;
        run_lock_release(&lock);
        free(s.configs);
    }
    sweep_totals_free(&t);
    return rc;
}

/* ---- sensitivity.json, read back ---- */

static int copy_string(const JsonValue *j, const char *key, char *out, size_t n, const char *path, Error *err) {
    const char *s = json_string(j, key);
    if (!s || strlen(s) >= n) return error_set(err, "%s: \"%s\" missing or too long", path, key);
    snprintf(out, n, "%s", s);
    return 0;
}

static int int_member(const JsonValue *j, const char *key, long long lo, long long hi, long long *out, const char *path,
                      Error *err) {
    if (json_integer(j, key, lo, hi, out)) return error_set(err, "%s: \"%s\" missing or out of range", path, key);
    return 0;
}

static int read_header(const JsonValue *j, SensData *d, const char *path, Error *err) {
    long long ctx, stride, head_dim, windows, windows_total, scored, layers;
    if (copy_string(j, "model", d->model, sizeof d->model, path, err) ||
        copy_string(j, "model_sha256", d->model_sha256, sizeof d->model_sha256, path, err) ||
        copy_string(j, "text_file", d->text_file, sizeof d->text_file, path, err) ||
        copy_string(j, "calib_sha256", d->calib_sha256, sizeof d->calib_sha256, path, err) ||
        copy_string(j, "precision", d->precision, sizeof d->precision, path, err) ||
        copy_string(j, "protocol", d->protocol, sizeof d->protocol, path, err) ||
        int_member(j, "ctx", 2, 1 << 24, &ctx, path, err) || int_member(j, "stride", 0, 1 << 24, &stride, path, err) ||
        int_member(j, "head_dim", 1, 1 << 16, &head_dim, path, err) ||
        int_member(j, "n_layers", 1, SWEEP_MAX_CONFIGS, &layers, path, err) ||
        int_member(j, "windows", 1, 1 << 30, &windows, path, err) ||
        int_member(j, "windows_total", 1, 1 << 30, &windows_total, path, err) ||
        int_member(j, "scored_tokens", 1, 1LL << 40, &scored, path, err) ||
        calib_held_out_read(j, d->calib_text_sha256, &d->calib_held_out, path, err))
        return -1;
    if (!sha256_hex_valid(d->model_sha256))
        return error_set(err, "%s: \"model_sha256\" is not 64 lowercase hex digits", path);
    if (d->calib_sha256[0] && !sha256_hex_valid(d->calib_sha256))
        return error_set(err, "%s: \"calib_sha256\" is neither empty nor 64 lowercase hex digits", path);
    d->ctx = (int)ctx, d->stride = (int)stride, d->head_dim = (int)head_dim, d->g.n_layers = (int)layers;
    d->windows = (int)windows, d->windows_total = (int)windows_total, d->scored = (long)scored;
    d->baseline_ppl = json_number(j, "baseline_ppl");
    return 0;
}

/* One list of candidates, key, into side's list (side 2: both sides', version 1 and 2's "candidates"). */
static int read_candidate_list(const JsonValue *j, const char *key, int side, SensData *d, const char *path, Error *err) {
    const JsonValue *a = json_get(j, key);
    if (!a || a->type != JSON_ARRAY || a->count < 1 || a->count > SENS_MAX_CANDIDATES)
        return error_set(err, "%s: \"%s\" is not a list of 1 to %d", path, key, SENS_MAX_CANDIDATES);
    for (size_t i = 0; i < a->count; i++) {
        const char *spec = json_string(&a->items[i], "spec");
        if (!spec) return error_set(err, "%s: %s %zu has no \"spec\"", path, key, i);
        if (add_candidate(&d->g, side, spec, strlen(spec), err)) {   /* its message is about a flag: name the file */
            char why[sizeof err->msg];
            const char *flag = SIDE_FLAGS[side];
            size_t n = strlen(flag);
            snprintf(why, sizeof why, "%s", strncmp(err->msg, flag, n) || err->msg[n] != ':' ? err->msg : err->msg + n + 2);
            return error_set(err, "%s: %s %zu: %s", path, side == 2 ? "candidate" : key, i, why);
        }
        for (int s = SENS_KEYS; s <= SENS_VALUES; s++)
            if ((side == 2 || side == s) && strcmp(d->g.candidates[s][i], spec))
                return error_set(err, "%s: candidate '%s' is not in its canonical spelling", path, spec);
    }
    return 0;
}

static int read_candidates(const JsonValue *j, int version, SensData *d, const char *path, Error *err) {
    if (version < 3) return read_candidate_list(j, "candidates", 2, d, path, err);
    return read_candidate_list(j, "k_candidates", SENS_KEYS, d, path, err) ||
           read_candidate_list(j, "v_candidates", SENS_VALUES, d, path, err) ? -1 : 0;
}

/* One cell's KL figures: in range, and the mean its own sum over its tokens (a digit changed in
 * either is noticed in a file without a checksum too). */
static int check_cell_kl(const JsonValue *x, const char *path, const char *side, long long layer, const char *cand,
                         Error *err) {
    double kl = json_number(x, "kl_mean"), se = json_number(x, "kl_stderr"), sum = json_number(x, "kl_sum");
    long long n;
    char cell[160];
    snprintf(cell, sizeof cell, "cell %s layer %lld %s", side, layer, cand);
    if (!isfinite(kl)) return error_set(err, "%s: %s: kl_mean is not a number", path, cell);
    if (kl < 0 || kl > SENS_KL_ABSURD)
        return error_set(err, "%s: %s: kl_mean %g is outside [0, %g] nats a token: damaged or edited", path, cell, kl,
                         SENS_KL_ABSURD);
    if (se < 0 || isinf(se))   /* null (NaN: a cell of one token has none) is kept as it is */
        return error_set(err, "%s: %s: kl_stderr %g is negative or infinite: damaged or edited", path, cell, se);
    if (json_integer(x, "scored_tokens", 1, 1LL << 40, &n) || !isfinite(sum))
        return error_set(err, "%s: %s: scored_tokens or kl_sum missing or out of range", path, cell);
    if (kl != sum / (double)n)
        return error_set(err, "%s: %s: kl_mean %.17g is not its kl_sum / scored_tokens (%.17g): damaged or edited", path,
                         cell, kl, sum / (double)n);
    return 0;
}

static int read_cells(const JsonValue *j, SensData *d, const char *path, Error *err) {
    const SensGrid *g = &d->g;
    size_t n = (size_t)sens_cell_count(g);
    const JsonValue *a = json_get(j, "cells");
    if (!a || a->type != JSON_ARRAY || a->count != n)
        return error_set(err, "%s: \"cells\" is not a list of %zu (%d layers x (%d key + %d value candidates))", path, n,
                         g->n_layers, g->n_candidates[SENS_KEYS], g->n_candidates[SENS_VALUES]);
    unsigned char *seen = calloc(n, 1);
    d->kl = malloc(n * sizeof *d->kl);
    d->kl_se = malloc(n * sizeof *d->kl_se);
    if (!seen || !d->kl || !d->kl_se) { free(seen); return error_set(err, "out of memory"); }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const JsonValue *x = &a->items[i];
        const char *side = json_string(x, "side"), *cand = json_string(x, "candidate");
        long long layer;
        int s = side && !strcmp(side, "K") ? 0 : side && !strcmp(side, "V") ? 1 : -1, c = -1;
        for (int k = 0; cand && s >= 0 && k < g->n_candidates[s]; k++)
            if (!strcmp(cand, g->candidates[s][k])) c = k;
        if (s < 0 || c < 0 || json_integer(x, "layer", 0, g->n_layers - 1, &layer)) {
            rc = error_set(err, "%s: cell %zu does not name a side (K, V), a layer and a candidate of that side", path, i);
            break;
        }
        int at = sens_config_index(g, s, (int)layer, c);
        double kl = json_number(x, "kl_mean"), se = json_number(x, "kl_stderr");
        if (seen[at]) rc = error_set(err, "%s: cell %s layer %lld %s is there twice", path, side, layer, cand);
        else rc = check_cell_kl(x, path, side, layer, cand, err);
        seen[at] = 1;
        d->kl[at] = kl;
        d->kl_se[at] = se;
    }
    free(seen);
    return rc;
}

int sens_read(const char *dir, SensData *d, Error *err) {
    memset(d, 0, sizeof *d);
    char path[4200];
    snprintf(path, sizeof path, "%s/sensitivity.json", dir);
    size_t len;
    char *text = read_whole_file(path, 1 << 26, &len, err);
    if (!text) return -1;
    Error jerr;
    JsonValue *j = json_parse(text, len, &jerr);
    CheckedLine crc = checked_json_verify(text, len);
    free(text);
    int rc;
    double version = j && j->type == JSON_OBJECT ? json_number(j, "kvq_sensitivity") : 0;
    if (!j || j->type != JSON_OBJECT || (version != 1 && version != 2 && version != SENS_JSON_VERSION))
        rc = error_set(err, "%s: not a sensitivity's report%s%s", path, j ? "" : ": ", j ? "" : jerr.msg);
    else if (version >= 2 && crc != CHECKED_LINE_OK)
        rc = error_set(err, "%s: %s: refused; run ./run sensitivity again", path,
                       crc == CHECKED_LINE_NO_CRC ? "no crc32c at its end (edited or damaged)" : "fails its CRC-32C (edited or damaged)");
    else if (version == 1 && crc != CHECKED_LINE_NO_CRC)
        rc = error_set(err, "%s: version 1 (which had no checksum) ending in a crc32c: its version is damaged or was "
                       "edited", path);
    else
        rc = read_header(j, d, path, err) || read_candidates(j, (int)version, d, path, err) || read_cells(j, d, path, err)
             ? -1 : 0;
    json_free(j);
    if (rc) sens_data_free(d);
    return rc;
}

void sens_data_free(SensData *d) {
    free(d->kl);
    free(d->kl_se);
    d->kl = d->kl_se = NULL;
}
