/*
 * mx.c - one collective call's communication: a private duplicate of the
 * caller's communicator (MPI_ERRORS_RETURN, so that an MPI error becomes
 * a failure this rank reports), failure notes, agreements, and waits with
 * a deadline.
 *
 * Failure protocol. A rank that fails sends a note to every other rank at
 * once; every rank keeps one receive of notes posted and polls it while it
 * waits or reads, so that the others stop early instead of finishing a
 * long read first. Phases end with an agreement (an allgather of votes)
 * that every rank reaches, since nobody ever blocks on a rank that cannot
 * come: receives are answered by data or, from a failing root, by empty
 * messages (batch.c). After a failed agreement every rank returns an
 * error naming the first failed rank and its reason (broadcast by it).
 * Waits that make no progress for the timeout end in the abort handler,
 * never in a hang.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "mx.h"

double mx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int mx_err(struct rl_mpi *m, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return code;
}

void mx_abort(struct mx *x, const char *msg)
{
	if (x->m->abort_fn) {
		x->m->abort_fn(x->m->abort_user, x->comm, msg);
		return;
	}
	/* The one place this library prints: a job about to be killed has no
	 * caller left to tell. */
	fprintf(stderr, "ringload: %s\n", msg);
	fflush(stderr);
	MPI_Abort(x->comm, 1);
}

/* Thread level and initialization: what MPI from this thread needs. */
static int check_mpi(struct rl_mpi *m)
{
	int init = 0, fin = 0, level = 0, main_thread = 0;

	MPI_Initialized(&init);
	MPI_Finalized(&fin);
	if (!init || fin)
		return mx_err(m, RL_E_MPI, "MPI is not initialized (or already finalized)");
	MPI_Query_thread(&level);
	MPI_Is_thread_main(&main_thread);
	if (level < MPI_THREAD_FUNNELED)
		return mx_err(m, RL_E_MPI,
			      "MPI was initialized with MPI_THREAD_SINGLE: ringload needs at least MPI_THREAD_FUNNELED (MPI_Init_thread), its engine runs threads");
	if (level == MPI_THREAD_FUNNELED && !main_thread)
		return mx_err(m, RL_E_MPI,
			      "MPI_THREAD_FUNNELED: call from the thread that initialized MPI");
	return 0;
}

static void post_note_recv(struct mx *x)
{
	MPI_Irecv(&x->note_in, sizeof(x->note_in), MPI_BYTE, MPI_ANY_SOURCE, MX_TAG_NOTE,
		  x->comm, &x->note_req);
}

int mx_begin(struct mx *x, struct rl_mpi *m, MPI_Comm comm)
{
	MPI_Comm dup = MPI_COMM_NULL;
	MPI_Request r;
	int ret, flag = 0, *ub = NULL;

	memset(x, 0, sizeof(*x));
	x->m = m;
	x->comm = comm;         /* until the duplicate exists: the abort's */
	x->note_req = MPI_REQUEST_NULL;
	m->failed_rank = -1;
	m->err[0] = '\0';
	if ((ret = check_mpi(m)))
		return ret;
	if (MPI_Comm_idup(comm, &dup, &r) != MPI_SUCCESS)
		return mx_err(m, RL_E_MPI, "MPI_Comm_idup failed");
	if ((ret = mx_wait(x, &r, 1, "the other ranks to start", NULL, NULL)))
		return ret;
	x->comm = dup;
	MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
	MPI_Comm_rank(dup, &x->rank);
	MPI_Comm_size(dup, &x->size);
	MPI_Comm_get_attr(dup, MPI_TAG_UB, &ub, &flag);
	x->tag_ub = flag && ub ? *ub : 32767;
	x->note_out = malloc((size_t)x->size * sizeof(*x->note_out));
	if (!x->note_out) {
		MPI_Comm_free(&x->comm);
		return mx_err(m, -ENOMEM, "out of memory");
	}
	for (int i = 0; i < x->size; i++)
		x->note_out[i] = MPI_REQUEST_NULL;
	post_note_recv(x);
	return 0;
}

static void vfail(struct mx *x, int code, const char *fmt, va_list ap)
{
	x->failed = 1;
	x->code = code;
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	x->note_mine.rank = x->rank;
	x->note_mine.code = code;
	memcpy(x->note_mine.msg, x->msg, sizeof(x->msg));
	/* Small messages go eagerly: these complete whatever the others do. */
	for (int r = 0; r < x->size; r++)
		if (r != x->rank)
			MPI_Isend(&x->note_mine, sizeof(x->note_mine), MPI_BYTE, r, MX_TAG_NOTE,
				  x->comm, &x->note_out[r]);
	x->notes_sent = 1;
}

int mx_fail(struct mx *x, int code, const char *fmt, ...)
{
	va_list ap;

	if (x->failed)
		return code;    /* the first failure is the one reported */
	va_start(ap, fmt);
	vfail(x, code, fmt, ap);
	va_end(ap);
	return code;
}

int mx_poll(struct mx *x)
{
	int flag = 0;

	if (x->note_req != MPI_REQUEST_NULL &&
	    MPI_Test(&x->note_req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
		x->notes_seen++;
		x->peer_failed = 1;
		post_note_recv(x);
	}
	return x->failed || x->peer_failed;
}

/*
 * A round with nothing completed: a large message moves a fragment per
 * test when shared memory cannot copy it in one go, so the first rounds
 * only yield the core (and test again at once); then short sleeps (up to
 * 100 us), so that a rank waiting long on a slow reader leaves it the
 * core. Longer sleeps cost whole seconds on fragmented messages.
 */
static void backoff(long *idle)
{
	struct timespec ts = { 0, 100000 };

	if (++*idle < 2000) {
		sched_yield();
		return;
	}
	nanosleep(&ts, NULL);
}

/* The deadline of a wait: the abort handler when nothing moved for long. */
static int overdue(struct mx *x, const char *what)
{
	char msg[256];

	if (mx_now() - x->last_progress <= x->m->timeout_ms / 1000.0)
		return 0;
	snprintf(msg, sizeof(msg),
		 "rank %d: no progress for %.1f s waiting for %s (RL_MPI_TIMEOUT_MS): aborting the job",
		 x->rank, x->m->timeout_ms / 1000.0, what);
	mx_abort(x, msg);
	return mx_fail(x, RL_E_MPI, "%s", msg);   /* a handler that returned */
}

/* One pass over reqs: done() for those that completed. Returns how many
 * completed (0 when none), or -1 after an MPI error. */
static int test_some(struct mx *x, MPI_Request *reqs, int n, mx_done_fn done, void *arg,
		     int *idx, MPI_Status *st)
{
	int out = 0, rc = MPI_Testsome(n, reqs, &out, idx, st);

	/* MPI_ERR_IN_STATUS: a request failed (a truncated receive); the
	 * statuses say which, and done() judges. */
	if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
		mx_fail(x, RL_E_MPI, "MPI_Testsome failed (error %d)", rc);
		return -1;
	}
	if (out == MPI_UNDEFINED)
		return 0;
	for (int i = 0; i < out && done; i++) {
		if (rc == MPI_SUCCESS)
			st[i].MPI_ERROR = MPI_SUCCESS;  /* set only with MPI_ERR_IN_STATUS */
		done(x, arg, idx[i], &st[i]);
	}
	return out;
}

int mx_test(struct mx *x, MPI_Request *reqs, int n, mx_done_fn done, void *arg)
{
	int *idx = malloc((size_t)(n ? n : 1) * sizeof(*idx));
	MPI_Status *st = malloc((size_t)(n ? n : 1) * sizeof(*st));
	int ret = 0;

	if (!idx || !st)
		ret = mx_fail(x, -ENOMEM, "out of memory");
	else if (test_some(x, reqs, n, done, arg, idx, st) < 0)
		ret = RL_E_MPI;
	free(idx);
	free(st);
	mx_poll(x);
	return ret;
}

static int pending(const MPI_Request *reqs, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += reqs[i] != MPI_REQUEST_NULL;
	return k;
}

int mx_wait(struct mx *x, MPI_Request *reqs, int n, const char *what, mx_done_fn done,
	    void *arg)
{
	int *idx = malloc((size_t)(n ? n : 1) * sizeof(*idx));
	MPI_Status *st = malloc((size_t)(n ? n : 1) * sizeof(*st));
	long idle = 0;
	int left = pending(reqs, n), ret = 0;

	if (!idx || !st)
		ret = mx_fail(x, -ENOMEM, "out of memory");
	x->last_progress = mx_now();
	while (!ret && left > 0) {
		int k = test_some(x, reqs, n, done, arg, idx, st);

		if (k < 0) {
			ret = RL_E_MPI;
			break;
		}
		mx_poll(x);
		if (k) {
			left -= k;
			x->last_progress = mx_now();
			idle = 0;
			continue;
		}
		if ((ret = overdue(x, what)))
			break;
		backoff(&idle);
	}
	free(idx);
	free(st);
	return ret;
}

int mx_agree(struct mx *x, int value, int *values)
{
	struct mx_vote me = { x->failed, x->code, x->notes_sent, value }, *all;
	char msg[MX_MSG];
	MPI_Request r;
	int first = -1, first_code = 0, ret;

	all = malloc((size_t)x->size * sizeof(*all));
	if (!all)       /* without memory to vote, this rank can only stop the job */
		mx_abort(x, "out of memory for an agreement");
	if (!all || MPI_Iallgather(&me, sizeof(me), MPI_BYTE, all, sizeof(me), MPI_BYTE,
				   x->comm, &r) != MPI_SUCCESS ||
	    (ret = mx_wait(x, &r, 1, "the other ranks to agree", NULL, NULL))) {
		free(all);
		return mx_err(x->m, RL_E_MPI, "rank %d: an agreement failed", x->rank);
	}
	x->notes_due = 0;
	for (int q = 0; q < x->size; q++) {
		if (values)
			values[q] = all[q].value;
		if (all[q].failed && first < 0) {
			first = q;
			first_code = all[q].code;
		}
		if (q != x->rank)
			x->notes_due += all[q].notes;
	}
	free(all);
	if (first < 0)
		return 0;
	/* The reason: the first failed rank's own words. */
	memcpy(msg, x->msg, sizeof(msg));
	if (MPI_Ibcast(msg, MX_MSG, MPI_CHAR, first, x->comm, &r) != MPI_SUCCESS ||
	    mx_wait(x, &r, 1, "the failed rank's reason", NULL, NULL))
		snprintf(msg, sizeof(msg), "(its reason could not be received)");
	msg[MX_MSG - 1] = '\0';
	x->m->failed_rank = x->failed ? x->rank : first;
	if (x->failed)
		return mx_err(x->m, x->code, "rank %d: %s", x->rank, x->msg);
	/* A file's digest is the file's, not the rank's: every rank says so. */
	return mx_err(x->m, first_code == RL_E_CHECKSUM ? RL_E_CHECKSUM : RL_E_PEER,
		      "rank %d failed: %s", first, msg);
}

/* Takes the notes the last agreement announced: they are on their way. */
static void drain_notes(struct mx *x)
{
	long idle = 0;

	x->last_progress = mx_now();
	while (x->notes_seen < x->notes_due) {
		int seen = x->notes_seen;

		mx_poll(x);
		if (x->notes_seen > seen) {
			x->last_progress = mx_now();
			continue;
		}
		if (overdue(x, "failure notes"))
			return;
		backoff(&idle);
	}
}

void mx_end(struct mx *x)
{
	if (x->comm == MPI_COMM_NULL || !x->note_out)
		return;
	/* Every note the last agreement announced, then the posted receive. */
	drain_notes(x);
	if (x->note_req != MPI_REQUEST_NULL) {
		MPI_Cancel(&x->note_req);
		MPI_Wait(&x->note_req, MPI_STATUS_IGNORE);
	}
	mx_wait(x, x->note_out, x->size, "failure notes to be taken", NULL, NULL);
	free(x->note_out);
	x->note_out = NULL;
	MPI_Comm_free(&x->comm);
}
