/* eval/bench_model.c: ./run bench's model and report (see eval/bench_model.h). */
#include "eval/bench_model.h"
#include <string.h>

#define TINYLLAMA_CONFIG "data/tinyllama-1.1b-chat-v1.0/config.json"

int bench_parse_dtype(const char *name, DType *dtype) {
    if (!strcmp(name, "f32") || !strcmp(name, "F32")) *dtype = DT_F32;
    else if (!strcmp(name, "f16") || !strcmp(name, "F16")) *dtype = DT_F16;
    else if (!strcmp(name, "bf16") || !strcmp(name, "BF16")) *dtype = DT_BF16;
    else return -1;
    return 0;
}

/* name: how the report names the model. */
static int load(Model *m, const char *dir, const char *random, DType dtype, char *name, size_t n, Error *err) {
    if (!random) {
        snprintf(name, n, "%s", dir);
        return model_load(m, dir, err);
    }
    char config[4096];
    size_t len = strlen(random);
    if (!strcmp(random, "tinyllama")) snprintf(config, sizeof config, "%s", TINYLLAMA_CONFIG);
    else if (len > 5 && !strcmp(random + len - 5, ".json")) snprintf(config, sizeof config, "%s", random);
    else snprintf(config, sizeof config, "%s/config.json", random);
    snprintf(name, n, "random %s", random);
    /* seed 1234: every run times the same weights */
    return model_init_random(m, config, dtype, 1234, err);
}

int bench_report(const char *dir, const char *random, DType dtype, const char *precision, const BenchOptions *o,
                 int json, FILE *out, Error *err) {
    Model m;
    BenchResult r;
    char name[256];
    if (load(&m, dir, random, dtype, name, sizeof name, err)) return -1;
    m.precision = strcmp(precision, "exact") ? MATMUL_BF16_ACT : MATMUL_EXACT;
    int rc = bench_run(&m, name, o, &r, err);
    model_free(&m);
    if (rc) return -1;
    if (json) bench_print_json(out, &r);
    else bench_print_text(out, &r);
    return 0;
}
