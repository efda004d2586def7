/* eval/probe_common.c: what every probe task draws and decodes with (see eval/probe_common.h):
 * seeded draws, a row's NLL and greedy continuation. */
#include "eval/probe_common.h"
#include "model/modeldir.h"
#include "model/sampler.h"
#include <math.h>

unsigned long long probe_draw(unsigned long long seed, unsigned long long a, unsigned long long b, unsigned long long c) {
    unsigned long long x = seed;
    unsigned long long parts[3] = {a, b, c};
    for (int i = 0; i < 4; i++) {   /* splitmix64, the indices mixed in one at a time */
        x += 0x9e3779b97f4a7c15ULL + (i ? parts[i - 1] * 0xd1342543de82ef95ULL : 0);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        x ^= x >> 31;
    }
    return x;
}

double probe_row_nll(const float *row, int n, int target) {
    double max = row[0];
    for (int i = 1; i < n; i++)
        if (row[i] > max) max = row[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)row[i] - max);
    return max + log(sum) - row[target];
}

void probe_greedy(ProbeWork *w, KvCache *kv, const int *prompt, int n, int count, int *out) {
    int vocab = w->m->config.vocab_size;
    kv->len = 0;
    prefill(w->m, &w->s, kv, prompt, n);
    for (int i = 0; i < count; i++) {
        out[i] = logits_argmax(w->s.logits, vocab);
        if (i + 1 < count) forward(w->m, &w->s, kv, &out[i], 1, n + i, 0);
    }
}
