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

static void line(FILE *f, uint64_t t_ms, uint64_t v, uint64_t bs, int with_off, uint64_t off)
{
	if (!f)
		return;
	if (with_off)
		fprintf(f, "%llu, %llu, 0, %llu, %llu, 0\n", (unsigned long long)t_ms,
			(unsigned long long)v, (unsigned long long)bs, (unsigned long long)off);
	else
		fprintf(f, "%llu, %llu, 0, %llu, 0\n", (unsigned long long)t_ms,
			(unsigned long long)v, (unsigned long long)bs);
}

/* One windowed line of every log, for the window ending at end_ns. */
static void window_flush(struct rp_logs *l, uint64_t end_ns)
{
	uint64_t t = (end_ns - l->t0) / 1000000, ns = end_ns - l->win_ns;

	if (!l->w_n || !ns)
		return;
	for (int k = 0; k < 3; k++)
		line(l->f[k], t, k == 2 ? 0 : l->w_lat / l->w_n, 0, l->offset, 0);
	line(l->f[3], t, (uint64_t)((double)l->w_bytes / 1024.0 / ((double)ns / 1e9)), 0,
	     l->offset, 0);
	line(l->f[4], t, (uint64_t)((double)l->w_n / ((double)ns / 1e9) + 0.5), 0, l->offset, 0);
	l->w_lat = l->w_n = l->w_bytes = 0;
	l->win_ns = end_ns;
}

void rp_logs_read(struct rp_logs *l, uint64_t start_ns, uint64_t done_ns, uint64_t lat_ns,
		  uint64_t off, uint64_t bs)
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
	line(l->f[0], t, lat_ns, bs, l->offset, off);
	line(l->f[1], t, lat_ns, bs, l->offset, off);
	line(l->f[2], t, 0, bs, l->offset, off);
	/* fio's per-read samples: this read's bytes over the time since the
	 * last one, and one read */
	line(l->f[3], t, (uint64_t)((double)bs / 1024.0 / ((double)since / 1e9)), bs,
	     l->offset, off);
	line(l->f[4], t, 1, bs, l->offset, off);
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
