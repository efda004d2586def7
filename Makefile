# kvq build. `make` builds ./run; `make test` builds and runs the test suite (`make check`: its quick tier);
# `make OMP=0` builds without OpenMP; `make SANITIZE=1 test` adds ASan/UBSan.
CC      ?= cc
SANITIZE ?= 0
KVQ_PORTABLE ?= 0
# OpenMP and -march=native are used when the compiler takes them, so that a plain `make`
# builds everywhere: Apple's clang has no OpenMP (the build is then single-threaded; with
# Homebrew's libomp or gcc it is not) and older versions refuse -march=native on Arm.
# Probed once (:=), not at every use of the variable.
compiles = $(shell printf 'int main(void) { return 0; }\n' | $(CC) $(1) -x c - -o /dev/null 2>/dev/null && echo 1)
ifeq ($(origin OMP),undefined)
OMP     := $(if $(call compiles,-fopenmp),1,0)
endif
ifeq ($(origin CFLAGS),undefined)
CFLAGS  := -O3 $(if $(call compiles,-march=native),-march=native)
endif
# `make KVQ_PORTABLE=1`: no -march=native, so only the plain-C kernels (runs on any CPU).
ifeq ($(KVQ_PORTABLE),1)
CFLAGS  := $(filter-out -march=native,$(CFLAGS))
endif
# -ffp-contract=off: a * b + c is a product and a sum, as written, never a fused multiply-add the
# compiler chose (GCC's ISO C mode does this already; clang fuses by default), so that the sums
# the tests restate give the same bits with either compiler.
CFLAGS  += -std=c11 -ffp-contract=off -Wall -Wextra -D_POSIX_C_SOURCE=200809L -I. $(EXTRA_CFLAGS)
LDLIBS  += -lm -lpthread

ifeq ($(OMP),1)
CFLAGS  += -fopenmp
LDFLAGS += -fopenmp
else
CFLAGS  += -Wno-unknown-pragmas
endif
# UBSan stops the program at the first finding (so a test fails instead of printing and going
# on), and also checks float-to-integer conversions of values out of range (a hostile 1e300 in a
# JSON file), which -fsanitize=undefined leaves out.
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow \
           -fno-omit-frame-pointer -g
LDFLAGS += -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
endif

# Each configuration builds in its own directory (build/rel, build/san-noomp,
# build/rel-portable, ...), so switching between them reuses the other's objects instead of
# mixing them: `make OMP=0` after `make` must not link OpenMP objects or libgomp.
BUILD   ?= build/$(if $(filter 1,$(SANITIZE)),san,rel)$(if $(filter 1,$(KVQ_PORTABLE)),-portable)$(if $(filter 1,$(OMP)),,-noomp)

# The exact compiler and flags, in a file that changes only when they do: every object and
# binary depends on it, so `make EXTRA_CFLAGS=-Werror`, CC=clang or a new CFLAGS rebuilds
# what the directory name does not tell apart.
FLAGS_STAMP := $(BUILD)/flags
flags_line   = $(subst ','\'',$(CC) $(CFLAGS) | $(LDFLAGS) | $(LDLIBS))
# Every .c in these folders is part of the library: a new file needs no edit here.
LIB_SRC  := $(wildcard model/*.c model/formats/*.c model/kernels/*.c tokenizer/*.c quant/*.c eval/*.c)
# Every header: any change rebuilds every object (model/ has sub-folders, hence two levels).
# The tests' headers are not the library's: editing one rebuilds only the tests.
LIB_HDR  := $(filter-out tests/%,$(wildcard */*.h */*/*.h))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
# The tests' own headers (the harness, seeded random numbers, the reference codecs).
TEST_HDR := $(wildcard tests/*.h)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: sweep-demo probes-demo allocate-demo frontier calibrations sweep-calibrated all test check test-aarch64 bench clean run FORCE
all: run

# ./run is a copy of the last build's binary, so `make` after `make SANITIZE=1 test`
# gives back the optimized one. Copied to a temp name, then renamed over ./run: a ./run still
# running (a long sweep) keeps its binary, the next start gets the new one (cp onto a running
# binary fails, "Text file busy"). tests/test_build.sh checks it.
run: $(BUILD)/run
	@cp $(BUILD)/run run.tmp.$$$$ && mv -f run.tmp.$$$$ run || { rm -f run.tmp.$$$$; exit 1; }

$(BUILD)/run: $(BUILD)/run.o $(BUILD)/libkvq.a $(FLAGS_STAMP)
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/run.o $(BUILD)/libkvq.a $(LDLIBS)

# Rewritten only when the flags differ from the last build's: its date then rebuilds everything.
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(flags_line)' | cmp -s - $@ || printf '%s\n' '$(flags_line)' >$@
FORCE:

$(BUILD)/libkvq.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c $(LIB_HDR) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(TEST_HDR) $(BUILD)/libkvq.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkvq.a $(LDLIBS)

test: run $(TEST_BIN)
	@sh tests/run_tests.sh $(BUILD)/tests

# `make check`: the quick tier for everyday work, every test program with the long reference
# checks on a sample of their rows (KVQ_QUICK=1; each says which), two programs at a time
# (KVQ_TEST_JOBS=N for another number). `make test` (CI's) checks all, one program at a time.
check: run $(TEST_BIN)
	@KVQ_QUICK=1 KVQ_TEST_JOBS=$${KVQ_TEST_JOBS:-2} sh tests/run_tests.sh $(BUILD)/tests

bench: run $(BUILD)/tests/bench_rans
	./run bench --random tinyllama --ppl
	./run bench --random tinyllama --precision exact --ppl --no-probe
	$(BUILD)/tests/bench_rans   # compress --entropy's coder and section packer: MB/s of codes, one core

# `make sweep-demo`: the README's sweep of data/sweeps/configs.txt on both bundled models,
# from scratch (an existing journal would be resumed, not recomputed).
SWEEP_DEMO_ARGS := --ctx 1024 --stride 512 --windows 16 --configs data/sweeps/configs.txt --quiet
sweep-demo: run
	rm -rf data/sweeps/mini-llama-brown data/sweeps/mini-llama-brown-outliers
	./run sweep data/models/mini-llama-brown $(SWEEP_DEMO_ARGS) --out-dir data/sweeps/mini-llama-brown
	./run sweep data/models/mini-llama-brown-outliers $(SWEEP_DEMO_ARGS) --out-dir data/sweeps/mini-llama-brown-outliers

# `make calibrations`: the bundled models' kv-calib.safetensors (data/README.md), fitted on the
# calibration split (wiki.valid, ./run calibrate's default text). `make sweep-calibrated`: the
# README's calibrated-against-uncalibrated sweep (data/sweeps/calibrated.txt) on both, on wiki.test.
CALIB_FITS := --fit nuq2-g64 --fit nuq3-g64 --fit nuq4-g64 --fit nuq2-t64 --fit nuq2-g64+had --fit nuq3-g64+had \
              --fit vq8-d4 --fit vq8-d8 --fit vq8-d4+had --fit vq8-d4+aw --fit rvq8x2-d8+aw \
              --fit pca2+prerope+aw --fit pca2+aw --fit pca0.5+prerope+aw --fit pca0.5+aw --fit pca1+prerope+aw --fit pca1+aw \
              --fit pca3+prerope+aw --fit pca3+aw --fit pca4+prerope+aw --fit pca4+aw \
              --fit pca0.25+prerope+aw --fit pca0.25+aw --fit pca0.375+prerope+aw --fit pca0.375+aw \
              --fit pca0.75+prerope+aw --fit pca0.75+aw --fit pca1.5+prerope+aw --fit pca1.5+aw \
              --fit pca1.75+prerope+aw --fit pca1.75+aw --fit pca1.25+prerope+aw --fit pca1.25+aw \
              --fit pca2.5+prerope+aw --fit pca2.5+aw
# 65,536 tokens of wiki.valid, four times calibrate's default: on the outlier model's wiki.test uniform
# pca2's KL is 24% lower than fitted on 16,384 (0.00191 -> 0.00146), pca1.75+res16's 20%, pca0.5's 4%.
CALIB_TOKENS := 65536
calibrations: run
	./run calibrate data/models/mini-llama-brown $(CALIB_FITS) --tokens $(CALIB_TOKENS) --quiet --out data/models/mini-llama-brown/kv-calib.safetensors
	./run calibrate data/models/mini-llama-brown-outliers $(CALIB_FITS) --tokens $(CALIB_TOKENS) --quiet --out data/models/mini-llama-brown-outliers/kv-calib.safetensors
SWEEP_CALIBRATED_ARGS := --ctx 1024 --stride 512 --windows 16 --configs data/sweeps/calibrated.txt --quiet
sweep-calibrated: run
	rm -rf data/sweeps/calibrated-mini-llama-brown data/sweeps/calibrated-mini-llama-brown-outliers
	./run sweep data/models/mini-llama-brown $(SWEEP_CALIBRATED_ARGS) --out-dir data/sweeps/calibrated-mini-llama-brown
	./run sweep data/models/mini-llama-brown-outliers $(SWEEP_CALIBRATED_ARGS) --out-dir data/sweeps/calibrated-mini-llama-brown-outliers

# `make probes-demo`: the README's probes (./run probe's copy and greedy divergence) on the sweep demo's
# configurations, both bundled models, into data/sweeps/MODEL/probe-*.{md,csv,json}: the sweep's journal
# there is resumed (after `make sweep-demo` nothing is recomputed), then each probe runs. The passkey on
# the fp32 cache alone (both models fail it: the probe is not meaningful on them) in data/sweeps/passkey-*.md.
PROBES_DEMO_ARGS := --probe copy --probe diverge
probes-demo: run
	./run sweep data/models/mini-llama-brown $(SWEEP_DEMO_ARGS) --out-dir data/sweeps/mini-llama-brown $(PROBES_DEMO_ARGS) >/dev/null
	./run sweep data/models/mini-llama-brown-outliers $(SWEEP_DEMO_ARGS) --out-dir data/sweeps/mini-llama-brown-outliers $(PROBES_DEMO_ARGS) >/dev/null
	./run probe data/models/mini-llama-brown --task passkey --ctx 1024 --sequences 2 >data/sweeps/passkey-mini-llama-brown.md
	./run probe data/models/mini-llama-brown-outliers --task passkey --ctx 1024 --sequences 2 >data/sweeps/passkey-mini-llama-brown-outliers.md

# `make allocate-demo`: the README's per-layer sensitivity (wiki.valid, the calibration split) and the
# allocations at 0.5, 1, 2, 3 and 4.5 bits (the frontier's budgets) checked on held-out windows
# (wiki.test), and on the sensitivity's own windows (wiki.valid: how additive the damage is), on both
# bundled models, into data/sensitivity/. Keys and values have their own candidates (pre-RoPE keys), in
# parallel lists: the i-th of each is one uniform configuration. Every fitted base at each bit level:
# pcaB at 0.5 to 4 bits, vq8-d4 and rvq8x2-d8 at 2.25, q8_0 for a layer that needs nearly all, and pcaB at
# 0.25, 0.75, 1.25, 1.5, 1.75 and 2.5 bits with a residual window of 16 positions (0.50, 0.99, 1.48, 1.73,
# 1.97 and 2.71 effective bits at ctx 1024): steps fine enough near 2 bits for one layer to take more.
ALLOC_K_CANDIDATES := pca0.5+prerope+aw,pca1+prerope+aw,pca2+prerope+aw,pca3+prerope+aw,pca4+prerope+aw,vq8-d4+aw,rvq8x2-d8+aw,q8_0,pca0.25+prerope+aw+res16,pca0.75+prerope+aw+res16,pca1.25+prerope+aw+res16,pca1.5+prerope+aw+res16,pca1.75+prerope+aw+res16,pca2.5+prerope+aw+res16
ALLOC_V_CANDIDATES := pca0.5+aw,pca1+aw,pca2+aw,pca3+aw,pca4+aw,vq8-d4+aw,rvq8x2-d8+aw,q8_0,pca0.25+aw+res16,pca0.75+aw+res16,pca1.25+aw+res16,pca1.5+aw+res16,pca1.75+aw+res16,pca2.5+aw+res16
ALLOC_SENSITIVITY_ARGS := --k-candidates $(ALLOC_K_CANDIDATES) --v-candidates $(ALLOC_V_CANDIDATES) \
    --ctx 1024 --stride 512 --windows 4 --quiet
ALLOC_ARGS := --budget 0.5,1,2,3,4.5 --verify --quiet
allocate-demo: run
	rm -rf data/sensitivity/mini-llama-brown data/sensitivity/mini-llama-brown-outliers
	for m in mini-llama-brown mini-llama-brown-outliers; do \
	    ./run sensitivity data/models/$$m $(ALLOC_SENSITIVITY_ARGS) --out-dir data/sensitivity/$$m >/dev/null && \
	    ./run allocate data/models/$$m --from data/sensitivity/$$m $(ALLOC_ARGS) --windows 16 \
	        --out-dir data/sensitivity/$$m/verify-test >/dev/null && \
	    ./run allocate data/models/$$m --from data/sensitivity/$$m $(ALLOC_ARGS) --windows 4 \
	        --text-file data/wikitext-2-raw/wiki.valid.raw --out-dir data/sensitivity/$$m/verify-valid >/dev/null || exit 1; \
	done

# `make frontier`: the README's low-bit frontier on both bundled models: the candidates of
# data/frontier/configs.txt plus allocate-demo's allocations (data/sensitivity/M/verify-test/allocation.json,
# those at a budget asked for), measured on wiki.valid (the choice) and wiki.test (the figures), ctx 1024,
# stride 512, 16 windows each, into data/frontier/M/ (frontier.md, .json, .svg and the two sweeps).
FRONTIER_ARGS := --configs data/frontier/configs.txt --budget 0.5,1,2,3,4.5 --quiet
frontier: run
	rm -rf data/frontier/mini-llama-brown data/frontier/mini-llama-brown-outliers
	for m in mini-llama-brown mini-llama-brown-outliers; do \
	    ./run frontier data/models/$$m $(FRONTIER_ARGS) --allocations data/sensitivity/$$m/verify-test/allocation.json \
	        --out-dir data/frontier/$$m >/dev/null || exit 1; \
	done

# `make test-aarch64`: the C tests cross-built for 64-bit Arm, so the NEON path
# (model/kernels/gemm_neon.c) is the one they check against the scalar path, run under
# qemu-aarch64 (Debian packages gcc-aarch64-linux-gnu and qemu-user; .ci/run installs
# them). Static, so no Arm libraries are needed at run time. test_eval is left out: its
# perplexity runs take ~15 minutes emulated and reach the matmuls through the same calls
# as test_forward, which compares the reference logits on this path. test_oom too: qemu-user
# does not apply its address-space caps to the emulated program. test_schemes_ref (52 such
# perplexity runs) neither: the codecs it uses are checked on this path by tests/test_codec_*.c
# and test_kvcache. test_calibrate neither: its 16 windows of 1024 tokens (over a minute
# natively) and six fits would take many times that emulated; they reach the matmuls through
# test_forward's calls and Lloyd through test_lloyd's. test_calibrate9 neither, for the same reason (4
# windows of 1024 tokens and four §9 fits; pca's and aw's arithmetic is checked there by test_pca).
# test_layer_resume neither: its sensitivity cells over 3 windows (17 s of CPU natively) check that a
# pass started at layer L equals the whole pass, bit for bit, which does not depend on the matmul path.
AARCH64_CC    ?= aarch64-linux-gnu-gcc
AARCH64_BUILD := build/aarch64
AARCH64_TESTS := $(filter-out $(AARCH64_BUILD)/tests/test_eval $(AARCH64_BUILD)/tests/test_oom \
                   $(AARCH64_BUILD)/tests/test_schemes_ref $(AARCH64_BUILD)/tests/test_calibrate \
                   $(AARCH64_BUILD)/tests/test_calibrate9 $(AARCH64_BUILD)/tests/test_layer_resume, \
                   $(TEST_SRC:tests/%.c=$(AARCH64_BUILD)/tests/%))
test-aarch64:
	CFLAGS=-O3 LDFLAGS=-static $(MAKE) CC=$(AARCH64_CC) BUILD=$(AARCH64_BUILD) $(AARCH64_TESTS)
	@sh tests/run_tests.sh --runner qemu-aarch64 $(AARCH64_TESTS)

clean:
	rm -rf build run run.tmp.*

# ---------------------------------------------------------------------------
# Fuzzing (tests/fuzz/, see tests/README.md). `make fuzz` builds every
# tests/fuzz/fuzz_*.c as a libFuzzer program with ASan + UBSan (library sources
# compiled the same way into build/fuzz/), runs each for FUZZ_SECONDS starting
# from the committed seeds in tests/fuzz/corpus/<target>/, writes new inputs to
# build/fuzz/corpus/<target>/ (never to the committed seeds), and fails on any
# crash, leak, timeout or sanitizer report (the input is saved as
# build/fuzz/artifacts/<target>-crash-*). Needs clang with libFuzzer
# (Debian/Ubuntu package libclang-rt-14-dev for clang 14).
#   make fuzz FUZZ_TARGETS=fuzz_json FUZZ_SECONDS=10
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_DIR     := build/fuzz
FUZZ_CFLAGS  := -std=c11 -Wall -Wextra -Wno-unknown-pragmas -D_POSIX_C_SOURCE=200809L -I. \
                -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_OBJ     := $(LIB_SRC:%.c=$(FUZZ_DIR)/%.o)
FUZZ_STAMP   := $(FUZZ_DIR)/flags

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)

$(FUZZ_DIR)/libkvq.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

# As $(FLAGS_STAMP): another FUZZ_CC rebuilds the objects.
$(FUZZ_STAMP): FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(subst ','\'',$(FUZZ_CC) $(FUZZ_CFLAGS))' | cmp -s - $@ || \
	    printf '%s\n' '$(subst ','\'',$(FUZZ_CC) $(FUZZ_CFLAGS))' >$@

$(FUZZ_DIR)/%.o: %.c $(LIB_HDR) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_DIR)/libkvq.a $(FUZZ_STAMP)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_DIR)/libkvq.a -lm

# Each target: scratch corpus first (libFuzzer writes there), committed seeds second (read only).
fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	    echo "== $$t ($(FUZZ_SECONDS) s)"; \
	    $(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t \
	        >$(FUZZ_DIR)/$$t.log 2>&1 || { tail -n 60 $(FUZZ_DIR)/$$t.log; echo "FAIL $$t: see $(FUZZ_DIR)/$$t.log"; exit 1; }; \
	    grep -E '^stat::number_of_executed_units|^Done' $(FUZZ_DIR)/$$t.log | tr '\n' ' '; echo; \
	done
