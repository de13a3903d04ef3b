/*
 * signals.h - SIGINT and SIGTERM during `ringload load`. The library is
 * signal-agnostic, so the command handles them: one thread takes both
 * signals with sigwait() (they are blocked in every other thread, the
 * library's included) and raises a flag; the load's progress callback
 * returns non-zero on it (the load ends with RL_E_CANCELED), the --out
 * writer and --verify poll it between chunks, and the main thread removes
 * what it wrote and exits 128 + the signal.
 *
 * A library call that runs no callback for long (planning, allocating
 * staging) cannot see the flag: when the main thread has not taken charge
 * of a signal within 1 s, the signal thread runs the registered cleanup,
 * says why and exits 128 + the signal itself. While the main thread is
 * writing (cli_sig_guard(1)) it is never cut short: the writer polls.
 */
#ifndef TOOLS_SIGNALS_H
#define TOOLS_SIGNALS_H

/* Blocks SIGINT and SIGTERM in the calling thread: main() does so first
 * thing for `load`, so that a signal arriving before cli_sig_start() stays
 * pending for the signal thread (with SIGINT ignored, as in a background
 * job, it was discarded and the load ran to its end). Returns 0 or -errno. */
int cli_sig_block(void);

/* Blocks SIGINT and SIGTERM and starts the signal thread. Call before the
 * library starts any thread. Returns 0 or -errno. */
int cli_sig_start(const char *prog);

/* The first SIGINT or SIGTERM received, or 0. Cheap: poll it freely. */
int cli_sig_pending(void);

/* What the command is doing ("reading"), named if the watchdog must exit. */
void cli_sig_set_phase(const char *phase);

/* Called by the watchdog before it exits (NULL: nothing to clean up). */
void cli_sig_set_cleanup(void (*fn)(void *), void *arg);

/* 1: the main thread is writing and polls the flag; no forced exit. 0: ends that. */
void cli_sig_guard(int on);

/* The main thread takes charge of a pending signal and returns it (0 if
 * none). Does not return when the watchdog already took over. */
int cli_sig_claim(void);

/* "SIGINT", "SIGTERM" or "signal N". */
const char *cli_sig_name(int sig);

#endif
