#!/usr/bin/env python3
"""tests/mutate.py: the suite's mutation table, and a harness that checks each mutation is caught.

A mutation is a realistic one-line bug: a file, an exact snippet of it (found exactly once), its
replacement, and the narrowest test expected to catch it (a test program of build/<cfg>/tests, or
a tests/*.sh script). `python3 tests/mutate.py NAME` applies one mutation to a scratch copy of the
tree (never to this one), builds what the test needs, runs the test and reports caught (the test
printed a FAIL line or exited nonzero) or survived, with the test's seconds and its first failing
check. Standard library only; not run by `make test` (tests/run_tests.sh runs tests/test_*.py).

    python3 tests/mutate.py --list                 the table
    python3 tests/mutate.py NAME [NAME...]         one or more mutations
    python3 tests/mutate.py --all                  every mutation (about an hour on 2 cores)
    python3 tests/mutate.py --all --markdown       ... and a table for tests/README.md

Before the first mutation of a test, the test runs once unmutated in the scratch tree: a test that
fails there cannot catch anything, and its mutations are reported as "baseline fails". The scratch
tree ($TMPDIR/kvq-mutate-$USER, or --scratch DIR) is a copy of the sources kept between runs, so
only the mutated file's object and the test are rebuilt; each mutation is undone in a finally
block and the file written back, whatever happens. Run it under `nice -n 10` on a shared machine.
"""
import argparse
import getpass
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Mutation:
    def __init__(self, name, path, old, new, test, what, origin):
        self.name, self.path, self.old, self.new = name, path, old, new
        self.test, self.what, self.origin = test, what, origin


def run_m(name, path, old, new, test, what):
    """A mutation of the 30-mutation run of issue 39 (item 7)."""
    return Mutation(name, path, old, new, test, what, "issue 39")


def i51_m(name, path, old, new, test, what):
    """A mutation of issue 51's review that no test caught then."""
    return Mutation(name, path, old, new, test, what, "issue 51")


def i50_m(name, path, old, new, test, what):
    """A mutation of issue 50 (the layer resume of item 7; keys' and values' own candidate lists of item 5)."""
    return Mutation(name, path, old, new, test, what, "issue 50")


def s54_m(name, path, old, new, test, what):
    """A mutation of stop 54's mutation run that no test caught then."""
    return Mutation(name, path, old, new, test, what, "stop 54")


def s55_m(name, path, old, new, test, what):
    """A mutation guarding a fix of stop 55's CI failure."""
    return Mutation(name, path, old, new, test, what, "stop 55")


def new_m(name, path, old, new, test, what):
    """A mutation added with the table (item 7's 15 more)."""
    return Mutation(name, path, old, new, test, what, "added")


MUTATIONS = [
    # ---- the 30 of issue 39's mutation run, in its order ----
    run_m("nf4-table", "quant/codec_nf4.c",
          "#define NF4_9 0.16093020141124725f", "#define NF4_9 0.16083020141124725f",
          "test_codec_fp8_nf4", "NF4[9] 0.16093 -> 0.16083"),
    run_m("tq3-centroid", "quant/codec_tq.c",
          "     0.2450941801071167f, 0.7560052871704102f,", "     0.2450941801071167f, 0.7570052871704102f,",
          "test_codec_tq", "a tq3 centroid 0.75600 -> 0.75700"),
    run_m("q40-rounding", "quant/codec_ggml.c",
          "double t64 = (double)x[j] * (double)id + ((double)half_range + 0.5);",
          "double t64 = (double)x[j] * (double)id + ((double)half_range);",
          "test_codec_ggml", "q4_0/q5_0: the +0.5 of the rounding removed"),
    run_m("e4m3-max", "quant/codec_fp8.c",
          "{3, 7, 0x43e00000u /* 448 */, 0x7e, E4M3_TABLE}", "{3, 7, 0x43f00000u /* 448 */, 0x7e, E4M3_TABLE}",
          "test_codec_fp8_nf4", "e4m3 largest value 448 -> 480"),
    run_m("asym-zero-point", "quant/codec_int.c",
          "gp.zero = is_asym(b) ? 0 : (int32_t)1 << (b->bits - 1);",
          "gp.zero = is_asym(b) ? 1 : (int32_t)1 << (b->bits - 1);",
          "test_codec_int", "asymmetric decode: zero point +1"),
    run_m("hadamard-sign", "quant/hadamard.c",
          "x[j + h] = a - b;", "x[j + h] = b - a;",
          "test_scheme", "Hadamard butterfly: the sign of the second element flipped (b - a)"),
    run_m("res-window-short", "quant/scheme.c",
          "int s = spec->sinks, r = spec->residual;",
          "int s = spec->sinks, r = spec->residual > 0 ? spec->residual - 1 : 0;",
          "test_kvcache", "+resR keeps R-1 positions at full precision"),
    run_m("store-capacity-short", "model/kvcache.c",
          "int s = sinks_of(st), stored = c->max_seq > s ? c->max_seq - s : 0;",
          "int s = sinks_of(st), stored = c->max_seq > s ? c->max_seq - s - 1 : 0;",
          "test_kvcache_bytes", "the store holds one position fewer than max_seq"),
    run_m("sink-count-plus-one", "model/kvcache.c",
          "static int sinks_of(const KvStore *st) { return st->plain ? 0 : st->spec->sinks; }",
          "static int sinks_of(const KvStore *st) { return st->plain ? 0 : st->spec->sinks + 1; }",
          "test_kvcache", "the cache keeps S+1 sink positions"),
    run_m("out-keeps-k-minus-1", "quant/scheme.c",
          "    for (int j = 0; j < k; j++) {\n        int best = -1;",
          "    for (int j = 0; j < k - 1; j++) {\n        int best = -1;",
          "test_scheme", "+outK takes K-1 outliers"),
    run_m("prerope-position", "model/kvcache.c",
          "rope(row, 1, d, c->rope_cos_sin + (size_t)(p0 + i) * d);",
          "rope(row, 1, d, c->rope_cos_sin + (size_t)(p0 + i + 1) * d);",
          "test_kvcache", "+prerope: a quantized key rotated at p+1"),
    run_m("layer-range-exclusive", "quant/scheme.c",
          "if (layer >= l->items[i].first && layer <= l->items[i].last) return &l->items[i].spec;",
          "if (layer >= l->items[i].first && layer < l->items[i].last) return &l->items[i].spec;",
          "test_scheme", "a layer item's range L1-L2 without L2"),
    run_m("values-with-key-scheme", "model/kvcache.c",
          "store_init(&c->values[l], kv_layered_at(&c->v_scheme, l), c, calib, l, err);",
          "store_init(&c->values[l], kv_layered_at(&c->k_scheme, l), c, calib, l, err);",
          "test_kvcache", "values stored with the key scheme"),
    run_m("kl-bin-plus-one", "eval/stats.c",
          "double b = floor((log10(kl) - KL_LOWEST_DECADE) * KL_BINS_PER_DECADE) + 1;",
          "double b = floor((log10(kl) - KL_LOWEST_DECADE) * KL_BINS_PER_DECADE) + 2;",
          "test_stats", "a KL lands in the histogram bin above its own"),
    run_m("percentile-rank-plus-one", "eval/stats.c",
          "double r = ceil(q * (double)n);", "double r = ceil(q * (double)n) + 1;",
          "test_stats", "quantile rank ceil(q n) + 1"),
    run_m("interpolation-bin-minus-one", "eval/stats.c",
          "double lo = kl_bin_low(bin), hi = bin == KL_BINS - 1 ? max : kl_bin_low(bin + 1);",
          "double lo = kl_bin_low(bin - 1), hi = bin == KL_BINS - 1 ? max : kl_bin_low(bin);",
          "test_stats", "a percentile interpolated inside the bin below its own"),
    run_m("variance-over-n", "eval/stats.c",
          "v = (sumsq - (double)n * mean * mean) / (double)(n - 1);",
          "v = (sumsq - (double)n * mean * mean) / (double)n;",
          "test_stats", "sample variance divided by n, not n-1"),
    run_m("top1-ties-highest", "model/sampler.c",
          "    for (int i = 0; i < n; i++)\n        if (x[i] == top) return i;",
          "    for (int i = n - 1; i >= 0; i--)\n        if (x[i] == top) return i;",
          "test_argmax", "of tied largest logits, the highest id"),
    run_m("resume-skips-last-config", "eval/sweep.c",
          "for (int c = 0; c < n_configs; c++) missing += !done[(size_t)w * n_configs + c];",
          "for (int c = 0; c < n_configs - 1; c++) missing += !done[(size_t)w * n_configs + c];",
          "tests/test_cli_sweep.sh", "a resume skips a window whose only missing result is its last configuration"),
    run_m("pareto-on-dppl", "eval/chart_layout.c",
          "static double kl_key(const ChartPoint *p) { return p->kl_mean < 0 ? 0 : p->kl_mean; }",
          "static double kl_key(const ChartPoint *p) { return p->dppl_pct < 0 ? 0 : p->dppl_pct; }",
          "test_chart", "the Pareto front over delta ppl instead of KL"),
    run_m("symmetric-scale", "quant/codec_int.c",
          "uint16_t scale = f32_to_f16(amax / (float)((1 << (b->bits - 1)) - 1));",
          "uint16_t scale = f32_to_f16(amax / (float)(1 << (b->bits - 1)));",
          "test_codec_int", "symmetric scale amax / 2^(B-1) instead of amax / (2^(B-1) - 1)"),
    run_m("tq-sign-hash", "quant/codec_tq.c",
          "uint64_t h = (uint64_t)(i + 1) * UINT64_C(0x9E3779B97F4A7C15);",
          "uint64_t h = (uint64_t)(i + 2) * UINT64_C(0x9E3779B97F4A7C15);",
          "test_codec_tq", "tq's sign hash on i+2"),
    run_m("llama-order-values", "quant/scheme.c",
          "return spec->base.codec->llama_key_order && spec->side == KV_SIDE_KEYS;",
          "return spec->base.codec->llama_key_order;",
          "test_scheme", "llama.cpp's key order applied to values too"),
    run_m("mixed-view-split", "model/attention.c",
          "int quantized = p0 + p < own;", "int quantized = p0 + p <= own;",
          "test_kvcache_forward", "attention's two views split at Q inclusive (< -> <=)"),
    run_m("fp16-ties-away", "quant/half.c",
          "if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))", "if (rest >= 0x1000u)",
          "test_codec_float", "float -> fp16 ties away from zero, not to even"),
    run_m("top1-se-n-minus-1", "eval/stats.c",
          "r.top1_se = sqrt(r.top1 * (1 - r.top1) / dn);", "r.top1_se = sqrt(r.top1 * (1 - r.top1) / (dn - 1));",
          "test_stats", "top-1 agreement's standard error over n-1"),
    run_m("dominance-not-strict", "eval/chart_layout.c",
          "return a->bits <= b->bits && qa <= qb && (a->bits < b->bits || qa < qb);",
          "return a->bits <= b->bits && qa <= qb;",
          "test_chart", "Pareto dominance without 'better in one'"),
    run_m("nf4-ties-upward", "quant/codec_nf4.c",
          "for (int i = 0; i < 15; i++) code += (double)z > MIDPOINT[i];",
          "for (int i = 0; i < 15; i++) code += (double)z >= MIDPOINT[i];",
          "test_codec_fp8_nf4", "NF4: a value on a midpoint goes to the upper code"),
    run_m("covariance-sign", "eval/stats.c",
          "- 2 * r.ppl * r.base_ppl * cov) / dn;", "+ 2 * r.ppl * r.base_ppl * cov) / dn;",
          "test_stats", "delta ppl's variance with the covariance's sign flipped"),
    run_m("window-without-batch", "model/kvcache.c",
          "long rows = (long)spec->residual + st->group + c->max_batch;",
          "long rows = (long)spec->residual + st->group;",
          "test_kvcache", "the full-precision ring without max_batch rows"),

    # ---- added with issue 49: attention's machinery moved out of model/forward.c, the layer's middle ----
    new_m("att-no-commit", "model/attention.c",
          "    kv_cache_commit(cache, l, pos, pos + T);\n", "",
          "test_forward", "cached_attention: the batch's positions never committed"),
    new_m("att-query-not-in-domain", "model/attention.c",
          "kv_cache_queries_to_domain(cache, l, kvh, q + (size_t)kvh * group * c->head_dim, group);",
          "(void)kvh;",
          "test_schemes_ref", "cached_attention: queries not moved into the keys' read domain"),
    new_m("att-output-not-from-domain", "model/attention.c",
          "            kv_cache_output_from_domain(cache, l, h / group, s->xb2 + (size_t)t * c->dim + (size_t)h * c->head_dim);",
          "            (void)h;",
          "test_schemes_ref", "cached_attention: outputs left in the values' read domain"),
    new_m("att-pairs-not-made", "model/attention.c",
          "if (pairs) bf16_pairs_along(q, c->dim, s->q2", "if (0) bf16_pairs_along(q, c->dim, s->q2",
          "test_kernels", "cached_attention: queries not copied into bf16 pairs where attention reads pairs"),
    new_m("att-item-one-token-short", "model/attention.c",
          "int t1 = t0 + ATT_TOKENS < T ? t0 + ATT_TOKENS : T;", "int t1 = t0 + ATT_TOKENS - 1 < T ? t0 + ATT_TOKENS - 1 : T;",
          "test_forward", "a work item one query token short of ATT_TOKENS"),
    new_m("att-padded-positions-short", "model/attention.c",
          "return (n_max + ATT_POSITIONS - 1) / ATT_POSITIONS * ATT_POSITIONS;",
          "return (n_max + ATT_POSITIONS - 2) / ATT_POSITIONS * ATT_POSITIONS;",
          "test_forward", "score rows padded one position short of whole blocks"),
    new_m("att-share-last-block", "model/attention.c",
          "n_blocks = (n_max + ATT_POSITIONS - 1) / ATT_POSITIONS;", "n_blocks = n_max / ATT_POSITIONS;",
          "test_forward", "share_blocks leaves out a last partial block"),
    new_m("replay-rope-first-position", "model/attention.c",
          "rope_angles(r->pos + t, c->head_dim", "rope_angles(r->pos, c->head_dim",
          "test_views", "the replay rotates every key at the batch's first position"),
    new_m("replay-rows-from-zero", "model/attention.c",
          "cached_attention(m, s, cache, r->layer, r->T, r->pos, r->from);",
          "cached_attention(m, s, cache, r->layer, r->T, r->pos, 0);",
          "test_views", "the replay attends from row 0 though its queries start at from"),
    new_m("replay-values-as-keys", "model/attention.c",
          "memcpy(s->v, r->v,", "memcpy(s->v, r->k_pre,",
          "test_views", "the replay writes its keys as values"),
    new_m("layer-rope-last-query", "model/forward.c",
          "for (int t = 0; t < n; t++)\n        rope(", "for (int t = 0; t < n - 1; t++)\n        rope(",
          "test_forward", "the layer leaves its last query unrotated"),
    new_m("layer-tap-query-rows", "model/forward.c",
          "tap_query(s, c, l, t, s->q + (size_t)(t - r0) * c->dim);", "tap_query(s, c, l, t, s->q + (size_t)t * c->dim);",
          "test_views", "the tap copies query row t of s->q, not t - r0, in a layer that skips rows"),
    new_m("gemm-tile-first-adds", "model/kernels/gemm_c.c",
          "call->out + (size_t)m0 * N + r0, (size_t)N, kc, k0 > 0};", "call->out + (size_t)m0 * N + r0, (size_t)N, kc, k0 >= 0};",
          "test_kernels", "a GEMM tile adds its first k block to what out held"),
    new_m("mlp-down-units-unpaired", "model/kernels/gemm_avx512.c",
          "const PackedActivations h = {a.kern, hpack, bf16_act ? hidden / 2 : hidden, T};",
          "const PackedActivations h = {a.kern, hpack, hidden, T};",
          "test_kernels", "the fused MLP's down projection reads hidden units, not hidden / 2 pairs, in bf16"),

    # ---- added with the table: model/kvcache.c and quant/scheme.c (caught by the quick tier), eval/ ----
    new_m("kv-sink-boundary", "model/kvcache.c",
          "    if (pos < s) {\n        memcpy(sink_row(", "    if (pos <= s) {\n        memcpy(sink_row(",
          "test_kvcache", "position S written as a sink (pos <= S), never quantized"),
    new_m("kv-rows-sink-inclusive", "model/kvcache.c",
          "        if (j < s) {\n            full_row(c, st, sink_row(", "        if (j <= s) {\n            full_row(c, st, sink_row(",
          "test_kvcache", "kv_cache_rows reads position S from the sinks (j <= S)"),
    new_m("kv-decode-without-sink-offset", "model/kvcache.c",
          "kv_spec_decode(&st->head_specs[head], head_units(st, head), d, p0 - sinks_of(st), n, out);",
          "kv_spec_decode(&st->head_specs[head], head_units(st, head), d, p0, n, out);",
          "test_kvcache", "quantized rows decoded from unit p, not p - S"),
    new_m("kv-prerope-query-domain", "model/kvcache.c",
          "} else if (!st->plain && !st->natural_reads) {\n        for (int r = 0; r < rows; r++) kv_spec_to_domain(",
          "} else if (!st->plain) {\n        for (int r = 0; r < rows; r++) kv_spec_to_domain(",
          "test_kvcache", "+prerope keys: queries moved into the key scheme's domain, though the rows are read natural"),
    new_m("kv-bytes-without-sinks", "model/kvcache.c",
          "((size_t)sinks_of(st) + st->window_rows) * d * sizeof(float));",
          "((size_t)st->window_rows) * d * sizeof(float));",
          "test_kvcache_bytes", "kv_cache_bytes leaves out the sinks' rows"),
    new_m("kv-unrotate-sign", "model/kvcache.c",
          "x[i] = a * cs + b * sn;", "x[i] = a * cs - b * sn;",
          "test_kvcache", "+prerope: a rotated key written un-rotated with a sign slip"),
    new_m("scheme-overlap-strict", "quant/scheme.c",
          "return a->first <= b->last && b->first <= a->last;", "return a->first < b->last && b->first < a->last;",
          "test_scheme", "layer items that share one end layer are not seen to overlap"),
    new_m("scheme-last-layer-range", "quant/scheme.c",
          "if (it->last >= n_layers) {", "if (it->last > n_layers) {",
          "test_scheme", "a layer item naming layer n_layers is bound"),
    new_m("scheme-token-end-rounds-up", "quant/scheme.c",
          "return s + (free_positions > 0 ? g * (free_positions / g) : 0);",
          "return s + (free_positions > 0 ? g * ((free_positions + g - 1) / g) : 0);",
          "test_scheme", "a token-axis quantized end rounded up to a whole group"),
    new_m("scheme-out-index-past-row", "quant/scheme.c",
          "if (at < n) x[at] = f16_to_f32(", "if (at <= n) x[at] = f16_to_f32(",
          "test_scheme", "an outlier index equal to the row length is written (one past the row)"),
    new_m("scheme-inner-rotation-with-out", "quant/scheme.c",
          "return spec->base.codec->rotate && !spec->outliers; }", "return spec->base.codec->rotate; }",
          "test_scheme", "a rotating codec's inner rotation counted in the domain under +out too"),
    new_m("scheme-out-ties-higher", "quant/scheme.c",
          "    return fabsf(a) > fabsf(b);\n}", "    return fabsf(a) >= fabsf(b);\n}",
          "test_scheme", "+out: of equal |x|, the higher index taken first"),
    new_m("stats-merge-kl-max", "eval/stats.c",
          "if (from->kl_max > into->kl_max) into->kl_max = from->kl_max;",
          "if (from->kl_max < into->kl_max) into->kl_max = from->kl_max;",
          "test_stats", "merged sums keep the smaller KL maximum"),
    new_m("stats-percentile-no-half", "eval/stats.c",
          "double frac = ((double)(rank - below) - 0.5) / (double)h->count[bin];",
          "double frac = (double)(rank - below) / (double)h->count[bin];",
          "test_stats", "the r-th of c tokens in a bin placed at r/c, not (r - 1/2)/c"),
    new_m("stats-delta-pct-se", "eval/stats.c",
          "r.delta_pct_se = 100.0 * (r.ppl / r.base_ppl) * r.ln_ratio_se;",
          "r.delta_pct_se = 100.0 * r.ln_ratio_se;",
          "test_stats", "delta ppl %'s standard error without the ratio's factor"),
    new_m("ppl-kl-normalizer-sign", "eval/perplexity.c",
          "return sum_lanes(lane) + (z_q - z_base) * p_sum;", "return sum_lanes(lane) + (z_base - z_q) * p_sum;",
          "test_argmax", "KL with the log-normalizers' difference reversed"),
    new_m("sweep-journal-bin-zero", "eval/sweep_journal.c",
          "    for (int b = 0; b < KL_BINS; b++)\n        if (x->kl_hist.count[b]) {",
          "    for (int b = 1; b < KL_BINS; b++)\n        if (x->kl_hist.count[b]) {",
          "test_sweep_journal", "a journal record's KL bin 0 (KL below 1e-12) dropped when read"),
    new_m("sweep-windows-count", "eval/sweep_journal.c",
          "if (in_window == s->n_configs) t->windows++;", "if (in_window == s->n_configs - 1) t->windows++;",
          "test_sweep_journal", "a window counted as done one configuration early"),
    new_m("sweep-totals-file-order", "eval/sweep_journal.c",
          "    qsort(all, (size_t)count, sizeof *all, by_window_then_config);\n",
          "",
          "test_sweep_journal", "totals added in the journals' order, not sorted by window"),
    new_m("chart-bar-two-se", "eval/chart.c",
          "p->dppl_pct_se > 0 ? p->dppl_pct_se : 0;", "p->dppl_pct_se > 0 ? 2 * p->dppl_pct_se : 0;",
          "test_chart", "delta ppl's bars of +/- two standard errors"),
    new_m("chart-numbers-overlap", "eval/chart_layout.c",
          "if (!inside(b, r->area) || overlaps(r, b)) return 0;", "if (!inside(b, r->area)) return 0;",
          "test_chart", "a point's number placed without looking at the other numbers and markers"),
    new_m("chart-numbers-leave-panel", "eval/chart_layout.c",
          "if (!inside(b, r->area) || overlaps(r, b)) return 0;", "if (overlaps(r, b)) return 0;",
          "test_chart", "a point's number placed without keeping inside its panel"),
    new_m("chart-key-line-short", "eval/chart.c",
          "#define KEY_LINE 16.0", "#define KEY_LINE 12.0",
          "test_chart", "the key's lines closer than a line of text's height"),
    # ---- issue 51: the mutations its review found surviving, each with the test added for it ----
    i51_m("alloc-capacity-rounds-up", "eval/allocate.c",
          "    *cap = hi + lo / budget.den;", "    *cap = hi + (lo + budget.den - 1) / budget.den;",
          "tests/test_cli_data_safety.sh", "allocation capacity rounded up instead of down"),
    i51_m("identity-key-without-inode", "model/formats/model_identity.c",
          "return a->dev == b->dev && a->ino == b->ino &&", "return a->dev == b->dev &&",
          "test_model_identity", "the identity cache's key ignores the inode"),
    i51_m("position-se-over-n", "eval/position.c",
          "var = (sumsq - (double)n * mean * mean) / (double)(n - 1);", "var = (sumsq - (double)n * mean * mean) / (double)n;",
          "test_standard_errors", "damage by position: the standard error's variance over n, not n - 1"),
    i51_m("layer-error-merge-rows-set", "eval/layer_error.c",
          "    into->rows += from->rows;", "    into->rows = from->rows;",
          "test_standard_errors", "layer-error merge sets rows instead of adding them"),
    i51_m("layer-error-se-over-n", "eval/layer_error.c",
          "var = (s->rel_sumsq[l] - (double)n * mean * mean) / (double)(n - 1);",
          "var = (s->rel_sumsq[l] - (double)n * mean * mean) / (double)n;",
          "test_standard_errors", "layer error: the standard error's variance over n, not n - 1"),
    i51_m("passkey-depth-over-100", "eval/probe.c",
          "o->depths[i] > 100)", "o->depths[i] > 101)",
          "test_probe", "a passkey depth of 101% accepted"),
    i51_m("diverge-last-token-same", "eval/probe_diverge.c",
          "    cell->hits += same == M;", "    cell->hits += same >= M - 1;",
          "test_probe", "diverge: a difference at the last token counted as identical"),
    i51_m("calib-tables-unsorted", "quant/codec_nuq.c",
          "    sort_ascending(table, entries(b));", "    (void)sort_ascending;",
          "test_calib_fit_rows", "fitted 1-D tables left as Lloyd ends them (unsorted after equal starts)"),
    i51_m("calib-prerope-swapped", "eval/calib_fit.c",
          "spec->prerope ? r->kpre : r->k;", "spec->prerope ? r->k : r->kpre;",
          "test_calib_fit_rows", "keys before and after RoPE swapped (was found only by a crash)"),
    i51_m("knapsack-capacity-exclusive", "eval/knapsack.c",
          "    size_t W = (size_t)room + 1;", "    size_t W = (size_t)room;",
          "test_allocate", "the knapsack's capacity exclusive (was found only by a crash)"),
    # ---- issue 50's layer resume (eval/layer_resume.c) ----
    i50_m("resume-from-next-layer", "eval/layer_resume.c",
          "        if (r->x[l]) memcpy(held_rows(r, l, pos), s->x, rows);\n        forward_layer(m, s, kv, l, T, pos, logits_from);",
          "        forward_layer(m, s, kv, l, T, pos, logits_from);\n        if (r->x[l]) memcpy(held_rows(r, l, pos), s->x, rows);",
          "test_layer_resume", "a scheme of layer L starts from layer L + 1's input (held after the layer, not before)"),
    i50_m("resume-from-previous-layer", "eval/layer_resume.c",
          "        if (r->x[l]) memcpy(held_rows(r, l, pos), s->x, rows);",
          "        if (r->x[l + 1]) memcpy(held_rows(r, l + 1, pos), s->x, rows);",
          "test_layer_resume", "a scheme of layer L starts from layer L - 1's input"),
    i50_m("resume-other-window", "eval/perplexity.c",
          "    if (!ps->resume) forward(ps->m, &ps->s, kv, toks, T, pos, from);",
          "    if (!ps->resume || (scheme < 0 && ps->win.first_target != 1)) forward(ps->m, &ps->s, kv, toks, T, pos, from);",
          "test_layer_resume", "the residual stream held in the first window only: later windows start from its states"),
    i50_m("resume-keys-only", "eval/layer_resume.c",
          "if (!kv_spec_is_fp32(kv_layered_at(&scheme->k, l)) || !kv_spec_is_fp32(kv_layered_at(&scheme->v, l)))",
          "if (!kv_spec_is_fp32(kv_layered_at(&scheme->k, l)))",
          "test_layer_resume", "a scheme's first non-fp32 layer looked for in its keys only"),
    i50_m("resume-choose-weights-shifted", "eval/layer_resume.c",
          "                below += w[nx - 1];", "                below += w[nx];",
          "test_layer_resume", "the held-layer choice under a budget adds the next candidate's schemes"),
    i50_m("resume-batch-offset", "eval/layer_resume.c",
          "return r->x[l] + (size_t)pos * r->dim; }", "return r->x[l] + (size_t)(pos > 0 ? pos - 1 : 0) * r->dim; }",
          "test_layer_resume", "held rows of a batch one position early"),
    # ---- issue 50: keys and values with their own candidate lists ----
    i50_m("sens-index-sides-swapped", "eval/sensitivity_grid.h",
          "side == SENS_VALUES ? g->n_layers * g->n_candidates[SENS_KEYS] : 0;",
          "side == SENS_VALUES ? g->n_layers * g->n_candidates[SENS_VALUES] : 0;",
          "test_allocate", "the value cells placed after layers x the values' count, not the keys'"),
    i50_m("knapsack-group-choices-ignored", "eval/knapsack.c",
          "        int n = choices_of(k, g);\n        for (size_t w = 0; w < W; w++) {",
          "        int n = C;\n        for (size_t w = 0; w < W; w++) {",
          "test_allocate", "the knapsack chooses from a whole row, past a group's own count of choices"),
    i50_m("alloc-side-takes-other-list", "eval/allocate.c",
          "        a->group_choices[g] = a->n_cand[side];", "        a->group_choices[g] = C;",
          "tests/test_cli_allocate.sh", "a side with fewer candidates may choose past its own list"),
    # ---- stop 54's survivors: the ordered fit's exactness guards, compress's input prefix, the entropy flag ----
    s54_m("lloyd-least-nonzero-positive-only", "quant/lloyd_ordered.c",
          "    if (a > lo) least = -values[a - 1];\n", "",
          "test_lloyd_ordered", "a cell's least nonzero magnitude looked for on its positive side only"),
    s54_m("lloyd-least-nonzero-negative-only", "quant/lloyd_ordered.c",
          "    if (z < hi && values[z] < least) least = values[z];\n", "",
          "test_lloyd_ordered", "a cell's least nonzero magnitude looked for on its negative side only"),
    s54_m("lloyd-ulp-twice", "quant/lloyd_ordered.c",
          "(uint64_t)((field > 0 ? field : 1) - 150 + 1023) << 52;", "(uint64_t)((field > 0 ? field : 1) - 149 + 1023) << 52;",
          "test_lloyd_ordered", "ulp_of twice the float32 ulp"),
    s54_m("lloyd-bounds-no-float32-margin", "quant/lloyd_bounded.c",
          "#define BOUND_RELATIVE 0x1p-18\n#define BOUND_ABSOLUTE 0x1p-120\n",
          "#define BOUND_RELATIVE 0.0\n#define BOUND_ABSOLUTE 0.0\n",
          "test_lloyd_bounded", "Hamerly's bounds without float32's rounding, in upper_from, lower_from and keeps_code"),
    s54_m("compress-input-not-named", "eval/kvreport.c",
          "    o.source = run->input;\n", "",
          "tests/test_cli_kv.sh", "compress's errors of the cache against the schemes no longer name the input"),
    i50_m("calibrate-fits-32", "eval/calibrate.h",
          "#define CALIB_MAX_FITS 48", "#define CALIB_MAX_FITS 32",
          "tests/test_cli_calib.sh", "calibrate takes 32 --fit again (the bundled calibrations have 35)"),
    s54_m("kv-file-bytes-no-entropy", "tests/kv_file_bytes.h",
          "NULL, entropy, NULL};", "NULL, 0, NULL};",
          "test_entropy_file", "the tests' compressed files made without the entropy flag they were asked for"),
    # ---- issue 50 item 7: +prerope pca keys decoded at bf16 working precision for attention's bf16 path ----
    i50_m("pca-bf16-read-exact", "model/kvcache.c",
          "bf16 ? KV_BLOCK_DECODED_T64_BF16 : KV_BLOCK_DECODED_T64", "KV_BLOCK_DECODED_T64",
          "test_kvcache", "kv_cache_rows_t64 reads +prerope blocks exactly for bf16 pairs too (the bf16 form never taken)"),
    i50_m("pca-bf16-basis-pair-swapped", "quant/codec_pca_blocks.c",
          "bf16_pairs16(v0, v1)", "bf16_pairs16(v1, v0)",
          "test_pca_blocks", "the bf16 form pairs each component's coefficient with its partner's basis column"),
    i50_m("pca-bf16-past-count", "quant/codec_pca_blocks.c",
          "_mm512_maskz_mov_ps(left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1u), acc[j][q])", "acc[j][q]",
          "test_pca_blocks", "the bf16 form leaves positions past count at the mean instead of 0"),
    i50_m("pca-bf16-odd-pair-dropped", "quant/codec_pca_blocks.c",
          "pairs = (cr->count + 1) / 2, live", "pairs = cr->count / 2, live",
          "test_pca_blocks", "the bf16 form drops an odd count's last stored component"),
    i50_m("pca-bf16-no-weights", "quant/codec_pca_blocks.c",
          "_mm512_maskz_div_ps(keep, _mm512_set1_ps(1.0f), root)", "_mm512_set1_ps(1.0f)",
          "test_pca_blocks", "the bf16 form ignores +aw's 1 / sqrt(w)"),
    # ---- stop 55's CI failure: two sweeps on one new --out-dir, the one losing mkdir's race refused wrongly ----
    s55_m("mkdir-race-refused", "model/formats/fileio.c",
          "    if (made_errno == EEXIST && stat(path, &sb) == 0)\n",
          "    if (made_errno == EEXIST && stat(path, &sb) == 0 && 0)\n",
          "test_regressions", "make_directory fails when another process made the directory first"),
]

# ---- running ----

EXCLUDE_TOP = {".git", "build", "run", "__pycache__"}


def scratch_default():
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    return os.path.join(tempfile.gettempdir(), "kvq-mutate-" + user)


def source_files(root):
    """Paths (relative) of the tree's files, without .git, build outputs and caches."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in EXCLUDE_TOP]
            filenames = [f for f in filenames if f not in EXCLUDE_TOP]
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            out.append(os.path.normpath(os.path.join(rel, f)))
    return out


def sync_tree(src, dst):
    """Makes dst's sources equal src's: a file whose bytes differ is copied (so it gets a new
    mtime and make rebuilds from it), a file gone from src is removed from dst."""
    want = set(source_files(src))
    copied = 0
    for rel in sorted(want):
        s, d = os.path.join(src, rel), os.path.join(dst, rel)
        with open(s, "rb") as f:
            data = f.read()
        try:
            with open(d, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(d), exist_ok=True)
            with open(d, "wb") as f:
                f.write(data)
            shutil.copymode(s, d)
            copied += 1
    for rel in source_files(dst):
        if rel not in want:
            os.remove(os.path.join(dst, rel))
    return copied


def make(tree, cfg, targets, log):
    cmd = ["make", "-j2"] + cfg["make_args"] + targets
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        return subprocess.call(cmd, cwd=tree, stdout=f, stderr=subprocess.STDOUT) == 0


def test_targets(test, cfg):
    """What make builds for a test, and the command that runs it."""
    if test.endswith(".sh"):    # test_chart: the shell tests' SVG check (cli_helpers.sh, check_svg)
        return ["run", os.path.join(cfg["build"], "tests", "test_chart")], ["sh", test]
    binary = os.path.join(cfg["build"], "tests", test)
    return [binary], [binary]


def run_test(tree, cfg, test, log, timeout):
    """(caught, seconds, first failing check or why) of one test run in tree."""
    _, cmd = test_targets(test, cfg)
    env = dict(os.environ, KVQ_TEST_BIN=os.path.join(cfg["build"], "tests"))
    t0 = time.time()
    # its own process group, so that a hung script's children (./run) are stopped with it
    p = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        raw, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raw, _ = p.communicate()
        raw += b"\n(timed out)\n"
        rc = None
    out = raw.decode("utf-8", "replace")
    seconds = time.time() - t0
    with open(log, "a") as f:
        f.write(out)
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    if fails:
        return True, seconds, fails[0][5:]
    if rc is None:
        return True, seconds, "no FAIL line: still running after %.0f s (a hang), killed" % timeout
    if rc < 0:
        return True, seconds, "no FAIL line: killed by signal %d (%s)" % (-rc, signal_name(-rc))
    if rc != 0:
        return True, seconds, "no FAIL line: exit status %d" % rc
    return False, seconds, ""


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "?"


def line_of(text, snippet):
    return text[: text.index(snippet)].count("\n") + 1


def locate(m, tree):
    """(line, None) where m's snippet is, or (None, why) when it is not there exactly once."""
    with open(os.path.join(tree, m.path)) as f:
        text = f.read()
    n = text.count(m.old)
    if n != 1:
        return None, "the snippet occurs %d times in %s (the table needs updating)" % (n, m.path)
    return line_of(text, m.old), None


def mutate_and_test(m, tree, cfg, log, timeout):
    path = os.path.join(tree, m.path)
    with open(path, "rb") as f:
        original = f.read()
    text = original.decode()
    line, why = locate(m, tree)
    if why:
        return {"status": "stale", "line": None, "seconds": 0, "check": why}
    try:
        with open(path, "w") as f:
            f.write(text.replace(m.old, m.new))
        targets, _ = test_targets(m.test, cfg)
        if not make(tree, cfg, targets, log):
            return {"status": "build failed", "line": line, "seconds": 0, "check": "see " + log}
        caught, seconds, check = run_test(tree, cfg, m.test, log, timeout)
        return {"status": "caught" if caught else "SURVIVED", "line": line, "seconds": seconds, "check": check}
    finally:
        with open(path, "wb") as f:   # a new mtime: the next build recompiles the original
            f.write(original)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="mutations to run (see --list)")
    ap.add_argument("--all", action="store_true", help="run every mutation")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--markdown", action="store_true", help="print the results as a markdown table")
    ap.add_argument("--scratch", default=scratch_default(), help="the scratch copy of the tree (kept between runs)")
    ap.add_argument("--sanitize", action="store_true", help="build with SANITIZE=1 (into build/san)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of each test")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds a mutated test may run (default: 10 x its unmutated run, at least 120)")
    args = ap.parse_args()

    by_name = {m.name: m for m in MUTATIONS}
    if len(by_name) != len(MUTATIONS):
        sys.exit("mutate.py: two mutations share a name")
    if args.list:
        for m in MUTATIONS:
            line, why = locate(m, ROOT)
            print("%-28s %-22s %-24s %s%s" % (m.name, "%s:%s" % (m.path, line or "?"), m.test, m.what,
                                             "  [%s]" % why if why else ""))
        return 0
    chosen = MUTATIONS if args.all else []
    for n in args.names:
        if n not in by_name:
            sys.exit("mutate.py: no mutation named '%s' (see --list)" % n)
        chosen.append(by_name[n])
    if not chosen:
        ap.print_usage()
        return 2

    cfg = {"build": "build/san" if args.sanitize else "build/rel"}
    cfg["make_args"] = (["SANITIZE=1"] if args.sanitize else []) + ["BUILD=" + cfg["build"]]
    tree = os.path.join(args.scratch, "tree")
    logs = os.path.join(args.scratch, "logs")
    os.makedirs(tree, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    copied = sync_tree(ROOT, tree)
    print("scratch tree %s (%d files updated from %s)" % (tree, copied, ROOT), flush=True)

    baseline = {}
    limits = {}   # seconds a mutated test may run, from its unmutated run
    results = []
    for m in chosen:
        log = os.path.join(logs, m.name + ".log")
        open(log, "w").close()
        if m.test not in baseline and not args.no_baseline:
            blog = os.path.join(logs, "baseline-" + os.path.basename(m.test) + ".log")
            open(blog, "w").close()
            ok = make(tree, cfg, test_targets(m.test, cfg)[0], blog)
            caught, secs, check = run_test(tree, cfg, m.test, blog, 7200) if ok else (True, 0, "build failed")
            baseline[m.test] = not caught
            limits[m.test] = args.timeout or max(120.0, 10 * secs)
            print("baseline %-26s %s in %.1f s%s" % (m.test, "passes" if not caught else "FAILS", secs,
                                                     "" if not caught else ": " + check), flush=True)
        if m.test in baseline and not baseline[m.test]:
            r = {"status": "baseline fails", "line": None, "seconds": 0, "check": "the unmutated test fails"}
        else:
            r = mutate_and_test(m, tree, cfg, log, limits.get(m.test, args.timeout or 3600))
        results.append((m, r))
        print("%-28s %-26s %-9s %-26s %7.1f s  %s" % (m.name, "%s:%s" % (m.path, r["line"] or "?"), r["status"],
                                                      m.test, r["seconds"], r["check"][:160]), flush=True)

    if args.markdown:
        print("\n| mutation | file:line | caught by | first failing check | seconds |")
        print("|---|---|---|---|---|")
        for m, r in results:
            check = r["check"]
            if len(check) > 110:
                check = check[:107] + "..."
            check, what = check.replace("|", "\\|"), m.what.replace("|", "\\|")
            status = "" if r["status"] == "caught" else " **%s**" % r["status"]
            print("| `%s`: %s | `%s:%s` | `%s`%s | %s | %.0f |" % (m.name, what, m.path, r["line"] or "?",
                                                                  m.test, status, check, r["seconds"]))
    bad = [m.name for m, r in results if r["status"] != "caught"]
    print("%d of %d mutations caught%s" % (len(results) - len(bad), len(results),
                                          "; not caught: " + " ".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
