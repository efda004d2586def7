/* eval/sweep.c: the sweep's settings (DIR/sweep.json), its loop and the merge of shards (see
 * sweep.h). Its journal is eval/sweep_journal.c; the tables and the chart it writes are in
 * eval/sweep_report.c. */
#include "eval/sweep.h"
#include "eval/sweep_journal.h"
#include "eval/progress.h"
#include "eval/json_out.h"
#include "model/formats/checked_line.h"
#include "model/formats/crc32c.h"
#include "model/formats/fileio.h"
#include "model/formats/json.h"
#include "model/formats/sha256.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SETTINGS_FILE "sweep.json"

unsigned long long sweep_tokens_hash(const int *tokens, int n) {
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)tokens[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xffu)) * 1099511628211ull;
    }
    return h;
}

static void path_in(char *out, size_t n, const char *dir, const char *file) { snprintf(out, n, "%s/%s", dir, file); }

/* ---- settings: DIR/sweep.json ---- */

/* sweep.json's last member, the CRC-32C of the text before it: `  "crc32c": "1a2b3c4d"\n}\n` */
#define SETTINGS_CRC_OPEN "  \"crc32c\": \""
#define SETTINGS_CRC_CLOSE "\"\n}\n"
#define SETTINGS_CRC_LEN (sizeof SETTINGS_CRC_OPEN - 1 + CRC32C_HEX_CHARS + sizeof SETTINGS_CRC_CLOSE - 1)

/* The settings as text, one key per line (so a difference can be shown as a line), ending in
 * the CRC-32C of the rest: a damaged sweep.json is refused, not trusted by sweep-merge. */
static char *settings_text(const SweepSettings *s, size_t *len) {
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    const PplOptions *o = &s->ppl;
    fprintf(f, "{\n  \"kvq_sweep\": 1,\n");
    json_out_string(f, "model", s->model, 0);
    json_out_string(f, "model_id", s->model_id, 0);   /* the model by content: what a resume compares */
    json_out_string(f, "text_file", s->text_file, 0);
    json_out_string(f, "precision", s->precision, 0);
    json_out_string(f, "calib_sha256", s->calib_sha256, 0);   /* the calibration by content, not by path */
    if (s->calib_sha256[0] && s->calib_held_out != CALIB_HELD_OUT_UNKNOWN) {   /* absent: no calibration */
        json_out_string(f, "calib_text_sha256", s->calib_text_sha256, 0);
        fprintf(f, "  \"calib_held_out\": %s,\n", s->calib_held_out == CALIB_HELD_OUT ? "true" : "false");
    }
    json_out_string(f, "protocol", o->protocol == PPL_LLAMACPP ? "llamacpp" : "hf", 0);
    fprintf(f, "  \"ctx\": %d,\n  \"stride\": %d,\n  \"max_windows\": %d,\n  \"batch\": %d,\n", o->ctx, o->stride,
            o->max_windows, o->batch);
    fprintf(f, "  \"n_tokens\": %d,\n  \"tokens_hash\": \"%016llx\",\n  \"windows_total\": %d,\n", s->n_tokens,
            s->tokens_hash, s->windows_total);
    if (o->layer_error) fprintf(f, "  \"layer_error\": 1,\n");   /* absent: off (the sweeps made before it) */
    fprintf(f, "  \"shard_index\": %d,\n  \"shard_count\": %d,\n  \"configs\": [\n", o->shard_index, o->shard_count);
    for (int i = 0; i < s->n_configs; i++) {
        const SweepConfig *c = &s->configs[i];
        fprintf(f, "    {\"k\": ");
        json_out_quoted(f, c->k_text, strlen(c->k_text));
        fprintf(f, ", \"v\": ");
        json_out_quoted(f, c->v_text, strlen(c->v_text));
        fprintf(f, ", \"k_bits\": [%.17g, %.17g], \"v_bits\": [%.17g, %.17g]", c->k_bits[0], c->k_bits[1],
                c->v_bits[0], c->v_bits[1]);
        if (c->codebook_bytes > 0) fprintf(f, ", \"codebook_bytes\": %.17g", c->codebook_bytes);
        fprintf(f, "}%s\n", i + 1 < s->n_configs ? "," : "");
    }
    fprintf(f, "  ],\n");
    if (fflush(f)) { fclose(f); free(text); return NULL; }
    char hex[CRC32C_HEX_CHARS + 1];
    crc32c_to_hex(crc32c(0, text, *len), hex);
    fprintf(f, SETTINGS_CRC_OPEN "%s" SETTINGS_CRC_CLOSE, hex);
    if (fclose(f)) { free(text); return NULL; }
    return text;
}

/* Whether text[0..len) ends in the crc32c member settings_text writes, and whether it matches. */
static CheckedLine settings_crc(const char *text, size_t len) {
    if (len < SETTINGS_CRC_LEN) return CHECKED_LINE_NO_CRC;
    size_t body = len - SETTINGS_CRC_LEN;
    const char *digits = text + body + sizeof SETTINGS_CRC_OPEN - 1;
    char hex[CRC32C_HEX_CHARS + 1];
    uint32_t stored;
    memcpy(hex, digits, CRC32C_HEX_CHARS);
    hex[CRC32C_HEX_CHARS] = '\0';
    if (memcmp(text + body, SETTINGS_CRC_OPEN, sizeof SETTINGS_CRC_OPEN - 1) ||
        memcmp(digits + CRC32C_HEX_CHARS, SETTINGS_CRC_CLOSE, sizeof SETTINGS_CRC_CLOSE - 1) ||
        crc32c_from_hex(hex, &stored))
        return CHECKED_LINE_NO_CRC;
    return crc32c(0, text, body) == stored ? CHECKED_LINE_OK : CHECKED_LINE_MISMATCH;
}

#define HELD_OUT_LINE "  \"calib_held_out\": "
#define CALIB_TEXT_LINE "  \"calib_text_sha256\": "

/* The settings' text without the lines of the paths ("model", "text_file") and of the CRC that
 * covers them: a resume compares the model and the text by content (model_id, tokens_hash), so
 * the same ones under another path are the same sweep. With held_out 0, without the lines of the
 * calibration's held-out state too: a sweep.json written before they were has none. settings_text
 * writes one key a line, each line's key at its start. */
static char *without_paths(const char *text, int held_out) {
    char *out = malloc(strlen(text) + 1), *o = out;
    if (!out) return NULL;
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n');
        int held_out_line = !strncmp(line, HELD_OUT_LINE, sizeof HELD_OUT_LINE - 1) ||
                            !strncmp(line, CALIB_TEXT_LINE, sizeof CALIB_TEXT_LINE - 1);
        if (strncmp(line, "  \"model\": ", 11) && strncmp(line, "  \"text_file\": ", 15) &&
            strncmp(line, SETTINGS_CRC_OPEN, sizeof SETTINGS_CRC_OPEN - 1) && (held_out || !held_out_line)) {
            memcpy(o, line, n);
            o += n;
        }
        line += n;
    }
    *o = '\0';
    return out;
}

/* The setting of a sweep.json line `  "key": value,` (key and value without quotes), 0 when the
 * line is not one (a configuration's line, a bracket). */
static int settings_line(const char *line, size_t len, char key[32], char value[130]) {
    if (len < 6 || strncmp(line, "  \"", 3)) return 0;
    const char *k = line + 3, *colon = memchr(k, '"', len - 3);
    if (!colon || colon - k >= 32 || colon[1] != ':') return 0;
    snprintf(key, 32, "%.*s", (int)(colon - k), k);
    const char *v = colon + 3, *end = line + len;
    if (end > v && end[-1] == ',') end--;
    if (end - v >= 2 && *v == '"' && end[-1] == '"') v++, end--;
    snprintf(value, 130, "%.*s", (int)(end - v < 128 ? end - v : 128), v);
    return 1;
}

/* The settings a resume compares, each with the flag that sets it and its value in words ("%s":
 * the value as written). */
static const char *const SETTING_WORDS[][3] = {
    {"max_windows", "--windows", "%s windows"}, {"ctx", "--ctx", "ctx %s"}, {"stride", "--stride", "stride %s"},
    {"batch", "--batch", "batches of %s"}, {"precision", "--precision", "%s matmuls"},
    {"protocol", "--protocol", "the %s protocol"}, {"calib_sha256", "--calib", "calibration sha256 %.12s..."},
    {"n_tokens", "--text-file", "a text of %s tokens"}, {"tokens_hash", "--text-file", "a text of token hash %s"},
    {"windows_total", "--text-file, --ctx or --stride", "%s windows in the text"},
    {"shard_index", "--shard", "shard index %s"}, {"shard_count", "--shard", "%s shards"},
    {"layer_error", "--no-layer-error", "layer_error %s"},
    {"calib_held_out", "--text-file or --calib", "calib_held_out %s"},
    {"calib_text_sha256", "--calib", "a calibration fitted on the text of sha256 %.12s..."},
};

/* Setting i's value in words: "all windows" for max_windows 0, "no calibration" for none. */
static void setting_words(int i, const char *value, char *out, size_t n) {
    const char *key = SETTING_WORDS[i][0];
    if (!strcmp(key, "max_windows") && !strcmp(value, "0")) snprintf(out, n, "all windows");
    else if (!strcmp(key, "max_windows") && !strcmp(value, "1")) snprintf(out, n, "1 window");
    else if (!strcmp(key, "calib_sha256") && !*value) snprintf(out, n, "no calibration");
    else if (!strcmp(key, "layer_error")) snprintf(out, n, strcmp(value, "1") ? "no per-layer error" : "the per-layer error");
    else if (!strcmp(key, "calib_held_out"))
        snprintf(out, n, strcmp(value, "false") ? "a text the calibration was not fitted on" : "the calibration's own text");
    else snprintf(out, n, SETTING_WORDS[i][2], value);
}

/* The configuration lines of a sweep.json text (`    {"k": ...`), and the first at which *line points. */
static int config_lines(const char *text) {
    int n = 0;
    for (const char *s = strstr(text, "\n    {\"k\": "); s; s = strstr(s + 1, "\n    {\"k\": ")) n++;
    return n;
}

/* A configuration line's keys and values as "K k / V v" (or "k" when they are the same) into out. */
static void config_words(const char *line, size_t len, char *out, size_t n) {
    char k[128] = "?", v[128] = "?";
    const char *kq = strstr(line, "{\"k\": \""), *vq = strstr(line, ", \"v\": \"");
    if (kq && kq < line + len) snprintf(k, sizeof k, "%.*s", (int)strcspn(kq + 7, "\""), kq + 7);
    if (vq && vq < line + len) snprintf(v, sizeof v, "%.*s", (int)strcspn(vq + 8, "\""), vq + 8);
    if (!strcmp(k, v)) snprintf(out, n, "%s", k);
    else snprintf(out, n, "K %s / V %s", k, v);
}

/* The first setting where the sweep.json there (a) and this run's (b) differ, in words, into out
 * (for the error message): the flag that sets it and both values, e.g. "--windows: the directory
 * holds a sweep of all windows; this run asks for 16 windows". */
static void first_difference(const char *a, const char *b, char *out, size_t n) {
    int configs_a = config_lines(a), configs_b = config_lines(b), config = 0;
    for (;;) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        int is_config = !strncmp(a, "    {\"k\": ", 10);
        if (la != lb || strncmp(a, b, la)) {
            char ka[32], kb[32], va[130], vb[130], wa[200], wb[200];
            int setting = -1;
            if (settings_line(a, la, ka, va) && settings_line(b, lb, kb, vb) && !strcmp(ka, kb))
                for (int i = 0; i < (int)(sizeof SETTING_WORDS / sizeof *SETTING_WORDS) && setting < 0; i++)
                    if (!strcmp(ka, SETTING_WORDS[i][0])) setting = i;
            if (setting >= 0) {
                setting_words(setting, va, wa, sizeof wa);
                setting_words(setting, vb, wb, sizeof wb);
                snprintf(out, n, "%s: the directory holds a sweep of %.150s; this run asks for %.150s",
                         SETTING_WORDS[setting][1], wa, wb);
            } else if (settings_line(a, la, ka, va) && settings_line(b, lb, kb, vb) &&
                       (!strcmp(ka, "layer_error") || !strcmp(kb, "layer_error"))) {
                /* layer_error is written only when on */
                int there = !strcmp(ka, "layer_error");
                snprintf(out, n, "--no-layer-error: the directory holds a sweep %s the per-layer error; this run %s",
                         there ? "with" : "without", there ? "is without it (--no-layer-error)" : "asks for it");
            } else if (configs_a != configs_b) {
                snprintf(out, n, "the configurations: the directory holds a sweep of %d; this run asks for %d",
                         configs_a, configs_b);
            } else if (is_config) {
                config_words(a, la, wa, sizeof wa);
                config_words(b, lb, wb, sizeof wb);
                snprintf(out, n, "configuration %d: the directory holds a sweep of %.150s; this run asks for %.150s%s",
                         config + 1, wa, wb, strcmp(wa, wb) ? "" : " (its bits differ: another kvq)");
            } else {
                snprintf(out, n, "the settings differ: the directory holds %.*s; this run asks for %.*s",
                         (int)(la < 100 ? la : 100), a, (int)(lb < 100 ? lb : 100), b);
            }
            return;
        }
        config += is_config;
        if (!a[la] || !b[lb]) { snprintf(out, n, "the files differ in length"); return; }
        a += la + 1;
        b += lb + 1;
    }
}

/* A sweep.json read from path (text[0..len)): parsed, or NULL with why: truncated, not JSON,
 * without its CRC-32C or failing it, or without a model identity, which a sweep of another model
 * could then never be told from. */
static JsonValue *settings_parse(const char *path, const char *text, size_t len, Error *err) {
    Error jerr;
    JsonValue *j = json_parse(text, len, &jerr);
    CheckedLine crc = j ? settings_crc(text, len) : CHECKED_LINE_OK;
    if (!j && json_truncated(text, len))
        error_set(err, "%s: truncated (%zu bytes, the end of the settings missing): not resumed; use another "
                  "--out-dir", path, len);
    else if (!j) error_set(err, "%s: not a sweep's settings: %s", path, jerr.msg);
    else if (crc != CHECKED_LINE_OK)
        error_set(err, "%s: %s: refused; use another --out-dir", path,
                  crc == CHECKED_LINE_NO_CRC ? "no crc32c at its end (a sweep of an older kvq, or edited)"
                                             : "fails its CRC-32C (edited or damaged)");
    else if (!json_string(j, "model_id") || !sha256_hex_valid(json_string(j, "model_id")))
        error_set(err, "%s: no model_id (the model's identity by content; a sweep of an older kvq, or edited): "
                  "not resumed; use another --out-dir", path);
    else return j;
    json_free(j);
    return NULL;
}

/* Writes DIR/sweep.json, or checks that the one there is of the same model and says the same.
 * A journal without its sweep.json is refused: whose sweep it holds cannot be known. */
static int settings_claim(const char *dir, const SweepSettings *s, Error *err) {
    char path[4200], journal[4200];
    path_in(path, sizeof path, dir, SETTINGS_FILE);
    path_in(journal, sizeof journal, dir, JOURNAL_FILE);
    size_t len;
    char *want = settings_text(s, &len);
    if (!want) return error_set(err, "out of memory");
    int rc = 0;
    if (path_exists(path)) {
        size_t have_len;
        char *have = read_whole_file(path, 1 << 24, &have_len, err), *a = NULL, *b = NULL;
        /* the settings this run would write, cut short (only the last newline lost, say) */
        int cut = have && have_len < len && !memcmp(have, want, have_len);
        JsonValue *j = have && !cut ? settings_parse(path, have, have_len, err) : NULL;
        const char *there = j ? json_string(j, "model_id") : NULL;
        /* a sweep.json of before the held-out record resumes: this run's, from the same calibration
         * (calib_sha256) and the same tokens, is said in the reports */
        int recorded = j && json_get(j, "calib_held_out");
        if (cut) {
            rc = error_set(err, "%s: truncated (%zu of its %zu bytes): not resumed; use another --out-dir", path,
                           have_len, len);
        } else if (!j) {
            rc = -1;
        } else if (strcmp(there, s->model_id)) {
            rc = error_set(err, "%s: a sweep of another model (model_id %.12s...; %s now has %.12s...: its weights or "
                           "config.json changed): not resumed; use another --out-dir", path, there, s->model, s->model_id);
        } else if (!(a = without_paths(have, recorded)) || !(b = without_paths(want, recorded))) {
            rc = error_set(err, "out of memory");
        } else if (strcmp(a, b)) {
            char diff[480];
            first_difference(a, b, diff, sizeof diff);
            rc = error_set(err, "%s: a sweep with other arguments is in this directory (%s); use another --out-dir "
                                "or the same arguments", path, diff);
        }
        json_free(j);
        free(a);
        free(b);
        free(have);
    } else if (path_exists(journal)) {
        rc = error_set(err, "%s: a journal without its sweep.json: not adopted (whose sweep it holds is unknown); "
                       "move it away or use another --out-dir", journal);
    } else {
        rc = write_text_file(path, want, err);
    }
    free(want);
    return rc;
}

int calib_held_out_read(const JsonValue *j, char sha[65], CalibHeldOut *h, const char *path, Error *err) {
    const JsonValue *held = json_get(j, "calib_held_out");
    const char *text = json_string(j, "calib_text_sha256");
    sha[0] = '\0';
    *h = CALIB_HELD_OUT_UNKNOWN;
    if (!held && !json_get(j, "calib_text_sha256")) return 0;
    if (!held || held->type != JSON_BOOL || !text || !sha256_hex_valid(text))
        return error_set(err, "%s: \"calib_held_out\" and \"calib_text_sha256\" are not true or false and a sha256 "
                         "(64 lowercase hex digits): damaged or edited", path);
    snprintf(sha, 65, "%s", text);
    *h = held->boolean ? CALIB_HELD_OUT : CALIB_NOT_HELD_OUT;
    return 0;
}

static int int_field(const JsonValue *o, const char *key, int lo, int hi, int *out, const char *path, Error *err) {
    long long x;
    if (json_integer(o, key, lo, hi, &x)) return error_set(err, "%s: \"%s\" missing or out of range", path, key);
    *out = (int)x;
    return 0;
}

static int bits_field(const JsonValue *o, const char *key, double bits[2], const char *path, Error *err) {
    const JsonValue *a = json_get(o, key);
    if (!a || a->type != JSON_ARRAY || a->count != 2 || a->items[0].type != JSON_NUMBER || a->items[1].type != JSON_NUMBER)
        return error_set(err, "%s: a configuration's \"%s\" is not [stored, effective]", path, key);
    bits[0] = a->items[0].number;
    bits[1] = a->items[1].number;
    return 0;
}

/* Reads DIR/sweep.json back into s (configs allocated; their KvLayered left empty). */
static int settings_read(const char *dir, SweepSettings *s, Error *err) {
    memset(s, 0, sizeof *s);
    char path[4200];
    path_in(path, sizeof path, dir, SETTINGS_FILE);
    size_t len;
    char *text = read_whole_file(path, 1 << 24, &len, err);
    if (!text) return -1;
    JsonValue *j = settings_parse(path, text, len, err);
    free(text);
    if (!j) return -1;
    int rc = 0;
    const JsonValue *configs = json_get(j, "configs");
    int all_strings = json_string(j, "model") && json_string(j, "text_file") && json_string(j, "precision") &&
                      json_string(j, "protocol") && json_string(j, "tokens_hash");
    if (j->type != JSON_OBJECT || json_number(j, "kvq_sweep") != 1 || !configs || configs->type != JSON_ARRAY ||
        !all_strings) {
        rc = error_set(err, "%s: not a sweep's settings", path);
        goto done;
    }
    snprintf(s->model, sizeof s->model, "%s", json_string(j, "model"));
    snprintf(s->model_id, sizeof s->model_id, "%s", json_string(j, "model_id"));
    snprintf(s->text_file, sizeof s->text_file, "%s", json_string(j, "text_file"));
    snprintf(s->precision, sizeof s->precision, "%s", json_string(j, "precision"));
    snprintf(s->calib_sha256, sizeof s->calib_sha256, "%s", json_string(j, "calib_sha256") ? json_string(j, "calib_sha256") : "");
    if (calib_held_out_read(j, s->calib_text_sha256, &s->calib_held_out, path, err)) {
        rc = -1;
        goto done;
    }
    if (s->calib_held_out != CALIB_HELD_OUT_UNKNOWN && !s->calib_sha256[0]) {
        rc = error_set(err, "%s: \"calib_held_out\" without a calibration (calib_sha256 empty)", path);
        goto done;
    }
    s->ppl.protocol = strcmp(json_string(j, "protocol"), "llamacpp") ? PPL_HF : PPL_LLAMACPP;
    s->tokens_hash = strtoull(json_string(j, "tokens_hash"), NULL, 16);
    if (int_field(j, "ctx", 2, 1 << 24, &s->ppl.ctx, path, err) ||
        int_field(j, "stride", 0, 1 << 24, &s->ppl.stride, path, err) ||
        int_field(j, "max_windows", 0, 1 << 30, &s->ppl.max_windows, path, err) ||
        int_field(j, "batch", 1, 1 << 24, &s->ppl.batch, path, err) ||
        int_field(j, "n_tokens", 0, 1 << 30, &s->n_tokens, path, err) ||
        int_field(j, "windows_total", 1, 1 << 30, &s->windows_total, path, err) ||
        int_field(j, "shard_count", 1, 1 << 20, &s->ppl.shard_count, path, err) ||
        int_field(j, "shard_index", 0, s->ppl.shard_count - 1, &s->ppl.shard_index, path, err) ||
        (json_get(j, "layer_error") && int_field(j, "layer_error", 0, 1, &s->ppl.layer_error, path, err))) {
        rc = -1;
        goto done;
    }
    if (configs->count < 1 || configs->count > SWEEP_MAX_CONFIGS) {
        rc = error_set(err, "%s: %zu configurations (1 to %d)", path, configs->count, SWEEP_MAX_CONFIGS);
        goto done;
    }
    s->configs = calloc(configs->count, sizeof *s->configs);
    if (!s->configs) { rc = error_set(err, "out of memory"); goto done; }
    s->n_configs = (int)configs->count;
    for (int i = 0; i < s->n_configs && !rc; i++) {
        const JsonValue *c = &configs->items[i];
        SweepConfig *sc = &s->configs[i];
        if (c->type != JSON_OBJECT || !json_string(c, "k") || !json_string(c, "v")) {
            rc = error_set(err, "%s: configuration %d is not {\"k\", \"v\", ...}", path, i);
            break;
        }
        snprintf(sc->k_text, sizeof sc->k_text, "%s", json_string(c, "k"));
        snprintf(sc->v_text, sizeof sc->v_text, "%s", json_string(c, "v"));
        rc = bits_field(c, "k_bits", sc->k_bits, path, err) || bits_field(c, "v_bits", sc->v_bits, path, err) ? -1 : 0;
        const JsonValue *cb = json_get(c, "codebook_bytes");   /* only configurations with fitted bases have it */
        if (!rc && cb && (cb->type != JSON_NUMBER || !(cb->number >= 0 && cb->number < 1e15)))
            rc = error_set(err, "%s: configuration %d's \"codebook_bytes\" is not a byte count", path, i);
        else if (cb) sc->codebook_bytes = cb->number;
    }
done:
    json_free(j);
    return rc;
}

/* ---- the sweep ---- */

/* Which (window, configuration) results the journal holds: done[w * n_configs + c]. */
static unsigned char *results_held(const SweepSettings *s, const Journal *j) {
    unsigned char *done = calloc((size_t)s->windows_total * s->n_configs, 1);
    for (int r = 0; done && r < j->n_records; r++) {
        const Record *x = &j->records[r];
        done[(size_t)x->window * s->n_configs + x->config] = 1;
    }
    return done;
}

/* How many of window w's configurations are not held: the one answer to "what is missing",
 * read both for the count of windows to run and for the skip inside the loop. */
static int configs_missing(const unsigned char *done, int w, int n_configs) {
    int missing = 0;
    for (int c = 0; c < n_configs; c++) missing += !done[(size_t)w * n_configs + c];
    return missing;
}

/* Every record names a window of s's shard and a configuration, and journal_totals refuses one
 * twice, so fewer records than (windows of the shard) x (configurations) is an unfinished
 * shard. Counted here rather than with configs_missing, so that a fault there cannot hide
 * itself; the first result missing is named, with what to do (advice). */
static int journal_complete(const char *dir, const SweepSettings *s, const Journal *j, const char *advice, Error *err) {
    int C = s->n_configs, I = s->ppl.shard_index, N = s->ppl.shard_count;
    long want = (long)ppl_shard_windows(s->windows_total, I, N) * C;
    if (j->n_records >= want) return 0;
    unsigned char *done = results_held(s, j);
    if (!done) return error_set(err, "out of memory");
    int window = -1, config = -1;
    for (int w = I; w < s->windows_total && window < 0; w += N)
        for (int c = 0; c < C && window < 0; c++)
            if (!done[(size_t)w * C + c]) {
                window = w;
                config = c;
            }
    free(done);
    if (window < 0)   /* only with a record twice, which journal_totals words better */
        return error_set(err, "%s/%s: %d of the shard's %ld records: %s", dir, JOURNAL_FILE, j->n_records, want, advice);
    const SweepConfig *sc = &s->configs[config];
    return error_set(err, "%s/%s: %d of the shard's %ld records, window %d, configuration %d (%s : %s) missing: %s",
                     dir, JOURNAL_FILE, j->n_records, want, window, config, sc->k_text, sc->v_text, advice);
}

/* What one run of a sweep cost: its wall time and forward-pass tokens, baselines included. */
typedef struct {
    double seconds;
    long tokens, layer_tokens;
} RunCost;

/* Runs the windows of s's shard that the journal does not finish. */
static int run_missing(const Model *m, const int *tokens, const SweepSettings *s, const char *dir, const Journal *j,
                       Progress *progress, RunCost *cost, Error *err) {
    int W = s->windows_total, C = s->n_configs, I = s->ppl.shard_index, N = s->ppl.shard_count;
    unsigned char *done = results_held(s, j);
    if (!done) return error_set(err, "out of memory");
    int todo = 0;
    for (int w = I; w < W; w += N) todo += configs_missing(done, w, C) > 0;
    const KvCacheScheme **schemes = malloc((size_t)C * sizeof *schemes);
    PplSession ps = {0};
    int rc = 0;
    if (!schemes) rc = error_set(err, "out of memory");
    for (int c = 0; c < C && !rc; c++) schemes[c] = &s->configs[c].scheme;
    if (!rc && todo > 0) rc = ppl_session_init(&ps, m, &s->ppl, schemes, C, 1, err);
    double t0 = seconds_now();
    long ran = 0;
    int finished = 0;
    for (int w = I; w < W && todo > 0 && !rc; w += N) {
        if (!configs_missing(done, w, C)) continue;
        ran += ppl_session_begin_window(&ps, tokens, s->n_tokens, w);
        for (int c = 0; c < C && !rc; c++) {
            if (done[(size_t)w * C + c]) continue;
            TokenSums sums = {0};
            double t1 = seconds_now();
            long n = ppl_session_run_scheme(&ps, c, &sums);
            if (n < 0) {
                rc = error_set(err, "out of memory for configuration %d's KV cache", c);
                break;
            }
            ran += n;
            rc = journal_append(dir, w, c, &s->configs[c], &sums, n, seconds_now() - t1, err);
        }
        finished++;
        if (progress) progress_update(progress, finished, todo, ran, seconds_now() - t0);
    }
    cost->seconds = seconds_now() - t0;
    cost->tokens = ran;
    cost->layer_tokens = ps.layer_tokens;
    ppl_session_free(&ps);
    free(schemes);
    free(done);
    return rc;
}

int sweep_run(const Model *m, const int *tokens, const SweepSettings *s, const char *out_dir, Progress *progress,
              SweepTotals *totals, Error *err) {
    memset(totals, 0, sizeof *totals);
    if (ppl_check(m, tokens, s->n_tokens, &s->ppl, err) || make_directory(out_dir, err) ||
        settings_claim(out_dir, s, err))
        return -1;
    Journal j;
    char path[4200];
    path_in(path, sizeof path, out_dir, JOURNAL_FILE);
    int rc = journal_read(out_dir, s, &j, err);
    if (!rc && j.good_len < j.len) rc = truncate_to(path, j.good_len, err);   /* a torn last append */
    RunCost cost = {0};
    if (!rc) rc = run_missing(m, tokens, s, out_dir, &j, progress, &cost, err);
    journal_free(&j);
    /* the totals come from the journal as it now stands, whatever ran when; a journal still
     * short of a result after the run is refused as sweep-merge refuses it, never reported */
    if (!rc) rc = journal_read(out_dir, s, &j, err);
    if (!rc) rc = journal_complete(out_dir, s, &j, "this run did not finish the sweep", err);
    if (!rc) rc = journal_totals(&j, 1, s, totals, err);
    totals->run_seconds = cost.seconds;
    totals->run_tokens = cost.tokens;
    totals->run_layer_tokens = cost.layer_tokens;
    journal_free(&j);
    return rc;
}

/* Settings of two shards of one sweep: the same in everything but the shard index (and the
 * paths: the model and the text are compared by content, model_id and tokens_hash). */
static int same_sweep(const SweepSettings *a, const SweepSettings *b) {
    if (strcmp(a->model_id, b->model_id) || strcmp(a->precision, b->precision) ||
        strcmp(a->calib_sha256, b->calib_sha256) ||
        a->ppl.protocol != b->ppl.protocol || a->ppl.ctx != b->ppl.ctx || a->ppl.stride != b->ppl.stride ||
        a->ppl.max_windows != b->ppl.max_windows || a->ppl.batch != b->ppl.batch || a->n_tokens != b->n_tokens ||
        a->tokens_hash != b->tokens_hash || a->windows_total != b->windows_total ||
        a->ppl.shard_count != b->ppl.shard_count || a->n_configs != b->n_configs ||
        a->ppl.layer_error != b->ppl.layer_error)
        return 0;
    for (int i = 0; i < a->n_configs; i++)
        if (strcmp(a->configs[i].k_text, b->configs[i].k_text) || strcmp(a->configs[i].v_text, b->configs[i].v_text))
            return 0;
    return 1;
}

/* What the shards recorded of their calibration's held-out state, into all[0]: they used one
 * calibration (calib_sha256) on one text (tokens_hash), so what one shard recorded holds for all;
 * a shard of an older kvq recorded nothing, and if one says NOT held out, that is said. */
static void merged_held_out(SweepSettings *all, int n) {
    for (int i = 0; i < n; i++) {
        if (all[i].calib_held_out == CALIB_HELD_OUT_UNKNOWN) continue;
        if (all[0].calib_held_out != CALIB_NOT_HELD_OUT) all[0].calib_held_out = all[i].calib_held_out;
        snprintf(all[0].calib_text_sha256, sizeof all[0].calib_text_sha256, "%s", all[i].calib_text_sha256);
    }
}

int sweep_merge(char *const *dirs, int n, SweepSettings *s, SweepTotals *totals, Error *err) {
    memset(totals, 0, sizeof *totals);
    if (n < 1) return error_set(err, "no shard directories given");   /* all[0] is the reference */
    SweepSettings *all = calloc((size_t)n, sizeof *all);
    Journal *j = calloc((size_t)n, sizeof *j);
    int rc = all && j ? 0 : error_set(err, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        rc = settings_read(dirs[i], &all[i], err);
        if (!rc && !same_sweep(&all[0], &all[i]))
            rc = error_set(err, "%s: a shard of a different sweep than %s (settings differ)", dirs[i], dirs[0]);
        if (!rc && all[i].ppl.shard_count != n)
            rc = error_set(err, "%s: shard %d of %d, but %d directories were given", dirs[i], all[i].ppl.shard_index,
                           all[i].ppl.shard_count, n);
        for (int k = 0; k < i && !rc; k++)
            if (all[k].ppl.shard_index == all[i].ppl.shard_index)
                rc = error_set(err, "%s: shard %d again (also %s)", dirs[i], all[i].ppl.shard_index, dirs[k]);
        if (!rc) rc = journal_read(dirs[i], &all[i], &j[i], err);
        if (!rc && j[i].good_len < j[i].len)
            rc = error_set(err, "%s/%s: its last record is torn: finish that shard first", dirs[i], JOURNAL_FILE);
        if (!rc) rc = journal_complete(dirs[i], &all[i], &j[i], "finish that shard first", err);
    }
    if (!rc) rc = journal_totals(j, n, &all[0], totals, err);
    if (!rc) merged_held_out(all, n);
    for (int i = 0; i < n && j; i++) journal_free(&j[i]);
    for (int i = 1; i < n && all; i++) free(all[i].configs);
    if (!rc) {
        *s = all[0];
        s->ppl.shard_index = 0;
        s->ppl.shard_count = 1;
    } else if (all) {
        free(all[0].configs);
    }
    free(all);
    free(j);
    return rc;
}

int sweep_merge_claim_out_dir(const char *out_dir, RunLock *lock, Error *err) {
    char path[4200];
    path_in(path, sizeof path, out_dir, SETTINGS_FILE);
    if (path_exists(path))
        return error_set(err, "%s: --out-dir %s is a sweep's own directory (its results would be replaced): give "
                         "sweep-merge another --out-dir", path, out_dir);
    path_in(path, sizeof path, out_dir, SWEEP_LOCK_FILE);
    if (make_directory(out_dir, err) || run_lock_take(lock, path, "wait for it to finish, or give another --out-dir", err))
        return -1;
    remove_stale_temps_in(out_dir);
    return 0;
}
