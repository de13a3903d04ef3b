/* cli.h - the ringload command's subcommands; each is a thin client of ringload.h. */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

#include <stdint.h>

#include "ringload.h"

/* Each returns the process exit status: 0 success, 1 invalid input or
 * failed load, 2 usage error (130/143: load interrupted by SIGINT/SIGTERM).
 * Errors go to stderr as one line. */
int cmd_inspect(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_load(int argc, char **argv);

/* inputs.c: what the subcommands share. */

/* Opens the checkpoint at path into *ck (NULL on failure), printing one
 * line naming the file and the reason on failure. Returns 0 or -1. */
int cli_open_ckpt(const char *prog, const char *path, rl_ckpt **ck);

/* Loads the spec file at path into *spec (NULL path: *spec = NULL, no
 * spec). Prints one line naming the file on failure. Returns 0 or -1. */
int cli_load_spec(const char *prog, const char *path, rl_spec **spec);

/* Option ranges from the library, in the form struct opt wants. */
int cli_plan_bounds(int param, int64_t *lo, int64_t *hi);
int cli_loader_bounds(int param, int64_t *lo, int64_t *hi);

#endif
