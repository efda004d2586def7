/* tests/fuzz/fuzz_kvfile.c: KV cache files and compressed KV files (kvq-compressed-2, -3, and -4 with
 * entropy-coded sections, seeds compressed-v4-*: packed
 * codec units and fp16 .full rows under LAYERED k_scheme / v_scheme) from hostile bytes.
 * The input is opened with st_open_memory, then read both as a plain cache
 * (kv_snapshot_from_safetensors) and as a compressed file (kv_decompress_safetensors).
 * An accepted file must give a geometry that matches its arrays: every value is read
 * (statistics) and checked against a small model's config; a rejection must give a
 * one-line message naming the file. */
#include <string.h>
#include "model/formats/compress.h"
#include "model/formats/kvfile.h"
#include "model/modeldir.h"
#include "tests/fuzz/fuzz.h"

#define NAME "fuzz-kv.safetensors"

static void check_error(const Error *err) {
    fuzz_assert(strstr(err->msg, NAME) && fuzz_one_line(err->msg), "bad error message");
}

/* Reads every value of an accepted snapshot and runs the config check on it. */
static void use_snapshot(const KvSnapshot *s) {
    fuzz_assert(s->n_layers > 0 && s->n_kv_heads > 0 && s->seq_len > 0 && s->head_dim > 0, "empty geometry accepted");
    KvStats stats;
    kv_snapshot_stats(s, &stats);
    fuzz_assert(stats.elements == 2 * kv_snapshot_layer_size(s) * (size_t)s->n_layers, "element count");
    Config c = {.dim = 64, .hidden_dim = 172, .n_layers = 5, .n_heads = 8, .n_kv_heads = 4, .head_dim = 8,
                .vocab_size = 512, .max_seq_len = 512, .norm_eps = 1e-5f, .rope_theta = 10000.0f};
    char report[256];
    int n = kv_snapshot_check_config(s, &c, report, sizeof report);
    fuzz_assert(n >= 0 && n <= 4 && strlen(report) < sizeof report, "check_config report");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors st;
    Error err = {{0}};
    if (st_open_memory(&st, data, size, NAME, &err) != 0) return 0;   /* fuzz_safetensors covers this */
    KvSnapshot s;
    err.msg[0] = '\0';
    if (kv_snapshot_from_safetensors(&st, &s, &err) == 0) {
        use_snapshot(&s);
        kv_snapshot_free(&s);
    } else {
        check_error(&err);
        fuzz_assert(s.k == NULL && s.v == NULL, "failed load left arrays allocated");
    }
    err.msg[0] = '\0';
    if (kv_decompress_safetensors(&st, NULL, &s, &err) == 0) {
        use_snapshot(&s);
        kv_snapshot_free(&s);
    } else {
        check_error(&err);
        fuzz_assert(s.k == NULL && s.v == NULL, "failed decompress left arrays allocated");
    }
    st_close(&st);
    return 0;
}
