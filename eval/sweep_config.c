/* eval/sweep_config.c: a sweep's configurations from their text — "K[:V]" as --config gives
 * it, or a file of them one a line (--configs) — bound to the model, and the rest of its
 * settings from the model and the text (eval/sweep.h). */
#include "eval/sweep.h"
#include "eval/wikitext.h"
#include "model/formats/calib_bind.h"
#include "model/formats/fileio.h"
#include <stdlib.h>
#include <string.h>

/* Splits "K[:V]" at the colon that ends K: a colon right after a layer range ("0:", "2-5:",
 * the start of a per-layer item) belongs to the LAYERED value. V = K when there is none. */
static int split_config(const char *text, char *k, char *v, size_t n) {
    const char *item = text;   /* start of the current ';' item */
    for (const char *p = text; *p; p++) {
        if (*p == ';') item = p + 1;
        if (*p != ':') continue;
        size_t len = (size_t)(p - item);
        int layer_range = len > 0 && strspn(item, "0123456789-") == len;
        if (layer_range) continue;
        if ((size_t)(p - text) >= n || strlen(p + 1) >= n) return -1;
        snprintf(k, n, "%.*s", (int)(p - text), text);
        snprintf(v, n, "%s", p + 1);
        return 0;
    }
    if (strlen(text) >= n) return -1;
    snprintf(k, n, "%s", text);
    snprintf(v, n, "%s", text);
    return 0;
}

/* The syntax of one side; worded as ./run's scheme flags word it. */
static int parse_side(const char *text, KvSide side, KvLayered *out, Error *err) {
    char why[160];
    if (kv_layered_parse(text, side, out, why, sizeof why) == 0) return 0;
    return error_set(err, "KV scheme '%.60s': %.160s", text, why);
}

int sweep_add_config(SweepSettings *s, const char *text, Error *err) {
    if (s->n_configs == SWEEP_MAX_CONFIGS) return error_set(err, "more than %d configurations", SWEEP_MAX_CONFIGS);
    SweepConfig *c = &s->configs[s->n_configs];
    if (split_config(text, c->k_text, c->v_text, sizeof c->k_text)) return error_set(err, "configuration too long");
    if (!c->k_text[0] || !c->v_text[0]) return error_set(err, "configuration '%.60s': empty K or V", text);
    if (parse_side(c->k_text, KV_SIDE_KEYS, &c->scheme.k, err) || parse_side(c->v_text, KV_SIDE_VALUES, &c->scheme.v, err)) return -1;
    s->n_configs++;
    return 0;
}

int sweep_add_config_file(SweepSettings *s, const char *path, Error *err) {
    size_t len;
    char *text = read_whole_file(path, 1 << 20, &len, err);
    if (!text) {
        char why[sizeof err->msg];   /* err->msg cannot be both the source and the destination */
        snprintf(why, sizeof why, "%s", err->msg);
        return error_set(err, "--configs %.200s", why);   /* the flag named, as ./run reports it */
    }
    int rc = 0;
    char *line = text;
    for (int number = 1; line && !rc; number++) {   /* a blank line still counts: the file's own numbers */
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line[strcspn(line, "#\r")] = 0;
        while (*line == ' ' || *line == '\t') line++;
        size_t l = strlen(line);
        while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\t')) line[--l] = 0;
        if (l > 0 && sweep_add_config(s, line, err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            rc = error_set(err, "--configs %.200s line %d: %.280s", path, number, why);
        }
        line = next;
    }
    free(text);
    if (!rc && s->n_configs == 0) return error_set(err, "--configs %.200s: no configurations in it", path);
    return rc;
}

int sweep_bind_configs(SweepSettings *s, const Config *c, int ctx, Error *err) {
    for (int i = 0; i < s->n_configs; i++) {
        SweepConfig *sc = &s->configs[i];
        char why[200];
        if (kv_layered_bind(&sc->scheme.k, c->n_layers, c->head_dim, KV_SIDE_KEYS, why, sizeof why) ||
            kv_layered_bind(&sc->scheme.v, c->n_layers, c->head_dim, KV_SIDE_VALUES, why, sizeof why))
            return error_set(err, "configuration %d (%s : %s): %s", i + 1, sc->k_text, sc->v_text, why);
        kv_layered_bits(&sc->scheme.k, c->n_layers, c->head_dim, ctx, &sc->k_bits[0], &sc->k_bits[1]);
        kv_layered_bits(&sc->scheme.v, c->n_layers, c->head_dim, ctx, &sc->v_bits[0], &sc->v_bits[1]);
        sc->codebook_bytes = kv_layered_table_bytes(&sc->scheme.k, c->n_layers, c->n_kv_heads, c->head_dim) +
                             kv_layered_table_bytes(&sc->scheme.v, c->n_layers, c->n_kv_heads, c->head_dim);
    }
    return 0;
}

int sweep_needs_calibration(const SweepSettings *s) {
    for (int i = 0; i < s->n_configs; i++)
        if (kv_layered_is_fitted(&s->configs[i].scheme.k) || kv_layered_is_fitted(&s->configs[i].scheme.v)) return 1;
    return 0;
}

int sweep_use_calibration(SweepSettings *s, const Config *c, const Calibration *calib, Error *err) {
    for (int i = 0; i < s->n_configs; i++) s->configs[i].scheme.calib = calib;
    KvSpec *heads = malloc((size_t)c->n_kv_heads * sizeof *heads);
    if (!heads) return error_set(err, "out of memory");
    int rc = 0;
    for (int i = 0; i < s->n_configs && !rc; i++)
        for (int layer = 0; layer < c->n_layers && !rc; layer++)
            rc = calib_bind_heads(kv_layered_at(&s->configs[i].scheme.k, layer), calib, layer, c->n_kv_heads, c->head_dim, heads,
                                  err) ||
                 calib_bind_heads(kv_layered_at(&s->configs[i].scheme.v, layer), calib, layer, c->n_kv_heads, c->head_dim, heads,
                                  err);
    free(heads);
    return rc ? -1 : 0;
}

int sweep_prepare(SweepSettings *s, const Model *m, const Tokenizer *tok, int max_tokens, int **tokens, Error *err) {
    *tokens = load_eval_tokens(s->text_file, tok, s->ppl.protocol == PPL_HF, &s->n_tokens, err);
    if (!*tokens || sweep_bind_configs(s, &m->config, s->ppl.ctx, err)) return -1;
    if (max_tokens && max_tokens < s->n_tokens) s->n_tokens = max_tokens;
    s->tokens_hash = sweep_tokens_hash(*tokens, s->n_tokens);
    s->windows_total = ppl_window_count(&s->ppl, s->n_tokens);
    if (s->ppl.max_windows > 0 && s->ppl.max_windows < s->windows_total) s->windows_total = s->ppl.max_windows;
    return 0;
}

void sweep_print_windows(FILE *f, const SweepSettings *s, int windows) {
    PplOptions all = s->ppl;
    all.max_windows = 0;   /* every window the text holds */
    int in_text = ppl_window_count(&all, s->n_tokens);
    fprintf(f, "%d of %d windows", windows, s->windows_total);
    if (in_text > s->windows_total) fprintf(f, " (--windows %d; the text has %d)", s->windows_total, in_text);
}
