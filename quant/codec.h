/* quant/codec.h: the base quantizers of the scheme language ("codecs") and their table.
 *
 * A KV-cache scheme is written as a base and modifiers, "int4-g64+had" (quant/scheme.h). The
 * base is one codec: one row of the table in quant/codecs.c, like one of ggml's type traits,
 * whose functions live in one file quant/codec_*.c. A codec only turns values into bytes and
 * back. Everything else (rotation, outliers, residual window, sinks, pre-RoPE keys) is a
 * modifier, written once in quant/scheme.c or model/kvcache.c, and composes with every codec.
 *
 * Units. A codec stores a *unit*: one row of n values (a channel-axis codec; in the KV cache a
 * row is one position of one KV head, n = head_dim), or, for a token-axis codec (intB-tG), the
 * G rows of G consecutive positions, each channel quantized along them. Units are stored back
 * to back, unit_bytes(n) bytes each, so row r of a run of units is row r % G of unit r / G.
 *
 * Inner domain. A codec may rotate a row before it quantizes it (tq: random signs and a
 * Hadamard transform). Its decode then returns values in that rotated "inner" domain and
 * `rotate` maps rows between the two, so attention can rotate each query once instead of
 * rotating every cached row back. Codecs without a rotation leave it NULL.
 *
 * Every function is pure arithmetic: no allocation, no I/O, no global state. NaN and infinite
 * inputs give a defined result (each codec's file says which), never a crash. */
#ifndef KVQ_CODEC_H
#define KVQ_CODEC_H

#include <stddef.h>

typedef enum { KV_AXIS_CHANNELS = 0, KV_AXIS_TOKENS = 1 } KvAxis;
typedef enum { KV_TO_INNER = 0, KV_FROM_INNER = 1 } KvRotation;
/* What a codec's block_read gives (see KvCodec): decode_t64's rows, or the coefficients
 * transposed (kt[i * 64 + p]) or as rows (decode_coefficients' out[count][n]). DECODED_T64_BF16:
 * decode_t64's rows at bf16 working precision, for attention's bf16 path, which rounds every key
 * to bf16 anyway (a codec may give DECODED_T64's values; pca's sums take bf16 terms there). */
typedef enum {
    KV_BLOCK_DECODED_T64 = 0,
    KV_BLOCK_COEFFICIENTS_T64 = 1,
    KV_BLOCK_COEFFICIENTS = 2,
    KV_BLOCK_DECODED_T64_BF16 = 3
} KvBlockForm;

typedef struct KvCodec KvCodec;

/* Rows of a KV cache hold at most this many values (head_dim): the row transforms work in
 * buffers of this size on the stack. kv_layered_bind refuses larger rows. */
#define KV_MAX_HEAD_DIM 4096

/* A base with its parameters, as parsed from its name ("int4-g64-asym", "tq3", "q4_0"). */
typedef struct {
    const KvCodec *codec;
    int bits;          /* bits of one stored code (fp32: 32, fp16 and bf16: 16, fp8: 8, q4_0: 4, tq3: 3) */
    int group;         /* values that share parameters: G along the row (intB-gG, nf4-gG; 32 for q*),
                          G positions (intB-tG), 0 for codecs without groups */
    KvAxis axis;       /* KV_AXIS_TOKENS for intB-tG */
    int rows;          /* rows per unit: G for a token-axis codec, else 1 */
    int variant;       /* the codec's own choice among its forms, read only by its file
                          (intB: 1 for "-asym"; q4_1, q5_1: 1, a minimum beside the scale; vq: D) */
    const float *table;   /* a fitted base's table for the rows it codes (one layer and side, and
                             KV head when tables are per head), bound by the KV cache from the
                             calibration; NULL for other bases, and before binding */
    const float *weights; /* +aw (SCHEMES.md §9): the KV head's n channel weights w[c], bound with the
                             table; NULL without +aw (plain distances) */
    char name[32];     /* canonical spelling, as written in a scheme */
} KvBase;

/* What a fitted base stores (SCHEMES.md §8, §9). A calibration holds, per fit key, layer and
 * side, one *table* per KV head (per_head) or one the layer's heads share. A table is one or
 * more named float32 tensors back to back, in the order declared: tensor t of a per-head fit
 * is written to the calibration file as fit.KEY.S.L[.NAME] of shape [n_kv_heads, dims...]
 * (head h's table holds its slice), of a shared fit as [dims...]. NAME is "" for a fit of one
 * tensor (nuq, vq: fit.KEY.k.0), else a word ("mean", "basis": fit.KEY.k.0.mean). The KV cache
 * binds KvBase.table to the table of the rows' layer, side and head; model/formats/calibration.c
 * derives every name, shape and check from this declaration. */
#define KV_FIT_MAX_TENSORS 4
#define KV_FIT_MAX_DIMS 4
typedef struct {
    const char *name;             /* "" for the fit's only tensor, else a lowercase word */
    int ndim;                     /* 1..KV_FIT_MAX_DIMS: the dims of one table's part */
    int dims[KV_FIT_MAX_DIMS];
} KvFitTensor;

typedef struct {
    int per_head;                 /* 1: each KV head its own table; 0: the heads share one */
    int n_tensors;                /* 1..KV_FIT_MAX_TENSORS */
    KvFitTensor tensors[KV_FIT_MAX_TENSORS];
} KvFitLayout;

/* The units a table is fitted on: count units back to back, b->rows rows of n values each, as
 * the codec is given them (after +had, +prerope, +out), in calibration order; for a shared
 * table the units of every KV head. A struct so that what a fit may weigh by (+aw's
 * per-channel weights, SCHEMES.md §9) is one more field. */
typedef struct {
    const float *units;
    size_t count;
    int n;
    /* +aw: each unit's row weights, n floats per KV head (for a per-head table the head's own, for a
     * shared one units [h * count / heads, (h + 1) * count / heads) weigh by row h); NULL: plain */
    const float *weights;
    int weight_rows;     /* rows of weights given (1 for a per-head table, n_kv_heads for a shared one) */
} KvFitRows;

/* Why a fit could not be made: too few points for one of its Lloyd runs (§8 asks for at least
 * 4 per entry). The caller turns it into the tokens needed. */
typedef struct {
    size_t points;                /* the points that run had */
    int entries;                  /* its entries: it needed 4 x entries points */
} KvFitShortfall;

/* How a fitted base's tables are declared and fitted. Pure like the rest of the codec: the
 * caller allocates (scratch_bytes), reads and writes files, and runs tables in parallel. */
typedef struct {
    /* The tensors of one table for rows of n values (b checked for n). */
    void (*layout)(const KvBase *b, int n, KvFitLayout *layout);
    /* Optional: 1 when a table's finite values are valid for the codec (nuq: ascending), else 0
     * with why naming the entry ("entry 3 = 0.1 after 0.2"). NULL: every finite table is. */
    int (*check)(const KvBase *b, int n, const float *table, char *why, size_t why_len);
    /* Bytes of scratch fit and objective need for rows (8-byte aligned by the caller). */
    size_t (*scratch_bytes)(const KvBase *b, const KvFitRows *rows);
    /* Fits one table (all its tensors, in the order declared: a part may use the parts fitted
     * before it, as rvq's stage s the stages before it) from rows; deterministic. 0, or -1 with
     * shortfall set when a Lloyd run would have too few points. */
    int (*fit)(const KvBase *b, const KvFitRows *rows, float *table, void *scratch, KvFitShortfall *shortfall);
    /* What the fit lowers, for rows and a table, in float64: Σ over the rows' points of the
     * squared distance to what the codec would store (before the per-row scale), for comparing
     * two tables of the same rows. */
    double (*objective)(const KvBase *b, const KvFitRows *rows, const float *table, void *scratch);
} KvFit;

/* Floats of one tensor of a table, and of the whole table (its tensors back to back). */
size_t kv_fit_tensor_floats(const KvFitTensor *t);
size_t kv_fit_table_floats(const KvFitLayout *layout);

struct KvCodec {
    const char *syntax;    /* how the base is written: "intB-gG[-asym]" */
    const char *summary;   /* one line for ./run schemes */
    const char *examples;  /* space-separated names listed with their bits by ./run schemes */
    /* Fills b from a base name: 1 when the name is this codec's and its parameters are valid,
     * 0 when the name is not this codec's, -1 when it is but a parameter is not (why says which). */
    int (*parse)(const char *name, KvBase *b, char *why, size_t why_len);
    /* 1 when b can store rows of n values (divisibility, powers of two), else 0 and why. */
    int (*check)(const KvBase *b, int n, char *why, size_t why_len);
    /* Bytes of one unit for rows of n values. */
    size_t (*unit_bytes)(const KvBase *b, int n);
    /* Quantizes one unit: x holds b->rows rows of n values. */
    void (*encode)(const KvBase *b, const float *x, int n, void *unit);
    /* Rows r0 .. r0+count-1 of the units starting at `units`, dequantized into out[count][n]
     * (in the inner domain when the codec has a rotation). */
    void (*decode)(const KvBase *b, const void *units, int n, int r0, int count, float *out);
    /* Optional: the same rows transposed for attention's key blocks, kt[i * 64 + p] = value i
     * of row r0 + p for p < count (count <= 64), 0 beyond, when the codec has a faster way than
     * decode and a transpose. NULL (chosen when the codec's file is compiled) when it has none:
     * the caller then decodes and transposes. */
    void (*decode_t64)(const KvBase *b, const void *units, int n, int r0, int count, float *kt);
    /* Optional: the codec's rotation of one row of n values, in place (see Inner domain). */
    void (*rotate)(const KvBase *b, float *x, int n, KvRotation direction);
    /* Optional (pca): attention on the stored coefficients instead of decoded rows, for a codec
     * whose rows decode as an affine map of coefficients that is not a rotation (quant/pca.h:
     * x = (mu + U^T y) / sqrt(w), U per KV head). coefficients_ready: 1 when the bound table
     * allows it (pca: a table bound, every +aw weight positive and finite); decode_coefficients:
     * rows r0 .. r0+count-1 as their n coefficients, out[count][n]; coefficients, in place, on
     * `rows` rows of n back to back: queries into coefficients (KV_TO_INNER: q . decoded row =
     * result . coefficients + a term the same for every row, which softmax ignores), or weighted
     * sums of coefficient rows back to the same sums of decoded rows (KV_FROM_INNER). */
    int (*coefficients_ready)(const KvBase *b, int n);
    void (*decode_coefficients)(const KvBase *b, const void *units, int n, int r0, int count, float *out);
    void (*coefficients)(const KvBase *b, float *x, int n, int rows, KvRotation direction);
    /* Optional (pca): the codes of 64 rows laid out for reading 16 rows at a time (per component,
     * the 64 rows' codes back to back), a copy the cache keeps beside its units: 64 x unit_bytes
     * bytes a block. block_codes: rows r0 .. r0+count-1 of units (inside one block: r0 % 64 + count
     * <= 64) written into their block; block_read: the block's first count rows in a form of
     * KvBlockForm, what decode_t64 or decode_coefficients give (transposed: 0 beyond count). */
    void (*block_codes)(const KvBase *b, const void *units, int n, int r0, int count, void *block);
    void (*block_read)(const KvBase *b, const void *block, int n, int count, KvBlockForm form, float *out);
    /* 1 when the codec transforms whole rows itself (pca's basis): +had and +out are refused. */
    int own_transform;
    /* 1 when key rows are coded in llama.cpp's channel order (its block types; quant/scheme.h). */
    int llama_key_order;
    /* A fitted base's fitting (NULL: the codec has no table to fit). */
    const KvFit *fit;
    /* Optional, for the entropy figure (SCHEMES.md §9): the code streams of a unit. A slot is a
     * channel for per-value codes (in the order the codec codes them: after tq's rotation, in
     * llama.cpp's key order), a sub-vector for vq. code_layout gives, for rows of n values, the
     * slots of a row, the alphabet (codes lie in [0, symbols)) and the bits of one unit's
     * parameters at their stored size (fp16 scales and norms: 16 each; padding is neither);
     * codes writes a unit's b->rows x slots codes, codes[row * slots + slot]. NULL for the
     * float bases (fp32, fp16, bf16), whose values count at their stored bits. */
    void (*code_layout)(const KvBase *b, int n, int *slots, int *symbols, int *param_bits);
    void (*codes)(const KvBase *b, const void *unit, int n, unsigned short *codes);
    /* Its inverse: the codes written into a unit's code bits, every other bit left as it is
     * (an entropy-coded file stores codes and parameters apart: model/formats/compress.c). */
    void (*put_codes)(const KvBase *b, const unsigned short *codes, int n, void *unit);
    /* 1 when each slot's code width is read from the bound table (pca: the fitted bits of each
     * component, symbols being the widest's alphabet), so slots x log2(symbols) does not give the
     * unit's size; 0 for fixed-width codes. */
    int code_widths_from_table;
};

/* The fitted bases' syntaxes from the table, ", "-separated ("nuqB-gG, nuqB-tG, vqC-dD"), for
 * help and error texts. */
void kv_fitted_syntaxes(char *out, size_t out_len);

/* codes[0..count) from a stream of `bits`-bit codes, code i at bits [i*bits, i*bits+bits), stream
 * bit k being bit k%8 of byte k/8 (the layout of int, nuq, tq and vq units). */
void kv_unpack_codes(const unsigned char *stream, int bits, int count, unsigned short *codes);
/* Its inverse: codes[0..count) written into the stream, its other bits left as they are. */
void kv_pack_codes(const unsigned short *codes, int bits, int count, unsigned char *stream);

/* Parses a base name against every row of the table; 0 on success, else -1 with why
 * ("unknown base 'int4-x64'", or the codec's own complaint about a parameter). */
int kv_base_parse(const char *name, KvBase *b, char *why, size_t why_len);
/* b->codec->check with the codec-independent limits (n > 0). */
int kv_base_check(const KvBase *b, int n, char *why, size_t why_len);

/* The table, for listings and tests. */
int kv_codec_count(void);
const KvCodec *kv_codec_at(int i);

/* The fit points of vq and rvq (SCHEMES.md §8, §9): sub-vector j (D values) of z = x * sqrt(n) / r
 * of each of `count` rows of n values, r = fp16(||x||), rows with r = 0 left out, in row order,
 * into points; returns how many (quant/codecs.c). */
size_t kv_subvector_points(const float *rows, size_t count, int n, int D, int j, float *points);

/* Helpers for the codecs' parse functions (quant/codecs.c). */
/* Reads a decimal number at *p in [lo, hi] and advances *p; -1 if there is none or it is out of range. */
int kv_parse_number(const char **p, int lo, int hi, int *out);
/* 1 if s starts with prefix; then *rest points after it. */
int kv_parse_prefix(const char *s, const char *prefix, const char **rest);

/* Little-endian fp16 fields inside packed units. */
static inline void kv_put_u16(unsigned char *p, unsigned v) {
    p[0] = (unsigned char)(v & 0xffu);
    p[1] = (unsigned char)(v >> 8);
}
static inline unsigned kv_get_u16(const unsigned char *p) { return (unsigned)(p[0] | p[1] << 8); }

#endif
