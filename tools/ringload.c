/* ringload.c - the command-line tool: inspect, plan and load checkpoints. */
#include <stdio.h>
#include <string.h>

#include "ringload.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ringload inspect PATH [--json]\n"
		"       ringload plan PATH --sharding SPEC [--process P] [--json]\n"
		"       ringload load PATH [--sharding SPEC] [--process P]\n"
		"                     [--backend auto|io_uring|libaio|pread] [--out DIR] [--verify]\n"
		"       ringload --version\n"
		"PATH is a .safetensors file, a directory of them, or a model.safetensors.index.json.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "inspect"))
		return cmd_inspect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "plan"))
		return cmd_plan(argc - 1, argv + 1);
	if (!strcmp(argv[1], "load"))
		return cmd_load(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--version")) {
		printf("ringload %s\n", rl_version_string());
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "ringload: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
