/* eval/scheme_list.c: ./run schemes' listing (see eval/scheme_list.h). */
#include "eval/scheme_list.h"
#include "quant/scheme.h"
#include <string.h>

/* One codec's examples with their stored bits: "int4-g64 4.25, int4-g32 4.5". */
static void example_bits(const KvCodec *codec, char *line, size_t n) {
    char examples[256];
    snprintf(examples, sizeof examples, "%s", codec->examples);
    line[0] = 0;
    for (char *name = strtok(examples, " "); name; name = strtok(NULL, " ")) {
        KvSpec spec;
        char why[160];
        if (kv_spec_parse(name, KV_SIDE_KEYS, &spec, why, sizeof why)) continue;   /* bits: either side */
        size_t used = strlen(line);
        snprintf(line + used, n - used, "%s%s %.4g", used ? ", " : "", spec.text, kv_spec_stored_bits(&spec, 64));
    }
}

void print_scheme_list(FILE *f) {
    fprintf(f, "KV cache schemes: BASE(+MODIFIER)*, per layer as SPEC;L:SPEC;L1-L2:SPEC, keys and values apart\n");
    fprintf(f, "(--k-scheme, --v-scheme, --kv-scheme). Stored bits per value at head_dim 64.\n\nbases:\n");
    for (int i = 0; i < kv_codec_count(); i++) {
        const KvCodec *codec = kv_codec_at(i);
        char line[512];
        example_bits(codec, line, sizeof line);
        fprintf(f, "  %s\n      %s\n      %s\n", codec->syntax, codec->summary, line);
    }
    fprintf(f, "\nmodifiers:\n");
    for (int i = 0; i < kv_modifier_count(); i++)
        fprintf(f, "  %-22s %s\n", kv_modifier_at(i)->syntax, kv_modifier_at(i)->summary);
    fprintf(f, "\n+outK adds (16 + 8) K / head_dim bits; full-precision positions (+res, +sink) are float32 in\n"
               "memory and fp16 in a compressed file.\n");
}
