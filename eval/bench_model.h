/* eval/bench_model.h: ./run bench below its flags — the model it times, a model directory or
 * random weights of a known shape (--random: a large model timed without downloading it),
 * timed with eval/bench.h and reported. */
#ifndef KVQ_BENCH_MODEL_H
#define KVQ_BENCH_MODEL_H

#include <stdio.h>
#include "eval/bench.h"

/* --dtype: bf16, f16 or f32, in either case. -1 for anything else. */
int bench_parse_dtype(const char *name, DType *dtype);

/* dir's weights, or with random (dir NULL) random weights of dtype for its config: "tinyllama"
 * (the bundled TinyLlama config.json), a config.json, or a directory holding one (seed 1234:
 * every run has the same weights). name: how reports name the model. sha256 (may be NULL): the
 * model's identity, which calibrations record: the sha256 of dir/model.safetensors, or of the
 * random weights' recipe (seed, dtype and the config file's sha256). */
int bench_model_load(Model *m, const char *dir, const char *random, DType dtype, char *name, size_t name_len,
                     char sha256[65], Error *err);

/* The model as bench_model_load gives it, the matmuls at precision ("exact" or "bf16"). The
 * report on out, as JSON with json. */
int bench_report(const char *dir, const char *random, DType dtype, const char *precision, const BenchOptions *o,
                 int json, FILE *out, Error *err);
/* o->kv's calibration (eval/calibration.h: a model directory's kv-calib.safetensors by default,
 * none for random weights) serves every fitted base of o's schemes, the long ones' too. */

#endif
