/* tests/test_kvcache_bytes.c: the KV cache's sizes (model/kvcache.h), kv_cache_bytes and
 * kv_cache_position_bytes, against what kvcache.h says its arrays hold, for every base of the
 * codec table (each codec's `examples`) with no modifier and with +sink3+res5, in the caches
 * tests/test_kvcache.c reads back (tests/kvcache_shape.h): a store a position short, or a count
 * that leaves the sinks out, fails here in a fraction of a second (the read-back would write
 * past it). */
#include "tests/test.h"
#include "tests/kvcache_shape.h"
#include "model/model.h"
#include "quant/scheme.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bytes one layer's store of spec holds, from kvcache.h's description of the arrays, per KV
 * head: the units of positions S .. max_seq-1 (G to a unit, the last one partial), S sink rows
 * and, under +res or a token-axis base, a ring of R + G + max_batch rows (at most max_seq), all
 * rows float32; fp32 without modifiers: max_seq rows in place. */
static double store_bytes(const KvSpec *spec, int max_seq, int max_batch) {
    double row = RB_DIM * sizeof(float);
    if (kv_spec_is_fp32(spec)) return (double)max_seq * row;
    int s = spec->sinks, g = spec->base.rows, stored = max_seq > s ? max_seq - s : 0;
    int ring = spec->residual > 0 || g > 1 ? spec->residual + g + max_batch : 0;
    if (ring > max_seq) ring = max_seq;
    return (double)((stored + g - 1) / g) * kv_spec_unit_bytes(spec, RB_DIM) + (double)(s + ring) * row;
}

/* kv_cache_bytes and kv_cache_position_bytes of caches of every base with no modifier and with
 * +sink3+res5 (keys of layer 0 and values of layer 1; the partners elsewhere), for 80 and 77
 * positions (a last token group only partly used) and batches of 8 and 100 (a ring as long as
 * the cache): what the arrays must hold, so a store a position short, or a count that leaves
 * the sinks out, shows here before the read-back writes into it. */
static void test_cache_bytes(void) {
    Config cfg = {0};
    cfg.n_layers = RB_LAYERS, cfg.n_heads = RB_HEADS, cfg.n_kv_heads = RB_HEADS, cfg.head_dim = RB_DIM;
    cfg.dim = RB_HEADS * RB_DIM, cfg.max_seq_len = RB_POSITIONS;
    float inv_freq[RB_DIM / 2];
    for (int i = 0; i < RB_DIM / 2; i++) inv_freq[i] = 1.0f / powf(10000.0f, 2.0f * i / RB_DIM);
    static const int seqs[2] = {RB_POSITIONS, RB_POSITIONS - 3}, batches[2] = {RB_MAX_BATCH, 100};
    long caches = 0, bad = 0;
    char first[400] = "";
    for (int i = 0; i < kv_codec_count(); i++) {
        char list[256];
        snprintf(list, sizeof list, "%s", kv_codec_at(i)->examples);
        for (char *save = NULL, *base = strtok_r(list, " ", &save); base; base = strtok_r(NULL, " ", &save))
            for (int mods = 0; mods < 2; mods++) {
                char text[96], k_text[200], v_text[200], why[200];
                snprintf(text, sizeof text, "%s%s", base, mods ? "+res5+sink3" : "");
                snprintf(k_text, sizeof k_text, "%s;1:%s", text, RB_PARTNER_KEYS);
                snprintf(v_text, sizeof v_text, "%s;1:%s", RB_PARTNER_VALUES, text);
                KvLayered k, v;
                if (kv_layered_parse(k_text, KV_SIDE_KEYS, &k, why, sizeof why) ||
                    kv_layered_parse(v_text, KV_SIDE_VALUES, &v, why, sizeof why) ||
                    kv_layered_bind(&k, RB_LAYERS, RB_DIM, KV_SIDE_KEYS, why, sizeof why) ||
                    kv_layered_bind(&v, RB_LAYERS, RB_DIM, KV_SIDE_VALUES, why, sizeof why) || kv_spec_is_fitted(&k.all))
                    continue;   /* a base that does not fit head_dim 64; fitted bases need a calibration (the read-back has one) */
                KvCacheScheme scheme = {k, v, NULL};
                for (int si = 0; si < 2; si++)
                    for (int bi = 0; bi < 2; bi++) {
                        KvCache c;
                        Error err;
                        if (kv_cache_init(&c, &cfg, seqs[si], batches[bi], &scheme, inv_freq, &err)) {
                            if (!bad++) snprintf(first, sizeof first, "K %.120s, V %.120s: %.120s", k_text, v_text, err.msg);
                            continue;
                        }
                        double want = 0, want_position = 0;
                        for (int l = 0; l < RB_LAYERS; l++) {
                            const KvSpec *ks = kv_layered_at(&k, l), *vs = kv_layered_at(&v, l);
                            want += RB_HEADS * (store_bytes(ks, seqs[si], batches[bi]) + store_bytes(vs, seqs[si], batches[bi]));
                            want_position += RB_HEADS * ((double)kv_spec_unit_bytes(ks, RB_DIM) / ks->base.rows +
                                                         (double)kv_spec_unit_bytes(vs, RB_DIM) / vs->base.rows);
                        }
                        double got = (double)kv_cache_bytes(&c), got_position = kv_cache_position_bytes(&c);
                        caches++;
                        if ((got != want || got_position != want_position) && !bad++)
                            snprintf(first, sizeof first, "K %.120s, V %.120s, %d positions, batch %d: %.0f bytes (want %.0f), %.4g a position (want %.4g)",
                                     k_text, v_text, seqs[si], batches[bi], got, want, got_position, want_position);
                        kv_cache_free(&c);
                    }
            }
    }
    check(caches > 0 && bad == 0,
          "kvcache: kv_cache_bytes and kv_cache_position_bytes = the units of S..max_seq-1, the sink rows and the ring "
          "(R + G + max_batch rows, at most max_seq) of every store",
          "%ld of %ld caches wrong; first: %s", bad, caches, first);
}

int main(void) {
    test_cache_bytes();
    return test_exit_code();
}
