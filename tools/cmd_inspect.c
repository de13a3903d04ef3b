/* cmd_inspect.c - placeholder until the inspect subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_inspect(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "ringload inspect: not built yet\n");
	return 2;
}
