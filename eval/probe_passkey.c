/* eval/probe_passkey.c: the passkey probe (see probe.h), after Mohtashami & Jaggi's landmark-
 * attention test: an instruction, filler text from the calibration split (a seeded stretch of its
 * tokens), a sentence with a five-digit number buried at a given depth of the filler, and the
 * question at the end. The digits are decoded greedily; a trial passes when the answer's first
 * digits are exactly the number. The prompt has L tokens in all, BOS included. */
#include "eval/probe_common.h"
#include "eval/wikitext.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char INTRO[] = "There is an important pass key hidden inside a lot of irrelevant text. Find it and "
                            "memorize it. I will quiz you about the pass key.";
static const char QUESTION[] = "What is the pass key? The pass key is";

void probe_passkey_number(unsigned long long seed, int trial, char out[PROBE_PASSKEY_DIGITS + 1]) {
    snprintf(out, PROBE_PASSKEY_DIGITS + 1, "%05llu", 10000 + probe_draw(seed, 0x9a55, (unsigned long long)trial, 0) % 90000);
}

/* The run of digits at the start of answer after spaces, at most 15, into out. */
static void leading_digits(const char *answer, char out[16]) {
    while (*answer == ' ') answer++;
    int n = 0;
    while (n < 15 && answer[n] >= '0' && answer[n] <= '9') out[n] = answer[n], n++;
    out[n] = '\0';
}

int probe_passkey_match(const char *answer, const char *number) {
    char digits[16];
    leading_digits(answer, digits);
    return strcmp(digits, number) == 0;
}

/* ids of text without BOS appended at seq[*n] (room checked by the caller's lengths). */
static int append_text(const Tokenizer *tok, const char *text, int *seq, int *n, int room, Error *err) {
    int count = 0;
    int *ids = tokenizer_encode(tok, text, strlen(text), 0, &count);
    if (!ids) return error_set(err, "out of memory");
    if (*n + count > room) {
        free(ids);
        return error_set(err, "passkey: the prompt's fixed text does not fit %d tokens", room);
    }
    memcpy(seq + *n, ids, (size_t)count * sizeof *ids);
    *n += count;
    free(ids);
    return 0;
}

/* The prompt of trial `trial` (length L, depth in percent) into w->seq; number written. */
static int build_prompt(ProbeWork *w, int L, int depth, int trial, char number[PROBE_PASSKEY_DIGITS + 1], Error *err) {
    char needle[160];
    probe_passkey_number(w->o->seed, trial, number);
    snprintf(needle, sizeof needle, "The pass key is %s. Remember it. %s is the pass key.", number, number);
    int head[160], needle_ids[160], tail[160], nh = 0, nn = 0, nt = 0;
    if (append_text(w->tok, INTRO, head, &nh, 160, err) || append_text(w->tok, needle, needle_ids, &nn, 160, err) ||
        append_text(w->tok, QUESTION, tail, &nt, 160, err))
        return -1;
    int F = L - 1 - nh - nn - nt;   /* filler tokens */
    if (F < 16) return error_set(err, "passkey length %d leaves %d filler tokens (at least 16)", L, F);
    if (F + 2 > w->n_text) return error_set(err, "%s: %d tokens, too short for %d of filler", w->o->text_file, w->n_text, F);
    int start = 1 + (int)(probe_draw(w->o->seed, 0xf111, (unsigned long long)trial, 0) % (unsigned long long)(w->n_text - F - 1));
    int at = (int)((long long)F * depth / 100), n = 0;
    w->seq[n++] = w->m->config.bos_id;
    memcpy(w->seq + n, head, (size_t)nh * sizeof *head), n += nh;
    memcpy(w->seq + n, w->text + start, (size_t)at * sizeof *w->text), n += at;
    memcpy(w->seq + n, needle_ids, (size_t)nn * sizeof *needle_ids), n += nn;
    memcpy(w->seq + n, w->text + start + at, (size_t)(F - at) * sizeof *w->text), n += F - at;
    memcpy(w->seq + n, tail, (size_t)nt * sizeof *tail), n += nt;
    return n == L ? 0 : error_set(err, "passkey: a prompt of %d tokens, not %d", n, L);
}

int probe_passkey_prepare(ProbeWork *w, Error *err) {
    w->text = load_eval_tokens(w->o->text_file, w->tok, 1, &w->n_text, err);
    if (!w->text) return -1;
    w->n_base = (size_t)w->o->n_lengths * w->o->n_depths * w->o->sequences * PROBE_PASSKEY_ANSWER_TOKENS;
    w->base = malloc(w->n_base * sizeof *w->base);
    return w->base ? 0 : error_set(err, "out of memory");
}

int probe_passkey_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r, Error *err) {
    const ProbeOptions *o = w->o;
    int answer[PROBE_PASSKEY_ANSWER_TOKENS];
    for (int li = 0; li < o->n_lengths; li++)
        for (int di = 0; di < o->n_depths; di++) {
            ProbeCell *cell = probe_cell(r, cache, li * o->n_depths + di);
            for (int t = 0; t < o->sequences; t++) {
                int trial = (li * o->n_depths + di) * o->sequences + t;
                char number[PROBE_PASSKEY_DIGITS + 1], digits[16], base_digits[16];
                if (build_prompt(w, o->lengths[li], o->depths[di], trial, number, err)) return -1;
                probe_greedy(w, kv, w->seq, o->lengths[li], PROBE_PASSKEY_ANSWER_TOKENS, answer);
                int *base = w->base + (size_t)trial * PROBE_PASSKEY_ANSWER_TOKENS;
                if (cache == 0) memcpy(base, answer, sizeof answer);
                size_t len;
                char *text = tokenizer_decode(w->tok, answer, PROBE_PASSKEY_ANSWER_TOKENS, &len);
                char *base_text = tokenizer_decode(w->tok, base, PROBE_PASSKEY_ANSWER_TOKENS, &len);
                if (!text || !base_text) {
                    free(text);
                    free(base_text);
                    return error_set(err, "out of memory");
                }
                leading_digits(text, digits);
                leading_digits(base_text, base_digits);
                cell->n++;
                cell->hits += probe_passkey_match(text, number);
                cell->agree += strcmp(digits, base_digits) == 0;
                free(text);
                free(base_text);
            }
        }
    return 0;
}
