/* eval/probe_copy.c: the copy probe (see probe.h). A sequence is BOS, S word pieces drawn with
 * replacement from the tokenizer's ordinary words, and the same S again. Nothing before the second
 * copy says it repeats the first, so its first token is not scored; from its second token on,
 * the model that reads the first copy back through the cache (an induction head: find the
 * previous occurrence of the current token, copy what followed it) predicts every token, and one
 * that cannot read it back guesses among the pieces. */
#include "eval/probe_common.h"
#include "model/sampler.h"
#include <stdlib.h>
#include <string.h>

/* "▁" (U+2581, the SentencePiece space) and then 2..12 of a-z. */
static int ordinary_word(const char *piece) {
    static const char space[] = "\xe2\x96\x81";
    if (strncmp(piece, space, 3)) return 0;
    size_t n = 0;
    for (const char *p = piece + 3; *p; p++, n++)
        if (*p < 'a' || *p > 'z') return 0;
    return n >= 2 && n <= 12;
}

int probe_word_pieces(const Tokenizer *tok, int **ids, Error *err) {
    int vocab = tokenizer_vocab_size(tok), n = 0;
    *ids = malloc((size_t)vocab * sizeof **ids);
    if (!*ids) return error_set(err, "out of memory");
    for (int id = 0; id < vocab; id++)
        if (ordinary_word(tokenizer_piece(tok, id))) (*ids)[n++] = id;
    if (n < 100) {
        free(*ids);
        *ids = NULL;
        return error_set(err, "the tokenizer has %d word pieces (\"\xe2\x96\x81\" and a-z): too few to draw a copy "
                              "sequence from", n);
    }
    return n;
}

int probe_copy_sequence(const int *pieces, int n_pieces, int bos, unsigned long long seed, int S, int index, int ctx,
                        int *out) {
    out[0] = bos;
    for (int i = 0; i < S; i++)
        out[1 + i] = pieces[probe_draw(seed, (unsigned long long)S, (unsigned long long)index, (unsigned long long)i) %
                            (unsigned long long)n_pieces];
    int n = 1 + 2 * S < ctx ? 1 + 2 * S : ctx;   /* S = ctx/2 leaves the second copy's last token out */
    for (int j = 1 + S; j < n; j++) out[j] = out[j - S];
    return n;
}

int probe_copy_prepare(ProbeWork *w, Error *err) {
    int n = probe_word_pieces(w->tok, &w->pieces, err);
    if (n < 0) return -1;
    w->n_pieces = n;
    size_t scored = 0;
    for (int i = 0; i < w->o->n_lengths; i++) {
        int S = w->o->lengths[i], len = 1 + 2 * S < w->o->ctx ? 1 + 2 * S : w->o->ctx;
        scored += (size_t)w->o->sequences * (size_t)(len - probe_copy_first_scored(S));
    }
    w->base = malloc((scored + 1) * sizeof *w->base);
    w->n_base = scored;
    return w->base ? 0 : error_set(err, "out of memory");
}

void probe_copy_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r) {
    const ProbeOptions *o = w->o;
    int vocab = w->m->config.vocab_size, B = w->s.max_batch;
    size_t k = 0;   /* the scored token's index over the whole run: its place in w->base */
    for (int li = 0; li < o->n_lengths; li++) {
        int S = o->lengths[li], first = probe_copy_first_scored(S);
        ProbeCell *cell = probe_cell(r, cache, li);
        for (int q = 0; q < o->sequences; q++) {
            int n = probe_copy_sequence(w->pieces, w->n_pieces, w->m->config.bos_id, o->seed, S, q, o->ctx, w->seq);
            r->scored_per_sequence[li] = n - first;
            kv->len = 0;
            for (int pos = 0; pos < n; pos += B) {
                int T = n - pos < B ? n - pos : B;
                /* row t's logits predict target pos + t + 1: rows from first - 1 - pos on are scored */
                int from = first - 1 - pos < 0 ? 0 : first - 1 - pos > T ? T : first - 1 - pos;
                forward(w->m, &w->s, kv, w->seq + pos, T, pos, from);
                for (int t = from; t < T && pos + t + 1 < n; t++, k++) {
                    const float *row = w->s.logits + (size_t)(t - from) * vocab;
                    int target = w->seq[pos + t + 1], top = logits_argmax(row, vocab);
                    double nll = probe_row_nll(row, vocab, target);
                    if (cache == 0) w->base[k] = top;
                    cell->n++;
                    cell->hits += top == target;
                    cell->agree += top == w->base[k];
                    cell->sum += nll;
                    cell->sumsq += nll * nll;
                }
            }
        }
    }
}
