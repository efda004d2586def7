/* eval/cli.h: how ./run reads a command line, below run.c's commands: flags with one or two dashes
 * and --flag=value, their values checked into one usage error (the first found), the flags that
 * commands share (each takes some: TAKES_*) and their checks, and text written on one line whatever
 * bytes it holds (run.c prints its errors with it), and how a command is found by its name in
 * run.c's table of them. run.c's cmd_* functions read their own flags with flag() and the value
 * parsers, the shared ones with next_arg(). */
#ifndef KVQ_CLI_H
#define KVQ_CLI_H

#include <stdio.h>
#include "eval/cli_help.h"
#include "model/formats/error.h"
#include "quant/scheme.h"

/* The shared flags, each command taking some (run.c: Command.takes). */
enum {
    TAKES_DIR = 1 << 0,         /* one argument without a dash: MODEL_DIR (kv-info: FILE) */
    TAKES_JSON = 1 << 1,        /* --json */
    TAKES_QUIET = 1 << 2,       /* --quiet */
    TAKES_KV_SCHEME = 1 << 3,   /* --kv-scheme S: keys and values */
    TAKES_KV_SIDES = 1 << 4,    /* --k-scheme S, --v-scheme S: one side each, over --kv-scheme */
    TAKES_WINDOW = 1 << 5,      /* --text-file F, --ctx N, --stride N */
    TAKES_EVAL = 1 << 6,        /* --windows, --max-tokens, --protocol, --shard, --batch, --precision */
    TAKES_CALIB = 1 << 7,       /* --calib FILE: the tables of fitted bases (./run calibrate) */
    TAKES_EVAL_RUN = TAKES_DIR | TAKES_JSON | TAKES_QUIET | TAKES_WINDOW | TAKES_EVAL,   /* ppl's and sweep's */
};

/* The evaluation flags' values (TAKES_WINDOW, TAKES_EVAL). */
typedef struct {
    const char *text_file, *protocol, *precision;
    int ctx, stride, windows, max_tokens, batch, shard_i, shard_n;
} EvalFlags;

/* A command line being read. */
typedef struct {
    int argc;
    char **argv;
    int i;                      /* next argument to read */
    const char *value;          /* value of the last matched flag */
    const char *typed;          /* that flag as typed ("-t", "--temperature"), for messages */
    int typed_len;              /* its length, without any "=value" */
    char bad[256];              /* the usage error */
    const char *cmd;            /* the command's name in messages ("validate" for --validate) */
    unsigned takes;             /* TAKES_* */
    const char *dir;            /* the shared flags' values */
    int json, quiet;
    const char *kv_scheme, *k_scheme, *v_scheme;   /* as given; NULL when not */
    const char *calib;          /* --calib FILE; NULL: MODEL_DIR's kv-calib.safetensors, if any */
    EvalFlags e;
} Args;

/* 1 if argv[i] is the flag `name` (a long name without dashes), and then it is read: its value
 * too if takes_value (a->value), or the usage error of a missing value or of a value given to a
 * flag that takes none. */
int flag(Args *a, const char *name, int takes_value);

/* The value parsers read the last matched flag's value into *out, or set the usage error naming
 * the flag as it was typed (they replace flag()'s "needs a value" with their own about ""). */
void parse_int(Args *a, int lo, int hi, int *out);
void parse_float(Args *a, float lo, float hi, float *out);
/* "64,128,256" into out[0..max): each in [lo, hi]; *n set. */
void parse_int_list(Args *a, int lo, int hi, int *out, int max, int *n);

/* A library call's failure (rc != 0) on a flag's value, as the usage error. */
void take_error(Args *a, int rc, const Error *err);
/* argv[i] is no flag the command takes: the usage error, and it is passed over. */
void unknown_arg(Args *a);
/* The checks after the flags: the first error found is the one reported. */
void require(Args *a, int ok, const char *msg);
/* "--precision must be exact or bf16" unless value is one of the two. */
void one_of(Args *a, const char *flag_name, const char *value, const char *first, const char *second);

/* Reads past the shared flags the command takes (a->takes) and its MODEL_DIR: 1 while an
 * argument is left for the command's own flags, 0 at the end or at the first error. */
int next_arg(Args *a);

/* A LAYERED scheme (quant/scheme.h) into *out; a syntax error is the usage error (-1). Checks
 * against the model (head_dim, layers) come when the cache is made, as bad input naming the part. */
int parse_scheme(Args *a, const char *text, KvSide side, KvLayered *out);
/* The shared flags' checks, after the command's own: --protocol and --precision, then the schemes
 * of keys (k) and values (v; NULL for one scheme), default_scheme for a side no flag names. 1 when
 * there is a usage error. */
int check_args(Args *a, const char *default_scheme, KvLayered *k, KvLayered *v);

/* "--scheme int4 -group-size 64" -> "int4-g64" (compress's flags from the seed); any other
 * spelling of --scheme is kept. */
void cli_compose_scheme(const char *scheme, int group, char *name, size_t n);

/* One of ./run's commands (run.c's table of them). */
typedef struct {
    const char *names[3];       /* its name, then other spellings */
    int (*run)(Args *a);
    unsigned takes;             /* the shared flags it takes (TAKES_*) */
    const CommandHelp *help;    /* its lines of ./run --help and its ./run COMMAND --help, which names
                                   every flag its parser takes (tests/test_cli_help.py) */
} Command;

/* The command of n that has the name, or NULL. */
const Command *command_find(const Command *commands, int n, const char *name);
/* The name of a command nearest to a mistyped one, within two edits (the first of the nearest,
 * in the table's order); NULL when none is that near. */
const char *command_nearest(const Command *commands, int n, const char *typed);

/* text on f as one line, whatever bytes it holds (a path, a --config, a file's text): control
 * bytes, DEL, C1 controls and bytes that are not UTF-8 are written as \n, \t, \r or \xHH. */
void put_escaped(FILE *f, const char *text);

/* The edit distance of a and b (Levenshtein; INT_MAX past 63 bytes): how a mistyped command is
 * matched to the nearest name. */
int cli_edit_distance(const char *a, const char *b);

#endif
