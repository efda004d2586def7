/* quant/codecs.c: the table of base quantizers (quant/codec.h) and base-name parsing.
 * One row per codec, like ggml's type traits: adding a codec means writing its file
 * quant/codec_<name>.c, which defines one `const KvCodec`, and adding it here (the extern
 * and the row). */
#include <stdio.h>
#include <string.h>
#include "quant/codec.h"
#include "quant/half.h"
#include <math.h>

extern const KvCodec kv_codec_fp32, kv_codec_fp16, kv_codec_bf16;
extern const KvCodec kv_codec_int;
extern const KvCodec kv_codec_fp8_e4m3, kv_codec_fp8_e5m2;
extern const KvCodec kv_codec_nf4;
extern const KvCodec kv_codec_ggml;
extern const KvCodec kv_codec_iq4nl;
extern const KvCodec kv_codec_tq;
extern const KvCodec kv_codec_nuq;
extern const KvCodec kv_codec_vq;
extern const KvCodec kv_codec_pca;
extern const KvCodec kv_codec_rvq;

static const KvCodec *const CODECS[] = {
    &kv_codec_fp32,
    &kv_codec_fp16,
    &kv_codec_bf16,
    &kv_codec_int,
    &kv_codec_fp8_e4m3,
    &kv_codec_fp8_e5m2,
    &kv_codec_nf4,
    &kv_codec_ggml,
    &kv_codec_iq4nl,
    &kv_codec_tq,
    &kv_codec_nuq,
    &kv_codec_vq,
    &kv_codec_pca,
    &kv_codec_rvq,
};

#define N_CODECS ((int)(sizeof CODECS / sizeof CODECS[0]))

int kv_codec_count(void) { return N_CODECS; }

const KvCodec *kv_codec_at(int i) { return i >= 0 && i < N_CODECS ? CODECS[i] : NULL; }

void kv_fitted_syntaxes(char *out, size_t out_len) {
    size_t used = 0;
    if (out_len) out[0] = '\0';
    for (int i = 0; i < N_CODECS && used < out_len; i++)
        if (CODECS[i]->fit) used += (size_t)snprintf(out + used, out_len - used, "%s%s", used ? ", " : "", CODECS[i]->syntax);
}

size_t kv_fit_tensor_floats(const KvFitTensor *t) {
    size_t floats = 1;
    for (int i = 0; i < t->ndim; i++) floats *= (size_t)t->dims[i];
    return floats;
}

size_t kv_fit_table_floats(const KvFitLayout *layout) {
    size_t floats = 0;
    for (int i = 0; i < layout->n_tensors; i++) floats += kv_fit_tensor_floats(&layout->tensors[i]);
    return floats;
}

int kv_base_parse(const char *name, KvBase *b, char *why, size_t why_len) {
    for (int i = 0; i < N_CODECS; i++) {
        memset(b, 0, sizeof *b);
        int got = CODECS[i]->parse(name, b, why, why_len);
        if (got < 0) return -1;
        if (got > 0) {
            b->codec = CODECS[i];
            if (b->rows < 1) b->rows = 1;
            return 0;
        }
    }
    memset(b, 0, sizeof *b);
    snprintf(why, why_len, "unknown base '%.40s' (./run schemes lists them)", name);
    return -1;
}

int kv_base_check(const KvBase *b, int n, char *why, size_t why_len) {
    if (n < 1) {
        snprintf(why, why_len, "rows of %d values", n);
        return 0;
    }
    return b->codec->check(b, n, why, why_len);
}

int kv_parse_number(const char **p, int lo, int hi, int *out) {
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (*s - '0');
        if (v > hi) return -1;   /* also stops before a long overflows */
    }
    if (v < lo) return -1;
    *out = (int)v;
    *p = s;
    return 0;
}

int kv_parse_prefix(const char *s, const char *prefix, const char **rest) {
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0) return 0;
    *rest = s + n;
    return 1;
}

void kv_unpack_codes(const unsigned char *stream, int bits, int count, unsigned short *codes) {
    unsigned mask = (1u << bits) - 1u;
    for (int i = 0; i < count; i++) {
        size_t bit = (size_t)i * (size_t)bits;
        /* a code of at most 12 bits spans at most 3 bytes */
        unsigned word = stream[bit / 8];
        if ((bit % 8) + (size_t)bits > 8) word |= (unsigned)stream[bit / 8 + 1] << 8;
        if ((bit % 8) + (size_t)bits > 16) word |= (unsigned)stream[bit / 8 + 2] << 16;
        codes[i] = (unsigned short)((word >> (bit % 8)) & mask);
    }
}

void kv_pack_codes(const unsigned short *codes, int bits, int count, unsigned char *stream) {
    for (int i = 0; i < count; i++)
        for (int k = 0; k < bits; k++) {
            size_t bit = (size_t)i * (size_t)bits + (size_t)k;
            unsigned char m = (unsigned char)(1u << (bit % 8));
            if (codes[i] >> k & 1u) stream[bit / 8] |= m;
            else stream[bit / 8] &= (unsigned char)~m;
        }
}

size_t kv_subvector_points(const float *rows, size_t count, int n, int D, int j, float *points) {
    float sqrt_d = sqrtf((float)n);
    size_t made = 0;
    for (size_t u = 0; u < count; u++) {
        const float *x = rows + u * (size_t)n;
        uint16_t r16 = f16_norm(x, n);
        if (r16 == 0) continue;
        float r = f16_to_f32(r16);
        for (int i = 0; i < D; i++) points[made * D + i] = x[j * D + i] * sqrt_d / r;
        made++;
    }
    return made;
}
