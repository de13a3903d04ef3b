/*
 * rlperf_log.c - fio's per-read logs (write_lat_log, write_bw_log,
 * write_iops_log), in fio 3.33's format and file names: NAME_lat.N.log,
 * NAME_clat.N.log, NAME_slat.N.log, NAME_bw.N.log, NAME_iops.N.log for job
 * clone N (1, 2, ... over the whole run), NAME the option's value or the
 * job's name; one line per read
 *
 *   time (ms since the clone started), value, 0 (read), bs, [offset,] 0
 *
 * (the offset with log_offset=1; the last column is fio's command priority,
 * always 0 here). Latency in ns (lat and clat alike, slat 0: rlperf does
 * not time submission), bandwidth in KiB/s, IOPS. With log_avg_msec=M a
 * line per M ms instead: the window's mean latency, bandwidth and IOPS,
 * bs and offset 0, as fio's windowed logs. Lines go through stdio's
 * buffer on the thread that owns the clone's ring, no lock.
 */
#include <errno.h>
#include <string.h>

#include "rlperf.h"

static const char *const log_kind[RP_NLOGS] = { "lat", "clat", "slat", "bw", "iops" };

static int open_log(struct rp_logs *l, int k, const char *name, size_t number,
		    char *err, size_t errlen)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s_%s.%zu.log", name, log_kind[k], number);
	l->f[k] = fopen(path, "w");
	if (!l->f[k]) {
		int e = errno;

		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int rp_logs_open(struct rp_logs *l, const struct rp_job *j, size_t number, char *err,
		 size_t errlen)
{
	const char *lat = j->lat_log, *bw = j->bw_log, *iops = j->iops_log;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	l->avg_ns = j->log_avg_ms * 1000000ull;
	l->offset = j->log_offset;
	l->prio_value = j->log_prio;
	/* a bare option (no file name) logs under the job's name, as fio */
	for (int k = 0; k < RP_NLOGS && !rc; k++) {
		const char *name = k < 3 ? lat : k == 3 ? bw : iops;

		if (name)
			rc = open_log(l, k, *name ? name : j->name, number, err, errlen);
	}
	if (rc)
		rp_logs_close(l);
	return rc;
}

/* fio's priority column: 0x%04x of the value with log_prio, else 1 for
 * the real-time class and 0 for any other */
static void prio_str(char *buf, size_t len, const struct rp_logs *l, uint32_t ioprio)
{
	if (l->prio_value)
		snprintf(buf, len, "0x%04x", (unsigned)ioprio);
	else
		snprintf(buf, len, "%u", ioprio >> RP_IOPRIO_CLASS_SHIFT == RP_IOPRIO_RT);
}

static void line(const struct rp_logs *l, int k, uint64_t t_ms, uint64_t v, uint64_t bs,
		 uint64_t off, uint32_t ioprio)
{
	FILE *f = l->f[k];
	char prio[16];

	if (!f)
		return;
	prio_str(prio, sizeof(prio), l, ioprio);
	if (l->offset)
		fprintf(f, "%llu, %llu, 0, %llu, %llu, %s\n", (unsigned long long)t_ms,
			(unsigned long long)v, (unsigned long long)bs, (unsigned long long)off,
			prio);
	else
		fprintf(f, "%llu, %llu, 0, %llu, %s\n", (unsigned long long)t_ms,
			(unsigned long long)v, (unsigned long long)bs, prio);
}

/* One windowed line of every log, for the window ending at end_ns. */
static void window_flush(struct rp_logs *l, uint64_t end_ns)
{
	uint64_t t = (end_ns - l->t0) / 1000000, ns = end_ns - l->win_ns;

	if (!l->w_n || !ns)
		return;
	/* fio's window means carry priority 0 */
	for (int k = 0; k < 3; k++)
		line(l, k, t, k == 2 ? 0 : l->w_lat / l->w_n, 0, 0, 0);
	line(l, 3, t, (uint64_t)((double)l->w_bytes / 1024.0 / ((double)ns / 1e9)), 0, 0, 0);
	line(l, 4, t, (uint64_t)((double)l->w_n / ((double)ns / 1e9) + 0.5), 0, 0, 0);
	l->w_lat = l->w_n = l->w_bytes = 0;
	l->win_ns = end_ns;
}

void rp_logs_read(struct rp_logs *l, uint64_t start_ns, uint64_t done_ns, uint64_t lat_ns,
		  uint64_t off, uint64_t bs, uint32_t ioprio)
{
	uint64_t t, since;

	if (!l->t0)
		l->t0 = l->win_ns = l->last_ns = start_ns;
	if (l->avg_ns) {
		if (done_ns - l->win_ns >= l->avg_ns)
			window_flush(l, done_ns);
		l->w_lat += lat_ns;
		l->w_bytes += bs;
		l->w_n++;
		return;
	}
	t = (done_ns - l->t0) / 1000000;
	since = done_ns > l->last_ns ? done_ns - l->last_ns : 1;
	line(l, 0, t, lat_ns, bs, off, ioprio);
	line(l, 1, t, lat_ns, bs, off, ioprio);
	line(l, 2, t, 0, bs, off, ioprio);
	/* fio's per-read samples: this read's bytes over the time since the
	 * last one, and one read */
	line(l, 3, t, (uint64_t)((double)bs / 1024.0 / ((double)since / 1e9)), bs, off, ioprio);
	line(l, 4, t, 1, bs, off, ioprio);
	l->last_ns = done_ns;
}

int rp_logs_close(struct rp_logs *l)
{
	int rc = 0;

	if (l->avg_ns && l->w_n)
		window_flush(l, l->win_ns + l->avg_ns);
	for (int k = 0; k < RP_NLOGS; k++)
		if (l->f[k] && fclose(l->f[k]) && !rc)
			rc = -errno;
	memset(l->f, 0, sizeof(l->f));
	return rc;
}
