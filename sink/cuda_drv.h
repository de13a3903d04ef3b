/*
 * cuda_drv.h - the CUDA driver API entry points ringload uses, resolved
 * with dlopen("libcuda.so.1") at first use: no link-time CUDA
 * dependency, and the library builds and runs where there is no GPU.
 *
 * The types are declared here (the build works without the toolkit);
 * where the toolkit's cuda.h is installed, cuda_drv.c is compiled
 * against it and checks at compile time that every type, constant and
 * prototype here matches it.
 */
#ifndef SINK_CUDA_DRV_H
#define SINK_CUDA_DRV_H

#include <stddef.h>

#include "common.h"

/* cuda.h's handle types keep their struct tags, so pointers to them are
 * the same types in both declarations. */
typedef int rlcu_result;                  /* CUresult */
typedef int rlcu_device;                  /* CUdevice */
typedef unsigned long long rlcu_dptr;     /* CUdeviceptr */
typedef struct CUctx_st *rlcu_ctx;        /* CUcontext */
typedef struct CUstream_st *rlcu_stream;  /* CUstream */
typedef struct CUevent_st *rlcu_event;    /* CUevent */

#define RLCU_SUCCESS 0
#define RLCU_ERROR_INVALID_VALUE 1
#define RLCU_ERROR_OUT_OF_MEMORY 2
#define RLCU_ERROR_NO_DEVICE 100
#define RLCU_ERROR_INVALID_DEVICE 101
#define RLCU_ERROR_NOT_READY 600
#define RLCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define RLCU_DEVICE_ATTRIBUTE_MAX_PITCH 11
#define RLCU_MEMHOSTALLOC_PORTABLE 1
#define RLCU_MEMORYTYPE_HOST 1
#define RLCU_MEMORYTYPE_DEVICE 2
#define RLCU_STREAM_NON_BLOCKING 1
#define RLCU_EVENT_DISABLE_TIMING 2
#define RLCU_MEMHOSTREGISTER_PORTABLE 1

/* CUDA_MEMCPY2D (the _v2 layout). */
struct rlcu_memcpy2d {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	rlcu_dptr srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	rlcu_dptr dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes;
	size_t Height;
};

/* The entry points, by their names in cuda.h; the driver's exported
 * symbol (a _v2 one where cuda.h maps to it) is in cuda_drv.c. */
struct rlcu_api {
	rlcu_result (*Init)(unsigned flags);
	rlcu_result (*DeviceGetCount)(int *n);
	rlcu_result (*DeviceGet)(rlcu_device *dev, int ordinal);
	rlcu_result (*DevicePrimaryCtxRetain)(rlcu_ctx *ctx, rlcu_device dev);
	rlcu_result (*DevicePrimaryCtxRelease)(rlcu_device dev);
	rlcu_result (*CtxPushCurrent)(rlcu_ctx ctx);
	rlcu_result (*CtxPopCurrent)(rlcu_ctx *ctx);
	rlcu_result (*StreamCreate)(rlcu_stream *s, unsigned flags);
	rlcu_result (*StreamDestroy)(rlcu_stream s);
	rlcu_result (*StreamSynchronize)(rlcu_stream s);
	rlcu_result (*EventCreate)(rlcu_event *e, unsigned flags);
	rlcu_result (*EventDestroy)(rlcu_event e);
	rlcu_result (*EventRecord)(rlcu_event e, rlcu_stream s);
	rlcu_result (*EventQuery)(rlcu_event e);
	rlcu_result (*EventSynchronize)(rlcu_event e);
	rlcu_result (*MemAlloc)(rlcu_dptr *p, size_t bytes);
	rlcu_result (*MemFree)(rlcu_dptr p);
	rlcu_result (*MemHostRegister)(void *p, size_t bytes, unsigned flags);
	rlcu_result (*MemHostUnregister)(void *p);
	rlcu_result (*MemcpyHtoDAsync)(rlcu_dptr dst, const void *src, size_t bytes, rlcu_stream s);
	rlcu_result (*Memcpy2DAsync)(const struct rlcu_memcpy2d *c, rlcu_stream s);
	rlcu_result (*MemcpyDtoH)(void *dst, rlcu_dptr src, size_t bytes);
	rlcu_result (*GetErrorName)(rlcu_result r, const char **name);
	rlcu_result (*StreamWaitEvent)(rlcu_stream s, rlcu_event e, unsigned flags);
	rlcu_result (*CtxSynchronize)(void);
	rlcu_result (*MemHostAlloc)(void **p, size_t bytes, unsigned flags);
	rlcu_result (*MemFreeHost)(void *p);
	rlcu_result (*MemGetInfo)(size_t *free, size_t *total);
	rlcu_result (*DeviceGetAttribute)(int *v, int attr, rlcu_device dev);
};

/*
 * The driver, loaded and initialized (cuInit) once per process; the
 * library is never unloaded. Returns NULL with a one-line reason in e
 * (RL_E_CUDA_DRIVER) when libcuda.so.1 cannot be loaded, lacks an entry
 * point, or cuInit fails. The environment variable RL_LIBCUDA names
 * another file to load (a test's fake driver). A failure is not
 * remembered: a later call tries again.
 */
const struct rlcu_api *rlcu_load(struct cm_err *e);

/* RL_E_CUDA_DRIVER with e set when this process is a child forked after
 * the driver was initialized (the driver's state does not survive
 * fork()), else 0. */
int rlcu_forked(struct cm_err *e);

/* "CUDA_ERROR_OUT_OF_MEMORY (2)": the driver's name for r, for messages. */
const char *rlcu_name(const struct rlcu_api *cu, rlcu_result r, char *buf, size_t len);

#endif /* SINK_CUDA_DRV_H */
