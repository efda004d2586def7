/* eval/cli_help.h: ./run's help texts: each command's lines of the overview (./run --help) and its
 * own page (./run COMMAND --help: synopsis, every flag it takes with its default, examples, exit
 * codes). run.c's table of commands points at them; tests/test_cli_help.py checks that each page
 * names every flag its command's parser takes. */
#ifndef KVQ_CLI_HELP_H
#define KVQ_CLI_HELP_H

typedef struct {
    const char *usage;   /* its lines of ./run --help */
    const char *help;    /* ./run COMMAND --help */
} CommandHelp;

/* In the order of ./run --help. */
extern const CommandHelp HELP_GENERATE, HELP_LOGITS, HELP_TOKENIZE, HELP_PPL,
    HELP_PPL_MERGE, HELP_SWEEP, HELP_PROBE, HELP_SWEEP_MERGE, HELP_SENSITIVITY,
    HELP_ALLOCATE, HELP_FRONTIER, HELP_KV_EXTRACT, HELP_KV_INFO, HELP_COMPRESS, HELP_DECOMPRESS,
    HELP_QUICK_TEST, HELP_CALIBRATE, HELP_SCHEMES, HELP_BENCH, HELP_HELP, HELP_VALIDATE;

/* The overview's lines before the commands' and after them; the line every command's page ends with. */
extern const char HELP_OVERVIEW_TOP[], HELP_OVERVIEW_END[], HELP_PAGE_END[];

#endif
