/*
 * opts.h - the one option parser of the ringload tools (every `ringload`
 * subcommand and mkckpt). Each command declares a table of its options:
 * which take a value, of what kind, and its range; the parser accepts
 * `--opt value` and `--opt=value` (as getopt_long does), `-h`/`--help` on
 * every command, `--` to end options, and reports every error as one line
 * that names the option. Sizes, integers and decimals are parsed here and
 * nowhere else. Needs nothing of the library (mkckpt links it alone); the
 * ranges of library parameters come in through a bounds function.
 */
#ifndef TOOLS_OPTS_H
#define TOOLS_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
	OPT_FLAG,    /* no value: *(int *)dst = 1 */
	OPT_STRING,  /* *(const char **)dst = the value */
	OPT_INT,     /* a decimal integer in [lo, hi]: *(int64_t *)dst */
	OPT_SIZE,    /* bytes, with K/M/G/T suffixes (powers of 1024), in [lo, hi]: *(int64_t *)dst */
	OPT_MILLI,   /* a decimal number (up to 3 decimals) x 1000, in [lo, hi]: *(int64_t *)dst */
	OPT_U64,     /* decimal or 0x hex, any 64-bit value: *(uint64_t *)dst */
	OPT_CHOICE,  /* one of choices[]: *(int *)dst = its index */
	OPT_LIST,    /* repeatable: appends the value to *(struct opt_list *)dst */
};

#define OPT_LIST_MAX 256
struct opt_list {
	const char *v[OPT_LIST_MAX];
	unsigned n;
};

struct opt {
	const char *name;      /* the long name, without "--" */
	enum opt_kind kind;
	void *dst;
	const char *metavar;   /* the value's name in the help: "N", "SIZE", "DIR" */
	const char *help;      /* one line */
	int64_t lo, hi;        /* range of OPT_INT, OPT_SIZE, OPT_MILLI ... */
	/* ... or, when set, the range of library parameter `param`, as
	 * rl_loader_param_bounds() and rl_plan_param_bounds() report it */
	int (*bounds)(int param, int64_t *lo, int64_t *hi);
	int param;
	const char *const *choices; /* OPT_CHOICE: NULL-terminated */
};

struct opt_cmd {
	const char *prog;       /* "ringload load": starts every message */
	const char *args;       /* positional arguments in the synopsis: "PATH" */
	const char *about;      /* lines printed after the synopsis by --help, or NULL */
	const struct opt *opts; /* ends with an entry whose name is NULL */
	unsigned min_args, max_args;
	const char **argv_out;  /* receives the positional arguments (max_args slots) */
};

enum { OPTS_OK = 0, OPTS_HELP = 1, OPTS_USAGE = -1 };

/*
 * Parses argv[1..argc) (argv[0] is the command's name) against cmd. Returns
 * OPTS_OK; OPTS_HELP after printing the usage on stdout (exit 0); or
 * OPTS_USAGE after printing one error line on stderr (exit 2).
 */
int opts_parse(const struct opt_cmd *cmd, int argc, char **argv);

/* The exit status for a result of opts_parse() other than OPTS_OK. */
int opts_exit_status(int parsed);

/* Prints the usage of cmd (synopsis, about, every option with its range). */
void opts_usage(const struct opt_cmd *cmd, FILE *f);

/*
 * The value parsers behind the kinds, for the tools' own use. Each returns
 * 0; OPTS_E_SYNTAX when s is not of the form; OPTS_E_RANGE when it is but
 * the value is negative or does not fit; OPTS_E_FRACTION for a size that
 * is not a whole number of bytes ("1.3K"). opts_parse_int() returns
 * negative values (the range check names them).
 */
enum { OPTS_E_SYNTAX = -1, OPTS_E_RANGE = -2, OPTS_E_FRACTION = -3 };
int opts_parse_size(const char *s, int64_t *out);
int opts_parse_int(const char *s, int64_t *out);
int opts_parse_milli(const char *s, int64_t *out);
int opts_parse_u64(const char *s, uint64_t *out);

/* v as the shortest size a user can type back: "4K", "1G", "1000". */
void opts_format_size(int64_t v, char *buf, size_t cap);

#endif
