/* cmd_plan.c - placeholder until the plan subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_plan(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "ringload plan: not built yet\n");
	return 2;
}
