/* model/config.c: parse and sanity-check a Hugging Face Llama config.json.
 * Only the fields the forward pass needs are read; anything this runtime cannot
 * run (another architecture, RoPE scaling, attention bias) is refused by name. */
#include "model/config.h"
#include "model/formats/json.h"
#include "model/formats/fileio.h"
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <float.h>

/* A positive integer field that must be present. */
static int get_int(const JsonValue *root, const char *key, int *out, const char *path, Error *err) {
    const JsonValue *v = json_get(root, key);
    if (!v) return error_set(err, "%s: missing \"%s\"", path, key);
    if (v->type != JSON_NUMBER || !v->is_uint || v->uint_value < 1 || v->uint_value > (1u << 30))
        return error_set(err, "%s: \"%s\" must be a positive integer", path, key);
    *out = (int)v->uint_value;
    return 0;
}

/* A positive number field with a default when absent. */
static int get_float(const JsonValue *root, const char *key, float dflt, float *out,
                     const char *path, Error *err) {
    const JsonValue *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) { *out = dflt; return 0; }
    /* Checked in float range: 1e300 is a finite double but no float (converting
     * it is undefined in ISO C), and 1e-85 rounds to float 0 (found by
     * tests/fuzz/fuzz_config). */
    int in_range = v->type == JSON_NUMBER && v->number > 0 && v->number <= FLT_MAX;
    float f = in_range ? (float)v->number : 0.0f;
    if (!(f > 0))
        return error_set(err, "%s: \"%s\" must be a positive number within float range", path, key);
    *out = f;
    return 0;
}

/* Refuses features this forward pass does not implement. */
static int check_supported(const JsonValue *root, const char *path, Error *err) {
    const JsonValue *arch = json_get(root, "architectures");
    if (arch && arch->type == JSON_ARRAY && arch->count > 0 && arch->items[0].type == JSON_STRING &&
        strcmp(arch->items[0].string, "LlamaForCausalLM") != 0) {
        char shown[72];
        return error_set(err, "%s: architecture %s is not supported (LlamaForCausalLM only)", path,
                         error_shown(arch->items[0].string, shown));
    }
    const JsonValue *rs = json_get(root, "rope_scaling");
    if (rs && rs->type != JSON_NULL)
        return error_set(err, "%s: rope_scaling is not supported", path);
    const JsonValue *bias = json_get(root, "attention_bias");
    if (bias && bias->type == JSON_BOOL && bias->boolean)
        return error_set(err, "%s: attention_bias is not supported", path);
    const JsonValue *act = json_get(root, "hidden_act");
    if (act && (act->type != JSON_STRING || strcmp(act->string, "silu") != 0))
        return error_set(err, "%s: hidden_act must be \"silu\"", path);
    return 0;
}

static int check_shape(Config *c, const char *path, Error *err) {
    if (c->dim % c->n_heads != 0)
        return error_set(err, "%s: hidden_size %d is not a multiple of num_attention_heads %d",
                         path, c->dim, c->n_heads);
    c->head_dim = c->dim / c->n_heads;
    if (c->head_dim % 2 != 0)
        return error_set(err, "%s: head size %d must be even for RoPE", path, c->head_dim);
    if (c->n_heads % c->n_kv_heads != 0)
        return error_set(err, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                         path, c->n_heads, c->n_kv_heads);
    return 0;
}

/* Parses config text[0..len); `path` only names it in messages. Split from
 * config_load so the fuzzer (tests/fuzz/fuzz_config.c) can drive it from memory. */
int config_parse(Config *c, const char *text, size_t len, const char *path, Error *err) {
    memset(c, 0, sizeof *c);
    Error jerr;
    JsonValue *root = json_parse(text, len, &jerr);
    if (!root) return error_set(err, "%s: invalid JSON: %s", path, jerr.msg);
    int rc = -1;
    if (root->type != JSON_OBJECT) { error_set(err, "%s: not a JSON object", path); goto done; }
    if (check_supported(root, path, err)) goto done;
    if (get_int(root, "hidden_size", &c->dim, path, err) ||
        get_int(root, "intermediate_size", &c->hidden_dim, path, err) ||
        get_int(root, "num_hidden_layers", &c->n_layers, path, err) ||
        get_int(root, "num_attention_heads", &c->n_heads, path, err) ||
        get_int(root, "vocab_size", &c->vocab_size, path, err) ||
        get_int(root, "max_position_embeddings", &c->max_seq_len, path, err))
        goto done;
    /* Older configs omit num_key_value_heads: that means one KV head per query head. */
    if (json_get(root, "num_key_value_heads")) {
        if (get_int(root, "num_key_value_heads", &c->n_kv_heads, path, err)) goto done;
    } else {
        c->n_kv_heads = c->n_heads;
    }
    if (get_float(root, "rms_norm_eps", 1e-6f, &c->norm_eps, path, err) ||
        get_float(root, "rope_theta", 10000.0f, &c->rope_theta, path, err))
        goto done;
    const JsonValue *tie = json_get(root, "tie_word_embeddings");
    c->tied_embeddings = tie && tie->type == JSON_BOOL && tie->boolean;
    const JsonValue *bos = json_get(root, "bos_token_id"), *eos = json_get(root, "eos_token_id");
    c->bos_id = bos && bos->type == JSON_NUMBER && bos->is_uint ? (int)bos->uint_value : 1;
    c->eos_id = eos && eos->type == JSON_NUMBER && eos->is_uint ? (int)eos->uint_value : 2;
    rc = check_shape(c, path, err);
done:
    json_free(root);
    return rc;
}

int config_load(Config *c, const char *path, Error *err) {
    memset(c, 0, sizeof *c);
    size_t len;
    char *text = read_whole_file(path, 1u << 20, &len, err);
    if (!text) return -1;
    int rc = config_parse(c, text, len, path, err);
    free(text);
    return rc;
}
