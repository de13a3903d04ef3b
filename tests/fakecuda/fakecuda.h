/*
 * fakecuda.h - what a test asks the fake CUDA driver (libcuda.so.1 built
 * from fakecuda.c) through dlsym, besides the driver API itself.
 *
 * Faults, from the environment, read when fakecuda_reset() is called:
 *   FAKECUDA_DEVICES=N      devices (default 2)
 *   FAKECUDA_NO_DEVICE=1    cuInit fails with CUDA_ERROR_NO_DEVICE
 *   FAKECUDA_CTX_FAIL=1     cuDevicePrimaryCtxRetain fails (context error)
 *   FAKECUDA_OOM_AT=N       the Nth cuMemAlloc fails (out of memory)
 *   FAKECUDA_FAIL_COPY_AT=N the Nth async copy fails on its stream: the
 *                           stream's later events report
 *                           CUDA_ERROR_LAUNCH_FAILED, as a real fault does
 *   FAKECUDA_DELAY_US=N     each copy waits N us on its stream's thread
 *                           before it reads its source (default 300)
 *   FAKECUDA_FAIL_RECORD_AT=N the Nth cuEventRecord fails with
 *                           CUDA_ERROR_INVALID_HANDLE (nothing queued)
 *   FAKECUDA_NO_DATA=1      device memory is reserved, never touched, and
 *                           copies are checked and counted but move no
 *                           byte: lengths past 4 GiB without the memory
 *   FAKECUDA_FAIL_COPY_ERR=CODE the failing copy's error (default 719,
 *                           CUDA_ERROR_LAUNCH_FAILED; 700 ILLEGAL_ADDRESS):
 *                           sticky, as the driver's: every later call in
 *                           that device's context returns it (until reset)
 *   FAKECUDA_PUSH_FAIL_AT=N the Nth cuCtxPushCurrent fails
 *                           (CUDA_ERROR_INVALID_CONTEXT), the stack kept
 *   FAKECUDA_MAX_PITCH=N    CU_DEVICE_ATTRIBUTE_MAX_PITCH (default 2^31-1);
 *                           cuMemcpy2DAsync refuses larger pitches
 *   FAKECUDA_REGISTER_FAIL=CODE cuMemHostRegister fails with CODE (801:
 *                           CUDA_ERROR_NOT_SUPPORTED)
 *   FAKECUDA_HOSTALLOC_FAIL=1 cuMemHostAlloc fails (out of memory)
 *   FAKECUDA_MEM_FREE=N     bytes of each device (default 64 GiB):
 *                           cuMemGetInfo's free is N less what is allocated,
 *                           and cuMemAlloc fails past it
 *   FAKECUDA_REPORT=PATH    at exit, the stats as "allocs N events N ..."
 *                           in PATH (what a process such as the CLI left;
 *                           pinned counts cuMemHostAlloc memory too)
 *
 * Contexts are a stack per thread, as the driver's: a pop makes the
 * context below current again; a pop of an empty stack is refused and
 * counted (unbalanced). The NULL stream is one legacy stream. The stream
 * calls (copy, record, wait, sync) are logged: fakecuda_log.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

struct fakecuda_stats {
	long allocs;          /* device allocations alive */
	long streams;         /* streams alive */
	long events;          /* events alive */
	long ctx_refs;        /* primary context references held */
	long registered;      /* host regions registered */
	long inflight;        /* copies and event records not yet run */
	long copies, copies_2d;
	long out_of_bounds;   /* copies outside their allocation (refused) */
	long unpinned;        /* async copies from host memory not registered */
	long no_context;      /* calls made without a current context */
	unsigned long long bytes_copied; /* by the copies queued */
	unsigned long long pinned_bytes; /* of the host regions registered */
	long unbalanced;      /* cuCtxPopCurrent on an empty stack */
	long host_allocs;     /* cuMemHostAlloc memory alive */
};

typedef void (*fakecuda_reset_fn)(void);
typedef void (*fakecuda_stats_fn)(struct fakecuda_stats *st);
/* The host address of device memory p (device memory is host memory). */
typedef void *(*fakecuda_host_fn)(unsigned long long p);
/* The call log since the last reset, one call a line: "copy S",
 * "record E S", "wait S E" (cuStreamWaitEvent), "sync S", handles as %p
 * (the NULL stream "(nil)"); copied into buf (cap bytes), its length
 * returned. */
typedef size_t (*fakecuda_log_fn)(char *buf, size_t cap);

/*
 * Opens the fake driver beside the running test program
 * (build/tests/fakecuda/libcuda.so.1, dlopen RTLD_LOCAL) and leaves its
 * path in path (cap bytes, at least 64); NULL when it is not there.
 */
static inline void *fakecuda_open(char *path, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", path, cap - 32);

	if (n <= 0)
		return NULL;
	path[n] = '\0';
	strcpy(strrchr(path, '/') + 1, "fakecuda/libcuda.so.1");
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

#endif /* FAKECUDA_H */
