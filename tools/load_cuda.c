/*
 * load_cuda.c - `ringload load --device KIND[:N]`: the load streams into
 * device memory through the library's sink of that kind (cuda: the CUDA
 * sink, docs/cuda.md; the kinds are the library's, rl_device_kind_at); --verify
 * reads each GPU's area back in turn and compares it with the file;
 * the summary adds the device and the peak host memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "load_args.h"
#include "load_cuda.h"
#include "opts.h"

#define MAX_ORDINAL 1023

/* The kind of dev, "KIND" or "KIND:N" with KIND one of the library's
 * (rl_device_kind_at), into kind (cap bytes); N, -1 when none, -2 when
 * dev is neither. */
static int device_ordinal(const char *dev, char *kind, size_t cap)
{
	size_t len = strcspn(dev, ":");
	const char *k = NULL;
	char *end;
	long n;

	for (size_t i = 0; (k = rl_device_kind_at(i)); i++)
		if (strlen(k) == len && !strncmp(dev, k, len))
			break;
	if (!k || len >= cap)
		return -2;
	snprintf(kind, cap, "%s", k);
	if (!dev[len])
		return -1;
	if (dev[len + 1] < '0' || dev[len + 1] > '9')
		return -2;
	errno = 0;
	n = strtol(dev + len + 1, &end, 10);
	return *end || errno || n > MAX_ORDINAL ? -2 : (int)n;
}

/* The library's device kinds, ", "-separated, for messages. */
static const char *device_kinds(void)
{
	static char out[256];
	size_t n = 0;
	const char *k;

	out[0] = '\0';
	for (size_t i = 0; (k = rl_device_kind_at(i)) && n < sizeof(out); i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", i ? ", " : "", k);
	return out;
}

/* Parses "0,0,1" into map (cap entries); the count, or -1. */
static int parse_map(const char *s, int32_t *map, int cap)
{
	int n = 0;

	while (*s) {
		char *end;
		long v;

		if (*s < '0' || *s > '9' || n == cap)
			return -1;
		errno = 0;
		v = strtol(s, &end, 10);
		if (errno || v > MAX_ORDINAL || (*end && *end != ','))
			return -1;
		map[n++] = (int32_t)v;
		s = *end ? end + 1 : end;
		if (*end && !*s)
			return -1; /* a trailing comma */
	}
	return n ? n : -1;
}

int load_cuda_rules(struct load_args *a, const char *prog)
{
	const char *with = a->out ? "--out" : a->staging >= 0 ? "--staging" : NULL;
	int32_t map[MAX_ORDINAL + 1];
	char kind[64];

	if (!a->device) {
		fprintf(stderr, "%s: --device-map needs --device KIND\n", prog);
		return OPTS_USAGE;
	}
	if (device_ordinal(a->device, kind, sizeof(kind)) == -2) {
		fprintf(stderr, "%s: --device %s: expected KIND or KIND:N (N an ordinal; this "
			"library's kinds: %s)\n", prog, a->device, device_kinds());
		return OPTS_USAGE;
	}
	if (a->device_map && device_ordinal(a->device, kind, sizeof(kind)) >= 0) {
		fprintf(stderr, "%s: --device %s puts every device on one GPU: not with --device-map\n",
			prog, a->device);
		return OPTS_USAGE;
	}
	if (a->device_map && parse_map(a->device_map, map, MAX_ORDINAL + 1) < 0) {
		fprintf(stderr, "%s: --device-map %s: expected GPU ordinals separated by commas, "
			"one per spec device (e.g. 0,0,1,1)\n", prog, a->device_map);
		return OPTS_USAGE;
	}
	if (with) {
		fprintf(stderr, "%s: --device loads into GPU memory: not with %s\n", prog, with);
		return OPTS_USAGE;
	}
	/* Streaming: the library's budget for a CUDA loader unless given
	 * (rl_loader_budget). */
	if (a->staging_budget < 0)
		a->staging_budget = 0;
	return OPTS_OK;
}

int load_cuda_setup(rl_loader *ld, const rl_plan *plan, const struct load_args *a,
		    const char *prog)
{
	int32_t map[MAX_ORDINAL + 1];
	char kind[64];
	int one = device_ordinal(a->device, kind, sizeof(kind)), ret;

	(void)plan;
	if (a->device_map) /* spec device d on map[d] */
		ret = rl_loader_set_device(ld, kind, map,
					   (uint32_t)parse_map(a->device_map, map, MAX_ORDINAL + 1), 0);
	else if (one >= 0) /* every spec device, whatever its id, on `one` */
		ret = rl_loader_set_device(ld, kind, &(int32_t){ one }, 1, RL_DEVICE_ONE);
	else /* identity */
		ret = rl_loader_set_device(ld, kind, NULL, 0, 0);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", prog, rl_loader_errmsg(ld));
		return -1;
	}
	return 0;
}

/* verify_areas' view of the GPUs: device d's shards, read back (one
 * device held) and laid out at their staging offsets, as verify_areas
 * reads them (on the GPU each is at its own 256-aligned place). */
struct readback {
	rl_loader *ld;
	const rl_plan *plan;
	uint8_t *buf;
	unsigned dev;
	int err;
};

static int read_shards(struct readback *rb, unsigned dev, uint64_t area)
{
	for (size_t s = 0; s < rl_plan_num_shards(rb->plan); s++) {
		rl_shard_info si;
		uint64_t ptr;

		if (rl_plan_shard(rb->plan, s, &si) < 0)
			return -1;
		if (si.device != dev || !si.nbytes)
			continue;
		if (rl_loader_device_shard(rb->ld, s, &ptr) < 0 ||
		    rl_loader_device_read_back(rb->ld, dev, ptr - area, rb->buf + si.offset,
					     (size_t)si.nbytes) < 0)
			return -1;
	}
	return 0;
}

static const uint8_t *gpu_area(void *user, unsigned dev)
{
	struct readback *rb = user;
	rl_device_info di;
	uint64_t area, bytes;

	if (rb->buf && rb->dev == dev)
		return rb->buf;
	free(rb->buf);
	rb->buf = NULL;
	if (rl_plan_device(rb->plan, dev, &di) < 0 ||
	    rl_loader_device_area(rb->ld, dev, &area, &bytes) < 0 ||
	    !(rb->buf = malloc(di.staging_bytes ? di.staging_bytes : 1)) ||
	    read_shards(rb, dev, area) < 0) {
		rb->err = 1;
		return NULL;
	}
	rb->dev = dev;
	return rb->buf;
}

int load_cuda_verify(const rl_ckpt *ck, const rl_plan *plan, rl_loader *ld,
		     struct verify_counts *c, int (*fn)(void *user, uint64_t done, uint64_t total),
		     void *user, const char *prog)
{
	struct readback rb = { ld, plan, NULL, 0, 0 };
	int ret = verify_areas(ck, plan, gpu_area, &rb, c, fn, user);

	free(rb.buf);
	if (rb.err) {
		fprintf(stderr, "%s: --verify: %s\n", prog,
			*rl_loader_errmsg(ld) ? rl_loader_errmsg(ld) : "out of memory");
		return -1;
	}
	return ret;
}

uint64_t load_peak_host_bytes(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}
