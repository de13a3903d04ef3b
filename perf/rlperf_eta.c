/*
 * rlperf_eta.c - fio's status line while jobs run, once a second:
 *
 *   Jobs: 2 (f=2): [R(1),r(1)][45.0%][r=1024MiB/s][r=262k IOPS][eta 00m:11s]
 *
 * running clones and their files, a letter per clone (R read, r randread,
 * _ done; runs of one letter as fio's "R(4)"), the share of the run done,
 * the bandwidth and IOPS of the last second, and the time left. Each
 * update starts with '\r' and overwrites the last; a newline ends the run.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "perf_time.h"
#include "rlperf.h"

struct rp_eta {
	FILE *f;
	void (*tick)(struct rp_eta *e, int last);   /* eta_print or status_print */
	const struct rp_conf *conf;   /* status_print's */
	const struct rp_plan *plan;
	uint64_t interval_ns;
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop;                /* under lock: rp_eta_stop was called */
	struct rp_progress *p;
	size_t cap, n;           /* clones in p: the last rp_progress */
	uint64_t t0;
	uint64_t last_ns, last_bytes, last_ios;
	double bps, iops;        /* of the last interval */
	size_t width;            /* of the last line, to blank it over */
};

/* fio's eta_to_str: 05m:03s, 01h:05m:03s, 2d:01h:05m:03s */
static void eta_str(char *buf, size_t len, uint64_t s)
{
	unsigned d = (unsigned)(s / 86400), h = (unsigned)(s / 3600 % 24);
	unsigned m = (unsigned)(s / 60 % 60), sec = (unsigned)(s % 60);

	if (d)
		snprintf(buf, len, "%ud:%02uh:%02um:%02us", d, h, m, sec);
	else if (h)
		snprintf(buf, len, "%02uh:%02um:%02us", h, m, sec);
	else
		snprintf(buf, len, "%02um:%02us", m, sec);
}

/* Seconds left for one clone: its runtime's end, or its bytes at the rate
 * so far, whichever comes first; -1 when nothing says yet. */
static double clone_left(const struct rp_progress *p, double elapsed)
{
	double left = -1;

	if (p->finished)
		return 0;
	if (p->until_ns)
		left = (double)p->until_ns / 1e9 - elapsed;
	if (p->planned && p->bytes) {
		double by = elapsed * (double)(p->planned - p->bytes) / (double)p->bytes;

		if (left < 0 || by < left)
			left = by;
	}
	return left < 0 && (p->until_ns || p->bytes) ? 0 : left;
}

/* The letters of the clones, runs of one letter as "R(3)". */
static void run_str(char *buf, size_t len, const struct rp_progress *p, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len;) {
		char c = p[i].finished ? '_' : p[i].rw == RP_RANDREAD ? 'r' : 'R';
		size_t k = i + 1;

		while (k < n && (p[k].finished ? '_' : p[k].rw == RP_RANDREAD ? 'r' : 'R') == c)
			k++;
		used += (size_t)snprintf(buf + used, len - used, "%s%c(%zu)", i ? "," : "", c,
					 k - i);
		i = k;
	}
}

/*
 * One status line for n clones, elapsed seconds into the run, bytes and
 * reads per second over the last interval. The share done is fio's:
 * elapsed over elapsed plus the time left of the slowest clone.
 */
void rp_eta_line(char *buf, size_t len, const struct rp_progress *p, size_t n,
		 double elapsed, double bps, double iops)
{
	size_t running = 0, files = 0;
	double left = 0, pct;
	char rs[256], bw[32], io[32], eta[32];

	for (size_t i = 0; i < n; i++) {
		double l = clone_left(&p[i], elapsed);

		if (!p[i].finished) {
			running++;
			files += p[i].nfiles;
		}
		if (l < 0) {
			left = -1;
			break;
		}
		left = l > left ? l : left;
	}
	pct = left < 0 ? 0.0 : elapsed + left > 0 ? 100.0 * elapsed / (elapsed + left) : 100.0;
	run_str(rs, sizeof(rs), p, n);
	rp_num2str(bw, sizeof(bw), (uint64_t)bps, 4, 1, RP_N2S_BYTEPERSEC);
	rp_num2str(io, sizeof(io), (uint64_t)(iops + 0.5), 4, 0, RP_N2S_NONE);
	if (left < 0)
		snprintf(eta, sizeof(eta), "--m:--s");
	else
		eta_str(eta, sizeof(eta), (uint64_t)(left + 0.5));
	snprintf(buf, len, "Jobs: %zu (f=%zu): [%s][%.1f%%][r=%s][r=%s IOPS][eta %s]", running,
		 files, rs, pct, bw, io, eta);
}

/* One update: the line over the last one, blanks over what it leaves;
 * the last one shows every clone done and ends the line. */
static void eta_print(struct rp_eta *e, int last)
{
	uint64_t now = perf_now_ns(), bytes = 0, ios = 0;
	size_t n = last ? e->n : rp_progress(e->p, e->cap, &e->t0), w;
	double dt;
	char line[512];

	if (!n)
		return;
	e->n = n;
	for (size_t i = 0; i < n; i++) {
		e->p[i].finished |= last;
		bytes += e->p[i].bytes;
		ios += e->p[i].ios;
	}
	if (!e->last_ns)
		e->last_ns = e->t0;
	dt = (double)(now - e->last_ns) / 1e9;
	if (!last && dt > 0) {
		/* the last line keeps the rates of the last whole interval */
		e->bps = (double)(bytes - e->last_bytes) / dt;
		e->iops = (double)(ios - e->last_ios) / dt;
	}
	rp_eta_line(line, sizeof(line), e->p, n, (double)(now - e->t0) / 1e9, e->bps,
		    e->iops);
	w = strlen(line);
	fprintf(e->f, "\r%s%*s%s", line, (int)(e->width > w ? e->width - w : 0), "",
		last ? "\n" : "");
	fflush(e->f);
	e->width = w;
	e->last_ns = now;
	e->last_bytes = bytes;
	e->last_ios = ios;
}

static void *eta_main(void *arg)
{
	struct rp_eta *e = arg;
	struct timespec ts;

	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(e->interval_ns / 1000000000ull);
		ts.tv_nsec += (long)(e->interval_ns % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!e->stop && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT)
			;
		if (!e->stop)
			e->tick(e, 0);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* fio's status_interval: the whole report of the run so far, in the
 * report's format (fio's __show_running_run_stats); none at the end, where
 * main prints the final one. */
static void status_print(struct rp_eta *e, int last)
{
	struct rp_unit *units = NULL;
	struct rp_result res;
	struct rp_report rep;
	long n;

	if (last || rp_snapshot(&res))
		return;
	n = rp_units(e->plan, &res, &units);
	if (n > 0) {
		rep = (struct rp_report){ e->conf, e->plan, &res, units, (size_t)n, NULL };
		rp_print_report(e->f, &rep);
		fflush(e->f);
	}
	rp_units_free(units, n > 0 ? (size_t)n : 0);
	rp_result_free(&res);
}

static struct rp_eta *ticker_start(FILE *f, size_t clones, uint64_t interval_ns,
				   void (*tick)(struct rp_eta *e, int last))
{
	struct rp_eta *e = calloc(1, sizeof(*e));
	pthread_condattr_t ca;

	if (!e)
		return NULL;
	e->f = f;
	e->tick = tick;
	e->interval_ns = interval_ns;
	e->cap = clones;
	e->p = calloc(clones ? clones : 1, sizeof(*e->p));
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!e->p || pthread_create(&e->tid, NULL, eta_main, e)) {
		/* no status line is no reason to fail the run */
		pthread_cond_destroy(&e->cond);
		pthread_mutex_destroy(&e->lock);
		free(e->p);
		free(e);
		return NULL;
	}
	return e;
}

struct rp_eta *rp_eta_start(FILE *f, size_t clones, uint64_t interval_ns)
{
	return ticker_start(f, clones, interval_ns, eta_print);
}

struct rp_eta *rp_status_start(FILE *f, const struct rp_conf *c, const struct rp_plan *p)
{
	struct rp_eta *e = ticker_start(f, 0, c->status_interval_ns, status_print);

	if (e) {
		/* read by its thread, which waits on e->lock first */
		pthread_mutex_lock(&e->lock);
		e->conf = c;
		e->plan = p;
		pthread_mutex_unlock(&e->lock);
	}
	return e;
}

void rp_eta_stop(struct rp_eta *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = 1;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->tid, NULL);
	if (e->n)
		e->tick(e, 1);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	free(e->p);
	free(e);
}
