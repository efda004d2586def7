/* eval/bench_model.c: ./run bench's model and report (see eval/bench_model.h). */
#include "eval/bench_model.h"
#include "eval/calibration.h"
#include "model/formats/fileio.h"
#include "model/modeldir.h"
#include "model/formats/sha256.h"
#include <string.h>

#define TINYLLAMA_CONFIG "data/tinyllama-1.1b-chat-v1.0/config.json"

int bench_parse_dtype(const char *name, DType *dtype) {
    if (!strcmp(name, "f32") || !strcmp(name, "F32")) *dtype = DT_F32;
    else if (!strcmp(name, "f16") || !strcmp(name, "F16")) *dtype = DT_F16;
    else if (!strcmp(name, "bf16") || !strcmp(name, "BF16")) *dtype = DT_BF16;
    else return -1;
    return 0;
}

#define RANDOM_SEED 1234

/* The recipe of random weights as one string hashed: what makes them what they are. */
static int random_sha256(const char *config, DType dtype, char sha256[65], Error *err) {
    char config_sha[65], recipe[256];
    if (sha256_file_hex(config, config_sha, err)) return -1;
    snprintf(recipe, sizeof recipe, "kvq random weights: seed %d, %s, config.json sha256 %s", RANDOM_SEED,
             dtype_name(dtype), config_sha);
    sha256_hex(recipe, strlen(recipe), sha256);
    return 0;
}

int bench_model_load(Model *m, const char *dir, const char *random, DType dtype, char *name, size_t name_len,
                     char sha256[65], Error *err) {
    memset(m, 0, sizeof *m);
    if (!random) {
        snprintf(name, name_len, "%s", dir);
        if (sha256 && modeldir_sha256(dir, sha256, err)) return -1;
        return model_load(m, dir, err);
    }
    char config[4096];
    size_t len = strlen(random);
    if (!strcmp(random, "tinyllama")) snprintf(config, sizeof config, "%s", TINYLLAMA_CONFIG);
    else if (len > 5 && !strcmp(random + len - 5, ".json")) snprintf(config, sizeof config, "%s", random);
    else snprintf(config, sizeof config, "%s/config.json", random);
    snprintf(name, name_len, "random %s", random);
    if (sha256 && random_sha256(config, dtype, sha256, err)) return -1;
    return model_init_random(m, config, dtype, RANDOM_SEED, err);
}

int bench_report(const char *dir, const char *random, DType dtype, const char *precision, const BenchOptions *o,
                 int json, FILE *out, Error *err) {
    Model m;
    BenchResult r;
    KvCacheRecipe recipe;
    char name[256], sha256[65];
    /* random weights have no directory, so no default calibration: with --calib their identity is
     * their recipe's, computed here */
    int random_identity = random && o->kv.calib_path;
    if (bench_model_load(&m, dir, random, dtype, name, sizeof name, random_identity ? sha256 : NULL, err)) return -1;
    m.precision = strcmp(precision, "exact") ? MATMUL_BF16_ACT : MATMUL_EXACT;
    int long_fitted = kv_layered_is_fitted(&o->long_k) || kv_layered_is_fitted(&o->long_v);
    int rc = kv_cache_recipe_resolve(&recipe, &o->kv, long_fitted, dir, random_identity ? sha256 : NULL, &m, err);
    if (rc == 0) rc = bench_run(&m, name, o, &recipe.scheme, &r, err);
    kv_cache_recipe_free(&recipe);
    model_free(&m);
    if (rc) return -1;
    if (json) bench_print_json(out, &r);
    else bench_print_text(out, &r);
    return 0;
}
