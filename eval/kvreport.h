/* eval/kvreport.h: the KV cache file commands below ./run's flags — kv-extract, compress,
 * decompress and kv-info: their --calib resolved, their work and printing — and the seed's quick
 * test on a synthetic cache (--quick-test). */
#ifndef KVQ_KVREPORT_H
#define KVQ_KVREPORT_H

#include <stdio.h>
#include "eval/calibration.h"
#include "model/formats/compress.h"
#include "model/model.h"

/* The seed's JSON: compression_ratio, sizes, rmse, snr_db, cosine_similarity, max_error,
 * quality_level, processing_time_ms, passed, violations, plus scheme, LZ4 stage and tensors. */
void report_compress_json(FILE *f, const CompressReport *r, const CompressOptions *o, int per_tensor);
/* A few human lines (-verbose prints them on stderr beside the JSON). */
void report_compress_text(FILE *f, const CompressReport *r, const CompressOptions *o);

/* What kv-info reports of a file. */
typedef struct {
    const char *path;
    const char *k_scheme, *v_scheme;   /* a compressed file's schemes ("" for a plain cache file) */
    const KvSnapshot *snap;            /* its values (decompressed) */
    KvStats stats;
    const KvTensorBits *bits;          /* a compressed file's bits per value per tensor (kv_load_any_bits), NULL for a plain file */
    const char *mismatches;            /* with a model: the fields that differ, a line each */
    int n_mismatches;                  /* ... and how many (-1 without a model) */
} KvInfo;
void report_kv_info(FILE *f, const KvInfo *info, int json);

/* ./run kv-extract: model_dir's fp32 KV cache of prompt (BOS first), or of the ids of ids_text
 * (--tokens), saved to path as dtype (+ path.metadata.json), its model_name the last component
 * of model_dir, its model_id and model_sha256 the model's identity by content. *n_tokens,
 * *n_layers: what the file holds. */
int kv_extract_from_dir(const char *model_dir, const char *prompt, const char *ids_text, const char *path,
                        DType dtype, int *n_tokens, int *n_layers, Error *err);

/* The commands on KV cache files have no model: calib_path (--calib; NULL: none) is loaded with
 * every check calibration_load makes of a file alone (eval/calibration.h), never a default file. */

/* ./run decompress: a compressed KV file back to an F32 cache file; calib_path names the
 * calibration a file packed with fitted bases records (model/formats/compress.h). */
int kv_decompress_to(const char *in, const char *calib_path, const char *out, Error *err);

/* ./run compress past its flags: kv's schemes and --calib resolved, input loaded and quantized
 * with o's sparsity, stages and thresholds (o's schemes and calib are kv's), into the file output
 * unless NULL; the JSON report on json, a few human lines on verbose (NULL: none). */
typedef struct {
    const char *input, *output;
    KvCacheFlags kv;
    CompressOptions o;
    FILE *json, *verbose;
} KvCompressRun;
/* *passed: the thresholds held. Errors name their file (the input, --calib's, the output). */
int kv_compress_print(const KvCompressRun *run, int *passed, Error *err);

/* ./run kv-info: path (a KV cache or a compressed file) loaded and its report printed to f;
 * with model_dir, checked against that model's config.json and, when the file records one,
 * its model_id (*n_mismatches: how many fields differ, -1 without a model); calib_path as for
 * kv_decompress_to. Nothing is printed when loading fails. */
int kv_info(FILE *f, const char *path, const char *model_dir, const char *calib_path, int json, int *n_mismatches,
            Error *err);

/* ./run --quick-test: the synthetic cache below (seed 42) compressed with int4-g64 and held to
 * the seed's thresholds (rmse < 0.10, snr > 18 dB, cosine > 0.99); the report printed to f. */
int quick_test_run(FILE *f, int *passed, Error *err);

/* The quick test's synthetic cache: 22 layers, 4 KV heads, head_dim 64, 128 tokens, drawn
 * from normal distributions whose per-layer mean and std are those of a real cache
 * (see eval/kvreport.c). Seeded, so every run sees the same values. */
int quick_test_cache(KvSnapshot *s, unsigned long long seed, Error *err);
/* RMS of all values (the signal level the absolute RMSE should be read against). */
double kv_snapshot_rms(const KvSnapshot *s);

#endif
