/* eval/cli_help.c: ./run's help texts (see eval/cli_help.h), a command's page beside its overview
 * lines. The flag lines that several commands share are written once, below. */
#include "eval/cli_help.h"

/* The evaluation window's flags, as ppl, sweep and sensitivity show them (run.c: TAKES_WINDOW, TAKES_EVAL). */
#define HELP_WINDOW_FLAGS \
    "  --ctx N                   tokens a window (the model's context)\n" \
    "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n" \
    "  --windows N               the first N windows (all)\n" \
    "  --max-tokens N            the text's first N tokens (all)\n" \
    "  --protocol P              hf: sliding windows; llamacpp: llama-perplexity's chunks (hf)\n"

/* Theirs after --shard, whose line differs between ppl and the sweeps. */
#define HELP_BATCH_FLAGS \
    "  --batch N                 positions a forward pass (512)\n" \
    "  --precision P             exact: f32 matmuls; bf16: bf16 products, faster (exact)\n"

/* --shard of sweep and sensitivity: a shard is a directory. */
#define HELP_SHARD_INTO_DIR \
    "  --shard I/N               windows I, I+N, ... into this DIR; sweep-merge puts them together (0/1)\n"

/* --k-scheme and --v-scheme (run.c: TAKES_KV_SIDES). */
#define HELP_KV_SIDES_FLAGS \
    "  --k-scheme S              keys only, over --kv-scheme (--kv-scheme)\n" \
    "  --v-scheme S              values only, over --kv-scheme (--kv-scheme)\n"

/* --calib where a model directory's calibration is the default (run.c: TAKES_CALIB). */
#define HELP_CALIB_FLAG \
    "  --calib FILE              the tables of fitted schemes (MODEL_DIR/kv-calib.safetensors if any)\n"

/* --quiet where it silences the progress on stderr. */
#define HELP_QUIET_FLAG \
    "  --quiet                   no progress on stderr (progress)\n"

const char HELP_OVERVIEW_TOP[] =
    "kvq: run Llama models in C and measure what KV-cache quantization costs.\n"
    "\n"
    "usage: ./run COMMAND [options]     (flags take one or two dashes: -n 64 = --n 64)\n"
    "       ./run COMMAND --help        a command's flags with their defaults, examples, exit codes\n"
    "\n";

const char HELP_OVERVIEW_END[] =
    "\n"
    "A MODEL_DIR holds config.json, model.safetensors and tokenizer.bin\n"
    "(python3 export/export.py writes one). Bundled: data/models/mini-llama-brown.\n"
    "Exit codes: 0 ok, 1 quality check failed, 2 bad input or usage.\n";

const char HELP_PAGE_END[] =
    "\nFlags take one or two dashes (-n 64 = --n 64), and --flag=value. ./run --help lists the commands.\n";

const CommandHelp HELP_GENERATE = {
    "  generate MODEL_DIR [-i prompt] [-n steps] [-t temp] [-p top_p] [-s seed] [--chat]\n"
    "           [--kv-scheme S] [--calib FILE]  stream text; -n counts all positions incl. the prompt\n",
    "usage: ./run generate MODEL_DIR [flags]\n"
    "\n"
    "Streams text from the model to stdout, the KV cache quantized as it is written.\n"
    "\n"
    "flags (default):\n"
    "  -i, --prompt TEXT         the prompt (empty: starts from BOS)\n"
    "  -n, --steps N             positions in all, the prompt's included (256)\n"
    "  -t, --temperature T       0: greedy, always the most likely token (1.0)\n"
    "  -p, --top-p P             nucleus sampling: the fewest tokens with probability P (0.9)\n"
    "  -s, --seed N              the sampler's seed (the current time)\n"
    "  --chat                    wrap the prompt in TinyLlama-Chat's template (off)\n"
    "  --kv-scheme S             the KV cache's scheme, keys and values (fp32; ./run schemes)\n"
    HELP_CALIB_FLAG
    "\n"
    "examples:\n"
    "  ./run generate data/models/mini-llama-brown -i \"The jury said\" -n 64 -t 0.8\n"
    "  ./run generate models/tinyllama --chat -i \"What is a KV cache?\" -n 256\n"
    "  ./run generate data/models/mini-llama-brown -i \"The jury\" -t 0 --kv-scheme int2-g64+had\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_LOGITS = {
    "  logits MODEL_DIR --tokens 1,450,4996 [--out FILE] [--kv-scheme S] [--calib FILE]\n"
    "                                  logits of every position (float32 [T, vocab] to FILE)\n",
    "usage: ./run logits MODEL_DIR --tokens IDS [flags]\n"
    "\n"
    "Runs token ids through the model and prints each position's top 5 ids, or writes every\n"
    "position's logits as raw little-endian float32 [T, vocab] to a file.\n"
    "\n"
    "flags (default):\n"
    "  --tokens IDS              comma-separated token ids, e.g. 1,450,4996 (required)\n"
    "  -o, --out FILE            write the logits there instead of printing the top 5 (none)\n"
    "  --kv-scheme S             the KV cache's scheme, keys and values (fp32; ./run schemes)\n"
    HELP_CALIB_FLAG
    "\n"
    "examples:\n"
    "  ./run logits data/models/stories260K --tokens 1,450,4996\n"
    "  ./run logits data/models/mini-llama-brown --tokens 1,450,4996 --out logits.f32\n"
    "  ./run logits data/models/mini-llama-brown --tokens 1,450,4996 --kv-scheme int4-g64\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage (an id outside the vocabulary too)\n"};

const CommandHelp HELP_TOKENIZE = {
    "  tokenize MODEL_DIR (--text STR | --text-file FILE) [--bos]\n"
    "                                  print token ids\n",
    "usage: ./run tokenize MODEL_DIR (--text STR | --text-file FILE) [--bos]\n"
    "\n"
    "Prints the token ids of a text, as the model's tokenizer.bin encodes it.\n"
    "\n"
    "flags (default):\n"
    "  --text STR                the text (one of --text, --text-file is required)\n"
    "  --text-file FILE          the text, from a file\n"
    "  --bos                     begin with the BOS id (off)\n"
    "\n"
    "examples:\n"
    "  ./run tokenize data/models/mini-llama-brown --text \"The jury said\"\n"
    "  ./run tokenize data/models/mini-llama-brown --text \"The jury said\" --bos\n"
    "  ./run tokenize data/models/stories260K --text-file notes.txt\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_PPL = {
    "  ppl MODEL_DIR [--text-file F] [--ctx N] [--stride N] [--windows N] [--max-tokens N]\n"
    "           [--kv-scheme S | --k-scheme S --v-scheme S] [--protocol hf|llamacpp]\n"
    "           [--shard I/N] [--batch N] [--no-compare] [--no-layer-error] [--precision exact|bf16]\n"
    "           [--calib FILE] [--quiet] [--json]\n"
    "                                  perplexity with the KV cache quantized as it is written\n"
    "                                  (default text: WikiText-2 test; compared with an fp32 cache:\n"
    "                                  KL, top-1, by position, each layer's attention error;\n"
    "                                  --ctx: the model's context, --stride: min(512, ctx))\n",
    "usage: ./run ppl MODEL_DIR [flags]\n"
    "\n"
    "Perplexity on a text with the KV cache quantized as it is written, and, for a quantized cache,\n"
    "the same windows with an fp32 cache beside it: delta ppl with its paired standard error, KL\n"
    "divergence and top-1 agreement per token, by position in the window, and each layer's\n"
    "attention-output error on the fp32 run's inputs.\n"
    "\n"
    "flags (default):\n"
    "  --kv-scheme S             the cache's scheme, keys and values (fp32; ./run schemes)\n"
    HELP_KV_SIDES_FLAGS
    HELP_CALIB_FLAG
    "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
    HELP_WINDOW_FLAGS
    "  --shard I/N               windows I, I+N, ...; add the --json files with ppl-merge (0/1)\n"
    HELP_BATCH_FLAGS
    "  --no-compare              no fp32 run beside a quantized one (compared)\n"
    "  --no-layer-error          no per-layer attention error (on: about 18% of a compared run)\n"
    HELP_QUIET_FLAG
    "  --json                    the report as JSON, its sums included (text)\n"
    "\n"
    "examples:\n"
    "  ./run ppl data/models/mini-llama-brown --windows 4 --kv-scheme int4-g64\n"
    "  ./run ppl data/models/mini-llama-brown --k-scheme int8-g64 --v-scheme int4-g64\n"
    "  ./run ppl data/models/stories260K --protocol llamacpp --ctx 128\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_PPL_MERGE = {
    "  ppl-merge SHARD.json...         add up the --json outputs of --shard runs\n",
    "usage: ./run ppl-merge SHARD.json... [--json]\n"
    "\n"
    "Adds up the --json outputs of ./run ppl --shard I/N runs (every shard of one evaluation, once)\n"
    "into the report of the whole run.\n"
    "\n"
    "flags (default):\n"
    "  --json                    the report as JSON (text)\n"
    "\n"
    "examples:\n"
    "  ./run ppl-merge shard0.json shard1.json\n"
    "  ./run ppl-merge shards/*.json --json > whole.json\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage (a missing, repeated or foreign shard too)\n"};

const CommandHelp HELP_SWEEP = {
    "  sweep MODEL_DIR (--config K[:V] ... | --configs FILE) --out-dir DIR [ppl's window flags]\n"
    "           [--no-layer-error] [--probe copy|passkey|diverge ...] [--probe-sequences N]\n"
    "                                  many KV-cache configurations over the same windows, each\n"
    "                                  window's fp32 baseline once; resumable; table, CSV, JSON, SVG\n"
    "                                  (KL by position, per-layer error); --probe: ./run probe's\n"
    "                                  task on every configuration at the sweep's ctx (probe-TASK.*)\n",
    "usage: ./run sweep MODEL_DIR (--config K[:V] ... | --configs FILE) --out-dir DIR [flags]\n"
    "\n"
    "Many KV-cache configurations over the same windows, each window's fp32 baseline run once.\n"
    "Every result goes to DIR/journal.jsonl as it is made: run the same line again to resume.\n"
    "Writes DIR/results.md, results.csv, results.json, chart.svg, position.svg and layers.svg,\n"
    "and chart-entropy.svg (quality against entropy-coded bits) when the sweep measured them.\n"
    "\n"
    "flags (default):\n"
    "  --config K[:V]            a configuration: scheme K for keys, V for values (V = K); repeatable\n"
    "  --configs FILE            one configuration a line, # comments\n"
    "  --out-dir DIR             the journal and the results (required)\n"
    HELP_CALIB_FLAG
    "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
    HELP_WINDOW_FLAGS
    HELP_SHARD_INTO_DIR
    HELP_BATCH_FLAGS
    HELP_QUIET_FLAG
    "  --json                    print results.json instead of the table (table)\n"
    "  --no-layer-error          no per-layer attention error (on: about 18% of a sweep)\n"
    "  --probe TASK              also ./run probe's copy, passkey or diverge on every configuration\n"
    "                            at the sweep's ctx, into probe-TASK.md/.csv/.json; repeatable\n"
    "  --probe-sequences N       the probes' --sequences (each task's own default)\n"
    "\n"
    "examples:\n"
    "  ./run sweep data/models/mini-llama-brown --config int4-g64 --config tq3 --windows 4 --out-dir sw\n"
    "  ./run sweep data/models/mini-llama-brown-outliers --configs data/sweeps/configs.txt --out-dir sw\n"
    "  ./run sweep data/models/mini-llama-brown --configs data/sweeps/configs.txt --shard 0/2 --out-dir s0\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage (other arguments than a journal's, on resume, too)\n"};

const CommandHelp HELP_PROBE = {
    "  probe MODEL_DIR --task copy|passkey|diverge [--kv-scheme S | --k-scheme S --v-scheme S]\n"
    "           [--ctx N] [--sequences N] [--seed N] [--lengths L,...] [--depths D,...]\n"
    "           [--prompt-tokens P] [--new-tokens M] [--text-file F] [--calib FILE] [--json]\n"
    "                                  retrieval and generation beside perplexity: copy (induction\n"
    "                                  over S tokens), passkey, greedy divergence; fp32 cache first\n",
    "usage: ./run probe MODEL_DIR --task copy|passkey|diverge [flags]\n"
    "\n"
    "What a quantized KV cache breaks that perplexity hides, on seeded inputs, the fp32 cache first:\n"
    "  copy      BOS, S random word pieces, the same S again: top-1 accuracy and mean NLL on the\n"
    "            second copy from its second token on (only reading the first copy back predicts\n"
    "            it), per S, with binomial standard errors, and agreement with the fp32 cache\n"
    "  passkey   a 5-digit number buried at a depth of 0..100% of filler from wiki.valid (the\n"
    "            calibration split), the question at the end, the digits decoded greedily: exact\n"
    "            matches per length and depth (meaningful only where fp32 passes: said first)\n"
    "  diverge   prompts from wiki.test, M tokens generated greedily: tokens until the first that\n"
    "            differs from the fp32 cache's continuation, and the share identical\n"
    "\n"
    "flags (default):\n"
    "  --task T                  copy, passkey or diverge (required)\n"
    "  --kv-scheme S             the cache's scheme, keys and values (fp32; ./run schemes)\n"
    HELP_KV_SIDES_FLAGS
    HELP_CALIB_FLAG
    "  --ctx N                   the longest input (the model's context)\n"
    "  --sequences N             copy: sequences per S (8); passkey: trials per cell (4);\n"
    "                            diverge: prompts (16)\n"
    "  --seed N                  the inputs' seed (42)\n"
    "  --lengths L,L,...         copy: S (64, 128, ... up to ctx/2); passkey: prompt tokens in all\n"
    "                            (256, 512, ... and ctx - 8)\n"
    "  --depths D,D,...          passkey: depths in percent (0,25,50,75,100)\n"
    "  --prompt-tokens P         diverge: prompt tokens after BOS (64, or (ctx - 1)/2 when less)\n"
    "  --new-tokens M            diverge: tokens generated (64, or what ctx leaves)\n"
    "  --text-file F             passkey's filler (data/wikitext-2-raw/wiki.valid.raw), diverge's\n"
    "                            prompts (data/wikitext-2-raw/wiki.test.raw)\n"
    "  --batch N                 positions a forward pass (512)\n"
    "  --json                    the counts and figures as JSON\n"
    "  --quiet                   accepted for symmetry with ppl (the probe prints no progress)\n"
    "\n"
    "examples:\n"
    "  ./run probe data/models/mini-llama-brown --task copy --kv-scheme int2-g64\n"
    "  ./run probe data/models/mini-llama-brown --task passkey --kv-scheme q4_0 --sequences 2\n"
    "  ./run probe data/models/mini-llama-brown-outliers --task diverge --kv-scheme int3-g64+had --json\n"
    "\n"
    "On every configuration of a sweep: ./run sweep ... --probe TASK (./run sweep --help).\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_SWEEP_MERGE = {
    "  sweep-merge DIR... --out-dir OUT [--json]  put together the shards of a sweep (--shard I/N)\n"
    "                                  (of a sensitivity too: its report with them)\n",
    "usage: ./run sweep-merge DIR... --out-dir OUT [--json]\n"
    "\n"
    "Puts together the --out-dir directories of a sweep's (or a sensitivity's) --shard I/N runs:\n"
    "their journals, every shard once, into OUT's results (and a sensitivity's report).\n"
    "\n"
    "flags (default):\n"
    "  --out-dir OUT             where the merged results go (required)\n"
    "  --json                    print results.json instead of the table (table)\n"
    "\n"
    "examples:\n"
    "  ./run sweep-merge s0 s1 --out-dir sw\n"
    "  ./run sweep-merge shards/* --out-dir sw --json\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage (a missing, repeated or foreign shard too)\n"};

const CommandHelp HELP_SENSITIVITY = {
    "  sensitivity MODEL_DIR --candidates SPEC,SPEC,... --out-dir DIR [ppl's window flags] [--calib FILE]\n"
    "                                  per layer and side, the damage of each candidate there alone\n"
    "                                  (the rest fp32): a sweep of 2 x layers x candidates configurations\n"
    "                                  (resumable, --shard); default text: wiki.valid (calibration split);\n"
    "                                  table, CSV, JSON, SVG heatmap\n",
    "usage: ./run sensitivity MODEL_DIR --candidates SPEC,SPEC,... --out-dir DIR [flags]\n"
    "\n"
    "Per layer and side (keys, values), the damage of each candidate scheme there alone, the rest\n"
    "fp32: a sweep of 2 x layers x candidates configurations (journal, resumable, --shard). Writes\n"
    "DIR/sensitivity.md, .csv, .json and a heatmap, sensitivity.svg; ./run allocate reads them.\n"
    "\n"
    "flags (default):\n"
    "  --candidates SPEC,...     the schemes to try in each layer, keys and values (required, or\n"
    "                            both of the next two)\n"
    "  --k-candidates SPEC,...   the keys' own (e.g. pca2+prerope+aw: +prerope is for keys only)\n"
    "  --v-candidates SPEC,...   the values' own\n"
    "  --out-dir DIR             the journal and the report (required)\n"
    HELP_CALIB_FLAG
    "  --text-file F             the text (data/wikitext-2-raw/wiki.valid.raw, the calibration split)\n"
    HELP_WINDOW_FLAGS
    HELP_SHARD_INTO_DIR
    HELP_BATCH_FLAGS
    HELP_QUIET_FLAG
    "  --json                    print sensitivity.json instead of the table (table)\n"
    "\n"
    "examples:\n"
    "  ./run sensitivity data/models/mini-llama-brown --candidates tq2,nuq3-g64,q8_0 --windows 4 \\\n"
    "        --ctx 1024 --out-dir sens\n"
    "  ./run sensitivity data/models/mini-llama-brown --candidates int2-g64+had,int4-g64 --out-dir s \\\n"
    "        --shard 1/4\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_ALLOCATE = {
    "  allocate MODEL_DIR --from SENSITIVITY_DIR --budget BITS[,BITS...] [--candidates SPEC,...]\n"
    "           [--verify --out-dir DIR [--text-file F] [--windows N] [--max-tokens N] [--batch N]\n"
    "           [--calib FILE]] [--quiet] [--json]\n"
    "                                  one candidate per layer and side, least summed single-layer KL\n"
    "                                  within a mean of BITS effective bits per value (exact knapsack);\n"
    "                                  prints --k-scheme / --v-scheme; --verify: measured on held-out\n"
    "                                  windows (default wiki.test) against the best uniform candidate\n",
    "usage: ./run allocate MODEL_DIR --from SENSITIVITY_DIR --budget BITS[,BITS...] [flags]\n"
    "\n"
    "One candidate per layer and side, chosen from a ./run sensitivity: the least summed\n"
    "single-layer KL within a mean of BITS effective bits per cached value (an exact knapsack).\n"
    "Prints the --k-scheme / --v-scheme strings; --verify measures them, and every uniform\n"
    "candidate that fits (the i-th key candidate with the i-th value one), as a sweep on held-out\n"
    "windows.\n"
    "\n"
    "flags (default):\n"
    "  --from DIR                the --out-dir of ./run sensitivity (required)\n"
    "  --budget BITS[,BITS...]   mean effective bits per value, e.g. 2.5,3 or 3.25 (required)\n"
    "  --candidates SPEC,...     a subset of the sensitivity's candidates, both sides (all of them)\n"
    "  --k-candidates SPEC,...   a subset of its key candidates; --v-candidates: of its value ones\n"
    "  --verify                  measure the allocations on held-out windows (off)\n"
    "  --out-dir DIR             --verify's journal and results (required with --verify)\n"
    "  --text-file F             --verify's text (data/wikitext-2-raw/wiki.test.raw)\n"
    "  --windows N               --verify's first N windows (all)\n"
    "  --max-tokens N            --verify's first N tokens of the text (all)\n"
    "  --batch N                 --verify's positions a forward pass (512)\n"
    HELP_CALIB_FLAG
    HELP_QUIET_FLAG
    "  --json                    the allocations as JSON (table)\n"
    "\n"
    "examples:\n"
    "  ./run allocate data/models/mini-llama-brown --from sens --budget 2.5,3,3.5\n"
    "  ./run allocate data/models/mini-llama-brown --from sens --budget 3 --verify --windows 16 \\\n"
    "        --out-dir verify\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_FRONTIER = {
    "  frontier MODEL_DIR --configs FILE [--allocations FILE ...] --budget BITS[,BITS...]\n"
    "           --out-dir DIR [--valid-text F] [ppl's window flags]\n"
    "                                  the best configuration within each budget of effective bits:\n"
    "                                  chosen on wiki.valid (lowest mean KL), reported on wiki.test;\n"
    "                                  two resumable sweeps in DIR, frontier.md, .json, .svg\n",
    "usage: ./run frontier MODEL_DIR --configs FILE --budget BITS[,BITS...] --out-dir DIR [flags]\n"
    "\n"
    "The best KV-cache configuration found within each budget of effective bits per value (keys and\n"
    "values averaged), held out: every candidate is measured by two sweeps, DIR/valid on the\n"
    "calibration split and DIR/test on --text-file (run the same line again to resume them). The\n"
    "choice per budget is the candidate of lowest mean KL on valid among those within the budget;\n"
    "the figures reported are that candidate's on test. Writes DIR/frontier.md (with the ./run ppl\n"
    "line of each row), frontier.json and frontier.svg (the test sweep's chart, the chosen ringed).\n"
    "\n"
    "flags (default):\n"
    "  --configs FILE            the candidates, one K[:V] a line as ./run sweep's (required)\n"
    "  --allocations FILE        an allocation.json of ./run allocate --verify: its allocation at each\n"
    "                            --budget it holds is one more candidate; this model's only; repeatable\n"
    "  --budget BITS[,BITS...]   effective bits per value, e.g. 0.5,1,2,3,4.5 (required)\n"
    "  --out-dir DIR             the two sweeps and the report (required)\n"
    "  --valid-text F            the split the choice is made on (data/wikitext-2-raw/wiki.valid.raw)\n"
    "  --text-file F             the split the figures are reported on (data/wikitext-2-raw/wiki.test.raw)\n"
    HELP_CALIB_FLAG
    "  --ctx N                   tokens a window (1024)\n"
    "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
    "  --windows N               the first N windows of each split (16)\n"
    "  --max-tokens N            each text's first N tokens (all)\n"
    "  --protocol P              hf: sliding windows; llamacpp: llama-perplexity's chunks (hf)\n"
    "  --shard I/N               not taken: a frontier runs whole sweeps\n"
    HELP_BATCH_FLAGS
    HELP_QUIET_FLAG
    "  --json                    print frontier.json instead of the table (table)\n"
    "  --no-layer-error          no per-layer attention error in the sweeps (on)\n"
    "\n"
    "examples:\n"
    "  ./run frontier data/models/mini-llama-brown --configs data/frontier/configs.txt \\\n"
    "        --budget 0.5,1,2,3,4.5 --out-dir fr\n"
    "  ./run frontier data/models/mini-llama-brown-outliers --configs data/frontier/configs.txt --allocations \\\n"
    "        data/sensitivity/mini-llama-brown-outliers/verify-test/allocation.json --budget 2,3 --out-dir fr\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage (an allocation.json of another model too)\n"};

const CommandHelp HELP_KV_EXTRACT = {
    "  kv-extract MODEL_DIR (-i PROMPT | --tokens IDS) -o kv.safetensors [--dtype f32|f16]\n"
    "                                  run a prompt and save its KV cache (+ .metadata.json)\n",
    "usage: ./run kv-extract MODEL_DIR (-i PROMPT | --tokens IDS) -o FILE [--dtype f32|f16]\n"
    "\n"
    "Runs a prompt and saves its KV cache as safetensors (and FILE.metadata.json), the input of\n"
    "compress and kv-info.\n"
    "\n"
    "flags (default):\n"
    "  -i, --prompt TEXT         the prompt (one of -i, --tokens is required)\n"
    "  --tokens IDS              comma-separated token ids instead\n"
    "  -o, --output FILE         the KV cache file (required)\n"
    "  --dtype D                 f32 or f16 (f32)\n"
    "\n"
    "examples:\n"
    "  ./run kv-extract data/models/mini-llama-brown -i \"Some text\" -o kv.safetensors\n"
    "  ./run kv-extract data/models/mini-llama-brown --tokens 1,450,4996 -o kv.safetensors --dtype f16\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_KV_INFO = {
    "  kv-info FILE [--model MODEL_DIR] [--calib FILE] [--json]\n"
    "                                  shape, size and statistics of a KV cache file\n",
    "usage: ./run kv-info FILE [--model MODEL_DIR] [--calib FILE] [--json]\n"
    "\n"
    "Shape, size and statistics of a KV cache file (kv-extract's or compress's); with --model,\n"
    "checked against that model's shape.\n"
    "\n"
    "flags (default):\n"
    "  --model MODEL_DIR         check the file's shape against this model (no check)\n"
    "  --calib FILE              the calibration a fitted file was packed with (none)\n"
    "  --json                    the report as JSON (text)\n"
    "\n"
    "examples:\n"
    "  ./run kv-info kv.safetensors\n"
    "  ./run kv-info kv.safetensors --model data/models/mini-llama-brown --json\n"
    "\n"
    "exit codes: 0 ok, 1 the file does not fit --model's shape, 2 bad input or usage\n"};

const CommandHelp HELP_COMPRESS = {
    "  compress -input IN -output OUT [--scheme int4] [-group-size 64] [-sparsity 0]\n"
    "           [--kv-scheme S | --k-scheme S --v-scheme S] [--calib FILE] [--lz4 | --entropy] [--metrics-only]\n"
    "           [-verbose] [--max-rmse 0.10] [--min-snr 18] [--min-cosine 0.99]\n"
    "                                  quantize a KV cache file; JSON metrics on stdout;\n"
    "                                  exit 1 when a quality threshold fails; a fitted scheme\n"
    "                                  needs --calib (the file records its sha256)\n",
    "usage: ./run compress -input IN -output OUT [flags]\n"
    "\n"
    "Quantizes a KV cache file (kv-extract's) into a compressed one; prints JSON metrics\n"
    "(sizes, RMSE, SNR, cosine, keys and values apart) on stdout.\n"
    "\n"
    "flags (default):\n"
    "  -i, --input IN            the KV cache file (required)\n"
    "  -o, --output OUT          the compressed file (required unless --metrics-only)\n"
    "  --scheme NAME             intN is intN-g<group-size>; any scheme name as is (int4)\n"
    "  --group-size N            the group of --scheme intN (64)\n"
    "  --kv-scheme S             the scheme, keys and values, over --scheme (int4-g64)\n"
    HELP_KV_SIDES_FLAGS
    "  --calib FILE              the tables of a fitted scheme; the file records its sha256 (none)\n"
    "  --sparsity F              the fraction of smallest-magnitude values zeroed first, [0, 1) (0)\n"
    "  --lz4                     LZ4 over the packed bytes (off)\n"
    "  --entropy                 rANS over each code stream, tables stored with them (off; SCHEMES.md 9)\n"
    "  --metrics-only            the metrics, no file written (off)\n"
    "  -v, --verbose             a few human lines on stderr (off)\n"
    "  --max-rmse X              fail (exit 1) when the RMSE is above X (0.10)\n"
    "  --min-snr DB              fail when the SNR is below DB decibels (18)\n"
    "  --min-cosine C            fail when the cosine similarity is below C (0.99)\n"
    "\n"
    "examples:\n"
    "  ./run compress -input kv.safetensors -output kv.int4 --scheme int4 -group-size 64 --lz4\n"
    "  ./run compress -input kv.safetensors -output kv.q --k-scheme int8-g64 --v-scheme int4-g64\n"
    "  ./run compress -input kv.safetensors --kv-scheme tq3 --metrics-only\n"
    "\n"
    "exit codes: 0 ok, 1 a quality threshold failed, 2 bad input or usage\n"};

const CommandHelp HELP_DECOMPRESS = {
    "  decompress -input IN -output OUT [--calib FILE]  a compressed file back to F32 tensors\n"
    "                                  (--calib: the calibration a fitted file was packed with)\n",
    "usage: ./run decompress -input IN -output OUT [--calib FILE]\n"
    "\n"
    "A compressed file (compress's) back to a KV cache file of F32 tensors.\n"
    "\n"
    "flags (default):\n"
    "  -i, --input IN            the compressed file (required)\n"
    "  -o, --output OUT          the KV cache file written (required)\n"
    "  --calib FILE              the calibration a fitted file was packed with (none)\n"
    "\n"
    "examples:\n"
    "  ./run decompress -input kv.int4 -output kv.recon.safetensors\n"
    "  ./run decompress -input kv.nuq3 -output kv.recon.safetensors --calib kv-calib.safetensors\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_QUICK_TEST = {
    "  --quick-test                    compress a synthetic cache with int4-g64, check thresholds\n",
    "usage: ./run --quick-test\n"
    "\n"
    "Compresses a seeded synthetic KV cache with int4-g64 and checks the RMSE, SNR and cosine\n"
    "thresholds (no model, no file). Takes no flags.\n"
    "\n"
    "examples:\n"
    "  ./run --quick-test\n"
    "  ./run --quick-test && echo ok\n"
    "\n"
    "exit codes: 0 ok, 1 a threshold failed\n"};

const CommandHelp HELP_CALIBRATE = {
    "  calibrate (MODEL_DIR | --random tinyllama) --out FILE [--fit SPEC ...] [--text-file F]\n"
    "           [--tokens 16384] [--ctx 1024] [--batch N] [--quiet]\n"
    "                                  fit the cache to the model (SCHEMES.md 8): statistics of keys,\n"
    "                                  values, queries and the tables of fitted bases (those\n"
    "                                  ./run schemes says are fitted) from wiki.valid (the calibration split);\n"
    "                                  an outlier table, and a heatmap in FILE.svg\n",
    "usage: ./run calibrate (MODEL_DIR | --random tinyllama) --out FILE [flags]\n"
    "\n"
    "Fits the cache to the model (SCHEMES.md 8): per-channel statistics of its keys, values and\n"
    "queries and the tables of the fitted bases asked for (./run schemes: \"fitted to the model\"), from the\n"
    "calibration split; prints an outlier table; a heatmap goes to FILE.svg. Save it as\n"
    "MODEL_DIR/kv-calib.safetensors and every command uses it.\n"
    "\n"
    "flags (default):\n"
    "  --out, -o FILE            the calibration (required)\n"
    "  --fit SPEC                a fitted base's tables, e.g. nuq3-g64, vq8-d4+had; repeatable\n"
    "                            (none: the statistics only)\n"
    "  --random NAME             seeded random weights of TinyLlama's shape (tinyllama) or of a\n"
    "                            config.json, instead of MODEL_DIR: for timing\n"
    "  --text-file F             the text (data/wikitext-2-raw/wiki.valid.raw)\n"
    "  --tokens N                the text's first N tokens (16384)\n"
    "  --ctx N                   tokens a window (1024)\n"
    "  --batch N                 positions a forward pass (the smaller of --ctx and 512)\n"
    HELP_QUIET_FLAG
    "\n"
    "examples:\n"
    "  ./run calibrate data/models/mini-llama-brown --fit nuq3-g64 --out calib.safetensors\n"
    "  ./run calibrate data/models/mini-llama-brown --fit nuq2-g64 --fit vq8-d4 --tokens 4096 \\\n"
    "        --out data/models/mini-llama-brown/kv-calib.safetensors\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_SCHEMES = {
    "  schemes                         list the KV-cache quantization schemes\n",
    "usage: ./run schemes\n"
    "\n"
    "Lists the KV-cache quantization schemes: every base with its bits, the modifiers, and how\n"
    "to write per-layer and per-side choices. Takes no flags.\n"
    "\n"
    "examples:\n"
    "  ./run schemes\n"
    "  ./run schemes | grep nuq\n"
    "\n"
    "exit codes: 0 ok\n"};

const CommandHelp HELP_BENCH = {
    "  bench (MODEL_DIR | --random tinyllama|CONFIG) [-p 512] [-n 64] [--ctx 2048] [--kv-scheme S]\n"
    "           [--long-scheme S | --long-k-scheme S --long-v-scheme S] [--threads N] [--repeat R]\n"
    "           [--precision bf16|exact] [--dtype bf16|f16|f32] [--calib FILE] [--no-probe] [--quiet] [--json]\n"
    "           [--ppl [--ppl-windows 4] [--ppl-batch 512]]\n"
    "                                  prefill / decode tok/s, GFLOP/s, GB/s vs this machine;\n"
    "                                  --random: seeded random weights of TinyLlama's shape, or of\n"
    "                                  a config.json (the file or its directory); no download\n"
    "                                  --ppl: the ppl path's positions/s at --ctx, a full pass's time;\n"
    "                                  each step and the time left on stderr (not with --quiet)\n",
    "usage: ./run bench (MODEL_DIR | --random tinyllama|CONFIG) [flags]\n"
    "\n"
    "Prefill and decode speed (median of --repeat runs: tok/s, GFLOP/s, GB/s, and their share of\n"
    "this machine's measured peaks), decode at --ctx with an fp32 and a quantized cache, and with\n"
    "--ppl the perplexity path's positions/s and a full WikiText-2 pass's time.\n"
    "\n"
    "flags (default):\n"
    "  --random NAME             seeded random weights of TinyLlama's shape (tinyllama) or of a\n"
    "                            config.json (the file or its directory), instead of MODEL_DIR\n"
    "  --dtype D                 --random's weights: bf16, f16 or f32 (bf16)\n"
    "  -p N                      prompt tokens of the prefill (512)\n"
    "  -n N                      tokens decoded after it (64)\n"
    "  --ctx N                   the long decode's context, and --ppl's window; 0: no long runs (2048)\n"
    "  --kv-scheme S             the cache of the prefill and decode runs (fp32)\n"
    "  --long-scheme S           the long runs' quantized cache, keys and values (int4-g64)\n"
    "  --long-k-scheme S         its keys only (--long-scheme)\n"
    "  --long-v-scheme S         its values only (--long-scheme)\n"
    HELP_CALIB_FLAG
    "  --threads N               threads (OpenMP's default: every core)\n"
    "  --repeat R                runs of each phase, the median reported (3)\n"
    "  --precision P             bf16: bf16 products; exact: f32 matmuls (bf16)\n"
    "  --no-probe                skip the machine's peak FMA and memory-read probes (probed)\n"
    "  --ppl                     time the perplexity path too, 4 windows of --ctx (off)\n"
    "  --ppl-windows N           --ppl's windows, 2 or more (4)\n"
    "  --ppl-batch N             --ppl's positions a forward pass (512)\n"
    HELP_QUIET_FLAG
    "  --json                    the figures as JSON (text)\n"
    "\n"
    "examples:\n"
    "  ./run bench --random tinyllama --repeat 3 --no-probe\n"
    "  ./run bench models/tinyllama --kv-scheme int4-g64 --ppl\n"
    "  ./run bench data/models/mini-llama-brown -p 32 -n 4 --ctx 128 --json\n"
    "\n"
    "exit codes: 0 ok, 2 bad input or usage\n"};

const CommandHelp HELP_HELP = {
    "  --help                          this text; ./run COMMAND --help: a command's flags and examples\n",
    "usage: ./run --help | ./run COMMAND --help | ./run help COMMAND\n"
    "\n"
    "The list of commands, or one command's synopsis, flags with their defaults, examples and\n"
    "exit codes.\n"
    "\n"
    "examples:\n"
    "  ./run --help\n"
    "  ./run sweep --help\n"
    "  ./run help ppl\n"
    "\n"
    "exit codes: 0\n"};

const CommandHelp HELP_VALIDATE = {
    "\n"
    "  --validate [--model DIR] [--threshold 0.5 | --threshold 0.5%] [--kv-scheme int4-g64]\n"
    "           [--windows 8] [--ctx N] [--text-file F] [--calib FILE] [--quiet] [--json]\n"
    "                                  six-step check that the quantized KV cache keeps perplexity\n"
    "                                  within the threshold (exit 1 when it does not); default:\n"
    "                                  delta < the larger of 0.5 and 1% of the baseline perplexity\n",
    "usage: ./run --validate [flags]\n"
    "\n"
    "A six-step check that a quantized KV cache keeps perplexity within a threshold: a prompt's\n"
    "cache compressed to a file and read back, then perplexity with the cache quantized as it is\n"
    "written against an fp32 cache. Uses models/tinyllama when it is exported, else the bundled\n"
    "data/models/mini-llama-brown.\n"
    "\n"
    "flags (default):\n"
    "  --model DIR               the model (models/tinyllama, else data/models/mini-llama-brown)\n"
    "  --threshold X | X%        delta ppl below X points, or below X% of the baseline\n"
    "                            (the larger of 0.5 and 1% of the baseline)\n"
    "  --kv-scheme S             the cache's scheme, keys and values (int4-g64; ./run schemes)\n"
    HELP_KV_SIDES_FLAGS
    HELP_CALIB_FLAG
    "  --windows N               windows scored (8)\n"
    "  --text-file F             the text (data/wikitext-2-raw/wiki.test.raw)\n"
    "  --ctx N                   tokens a window (the model's context)\n"
    "  --stride N                tokens between windows; each scores its last stride (min(512, ctx))\n"
    "  --quiet                   no progress on stderr (progress)\n"
    "  --json                    the results as JSON on stdout, the report on stderr (text)\n"
    "\n"
    "examples:\n"
    "  ./run --validate\n"
    "  ./run --validate --kv-scheme int3-g64+had --threshold 2%\n"
    "  ./run --validate --model models/tinyllama --windows 4 --json\n"
    "\n"
    "exit codes: 0 passed, 1 the threshold failed, 2 bad input or usage\n"};
