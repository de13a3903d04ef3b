/* ringload.c - the command-line tool: inspect, plan and load checkpoints. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "signals.h"

/*
 * jemalloc, linked into this command, reads its options from this symbol.
 * A short-lived command gains nothing from keeping freed pages for reuse,
 * and planning at scale frees arrays as it grows them: hand freed pages
 * back at once (dirty and muzzy decay 0). That keeps the peak of `ringload
 * plan` at 100k tensors x 256 devices under 256 MiB at the same CPU time
 * (docs/benchmarks.md). Staging and I/O buffers are mmap'ed, not malloc'ed.
 * Unused where jemalloc is not linked (sanitizer builds).
 */
__attribute__((visibility("default"))) const char *malloc_conf =
	"dirty_decay_ms:0,muzzy_decay_ms:0";

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *synopsis;
} commands[] = {
	{ "inspect", cmd_inspect, "PATH [--json]" },
	{ "plan", cmd_plan, "PATH [--sharding SPEC] [--process P] [--all-processes] [--json] ..." },
	{ "load", cmd_load, "PATH [--sharding SPEC] [--process P] [--out DIR [--force]] "
			    "[--verify] [--json] ..." },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ringload COMMAND [options]   (ringload COMMAND --help for its options)\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "       ringload %s %s\n", commands[i].name, commands[i].synopsis);
	fprintf(f, "       ringload --version\n"
		"PATH is a .safetensors file, a directory of them, or a model.safetensors.index.json.\n"
		"Options take their value as --opt VALUE or --opt=VALUE; see man ringload.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	/* Before anything else: a SIGINT from now on cancels the load. */
	if (!strcmp(argv[1], "load") && cli_sig_block() < 0) {
		fprintf(stderr, "ringload load: cannot set up signal handling\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--version")) {
		printf("ringload %s\n", rl_version_string());
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (argv[1][0] == '-')
		fprintf(stderr, "ringload: unknown option '%s'\n", argv[1]);
	else
		fprintf(stderr, "ringload: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
