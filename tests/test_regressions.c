/* tests/test_regressions.c: inputs the fuzzers (tests/fuzz/), clang's static analyzer or a
 * CI run found to break the library, kept as plain tests so `make test` guards the fixes without
 * clang or libFuzzer. Each case says what found it and what went wrong. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "model/config.h"
#include "model/formats/fileio.h"
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

/* CI (stop 55's run of tests/test_cli_data_safety.sh): two sweeps started together on one new
 * --out-dir both found no directory, and the one whose mkdir lost the race failed "cannot create the
 * directory (File exists)" instead of reaching the lock that names the running sweep's pid.
 * make_directory must succeed for every one of several processes released together on a fresh path. */
enum { RACE_ROUNDS = 150, RACE_PROCESSES = 4 };

static int race_one_round(const char *path) {
    int gate[2];
    if (pipe(gate) != 0) return -1;
    pid_t kids[RACE_PROCESSES];
    for (int i = 0; i < RACE_PROCESSES; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {   /* wait at the gate (EOF when the parent closes it), then race */
            char byte;
            close(gate[1]);
            (void)!read(gate[0], &byte, 1);
            Error err = {{0}};
            _exit(make_directory(path, &err) == 0 ? 0 : 1);
        }
    }
    close(gate[0]);
    close(gate[1]);
    int failed = 0;
    for (int i = 0; i < RACE_PROCESSES; i++) {
        int status = 0;
        if (kids[i] < 0 || waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) || WEXITSTATUS(status))
            failed++;
    }
    return failed;
}

static void test_make_directory_race(void) {
    char root[] = "/tmp/kvq-mkdir-race.XXXXXX";
    if (!mkdtemp(root)) { check(0, "make_directory race: temp directory", "mkdtemp failed"); return; }
    int failed = 0, rounds = 0;
    for (; rounds < RACE_ROUNDS && !failed; rounds++) {
        char path[64];
        snprintf(path, sizeof path, "%s/d%d", root, rounds);
        failed = race_one_round(path);
        rmdir(path);
    }
    rmdir(root);
    check(failed == 0, "make_directory: processes racing on one new path all succeed",
          "%d of %d failed in round %d", failed, RACE_PROCESSES, rounds);
    char file_path[] = "/tmp/kvq-mkdir-file.XXXXXX";
    int fd = mkstemp(file_path);
    Error err = {{0}};
    int rc = fd >= 0 ? make_directory(file_path, &err) : 0;
    if (fd >= 0) close(fd);
    unlink(file_path);
    check(rc != 0 && strstr(err.msg, "exists and is not a directory"), "make_directory refuses a file's path",
          "rc %d '%s'", rc, err.msg);
}

int main(void) {
    test_config_float_range();
    test_merge_nothing();
    test_make_directory_race();
    return test_exit_code();
}
