/*
 * cmd_load.c - `ringload load`: plans a checkpoint for a sharding (none:
 * every tensor whole on one device), loads it, prints one summary line,
 * and optionally writes every shard to --out DIR and checks every shard
 * against a plain pread-and-slice of the file (--verify). A thin client of
 * ringload.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ringload.h"
#include "cli.h"

struct load_args {
	const char *path, *sharding, *out, *backend;
	int process, verify, caller_staging, quiet, no_direct;
	int64_t queue_depth, request_bytes, inflight_bytes, workers;
};

static void load_usage(FILE *f)
{
	fprintf(f,
		"usage: ringload load PATH [--sharding SPEC] [--process P]\n"
		"                     [--backend auto|io_uring|libaio|pread] [--out DIR] [--verify]\n"
		"                     [--queue-depth N] [--request-bytes N] [--inflight-bytes N]\n"
		"                     [--staging library|caller] [--buffered] [--workers N] [--quiet]\n"
		"Sizes take a K, M or G suffix (powers of 1024).\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "4M" -> 4194304; -1 when not a size. */
static int64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end || v > (unsigned long long)(INT64_MAX >> shift))
		return -1;
	return (int64_t)(v << shift);
}

static int parse_args(int argc, char **argv, struct load_args *a)
{
	memset(a, 0, sizeof(*a));
	a->queue_depth = a->request_bytes = a->inflight_bytes = a->workers = -1;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--verify")) {
			a->verify = 1;
		} else if (!strcmp(o, "--quiet")) {
			a->quiet = 1;
		} else if (!strcmp(o, "--buffered")) {
			a->no_direct = 1;
		} else if (o[0] == '-' && o[1] == '-') {
			if (!v) {
				fprintf(stderr, "ringload load: %s needs a value\n", o);
				return -1;
			}
			i++;
			if (!strcmp(o, "--sharding")) {
				a->sharding = v;
			} else if (!strcmp(o, "--process")) {
				char *end;
				long p = strtol(v, &end, 10);

				if (*end || end == v || p < 0 || p > 1 << 20) {
					fprintf(stderr, "ringload load: bad --process '%s'\n", v);
					return -1;
				}
				a->process = (int)p;
			} else if (!strcmp(o, "--backend")) {
				a->backend = v;
			} else if (!strcmp(o, "--out")) {
				a->out = v;
			} else if (!strcmp(o, "--staging")) {
				if (strcmp(v, "caller") && strcmp(v, "library")) {
					fprintf(stderr, "ringload load: --staging library|caller\n");
					return -1;
				}
				a->caller_staging = !strcmp(v, "caller");
			} else if (!strcmp(o, "--queue-depth") || !strcmp(o, "--request-bytes") ||
				   !strcmp(o, "--inflight-bytes") || !strcmp(o, "--workers")) {
				int64_t n = parse_size(v);

				if (n < 0) {
					fprintf(stderr, "ringload load: bad %s '%s'\n", o, v);
					return -1;
				}
				if (!strcmp(o, "--queue-depth"))
					a->queue_depth = n;
				else if (!strcmp(o, "--request-bytes"))
					a->request_bytes = n;
				else if (!strcmp(o, "--workers"))
					a->workers = n;
				else
					a->inflight_bytes = n;
			} else {
				fprintf(stderr, "ringload load: unknown option '%s'\n", o);
				return -1;
			}
		} else if (!a->path) {
			a->path = o;
		} else {
			fprintf(stderr, "ringload load: unexpected argument '%s'\n", o);
			return -1;
		}
	}
	if (!a->path) {
		fprintf(stderr, "ringload load: no checkpoint given\n");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Progress bar: on a terminal only, at most every 100 ms. */

struct bar {
	double last;
	int shown;
};

static int show_progress(void *user, uint64_t done, uint64_t total)
{
	struct bar *b = user;
	double t = now_s();
	int width = 40, fill;

	if (!total || (t - b->last < 0.1 && done != total))
		return 0;
	b->last = t;
	b->shown = 1;
	fill = (int)(width * (double)done / (double)total);
	fprintf(stderr, "\r[%.*s%*s] %3d%% %.2f/%.2f GB", fill,
		"########################################", width - fill, "",
		(int)(100.0 * (double)done / (double)total), done / 1e9, total / 1e9);
	return 0;
}

/* ------------------------------------------------------------------ */
/* --out: DIR/<device id>/<name>.bin, '/' and '%' percent-encoded. */

/*
 * Encodes name into out (n bytes). Returns the length of "<encoded>.bin",
 * or -1 when that is longer than NAME_MAX (the file could not exist).
 */
static int encode_name(const char *name, char *out, size_t n)
{
	size_t j = 0;

	for (; *name; name++) {
		if (j + 4 + 4 >= n || j + 4 > NAME_MAX)
			return -1;
		if (*name == '/' || *name == '%')
			j += (size_t)snprintf(out + j, n - j, "%%%02X", (unsigned char)*name);
		else
			out[j++] = *name;
	}
	if (j + 4 > NAME_MAX)
		return -1;
	out[j] = '\0';
	return (int)(j + 4);
}

static int write_all(const char *path, const uint8_t *p, uint64_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	while (n) {
		ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);

		if (w < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			close(fd);
			return -err;
		}
		p += w;
		n -= (uint64_t)w;
	}
	return close(fd) ? -errno : 0;
}

static int mkdir_p(const char *dir)
{
	char buf[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (char *c = buf + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*c = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tensor of the plan, once, sorted (malloc). */
static const char **plan_names(const rl_plan *plan, size_t *np)
{
	size_t nsh = rl_plan_num_shards(plan), n = 0;
	const char **names = calloc(nsh ? nsh : 1, sizeof(*names));

	if (!names)
		return NULL;
	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;

		rl_plan_shard(plan, s, &si);
		names[n++] = si.name;
	}
	qsort(names, n, sizeof(*names), cmp_str);
	if (n) {
		size_t j = 1;

		for (size_t i = 1; i < n; i++)
			if (strcmp(names[j - 1], names[i]))
				names[j++] = names[i];
		n = j;
	}
	*np = n;
	return names;
}

/*
 * Before loading: DIR exists (created if needed) as a writable directory,
 * and every tensor's file name fits. Prints one error line and returns -1
 * otherwise.
 */
static int check_out(const char *out, const rl_plan *plan)
{
	char enc[NAME_MAX + 16];
	struct stat sb;
	const char **names;
	size_t n = 0;
	int ret;

	names = plan_names(plan, &n);
	if (!names) {
		fprintf(stderr, "ringload load: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (encode_name(names[i], enc, sizeof(enc)) < 0) {
			fprintf(stderr,
				"ringload load: --out: tensor \"%.64s...\" (%zu bytes): its file name "
				"(percent-encoded, + .bin) would exceed %d bytes\n",
				names[i], strlen(names[i]), NAME_MAX);
			free(names);
			return -1;
		}
	}
	free(names);
	ret = mkdir_p(out);
	if (ret == 0 && stat(out, &sb) < 0)
		ret = -errno;
	if (ret == 0 && !S_ISDIR(sb.st_mode))
		ret = -ENOTDIR;
	if (ret == 0 && access(out, W_OK | X_OK) < 0)
		ret = -errno;
	if (ret < 0) {
		fprintf(stderr, "ringload load: --out %s: %s\n", out, strerror(-ret));
		return -1;
	}
	return 0;
}

/* Removes what write_out() wrote for devices [0, ndone] (best effort). */
static void remove_out(const char *out, const rl_plan *plan, const char **names,
		       size_t nnames, unsigned ndone)
{
	char path[8192], enc[NAME_MAX + 16];

	for (unsigned d = 0; d <= ndone && d < rl_plan_num_devices(plan); d++) {
		rl_device_info di;

		rl_plan_device(plan, d, &di);
		for (size_t i = 0; i < nnames; i++) {
			if (encode_name(names[i], enc, sizeof(enc)) < 0)
				continue;
			snprintf(path, sizeof(path), "%s/%u/%s.bin", out, di.id, enc);
			unlink(path);
		}
		snprintf(path, sizeof(path), "%s/%u", out, di.id);
		rmdir(path); /* only if now empty */
	}
}

/*
 * Writes DIR/<device id>/<name>.bin for every device. On failure prints one
 * line naming the path, removes the files it wrote, and returns -1.
 */
static int write_out(const char *out, const rl_plan *plan, const rl_loader *ld)
{
	unsigned ndev = rl_plan_num_devices(plan), d;
	size_t nsh = rl_plan_num_shards(plan), nnames = 0;
	const char **names = plan_names(plan, &nnames);
	char path[8192], enc[NAME_MAX + 16];
	int rc = -1, ret = 0;

	if (!names) {
		fprintf(stderr, "ringload load: out of memory\n");
		return -1;
	}
	for (d = 0; d < ndev; d++) {
		rl_device_info di;
		uint8_t *base = rl_loader_staging(ld, d, NULL);

		rl_plan_device(plan, d, &di);
		snprintf(path, sizeof(path), "%s/%u", out, di.id);
		ret = mkdir_p(path);
		if (ret < 0)
			goto fail;
		/* First an empty file for every tensor, then the shards this
		 * device holds (shards are ordered by device). check_out()
		 * made sure every name fits. */
		for (size_t i = 0; i < nnames; i++) {
			encode_name(names[i], enc, sizeof(enc));
			snprintf(path, sizeof(path), "%s/%u/%s.bin", out, di.id, enc);
			ret = write_all(path, NULL, 0);
			if (ret < 0)
				goto fail;
		}
		for (size_t s = 0; s < nsh; s++) {
			rl_shard_info si;

			rl_plan_shard(plan, s, &si);
			if (si.device != d || !si.nbytes)
				continue;
			encode_name(si.name, enc, sizeof(enc));
			snprintf(path, sizeof(path), "%s/%u/%s.bin", out, di.id, enc);
			ret = base ? write_all(path, base + si.offset, si.nbytes) : -EFAULT;
			if (ret < 0)
				goto fail;
		}
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "ringload load: %s: %s\n", path, strerror(-ret));
	remove_out(out, plan, names, nnames, d);
out:
	free(names);
	return rc;
}

/* ------------------------------------------------------------------ */
/* --verify: every shard against pread-and-slice of its tensor's bytes. */

static int pread_all(int fd, uint8_t *p, uint64_t n, uint64_t off)
{
	while (n) {
		ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		n -= (uint64_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* 1 if the shard equals the file's bytes, 0 if not, -1 if not checkable. */
static int verify_shard(const rl_ckpt *ck, const rl_shard_info *si, const uint8_t *got)
{
	rl_tensor_info ti;
	long t = rl_ckpt_find(ck, si->name);
	unsigned bits = rl_dtype_bits(si->dtype);
	uint64_t rows = 1, row_bits, row_bytes, span_lo, span_hi, pos = 0;
	uint64_t idx[RL_MAX_DIMS] = { 0 };
	uint8_t *buf;
	int fd, ok = 1;
	unsigned nd = si->ndim;

	if (t < 0 || rl_ckpt_tensor(ck, (size_t)t, &ti) < 0 || ti.ndim != nd || ti.dtype != si->dtype)
		return -1;
	for (unsigned i = 0; i < nd; i++)
		if (ti.shape[i] != si->shape[i])
			return -1;
	if (si->nbytes == 0)
		return 1;
	/* Rows along the last dimension; byte offsets from element bits. */
	row_bits = nd ? (si->stop[nd - 1] - si->start[nd - 1]) * bits : bits;
	if (row_bits % 8)
		return -1;
	row_bytes = row_bits / 8;
	for (unsigned i = 0; i + 1 < nd; i++)
		rows *= si->stop[i] - si->start[i];
	span_lo = ti.offset;
	span_hi = ti.offset + ti.nbytes;
	buf = malloc(row_bytes ? row_bytes : 1);
	fd = open(rl_ckpt_file_path(ck, ti.file), O_RDONLY | O_CLOEXEC);
	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (unsigned i = 0; i + 1 < nd; i++)
		idx[i] = si->start[i];
	for (uint64_t r = 0; r < rows && ok; r++) {
		uint64_t lin = 0, off_bits;

		for (unsigned i = 0; i + 1 < nd; i++)
			lin = lin * ti.shape[i] + idx[i];
		lin = nd ? lin * ti.shape[nd - 1] + si->start[nd - 1] : 0;
		off_bits = lin * bits;
		if (off_bits % 8 || span_lo + off_bits / 8 + row_bytes > span_hi ||
		    pread_all(fd, buf, row_bytes, span_lo + off_bits / 8) < 0 ||
		    memcmp(buf, got + pos, row_bytes))
			ok = 0;
		pos += row_bytes;
		/* next index of the outer dimensions, row-major */
		for (int i = (int)nd - 2; i >= 0; i--) {
			if (++idx[i] < si->stop[i])
				break;
			idx[i] = si->start[i];
		}
	}
	close(fd);
	free(buf);
	return ok && pos == si->nbytes;
}

static int verify_all(const rl_ckpt *ck, const rl_plan *plan, const rl_loader *ld)
{
	size_t nsh = rl_plan_num_shards(plan), good = 0, skipped = 0, bad = 0;

	for (size_t s = 0; s < nsh; s++) {
		rl_shard_info si;
		uint8_t *base;
		int v;

		rl_plan_shard(plan, s, &si);
		base = rl_loader_staging(ld, si.device, NULL);
		v = si.nbytes && !base ? 0 : verify_shard(ck, &si, base ? base + si.offset : NULL);
		if (v < 0) {
			skipped++;
		} else if (v == 0) {
			if (!bad)
				fprintf(stderr, "ringload load: verify: shard %zu (%s on device %u) differs from the file\n",
					s, si.name, si.device);
			bad++;
		} else {
			good++;
		}
	}
	fprintf(stderr, "verify: %zu shards match the file, %zu differ, %zu not checkable (assembled targets)\n",
		good, bad, skipped);
	return bad ? -1 : 0;
}

/* ------------------------------------------------------------------ */

static int set_opts(rl_loader *ld, const struct load_args *a)
{
	int ret = 0;

	if (a->backend) {
		static const char *const names[] = { "auto", "io_uring", "libaio", "pread" };
		int b = -1;

		for (int i = 0; i < 4; i++)
			if (!strcmp(a->backend, names[i]))
				b = i;
		if (b < 0) {
			fprintf(stderr, "ringload load: unknown backend '%s'\n", a->backend);
			return -1;
		}
		ret = rl_loader_set(ld, RL_OPT_BACKEND, b);
	}
	if (!ret && a->queue_depth >= 0)
		ret = rl_loader_set(ld, RL_OPT_QUEUE_DEPTH, a->queue_depth);
	if (!ret && a->request_bytes >= 0)
		ret = rl_loader_set(ld, RL_OPT_REQUEST_BYTES, a->request_bytes);
	if (!ret && a->inflight_bytes >= 0)
		ret = rl_loader_set(ld, RL_OPT_INFLIGHT_BYTES, a->inflight_bytes);
	if (!ret && a->workers >= 0)
		ret = rl_loader_set(ld, RL_OPT_WORKERS, a->workers);
	if (!ret && a->no_direct)
		ret = rl_loader_set(ld, RL_OPT_DIRECT, 0);
	if (!ret && a->caller_staging)
		ret = rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_CALLER);
	if (ret < 0) {
		fprintf(stderr, "ringload load: %s\n", rl_loader_errmsg(ld));
		return -1;
	}
	return 0;
}

/* --staging caller: this program maps each device's area itself, as a
 * runtime would with memory registered with its GPU driver. */
static int caller_staging(rl_loader *ld, const rl_plan *plan, void ***areas, size_t **lens)
{
	unsigned n = rl_plan_num_devices(plan);

	*areas = calloc(n ? n : 1, sizeof(void *));
	*lens = calloc(n ? n : 1, sizeof(size_t));
	if (!*areas || !*lens)
		return -1;
	for (unsigned d = 0; d < n; d++) {
		rl_device_info di;
		size_t len;
		void *p;

		rl_plan_device(plan, d, &di);
		len = di.staging_bytes ? (size_t)di.staging_bytes : 4096;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "ringload load: cannot map %zu bytes of staging\n", len);
			return -1;
		}
		(*areas)[d] = p;
		(*lens)[d] = len;
		if (rl_loader_set_staging(ld, d, p, len) < 0) {
			fprintf(stderr, "ringload load: %s\n", rl_loader_errmsg(ld));
			return -1;
		}
	}
	return 0;
}

int cmd_load(int argc, char **argv)
{
	struct load_args a;
	struct bar bar = { 0, 0 };
	rl_ckpt *ck = NULL;
	rl_spec *spec = NULL;
	rl_plan *plan = NULL;
	rl_loader *ld = NULL;
	rl_load_stats st;
	void **areas = NULL;
	size_t *lens = NULL;
	unsigned ndev = 0;
	double t0 = now_s(), t_plan, t_end;
	int ret, rc = 1;

	if (parse_args(argc, argv, &a) < 0) {
		load_usage(stderr);
		return 2;
	}
	ck = rl_ckpt_create();
	ld = rl_loader_create();
	plan = rl_plan_create();
	if (!ck || !ld || !plan) {
		fprintf(stderr, "ringload load: out of memory\n");
		goto out;
	}
	if (set_opts(ld, &a) < 0) {
		rc = 2;
		goto out;
	}
	ret = rl_ckpt_open(ck, a.path);
	if (ret < 0) {
		fprintf(stderr, "ringload load: %s\n", rl_ckpt_errmsg(ck));
		goto out;
	}
	if (a.sharding) {
		spec = rl_spec_create();
		if (!spec) {
			fprintf(stderr, "ringload load: out of memory\n");
			goto out;
		}
		ret = rl_spec_load(spec, a.sharding);
		if (ret < 0) {
			/* the message names the file, as `ringload plan` prints it */
			if (*rl_spec_errmsg(spec))
				fprintf(stderr, "ringload load: %s\n", rl_spec_errmsg(spec));
			else
				fprintf(stderr, "ringload load: %s: %s\n", a.sharding,
					rl_strerror(ret));
			goto out;
		}
	}
	ret = rl_plan_set(plan, RL_PLAN_PROCESS, a.process);
	if (!ret) {
		/* the loader's request size (RL_OPT_REQUEST_BYTES, or sized to
		 * the devices under the checkpoint) */
		int64_t chunk = a.request_bytes >= 0 ? a.request_bytes :
				rl_loader_request_bytes(ld, ck);

		if (a.inflight_bytes >= 0 && chunk > a.inflight_bytes)
			chunk = a.inflight_bytes;
		ret = rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, chunk);
	}
	/* Only this process's statistics: the others are not needed here. */
	if (!ret)
		ret = rl_plan_set(plan, RL_PLAN_ALL_STATS, 0);
	if (!ret)
		ret = rl_plan_build(plan, ck, spec);
	if (ret < 0) {
		fprintf(stderr, "ringload load: %s\n", rl_plan_errmsg(plan));
		goto out;
	}
	t_plan = now_s();
	ndev = rl_plan_num_devices(plan);
	if (a.out && check_out(a.out, plan) < 0)
		goto out;
	if (a.caller_staging && caller_staging(ld, plan, &areas, &lens) < 0)
		goto out;
	if (!a.quiet && isatty(STDERR_FILENO))
		rl_loader_set_callbacks(ld, NULL, show_progress, &bar);
	ret = rl_loader_run(ld, plan);
	if (bar.shown)
		fputc('\n', stderr);
	if (ret < 0) {
		fprintf(stderr, "ringload load: %s\n", rl_loader_errmsg(ld));
		goto out;
	}
	t_end = now_s();
	rl_loader_get_stats(ld, &st);
	/* The summary only once everything asked for succeeded. */
	if (a.out && write_out(a.out, plan, ld) < 0)
		goto out;
	if (a.verify && verify_all(ck, plan, ld) < 0)
		goto out;
	printf("%" PRIu64 " bytes in %.3f s (%.2f GB/s), backend %s, %zu shards on %u device%s%s%s\n",
	       st.bytes_read, t_end - t0, st.bytes_read / (t_end - t0) / 1e9,
	       rl_backend_name(st.backend), rl_plan_num_shards(plan), ndev, ndev == 1 ? "" : "s",
	       st.fallbacks[0] ? "; " : "", st.fallbacks);
	fflush(stdout);
	if (!a.quiet)
		fprintf(stderr,
			"plan %.3f s, read %.3f s (%.2f GB/s), scatter %.3f s; %" PRIu64
			" needed, %" PRIu64 " direct; %" PRIu64 " requests, %" PRIu64
			" retries, qd %u, %u buffers (%u registered), O_DIRECT %s\n",
			t_plan - t0, st.read_seconds, st.gbps, st.scatter_seconds, st.bytes_needed,
			st.bytes_direct, st.requests, st.retries, st.queue_depth, st.buffers,
			st.registered_buffers, st.direct_io ? "yes" : "no");
	rc = 0;
out:
	rl_loader_destroy(ld);
	for (unsigned d = 0; areas && d < ndev; d++)
		if (areas[d])
			munmap(areas[d], lens[d]);
	free(areas);
	free(lens);
	rl_plan_destroy(plan);
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return rc;
}
