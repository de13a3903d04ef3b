/*
 * cuda_drv.c - the CUDA driver, loaded with dlopen at first use (see
 * cuda_drv.h). Where the toolkit's cuda.h is installed (the Makefile
 * defines RL_HAVE_CUDA_H), this file is compiled against it too and
 * checks that cuda_drv.h declares the same layouts, values and
 * prototypes, so a driver ABI the declarations miss fails the build.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_drv.h"

#ifdef RL_HAVE_CUDA_H
#include <cuda.h>

#define SAME_TYPE(a, b) __builtin_types_compatible_p(a, b)
#define SAME_FIELD(f) \
	_Static_assert(offsetof(CUDA_MEMCPY2D, f) == offsetof(struct rlcu_memcpy2d, f) && \
		       sizeof(((CUDA_MEMCPY2D *)0)->f) == sizeof(((struct rlcu_memcpy2d *)0)->f), \
		       "CUDA_MEMCPY2D." #f)
_Static_assert(sizeof(CUresult) == sizeof(rlcu_result), "CUresult");
_Static_assert(SAME_TYPE(CUdevice, rlcu_device), "CUdevice");
_Static_assert(SAME_TYPE(CUdeviceptr, rlcu_dptr), "CUdeviceptr");
_Static_assert(SAME_TYPE(CUcontext, rlcu_ctx), "CUcontext");
_Static_assert(SAME_TYPE(CUstream, rlcu_stream), "CUstream");
_Static_assert(SAME_TYPE(CUevent, rlcu_event), "CUevent");
_Static_assert(CUDA_SUCCESS == RLCU_SUCCESS && CUDA_ERROR_INVALID_VALUE == RLCU_ERROR_INVALID_VALUE &&
	       CUDA_ERROR_OUT_OF_MEMORY == RLCU_ERROR_OUT_OF_MEMORY &&
	       CUDA_ERROR_NO_DEVICE == RLCU_ERROR_NO_DEVICE &&
	       CUDA_ERROR_INVALID_DEVICE == RLCU_ERROR_INVALID_DEVICE &&
	       CUDA_ERROR_NOT_READY == RLCU_ERROR_NOT_READY &&
	       CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == RLCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	       "CUresult values");
_Static_assert(CU_MEMORYTYPE_HOST == RLCU_MEMORYTYPE_HOST &&
	       CU_MEMORYTYPE_DEVICE == RLCU_MEMORYTYPE_DEVICE &&
	       CU_STREAM_NON_BLOCKING == RLCU_STREAM_NON_BLOCKING &&
	       CU_EVENT_DISABLE_TIMING == RLCU_EVENT_DISABLE_TIMING &&
	       CU_MEMHOSTREGISTER_PORTABLE == RLCU_MEMHOSTREGISTER_PORTABLE &&
	       CU_MEMHOSTALLOC_PORTABLE == RLCU_MEMHOSTALLOC_PORTABLE &&
	       CU_DEVICE_ATTRIBUTE_MAX_PITCH == RLCU_DEVICE_ATTRIBUTE_MAX_PITCH, "flag values");
_Static_assert(sizeof(CUDA_MEMCPY2D) == sizeof(struct rlcu_memcpy2d), "CUDA_MEMCPY2D");
SAME_FIELD(srcXInBytes); SAME_FIELD(srcY); SAME_FIELD(srcMemoryType); SAME_FIELD(srcHost);
SAME_FIELD(srcDevice); SAME_FIELD(srcArray); SAME_FIELD(srcPitch); SAME_FIELD(dstXInBytes);
SAME_FIELD(dstY); SAME_FIELD(dstMemoryType); SAME_FIELD(dstHost); SAME_FIELD(dstDevice);
SAME_FIELD(dstArray); SAME_FIELD(dstPitch); SAME_FIELD(WidthInBytes); SAME_FIELD(Height);
/* A prototype matches when cuda.h's and ours both have the parameters
 * listed here (whose types are checked above) and results of CUresult's
 * size (an enum in cuda.h, an int here). */
#define SAME_PROTO(ours, cuda_fn) \
	_Static_assert(SAME_TYPE(__typeof__(((struct rlcu_api *)0)->ours), \
				 rlcu_result (*)(RLCU_PARAMS_##ours)) && \
		       SAME_TYPE(__typeof__(&cuda_fn), CUresult (*)(RLCU_PARAMS_##ours)), \
		       "prototype of " #cuda_fn)
#define RLCU_PARAMS_Init unsigned int
#define RLCU_PARAMS_DeviceGetCount int *
#define RLCU_PARAMS_DeviceGet CUdevice *, int
#define RLCU_PARAMS_DevicePrimaryCtxRetain CUcontext *, CUdevice
#define RLCU_PARAMS_DevicePrimaryCtxRelease CUdevice
#define RLCU_PARAMS_CtxPushCurrent CUcontext
#define RLCU_PARAMS_CtxPopCurrent CUcontext *
#define RLCU_PARAMS_StreamCreate CUstream *, unsigned int
#define RLCU_PARAMS_StreamDestroy CUstream
#define RLCU_PARAMS_StreamSynchronize CUstream
#define RLCU_PARAMS_EventCreate CUevent *, unsigned int
#define RLCU_PARAMS_EventDestroy CUevent
#define RLCU_PARAMS_EventRecord CUevent, CUstream
#define RLCU_PARAMS_EventQuery CUevent
#define RLCU_PARAMS_EventSynchronize CUevent
#define RLCU_PARAMS_MemAlloc CUdeviceptr *, size_t
#define RLCU_PARAMS_MemFree CUdeviceptr
#define RLCU_PARAMS_MemHostRegister void *, size_t, unsigned int
#define RLCU_PARAMS_MemHostUnregister void *
#define RLCU_PARAMS_MemcpyHtoDAsync CUdeviceptr, const void *, size_t, CUstream
#define RLCU_PARAMS_MemcpyDtoH void *, CUdeviceptr, size_t
#define RLCU_PARAMS_StreamWaitEvent CUstream, CUevent, unsigned int
#define RLCU_PARAMS_CtxSynchronize void
#define RLCU_PARAMS_MemHostAlloc void **, size_t, unsigned int
#define RLCU_PARAMS_MemFreeHost void *
#define RLCU_PARAMS_MemGetInfo size_t *, size_t *
SAME_PROTO(Init, cuInit);
SAME_PROTO(DeviceGetCount, cuDeviceGetCount);
SAME_PROTO(DeviceGet, cuDeviceGet);
SAME_PROTO(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
SAME_PROTO(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
SAME_PROTO(CtxPushCurrent, cuCtxPushCurrent_v2);
SAME_PROTO(CtxPopCurrent, cuCtxPopCurrent_v2);
SAME_PROTO(StreamCreate, cuStreamCreate);
SAME_PROTO(StreamDestroy, cuStreamDestroy_v2);
SAME_PROTO(StreamSynchronize, cuStreamSynchronize);
SAME_PROTO(EventCreate, cuEventCreate);
SAME_PROTO(EventDestroy, cuEventDestroy_v2);
SAME_PROTO(EventRecord, cuEventRecord);
SAME_PROTO(EventQuery, cuEventQuery);
SAME_PROTO(EventSynchronize, cuEventSynchronize);
SAME_PROTO(MemAlloc, cuMemAlloc_v2);
SAME_PROTO(MemFree, cuMemFree_v2);
SAME_PROTO(MemHostRegister, cuMemHostRegister_v2);
SAME_PROTO(MemHostUnregister, cuMemHostUnregister);
SAME_PROTO(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2);
/* Its struct is checked field by field above. */
_Static_assert(SAME_TYPE(__typeof__(&cuMemcpy2DAsync_v2), CUresult (*)(const CUDA_MEMCPY2D *, CUstream)) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->Memcpy2DAsync),
			 rlcu_result (*)(const struct rlcu_memcpy2d *, rlcu_stream)),
	       "prototype of cuMemcpy2DAsync_v2");
SAME_PROTO(MemcpyDtoH, cuMemcpyDtoH_v2);
SAME_PROTO(StreamWaitEvent, cuStreamWaitEvent);
SAME_PROTO(CtxSynchronize, cuCtxSynchronize);
SAME_PROTO(MemHostAlloc, cuMemHostAlloc);
SAME_PROTO(MemFreeHost, cuMemFreeHost);
SAME_PROTO(MemGetInfo, cuMemGetInfo_v2);
/* CUdevice_attribute is an enum in cuda.h, an int here (same size). */
_Static_assert(sizeof(CUdevice_attribute) == sizeof(int) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->DeviceGetAttribute),
			 rlcu_result (*)(int *, int, rlcu_device)) &&
	       SAME_TYPE(__typeof__(&cuDeviceGetAttribute),
			 CUresult (*)(int *, CUdevice_attribute, CUdevice)),
	       "prototype of cuDeviceGetAttribute");
_Static_assert(SAME_TYPE(__typeof__(&cuGetErrorName), CUresult (*)(CUresult, const char **)) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->GetErrorName),
			 rlcu_result (*)(rlcu_result, const char **)),
	       "prototype of cuGetErrorName");
#endif /* RL_HAVE_CUDA_H */

/* The exported symbol of each entry point: the _v2 one where cuda.h maps
 * the name to it (the driver keeps the old one for old binaries). */
#define ENTRY(f, sym) { offsetof(struct rlcu_api, f), sym }
static const struct { size_t off; const char *sym; } entries[] = {
	ENTRY(Init, "cuInit"),
	ENTRY(DeviceGetCount, "cuDeviceGetCount"),
	ENTRY(DeviceGet, "cuDeviceGet"),
	ENTRY(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	ENTRY(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
	ENTRY(CtxPushCurrent, "cuCtxPushCurrent_v2"),
	ENTRY(CtxPopCurrent, "cuCtxPopCurrent_v2"),
	ENTRY(StreamCreate, "cuStreamCreate"),
	ENTRY(StreamDestroy, "cuStreamDestroy_v2"),
	ENTRY(StreamSynchronize, "cuStreamSynchronize"),
	ENTRY(EventCreate, "cuEventCreate"),
	ENTRY(EventDestroy, "cuEventDestroy_v2"),
	ENTRY(EventRecord, "cuEventRecord"),
	ENTRY(EventQuery, "cuEventQuery"),
	ENTRY(EventSynchronize, "cuEventSynchronize"),
	ENTRY(MemAlloc, "cuMemAlloc_v2"),
	ENTRY(MemFree, "cuMemFree_v2"),
	ENTRY(MemHostRegister, "cuMemHostRegister_v2"),
	ENTRY(MemHostUnregister, "cuMemHostUnregister"),
	ENTRY(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	ENTRY(Memcpy2DAsync, "cuMemcpy2DAsync_v2"),
	ENTRY(MemcpyDtoH, "cuMemcpyDtoH_v2"),
	ENTRY(GetErrorName, "cuGetErrorName"),
	ENTRY(StreamWaitEvent, "cuStreamWaitEvent"),
	ENTRY(CtxSynchronize, "cuCtxSynchronize"),
	ENTRY(MemHostAlloc, "cuMemHostAlloc"),
	ENTRY(MemFreeHost, "cuMemFreeHost"),
	ENTRY(MemGetInfo, "cuMemGetInfo_v2"),
	ENTRY(DeviceGetAttribute, "cuDeviceGetAttribute"),
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER; /* api, loaded */
static struct rlcu_api api;
static int loaded;

/* Resolves every entry point of h into a; 0, or -1 naming the missing one. */
static int resolve(void *h, struct rlcu_api *a, const char *file, struct cm_err *e)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(entries); i++) {
		void *f = dlsym(h, entries[i].sym);

		if (!f)
			return cm_err_set(e, RL_E_CUDA_DRIVER,
					  "CUDA driver %s lacks %s (a driver older than CUDA 4.0?)",
					  file, entries[i].sym);
		memcpy((char *)a + entries[i].off, &f, sizeof(f));
	}
	return 0;
}

const struct rlcu_api *rlcu_load(struct cm_err *e)
{
	const char *file = getenv("RL_LIBCUDA");
	struct rlcu_api a;
	char name[96];
	void *h;
	int r;

	if (!file || !*file)
		file = "libcuda.so.1";
	pthread_mutex_lock(&load_lock);
	if (loaded) {
		pthread_mutex_unlock(&load_lock);
		return &api;
	}
	h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();

		cm_err_set(e, RL_E_CUDA_DRIVER, "no CUDA driver: cannot load %s: %s", file,
			   why ? why : "?");
		pthread_mutex_unlock(&load_lock);
		return NULL;
	}
	if (resolve(h, &a, file, e) < 0) {
		dlclose(h);
		pthread_mutex_unlock(&load_lock);
		return NULL;
	}
	r = a.Init(0);
	if (r != RLCU_SUCCESS) {
		cm_err_set(e, RL_E_CUDA_DRIVER, "CUDA driver %s: cuInit failed: %s", file,
			   rlcu_name(&a, r, name, sizeof(name)));
		pthread_mutex_unlock(&load_lock);
		return NULL; /* kept loaded: the driver may hold state from cuInit */
	}
	api = a;
	loaded = 1;
	pthread_mutex_unlock(&load_lock);
	return &api;
}

const char *rlcu_name(const struct rlcu_api *cu, rlcu_result r, char *buf, size_t len)
{
	const char *n = NULL;

	if (cu->GetErrorName(r, &n) != RLCU_SUCCESS || !n)
		n = "CUDA error";
	snprintf(buf, len, "%s (%d)", n, r);
	return buf;
}
