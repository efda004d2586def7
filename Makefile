# kvq build. `make` builds ./run; `make test` builds and runs the test suite;
# `make OMP=0` builds without OpenMP; `make SANITIZE=1 test` adds ASan/UBSan.
CC      ?= cc
OMP     ?= 1
SANITIZE ?= 0
CFLAGS  ?= -O3 -march=native
CFLAGS  += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -I.
LDLIBS  += -lm -lpthread

ifeq ($(OMP),1)
CFLAGS  += -fopenmp
LDFLAGS += -fopenmp
else
CFLAGS  += -Wno-unknown-pragmas
endif
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -g
LDFLAGS += -fsanitize=address,undefined
BUILD   ?= build/san
else
BUILD   ?= build/rel
endif

# Every .c in these folders is part of the library: a new file needs no edit here.
LIB_SRC  := $(wildcard model/*.c tokenizer/*.c quant/*.c eval/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test bench clean
all: run

run: $(BUILD)/run.o $(BUILD)/libkvq.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkvq.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c tests/test.h $(BUILD)/libkvq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkvq.a $(LDLIBS)

test: run $(TEST_BIN)
	@sh tests/run_tests.sh $(BUILD)/tests

bench: run
	./run bench --random tinyllama

clean:
	rm -rf build run
