/*
 * loader_cuda.c - the CUDA names of the public API: thin wrappers over
 * the device kind "cuda" of the registry (api/loader_dev.c,
 * sink/registry.c). Nothing else in api/ names CUDA.
 */
#include <errno.h>
#include <stddef.h>

#include "../sink/dev.h"
#include "loader_internal.h"

/* A device sink's fallback flags (sink/dev.h) are CUDA's public ones;
 * CUDA's one-GPU flag is the registry's RL_DEVICE_ONE. */
_Static_assert(SINK_DEV_FALLBACK_HOST_ALLOC == RL_FALLBACK_CUDA_HOST_ALLOC &&
	       SINK_DEV_FALLBACK_PAGEABLE == RL_FALLBACK_CUDA_PAGEABLE,
	       "a device sink's fallbacks are RL_FALLBACK_*");
_Static_assert(RL_DEVICE_ONE == RL_CUDA_ONE_GPU, "rl_cuda_opts.flags are RL_DEVICE_*");

/* The first version of rl_cuda_opts ended at `flags`. */
#define CUDA_OPTS_V1 offsetof(rl_cuda_opts, flags)

int rl_loader_set_cuda(rl_loader *ld, const rl_cuda_opts *o)
{
	int one;

	if (!ld)
		return -EINVAL;
	if (!o)
		return rl_loader_set_device(ld, NULL, NULL, 0, 0);
	if (o->size < CUDA_OPTS_V1 || (o->ndevs && !o->device_map))
		return cm_err_set(&ld->err, RL_E_INVALID_ARG,
				  "rl_loader_set_cuda: size %u, ndevs %u: a device map needs its entries",
				  o->size, o->ndevs);
	one = o->size >= offsetof(rl_cuda_opts, reserved) && o->flags;
	if (one && ((o->flags & ~RL_CUDA_ONE_GPU) || o->ndevs))
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "rl_loader_set_cuda: flags %#x "
				  "with %u map entries (RL_CUDA_ONE_GPU takes no map)",
				  o->flags, o->ndevs);
	if (one)
		return rl_loader_set_device(ld, "cuda", &o->gpu, 1, RL_DEVICE_ONE);
	return rl_loader_set_device(ld, "cuda", o->device_map, o->ndevs, 0);
}

int rl_loader_set_cuda_dest(rl_loader *ld, size_t shard, uint64_t device_ptr, uint64_t bytes)
{
	return rl_loader_set_device_dest(ld, shard, device_ptr, bytes);
}

int rl_loader_set_cuda_stream(rl_loader *ld, int32_t ordinal, uint64_t stream)
{
	return rl_loader_set_device_stream(ld, ordinal, stream);
}

int rl_loader_cuda_area(rl_loader *ld, uint32_t device, uint64_t *device_ptr, uint64_t *bytes)
{
	return rl_loader_device_area(ld, device, device_ptr, bytes);
}

int rl_loader_cuda_shard(rl_loader *ld, size_t shard, uint64_t *device_ptr)
{
	return rl_loader_device_shard(ld, shard, device_ptr);
}

int rl_loader_cuda_read_back(rl_loader *ld, uint32_t device, uint64_t offset, void *dst, size_t len)
{
	return rl_loader_device_read_back(ld, device, offset, dst, len);
}
