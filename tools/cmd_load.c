/* cmd_load.c - placeholder until the load subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_load(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "ringload load: not built yet\n");
	return 2;
}
