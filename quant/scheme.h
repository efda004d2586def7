/* quant/scheme.h: the KV-cache scheme language — a base and modifiers, per layer, keys and
 * values apart — and the arithmetic of one cached row under a scheme.
 *
 *   SPEC    := BASE ( "+" MOD )*                 "int4-g64+had", "int2-t32-asym+res128"
 *   LAYERED := SPEC ( ";" L[-L] ":" SPEC )*      "int2-g64;0:int8-g64;21:int8-g64"
 *
 * Bases are the codecs of quant/codec.h. Modifiers, each written once:
 *   +had      rotate every row by the orthonormal Hadamard H before the base (here)
 *   +outK     keep the K largest |x| of each row as fp16 + index, beside the base (here)
 *   +resR     the R most recent positions stay full precision        (cache policy, model/kvcache)
 *   +sinkS    the first S positions stay full precision               (cache policy)
 *   +prerope  keys are quantized before RoPE; RoPE after decoding      (cache policy)
 *   +aw       fitted bases: distances weighted per channel by what attention reads (the codec,
 *             with KvBase.weights; SCHEMES.md §9)
 * plus one rule of the llama.cpp bases: a key row is quantized in llama.cpp's channel order
 * (0, d/2, 1, d/2+1, ...), where each RoPE pair sits side by side.
 *
 * The domain of a row. What the cache stores, and what decoding returns, is a row in the
 * spec's *domain*: the natural row x reordered (llama.cpp keys), rotated by H (+had), and
 * rotated by the codec's own inner rotation (tq) when no outliers need the values back in
 * between. Every step is orthogonal, so a query dotted with a decoded key equals the query
 * moved into the domain (kv_spec_to_domain) dotted with the stored row, and a weighted sum of
 * decoded values moved back once (kv_spec_from_domain) equals the sum of the natural values:
 * attention pays O(d log d) per query and head, not per cached row.
 *
 * All functions are pure arithmetic: no allocation, no I/O, no global state. */
#ifndef KVQ_SCHEME_H
#define KVQ_SCHEME_H

#include <stddef.h>
#include "quant/codec.h"

#define KV_MAX_OUTLIERS 64       /* +outK: K <= 64, and rows of at most 256 values (u8 indices) */
#define KV_MAX_LAYER_ITEMS 16    /* ";L:SPEC" overrides in one LAYERED value */
#define KV_MAX_WINDOW 1000000    /* +resR, +sinkS: positions */

/* Which side of the cache a scheme is for, fixed when it is parsed: +prerope is for keys only,
 * and the llama.cpp block types code keys in llama.cpp's channel order. A zeroed spec is
 * KV_SIDE_UNBOUND, which kv_layered_bind refuses. */
typedef enum { KV_SIDE_UNBOUND = 0, KV_SIDE_KEYS = 1, KV_SIDE_VALUES = 2 } KvSide;

typedef struct {
    KvBase base;
    int hadamard;      /* +had */
    int prerope;       /* +prerope */
    int residual;      /* +resR: R, else 0 */
    int sinks;         /* +sinkS: S, else 0 */
    int outliers;      /* +outK: K, else 0 */
    int aw;            /* +aw: attention-aware weights (fitted bases only, not with +had) */
    KvSide side;       /* keys or values, given to the parser */
    char text[96];     /* canonical spelling: base, then had, prerope, out, aw, res, sink */
} KvSpec;

typedef struct {
    int first, last;   /* layers, 0-based, inclusive */
    KvSpec spec;
} KvLayerItem;

typedef struct {
    KvSpec all;                               /* every layer not named by an item */
    int n_items;
    KvLayerItem items[KV_MAX_LAYER_ITEMS];    /* later items win */
    char text[512];                           /* canonical spelling of the whole value */
} KvLayered;

/* ---- parsing and checking ---- */

/* One SPEC for keys or values. 0, or -1 with why naming the offending part ("unknown modifier
 * '+foo'", "+prerope is for keys only"). */
int kv_spec_parse(const char *text, KvSide side, KvSpec *spec, char *why, size_t why_len);
/* A LAYERED value for keys or values; layer numbers are checked by kv_layered_bind. */
int kv_layered_parse(const char *text, KvSide side, KvLayered *l, char *why, size_t why_len);
/* Checks l against a model (layer range, head_dim divisibility and powers of two, +out only on
 * channel-axis bases) and against the side it is used for: a value parsed for the other side,
 * or for none (a zeroed KvLayered), is refused. 0 or -1 + why. */
int kv_layered_bind(KvLayered *l, int n_layers, int head_dim, KvSide side, char *why, size_t why_len);
/* The spec of one layer. */
const KvSpec *kv_layered_at(const KvLayered *l, int layer);
/* 1 when some layer's spec has a fitted base (needs a calibration). */
int kv_layered_is_fitted(const KvLayered *l);
/* 1 when every layer is plain fp32 with no modifiers: the cache is the computed values. */
int kv_layered_is_fp32(const KvLayered *l);

/* 1 when spec is plain fp32 (no modifier changes a value). */
int kv_spec_is_fp32(const KvSpec *spec);

/* A fitted base's fit key (SCHEMES.md §8, §9): the base with the modifiers that change what it is
 * given or how it measures, in this order: +had, +prerope, +outK, +aw ("nuq3-g64+had"). +res and +sink do not change a
 * fit. Empty for a base without a table to fit. */
void kv_spec_fit_key(const KvSpec *spec, char *key, size_t key_len);
/* Parses a fit key for rows of head_dim values into spec (for keys: a +prerope key is keys'
 * only). 0, or -1 with why: a bad base or modifier, not a fitted base (the table's list), or
 * not the canonical fit key of what it names (it names tensors: "nuq3-g064", "+res4" refused). */
int kv_fit_key_parse(const char *key, int head_dim, KvSpec *spec, char *why, size_t why_len);
/* 1 when the spec's base is fitted (reads a table from a calibration). */
int kv_spec_is_fitted(const KvSpec *spec);

/* The modifiers, for listings: how each is written and what it does. */
typedef struct {
    const char *syntax, *summary;
} KvModifierInfo;
int kv_modifier_count(void);
const KvModifierInfo *kv_modifier_at(int i);

/* ---- sizes and bits ---- */

/* Bytes of one unit for rows of n values: the codec's bytes, then per row K outliers (fp16 value
 * and u8 index each). */
size_t kv_spec_unit_bytes(const KvSpec *spec, int n);
/* Stored bits per value of the quantized part (SCHEMES.md §6). */
double kv_spec_stored_bits(const KvSpec *spec, int n);
/* Effective bits per value over a cache of ctx positions, full-precision positions at 16 bits. */
double kv_spec_effective_bits(const KvSpec *spec, int n, int ctx);
/* Over every layer of l (bound): the mean stored bits per value, and the mean effective bits
 * over a cache of ctx positions. */
void kv_layered_bits(const KvLayered *l, int n_layers, int head_dim, int ctx, double *stored, double *effective);
/* Bytes of the fitted tables l reads over every layer (float32 entries; a codebook is per
 * model, not per position: SCHEMES.md §8), 0 without fitted bases. */
double kv_layered_table_bytes(const KvLayered *l, int n_layers, int n_kv_heads, int head_dim);
/* With n positions written, positions [sinks, end) hold quantized values, the rest full
 * precision (SCHEMES.md §4, +res): end = max(S, n - R), or for a token-axis base
 * S + G * floor(max(0, n - S - R) / G). */
int kv_spec_quantized_end(const KvSpec *spec, int n);

/* ---- one row's arithmetic ---- */

/* x (n values) from the natural order into the spec's domain, in place, and back. */
void kv_spec_to_domain(const KvSpec *spec, float *x, int n);
void kv_spec_from_domain(const KvSpec *spec, float *x, int n);
/* One natural row as the spec's base is given it: llama.cpp key order, +had, the +out values
 * zeroed. What a fitted base is fitted on (SCHEMES.md §8; +prerope: give the key before RoPE).
 * In place. */
void kv_spec_codec_input(const KvSpec *spec, float *x, int n);
/* Quantizes one unit: x holds base.rows natural rows of n values; scratch holds as many. */
void kv_spec_encode(const KvSpec *spec, const float *x, int n, void *unit, float *scratch);
/* Rows r0 .. r0+count-1 of a run of units, in the spec's domain, into out[count][n]. */
void kv_spec_decode(const KvSpec *spec, const void *units, int n, int r0, int count, float *out);
/* 1 when the spec's rows can be decoded straight into a transposed block (the codec has a
 * decode_t64 and no outliers are written back over its rows). */
int kv_spec_has_decode_t64(const KvSpec *spec);
/* Then: the same rows transposed, kt[i * 64 + p] (count <= 64, zeros beyond). */
void kv_spec_decode_t64(const KvSpec *spec, const void *units, int n, int r0, int count, float *kt);

#endif
