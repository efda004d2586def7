/* model/compress.h: the seed's kv-compress — quantize every tensor of a KV cache file with a
 * scheme, measure the damage, and write a real compressed file (packed codes + fp16 group
 * parameters, optionally LZ4 over the codes), and read such a file back.
 *
 * Compressed file: safetensors with, per cache tensor NAME, "NAME.codes" (U8, the packed
 * codes, or their LZ4 block when lz4 is on) and "NAME.params" (F16 [groups, n_params]:
 * scale, and minimum for asymmetric schemes), and __metadata__ {format: kvq-compressed-1,
 * k_scheme, v_scheme, lz4, sparsity, plus the cache's own metadata}. Files written before
 * keys and values could differ hold one "scheme" for both; they still read. */
#ifndef KVQ_COMPRESS_H
#define KVQ_COMPRESS_H

#include "model/kvfile.h"
#include "quant/metrics.h"

typedef struct {
    const KvScheme *k_scheme, *v_scheme;   /* keys and values are packed separately */
    double sparsity;          /* fraction of smallest-magnitude values zeroed first, in [0, 1) */
    int lz4;                  /* LZ4 over the packed codes in the file */
    double max_rmse, min_snr_db, min_cosine;   /* quality thresholds */
} CompressOptions;

typedef struct {
    char name[32];
    size_t elements;
    KvQuality quality;
} TensorQuality;

typedef struct {
    size_t n_elements;
    size_t original_bytes;    /* the cache as FP16: elements * 2 */
    size_t compressed_bytes;  /* packed codes + group parameters */
    size_t k_compressed_bytes, v_compressed_bytes;   /* the same, keys and values apart */
    double compression_ratio; /* original / compressed */
    size_t lz4_codes_in, lz4_codes_out;  /* LZ4 stage: code bytes before and after (when on) */
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
} CompressReport;

/* Fills the report; writes out_path when it is not NULL; stores the reconstruction (what
 * a decompress would give) in recon when it is not NULL. */
int kv_compress(const KvSnapshot *s, const CompressOptions *o, const char *out_path,
                CompressReport *r, KvSnapshot *recon, Error *err);
void compress_report_free(CompressReport *r);

/* Reads a compressed file back into f32 values. */
int kv_decompress_file(const char *path, KvSnapshot *out, Error *err);
int kv_decompress_safetensors(const SafeTensors *st, KvSnapshot *out, Error *err);

/* Quality level from RMSE and SNR, as the seed defines it. */
const char *quality_level(double rmse, double snr_db);

#endif
