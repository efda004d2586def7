/* tests/test_oom.c: running out of memory for real, without failure-injection state in the
 * library. Each run happens in a child process whose address space is capped (setrlimit
 * RLIMIT_AS) a little above what it already uses; the cap is raised 16 KiB at a time until the
 * run succeeds, so the allocations that need new memory fail one after another. Every capped
 * run must either fail cleanly (-1 and a message about memory) or give exactly the uncapped
 * result: never crash, never compute something else quietly. Jobs: a compared perplexity
 * evaluation (llama.cpp protocol: RunState, KV caches, workspace) and loading a model whose
 * tensors must be copied to be aligned (the mapping, the copy), then its logits. Which sites a
 * cap reaches depends on the C library's heap (small blocks mostly come from memory it
 * already holds), so this is a sweep for crashes and wrong results, not a proof for each
 * allocation. Not under ASan, whose shadow memory needs terabytes of address space. */
#define _DEFAULT_SOURCE   /* sbrk */
#include "tests/test.h"
#include "eval/perplexity.h"
#include "model/formats/fileio.h"
#include "model/model.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define MODEL_DIR "data/models/stories260K"
#define N_TOKENS 192
#define STEP_BYTES (16u << 10)
#define MAX_STEPS 2048

/* A job: 0 and a result, or -1 with err set. Runs in a child. */
typedef int (*Job)(const void *ctx, double *result, Error *err);

typedef struct {
    const Model *m;
    const int *tokens;
} PplJob;

static int run_ppl(const void *ctx, double *result, Error *err) {
    const PplJob *j = ctx;
    PplOptions o = {.protocol = PPL_LLAMACPP, .ctx = 64, .batch = 64, .shard_count = 1,
                    .scheme = NULL, .compare = 1};   /* fp32 */
    PplResult r;
    if (ppl_evaluate(j->m, j->tokens, N_TOKENS, &o, &r, err)) return -1;
    *result = r.sums.nll_sum + 1e3 * r.sums.kl_sum + (double)r.sums.top1_agree + (double)r.sums.scored;
    return 0;
}

/* Loads the model at path (ctx) and sums the logits of a few tokens. */
static int run_load(const void *ctx, double *result, Error *err) {
    Model m;
    if (model_load_files(&m, MODEL_DIR "/config.json", ctx, err)) return -1;
    int tokens[5] = {1, 403, 9, 77, 300};
    RunState s;
    KvCache kv;
    int rc = runstate_init(&s, &m.config, 5, err);
    if (rc == 0) {
        rc = kv_cache_init(&kv, &m.config, 5, 5, NULL, NULL, err);
        if (rc == 0) {
            forward(&m, &s, &kv, tokens, 5, 0, 0);
            double sum = 0;
            for (int i = 0; i < 5 * m.config.vocab_size; i++) sum += s.logits[i];
            *result = sum;
            kv_cache_free(&kv);
        }
        runstate_free(&s);
    }
    model_free(&m);
    return rc;
}

/* Child outcomes, as exit statuses. */
enum { RAN_OK = 0, RAN_CLEAN_ERROR = 3, RAN_WRONG = 4, RAN_BAD_ERROR = 5, RAN_NO_LIMIT = 6, RAN_RUNTIME_EXIT = 7 };

/* The child leaves by _exit only: an exit() is the OpenMP runtime's, which ends the process
 * when it cannot allocate its own bookkeeping (libgomp: "Out of memory allocating ..."). */
static void runtime_exit(void) { _exit(RAN_RUNTIME_EXIT); }

static size_t address_space_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Takes every free heap block of 2 KiB or more (the parent's hold hundreds of KiB after
 * loading a model), so that the job's allocations need new memory, which the cap limits,
 * instead of reusing those: until an allocation has to move the program break. */
static void use_up_heap(void) {
    for (int i = 0; i < 1 << 16; i++) {
        void *end = sbrk(0);
        char *p = malloc(2048);
        if (!p || sbrk(0) != end) {
            free(p);
            return;
        }
    }
}

/* In the child: caps the address space at what it uses + extra (none when extra is SIZE_MAX),
 * runs the job and exits with its outcome; an uncapped run writes its result to fd. */
static void child(Job job, const void *ctx, size_t extra, double expected, int fd) {
    atexit(runtime_exit);
#ifdef _OPENMP
    /* One thread: libgomp creates worker threads (and maps their stacks) whenever a region
     * wants more than the last one had, and exits the process when it cannot; that is
     * OpenMP's behaviour, not kvq's allocation paths, which are what this test is about. */
    omp_set_num_threads(1);
#endif
    use_up_heap();
    if (extra != SIZE_MAX) {
        size_t now = address_space_now();
        struct rlimit lim = {now + extra, now + extra};
        if (now == 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(RAN_NO_LIMIT);
    }
    double result = 0;
    Error err = {{0}};
    if (job(ctx, &result, &err) != 0) {
        if (strstr(err.msg, "memory")) _exit(RAN_CLEAN_ERROR);
        fprintf(stderr, "error without a memory message: %s\n", err.msg);
        _exit(RAN_BAD_ERROR);
    }
    if (extra == SIZE_MAX) _exit(write(fd, &result, sizeof result) == sizeof result ? RAN_OK : RAN_NO_LIMIT);
    if (result != expected) fprintf(stderr, "result %.17g, uncapped %.17g\n", result, expected);
    _exit(result == expected ? RAN_OK : RAN_WRONG);
}

/* One child's outcome: its exit status, or 128 + the signal that killed it. */
static int run_child(Job job, const void *ctx, size_t extra, double expected, int fd) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) child(job, ctx, extra, expected, fd);
    int status;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void sweep(const char *label, Job job, const void *ctx) {
    char name[128];
    int fds[2];
    double expected = 0;
    if (pipe(fds) != 0) return;
    int first = run_child(job, ctx, SIZE_MAX, 0, fds[1]);
    int got = first == RAN_OK && read(fds[0], &expected, sizeof expected) == sizeof expected;
    close(fds[0]);
    close(fds[1]);
    snprintf(name, sizeof name, "oom %s: runs without a cap", label);
    if (!check(got, name, "child exit %d", first)) return;
    int clean = 0, bad = 0, worst = 0, step = 0, outcome = -1;
    for (; step < MAX_STEPS && outcome != RAN_OK; step++) {
        outcome = run_child(job, ctx, (size_t)step * STEP_BYTES, expected, -1);
        if (outcome == RAN_CLEAN_ERROR) clean++;
        else if (outcome != RAN_OK && outcome != RAN_RUNTIME_EXIT && !bad++) worst = outcome;
    }
    snprintf(name, sizeof name, "oom %s: every capped run fails cleanly or gives the same result", label);
    check(bad == 0, name, "%d of %d runs crashed or went wrong (first: exit %d; 4 wrong result, 5 bad message, "
          "6 no cap, > 128 signal)", bad, step, worst);
    snprintf(name, sizeof name, "oom %s: the caps hit allocations, then the run fits", label);
    check(clean > 0 && outcome == RAN_OK, name, "%d clean failures in %d steps, last outcome %d", clean, step, outcome);
}

/* path's file with the JSON header one byte longer, so every tensor is misaligned. */
static int write_padded(const char *src, const char *dst) {
    size_t len;
    Error err;
    unsigned char *b = (unsigned char *)read_whole_file(src, 16u << 20, &len, &err);
    uint64_t n = 0;
    for (int i = 0; b && len >= 8 && i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    FILE *f = b && len >= 8 && n <= len - 8 ? fopen(dst, "wb") : NULL;
    int ok = f != NULL;
    if (ok) {
        for (int i = 0; i < 8; i++) ok = ok && fputc((int)(((n + 1) >> (8 * i)) & 0xff), f) != EOF;
        ok = ok && fwrite(b + 8, 1, n, f) == n && fputc(' ', f) == ' ' &&
             fwrite(b + 8 + n, 1, len - 8 - n, f) == len - 8 - n;
        ok = fclose(f) == 0 && ok;
    }
    free(b);
    return ok ? 0 : -1;
}

int main(void) {
#ifdef UNDER_ASAN
    printf("test_oom: skipped under ASan (address-space caps and shadow memory do not mix)\n");
    return 0;
#else
    Model m;
    Error err;
    if (!check(model_load(&m, MODEL_DIR, &err) == 0, "oom setup: model loads", "%s", err.msg)) return test_exit_code();
    int tokens[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) tokens[i] = (int)((7919u * (unsigned)i + 11u) % (unsigned)m.config.vocab_size);
    PplJob pj = {&m, tokens};
    sweep("ppl llama.cpp protocol", run_ppl, &pj);
    model_free(&m);

    char padded[96];
    snprintf(padded, sizeof padded, "build/test-oom-padded-%ld.safetensors", (long)getpid());
    if (check(write_padded(MODEL_DIR "/model.safetensors", padded) == 0, "oom setup: padded model written", "%s", padded))
        sweep("load of a misaligned model", run_load, padded);
    unlink(padded);
    return test_exit_code();
#endif
}
