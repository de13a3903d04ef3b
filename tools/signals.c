/* signals.c - see signals.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "signals.h"

enum { RUNNING, GUARDED, CLAIMED, FORCED };

/* Polled by callbacks on every chunk: relaxed is enough, it is a flag that
 * publishes no other data (the rest is under mu). */
static atomic_int pending_sig;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int state;                /* mu */
static const char *phase = "starting";  /* mu */
static void (*cleanup_fn)(void *);      /* mu */
static void *cleanup_arg;               /* mu */
static const char *prog_name = "ringload";

const char *cli_sig_name(int sig)
{
	static char buf[32];

	if (sig == SIGINT)
		return "SIGINT";
	if (sig == SIGTERM)
		return "SIGTERM";
	snprintf(buf, sizeof(buf), "signal %d", sig);
	return buf;
}

static void stay_parked(void)
{
	/* The signal thread is ending the process (_exit); wait for it. */
	for (;;)
		pause();
}

/* Waits for the main thread to claim the signal; returns 1 when 1 s
 * passed unclaimed and unguarded (then state is FORCED). mu is held. */
static int wait_for_claim(void)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += 1;
	while (state != CLAIMED) {
		int r = state == GUARDED ? pthread_cond_wait(&cv, &mu)
					 : pthread_cond_timedwait(&cv, &mu, &deadline);

		if (r == ETIMEDOUT && state == RUNNING) {
			state = FORCED;
			return 1;
		}
	}
	return 0;
}

static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	void (*fn)(void *);
	int sig = 0;

	while (sigwait(set, &sig) != 0)
		;
	atomic_store_explicit(&pending_sig, sig, memory_order_relaxed);
	pthread_mutex_lock(&mu);
	if (!wait_for_claim()) {
		pthread_mutex_unlock(&mu);
		return NULL;  /* the main thread handles it; later signals stay blocked */
	}
	fn = cleanup_fn;
	fprintf(stderr, "\n%s: interrupted by %s while %s, which did not stop within 1 s: "
		"exiting\n", prog_name, cli_sig_name(sig), phase);
	if (fn)
		fn(cleanup_arg);
	_exit(128 + sig);
}

static sigset_t sig_set;

int cli_sig_block(void)
{
	sigemptyset(&sig_set);
	sigaddset(&sig_set, SIGINT);
	sigaddset(&sig_set, SIGTERM);
	/* Threads created later (the library's) inherit the mask. */
	return -pthread_sigmask(SIG_BLOCK, &sig_set, NULL);
}

int cli_sig_start(const char *prog)
{
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t t;
	int r;

	prog_name = prog;
	r = cli_sig_block();
	if (r)
		return r;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&cv);
	pthread_cond_init(&cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &attr, signal_thread, &sig_set);
	pthread_attr_destroy(&attr);
	return -r;
}

int cli_sig_pending(void)
{
	return atomic_load_explicit(&pending_sig, memory_order_relaxed);
}

void cli_sig_set_phase(const char *what)
{
	pthread_mutex_lock(&mu);
	phase = what;
	pthread_mutex_unlock(&mu);
}

void cli_sig_set_cleanup(void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&mu);
	cleanup_fn = fn;
	cleanup_arg = arg;
	pthread_mutex_unlock(&mu);
}

void cli_sig_guard(int on)
{
	pthread_mutex_lock(&mu);
	if (state == FORCED) {
		pthread_mutex_unlock(&mu);
		stay_parked();
	}
	if (state != CLAIMED)
		state = on ? GUARDED : RUNNING;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

int cli_sig_claim(void)
{
	int sig = cli_sig_pending();

	if (!sig)
		return 0;
	pthread_mutex_lock(&mu);
	if (state == FORCED) {
		pthread_mutex_unlock(&mu);
		stay_parked();
	}
	state = CLAIMED;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return sig;
}
