/* eval/cli.c: how ./run reads a command line, finds its command and writes its errors (see eval/cli.h). */
#include "eval/cli.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* 1 if argv[i] is the flag `name` (a long name without dashes); takes its value if needed. */
int flag(Args *a, const char *name, int takes_value) {
    const char *s = a->argv[a->i];
    if (s[0] != '-') return 0;
    s += (s[1] == '-') ? 2 : 1;
    size_t n = strlen(name);
    if (strncmp(s, name, n) != 0 || (s[n] != 0 && s[n] != '=')) return 0;
    a->typed = a->argv[a->i];
    a->typed_len = (int)(s + n - a->typed);
    a->i++;
    if (!takes_value) {
        if (s[n] == '=') snprintf(a->bad, sizeof a->bad, "flag %.*s takes no value", a->typed_len, a->typed);
    } else if (s[n] == '=') {
        a->value = s + n + 1;
    } else if (a->i < a->argc) {
        a->value = a->argv[a->i++];
    } else {
        snprintf(a->bad, sizeof a->bad, "flag %.*s needs a value", a->typed_len, a->typed);
        a->value = "";
    }
    return 1;
}

/* The value parsers read the last matched flag's value; they replace flag()'s "needs a value"
 * with their own error about "". Messages name the flag as it was typed. */
void parse_int(Args *a, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(a->value, &end, 10);
    if (errno || end == a->value || *end || v < lo || v > hi)
        snprintf(a->bad, sizeof a->bad, "%.*s: expected an integer in [%d, %d], got '%s'", a->typed_len, a->typed, lo, hi,
                 a->value);
    else *out = (int)v;
}

void parse_float(Args *a, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(a->value, &end);
    if (errno || end == a->value || *end || !(v >= lo && v <= hi))
        snprintf(a->bad, sizeof a->bad, "%.*s: expected a number in [%g, %g], got '%s'", a->typed_len, a->typed, lo, hi,
                 a->value);
    else *out = v;
}

static void parse_shard(Args *a, int *index, int *count) {
    char extra;
    if (sscanf(a->value, "%d/%d%c", index, count, &extra) != 2 || *count < 1 || *index < 0 || *index >= *count)
        snprintf(a->bad, sizeof a->bad, "--shard: expected I/N with 0 <= I < N, got '%s'", a->value);
}

/* A library call's failure on a flag's value, as the usage error. */
void take_error(Args *a, int rc, const Error *err) {
    if (rc) snprintf(a->bad, sizeof a->bad, "%.255s", err->msg);   /* bad holds 256 */
}

void unknown_arg(Args *a) {
    if (!a->bad[0]) snprintf(a->bad, sizeof a->bad, "unknown argument '%s'", a->argv[a->i]);
    a->i++;
}

/* The checks after the flags: the first error found is the one reported. */
void require(Args *a, int ok, const char *msg) {
    if (!ok && !a->bad[0]) snprintf(a->bad, sizeof a->bad, "%s", msg);
}

/* "--precision must be exact or bf16" unless value is one of the two. */
void one_of(Args *a, const char *flag_name, const char *value, const char *first, const char *second) {
    if (!a->bad[0] && strcmp(value, first) && strcmp(value, second))
        snprintf(a->bad, sizeof a->bad, "--%s must be %s or %s", flag_name, first, second);
}

/* Takes argv[a->i] if it is a shared flag the command takes, or its MODEL_DIR; 0 leaves it. */
static int shared_flag(Args *a) {
    unsigned t = a->takes;
    EvalFlags *e = &a->e;
    if ((t & TAKES_DIR) && a->argv[a->i][0] != '-' && !a->dir) a->dir = a->argv[a->i++];
    else if ((t & TAKES_JSON) && flag(a, "json", 0)) a->json = 1;
    else if ((t & TAKES_QUIET) && flag(a, "quiet", 0)) a->quiet = 1;
    else if ((t & TAKES_KV_SCHEME) && flag(a, "kv-scheme", 1)) a->kv_scheme = a->value;
    else if ((t & TAKES_KV_SIDES) && flag(a, "k-scheme", 1)) a->k_scheme = a->value;
    else if ((t & TAKES_KV_SIDES) && flag(a, "v-scheme", 1)) a->v_scheme = a->value;
    else if ((t & TAKES_CALIB) && flag(a, "calib", 1)) a->calib = a->value;
    else if ((t & TAKES_WINDOW) && flag(a, "text-file", 1)) e->text_file = a->value;
    else if ((t & TAKES_WINDOW) && flag(a, "ctx", 1)) parse_int(a, 2, 1 << 20, &e->ctx);
    else if ((t & TAKES_WINDOW) && flag(a, "stride", 1)) parse_int(a, 1, 1 << 20, &e->stride);
    else if ((t & TAKES_EVAL) && flag(a, "windows", 1)) parse_int(a, 1, 1 << 30, &e->windows);
    else if ((t & TAKES_EVAL) && flag(a, "max-tokens", 1)) parse_int(a, 2, 1 << 30, &e->max_tokens);
    else if ((t & TAKES_EVAL) && flag(a, "protocol", 1)) e->protocol = a->value;
    else if ((t & TAKES_EVAL) && flag(a, "shard", 1)) parse_shard(a, &e->shard_i, &e->shard_n);
    else if ((t & TAKES_EVAL) && flag(a, "batch", 1)) parse_int(a, 1, 4096, &e->batch);
    else if ((t & TAKES_EVAL) && flag(a, "precision", 1)) e->precision = a->value;
    else return 0;
    return 1;
}

/* Reads past the shared flags: 1 while an argument is left for the command's own flags, 0 at
 * the end or at the first error. */
int next_arg(Args *a) {
    while (a->i < a->argc && !a->bad[0])
        if (!shared_flag(a)) return 1;
    return 0;
}

/* A LAYERED scheme (quant/scheme.h); a syntax error is a usage error. Checks against the model
 * (head_dim, layers) come when the cache is made, as a bad-input error naming the part. */
int parse_scheme(Args *a, const char *text, KvSide side, KvLayered *out) {
    char why[160];
    if (kv_layered_parse(text, side, out, why, sizeof why) == 0) return 0;
    snprintf(a->bad, sizeof a->bad, "KV scheme '%.60s': %.160s", text, why);
    return -1;
}

/* The shared flags' checks, after the command's own: --protocol and --precision, then the
 * schemes of keys (k) and values (v; NULL for one scheme), default_scheme for a side no flag
 * names. 1 when there is a usage error. */
int check_args(Args *a, const char *default_scheme, KvLayered *k, KvLayered *v) {
    if (a->takes & TAKES_EVAL) {
        one_of(a, "protocol", a->e.protocol, "hf", "llamacpp");
        one_of(a, "precision", a->e.precision, "exact", "bf16");
    }
    const char *both = a->kv_scheme ? a->kv_scheme : default_scheme;
    if (!a->bad[0] && k) parse_scheme(a, a->k_scheme ? a->k_scheme : both, KV_SIDE_KEYS, k);
    if (!a->bad[0] && v) parse_scheme(a, a->v_scheme ? a->v_scheme : both, KV_SIDE_VALUES, v);
    return a->bad[0] != 0;
}

/* The length of the UTF-8 sequence at s (n bytes left) that a terminal shows as a character: 2 to
 * 4 for a valid sequence (no overlong form, surrogate or C1 control U+0080..U+009F, which some
 * terminals obey as commands), else 0. */
static int shown_sequence(const unsigned char *s, size_t n) {
    int len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    unsigned cp = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    int overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp < 0xA0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
    return len;
}

/* An error message on one line, whatever the strings in it hold (a path or a --config with a
 * newline or an ESC, a file's text): control bytes, DEL, C1 controls and bytes that are not
 * UTF-8 are written as \n, \t, \r or \xHH, the rest as it is. */
void put_escaped(FILE *f, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        int len = s[i] >= 0x80 ? shown_sequence(s + i, n - i) : 1;
        if (len > 1) {
            fwrite(s + i, 1, (size_t)len, f);
            i += (size_t)len;
            continue;
        }
        unsigned char c = s[i++];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c >= 0x7F) fprintf(f, "\\x%02X", c);
        else fputc(c, f);
    }
}


/* "64,128,256" into out[0..max): each in [lo, hi]; *n set. */
void parse_int_list(Args *a, int lo, int hi, int *out, int max, int *n) {
    const char *p = a->value;
    *n = 0;
    while (!a->bad[0]) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < lo || v > hi || *n == max || (*end && *end != ',')) {
            snprintf(a->bad, sizeof a->bad, "%.*s: expected up to %d integers in [%d, %d], comma-separated, got '%.100s'",
                     a->typed_len, a->typed, max, lo, hi, a->value);
            return;
        }
        out[(*n)++] = (int)v;
        if (!*end) return;
        p = end + 1;
    }
}

/* Levenshtein's distance: the fewest insertions, deletions and substitutions of a byte that turn a
 * into b; INT_MAX when either is longer than 63 bytes (no command name is). */
int cli_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return INT_MAX;
    int row[64];   /* row[j]: the distance of a's first i bytes to b's first j */
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int above = row[j], best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best) best = above + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[m];
}

void cli_compose_scheme(const char *scheme, int group, char *name, size_t n) {
    const char *asym = strstr(scheme, "-asym");
    size_t stem = asym ? (size_t)(asym - scheme) : strlen(scheme);
    int plain_int = !strncmp(scheme, "int", 3) && strspn(scheme + 3, "0123456789") == stem - 3 && stem > 3;
    if (plain_int) snprintf(name, n, "%.*s-g%d%s", (int)stem, scheme, group, asym ? "-asym" : "");
    else snprintf(name, n, "%.63s", scheme);
}

const Command *command_find(const Command *commands, int n, const char *name) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3 && commands[i].names[k]; k++)
            if (!strcmp(name, commands[i].names[k])) return &commands[i];
    return NULL;
}

#define MAX_TYPO_EDITS 2   /* "pll" finds ppl, "sweeep" sweep; a farther name is a different word */
const char *command_nearest(const Command *commands, int n, const char *typed) {
    const char *nearest = NULL;
    int least = MAX_TYPO_EDITS + 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3 && commands[i].names[k]; k++) {
            int d = cli_edit_distance(typed, commands[i].names[k]);
            if (d < least) nearest = commands[i].names[k], least = d;
        }
    return nearest;
}
