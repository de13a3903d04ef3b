/* cli.h - the ringload command's subcommands; each is a thin client of ringload.h. */
#ifndef RL_CLI_H
#define RL_CLI_H

/* Each returns the process exit status: 0 success, 1 invalid input or
 * failed load, 2 usage error. Errors go to stderr as one line. */
int cmd_inspect(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_load(int argc, char **argv);

#endif
