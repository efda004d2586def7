/* tests/test_config.c: config.json checks (model/config.c) on hostile and unsupported
 * configs, through config_parse (from memory) and config_load (missing file). Each
 * refusal must be one line naming the file and the field or feature. */
#include <string.h>
#include "model/config.h"
#include "tests/test.h"

#define NAME "bad/config.json"

/* The stories260K config with `extra` spliced in after the opening brace; JSON keeps
 * the first of two equal keys (json_get), so `extra` overrides the defaults below. */
static int parse(const char *extra, Config *c, Error *err) {
    char text[2048];
    snprintf(text, sizeof text,
             "{%s\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":5,"
             "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":512,"
             "\"max_position_embeddings\":512,\"architectures\":[\"LlamaForCausalLM\"],"
             "\"hidden_act\":\"silu\",\"rope_scaling\":null,\"attention_bias\":false}", extra);
    err->msg[0] = '\0';
    return config_parse(c, text, strlen(text), NAME, err);
}

static void refused(const char *what, const char *extra, const char *want) {
    Config c;
    Error err;
    int rc = parse(extra, &c, &err);
    char name[160];
    snprintf(name, sizeof name, "config refuses %s", what);
    check(rc == -1 && strncmp(err.msg, NAME ": ", strlen(NAME) + 2) == 0 && !strchr(err.msg, '\n') &&
          strstr(err.msg, want), name, "rc %d, message '%s' (want '%s')", rc, err.msg, want);
}

static void refused_text(const char *what, const char *text, size_t len, const char *want) {
    Config c;
    Error err = {{0}};
    int rc = config_parse(&c, text, len, NAME, &err);
    char name[160];
    snprintf(name, sizeof name, "config refuses %s", what);
    check(rc == -1 && strncmp(err.msg, NAME ": ", strlen(NAME) + 2) == 0 && strstr(err.msg, want), name,
          "rc %d, message '%s'", rc, err.msg);
}

int main(void) {
    Config c;
    Error err;
    check(parse("", &c, &err) == 0 && c.dim == 64 && c.head_dim == 8 && c.n_kv_heads == 4 && c.n_layers == 5,
          "config intact stories260K shape", "%s", err.msg);
    check(parse("\"num_key_value_heads\":null,", &c, &err) == -1, "config refuses null num_key_value_heads",
          "accepted");
    refused_text("empty text", "", 0, "invalid JSON");
    refused_text("non-UTF-8 text", "{\"a\":\"\xff\"}", 9, "invalid JSON");
    refused_text("a JSON array", "[1,2]", 5, "not a JSON object");
    refused_text("missing fields", "{}", 2, "missing \"hidden_size\"");
    refused("hidden_size 0", "\"hidden_size\":0,", "hidden_size");
    refused("negative num_hidden_layers", "\"num_hidden_layers\":-5,", "num_hidden_layers");
    refused("fractional vocab_size", "\"vocab_size\":512.5,", "vocab_size");
    refused("string max_position_embeddings", "\"max_position_embeddings\":\"512\",", "max_position_embeddings");
    refused("huge intermediate_size", "\"intermediate_size\":99999999999999999999,", "intermediate_size");
    refused("hidden_size not a multiple of heads", "\"hidden_size\":60,", "not a multiple of num_attention_heads");
    refused("odd head size", "\"hidden_size\":72,\"num_attention_heads\":8,", "must be even");
    refused("heads not a multiple of kv heads", "\"num_key_value_heads\":3,", "num_key_value_heads 3");
    refused("another architecture", "\"architectures\":[\"MistralForCausalLM\"],", "MistralForCausalLM");
    /* found by fuzz_config: the file's name for it was echoed with its newline */
    refused("an architecture with a newline, in one line", "\"architectures\":[\"Evil\\nLM\"],", "Evil?LM");
    char long_arch[400];
    snprintf(long_arch, sizeof long_arch, "\"architectures\":[\"%0300d\"],", 7);   /* 299 zeros, then 7 */
    refused("a 300-byte architecture, shortened", long_arch, "0000...");
    refused("rope_scaling", "\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0},", "rope_scaling");
    refused("attention_bias", "\"attention_bias\":true,", "attention_bias");
    refused("hidden_act gelu", "\"hidden_act\":\"gelu\",", "hidden_act");
    refused("negative rms_norm_eps", "\"rms_norm_eps\":-1e-5,", "rms_norm_eps");
    refused("rope_theta a string", "\"rope_theta\":\"1e4\",", "rope_theta");
    check(config_load(&c, "tests/fixtures/no-such-config.json", &err) == -1 &&
          strstr(err.msg, "tests/fixtures/no-such-config.json: ") == err.msg, "config missing file names it", "%s",
          err.msg);
    return test_exit_code();
}
