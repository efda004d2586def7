/* tests/fuzz/fuzz_config.c: config_parse (config.json from memory) on arbitrary
 * bytes. An accepted config must satisfy what the forward pass relies on:
 * positive sizes, head_dim * n_heads == dim, even head_dim, n_heads a multiple
 * of n_kv_heads, finite positive eps and theta. */
#include <math.h>
#include <string.h>
#include "model/config.h"
#include "tests/fuzz/fuzz.h"

#define NAME "fuzz/config.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Config c;
    Error err = {{0}};
    if (config_parse(&c, (const char *)data, size, NAME, &err) != 0) {
        fuzz_assert(strncmp(err.msg, NAME ": ", strlen(NAME) + 2) == 0 && fuzz_one_line(err.msg),
                    "bad error message");
        return 0;
    }
    fuzz_assert(c.dim > 0 && c.hidden_dim > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 &&
                c.vocab_size > 0 && c.max_seq_len > 0, "non-positive size accepted");
    fuzz_assert(c.head_dim * c.n_heads == c.dim && c.head_dim % 2 == 0, "bad head_dim accepted");
    fuzz_assert(c.n_heads % c.n_kv_heads == 0, "n_heads not a multiple of n_kv_heads");
    fuzz_assert(isfinite(c.norm_eps) && c.norm_eps > 0 && isfinite(c.rope_theta) && c.rope_theta > 0,
                "bad eps or theta accepted");
    return 0;
}
