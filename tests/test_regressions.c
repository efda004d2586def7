/* tests/test_regressions.c: inputs the fuzzers (tests/fuzz/) or clang's static analyzer
 * found to break the library, kept as plain tests so `make test` guards the fixes without
 * clang or libFuzzer. Each case says what found it and what went wrong. */
#include <string.h>
#include "model/config.h"
#include "eval/report.h"
#include "eval/sweep.h"
#include "tests/test.h"

/* A config with every required field; `extra` is spliced in before the closing brace. */
static int parse_config(const char *extra, Config *c, Error *err) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":5,"
             "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512,"
             "\"max_position_embeddings\":512%s}", extra);
    err->msg[0] = '\0';
    return config_parse(c, text, strlen(text), "reg/config.json", err);
}

/* fuzz_config: "rms_norm_eps": 1e-85 is a positive finite double that becomes
 * float 0 (a division by zero-ish eps in rmsnorm); 1e300 becomes inf. Both were
 * accepted; they must be refused with a message naming the file and the field. */
static void test_config_float_range(void) {
    static const char *const bad[][2] = {
        {",\"rms_norm_eps\":1e-85", "rms_norm_eps"}, {",\"rms_norm_eps\":1e300", "rms_norm_eps"},
        {",\"rope_theta\":1e-60", "rope_theta"},     {",\"rope_theta\":3.5e38", "rope_theta"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Config c;
        Error err;
        int rc = parse_config(bad[i][0], &c, &err);
        char name[128];
        snprintf(name, sizeof name, "config refuses%s", bad[i][0]);
        check(rc == -1 && strstr(err.msg, "reg/config.json: ") == err.msg && strstr(err.msg, bad[i][1]), name,
              "rc %d, message '%s'", rc, err.msg);
    }
    Config c;
    Error err;
    int rc = parse_config(",\"rms_norm_eps\":1e-30,\"rope_theta\":3.0e38", &c, &err);
    check(rc == 0 && c.norm_eps == 1e-30f && c.rope_theta == 3.0e38f, "config keeps small and large floats in range",
          "rc %d '%s'", rc, err.msg);
    rc = parse_config("", &c, &err);
    check(rc == 0 && c.norm_eps == 1e-6f && c.rope_theta == 10000.0f && c.head_dim == 8 && c.n_kv_heads == 4,
          "config defaults", "rc %d '%s'", rc, err.msg);
}

/* clang --analyze: sweep_merge with no directories read all[0] of a zero-length array (run.c
 * refuses an empty list first, but the library must not rely on it); ppl_merge_files returned
 * an empty report as if it were a run. Both must refuse. */
static void test_merge_nothing(void) {
    SweepSettings s;
    SweepTotals t;
    PplReport r;
    Error err = {{0}};
    int rc = sweep_merge(NULL, 0, &s, &t, &err);
    check(rc != 0 && strstr(err.msg, "no shard"), "sweep_merge of no shards is refused", "rc %d, '%s'", rc, err.msg);
    err.msg[0] = '\0';
    rc = ppl_merge_files(NULL, 0, &r, &err);
    check(rc != 0 && strstr(err.msg, "no shard"), "ppl_merge_files of no shards is refused", "rc %d, '%s'", rc,
          err.msg);
}

int main(void) {
    test_config_float_range();
    test_merge_nothing();
    return test_exit_code();
}
