/* eval/probe_diverge.c: greedy divergence (see probe.h). Prompt i is BOS and P tokens of the test
 * split from a seeded offset; M tokens are generated greedily with the fp32 cache, then with each
 * scheme's, and the tokens before the first difference are counted (M when none differs). Every
 * token is the argmax of its logits, EOS included, so each continuation has exactly M tokens. */
#include "eval/probe_common.h"
#include "eval/wikitext.h"
#include <stdlib.h>
#include <string.h>

int probe_first_difference(const int *a, const int *b, int M) {
    int same = 0;
    while (same < M && a[same] == b[same]) same++;
    return same;
}

int probe_diverge_prepare(ProbeWork *w, Error *err) {
    w->text = load_eval_tokens(w->o->text_file, w->tok, 1, &w->n_text, err);
    if (!w->text) return -1;
    if (w->n_text < w->o->prompt_tokens + 2)
        return error_set(err, "%s: %d tokens, too short for prompts of %d", w->o->text_file, w->n_text, w->o->prompt_tokens);
    w->n_base = (size_t)w->o->sequences * w->o->new_tokens;
    w->base = malloc(w->n_base * sizeof *w->base);
    return w->base ? 0 : error_set(err, "out of memory");
}

void probe_diverge_run(ProbeWork *w, KvCache *kv, int cache, ProbeResult *r) {
    const ProbeOptions *o = w->o;
    int P = o->prompt_tokens, M = o->new_tokens;
    int *out = w->seq + 1 + P;   /* the continuation follows the prompt in w->seq (1 + P + M <= ctx) */
    ProbeCell *cell = probe_cell(r, cache, 0);
    for (int i = 0; i < o->sequences; i++) {
        int start = 1 + (int)(probe_draw(o->seed, 0xd17e, (unsigned long long)i, 0) % (unsigned long long)(w->n_text - P - 1));
        w->seq[0] = w->m->config.bos_id;
        memcpy(w->seq + 1, w->text + start, (size_t)P * sizeof *w->seq);
        probe_greedy(w, kv, w->seq, 1 + P, M, out);
        int *base = w->base + (size_t)i * M;
        if (cache == 0) memcpy(base, out, (size_t)M * sizeof *out);
        probe_diverge_count(cell, out, base, M);
    }
}

void probe_diverge_count(ProbeCell *cell, const int *out, const int *base, int M) {
    int same = probe_first_difference(out, base, M);
    cell->n++;
    cell->hits += same == M;
    cell->agree += out[0] == base[0];
    cell->sum += same;
    cell->sumsq += (double)same * same;
}
