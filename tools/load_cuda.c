/*
 * load_cuda.c - `ringload load --device cuda[:N]`: the load streams into
 * GPU memory through the library's CUDA sink (docs/cuda.md); --verify
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

/* N of "cuda:N", -1 for "cuda", -2 when neither. */
static int device_ordinal(const char *dev)
{
	char *end;
	long n;

	if (!strcmp(dev, "cuda"))
		return -1;
	if (strncmp(dev, "cuda:", 5) || dev[5] < '0' || dev[5] > '9')
		return -2;
	errno = 0;
	n = strtol(dev + 5, &end, 10);
	return *end || errno || n > MAX_ORDINAL ? -2 : (int)n;
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
	const char *with = a->mpi ? "--mpi" : a->out ? "--out" : a->staging >= 0 ? "--staging" :
			   NULL;
	int32_t map[MAX_ORDINAL + 1];

	if (!a->device) {
		fprintf(stderr, "%s: --device-map needs --device cuda\n", prog);
		return OPTS_USAGE;
	}
	if (device_ordinal(a->device) == -2) {
		fprintf(stderr, "%s: --device %s: expected cuda or cuda:N (N a GPU ordinal)\n", prog,
			a->device);
		return OPTS_USAGE;
	}
	if (a->device_map && device_ordinal(a->device) >= 0) {
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
	rl_cuda_opts o = { .size = sizeof(o), .device_map = map };
	int one = device_ordinal(a->device);

	(void)plan;
	if (a->device_map) {
		o.ndevs = (uint32_t)parse_map(a->device_map, map, MAX_ORDINAL + 1);
	} else if (one >= 0) { /* every spec device, whatever its id, on GPU `one` */
		o.device_map = NULL;
		o.flags = RL_CUDA_ONE_GPU;
		o.gpu = one;
	} else {
		o.device_map = NULL; /* identity */
	}
	if (rl_loader_set_cuda(ld, &o) < 0) {
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
		if (rl_loader_cuda_shard(rb->ld, s, &ptr) < 0 ||
		    rl_loader_cuda_read_back(rb->ld, dev, ptr - area, rb->buf + si.offset,
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
	    rl_loader_cuda_area(rb->ld, dev, &area, &bytes) < 0 ||
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
