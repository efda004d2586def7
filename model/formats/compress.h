/* model/formats/compress.h: the `compress` command's files — every tensor of a KV cache file stored in
 * the form a scheme of the scheme language gives it (quant/scheme.h), the damage measured, and
 * the file read back.
 *
 * Compressed file (format kvq-compressed-3; kvq-compressed-2 files, the same without the
 * checksums and the model's identity, are still read): safetensors with, per cache tensor NAME
 * (layer_L_key, layer_L_value, [heads, seq, head_dim]) under the layer's scheme:
 *   NAME.packed  U8: the codec units of the quantized positions [S, Q), head after head (the
 *                same bytes the in-memory cache holds), or their LZ4 block when lz4 is on;
 *   NAME.full    F16 [heads, n_full, head_dim]: the full-precision positions — sinks [0, S) and
 *                the tail [Q, seq) (+res, and a token-axis base's incomplete group) — in
 *                position order, in the natural order (absent when there are none);
 * where S is the sinks and Q = kv_spec_quantized_end(seq): the file is the cache as it stands
 * after seq positions were written. __metadata__: {format, k_scheme, v_scheme (LAYERED,
 * canonical), lz4, sparsity, and the cache's num_layers, num_kv_heads, seq_len, head_dim,
 * dtype, model_name}, and calib_sha256 when a layer's scheme has a fitted base (quant/codec.h's
 * KvFit: SCHEMES.md §8): the sha256 of the calibration file whose tables packed it, bound per
 * layer, side and KV head as the KV cache binds them; reading such a file needs that same
 * calibration (compared by sha256), and a file of other schemes has no such key. model_id and
 * model_sha256 when the cache recorded its model (kvfile.h); a calibration given to compress or
 * decompress must then be that model's. Checksums (format 3): crc32c.NAME.packed / .full, the
 * CRC-32C of each stored tensor's bytes (8 lowercase hex digits), and header_crc32c last, the
 * CRC-32C of the header's content (every other metadata pair, then each tensor's name, dtype,
 * shape and byte range, in header order; see st_header_crc in st_checksum.h): a mismatch is refused
 * naming the tensor or the header, before anything is decoded. A plain integer base whose groups are longer than a row (int4-g128 at
 * head_dim 64) packs each tensor as one flat run of rows of G values, as the seed's tool did.
 * +prerope needs positions and RoPE, which a stored tensor does not have: refused.
 * Format kvq-compressed-4 (CompressOptions.entropy, `compress --entropy`): format 3 with metadata
 * "entropy": "1" and each NAME.packed holding the units as entropy-coded sections
 * (model/formats/entropy_pack.h), which unpack to the same bytes; not with lz4. */
#ifndef KVQ_COMPRESS_H
#define KVQ_COMPRESS_H

#include "model/formats/calibration.h"
#include "model/formats/kvfile.h"
#include "quant/metrics.h"
#include "quant/scheme.h"

typedef struct {
    const KvLayered *k_scheme, *v_scheme;   /* keys and values are stored separately */
    double sparsity;          /* fraction of smallest-magnitude values zeroed first, in [0, 1) */
    int lz4;                  /* LZ4 over the packed units in the file */
    double max_rmse, min_snr_db, min_cosine;   /* quality thresholds */
    /* The tables of fitted bases (NULL: none; a fitted scheme is then refused). Its geometry must
     * be the cache's; a file written with it records its file_sha256. */
    const Calibration *calib;
    /* Entropy-code the codes (format kvq-compressed-4, model/formats/entropy_pack.h); not with lz4. */
    int entropy;
    /* The cache's file, named in the refusals of its contents (NULL: they name none). */
    const char *source;
} CompressOptions;

typedef struct {
    char name[32];
    size_t elements;
    KvQuality quality;
} TensorQuality;

typedef struct {
    size_t n_elements;
    size_t original_bytes;    /* the cache as FP16: elements * 2 */
    size_t compressed_bytes;  /* packed units + full-precision rows (before LZ4) */
    size_t k_compressed_bytes, v_compressed_bytes;   /* the same, keys and values apart */
    double compression_ratio; /* original / compressed */
    double stored_bits;       /* bits per quantized value: packed bytes * 8 / quantized values */
    double effective_bits;    /* bits per value over everything: compressed bytes * 8 / elements */
    size_t lz4_codes_in, lz4_codes_out;  /* LZ4 stage: packed bytes before and after (when on) */
    size_t file_bytes;        /* the written file's size on disk (0 with metrics only) */
    KvQuality quality;        /* over keys and values together */
    KvQuality k_quality, v_quality;
    const char *quality_level;    /* EXCELLENT, GOOD, ACCEPTABLE, POOR */
    int passed;
    int n_violations;
    char violations[3][96];
    double processing_ms;
    int n_tensors;
    TensorQuality *tensors;   /* per cache tensor, in file order */
    /* SCHEMES.md §9 over the cache's values: the entropy figure (code streams' entropy + parameters
     * at their stored bits + full-precision values at 16), and with --entropy what the file's coded
     * streams take (their bytes, every other unit bit as stored, full precision at 16), its
     * frequency tables and section framing apart (table_bytes) */
    double values, entropy_bits_per_value, coded_bits_per_value, table_bytes;
} CompressReport;

/* Fills the report; writes out_path when it is not NULL; stores the reconstruction (what
 * a decompress gives, bit for bit) in recon when it is not NULL. */
int kv_compress(const KvSnapshot *s, const CompressOptions *o, const char *out_path,
                CompressReport *r, KvSnapshot *recon, Error *err);
void compress_report_free(CompressReport *r);

/* Reads a compressed file back into f32 values; calib (NULL: none) gives the tables of a file
 * packed with fitted bases. Refused with one line naming the file: a tensor missing or of the
 * wrong size, a scheme the file's shape cannot take, a tensor that decodes to NaN or infinity
 * (a non-finite scale, minimum or stored value), a malformed calib_sha256, a fitted scheme
 * without one, and a fitted file read without the calibration it records or with another; in
 * format 3 a header or a tensor that fails its CRC-32C; a format-2 file holding checksums. */
int kv_decompress_file(const char *path, const Calibration *calib, KvSnapshot *out, Error *err);
int kv_decompress_safetensors(const SafeTensors *st, const Calibration *calib, KvSnapshot *out, Error *err);

/* A KV cache file of either kind: a plain cache, or a compressed file, read back (decompressed)
 * with its schemes' text in k_scheme and v_scheme (both empty for a plain file); calib as for
 * kv_decompress_file. */
int kv_load_any(const char *path, const Calibration *calib, KvSnapshot *out, char *k_scheme, char *v_scheme, size_t len,
                Error *err);
/* Bits per value of one cache tensor of a compressed file (SCHEMES.md §9): as stored (packed units
 * and fp16 full rows; format 4: its sections, tables included), entropy-coded (what --entropy
 * writes, tables apart) and the entropy figure. */
typedef struct {
    double stored, coded, entropy;
} KvTensorBits;
/* kv_load_any, and for a compressed file *bits = malloc'd [2 * n_layers] (layer_L_key, then
 * layer_L_value, layer by layer); NULL for a plain file. */
int kv_load_any_bits(const char *path, const Calibration *calib, KvSnapshot *out, char *k_scheme, char *v_scheme,
                     size_t len, KvTensorBits **bits, Error *err);

/* Quality level from RMSE and SNR, as the seed defines it. */
const char *quality_level(double rmse, double snr_db);

#endif
